/* t_vm_stress: BPT_TEST_CONCURRENCY
   Worker threads run VM functions without pause while a controller changes
   trace patterns across sessions and creates and destroys sessions.
   Claims checked:
   - no crash, no use after free (the asan and tsan runs of this test);
   - a call_count pattern that stays on the whole time counts exactly the calls made;
   - a session that stays enabled gets exactly one call message per call
     (delivered + dropped = calls);
   - every hit returns the original word of its own site;
   - after every pattern is removed, no message arrives and every word is the original. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { NFUNCS = 8, NWORKERS = 4 };
#define BP ((bpt_vm_word)0xB00B5)
static bpt_vm_word code[NFUNCS];
static bpt_func *funcs[NFUNCS];
static const char *const names[NFUNCS] = { "always", "f1", "f2", "f3", "g1", "g2", "g3", "h" };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int stop, stop_drainer;                   /* under lock */
static uint64_t calls[NWORKERS][NFUNCS];         /* owned by each worker until joined */
static uint64_t wrong_words[NWORKERS];

static int flag(const int *f) { int v; pthread_mutex_lock(&lock); v = *f; pthread_mutex_unlock(&lock); return v; }
static void set_flag(int *f) { pthread_mutex_lock(&lock); *f = 1; pthread_mutex_unlock(&lock); }

static uint64_t vm_arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { .arg = vm_arg };

/* One call of function i, as a VM's dispatch does it. */
static void vm_call(int w, int i, uint64_t x) {
    uint64_t frame[2] = { x, (uint64_t)w };
    bpt_vm_word word = BPT_VM_FETCH(&code[i]);
    if (word == BP) word = bpt_vm_breakpoint(funcs[i], frame, NULL);
    if (word != (bpt_vm_word)(0x1000 + i)) wrong_words[w]++;
    calls[w][i]++;
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg, i;
    uint64_t n = 0;
    while ((n & 1023) || !flag(&stop))
        for (i = 0; i < NFUNCS; i++) vm_call(w, i, n++);
    return NULL;
}

/* The drainer empties the always-on session's rings while the workers run. */
static bpt_session keep;
static uint64_t delivered_calls, drained_dropped_notices;
static void *drainer(void *arg) {
    static bpt_msg buf[512];
    int n, i;
    (void)arg;
    for (;;) {
        int done = flag(&stop_drainer);   /* set after the workers are joined */
        while ((n = bpt_session_drain(keep, buf, 512)) > 0)
            for (i = 0; i < n; i++) {
                if (buf[i].type == BPT_MSG_CALL) delivered_calls++;
                else if (buf[i].type == BPT_MSG_DROPPED) drained_dropped_notices += buf[i].value;
            }
        if (done) return NULL;
        sched_yield();
    }
}

int main(void) {
    pthread_t workers[NWORKERS], drain;
    bpt_session count_s, flip[2];
    bpt_session_desc keep_desc;
    bpt_session_counts st;
    bpt_info info;
    bpt_msg leftover[64];
    /* #3's counts: 10,000 changes and 1,000 session lifecycles. tests/run runs them
       natively (gcc, clang, tcc) and a quarter of them under qemu and the sanitizers
       (BPT_TEST_SCALE=4: each change waits for thread progress, and there a wait on
       a preempted worker costs ~10 ms); the full counts there by hand:
       BPT_TEST_SCALE=1 tests/run vm_stress. */
    long changes = check_scale(10000), lifecycles = check_scale(1000), k;
    uint64_t total_always = 0, total = 0, max_us = 0, sum_us = 0, t0, t1;
    int i, w, rc, bad_rc = 0;
    static const char *const flip_patterns[] = { "stress:f*/_", "stress:g*/2", "stress:_/_", "stress:h/2" };
    static const unsigned flip_flags[] = { BPT_CALL, BPT_COUNT, BPT_CALL | BPT_COUNT, BPT_COUNT | BPT_PAUSE,
                                           BPT_COUNT | BPT_RESTART, BPT_OFF, BPT_OFF | BPT_CALL };

    for (i = 0; i < NFUNCS; i++) {
        code[i] = (bpt_vm_word)(0x1000 + i);
        CHECK_RC(bpt_register_vm(&code[i], BP, "stress", names[i], 2, &ops, &funcs[i]), 0);
    }
    /* Session "count": call_count on `always`, on the whole time. */
    CHECK_RC(bpt_session_create(NULL, &count_s), 0);
    CHECK_RC(bpt_trace_pattern(count_s, "stress:always/2", BPT_COUNT, NULL), 1);
    /* Session "keep": call trace on `always`, on the whole time, small rings so some drop. */
    memset(&keep_desc, 0, sizeof keep_desc);
    keep_desc.name = "keep";
    keep_desc.chunk_bytes = 4096;   /* small buffers, so some drop */
    keep_desc.chunks = 2;
    keep_desc.max_chunks = 2;       /* and no growth */
    CHECK_RC(bpt_session_create(&keep_desc, &keep), 0);
    CHECK_RC(bpt_trace_pattern(keep, "stress:always/2", BPT_CALL, NULL), 1);
    CHECK_RC(bpt_session_create(NULL, &flip[0]), 0);
    CHECK_RC(bpt_session_create(NULL, &flip[1]), 0);

    for (w = 0; w < NWORKERS; w++) pthread_create(&workers[w], NULL, worker, (void *)(intptr_t)w);
    pthread_create(&drain, NULL, drainer, NULL);

    /* The controller: pattern changes across two sessions, and a session
       created, used and destroyed every few changes. */
    for (k = 0; k < changes; k++) {
        t0 = bpt__now_ns();
        rc = bpt_trace_pattern(flip[k & 1], flip_patterns[k % 4], flip_flags[(k / 2) % 7], NULL);
        t1 = bpt__now_ns();
        if (rc < 0) bad_rc++;
        sum_us += (t1 - t0) / 1000;
        if ((t1 - t0) / 1000 > max_us) max_us = (t1 - t0) / 1000;
        if (k % (changes / lifecycles) == 0) {
            bpt_session tmp;
            if (bpt_session_create(NULL, &tmp) < 0 ||
                bpt_trace_pattern(tmp, k & 2 ? "stress:_/_" : "stress:always/2", BPT_CALL | BPT_COUNT, NULL) < 0 ||
                bpt_session_destroy(tmp) < 0)
                bad_rc++;
        }
    }
    set_flag(&stop);
    for (w = 0; w < NWORKERS; w++) pthread_join(workers[w], NULL);
    set_flag(&stop_drainer);
    pthread_join(drain, NULL);

    for (w = 0; w < NWORKERS; w++) {
        total_always += calls[w][0];
        for (i = 0; i < NFUNCS; i++) total += calls[w][i];
        CHECK(wrong_words[w] == 0, "worker %d executed %llu wrong words", w, (unsigned long long)wrong_words[w]);
    }
    CHECK(bad_rc == 0, "%d set-path calls failed; last error: %s", bad_rc, bpt_last_error());
    printf("%ld pattern changes in 2 sessions, %ld session create/destroy cycles, %d workers\n",
           changes, lifecycles, NWORKERS);
    printf("bpt_trace_pattern: mean %llu us, max %llu us\n",
           (unsigned long long)(sum_us / (uint64_t)changes), (unsigned long long)max_us);
    printf("VM calls: %llu in all, %llu of stress:always/2\n", (unsigned long long)total, (unsigned long long)total_always);

    CHECK_RC(bpt_trace_info(count_s, funcs[0], BPT_INFO_COUNT, &info), 0);
    printf("call_count of stress:always/2: %llu\n", (unsigned long long)info.count);
    CHECK(info.count == total_always, "call_count %llu != calls %llu", (unsigned long long)info.count,
          (unsigned long long)total_always);

    CHECK_RC(bpt_session_stats(keep, &st), 0);
    printf("session keep: produced %llu delivered %llu dropped %llu (drained calls %llu)\n",
           (unsigned long long)st.produced, (unsigned long long)st.delivered, (unsigned long long)st.dropped,
           (unsigned long long)delivered_calls);
    CHECK(delivered_calls + st.dropped == total_always, "delivered %llu + dropped %llu != calls %llu",
          (unsigned long long)delivered_calls, (unsigned long long)st.dropped, (unsigned long long)total_always);
    CHECK(st.delivered == delivered_calls, "stats delivered %llu != drained %llu",
          (unsigned long long)st.delivered, (unsigned long long)delivered_calls);
    CHECK(drained_dropped_notices <= st.dropped, "DROPPED notices announce %llu, dropped %llu",
          (unsigned long long)drained_dropped_notices, (unsigned long long)st.dropped);

    /* Remove every pattern: nothing may arrive afterwards, every word is the original. */
    for (i = 0; i < 2; i++) CHECK(bpt_trace_pattern(flip[i], "_:_/_", BPT_OFF, NULL) >= 0, "off flip %d", i);
    CHECK(bpt_trace_pattern(keep, "_:_/_", BPT_OFF, NULL) >= 0, "off keep");
    CHECK(bpt_trace_pattern(count_s, "_:_/_", BPT_OFF, NULL) >= 0, "off count");
    while (bpt_session_drain(keep, leftover, 64) > 0) {}
    for (i = 0; i < NFUNCS; i++) {
        CHECK(bpt_vm_word_at(funcs[i]) == (bpt_vm_word)(0x1000 + i), "word %d is %#lx after all off", i,
              (unsigned long)bpt_vm_word_at(funcs[i]));
        CHECK(bpt__load_relaxed_ptr(&funcs[i]->gen_bp) == NULL, "function %d still has a GenericBp", i);
    }
    for (k = 0; k < 1000; k++) vm_call(0, (int)(k % NFUNCS), (uint64_t)k);
    CHECK_RC(bpt_session_drain(keep, leftover, 64), 0);

    for (i = 0; i < 2; i++) CHECK_RC(bpt_session_destroy(flip[i]), 0);
    CHECK_RC(bpt_session_destroy(keep), 0);
    CHECK_RC(bpt_session_destroy(count_s), 0);
    for (i = 0; i < NFUNCS; i++) CHECK_RC(bpt_unregister(funcs[i]), 0);
    return CHECK_DONE();
}

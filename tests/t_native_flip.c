/* t_native_flip: BPT_TEST_CONCURRENCY
   Native entries switched back and forth while threads run through them.
   NWORKERS threads call seven BPT_TRACEABLE functions in tight loops (through
   volatile function pointers, so no call is inlined) while the main thread
   changes trace patterns 100,000 times (x86-64; 10,000 on aarch64, where the
   run is emulated), each change writing entry words on the live code.
   Claims checked:
   - every call returns the value computed from its arguments: a register the
     stub clobbered, a torn entry word or a thread resumed at the wrong place
     would show as a wrong result (or a crash);
   - a call_count pattern kept on one function the whole time (its own
     session) counts exactly the calls the workers made to it, although the
     other session keeps adding and removing its own breakpoint there;
   - every pattern change succeeds and matches the functions its pattern names;
   - each call message of the flipping session carries the arguments the
     worker passed (they are derived from the first, so each checks itself);
   - a third session switches call + return trace (return_from and
     exception_from frames, the return trampoline) on and off every fourth
     change: once the workers are done, its call and return_from messages
     balance exactly, with no exception_from and no frame skipped;
   - after everything is switched off, every entry reads the bytes
     registration left (the compiled ones; on x86-64, gcc's entry NOP made
     66 90), and no call sends a message.
   Prints flips/s, calls/s, and the mean and max bpt_trace_pattern time.
   The flips stop early, after at least 2,000, once 20 s have passed
   (BPT_FLIP_SECONDS=N: N s; 0: no limit, all the flips): each change
   waits for thread progress, and with more busy threads than CPUs a wait
   lasts until a preempted worker that was pinned runs again. On this
   2-CPU virtual machine that put 100,000 flips anywhere from 3 s to 300 s
   (53,000 flips/s when #4 was resolved; 341/s for 2a3f659 on 11-29), 600 s
   under asan, against a per-test limit of 600 s; a 90 s budget made this
   test 6 of CI's 54 minutes, and 40 s, 5 of 86 on 11-29 (200 flips/s).
   The claims hold for any number of flips; the output says how many ran
   and whether the time ran out.
   On compilers without native support (tcc) it checks BPT_ENOTSUP, then
   skips (native_fixture.h). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(BPT_NATIVE)

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#  define UNDER_SANITIZER 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#    define UNDER_SANITIZER 1
#  endif
#endif

enum { NWORKERS = 4, NFUNCS = 7, ENTRY_BYTES = 8 };
#define K1 0x5a5aL
#define K2 12345L

/* The functions under test. Each result depends on every argument. The
   arguments a worker passes are derived from the first one, so a call
   message can be checked on its own: b = a ^ K1, c = a + K2, ... */
BPT_TRACEABLE long always(long a, long b) { return a * 31 + (b ^ 0x1234); }
BPT_TRACEABLE long f0(void) { return 0x5eed; }
BPT_TRACEABLE long f1(long a) { return a * 7 - 3; }
BPT_TRACEABLE long f2(long a, long b) { return a - b * 5; }
BPT_TRACEABLE long g3(long a, long b, long c) { return (a ^ b) + c * 3; }
BPT_TRACEABLE long g6(long a, long b, long c, long d, long e, long f) {
    return a + b * 2 + c * 3 + d * 5 + e * 7 + f * 11;
}
BPT_TRACEABLE double h(long n, double x) { return x * 2.5 + (double)n; }

static long (*volatile always_p)(long, long) = always;
static long (*volatile f0_p)(void) = f0;
static long (*volatile f1_p)(long) = f1;
static long (*volatile f2_p)(long, long) = f2;
static long (*volatile g3_p)(long, long, long) = g3;
static long (*volatile g6_p)(long, long, long, long, long, long) = g6;
static double (*volatile h_p)(long, double) = h;

static void *const fn_addr[NFUNCS] = { (void *)always, (void *)f0, (void *)f1, (void *)f2,
                                       (void *)g3, (void *)g6, (void *)h };
static const char *const fn_module[NFUNCS] = { "keep", "flip", "flip", "flip", "flip", "flip", "flip" };
static const char *const fn_name[NFUNCS] = { "always", "f0", "f1", "f2", "g3", "g6", "h" };
static const int fn_arity[NFUNCS] = { 2, 0, 1, 2, 3, 6, 1 };   /* h: its one integer argument */
static bpt_func *funcs[NFUNCS];

static int stop;                 /* __atomic; set once by main */
static int started;              /* __atomic; workers that made their first round of calls */

typedef struct worker_result {
    uint64_t calls[NFUNCS];
    uint64_t wrong;              /* calls that returned a wrong value */
    long first_wrong_fn;
} worker_result;
static worker_result results[NWORKERS];

/* One round: every function once, every result checked. */
static void round_of_calls(long x, worker_result *r) {
    long a = x, b = x ^ K1, c = x + K2;
    long ra = always_p(a, b), r0 = f0_p(), r1 = f1_p(a), r2 = f2_p(a, b), r3 = g3_p(a, b, c);
    long r6 = g6_p(a, b, c, a - 1, a * 2, ~a);
    double rh = h_p(a, (double)(x & 0xffff) * 0.5);
    int bad = -1;
    if (ra != a * 31 + (b ^ 0x1234)) bad = 0;
    if (r0 != 0x5eed) bad = 1;
    if (r1 != a * 7 - 3) bad = 2;
    if (r2 != a - b * 5) bad = 3;
    if (r3 != (a ^ b) + c * 3) bad = 4;
    if (r6 != a + b * 2 + c * 3 + (a - 1) * 5 + a * 2 * 7 + ~a * 11) bad = 5;
    if (rh != (double)(x & 0xffff) * 0.5 * 2.5 + (double)a) bad = 6;
    if (bad >= 0) {
        if (!r->wrong) r->first_wrong_fn = bad;
        r->wrong++;
    }
    r->calls[0]++; r->calls[1]++; r->calls[2]++; r->calls[3]++; r->calls[4]++; r->calls[5]++; r->calls[6]++;
}

/* The return-trace session's callback tracer: it runs in the workers and
   counts in thread-locals (shared counters would bounce a cache line between
   the CPUs on every call), which each worker adds up when it stops. */
static __thread uint64_t my_ret[3];   /* call, return_from, other */
static uint64_t ret_calls, ret_returns, ret_other;
static void ret_tracer(const bpt_msg *m, void *user) {
    (void)user;
    my_ret[m->type == BPT_MSG_CALL ? 0 : m->type == BPT_MSG_RETURN_FROM ? 1 : 2]++;
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    worker_result r;
    long x = (long)w << 40;
    memset(&r, 0, sizeof r);
    round_of_calls(x++, &r);
    __atomic_fetch_add(&started, 1, __ATOMIC_RELAXED);
    for (;;) {
        int i;
        for (i = 0; i < 256; i++) round_of_calls(x++, &r);
        if (__atomic_load_n(&stop, __ATOMIC_RELAXED)) break;
    }
    results[w] = r;
    __atomic_fetch_add(&ret_calls, my_ret[0], __ATOMIC_RELAXED);
    __atomic_fetch_add(&ret_returns, my_ret[1], __ATOMIC_RELAXED);
    __atomic_fetch_add(&ret_other, my_ret[2], __ATOMIC_RELAXED);
    return NULL;
}

/* Does a call message of the flipping session carry the arguments a worker passed? */
static int msg_ok(const bpt_msg *m) {
    int i;
    for (i = 0; i < NFUNCS; i++)
        if (strcmp(m->name, fn_name[i]) == 0) break;
    if (i == NFUNCS || m->nargs != fn_arity[i] || m->arity != fn_arity[i] || m->thread == 0) return 0;
    if (m->nargs >= 2 && (long)m->args[1] != ((long)m->args[0] ^ K1)) return 0;
    if (m->nargs >= 3 && (long)m->args[2] != (long)m->args[0] + K2) return 0;
    if (m->nargs == 6 && ((long)m->args[3] != (long)m->args[0] - 1 || (long)m->args[4] != (long)m->args[0] * 2 ||
                          (long)m->args[5] != ~(long)m->args[0]))
        return 0;
    return 1;
}

static bpt_msg buf[4096];
static uint64_t drained_calls, drained_bad, drained_dropped_notices;
static void drain(bpt_session s, int rounds) {
    int n, i, k;
    for (k = 0; k < rounds; k++) {
        n = bpt_session_drain(s, buf, (int)(sizeof buf / sizeof buf[0]));
        for (i = 0; i < n; i++) {
            if (buf[i].type == BPT_MSG_CALL) {
                drained_calls++;
                if (!msg_ok(&buf[i])) {
                    char line[256];
                    if (drained_bad++ < 5) {
                        bpt_format_dbg(&buf[i], line, sizeof line);
                        fprintf(stderr, "bad message: %s\n", line);
                    }
                }
            } else if (buf[i].type == BPT_MSG_DROPPED) {
                drained_dropped_notices += buf[i].value;
            }
        }
        if (n < (int)(sizeof buf / sizeof buf[0])) break;
    }
}

int main(void) {
    static const char *const patterns[] = { "flip:f*/_", "flip:g*/_", "_:_/_", "flip:h/1", "flip:f2/2" };
    static const int matches[] = { 3, 2, NFUNCS, 1, 1 };
    static const unsigned flags[] = { BPT_CALL, BPT_COUNT, BPT_CALL | BPT_COUNT, BPT_COUNT | BPT_PAUSE,
                                      BPT_COUNT | BPT_RESTART, BPT_OFF | BPT_CALL, BPT_OFF };
    enum { NPAT = sizeof patterns / sizeof patterns[0], NFLAGS = sizeof flags / sizeof flags[0] };
    unsigned char before[NFUNCS][ENTRY_BYTES], now[NFUNCS][ENTRY_BYTES];
    pthread_t threads[NWORKERS];
    bpt_session count_s, flip_s, ret_s;
    bpt_session_desc ret_desc;
    static const char *const ret_patterns[] = { "flip:f1/_", "flip:g*/_", "flip:h/_", "flip:f*/_" };
    bpt_info info;
    worker_result after;
    long flips, k;
    const char *budget_env = getenv("BPT_FLIP_SECONDS");
    uint64_t budget_s = budget_env ? strtoull(budget_env, NULL, 10) : 20;
    uint64_t t0, t1, start, elapsed, sum_ns = 0, max_ns = 0, total_calls = 0, always_calls = 0, wrong = 0;
    int i, w, rc, bad_rc = 0, first_bad_rc = 0;
    long first_bad_k = -1;

#if defined(__aarch64__)
    flips = 10000;        /* qemu-aarch64 emulates: 10x fewer, as the issue allows */
#else
    flips = 100000;
#endif
#if defined(UNDER_SANITIZER) || defined(BPT_NO_MEMBARRIER)
    /* The sanitizers may be scaled down with BPT_TEST_SCALE, and so is the
       membarrier fallback (tests/run's nomemb): it serializes instruction
       streams with a signal round trip to every thread after each code
       write, and its pins take a full fence, so with more threads than CPUs
       a pattern change costs milliseconds instead of tens of microseconds. */
    flips = check_scale(flips);
#endif

    for (i = 0; i < NFUNCS; i++) code_bytes(fn_addr[i], before[i], ENTRY_BYTES);
    for (i = 0; i < NFUNCS; i++)
        CHECK_RC(bpt_register_native(fn_addr[i], fn_module[i], fn_name[i], fn_arity[i], &funcs[i]), 0);
    printf("entry of always: %02x %02x %02x %02x (%s)\n", before[0][0], before[0][1], before[0][2], before[0][3],
           before[0][0] == 0x90 ? "gcc's 90 90" : before[0][0] == 0x66 ? "clang's 66 90" :
           before[0][0] == 0xF3 ? "endbr64, then the entry word" : "aarch64: a NOP word, or bti c / paciasp first");
    for (i = 0; i < NFUNCS; i++) entry_as_registered(before[i]);   /* what every switch off must leave */

    CHECK_RC(bpt_session_create(NULL, &count_s), 0);
    CHECK_RC(bpt_trace_pattern(count_s, "keep:always/2", BPT_COUNT, NULL), 1);
    {   /* the default 16 chunks a thread, fixed: the flips outrun the drainer on purpose (drops are
           counted and checked below); grown to 64 MiB a worker, the buffers would outlast the drains */
        bpt_session_desc fd;
        memset(&fd, 0, sizeof fd);
        fd.max_chunks = 16;
        CHECK_RC(bpt_session_create(&fd, &flip_s), 0);
    }
    memset(&ret_desc, 0, sizeof ret_desc);
    ret_desc.tracer = ret_tracer;
    CHECK_RC(bpt_session_create(&ret_desc, &ret_s), 0);

    for (w = 0; w < NWORKERS; w++)
        CHECK_RC(pthread_create(&threads[w], NULL, worker, (void *)(intptr_t)w), 0);
    while (__atomic_load_n(&started, __ATOMIC_RELAXED) < NWORKERS) sched_yield();

    /* The flips: pattern k % NPAT with flags (k / NPAT) % NFLAGS, so each
       pattern goes through every kind of change in turn, and a full BPT_OFF
       of each pattern every NPAT * NFLAGS changes keeps the remembered
       patterns few. */
    start = bpt__now_ns();
    for (k = 0; k < flips; k++) {
        /* Stop only where a cycle of 8 begins: the return-trace session is
           switched off at k % 8 == 7, as at the end of a full run. */
        if (budget_s && k >= 2000 && k % 8 == 0 && bpt__now_ns() - start > budget_s * 1000000000) {
            printf("time budget reached: %ld of %ld flips\n", k, flips);
            flips = k;
            break;
        }
        t0 = bpt__now_ns();
        rc = bpt_trace_pattern(flip_s, patterns[k % NPAT], flags[(k / NPAT) % NFLAGS], NULL);
        t1 = bpt__now_ns();
        if (rc != matches[k % NPAT] && bad_rc++ == 0) { first_bad_rc = rc; first_bad_k = k; }
        sum_ns += t1 - t0;
        if (t1 - t0 > max_ns) max_ns = t1 - t0;
        if (k % 16 == 15) drain(flip_s, 4);
        if (k % 4 == 3 && bpt_trace_pattern(ret_s, ret_patterns[(k / 8) % 4],
                                            k % 8 == 3 ? BPT_CALL | BPT_RETURN | BPT_EXCEPTION : BPT_CALL | BPT_OFF,
                                            NULL) < 0 && bad_rc++ == 0) {
            first_bad_rc = -1; first_bad_k = k;
        }
    }
    elapsed = bpt__now_ns() - start;
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (w = 0; w < NWORKERS; w++) pthread_join(threads[w], NULL);

    for (w = 0; w < NWORKERS; w++) {
        for (i = 0; i < NFUNCS; i++) total_calls += results[w].calls[i];
        always_calls += results[w].calls[0];
        wrong += results[w].wrong;
        CHECK(results[w].wrong == 0, "worker %d: %llu calls returned a wrong value (first in %s)", w,
              (unsigned long long)results[w].wrong, fn_name[results[w].first_wrong_fn]);
    }
    CHECK(bad_rc == 0, "%d pattern changes did not match as expected; the first (change %ld, '%s') returned %d: %s",
          bad_rc, first_bad_k, first_bad_k >= 0 ? patterns[first_bad_k % NPAT] : "", first_bad_rc,
          bpt_last_error());
    printf("%ld flips with %d workers on %ld CPUs%s\n", flips, NWORKERS, sysconf(_SC_NPROCESSORS_ONLN),
#if defined(BPT_NO_MEMBARRIER)
           " (BPT_NO_MEMBARRIER: signal fallback for SYNC_CORE, fence pins)"
#elif defined(UNDER_SANITIZER)
           " (sanitizer build)"
#else
           ""
#endif
    );
    printf("flips/s: %.0f   calls/s: %.0f   (%llu calls in %.2f s, %llu of keep:always/2)\n",
           (double)flips * 1e9 / (double)elapsed, (double)total_calls * 1e9 / (double)elapsed,
           (unsigned long long)total_calls, (double)elapsed / 1e9, (unsigned long long)always_calls);
    printf("bpt_trace_pattern: mean %.1f us, max %.1f us\n", (double)sum_ns / (double)flips / 1e3,
           (double)max_ns / 1e3);

    CHECK_RC(bpt_trace_info(count_s, funcs[0], BPT_INFO_COUNT | BPT_INFO_FLAGS, &info), 0);
    printf("call_count of keep:always/2: %llu, calls made: %llu, wrong results: %llu\n",
           (unsigned long long)info.count, (unsigned long long)always_calls, (unsigned long long)wrong);
    CHECK(info.flags == BPT_COUNT, "count session flags %#x", info.flags);
    {
        bpt_session_counts st;
        CHECK_RC(bpt_session_stats(ret_s, &st), 0);
        printf("return-trace session: %llu calls, %llu return_from, %llu other, %llu frames skipped\n",
               (unsigned long long)ret_calls, (unsigned long long)ret_returns, (unsigned long long)ret_other,
               (unsigned long long)st.frames_skipped);
        CHECK(ret_calls > 0 && ret_calls == ret_returns && ret_other == 0 && st.frames_skipped == 0,
              "return trace under flips: %llu calls, %llu returns, %llu other, %llu skipped",
              (unsigned long long)ret_calls, (unsigned long long)ret_returns, (unsigned long long)ret_other,
              (unsigned long long)st.frames_skipped);
    }
    CHECK(info.count == always_calls, "call_count %llu != calls %llu", (unsigned long long)info.count,
          (unsigned long long)always_calls);

    /* Everything off; every entry back to its compiled bytes. */
    CHECK(bpt_trace_pattern(flip_s, "_:_/_", BPT_OFF, NULL) == NFUNCS, "flip off: %s", bpt_last_error());
    CHECK(bpt_trace_pattern(count_s, "_:_/_", BPT_OFF, NULL) == NFUNCS, "count off: %s", bpt_last_error());
    CHECK(bpt_trace_pattern(ret_s, "_:_/_", BPT_OFF, NULL) == NFUNCS, "return-trace off: %s", bpt_last_error());
    drain(flip_s, 1000);
    {
        bpt_session_counts st;
        CHECK_RC(bpt_session_stats(flip_s, &st), 0);
        printf("flip session: produced %llu, delivered %llu, dropped %llu; drained %llu call messages, "
               "%llu malformed\n", (unsigned long long)st.produced, (unsigned long long)st.delivered,
               (unsigned long long)st.dropped, (unsigned long long)drained_calls, (unsigned long long)drained_bad);
        CHECK(drained_bad == 0, "%llu call messages with wrong arguments", (unsigned long long)drained_bad);
        CHECK(drained_calls > 0, "the flipping session traced some calls");
        CHECK(st.delivered == drained_calls && st.produced == st.delivered + st.dropped,
              "produced %llu = delivered %llu + dropped %llu (drained %llu)", (unsigned long long)st.produced,
              (unsigned long long)st.delivered, (unsigned long long)st.dropped, (unsigned long long)drained_calls);
    }
    for (i = 0; i < NFUNCS; i++) {
        code_bytes(fn_addr[i], now[i], ENTRY_BYTES);
        CHECK(memcmp(before[i], now[i], ENTRY_BYTES) == 0,
              "%s: entry %02x %02x %02x %02x after all off, expected %02x %02x %02x %02x (registered, untraced)", fn_name[i],
              now[i][0], now[i][1], now[i][2], now[i][3], before[i][0], before[i][1], before[i][2], before[i][3]);
        CHECK(bpt__load_relaxed_ptr(&funcs[i]->gen_bp) == NULL, "%s still has a breakpoint", fn_name[i]);
    }
    memset(&after, 0, sizeof after);
    for (k = 0; k < 1000; k++) round_of_calls(k * 977, &after);
    CHECK(after.wrong == 0, "results after all off");
    drained_calls = 0;
    drain(flip_s, 10);
    CHECK(drained_calls == 0, "%llu messages after all off", (unsigned long long)drained_calls);

    CHECK_RC(bpt_session_destroy(flip_s), 0);
    CHECK_RC(bpt_session_destroy(count_s), 0);
    CHECK_RC(bpt_session_destroy(ret_s), 0);
    for (i = 0; i < NFUNCS; i++) CHECK_RC(bpt_unregister(funcs[i]), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no entries to flip")
#endif

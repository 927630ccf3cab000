/* t_count: BPT_TEST_CONCURRENCY
   call_count's per-thread counters (issue #16, item 5; kind_count.c).
   Claims checked, each count read with bpt_trace_info after the calls ended:
   - 8 and 200 threads (BPT_MAX_THREADS is 4 here) calling one counted
     function at once: the count is exactly the calls; the threads have
     exited, so an exited thread's counts are summed; a second round of 200
     threads, on the records the first left, adds exactly its own calls;
   - BPT_RESTART: 0 at once, then exactly the calls after it;
   - BPT_PAUSE: calls while paused are not counted; BPT_COUNT, on the paused
     function or on one counting, restarts it from 0 (as BEAM's `true`);
   - BPT_RESTART and BPT_PAUSE on a function not counting: no breakpoint;
   - off, then on again: from 0, although every thread's counter of the
     breakpoint's slot held counts;
   - a slot given back and taken by another function's breakpoint (checked:
     the same slot) starts from 0 there;
   - 9,000 counted functions (more than one page of slots), one call each
     from a new thread: each counts 1;
   - the count hit calls no BPT_MALLOC once the set path is done, even for a
     thread's first count in a page;
   - a signal handler that calls the counted function while its thread
     loops on it: exactly the loop's calls plus the handler's; and where the
     increment is guarded rather than one instruction (aarch64), a hit that
     finds its thread inside an update still counts. */
#include <stddef.h>
static void *t_malloc(size_t n);
#define BPT_MALLOC(n) t_malloc(n)
#define BPT_FREE(p) free(p)
#define BPT_MAX_THREADS 4
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>

/* Every BPT_MALLOC, from any thread. */
static bpt__atomic_u64 t_mallocs;
static void *t_malloc(size_t n) {
    bpt__fetch_add_u64(&t_mallocs, 1);
    return malloc(n);
}

enum { NMANY = 9000 };
#define BP ((bpt_vm_word)0xC0C0)
static bpt_vm_word code[2], many_code[NMANY];
static bpt_func *f, *g, *many[NMANY];
static bpt_session s;

static uint64_t vm_arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { .arg = vm_arg };

/* One call of a VM function, as a VM's dispatch makes it. */
static void vm_call(bpt_vm_word *word, bpt_func *fn) {
    uint64_t frame[1] = { 1 };
    if (BPT_VM_FETCH(word) == BP) bpt_vm_breakpoint(fn, frame, NULL);
}

static uint64_t count_of(bpt_func *fn) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, fn, BPT_INFO_COUNT, &in), 0);
    return in.count;
}

/* fn's call_count data in session s, its only session (kind_count.c). */
static bpt__BpCount *count_data(bpt_func *fn) {
    bpt__GenericBp *bp = (bpt__GenericBp *)bpt__load_acquire_ptr(&fn->gen_bp);
    return (bpt__BpCount *)bp->data[bpt_active_bp_ix()].data[BPT__KIX_COUNT];
}
static uint32_t slot_of(bpt_func *fn) { return count_data(fn)->slot; }

/* Threads that call f `calls` times each, all alive at once. */
typedef struct round { pthread_barrier_t all_alive; long calls; bpt_vm_word *word; bpt_func *fn; } round;
static void *caller(void *arg) {
    round *r = (round *)arg;
    long i;
    vm_call(r->word, r->fn);   /* the thread's record */
    pthread_barrier_wait(&r->all_alive);
    for (i = 1; i < r->calls; i++) vm_call(r->word, r->fn);
    return NULL;
}

/* n threads, `calls` calls each on fn; returns the calls made. */
static uint64_t run_round(int n, long calls, bpt_vm_word *word, bpt_func *fn) {
    pthread_t *t = (pthread_t *)malloc(sizeof *t * (size_t)n);
    round r;
    int i, made = 0;
    r.calls = calls;
    r.word = word;
    r.fn = fn;
    pthread_barrier_init(&r.all_alive, NULL, (unsigned)n);
    for (i = 0; i < n; i++) {
        if (pthread_create(&t[i], NULL, caller, &r) != 0) break;
        made++;
    }
    CHECK(made == n, "only %d of %d threads started", made, n);
    if (made < n) abort();   /* the barrier would never open */
    for (i = 0; i < made; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&r.all_alive);
    free(t);
    return (uint64_t)made * (uint64_t)calls;
}

/* A new thread with its record: the count hits it makes, 9,000 functions
   once each, map its pages (two: slots past BPT__COUNT_PAGE_SLOTS) and
   must call BPT_MALLOC never. */
static uint64_t many_mallocs = ~(uint64_t)0;
static void *many_caller(void *arg) {
    uint64_t before;
    int i;
    (void)arg;
    bpt_thread_progress_pin();   /* the thread's record */
    bpt_thread_progress_unpin();
    before = bpt__load_relaxed_u64(&t_mallocs);
    for (i = 0; i < NMANY; i++) vm_call(&many_code[i], many[i]);
    for (i = 0; i < NMANY; i++) vm_call(&code[0], f);
    many_mallocs = bpt__load_relaxed_u64(&t_mallocs) - before;
    return NULL;
}

static int many_wrong;
static void check_one(const bpt_func *fn, const char *module, const char *name, int arity, const bpt_info *info, void *user) {
    (void)fn; (void)module; (void)arity; (void)user;
    if (info->count != 1 && many_wrong++ < 5) fprintf(stderr, "many:%s counted %llu, not 1\n", name, (unsigned long long)info->count);
}

static volatile long handler_calls;
static void handler(int sig) {
    (void)sig;
    vm_call(&code[0], f);
    handler_calls++;
}

int main(void) {
    long n8 = check_scale(200000), n200 = check_scale(20000), loop = check_scale(3000000), i;
    uint64_t expect, got, before;
    uint32_t slot;
    bpt_progress_stats ps;
    char name[16];
    struct itimerval it;

    code[0] = 0x100;
    code[1] = 0x101;
    CHECK_RC(bpt_register_vm(&code[0], BP, "cnt", "f", 1, &ops, &f), 0);
    CHECK_RC(bpt_register_vm(&code[1], BP, "cnt", "g", 1, &ops, &g), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT, NULL), 1);

    /* 8 threads, then 200 (past BPT_MAX_THREADS), all exited when read. */
    expect = run_round(8, n8, &code[0], f);
    got = count_of(f);
    printf("8 threads x %ld calls: count %llu\n", n8, (unsigned long long)got);
    CHECK(got == expect, "8 threads: count %llu, calls %llu", (unsigned long long)got, (unsigned long long)expect);
    expect += run_round(200, n200, &code[0], f);
    got = count_of(f);
    printf("+ 200 threads x %ld calls: count %llu\n", n200, (unsigned long long)got);
    CHECK(got == expect, "200 threads: count %llu, calls %llu", (unsigned long long)got, (unsigned long long)expect);
    expect += run_round(200, n200, &code[0], f);
    got = count_of(f);
    bpt_thread_progress_stats(&ps);
    printf("+ 200 more threads on %u thread records: count %llu\n", ps.records, (unsigned long long)got);
    CHECK(ps.records <= 210, "%u records: the second 200 threads did not reuse the first's", ps.records);
    CHECK(got == expect, "200 threads on reused records: count %llu, calls %llu", (unsigned long long)got,
          (unsigned long long)expect);

    /* Restart: from 0 at once, then exact. */
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    CHECK(count_of(f) == 0, "restart: count %llu, not 0", (unsigned long long)count_of(f));
    expect = run_round(8, n8 / 4, &code[0], f);
    got = count_of(f);
    CHECK(got == expect, "after restart: count %llu, calls %llu", (unsigned long long)got, (unsigned long long)expect);

    /* Pause: not counted. Switched on again, paused or counting: from 0,
       then counted on (erlang:trace_pattern's `true` zeroes the counter:
       set_function_break in beam_bp.c, for any operation but a pause). */
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    run_round(8, 1000, &code[0], f);
    CHECK(count_of(f) == expect, "paused: count %llu, expected %llu", (unsigned long long)count_of(f),
          (unsigned long long)expect);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT, NULL), 1);
    CHECK(count_of(f) == 0, "on again while paused: count %llu, not 0", (unsigned long long)count_of(f));
    expect = run_round(8, 1000, &code[0], f);
    CHECK(count_of(f) == expect, "resumed: count %llu, expected %llu", (unsigned long long)count_of(f),
          (unsigned long long)expect);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT, NULL), 1);
    CHECK(count_of(f) == 0, "on again while counting: count %llu, not 0", (unsigned long long)count_of(f));
    expect = run_round(8, 1000, &code[0], f);
    CHECK(count_of(f) == expect, "on again: count %llu, expected %llu", (unsigned long long)count_of(f),
          (unsigned long long)expect);

    /* A restart or a pause of a function not counting leaves it so: no
       breakpoint is made (cprof's restart and pause: "the matching
       functions that have call count breakpoints"), though the pattern
       matched it. */
    CHECK_RC(bpt_trace_pattern(s, "cnt:g/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cnt:g/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    CHECK(bpt__load_acquire_ptr(&g->gen_bp) == NULL, "a restart or a pause made g a breakpoint");
    {
        bpt_info in;
        memset(&in, 0, sizeof in);
        CHECK_RC(bpt_trace_info(s, g, BPT_INFO_FLAGS | BPT_INFO_COUNT, &in), 0);
        CHECK(in.flags == 0 && in.count == 0, "g restarted while not counting: flags %#x, count %llu", in.flags,
              (unsigned long long)in.count);
    }

    /* Off, then on: from 0 (the slot is taken again, zeroed). */
    slot = slot_of(f);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT, NULL), 1);
    CHECK(slot_of(f) == slot, "off and on: slot %u, before %u (lowest free first)", slot_of(f), slot);
    CHECK(count_of(f) == 0, "off and on: count %llu, not 0", (unsigned long long)count_of(f));
    expect = run_round(8, 1000, &code[0], f);
    CHECK(count_of(f) == expect, "off and on: count %llu, calls %llu", (unsigned long long)count_of(f),
          (unsigned long long)expect);

    /* f's slot given back and taken by g's breakpoint: from 0 there. */
    slot = slot_of(f);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cnt:g/1", BPT_COUNT, NULL), 1);
    CHECK(slot_of(g) == slot, "g's slot %u, f's was %u", slot_of(g), slot);
    CHECK(count_of(g) == 0, "reused slot: count %llu, not 0", (unsigned long long)count_of(g));
    expect = run_round(8, 1000, &code[1], g);
    CHECK(count_of(g) == expect, "reused slot: count %llu, calls %llu", (unsigned long long)count_of(g),
          (unsigned long long)expect);
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT, NULL), 1);

    /* 9,000 functions, one call each, from a thread that allocates nothing. */
    for (i = 0; i < NMANY; i++) {
        many_code[i] = (bpt_vm_word)(0x1000 + i);
        snprintf(name, sizeof name, "p%ld", i);
        CHECK_RC(bpt_register_vm(&many_code[i], BP, "many", name, 0, &ops, &many[i]), 0);
    }
    CHECK_RC(bpt_trace_pattern(s, "many:_/_", BPT_COUNT, NULL), NMANY);
    CHECK(slot_of(many[NMANY - 1]) >= BPT__COUNT_PAGE_SLOTS, "the last slot %u is in the first page", slot_of(many[NMANY - 1]));
    before = count_of(f);
    {
        pthread_t t;
        pthread_create(&t, NULL, many_caller, NULL);
        pthread_join(t, NULL);
    }
    CHECK_RC(bpt_trace_info_each(s, "many:_/_", BPT_INFO_COUNT, check_one, NULL), NMANY);
    CHECK(many_wrong == 0, "%d of the %d functions did not count 1", many_wrong, NMANY);
    CHECK(count_of(f) == before + NMANY, "f: %llu, expected %llu", (unsigned long long)count_of(f),
          (unsigned long long)(before + NMANY));
    printf("9000 functions, one call each: %d wrong; BPT_MALLOC calls on the hit path: %llu\n", many_wrong,
           (unsigned long long)many_mallocs);
    CHECK(many_mallocs == 0, "the count hit path called BPT_MALLOC %llu times", (unsigned long long)many_mallocs);
    CHECK_RC(bpt_trace_pattern(s, "many:_/_", BPT_OFF, NULL), NMANY);

    /* A signal handler on this thread (the only one left) calls f while
       the thread loops on f. */
    CHECK_RC(bpt_trace_pattern(s, "cnt:f/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    before = bpt__load_relaxed_u64(&t_mallocs);
    signal(SIGALRM, handler);
    memset(&it, 0, sizeof it);
    it.it_value.tv_usec = it.it_interval.tv_usec = 50;
    setitimer(ITIMER_REAL, &it, NULL);
    for (i = 0; i < loop; i++) vm_call(&code[0], f);
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
    signal(SIGALRM, SIG_IGN);
    CHECK(bpt__load_relaxed_u64(&t_mallocs) == before, "BPT_MALLOC called on the hit path");
    got = count_of(f);
    printf("signal handler: %ld loop calls + %ld handler calls, count %llu\n", loop, handler_calls,
           (unsigned long long)got);
    CHECK(got == (uint64_t)loop + (uint64_t)handler_calls, "count %llu, calls %llu", (unsigned long long)got,
          (unsigned long long)loop + (unsigned long long)handler_calls);
#if !defined(BPT__SIGNAL_ATOMIC_INC)
    /* Where the increment is a load and a store (aarch64), the interleaving
       a signal may make, by hand: the owner loads its counter, a handler's
       hit lands, the owner stores. Neither may be lost. */
    {
        bpt__thread *rec = bpt__thread_self_or_null();
        bpt__BpCount *c = count_data(f);
        bpt__atomic_u64 *page = (bpt__atomic_u64 *)bpt__load_relaxed_ptr(bpt__count_dir(rec, c->dir));
        uint64_t v;
        rec->counting = 1;
        v = bpt__load_relaxed_u64(&page[c->off]);
        vm_call(&code[0], f);
        bpt__store_relaxed_u64(&page[c->off], v + 1);
        rec->counting = 0;
        CHECK(count_of(f) == got + 2, "a hit inside an update: count %llu, expected %llu",
              (unsigned long long)count_of(f), (unsigned long long)got + 2);
    }
#endif

    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

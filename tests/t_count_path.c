/* t_count_path: BPT_TEST_CONCURRENCY
   The count path of native entries (>>count path in site_native.c; issue
   #16, item 6): the entry stub first calls bpt__native_count_path with the
   integer registers alone saved. It must finish a hit of a function that
   only counts, and leave everything else untouched to the full path.
   Claims:
   1. Its results, called directly on a registered function:
      - BPT__PATH_DONE, one more count, once the thread has its record and
        counter page (CP1, CP4);
      - BPT__PATH_FULL and no count when the generation does more than
        count (call trace) or a return-traced frame is open (CP3);
      - BPT__PATH_DONE and no count when the function is paused (NONE);
      - BPT__PATH_DONE_WAKE when a thread-progress waiter sleeps (CP5).
   2. Through the stub, a counted function's arguments arrive whole: eight
      doubles (xmm0-7, v0-v7), six integers, and a variadic call's al (the
      count of vector registers, SysV), and its result is right, while the
      stub skipped the vector registers' save (on x86-64, every register's
      but rax and rdi: >>keeps regs in port.h).
   3. Fresh threads (no record, no page yet: CP1 and CP4 send the first hit to
      the full path) count exactly: nothing counted twice, nothing lost.
   4. A counted function called inside a return-traced one (CP3 declines
      while its frame is open) counts exactly, and the outer function's
      return_from still arrives with its value.
   5. Counting threads keep the protocol's waits short: switches while 2
      threads call counted functions complete, the counts within bounds.
   6. On x86-64 the stub's count route (>>count route in site_x86_64.c)
      finishes the common case with no call, and hands each other case on
      with nothing changed. Through the stub, with the entries of the C
      count path and of the full path counted (their test points):
      - a counted call and a paused one end in the stub (neither path);
      - a call inside a pinned section and one while pins fence go to the
        C path, which finishes them;
      - a call while a waiter sleeps (DONE_WAKE: the full path wakes it),
        one under a return-traced frame, one under a frame a longjmp left
        (the full path settles it: thrower's exception_from), and one whose
        active kind is not COUNT while its hint still says COUNT (as during
        a change: its call record arrives) go to the full path.
      Each is counted exactly once. Where the stub has no route (aarch64,
      the sanitizers) or pins fence (membarrier refused), every call goes
      to the C path first; the full path's entries and the counts are the
      same.
   tests/count_path_check.sh checks the compiled path itself. */
/* The C count path's entries on this thread: its test point, with no
   call (the path saves no vector register and makes none). */
#if defined(__TINYC__)
static unsigned long c_path_entries, full_path_entries;   /* no __thread; tcc builds no native sites */
#else
static __thread unsigned long c_path_entries, full_path_entries;   /* and of the full path */
#endif
#define T_IS(where, name) ((where)[0] == (name)[0] && sizeof(where) == sizeof(name))
#define BPT_TEST_POINT(where) \
    ((void)(c_path_entries += T_IS(where, "Count path: the C one"), \
            full_path_entries += T_IS(where, "Full path: entered")))
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>

#if defined(BPT_NATIVE)   /* gcc and clang: stdatomic.h too */
#include <stdatomic.h>

#include "args_fixture.h"   /* fp8, int6, va_sum */

BPT_TRACEABLE long leaf(long x) { return x + 1; }
BPT_TRACEABLE long outer(long x) { return leaf(x) * 2; }
/* thrower leaves its frame by a longjmp (claim 6). */
static jmp_buf route_jump;
static __attribute__((noinline)) void jump_out(void) { longjmp(route_jump, 1); }
BPT_TRACEABLE long thrower(long x) { if (x >= 0) jump_out(); return x - 1; }

static bpt_func *ffp8, *fint6, *fva, *fleaf, *fouter, *fthrower;
static bpt_session s;

static uint64_t count_of(bpt_func *f) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &in), 0);
    return in.count;
}

/* 1. The path's results, called as the stub calls it. */
static void direct(void) {
    uint64_t c;
    int r;
    uint32_t idle;
    printf("1. bpt__native_count_path called directly%s\n",
#if defined(BPT__COUNT_SAVES_FP)
           " (BPT__COUNT_SAVES_FP: this build's stub saves the vector registers first)"
#else
           " (integer registers only)"
#endif
    );
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT, NULL), 1);
    CHECK(leaf(1) == 2, "leaf(1)");   /* record and page made by the full path */
    c = count_of(fleaf);
    r = bpt__native_count_path(fleaf);
    printf("   counted only: %d, count %llu -> %llu\n", r, (unsigned long long)c, (unsigned long long)count_of(fleaf));
    CHECK(r == BPT__PATH_DONE, "counted only: %d, expected BPT__PATH_DONE", r);
    CHECK(count_of(fleaf) == c + 1, "one more count");

    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_CALL, NULL), 1);
    c = count_of(fleaf);
    r = bpt__native_count_path(fleaf);
    printf("   count and call trace: %d\n", r);
    CHECK(r == BPT__PATH_FULL, "count and call trace: %d, expected BPT__PATH_FULL", r);
    CHECK(count_of(fleaf) == c, "nothing counted by the declined path");
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_CALL | BPT_OFF, NULL), 1);
    {
        bpt_msg m[16];
        while (bpt_session_drain(s, m, 16) > 0) {}
    }

    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    c = count_of(fleaf);
    r = bpt__native_count_path(fleaf);
    printf("   paused: %d\n", r);
    CHECK(r == BPT__PATH_DONE, "paused (NONE): %d, expected BPT__PATH_DONE", r);
    CHECK(count_of(fleaf) == c, "nothing counted while paused");
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);

    /* A waiter sleeps on the futex: the path says so, and does not wake
       it itself (a system call); bpt__progress_wake is what the stub's
       second call runs. */
    idle = bpt__load_relaxed_u32(&bpt__progress.futex);   /* 0, or the fence flag (progress.c) */
    bpt__store_relaxed_u32(&bpt__progress.futex, 1 | idle);
    r = bpt__native_count_path(fleaf);
    printf("   a waiter sleeps: %d\n", r);
    CHECK(r == BPT__PATH_DONE_WAKE, "a sleeping waiter: %d, expected BPT__PATH_DONE_WAKE", r);
    CHECK(bpt__load_relaxed_u32(&bpt__progress.futex) == (1 | idle), "the path itself woke nobody");
    bpt__progress_wake();
    CHECK(bpt__load_relaxed_u32(&bpt__progress.futex) == idle, "the wake clears the flag, and only it");
    CHECK(count_of(fleaf) == 1, "counted from the restart: %llu", (unsigned long long)count_of(fleaf));
}

/* 2. Arguments through the stub's count path. */
static void arguments(void) {
    double (*volatile p8)(double, double, double, double, double, double, double, double) = fp8;
    long (*volatile p6)(long, long, long, long, long, long) = int6;
    double want = fp8(1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5);
    double (*volatile pva)(int, ...) = va_sum;
    long wanti = int6(1, 2, 3, 4, 5, 6);
    double wantva = va_sum(8, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5);
    int i, bad = 0;
    CHECK_RC(bpt_trace_pattern(s, "cp:fp8/8", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cp:int6/6", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cp:va_sum/_", BPT_COUNT, NULL), 1);
    for (i = 0; i < 1000; i++) {
        bad += p8(1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5) != want;
        bad += p6(1, 2, 3, 4, 5, 6) != wanti;
        bad += pva(8, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5) != wantva;
    }
    printf("2. 1000 counted calls of fp8 (8 doubles), int6 (6 longs) and va_sum (variadic, 8 doubles: al "
           "says how many): %d wrong results; counts %llu %llu %llu\n", bad, (unsigned long long)count_of(ffp8),
           (unsigned long long)count_of(fint6), (unsigned long long)count_of(fva));
    CHECK(bad == 0, "every argument arrived whole");
    CHECK(count_of(ffp8) == 1000 && count_of(fint6) == 1000 && count_of(fva) == 1000, "every call counted");
}

/* 3. Fresh threads. */
enum { THREADS = 8 };
static long per_thread;
static void *caller(void *arg) {
    long i, sum = 0;
    long (*volatile p)(long) = leaf;
    (void)arg;
    for (i = 0; i < per_thread; i++) sum += p(i);
    return (void *)(intptr_t)(sum == per_thread * (per_thread + 1) / 2);
}

static void fresh_threads(void) {
    pthread_t t[THREADS];
    void *ok;
    int i, good = 0;
    per_thread = check_scale(200000);
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    for (i = 0; i < THREADS; i++) CHECK_RC(pthread_create(&t[i], NULL, caller, NULL), 0);
    for (i = 0; i < THREADS; i++) {
        pthread_join(t[i], &ok);
        good += ok != NULL;
    }
    printf("3. %d fresh threads x %ld calls: count %llu\n", THREADS, per_thread,
           (unsigned long long)count_of(fleaf));
    CHECK(good == THREADS, "results right on %d of %d threads", good, THREADS);
    CHECK(count_of(fleaf) == (uint64_t)THREADS * (uint64_t)per_thread, "exact: %llu, expected %llu",
          (unsigned long long)count_of(fleaf), (unsigned long long)THREADS * (unsigned long long)per_thread);
}

/* 4. Inside a return-traced function. */
static void inside_return_trace(void) {
    bpt_msg m[64];
    long (*volatile p)(long) = outer;
    int n, i, returns = 0, right = 0;
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "cp:outer/1", BPT_CALL | BPT_RETURN, NULL), 1);
    for (i = 0; i < 10; i++) CHECK(p(i) == (i + 1) * 2, "outer(%d)", i);
    while ((n = bpt_session_drain(s, m, 64)) > 0)
        for (i = 0; i < n; i++)
            if (m[i].type == BPT_MSG_RETURN_FROM) {
                returns++;
                right += strcmp(m[i].name, "outer") == 0 && m[i].value == (uint64_t)(2 * (returns));
            }
    printf("4. 10 calls of return-traced outer, each calling counted leaf: leaf count %llu, %d return_from\n",
           (unsigned long long)count_of(fleaf), returns);
    CHECK(count_of(fleaf) == 10, "leaf counted exactly under an open frame: %llu", (unsigned long long)count_of(fleaf));
    CHECK(returns == 10 && right == 10, "outer's return_from: %d (%d of outer)", returns, right);
    CHECK_RC(bpt_trace_pattern(s, "cp:outer/1", BPT_OFF, NULL), 1);
}

/* 5. Switches while threads count. */
static _Atomic int stop;
static void *hammer(void *arg) {
    long (*volatile p)(long) = leaf;
    unsigned long n = 0;
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) n += p(1) == 2;
    return (void *)(uintptr_t)n;
}

static void switches(void) {
    pthread_t t[2];
    void *calls[2];
    int i, rounds = (int)check_scale(2000), rc = 0;
    uint64_t c;
    atomic_store(&stop, 0);
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    for (i = 0; i < 2; i++) CHECK_RC(pthread_create(&t[i], NULL, hammer, NULL), 0);
    for (i = 0; i < rounds && rc >= 0; i++) {
        rc = bpt_trace_pattern(s, "cp:leaf/1", i % 2 ? BPT_COUNT : BPT_COUNT | BPT_PAUSE, NULL);
        if (rc >= 0) rc = bpt_trace_pattern(s, "cp:int6/6", i % 2 ? BPT_OFF : BPT_COUNT, NULL);
    }
    CHECK(rc >= 0, "a switch failed: %d (%s)", rc, bpt_last_error());
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    c = count_of(fleaf);
    atomic_store(&stop, 1);
    for (i = 0; i < 2; i++) pthread_join(t[i], &calls[i]);
    printf("5. %d switches while 2 threads called leaf %lu times: %llu counted while on\n", 2 * rounds,
           (unsigned long)((uintptr_t)calls[0] + (uintptr_t)calls[1]), (unsigned long long)c);
    CHECK(c <= (uint64_t)((uintptr_t)calls[0] + (uintptr_t)calls[1]), "no more counts than calls");
    CHECK(count_of(fleaf) == c, "nothing counted while paused");
}

/* 6. The stub's count route, case by case: calls of leaf through the stub
   with the entries of the C path and of the full path, and the count,
   before and after. route_on: the stub has the route and pins need no
   fence. */
static int route_on;
typedef struct route_mark { unsigned long c_path, full_path; uint64_t count; } route_mark;
/* The entries of both paths so far, and leaf's count (outside a pinned
   section: bpt_trace_info refuses to run pinned). */
static route_mark route_now(void) {
    route_mark m;
    m.c_path = c_path_entries;
    m.full_path = full_path_entries;
    m.count = count_of(fleaf);
    return m;
}
/* What happened since m: the entries of each path, and leaf's count. */
static route_mark route_since(route_mark m) {
    route_mark now = route_now();
    now.c_path -= m.c_path;
    now.full_path -= m.full_path;
    now.count -= m.count;
    return now;
}
static void route_case(const char *what, int calls, int counted, int want_c_on_route, int want_full, int pinned) {
    long (*volatile p)(long) = leaf;
    route_mark m = route_now(), d;
    bpt__thread *rec = pinned ? bpt__pin() : NULL;
    int i, bad = 0, want_c = route_on ? want_c_on_route : calls;
    for (i = 0; i < calls; i++) bad += p(i) != i + 1;
    if (pinned) bpt__unpin(rec);
    d = route_since(m);   /* the unpin and the count's read enter neither path */
    printf("   %s: %d calls; entries: C path %lu, full path %lu; count +%llu\n", what, calls, d.c_path, d.full_path,
           (unsigned long long)d.count);
    CHECK(bad == 0, "%s: %d wrong results", what, bad);
    CHECK(d.c_path == (unsigned long)want_c, "%s: the C path entered %lu times, expected %d", what, d.c_path, want_c);
    CHECK(d.full_path == (unsigned long)want_full, "%s: the full path entered %lu times, expected %d", what,
          d.full_path, want_full);
    CHECK(d.count == (uint64_t)(counted ? calls : 0), "%s: count +%llu, expected %d", what,
          (unsigned long long)d.count, counted ? calls : 0);
}

static void route(void) {
    bpt__thread *rec;
    bpt_progress_stats ps;
    uint64_t word, wakes;
    uint32_t idle;
    long (*volatile po)(long) = outer;
    int i;
    CHECK_RC(bpt_thread_progress_stats(&ps), 0);
#if defined(BPT__X86_COUNT_ROUTE)
    route_on = ps.membarrier;
    printf("6. the stub's count route (x86-64)%s\n", route_on ? "" : ": pins fence (no membarrier), so none taken");
#else
    printf("6. no count route in this build's stub: every case through the C path\n");
#endif
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    CHECK(leaf(0) == 1, "leaf(0)");   /* this thread's record and page exist (claims 1-2 made them) */
    route_case("counted", 1000, 1, 0, 0, 0);
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    route_case("paused (NONE)", 100, 0, 0, 0, 0);
    CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    route_case("inside a pinned section (nested pin)", 10, 1, 10, 0, 1);
    word = bpt__load_relaxed_u64(&bpt__progress.pin_word);
    bpt__store_relaxed_u64(&bpt__progress.pin_word, word | BPT__PIN_FENCE);
    route_case("while pins fence (no membarrier)", 10, 1, 10, 0, 0);
    bpt__store_relaxed_u64(&bpt__progress.pin_word, word);
    rec = bpt__thread_self_or_null();
    CHECK(rec && bpt__load_relaxed_u64(&rec->state) == 0, "the thread is quiescent after the cases: %#llx",
          (unsigned long long)bpt__load_relaxed_u64(&rec->state));
    /* A waiter sleeps: the route counts, and the full path wakes it. */
    idle = bpt__load_relaxed_u32(&bpt__progress.futex);
    wakes = bpt__load_relaxed_u64(&bpt__progress.futex_wakes);
    bpt__store_relaxed_u32(&bpt__progress.futex, 1 | idle);
    route_case("a waiter sleeps", 1, 1, 0, 1, 0);
    CHECK(bpt__load_relaxed_u32(&bpt__progress.futex) == idle, "the sleeper was woken: futex word %#x",
          (unsigned)bpt__load_relaxed_u32(&bpt__progress.futex));
    CHECK(bpt__load_relaxed_u64(&bpt__progress.futex_wakes) == wakes + 1, "one wake");
    /* Under a return-traced frame: the full path counts (claim 4's case). */
    {
        route_mark m0 = route_now(), d;
        bpt_msg m[64];
        CHECK_RC(bpt_trace_pattern(s, "cp:outer/1", BPT_CALL | BPT_RETURN, NULL), 1);
        for (i = 0; i < 10; i++) CHECK(po(i) == (i + 1) * 2, "outer(%d)", i);
        CHECK_RC(bpt_trace_pattern(s, "cp:outer/1", BPT_OFF, NULL), 1);
        while (bpt_session_drain(s, m, 64) > 0) {}
        d = route_since(m0);
        printf("   under a return-traced frame: 10 calls of outer; entries: C path %lu, full path %lu (outer's "
               "and leaf's); leaf's count +%llu\n", d.c_path, d.full_path, (unsigned long long)d.count);
        CHECK(d.count == 10, "under a frame: count +%llu, expected 10", (unsigned long long)d.count);
        CHECK(d.c_path == (route_on ? 0u : 10u), "under a frame: the C path entered %lu times", d.c_path);
        CHECK(d.full_path <= 20 && d.full_path >= 10,
              "under a frame: the full path entered %lu times: leaf's 10 and outer's first ones", d.full_path);
    }
    /* Under a frame a longjmp left: the counted call goes on to the full
       path, which settles it (CP3): thrower's exception_from. */
    {
        long (*volatile pt)(long) = thrower, (*volatile pl)(long) = leaf;
        route_mark m0, d;
        int before = 0, after = 0, n;
        bpt_msg m[64];
        CHECK_RC(bpt_trace_pattern(s, "cp:thrower/1", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        if (!setjmp(route_jump)) (void)pt(1);
        while ((n = bpt_session_drain(s, m, 64)) > 0)
            for (i = 0; i < n; i++) before += m[i].type == BPT_MSG_EXCEPTION_FROM;
        m0 = route_now();
        CHECK(pl(1) == 2, "leaf(1) after the longjmp");
        d = route_since(m0);
        while ((n = bpt_session_drain(s, m, 64)) > 0)
            for (i = 0; i < n; i++) after += m[i].type == BPT_MSG_EXCEPTION_FROM && !strcmp(m[i].name, "thrower");
        printf("   a counted call after a longjmp left thrower's frame: exception_from %d before it, %d after; "
               "full path %lu; count +%llu\n", before, after, d.full_path, (unsigned long long)d.count);
        CHECK(before == 0 && after == 1, "the counted call settles the frame: exception_from %d before, %d after",
              before, after);
        CHECK(d.full_path == 1, "after a longjmp: the full path entered %lu times, expected 1", d.full_path);
        CHECK(d.count == 1, "counted once: +%llu", (unsigned long long)d.count);
        CHECK_RC(bpt_trace_pattern(s, "cp:thrower/1", BPT_OFF, NULL), 1);
    }
    /* The hint says COUNT, the active kind is another (as while a change
       is under way: the hint is COUNT if either generation counts, bp.c):
       the call goes to the full path, which sends the call record. */
    {
        int calls = 0, n;
        bpt_msg m[64];
        CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_COUNT | BPT_OFF, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_CALL, NULL), 1);
        while (bpt_session_drain(s, m, 64) > 0) {}
        fleaf->path_hint = BPT__HINT_COUNT;   /* nothing else runs: the set path is done */
        route_case("call trace under a COUNT hint", 1, 0, 0, 1, 0);
        while ((n = bpt_session_drain(s, m, 64)) > 0)
            for (i = 0; i < n; i++) calls += m[i].type == BPT_MSG_CALL && !strcmp(m[i].name, "leaf");
        CHECK(calls == 1, "call trace under a COUNT hint: %d call records, expected 1", calls);
        CHECK_RC(bpt_trace_pattern(s, "cp:leaf/1", BPT_CALL | BPT_OFF, NULL), 1);
    }
}

int main(void) {
    bpt_session_desc d;
    ffp8 = native_reg((void *)fp8, "cp", "fp8", 8);
    fint6 = native_reg((void *)int6, "cp", "int6", 6);
    fva = native_reg((void *)va_sum, "cp", "va_sum", 1);
    fleaf = native_reg((void *)leaf, "cp", "leaf", 1);
    fouter = native_reg((void *)outer, "cp", "outer", 1);
    fthrower = native_reg((void *)thrower, "cp", "thrower", 1);
    if (!ffp8 || !fint6 || !fva || !fleaf || !fouter || !fthrower) return CHECK_DONE();
    memset(&d, 0, sizeof d);
    CHECK_RC(bpt_session_create(&d, &s), 0);
    direct();
    arguments();
    fresh_threads();
    inside_return_trace();
    switches();
    route();
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no native entry, so no count path")
#endif

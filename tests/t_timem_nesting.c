/* t_timem_nesting: BPT_TEST_CONCURRENCY
   call_time under signal handlers that land inside bptrace's own updates
   of a thread's timing state (frames.c >>timem attribution, timem.c [H1]).
   Both cases failed before the fix (found by review); test points make
   the interleavings exact.
   1. A push pauses its caller: the caller's span is added to its time,
      then its start cleared. A handler landing between the two calls a
      timed function. Its walk must not pause that caller a second time
      (it charged the caller the same span twice: outer spun 20 ms, was
      charged 40), nor resume it at its return (the caller would be charged
      its callee's time). Through the time path (site_native.c, TM5) and
      through the full path (hints forced to it): outer charged what it
      spun, not twice.
   2. A charge nested two deep: the thread charges f's tables (making its
      table); a handler's charge of g's tables (another session) lands
      there and goes ahead, and a second handler nested in that one
      charges f's tables again. The mark of a charge named only the
      innermost tables, so the second handler's charge went ahead inside
      the thread's update of f's tables (a lost add, or a table grown and
      freed under the thread's feet): f counted twice. Now every open
      charge is marked: the second handler's charges of f (its call's and
      its return's) are dropped and counted in f's `lost`; the thread's
      call of f and the first handler's of g are counted.
   3. As 1, but the handler switches process and back (bpt_process_switch)
      instead of calling a timed function. The switch paused every frame
      of the old process but the one being filled, so it paused outer a
      second time (charged 40 ms for 20 spun; noted at an earlier stop and
      left): now a switch made by a handler that interrupted a push pauses
      nothing below that push, as case 1's walk does not.
   4. As 1, but the handler calls bpt_unwind_to with its own frame address
      (nothing was unwound). It took the frame being filled, whose stack
      pointer is not yet written, for a dead one and dropped it: inner's
      return then found no frame and aborted (found by review). Now it
      drops nothing, as a traced call's F0 does.
   5. A walk pauses a caller too: bpt_process_switch (and a fiber switch)
      pauses the frames of the process it leaves. A handler landing in
      that pause calls a timed function, whose push paused the same frame
      again: switcher spun 20 ms and was charged 40 (found by review). Now
      a handler's calls pause and resume nothing below a walk they
      interrupted, as below a push. */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include "timing_fixture.h"
#include <string.h>
#include <signal.h>

#if defined(BPT_NATIVE)

static volatile uint64_t spun;
BPT_TRACEABLE long leaf(long x) { return x + 1; }
BPT_TRACEABLE long inner(long x) { return x + 2; }
BPT_TRACEABLE long outer(long us) {
    long (*volatile pi)(long) = inner;
    spun += spin_for((uint64_t)us * 1000);
    return pi(us);
}
/* 5: the process switch's walk pauses switcher (the handler lands there). */
static volatile int arm_pause;
BPT_TRACEABLE long switcher(long us) {
    spun += spin_for((uint64_t)us * 1000);
    arm_pause = us > 0;
    bpt_process_switch(777);
    bpt_process_switch(0);
    return us;
}
BPT_TRACEABLE long f(long x) { return x + 3; }
BPT_TRACEABLE long g(long x) { return x + 4; }

static bpt_func *fleaf, *finner, *fouter, *ff, *fg, *fswitcher;
static bpt_session s, s2;

/* The test points: each armed for one hit (case 2: two, nested). */
static volatile int arm_charge;
static void t_test_point(const char *where) {
    if (arm_pause && !strcmp(where, "timem pause: the span added, the start not yet cleared")) {
        arm_pause = 0;
        raise(SIGUSR1);
    } else if (arm_charge && !strcmp(where, "timem_charge_new: marked")) {
        raise(arm_charge-- == 2 ? SIGUSR1 : SIGUSR2);
    }
}

static volatile long handler_calls;
static void call_leaf(int sig) { long (*volatile p)(long) = leaf; (void)sig; p(1); handler_calls++; }
static void call_g(int sig) { long (*volatile p)(long) = g; (void)sig; p(1); handler_calls++; }
static void call_f(int sig) { long (*volatile p)(long) = f; (void)sig; p(1); handler_calls++; }
static void switch_and_back(int sig) { (void)sig; bpt_process_switch(777); bpt_process_switch(0); handler_calls++; }
static volatile int unwound_total;
static void unwind_here(int sig) { (void)sig; unwound_total += bpt_unwind_to(__builtin_frame_address(0)); handler_calls++; }
static void on(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sigaction(sig, &sa, NULL);
}

static int pattern_in(bpt_session in, const char *p, unsigned flags) {
    int rc = bpt_trace_pattern(in, p, flags, NULL);
    CHECK(rc == 1, "bpt_trace_pattern(%s, 0x%x) = %d (%s)", p, flags, rc, bpt_last_error());
    return rc;
}

/* fn's call_time in session in: calls, ns; lost: its tables' dropped
   charges, read before the collection replaces them. */
static void time_of(bpt_session in, bpt_func *fn, uint64_t *calls, uint64_t *ns, uint64_t *lost) {
    bpt_info info;
    unsigned ix = bpt_active_bp_ix();
    bpt__GenericBp *gb;
    *lost = 0;
    for (gb = (bpt__GenericBp *)bpt__load_acquire_ptr(&fn->gen_bp); gb;
         gb = (bpt__GenericBp *)bpt__load_acquire_ptr(&gb->next))
        if (gb->session->id == in.id && bpt__timem_of(&gb->data[ix]))
            *lost = bpt__load_relaxed_u64(&bpt__timem_of(&gb->data[ix])->lost);
    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(in, fn, BPT_INFO_TIME, &info), 0);
    *calls = info.calls;
    *ns = info.time_ns;
}

/* 1. One round: outer spins us, then calls inner, whose push pauses outer
   with the handler landing in the middle. 1 when outer was charged
   within -5 %..+50 % of what it spun (twice what it spun before the fix). */
static int pause_round(int full, long us) {
    long (*volatile po)(long) = outer;
    uint64_t calls, ns, lost;
    pattern_in(s, "tn:outer/1", BPT_TIME);
    pattern_in(s, "tn:inner/1", BPT_TIME);
    pattern_in(s, "tn:leaf/1", BPT_TIME);
    bpt__thread *rec;
    if (full) finner->path_hint = fouter->path_hint = fleaf->path_hint = BPT__HINT_FULL;   /* the set path is idle */
    else CHECK(finner->path_hint == BPT__HINT_TIME, "the hint is TIME");
    spun = 0;
    CHECK(po(1) == 3, "outer(1)");   /* the thread's tables made: the push below takes the path asked for */
    /* The frames above the first as a thread's first calls find them:
       zeroed (a frame left there by an earlier call of the same session
       would be what the handler's walk finds first, and the race below
       would touch that dead frame instead of outer). */
    rec = bpt__thread_self_or_null();
    memset(&rec->shadow[BPT__STACK_NATIVE][1], 0, 4 * sizeof(bpt__frame));
    handler_calls = 0;
    arm_pause = 1;
    CHECK(po(us) == us + 2, "outer(%ld)", us);
    CHECK(!arm_pause && handler_calls == 1, "%s: the handler ran inside inner's push (%ld calls)",
          full ? "full path" : "time path", (long)handler_calls);
    time_of(s, fouter, &calls, &ns, &lost);
    printf("   %-10s outer charged %.3f ms for %.3f ms spun (%llu calls)\n", full ? "full path:" : "time path:",
           (double)ns / 1e6, (double)spun / 1e6, (unsigned long long)calls);
    return calls == 2 && ns >= spun * 95 / 100 && ns <= spun * 150 / 100;
}

static void pause_interrupted(void (*handler)(int), const char *what) {
    int full, round, ok;
    on(SIGUSR1, handler);
    printf("%s\n", what);
    for (full = 0; full < 2; full++) {
        for (round = 0, ok = 0; round < 5 && !ok; round++) ok = pause_round(full, 20000);
        CHECK(ok, "%s: outer charged what it spun (-5 %%..+50 %%), not twice, in one of 5 rounds",
              full ? "full path" : "time path");
    }
    pattern_in(s, "tn:outer/1", BPT_TIME | BPT_OFF);
    pattern_in(s, "tn:inner/1", BPT_TIME | BPT_OFF);
    pattern_in(s, "tn:leaf/1", BPT_TIME | BPT_OFF);
    signal(SIGUSR1, SIG_DFL);
}

/* 5. A handler's timed call inside the process switch's pause of switcher. */
static void walk_interrupted(void) {
    long (*volatile ps)(long) = switcher;
    uint64_t calls = 0, ns = 0, lost;
    int round, ok = 0;
    on(SIGUSR1, call_leaf);
    printf("5. switcher spins 20 ms, then switches process; a handler calls leaf while the switch pauses it\n");
    pattern_in(s, "tn:leaf/1", BPT_TIME);
    for (round = 0; round < 5 && !ok; round++) {
        pattern_in(s, "tn:switcher/1", BPT_TIME);
        CHECK(ps(0) == 0, "switcher(0)");   /* the thread's tables made */
        spun = 0;
        handler_calls = 0;
        CHECK(ps(20000) == 20000, "switcher(20000)");
        CHECK(!arm_pause && handler_calls == 1, "the handler ran inside the switch's pause (%ld calls)",
              (long)handler_calls);
        time_of(s, fswitcher, &calls, &ns, &lost);
        printf("   switcher charged %.3f ms for %.3f ms spun (%llu calls)\n", (double)ns / 1e6, (double)spun / 1e6,
               (unsigned long long)calls);
        ok = calls == 2 && ns >= spun * 95 / 100 && ns <= spun * 150 / 100;
    }
    CHECK(ok, "switcher charged what it spun (-5 %%..+50 %%), not twice, in one of 5 rounds");
    pattern_in(s, "tn:switcher/1", BPT_TIME | BPT_OFF);
    pattern_in(s, "tn:leaf/1", BPT_TIME | BPT_OFF);
    signal(SIGUSR1, SIG_DFL);
}

/* 2. A charge nested two deep. */
static void charge_two_deep(void) {
    long (*volatile pf)(long) = f;
    uint64_t fc, fns, flost, gc, gns, glost;
    on(SIGUSR1, call_g);
    on(SIGUSR2, call_f);
    pattern_in(s, "tn:f/1", BPT_TIME);
    pattern_in(s2, "tn:g/1", BPT_TIME);
    handler_calls = 0;
    arm_charge = 2;   /* the thread's first charge of f makes its table: the test point is hit */
    CHECK(pf(1) == 4, "f(1)");
    time_of(s, ff, &fc, &fns, &flost);
    time_of(s2, fg, &gc, &gns, &glost);
    printf("2. f: %llu counted, %llu lost; g (the first handler's): %llu counted, %llu lost; %ld handler calls\n",
           (unsigned long long)fc, (unsigned long long)flost, (unsigned long long)gc, (unsigned long long)glost,
           (long)handler_calls);
    CHECK(arm_charge == 0 && handler_calls == 2, "both handlers ran, the second inside the first's charge (armed "
          "%d, %ld handler calls)", arm_charge, (long)handler_calls);
    CHECK(fc == 1 && flost == 2, "f: the thread's call counted, once; the second handler's charges of f's tables "
          "(its call's and its return's) dropped and counted (%llu counted, %llu lost)", (unsigned long long)fc,
          (unsigned long long)flost);
    CHECK(gc == 1 && glost == 0, "g: the first handler's call counted, nothing lost (%llu counted, %llu lost)",
          (unsigned long long)gc, (unsigned long long)glost);
    arm_charge = 0;
    pattern_in(s, "tn:f/1", BPT_TIME | BPT_OFF);
    pattern_in(s2, "tn:g/1", BPT_TIME | BPT_OFF);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
}

int main(void) {
    bpt_clock clk;
    bpt_session_desc d2;
    fleaf = native_reg((void *)leaf, "tn", "leaf", 1);
    finner = native_reg((void *)inner, "tn", "inner", 1);
    fouter = native_reg((void *)outer, "tn", "outer", 1);
    ff = native_reg((void *)f, "tn", "f", 1);
    fg = native_reg((void *)g, "tn", "g", 1);
    fswitcher = native_reg((void *)switcher, "tn", "switcher", 1);
    if (!fleaf || !finner || !fouter || !ff || !fg) return CHECK_DONE();
    CHECK_RC(bpt_clock_info(&clk), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    memset(&d2, 0, sizeof d2);
    d2.name = "second";
    CHECK_RC(bpt_session_create(&d2, &s2), 0);
    if (strcmp(clk.source, "clock_gettime") == 0)
        printf("1. the clock is clock_gettime here: the time path declines every hit (TM3); both rounds take the "
               "full path\n");
    pause_interrupted(call_leaf, "1. outer spins 20 ms, then calls inner; a handler calls leaf while inner's push "
                      "pauses outer");
    charge_two_deep();
    pause_interrupted(switch_and_back, "3. as 1, but the handler switches process and back");
    pause_interrupted(unwind_here, "4. as 1, but the handler calls bpt_unwind_to (nothing unwound)");
    CHECK(unwound_total == 0, "bpt_unwind_to from the handler dropped %d frames (none is dead)", unwound_total);
    walk_interrupted();
    CHECK_RC(bpt_session_destroy(s2), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
static void t_test_point(const char *where) { (void)where; }
NATIVE_UNSUPPORTED_MAIN("no native entry, so no native frames to time")
#endif

/* t_time_path: BPT_TEST_CONCURRENCY
   The time path of native entries and the timed return (>>time path in
   site_native.c, F2 in frames.c; issue #16): a function whose active
   generation times calls (call_time) for one session by the wall clock,
   and does nothing else (the TIME shortcut, breakpoint.h), is counted and
   given its return frame by the entry stub with the integer registers
   alone, and its return charges its own time without the general frame
   end. Both must do what the full path and bpt__frame_end do, and leave
   everything else untouched to them.
   Claims:
   1. The path called directly on a made-up stub frame:
      - DONE: the call counted, the frame the full path pushes (the
        original return address, the entry sp, the session, BPT_TIME, its
        start time), the trampoline in the return slot; the return through
        it: the original address, the frame popped, the time between
        charged; a start ahead of the clock's reading (a signal handler
        restarted the frame after its thread read the clock) is a span of
        0, not a huge one;
      - under a timing caller of the same session: the caller paused at
        the call, resumed at the return, and the callee's time not the
        caller's;
      - FULL with nothing changed (no count, no frame, the slot as it was)
        when the thread has no table yet (the full path makes it), a
        charge of the same tables is open (a handler nested on it [H1]),
        the clock is not the CPU's counter, a tail call, a full shadow
        stack, a frame being pushed, a dead frame below (F0), a caller of
        another session (the full path's walk), a generation that is not
        TIME (call_time by CPU time, with call_memory, with call_count),
        and the call path and call-return path given a TIME function;
      - DONE with nothing done when nothing is active (NONE); but FULL,
        in all three short paths, when a dead frame lies below (F0 is the
        full path's, as the count path's CP3 has it; the three returned
        DONE, and the frame's exception_from waited for a later hit;
        found by review).
   2. Through the stub, nested timed functions (outer spins, then calls
      inner, which spins twice as long) by the short paths and with the
      hints set to the full path: the same calls counted, exactly; each
      function charged its own time, not its callee's.
   3. A SIGALRM handler calls a timed function every 50 us while its
      thread calls it 200,000 times, landing inside the time path and the
      timed return: the thread's calls all counted; each of the handler's
      counted, or its charge dropped by the nested update [H1] and counted
      in bpt__BpTimem.lost; no frame left behind.
   4. A process switch inside a timed function: the callee's calls and
      time go to the process it ran in, the caller's to its own.
   tests/count_path_check.sh checks the compiled path itself. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include "timing_fixture.h"
#include <string.h>

#if defined(BPT_NATIVE)

static volatile uint64_t spun_inner, spun_outer;
BPT_TRACEABLE long leaf(long x) { return x + 1; }
BPT_TRACEABLE long inner(long us) { spun_inner += spin_for((uint64_t)us * 1000); return us; }
BPT_TRACEABLE long outer(long us) {
    long (*volatile pi)(long) = inner;
    spun_outer += spin_for((uint64_t)us * 1000);
    return pi(2 * us) + 1;
}
BPT_TRACEABLE long in_other_process(long n) {
    long (*volatile p)(long) = leaf;
    long i, acc = 0;
    bpt_process_switch(2);
    for (i = 0; i < n; i++) acc += p(i);
    bpt_process_switch(1);
    return acc;
}

static bpt_func *fleaf, *finner, *fouter, *fother;
static bpt_session s, scpu;

static int pattern_in(bpt_session in, const char *p, unsigned flags) {
    int rc = bpt_trace_pattern(in, p, flags, NULL);
    CHECK(rc == 1, "bpt_trace_pattern(%s, 0x%x) = %d (%s)", p, flags, rc, bpt_last_error());
    return rc;
}
static int pattern(const char *p, unsigned flags) { return pattern_in(s, p, flags); }

/* f's call_time in s: calls and ns, all processes, or process's (not 0).
   A collection: the tables are fresh afterwards. */
static void time_of(const bpt_func *f, uint64_t process, uint64_t *calls, uint64_t *ns) {
    bpt_info_process procs[8];
    bpt_info info;
    uint32_t i;
    memset(&info, 0, sizeof info);
    info.procs = procs;
    info.procs_cap = 8;
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &info), 0);
    *calls = info.calls;
    *ns = info.time_ns;
    if (process)
        for (i = 0, *calls = *ns = 0; i < info.nprocs && i < 8; i++)
            if (procs[i].process == process) { *calls = procs[i].calls; *ns = procs[i].time_ns; }
}

/* The tables the active generation of f charges (its one session's). */
static bpt__BpTimem *tables_of(const bpt_func *f) {
    unsigned ix = bpt_active_bp_ix();
    const bpt__GenericBp *g = (const bpt__GenericBp *)f->shortcut[ix].data;
    return g ? bpt__timem_of(&g->data[ix]) : NULL;
}

/* The path as the stub calls it: a made-up stub frame whose return slot
   (x86-64: the word at the entry sp; aarch64: x9 in the frame) holds ret,
   and the entry sp above it. */
enum { FRAME_WORDS = 48, ENTRY_AT = 40 };
static uint64_t fake[FRAME_WORDS];
static uintptr_t fake_sp(void) { return (uintptr_t)&fake[ENTRY_AT]; }
static uintptr_t *fake_slot(void) {
#if defined(__x86_64__)
    return (uintptr_t *)&fake[ENTRY_AT];
#else
    return (uintptr_t *)&fake[9];
#endif
}
static int time_path_at(bpt_func *f, uintptr_t ret) {
    memset(fake, 0, sizeof fake);
    *fake_slot() = ret;
    return bpt__native_time_path(f, fake, fake_sp());
}

/* The return through the top frame, as the trampoline makes it. */
static uintptr_t return_now(void) {
    bpt__retregs rr;
    memset(&rr, 0, sizeof rr);
    return bpt__native_return(fake_sp(), &rr);
}

/* leaf's table for this thread, made by a call through the stub (the full
   path's first charge after a collection), and the calls counted in it. */
static void table_made(void) {
    long (*volatile p)(long) = leaf;
    CHECK(p(1) == 2, "leaf(1)");
}

static uint64_t calls_in_table(bpt__thread *rec) {
    bpt__BpTimem *t = tables_of(fleaf);
    bpt__timem_table *tab = t ? (bpt__timem_table *)bpt__load_relaxed_ptr(&t->table[rec->index]) : NULL;
    bpt__timem_cell *c = tab ? bpt__timem_cell_find(tab, rec->process) : NULL;
    return c ? c->calls : 0;
}

/* A declined case: FULL, and nothing changed. */
static void declines(const char *what, bpt__thread *rec, int r, uint32_t depth, uintptr_t slot) {
    printf("   %-52s %d, depth %u\n", what, r, rec->shadow_depth[BPT__STACK_NATIVE]);
    CHECK(r == BPT__PATH_FULL, "%s: %d, expected BPT__PATH_FULL", what, r);
    CHECK(rec->shadow_depth[BPT__STACK_NATIVE] == depth && *fake_slot() == slot, "%s: no frame pushed, the slot as it was",
          what);
}

/* A frame at index d of the thread's native shadow stack, made by hand:
   complete, this fiber's, this process's, one session (id) with actions;
   sp above every made-up entry sp unless given. */
static bpt__frame *frame_at(bpt__thread *rec, uint32_t d, uint64_t id, unsigned actions, uintptr_t sp) {
    bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
    memset(fr, 0, sizeof *fr);
    fr->sp = sp;
    fr->ret = 0x5555;
    fr->fiber = rec->fiber;
    fr->process = rec->process;
    fr->f = fouter;
    fr->fid = fouter->fid;
    fr->nsess = 1;
    fr->sess[0].id = id;
    fr->sess[0].actions = actions;
    return fr;
}

/* 1. The path called directly. */
static void direct(void) {
    bpt__thread *rec;
    const bpt__frame *fr;
    bpt__frame *caller;
    uint64_t c0, c1, ns0, ns1, before, spun, caller_since, callee_since;
    uint64_t ms_ticks = bpt__clock.cal.hz / 1000;   /* calibrated: the module registered, thread progress is up */
    uintptr_t to;
    int r;
    printf("1. bpt__native_time_path called directly\n");
    pattern("tp:leaf/1", BPT_TIME);
    CHECK(fleaf->path_hint == BPT__HINT_TIME, "call_time alone: the hint is TIME (%u)", fleaf->path_hint);
    CHECK(fleaf->shortcut[bpt_active_bp_ix()].kind == BPT__SHORTCUT_TIME, "the shortcut is TIME");
    table_made();
    rec = bpt__thread_self_or_null();
    CHECK(rec != NULL && rec->shadow[BPT__STACK_NATIVE] != NULL, "the thread has its record and shadow stack");
    if (!rec || !rec->shadow[BPT__STACK_NATIVE]) return;
    CHECK(rec->shadow_depth[BPT__STACK_NATIVE] == 0, "no frame left by leaf's own call");

    /* DONE, the frame, the return. */
    before = calls_in_table(rec);
    r = time_path_at(fleaf, 0xabcd0);
    fr = rec->shadow_depth[BPT__STACK_NATIVE] ? &rec->shadow[BPT__STACK_NATIVE][0] : NULL;
    printf("   TIME: %d, depth %u, calls %llu -> %llu, slot is the trampoline %d\n", r,
           rec->shadow_depth[BPT__STACK_NATIVE], (unsigned long long)before, (unsigned long long)calls_in_table(rec),
           *fake_slot() == BPT__RETURN_TRAMPOLINE);
    CHECK(r == BPT__PATH_DONE, "TIME: %d, expected BPT__PATH_DONE", r);
    CHECK(calls_in_table(rec) == before + 1, "the call counted once in the thread's table");
    CHECK(fr && rec->shadow_depth[BPT__STACK_NATIVE] == 1 && fr->ret == 0xabcd0 && fr->sp == fake_sp() &&
              fr->nsess == 1 && fr->f == fleaf && fr->fid == fleaf->fid && fr->process == rec->process &&
              fr->sess[0].id == s.id &&
              (fr->sess[0].actions & (BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU)) == BPT_TIME &&
              fr->sess[0].since != 0 && fr->sess[0].own_ns == 0 && !fr->gone && !fr->unhooked,
          "the frame the full path pushes, its time started");
    CHECK(*fake_slot() == BPT__RETURN_TRAMPOLINE, "the return slot holds the trampoline");
    time_of(fleaf, 0, &c0, &ns0);   /* a collection: the frame's charge goes to the fresh tables */
    spun = spin_for(2000000);
    to = return_now();
    time_of(fleaf, 0, &c1, &ns1);
    printf("   the return: to %#lx, depth %u; charged %.3f ms for %.3f ms spun\n", (unsigned long)to,
           rec->shadow_depth[BPT__STACK_NATIVE], (double)(ns1 - ns0) / 1e6, (double)spun / 1e6);
    CHECK(to == 0xabcd0 && rec->shadow_depth[BPT__STACK_NATIVE] == 0, "the return goes to the original address and pops");
    CHECK(c1 == c0 && ns1 - ns0 >= spun * 95 / 100, "the return charges the time since the call (no call)");

    /* Under a caller of the same session that times its call. Frames keep
       their start in the clock's ticks (frames.c). */
    table_made();
    caller = frame_at(rec, 0, s.id, BPT_TIME, UINTPTR_MAX);
    caller->sess[0].since = caller_since = bpt__now_ticks() - ms_ticks;   /* it started 1 ms ago */
    rec->shadow_depth[BPT__STACK_NATIVE] = 1;
    r = time_path_at(fleaf, 0xabcd1);
    callee_since = rec->shadow[BPT__STACK_NATIVE][1].sess[0].since;
    printf("   under a timing caller: %d, depth %u, caller paused %d with %.3f ms own\n", r,
           rec->shadow_depth[BPT__STACK_NATIVE], caller->sess[0].since == 0, (double)caller->sess[0].own_ns / 1e6);
    CHECK(r == BPT__PATH_DONE && rec->shadow_depth[BPT__STACK_NATIVE] == 2, "DONE, a frame above the caller's");
    CHECK(caller->sess[0].since == 0 && caller->sess[0].own_ns >= 999000 && callee_since >= caller_since + ms_ticks,
          "the caller paused at the callee's start, charged the 1 ms it ran");
    spun = spin_for(1000000);
    to = return_now();
    CHECK(to == 0xabcd1 && rec->shadow_depth[BPT__STACK_NATIVE] == 1, "the return pops the callee's frame alone");
    CHECK(caller->sess[0].since >= callee_since + ms_ticks * spun / 1000000 * 95 / 100 && caller->sess[0].own_ns < 2000000,
          "the caller resumed at the return, the callee's time not the caller's");
    rec->shadow_depth[BPT__STACK_NATIVE] = 0;

    /* Starts ahead of the clock's reading, as when a signal handler
       restarted a frame after its thread read the clock: a span of 0, not
       a negative one converted to a huge one. */
    table_made();
    caller = frame_at(rec, 0, s.id, BPT_TIME, UINTPTR_MAX);
    caller->sess[0].since = bpt__now_ticks() + 1000 * ms_ticks;   /* 1 s ahead */
    rec->shadow_depth[BPT__STACK_NATIVE] = 1;
    r = time_path_at(fleaf, 0xabce0);
    printf("   a caller started ahead of the call's reading: %d, caller's own time %llu ns\n", r,
           (unsigned long long)caller->sess[0].own_ns);
    CHECK(r == BPT__PATH_DONE && caller->sess[0].since == 0 && caller->sess[0].own_ns == 0,
          "the caller paused with a span of 0");
    rec->shadow[BPT__STACK_NATIVE][1].sess[0].since = bpt__now_ticks() + 1000 * ms_ticks;
    time_of(fleaf, 0, &c0, &ns0);
    to = return_now();
    time_of(fleaf, 0, &c1, &ns1);
    printf("   a callee started ahead of the return's reading: charged %llu ns\n", (unsigned long long)(ns1 - ns0));
    CHECK(to == 0xabce0 && ns1 - ns0 == 0, "the return charged a span of 0");
    rec->shadow_depth[BPT__STACK_NATIVE] = 0;

    /* Declined, nothing changed. */
    time_of(fleaf, 0, &c0, &ns0);   /* fresh tables: none for this thread yet */
    declines("no table yet (the full path makes it):", rec, time_path_at(fleaf, 0xabcd2), 0, 0xabcd2);
    table_made();
    before = calls_in_table(rec);
    rec->timem_charging[0] = tables_of(fleaf);   /* as a handler nested in a charge of them sees it */
    rec->timem_depth = 1;
    declines("a charge of the same tables open [H1]:", rec, time_path_at(fleaf, 0xabcd2), 0, 0xabcd2);
    rec->timem_depth = 0;
    {
        uint32_t on = bpt__load_relaxed_u32(&bpt__clock.on_counter);
        bpt__store_relaxed_u32(&bpt__clock.on_counter, 0);   /* as where the clock is clock_gettime */
        declines("the clock not the CPU's counter:", rec, time_path_at(fleaf, 0xabcd2), 0, 0xabcd2);
        bpt__store_relaxed_u32(&bpt__clock.on_counter, on);
    }
    declines("a tail call (the trampoline in the slot):", rec, time_path_at(fleaf, BPT__RETURN_TRAMPOLINE), 0,
             BPT__RETURN_TRAMPOLINE);
    frame_at(rec, BPT_SHADOW_FRAMES - 1, s.id, BPT_TIME, UINTPTR_MAX);
    rec->shadow_depth[BPT__STACK_NATIVE] = BPT_SHADOW_FRAMES;
    declines("the shadow stack full:", rec, time_path_at(fleaf, 0xabcd3), BPT_SHADOW_FRAMES, 0xabcd3);
    frame_at(rec, 0, s.id, BPT_TIME, UINTPTR_MAX);
    rec->shadow_depth[BPT__STACK_NATIVE] = 1;
    rec->shadow_filling[BPT__STACK_NATIVE] = 1;   /* as a handler sees the frame its thread is pushing */
    declines("a frame being pushed:", rec, time_path_at(fleaf, 0xabcd4), 1, 0xabcd4);
    rec->shadow_filling[BPT__STACK_NATIVE] = 0;
    frame_at(rec, 0, s.id, BPT_TIME, fake_sp() - 64);   /* below this call's entry sp: left by a longjmp */
    declines("a dead frame below (F0 must settle it):", rec, time_path_at(fleaf, 0xabcd5), 1, 0xabcd5);
    frame_at(rec, 0, s.id + 1000, BPT_TIME, UINTPTR_MAX);
    declines("a caller of another session (the walk):", rec, time_path_at(fleaf, 0xabcd6), 1, 0xabcd6);
    frame_at(rec, 0, s.id, BPT_TIME, UINTPTR_MAX)->process = rec->process + 1;
    declines("a caller in another process (the walk):", rec, time_path_at(fleaf, 0xabcd7), 1, 0xabcd7);
    rec->shadow_depth[BPT__STACK_NATIVE] = 0;
    CHECK(calls_in_table(rec) == before, "no declined try counted a call");

    *fake_slot() = 0xabcd8;
    declines("TIME given to the call path:", rec, bpt__native_call_path(fleaf, fake, fake_sp()), 0, 0xabcd8);
    declines("TIME given to the call-return path:", rec, bpt__native_call_return_path(fleaf, fake, fake_sp()), 0,
             0xabcd8);

    pattern_in(scpu, "tp:leaf/1", BPT_TIME);
    CHECK(fleaf->shortcut[bpt_active_bp_ix()].kind == BPT__SHORTCUT_WALK, "two sessions: WALK");
    pattern("tp:leaf/1", BPT_TIME | BPT_OFF);
    CHECK(fleaf->shortcut[bpt_active_bp_ix()].kind == BPT__SHORTCUT_ONE && fleaf->path_hint == BPT__HINT_FULL,
          "call_time by CPU time: ONE, the full path at once");
    declines("call_time by CPU time (ONE):", rec, time_path_at(fleaf, 0xabcd9), 0, 0xabcd9);
    pattern_in(scpu, "tp:leaf/1", BPT_TIME | BPT_OFF);
    pattern("tp:leaf/1", BPT_TIME | BPT_MEMORY);
    CHECK(fleaf->shortcut[bpt_active_bp_ix()].kind == BPT__SHORTCUT_ONE, "call_time and call_memory: ONE");
    declines("call_time and call_memory (ONE):", rec, time_path_at(fleaf, 0xabcda), 0, 0xabcda);
    pattern("tp:leaf/1", BPT_MEMORY | BPT_OFF);
    pattern("tp:leaf/1", BPT_COUNT);
    CHECK(fleaf->shortcut[bpt_active_bp_ix()].kind == BPT__SHORTCUT_ONE, "call_time and call_count: ONE");
    declines("call_time and call_count (ONE):", rec, time_path_at(fleaf, 0xabcdb), 0, 0xabcdb);
    pattern("tp:leaf/1", BPT_COUNT | BPT_TIME | BPT_OFF);
    r = time_path_at(fleaf, 0xabcdc);
    printf("   nothing active (NONE): %d, depth %u\n", r, rec->shadow_depth[BPT__STACK_NATIVE]);
    CHECK(r == BPT__PATH_DONE && rec->shadow_depth[BPT__STACK_NATIVE] == 0 && *fake_slot() == 0xabcdc,
          "NONE: DONE with nothing done");
    frame_at(rec, 0, s.id, BPT_TIME, fake_sp() - 64);   /* left by a longjmp */
    rec->shadow_depth[BPT__STACK_NATIVE] = 1;
    declines("NONE, a dead frame below (F0), the time path:", rec, time_path_at(fleaf, 0xabcdd), 1, 0xabcdd);
    declines("NONE, a dead frame below, the call path:", rec, bpt__native_call_path(fleaf, fake, fake_sp()), 1,
             0xabcdd);
    declines("NONE, a dead frame below, the call-return path:", rec,
             bpt__native_call_return_path(fleaf, fake, fake_sp()), 1, 0xabcdd);
    rec->shadow_depth[BPT__STACK_NATIVE] = 0;
}

/* 2. Nested timed functions through the stub, the short paths against the
   full path. Each round: restart the tables, call outer(us) n times, read
   the calls and own times. Accuracy is against the clock on a shared
   machine (and qemu): a round in which the thread was preempted shows
   more time than it spun, so up to 5 rounds, one within bounds passes. */
static int nested_round(int full, long n, long us) {
    long (*volatile po)(long) = outer;
    uint64_t ci, co, ni, no, si, so;
    long i;
    int ok;
    pattern("tp:inner/1", BPT_TIME);
    pattern("tp:outer/1", BPT_TIME);
    if (full) finner->path_hint = fouter->path_hint = BPT__HINT_FULL;   /* the set path is idle */
    else CHECK(finner->path_hint == BPT__HINT_TIME && fouter->path_hint == BPT__HINT_TIME, "the hints are TIME");
    spun_inner = spun_outer = 0;
    for (i = 0; i < n; i++) CHECK(po(us) == 2 * us + 1, "outer(%ld)", us);
    si = spun_inner;
    so = spun_outer;
    time_of(finner, 0, &ci, &ni);
    time_of(fouter, 0, &co, &no);
    ok = ci == (uint64_t)n && co == (uint64_t)n;
    CHECK(ok, "%s: calls counted exactly: inner %llu, outer %llu of %ld", full ? "full path" : "short paths",
          (unsigned long long)ci, (unsigned long long)co, n);
    printf("   %-12s inner %.3f ms own for %.3f spun, outer %.3f ms own for %.3f spun\n", full ? "full path:" : "short paths:",
           (double)ni / 1e6, (double)si / 1e6, (double)no / 1e6, (double)so / 1e6);
    return ok && ni >= si * 95 / 100 && ni <= si * 110 / 100 && no >= so * 95 / 100 && no <= so * 110 / 100;
}

static void nested(void) {
    int full, round, ok;
    printf("2. outer spins 200 us, then calls inner, which spins 400 us; 20 calls a round\n");
    pattern("tp:inner/1", BPT_TIME);
    pattern("tp:outer/1", BPT_TIME);
    for (full = 0; full < 2; full++) {
        for (round = 0, ok = 0; round < 5 && !ok; round++) ok = nested_round(full, 20, 200);
        CHECK(ok, "%s: each function charged its own time (within -5 %%..+10 %% of what it spun) in one of 5 rounds",
              full ? "full path" : "short paths");
    }
    pattern("tp:inner/1", BPT_TIME | BPT_OFF);
    pattern("tp:outer/1", BPT_TIME | BPT_OFF);
}

/* 3. A signal handler's calls on a thread in the time path and the timed return. */
static volatile long handler_calls;
static void on_alarm(int sig) {
    long (*volatile p)(long) = leaf;
    (void)sig;
    p(-1);
    handler_calls++;
}

static void signals(void) {
    long (*volatile p)(long) = leaf;
    long i, calls = check_scale(200000), bad = 0;
    bpt__thread *rec;
    uint64_t c, ns, lost;
    pattern("tp:leaf/1", BPT_TIME);
    handler_calls = 0;
    alarms_every(on_alarm, 50);
    for (i = 0; i < calls; i++) bad += p(i) != i + 1;
    alarms_every(on_alarm, 0);
    lost = bpt__load_relaxed_u64(&tables_of(fleaf)->lost);   /* before the collection replaces them */
    time_of(fleaf, 0, &c, &ns);
    rec = bpt__thread_self_or_null();
    printf("3. %ld calls with a SIGALRM handler calling leaf every 50 us: %llu counted, the handler's %ld calls, "
           "%llu charges lost\n", calls, (unsigned long long)c, (long)handler_calls, (unsigned long long)lost);
    CHECK(bad == 0, "%ld wrong results", bad);
    CHECK(c >= (uint64_t)calls && c <= (uint64_t)(calls + handler_calls) && c + lost >= (uint64_t)(calls + handler_calls),
          "the thread's calls all counted; the handler's counted or lost: %llu counted, %llu lost, %ld + %ld calls",
          (unsigned long long)c, (unsigned long long)lost, calls, (long)handler_calls);
    CHECK(rec && rec->shadow_depth[BPT__STACK_NATIVE] == 0, "no frame left behind");
    pattern("tp:leaf/1", BPT_TIME | BPT_OFF);
}

/* 4. A process switch inside a timed function. */
static void processes(void) {
    long (*volatile p)(long) = in_other_process;
    uint64_t c1, ns1, c2, ns2, o1, ons1, o2, ons2;
    long n = 1000;
    bpt_process_switch(1);
    pattern("tp:leaf/1", BPT_TIME);
    pattern("tp:in_other_process/1", BPT_TIME);
    CHECK(p(n) == n * (n + 1) / 2, "in_other_process(%ld)", n);
    bpt_process_switch(0);
    time_of(fleaf, 1, &c1, &ns1);
    time_of(fleaf, 2, &c2, &ns2);
    time_of(fother, 1, &o1, &ons1);
    time_of(fother, 2, &o2, &ons2);
    printf("4. leaf: process 1 %llu calls, process 2 %llu calls; in_other_process: process 1 %llu, process 2 %llu\n",
           (unsigned long long)c1, (unsigned long long)c2, (unsigned long long)o1, (unsigned long long)o2);
    CHECK(c1 == 0 && c2 == (uint64_t)n && o1 == 1 && o2 == 0,
          "leaf's calls in process 2, exactly; in_other_process's call in process 1");
    CHECK(ns2 > 0 && ons1 > 0, "time charged to both");
    pattern("tp:leaf/1", BPT_TIME | BPT_OFF);
    pattern("tp:in_other_process/1", BPT_TIME | BPT_OFF);
}

int main(void) {
    bpt_clock clk;
    bpt_session_desc dcpu;
    fleaf = native_reg((void *)leaf, "tp", "leaf", 1);
    finner = native_reg((void *)inner, "tp", "inner", 1);
    fouter = native_reg((void *)outer, "tp", "outer", 1);
    fother = native_reg((void *)in_other_process, "tp", "in_other_process", 1);
    if (!fleaf || !finner || !fouter || !fother) return CHECK_DONE();
    CHECK_RC(bpt_clock_info(&clk), 0);
    if (strcmp(clk.source, "clock_gettime") == 0)
        CHECK_SKIP("the clock is clock_gettime here: the time path declines every hit (TM3)");
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    memset(&dcpu, 0, sizeof dcpu);
    dcpu.name = "cpu";
    dcpu.time_cpu = 1;
    CHECK_RC(bpt_session_create(&dcpu, &scpu), 0);
    direct();
    nested();
    signals();
    processes();
    CHECK_RC(bpt_session_destroy(scpu), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no native entry, so no time path")
#endif

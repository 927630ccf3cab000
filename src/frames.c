/* frames.c: return_from, exception_from and return_to, as
   BEAM's return_trace and exception_trace frames.

   BEAM pushes a return_trace frame on the process stack when a match spec
   asks for it; the frame's code sends return_from when the call returns, and
   a throw that finds it while scanning the stack sends exception_from.
   Native code has no room on its stack for such a frame, so bptrace keeps it
   on a per-thread shadow stack and makes the call return through it:

   F0. Settle (bpt__native_settle, before a native hit's messages): frames
      at or below the new call's stack pointer, on the same stack, were
      left by a longjmp or a throw: exception_from, newest first.
   F1. Entry (bpt__native_frame_push, from the entry handler): save the
      caller's return address in a shadow frame, with the stack pointer at
      entry, which names the frame, and write the return trampoline's
      address in its place (x86-64: the slot the call pushed; aarch64: x9,
      which the stub moves back to x30). Once per call, however many
      sessions asked: the frame lists them. A call that asks for return_from
      alone, or call_time alone, for one session, gets the same frame from
      the entry stub's call-return path or time path (site_native.c;
      bpt__native_frame_push_plain, below).
   F2. Return (bpt__native_return, from the trampoline): find the newest
      frame whose stack pointer is the returning one. Frames above it were
      unwound (longjmp, a host's throw) without returning: exception_from,
      newest first. Then return_from, and return_to once the chain of tail
      calls sharing that stack pointer ends. Continue at the original
      address. The common return, the top frame of one session with no
      tail call and no return_to, copies out only what it sends
      (bpt__native_return_one), or, when it asks for return_from alone,
      writes that straight into the thread's chunk (the plain return,
      bpt__native_return_plain, PR1-PR3), or, when it only times the
      call, charges its own time and resumes its caller at a look (the
      timed return, bpt__native_return_timed, TR1-TR5): those two are
      taken first, by the return route (RR1-RR4, in bpt__native_return);
      the rest go the general way (bpt__native_return_chain).
   F3. Unwind (bpt_unwind_to): the host says how far it unwound.
   Every step looks only at the frames of the stack the thread runs on now:
   a thread that switches stacks (fibers.c) tags each frame with its
   stack's tag, and a frame that ends under another stack's live frames is
   left as a tombstone (gone), dropped when it reaches the top.

   A frame is reserved (depth + 1) before it is filled, and copied out
   before it is released (depth - 1), so that a signal handler nested on
   the same thread, which pushes and pops above it, never touches it.
   While it is filled it is marked (shadow_filling): its stack pointer is
   a previous frame's until it is set, and a handler that settled or timed
   by it would end a live frame (whose return then found no frame: an
   abort) or charge the wrong one. A handler's own push saves the mark and
   puts it back, so the mark survives any nesting [H1].
   Frames hold session weak ids, never session pointers: a frame that
   outlives its session finds no session and sends nothing.

   What the swap costs: an unwinder (a C++ throw) that met the trampoline
   where a return address should be would find no unwind information for
   it and call std::terminate. unwind.c stands between the C++ runtime and
   the unwinder and puts the original addresses back for the unwind (U1,
   U2); longjmp needs no unwind information (F0, F2 end the frames it
   skipped). VM frames use the same frames on a second stack, named by a
   token the VM keeps. */
#include "internal.h"

/* A session that could not get a frame (the hit already serves
   BPT_FRAME_SESSIONS sessions, the shadow stack is full, or the VM keeps no
   frames) has the call's return untraced, counted. */
static BPT__INTREGS void bpt__frame_skipped(bpt__session *s) { bpt__fetch_add_u64(&s->frames_skipped, 1); }

/* The hit's entry for session s (call trace and call_time of one session
   share one), or -1. */
static BPT__INTREGS int bpt__hit_want_of(const bpt__hit *h, const bpt__session *s) {
    uint32_t i;
    for (i = 0; i < h->nwant; i++)
        if (h->want[i].id == s->id) return (int)i;
    return -1;
}

BPT__HOT void bpt__hit_want_frame(bpt__hit *h, bpt__session *s, unsigned actions, uint8_t rettype) {
    bpt__frame_session *w;
    int i;
    actions &= BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU;   /* a kind that wants a frame keeps its bit */
    h->wanted |= actions;
    if ((i = bpt__hit_want_of(h, s)) >= 0) {   /* call trace and call_time of one session: one entry */
        h->want[i].actions |= actions;
        if (actions & (BPT_RETURN | BPT_EXCEPTION)) h->want[i].rettype = rettype;
        return;
    }
    if (h->nwant == BPT_FRAME_SESSIONS) { bpt__frame_skipped(s); return; }
    w = &h->want[h->nwant];
    w->id = s->id;
    w->actions = actions;
    w->rettype = rettype;
    w->since = w->own_ns = 0;
    w->mem = 0;
    h->want_s[h->nwant++] = s;
}

/* Whether a frame that session s wants of this hit now would be pushed:
   the site keeps frames (a VM hit has a token), the hit has room for s,
   and the shadow stack is not full. The call record says when it would
   not (BPT__REC_CALL_NO_RETURN): no return_from will end that call. Not
   foreseen, and counted as skipped at the push as before: a signal
   handler that fills the stack in between, a stack that cannot be
   mapped, a native tail call with no frame to share. */
BPT__HOT int bpt__hit_frame_room(const bpt__hit *h, const bpt__session *s) {
    int stack = h->f->kind == BPT__SITE_VM ? BPT__STACK_VM : BPT__STACK_NATIVE;
    if (h->no_frame || h->rec->shadow_depth[stack] >= BPT_SHADOW_FRAMES) return 0;
    return h->nwant < BPT_FRAME_SESSIONS || bpt__hit_want_of(h, s) >= 0;   /* room, or its entry to add to */
}

/* A shadow stack's first use: one mapping per thread record (BPT_HIT_MAP:
   the call may be a traced malloc's), kept for its life (records are
   reused, never freed), so a thread that exits with live frames leaks
   nothing. Out of line: the mapping's call would make every reserve save
   registers. 0: no memory. */
BPT__NOINLINE int bpt__frame_stack_map(bpt__thread *rec, int stack) {
    rec->shadow[stack] = (bpt__frame *)BPT_HIT_MAP(sizeof(bpt__frame) * BPT_SHADOW_FRAMES);
    return rec->shadow[stack] != NULL;
}

/* Reserve the next frame of a shadow stack that is mapped (F1's first
   half), marked as being filled; NULL when the stack is full. *mark gets
   the mark to put back when the frame is filled (bpt__frame_filled), 0
   with NULL.
   Room is checked here, on the depth it reserves at, and nowhere else
   counts: a signal handler can leave a frame behind between a caller's
   own look at the depth and this (it longjmps out of a return-traced
   function, t_call_path claim 10), and a push that trusted the look wrote
   one frame past the stack. */
BPT__HOT BPT__INTREGS bpt__frame *bpt__frame_reserve_mapped(bpt__thread *rec, int stack, uint32_t *mark) {
    uint32_t d = rec->shadow_depth[stack];
    if (BPT__UNLIKELY(d >= BPT_SHADOW_FRAMES)) return (*mark = 0, (bpt__frame *)NULL);   /* gcc -Og: set on every path */
    rec->shadow[stack][d].gone = 0;   /* whose it is holds from the start (bpt__frame_mine) */
    rec->shadow[stack][d].fiber = rec->fiber;
    *mark = rec->shadow_filling[stack];
    rec->shadow_filling[stack] = d + 1;   /* [H1] marked before it is on the stack */
    bpt__compiler_barrier();
    rec->shadow_depth[stack] = d + 1;   /* reserve, then fill: a nested handler pushes above */
    bpt__compiler_barrier();   /* [H1] */
    return &rec->shadow[stack][d];
}

/* Reserve the next frame of a shadow stack, as bpt__frame_reserve_mapped,
   mapping the stack on its first use; NULL when it is full or cannot be
   mapped. */
BPT__HOT bpt__frame *bpt__frame_reserve(bpt__thread *rec, int stack, uint32_t *mark) {
    if (BPT__UNLIKELY(!rec->shadow[stack]) && !bpt__frame_stack_map(rec, stack)) return NULL;
    return bpt__frame_reserve_mapped(rec, stack, mark);
}

/* The reserved frame is filled: put the mark back as it was. */
BPT__HOT BPT__INTREGS void bpt__frame_filled(bpt__thread *rec, int stack, uint32_t mark) {
    bpt__compiler_barrier();   /* [H1] every field stored before the mark goes */
    rec->shadow_filling[stack] = mark;
}

/* Is frame d of the stack being filled (by this thread, or the code a
   handler interrupted)? Its fields are not to be read. */
BPT__PRIVATE int bpt__frame_filling(const bpt__thread *rec, int stack, uint32_t d) {
    return rec->shadow_filling[stack] == d + 1;
}

BPT__PRIVATE int bpt__frame_mine(const bpt__thread *rec, int stack, const bpt__frame *fr) {
    return stack == BPT__STACK_VM || (!fr->gone && fr->fiber == rec->fiber);
}

/* >>timem attribution: BEAM charges time at calls and returns. A call
   pauses the function its session was timing in this process (the topmost
   frame of that session and process) and starts its own; a return charges
   the callee's own time and resumes the caller, unless the callee returns
   in another process than its own (it switched): then the caller resumes
   when its process is switched back in. */

/* The topmost frame below depth d of this stack that times session id in
   process, and its session entry; NULL if none. The walk stops at floor:
   the depth of a frame that the code a signal handler interrupted was
   pushing (its shadow_filling mark; 0: none). That push pauses the
   callers below it itself, and may be doing so right now, the span added
   to a caller's time and its start not yet cleared [H1]: a handler that
   paused that caller too would charge the span twice (and one whose
   return resumed it would charge the caller its callee's time). So a
   handler's calls pause and resume no frame below the push it
   interrupted; their time goes to the function it interrupted. A process
   or fiber switch's walk pauses and resumes callers too
   (bpt__timem_current_each, timem_walking): a handler's calls that
   interrupted it pause and resume none. */
static bpt__frame_session *bpt__timem_current(bpt__thread *rec, int stack, uint32_t d, uint32_t floor, uint64_t id,
                                              uint64_t process) {
    if (rec->timem_walking) return NULL;   /* [H1] */
    while (d-- > floor) {
        bpt__frame *fr = &rec->shadow[stack][d];
        uint32_t i;
        if (fr->process != process || !bpt__frame_mine(rec, stack, fr)) continue;
        for (i = 0; i < fr->nsess; i++)
            if (fr->sess[i].id == id && (fr->sess[i].actions & BPT__FRAME_TIMEM)) return &fr->sess[i];
    }
    return NULL;
}

/* "Now" in both clocks a frame's sessions may time by: the wall clock's
   ticks (bpt__now_ticks: the CPU's counter, or clock_gettime's ns), read
   by the caller, and the thread's CPU ns, read on the first need (a
   syscall: only sessions created with time_cpu pay it). A frame keeps
   the wall clock's start in ticks and converts each span it runs to ns
   once, when it pauses (bpt__ticks_ns): one conversion per span, not
   one per reading. */
typedef struct bpt__now2 {
    uint64_t ticks, cpu;
} bpt__now2;

static bpt__now2 bpt__now2_at(uint64_t ticks) {
    bpt__now2 n;
    n.ticks = ticks;
    n.cpu = 0;
    return n;
}

/* "Now" for a new frame: the clock is read only when one of its sessions
   times the call (a return trace alone needs no time at entry). */
BPT__HOT bpt__now2 bpt__now2_for(const bpt__hit *h) {
    return bpt__now2_at((h->wanted & BPT__FRAME_TIMEM) ? bpt__now_ticks() : 0);
}

/* The CPU clock's first read: out of line, so that a frame timed by the
   wall clock saves no registers for its call. */
BPT__NOINLINE uint64_t bpt__now_cpu(bpt__now2 *now) {
    if (!now->cpu) now->cpu = bpt__thread_cpu_ns();
    return now->cpu;
}

/* "Now" in fs's clock: wall ticks, or CPU ns. */
static uint64_t bpt__now_for(const bpt__frame_session *fs, bpt__now2 *now) {
    return (fs->actions & BPT__FRAME_CPU) ? bpt__now_cpu(now) : now->ticks;
}

/* The ns fs has run since its start (running: since != 0); 0 when `now`
   is before it (a signal handler nested on the thread restarted fs after
   the thread read `now`: bpt__ticks_ns). */
static uint64_t bpt__timem_span(const bpt__frame_session *fs, bpt__now2 *now) {
    uint64_t d = bpt__now_for(fs, now) - fs->since;
    if (fs->actions & BPT__FRAME_CPU) return (int64_t)d < 0 ? 0 : d;
    return bpt__ticks_ns(d);
}

static void bpt__timem_pause(bpt__frame_session *fs, bpt__now2 *now) {
    if (fs && fs->since) {
        fs->own_ns += bpt__timem_span(fs, now);
        BPT_TEST_POINT("timem pause: the span added, the start not yet cleared");   /* t_timem_nesting */
        fs->since = 0;
    }
}

static void bpt__timem_resume(bpt__frame_session *fs, bpt__now2 *now) {
    if (fs && !fs->since) fs->since = bpt__now_for(fs, now);
}

/* Charge own_ns and mem of a call of f in process to f's tables of
   session id in generation ix, if that session still has the kinds on,
   paused or not (pinned: the GenericBp list and the active generation are
   read as the hit path reads them). A pause stops new calls from being
   counted and timed; a call in flight when it came is charged at its
   return, as erts_trace_time_return in beam_bp.c charges any function
   that still has a call_time breakpoint (get_time_break), active or not. */
BPT__HOT void bpt__timem_charge_session(bpt__thread *rec, bpt_func *f, unsigned ix, uint64_t id,
                                      uint64_t process, uint64_t own_ns, int64_t mem) {
    bpt__GenericBp *g;
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp); g;        /* [G1] */
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next)) {
        const bpt__GenericBpData *d = &g->data[ix];
        bpt__BpTimem *t;
        if (g->session->id != id) continue;
        if (!(d->flags & BPT__BPF_TIMEM_ON)) return;
        t = bpt__timem_of(d);
        if (!(d->flags & BPT__BPF_TIME_TRACE)) own_ns = 0;
        if (!(d->flags & BPT__BPF_MEM_TRACE)) mem = 0;
        bpt__timem_charge(t, rec, process, 0, own_ns, mem);
        return;
    }
}

/* Charge a popped frame's own time and memory to its function's tables in
   each session that times it. */
static void bpt__timem_charge_frame(bpt__thread *rec, bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    unsigned ix = bpt_active_bp_ix();   /* [G2] once per return, as once per hit */
    for (i = 0; i < fr->nsess; i++) {
        bpt__frame_session *fs = &fr->sess[i];
        if (!(fs->actions & BPT__FRAME_TIMEM)) continue;
        bpt__timem_pause(fs, now);
        bpt__timem_charge_session(rec, fr->f, ix, fs->id, fr->process, fs->own_ns, fs->mem);
    }
}

/* A frame was popped: resume, for each session it timed, the caller that
   session was timing in the same process, if the thread runs that process
   now. A call that switched process (bpt_process_switch) and returns in
   another leaves its callers paused: the process they run in is switched
   out, and its switch back in resumes them (bpt__timem_current_each).
   Resumed here, they were charged the time the other process ran. */
static void bpt__timem_resume_callers(bpt__thread *rec, int stack, const bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    if (fr->process != rec->process) return;
    for (i = 0; i < fr->nsess; i++) {
        if (!(fr->sess[i].actions & BPT__FRAME_TIMEM)) continue;
        bpt__timem_resume(bpt__timem_current(rec, stack, rec->shadow_depth[stack], rec->shadow_filling[stack],
                                             fr->sess[i].id, fr->process), now);
    }
}

/* Copy n sessions' wishes, one fixed-size assignment each (a return
   serves one session in the common case). The empty asm keeps it a loop:
   without it gcc makes the loop a call to memmove, whose wide, overlapping
   stores the code after it cannot forward to its loads of the copy. The
   return's first load of sess[0].actions then waited for them: a third of
   bpt__native_return's time under call_time (perf record, bench_overhead
   time; PERFORMANCE.md). */
static void bpt__frame_sessions_copy(bpt__frame_session *to, const bpt__frame_session *from, uint32_t n) {
    uint32_t i;
    if (BPT__LIKELY(n == 1)) {   /* no loop */
        to[0] = from[0];
        return;
    }
    for (i = 0; i < n; i++) {
        to[i] = from[i];
        bpt__compiler_barrier();
    }
}

/* The sessions of a new frame that time it start now: the general case,
   out of line (several sessions, or the CPU clock); bpt__frame_fill
   starts the one wall-clock session's time itself. */
BPT__NOINLINE void bpt__frame_start_timem(bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & BPT__FRAME_TIMEM) fr->sess[i].since = bpt__now_for(&fr->sess[i], now);
}

/* F1's second half: fill the reserved frame with what the hit gathered
   (h->want), and start the time of the sessions that time the call. */
BPT__HOT void bpt__frame_fill(bpt__frame *fr, const bpt__hit *h, bpt__now2 *now) {
    bpt__frame_sessions_copy(fr->sess, h->want, h->nwant);
    fr->nsess = (uint16_t)h->nwant;
    fr->fid = h->f->fid;
    fr->caller_fid = 0;
    fr->f = h->f;
    fr->process = h->rec->process;
    fr->unhooked = 0;
    if (h->wanted & BPT__FRAME_TIMEM) {
        if (BPT__LIKELY(h->nwant == 1 && !(h->wanted & BPT__FRAME_CPU)))
            fr->sess[0].since = now->ticks;   /* the one session times it, by the wall clock */
        else
            bpt__frame_start_timem(fr, now);
    }
}

/* A frame was reserved at index d: pause the callers below it that its
   sessions were timing (the walk, down to floor; bpt__frame_pause_callers
   decides). */
static void bpt__timem_pause_callers(const bpt__hit *h, int stack, uint32_t d, uint32_t floor, bpt__now2 *now) {
    uint32_t i;
    for (i = 0; i < h->nwant; i++)
        if (h->want[i].actions & BPT__FRAME_TIMEM)
            bpt__timem_pause(bpt__timem_current(h->rec, stack, d, floor, h->want[i].id, h->rec->process), now);
}

/* F1, between reserve and fill: a new frame fr pauses its callers, but
   only when one of its sessions times it (h->wanted) and a frame lies
   below it. A frame of return trace alone, or the first on its stack,
   costs no call. mark: what bpt__frame_reserve saved of the filling mark,
   the depth of a push this hit's signal handler interrupted (0: none),
   below which the walk does not go (bpt__timem_current). */
BPT__HOT void bpt__frame_pause_callers(const bpt__hit *h, int stack, const bpt__frame *fr, uint32_t mark,
                                       bpt__now2 *now) {
    const bpt__frame *first = h->rec->shadow[stack];
    if ((h->wanted & BPT__FRAME_TIMEM) && fr != first)
        bpt__timem_pause_callers(h, stack, (uint32_t)(fr - first), mark, now);
}

/* A popped frame's end: charge it (unwound frames too, as BEAM charges a
   call that ends by an exception), resume its callers. Pinned. */
static void bpt__frame_end(bpt__thread *rec, int stack, bpt__frame *fr) {
    bpt__now2 now;
    uint32_t i;
    for (i = 0; i < fr->nsess && !(fr->sess[i].actions & BPT__FRAME_TIMEM); i++) {}
    if (i == fr->nsess) return;
    now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_charge_frame(rec, fr, &now);
    if (rec->shadow_depth[stack]) bpt__timem_resume_callers(rec, stack, fr, &now);   /* none below: no caller */
}

/* Lower a shadow stack's depth from d to d - 1, unless a signal handler on
   this thread changed it since it was read [H1]: a handler that ran between
   the look at a tombstone and the store may have dropped it and more, and
   pushed again; a plain store of d - 1 would bring frames it ended back to
   life. A compare-and-swap is atomic against a handler on the same thread
   (one instruction, or an exclusive pair that the exception return
   breaks). Tombstones are native frames only: without native sites (tcc)
   there are none. */
static int bpt__frame_lower(bpt__thread *rec, int stack, uint32_t d) {
#if defined(BPT_NATIVE)
    return __atomic_compare_exchange_n(&rec->shadow_depth[stack], &d, d - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#else
    rec->shadow_depth[stack] = d - 1;
    return 1;
#endif
}

/* Copy a frame out of its slot: its fields, and the sessions it has, not
   the slots it does not use (a frame is 256 bytes with BPT_FRAME_SESSIONS
   4). */
static void bpt__frame_copy(bpt__frame *to, const bpt__frame *from) {
    memcpy(to, from, offsetof(bpt__frame, sess));
    bpt__frame_sessions_copy(to->sess, from->sess, from->nsess);
}

/* Copy out the top frame, then release it, and the tombstones it covered
   (never a frame being filled: the code a handler interrupted owns it). */
static void bpt__frame_pop(bpt__thread *rec, int stack, bpt__frame *out) {
    uint32_t d = rec->shadow_depth[stack] - 1;
    bpt__frame_copy(out, &rec->shadow[stack][d]);
    bpt__compiler_barrier();   /* [H1] */
    rec->shadow_depth[stack] = d;
    while (d > 0 && rec->shadow[stack][d - 1].gone && !bpt__frame_filling(rec, stack, d - 1)) {
        BPT_TEST_POINT("frame_pop: a tombstone under the top");   /* t_fibers puts a signal here */
        if (!bpt__frame_lower(rec, stack, d)) break;
        d--;
    }
}

#if defined(BPT_NATIVE)
/* Copy out frame k and end it: popped if on top, else left as a tombstone
   under the live frames of other fibers above it. */
static void bpt__frame_take(bpt__thread *rec, int stack, uint32_t k, bpt__frame *out) {
    if (k + 1 == rec->shadow_depth[stack]) {
        bpt__frame_pop(rec, stack, out);
        return;
    }
    bpt__frame_copy(out, &rec->shadow[stack][k]);
    bpt__compiler_barrier();   /* [H1] copied before it is gone */
    rec->shadow[stack][k].gone = 1;
}

/* The newest frame of this thread's current stack below depth d whose
   entry sp is sp (any sp: sp == 0), or -1. A frame marked as being filled
   is not skipped: the mark may be the interrupted code's, for the index a
   handler then reserved too (it was marked before it was on the stack,
   [H1]), and that frame is the handler's own, complete. */
static long bpt__frame_find(const bpt__thread *rec, uint32_t d, uintptr_t sp) {
    while (d-- > 0) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        if (bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) && (sp == 0 || fr->sp == sp)) return (long)d;
    }
    return -1;
}
#endif

/* F2's frame when no frame of the thread's current stack has sp: one of
   another stack's does, so the thread runs on that stack and its tag was
   lost, by a switch bptrace did not see end (a uc_link return to a
   getcontext, a setcontext to one): the thread takes that frame's tag. */
BPT__PRIVATE long bpt__frame_adopt(bpt__thread *rec, uintptr_t sp) {
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    while (d-- > 0) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        if (!fr->gone && fr->sp == sp) {
            rec->fiber = fr->fiber;
            return (long)d;
        }
    }
    return -1;
}

/* Whether a session of fr asked for one of `actions`. A frame that only
   times its call (call_time, call_memory) builds no record at all. */
static int bpt__frame_wants(const bpt__frame *fr, unsigned actions) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & actions) return 1;
    return 0;
}

/* A frame's record to one of its sessions, fs, if that session asked for
   `action` and still lives. Pinned (session lookup). */
BPT__HOT void bpt__frame_send_one(bpt__thread *rec, const bpt__frame_session *fs, unsigned action, const bpt__rec *r) {
    bpt__session *s;
    if (rec->in_tracer) return;   /* a tracer's own calls are not traced */
    if (!(fs->actions & action)) return;
    if (!(s = bpt__session_lookup(fs->id))) return;   /* ended: frames do nothing */
    if (!bpt__session_admit(s, rec)) return;
    bpt__session_send(s, rec, r);
}

/* The record to each of a frame's sessions that asked for `action`. */
static void bpt__frame_send(bpt__thread *rec, const bpt__frame *fr, unsigned action, const bpt__rec *r) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++) bpt__frame_send_one(rec, &fr->sess[i], action, r);
}

/* A record of one word: its header, now. */
BPT__HOT void bpt__frame_rec(bpt__recbuf *b, int type, uint32_t id, uint16_t info, uint64_t word) {
    b->h.ticks = bpt__now_ticks();
    b->h.type = (uint8_t)type;
    b->h.words = 1;
    b->h.info = info;
    b->h.id = id;
    b->w[0] = word;
}

/* exception_from for a frame that was unwound. BEAM sends it to sessions
   with exception_trace; return_trace alone sends nothing. */
static void bpt__frame_unwound(bpt__thread *rec, const bpt__frame *fr, const char *cls, uint64_t value) {
    bpt__recbuf b;
    if (!bpt__frame_wants(fr, BPT_EXCEPTION)) return;
    bpt__frame_rec(&b, BPT_MSG_EXCEPTION_FROM, fr->fid, cls[0] == 't', value);   /* "throw" or "unwind" */
    bpt__frame_send(rec, fr, BPT_EXCEPTION, &b.h);
}

/* return_from with a string value: its bytes are copied now, since they
   may not outlive the return. Out of line: its copy would make every
   return_from save registers. */
BPT__NOINLINE void bpt__frame_returned_str(bpt__thread *rec, uint32_t fid, const bpt__frame_session *fs,
                                           const char *str) {
    bpt__recbuf b;
    size_t len = str ? strnlen(str, BPT_MSG_STR_BYTES - 1) : 6;
    bpt__frame_rec(&b, BPT_MSG_RETURN_FROM, fid, BPT_ARG_STR, 0);
    memset(b.w, 0, BPT_MSG_STR_BYTES);
    memcpy(b.w, str ? str : "(null)", len);
    b.h.words = (uint8_t)((len + 1 + 7) / 8);
    bpt__frame_send_one(rec, fs, BPT_RETURN | BPT_EXCEPTION, &b.h);
}

/* return_from for function fid to one session of its frame, fs, with the
   value its ret spec asks for. */
static void bpt__frame_returned_one(bpt__thread *rec, uint32_t fid, const bpt__frame_session *fs, uint64_t value) {
    bpt__recbuf b;
    if (BPT__UNLIKELY(fs->rettype == BPT_ARG_STR)) {
        bpt__frame_returned_str(rec, fid, fs, (const char *)(uintptr_t)value);
        return;
    }
    bpt__frame_rec(&b, BPT_MSG_RETURN_FROM, fid, fs->rettype, value);
    bpt__frame_send_one(rec, fs, BPT_RETURN | BPT_EXCEPTION, &b.h);
}

/* return_from to each session of a frame, one record each, with the value
   its ret spec asks for: the integer return register, or the floating-point
   one for f64 (the same value for both on a VM). */
static void bpt__frame_returned(bpt__thread *rec, const bpt__frame *fr, uint64_t int_value, uint64_t fp_value) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & (BPT_RETURN | BPT_EXCEPTION))
            bpt__frame_returned_one(rec, fr->fid, &fr->sess[i], fr->sess[i].rettype == BPT_ARG_F64 ? fp_value : int_value);
}

/* return_to: execution resumes in function fid, or in code that is not a
   registered function (0); caller is the native address. */
static void bpt__frame_return_to(bpt__thread *rec, const bpt__frame *fr, uint32_t fid, uintptr_t caller) {
    bpt__recbuf b;
    if (!bpt__frame_wants(fr, BPT_RETURN_TO)) return;
    bpt__frame_rec(&b, BPT_MSG_RETURN_TO, fid, 0, caller);
    bpt__frame_send(rec, fr, BPT_RETURN_TO, &b.h);
}

#if defined(BPT_NATIVE)
/* Never returns: the thread returned through the trampoline but no frame
   names its stack pointer, so the address to continue at is lost. Only a
   broken promise gets here: a thread that switched stacks (fibers), or
   bpt_unwind_to given a stack pointer above a live frame. */
static void bpt__frames_lost(uintptr_t sp) {
    char msg[160];
    int n = snprintf(msg, sizeof msg, "bptrace: return trampoline: no return-trace frame for sp %p "
                     "(stack switched, or bpt_unwind_to above a live frame); aborting\n", (void *)sp);
    if (n > 0) { ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1); (void)w; }
    abort();
}

/* The caller of a native call: where it returns to. If its return slot
   already holds the trampoline, it was entered by a tail call from a
   function whose return is traced: the true address is in that frame. */
BPT__PRIVATE uintptr_t bpt__native_caller(const bpt__hit *h) {
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t ret = bpt__arch_ret_strip(h->f, *bpt__arch_ret_slot(r)), sp = bpt__arch_entry_sp(r);
    long k = (long)h->rec->shadow_depth[BPT__STACK_NATIVE];
    if (ret != BPT__RETURN_TRAMPOLINE) return ret;
    while ((k = bpt__frame_find(h->rec, (uint32_t)k, sp)) >= 0)
        if (h->rec->shadow[BPT__STACK_NATIVE][k].ret) return h->rec->shadow[BPT__STACK_NATIVE][k].ret;
    return 0;
}

/* The calling thread's sigaltstack as [*lo, *hi), empty when it has none
   (or it is disabled). Returns 1 when the thread runs on it now, at sp.
   A stack set up with SS_AUTODISARM (Linux 4.7) is disarmed while a
   handler runs on it, and sigaltstack(2) then reports it disabled, with no
   address: so the last armed stack seen is remembered (rec->alt_lo,
   alt_hi: at the thread record's creation and at every look), and a
   disabled report with sp inside it means the thread runs on it, disarmed.
   A thread whose first call into bptrace is made by such a handler has
   nothing remembered: its handler is taken for one on the thread's stack.
   sigaltstack(2) is async-signal-safe. */
BPT__PRIVATE int bpt__altstack_bounds(bpt__thread *rec, uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
    stack_t alt;
    *lo = *hi = 0;
    if (sigaltstack(NULL, &alt) != 0) return 0;
    if (!(alt.ss_flags & SS_DISABLE)) {
        rec->alt_lo = (uintptr_t)alt.ss_sp;
        rec->alt_hi = rec->alt_lo + alt.ss_size;
    } else if (!(sp >= rec->alt_lo && sp < rec->alt_hi)) {
        return 0;   /* none, or disabled and not running on the one remembered */
    }
    *lo = rec->alt_lo;
    *hi = rec->alt_hi;
    return sp >= *lo && sp < *hi;
}

BPT__PRIVATE void bpt__altstack_note(bpt__thread *rec) {
    uintptr_t lo, hi;
    (void)bpt__altstack_bounds(rec, 0, &lo, &hi);
}

/* The rare half of bpt__native_settle: the top frame's stack pointer is
   at or below this call's, so it and maybe more are dead. The stack grows
   down: a live caller's frame lies above every call it makes, so a frame
   at or below a new call's stack pointer on the same stack was left by a
   longjmp or a throw (at the same one, this call reuses its place; unless
   this call is a tail call that shares it). Frames on a different stack
   are not compared: a handler on the sigaltstack ends only its own dead
   frames there, and a call outside it ends every frame still there (the
   handler is over). Each dead frame gets exception_from, newest first.
   sigaltstack(2) is async-signal-safe, and this path runs only after an
   unwind. */
BPT__NOINLINE int bpt__native_settle_dead(bpt__thread *rec, uintptr_t sp, int tail, const char *cls) {
    uintptr_t lo, hi;
    int on_alt = bpt__altstack_bounds(rec, sp, &lo, &hi), n = 0;
    uint32_t d;
    for (d = rec->shadow_depth[BPT__STACK_NATIVE]; d-- > 0;) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        uintptr_t top = fr->sp;
        int in_alt = top >= lo && top < hi;
        bpt__frame dead;
        if (bpt__frame_filling(rec, BPT__STACK_NATIVE, d)) break;   /* being pushed: its caller's, alive */
        if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, fr)) continue;   /* another fiber's stack: not compared */
        if (tail && top == sp) break;   /* the frame this tail call shares: alive */
        if (on_alt ? !(in_alt && top <= sp) : !(in_alt || top <= sp)) break;
        bpt__frame_take(rec, BPT__STACK_NATIVE, d, &dead);
        /* unhooked: a C++ throw's search passed it (unwind.c, U1), and a
           destructor's traced call settles it before the catch would: a throw's. */
        bpt__frame_unwound(rec, &dead, dead.unhooked ? "throw" : cls, 0);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &dead);
        n++;
    }
    return n;
}

/* Before a native hit's messages (called when the thread has frames):
   frames the stack has left behind get their exception_from first, so a
   longjmp over any number of return-traced frames is settled at the next
   traced entry on the thread, with no bpt_unwind_to, and the shadow stack
   never fills with dead frames. The common case is one compare: the top
   frame is a live caller's, above this call. */
BPT__PRIVATE void bpt__native_settle(bpt__hit *h) {
    bpt__thread *rec = h->rec;
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t sp = bpt__arch_entry_sp(r);
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    const bpt__frame *top = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    long k;
    if (bpt__frame_filling(rec, BPT__STACK_NATIVE, d - 1)) return;
    if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, top)) {   /* a suspended fiber's on top: compare ours */
        if ((k = bpt__frame_find(rec, d - 1, 0)) < 0) return;
        top = &rec->shadow[BPT__STACK_NATIVE][k];
    }
    if (top->sp > sp) return;
    bpt__native_settle_dead(rec, sp, bpt__arch_ret_strip(h->f, *bpt__arch_ret_slot(r)) == BPT__RETURN_TRAMPOLINE,
                            "unwind");
}

/* F1: the entry handler's frame, after every session has been walked. */
BPT__NOINLINE void bpt__native_frame_push(bpt__hit *h) {
    bpt__thread *rec = h->rec;
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t *slot = bpt__arch_ret_slot(r), sp = bpt__arch_entry_sp(r);
    uintptr_t ret = bpt__arch_ret_strip(h->f, *slot);
    int tail = ret == BPT__RETURN_TRAMPOLINE;
    bpt__frame *fr;
    uint32_t i, mark = 0;
    long k;
    bpt__now2 now = bpt__now2_for(h);
    /* A tail call shares the frame of the call it replaces; there must be one. */
    if (tail && !((k = bpt__frame_find(rec, rec->shadow_depth[BPT__STACK_NATIVE], 0)) >= 0 &&
                  rec->shadow[BPT__STACK_NATIVE][k].sp == sp))
        fr = NULL;
    else
        fr = bpt__frame_reserve(rec, BPT__STACK_NATIVE, &mark);
    if (!fr) {
        for (i = 0; i < h->nwant; i++) bpt__frame_skipped(h->want_s[i]);
        return;
    }
    bpt__frame_pause_callers(h, BPT__STACK_NATIVE, fr, mark, &now);
    bpt__frame_fill(fr, h, &now);
    fr->sp = sp;
    fr->ret = tail ? 0 : ret;
    bpt__frame_filled(rec, BPT__STACK_NATIVE, mark);
    if (!tail) *slot = bpt__arch_ret_sign(h->f, BPT__RETURN_TRAMPOLINE, sp);
}

/* F0 and F1 for the short paths (site_native.c: the call path, the
   call-return path, the time path), with the integer registers alone and
   no call. bpt__native_frames_settled: would
   F0 find nothing to settle at a call whose stack pointer at entry is sp?
   No frame, or the top one is this fiber's, complete, and a live caller's
   (above sp). Anything else (a frame left by a longjmp or a throw, a
   tail call's shared frame, a suspended fiber's frame on top, a frame
   being pushed) is the full path's. */
BPT__HOT BPT__INTREGS int bpt__native_frames_settled(const bpt__thread *rec, uintptr_t sp) {
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    const bpt__frame *top;
    if (BPT__LIKELY(d == 0)) return 1;
    top = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    return rec->shadow_filling[BPT__STACK_NATIVE] != d && !top->gone && top->fiber == rec->fiber && top->sp > sp;
}

/* May the call-return or time path push a frame here: the shadow stack
   is mapped (the full path maps it), has room (a first look, so that a
   full stack goes the full way before the call is traced; the reserve
   checks again), and the return address in *slot is not the trampoline
   (a tail call shares its caller's frame: the full path's) nor signed
   (aarch64 paciasp: the full path signs the trampoline's)? */
BPT__HOT BPT__INTREGS int bpt__native_frame_plain_ok(const bpt__thread *rec, const bpt_func *f, const uintptr_t *slot) {
    return rec->shadow[BPT__STACK_NATIVE] && rec->shadow_depth[BPT__STACK_NATIVE] < BPT_SHADOW_FRAMES &&
           *slot != BPT__RETURN_TRAMPOLINE && !f->signs_lr;
}

/* The frame that a new frame of session id in `process`, reserved at
   depth d of the native stack, pauses (and that its return resumes), when
   it can be told at a look, for the time path and the timed return: the
   frame below, d - 1, when it is complete, this fiber's, in `process`, and
   has the one session id, timing. Returns 1 and *caller, NULL when there
   is no frame below; 0 when only bpt__timem_current's walk can tell (the
   frame below belongs to another session, process or fiber, has several
   sessions, or is being pushed): the general way's. */
BPT__HOT BPT__INTREGS int bpt__timem_caller_at(bpt__thread *rec, uint32_t d, uint64_t id, uint64_t process,
                                               bpt__frame_session **caller) {
    bpt__frame *fr;
    *caller = NULL;
    if (d == 0) return 1;
    fr = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    if (rec->shadow_filling[BPT__STACK_NATIVE] == d || rec->timem_walking || fr->gone || fr->fiber != rec->fiber ||   /* [H1] */
        fr->process != process || fr->nsess != 1 || fr->sess[0].id != id ||
        !(fr->sess[0].actions & BPT__FRAME_TIMEM))
        return 0;
    *caller = &fr->sess[0];
    return 1;
}

/* F1 for one session s, once bpt__native_frame_plain_ok said yes: the
   frame bpt__native_frame_push would push for that hit, and the return
   slot swapped to the trampoline; or, when the stack filled since that
   look (bpt__frame_reserve_mapped), no frame, counted in s's
   frames_skipped, the caller left running, as the full path leaves a
   call it has no frame for. actions: what the session asks of the
   return (its match spec's return_from, or BPT_TIME), rettype the return
   value's type. now: 0 for a frame that does not time its call; else the
   wall clock's ticks its time starts at, and caller (bpt__timem_caller_at,
   NULL: none) the frame the session was timing, paused at now between
   reserve and fill, as bpt__frame_pause_callers does. */
BPT__HOT BPT__INTREGS void bpt__native_frame_push_plain(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                        unsigned actions, uint8_t rettype, uintptr_t sp,
                                                        uintptr_t *slot, bpt__frame_session *caller, uint64_t now) {
    uint32_t mark;
    bpt__frame *fr;
    bpt__frame_session *fs;
    BPT_TEST_POINT("push_plain: room seen, not yet reserved");   /* t_call_path claim 10 */
    if (BPT__UNLIKELY(!(fr = bpt__frame_reserve_mapped(rec, BPT__STACK_NATIVE, &mark)))) {
        bpt__frame_skipped(s);
        return;
    }
    fs = &fr->sess[0];
    if (caller && caller->since) {   /* as bpt__timem_pause, by the wall clock */
        caller->own_ns += bpt__ticks_ns(now - caller->since);
        BPT_TEST_POINT("timem pause: the span added, the start not yet cleared");   /* t_timem_nesting */
        caller->since = 0;
    }
    fs->id = s->id;
    fs->actions = actions & (BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU);   /* as bpt__hit_want_frame */
    fs->rettype = rettype;
    fs->since = now;
    fs->own_ns = 0;
    fs->mem = 0;
    fr->nsess = 1;
    fr->fid = f->fid;
    fr->caller_fid = 0;
    fr->f = f;
    fr->process = rec->process;
    fr->unhooked = 0;
    fr->sp = sp;
    fr->ret = *slot;
    bpt__frame_filled(rec, BPT__STACK_NATIVE, mark);
    *slot = BPT__RETURN_TRAMPOLINE;
}

/* F2, the plain return, taken by the return route (below): a common
   return (bpt__return_is_one) whose session asks for return_from alone (return
   or exception trace: no call_time, call_memory or string value), buffers
   its records with no rate limit, on the CPU's counter clock. The record
   goes straight into the thread's current chunk, as the call path writes
   a call's (site_native.c), where the general way
   (bpt__native_return_one) copies the frame out, builds the record on
   the stack and copies it there: the same record, the same protocol.
   PR1. The frame asks for that, and the thread is not inside a tracer
       (bpt__return_plain_asks: the route's test, before it pins).
   PR2. Its session lives [S1] [S2] and takes records plainly; read the clock.
   PR3. Mark the send [H1]; if the current chunk has room as it is (>>fits
       in session.c), write return_from at its end and publish it with the
       chunk's fill [R2]. Release the frame [H1] (its fields were read
       before), unmark.
   Returns the address to continue at, or 0 having changed nothing (the
   session gone, a tracer's or a USDT session, a rate limit, no counter
   clock, a nested send, a first record, a full chunk, a stale anchor):
   then the general way's. Pinned. */
static int bpt__return_plain_asks(const bpt__thread *rec, const bpt__frame *fr) {   /* PR1 */
    const bpt__frame_session *fs = &fr->sess[0];
    return !(fs->actions & BPT__FRAME_TIMEM) && (fs->actions & (BPT_RETURN | BPT_EXCEPTION)) &&
           fs->rettype != BPT_ARG_STR && !rec->in_tracer;
}

static uintptr_t bpt__native_return_plain(bpt__thread *rec, uint32_t k, const bpt__retregs *r) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    const bpt__frame_session *fs = &fr->sess[0];
    uintptr_t ret = fr->ret;
    bpt__session *s;
    bpt__lane *lane;
    bpt__rec *h;
    uint64_t ticks;
    if (!(s = bpt__session_lookup(fs->id)) || !s->buffered || s->rate_max ||   /* PR2 */
        !bpt__now_ticks_counter(&ticks) || !bpt__send_begin(rec))              /* PR3 [H1] */
        return 0;
    if (BPT__LIKELY((lane = bpt__lane_room(s, rec, ticks, BPT__RETURN_PLAIN_BYTES)) != NULL)) {
        h = (bpt__rec *)(void *)lane->wp;   /* chunk memory: 8-aligned, no declared type */
        h->ticks = ticks;
        h->type = BPT_MSG_RETURN_FROM;
        h->words = 1;
        h->info = fs->rettype;
        h->id = fr->fid;
        *(uint64_t *)(void *)(h + 1) = fs->rettype == BPT_ARG_F64 ? r->fp[0][0] : r->gpr[0];
        bpt__lane_publish(lane, BPT__RETURN_PLAIN_BYTES);   /* [R2] */
        bpt__compiler_barrier();   /* [H1] read out before it is released */
        rec->shadow_depth[BPT__STACK_NATIVE] = k;
    } else {
        ret = 0;
    }
    bpt__send_end(rec);
    return ret;
}

/* F2, the timed return: a common return (bpt__return_is_one: the return
   route or bpt__native_return_one checked the frame) whose session times the call by the wall clock and
   asks for nothing else (call_time alone: no return_from, call_memory or
   CPU clock), with its caller at a look (bpt__timem_caller_at): what
   bpt__frame_end does for such a frame, without its copy, its walks or
   its loops.
   TR1. The frame asks for that, and the caller it resumes is the frame
       below it, or there is none (bpt__timem_caller_at).
   TR2. Read the clock; the frame's own time is what it had plus the time
       since it last started (0: paused, its process switched out).
   TR3. Release the frame [H1] (its fields were read before).
   TR4. Charge its own time to the function's tables of the session
       (bpt__timem_charge_session: nothing if the session has let go).
   TR5. Resume the caller, as bpt__timem_resume, if the thread runs the
       frame's process now (as bpt__timem_resume_callers).
   Returns the address to continue at, or 0 having changed nothing (the
   general way's). Pinned. */
static int bpt__return_timed_asks(const bpt__frame_session *fs) {   /* TR1's first half */
    return (fs->actions & (BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU)) == BPT_TIME;
}

BPT__HOT uintptr_t bpt__native_return_timed(bpt__thread *rec, uint32_t k) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    const bpt__frame_session *fs = &fr->sess[0];
    bpt__frame_session *caller;
    uintptr_t ret = fr->ret;
    uint64_t now, own, id = fs->id, process = fr->process;
    bpt_func *f = fr->f;
    if (!bpt__return_timed_asks(fs) ||   /* TR1 */
        !bpt__timem_caller_at(rec, k, id, process, &caller))
        return 0;
    now = bpt__now_ticks();                                                               /* TR2 */
    own = fs->own_ns + (fs->since ? bpt__ticks_ns(now - fs->since) : 0);
    bpt__compiler_barrier();   /* [H1] read out before it is released */
    rec->shadow_depth[BPT__STACK_NATIVE] = k;                                             /* TR3 */
    bpt__timem_charge_session(rec, f, bpt_active_bp_ix(), id, process, own, 0);           /* TR4 [G2]: no memory (TR1) */
    if (caller && !caller->since && process == rec->process) caller->since = now;        /* TR5 */
    return ret;
}

/* F2, the common return, without copying the whole frame out: the frame
   is on top, ends its chain (no tail call shares it: ret != 0), serves one
   session, which does not ask for return_to, and no tombstone lies under
   it (bpt__return_is_one). The timed return (above) first; else it
   copies out what the frame's end (call_time, call_memory) and the
   return_from read, releases the frame [H1], then ends it and sends. The
   plain return is the return route's (bpt__native_return): when it
   declined one it would take, this way sends the same return_from.
   Returns the address to continue at, or 0 when the frame is not such a
   one (bpt__native_return_chain's). Pinned. */
BPT__HOT int bpt__return_is_one(const bpt__thread *rec, uint32_t k) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    return k + 1 == rec->shadow_depth[BPT__STACK_NATIVE] && fr->ret && fr->nsess == 1 &&
           !(fr->sess[0].actions & BPT_RETURN_TO) && !(k > 0 && fr[-1].gone);
}

static uintptr_t bpt__native_return_one(bpt__thread *rec, uint32_t k, const bpt__retregs *r) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    bpt__frame one;   /* only what bpt__frame_end and the return_from read */
    uintptr_t ret;
    if (!bpt__return_is_one(rec, k)) return 0;
    if ((ret = bpt__native_return_timed(rec, k)) != 0) return ret;
    one.sess[0] = fr->sess[0];
    one.nsess = 1;
    one.fid = fr->fid;
    one.f = fr->f;
    one.process = fr->process;
    ret = fr->ret;
    bpt__compiler_barrier();   /* [H1] copied out before it is released */
    rec->shadow_depth[BPT__STACK_NATIVE] = k;
    if (one.sess[0].actions & BPT__FRAME_TIMEM) bpt__frame_end(rec, BPT__STACK_NATIVE, &one);
    if (one.sess[0].actions & (BPT_RETURN | BPT_EXCEPTION))
        bpt__frame_returned_one(rec, one.fid, &one.sess[0],
                                one.sess[0].rettype == BPT_ARG_F64 ? r->fp[0][0] : r->gpr[0]);
    return ret;
}

/* F2, every other return: frame k (of sp) and what lies above it and
   below it in its chain. Returns the address to continue at. Pinned. */
BPT__NOINLINE uintptr_t bpt__native_return_chain(bpt__thread *rec, long k, uintptr_t sp, const bpt__retregs *r) {
    uint32_t i, to_sessions = 0;
    const bpt_func *resumed;
    bpt__frame fr, to;
    uintptr_t ret;
    /* 2a. Frames of this stack above ours were unwound without returning
       (frames of other fibers' stacks above it stay: they are suspended). */
    for (i = rec->shadow_depth[BPT__STACK_NATIVE]; i-- > (uint32_t)k + 1;) {
        if (i >= rec->shadow_depth[BPT__STACK_NATIVE] ||
            !bpt__frame_mine(rec, BPT__STACK_NATIVE, &rec->shadow[BPT__STACK_NATIVE][i]))
            continue;
        bpt__frame_take(rec, BPT__STACK_NATIVE, i, &fr);
        bpt__frame_unwound(rec, &fr, "unwind", 0);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &fr);
    }
    /* 2b. Ours, and the frames of the tail calls that replaced it: each
       returns the same value, innermost first; the last holds the address. */
    to.fid = 0;   /* the fields of `to` that 2c reads are set below */
    for (;;) {
        if (k < 0) bpt__frames_lost(sp);
        bpt__frame_take(rec, BPT__STACK_NATIVE, (uint32_t)k, &fr);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &fr);
        bpt__frame_returned(rec, &fr, r->gpr[0], r->fp[0][0]);
        for (i = 0; i < fr.nsess; i++) {
            if (fr.sess[i].actions & BPT_RETURN_TO) {   /* each session once per chain */
                uint32_t s;
                for (s = 0; s < to_sessions && to.sess[s].id != fr.sess[i].id; s++) {}
                if (s == to_sessions && to_sessions < BPT_FRAME_SESSIONS) to.sess[to_sessions++] = fr.sess[i];
            }
        }
        if (!to.fid) to.fid = fr.fid;
        if (fr.ret) break;
        /* the frame it replaced: the next of this stack, with the same sp */
        k = bpt__frame_find(rec, (uint32_t)k, 0);
        if (k >= 0 && rec->shadow[BPT__STACK_NATIVE][k].sp != sp) k = -1;
    }
    ret = fr.ret;
    /* 2c. One return_to ends the chain (Tracing.md: one per chain of tail calls). */
    if (to_sessions) {
        to.nsess = (uint16_t)to_sessions;
        resumed = bpt__symbolize(ret);
        bpt__frame_return_to(rec, &to, resumed ? resumed->fid : 0, ret);
    }
    return ret;
}

/* F2, every return the route below does not take: the frame of sp found
   (adopted from another stack, or lost), pinned, bptrace's own calls
   marked (>>own calls in site_native.c), the common return or the
   general way. Returns where to continue. */
BPT__NOINLINE uintptr_t bpt__native_return_general(uintptr_t sp, bpt__retregs *r) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long k = rec ? bpt__frame_find(rec, rec->shadow_depth[BPT__STACK_NATIVE], sp) : -1;
    uintptr_t ret;
    bpt__own_enter();   /* >>own calls (site_native.c) */
    if (k < 0 && rec) k = bpt__frame_adopt(rec, sp);
    if (k < 0) bpt__frames_lost(sp);
    bpt__pin_rec(rec);   /* a frame was found: the thread has its record */
    if (!(ret = bpt__native_return_one(rec, (uint32_t)k, r))) ret = bpt__native_return_chain(rec, k, sp, r);
    bpt__unpin(rec);
    bpt__own_leave();
    return ret;
}

/* The route's timed return (RR2), out of line: it calls (the charge may
   map a table), so it is pinned here, with bptrace's own calls marked as
   the general way marks them; when it declines, the general way.
   Returns where to continue. */
BPT__NOINLINE uintptr_t bpt__native_return_timed_route(bpt__thread *rec, uint32_t k, uintptr_t sp,
                                                        bpt__retregs *r) {
    uintptr_t ret;
    bpt__own_enter();
    bpt__pin_rec(rec);
    ret = rec->shadow_depth[BPT__STACK_NATIVE] == k + 1 ? bpt__native_return_timed(rec, k) : 0;   /* again: RR2 */
    bpt__unpin(rec);
    bpt__own_leave();
    return ret ? ret : bpt__native_return_general(sp, r);
}

/* The route's wake of a waiter (RR4), out of line: a system call, made
   with bptrace's own calls marked as the general way makes it. */
BPT__NOINLINE uintptr_t bpt__native_return_woke(uintptr_t ret) {
    bpt__own_enter();
    bpt__progress_wake();
    bpt__own_leave();
    return ret;
}

/* F2: called by the return trampoline with the stack pointer the
   traced function had at entry and its return registers; returns where to
   continue. Not static: the trampoline's assembly calls it by name.
   >>return route: the plain return (PR1-PR3) and the timed return
   (TR1-TR5) are taken first, with no call but tail calls, so that the
   function saves few registers; every other return goes the general way
   (bpt__native_return_general), a tail call too. With the general way
   inlined here (a frame's copy on the stack, calls), every return pushed
   6 registers and reserved 312 bytes first (callgrind, bench_overhead:
   call+return 432.9 instructions a call; call_time 389.8).
   RR1. The thread has its record; its newest native frame is sp's (on the
       stack it runs on now, bpt__frame_mine), is the common return
       (bpt__return_is_one: no tail call, one session, no return_to, the
       frame below not left), and asks for the plain return (PR1) or the
       timed one (TR1's first half): else the general way. Read only, and
       unpinned: the thread's own frames, which only a signal handler
       nested on it changes.
   RR2. Pin, as bpt__pin_rec, and look again: a handler that landed
       since RR1 may have left a frame of its own above sp's (it longjmped
       out of a traced function), whose exception_from only the general
       way sends (its step 2a). A timed return goes on out of line, and
       pins and looks there (bpt__native_return_timed_route: TR1-TR5).
       (A handler that lands inside the plain or the timed return, after
       this look, is not covered: its frame is dropped with ours. Found by
       review; as before the route.)
   RR3. The plain return, PR2-PR3; when it declines (see
       bpt__native_return_plain), the general way, which finds the frame
       again.
   RR4. Unpin; a waiter to wake is woken out of line
       (bpt__native_return_woke). When RR3 declined, the wake is left to
       the general way's unpin, as the short paths leave theirs to the
       full path (site_native.c): the futex word keeps its flag until a
       wake clears it. */
BPT__ASM_CALLED uintptr_t bpt__native_return(uintptr_t sp, bpt__retregs *r) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__frame *fr;
    uint32_t k;
    uintptr_t ret;
    int wake;
    if (BPT__UNLIKELY(!rec) || rec->shadow_depth[BPT__STACK_NATIVE] == 0)                     /* RR1 */
        return bpt__native_return_general(sp, r);
    k = rec->shadow_depth[BPT__STACK_NATIVE] - 1;
    fr = &rec->shadow[BPT__STACK_NATIVE][k];
    if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) || fr->sp != sp || !bpt__return_is_one(rec, k))
        return bpt__native_return_general(sp, r);
    if (!bpt__return_plain_asks(rec, fr))
        return bpt__return_timed_asks(&fr->sess[0]) ? bpt__native_return_timed_route(rec, k, sp, r)
                                                     : bpt__native_return_general(sp, r);
    BPT_TEST_POINT("Return route: looked, not pinned");   /* t_call_path claim 13 raises a signal here */
    bpt__pin_rec(rec);                                                                         /* RR2 */
    ret = rec->shadow_depth[BPT__STACK_NATIVE] == k + 1 ? bpt__native_return_plain(rec, k, r) : 0;   /* RR3 */
    wake = bpt__unpin_quiet(rec);                                                              /* RR4 */
    if (BPT__UNLIKELY(!ret)) return bpt__native_return_general(sp, r);
    BPT_TEST_POINT("Return route: done");   /* t_call_path counts them (no call) */
    return BPT__UNLIKELY(wake) ? bpt__native_return_woke(ret) : ret;
}
#endif /* BPT_NATIVE */

/* F3. */
int bpt_unwind_to(const void *spp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    int n = 0;
    if (!spp) return bpt__fail(BPT_EINVAL, "bpt_unwind_to: sp is NULL");
    if (!rec || !rec->shadow_depth[BPT__STACK_NATIVE]) return 0;
    bpt__pin();
#if defined(BPT_NATIVE)
    n = bpt__native_settle_dead(rec, (uintptr_t)spp, 0, "unwind");
#endif
    bpt__unpin(rec);
    return n;
}

/* >>vm frames: the token is (check value << 32) | (index + 1) on the
   thread's VM stack. */
BPT__PRIVATE void bpt__vm_frame_push(bpt__hit *h, bpt_vm_token *token) {
    bpt__thread *rec = h->rec;
    uint32_t i, mark = 0;
    bpt__now2 now = bpt__now2_for(h);
    bpt__frame *fr = token ? bpt__frame_reserve(rec, BPT__STACK_VM, &mark) : NULL;
    const bpt_vm_ops *ops = h->f->ops;
    bpt_func *caller;
    if (!fr) {
        for (i = 0; i < h->nwant; i++) bpt__frame_skipped(h->want_s[i]);
        return;
    }
    bpt__frame_pause_callers(h, BPT__STACK_VM, fr, mark, &now);
    bpt__frame_fill(fr, h, &now);
    if (++rec->vm_serial == 0) rec->vm_serial = 1;
    fr->sp = rec->vm_serial;
    fr->ret = 1;
    if (ops && ops->caller && (caller = ops->caller(h->frame)) != NULL) fr->caller_fid = caller->fid;
    bpt__frame_filled(rec, BPT__STACK_VM, mark);
    *token = (uint64_t)rec->vm_serial << 32 | (uint64_t)(fr - rec->shadow[BPT__STACK_VM] + 1);
}

/* The frame index of a live token, or -1 (stale, foreign, 0). */
static long bpt__vm_token_index(const bpt__thread *rec, bpt_vm_token token) {
    uint64_t ix = (token & 0xffffffffu) - 1;
    if (!rec || token == 0 || ix >= rec->shadow_depth[BPT__STACK_VM] ||
        rec->shadow[BPT__STACK_VM][ix].sp != (uintptr_t)(token >> 32))
        return -1;
    return (long)ix;
}

void bpt_vm_return(bpt_vm_token token, uint64_t value) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long ix = bpt__vm_token_index(rec, token);
    bpt__frame fr;
    if (ix < 0) return;
    bpt__pin();
    while (rec->shadow_depth[BPT__STACK_VM] > (uint32_t)ix + 1) {
        bpt__frame_pop(rec, BPT__STACK_VM, &fr);
        bpt__frame_unwound(rec, &fr, "throw", 0);
        bpt__frame_end(rec, BPT__STACK_VM, &fr);
    }
    bpt__frame_pop(rec, BPT__STACK_VM, &fr);
    bpt__frame_end(rec, BPT__STACK_VM, &fr);
    bpt__frame_returned(rec, &fr, value, value);
    bpt__frame_return_to(rec, &fr, fr.caller_fid, 0);
    bpt__unpin(rec);
}

void bpt_vm_unwind(bpt_vm_token token, uint64_t exception) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long ix = bpt__vm_token_index(rec, token);
    if (ix < 0) return;
    bpt__pin();
    while (rec->shadow_depth[BPT__STACK_VM] > (uint32_t)ix) {
        bpt__frame fr;
        bpt__frame_pop(rec, BPT__STACK_VM, &fr);
        bpt__frame_unwound(rec, &fr, "throw", exception);
        bpt__frame_end(rec, BPT__STACK_VM, &fr);
    }
    bpt__unpin(rec);
}

/* >>process switch and memory accounting */

/* For each session, the topmost frame of process on each stack: pause it
   (switching out), resume it (switching in) or charge it bytes. A switch
   made by a signal handler that interrupted a push pauses and resumes
   nothing below that push, as a handler's calls do (the floor of
   bpt__timem_current): the push may be pausing a caller right now, its
   span added and its start not yet cleared [H1], and a second pause would
   charge the span twice. Bytes skip only the frame being filled: the push
   does not touch its callers' bytes. While it pauses or resumes, the walk
   is marked (timem_walking) [H1]: a handler's calls that interrupt it
   pause and resume nothing (bpt__timem_current, bpt__timem_caller_at),
   and a switch that interrupts it does nothing, as a handler's switch
   and its switch back, both inside the walk, would cancel out.
   The sessions already met are kept by slot, one bit each (every session
   alive has one), so the walk reaches every session's topmost frame. A
   slot's higher frames are its live session's: a frame is filled where it
   is pushed and never moves, so a higher frame is a later push; and every
   frame of a destroyed session was pushed before its slot was free again,
   since destroy switches the session's breakpoints off and waits for
   thread progress (the 13 steps) before it unpublishes the slot [S1], so
   no hit still runs on them then, while a session that reuses the slot
   has its first frame pushed after it was made. The walk once kept 16
   ids and stopped when they were full: a
   17th session's frames were neither paused nor charged bytes
   (t_timem_many_sessions). */
enum { BPT__TIMEM_PAUSE, BPT__TIMEM_RESUME, BPT__TIMEM_MEMORY };
static void bpt__timem_current_each(bpt__thread *rec, uint64_t process, int what, bpt__now2 *now, int64_t bytes) {
    int stack;
    if (what != BPT__TIMEM_MEMORY) {
        if (rec->timem_walking) return;   /* nested in a walk: see above */
        rec->timem_walking = 1;
        bpt__compiler_barrier();   /* [H1] marked before any frame is touched */
    }
    for (stack = 0; stack < 2; stack++) {
        uint64_t seen[(BPT_MAX_SESSIONS + 63) / 64];   /* by slot (bpt__session_slot) */
        uint32_t d = rec->shadow_depth[stack], i, slot;
        uint32_t floor = what == BPT__TIMEM_MEMORY ? 0 : rec->shadow_filling[stack];
        memset(seen, 0, sizeof seen);
        while (d-- > floor) {
            bpt__frame *fr = &rec->shadow[stack][d];
            if (bpt__frame_filling(rec, stack, d) || fr->process != process || !bpt__frame_mine(rec, stack, fr))
                continue;
            for (i = 0; i < fr->nsess; i++) {
                bpt__frame_session *fs = &fr->sess[i];
                unsigned need = what == BPT__TIMEM_MEMORY ? BPT_MEMORY : BPT__FRAME_TIMEM;
                if (!(fs->actions & need) || (slot = bpt__session_slot(fs->id)) >= BPT_MAX_SESSIONS ||
                    (seen[slot / 64] >> (slot % 64) & 1))
                    continue;
                seen[slot / 64] |= (uint64_t)1 << (slot % 64);
                if (what == BPT__TIMEM_PAUSE) bpt__timem_pause(fs, now);
                else if (what == BPT__TIMEM_RESUME) bpt__timem_resume(fs, now);
                else fs->mem = bpt__mem_add(fs->mem, bytes);   /* modulo 2^64 (timem.c) */
            }
        }
    }
    if (what != BPT__TIMEM_MEMORY) {
        bpt__compiler_barrier();   /* [H1] every frame left before the mark goes */
        rec->timem_walking = 0;
    }
}

BPT__PRIVATE void bpt__frames_fiber_timem(bpt__thread *rec, int resume) {
    bpt__now2 now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_current_each(rec, rec->process, resume ? BPT__TIMEM_RESUME : BPT__TIMEM_PAUSE, &now, 0);
}

void bpt_process_switch(uint64_t process) {
    bpt__thread *rec = bpt__thread_self();
    bpt__now2 now;
    if (!rec) return;
    if (process == 0) process = rec->tid;
    if (process == rec->process) return;
    now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_current_each(rec, rec->process, BPT__TIMEM_PAUSE, &now, 0);
    rec->process = process;
    bpt__timem_current_each(rec, process, BPT__TIMEM_RESUME, &now, 0);
}

/* A frame names the process its call runs in; the thread's default
   process is its id, which fork's child changes (progress.c). The frames
   pushed in the parent's id kept it, so in the child no call of the
   thread's process found them: a callee's push paused no caller (charged
   its callee's time as its own), a switch or bpt_account_memory left them
   alone, and their time went to the parent's id. And the child's thread
   has a CPU clock of its own, started near 0 at the fork: a session that
   times by it (BPT__FRAME_CPU) and runs (since != 0) had its start in the
   parent's clock, and its spans in the child came out below zero, so 0
   (bpt__timem_span): it starts again at the child's clock, its span
   before the fork left to the parent's (the wall clock is one for both:
   its frames charge that span in both). Called by the fork child handler,
   with only this thread alive and no handler of bptrace's running on it. */
BPT__PRIVATE void bpt__frames_atfork_child(bpt__thread *rec, uint64_t from, uint64_t to) {
    bpt__now2 now = bpt__now2_at(0);
    int stack;
    uint32_t d, i;
    for (stack = 0; stack < 2; stack++)
        for (d = 0; d < rec->shadow_depth[stack]; d++) {
            bpt__frame *fr = &rec->shadow[stack][d];
            if (fr->process == from) fr->process = to;
            for (i = 0; i < fr->nsess; i++)
                if ((fr->sess[i].actions & BPT__FRAME_CPU) && fr->sess[i].since)
                    fr->sess[i].since = bpt__now_cpu(&now);
        }
}

void bpt_account_memory(int64_t bytes) {
    bpt__thread *rec = bpt__thread_self_or_null();
    if (!rec || !bytes) return;
    bpt__timem_current_each(rec, rec->process, BPT__TIMEM_MEMORY, NULL, bytes);
}

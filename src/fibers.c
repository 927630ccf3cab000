/* fibers.c: threads that switch stacks (makecontext/swapcontext): each
   stack's frames are told apart by a tag.

   A thread has one shadow stack, but a thread that runs fibers runs on
   several native stacks in turn, and a suspended fiber's frames stay in the
   shadow stack, between and under the frames of the others. Compared by
   stack pointer alone, a suspended fiber's live frames look like frames a
   longjmp left behind (they lie at or below the new call's sp, or above
   it: wherever its stack was placed). F0 would end them, and their return
   would then find no frame: an abort. So:

   S1. Leave (swapcontext, setcontext, before the switch): the calls the
       thread times now are paused, as a process switch pauses them, and
       the thread takes a new tag. A fresh context (makecontext) runs with
       it: its frames will carry it.
   S2. Back (swapcontext returns: this stack runs again, whoever switched
       to it, a uc_link return to it included): the thread takes this
       stack's tag back, and the calls it times resume.
   A native frame carries the tag of the stack it was pushed on (F1). F0,
   F2, U1 and bpt_unwind_to look only at frames with the thread's current
   tag (bpt__frame_mine). F2 ends a frame that other tags' frames cover by
   marking it gone: a tombstone, dropped once it is on top. A return whose
   frame carries another tag shows a switch back that bptrace did not see
   (the C library's own setcontext, for a uc_link to a getcontext): F2
   gives the thread that frame's tag (bpt__frame_adopt).

   A coroutine library with its own switch code (boost.context,
   hand-written assembly), which bptrace does not see, calls S1 and S2
   itself: bpt_fiber_switch_begin and _end.

   Not covered:
   - a fiber resumed on another thread: its frames are on the first
     thread's shadow stack, and its return aborts (no frame);
   - a coroutine library's own switch that is not announced;
   - setcontext to a getcontext on the same stack, used as a longjmp, and a
     fiber never resumed: the frames left behind keep their tag and are
     never ended; they take shadow stack room until the thread ends (past
     BPT_SHADOW_FRAMES, returns go untraced, counted). */
#include "internal.h"

/* S1: returns the tag of the stack being left. */
static uint64_t bpt__fiber_leave(bpt__thread *rec) {
    uint64_t mine = rec->fiber;
    bpt__frames_fiber_timem(rec, 0);
    if (++rec->fibers == 0) rec->fibers = 1;   /* 0: the thread's own stack */
    rec->fiber = rec->fibers;
    return mine;
}

/* S2. */
static void bpt__fiber_back(bpt__thread *rec, uint64_t mine) {
    rec->fiber = mine;
    bpt__frames_fiber_timem(rec, 1);
}

uint64_t bpt_fiber_switch_begin(void) {
    bpt__thread *rec = bpt__thread_self();
    return rec ? bpt__fiber_leave(rec) : 0;
}

void bpt_fiber_switch_end(uint64_t tag) {
    bpt__thread *rec = bpt__thread_self_or_null();
    if (rec) bpt__fiber_back(rec, tag);
}

#if defined(BPT__INTERPOSE)
/* ucontext_t * as void *: the same call, without <ucontext.h>. */
BPT__INTERPOSED int bpt__hook_swapcontext(void *oucp, const void *ucp) __asm__("swapcontext");
BPT__INTERPOSED int bpt__hook_setcontext(const void *ucp) __asm__("setcontext");

/* Returns when another context switches back to this one (S2), or at once
   with -1 on an error. The record is made here if the thread has none, so
   that the stack it leaves keeps tag 0 and the fiber gets its own. */
int bpt__hook_swapcontext(void *oucp, const void *ucp) {
    static bpt__atomic_ptr next;
    int (*swap)(void *, const void *) = (int (*)(void *, const void *))bpt__interposed_next(&next, "swapcontext");
    bpt__thread *rec = bpt__thread_self();
    uint64_t mine = rec ? bpt__fiber_leave(rec) : 0;
    int rc = swap(oucp, ucp);
    if ((rec = bpt__thread_self_or_null())) bpt__fiber_back(rec, mine);
    return rc;
}

/* Returns only on an error (-1): then the thread is back on its stack. */
int bpt__hook_setcontext(const void *ucp) {
    static bpt__atomic_ptr next;
    int (*set)(const void *) = (int (*)(const void *))bpt__interposed_next(&next, "setcontext");
    bpt__thread *rec = bpt__thread_self();
    uint64_t mine = rec ? bpt__fiber_leave(rec) : 0;
    int rc = set(ucp);
    if (rec) bpt__fiber_back(rec, mine);
    return rc;
}
#endif

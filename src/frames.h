/* frames.h: what other parts use of return, exception and return_to
   frames (frames.c): the shadow frame, what one hit gathers for it, and
   the calls that push and settle frames. */

#ifndef BPT_SHADOW_FRAMES
#  define BPT_SHADOW_FRAMES 512
#endif
#ifndef BPT_FRAME_SESSIONS
#  define BPT_FRAME_SESSIONS 4
#endif
#if BPT_SHADOW_FRAMES < 1 || BPT_FRAME_SESSIONS < 1 || BPT_FRAME_SESSIONS > 255
#  error "bptrace: BPT_SHADOW_FRAMES must be >= 1 and BPT_FRAME_SESSIONS in 1..255"
#endif

enum { BPT__STACK_NATIVE = 0, BPT__STACK_VM = 1 };

/* One session's wish for a call's return. */
typedef struct bpt__frame_session {
    uint64_t id;                  /* the session's weak id */
    uint32_t actions;             /* BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO, and the kinds' flags
                                     (BPT_TIME | BPT_MEMORY): wide enough for every kind (breakpoint.h) */
    uint8_t rettype;              /* enum bpt_arg_type of the return value */
    /* call_time / call_memory (timem.c), as BEAM's process_breakpoint_trace:
       the function runs for this session from `since` (0: paused, while a
       callee the session times runs, or while its process is switched out),
       in the session's clock: the wall clock's ticks (bpt__now_ticks), or the
       thread's CPU ns (BPT__FRAME_CPU); own_ns in ns. */
    uint64_t since, own_ns;
    int64_t mem;
} bpt__frame_session;

#define BPT__FRAME_TIMEM (BPT_TIME | BPT_MEMORY)
#define BPT__FRAME_CPU (1u << 24)   /* the session times by thread CPU time (bpt_session_desc.time_cpu) */

struct bpt__frame {
    uintptr_t ret;                /* native: the original return address, stripped of any
                                     signature; 0: a tail call, the frame below holds it */
    uintptr_t sp;                 /* native: stack pointer at entry; VM: the token's check value */
    uint32_t fid;                 /* the function's name id: valid after it is gone */
    uint32_t caller_fid;          /* VM: the function the call returns to (0: unknown) */
    bpt_func *f;                  /* for call_time: native records live forever; a VM function
                                     is not unregistered while its calls run (bpt_unregister) */
    uint64_t process;             /* the process the call runs in */
    uint64_t fiber;               /* native: the tag of the stack it was pushed on (fibers.c) */
    uint16_t nsess;
    uint8_t unhooked;             /* native: 1 while an unwind has the original address back in
                                     the frame's slot (unwind.c U1..U2) */
    uint8_t gone;                 /* native: ended under a frame of another stack, which is still
                                     alive: a tombstone, dropped once it is on top */
    bpt__frame_session sess[BPT_FRAME_SESSIONS];
};

/* What one hit gathers for its frame while it walks the sessions. */
struct bpt__hit {
    bpt__thread *rec;
    bpt_func *f;
    const void *frame;            /* VM frame, or the stub's bpt__regs */
    int no_frame;                 /* the site keeps no return frame (a VM hit with no token) */
    uint32_t nwant;
    unsigned wanted;              /* every want[i].actions or'ed: what any of them asked for */
    bpt__frame_session want[BPT_FRAME_SESSIONS];
    bpt__session *want_s[BPT_FRAME_SESSIONS];   /* for counting a skipped frame */
};

BPT__HOT void bpt__hit_want_frame(bpt__hit *h, bpt__session *s, unsigned actions, uint8_t rettype);
BPT__HOT int bpt__hit_frame_room(const bpt__hit *h, const bpt__session *s);
BPT__HOT int bpt__breakpoint(bpt__hit *h);   /* hit.c: the hit path; 1: pinned, push h's frame, then unpin */
BPT__PRIVATE int bpt__frame_filling(const bpt__thread *rec, int stack, uint32_t d);   /* being pushed [H1] */
/* A frame of the stack the thread runs on now, not ended (native frames of
   other fibers, and tombstones, are not; every VM frame is). */
BPT__PRIVATE int bpt__frame_mine(const bpt__thread *rec, int stack, const bpt__frame *fr);
/* Pause (0) or resume (1) the call_time of the frames the thread times now:
   a fiber switch (fibers.c), as a process switch. */
BPT__PRIVATE void bpt__frames_fiber_timem(bpt__thread *rec, int resume);
BPT__PRIVATE void bpt__vm_frame_push(bpt__hit *h, bpt_vm_token *token);
/* fork's child: the forking thread's frames of process `from` (its id in
   the parent) run on in process `to` (its id in the child), and those
   timed by the thread's CPU clock by the child's. */
BPT__PRIVATE void bpt__frames_atfork_child(bpt__thread *rec, uint64_t from, uint64_t to);
#if defined(BPT_NATIVE)
BPT__PRIVATE uintptr_t bpt__native_caller(const bpt__hit *h);
BPT__PRIVATE void bpt__native_settle(bpt__hit *h);
/* Frames at or below sp (on the same stack) get exception_from cls
   ("unwind" or "throw") and are popped; tail: sp's own frame is shared by
   a tail call, alive. Pinned. */
BPT__PRIVATE int bpt__native_settle_dead(bpt__thread *rec, uintptr_t sp, int tail, const char *cls);
BPT__PRIVATE void bpt__native_frame_push(bpt__hit *h);
/* The short paths' F0 check and F1 (CALL_RETURN, TIME: site_native.c). */
BPT__HOT BPT__INTREGS int bpt__native_frames_settled(const bpt__thread *rec, uintptr_t sp);
BPT__HOT BPT__INTREGS int bpt__native_frame_plain_ok(const bpt__thread *rec, const bpt_func *f, const uintptr_t *slot);
BPT__HOT BPT__INTREGS void bpt__native_frame_push_plain(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                        unsigned actions, uint8_t rettype, uintptr_t sp,
                                                        uintptr_t *slot, bpt__frame_session *caller, uint64_t now);
/* The time path's caller check (frames.c: 0: only the walk can tell). */
BPT__HOT BPT__INTREGS int bpt__timem_caller_at(bpt__thread *rec, uint32_t d, uint64_t id, uint64_t process,
                                               bpt__frame_session **caller);
/* The thread's sigaltstack [*lo, *hi) (empty: none); 1 when it runs on it
   now, at sp. bpt__altstack_note remembers an armed one (frames.c). */
BPT__PRIVATE int bpt__altstack_bounds(bpt__thread *rec, uintptr_t sp, uintptr_t *lo, uintptr_t *hi);
BPT__PRIVATE void bpt__altstack_note(bpt__thread *rec);
/* Called by the return trampolines' assembly by name: not static. */
BPT__ASM_CALLED uintptr_t bpt__native_return(uintptr_t sp, bpt__retregs *r);
#endif

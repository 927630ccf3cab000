/* api_progress.h: thread progress, the public half's one concern here: the
   epoch mechanism that lets bptrace change breakpoints while every thread
   runs (read-side pins, waits for every thread, managed threads). */
#include "bpt_api.h"

/* >>progress
   Thread progress: an epoch mechanism in the manner of ERTS erl_thr_progress.c
   and liburcu's memb flavour. Readers pin around every use of breakpoint data;
   a waiter learns that every thread has left the pins that were in force
   when the wait began.
   The first use of thread progress registers membarrier(2). Registering
   while other threads already run costs the kernel a grace period (tens of
   ms, once): a program that starts its threads first pays it in its first
   pin or wait. Calling bpt_thread_progress_stats() early, while the program
   is still single-threaded, moves that cost out of the way. */

/* bpt_thread_progress_pin / bpt_thread_progress_unpin: enter / leave a
   read-side section. While the calling thread is pinned, no wait that began
   after the pin returns before the matching unpin. Pins nest (counted),
   also from a signal handler that interrupts a pinned section. A pin is
   cheap (no fence where membarrier(2) is available; for a managed online
   thread it only counts the nesting) and never blocks. Unpin wakes a waiter sleeping on this
   thread; an unpin without a pin is ignored. The first pin of a thread
   creates its thread record; if that allocation fails the pin does nothing.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety
     any thread (acts on the caller); async-signal-safe once the thread has
     its record; a managed thread must be online
   Source         rcu_read_lock / rcu_read_unlock in liburcu urcu-memb
*/
BPT_API void bpt_thread_progress_pin(void);
BPT_API void bpt_thread_progress_unpin(void);

/* bpt_thread_progress_wait: wait until every thread has passed a quiescent
   point since this call began. On return, every pin section that was in
   force when the call began has ended, managed online threads have called
   bpt_thread_progress() since, and all stores made before the call are
   visible to every thread. Offline managed threads, exited threads and
   unpinned threads never delay it. A managed caller is offline while it
   waits.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors
     BPT_EDEADLK   called from a tracer callback, or by a pinned thread (it
                   would wait for itself)
   Thread safety
     any thread except as above; concurrent waiters are serialized; not
     async-signal-safe (it may sleep and takes a lock)
   Source         erts_thr_progress_block in erl_thr_progress.c; liburcu's synchronize_rcu
*/
BPT_API int bpt_thread_progress_wait(void);

/* bpt_thread_progress_wait_sync_core: as bpt_thread_progress_wait, and in
   addition every thread of the process that runs has serialized its
   instruction stream, so that every thread executes code written before the
   call. Use after writing code. Where the kernel has membarrier
   PRIVATE_EXPEDITED_SYNC_CORE, one such call serializes every running
   thread and is also the wait's first heavy barrier [B1] (a thread that is
   not running serializes on its way back to user space); elsewhere, or
   when that call fails, each thread that has a thread progress record
   (one that ever pinned) gets a signal (BPT_SYNC_CORE_SIGNAL), whose
   return serializes it, and a thread without one never ran a breakpoint.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors         BPT_EDEADLK   called from a tracer callback, or by a pinned thread
   Thread safety  as bpt_thread_progress_wait
   Source         Linux text_poke_sync (arch/x86/kernel/alternative.c)
*/
BPT_API int bpt_thread_progress_wait_sync_core(void);

/* bpt_thread_progress_register_managed: declare the calling thread managed,
   as ERTS managed threads. It then promises to call bpt_thread_progress() at
   quiescent points (e.g. once per frame) and to go offline before blocking;
   in exchange its pins cost nothing. Waiters wait for its next
   bpt_thread_progress(). Where it blocks inside bptrace (a set-path call, a
   wait) bptrace takes it offline meanwhile. It starts online. There is no
   way back to unmanaged.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL   called while pinned
     BPT_ENOMEM   the thread's record could not be allocated
   Thread safety  any thread (acts on the caller); not async-signal-safe
   Source         erts_thr_progress_register_managed_thread in erl_thr_progress.c
*/
BPT_API int bpt_thread_progress_register_managed(void);

/* bpt_thread_progress: a managed thread reports a quiescent point: it holds
   no reference to breakpoint data. Wakes a waiter. No-op on unmanaged or
   offline threads; ignored inside a pinned section or tracer callback (not
   a quiescent point). Never blocks.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety  any thread (acts on the caller); never blocks
   Source         erts_thr_progress_update in erl_thr_progress.c
*/
BPT_API void bpt_thread_progress(void);

/* bpt_thread_progress_offline / bpt_thread_progress_online: a managed
   thread leaves (before blocking, e.g. in a futex, a condition variable or
   I/O) and re-enters the set of threads that waiters wait for. While
   offline it must not pin nor hit a breakpoint. Both are ignored inside a
   pinned section (going online there would hide the section's older
   epoch from waiters). No-op on unmanaged threads. Never block.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety  any thread (acts on the caller); never blocks
   Source         erts_thr_progress_prepare_wait / erts_thr_progress_finalize_wait
*/
BPT_API void bpt_thread_progress_offline(void);
BPT_API void bpt_thread_progress_online(void);

/* What thread progress has done, for tests and benchmarks. */
typedef struct bpt_progress_stats {
    uint64_t epoch;          /* current global epoch (starts at 1), a count */
    uint64_t waits;          /* completed waits, a count */
    uint64_t sync_core_waits; /* of them, waits that also serialized every thread's instruction
                                stream (bpt_thread_progress_wait_sync_core), a count */
    uint64_t futex_sleeps;   /* times a waiter slept on the futex, a count */
    uint64_t futex_wakes;    /* wake-ups readers issued to a sleeping waiter, a count */
    uint32_t threads;        /* thread records in use (live threads that pinned) */
    uint32_t records;        /* thread records ever created (they are reused) */
    int      membarrier;     /* 1: light pins (membarrier registered), 0: fence pins */
    int      sync_core;      /* 1: membarrier SYNC_CORE registered, 0: signal fallback */
} bpt_progress_stats;

/* bpt_thread_progress_stats: what thread progress has done so far. The
   counters are read without a lock: each is exact, but together they are
   not a snapshot. The first call sets up thread progress (see above).

   Parameters     out   where to write the counters; not NULL
   Returns        0, or a BPT_E* code
   Errors         BPT_EINVAL   out is NULL
   Thread safety  any thread; not from a signal handler on the first call
   Source         bptrace
*/
BPT_API int bpt_thread_progress_stats(bpt_progress_stats *out);

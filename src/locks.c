/* locks.c: bptrace's locks, the one order in which they are taken, and
   what fork() does with them.

   The locks, outermost first. A thread that holds one takes only locks
   further down the list, so no two threads can wait for each other:
     1. bpt__code_mod_permission (here; seized in bp.c): every change of
        breakpoints, registrations and sessions, as BEAM's code modification
        permission. Its holder waits for thread progress (2), interns
        names (3), and drains no session.
     2. bpt__progress.wait_lock (progress.c): one thread progress waiter at
        a time.
     3. bpt__intern_lock (intern.c): the table of interned names, and the
        name table that gives records their ids (names.c).
   A leaf, never held while another is taken: a session's drain_lock
   (session.c). The hit path takes none of them: every thread has its own
   trace buffer and call_time tables, however many threads there are.

   fork() copies locks as they are: one held by another thread would stay
   held in the child forever. The prepare handler takes the locks of the
   set path in this order, so a fork never lands in the middle of a
   breakpoint change or an intern (the protocol runs to its end first);
   parent and child release them, and the child resets what belonged to
   threads that do not exist in it. */
#include "internal.h"

BPT__SHARED pthread_mutex_t bpt__code_mod_permission = PTHREAD_MUTEX_INITIALIZER;
static int bpt__fork_took_permission;

/* A managed online thread goes offline while it waits for the permission
   (bpt__block_begin, as every wait inside bptrace does): the holder may be
   waiting at step 4 for that very thread's progress. */
static void bpt__atfork_prepare(void) {
    bpt__thread *self = bpt__thread_self_or_null();
    /* A fork from a callback that runs under the permission keeps it held. */
    bpt__fork_took_permission = !(self && self->holds_permission);
    if (bpt__fork_took_permission) {
        bpt__block_begin(self);
        pthread_mutex_lock(&bpt__code_mod_permission);
    }
    pthread_mutex_lock(&bpt__intern_lock);
}

static void bpt__atfork_release(void) {
    pthread_mutex_unlock(&bpt__intern_lock);
    if (bpt__fork_took_permission) pthread_mutex_unlock(&bpt__code_mod_permission);
}

static void bpt__atfork_parent(void) {
    bpt__atfork_release();
    bpt__block_end(bpt__thread_self_or_null());   /* online again, if the prepare took it offline */
}

/* Only the forking thread runs in the child: its locks are released, and
   the other threads' records and drain locks are reset. */
static void bpt__atfork_child(void) {
    bpt__atfork_release();
    bpt__sessions_atfork_child();
    bpt__progress_atfork_child(bpt__thread_self_or_null());
    bpt__block_end(bpt__thread_self_or_null());
}

/* Once, from thread progress's initialisation. */
BPT__PRIVATE void bpt__locks_init(void) {
    pthread_atfork(bpt__atfork_prepare, bpt__atfork_parent, bpt__atfork_child);
}

/* t_progress.c: thread progress (bpt_thread_progress_*).

   What it shows, each with the figures it measured:
     a. a wait returns only after every thread pinned before it has unpinned
     b. a thread that exits while pinned does not hold a waiter back
     c. an offline managed thread blocked on a condvar does not hold a waiter
        back; an online one does, until its next bpt_thread_progress()
     d. nested pins, and pins inside a signal handler (with the thread pinned
        and not pinned), leave the thread's pin state exactly as before; an
        unpin without a pin is ignored; pin/unpin survives a SIGUSR1 storm
     e. stress: 4 readers x 10^7 pin/unpin (at least; they go on until the
        waiter is done) against 10^4 waits, with a publish / wait / poison /
        deferred-free protocol that catches a broken grace period
     f. a wait from a pinned thread returns BPT_EDEADLK
     g. bpt_thread_progress_stats reports the membarrier mode

   Ordering claims are checked with flags that the other thread sets just
   before the event (never with timing thresholds); timings are printed.
   A watchdog thread fails the test (exit 3) if a phase overruns its limit,
   which is how "the wait completes" is checked.

   Self-test of the test: build with -DT_SABOTAGE_WAIT to replace
   bpt_thread_progress_wait by a no-op: a, b2, c2, c3, d1-d5, e and f must then
   fail; with -DT_SABOTAGE_HANG (a wait that never returns) the watchdog must
   end the test with exit status 3.

   BPT_TEST_CONCURRENCY (tests/run: also run this test under TSAN) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, pthread barriers, syscall under -std=c99 */
#endif
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef T_SABOTAGE_WAIT
static int t_sabotaged_wait(void) { return 0; }
#define bpt_thread_progress_wait() t_sabotaged_wait()
#endif
#ifdef T_SABOTAGE_HANG   /* a wait that never returns: the watchdog must fail phase a */
static int t_sabotaged_wait(void) { for (;;) sleep(1000); return 0; }
#define bpt_thread_progress_wait() t_sabotaged_wait()
#endif

/* CHECK touches a plain counter: serialize it, since several threads check. */
static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;
#define TCHECK(...) do { pthread_mutex_lock(&check_mu); CHECK(__VA_ARGS__); \
                         pthread_mutex_unlock(&check_mu); } while (0)
#define TCHECK_RC(expr, expected) do { int t_rc_ = (expr); \
    TCHECK(t_rc_ == (expected), "%s returned %d (%s), expected %d (%s); last error: %s", \
           #expr, t_rc_, bpt_strerror(t_rc_), (int)(expected), \
           bpt_strerror((int)(expected)), bpt_last_error()); } while (0)

/* ---- time ---- */
static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static double ms_since(uint64_t t0) { return (double)(now_ns() - t0) / 1e6; }
static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) { }
}

/* ---- flags: every cross-thread signal of the test goes through one mutex ---- */
enum {
    F_A_PINNED, F_A_UNPIN = F_A_PINNED + 4,
    F_B1_PINNED = F_A_UNPIN + 4, F_B1_EXIT, F_B2_PINNED, F_B2_EXITING,
    F_C_OFFLINE, F_C_WAKE, F_C_ONLINE, F_C_WAITER_STARTED, F_C_PROGRESS_CALLED,
    F_C_FINISH, F_C_EXITING, F_C3_PINNED, F_C3_UNPIN,
    F_D1_NESTED, F_D1_UNPIN, F_D1_DONE, F_D2_PINNED, F_D2_UNPIN, F_D2_DONE,
    F_D3_UNPINNED, F_D3_WAITED, F_D3_PINNED, F_D3_UNPIN, F_D3_DONE,
    F_D5_PINNED, F_D5_UNPIN, F_D5_DONE, F_D4_READY, F_D4_DONE, F_D4_FINISHED,
    F_E_READERS_ACTIVE, F_E_WAITER_DONE,
    F_COUNT
};
static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_cv = PTHREAD_COND_INITIALIZER;
static long flag[F_COUNT];
static uint64_t flag_time[F_COUNT]; /* when the flag was last set */

static void fset(int i, long v) {
    pthread_mutex_lock(&fl_mu);
    flag[i] = v;
    flag_time[i] = now_ns();
    pthread_cond_broadcast(&fl_cv);
    pthread_mutex_unlock(&fl_mu);
}
static long fget(int i) {
    long v;
    pthread_mutex_lock(&fl_mu);
    v = flag[i];
    pthread_mutex_unlock(&fl_mu);
    return v;
}
static uint64_t ftime(int i) {
    uint64_t t;
    pthread_mutex_lock(&fl_mu);
    t = flag_time[i];
    pthread_mutex_unlock(&fl_mu);
    return t;
}
static void fawait(int i, long v) { /* until flag[i] >= v */
    pthread_mutex_lock(&fl_mu);
    while (flag[i] < v) pthread_cond_wait(&fl_cv, &fl_mu);
    pthread_mutex_unlock(&fl_mu);
}

/* ---- watchdog: a phase that overruns its limit fails the whole test ---- */
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static const char *wd_what;
static int wd_limit_s, wd_stop;
static uint64_t wd_deadline;

static void *wd_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&wd_mu);
    while (!wd_stop) {
        if (!wd_what) { pthread_cond_wait(&wd_cv, &wd_mu); continue; }
        if (now_ns() >= wd_deadline) {
            fprintf(stderr, "%s: CHECK failed: watchdog: phase '%s' did not finish within %d s "
                    "(a waiter never returned)\n", __FILE__, wd_what, wd_limit_s);
            fflush(stdout);
            fflush(stderr);
            _exit(3);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)(wd_deadline / 1000000000u);
            ts.tv_nsec = (long)(wd_deadline % 1000000000u);
            pthread_cond_timedwait(&wd_cv, &wd_mu, &ts);
        }
    }
    pthread_mutex_unlock(&wd_mu);
    return NULL;
}
static void wd_arm(const char *what, int seconds) {
    pthread_mutex_lock(&wd_mu);
    wd_what = what;
    wd_limit_s = seconds;
    wd_deadline = now_ns() + (uint64_t)seconds * 1000000000u;
    pthread_cond_broadcast(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}
static void wd_disarm(void) {
    pthread_mutex_lock(&wd_mu);
    wd_what = NULL;
    pthread_cond_broadcast(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}

/* Threads of this test that pinned at least once (to judge record reuse). */
static long pinning_threads;
static void count_pinning_thread(void) {
    pthread_mutex_lock(&check_mu);
    pinning_threads++;
    pthread_mutex_unlock(&check_mu);
}

static bpt_progress_stats get_stats(void) {
    bpt_progress_stats st;
    memset(&st, 0, sizeof st);
    TCHECK_RC(bpt_thread_progress_stats(&st), 0);
    return st;
}

/* ================= a: a wait outlasts every pin in force when it began ================= */
static const long a_delay_ms[4] = { 100, 30, 150, 60 };
static void *a_reader(void *arg) {
    int i = (int)(intptr_t)arg;
    count_pinning_thread();
    bpt_thread_progress_pin();
    fset(F_A_PINNED + i, 1);
    sleep_ms(a_delay_ms[i]);   /* the deliberately delayed reader */
    fset(F_A_UNPIN + i, 1);    /* just before unpinning; flag_time = the unpin time */
    bpt_thread_progress_unpin();
    return NULL;
}

static void phase_a(void) {
    int round, i;
    for (round = 0; round < 2; round++) {
        int first = round == 0 ? 0 : 1, n = round == 0 ? 1 : 3;
        pthread_t th[4];
        uint64_t t0, t1, last_unpin = 0;
        int rc, all_unpinned = 1;
        for (i = first; i < first + n; i++)
            pthread_create(&th[i], NULL, a_reader, (void *)(intptr_t)i);
        for (i = first; i < first + n; i++) fawait(F_A_PINNED + i, 1);
        wd_arm("a: wait for pinned readers", 10);
        t0 = now_ns();
        rc = bpt_thread_progress_wait();
        t1 = now_ns();
        wd_disarm();
        TCHECK_RC(rc, 0);
        for (i = first; i < first + n; i++) {
            TCHECK(fget(F_A_UNPIN + i) == 1,
                   "a%d: bpt_thread_progress_wait returned while reader %d (pinned before the wait, "
                   "delayed %ld ms) was still pinned", round + 1, i, a_delay_ms[i]);
            if (fget(F_A_UNPIN + i) != 1) all_unpinned = 0;
            else if (ftime(F_A_UNPIN + i) > last_unpin) last_unpin = ftime(F_A_UNPIN + i);
        }
        for (i = first; i < first + n; i++) pthread_join(th[i], NULL);
        if (round == 0)
            printf("a1: 1 reader pinned for %ld ms: wait took %.1f ms, returned %.3f ms after its unpin%s\n",
                   a_delay_ms[0], (double)(t1 - t0) / 1e6,
                   all_unpinned ? (double)(t1 - last_unpin) / 1e6 : -1.0,
                   all_unpinned ? "" : " (RETURNED EARLY)");
        else
            printf("a2: 3 readers pinned for 30/150/60 ms: wait took %.1f ms, returned %.3f ms after the last unpin%s\n",
                   (double)(t1 - t0) / 1e6,
                   all_unpinned ? (double)(t1 - last_unpin) / 1e6 : -1.0,
                   all_unpinned ? "" : " (RETURNED EARLY)");
    }
}

/* ================= b: threads that exit while pinned ================= */
static void *b1_thread(void *arg) {
    (void)arg;
    count_pinning_thread();
    bpt_thread_progress_pin();
    fset(F_B1_PINNED, 1);
    fawait(F_B1_EXIT, 1);  /* main reads the stats while we are pinned and alive */
    pthread_exit(NULL);   /* still pinned */
    return NULL;
}
static void *b2_thread(void *arg) {
    (void)arg;
    count_pinning_thread();
    bpt_thread_progress_pin();
    bpt_thread_progress_pin();    /* nested, too */
    fset(F_B2_PINNED, 1);
    sleep_ms(100);                /* the waiter is waiting on us by now */
    fset(F_B2_EXITING, 1);
    pthread_exit(NULL);           /* exits pinned (depth 2) while a waiter waits */
    return NULL;
}

static void phase_b(void) {
    pthread_t th;
    bpt_progress_stats s0, s1, s2;
    uint64_t t0;
    int rc;
    double b1_ms, b2_ms;

    /* b1: pin, exit; then wait. */
    s0 = get_stats();
    pthread_create(&th, NULL, b1_thread, NULL);
    fawait(F_B1_PINNED, 1);
    s1 = get_stats();
    fset(F_B1_EXIT, 1);
    pthread_join(th, NULL);
    wd_arm("b1: wait after a thread exited pinned", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    b1_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    s2 = get_stats();
    printf("b1: thread exited while pinned, then wait: %.3f ms (thread records in use %u -> %u while "
           "pinned -> %u after exit)\n", b1_ms, (unsigned)s0.threads, (unsigned)s1.threads,
           (unsigned)s2.threads);
    TCHECK(s1.threads == s0.threads + 1, "b1: records in use %u while a new thread was pinned, "
           "expected %u + 1", (unsigned)s1.threads, (unsigned)s0.threads);
    TCHECK(s2.threads == s0.threads, "b1: records in use %u after the pinned thread exited "
           "(and a wait), expected %u: the exited thread's record was not released",
           (unsigned)s2.threads, (unsigned)s0.threads);

    /* b2: a waiter is already waiting when the pinned thread exits. */
    pthread_create(&th, NULL, b2_thread, NULL);
    fawait(F_B2_PINNED, 1);
    wd_arm("b2: wait on a thread that exits pinned", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    b2_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_B2_EXITING) == 1, "b2: the wait returned before the pinned thread exited");
    pthread_join(th, NULL);
    printf("b2: waiter started while a thread was pinned (depth 2); it exited pinned 100 ms later: "
           "wait took %.1f ms\n", b2_ms);
}

/* ================= c: managed threads ================= */
static void *c_managed(void *arg) {
    (void)arg;
    count_pinning_thread();
    TCHECK_RC(bpt_thread_progress_register_managed(), 0);
    bpt_thread_progress_pin();          /* free for a managed online thread */
    bpt_thread_progress_unpin();
    bpt_thread_progress();

    /* c1: offline, then block on a condition variable. */
    bpt_thread_progress_offline();
    pthread_mutex_lock(&fl_mu);
    flag[F_C_OFFLINE] = 1;
    pthread_cond_broadcast(&fl_cv);
    while (!flag[F_C_WAKE]) pthread_cond_wait(&fl_cv, &fl_mu);
    pthread_mutex_unlock(&fl_mu);
    bpt_thread_progress_online();
    fset(F_C_ONLINE, 1);

    /* c2: online; report progress only ~100 ms after the waiter started. */
    fawait(F_C_WAITER_STARTED, 1);     /* blocking while online: the waiter must wait for us */
    sleep_ms(100);
    fset(F_C_PROGRESS_CALLED, 1);      /* just before the quiescent point */
    bpt_thread_progress();
    bpt_thread_progress_offline();     /* about to block again */
    fawait(F_C_FINISH, 1);
    bpt_thread_progress_online();
    fset(F_C_EXITING, 1);
    return NULL;                       /* exits online: must not delay later waits */
}
static void *c3_unmanaged(void *arg) {
    (void)arg;
    count_pinning_thread();
    bpt_thread_progress_pin();
    bpt_thread_progress_offline();     /* no-op on an unmanaged thread: still pinned */
    bpt_thread_progress();             /* no-op too */
    fset(F_C3_PINNED, 1);
    sleep_ms(100);
    fset(F_C3_UNPIN, 1);
    bpt_thread_progress_unpin();
    bpt_thread_progress_online();      /* no-op */
    return NULL;
}

static void phase_c(void) {
    pthread_t th;
    uint64_t t0;
    int rc;
    double c1_ms, c2_ms, c2b_ms, c2c_ms, c3_ms;

    pthread_create(&th, NULL, c_managed, NULL);
    fawait(F_C_OFFLINE, 1);   /* takes fl_mu: the managed thread is now inside pthread_cond_wait */
    wd_arm("c1: wait with a managed thread offline and blocked", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    c1_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    printf("c1: managed thread offline, blocked on a condvar: wait took %.3f ms\n", c1_ms);

    fset(F_C_WAKE, 1);
    fawait(F_C_ONLINE, 1);
    wd_arm("c2: wait for an online managed thread", 10);
    fset(F_C_WAITER_STARTED, 1);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    c2_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_C_PROGRESS_CALLED) == 1,
           "c2: the wait returned before the online managed thread called bpt_thread_progress()");
    printf("c2: managed thread online, its bpt_thread_progress() ~100 ms after the waiter started: "
           "wait took %.1f ms\n", c2_ms);

    /* the managed thread is offline again (after its progress call); a wait must not need it */
    wd_arm("c2b: wait with the managed thread offline again", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    c2b_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    fset(F_C_FINISH, 1);
    pthread_join(th, NULL);
    wd_arm("c2c: wait after a managed thread exited online", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    c2c_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    printf("c2b/c2c: wait with it offline again %.3f ms; after it exited online %.3f ms\n",
           c2b_ms, c2c_ms);

    /* c3: offline/progress are no-ops on an unmanaged thread: its pin still holds the waiter */
    pthread_create(&th, NULL, c3_unmanaged, NULL);
    fawait(F_C3_PINNED, 1);
    wd_arm("c3: wait on a pinned unmanaged thread", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    c3_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_C3_UNPIN) == 1, "c3: bpt_thread_progress_offline() on an unmanaged pinned thread "
           "let a waiter return before its unpin");
    pthread_join(th, NULL);
    printf("c3: unmanaged pinned thread called offline()+progress() (no-ops): wait took %.1f ms\n", c3_ms);
}

/* ================= d: nested pins, pins in signal handlers ================= */
static volatile sig_atomic_t handler_runs; /* only the signalled thread touches it */
static void on_usr1(int sig) {
    (void)sig;
    bpt_thread_progress_pin();
    bpt_thread_progress_pin();
    bpt_thread_progress_unpin();
    bpt_thread_progress_unpin();
    handler_runs = handler_runs + 1;
}

static long d4_iters, d4_signals, d4_cycles;
static long d4_handler_runs;
static void *d_thread(void *arg) {
    sig_atomic_t before;
    long i;
    (void)arg;
    count_pinning_thread();

    /* d1: pin, pin, unpin: still pinned */
    bpt_thread_progress_pin();
    bpt_thread_progress_pin();
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);   /* still pinned, says the library */
    fset(F_D1_NESTED, 1);
    sleep_ms(100);
    fset(F_D1_UNPIN, 1);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);             /* not pinned any more */
    fawait(F_D1_DONE, 1);

    /* d2: the handler pins and unpins while this thread is pinned */
    bpt_thread_progress_pin();
    before = handler_runs;
    pthread_kill(pthread_self(), SIGUSR1);
    TCHECK(handler_runs == before + 1, "d2: the SIGUSR1 handler did not run (%d -> %d)",
           (int)before, (int)handler_runs);
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);   /* still pinned after the handler */
    fset(F_D2_PINNED, 1);
    sleep_ms(100);
    fset(F_D2_UNPIN, 1);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);             /* and not pinned after the outer unpin */
    fawait(F_D2_DONE, 1);

    /* d3: the handler pins and unpins while this thread is NOT pinned */
    before = handler_runs;
    pthread_kill(pthread_self(), SIGUSR1);
    TCHECK(handler_runs == before + 1, "d3: the SIGUSR1 handler did not run (%d -> %d)",
           (int)before, (int)handler_runs);
    TCHECK_RC(bpt_thread_progress_wait(), 0);             /* still not pinned */
    fset(F_D3_UNPINNED, 1);
    fawait(F_D3_WAITED, 1);
    bpt_thread_progress_pin();                            /* and a pin still pins */
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);
    fset(F_D3_PINNED, 1);
    sleep_ms(100);
    fset(F_D3_UNPIN, 1);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);
    fawait(F_D3_DONE, 1);

    /* d5: an unpin without a pin is ignored: a later pin still holds a waiter */
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);
    bpt_thread_progress_pin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);
    fset(F_D5_PINNED, 1);
    sleep_ms(100);
    fset(F_D5_UNPIN, 1);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);
    fawait(F_D5_DONE, 1);

    /* d4: pin/unpin (nested every 3rd) under a storm of SIGUSR1 whose handler
       pins, until main has sent all its signals */
    before = handler_runs;
    fset(F_D4_READY, 1);
    for (i = 0; i < d4_iters || !fget(F_D4_DONE); i++) {
        bpt_thread_progress_pin();
        if (i % 3 == 0) { bpt_thread_progress_pin(); bpt_thread_progress_unpin(); }
        bpt_thread_progress_unpin();
    }
    d4_cycles = i;
    fset(F_D4_FINISHED, 1);
    d4_handler_runs = (long)(handler_runs - before);      /* read by main after join */
    TCHECK_RC(bpt_thread_progress_wait(), 0);             /* balanced: not pinned */
    bpt_thread_progress_pin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);   /* balanced: a pin still pins */
    bpt_thread_progress_unpin();
    return NULL;
}
static void *d4_waiter(void *arg) {
    long *waits = (long *)arg;
    while (!fget(F_D4_FINISHED)) {
        TCHECK_RC(bpt_thread_progress_wait(), 0);
        (*waits)++;
    }
    return NULL;
}

static void phase_d(void) {
    pthread_t th, wth;
    struct sigaction sa;
    uint64_t t0;
    int rc;
    long signals = 0, d4_waits = 0;
    double d1_ms, d2_ms, d3a_ms, d3b_ms, d4_ms, d5_ms;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    d4_iters = check_scale(400000);
    d4_signals = check_scale(5000);
    if (d4_signals < 1000) d4_signals = 1000;

    pthread_create(&th, NULL, d_thread, NULL);

    fawait(F_D1_NESTED, 1);
    wd_arm("d1: wait on a nested pin", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    d1_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_D1_UNPIN) == 1, "d1: after pin,pin,unpin the wait returned before the final unpin");
    fset(F_D1_DONE, 1);

    fawait(F_D2_PINNED, 1);
    wd_arm("d2: wait after a handler pinned inside a pinned section", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    d2_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_D2_UNPIN) == 1, "d2: after a signal handler pinned and unpinned inside a pinned "
           "section, the wait returned before the outer unpin");
    fset(F_D2_DONE, 1);

    fawait(F_D3_UNPINNED, 1);
    wd_arm("d3: wait after a handler pinned in an unpinned thread", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();       /* the thread is idle and unpinned: must complete */
    d3a_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    fset(F_D3_WAITED, 1);
    fawait(F_D3_PINNED, 1);
    wd_arm("d3: wait on a pin after the handler", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    d3b_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_D3_UNPIN) == 1, "d3: after a handler pinned/unpinned in an unpinned thread, "
           "a later pin of that thread no longer held a waiter back");
    fset(F_D3_DONE, 1);

    fawait(F_D5_PINNED, 1);
    wd_arm("d5: wait on a pin after a stray unpin", 10);
    t0 = now_ns();
    rc = bpt_thread_progress_wait();
    d5_ms = ms_since(t0);
    wd_disarm();
    TCHECK_RC(rc, 0);
    TCHECK(fget(F_D5_UNPIN) == 1, "d5: after an unpin without a pin, the thread's next pin no longer "
           "held a waiter back");
    fset(F_D5_DONE, 1);

    /* d4: signal storm with a concurrent waiter */
    fawait(F_D4_READY, 1);
    wd_arm("d4: signal storm", 60);
    t0 = now_ns();
    pthread_create(&wth, NULL, d4_waiter, &d4_waits);
    for (signals = 0; signals < d4_signals; signals++) {
        struct timespec gap;
        gap.tv_sec = 0;
        gap.tv_nsec = 20000;      /* 20 us: give each signal a chance to be delivered alone */
        pthread_kill(th, SIGUSR1);
        nanosleep(&gap, NULL);
    }
    fset(F_D4_DONE, 1);
    pthread_join(th, NULL);
    pthread_join(wth, NULL);
    d4_ms = ms_since(t0);
    wd_disarm();

    printf("d1: pin,pin,unpin then wait: wait took %.1f ms (returned after the final unpin)\n", d1_ms);
    printf("d2: handler pinned/unpinned inside a pinned section: wait took %.1f ms\n", d2_ms);
    printf("d3: handler pinned/unpinned in an unpinned thread: wait %.3f ms; then pinned: wait %.1f ms\n",
           d3a_ms, d3b_ms);
    printf("d5: unpin without a pin (ignored), then pin: wait took %.1f ms\n", d5_ms);
    printf("d4: %ld pin/unpin cycles under %ld SIGUSR1 sent (%ld handled, each pin,pin,unpin,unpin), "
           "%ld concurrent waits, %.1f ms\n", d4_cycles, signals, d4_handler_runs, d4_waits, d4_ms);
    TCHECK(d4_handler_runs > 0, "d4: no SIGUSR1 handler ran during the storm");
}

/* ================= e: stress with a grace-period check ================= */
struct obj {
    uint64_t gen;
    uint64_t inv;     /* ~gen while live */
    char pad[48];
};
#define POISON UINT64_C(0xDEADBEEFDEADBEEF)
#define E_READERS 4
#define E_RING 8

/* The published pointer, and the newest generation any reader has seen (the
   waiter paces itself on it, so that publications overlap reader sections even
   if waits were to return at once). gcc/clang: __atomic release / acquire /
   relaxed. tcc (x86-64 only, TSO): a volatile aligned 8-byte store or load is
   atomic; stores are not reordered with older stores nor loads with older
   loads, so the object's initialising stores are visible before the pointer;
   the library's wait supplies the full barriers of the grace period itself. */
#if defined(__GNUC__) && !defined(__TINYC__)
static struct obj *e_published;
static uint64_t e_seen_gen;
static struct obj *pub_load(void) { return __atomic_load_n(&e_published, __ATOMIC_ACQUIRE); }
static void pub_store(struct obj *p) { __atomic_store_n(&e_published, p, __ATOMIC_RELEASE); }
static uint64_t seen_load(void) { return __atomic_load_n(&e_seen_gen, __ATOMIC_RELAXED); }
static void seen_store(uint64_t g) { __atomic_store_n(&e_seen_gen, g, __ATOMIC_RELAXED); }
#else
static struct obj *volatile e_published;
static volatile uint64_t e_seen_gen;
static struct obj *pub_load(void) { return e_published; }
static void pub_store(struct obj *p) { e_published = p; }
static uint64_t seen_load(void) { return e_seen_gen; }
static void seen_store(uint64_t g) { e_seen_gen = g; }
#endif

static long e_iters, e_waits;
static pthread_barrier_t e_bar;
static uint64_t e_naps[E_READERS], e_bad[E_READERS], e_holds[E_READERS], e_held_across[E_READERS], e_gens_seen[E_READERS];
static uint64_t e_readers_end_ns, e_cycles[E_READERS], e_pace_ns;
static uint64_t e_wait_bad_rc, e_waits_overlapped, e_wait_max_ns, e_wait_total_ns, e_waiter_ns;

static int obj_ok(const volatile struct obj *p) {
    uint64_t g = p->gen, v = p->inv;
    return g != POISON && v == ~g;
}

static void *e_reader(void *arg) {
    int id = (int)(intptr_t)arg;
    long i;
    int k;
    uint64_t bad = 0, holds = 0, across = 0, gens = 0, last_gen = 0, naps = 0;
    count_pinning_thread();
    pthread_barrier_wait(&e_bar);
    /* at least e_iters cycles, and on until the waiter is done, so that every
       wait overlaps the readers */
    for (i = 0; i < e_iters || ((i & 4095) != 0 || !fget(F_E_WAITER_DONE)); i++) {
        const volatile struct obj *p;
        uint64_t g;
        bpt_thread_progress_pin();
        p = pub_load();
        g = p->gen;
        if (!obj_ok(p)) bad++;
        else if (g != last_gen) { last_gen = g; gens++; seen_store(g); }
        if ((i & 255) == 0) {
            /* A long section: keep using p until the waiter publishes a successor
               (or ~1000 polls), then a little longer. Now the waiter is inside its
               wait for this very section; if the wait returned anyway, the poison
               it writes next shows up in these reads. */
            holds++;
            for (k = 0; k < 1024 && pub_load() == p; k++)
                if (!obj_ok(p)) { bad++; break; }
            if (k < 1024) across++;
            for (k = 0; k < 256; k++)
                if (!obj_ok(p)) { bad++; break; }
            if ((i & 16383) == 0) {
                /* now and then sleep while pinned: the waiter must sleep on its
                   futex and this thread's unpin must wake it */
                struct timespec nap;
                nap.tv_sec = 0;
                nap.tv_nsec = 20000;
                nanosleep(&nap, NULL);
                naps++;
                if (!obj_ok(p)) bad++;
            }
        }
        bpt_thread_progress_unpin();
        /* 4 readers + 1 waiter share 2 cores here: a reader that is preempted
           while pinned holds every wait for a scheduler time slice. Yielding
           now and then, unpinned, keeps that rare, and the test's duration
           bounded; it still happens (see the futex sleeps). */
        if ((i & 1023) == 1023) sched_yield();
    }
    e_cycles[id] = (uint64_t)i;
    e_bad[id] = bad;
    e_holds[id] = holds;
    e_held_across[id] = across;
    e_naps[id] = naps;
    e_gens_seen[id] = gens;
    pthread_mutex_lock(&fl_mu);
    if (--flag[F_E_READERS_ACTIVE] == 0) e_readers_end_ns = now_ns();
    pthread_mutex_unlock(&fl_mu);
    return NULL;
}

static void *e_waiter(void *arg) {
    struct obj *ring[E_RING];
    struct obj *cur = (struct obj *)arg;
    long i;
    uint64_t t0;
    int active = 1;
    memset(ring, 0, sizeof ring);
    pthread_barrier_wait(&e_bar);
    t0 = now_ns();
    for (i = 1; i <= e_waits; i++) {
        struct obj *nw = (struct obj *)malloc(sizeof *nw), *old = cur;
        volatile struct obj *vold = old;
        uint64_t w0, w;
        int rc, spins;
        if (!nw) { fprintf(stderr, "out of memory\n"); _exit(4); }
        memset(nw, 0, sizeof *nw);
        nw->gen = (uint64_t)i;
        nw->inv = ~(uint64_t)i;
        pub_store(nw);                       /* publish the new object */
        cur = nw;
        w0 = now_ns();
        rc = bpt_thread_progress_wait();     /* grace period */
        w = now_ns() - w0;
        if (rc != 0) e_wait_bad_rc++;
        e_wait_total_ns += w;
        if (w > e_wait_max_ns) e_wait_max_ns = w;
        vold->gen = POISON;                  /* no reader can hold old any more: poison it now */
        vold->inv = POISON;
        free(ring[i % E_RING]);              /* free E_RING waits later, so a stale reader */
        ring[i % E_RING] = old;              /* most likely reads the poison, not freed memory */
        if (active) {
            /* pace: let a reader pick up generation i before publishing i+1 */
            uint64_t p0 = now_ns();
            for (spins = 0; seen_load() < (uint64_t)i; spins++) {
                if (spins >= 64) sched_yield();      /* leave the cores to the readers */
                if ((spins & 63) == 63 && fget(F_E_READERS_ACTIVE) == 0) { active = 0; break; }
            }
            if (active) e_waits_overlapped++;
            e_pace_ns += now_ns() - p0;
        }
    }
    e_waiter_ns = now_ns() - t0;
    fset(F_E_WAITER_DONE, 1);
    for (i = 0; i < E_RING; i++) free(ring[i]);
    return cur;   /* still published: freed by main after the readers are done */
}

static void phase_e(void) {
    pthread_t rth[E_READERS], wth;
    struct obj *first;
    void *last;
    bpt_progress_stats s0, s1;
    uint64_t t0, bad = 0, holds = 0, across = 0, gens = 0, cycles = 0, naps = 0;
    double readers_s, waiter_s;
    int i;

    e_iters = check_scale(10000000);
    if (e_iters < 1000000) e_iters = 1000000;
    e_waits = check_scale(10000);
    if (e_waits < 1000) e_waits = 1000;

    first = (struct obj *)calloc(1, sizeof *first);
    if (!first) { fprintf(stderr, "out of memory\n"); _exit(4); }
    first->gen = 0;
    first->inv = ~(uint64_t)0;
    pub_store(first);
    fset(F_E_READERS_ACTIVE, E_READERS);
    pthread_barrier_init(&e_bar, NULL, E_READERS + 2);
    s0 = get_stats();
    wd_arm("e: stress", 120);
    for (i = 0; i < E_READERS; i++) pthread_create(&rth[i], NULL, e_reader, (void *)(intptr_t)i);
    pthread_create(&wth, NULL, e_waiter, first);
    pthread_barrier_wait(&e_bar);
    t0 = now_ns();
    for (i = 0; i < E_READERS; i++) pthread_join(rth[i], NULL);
    pthread_join(wth, &last);
    wd_disarm();
    s1 = get_stats();
    free(last);
    pthread_barrier_destroy(&e_bar);

    for (i = 0; i < E_READERS; i++) {
        bad += e_bad[i]; holds += e_holds[i]; across += e_held_across[i]; gens += e_gens_seen[i];
        cycles += e_cycles[i];
        naps += e_naps[i];
        TCHECK(e_cycles[i] >= (uint64_t)e_iters, "e: reader %d made %" PRIu64 " cycles", i, e_cycles[i]);
    }
    readers_s = (double)(e_readers_end_ns - t0) / 1e9;
    waiter_s = (double)e_waiter_ns / 1e9;
    printf("e: %d readers x at least %ld pin/unpin (until the waiter is done: %" PRIu64 " in all; "
           "%" PRIu64 " long sections, %" PRIu64 " of them outlived a publication, %" PRIu64
           " slept 20 us pinned), 1 waiter x %ld waits\n",
           E_READERS, e_iters, cycles, holds, across, naps, e_waits);
    printf("e: readers %.2f s = %.3g pins/s in all; waiter %.2f s = %.3g waits/s "
           "(each wait mean %.1f us, max %.2f ms; pacing %.2f s in all); %" PRIu64
           " waits paced by and overlapping the readers\n",
           readers_s, (double)cycles / (readers_s > 0 ? readers_s : 1e-9),
           waiter_s, (double)e_waits / (waiter_s > 0 ? waiter_s : 1e-9),
           (double)e_wait_total_ns / (double)e_waits / 1e3, (double)e_wait_max_ns / 1e6,
           (double)e_pace_ns / 1e9, e_waits_overlapped);
    TCHECK(e_waits_overlapped == (uint64_t)e_waits, "e: only %" PRIu64 " of %ld waits overlapped "
           "the readers", e_waits_overlapped, e_waits);
    printf("e: readers saw %" PRIu64 " generation changes; poisoned/garbled objects seen: %" PRIu64 "\n",
           gens, bad);
    printf("e: progress stats: waits +%" PRIu64 ", futex sleeps +%" PRIu64 ", futex wakes +%" PRIu64
           ", epoch %" PRIu64 " -> %" PRIu64 "\n", s1.waits - s0.waits,
           s1.futex_sleeps - s0.futex_sleeps, s1.futex_wakes - s0.futex_wakes, s0.epoch, s1.epoch);
    TCHECK(bad == 0, "e: readers saw a poisoned object %" PRIu64 " times: a wait returned while a "
           "reader still held the object unpublished before it", bad);
    TCHECK(e_wait_bad_rc == 0, "e: %" PRIu64 " waits did not return 0", e_wait_bad_rc);
#ifndef T_SABOTAGE_WAIT
    TCHECK(s1.waits - s0.waits >= (uint64_t)e_waits, "e: stats counted %" PRIu64
           " waits, the waiter made %ld", s1.waits - s0.waits, e_waits);
#endif
}

/* ================= f: wait from a pinned thread ================= */
static void phase_f(void) {
    count_pinning_thread();
    bpt_thread_progress_pin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);
    printf("f: wait while pinned -> %s (\"%s\")\n", bpt_strerror(BPT_EDEADLK), bpt_last_error());
    TCHECK_RC(bpt_thread_progress_wait_sync_core(), BPT_EDEADLK);
    bpt_thread_progress_pin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), BPT_EDEADLK);
    bpt_thread_progress_unpin();
    TCHECK_RC(bpt_thread_progress_wait(), 0);
    TCHECK_RC(bpt_thread_progress_wait_sync_core(), 0);
}

/* ================= g: stats and the membarrier mode ================= */
static void phase_g(void) {
    bpt_progress_stats s0, s1;
    long mask = -1;
    int i, expect_mb, expect_sc;

    TCHECK_RC(bpt_thread_progress_stats(NULL), BPT_EINVAL);
    s0 = get_stats();
    for (i = 0; i < 3; i++) TCHECK_RC(bpt_thread_progress_wait(), 0);
    s1 = get_stats();
#ifdef SYS_membarrier
    mask = syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0);
#endif
#ifdef BPT_NO_MEMBARRIER
    expect_mb = 0;
    expect_sc = 0;
#else
    expect_mb = mask >= 0 && (mask & (1 << 3)) ? 1 : 0;  /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */
    expect_sc = mask >= 0 && (mask & (1 << 5)) ? 1 : 0;  /* ..._PRIVATE_EXPEDITED_SYNC_CORE */
#endif
    printf("g: membarrier %d (%s pins), sync_core %d; kernel membarrier query mask 0x%lx%s\n",
           s1.membarrier, s1.membarrier ? "light" : "fence", s1.sync_core, mask,
#ifdef BPT_NO_MEMBARRIER
           " (built with BPT_NO_MEMBARRIER)"
#else
           ""
#endif
           );
    printf("g: epoch %" PRIu64 ", waits %" PRIu64 ", futex sleeps %" PRIu64 ", wakes %" PRIu64
           ", thread records in use %u, ever created %u (threads of this test that pinned: %ld)\n",
           s1.epoch, s1.waits, s1.futex_sleeps, s1.futex_wakes, (unsigned)s1.threads,
           (unsigned)s1.records, pinning_threads);
    TCHECK(s1.membarrier == expect_mb, "g: stats.membarrier %d, expected %d (kernel mask 0x%lx)",
           s1.membarrier, expect_mb, mask);
    TCHECK(s1.sync_core == expect_sc, "g: stats.sync_core %d, expected %d (kernel mask 0x%lx)",
           s1.sync_core, expect_sc, mask);
    TCHECK(s0.epoch >= 1 && s1.epoch >= s0.epoch, "g: epoch %" PRIu64 " -> %" PRIu64,
           s0.epoch, s1.epoch);
#ifndef T_SABOTAGE_WAIT
    TCHECK(s1.waits - s0.waits == 3, "g: 3 waits on a quiet process counted as %" PRIu64,
           s1.waits - s0.waits);
#endif
    TCHECK(s1.records >= 1 && (long)s1.records < pinning_threads,
           "g: %u thread records ever created for %ld pinning threads (at most 7 alive at once): "
           "records of exited threads are not reused", (unsigned)s1.records, pinning_threads);
    TCHECK(s1.threads <= 2, "g: %u thread records in use with only main (and the watchdog) alive",
           (unsigned)s1.threads);

    /* The pin word (>>pin word in progress.c): a pin records the epoch of
       the last wait, never the fence flag, and the flags follow the mode. A
       waiter that left the word behind would not fail a wait, only make
       it wait for sections that began after it: so this looks at it. */
    {
        bpt__thread *rec;
        uint64_t st, epoch, word = bpt__load_relaxed_u64(&bpt__progress.pin_word);
        uint32_t futex = bpt__load_relaxed_u32(&bpt__progress.futex);
        TCHECK_RC(bpt_thread_progress_wait(), 0);
        epoch = bpt__load_relaxed_u64(&bpt__progress.epoch);
        bpt_thread_progress_pin();
        rec = bpt__thread_self_or_null();
        st = rec ? bpt__load_relaxed_u64(&rec->state) : 0;
        bpt_thread_progress_unpin();
        printf("g: pin word 0x%" PRIx64 ", futex word %u; after a wait to epoch %" PRIu64
               " a pin stores 0x%" PRIx64 "\n", word, (unsigned)futex, epoch, st);
        TCHECK(st == (epoch << BPT__NEST_BITS | 1), "g: a pin after the wait to epoch %" PRIu64
               " stores 0x%" PRIx64 ", not epoch << 16 | 1", epoch, st);
        TCHECK(!(word & BPT__PIN_FENCE) == (s1.membarrier != 0), "g: pin word 0x%" PRIx64
               ": its fence flag must be set exactly when membarrier is not used (%d)", word, s1.membarrier);
        TCHECK(!(futex & BPT__FUTEX_FENCE) == (s1.membarrier != 0), "g: futex word %u: its fence flag"
               " must be set exactly when membarrier is not used (%d)", (unsigned)futex, s1.membarrier);
        TCHECK(bpt__load_relaxed_u64(&rec->state) == 0, "g: quiescent again after the unpin");
    }
}

int main(void) {
    pthread_t wd;
    pthread_condattr_t ca;
    uint64_t t0 = now_ns();

    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_create(&wd, NULL, wd_main, NULL);

    phase_a();
    phase_b();
    phase_c();
    phase_d();
    phase_e();
    phase_f();
    phase_g();

    pthread_mutex_lock(&wd_mu);
    wd_stop = 1;
    pthread_cond_broadcast(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
    pthread_join(wd, NULL);
    printf("t_progress: total %.2f s\n", ms_since(t0) / 1e3);
    return CHECK_DONE();
}

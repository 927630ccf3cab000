/* t_hostile: BPT_TEST_CONCURRENCY
   Hostile control flow all at once (issue #17): 4 worker threads call
   return-traced functions whose calls longjmp across two traced frames,
   while a signaller interrupts them every 20-50 us with SIGUSR1 and the
   handler calls a traced function too (on the interrupted thread's stack,
   at any point of the hit path, a frame's push or a return). One session
   has call and return trace with exception_from, drained by a drainer that
   sleeps in bpt_session_wait; another has call_count and call_time.
   Claims:
   - no abort (a handler that settled or timed by a frame being pushed used
     to end it, and its function's return then found no frame: "return
     trampoline: no return-trace frame", in 1 of 3 runs of 5 s) and no hang;
   - exact counts: call_count and call_time's calls of every function equal
     the calls the program made (the handler's included);
   - the trace session's accounting: produced = delivered + dropped
     exactly; the drainer gets every record delivered, and DROPPED notices
     of no more than was dropped; no return frame skipped (dead frames
     never pile up).
   T_HOSTILE_CALLS=N sets each worker's calls of f (default 250,000; the long
   run in the note: 25,000,000 x 4 workers, about 10^8 f and g calls
   with k and the handler's h on top). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#if defined(BPT_NATIVE)   /* gcc and clang: <stdatomic.h> (tcc has none, and no native sites) */
#include <stdatomic.h>
enum { WORKERS = 4 };
/* Each worker's counts of its own calls; the handler adds to the worker it
   interrupted (the same thread: no race). */
static __thread jmp_buf *t_jump;
static __thread volatile long t_f, t_g, t_k, t_h;
static long sum_f, sum_g, sum_k, sum_h;
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t (*volatile p_g)(int64_t), (*volatile p_k)(int64_t), (*volatile p_h)(int64_t);
BPT_TRACEABLE int64_t k(int64_t x) {
    t_k++;
    if (x % 7 == 0) longjmp(*t_jump, 1);   /* over k's and g's frames, back into f */
    return x + 1;
}
BPT_TRACEABLE int64_t g(int64_t x) { t_g++; return p_k(x) * 2; }
BPT_TRACEABLE int64_t f(int64_t x) {
    jmp_buf here;
    jmp_buf *volatile outer = t_jump;
    volatile int64_t r = -1;
    t_f++;
    t_jump = &here;
    if (setjmp(here) == 0) r = p_g(x);
    t_jump = outer;
    return r;
}
BPT_TRACEABLE int64_t h(int64_t x) { t_h++; return x ^ 5; }
static int64_t (*volatile p_f)(int64_t) = f;

static void on_signal(int sig) {
    int saved = errno;
    (void)sig;
    p_h(1);
    errno = saved;
}

static long calls_each;
static pthread_t workers[WORKERS];
static volatile int workers_done, done[WORKERS];   /* under sum_lock */
static void *worker(void *arg) {
    long i;
    for (i = 0; i < calls_each; i++) p_f(i);
    pthread_mutex_lock(&sum_lock);   /* no signal comes after this: the signaller checks done[] under it */
    sum_f += t_f; sum_g += t_g; sum_k += t_k; sum_h += t_h;
    done[(intptr_t)arg] = 1;
    workers_done++;
    pthread_mutex_unlock(&sum_lock);
    return NULL;
}

static atomic_int stop_signals, stop_drain;
static long signals_sent;
static void *signaller(void *arg) {
    unsigned seed = 12345;
    (void)arg;
    while (!atomic_load(&stop_signals)) {
        struct timespec ts = { 0, 20000 + (long)(seed % 30000) };
        seed = seed * 1103515245u + 12345u;
        pthread_mutex_lock(&sum_lock);
        if (!done[seed % WORKERS]) {
            pthread_kill(workers[seed % WORKERS], SIGUSR1);
            signals_sent++;
        }
        pthread_mutex_unlock(&sum_lock);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static bpt_session trace, timing;
static uint64_t drained, notices, noticed;   /* records; DROPPED notices and what they announce */
static void *drainer(void *arg) {
    static bpt_msg m[1024];
    int n, i;
    (void)arg;
    for (;;) {
        int last = atomic_load(&stop_drain);
        while ((n = bpt_session_drain(trace, m, 1024)) > 0)
            for (i = 0; i < n; i++) {
                if (m[i].type != BPT_MSG_DROPPED) { drained++; continue; }
                notices++;
                noticed += m[i].value;
            }
        CHECK(n == 0, "drain: %s", bpt_last_error());
        if (last) break;
        bpt_session_wait(trace, 2000);
    }
    return NULL;
}

static void check_counts(bpt_func *fn, const char *name, long made) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(timing, fn, BPT_INFO_COUNT | BPT_INFO_TIME, &in), 0);
    printf("  %s: %ld calls made, call_count %llu, call_time calls %llu\n", name, made,
           (unsigned long long)in.count, (unsigned long long)in.calls);
    CHECK(in.count == (uint64_t)made && in.calls == (uint64_t)made, "%s: call_count %llu and call_time %llu, "
          "the program made %ld", name, (unsigned long long)in.count, (unsigned long long)in.calls, made);
}

int main(void) {
    const char *env = getenv("T_HOSTILE_CALLS");
    bpt_func *ff, *fg, *fk, *fh;
    bpt_session_desc d;
    bpt_session_counts c;
    struct sigaction sa;
    pthread_t sig, dr;
    int i;
    calls_each = env ? atol(env) : check_scale(250000);
    p_g = g;
    p_k = k;
    p_h = h;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    if (!(ff = native_reg((void *)f, "h", "f", 1)) || !(fg = native_reg((void *)g, "h", "g", 1)) ||
        !(fk = native_reg((void *)k, "h", "k", 1)) || !(fh = native_reg((void *)h, "h", "h", 1)))
        return CHECK_DONE();
    memset(&d, 0, sizeof d);
    d.name = "trace";
    d.chunks = 64;
    CHECK_RC(bpt_session_create(&d, &trace), 0);
    d.name = "timing";
    CHECK_RC(bpt_session_create(&d, &timing), 0);
    CHECK_RC(bpt_trace_pattern(trace, "h:_/_", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, NULL), 4);
    CHECK_RC(bpt_trace_pattern(timing, "h:_/_", BPT_COUNT | BPT_TIME, NULL), 4);

    CHECK_RC(pthread_create(&dr, NULL, drainer, NULL), 0);
    pthread_mutex_lock(&sum_lock);   /* the signaller waits until every worker exists */
    for (i = 0; i < WORKERS; i++) CHECK_RC(pthread_create(&workers[i], NULL, worker, (void *)(intptr_t)i), 0);
    pthread_mutex_unlock(&sum_lock);
    CHECK_RC(pthread_create(&sig, NULL, signaller, NULL), 0);
    for (i = 0; i < WORKERS; i++) pthread_join(workers[i], NULL);
    atomic_store(&stop_signals, 1);
    pthread_join(sig, NULL);
    atomic_store(&stop_drain, 1);
    pthread_join(dr, NULL);

    printf("%d workers x %ld calls of f, %ld signals: f %ld, g %ld, k %ld (a seventh longjmp), h %ld (in handlers)\n",
           WORKERS, calls_each, signals_sent, sum_f, sum_g, sum_k, sum_h);
    CHECK(sum_h > 0, "no handler ran: nothing was tested under signals");
    check_counts(ff, "f", sum_f);
    check_counts(fg, "g", sum_g);
    check_counts(fk, "k", sum_k);
    check_counts(fh, "h", sum_h);
    CHECK_RC(bpt_session_stats(trace, &c), 0);
    printf("  trace session: produced %llu, delivered %llu (drained %llu, and %llu DROPPED notices of %llu), "
           "dropped %llu, pending %llu, frames skipped %llu\n", (unsigned long long)c.produced,
           (unsigned long long)c.delivered, (unsigned long long)drained, (unsigned long long)notices,
           (unsigned long long)noticed, (unsigned long long)c.dropped, (unsigned long long)c.pending,
           (unsigned long long)c.frames_skipped);
    /* Every record delivered reached the drainer (DROPPED notices apart),
       and the notices announce no more than was dropped. Less is right:
       a handler's record sent while its thread was inside a send is
       dropped and counted with no notice (it cannot touch the lane), and
       losses after a thread's last record that fit have no later record
       to carry theirs. */
    CHECK(drained == c.delivered, "the drainer got %llu records, the session delivered %llu",
          (unsigned long long)drained, (unsigned long long)c.delivered);
    CHECK(noticed <= c.dropped, "DROPPED notices announce %llu in %llu, dropped %llu", (unsigned long long)noticed,
          (unsigned long long)notices, (unsigned long long)c.dropped);
    CHECK(c.produced == c.delivered + c.dropped && c.pending == 0, "accounting: produced %llu != delivered %llu + "
          "dropped %llu (pending %llu)", (unsigned long long)c.produced, (unsigned long long)c.delivered,
          (unsigned long long)c.dropped, (unsigned long long)c.pending);
    CHECK(c.frames_skipped == 0, "%llu return frames skipped", (unsigned long long)c.frames_skipped);
    CHECK(c.produced >= (uint64_t)(sum_f + sum_g + sum_k + sum_h), "every call produced a call message at least");
    CHECK_RC(bpt_session_destroy(trace), 0);
    CHECK_RC(bpt_session_destroy(timing), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("return trace and call_time under signals and longjmps")
#endif

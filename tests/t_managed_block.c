/* t_managed_block: BPT_TEST_CONCURRENCY
   A managed online thread that blocks inside bptrace must not deadlock with
   a waiter that waits for its progress. Before the fix, a managed thread
   calling bpt_thread_progress_wait, or a set-path call such as
   bpt_func_count, blocked on a lock held by a thread that was waiting for
   that very managed thread's next bpt_thread_progress(): both hung within
   seconds. bptrace now takes a managed thread offline while it blocks
   inside bptrace, as ERTS threads do in erts_thr_progress_prepare_wait.
   Second part: a managed thread's progress report made inside a hit (here
   its tracer callback) is not a quiescent point. Before the fix it
   acknowledged the epoch while the hit still held breakpoint data, and a
   waiter returned while the thread was still inside the callback. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <string.h>

static bpt_session sess;
static bpt_vm_word word = 0x1111;
static long rounds;

static void *managed_waiter(void *arg) {
    long i;
    (void)arg;
    CHECK_RC(bpt_thread_progress_register_managed(), 0);
    for (i = 0; i < rounds; i++) {
        bpt_thread_progress();            /* its quiescent point, as promised */
        CHECK_RC(bpt_thread_progress_wait(), 0);
        CHECK(bpt_func_count() >= 0, "a set-path call from a managed thread");
    }
    return NULL;
}

static void *unmanaged_changer(void *arg) {
    long i;
    (void)arg;
    for (i = 0; i < rounds; i++) {
        CHECK(bpt_trace_pattern(sess, "vm:f/0", i & 1 ? BPT_OFF : BPT_COUNT, NULL) >= 0, "pattern %ld", i);
        CHECK_RC(bpt_thread_progress_wait(), 0);
    }
    return NULL;
}

/* Part two. */
static bpt__atomic_u32 in_callback, waiting, left_callback;   /* the header's own atomics (tcc has no __atomic) */
static void reporting_tracer(const bpt_msg *msg, void *user) {
    uint64_t t0 = bpt__now_ns();
    (void)msg; (void)user;
    bpt__store_release_u32(&in_callback, 1);
    while (!bpt__load_acquire_u32(&waiting)) {}
    while (bpt__now_ns() - t0 < 50000000u) bpt_thread_progress();   /* misuse: must be ignored */
    while (bpt__now_ns() - t0 < 100000000u) {}
    bpt__store_release_u32(&left_callback, 1);
}

static void *managed_hitter(void *arg) {
    bpt_func *f = (bpt_func *)arg;
    CHECK_RC(bpt_thread_progress_register_managed(), 0);
    if (BPT_VM_FETCH(&word) == 0x2222) bpt_vm_breakpoint(f, NULL, NULL);   /* runs the callback */
    while (!bpt__load_acquire_u32(&waiting) || bpt__load_acquire_u32(&waiting) == 1)
        bpt_thread_progress();   /* its real quiescent points, after the hit */
    return NULL;
}

int main(void) {
    pthread_t m, u;
    bpt_func *f;
    uint64_t t0 = bpt__now_ns();
    rounds = check_scale(20000);
    alarm(120);   /* the deadlock this guards against would hang forever */
    CHECK_RC(bpt_register_vm(&word, 0x2222, "vm", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &sess), 0);
    pthread_create(&m, NULL, managed_waiter, NULL);
    pthread_create(&u, NULL, unmanaged_changer, NULL);
    pthread_join(m, NULL);
    pthread_join(u, NULL);
    alarm(0);
    printf("%ld rounds of a managed thread waiting and calling the set path against a pattern changer: %.0f ms\n",
           rounds, (double)(bpt__now_ns() - t0) / 1e6);
    CHECK_RC(bpt_session_destroy(sess), 0);

    /* Part two: the wait must last until the managed thread has left the
       callback and reported progress outside it. */
    {
        bpt_session_desc d;
        memset(&d, 0, sizeof d);
        d.tracer = reporting_tracer;
        CHECK_RC(bpt_session_create(&d, &sess), 0);
        CHECK_RC(bpt_trace_pattern(sess, "vm:f/0", BPT_CALL, NULL), 1);
        pthread_create(&m, NULL, managed_hitter, f);
        while (!bpt__load_acquire_u32(&in_callback)) {}
        bpt__store_release_u32(&waiting, 1);
        CHECK_RC(bpt_thread_progress_wait(), 0);
        CHECK(bpt__load_acquire_u32(&left_callback),
              "the wait returned while the managed thread was still inside its tracer callback");
        bpt__store_release_u32(&waiting, 2);
        pthread_join(m, NULL);
        printf("a progress report from inside a tracer callback was ignored: the wait ended after the callback\n");
        CHECK_RC(bpt_session_destroy(sess), 0);
    }
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}

/* t_progress_withdraw: BPT_TEST_CONCURRENCY
   A thread-progress waiter that announces a sleep and then, at its second
   look [B2], finds the section it waited for ended, withdraws the
   announcement (progress.c, bpt__wait_for_record). The section's unpin
   came after the waiter's spins and before its announcement, so it saw no
   sleeper and woke nobody; the announcement then stood in the futex word,
   and the next end of a section, anywhere, paid a futex wake for nobody
   (a short path handed its hit to the full path for it). Found by review;
   the test point makes the interleaving exact:
   - the waiter reached the point where it announces;
   - the futex word says no waiter sleeps once the wait has returned;
   - a section ended after it wakes nobody (the stats' futex wakes). */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <sched.h>
#include <string.h>

static bpt__atomic_u32 pinned, release, armed, finished;

static void *reader(void *arg) {
    (void)arg;
    bpt_thread_progress_pin();
    bpt__store_seq_cst_u32(&pinned, 1);
    while (!bpt__load_acquire_u32(&release)) sched_yield();
    bpt_thread_progress_unpin();   /* the waiter has not announced: no wake */
    bpt__store_seq_cst_u32(&pinned, 0);
    /* Alive until the checks are made: a thread's exit ends its record's
       section again, and would wake the announced sleeper itself. */
    while (!bpt__load_acquire_u32(&finished)) sched_yield();
    return NULL;
}

/* On the waiter, after its spins, before it announces: let the reader's
   section end first. */
static void t_test_point(const char *where) {
    if (bpt__load_acquire_u32(&armed) && strcmp(where, "progress wait: about to announce a sleep") == 0) {
        bpt__store_seq_cst_u32(&armed, 0);
        bpt__store_seq_cst_u32(&release, 1);
        while (bpt__load_acquire_u32(&pinned)) sched_yield();
    }
}

int main(void) {
    pthread_t t;
    bpt_progress_stats s0, s1;
    uint32_t futex;
    pthread_create(&t, NULL, reader, NULL);
    while (!bpt__load_acquire_u32(&pinned)) sched_yield();
    bpt__store_seq_cst_u32(&armed, 1);
    CHECK_RC(bpt_thread_progress_wait(), 0);
    futex = bpt__load_relaxed_u32(&bpt__progress.futex);
    CHECK(!bpt__load_acquire_u32(&armed), "the waiter reached its announcement, the reader pinned");
    memset(&s0, 0, sizeof s0);
    memset(&s1, 0, sizeof s1);
    CHECK_RC(bpt_thread_progress_stats(&s0), 0);
    bpt_thread_progress_pin();   /* a section, ended after the wait */
    bpt_thread_progress_unpin();
    CHECK_RC(bpt_thread_progress_stats(&s1), 0);
    printf("after the wait: futex word %u (bit 0: a waiter sleeps); a section's end then made %llu futex wake(s)\n",
           (unsigned)futex, (unsigned long long)(s1.futex_wakes - s0.futex_wakes));
    CHECK(!(futex & 1), "the announcement was withdrawn (futex word %u)", (unsigned)futex);
    CHECK(s1.futex_wakes == s0.futex_wakes, "a section's end after the wait woke nobody (%llu wakes)",
          (unsigned long long)(s1.futex_wakes - s0.futex_wakes));
    bpt__store_seq_cst_u32(&finished, 1);
    pthread_join(t, NULL);
    return CHECK_DONE();
}

/* t_rate_window: a windowed rate limit (rate_max messages per rate_per_ms)
   while another thread moves to the next window (found by review). The
   restart was a CAS of the window's start, then a store of 0 to its
   count: a message between the two was counted in the old window's count
   (the first message of a new window tripped the limit), or counted and
   then wiped (more than rate_max went through in one window). Now the
   window's number and count are one word, changed by one CAS. The test
   point holds thread A where it has read the window and not yet counted
   (before the fix: where it had restarted it, before the count's store);
   the main thread's message comes there. Windows of 1 s, the second
   window's messages within a few ms of its start: the sleep between them
   only orders them, nothing is timed.
     1. window 1 full (5 of 5); in window 2, A's message and one more: 2 of
        5, nothing limited (before: tripped by the second).
     2. window 1 empty; in window 2, A's message, one more, then 4: 6 of 5,
        so the sixth trips the limit (before: all 6 went through).
   BPT_TEST_CONCURRENCY */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <semaphore.h>
#include <string.h>
#include <unistd.h>

static sem_t a_at_point, b_done;
static bpt__atomic_u32 hold;   /* 1: the next message at the point stops there, once: thread A's */

static void t_test_point(const char *where) {
    if (strncmp(where, "admit: ", 7) || !bpt__cas_u32(&hold, 1, 0)) return;
    sem_post(&a_at_point);
    while (sem_wait(&b_done) != 0) {}
}

static void *thread_a(void *arg) {
    (void)arg;
    vm_call(100);
    return NULL;
}

/* before calls in window 1, then A's and one more, then after, in window 2. */
static bpt_session_counts run(int before, int after) {
    bpt_session_desc d;
    bpt_session_counts c;
    bpt_session s;
    pthread_t a;
    int i;
    memset(&d, 0, sizeof d);
    d.rate_max = 5;
    d.rate_per_ms = 1000;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    for (i = 0; i < before; i++) vm_call((uint64_t)i);
    usleep(1100000);   /* window 1 is over */
    bpt__store_relaxed_u32(&hold, 1);
    pthread_create(&a, NULL, thread_a, NULL);
    while (sem_wait(&a_at_point) != 0) {}
    vm_call(200);   /* while A is between reading the window and counting */
    sem_post(&b_done);
    pthread_join(a, NULL);
    for (i = 0; i < after; i++) vm_call((uint64_t)(300 + i));
    CHECK_RC(bpt_session_stats(s, &c), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return c;
}

int main(void) {
    bpt_session_counts c;
    CHECK_RC(vm_site_register(), 0);
    sem_init(&a_at_point, 0, 0);
    sem_init(&b_done, 0, 0);
    c = run(5, 0);
    printf("1. 5 in window 1, 2 in window 2: tripped %d, limited %llu, produced %llu\n", c.limit_tripped,
           (unsigned long long)c.limited, (unsigned long long)c.produced);
    CHECK(!c.limit_tripped && c.limited == 0 && c.produced == 7,
          "2 of 5 in a new window: tripped %d, limited %llu, produced %llu (7 calls)", c.limit_tripped,
          (unsigned long long)c.limited, (unsigned long long)c.produced);
    c = run(0, 4);
    printf("2. 6 in window 2: tripped %d, limited %llu, produced %llu\n", c.limit_tripped,
           (unsigned long long)c.limited, (unsigned long long)c.produced);
    CHECK(c.limit_tripped && c.limited == 1 && c.produced == 6,
          "6 of 5 in one window: tripped %d, limited %llu, produced %llu (5 calls and the LIMIT message)",
          c.limit_tripped, (unsigned long long)c.limited, (unsigned long long)c.produced);
    return CHECK_DONE();
}

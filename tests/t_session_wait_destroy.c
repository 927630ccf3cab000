/* t_session_wait_destroy: a destroy while bpt_session_wait is between its
   look for sealed chunks and its sleep (found by review). The wait
   unpinned itself there and then slept on the session's own futex word: a
   destroy in that gap did not wait for it and freed the session, so the
   sleep read freed memory; where a new session took that memory (its word
   zeroed, equal to what the waiter had read) the waiter slept its whole
   timeout, though the destroy is documented to wake it. Now the word is
   the slot's, never freed, and the destroy counts and wakes it.
   The test point holds the waiter in that gap; the main thread destroys
   the session there and creates another (in the same slot, likely the
   same memory), then lets the waiter go on, with a timeout of an hour. It
   must return BPT_ESESSION at once: an alarm fails the test instead of
   hanging (before the fix, gcc: the alarm; ASAN keeps freed memory from
   reuse, so there the sleep read the freed word, unseen). Then the same
   with the session left destroyed, and a waiter on the new session that a
   destroy wakes from a real sleep. BPT_TEST_CONCURRENCY */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static sem_t at_point, go;
static bpt__atomic_u32 hold;   /* 1: the next waiter to reach the point stops there */

static void t_test_point(const char *where) {
    if (strcmp(where, "wait: unpinned, not yet asleep") || !bpt__cas_u32(&hold, 1, 0)) return;
    sem_post(&at_point);
    while (sem_wait(&go) != 0) {}
}

static void on_alarm(int sig) {
    static const char msg[] = "t_session_wait_destroy: the waiter slept on after the destroy (alarm)\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1)) {}
    _exit(1);
}

typedef struct waiter { bpt_session s; int rc; } waiter;
static void *wait_long(void *arg) {
    waiter *w = (waiter *)arg;
    w->rc = bpt_session_wait(w->s, 0xffffffffu);   /* 71 minutes: only a wake ends it */
    return NULL;
}

/* A waiter held in the gap; the session destroyed there (and, with
   recreate, a new one made); the waiter must come back with BPT_ESESSION. */
static void destroy_in_gap(int recreate) {
    bpt_session again;
    pthread_t t;
    waiter w;
    CHECK_RC(bpt_session_create(NULL, &w.s), 0);
    w.rc = 1;
    bpt__store_relaxed_u32(&hold, 1);
    pthread_create(&t, NULL, wait_long, &w);
    while (sem_wait(&at_point) != 0) {}
    CHECK_RC(bpt_session_destroy(w.s), 0);   /* the waiter is unpinned: the destroy does not wait for it */
    if (recreate) CHECK_RC(bpt_session_create(NULL, &again), 0);
    sem_post(&go);
    pthread_join(t, NULL);
    CHECK(w.rc == BPT_ESESSION, "destroyed %s: the wait returned %d, expected BPT_ESESSION",
          recreate ? "and made anew" : "", w.rc);
    if (recreate) CHECK_RC(bpt_session_destroy(again), 0);
    printf("destroy in the wait's gap%s: the waiter returned %d\n", recreate ? ", a new session made" : "", w.rc);
}

/* A waiter truly asleep (no chunk sealed) is woken by the destroy. */
static void destroy_wakes_sleeper(void) {
    pthread_t t;
    waiter w;
    CHECK_RC(bpt_session_create(NULL, &w.s), 0);
    w.rc = 1;
    pthread_create(&t, NULL, wait_long, &w);
    usleep(20000);   /* asleep by now, most likely; wherever it is, the destroy ends its wait */
    CHECK_RC(bpt_session_destroy(w.s), 0);
    pthread_join(t, NULL);
    CHECK(w.rc == BPT_ESESSION, "a sleeper woken by the destroy returned %d, expected BPT_ESESSION", w.rc);
    printf("a sleeping waiter woken by the destroy: %d\n", w.rc);
}

int main(void) {
    int i;
    signal(SIGALRM, on_alarm);
    alarm(30);
    sem_init(&at_point, 0, 0);
    sem_init(&go, 0, 0);
    for (i = 0; i < 3; i++) destroy_in_gap(1);
    destroy_in_gap(0);
    destroy_wakes_sleeper();
    alarm(0);
    return CHECK_DONE();
}

/* t_drain_turns: BPT_TEST_CONCURRENCY
   bpt_session_drain gives the threads turns (session.c, bpt__session_read):
   a drain that fills its output stops in one thread's buffer, and the next
   starts at the thread after it. Each drain started at the first thread,
   so a thread with more records than a drain takes starved the others:
   their buffers filled and dropped while the drainer kept up (found by
   review). Here the main thread holds 1,000 call records and a second
   thread (joined before the drains) 10; drains of 100 at a time:
   - the second thread's 10 come in the second drain, not after the
     first thread's 1,000 (the eleventh drain, before);
   - in all, every record once, each thread's in order. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <pthread.h>
#include <string.h>

enum { MAIN_CALLS = 1000, OTHER_CALLS = 10, MAX = 100 };
static uint32_t other_tid;

static void *other(void *arg) {
    uint64_t i;
    (void)arg;
    other_tid = (uint32_t)bpt__gettid();
    for (i = 0; i < OTHER_CALLS; i++) vm_call(100000 + i);
    return NULL;
}

int main(void) {
    static bpt_msg m[MAX];
    bpt_session s;
    bpt_session_desc d;
    pthread_t t;
    uint64_t i, next_main = 0, next_other = 100000;
    long drains = 0, first_other = 0, got_main = 0, got_other = 0, bad = 0;
    int n, k;
    CHECK_RC(vm_site_register(), 0);
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 64 * 1024;   /* room for every record: nothing dropped */
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    for (i = 0; i < MAIN_CALLS; i++) vm_call(i);   /* the main thread's lane comes first */
    pthread_create(&t, NULL, other, NULL);
    pthread_join(t, NULL);
    while ((n = bpt_session_drain(s, m, MAX)) > 0) {
        drains++;
        for (k = 0; k < n; k++) {
            if (m[k].type != BPT_MSG_CALL) { bad++; continue; }
            if (m[k].thread == other_tid) {
                if (!first_other) first_other = drains;
                bad += m[k].args[0] != next_other++;
                got_other++;
            } else {
                bad += m[k].args[0] != next_main++;
                got_main++;
            }
        }
    }
    printf("%ld drains of %d: the other thread's records first in drain %ld; %ld + %ld records, %ld out of order\n",
           drains, MAX, first_other, got_main, got_other, bad);
    CHECK(first_other == 2, "the other thread's turn comes in the second drain (%ld)", first_other);
    CHECK(got_main == MAIN_CALLS && got_other == OTHER_CALLS && bad == 0, "every record once, in order");
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

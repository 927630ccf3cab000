/* t_flight_race: a flight recorder's producer finds its buffer full, and
   before it takes the oldest chunk back the drainer reads past a chunk and
   stops part-way through the next (its room is full). The producer must
   take nothing back: a chunk is free again, and the rest of the one the
   drainer stopped in is unread news. The race is made deterministic with a
   test point: the producer's own thread drains there (a drain may run
   anywhere a thread is not inside a tracer). Before the fix the producer
   took back the chunk the drainer stopped in, and its unread rest was
   counted overwritten and lost (found by review). */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <string.h>

static bpt_session s;
static int armed, fired, first_drained;
static bpt_msg got[4096];
static int ngot;

/* Full, about to take a chunk back: drain two chunks and a part of the
   third (330 calls, of about 125 a chunk). */
static void t_test_point(const char *where) {
    if (!armed || strcmp(where, "lane_advance: full, a flight recorder takes a chunk back") != 0) return;
    armed = 0;
    fired = 1;
    first_drained = bpt_session_drain(s, got, 330);
    ngot = first_drained;
}

int main(void) {
    bpt_session_desc d;
    bpt_session_counts st;
    int i, n, calls;
    CHECK_RC(vm_site_register(), 0);
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = 4;
    d.flight_recorder = 1;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    armed = 1;
    for (i = 0; i < 4000 && !fired; i++) vm_call((uint64_t)i);   /* 4 chunks hold about 500 */
    calls = i + 50;   /* and 50 more: the chunks read meanwhile hold them */
    for (; i < calls; i++) vm_call((uint64_t)i);
    CHECK(fired && first_drained == 330, "the test point drained %d (fired %d)", first_drained, fired);
    while ((n = bpt_session_drain(s, got + ngot, 4096 - ngot)) > 0) ngot += n;
    CHECK_RC(bpt_session_stats(s, &st), 0);
    CHECK(st.overwritten == 0 && st.dropped == 0, "nothing overwritten: a chunk was free again (overwritten %llu, "
          "dropped %llu)", (unsigned long long)st.overwritten, (unsigned long long)st.dropped);
    CHECK(ngot == calls, "drained %d messages for %d calls", ngot, calls);
    for (i = 0; i < ngot && i < calls; i++)
        if (got[i].type != BPT_MSG_CALL || got[i].args[0] != (uint64_t)i) {
            CHECK(0, "message %d: type %d arg %llu, expected call %d", i, got[i].type,
                  (unsigned long long)got[i].args[0], i);
            break;
        }
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f), 0);
    printf("a flight recorder full while its drainer read 330 of its calls took nothing back: %d of %d drained "
           "in order\n", ngot, calls);
    return CHECK_DONE();
}

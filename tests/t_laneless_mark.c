/* t_laneless_mark: a record a signal handler's send loses while nested on
   its thread's first send in a session, which is making the thread's
   buffer (found by review). It was counted in the session's lost_laneless
   (stats: dropped) but never marked by a DROPPED message, though the
   thread's records after it fit, against bpt_session_drain's "the DROPPED
   counts add up to dropped". Now the handler makes the buffer (the
   interrupted send finds it made), and its loss is marked as a nested
   send's. The test point raises the signal inside the first send, while
   it makes the buffer; the handler calls the traced function.
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too (a signal handler
   on the same thread). */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t armed;

static void t_test_point(const char *where) {
    if (armed && !strcmp(where, "lane_get: making the lane")) {
        armed = 0;
        raise(SIGUSR1);
    }
}

static void on_usr1(int sig) {
    (void)sig;
    vm_call(2);   /* nested on the thread's first send: lost */
}

int main(void) {
    struct sigaction sa;
    bpt_session_counts c;
    bpt_session s;
    bpt_msg m[16];
    uint64_t marked = 0;
    int i, n, marks = 0, calls = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    CHECK_RC(vm_site_register(), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    armed = 1;
    vm_call(1);   /* the first send: makes the buffer, the signal comes there */
    CHECK(!armed, "the signal was raised while the first send made the buffer");
    vm_call(3);
    n = bpt_session_drain(s, m, 16);
    for (i = 0; i < n; i++) {
        if (m[i].type == BPT_MSG_DROPPED) {
            marks++;
            marked += m[i].value;
        }
        calls += m[i].type == BPT_MSG_CALL;
    }
    CHECK_RC(bpt_session_stats(s, &c), 0);
    printf("drained %d messages: %d calls, %d DROPPED marking %llu; stats: dropped %llu, produced %llu\n", n, calls,
           marks, (unsigned long long)marked, (unsigned long long)c.dropped, (unsigned long long)c.produced);
    CHECK(calls == 2 && c.dropped == 1 && c.produced == 3, "the thread's 2 calls drained, the handler's lost: "
          "%d calls, %llu dropped, %llu produced", calls, (unsigned long long)c.dropped, (unsigned long long)c.produced);
    CHECK(marks == 1 && marked == c.dropped, "the loss marked: %d DROPPED of %llu, %llu dropped", marks,
          (unsigned long long)marked, (unsigned long long)c.dropped);
    CHECK(n > 0 && m[0].type == BPT_MSG_DROPPED, "marked ahead of the thread's first record: the first message "
          "is of type %d", n > 0 ? m[0].type : 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

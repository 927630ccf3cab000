/* t_rate_skew: a windowed rate limit whose window another core moved on
   with a clock a little ahead of this thread's (TSC skew between cores),
   found by review. The window restarted when now - start >= the window,
   unsigned: a start ahead of this thread's clock wrapped, so the window
   restarted at once and its count went back to 0 (3 per 10 s let 6
   through). Now a message whose window number is behind the current one's
   counts in the current one. The skew is simulated: after 3 messages, the
   window word is set as another core would leave it, one window on (its
   clock ahead, across the boundary), with 3 counted there. This thread's
   next 3 messages count in it: the first trips the limit. (Before the fix
   the same simulation, its start set 2 us ahead of this thread's clock,
   let the 3 through: /tmp/revsess-repro/rate_skew.c.) */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <string.h>

int main(void) {
    bpt_session_desc d;
    bpt_session_counts c;
    bpt_session s;
    bpt__session *ss;
    uint64_t w;
    int i;
    CHECK_RC(vm_site_register(), 0);
    memset(&d, 0, sizeof d);
    d.rate_max = 3;
    d.rate_per_ms = 10000;   /* 3 messages per 10 s */
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    for (i = 0; i < 3; i++) vm_call((uint64_t)i);
    ss = bpt__session_lookup(s.id);   /* no destroy runs: no pin needed */
    w = bpt__load_relaxed_u64(&ss->window);
    CHECK((uint32_t)w == 3, "3 messages counted in the window: %u", (uint32_t)w);
    bpt__store_relaxed_u64(&ss->window, ((w >> 32) + 1) << 32 | 3);   /* another core, one window on */
    for (i = 0; i < 3; i++) vm_call((uint64_t)(10 + i));
    CHECK_RC(bpt_session_stats(s, &c), 0);
    printf("3 messages, then 3 more behind a window moved on by another core: tripped %d, limited %llu\n",
           c.limit_tripped, (unsigned long long)c.limited);
    CHECK(c.limit_tripped && c.limited == 3, "the 3 counted in the window moved on: tripped %d, limited %llu",
          c.limit_tripped, (unsigned long long)c.limited);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

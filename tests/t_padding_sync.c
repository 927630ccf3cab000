/* t_padding_sync
   Registration writes a native function's pre-entry padding (the record
   pointer and the call into the stub) with plain stores: new code that
   another core may hold stale, prefetched with the function before it. The
   first install leads execution there, so the change's step 4 waits with
   SYNC_CORE: every thread's instruction stream serialized before step 5
   writes the word (bp.c, bpt__wait_staged; ARM ARM B2.2.5, Intel SDM vol.
   3, 9.1.3). Found by review: step 4 was a plain wait, which serialized
   nothing without membarrier. Counted with bpt_progress_stats'
   sync_core_waits:
   - the first install of a freshly registered function: two (step 4, and
     step 6 after the code write), where it was one;
   - switched off (step 10), then on again: one each, the padding being
     no longer fresh;
   - a second function registered and installed with the first already
     on: two again. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

#if defined(BPT_NATIVE)
BPT_TRACEABLE long f1(long x) { return x + 1; }
BPT_TRACEABLE long f2(long x) { return x + 2; }

static uint64_t sync_core_waits(void) {
    bpt_progress_stats st;
    memset(&st, 0, sizeof st);
    CHECK_RC(bpt_thread_progress_stats(&st), 0);
    return st.sync_core_waits;
}

/* The change pattern/flags makes, and the SYNC_CORE waits it took. */
static uint64_t change(bpt_session s, const char *pattern, unsigned flags, int matched) {
    uint64_t w = sync_core_waits();
    CHECK_RC(bpt_trace_pattern(s, pattern, flags, NULL), matched);
    return sync_core_waits() - w;
}

int main(void) {
    long (*volatile p1)(long) = f1, (*volatile p2)(long) = f2;
    bpt_session s;
    uint64_t first, off, again, second;
    if (!native_reg((void *)f1, "ps", "f1", 1)) return CHECK_DONE();
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    first = change(s, "ps:f1/1", BPT_COUNT, 1);
    off = change(s, "ps:f1/1", BPT_COUNT | BPT_OFF, 1);
    again = change(s, "ps:f1/1", BPT_COUNT, 1);
    if (!native_reg((void *)f2, "ps", "f2", 1)) return CHECK_DONE();
    second = change(s, "ps:_/1", BPT_COUNT, 2);
    printf("SYNC_CORE waits: the first install %llu, the switch-off %llu, on again %llu, a new function's first "
           "install %llu\n", (unsigned long long)first, (unsigned long long)off, (unsigned long long)again,
           (unsigned long long)second);
    CHECK(first == 2, "the first install: step 4 and step 6 (%llu)", (unsigned long long)first);
    CHECK(off == 1, "the switch-off: step 10 (%llu)", (unsigned long long)off);
    CHECK(again == 1, "on again, the padding not fresh: step 6 alone (%llu)", (unsigned long long)again);
    CHECK(second == 2, "a new function's first install: step 4 and step 6 (%llu)", (unsigned long long)second);
    CHECK(p1(1) == 2 && p2(1) == 3, "both compute through their breakpoints");
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no native padding to serialize")
#endif

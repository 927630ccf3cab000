/* tests/probes/target.c: the program tests/probes/run reads with readelf
   and attaches gdb and bpftrace to. It traces one native function through
   a USDT session (call and return_from go to bptrace:call and
   bptrace:return), so one bpt_trace_pattern runs the 13 steps (bptrace:step),
   then fires a user probe of its own (BPT_PROBE) and bpt_user_trace. Last,
   a buffered session of two 4 KiB chunks that nobody drains traces 1,000
   more calls, and drops most of them (bptrace:drop).

       target [CALLS]    call probe_target(40 + i, "hello") CALLS times (default 7)

   It prints "target: CALLS calls, sum S, produced P, delivered D" and
   "target: the small session dropped N", and exits 0 when every bptrace
   call succeeded, the USDT session saw 2 * CALLS events and the small
   one dropped some. */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(BPT_NATIVE) || !BPT_PROBES
int main(void) {
    printf("SKIPPED: the probe target needs native sites and USDT probes (gcc or clang, x86-64 or aarch64)\n");
    return 77;
}
#else
BPT_TRACEABLE __attribute__((noinline)) long probe_target(long a, const char *s) {
    __asm__ __volatile__("");
    return 2 * a + (long)strlen(s);
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "target: %s returned %d (%s): %s\n", what, rc, bpt_strerror(rc), bpt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 7, i, sum = 0;
    bpt_session_desc d;
    bpt_session_counts c;
    bpt_session s;
    bpt_match m;
    bpt_func *f;
    char text[32];
    int rc;
    memset(&d, 0, sizeof d);
    memset(&m, 0, sizeof m);
    d.name = "usdt";
    d.usdt = 1;
    m.args = "i64,str";
    if ((rc = bpt_register_native((void *)probe_target, "target", "probe_target", 2, &f)) < 0)
        return fail("bpt_register_native", rc);
    if ((rc = bpt_session_create(&d, &s)) < 0) return fail("bpt_session_create", rc);
    if ((rc = bpt_trace_pattern(s, "target:probe_target/2", BPT_CALL | BPT_RETURN, &m)) != 1)
        return fail("bpt_trace_pattern", rc);
    for (i = 0; i < calls; i++) sum += probe_target(40 + i, "hello");
    /* Strings the program has written itself: their pages are present, so a
       tool's read from the probe never faults (a BPF read cannot). */
    snprintf(text, sizeof text, "user-probe-%ld", calls);
    BPT_PROBE(target, user, calls, sum, text);
    {   /* Memory only a probe's pointer argument reads: its stores must happen
           before the probe fires (the site's "memory" clobber), though the
           program never reads it. */
        char only_for_the_probe[] = "sa";
        BPT_PROBE(target, mem, only_for_the_probe);
    }
    bpt_user_trace(1, 2, 3, 4, text, "s2", NULL, NULL);
    if ((rc = bpt_session_stats(s, &c)) < 0) return fail("bpt_session_stats", rc);
    if ((rc = bpt_session_destroy(s)) < 0) return fail("bpt_session_destroy", rc);
    printf("target: %ld calls, sum %ld, produced %llu, delivered %llu\n", calls, sum,
           (unsigned long long)c.produced, (unsigned long long)c.delivered);
    if (c.produced != (uint64_t)(2 * calls) || c.delivered != c.produced) return 1;
    /* A full buffer: drops. */
    d.name = "small";
    d.usdt = 0;
    d.chunk_bytes = 4096;
    d.chunks = d.max_chunks = 2;
    if ((rc = bpt_session_create(&d, &s)) < 0) return fail("bpt_session_create (small)", rc);
    if ((rc = bpt_trace_pattern(s, "target:probe_target/2", BPT_CALL, &m)) != 1)
        return fail("bpt_trace_pattern (small)", rc);
    for (i = 0; i < 1000; i++) sum += probe_target(i, "hello");
    if ((rc = bpt_session_stats(s, &c)) < 0) return fail("bpt_session_stats (small)", rc);
    if ((rc = bpt_session_destroy(s)) < 0) return fail("bpt_session_destroy (small)", rc);
    printf("target: the small session dropped %llu\n", (unsigned long long)c.dropped);
    return c.dropped > 0 ? 0 : 1;
}
#endif

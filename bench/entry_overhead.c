/* bench/entry_overhead.c: what a BPT_TRACEABLE entry costs, per call.
   Plain function vs the same function BPT_TRACEABLE but untraced (its 2-byte
   NOP entry) vs traced with call_count. Each figure is the median of 11 runs
   of 10^7 calls through a volatile function pointer, with the spread
   (min..max), and the ratio to plain. A benchmark, not a test: it asserts
   nothing. Build and run: make bench */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include <stdio.h>
#include <stdlib.h>

#if defined(BPT_NATIVE)
__attribute__((noinline)) static long plain_leaf(long a, long b) { return a * 31 + b; }
BPT_TRACEABLE static long traceable_leaf(long a, long b) { return a * 31 + b; }
static long (*volatile plain_p)(long, long) = plain_leaf;
static long (*volatile traceable_p)(long, long) = traceable_leaf;

enum { RUNS = 11, CALLS = 10000000 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ns per call: median, min, max over RUNS runs. */
static void measure(long (*volatile *fp)(long, long), double out[3]) {
    double ns[RUNS];
    long acc = 0;
    int r, i;
    for (r = 0; r < RUNS; r++) {
        uint64_t t0 = bpt__now_ns();
        for (i = 0; i < CALLS; i++) acc += (*fp)(i, acc);
        ns[r] = (double)(bpt__now_ns() - t0) / CALLS;
    }
    qsort(ns, RUNS, sizeof ns[0], cmp_double);
    out[0] = ns[RUNS / 2]; out[1] = ns[0]; out[2] = ns[RUNS - 1];
    if (acc == 42) puts("");   /* keep acc alive */
}

int main(void) {
    double plain[3], off[3], count[3];
    bpt_func *f;
    bpt_session s;
    if (bpt_register_native((void *)traceable_leaf, "bench", "traceable_leaf", 2, &f) < 0 ||
        bpt_session_create(NULL, &s) < 0) {
        fprintf(stderr, "setup: %s\n", bpt_last_error());
        return 1;
    }
    measure(&plain_p, plain);
    measure(&traceable_p, off);
    bpt_trace_pattern(s, "bench:traceable_leaf/2", BPT_COUNT, NULL);
    measure(&traceable_p, count);
    bpt_trace_pattern(s, "bench:traceable_leaf/2", BPT_OFF, NULL);
    printf("entry overhead, ns per call (median of %d x %d calls; min..max)\n", RUNS, CALLS);
    printf("  %-28s %7.2f  (%.2f..%.2f)  1.00x\n", "plain", plain[0], plain[1], plain[2]);
    printf("  %-28s %7.2f  (%.2f..%.2f)  %.3fx plain\n", "BPT_TRACEABLE, untraced", off[0], off[1], off[2], off[0] / plain[0]);
    printf("  %-28s %7.2f  (%.2f..%.2f)  %.2fx plain\n", "BPT_TRACEABLE, call_count", count[0], count[1], count[2], count[0] / plain[0]);
    bpt_session_destroy(s);
    bpt_unregister(f);
    return 0;
}
#else
int main(void) { puts("entry_overhead: no native entry patching with this compiler"); return 0; }
#endif

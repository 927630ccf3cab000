/* bench/probes_ab.c (section 7, issue #18): what the USDT probes cost with
   nothing attached, measured in one process. Two copies of bptrace and of
   the leaf mix are linked into this program (bench/probes_ab_half.c, built
   with the probes in and with -DBPT_NO_PROBES), and their batches
   alternate: in, out, out, in, in, out, ... Each pair of batches runs
   within a few milliseconds on the same thread, so the two-speed
   behaviour seen between processes here (a process runs its call_count at
   ~5 or at ~10 ns, whichever build it is) and the machine's load reach
   both sides of a pair alike; the ratio of each pair cancels them.
   Rows: for each mode, each side's median ns per call (min..max over the
   batches) and the median of the pair ratios in/out with its quartiles.
   The untraced row is the control: no probe stands on that path in either
   copy, so its ratio shows what the two copies' code placement alone
   does.
   `bench_probes_ab [PAIRS]`: PAIRS pairs a mode (default 31). */
#include "../bptrace.h"   /* the API's names only: each half has its implementation */
#include "bench.h"
#include "probes_ab.h"

enum { MIX_ITERS = 60000, REP = 4 };
#define BATCH_CALLS (4.0 * MIX_ITERS * REP)

typedef long (*mix_fn)(long);
static mix_fn volatile mixes[2] = { ab_in_mix, ab_out_mix };

static double batch(int side) {   /* ns per call */
    long acc = 0;
    uint64_t t0 = bench_now();
    for (int r = 0; r < REP; r++) acc += mixes[side](MIX_ITERS);
    uint64_t t = bench_now() - t0;
    if (acc == 42) puts("");
    return (double)t / BATCH_CALLS;
}

static int set_mode(unsigned flags) {
    if (ab_in_set_mode(flags) < 0) { fprintf(stderr, "in: %s\n", ab_in_error()); return -1; }
    if (ab_out_set_mode(flags) < 0) { fprintf(stderr, "out: %s\n", ab_out_error()); return -1; }
    return 0;
}

int main(int argc, char **argv) {
    static const struct { const char *name; unsigned flags; } modes[] = {
        { "untraced (control)", 0 }, { "call_count", BPT_COUNT }, { "call trace", BPT_CALL },
    };
    int pairs = argc > 1 ? atoi(argv[1]) : 31;
    if (pairs < 1 || pairs > 100000) { fprintf(stderr, "usage: bench_probes_ab [PAIRS 1..100000]\n"); return 2; }
    if (!ab_in_probes() || ab_out_probes()) {
        printf("7      SKIPPED probes A/B: this compiler builds no probes (in=%d out=%d)\n", ab_in_probes(), ab_out_probes());
        return 0;
    }
    if (ab_in_setup() < 0 || ab_out_setup() < 0) {
        fprintf(stderr, "setup: %s / %s\n", ab_in_error(), ab_out_error());
        return 1;
    }
    double *in = calloc((size_t)pairs, sizeof *in), *out = calloc((size_t)pairs, sizeof *out);
    double *ratio = calloc((size_t)pairs, sizeof *ratio);
    if (!in || !out || !ratio) return 1;
    for (unsigned m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        char what[96], text[96];
        if (set_mode(modes[m].flags) < 0) return 1;
        batch(0); batch(1);   /* warm up both */
        for (int p = 0; p < pairs; p++) {
            if (p & 1) { out[p] = batch(1); in[p] = batch(0); }
            else { in[p] = batch(0); out[p] = batch(1); }
            ratio[p] = in[p] / out[p];
        }
        if (set_mode(0) < 0) return 1;
        bench_stat r = bench_stats(ratio, pairs);
        double q1 = ratio[pairs / 4], q3 = ratio[(3 * pairs) / 4];
        snprintf(what, sizeof what, "leaf mix: %s, probes compiled out", modes[m].name);
        bench_row("7", what, bench_stats(out, pairs), "ns/call", "");
        snprintf(what, sizeof what, "leaf mix: %s, probes in, none attached", modes[m].name);
        snprintf(text, sizeof text, "in/out %.3fx (pair ratios: median, quartiles %.3f..%.3f, %d pairs)", r.med, q1, q3, pairs);
        bench_row("7", what, bench_stats(in, pairs), "ns/call", text);
    }
    ab_in_stop();
    ab_out_stop();
    return 0;
}

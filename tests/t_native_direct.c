/* t_native_direct: traced functions called directly by callers in the same
   file, as ordinary code calls them (the other native tests call through
   volatile pointers). gcc's interprocedural optimisations once broke this:
   with IPA register allocation the caller kept live values in registers the
   hit path clobbers, and with IPA stack alignment it called with a
   misaligned stack that the x86-64 stub's movaps faulted on. BPT_TRACEABLE
   now carries noipa (gcc), and the stub realigns the stack.
   - a caller holding 14 values across the call computes the same result
     traced and untraced, with a ring tracer and with a callback tracer that
     does floating-point work;
   - a caller that does not align the stack before the call survives. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <math.h>

#if defined(BPT_NATIVE)
static volatile int sink;
BPT_TRACEABLE int leaf(int x) { sink = x; return x * 3 + 1; }
BPT_TRACEABLE double leaf_fp(double x) { return x * 0.5 + 1.0; }

/* Many values live across each call: IPA-RA would keep some in
   call-clobbered registers if it trusted leaf() not to touch them. */
__attribute__((noinline)) static unsigned long busy_caller(int n) {
    unsigned long a0 = 1, a1 = 2, a2 = 3, a3 = 4, a4 = 5, a5 = 6, a6 = 7, a7 = 8, a8 = 9, a9 = 10, a10 = 11,
         a11 = 12, a12 = 13, a13 = 14, s = 0;   /* unsigned: the mixing may wrap */
    int i;
    for (i = 0; i < n; i++) {
        s += (unsigned long)leaf(i);
        a0 = a0 * 3 + 1; a1 = a1 * 5 + 2; a2 = a2 * 7 + 3; a3 ^= a3 << 3; a4 += a4 >> 1; a5 *= a5 | 1;
        a6 += i; a7 ^= i * 7; a8 += a8 >> 2; a9 *= 3; a10 += a10 << 1; a11 ^= a11 >> 3; a12 += 5; a13 ^= a12;
    }
    return s + a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13;
}

__attribute__((noinline)) static double busy_fp_caller(int n) {
    double a = 1.5, b = 2.25, c = 3.125, d = 0.0;
    int i;
    for (i = 0; i < n; i++) {
        d += leaf_fp((double)i);
        a = a * 1.0001 + 0.5; b = b * 0.9999 + a; c = sqrt(c + b);
    }
    return a + b + c + d;
}

/* gcc's IPA stack alignment may call leaf() with rsp misaligned from here. */
__attribute__((noinline)) static int thin_caller(int x) { return leaf(x) + 1; }

static double tracer_work;
static void fp_tracer(const bpt_msg *m, void *user) {
    (void)user;
    tracer_work += sin((double)m->ts_ns) * cos((double)m->args[0]);   /* clobbers FP registers */
}

int main(void) {
    bpt_func *f, *ffp;
    bpt_session ring, cb;
    bpt_session_desc d;
    bpt_msg m[256];
    unsigned long before = busy_caller(1000), after;
    double fbefore = busy_fp_caller(1000), fafter;
    int total = 0, k;
    CHECK_RC(bpt_register_native((void *)leaf, "direct", "leaf", 1, &f), 0);
    CHECK_RC(bpt_register_native((void *)leaf_fp, "direct", "leaf_fp", 1, &ffp), 0);
    memset(&d, 0, sizeof d);
    d.chunks = 16;
    CHECK_RC(bpt_session_create(&d, &ring), 0);
    CHECK_RC(bpt_trace_pattern(ring, "direct:leaf/1", BPT_CALL | BPT_COUNT, NULL), 1);
    after = busy_caller(1000);
    while ((k = bpt_session_drain(ring, m, 256)) > 0) total += k;
    printf("ring tracer: %d messages; caller result %lu untraced, %lu traced\n", total, before, after);
    CHECK(total == 1000, "1000 call messages: %d", total);
    CHECK(before == after, "the caller's live values survived the traced calls");
    CHECK(thin_caller(4) == 14, "a caller that may not align the stack");
    memset(&d, 0, sizeof d);
    d.tracer = fp_tracer;
    CHECK_RC(bpt_session_create(&d, &cb), 0);
    CHECK_RC(bpt_trace_pattern(cb, "direct:_/_", BPT_CALL, NULL), 2);
    after = busy_caller(1000);
    fafter = busy_fp_caller(1000);
    printf("callback tracer (floating-point work %.3f): caller results %s, %s\n", tracer_work,
           before == after ? "same" : "DIFFERENT", fbefore == fafter ? "same" : "DIFFERENT");
    CHECK(before == after, "integer caller with a callback tracer");
    CHECK(fbefore == fafter, "floating-point caller with a callback tracer: %.17g vs %.17g", fafter, fbefore);
    CHECK_RC(bpt_session_destroy(ring), 0);
    CHECK_RC(bpt_session_destroy(cb), 0);
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(ffp), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no traced function to call directly")
#endif

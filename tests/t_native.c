/* t_native: BPT_TRACEABLE C functions traced through their patched entries.
   - call messages carry the right arguments (6 integers and a double, strings);
   - untraced functions send nothing;
   - every argument register and the return values pass through the stub
     bit for bit;
   - switching off restores every entry word;
   - a function whose entry is not BPT_TRACEABLE's is refused.
   On compilers without native support (tcc) it checks BPT_ENOTSUP, then
   skips (native_fixture.h). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

#if defined(BPT_NATIVE)
/* The functions under test: each folds every argument register it receives
   into its result, so a register the stub clobbers changes the result. */
BPT_TRACEABLE long six(long a, long b, long c, long d, long e, long f, double x) {
    return a * 3 + b * 5 + c * 7 + d * 11 + e * 13 + f * 17 + (long)(x * 1000.0);
}
BPT_TRACEABLE double eight_doubles(double a, double b, double c, double d, double e, double f, double g, double h) {
    return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8;
}
typedef struct pair { long lo, hi; } pair;            /* returned in rax:rdx / x0:x1 */
BPT_TRACEABLE pair two_regs(long a, long b) { pair p; p.lo = a ^ 0x5555; p.hi = b + 1; return p; }
typedef struct mix { float f; int i; } mix;            /* returned in one register, mixed */
BPT_TRACEABLE mix float_int(float f, int i) { mix m; m.f = f * 2.0f; m.i = i - 1; return m; }
BPT_TRACEABLE size_t str_len(const char *s, long n) { return strlen(s) + (size_t)n; }
BPT_TRACEABLE long untraced(long a) { return a + 1; }
/* A function compiled without the attribute: its entry must be refused. */
__attribute__((noinline)) long plain(long a) { return a * 2; }

static long (*volatile six_p)(long, long, long, long, long, long, double) = six;
static double (*volatile eight_p)(double, double, double, double, double, double, double, double) = eight_doubles;
static pair (*volatile two_p)(long, long) = two_regs;
static mix (*volatile mix_p)(float, int) = float_int;
static size_t (*volatile str_p)(const char *, long) = str_len;
static long (*volatile untraced_p)(long) = untraced;

static void call_all(long k, long *r6, double *r8, pair *r2, mix *rm, size_t *rs, long *ru) {
    *r6 = six_p(k, -2, 3, -4, 5, 0x7fffffffffffL, 1.25);
    *r8 = eight_p(0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, (double)k);
    *r2 = two_p(k, -k);
    *rm = mix_p(1.5f, (int)k);
    *rs = str_p("hello", k);
    *ru = untraced_p(k);
}

int main(void) {
    bpt_func *f6, *f8, *f2, *fm, *fs, *fu, *fp;
    bpt_session s;
    bpt_match ms;
    bpt_msg m[64];
    char line[256];
    long r6a, r6b, rua, rub;
    double r8a, r8b;
    pair r2a, r2b;
    mix rma, rmb;
    size_t rsa, rsb;
    unsigned char before[4], after[4];
    int n, i, calls6 = 0, calls_str = 0, other = 0;

    call_all(7, &r6a, &r8a, &r2a, &rma, &rsa, &rua);   /* untraced reference results */
    CHECK_RC(bpt_register_native((void *)six, "native", "six", 6, &f6), 0);
    CHECK_RC(bpt_register_native((void *)eight_doubles, "native", "eight_doubles", 0, &f8), 0);
    CHECK_RC(bpt_register_native((void *)two_regs, "native", "two_regs", 2, &f2), 0);
    CHECK_RC(bpt_register_native((void *)float_int, "native", "float_int", 2, &fm), 0);
    CHECK_RC(bpt_register_native((void *)str_len, "native", "str_len", 2, &fs), 0);
    CHECK_RC(bpt_register_native((void *)untraced, "native", "untraced", 1, &fu), 0);
    CHECK_RC(bpt_register_native((void *)plain, "native", "plain", 1, &fp), BPT_ENOTPATCHABLE);
    printf("refused: %s\n", bpt_last_error());
    code_bytes((void *)six, before, 4);

    CHECK_RC(bpt_session_create(NULL, &s), 0);
    memset(&ms, 0, sizeof ms);
    ms.args = "i64,i64,i64,i64,i64,i64,f64";
    CHECK_RC(bpt_trace_pattern(s, "native:six/_", BPT_CALL | BPT_COUNT, &ms), 1);
    ms.args = "str,i64";
    CHECK_RC(bpt_trace_pattern(s, "native:str_len/_", BPT_CALL, &ms), 1);
    CHECK_RC(bpt_trace_pattern(s, "native:eight_doubles/_", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "native:two_regs/_", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "native:float_int/_", BPT_COUNT, NULL), 1);
    code_bytes((void *)six, after, 4);
    printf("entry of six: %02x %02x %02x %02x -> %02x %02x %02x %02x\n", before[0], before[1], before[2],
           before[3], after[0], after[1], after[2], after[3]);
    CHECK(memcmp(before, after, 4) != 0, "the entry word changed");

    call_all(7, &r6b, &r8b, &r2b, &rmb, &rsb, &rub);
    CHECK(r6a == r6b, "six: %ld traced vs %ld untraced", r6b, r6a);
    CHECK(memcmp(&r8a, &r8b, sizeof r8a) == 0, "eight_doubles: %.17g vs %.17g", r8b, r8a);
    CHECK(r2a.lo == r2b.lo && r2a.hi == r2b.hi, "two-register struct");
    CHECK(memcmp(&rma, &rmb, sizeof rma) == 0, "float+int struct");
    CHECK(rsa == rsb && rua == rub, "str_len and untraced");

    n = bpt_session_drain(s, m, 64);
    for (i = 0; i < n; i++) {
        if (m[i].type != BPT_MSG_CALL) continue;
        bpt_format_dbg(&m[i], line, sizeof line);
        printf("%s\n", line);
        if (strcmp(m[i].name, "six") == 0) {
            double x;
            calls6++;
            memcpy(&x, &m[i].args[6], sizeof x);
            CHECK(m[i].nargs == 7 && (long)m[i].args[0] == 7 && (long)m[i].args[1] == -2 &&
                  (long)m[i].args[2] == 3 && (long)m[i].args[3] == -4 && (long)m[i].args[4] == 5 &&
                  (long)m[i].args[5] == 0x7fffffffffffL && x == 1.25, "six's 7 arguments");
            CHECK(strstr(line, "call native:six(7,-2,3,-4,5,140737488355327,1.25)") != NULL, "dbg: %s", line);
        } else if (strcmp(m[i].name, "str_len") == 0) {
            calls_str++;
            CHECK(strstr(line, "call native:str_len(\"hello\",7)") != NULL, "dbg: %s", line);
        } else {
            other++;
        }
    }
    CHECK(calls6 == 1 && calls_str == 1 && other == 0, "one call message each, none from untraced: %d %d %d",
          calls6, calls_str, other);
    {
        bpt_info info;
        CHECK_RC(bpt_trace_info(s, f8, BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == 1, "eight_doubles counted %llu", (unsigned long long)info.count);
    }

    CHECK(bpt_trace_pattern(s, "native:_/_", BPT_OFF, NULL) >= 0, "off");
    code_bytes((void *)six, after, 4);
    CHECK(memcmp(before, after, 4) == 0, "entry word restored");
    call_all(7, &r6b, &r8b, &r2b, &rmb, &rsb, &rub);
    CHECK(r6a == r6b && rsa == rsb, "results after off");
    CHECK_RC(bpt_session_drain(s, m, 64), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f6), 0);
    CHECK_RC(bpt_unregister(f8), 0);
    CHECK_RC(bpt_unregister(f2), 0);
    CHECK_RC(bpt_unregister(fm), 0);
    CHECK_RC(bpt_unregister(fs), 0);
    CHECK_RC(bpt_unregister(fu), 0);
    /* Registering again reuses the padding bptrace wrote. */
    CHECK_RC(bpt_register_native((void *)six, "native", "six", 6, &f6), 0);
    CHECK_RC(bpt_unregister(f6), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no traced C functions to check")
#endif

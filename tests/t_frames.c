/* t_frames: return_from, exception_from, return_to and caller (DESIGN §7).
   Native functions (x86-64, aarch64) and VM sites:
   - nested A->B->C->B give exactly the expected call/return sequence, with values;
   - return values pass bit for bit: int64, double, two-register struct, float+int;
   - recursion 100,000 deep, past the shadow stack's bound: correct result,
     skipped frames counted, every frame pushed returned;
   - longjmp across 3 traced frames: 3 exception_from, newest first, found at
     the next traced return, at the next traced call (no bpt_unwind_to), or
     by bpt_unwind_to; tracing correct afterwards; 2,000 such longjmps leave
     no frame behind and skip none (issue #17, item 1);
   - tail calls share the frame of the call they replace;
   - a traced function in a signal handler that interrupted a traced function;
   - a session destroyed while 4 threads are inside traced calls: no crash,
     no message after its end;
   - two sessions tracing one call's return share one frame (one swap);
   - threads that exit inside a traced call leak nothing, later ones trace;
   - VM tokens: bpt_vm_return, bpt_vm_unwind, stale tokens ignored.
   BPT_TEST_CONCURRENCY (runs under TSAN too). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

/* Every message a callback tracer got, in order (single-threaded parts). */
enum { LOG_MAX = 16384 };   /* 2,000 longjmps over 3 frames log 12,006 messages */
static bpt_msg log_msgs[LOG_MAX];
static int log_n;
static void log_tracer(const bpt_msg *m, void *user) {
    (void)user;
    if (log_n < LOG_MAX) log_msgs[log_n++] = *m;
}

/* "call B 20", "return_from B 4", "exception_from Z unwind", "return_to A". */
static void describe(const bpt_msg *m, char *buf, size_t size) {
    switch (m->type) {
    case BPT_MSG_CALL: snprintf(buf, size, "call %s %lld", m->name, m->nargs ? (long long)m->args[0] : -1LL); break;
    case BPT_MSG_RETURN_FROM: snprintf(buf, size, "return_from %s %lld", m->name, (long long)m->value); break;
    case BPT_MSG_EXCEPTION_FROM: snprintf(buf, size, "exception_from %s %s", m->name, m->exception_class); break;
    case BPT_MSG_RETURN_TO: snprintf(buf, size, "return_to %s", m->module ? m->name : "?"); break;
    default: snprintf(buf, size, "type %u", (unsigned)m->type);
    }
}

/* Compare the log with the expected lines, then clear it. */
static void expect_log(const char *what, const char *const *want, int n) {
    char got[128];
    int i;
    CHECK(log_n == n, "%s: %d messages, expected %d", what, log_n, n);
    for (i = 0; i < log_n; i++) {
        describe(&log_msgs[i], got, sizeof got);
        /* "return_to *": returning into code whose name depends on the link
           (the test's own functions, registered by hand, have no size). */
        if (i < n) CHECK(strcmp(got, want[i]) == 0 || (strcmp(want[i], "return_to *") == 0 &&
                         strncmp(got, "return_to ", 10) == 0),
                         "%s: message %d is '%s', expected '%s'", what, i, got, want[i]);
        else fprintf(stderr, "  extra: %s\n", got);
    }
    log_n = 0;
}

/* >>vm: a pretend interpreter's call, enough to drive tokens by hand. */
static bpt_vm_word vm_words[4] = { 0x100, 0x101, 0x102, 0x103 };
static bpt_func *vm_f[4];
static uint64_t vm_arg(const void *frame, int index) { return index == 0 ? *(const uint64_t *)frame : 0; }
static bpt_func *vm_caller_fn(const void *frame) { (void)frame; return vm_f[0]; }
static const bpt_vm_ops vm_ops = { .arg = vm_arg, .caller = vm_caller_fn };

static bpt_vm_token vm_call(int i, uint64_t arg) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&vm_words[i]) == 0xBBBB) bpt_vm_breakpoint(vm_f[i], &arg, &t);
    return t;
}

static void test_vm(void) {
    static const char *const names[4] = { "v0", "v1", "v2", "v3" };
    static const char *const seq[] = {
        "call v1 7", "call v2 8", "return_from v2 80", "return_to v0", "return_from v1 70", "return_to v0",
        "call v1 1", "call v2 2", "call v3 3", "exception_from v3 throw", "exception_from v2 throw",
        "exception_from v1 throw",
        "call v1 5", "call v2 6", "exception_from v2 throw", "return_from v1 50", "return_to v0",
    };
    bpt_session_desc d;
    bpt_session s;
    bpt_vm_token t1, t2, t3;
    int i;
    for (i = 0; i < 4; i++)
        CHECK_RC(bpt_register_vm(&vm_words[i], 0xBBBB, "vm", names[i], 1, &vm_ops, &vm_f[i]), 0);
    memset(&d, 0, sizeof d);
    d.tracer = log_tracer;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:v*/1", BPT_CALL | BPT_EXCEPTION | BPT_RETURN_TO, NULL), 4);
    /* Returns, nested. */
    t1 = vm_call(1, 7);
    t2 = vm_call(2, 8);
    CHECK(t1 != 0 && t2 != 0 && t1 != t2, "tokens %llx %llx", (unsigned long long)t1, (unsigned long long)t2);
    bpt_vm_return(t2, 80);
    bpt_vm_return(t2, 81);           /* stale: ignored */
    bpt_vm_return(t1, 70);
    /* A throw passes three frames: the VM reports the newest first. */
    t1 = vm_call(1, 1);
    t2 = vm_call(2, 2);
    t3 = vm_call(3, 3);
    bpt_vm_unwind(t3, 99);
    bpt_vm_unwind(t2, 99);
    bpt_vm_unwind(t1, 99);
    bpt_vm_unwind(t1, 99);           /* stale: ignored */
    bpt_vm_return(0, 1);             /* no frame: ignored */
    bpt_vm_return(0x12345678ULL << 32 | 1, 1);   /* foreign: ignored */
    /* A frame the VM forgot to unwind is found when an older one returns. */
    t1 = vm_call(1, 5);
    t2 = vm_call(2, 6);
    (void)t2;
    bpt_vm_return(t1, 50);
    expect_log("vm", seq, (int)(sizeof seq / sizeof seq[0]));
    /* The exception value reaches exception_from. */
    t1 = vm_call(1, 1);
    bpt_vm_unwind(t1, 42);
    CHECK(log_n == 2 && log_msgs[1].value == 42, "exception value %llu", (unsigned long long)log_msgs[1].value);
    log_n = 0;
    /* No token pointer: return trace is skipped, and counted. */
    {
        bpt_session_counts c;
        uint64_t arg = 4;
        bpt_vm_breakpoint(vm_f[1], &arg, NULL);
        CHECK_RC(bpt_session_stats(s, &c), 0);
        CHECK(c.frames_skipped == 1, "frames_skipped %llu", (unsigned long long)c.frames_skipped);
        log_n = 0;
    }
    /* Flags without BPT_CALL are refused. */
    CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_COUNT | BPT_RETURN, NULL), BPT_EFLAGS);
    CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL | BPT_OFF | BPT_RETURN, NULL), BPT_EFLAGS);
    {
        bpt_match m;
        memset(&m, 0, sizeof m);
        m.ret = "f64,i64";
        CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL | BPT_RETURN, &m), BPT_EPATTERN);
        m.ret = "dbl";
        CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL | BPT_RETURN, &m), BPT_EPATTERN);
        /* The message names the spec at fault: it said "argument spec" for a bad ret. */
        CHECK(strstr(bpt_last_error(), "ret spec 'dbl'") != NULL, "bad ret's message: %s", bpt_last_error());
        m.ret = "i64,";
        CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL | BPT_RETURN, &m), BPT_EPATTERN);
        CHECK(strstr(bpt_last_error(), "ret spec 'i64,' ends with ','") != NULL, "bad ret's message: %s",
              bpt_last_error());
        m.ret = NULL;
        m.args = "i64,dbl";
        CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL, &m), BPT_EPATTERN);
        CHECK(strstr(bpt_last_error(), "argument spec 'i64,dbl': 'dbl'") != NULL, "bad args' message: %s",
              bpt_last_error());
        m.args = NULL;
        m.ret = NULL;
        m.actions = 1u << 12;
        CHECK_RC(bpt_trace_pattern(s, "vm:v1/1", BPT_CALL, &m), BPT_EFLAGS);
    }
    CHECK_RC(bpt_unwind_to(NULL), BPT_EINVAL);
    CHECK_RC(bpt_session_destroy(s), 0);
    /* A frame outliving its session does nothing. */
    for (i = 0; i < 4; i++) CHECK_RC(bpt_unregister(vm_f[i]), 0);
}

#if defined(BPT_NATIVE)
/* >>native */
static int64_t (*volatile pA)(int64_t), (*volatile pC)(int64_t);
BPT_TRACEABLE int64_t fB(int64_t x);
BPT_TRACEABLE int64_t fA(int64_t x) { return fB(x) + 1; }
BPT_TRACEABLE int64_t fB(int64_t x) { return x > 10 ? pC(x) + 2 : x * 2; }
BPT_TRACEABLE int64_t fC(int64_t x) { return fB(x - 18) + 3; }

typedef struct pair { int64_t lo, hi; } pair;   /* rax:rdx / x0:x1 */
typedef struct mix { float f; int i; } mix;     /* one integer register */
typedef struct dmix { double d; int64_t i; } dmix;   /* xmm0 + rax (x86-64) / x0:x1 */
BPT_TRACEABLE int64_t r_i64(int64_t x) { return x * -3 + 0x123456789abLL; }
BPT_TRACEABLE double r_f64(double x) { return x * 1.5 + 0.1; }
BPT_TRACEABLE pair r_pair(int64_t a, int64_t b) { pair p; p.lo = a ^ 0x5555; p.hi = b - 7; return p; }
BPT_TRACEABLE mix r_mix(float f, int i) { mix m; m.f = f * 2.5f; m.i = i * 3; return m; }
BPT_TRACEABLE dmix r_dmix(double d, int64_t i) { dmix m; m.d = d / 3.0; m.i = i + 1; return m; }
static int64_t (*volatile p_i64)(int64_t) = r_i64;
static double (*volatile p_f64)(double) = r_f64;
static pair (*volatile p_pair)(int64_t, int64_t) = r_pair;
static mix (*volatile p_mix)(float, int) = r_mix;
static dmix (*volatile p_dmix)(double, int64_t) = r_dmix;
BPT_TRACEABLE const char *r_str(int64_t x) { return x ? "one string" : NULL; }
static const char *(*volatile p_str)(int64_t) = r_str;

static int64_t (*volatile p_deep)(int64_t);
BPT_TRACEABLE int64_t deep(int64_t n) { return n == 0 ? 0 : p_deep(n - 1) + 1; }

static jmp_buf *volatile jump_to;
BPT_TRACEABLE int64_t lZ(int64_t x) { if (x) longjmp(*jump_to, 1); return 5; }
BPT_TRACEABLE int64_t lY(int64_t x) { return lZ(x) + 1; }
BPT_TRACEABLE int64_t lX(int64_t x) { return lY(x) + 1; }
static jmp_buf jb_t;
BPT_TRACEABLE int64_t lT(int64_t x) {
    if (setjmp(jb_t)) return -1;
    jump_to = &jb_t;
    return lX(x) + 1;
}
static int64_t (*volatile p_lT)(int64_t) = lT, (*volatile p_lX)(int64_t) = lX;

/* Tail calls: tA's call of tB is a jump (gcc -O2's sibcall, clang's musttail). */
static void *volatile tB_ret;
BPT_TRACEABLE int64_t tB(int64_t x) { tB_ret = __builtin_return_address(0); return x * 7 + 1; }
#if defined(__clang__)
BPT_TRACEABLE int64_t tA(int64_t x) { __attribute__((musttail)) return tB(x + 1); }
#else
BPT_TRACEABLE int64_t tA(int64_t x) { return tB(x + 1); }
#endif
static int64_t (*volatile p_tA)(int64_t) = tA;

static void check_values(const char *when) {
    pair p = p_pair(0x1111, 99);
    mix m = p_mix(1.25f, 7);
    dmix dm = p_dmix(10.0, 41);
    double d = p_f64(3.0);
    CHECK(p_i64(5) == 5 * -3 + 0x123456789abLL, "%s: int64", when);
    CHECK(memcmp(&d, &(double){ 3.0 * 1.5 + 0.1 }, sizeof d) == 0, "%s: double %.17g", when, d);
    CHECK(p.lo == (0x1111 ^ 0x5555) && p.hi == 92, "%s: pair %lld %lld", when, (long long)p.lo, (long long)p.hi);
    CHECK(m.f == 3.125f && m.i == 21, "%s: mix %g %d", when, (double)m.f, m.i);
    CHECK(memcmp(&dm.d, &(double){ 10.0 / 3.0 }, sizeof dm.d) == 0 && dm.i == 42, "%s: dmix", when);
}

static bpt_func *reg(void *fn, const char *name) { return native_reg(fn, "frames", name, 1); }

/* 100,000 deep (DEEP=n overrides); tests/run halves it under TSAN, whose
   shadow call stack holds 65,536 frames: deeper recursion corrupts TSAN's
   runtime, traced or not (a plain untraced 100,000-deep recursion hung in 1
   of 3 runs here; traced: hangs and SEGVs inside TSAN; at 50,000: 0 of 10). */
static int64_t deep_n;
static void *deep_main(void *arg) {
    *(int64_t *)arg = p_deep(deep_n);
    return NULL;
}

/* Signal part: F runs in the main flow, G in SIGALRM handlers that interrupt it. */
static int64_t (*volatile p_F)(int64_t), (*volatile p_G)(int64_t);
BPT_TRACEABLE int64_t G(int64_t x) { return x + 1; }
BPT_TRACEABLE int64_t F(int64_t x) {
    volatile int64_t acc = 0;
    int i;
    for (i = 0; i < 200; i++) acc += i;
    return x + acc;
}
static volatile sig_atomic_t g_wrong, g_calls;
static void on_alarm(int sig) {
    (void)sig;
    if (p_G(g_calls) != g_calls + 1) g_wrong++;
    g_calls++;
}
/* Counting tracer, safe in handlers: relaxed atomics only. */
static uint64_t cnt[8];   /* [0] call F, [1] return F, [2] call G, [3] return G, [4] other,
                             [5] the counts of DROPPED messages */
static void count_tracer(const bpt_msg *m, void *user) {
    int k = 4;
    (void)user;
    if (m->type == BPT_MSG_DROPPED) {
        __atomic_fetch_add(&cnt[5], m->value, __ATOMIC_RELAXED);
        return;
    }
    if (m->type == BPT_MSG_CALL || m->type == BPT_MSG_RETURN_FROM)
        k = (m->name[0] == 'G' ? 2 : 0) + (m->type == BPT_MSG_RETURN_FROM);
    __atomic_fetch_add(&cnt[k], 1, __ATOMIC_RELAXED);
}

/* Session-destroy part. */
static int64_t (*volatile p_W)(int64_t);
BPT_TRACEABLE int64_t W(int64_t x) {
    volatile int64_t acc = 0;
    int i;
    for (i = 0; i < 3000; i++) acc += i & 1;
    return x + acc;
}
static int destroyed, stop_workers;
static uint64_t late_msgs, w_wrong, w_calls;
static void late_tracer(const bpt_msg *m, void *user) {
    (void)m; (void)user;
    if (__atomic_load_n(&destroyed, __ATOMIC_ACQUIRE)) __atomic_fetch_add(&late_msgs, 1, __ATOMIC_RELAXED);
}
static void *w_main(void *arg) {
    int64_t k = 0;
    (void)arg;
    while (!__atomic_load_n(&stop_workers, __ATOMIC_ACQUIRE)) {
        if (p_W(k) != k + 1500) __atomic_fetch_add(&w_wrong, 1, __ATOMIC_RELAXED);
        k++;
        __atomic_fetch_add(&w_calls, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Several sessions, one frame: the return address is swapped once. */
static uint32_t depth_seen;
BPT_TRACEABLE int64_t probe(int64_t x) {
    depth_seen = bpt__thread_self_or_null()->shadow_depth[BPT__STACK_NATIVE];
    return x + 1;
}
static int64_t (*volatile p_probe)(int64_t) = probe;

/* A thread that exits inside a traced call leaves its frame behind. */
BPT_TRACEABLE int64_t exiter(int64_t x) {
    if (x) pthread_exit(NULL);
    return x;
}
static int64_t (*volatile p_exiter)(int64_t) = exiter;
static void *exiter_main(void *arg) { p_exiter((int64_t)(intptr_t)arg); return NULL; }

static void sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void test_native(void) {
    bpt_session_desc d;
    bpt_session s;
    bpt_session_counts c;
    bpt_match m;
    int i;
    pA = fA; pC = fC; p_deep = deep; p_F = F; p_G = G; p_W = W;
    reg((void *)fA, "A"); reg((void *)fB, "B"); reg((void *)fC, "C");
    reg((void *)r_i64, "r_i64"); reg((void *)r_f64, "r_f64"); reg((void *)r_pair, "r_pair");
    reg((void *)r_mix, "r_mix"); reg((void *)r_dmix, "r_dmix"); reg((void *)deep, "deep");
    reg((void *)r_str, "str");
    reg((void *)lZ, "Z"); reg((void *)lY, "Y"); reg((void *)lX, "X"); reg((void *)lT, "T");
    reg((void *)tA, "tA"); reg((void *)tB, "tB");
    reg((void *)F, "F"); reg((void *)G, "G"); reg((void *)W, "W");
    reg((void *)probe, "probe"); reg((void *)exiter, "exiter");
    memset(&d, 0, sizeof d);
    d.tracer = log_tracer;
    CHECK_RC(bpt_session_create(&d, &s), 0);

    printf("native: nested\n");
    /* 1. Nested A -> B -> C -> B, with return_to: B returns to C, C to B,
          B to A, and A to code bptrace does not know (the test's main). */
    {
        static const char *const seq[] = {
            "call A 20", "call B 20", "call C 20", "call B 2",
            "return_from B 4", "return_to C", "return_from C 7", "return_to B",
            "return_from B 9", "return_to A", "return_from A 10", "return_to *",
        };
        CHECK_RC(bpt_trace_pattern(s, "frames:A/1", BPT_CALL | BPT_RETURN | BPT_RETURN_TO | BPT_CALLER, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:B/1", BPT_CALL | BPT_RETURN | BPT_RETURN_TO | BPT_CALLER, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:C/1", BPT_CALL | BPT_RETURN | BPT_RETURN_TO | BPT_CALLER, NULL), 1);
        CHECK(pA(20) == 10, "A(20)");
        /* caller: B's first call is from A, its second from C; A's from the test. */
        CHECK(log_n > 3 && log_msgs[0].caller != 0, "A's caller: an address");
        CHECK(log_n > 3 && log_msgs[1].caller_name && strcmp(log_msgs[1].caller_name, "A") == 0, "B's caller is A");
        CHECK(log_n > 3 && log_msgs[3].caller_name && strcmp(log_msgs[3].caller_name, "C") == 0, "B's second caller is C");
        expect_log("A->B->C->B", seq, (int)(sizeof seq / sizeof seq[0]));
        CHECK(pA(20) == 10, "A(20) again");
        log_n = 0;
        CHECK_RC(bpt_trace_pattern(s, "frames:_/_", BPT_CALL | BPT_OFF, NULL), 21);
        CHECK(pA(20) == 10 && log_n == 0, "untraced: %d messages", log_n);
    }

    printf("native: return values\n");
    /* 2. Return values bit for bit, and as the ret spec says. */
    check_values("untraced");
    CHECK_RC(bpt_trace_pattern(s, "frames:r_*/_", BPT_CALL | BPT_EXCEPTION, NULL), 5);
    check_values("return traced");
    CHECK(log_n == 10, "%d messages for 5 calls", log_n);
    for (i = 0; i < log_n && strcmp(log_msgs[i].name, "r_i64") != 0; i++) {}
    CHECK(i + 1 < log_n && log_msgs[i + 1].type == BPT_MSG_RETURN_FROM &&
          (int64_t)log_msgs[i + 1].value == 5 * -3 + 0x123456789abLL, "return_from r_i64 value");
    log_n = 0;
    memset(&m, 0, sizeof m);
    m.ret = "f64";
    m.args = "f64";
    CHECK_RC(bpt_trace_pattern(s, "frames:r_f64/_", BPT_CALL | BPT_RETURN, &m), 1);
    {
        double want = 3.0 * 1.5 + 0.1, got;
        char line[256];
        CHECK(p_f64(3.0) == want, "f64");
        CHECK(log_n == 2, "%d messages", log_n);
        memcpy(&got, &log_msgs[1].value, sizeof got);
        CHECK(log_n == 2 && log_msgs[1].value_type == BPT_ARG_F64 && got == want, "return_from f64 %g", got);
        bpt_format_dbg(&log_msgs[1], line, sizeof line);
        CHECK(strstr(line, "returned from frames:r_f64/1 -> 4.6") != NULL, "dbg line: %s", line);
        printf("  %s\n", line);
        log_n = 0;
    }
    /* A string return value: its bytes are copied at the return (NULL as
       "(null)"), one session's frame on top: F2's common return. */
    m.ret = "str";
    m.args = NULL;
    CHECK_RC(bpt_trace_pattern(s, "frames:str/_", BPT_CALL | BPT_RETURN, &m), 1);
    {
        char line[256];
        CHECK(strcmp(p_str(1), "one string") == 0 && p_str(0) == NULL, "r_str");
        CHECK(log_n == 4, "%d messages", log_n);
        CHECK(log_n == 4 && log_msgs[1].type == BPT_MSG_RETURN_FROM && log_msgs[1].value_type == BPT_ARG_STR &&
              strcmp(log_msgs[1].str, "one string") == 0, "return_from str: \"%s\"", log_msgs[1].str);
        CHECK(log_n == 4 && log_msgs[3].type == BPT_MSG_RETURN_FROM && strcmp(log_msgs[3].str, "(null)") == 0,
              "return_from NULL str: \"%s\"", log_msgs[3].str);
        bpt_format_dbg(&log_msgs[1], line, sizeof line);
        CHECK(strstr(line, "returned from frames:str/1 -> \"one string\"") != NULL, "dbg line: %s", line);
        printf("  %s\n", line);
        log_n = 0;
    }
    CHECK_RC(bpt_trace_pattern(s, "frames:_/_", BPT_CALL | BPT_OFF, NULL), 21);
    check_values("after");
    log_n = 0;

    printf("native: recursion\n");
    /* 3. Recursion 100,000 deep, past BPT_SHADOW_FRAMES (512). */
    {
        pthread_t t;
        pthread_attr_t attr;
        int64_t r = -1;
        bpt_session cs;
        bpt_session_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.tracer = count_tracer;
        memset(cnt, 0, sizeof cnt);
        CHECK_RC(bpt_session_create(&cd, &cs), 0);
        CHECK_RC(bpt_trace_pattern(cs, "frames:deep/_", BPT_CALL | BPT_RETURN, NULL), 1);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)512 << 20);
        deep_n = getenv("DEEP") ? atol(getenv("DEEP")) : check_scale(100000);
        CHECK(pthread_create(&t, &attr, deep_main, &r) == 0, "thread");
        pthread_join(t, NULL);
        CHECK(r == deep_n, "deep(%lld) = %lld", (long long)deep_n, (long long)r);
        CHECK_RC(bpt_session_stats(cs, &c), 0);
        CHECK(cnt[0] == (uint64_t)deep_n + 1 && cnt[1] == 512, "calls %llu, returns %llu",
              (unsigned long long)cnt[0], (unsigned long long)cnt[1]);
        CHECK(c.frames_skipped == (uint64_t)deep_n + 1 - 512, "frames skipped %llu", (unsigned long long)c.frames_skipped);
        printf("  deep(%lld): %llu calls, %llu return_from, %llu frames skipped past the bound\n", (long long)deep_n,
               (unsigned long long)cnt[0], (unsigned long long)cnt[1], (unsigned long long)c.frames_skipped);
        CHECK_RC(bpt_session_destroy(cs), 0);
        pthread_attr_destroy(&attr);
    }

    printf("native: longjmp\n");
    /* 4. longjmp across three traced frames. */
    {
        static const char *const seq[] = {
            "call T 1", "call X 1", "call Y 1", "call Z 1",
            "exception_from Z unwind", "exception_from Y unwind", "exception_from X unwind", "return_from T -1",
            "call T 0", "call X 0", "call Y 0", "call Z 0",
            "return_from Z 5", "return_from Y 6", "return_from X 7", "return_from T 8",
        };
        static const char *const seq2[] = {
            "call X 1", "call Y 1", "call Z 1",
            "exception_from Z unwind", "exception_from Y unwind", "exception_from X unwind",
            "call X 0", "call Y 0", "call Z 0", "return_from Z 5", "return_from Y 6", "return_from X 7",
        };
        static jmp_buf jb_here;
        volatile int n = -1;
        CHECK_RC(bpt_trace_pattern(s, "frames:T/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:X/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:Y/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:Z/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        CHECK(p_lT(1) == -1, "T(1)");
        CHECK(p_lT(0) == 8, "T(0)");
        expect_log("longjmp to a traced function", seq, (int)(sizeof seq / sizeof seq[0]));
        /* Caught where nothing is traced: the host tells bptrace. */
        jump_to = &jb_here;
        if (setjmp(jb_here) == 0) p_lX(1);
        else n = bpt_unwind_to(__builtin_frame_address(0));
        CHECK(n == 3, "bpt_unwind_to dropped %d frames", n);
        CHECK(p_lX(0) == 7, "X(0)");
        expect_log("longjmp + bpt_unwind_to", seq2, (int)(sizeof seq2 / sizeof seq2[0]));
        /* Caught where nothing is traced, and nobody tells: the next traced
           call settles the dead frames first. */
        if (setjmp(jb_here) == 0) p_lX(1);
        CHECK(p_lX(0) == 7, "X(0) after a longjmp nobody reported");
        expect_log("longjmp, settled by the next call", seq2, (int)(sizeof seq2 / sizeof seq2[0]));
        {
            static bpt_session_counts c0, c1;
            static volatile int k;
            static int unwound, i;
            CHECK_RC(bpt_session_stats(s, &c0), 0);
            for (k = 0; k < 2000; k++)
                if (setjmp(jb_here) == 0) p_lX(1);
            CHECK(p_lX(0) == 7, "X(0) after 2,000 longjmps");
            CHECK_RC(bpt_session_stats(s, &c1), 0);
            for (i = 0; i < log_n; i++) unwound += log_msgs[i].type == BPT_MSG_EXCEPTION_FROM;
            CHECK(unwound == 6000 && c1.frames_skipped == c0.frames_skipped,
                  "2,000 longjmps over 3 frames: %d exception_from (6,000 expected), %llu frames skipped",
                  unwound, (unsigned long long)(c1.frames_skipped - c0.frames_skipped));
            CHECK(log_n >= 3 && log_msgs[log_n - 1].type == BPT_MSG_RETURN_FROM && log_msgs[log_n - 1].value == 7,
                  "return trace still on: the last message is return_from X 7");
            log_n = 0;
        }
        CHECK_RC(bpt_trace_pattern(s, "frames:_/_", BPT_CALL | BPT_OFF, NULL), 21);
    }

    printf("native: tail calls\n");
    /* 5. Tail calls. With only tA's return traced, tB returns straight to
          the trampoline if its call was a jump. Then both share one frame. */
    {
        static const char *const seq[] = {
            "call tA 1", "call tB 2", "return_from tB 15", "return_from tA 15", "return_to *",
        };
        CHECK_RC(bpt_trace_pattern(s, "frames:tA/_", BPT_CALL | BPT_RETURN, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "frames:tB/_", BPT_CALL, NULL), 1);
        CHECK(p_tA(1) == 15, "tA(1)");
        printf("  tail call: tB returned to %p, the trampoline is %p\n", tB_ret, (void *)BPT__RETURN_TRAMPOLINE);
        CHECK((uintptr_t)tB_ret == BPT__RETURN_TRAMPOLINE, "tA's call of tB was not a tail call");
        log_n = 0;
        CHECK_RC(bpt_trace_pattern(s, "frames:t*/_", BPT_CALL | BPT_RETURN | BPT_RETURN_TO, NULL), 2);
        CHECK(p_tA(1) == 15, "tA(1)");
        expect_log("tail call", seq, (int)(sizeof seq / sizeof seq[0]));
        CHECK(p_tA(1) == 15 && log_n == 5, "again: %d messages", log_n);
        log_n = 0;
        CHECK_RC(bpt_trace_pattern(s, "frames:_/_", BPT_CALL | BPT_OFF, NULL), 21);
    }
    /* Two sessions with return trace on one call: one frame, one swap, a
       return_from for each. */
    {
        bpt_session s2;
        CHECK_RC(bpt_session_create(&d, &s2), 0);
        CHECK_RC(bpt_trace_pattern(s, "frames:probe/_", BPT_CALL | BPT_RETURN, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s2, "frames:probe/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        CHECK(p_probe(1) == 2, "probe");
        CHECK(depth_seen == 1, "%u frames for one call traced by two sessions", (unsigned)depth_seen);
        CHECK(log_n == 4 && log_msgs[2].type == BPT_MSG_RETURN_FROM && log_msgs[3].type == BPT_MSG_RETURN_FROM &&
              log_msgs[2].session != log_msgs[3].session, "%d messages: a return_from per session", log_n);
        log_n = 0;
        CHECK_RC(bpt_session_destroy(s2), 0);
    }
    /* Threads that exit inside a traced call: their records are reused,
       their frames forgotten, nothing leaks (ASAN's leak check), and later
       threads trace as before. */
    {
        pthread_t t;
        int round;
        CHECK_RC(bpt_trace_pattern(s, "frames:exiter/_", BPT_CALL | BPT_EXCEPTION, NULL), 1);
        for (round = 0; round < 50; round++) {
            CHECK(pthread_create(&t, NULL, exiter_main, (void *)(intptr_t)(round & 1)) == 0, "thread");
            pthread_join(t, NULL);
        }
        /* 50 calls; the 25 that returned gave return_from. */
        for (i = 0, round = 0; i < log_n; i++) round += log_msgs[i].type == BPT_MSG_RETURN_FROM;
        CHECK(log_n == 75 && round == 25, "%d messages, %d return_from", log_n, round);
        log_n = 0;
        CHECK_RC(bpt_trace_pattern(s, "frames:_/_", BPT_CALL | BPT_OFF, NULL), 21);
    }
    CHECK_RC(bpt_session_destroy(s), 0);

    printf("native: signals\n");
    /* 6. A traced function in a signal handler that interrupted a traced
          function. Buffers to drain, not a callback: a handler that interrupts a
          callback tracer would be inside it, where nothing is traced. */
    {
        bpt_session cs;
        bpt_session_desc cd;
        struct sigaction sa;
        struct itimerval it = { { 0, 200 }, { 0, 200 } }, off = { { 0, 0 }, { 0, 0 } };
        long k, wrong = 0, calls = check_scale(20000);
        static bpt_msg msgs[256];
        int n;
        memset(&cd, 0, sizeof cd);
        cd.chunks = 128;
        memset(cnt, 0, sizeof cnt);
        CHECK_RC(bpt_session_create(&cd, &cs), 0);
        CHECK_RC(bpt_trace_pattern(cs, "frames:F/_", BPT_CALL | BPT_RETURN, NULL), 1);
        CHECK_RC(bpt_trace_pattern(cs, "frames:G/_", BPT_CALL | BPT_RETURN, NULL), 1);
        CHECK_RC(bpt_trace_pattern(cs, "frames:G/_", BPT_COUNT, NULL), 1);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        setitimer(ITIMER_REAL, &it, NULL);
        for (k = 0; k < calls; k++)
            if (p_F(k) != k + 19900) wrong++;
        setitimer(ITIMER_REAL, &off, NULL);
        signal(SIGALRM, SIG_IGN);
        while ((n = bpt_session_drain(cs, msgs, 256)) > 0)
            for (i = 0; i < n; i++) count_tracer(&msgs[i], NULL);
        {
            bpt_info gi;
            bpt_func *gf;
            CHECK_RC(bpt_func_lookup("frames", "G", 1, &gf), 0);
            CHECK_RC(bpt_trace_info(cs, gf, BPT_INFO_COUNT, &gi), 0);
            CHECK(gi.count == (uint64_t)g_calls, "call_count of G %llu, handler runs %ld",
                  (unsigned long long)gi.count, (long)g_calls);
        }
        CHECK_RC(bpt_session_stats(cs, &c), 0);
        printf("  signals: %ld calls of F, %ld of G in handlers; messages: F %llu/%llu, G %llu/%llu, other %llu, dropped %llu "
               "(%llu marked), produced %llu\n",
               calls, (long)g_calls, (unsigned long long)cnt[0], (unsigned long long)cnt[1],
               (unsigned long long)cnt[2], (unsigned long long)cnt[3], (unsigned long long)cnt[4],
               (unsigned long long)c.dropped, (unsigned long long)cnt[5], (unsigned long long)c.produced);
        CHECK(wrong == 0 && g_wrong == 0, "wrong results: F %ld, G %ld", wrong, (long)g_wrong);
        CHECK(g_calls > 0, "no signal arrived");
        CHECK(cnt[0] == (uint64_t)calls && cnt[1] == (uint64_t)calls, "F: %llu calls, %llu returns",
              (unsigned long long)cnt[0], (unsigned long long)cnt[1]);
        /* A handler's message is dropped (and counted) only when it interrupts its
           own thread's send; otherwise every call of G has its return. */
        CHECK(cnt[2] + cnt[3] + c.dropped == 2 * (uint64_t)g_calls && cnt[4] == 0,
              "G: %llu calls, %llu returns, %llu dropped, %ld handler runs", (unsigned long long)cnt[2],
              (unsigned long long)cnt[3], (unsigned long long)c.dropped, (long)g_calls);
        /* Marked at the thread's next record that starts a chunk or a
           context: the last losses may be unmarked yet. */
        CHECK(cnt[5] <= c.dropped, "DROPPED marks %llu, dropped %llu", (unsigned long long)cnt[5],
              (unsigned long long)c.dropped);
        CHECK_RC(bpt_session_destroy(cs), 0);
    }

    printf("native: destroy\n");
    /* 7. A session destroyed while 4 threads are inside traced calls. */
    {
        pthread_t t[4];
        bpt_session cs;
        bpt_session_desc cd;
        uint64_t before;
        memset(&cd, 0, sizeof cd);
        cd.tracer = late_tracer;
        CHECK_RC(bpt_session_create(&cd, &cs), 0);
        CHECK_RC(bpt_trace_pattern(cs, "frames:W/_", BPT_CALL | BPT_EXCEPTION | BPT_RETURN_TO, NULL), 1);
        for (i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, w_main, NULL) == 0, "thread");
        sleep_ms(50);
        CHECK_RC(bpt_session_destroy(cs), 0);
        __atomic_store_n(&destroyed, 1, __ATOMIC_RELEASE);
        before = __atomic_load_n(&w_calls, __ATOMIC_RELAXED);
        sleep_ms(30);
        __atomic_store_n(&stop_workers, 1, __ATOMIC_RELEASE);
        for (i = 0; i < 4; i++) pthread_join(t[i], NULL);
        printf("  destroy under load: %llu calls, %llu after the destroy, %llu late messages\n",
               (unsigned long long)w_calls, (unsigned long long)(w_calls - before), (unsigned long long)late_msgs);
        CHECK(late_msgs == 0 && w_wrong == 0, "late messages %llu, wrong results %llu",
              (unsigned long long)late_msgs, (unsigned long long)w_wrong);
        CHECK(w_calls > before, "workers kept calling");
    }
}
#endif

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);   /* each part's line shows, even before a crash */
    printf("VM frames\n");
    test_vm();
#if defined(BPT_NATIVE)
    test_native();
#else
    printf("no native sites with this compiler: VM frames only\n");
#endif
    return CHECK_DONE();
}

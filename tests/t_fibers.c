/* t_fibers: return trace in a thread that switches stacks with
   makecontext/swapcontext (issue #17, item 7). Before fibers.c, a fiber's
   live frames, suspended by a swapcontext, looked like frames a longjmp had
   left behind: the next traced call ended them (exception_from) and their
   return aborted ("no return-trace frame"), or the other way round for the
   thread's own frames. Claims, for a fiber stack placed in each of three
   places (a local array in main's frame, above the thread's frames; a
   static array; an mmap'd region), with call, return_from and
   exception_from on every function:
   1. a fiber suspended inside two traced calls while the thread's own stack
      makes a traced call, then resumed to finish: every call returns, in
      order, and nothing is reported as unwound;
   2. a traced function starts a fiber that suspends inside two traced
      calls, and returns while the fiber is suspended (its frame is under
      the fiber's: a tombstone); the fiber is resumed from main and
      finishes: again every call returns, nothing unwound;
   3. call_time by thread CPU time (time_cpu: load on the machine does not
      count): the 40 ms of CPU main burns on the thread while the fiber is
      suspended are not charged to the fiber's suspended calls (S1, S2),
      and every call is counted;
   4. longjmp inside a fiber, over a traced call, still ends that call
      (exception_from) at the fiber's next traced call, and not the
      thread's own frames;
   6. a fiber started by setcontext whose uc_link is a getcontext in a
      traced function: the return to it goes through the C library's own
      setcontext, unseen, and the traced function still returns through
      its frame (its tag is taken back from the frame, F2);
   7. a signal whose handler makes two traced calls lands while a pop drops
      a tombstone (BPT_TEST_POINT raises it there): the handler drops the
      tombstones and reuses their place, and the interrupted pop must not
      store its older depth back (it brought an ended frame back to life:
      a spurious exception_from for a call that had returned);
   5. 1-4 again with every switch made by a coroutine library's own code,
      which bptrace does not see (here: libc's swapcontext, reached past
      bptrace's through dlsym RTLD_NEXT), announced with
      bpt_fiber_switch_begin and bpt_fiber_switch_end. */
static void t_test_point(const char *where);   /* 7: raises a signal there */
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

static volatile int raise_at_point;
static void t_test_point(const char *where) {
    (void)where;
    if (raise_at_point) {
        raise_at_point = 0;
        raise(SIGUSR1);
    }
}

#if defined(BPT_NATIVE)
enum { STACK = 1 << 16, LOG_MAX = 64 };
static bpt_msg log_msgs[LOG_MAX];
static int log_n;
static void log_tracer(const bpt_msg *m, void *user) {
    (void)user;
    if (log_n < LOG_MAX) log_msgs[log_n++] = *m;
}

static ucontext_t back, co;
/* How the test switches: swapcontext (bptrace's), or a library's own
   switch, announced (5). */
static int (*volatile switch_p)(ucontext_t *, const ucontext_t *) = swapcontext;
static int (*raw_swapcontext)(ucontext_t *, const ucontext_t *);
static int announced_switch(ucontext_t *from, const ucontext_t *to) {
    uint64_t tag = bpt_fiber_switch_begin();
    int rc = raw_swapcontext(from, to);
    bpt_fiber_switch_end(tag);
    return rc;
}
static char *co_stack;
static int64_t co_result;
static jmp_buf in_fiber;

static void burn_ms(int ms) {   /* of this thread's CPU time */
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

BPT_TRACEABLE int64_t leaf(int64_t x) { return x + 1; }
static int64_t (*volatile p_leaf)(int64_t) = leaf;
BPT_TRACEABLE int64_t co_inner(int64_t x) {
    switch_p(&co, &back);   /* suspend inside two traced calls */
    return p_leaf(x) + 1;
}
static int64_t (*volatile p_co_inner)(int64_t) = co_inner;
BPT_TRACEABLE int64_t co_outer(int64_t x) { return p_co_inner(x) + 1; }
static int64_t (*volatile p_co_outer)(int64_t) = co_outer;
BPT_TRACEABLE int64_t jumper(int64_t x) { if (x) longjmp(in_fiber, 1); return x; }
static int64_t (*volatile p_jumper)(int64_t) = jumper;

static void co_entry(void) { co_result = p_co_outer(10); }
static void co_jump_entry(void) {
    if (setjmp(in_fiber) == 0) p_jumper(1);   /* longjmp over jumper's frame */
    co_result = p_leaf(50);                  /* settles jumper's frame */
}

static void co_start(void (*entry)(void)) {
    CHECK(getcontext(&co) == 0, "getcontext");
    co.uc_stack.ss_sp = co_stack;
    co.uc_stack.ss_size = STACK;
    co.uc_link = &back;
    makecontext(&co, entry, 0);
    CHECK(switch_p(&back, &co) == 0, "swapcontext to the fiber");
}

/* 6. */
static ucontext_t resume_here;
static void co_plain_entry(void) { co_result = p_leaf(70); }
BPT_TRACEABLE int64_t get_and_set(int64_t x) {
    volatile int started = 0;
    CHECK(getcontext(&resume_here) == 0, "getcontext");
    if (!started) {
        started = 1;
        CHECK(getcontext(&co) == 0, "getcontext");
        co.uc_stack.ss_sp = co_stack;
        co.uc_stack.ss_size = STACK;
        co.uc_link = &resume_here;   /* back through the C library's own setcontext */
        makecontext(&co, co_plain_entry, 0);
        setcontext(&co);
        CHECK(0, "setcontext returned");
    }
    return x + co_result;
}
static int64_t (*volatile p_get_and_set)(int64_t) = get_and_set;

/* 7. */
static void two_calls(int sig) { (void)sig; p_leaf(100); p_leaf(200); }
BPT_TRACEABLE int64_t yield_in(int64_t x) { switch_p(&co, &back); return x; }
static int64_t (*volatile p_yield_in)(int64_t) = yield_in;
BPT_TRACEABLE int64_t resume_in(int64_t x) { switch_p(&back, &co); return x; }
static int64_t (*volatile p_resume_in)(int64_t) = resume_in;
static void co_tombstones(void) {
    p_yield_in(1);   /* suspended inside it; main's resume_in resumes the fiber */
    p_yield_in(2);   /* the first ended under resume_in: a tombstone; suspended again */
    p_leaf(3);
}

/* 1. */
BPT_TRACEABLE int64_t driver(int64_t x) {
    int64_t y;
    co_start(co_entry);
    y = p_leaf(x);   /* the thread's own stack, the fiber suspended */
    CHECK(switch_p(&back, &co) == 0, "resume the fiber");
    return y + co_result;
}
static int64_t (*volatile p_driver)(int64_t) = driver;

/* 2. */
BPT_TRACEABLE int64_t starter(int64_t x) {
    co_start(co_entry);
    return x;
}
static int64_t (*volatile p_starter)(int64_t) = starter;

static void describe(const bpt_msg *m, char *buf, size_t size) {
    switch (m->type) {
    case BPT_MSG_CALL: snprintf(buf, size, "call %s", m->name); break;
    case BPT_MSG_RETURN_FROM: snprintf(buf, size, "ret %s=%lld", m->name, (long long)m->value); break;
    case BPT_MSG_EXCEPTION_FROM: snprintf(buf, size, "exc %s", m->name); break;
    default: snprintf(buf, size, "type %d", m->type);
    }
}

static void expect(const char *want, const char *what, const char *where) {
    char got[1024] = "", one[96];
    int i;
    for (i = 0; i < log_n; i++) {
        describe(&log_msgs[i], one, sizeof one);
        if (i) strncat(got, ", ", sizeof got - strlen(got) - 1);
        strncat(got, one, sizeof got - strlen(got) - 1);
    }
    CHECK(strcmp(got, want) == 0, "%s (fiber stack %s):\n   got  %s\n   want %s", what, where, got, want);
    log_n = 0;
}

static void run(const char *where, bpt_session timing, bpt_func *f_inner, bpt_func *f_outer) {
    bpt_info info;
    CHECK(p_driver(1) == 15, "driver's result");
    expect("call driver, call co_outer, call co_inner, call leaf, ret leaf=2, call leaf, ret leaf=11, "
           "ret co_inner=12, ret co_outer=13, ret driver=15",
           "1. suspended inside traced calls", where);

    CHECK(p_starter(7) == 7, "starter's result");
    CHECK(p_leaf(1) == 2, "leaf");
    burn_ms(40);   /* 3: not the suspended calls' time */
    CHECK(switch_p(&back, &co) == 0, "resume the fiber from main");
    CHECK(co_result == 13, "the fiber's result %lld", (long long)co_result);
    expect("call starter, call co_outer, call co_inner, ret starter=7, call leaf, ret leaf=2, call leaf, "
           "ret leaf=11, ret co_inner=12, ret co_outer=13",
           "2. the fiber's starter returned first", where);

    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(timing, f_inner, BPT_INFO_TIME, &info), 0);
    CHECK(info.calls == 2, "call_time counted %llu co_inner calls, want 2", (unsigned long long)info.calls);
    CHECK(info.time_ns < 20000000, "co_inner charged %llu ns: the 40 ms main burnt while it was suspended "
          "must not count (fiber stack %s)", (unsigned long long)info.time_ns, where);
    CHECK_RC(bpt_trace_info(timing, f_outer, BPT_INFO_TIME, &info), 0);
    CHECK(info.calls == 2 && info.time_ns < 20000000, "co_outer: %llu calls, %llu ns",
          (unsigned long long)info.calls, (unsigned long long)info.time_ns);
    CHECK_RC(bpt_trace_pattern(timing, "t:co_*/_", BPT_TIME | BPT_RESTART, NULL), 2);

    co_start(co_jump_entry);
    CHECK(co_result == 51, "the jumping fiber's result %lld", (long long)co_result);
    expect("call jumper, exc jumper, call leaf, ret leaf=51", "4. longjmp inside a fiber", where);

    /* 7. */
    co_start(co_tombstones);          /* yield_in(1) suspends */
    p_resume_in(5);                   /* yield_in(1) returns under resume_in; yield_in(2) suspends;
                                         resume_in returns under it: a tombstone */
    raise_at_point = 1;
    CHECK(switch_p(&back, &co) == 0, "resume the fiber");   /* yield_in(2)'s pop drops the tombstones */
    CHECK(raise_at_point == 0, "the test point was reached");
    expect("call yield_in, call resume_in, ret yield_in=1, call yield_in, ret resume_in=5, call leaf, ret leaf=101, "
           "call leaf, ret leaf=201, ret yield_in=2, call leaf, ret leaf=4",
           "7. a handler inside a pop's tombstone drop", where);

    if (switch_p == swapcontext) {   /* 6: setcontext, bptrace's */
        CHECK(p_get_and_set(1) == 72, "get_and_set's result");
        expect("call get_and_set, call leaf, ret leaf=71, ret get_and_set=72", "6. uc_link to a getcontext", where);
    }
}

int main(void) {
    char local[STACK] __attribute__((aligned(16)));   /* in main's frame: above every traced frame */
    static char in_bss[STACK] __attribute__((aligned(16)));
    bpt_session s, timing;
    bpt_session_desc d;
    bpt_func *f_inner, *f_outer;
    char *mapped;
    native_reg((void *)leaf, "t", "leaf", 1);
    f_inner = native_reg((void *)co_inner, "t", "co_inner", 1);
    f_outer = native_reg((void *)co_outer, "t", "co_outer", 1);
    native_reg((void *)jumper, "t", "jumper", 1);
    native_reg((void *)driver, "t", "driver", 1);
    native_reg((void *)starter, "t", "starter", 1);
    native_reg((void *)get_and_set, "t", "get_and_set", 1);
    native_reg((void *)yield_in, "t", "yield_in", 1);
    native_reg((void *)resume_in, "t", "resume_in", 1);
    signal(SIGUSR1, two_calls);
    if (check_failures) return CHECK_DONE();
    memset(&d, 0, sizeof d);
    d.name = "fibers";
    d.tracer = log_tracer;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    d.tracer = NULL;
    d.name = "fibers-cpu";
    d.time_cpu = 1;
    CHECK_RC(bpt_session_create(&d, &timing), 0);
    CHECK_RC(bpt_trace_pattern(s, "t:_/_", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, NULL), 9);
    CHECK_RC(bpt_trace_pattern(timing, "t:co_*/_", BPT_TIME, NULL), 2);

    co_stack = local;
    run("in main's frame", timing, f_inner, f_outer);
    co_stack = in_bss;
    run("static", timing, f_inner, f_outer);
    mapped = (char *)mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mapped != MAP_FAILED, "mmap");
    if (mapped != MAP_FAILED) {
        co_stack = mapped;
        run("mmap'd", timing, f_inner, f_outer);
    }
    /* 5. */
    raw_swapcontext = (int (*)(ucontext_t *, const ucontext_t *))dlsym(RTLD_NEXT, "swapcontext");
    CHECK(raw_swapcontext != NULL, "libc's swapcontext: %s", dlerror());
    if (raw_swapcontext) {
        switch_p = announced_switch;
        co_stack = local;
        run("in main's frame, announced switches", timing, f_inner, f_outer);
        co_stack = in_bss;
        run("static, announced switches", timing, f_inner, f_outer);
    }
    CHECK_RC(bpt_session_destroy(timing), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("return trace across makecontext/swapcontext fibers")
#endif

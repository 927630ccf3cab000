/* t_hit_no_malloc: no hit path calls malloc, calloc, realloc or free, not
   even a thread's first use (issue #17: "a test proves it by failing
   BPT_MALLOC on hit-path threads"). The program defines the allocator
   itself (glibc's, under the program's names), so that every allocation of
   the process passes through it: bptrace's BPT_MALLOC, and anything libc or
   bptrace would call underneath. On a hit-path thread (a thread that only
   runs traced code, its signal handlers and fiber switches: no set-path
   call, no drain) an allocation is counted and refused (NULL).
   Hit-path threads (4) run, from their first call on:
     call trace into a buffered session and into a callback session, return
     trace with exception trace, longjmp over return-traced frames,
     call_count, call_time by wall time and by thread CPU time (a
     time_cpu session), call_memory (bpt_account_memory), a process switch,
     a swapcontext fiber with traced calls, and signal handlers (SIGUSR1,
     sent by main every 200 us) that call traced functions,
   while main switches the patterns on and off, reads trace_info and
   drains (all of which may allocate: main is not a hit-path thread).
   BPT_MAX_THREADS is 2, so that threads past it charge call_time to
   tables in the array mapped for them (timem.c [T3]; its mapping and the
   tables' growth included).
   Claims: 0 allocations on hit-path threads; every kind ran; call_count
   counted at least every round.
   Not under ASAN (it replaces malloc itself). */
#define BPT_MAX_THREADS 2
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#if defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define T_ASAN 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define T_ASAN 1
#endif

#if defined(BPT_NATIVE) && !defined(T_ASAN)
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

static __thread int on_hit_thread;
static volatile long refused;
static void *volatile first_caller;

/* An allocation on a hit-path thread: counted, refused. */
static int hit_alloc(void *caller) {
    if (!on_hit_thread) return 0;
    if (__atomic_fetch_add(&refused, 1, __ATOMIC_RELAXED) == 0) first_caller = caller;
    return 1;
}
void *malloc(size_t n) { return hit_alloc(__builtin_return_address(0)) ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return hit_alloc(__builtin_return_address(0)) ? NULL : __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return hit_alloc(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n); }
void free(void *p) {
    if (p && hit_alloc(__builtin_return_address(0))) return;
    __libc_free(p);
}

enum { THREADS = 4, ROUNDS = 20000, FIBER_STACK = 1 << 16 };
static volatile int stop_workers;
static long rounds_done[THREADS];
static pthread_t workers[THREADS];

BPT_TRACEABLE int64_t leaf(int64_t x) { return x + 1; }
static int64_t (*volatile p_leaf)(int64_t) = leaf;
static __thread jmp_buf jump_back;
BPT_TRACEABLE int64_t thrower(int64_t x) { if (x & 1) longjmp(jump_back, 1); return x; }
static int64_t (*volatile p_thrower)(int64_t) = thrower;
BPT_TRACEABLE int64_t middle(int64_t x) { bpt_account_memory(64); return p_thrower(x) + p_leaf(x); }
static int64_t (*volatile p_middle)(int64_t) = middle;
BPT_TRACEABLE int64_t counted(int64_t x) { return x * 3; }
static int64_t (*volatile p_counted)(int64_t) = counted;

static void on_signal(int sig) {
    (void)sig;
    p_leaf(1);
    p_counted(0);
}

static __thread ucontext_t fiber_back, fiber;
static void fiber_body(void) { p_middle(2); swapcontext(&fiber, &fiber_back); p_leaf(3); }

static void *work(void *arg) {
    static __thread char stack[FIBER_STACK] __attribute__((aligned(16)));
    volatile long i;   /* kept across the longjmp */
    long *done = (long *)arg;
    on_hit_thread = 1;   /* from its first traced call on */
    for (i = 0; i < check_scale(ROUNDS) || !stop_workers; i++) {
        if (setjmp(jump_back) == 0) p_middle(i);
        p_counted(i);
        if (i % 1000 == 0) bpt_process_switch((uint64_t)(i / 1000 % 3));
        if (i % 5000 == 0) {
            getcontext(&fiber);
            fiber.uc_stack.ss_sp = stack;
            fiber.uc_stack.ss_size = sizeof stack;
            fiber.uc_link = &fiber_back;
            makecontext(&fiber, fiber_body, 0);
            swapcontext(&fiber_back, &fiber);   /* runs until it suspends */
            p_leaf(i);
            swapcontext(&fiber_back, &fiber);   /* resumes it to the end */
        }
    }
    on_hit_thread = 0;
    *done = i;
    return NULL;
}

static volatile long tracer_calls;
static void tracer(const bpt_msg *m, void *user) {
    (void)m; (void)user;
    __atomic_fetch_add(&tracer_calls, 1, __ATOMIC_RELAXED);
}

int main(void) {
    static bpt_msg msgs[1024];
    bpt_session ring, cb, counts, wall, cpu;
    bpt_session_desc d;
    struct sigaction sa;
    bpt_info info;
    long want;
    int i, k, round;
    native_reg((void *)leaf, "h", "leaf", 1);
    native_reg((void *)thrower, "h", "thrower", 1);
    native_reg((void *)middle, "h", "middle", 1);
    bpt_func *fc = native_reg((void *)counted, "h", "counted", 1);
    if (check_failures) return CHECK_DONE();
    memset(&d, 0, sizeof d);
    CHECK_RC(bpt_session_create(&d, &ring), 0);
    CHECK_RC(bpt_session_create(&d, &counts), 0);
    CHECK_RC(bpt_session_create(&d, &wall), 0);
    d.time_cpu = 1;
    CHECK_RC(bpt_session_create(&d, &cpu), 0);
    d.time_cpu = 0;
    d.tracer = tracer;
    CHECK_RC(bpt_session_create(&d, &cb), 0);
    CHECK_RC(bpt_trace_pattern(counts, "h:counted/1", BPT_COUNT, NULL), 1);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    for (i = 0; i < THREADS; i++) CHECK_RC(pthread_create(&workers[i], NULL, work, &rounds_done[i]), 0);

    /* main: the set path and the drains, while the workers run. */
    for (round = 0; round < 41; round++) {
        unsigned on = round % 2 ? BPT_OFF : BPT_RETURN | BPT_EXCEPTION;
        CHECK(bpt_trace_pattern(ring, "h:_/_", BPT_CALL | on, NULL) >= 0, "ring: %s", bpt_last_error());
        CHECK(bpt_trace_pattern(cb, "h:leaf/1", BPT_CALL | on, NULL) >= 0, "cb: %s", bpt_last_error());
        on &= BPT_OFF;
        CHECK(bpt_trace_pattern(wall, "h:_/_", (BPT_TIME | BPT_MEMORY) | on, NULL) >= 0, "wall: %s", bpt_last_error());
        CHECK(bpt_trace_pattern(cpu, "h:_/_", BPT_TIME | on, NULL) >= 0, "cpu: %s", bpt_last_error());
        for (i = 0; i < 20; i++) {
            int t;
            for (t = 0; t < THREADS; t++) pthread_kill(workers[t], SIGUSR1);
            /* At most 16 batches: the workers run on and may refill the
               buffers as fast as this empties them (examples/tinyvm.c). */
            for (k = 0; k < 16 && bpt_session_drain(ring, msgs, 1024) > 0; k++) {}
            usleep(200);
        }
        memset(&info, 0, sizeof info);
        CHECK_RC(bpt_trace_info(wall, fc, BPT_INFO_TIME, &info), 0);
    }
    {   /* every kind ran on the hit-path threads (the last round switched them on) */
        bpt_session_counts c;
        CHECK_RC(bpt_session_stats(ring, &c), 0);
        CHECK(c.produced > 0 && tracer_calls > 0, "messages: %llu in the ring session, %ld to the callback",
              (unsigned long long)c.produced, (long)tracer_calls);
        CHECK_RC(bpt_trace_info(wall, fc, BPT_INFO_TIME | BPT_INFO_MEMORY, &info), 0);
        CHECK(info.calls > 0, "call_time by wall time: %llu calls", (unsigned long long)info.calls);
        CHECK_RC(bpt_trace_info(cpu, fc, BPT_INFO_TIME, &info), 0);
        CHECK(info.calls > 0, "call_time by CPU time: %llu calls", (unsigned long long)info.calls);
    }
    stop_workers = 1;
    for (i = 0; i < THREADS; i++) pthread_join(workers[i], NULL);

    for (want = 0, i = 0; i < THREADS; i++) want += rounds_done[i];
    CHECK_RC(bpt_trace_info(counts, fc, BPT_INFO_COUNT, &info), 0);
    CHECK(info.count >= (uint64_t)want, "call_count %llu, at least %ld (plus the handlers')",
          (unsigned long long)info.count, want);
    printf("%d hit-path threads, %ld rounds in all: %ld allocations on hit-path threads\n", THREADS, want,
           (long)refused);
    CHECK(refused == 0, "%ld allocations on hit-path threads, the first from %p", (long)refused, first_caller);
    CHECK_RC(bpt_session_destroy(cb), 0);
    CHECK_RC(bpt_session_destroy(cpu), 0);
    CHECK_RC(bpt_session_destroy(wall), 0);
    CHECK_RC(bpt_session_destroy(counts), 0);
    CHECK_RC(bpt_session_destroy(ring), 0);
    return CHECK_DONE();
}
#elif defined(T_ASAN)
int main(void) { return CHECK_SKIP("ASAN replaces malloc: a program cannot define its own under it"); }
#else
NATIVE_UNSUPPORTED_MAIN("no allocation on hit-path threads")
#endif

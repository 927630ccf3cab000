/* t_frames_altstack: return trace around a signal handler that runs on a
   sigaltstack placed above the thread's own stack (issue #17, items 1 and
   4). A traced call settles the frames the stack has left behind: on one
   stack, the frames at or below its stack pointer. The handler's stack lies
   above the interrupted code's, so a comparison of stack pointers alone
   would end the interrupted function's live frame, and its return would
   then find no frame (an abort). Claims, on a thread whose stack is the
   lower half of one mapping and whose alternate signal stack is the upper:
   - f (return-traced) raises a signal; the handler calls g (return-traced):
     f's frame lives on, and f's return_from comes after g's;
   - the handler calls h, which calls k, which longjmps back into the
     handler: the next traced call (g again) ends k's and h's frames with
     exception_from, newest first, and not f's;
   - after the handler, f returns through its own frame: return_from f 7.
   A second round does the same but the handler calls bpt_unwind_to with
   its own frame address after the longjmp: it ends k's and h's frames (2)
   and not f's. It compared stack pointers alone and also ended f's (3):
   f's return then aborted (found by review).
   t_frames_autodisarm runs this file with the alternate stack set up
   with SS_AUTODISARM: inside the handler sigaltstack(2) then reports it
   disabled, and bptrace took the handler for one on the thread's stack:
   the first round aborted (found by review). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#if defined(BPT_NATIVE)
enum { LOG_MAX = 64, HALF = 1 << 20 };
static bpt_msg log_msgs[LOG_MAX];
static int log_n;
static void log_tracer(const bpt_msg *m, void *user) {
    (void)user;
    if (log_n < LOG_MAX) log_msgs[log_n++] = *m;
}

static sigjmp_buf in_handler;
static int64_t (*volatile p_g)(int64_t), (*volatile p_h)(int64_t);
BPT_TRACEABLE int64_t g(int64_t x) { return x + 1; }
BPT_TRACEABLE int64_t k(int64_t x) { if (x) siglongjmp(in_handler, 1); return 2; }
BPT_TRACEABLE int64_t h(int64_t x) { return k(x) + 1; }
BPT_TRACEABLE int64_t f(int64_t x) { raise(SIGUSR1); return x + 6; }
static int64_t (*volatile p_f)(int64_t) = f;

#if !defined(ALTSTACK_FLAGS)
#  define ALTSTACK_FLAGS 0
#endif
static int round_unwind_to, unwound = -1, alt_refused;

static void handler(int sig) {
    (void)sig;
    p_g(3);
    if (sigsetjmp(in_handler, 0) == 0) p_h(1);
    if (round_unwind_to) unwound = bpt_unwind_to(__builtin_frame_address(0));
    p_g(4);
}

static void *thread_body(void *alt_base) {
    stack_t alt, was;
    memset(&alt, 0, sizeof alt);
    alt.ss_sp = alt_base;
    alt.ss_size = HALF;
    alt.ss_flags = ALTSTACK_FLAGS;
    if (sigaltstack(&alt, &was) != 0) {
        alt_refused = 1;
        return NULL;
    }
    CHECK(p_f(1) == 7, "f(1)");
    sigaltstack(&was, NULL);   /* ASAN unmaps the thread's alternate stack at its exit: let it be its own */
    return NULL;
}

static void describe(const bpt_msg *m, char *buf, size_t size) {
    switch (m->type) {
    case BPT_MSG_CALL: snprintf(buf, size, "call %s", m->name); break;
    case BPT_MSG_RETURN_FROM: snprintf(buf, size, "return_from %s %lld", m->name, (long long)m->value); break;
    case BPT_MSG_EXCEPTION_FROM: snprintf(buf, size, "exception_from %s", m->name); break;
    default: snprintf(buf, size, "type %d", m->type);
    }
}

int main(void) {
    static const char *const want[] = {
        "call f", "call g", "return_from g 4", "call h", "call k",
        "exception_from k", "exception_from h", "call g", "return_from g 5", "return_from f 7",
    };
    const int nwant = (int)(sizeof want / sizeof want[0]);
    bpt_session s;
    bpt_session_desc d;
    struct sigaction sa;
    pthread_attr_t attr;
    pthread_t t;
    unsigned char *mem;
    char got[96];
    int i;
    p_g = g;
    p_h = h;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    if (!native_reg((void *)f, "alt", "f", 1) || !native_reg((void *)g, "alt", "g", 1) ||
        !native_reg((void *)h, "alt", "h", 1) || !native_reg((void *)k, "alt", "k", 1))
        return CHECK_DONE();
    memset(&d, 0, sizeof d);
    d.tracer = log_tracer;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "alt:_/_", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, NULL), 4);

    /* One mapping: the thread's stack below, its alternate stack above. */
    mem = (unsigned char *)mmap(NULL, 2 * HALF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    if (mem == MAP_FAILED) return CHECK_DONE();
    for (round_unwind_to = 0; round_unwind_to < 2 && !alt_refused; round_unwind_to++) {
        pthread_attr_init(&attr);
        CHECK_RC(pthread_attr_setstack(&attr, mem, HALF), 0);
        CHECK_RC(pthread_create(&t, &attr, thread_body, mem + HALF), 0);
        pthread_join(t, NULL);
        pthread_attr_destroy(&attr);
    }
    if (alt_refused) return CHECK_SKIP("sigaltstack refused these flags (SS_AUTODISARM: Linux 4.7, qemu-user may lack it)");
    CHECK(unwound == 2, "bpt_unwind_to in the handler ended %d frames (k's and h's: 2)", unwound);

    CHECK(log_n == 2 * nwant, "%d messages, expected %d", log_n, 2 * nwant);
    for (i = 0; i < log_n; i++) {
        describe(&log_msgs[i], got, sizeof got);
        printf("  %s\n", got);
        if (i < 2 * nwant)
            CHECK(strcmp(got, want[i % nwant]) == 0, "message %d is '%s', expected '%s'", i, got, want[i % nwant]);
    }
    CHECK_RC(bpt_session_destroy(s), 0);
    munmap(mem, 2 * HALF);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("return trace around a handler on a sigaltstack above the thread's stack")
#endif

/* t_frames_altstack_escape: a signal handler on a sigaltstack placed
   above the thread's own stack siglongjmps out of a return-traced call,
   back to the thread's code (issue #17, items 1 and 4). The call's frame
   is dead: the handler is over. F0 (frames.c) says a call outside the
   sigaltstack ends every frame still there, but its first look compared
   stack pointers alone: the dead frame's lies above the thread's, so it
   looked like a live caller's, and no traced call on the thread's stack
   ended it (no exception_from; the full path and the short paths alike).
   Each round left one more: past BPT_SHADOW_FRAMES of them every return
   went untraced (frames_skipped). Claims, on a thread whose stack is the
   lower half of one mapping and whose alternate signal stack is the upper,
   600 rounds of: raise a signal whose handler calls k (call, return and
   exception trace), which siglongjmps out to the thread's loop; the loop
   then calls g (likewise traced), after a first call of g that makes the
   thread's record:
   - each round's messages are call k, exception_from k, call g,
     return_from g, in that order;
   - no frame is skipped.
   t_frames_autodisarm_escape runs this file with the alternate stack set
   up with SS_AUTODISARM: a siglongjmp out of the handler leaves it
   disarmed (no sigreturn re-arms it), and sigaltstack(2) then reports no
   stack at all: the range remembered is the one the frames were on. */
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
enum { HALF = 1 << 20, ROUNDS = 600 };   /* ROUNDS > BPT_SHADOW_FRAMES (512) */
static char seq[4 * ROUNDS + 64];
static int seq_n;
static void log_tracer(const bpt_msg *m, void *user) {
    char c = '?';
    int is_k = strcmp(m->name, "k") == 0, is_g = strcmp(m->name, "g") == 0;
    (void)user;
    if (m->type == BPT_MSG_CALL) c = is_k ? 'K' : is_g ? 'G' : '?';
    else if (m->type == BPT_MSG_EXCEPTION_FROM) c = is_k ? 'X' : 'x';
    else if (m->type == BPT_MSG_RETURN_FROM) c = is_g ? 'R' : 'r';
    if (seq_n < (int)sizeof seq - 1) seq[seq_n++] = c;
}

static sigjmp_buf out;
BPT_TRACEABLE int64_t g(int64_t x) { return x + 1; }
BPT_TRACEABLE int64_t k(int64_t x) { if (x) siglongjmp(out, 1); return 2; }
static int64_t (*volatile p_g)(int64_t) = g, (*volatile p_k)(int64_t) = k;

#if !defined(ALTSTACK_FLAGS)
#  define ALTSTACK_FLAGS 0
#endif
static int alt_refused;

static void handler(int sig) {
    (void)sig;
    p_k(1);
}

static void *thread_body(void *alt_base) {
    stack_t alt, was;
    volatile int i;
    memset(&alt, 0, sizeof alt);
    alt.ss_sp = alt_base;
    alt.ss_size = HALF;
    alt.ss_flags = ALTSTACK_FLAGS;
    if (sigaltstack(&alt, &was) != 0) {
        alt_refused = 1;
        return NULL;
    }
    p_g(-1);   /* the thread's record is made here, with its sigaltstack armed (frames.c, bpt__altstack_bounds) */
    for (i = 0; i < ROUNDS; i++) {
        if (sigsetjmp(out, 1) == 0) raise(SIGUSR1);
        p_g(i);
    }
    sigaltstack(&was, NULL);   /* ASAN unmaps the thread's alternate stack at its exit: let it be its own */
    return NULL;
}

int main(void) {
    bpt_session s;
    bpt_session_desc d;
    bpt_session_counts c;
    struct sigaction sa;
    pthread_attr_t attr;
    pthread_t t;
    unsigned char *mem;
    int i, bad = -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    if (!native_reg((void *)g, "alt", "g", 1) || !native_reg((void *)k, "alt", "k", 1))
        return CHECK_DONE();
    memset(&d, 0, sizeof d);
    d.tracer = log_tracer;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "alt:_/_", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, NULL), 2);

    /* One mapping: the thread's stack below, its alternate stack above. */
    mem = (unsigned char *)mmap(NULL, 2 * HALF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    if (mem == MAP_FAILED) return CHECK_DONE();
    pthread_attr_init(&attr);
    CHECK_RC(pthread_attr_setstack(&attr, mem, HALF), 0);
    CHECK_RC(pthread_create(&t, &attr, thread_body, mem + HALF), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    if (alt_refused) return CHECK_SKIP("sigaltstack refused these flags (SS_AUTODISARM: Linux 4.7, qemu-user may lack it)");

    printf("%d messages; the first rounds: %.26s\n", seq_n, seq);
    CHECK(seq_n == 2 + 4 * ROUNDS, "%d messages, expected %d", seq_n, 2 + 4 * ROUNDS);
    CHECK(seq_n >= 2 && seq[0] == 'G' && seq[1] == 'R', "first g(-1): '%.2s'", seq);
    for (i = 2; i < seq_n && bad < 0; i++)
        if (seq[i] != "KXGR"[(i - 2) % 4]) bad = i - 2;
    CHECK(bad < 0, "round %d: '%.8s', expected 'KXGR' each round", bad / 4, seq + 2 + (bad / 4) * 4);
    CHECK_RC(bpt_session_stats(s, &c), 0);
    CHECK(c.frames_skipped == 0, "%llu frames skipped", (unsigned long long)c.frames_skipped);
    CHECK_RC(bpt_session_destroy(s), 0);
    munmap(mem, 2 * HALF);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("return trace around a handler on a sigaltstack that siglongjmps out of it")
#endif

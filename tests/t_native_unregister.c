/* t_native_unregister: a native function unregistered while a thread stands
   between the patched jump and the stub's pin, where no thread-progress wait
   can see it (a signal handler parks it there, standing in for preemption).
   The thread then reads the function record through the pointer in the
   padding. Before the fix the record was freed by bpt_unregister and ASAN
   reported a heap-use-after-free; native records are now retired, never
   freed, and reused when the function registers again. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <semaphore.h>
#include <ucontext.h>

#if defined(BPT_NATIVE)
BPT_TRACEABLE unsigned long target(unsigned long x) { return x + 1; }
static unsigned long (*volatile target_p)(unsigned long) = target;
static sem_t caught, release;
static volatile sig_atomic_t armed = 1, stop;
static volatile uintptr_t parked_pc;

#if defined(__x86_64__)
#  define STUB ((uintptr_t)bpt__x86_64_stub)
#  define PC_OF(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#  define PAD 24
#  define CODE 10   /* the padding's code: fn-10 .. fn */
#else
#  define STUB ((uintptr_t)bpt__aarch64_stub)
#  define PC_OF(uc) ((uintptr_t)(uc)->uc_mcontext.pc)
#  define PAD 32
#  define CODE 16   /* fn-16 .. fn */
#endif

/* In the padding's call sequence, or in the stub before it pins: taken the
   jump, not pinned. The handler itself does not pin. */
static void park(int sig, siginfo_t *si, void *ucp) {
    uintptr_t pc = PC_OF((ucontext_t *)ucp), fn = (uintptr_t)target;
    (void)sig; (void)si;
    if (armed && ((pc >= fn - CODE && pc < fn) || (pc >= STUB && pc < STUB + 24))) {
        armed = 0;
        parked_pc = pc;
        sem_post(&caught);
        while (sem_wait(&release) != 0) {}
    }
}

static void *caller(void *arg) {
    unsigned long s = 0;   /* wraps: unsigned */
    (void)arg;
    while (!stop) s += target_p(s);
    return NULL;
}

int main(void) {
    bpt_func *f, *again;
    bpt_session s;
    pthread_t th;
    struct sigaction sa;
    long tries = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = park;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sem_init(&caught, 0, 0);
    sem_init(&release, 0, 0);
    CHECK_RC(bpt_register_native((void *)target, "window", "target", 1, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "window:target/1", BPT_COUNT, NULL), 1);
    pthread_create(&th, NULL, caller, NULL);
    /* Signal until the thread is caught inside the window (bounded). */
    while (sem_trywait(&caught) != 0 && tries < 2000000) {
        pthread_kill(th, SIGUSR1);
        tries++;
        if (tries % 64 == 0) sched_yield();
    }
    CHECK(!armed, "the thread was parked in the window (after %ld signals)", tries);
    printf("parked at pc %p (function %p, stub %p) after %ld signals\n", (void *)parked_pc, (void *)target,
           (void *)STUB, tries);
    /* While it stands there: switch off and unregister; then let it go on
       into the stub, which reads the record. */
    CHECK_RC(bpt_trace_pattern(s, "window:target/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_unregister(f), 0);
    if (!armed) sem_post(&release);
    {
        struct timespec pause = { 0, 50 * 1000000L };
        nanosleep(&pause, NULL);
    }
    stop = 1;
    pthread_join(th, NULL);
    CHECK_RC(bpt_register_native((void *)target, "window", "target", 1, &again), 0);
    CHECK(again == f, "registering again reuses the retired record (%p, %p)", (void *)again, (void *)f);
    CHECK(target_p(1) == 2, "still works");
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(again), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no native records to unregister")
#endif

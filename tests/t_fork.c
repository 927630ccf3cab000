/* t_fork: fork() while another thread changes trace patterns.
   Each child, which has only the forking thread, must be able to switch
   tracing off and on and count calls without deadlocking. Before the fix,
   20 of 20 children hung in their first set-path call: the permission held
   by the pattern-changing thread at the fork stayed held in the child. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <sys/wait.h>

static bpt_vm_word word = 0x1111;
static bpt_func *f;
static bpt_session s;
static volatile int stop;

static void *changer(void *arg) {
    (void)arg;
    while (!stop) {
        bpt_trace_pattern(s, "vm:f/0", BPT_COUNT, NULL);
        bpt_trace_pattern(s, "vm:f/0", BPT_OFF, NULL);
    }
    return NULL;
}

static void vm_call(void) {
    bpt_vm_word w = BPT_VM_FETCH(&word);
    if (w == 0x2222) w = bpt_vm_breakpoint(f, NULL, NULL);
    if (w != 0x1111) _exit(3);
}

/* In the child: off, on, three counted calls, off. Exit 0 when all held. */
static int child(void) {
    bpt_info info;
    int i;
    alarm(20);
    if (bpt_trace_pattern(s, "vm:f/0", BPT_OFF, NULL) != 1) return 4;
    if (bpt_trace_pattern(s, "vm:f/0", BPT_COUNT, NULL) != 1) return 5;
    for (i = 0; i < 3; i++) vm_call();
    if (bpt_trace_info(s, f, BPT_INFO_COUNT, &info) != 0 || info.count != 3) return 6;
    if (bpt_trace_pattern(s, "vm:f/0", BPT_OFF, NULL) != 1 || BPT_VM_FETCH(&word) != 0x1111) return 7;
    return 0;
}

int main(void) {
    pthread_t t;
    int i, ok = 0, n = 20;
    CHECK_RC(bpt_register_vm(&word, 0x2222, "vm", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    pthread_create(&t, NULL, changer, NULL);
    for (i = 0; i < n; i++) {
        int st = 0;
        pid_t p = fork();
        if (p == 0) _exit(child());
        CHECK(p > 0, "fork");
        if (p > 0) waitpid(p, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else CHECK(0, "child %d: %s %d", i, WIFSIGNALED(st) ? "killed by signal" : "exit",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("%d of %d children forked mid-pattern-change switched tracing off, on, counted 3 calls, and off\n", ok, n);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}

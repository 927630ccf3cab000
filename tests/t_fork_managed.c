/* t_fork_managed: fork() on a managed, online thread while another thread's
   set-path call waits for that thread's progress (found by review).
   api_progress.h promises that where a managed thread blocks inside
   bptrace, bptrace takes it offline meanwhile. fork's prepare handler
   (locks.c) blocked on the code modification permission while online:
   the changer held the permission and waited at step 4 for this thread,
   and this thread waited for the permission. Both hung for good (before
   the fix the watchdog below fired). Now the fork goes offline while it
   waits: the change completes, the fork returns, and the child runs. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static bpt_vm_word word = 0x1111;
static bpt_session s;
static bpt__atomic_u32 holding;   /* the changer holds the permission */
static int change_rc = 1;

static void observe(int step, int did, uint64_t ns, void *user) {
    (void)did; (void)ns; (void)user;
    if (step == 1) bpt__store_release_u32(&holding, 1);
}

static void *changer(void *arg) {
    (void)arg;
    change_rc = bpt_trace_pattern(s, "vm:f/0", BPT_COUNT, NULL);   /* waits for main's progress */
    return NULL;
}

static void watchdog(int sig) {
    static const char msg[] = "t_fork_managed: fork and the change hung (deadlock)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)sig; (void)w;
    _exit(1);
}

int main(void) {
    bpt_func *f;
    pthread_t t;
    pid_t p;
    int status = -1;
    CHECK_RC(bpt_register_vm(&word, 0x2222, "vm", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_thread_progress_register_managed(), 0);   /* online: changes wait for this thread */
    CHECK_RC(bpt_set_protocol_observer(observe, NULL), 0);
    signal(SIGALRM, watchdog);
    alarm(30);
    pthread_create(&t, NULL, changer, NULL);
    while (!bpt__load_acquire_u32(&holding)) sched_yield();   /* no progress: the change must wait for us */
    p = fork();   /* prepare handler: takes the permission, which the changer holds */
    if (p == 0) _exit(word == 0x1111 || word == 0x2222 ? 0 : 2);
    CHECK(p > 0, "fork");
    pthread_join(t, NULL);
    alarm(0);
    CHECK(change_rc == 1, "the change completed: %d (%s)", change_rc, bpt_last_error());
    if (p > 0) CHECK(waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ran");
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

/* t_frames_fork: call_time frames that live across a fork().
   In the child the forking thread has a new id, and so has its process
   (progress.c, bpt__progress_atfork_child: rec->process was the parent's
   thread id). The frames it pushed before the fork run on in the child,
   in that process. They kept the parent's id as their process, so in the
   child no call of the thread's process found them: a callee's push
   paused no caller, and outer, the call the fork ran inside, was charged
   its callee's time as its own, under the parent's thread id (found by
   review). Claims, with a VM function outer that forks while it runs
   (call_time, wall clock), and inner, called in the child, that spins
   80 ms:
   - in the child, inner is charged >= 80 ms, and outer's own time and
     inner's add up to no more than outer's whole call as the test timed it
     (outer spins 2 ms itself; before: outer about 82 ms, inner's time
     counted twice). Not a bound on outer alone: on a loaded machine the
     child may wait tens of ms for a CPU between the fork and inner's call,
     which is outer's own time (a bound of 40 ms failed that way);
   - outer's time is charged to the child's process (its thread id), not
     to the parent's (its call was counted at entry, in the parent's);
   - in the parent, outer returns as it would without the fork.
   Then the thread CPU clock (a session with time_cpu): the child's
   thread starts with a CPU clock of its own, near 0, while a frame that
   runs on across the fork started by the parent's. Its span in the child
   was the child's reading minus the parent's start: below zero, so 0.
   Claim: solo, entered after the parent burned 150 ms of CPU, forks, and
   the child spins 40 ms of CPU in it: the child charges solo >= 38 ms
   (before: 0); the parent charges its own 2 ms or so. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "timing_fixture.h"
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BP ((bpt_vm_word)0xC9C9)
static bpt_vm_word wouter = 0x77, winner = 0x77, wsolo = 0x77;
static bpt_func *fouter, *finner, *fsolo;
static bpt_session s, cpu;

static void inner(void) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&winner) == BP) bpt_vm_breakpoint(finner, NULL, &t);
    spin_for(80 * 1000000u);
    if (t) bpt_vm_return(t, 0);
}

/* The child's checks, after outer returned in it, total_ns after outer's
   call began in the parent: exit status 0 when all held. */
static int child_checks(uint64_t total_ns) {
    uint64_t inner_ns;
    bpt_info in;
    bpt_info_process procs[4];
    uint64_t me = (uint64_t)syscall(SYS_gettid);
    memset(&in, 0, sizeof in);
    if (bpt_trace_info(s, finner, BPT_INFO_TIME, &in) != 0) return 10;
    printf("child: inner %llu call(s), %.1f ms\n", (unsigned long long)in.calls, in.time_ns / 1e6);
    if (in.calls != 1 || in.time_ns < 80000000u) return 11;
    inner_ns = in.time_ns;
    memset(&in, 0, sizeof in);
    in.procs = procs;
    in.procs_cap = 4;
    if (bpt_trace_info(s, fouter, BPT_INFO_TIME, &in) != 0) return 12;
    printf("child: outer %llu call(s), %.1f ms, %u process(es), the most time in %llu (the child's thread: %llu)\n",
           (unsigned long long)in.calls, in.time_ns / 1e6, in.nprocs,
           (unsigned long long)(in.nprocs ? procs[0].process : 0), (unsigned long long)me);
    if (in.calls != 1) return 13;
    /* inner's 80 ms charged to outer too; the slack covers the two clocks'
       rates (bptrace's counter, calibrated; CLOCK_MONOTONIC here) */
    printf("child: outer's own %.1f ms + inner's %.1f ms, outer's whole call %.1f ms\n", in.time_ns / 1e6,
           inner_ns / 1e6, total_ns / 1e6);
    if (in.time_ns + inner_ns > total_ns + total_ns / 50 + 2000000u) return 14;
    /* its call was counted in the parent's process, at entry; its time,
       at its return, in the child's */
    if (in.nprocs < 1 || procs[0].process != me || (in.nprocs > 1 && procs[1].time_ns != 0)) return 15;
    return 0;
}

/* outer: spins 2 ms, forks; the child calls inner, then outer returns in
   both. Returns the child's pid in the parent, 0 in the child. */
static pid_t outer(void) {
    bpt_vm_token t = 0;
    pid_t pid;
    if (BPT_VM_FETCH(&wouter) == BP) bpt_vm_breakpoint(fouter, NULL, &t);
    spin_for(2 * 1000000u);
    pid = fork();
    if (pid == 0) inner();
    if (t) bpt_vm_return(t, 0);
    return pid;
}

/* solo: the child burns 40 ms of CPU in it. Returns the child's exit
   status in the child (its checks), the child's pid in the parent. */
static pid_t solo(int *child_status) {
    bpt_vm_token t = 0;
    pid_t pid;
    if (BPT_VM_FETCH(&wsolo) == BP) bpt_vm_breakpoint(fsolo, NULL, &t);
    burn_for(2 * 1000000u);
    pid = fork();
    if (pid == 0) burn_for(40 * 1000000u);
    if (t) bpt_vm_return(t, 0);
    if (pid == 0) {
        bpt_info in;
        memset(&in, 0, sizeof in);
        *child_status = 20;
        if (bpt_trace_info(cpu, fsolo, BPT_INFO_TIME, &in) == 0) {
            printf("child: solo %llu call(s), %.1f ms of CPU\n", (unsigned long long)in.calls, in.time_ns / 1e6);
            *child_status = in.calls == 1 && in.time_ns >= 38000000u ? 0 : 21;
        }
    }
    return pid;
}

int main(void) {
    bpt_session_desc d;
    bpt_info in;
    int status = -1;
    uint64_t t0;
    pid_t pid;
    CHECK_RC(bpt_register_vm(&wouter, BP, "t", "outer", 0, NULL, &fouter), 0);
    CHECK_RC(bpt_register_vm(&winner, BP, "t", "inner", 0, NULL, &finner), 0);
    memset(&d, 0, sizeof d);
    d.name = "time";
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "t:*/0", BPT_TIME, NULL), 2);
    fflush(stdout);
    t0 = now_ns();
    pid = outer();
    if (pid == 0) {
        int rc;
        uint64_t total = now_ns() - t0;
        alarm(20);
        rc = child_checks(total);
        fflush(stdout);
        _exit(rc);
    }
    CHECK(pid > 0, "fork");
    if (pid > 0) CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks held (status 0x%x)", status);
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, fouter, BPT_INFO_TIME, &in), 0);
    printf("parent: outer %llu call(s), %.1f ms\n", (unsigned long long)in.calls, in.time_ns / 1e6);
    CHECK(in.calls == 1 && in.time_ns >= 2000000u, "outer returned in the parent: %llu call(s), %.1f ms",
          (unsigned long long)in.calls, in.time_ns / 1e6);

    CHECK_RC(bpt_register_vm(&wsolo, BP, "t", "solo", 0, NULL, &fsolo), 0);
    d.name = "cpu";
    d.time_cpu = 1;
    CHECK_RC(bpt_session_create(&d, &cpu), 0);
    CHECK_RC(bpt_trace_pattern(cpu, "t:solo/0", BPT_TIME, NULL), 1);
    burn_for(150 * 1000000u);   /* the parent's CPU clock well past what the child will read */
    fflush(stdout);
    pid = solo(&status);
    if (pid == 0) {
        alarm(20);
        fflush(stdout);
        _exit(status);
    }
    CHECK(pid > 0, "fork");
    status = -1;
    if (pid > 0) CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's solo checks held (status 0x%x)", status);
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(cpu, fsolo, BPT_INFO_TIME, &in), 0);
    printf("parent: solo %llu call(s), %.1f ms of CPU\n", (unsigned long long)in.calls, in.time_ns / 1e6);
    CHECK(in.calls == 1 && in.time_ns >= 2000000u && in.time_ns < 30000000u,
          "solo in the parent: %llu call(s), %.1f ms", (unsigned long long)in.calls, in.time_ns / 1e6);
    CHECK_RC(bpt_session_destroy(cpu), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

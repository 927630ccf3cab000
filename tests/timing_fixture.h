/* timing_fixture.h: what the tests of call_time and of signals landing in
   hot paths share (t_timem.c, t_call_path.c, t_time_path.c, t_time_cpu.c,
   t_frames_fork.c, t_timem_switch_return.c). Include it
   after check.h.
     now_ns()                 CLOCK_MONOTONIC, ns: the clock bptrace's own
                              times are checked against;
     spin_for(ns)             busy for ns by that clock; returns how long
                              it really was;
     thread_cpu_ns()          CLOCK_THREAD_CPUTIME_ID, ns: this thread's CPU
                              time (a session's time_cpu clock);
     burn_for(ns)             busy until this thread has run ns more (a
                              loaded machine may preempt it meanwhile);
     alarms_every(h, us)      SIGALRM to handler h every us microseconds
                              from now (SA_RESTART), by setitimer(ITIMER_REAL);
                              us = 0 stops the timer (the handler stays). */
#ifndef BPT_TIMING_FIXTURE_H
#define BPT_TIMING_FIXTURE_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t spin_for(uint64_t ns) {
    uint64_t t0 = now_ns(), t;
    while ((t = now_ns()) - t0 < ns) {}
    return t - t0;
}

static inline uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void burn_for(uint64_t ns) {
    uint64_t end = thread_cpu_ns() + ns;
    while (thread_cpu_ns() < end) {}
}

static inline void alarms_every(void (*handler)(int), long us) {
    struct itimerval it;
    struct sigaction sa;
    if (us) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
    }
    memset(&it, 0, sizeof it);
    it.it_interval.tv_usec = it.it_value.tv_usec = us;
    setitimer(ITIMER_REAL, &it, NULL);
}

#endif

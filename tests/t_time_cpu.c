/* t_time_cpu: call_time by wall time or by the thread's CPU time, chosen
   per session (bpt_session_desc.time_cpu; issue #17, item 8). Two sessions
   time the same VM function at once, one of each kind, so that one call's
   frame serves both clocks. Claims:
   - a call that sleeps 50 ms is charged >= 50 ms of own time by the wall
     session and < 25 ms by the CPU session (BEAM charges no time while a
     process is scheduled out);
   - a call that spins for 30 ms of its thread's CPU time is charged
     >= 29 ms by both;
   - both count the same calls. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "timing_fixture.h"
#include <string.h>
#include <time.h>

#define BP ((bpt_vm_word)0xC9C9)
static bpt_vm_word word = 0x77;
static bpt_func *f;

/* One call of f: sleep or spin for ms inside it. */
static void call(int sleep, long ms) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&word) == BP) bpt_vm_breakpoint(f, NULL, &t);
    if (sleep) {
        struct timespec ts;
        ts.tv_sec = 0;
        ts.tv_nsec = ms * 1000000;
        while (nanosleep(&ts, &ts) != 0) {}
    } else {
        burn_for((uint64_t)ms * 1000000u);
    }
    if (t) bpt_vm_return(t, 0);
}

static void timed(bpt_session s, uint64_t *calls, uint64_t *ns) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &in), 0);
    *calls = in.calls;
    *ns = in.time_ns;
}

int main(void) {
    bpt_session wall, cpu;
    bpt_session_desc d;
    uint64_t wc, wn, cc, cn, wn0, cn0;
    CHECK_RC(bpt_register_vm(&word, BP, "t", "f", 0, NULL, &f), 0);
    memset(&d, 0, sizeof d);
    d.name = "wall";
    CHECK_RC(bpt_session_create(&d, &wall), 0);
    d.name = "cpu";
    d.time_cpu = 1;
    CHECK_RC(bpt_session_create(&d, &cpu), 0);
    CHECK_RC(bpt_trace_pattern(wall, "t:f/0", BPT_TIME, NULL), 1);
    CHECK_RC(bpt_trace_pattern(cpu, "t:f/0", BPT_TIME, NULL), 1);

    call(1, 50);
    timed(wall, &wc, &wn0);
    timed(cpu, &cc, &cn0);
    printf("a call that sleeps 50 ms: wall session %.1f ms, CPU session %.3f ms\n", wn0 / 1e6, cn0 / 1e6);
    CHECK(wc == 1 && cc == 1, "1 call each: %llu, %llu", (unsigned long long)wc, (unsigned long long)cc);
    CHECK(wn0 >= 50000000u, "the wall session charges the sleep: %.1f ms", wn0 / 1e6);
    CHECK(cn0 < 25000000u, "the CPU session does not: %.1f ms", cn0 / 1e6);

    call(0, 30);
    timed(wall, &wc, &wn);
    timed(cpu, &cc, &cn);
    printf("then a call that spins 30 ms of CPU: wall +%.1f ms, CPU +%.1f ms\n", (wn - wn0) / 1e6, (cn - cn0) / 1e6);
    CHECK(wc == 2 && cc == 2, "2 calls each: %llu, %llu", (unsigned long long)wc, (unsigned long long)cc);
    CHECK(wn - wn0 >= 29000000u && cn - cn0 >= 29000000u, "both charge the spin: %.1f and %.1f ms",
          (wn - wn0) / 1e6, (cn - cn0) / 1e6);
    CHECK_RC(bpt_session_destroy(wall), 0);
    CHECK_RC(bpt_session_destroy(cpu), 0);
    return CHECK_DONE();
}

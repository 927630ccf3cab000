/* t_timem_many_sessions: a process switch and bpt_account_memory with more
   sessions timing one stack than a frame holds sessions (BPT_FRAME_SESSIONS)
   times four. Both walk the stack from the top and act on each session's
   topmost frame of the process (frames.c, bpt__timem_current_each). The
   walk kept the sessions it had seen in an array of 16 ids and stopped
   when it was full, so the 17th session and those below it were neither
   paused by a switch out nor charged bytes (found by review).
   NSESS sessions, session i timing (call_time and call_memory) VM
   function f<i> alone; f0 calls f1 ... calls f<NSESS-1>, which switches
   to process 777, spins 60 ms, switches back, accounts 1000 bytes and
   returns. Claims, for every session i:
   - f<i> is charged less than 30 ms (the 60 ms belong to process 777,
     which runs nothing timed: charged to nobody);
   - f<i> is charged exactly 1000 bytes (the bytes of the call it
     encloses, as BEAM's call_memory charges a caller its callees' bytes
     when the callees are not traced by that session). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "timing_fixture.h"
#include <stdio.h>
#include <string.h>

enum { NSESS = 20 };
#define BP ((bpt_vm_word)0xC9C9)
static bpt_vm_word words[NSESS];
static bpt_func *funcs[NSESS];

static void nest(int i) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&words[i]) == BP) bpt_vm_breakpoint(funcs[i], NULL, &t);
    if (i + 1 < NSESS) {
        nest(i + 1);
    } else {
        bpt_process_switch(777);
        spin_for(60 * 1000000u);
        bpt_process_switch(0);
        bpt_account_memory(1000);
    }
    if (t) bpt_vm_return(t, 0);
}

int main(void) {
    bpt_session s[NSESS];
    char name[32], pat[32];
    int i;
    for (i = 0; i < NSESS; i++) {
        bpt_session_desc d;
        words[i] = 0x77;
        snprintf(name, sizeof name, "f%d", i);
        CHECK_RC(bpt_register_vm(&words[i], BP, "m", name, 0, NULL, &funcs[i]), 0);
        memset(&d, 0, sizeof d);
        snprintf(name, sizeof name, "timer%d", i);
        d.name = name;
        CHECK_RC(bpt_session_create(&d, &s[i]), 0);
        snprintf(pat, sizeof pat, "m:f%d/0", i);
        CHECK_RC(bpt_trace_pattern(s[i], pat, BPT_TIME | BPT_MEMORY, NULL), 1);
    }
    nest(0);
    for (i = 0; i < NSESS; i++) {
        bpt_info in;
        memset(&in, 0, sizeof in);
        CHECK_RC(bpt_trace_info(s[i], funcs[i], BPT_INFO_TIME | BPT_INFO_MEMORY, &in), 0);
        printf("f%-2d %llu call(s), %.1f ms, %lld bytes\n", i, (unsigned long long)in.calls, in.time_ns / 1e6,
               (long long)in.memory_bytes);
        CHECK(in.calls == 1, "f%d: %llu calls", i, (unsigned long long)in.calls);
        CHECK(in.time_ns < 30000000u, "f%d is charged the 60 ms process 777 ran: %.1f ms", i, in.time_ns / 1e6);
        CHECK(in.memory_bytes == 1000, "f%d: %lld bytes, not 1000", i, (long long)in.memory_bytes);
    }
    for (i = 0; i < NSESS; i++) CHECK_RC(bpt_session_destroy(s[i]), 0);
    return CHECK_DONE();
}

/* t_timem_switch_return: a timed call that returns in another process
   than the one it was entered in (bpt_process_switch inside it: a
   scheduler's pick-next function). Its return resumed its caller, the
   frame below of the process it was entered in, while the thread ran the
   other process: that caller was charged the time of the process switched
   in, which bpt_process_switch says is charged to nobody, and of the
   other process's own timed calls on top (found by review). Claims, with
   VM functions timed by call_time (wall clock): loop calls pick, which
   switches to process 777 and returns; loop then calls task (process
   777's), which spins 60 ms, and loop spins 30 ms itself, both while 777
   runs; then loop switches back and returns:
   - task is charged >= 60 ms, in process 777;
   - loop is charged less than 20 ms (before: about 90 ms: task's time
     and the 30 ms 777 ran in loop's code, charged to loop's process);
   - a call that switches and switches back before its return charges
     its caller as before (control: loop2 >= 30 ms).
   The same with native functions (where the compiler has native sites),
   whose frames go the time path and the timed return (frames.c, TR5). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "timing_fixture.h"
#include "native_fixture.h"
#include <string.h>
#include <time.h>

#define BP ((bpt_vm_word)0xC9C9)
static bpt_vm_word wloop = 0x77, wpick = 0x77, wtask = 0x77, wloop2 = 0x77;
static bpt_func *floop, *fpick, *ftask, *floop2;

static bpt_vm_token enter(bpt_vm_word *w, bpt_func *f) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(w) == BP) bpt_vm_breakpoint(f, NULL, &t);
    return t;
}

static void leave(bpt_vm_token t) {
    if (t) bpt_vm_return(t, 0);
}

/* The scheduler's pick: the thread runs process 777 from here on. */
static void pick(void) {
    bpt_vm_token t = enter(&wpick, fpick);
    bpt_process_switch(777);
    leave(t);
}

static void task(void) {
    bpt_vm_token t = enter(&wtask, ftask);
    spin_for(60 * 1000000u);
    leave(t);
}

static void loop(void) {
    bpt_vm_token t = enter(&wloop, floop);
    pick();
    task();
    spin_for(30 * 1000000u);   /* 777 runs, in loop's code */
    bpt_process_switch(0);
    leave(t);
}

/* Control: the switch and the switch back inside pick2's call. */
static void loop2(void) {
    bpt_vm_token t = enter(&wloop2, floop2);
    bpt_vm_token p = enter(&wpick, fpick);
    bpt_process_switch(777);
    bpt_process_switch(0);
    leave(p);
    spin_for(30 * 1000000u);
    leave(t);
}

#if defined(BPT_NATIVE)
BPT_TRACEABLE long npick(long x) {
    bpt_process_switch(777);
    return x + 1;
}
BPT_TRACEABLE long ntask(long ms) {
    spin_for((uint64_t)ms * 1000000u);
    return ms;
}
BPT_TRACEABLE long nloop(long ms) {
    long (*volatile p)(long) = npick, (*volatile t)(long) = ntask;
    long r = p(1) + t(ms * 2);
    spin_for((uint64_t)ms * 1000000u);
    bpt_process_switch(0);
    return r;
}
#endif

static void timed(bpt_session s, bpt_func *f, const char *name, uint64_t *ns, uint64_t *process) {
    bpt_info in;
    bpt_info_process procs[4];
    memset(&in, 0, sizeof in);
    in.procs = procs;
    in.procs_cap = 4;
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &in), 0);
    *ns = in.time_ns;
    *process = in.nprocs ? procs[0].process : 0;
    printf("%-6s %llu call(s), %.1f ms, the most in process %llu\n", name, (unsigned long long)in.calls,
           in.time_ns / 1e6, (unsigned long long)*process);
}

int main(void) {
    bpt_session s;
    bpt_session_desc d;
    uint64_t ns, process;
    CHECK_RC(bpt_register_vm(&wloop, BP, "t", "loop", 0, NULL, &floop), 0);
    CHECK_RC(bpt_register_vm(&wpick, BP, "t", "pick", 0, NULL, &fpick), 0);
    CHECK_RC(bpt_register_vm(&wtask, BP, "t", "task", 0, NULL, &ftask), 0);
    CHECK_RC(bpt_register_vm(&wloop2, BP, "t", "loop2", 0, NULL, &floop2), 0);
    memset(&d, 0, sizeof d);
    d.name = "time";
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "t:*/0", BPT_TIME, NULL), 4);
    loop();
    loop2();
    timed(s, ftask, "task", &ns, &process);
    CHECK(ns >= 60000000u && process == 777, "task: %.1f ms in process %llu", ns / 1e6, (unsigned long long)process);
    timed(s, floop, "loop", &ns, &process);
    CHECK(ns < 20000000u, "loop is not charged what process 777 ran: %.1f ms", ns / 1e6);
    timed(s, floop2, "loop2", &ns, &process);
    CHECK(ns >= 30000000u, "loop2 is charged its own spin: %.1f ms", ns / 1e6);
#if defined(BPT_NATIVE)
    {
        bpt_func *fnloop = native_reg((void *)nloop, "n", "nloop", 1), *fntask = native_reg((void *)ntask, "n", "ntask", 1);
        long (*volatile l)(long) = nloop;
        CHECK(native_reg((void *)npick, "n", "npick", 1) != NULL, "npick registered");
        CHECK_RC(bpt_trace_pattern(s, "n:*/1", BPT_TIME, NULL), 3);
        CHECK(l(30) == 62, "nloop's result");
        if (fnloop && fntask) {
            timed(s, fntask, "ntask", &ns, &process);
            CHECK(ns >= 60000000u && process == 777, "ntask: %.1f ms in process %llu", ns / 1e6,
                  (unsigned long long)process);
            timed(s, fnloop, "nloop", &ns, &process);
            CHECK(ns < 20000000u, "nloop is not charged what process 777 ran: %.1f ms", ns / 1e6);
        }
        CHECK_RC(bpt_trace_pattern(s, "n:*/1", BPT_OFF, NULL), 3);
    }
#endif
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

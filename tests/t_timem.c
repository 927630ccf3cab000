/* t_timem: call_time and call_memory (DESIGN §8), read with bpt_trace_info
   without blocking anyone. BPT_TEST_CONCURRENCY (runs under TSAN too).
   - accuracy: a function that spins a measured 1 ms is charged its own
     measured time within 5 % per call; time in a traced callee is not
     charged to the caller (native functions, and VM sites);
   - two processes switched on one thread are each charged only their own time;
   - call_memory equals exactly the bytes reported;
   - 4 threads call while another calls bpt_trace_info 1,000 times: counts
     never go down, never exceed the calls made, and end exact; a thread
     held inside a long traced call does not delay bpt_trace_info;
   - pause, restart, off; a call in flight at a pause is charged at its
     return (as BEAM); switched on again (paused): from zero; a restart
     of a kind that is off leaves it off and zeroes nothing; a tprof-style
     table.
   Threads past BPT_MAX_THREADS, with tables of their own, are t_timem_threads. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include "timing_fixture.h"
#include <pthread.h>
#include <string.h>
#include <time.h>

/* The time charged to f in session s for process (0: all processes). */
static void info_of(bpt_session s, const bpt_func *f, uint64_t process, uint64_t *calls, uint64_t *ns, int64_t *mem) {
    bpt_info_process procs[16];
    bpt_info info;
    uint32_t i;
    memset(&info, 0, sizeof info);
    info.procs = procs;
    info.procs_cap = 16;
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME | BPT_INFO_MEMORY | BPT_INFO_FLAGS, &info), 0);
    *calls = info.calls; *ns = info.time_ns; *mem = (int64_t)info.memory_bytes;
    if (process)
        for (i = 0, *calls = 0, *ns = 0, *mem = 0; i < info.nprocs && i < 16; i++)
            if (procs[i].process == process) {
                *calls = procs[i].calls; *ns = procs[i].time_ns; *mem = (int64_t)procs[i].memory_bytes;
            }
}

static int within(uint64_t got, uint64_t want, double frac) {
    double d = (double)got - (double)want;
    return d <= frac * (double)want && -d <= frac * (double)want;
}

/* Accuracy is checked against the clock, on a shared machine (and under
   qemu, which translates code the first time it runs it): a round whose
   thread was preempted between the entry and the spin shows more time than
   the spin measured. So each accuracy check runs up to 5 rounds, tables
   restarted between them, and one round within 5 % passes it; every round
   is printed. */
enum { ROUNDS = 5 };

/* >>vm: a pretend interpreter's calls, driven by hand. */
static bpt_vm_word vm_words[3] = { 0x100, 0x101, 0x102 };
static bpt_func *vm_f[3];
static bpt_vm_token vm_enter(int i) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&vm_words[i]) == 0xBBBB) bpt_vm_breakpoint(vm_f[i], NULL, &t);
    return t;
}

static void test_vm(void) {
    static const char *const names[3] = { "outer", "inner", "mem" };
    bpt_session s;
    uint64_t calls, ns, m_outer = 0, m_inner = 0;
    int64_t mem;
    int i, k;
    for (i = 0; i < 3; i++) CHECK_RC(bpt_register_vm(&vm_words[i], 0xBBBB, "vm", names[i], 0, NULL, &vm_f[i]), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_TIME | BPT_MEMORY, NULL), 3);
    {
        int round, ok = 0;
        uint64_t ns_i = 0, ns_t = 0, m_throw = 0, c_o = 0, c_i = 0, c_t = 0;
        int64_t mem_o = 0, mem_i = 0;
        for (round = 0; round < ROUNDS && !ok; round++) {
            CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_TIME | BPT_MEMORY | BPT_RESTART, NULL), 3);
            m_outer = m_inner = 0;
            for (k = 0; k < 5; k++) {
                bpt_vm_token to = vm_enter(0), ti;
                m_outer += spin_for(1000000);
                ti = vm_enter(1);
                m_inner += spin_for(2000000);
                bpt_account_memory(50);
                bpt_vm_return(ti, 0);
                m_outer += spin_for(500000);
                bpt_account_memory(100);
                bpt_vm_return(to, 0);
            }
            {   /* a throw ends a timed call too: charged up to the unwind */
                bpt_vm_token t = vm_enter(2);
                m_throw = spin_for(1000000);
                bpt_vm_unwind(t, 7);
            }
            info_of(s, vm_f[0], 0, &c_o, &ns, &mem_o);
            info_of(s, vm_f[1], 0, &c_i, &ns_i, &mem_i);
            info_of(s, vm_f[2], 0, &c_t, &ns_t, &mem);
            printf("vm round %d: outer charged %.3f ms, measured %.3f; inner %.3f vs %.3f; unwound %.3f vs %.3f\n",
                   round, ns / 1e6, m_outer / 1e6, ns_i / 1e6, m_inner / 1e6, ns_t / 1e6, m_throw / 1e6);
            ok = within(ns, m_outer, 0.05) && within(ns_i, m_inner, 0.05) && within(ns_t, m_throw, 0.05);
        }
        CHECK(ok, "vm: no round within 5 %%");
        CHECK(c_o == 5 && c_i == 5 && c_t == 1, "vm calls %llu %llu %llu", (unsigned long long)c_o,
              (unsigned long long)c_i, (unsigned long long)c_t);
        CHECK(mem_o == 500 && mem_i == 250, "vm memory %lld %lld", (long long)mem_o, (long long)mem_i);
    }
    /* RESTART zeroes; PAUSE keeps the values and stops counting. */
    CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_TIME | BPT_RESTART, NULL), 1);
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 0 && ns == 0, "after restart: %llu calls, %llu ns", (unsigned long long)calls, (unsigned long long)ns);
    bpt_vm_return(vm_enter(0), 0);
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 1, "restarted: %llu calls, expected 1", (unsigned long long)calls);
    CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_TIME | BPT_MEMORY | BPT_PAUSE, NULL), 1);
    bpt_vm_return(vm_enter(0), 0);
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 1, "paused: %llu calls, expected 1", (unsigned long long)calls);
    /* Switched on again while paused: from zero, then counting, as a
       restart (erlang:trace_pattern's `true`; set_function_break in
       beam_bp.c resets the table for any operation but a pause). */
    CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_TIME, NULL), 1);
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 0 && ns == 0, "switched on again: %llu calls, %llu ns, not 0", (unsigned long long)calls,
          (unsigned long long)ns);
    bpt_vm_return(vm_enter(0), 0);
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 1, "switched on again: %llu calls, expected 1", (unsigned long long)calls);
    /* A restart leaves a kind that is off alone: call_memory off, then
       restarted, is still off, and call_time's table is not zeroed. */
    CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_MEMORY | BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_MEMORY | BPT_RESTART, NULL), 1);
    {
        bpt_info in;
        memset(&in, 0, sizeof in);
        CHECK_RC(bpt_trace_info(s, vm_f[0], BPT_INFO_FLAGS, &in), 0);
        CHECK(in.flags == BPT_TIME, "restart of call_memory while off: flags %#x, expected BPT_TIME alone", in.flags);
    }
    info_of(s, vm_f[0], 0, &calls, &ns, &mem);
    CHECK(calls == 1, "restart of call_memory while off zeroed call_time: %llu calls, expected 1",
          (unsigned long long)calls);
    /* A call in flight when call_time is paused is charged at its return,
       as erts_trace_time_return (beam_bp.c) charges a paused function; the
       calls after the pause are not counted. */
    {
        bpt_vm_token t = vm_enter(0);
        uint64_t spun;
        CHECK_RC(bpt_trace_pattern(s, "vm:outer/_", BPT_TIME | BPT_PAUSE, NULL), 1);
        spun = spin_for(2000000);
        bpt_vm_return(t, 0);
        bpt_vm_return(vm_enter(0), 0);
        info_of(s, vm_f[0], 0, &calls, &ns, &mem);
        CHECK(calls == 2 && ns >= spun, "paused in flight: %llu calls, %llu ns for %llu spun; expected 2 calls",
              (unsigned long long)calls, (unsigned long long)ns, (unsigned long long)spun);
    }
    /* And a restart of a function with neither kind on makes nothing. */
    CHECK_RC(bpt_trace_pattern(s, "vm:inner/_", BPT_TIME | BPT_MEMORY | BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "vm:inner/_", BPT_TIME | BPT_MEMORY | BPT_RESTART, NULL), 1);
    {
        bpt_info in;
        memset(&in, 0, sizeof in);
        CHECK_RC(bpt_trace_info(s, vm_f[1], BPT_INFO_FLAGS, &in), 0);
        CHECK(in.flags == 0, "restart of an untimed function: flags %#x, expected 0", in.flags);
    }
    CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_OFF, NULL), 3);
    CHECK_RC(bpt_session_destroy(s), 0);
    for (i = 0; i < 3; i++) CHECK_RC(bpt_unregister(vm_f[i]), 0);
}

#if defined(BPT_NATIVE)
/* >>native */
static uint64_t measured_1ms, measured_outer, measured_inner, measured_a, measured_b;
BPT_TRACEABLE uint64_t one_ms(uint64_t x) { measured_1ms += spin_for(1000000); return x; }
BPT_TRACEABLE uint64_t inner(uint64_t x) { measured_inner += spin_for(2000000); bpt_account_memory(50); return x + 1; }
static uint64_t (*volatile p_inner)(uint64_t) = inner;
BPT_TRACEABLE uint64_t outer(uint64_t x) {
    uint64_t r;
    measured_outer += spin_for(1000000);
    bpt_account_memory(100);
    r = p_inner(x);
    bpt_account_memory(200);
    measured_outer += spin_for(500000);
    return r + 1;
}
BPT_TRACEABLE uint64_t proc_b(uint64_t x) { measured_b += spin_for(2000000); return x; }
static uint64_t (*volatile p_proc_b)(uint64_t) = proc_b;
BPT_TRACEABLE uint64_t proc_a(uint64_t x) {
    measured_a += spin_for(1000000);
    bpt_process_switch(202);          /* another process runs on this thread ... */
    p_proc_b(x);
    spin_for(1000000);                /* ... and this is its time too, not proc_a's */
    bpt_process_switch(101);
    measured_a += spin_for(1000000);
    return x;
}
static uint64_t (*volatile p_one_ms)(uint64_t) = one_ms, (*volatile p_outer)(uint64_t) = outer,
                (*volatile p_proc_a)(uint64_t) = proc_a;

/* Concurrent reads. */
enum { NWORKERS = 4 };
BPT_TRACEABLE uint64_t work(uint64_t x) { return x * 3 + 1; }
static uint64_t (*volatile p_work)(uint64_t) = work;
static uint64_t made[NWORKERS];   /* __atomic: calls completed by each worker */
static int hold_in, hold_release;
static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    uint64_t k, n = (uint64_t)check_scale(200000);
    for (k = 0; k < n; k++) {
        if (p_work(k) != k * 3 + 1) abort();
        __atomic_store_n(&made[w], k + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}
BPT_TRACEABLE uint64_t hold(uint64_t x) {
    __atomic_store_n(&hold_in, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&hold_release, __ATOMIC_ACQUIRE)) {}
    return x;
}
static uint64_t (*volatile p_hold)(uint64_t) = hold;
static void *holder(void *arg) { (void)arg; p_hold(1); return NULL; }

static bpt_func *reg(void *fn, const char *name) { return native_reg(fn, "tm", name, 1); }

static void print_row(const bpt_func *f, const char *module, const char *name, int arity,
                      const bpt_info *info, void *user) {
    bpt_profile_row *rows = (bpt_profile_row *)user;
    int i;
    (void)f;
    for (i = 0; rows[i].name; i++) {}
    rows[i].module = module; rows[i].name = name; rows[i].arity = arity;
    rows[i].calls = info->calls; rows[i].value = info->time_ns;
}

static void test_native(void) {
    bpt_func *f1 = reg((void *)one_ms, "one_ms"), *fo = reg((void *)outer, "outer"), *fi = reg((void *)inner, "inner");
    bpt_func *fa = reg((void *)proc_a, "proc_a"), *fb = reg((void *)proc_b, "proc_b");
    bpt_func *fw = reg((void *)work, "work"), *fh = reg((void *)hold, "hold");
    bpt_session s;
    uint64_t calls, ns;
    int64_t mem;
    int i;
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tm:_/_", BPT_TIME | BPT_MEMORY, NULL), 7);

    {
        int round, ok = 0;
        uint64_t c1 = 0, co = 0, ci = 0, ca = 0, cb = 0, cb101 = 1, n1 = 0, no = 0, ni = 0, na = 0, nb = 0;
        int64_t mo = 0, mi = 0;
        for (round = 0; round < ROUNDS && !ok; round++) {
            CHECK_RC(bpt_trace_pattern(s, "tm:_/_", BPT_TIME | BPT_MEMORY | BPT_RESTART, NULL), 7);
            measured_1ms = measured_outer = measured_inner = measured_a = measured_b = 0;
            /* Accuracy: 20 calls of a measured 1 ms. */
            for (i = 0; i < 20; i++) p_one_ms((uint64_t)i);
            /* Own time: inner's 2 ms are not outer's. Memory: exactly what was reported. */
            for (i = 0; i < 5; i++) p_outer((uint64_t)i);
            /* Two processes on one thread. */
            bpt_process_switch(101);
            for (i = 0; i < 3; i++) p_proc_a((uint64_t)i);
            bpt_process_switch(0);
            info_of(s, f1, 0, &c1, &n1, &mem);
            info_of(s, fo, 0, &co, &no, &mo);
            info_of(s, fi, 0, &ci, &ni, &mi);
            info_of(s, fa, 101, &ca, &na, &mem);
            info_of(s, fb, 202, &cb, &nb, &mem);
            info_of(s, fb, 101, &cb101, &ns, &mem);
            printf("round %d: one_ms charged %.4f ms per call, measured %.4f (%+.2f %%); outer %.3f vs %.3f; "
                   "inner %.3f vs %.3f; process 101 proc_a %.3f vs %.3f; process 202 proc_b %.3f vs %.3f\n",
                   round, n1 / 20e6, measured_1ms / 20e6,
                   100.0 * ((double)n1 - (double)measured_1ms) / (double)measured_1ms, no / 1e6,
                   measured_outer / 1e6, ni / 1e6, measured_inner / 1e6, na / 1e6, measured_a / 1e6,
                   nb / 1e6, measured_b / 1e6);
            ok = within(n1, measured_1ms, 0.05) && within(no, measured_outer, 0.05) &&
                 within(ni, measured_inner, 0.05) && within(na, measured_a, 0.05) && within(nb, measured_b, 0.05);
        }
        CHECK(ok, "native: no round within 5 %%");
        CHECK(c1 == 20 && co == 5 && ci == 5 && ca == 3 && cb == 3 && cb101 == 0, "calls %llu %llu %llu %llu %llu %llu",
              (unsigned long long)c1, (unsigned long long)co, (unsigned long long)ci, (unsigned long long)ca,
              (unsigned long long)cb, (unsigned long long)cb101);
        CHECK(mo == 1500 && mi == 250, "memory: outer %lld, inner %lld", (long long)mo, (long long)mi);
    }

    /* Concurrent reads, and a thread held inside a traced call. */
    {
        pthread_t t[NWORKERS], th;
        uint64_t last = 0, total = 0, max_info_ns = 0, reads = 0, bad = 0;
        int w, done;
        CHECK(pthread_create(&th, NULL, holder, NULL) == 0, "holder");
        while (!__atomic_load_n(&hold_in, __ATOMIC_ACQUIRE)) {}
        for (w = 0; w < NWORKERS; w++) CHECK(pthread_create(&t[w], NULL, worker, (void *)(intptr_t)w) == 0, "worker");
        do {
            uint64_t before = 0, after = 0, t0 = now_ns(), dt;
            for (w = 0; w < NWORKERS; w++) before += __atomic_load_n(&made[w], __ATOMIC_ACQUIRE);
            info_of(s, fw, 0, &calls, &ns, &mem);
            dt = now_ns() - t0;
            for (w = 0; w < NWORKERS; w++) after += __atomic_load_n(&made[w], __ATOMIC_ACQUIRE);
            if (dt > max_info_ns) max_info_ns = dt;
            /* Never down, never counted twice: at least what had completed before the
               call (a call is counted on entry), at most what had started by its end. */
            if (calls < last || calls < before || calls > after + NWORKERS) {
                if (bad++ < 5) fprintf(stderr, "read %llu: %llu calls, before %llu, after %llu, last %llu\n",
                                       (unsigned long long)reads, (unsigned long long)calls,
                                       (unsigned long long)before, (unsigned long long)after,
                                       (unsigned long long)last);
            }
            last = calls;
            reads++;
            for (w = 0, done = 1; w < NWORKERS; w++)
                done &= __atomic_load_n(&made[w], __ATOMIC_ACQUIRE) == (uint64_t)check_scale(200000);
        } while (!done || reads < 1000);
        __atomic_store_n(&hold_release, 1, __ATOMIC_RELEASE);
        for (w = 0; w < NWORKERS; w++) pthread_join(t[w], NULL);
        pthread_join(th, NULL);
        for (w = 0; w < NWORKERS; w++) total += made[w];
        info_of(s, fw, 0, &calls, &ns, &mem);
        {
            bpt_info_process procs[8];
            bpt_info info;
            uint64_t sum = 0;
            uint32_t k;
            memset(&info, 0, sizeof info);
            info.procs = procs;
            info.procs_cap = 8;
            CHECK_RC(bpt_trace_info(s, fw, BPT_INFO_TIME, &info), 0);
            bpt_profile_row rows[8];
            char text[2048];
            for (k = 0; k < info.nprocs && k < 8; k++) sum += procs[k].calls;
            CHECK(info.nprocs == NWORKERS && sum == total, "%u processes, sum of calls %llu, made %llu",
                  info.nprocs, (unsigned long long)sum, (unsigned long long)total);
            /* Per process, as tprof prints it. */
            memset(rows, 0, sizeof rows);
            for (k = 0; k < info.nprocs && k < 8; k++) {
                rows[k].module = "tm"; rows[k].name = "work"; rows[k].arity = 1;
                rows[k].process = procs[k].process; rows[k].calls = procs[k].calls; rows[k].value = procs[k].time_ns;
            }
            CHECK(bpt_format_profile(rows, (int)k, 0, text, sizeof text) > 0 && strstr(text, "PROCESS") &&
                  strstr(text, "  tm:work/1"), "per-process table:\n%s", text);
            printf("%s", text);
        }
        printf("concurrent: %llu trace_info reads while %d threads made %llu calls (one thread held inside "
               "hold() meanwhile); slowest read %.3f ms; final count %llu\n", (unsigned long long)reads, NWORKERS,
               (unsigned long long)total, max_info_ns / 1e6, (unsigned long long)calls);
        CHECK(bad == 0, "%llu reads went down, or counted calls not yet made", (unsigned long long)bad);
        CHECK(reads >= 1000 && calls == total, "%llu reads; final %llu calls, made %llu", (unsigned long long)reads,
              (unsigned long long)calls, (unsigned long long)total);
        info_of(s, fh, 0, &calls, &ns, &mem);
        CHECK(calls == 1, "hold: %llu calls", (unsigned long long)calls);
    }

    /* A tprof-style table over the pattern: one collection for all. */
    {
        bpt_profile_row rows[16];
        char text[4096];
        memset(rows, 0, sizeof rows);
        CHECK_RC(bpt_trace_info_each(s, "tm:_/_", BPT_INFO_TIME, print_row, rows), 7);
        CHECK(bpt_format_profile(rows, 7, 0, text, sizeof text) > 0, "format");
        printf("%s", text);
        CHECK(strstr(text, "FUNCTION") && strstr(text, "tm:inner/1") && strstr(text, "[100.0]"), "table");
        CHECK_RC(bpt_format_profile(NULL, 1, 0, text, sizeof text), BPT_EINVAL);
    }
    CHECK_RC(bpt_session_destroy(s), 0);
}
#endif

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    test_vm();
#if defined(BPT_NATIVE)
    test_native();
#else
    printf("no native sites with this compiler: VM call_time only\n");
#endif
    return CHECK_DONE();
}

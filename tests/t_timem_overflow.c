/* t_timem_overflow: call_time with more threads than table slots.
   BPT_MAX_THREADS is 4 here and 8 threads call: the first 4 get their own
   tables, the others share the overflow table under its mutex (BEAM's dirty
   schedulers). Counts and per-process rows must be exact, for VM sites
   (every compiler) and native functions. BPT_TEST_CONCURRENCY. */
#define BPT_MAX_THREADS 4
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { NTHREADS = 8 };
static bpt_vm_word word = 0x100;
static bpt_func *vf;
static long per_thread;

#if defined(BPT_NATIVE)
BPT_TRACEABLE long nat(long x) { return x + 1; }
static long (*volatile p_nat)(long) = nat;
#endif

static void *caller(void *arg) {
    long k;
    (void)arg;
    for (k = 0; k < per_thread; k++) {
        bpt_vm_token t = 0;
        if (BPT_VM_FETCH(&word) == 0xBBBB) bpt_vm_breakpoint(vf, NULL, &t);
        bpt_vm_return(t, 0);
#if defined(BPT_NATIVE)
        if (p_nat(k) != k + 1) abort();
#endif
    }
    return NULL;
}

static void check_exact(bpt_session s, const bpt_func *f, const char *what) {
    bpt_info_process procs[NTHREADS + 2];
    bpt_info info;
    uint64_t sum = 0;
    uint32_t i;
    int exact = 1;
    memset(&info, 0, sizeof info);
    info.procs = procs;
    info.procs_cap = NTHREADS + 2;
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &info), 0);
    for (i = 0; i < info.nprocs && i < NTHREADS + 2; i++) {
        sum += procs[i].calls;
        exact &= procs[i].calls == (uint64_t)per_thread;
    }
    printf("%s: %u processes, %llu calls in all (expected %d x %ld), each exact: %s\n", what, info.nprocs,
           (unsigned long long)info.calls, NTHREADS, per_thread, exact ? "yes" : "no");
    CHECK(info.nprocs == NTHREADS && exact && sum == info.calls && info.calls == (uint64_t)NTHREADS * per_thread,
          "%s: %u processes, %llu calls", what, info.nprocs, (unsigned long long)info.calls);
}

int main(void) {
    pthread_t t[NTHREADS];
    bpt_session s;
    int i;
    per_thread = check_scale(20000);
    CHECK_RC(bpt_register_vm(&word, 0xBBBB, "ov", "v", 0, NULL, &vf), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "ov:v/_", BPT_TIME, NULL), 1);
#if defined(BPT_NATIVE)
    {
        bpt_func *nf;
        CHECK_RC(bpt_register_native((void *)nat, "ov", "nat", 1, &nf), 0);
        CHECK_RC(bpt_trace_pattern(s, "ov:nat/_", BPT_TIME, NULL), 1);
#endif
    for (i = 0; i < NTHREADS; i++) CHECK(pthread_create(&t[i], NULL, caller, NULL) == 0, "thread");
    for (i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    check_exact(s, vf, "VM site");
#if defined(BPT_NATIVE)
        check_exact(s, nf, "native");
    }
#endif
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(vf), 0);
    return CHECK_DONE();
}

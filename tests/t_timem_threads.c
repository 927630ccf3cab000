/* t_timem_threads: call_time with more threads than BPT_MAX_THREADS, which
   is 4 here.
   1. 8 threads call at once: the first thread records keep their tables in
      the breakpoint's data, the others in the array mapped for them
      (timem.c [T3]). Every thread has a table of its own, none shared, and
      the counts and per-process rows are exact, for VM sites (every
      compiler) and native functions.
   2. A charge on a thread past BPT_MAX_THREADS, nested in an update of the
      same tables (as a signal handler's would be), is dropped and counted;
      one of other tables goes ahead [H1]. Before [T3] such threads shared
      one overflow table under a mutex and never looked at the nesting
      mark: the nested charge was not dropped.
   BPT_TEST_CONCURRENCY. */
#define BPT_MAX_THREADS 4
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { NTHREADS = 8 };
static bpt_vm_word word = 0x100, other_word = 0x200;
static bpt_func *vf, *of;
static long per_thread;

#if defined(BPT_NATIVE)
BPT_TRACEABLE long nat(long x) { return x + 1; }
static long (*volatile p_nat)(long) = nat;
#endif

static void call_vm(bpt_vm_word *w, bpt_func *f) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(w) == 0xBBBB) bpt_vm_breakpoint(f, NULL, &t);
    bpt_vm_return(t, 0);
}

static pthread_barrier_t all_alive;

static void *caller(void *arg) {
    long k;
    (void)arg;
    bpt_thread_progress_pin();   /* the thread's record, made while every caller lives: */
    bpt_thread_progress_unpin();
    pthread_barrier_wait(&all_alive);   /* none is reused, so each thread has its own */
    for (k = 0; k < per_thread; k++) {
        call_vm(&word, vf);
#if defined(BPT_NATIVE)
        if (p_nat(k) != k + 1) abort();
#endif
    }
    return NULL;
}

static bpt__BpTimem *timem_of(bpt_func *fn) {
    bpt__GenericBp *gb = (bpt__GenericBp *)bpt__load_acquire_ptr(&fn->gen_bp);
    return gb ? bpt__timem_of(&gb->data[bpt_active_bp_ix()]) : NULL;
}

/* How many tables tm holds, in its own slots and in `more`, and whether any
   two are the same table. */
static void count_tables(bpt__BpTimem *tm, int *in_data, int *in_more, int *shared) {
    void *seen[BPT_MAX_THREADS + 64];
    int n = 0, i, j;
    uint32_t k, records = bpt__threads_count();
    bpt__atomic_ptr *more = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&tm->more);
    *in_data = *in_more = *shared = 0;
    for (k = 0; k < records && n < (int)(sizeof seen / sizeof seen[0]); k++) {
        void *t;
        if (k < BPT_MAX_THREADS) t = bpt__load_acquire_ptr(&tm->table[k]);
        else t = more ? bpt__load_acquire_ptr(&more[k - BPT_MAX_THREADS]) : NULL;
        if (!t) continue;
        if (k < BPT_MAX_THREADS) (*in_data)++;
        else (*in_more)++;
        seen[n++] = t;
    }
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) *shared |= seen[i] == seen[j];
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

static void check_own_tables(bpt_func *f, const char *what) {
    bpt__BpTimem *tm = timem_of(f);
    int in_data, in_more, shared;
    CHECK(tm != NULL, "%s: call_time tables", what);
    if (!tm) return;
    count_tables(tm, &in_data, &in_more, &shared);
    printf("%s: %d tables in the breakpoint's slots, %d in the array past them, shared: %s\n", what, in_data,
           in_more, shared ? "yes" : "no");
    CHECK(in_data + in_more == NTHREADS && in_more >= NTHREADS - BPT_MAX_THREADS && !shared,
          "%s: every thread has a table of its own: %d + %d tables, shared %d", what, in_data, in_more, shared);
}

/* Part 2: as many threads as there are thread records park holding
   theirs, so the thread that checks makes a new record, past every index
   below BPT_MAX_THREADS. */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static int parked, release_parked;

static void *parker(void *arg) {
    (void)arg;
    bpt_thread_progress_pin();   /* the thread's record exists from here */
    bpt_thread_progress_unpin();
    pthread_mutex_lock(&park_lock);
    parked++;
    pthread_cond_broadcast(&park_cond);
    while (!release_parked) pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
    return NULL;
}

static uint64_t time_calls(bpt_session s, bpt_func *f) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &in), 0);
    return in.calls;
}

static bpt_session nested_s;
static void *nested_checker(void *arg) {
    bpt__thread *rec;
    bpt__BpTimem *tm;
    uint64_t lost0, v0, o0;
    (void)arg;
    call_vm(&word, vf);   /* its record, and vf's table for it */
    rec = bpt__thread_self_or_null();
    tm = timem_of(vf);
    CHECK(rec && tm, "a thread record and vf's tables");
    if (!rec || !tm) return NULL;
    printf("the checking thread's record index: %u (BPT_MAX_THREADS %d)\n", rec->index, BPT_MAX_THREADS);
    CHECK(rec->index >= BPT_MAX_THREADS, "the checking thread is past BPT_MAX_THREADS: index %u", rec->index);
    lost0 = bpt__load_relaxed_u64(&tm->lost);
    rec->timem_charging[0] = tm;   /* as if interrupted inside a charge of vf's tables */
    rec->timem_depth = 1;
    call_vm(&word, vf);         /* dropped: nested in an update of the same tables */
    call_vm(&other_word, of);   /* other tables: goes ahead */
    rec->timem_depth = 0;
    printf("nested in vf's update: %llu of vf's charges dropped\n",
           (unsigned long long)(bpt__load_relaxed_u64(&tm->lost) - lost0));
    CHECK(bpt__load_relaxed_u64(&tm->lost) > lost0, "a charge nested in an update of vf's tables, on a thread "
          "past BPT_MAX_THREADS, was dropped and counted");
    v0 = time_calls(nested_s, vf);
    o0 = time_calls(nested_s, of);
    CHECK(v0 == 1, "vf: the first call charged, the nested one dropped: %llu calls", (unsigned long long)v0);
    CHECK(o0 == 1, "of: the charge of other tables went ahead: %llu calls", (unsigned long long)o0);
    return NULL;
}

int main(void) {
    pthread_t t[NTHREADS];
    bpt_session s;
    int i;
    per_thread = check_scale(20000);
    CHECK_RC(bpt_register_vm(&word, 0xBBBB, "ov", "v", 0, NULL, &vf), 0);
    CHECK_RC(bpt_register_vm(&other_word, 0xBBBB, "ov", "o", 0, NULL, &of), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "ov:v/_", BPT_TIME, NULL), 1);
#if defined(BPT_NATIVE)
    {
        bpt_func *nf;
        CHECK_RC(bpt_register_native((void *)nat, "ov", "nat", 1, &nf), 0);
        CHECK_RC(bpt_trace_pattern(s, "ov:nat/_", BPT_TIME, NULL), 1);
#endif
    pthread_barrier_init(&all_alive, NULL, NTHREADS);
    for (i = 0; i < NTHREADS; i++) CHECK(pthread_create(&t[i], NULL, caller, NULL) == 0, "thread");
    for (i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    check_own_tables(vf, "VM site");
    check_exact(s, vf, "VM site");
#if defined(BPT_NATIVE)
        check_own_tables(nf, "native");
        check_exact(s, nf, "native");
    }
#endif
    CHECK_RC(bpt_session_destroy(s), 0);

    /* Part 2. */
    CHECK_RC(bpt_session_create(NULL, &nested_s), 0);
    CHECK_RC(bpt_trace_pattern(nested_s, "ov:v/_", BPT_TIME, NULL), 1);
    CHECK_RC(bpt_trace_pattern(nested_s, "ov:o/_", BPT_TIME, NULL), 1);
    {
        enum { MAX_PARKERS = 64 };
        pthread_t p[MAX_PARKERS], c;
        int nparkers = (int)bpt__threads_count();
        CHECK(nparkers <= MAX_PARKERS, "%d thread records", nparkers);
        if (nparkers > MAX_PARKERS) nparkers = MAX_PARKERS;
        for (i = 0; i < nparkers; i++) CHECK(pthread_create(&p[i], NULL, parker, NULL) == 0, "parker");
        pthread_mutex_lock(&park_lock);
        while (parked < nparkers) pthread_cond_wait(&park_cond, &park_lock);
        pthread_mutex_unlock(&park_lock);
        CHECK(pthread_create(&c, NULL, nested_checker, NULL) == 0, "checker");
        pthread_join(c, NULL);
        pthread_mutex_lock(&park_lock);
        release_parked = 1;
        pthread_cond_broadcast(&park_cond);
        pthread_mutex_unlock(&park_lock);
        for (i = 0; i < nparkers; i++) pthread_join(p[i], NULL);
    }
    CHECK_RC(bpt_session_destroy(nested_s), 0);
    CHECK_RC(bpt_unregister(vf), 0);
    CHECK_RC(bpt_unregister(of), 0);
    return CHECK_DONE();
}

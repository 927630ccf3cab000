/* bench/pattern_scale.c (sections 4 and 5), linked with a generated file of
   N BPT_TRACEABLE functions (bench/gen_funcs.sh).
   4: the time to enable (call_count) and disable every function with one
   bpt_trace_pattern, and the largest stall worker threads see meanwhile
   (the largest gap between two consecutive calls they make), against a
   stop-the-world baseline: every worker is stopped by a signal and waits in
   its handler while the same entry words are written, the pages opened
   and closed as bptrace does: one mprotect per run of adjacent pages.
   5 (`info`): call_time on every function, the time bpt_trace_info_each
   takes to collect it while the workers call them, and their stall.
   An "idle" row gives the stall the workers see in an idle window as long
   as the op: on a shared 2-core machine the scheduler's noise floor.
   `steps`: where the time of an enable and a disable goes, step by step
   (the protocol observer, bpt_set_protocol_observer), with the worker
   calling every function: the median of 21 of each, in us, per step that
   took 1 us or more. A step that is slower with the worker than without
   (BENCH_WORKERS=0) is where the two cores pass cache lines back and
   forth (PERFORMANCE.md, issue #16's 10,000-function change).
   Section 4 runs 1 worker by default (with the patching thread that fills
   2 cores; BENCH_WORKERS=2 oversubscribes them and measures the scheduler),
   section 5 the 2 callers the issue asks for. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "bench.h"
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

extern long (*const gen_fns[])(long);
extern const int gen_n;

enum { MAXW = 4, MAXPH = 256 };
static int nworkers = 1;   /* section 4: 1, section 5: 2; BENCH_WORKERS overrides */
static _Atomic int phase;                 /* 0: not measuring; else the op's index */
static _Atomic int stop_run;
static _Atomic uint64_t maxgap[MAXW][MAXPH];
static _Atomic long worker_calls[MAXW];

static _Atomic int ack[MAXW];
static _Atomic long faults[MAXW][MAXPH];   /* the worker's page faults (minor+major) during the phase */
static long thread_faults(void) { struct rusage ru; getrusage(RUSAGE_THREAD, &ru); return ru.ru_minflt + ru.ru_majflt; }
static void upd(int w, int p, uint64_t g) {
    if (g > atomic_load_explicit(&maxgap[w][p], memory_order_relaxed))
        atomic_store_explicit(&maxgap[w][p], g, memory_order_relaxed);
}
/* A gap counts for phase p when the worker saw p at both its ends, or p at its
   start and p's end marker (-p) at its end; the gap in which it first sees p
   started before the op did, and does not count. */
static void *worker(void *arg) {
    int w = (int)(intptr_t)arg, pp = 0;
    uint64_t prev = bench_now();
    long acc = 0, calls = 0;
    while (!atomic_load_explicit(&stop_run, memory_order_relaxed)) {
        for (int i = 0; i < gen_n; i++) {
            acc += gen_fns[i](acc);
            uint64_t t = bench_now(), g = t - prev;
            int p = atomic_load_explicit(&phase, memory_order_acquire);
            prev = t;
            if (p > 0 && pp == p) upd(w, p, g);
            else if (p < 0 && pp == -p) upd(w, -p, g);
            if (p != pp) {
                if (p > 0) atomic_store_explicit(&faults[w][p], -thread_faults(), memory_order_relaxed);
                else if (p < 0 && pp == -p) atomic_fetch_add_explicit(&faults[w][-p], thread_faults(), memory_order_relaxed);
                atomic_store_explicit(&ack[w], p, memory_order_release);
            }
            pp = p;
        }
        calls += gen_n;
        atomic_store_explicit(&worker_calls[w], calls, memory_order_relaxed);
    }
    return (void *)acc;
}

/* Stop-the-world: a signal stops each worker in its handler until released. */
static _Atomic int stw_hold, stw_arrived, stw_left;
static void stw_handler(int sig) {
    (void)sig;
    atomic_fetch_add(&stw_arrived, 1);
    while (atomic_load(&stw_hold)) ;
    atomic_fetch_add(&stw_left, 1);
}
static pthread_t workers[MAXW];
static uintptr_t *pages;
static int npages;
/* Open or close the code pages as bptrace does (site_native.c): one
   mprotect per run of adjacent pages, not one per page. */
static void protect_runs(int prot) {
    long pg = sysconf(_SC_PAGESIZE);
    for (int i = 0, j; i < npages; i = j) {
        for (j = i + 1; j < npages && pages[j] == pages[j - 1] + (uintptr_t)pg; j++) ;
        mprotect((void *)pages[i], (size_t)pg * (size_t)(j - i), prot);
    }
}
/* Rewrite every entry word with the bytes it holds: a patcher's writes,
   without tracing anything. */
static void rewrite_words(void) {
    protect_runs(PROT_READ | PROT_WRITE | PROT_EXEC);
    for (int i = 0; i < gen_n; i++) {
        volatile uint16_t *site = (volatile uint16_t *)(uintptr_t)gen_fns[i];
        *site = *site;
    }
    protect_runs(PROT_READ | PROT_EXEC);
}
/* The baseline: stop every worker, rewrite, let them go. */
static void stw_patch(void) {
    atomic_store(&stw_hold, 1);
    atomic_store(&stw_arrived, 0);
    atomic_store(&stw_left, 0);
    for (int w = 0; w < nworkers; w++) pthread_kill(workers[w], SIGUSR1);
    while (atomic_load(&stw_arrived) < nworkers) ;
    rewrite_words();
    atomic_store(&stw_hold, 0);
    while (atomic_load(&stw_left) < nworkers) usleep(100);   /* all out before the next round */
}

static int ph;
static long last_faults;   /* the workers' page faults during the last timed op */
/* Run op once as phase ++ph; out: its duration (us) and the workers' largest gap (us). */
static void await_ack(int p) {
    for (int w = 0; w < nworkers; w++)
        while (atomic_load_explicit(&ack[w], memory_order_acquire) != p) usleep(50);
}
static void timed(int (*op)(void), double *dur_us, double *stall_us) {
    int p = ++ph;
    uint64_t t0;
    atomic_store(&phase, p);
    await_ack(p);              /* every worker runs inside the phase */
    t0 = bench_now();
    if (op() < 0) fprintf(stderr, "op: %s\n", bpt_last_error());
    *dur_us = (double)(bench_now() - t0) / 1000.0;
    atomic_store(&phase, -p);
    await_ack(-p);             /* every worker's gap across the op's end is in */
    atomic_store(&phase, 0);
    uint64_t m = 0;
    for (int w = 0; w < nworkers; w++)
        if (atomic_load(&maxgap[w][p]) > m) m = atomic_load(&maxgap[w][p]);
    *stall_us = (double)m / 1000.0;
    last_faults = 0;
    for (int w = 0; w < nworkers; w++) last_faults += atomic_load(&faults[w][p]);
}

static bpt_session sess;
static char pat[64] = "_:gf_*/_";
static unsigned idle_us = 5000;   /* the idle window: as long as the op it is compared with */
static int op_idle(void) { usleep(idle_us); return 0; }
static int op_enable(void) { return bpt_trace_pattern(sess, pat, BPT_COUNT, NULL); }
static int op_disable(void) { return bpt_trace_pattern(sess, pat, BPT_OFF, NULL); }
static int op_stw(void) { stw_patch(); return 0; }
static int op_rewrite(void) { rewrite_words(); return 0; }
static int op_time_on(void) { return bpt_trace_pattern(sess, pat, BPT_TIME, NULL); }
static void info_cb(const bpt_func *f, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    (void)f; (void)m; (void)n; (void)a;
    *(uint64_t *)u += i->calls;
}
static uint64_t info_calls;
static int op_info(void) { return bpt_trace_info_each(sess, pat, BPT_INFO_TIME, info_cb, &info_calls); }

static int cmp_uptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

enum { STEP_RUNS = 21 };
static double step_us[2][14][STEP_RUNS];
static int step_op, step_run;
static void step_observer(int step, int did, uint64_t ns, void *user) {
    (void)did; (void)user;
    step_us[step_op][step][step_run] = (double)ns / 1e3;
}

/* The `steps` rows: an enable and a disable, each step's median. */
static void steps_rows(void) {
    static const char *const op[2] = { "enable", "disable" };
    char what[96], list[256];
    bpt_set_protocol_observer(step_observer, NULL);
    for (step_run = 0; step_run < STEP_RUNS; step_run++) {
        step_op = 0;
        op_enable();
        step_op = 1;
        op_disable();
    }
    bpt_set_protocol_observer(NULL, NULL);
    for (int o = 0; o < 2; o++) {
        size_t len = 0;
        double total = 0;
        for (int st = 1; st <= 13; st++) {
            bench_stat m = bench_stats(step_us[o][st], STEP_RUNS);
            total += m.med;
            if (m.med >= 1.0 && len < sizeof list - 32)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%d:%.0f", len ? " " : "", st, m.med);
        }
        snprintf(what, sizeof what, "%d fns: %s by step, %d worker%s", gen_n, op[o], nworkers, nworkers == 1 ? "" : "s");
        printf("%-4s %-46s %11.2f  %-24s %-9s step:us %s\n", "4", what, total, "", "us", list);
    }
}

int main(int argc, char **argv) {
    int info = argc > 1 && !strcmp(argv[1], "info"), steps = argc > 1 && !strcmp(argv[1], "steps");
    int runs = gen_n >= 50000 ? 5 : 9;
    if (getenv("BENCH_WORKERS")) nworkers = atoi(getenv("BENCH_WORKERS"));
    else if (info) nworkers = 2;
    if (nworkers < (steps ? 0 : 1) || nworkers > MAXW) nworkers = 2;
    double d[3][16], s[3][16], flt[2][16];
    char what[96], ratio[96], sec[4];
    bpt_progress_stats ps;
    struct sigaction sa;
    uint64_t t0 = bench_now();
    bpt_thread_progress_stats(&ps);
    int nreg = bpt_register_module(NULL);
    double reg_ms = (double)(bench_now() - t0) / 1e6;
    if (nreg < gen_n || bpt_session_create(NULL, &sess) < 0) {
        fprintf(stderr, "setup: %d %s\n", nreg, bpt_last_error());
        return 1;
    }
    /* The code pages of the sites, for the stop-the-world writer. */
    pages = malloc(sizeof *pages * (size_t)gen_n);
    for (int i = 0; i < gen_n; i++) pages[i] = (uintptr_t)gen_fns[i] & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    qsort(pages, (size_t)gen_n, sizeof *pages, cmp_uptr);
    for (int i = 0; i < gen_n; i++) if (!npages || pages[npages - 1] != pages[i]) pages[npages++] = pages[i];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = stw_handler;
    sigaction(SIGUSR1, &sa, NULL);
    for (int w = 0; w < nworkers; w++) pthread_create(&workers[w], NULL, worker, (void *)(intptr_t)w);
    usleep(20000);
    snprintf(sec, sizeof sec, "%d", info ? 5 : 4);
    if (steps) {
        steps_rows();
    } else if (!info) {
        for (int r = 0; r < runs; r++) {
            timed(op_enable, &d[1][r], &s[1][r]);
            flt[0][r] = (double)last_faults;
            timed(op_disable, &d[2][r], &s[2][r]);
            flt[1][r] = (double)last_faults;
            idle_us = (unsigned)d[1][r] + 1;
            timed(op_idle, &d[0][r], &s[0][r]);   /* noise floor: an idle window as long as the enable */
        }
        bench_stat idle = bench_stats(s[0], runs), en = bench_stats(d[1], runs), es = bench_stats(s[1], runs),
                   di = bench_stats(d[2], runs), ds = bench_stats(s[2], runs);
        for (int r = 0; r < runs; r++) timed(op_stw, &d[0][r], &s[0][r]);
        bench_stat sw = bench_stats(d[0], runs), ss = bench_stats(s[0], runs);
        for (int r = 0; r < runs; r++) timed(op_rewrite, &d[1][r], &s[1][r]);
        bench_stat rw = bench_stats(d[1], runs), rs = bench_stats(s[1], runs);
        snprintf(what, sizeof what, "%d fns: enable call_count, all", gen_n);
        snprintf(ratio, sizeof ratio, "%.2fx STW; register_module %.1f ms", en.med / sw.med, reg_ms);
        bench_row(sec, what, en, "us", ratio);
        snprintf(what, sizeof what, "%d fns: disable, all", gen_n);
        snprintf(ratio, sizeof ratio, "%.2fx STW", di.med / sw.med);
        bench_row(sec, what, di, "us", ratio);
        snprintf(what, sizeof what, "%d fns: stop-the-world rewrite, all", gen_n);
        bench_row(sec, what, sw, "us", "1.00x STW (batched mprotect)");
        snprintf(what, sizeof what, "%d fns: worker stall, idle as long (floor)", gen_n);
        bench_row(sec, what, idle, "us", "");
        snprintf(what, sizeof what, "%d fns: stall during enable (%d worker%s)", gen_n, nworkers, nworkers > 1 ? "s" : "");
        bench_stat fe = bench_stats(flt[0], runs), fd = bench_stats(flt[1], runs);
        snprintf(ratio, sizeof ratio, "%.4fx STW; worker faults %.0f", es.med / ss.med, fe.med);
        bench_row(sec, what, es, "us", ratio);
        snprintf(what, sizeof what, "%d fns: worker stall during disable", gen_n);
        snprintf(ratio, sizeof ratio, "%.4fx STW; worker faults %.0f", ds.med / ss.med, fd.med);
        bench_row(sec, what, ds, "us", ratio);
        snprintf(what, sizeof what, "%d fns: worker stall during stop-the-world", gen_n);
        bench_row(sec, what, ss, "us", "1.00x STW");
        snprintf(what, sizeof what, "%d fns: the same rewrite, nobody stopped", gen_n);
        bench_row(sec, what, rw, "us", "diagnostic");
        snprintf(what, sizeof what, "%d fns: worker stall during that rewrite", gen_n);
        snprintf(ratio, sizeof ratio, "%.4fx STW; worker faults %.0f", rs.med / ss.med, (double)last_faults);
        bench_row(sec, what, rs, "us", ratio);
        (void)en; (void)di;
    } else {
        double ds_[16], ss_[16];
        if (bpt_trace_pattern(sess, pat, BPT_TIME, NULL) < gen_n) fprintf(stderr, "time: %s\n", bpt_last_error());
        usleep(50000);
        for (int r = 0; r < runs; r++) {
            timed(op_info, &ds_[r], &ss_[r]);
            idle_us = (unsigned)ds_[r] + 1;
            timed(op_idle, &d[0][r], &s[0][r]);
        }
        bench_stat idle = bench_stats(s[0], runs), di = bench_stats(ds_, runs), st = bench_stats(ss_, runs);
        snprintf(what, sizeof what, "trace_info call_time, %d fns, %d callers", gen_n, nworkers);
        snprintf(ratio, sizeof ratio, "%.0f calls collected", (double)info_calls / runs);
        bench_row(sec, what, di, "us", ratio);
        snprintf(what, sizeof what, "worker stall, idle as long (floor)");
        bench_row(sec, what, idle, "us", "");
        snprintf(what, sizeof what, "worker stall during trace_info");
        snprintf(ratio, sizeof ratio, "%.2fx idle", st.med / idle.med);
        bench_row(sec, what, st, "us", ratio);
        bpt_trace_pattern(sess, pat, BPT_OFF, NULL);
        (void)op_time_on;
    }
    atomic_store(&stop_run, 1);
    for (int w = 0; w < nworkers; w++) pthread_join(workers[w], NULL);
    return 0;
}

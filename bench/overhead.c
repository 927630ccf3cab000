/* bench/overhead.c (section 1): overhead per call of a recursive fib and of a
   mix of four small leaf functions, in each mode: a plain build (no
   attribute), the same code BPT_TRACEABLE but untraced, call_count, call
   trace to a ring drained by a consumer thread (it writes the records to a
   file, as bpt_session_write does; the call trace row once more with the
   drainer decoding each), call+return to a ring, and call_time. ns per call: median of RUNS runs (min..max), ratio to plain.
   Then call_count on the leaf mix from 1 thread and from 2 threads at once
   (the same functions): ns per call of each thread's CPU time, and the
   ratio of 2 to 1, which a cache line written by both threads would raise.
   `bench_overhead MODE CALLS` runs one mode once, for callgrind (make bench
   prints the instruction counts the same way PERFORMANCE.md does;
   bench_overhead_noprobes, the same code built with -DBPT_NO_PROBES, gives
   section 7's). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "bench.h"
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#if defined(BPT_NATIVE)
#define PLAIN
#if defined(__clang__)
#  define NOIPA __attribute__((noinline))   /* clang has no noipa; BPT_TRACEABLE uses noinline there */
#else
#  define NOIPA __attribute__((noipa))
#endif
#define DEFINE_SET(P, ATTR)                                                               \
    ATTR long P##fib(long n) { return n < 2 ? n : P##fib(n - 1) + P##fib(n - 2); }        \
    ATTR long P##l1(long a, long b) { return a + b; }                                      \
    ATTR long P##l2(long a, long b) { return (a ^ b) * 7; }                                \
    ATTR long P##l3(long a, long b) { return a > b ? a - b : b - a; }                      \
    ATTR long P##l4(long a, long b) { return (a << 3) + (b >> 2); }                        \
    NOIPA long P##mix(long iters) {                                                        \
        long acc = 0;                                                                      \
        for (long i = 0; i < iters; i++) {                                                 \
            acc = P##l1(acc, i);                                                           \
            acc = P##l2(acc, i);                                                           \
            acc = P##l3(acc, i);                                                           \
            acc = P##l4(acc, i);                                                           \
        }                                                                                  \
        return acc;                                                                        \
    }
DEFINE_SET(p_, PLAIN)          /* plain build: no attribute at all */
DEFINE_SET(n_, NOIPA)          /* plain but noipa, as BPT_TRACEABLE implies (not traceable) */
DEFINE_SET(t_, BPT_TRACEABLE)  /* traceable */

typedef long (*fn1)(long);
static fn1 volatile fibs[3] = { p_fib, n_fib, t_fib };
static fn1 volatile mixes[3] = { p_mix, n_mix, t_mix };

enum { RUNS = 9, FIB_N = 25, MIX_ITERS = 60000 };
static double FIB_CALLS = 242785.0;   /* entries of t_fib per fib(25): counted at start-up */
static const double MIX_CALLS = 4.0 * MIX_ITERS;

static bpt_session sess, sess_cpu;
static _Atomic int draining;
static _Atomic uint64_t drained;
/* How the drainer empties the ring. 0: it writes the records, whole runs
   of them as they are (bpt_session_write), to /dev/null: a drainer that
   keeps up with every row, so that a row is what the traced thread pays
   for its events, neither a dropped record's cost nor a growing buffer's
   page faults (section 2 writes a real file, against uftrace). 1: it decodes
   each into a bpt_msg (bpt_session_drain), which costs more than a plain
   call event now costs the traced thread: with it the call trace row
   dropped 23-28 % of its records in 3 of 5 runs, and grew the buffer (page
   faults) in the others (PERFORMANCE.md, issue #16). The row "drained by
   decoding" runs that way. */
static _Atomic int decode;
static void *drainer(void *arg) {
    static bpt_msg buf[1024];
    bpt_file_writer w = { .fd = open("/dev/null", O_WRONLY) };
    (void)arg;
    /* Sleep until a chunk is sealed (or 1 ms), then read what is there;
       read on at once only while a read fills the whole buffer (a backlog).
       A drainer that read again at once after any record would chase the
       producer through the chunk it is writing, a cache line at a time. */
    while (atomic_load(&draining)) {
        int n;
        bpt_session_wait(sess, 1000);
        if (atomic_load(&decode) || w.fd < 0) {
            do {
                n = bpt_session_drain(sess, buf, 1024);
                if (n > 0) atomic_fetch_add(&drained, (uint64_t)n);
            } while (n == 1024);
        } else {
            uint64_t before;
            do {
                before = w.bytes;
                n = bpt_session_write(sess, &w);
                if (n > 0) atomic_fetch_add(&drained, (uint64_t)n);
            } while (n > 0 && w.bytes - before >= 65536);   /* a backlog: more than 4 chunks at once */
        }
    }
    if (w.fd >= 0) close(w.fd);
    return NULL;
}

/* ns per call, one run (fib: REP fib(25) calls; mix: MIX_ITERS x 4 calls). */
static double run_once(int which, int kind, int rep) {
    long acc = 0;
    uint64_t t0 = bench_now();
    for (int r = 0; r < rep; r++)
        acc += kind == 0 ? fibs[which](FIB_N) : mixes[which](MIX_ITERS);
    uint64_t t = bench_now() - t0;
    if (acc == 42) puts("");
    return (double)t / (rep * (kind == 0 ? FIB_CALLS : MIX_CALLS));
}

/* Wait, untimed, until the drainer has read every record: each timed run
   starts with the ring empty. A run's records (at most 4 x 242,785 fib
   entries, 31 MiB at 32 bytes) fit the ring with what the drainer reads
   meanwhile (setup: 1024 chunks of 16 KiB), so that a row is what the
   traced thread pays for its events, neither a dropped record's cost nor
   a growing buffer's page faults: one call event now costs the traced
   thread less than the drainer's read of it (PERFORMANCE.md, issue #16),
   and over 9 runs back to back the backlog filled the buffer. */
static void settle(void) {
    bpt_session_counts c;
    for (int i = 0; i < 10000 && bpt_session_stats(sess, &c) == 0 && c.pending; i++) usleep(100);
}

static bench_stat measure(int which, int kind) {
    double v[RUNS];
    run_once(which, kind, 1); /* warm up */
    for (int r = 0; r < RUNS; r++) {
        settle();
        v[r] = run_once(which, kind, 4);
    }
    return bench_stats(v, RUNS);
}

enum { CPU_SESSION = 1u << 30 };   /* the mode runs in the session created with time_cpu */
static const struct { const char *name; unsigned flags; } modes[] = {
    { "traceable, untraced", 0 },
    { "call_count", BPT_COUNT },
    { "call trace -> ring", BPT_CALL },
    { "call+return -> ring", BPT_CALL | BPT_RETURN },
    { "call_time", BPT_TIME },
    { "call_time (thread CPU time)", BPT_TIME | CPU_SESSION },
};

static int setup(void) {
    static const struct { void *fn; const char *name; int arity; } fs[] = {
        { (void *)t_fib, "fib", 1 }, { (void *)t_l1, "l1", 2 }, { (void *)t_l2, "l2", 2 },
        { (void *)t_l3, "l3", 2 },   { (void *)t_l4, "l4", 2 },
    };
    bpt_session_desc d = { .name = "bench", .chunks = 1024 }, dc = { .name = "bench-cpu", .time_cpu = 1 };
    bpt_progress_stats ps;
    bpt_thread_progress_stats(&ps);   /* membarrier registration while single-threaded */
    for (unsigned i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        bpt_func *f;
        if (bpt_register_native(fs[i].fn, "b", fs[i].name, fs[i].arity, &f) < 0) return -1;
    }
    if (bpt_session_create(&dc, &sess_cpu) < 0) return -1;
    return bpt_session_create(&d, &sess);
}

static int set_mode(unsigned flags, int on) {
    if (!flags) return 0;
    bpt_session s = (flags & CPU_SESSION) ? sess_cpu : sess;
    int r = bpt_trace_pattern(s, "b:_/_", on ? flags & ~(unsigned)CPU_SESSION : BPT_OFF, NULL);
    if (r < 0) fprintf(stderr, "trace_pattern: %s\n", bpt_last_error());
    return r;
}

/* call_count from n threads at once on the same leaves: each thread's CPU
   time per call (time spent scheduled out does not count; time stalled on
   a cache line does). *share: each thread's CPU time over the wall time
   (1: the threads ran at once throughout; on a busy machine less, and a
   ratio taken then says less). The wall time runs from the first thread's
   start to the last one's end, as the threads see them: main's own reading
   after the barrier came late whenever main was scheduled out there (3
   threads on 2 CPUs), and the share read 764 % and 1493 % in two runs. */
static pthread_barrier_t start;
static double thread_ns[2];
static uint64_t wall_from[2], wall_to[2];
static void *count_worker(void *arg) {
    int k = (int)(intptr_t)arg;
    struct timespec a, b;
    long acc;
    cpu_set_t one;   /* each thread on a CPU of its own, where there are two */
    CPU_ZERO(&one);
    CPU_SET(k % (sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2 : 1), &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_barrier_wait(&start);
    wall_from[k] = bench_now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    acc = mixes[2](MIX_ITERS);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    wall_to[k] = bench_now();
    thread_ns[k] = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    if (acc == 42) puts("");
    return NULL;
}

static double count_threads_once(int n, double *share) {
    pthread_t t[2];
    uint64_t from = UINT64_MAX, to = 0;
    double wall, sum = 0;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, count_worker, (void *)(intptr_t)i);
    pthread_barrier_wait(&start);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < n; i++) {
        sum += thread_ns[i];
        if (wall_from[i] < from) from = wall_from[i];
        if (wall_to[i] > to) to = wall_to[i];
    }
    wall = (double)(to - from);
    *share = sum / n / wall;
    return sum / n / MIX_CALLS;
}

static void count_threads(void) {
    double v[2][RUNS], share[RUNS], o;
    bench_stat s[2], so;
    char ratio[96];
    set_mode(BPT_COUNT, 1);
    for (int n = 1; n <= 2; n++) {
        count_threads_once(n, &o);   /* warm up */
        for (int r = 0; r < RUNS; r++) v[n - 1][r] = count_threads_once(n, n == 2 ? &share[r] : &o);
        s[n - 1] = bench_stats(v[n - 1], RUNS);
    }
    set_mode(BPT_COUNT, 0);
    so = bench_stats(share, RUNS);
    bench_row("1", "leaf mix: call_count, 1 thread (thread CPU)", s[0], "ns/call", "");
    snprintf(ratio, sizeof ratio, "%.2fx 1 thread (each on a CPU %.0f%% of the time)", s[1].med / s[0].med, 100 * so.med);
    bench_row("1", "leaf mix: call_count, 2 threads, same functions", s[1], "ns/call", ratio);
}

/* The floor under every timed row: one read of the clock records carry
   (bpt_clock_info's source) and, for comparison, one clock_gettime
   (CLOCK_MONOTONIC: what uftrace reads per record), and the thread CPU
   time call_time reads in a time_cpu session. ns per read. */
static double clock_read_once(int which) {
    enum { N = 1000000 };
    uint64_t acc = 0, t0 = bench_now();
    struct timespec ts;
    for (int i = 0; i < N; i++) {
        if (which == 0) acc += bpt__now_ticks();
        else { clock_gettime(which == 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts); acc += (uint64_t)ts.tv_nsec; }
    }
    if (acc == 42) puts("");
    return (double)(bench_now() - t0) / N;
}

static void clock_reads(void) {
    double v[RUNS];
    bpt_clock clk;
    char what[96];
    bpt_clock_info(&clk);
    for (int which = 0; which < 3; which++) {
        clock_read_once(which);
        for (int r = 0; r < RUNS; r++) v[r] = clock_read_once(which);
        if (which == 0) snprintf(what, sizeof what, "floor: one timestamp (%s, bptrace's clock)", clk.source);
        else if (which == 1) snprintf(what, sizeof what, "floor: one clock_gettime(CLOCK_MONOTONIC)");
        else snprintf(what, sizeof what, "floor: one thread CPU time read (time_cpu)");
        bench_row("1", what, bench_stats(v, RUNS), "ns/read", "");
    }
}

int main(int argc, char **argv) {
    pthread_t dr;
    if (setup() < 0) { fprintf(stderr, "setup: %s\n", bpt_last_error()); return 1; }
    {   /* gcc turns one of fib's two recursive calls into a loop: count the real entries */
        bpt_func *f; bpt_info in = { 0 };
        set_mode(BPT_COUNT, 1);
        fibs[2](FIB_N);
        if (bpt_func_lookup("b", "fib", 1, &f) == 0 && bpt_trace_info(sess, f, BPT_INFO_COUNT, &in) == 0 && in.count)
            FIB_CALLS = (double)in.count;
        set_mode(BPT_COUNT, 0);
    }
    atomic_store(&draining, 1);
    pthread_create(&dr, NULL, drainer, NULL);

    if (argc == 3) {   /* one mode, for callgrind: MODE in plain|noipa|off|count|call|return|time */
        static const char *names[] = { "off", "count", "call", "return", "time" };
        long calls = atol(argv[2]);
        int which = 2; unsigned flags = 0;
        if (!strcmp(argv[1], "plain")) which = 0;
        else if (!strcmp(argv[1], "noipa")) which = 1;
        else for (int i = 0; i < 5; i++) if (!strcmp(argv[1], names[i])) flags = modes[i].flags;
        set_mode(flags, 1);
        long acc = mixes[which](calls / 4);
        set_mode(flags, 0);
        atomic_store(&draining, 0);
        pthread_join(dr, NULL);
        printf("%s %ld calls acc %ld\n", argv[1], calls, acc);
        return 0;
    }

    clock_reads();
    for (int kind = 0; kind < 2; kind++) {
        const char *kn = kind == 0 ? "fib(25)" : "leaf mix";
        if (kind == 0) printf("1      fib(25): %.0f entries of the traceable build; every fib row is ns per entry\n", FIB_CALLS);
        char what[96], ratio[64];
        bench_stat plain = measure(0, kind), s;
        snprintf(what, sizeof what, "%s: plain build (no attribute)", kn);
        bench_row("1", what, plain, "ns/call", "1.00x");
        s = measure(1, kind);
        snprintf(what, sizeof what, "%s: plain + noipa (BPT_TRACEABLE's)", kn);
        snprintf(ratio, sizeof ratio, "%.3fx", s.med / plain.med);
        bench_row("1", what, s, "ns/call", ratio);
        for (unsigned m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            bpt_session_counts c0, c1;
            if (set_mode(modes[m].flags, 1) < 0) { fprintf(stderr, "%s\n", bpt_last_error()); return 1; }
            bpt_session_stats(sess, &c0);
            s = measure(2, kind);
            bpt_session_stats(sess, &c1);
            set_mode(modes[m].flags, 0);
            snprintf(what, sizeof what, "%s: %s", kn, modes[m].name);
            snprintf(ratio, sizeof ratio, "%.3fx", s.med / plain.med);
            if (c1.produced > c0.produced)
                snprintf(ratio + strlen(ratio), sizeof ratio - strlen(ratio), "  (%.1f%% dropped)",
                         100.0 * (double)(c1.dropped - c0.dropped) / (double)(c1.produced - c0.produced));
            bench_row("1", what, s, "ns/call", ratio);
        }
        if (kind == 1) {   /* the call trace row again, the drainer decoding every record */
            bpt_session_counts c0, c1;
            atomic_store(&decode, 1);
            if (set_mode(BPT_CALL, 1) < 0) return 1;
            bpt_session_stats(sess, &c0);
            s = measure(2, kind);
            bpt_session_stats(sess, &c1);
            set_mode(BPT_CALL, 0);
            atomic_store(&decode, 0);
            snprintf(ratio, sizeof ratio, "%.3fx  (%.1f%% dropped)", s.med / plain.med,
                     c1.produced > c0.produced ? 100.0 * (double)(c1.dropped - c0.dropped) /
                                                     (double)(c1.produced - c0.produced) : 0.0);
            bench_row("1", "leaf mix: call trace -> ring, drained by decoding", s, "ns/call", ratio);
        }
    }
    count_threads();
    atomic_store(&draining, 0);
    pthread_join(dr, NULL);
    return 0;
}
#else
int main(void) { puts("1    overhead: no native entry patching with this compiler"); return 0; }
#endif

/* bench/vs_uftrace.c (section 2): one program, two builds.
   -DUFTRACE_BUILD: no bptrace; built with -pg and run under `uftrace record`.
   default: the same functions BPT_TRACEABLE, traced by bptrace with
   call+return, a drainer thread writing the records to a trace file
   (argv[1]) with bpt_session_write, as uftrace record writes its per-thread
   data files: whole chunks of compact records, names resolved when read.
   The session has the default sizes (16 chunks of 16 KiB a thread).
   In both builds THREADS threads run the same calls at once (issue #16:
   "2 producing threads, default sizes"). Each prints its own wall time;
   bench/run.sh times the whole process too, and subtracts a run that makes
   no traced call (a last argument "0"): start-up, registration and the
   tracer's own setup cancel out. */
#ifndef UFTRACE_BUILD
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#define TR BPT_TRACEABLE
#else
#define TR __attribute__((noinline))
#endif
#include "bench.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

TR long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
TR long l1(long a, long b) { return a + b; }
TR long l2(long a, long b) { return (a ^ b) * 7; }
TR long l3(long a, long b) { return a > b ? a - b : b - a; }
TR long l4(long a, long b) { return (a << 3) + (b >> 2); }
__attribute__((noinline)) static long mix(long iters) {
    long acc = 0;
    for (long i = 0; i < iters; i++) acc = l4(l3(l2(l1(acc, i), i), i), i);
    return acc;
}
enum { FIB_N = 25, MIX_ITERS = 125000, THREADS = 2 };
/* Each thread: 121,393 fib entries (gcc loops one recursion) + 500,000; bench/run.sh's CALLS is both threads'. */
static int calls;
static void *work(void *arg) {
    long acc = calls ? fib(FIB_N) + mix(MIX_ITERS) : 0;
    *(long *)arg = acc;
    return NULL;
}

#ifndef UFTRACE_BUILD
static bpt_session sess;
static _Atomic int draining = 1;
static bpt_file_writer out;
static void *drainer(void *arg) {
    (void)arg;
    /* Sleep until a chunk is sealed (or 1 ms), then write what is there,
       once: not again at once after a few records, which would chase the
       producers through the chunks they are writing. */
    for (;;) {
        int stop = !atomic_load(&draining), n;
        if (!stop) bpt_session_wait(sess, 1000);
        n = bpt_session_write(sess, &out);
        if (n < 0) { fprintf(stderr, "bpt_session_write: %s\n", bpt_last_error()); break; }
        if (n == 0 && stop) break;
    }
    return NULL;
}
#endif

int main(int argc, char **argv) {
    uint64_t t0 = bench_now();
    long acc;
#ifndef UFTRACE_BUILD
    pthread_t dr;
    bpt_session_desc d = { .name = "file" };   /* default sizes */
    bpt_session_counts c;
    if (argc < 2 || (out.fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        fprintf(stderr, "usage: %s FILE [0]\n", argv[0]);
        return 1;
    }
    int nreg = bpt_register_module(NULL);
    if (nreg < 5) fprintf(stderr, "register_module: %d %s\n", nreg, bpt_last_error());
    if (bpt_session_create(&d, &sess) < 0 ||
        bpt_trace_pattern(sess, "_:fib/_", BPT_CALL | BPT_RETURN, NULL) < 1 ||
        bpt_trace_pattern(sess, "_:l*/_", BPT_CALL | BPT_RETURN, NULL) < 4) {
        fprintf(stderr, "setup: %s\n", bpt_last_error());
        return 1;
    }
    calls = !(argc > 2 && strcmp(argv[2], "0") == 0);
    pthread_create(&dr, NULL, drainer, NULL);
#else
    calls = !(argc > 1 && strcmp(argv[1], "0") == 0);
#endif
    {
        pthread_t t[THREADS];
        long r[THREADS];
        acc = 0;
        for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, &r[i]);
        for (int i = 0; i < THREADS; i++) { pthread_join(t[i], NULL); acc += r[i]; }
    }
#ifndef UFTRACE_BUILD
    atomic_store(&draining, 0);
    pthread_join(dr, NULL);
    close(out.fd);
    bpt_session_stats(sess, &c);
    fprintf(stderr, "bptrace: %llu messages, %llu dropped, %llu bytes written (%.1f a record); "
            "buffers grew to %.1f MiB for %llu threads\n",
            (unsigned long long)c.produced, (unsigned long long)c.dropped, (unsigned long long)out.bytes,
            c.produced ? (double)out.bytes / (double)c.produced : 0.0, (double)c.buffer_bytes / 1048576.0,
            (unsigned long long)c.threads);
#endif
    fprintf(stderr, "acc %ld, %.1f ms\n", acc, (double)(bench_now() - t0) / 1e6);
    return 0;
}

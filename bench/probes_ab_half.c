/* bench/probes_ab_half.c: one half of bench_probes_ab (section 7, issue #18).
   This file is built twice, as two shared objects that bench_probes_ab
   links: libprobes_ab_in.so as it is (AB_SIDE=in) and libprobes_ab_out.so
   with -DBPT_NO_PROBES (AB_SIDE=out). Each half has its own copy of
   bptrace, hidden (-fvisibility=hidden: the functions its assembly stubs
   call are hidden, not static, so two copies cannot share one object
   file's link), its own session, drainer and leaf mix, and exports only
   the ab_<side>_* entry points of probes_ab.h. bench/probes_ab.c
   alternates them in one process. BPT_NO_INTERPOSE: the interposed
   runtime functions are the process's by nature, one set of them; the
   rows measured (call_count, call trace) never reach them. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "probes_ab.h"
#include <pthread.h>

#if defined(BPT_NATIVE)
BPT_TRACEABLE long AB(l1)(long a, long b) { return a + b; }
BPT_TRACEABLE long AB(l2)(long a, long b) { return (a ^ b) * 7; }
BPT_TRACEABLE long AB(l3)(long a, long b) { return a > b ? a - b : b - a; }
BPT_TRACEABLE long AB(l4)(long a, long b) { return (a << 3) + (b >> 2); }

/* The leaf mix of bench/overhead.c: four calls an iteration. */
long AB(mix)(long iters) {
    long acc = 0;
    for (long i = 0; i < iters; i++) {
        acc = AB(l1)(acc, i);
        acc = AB(l2)(acc, i);
        acc = AB(l3)(acc, i);
        acc = AB(l4)(acc, i);
    }
    return acc;
}

static bpt_session sess;
static pthread_t drainer_thread;
static _Atomic int draining;

/* The drainer of bench/overhead.c: sleep until a chunk is sealed (or 1 ms),
   then read while a read fills the whole buffer. */
static void *drainer(void *arg) {
    static bpt_msg buf[1024];
    (void)arg;
    while (atomic_load(&draining)) {
        bpt_session_wait(sess, 1000);
        while (bpt_session_drain(sess, buf, 1024) == 1024) {}
    }
    return NULL;
}

int AB(setup)(void) {
    static void *const fns[] = { (void *)AB(l1), (void *)AB(l2), (void *)AB(l3), (void *)AB(l4) };
    static const char *const names[] = { "l1", "l2", "l3", "l4" };
    bpt_session_desc d = { .name = "bench", .chunks = 128 };
    bpt_progress_stats ps;
    bpt_thread_progress_stats(&ps);   /* membarrier registration while single-threaded */
    for (int i = 0; i < 4; i++) {
        bpt_func *f;
        if (bpt_register_native(fns[i], "b", names[i], 2, &f) < 0) return -1;
    }
    if (bpt_session_create(&d, &sess) < 0) return -1;
    atomic_store(&draining, 1);
    return pthread_create(&drainer_thread, NULL, drainer, NULL) ? -1 : 0;
}

int AB(set_mode)(unsigned flags) {
    return bpt_trace_pattern(sess, "b:_/_", flags ? flags : BPT_OFF, NULL) < 0 ? -1 : 0;
}

const char *AB(error)(void) { return bpt_last_error(); }
int AB(probes)(void) { return BPT_PROBES; }

void AB(stop)(void) {
    atomic_store(&draining, 0);
    pthread_join(drainer_thread, NULL);
}
#endif

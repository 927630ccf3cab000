/* bench/vs_urcu.c (section 3): thread progress against liburcu's memb flavour
   (-lurcu-memb). Read side: bpt_thread_progress_pin/unpin against
   rcu_read_lock/unlock, both inlined (bptrace's internal bpt__pin/bpt__unpin,
   as the hit path inlines them; liburcu with _LGPL_SOURCE) and through the
   library call. Grace periods: bpt_thread_progress_wait against
   synchronize_rcu, with 1 and 2 reader threads busy in read-side sections. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>
#include "bench.h"
#include <pthread.h>

extern void urcu_memb_read_lock_call(void) __asm__("urcu_memb_read_lock");
extern void urcu_memb_read_unlock_call(void) __asm__("urcu_memb_read_unlock");

enum { RUNS = 9, PAIRS = 5000000, WAITS = 200 };

static bench_stat read_side(int which) {
    double v[RUNS];
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = bench_now();
        for (int i = 0; i < PAIRS; i++) {
            switch (which) {
            case 0: bpt_thread_progress_pin(); __asm__ volatile("" ::: "memory"); bpt_thread_progress_unpin(); break;
            case 1: urcu_memb_read_lock(); __asm__ volatile("" ::: "memory"); urcu_memb_read_unlock(); break;
            case 3: bpt__unpin(bpt__pin()); break;   /* the pair the hit path inlines */
            default: urcu_memb_read_lock_call(); __asm__ volatile("" ::: "memory"); urcu_memb_read_unlock_call(); break;
            }
        }
        v[r] = (double)(bench_now() - t0) / PAIRS;
    }
    return bench_stats(v, RUNS);
}

static _Atomic int running;
static _Atomic int ready;
static volatile long sink;
static void *reader(void *arg) {
    int urcu = (int)(intptr_t)arg;
    if (urcu) urcu_memb_register_thread();
    atomic_fetch_add(&ready, 1);
    while (atomic_load_explicit(&running, memory_order_relaxed)) {
        if (urcu) urcu_memb_read_lock(); else bpt_thread_progress_pin();
        for (int k = 0; k < 50; k++) sink = sink + k;      /* a short read-side section */
        if (urcu) urcu_memb_read_unlock(); else bpt_thread_progress_unpin();
    }
    if (urcu) urcu_memb_unregister_thread();
    return NULL;
}

/* Grace periods with `readers` busy readers: urcu's, bptrace's plain wait,
   or (sync_core) bptrace's wait that also serializes every thread's
   instruction stream, as the protocol's steps 6 and 10 do after code
   writes: one round of IPIs, as the plain wait's (progress.c). */
static bench_stat waits(int urcu, int readers, int sync_core) {
    static double v[WAITS];
    pthread_t th[2];
    atomic_store(&running, 1);
    atomic_store(&ready, 0);
    for (int i = 0; i < readers; i++) pthread_create(&th[i], NULL, reader, (void *)(intptr_t)urcu);
    while (atomic_load(&ready) < readers) ;
    for (int i = 0; i < WAITS; i++) {
        uint64_t t0 = bench_now();
        if (urcu) urcu_memb_synchronize_rcu();
        else if (sync_core) bpt_thread_progress_wait_sync_core();
        else bpt_thread_progress_wait();
        v[i] = (double)(bench_now() - t0) / 1000.0;
    }
    atomic_store(&running, 0);
    for (int i = 0; i < readers; i++) pthread_join(th[i], NULL);
    return bench_stats(v, WAITS);
}

int main(void) {
    char ratio[64];
    bpt_progress_stats ps;
    bpt_thread_progress_stats(&ps);
    urcu_memb_register_thread();
    bench_stat b = read_side(0), ui = read_side(1), uc = read_side(2), bi = read_side(3);
    snprintf(ratio, sizeof ratio, "bpt/urcu inlined %.2fx", bi.med / ui.med);
    bench_row("3", "bpt pin+unpin (inlined, as the hit path)", bi, "ns/pair", ratio);
    bench_row("3", "bpt pin+unpin (library call)", b, "ns/pair", ps.membarrier ? "membarrier" : "fence pins");
    snprintf(ratio, sizeof ratio, "bpt/urcu %.2fx", b.med / ui.med);
    bench_row("3", "urcu memb read_lock+unlock (inlined)", ui, "ns/pair", ratio);
    snprintf(ratio, sizeof ratio, "bpt/urcu %.2fx", b.med / uc.med);
    bench_row("3", "urcu memb read_lock+unlock (library call)", uc, "ns/pair", ratio);
    urcu_memb_unregister_thread();
    for (int readers = 1; readers <= 2; readers++) {
        char what[80];
        bench_stat bw = waits(0, readers, 0), uw = waits(1, readers, 0), sw = waits(0, readers, 1);
        snprintf(what, sizeof what, "bpt_thread_progress_wait, %d busy reader%s", readers, readers > 1 ? "s" : "");
        bench_row("3", what, bw, "us/wait", "");
        snprintf(what, sizeof what, "bpt ..._wait_sync_core, %d busy reader%s", readers, readers > 1 ? "s" : "");
        snprintf(ratio, sizeof ratio, "over the plain wait %.2fx", sw.med / bw.med);
        bench_row("3", what, sw, "us/wait", ratio);
        snprintf(what, sizeof what, "urcu synchronize_rcu, %d busy reader%s", readers, readers > 1 ? "s" : "");
        snprintf(ratio, sizeof ratio, "bpt/urcu %.2fx", bw.med / uw.med);
        bench_row("3", what, uw, "us/wait", ratio);
    }
    return 0;
}

/* tests/bpt/target.c: a live, multi-threaded bptrace program for bpt (the
   outside reader) to look at. Three workers each hold a known traced stack,
   outer -> middle -> hold, and inside it call tick() without end; once_fn
   was called exactly 1234 times before they started, and the VM function
   vm:cb/0 100 times, each call handed to session "callback"'s tracer (its
   records are delivered, none unread). It prints
   "ready PID TID1 TID2 TID3" when every worker is inside hold(), then reads
   commands on stdin:

     info   prints "tick COUNT" (its own bpt_trace_info, session counts),
            "time CALLS NS" (tick's call_time in session times) and "spins S1 S2 S3"
            (each worker's loop count, which grows while the worker runs)
     pause  the workers stop calling tick() (they stay inside hold()):
            prints "paused" once none is inside tick, whose call_time
            then stops moving
     quit   stops the workers, destroys the sessions, exits 0

   --exit-after MS: exit by itself after MS milliseconds (the test of a
   target that exits while bpt reads it).
   --burn: inside hold(), the workers call burn(), a registered but untraced
   function that computes without calls, instead of tick(): the hottest
   function, for bpt sample.
   --corrupt-registry N: once ready, the registry as the root record shows
   it says N functions, and its array holds N pointers to the record of
   target:spare/0, a VM function no session traces: a corrupt length whose
   every record reads, in four reads (the test of bpt's memory budget).
   The program's own registry is then unusable: "quit" exits at once. */
#define _GNU_SOURCE
#define BPTRACE_IMPLEMENTATION
#include "bptrace.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { WORKERS = 3 };
static volatile int stop, inside, burning, pausing, paused;
static volatile unsigned long spins[WORKERS];
static int tids[WORKERS];

BPT_TRACEABLE long once_fn(long x) { return x + 1; }
BPT_TRACEABLE long tick(long x) { return x * 3; }
static long (*volatile call_tick)(long) = tick;
static long (*volatile call_once)(long) = once_fn;

BPT_TRACEABLE long burn(long x) {
    unsigned long h = (unsigned long)x, i;
    for (i = 0; i < 200000; i++) h = h * 6364136223846793005ul + 1442695040888963407ul;
    return (long)(h >> 33);
}
static long (*volatile call_burn)(long) = burn;

BPT_TRACEABLE long hold(long k) {
    long acc = 0;
    __atomic_fetch_add(&inside, 1, __ATOMIC_SEQ_CST);
    int acked = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&pausing, __ATOMIC_ACQUIRE)) {
            if (!acked) {   /* out of tick() for good */
                acked = 1;
                __atomic_fetch_add(&paused, 1, __ATOMIC_RELEASE);
            }
        } else {
            acc += burning ? call_burn(k) : call_tick(k);
        }
        spins[k]++;
    }
    return acc;
}
static long (*volatile call_hold)(long) = hold;
BPT_TRACEABLE long middle(long k) { return call_hold(k) + 1; }
static long (*volatile call_middle)(long) = middle;
BPT_TRACEABLE long outer(long k) { return call_middle(k) + 1; }
static long (*volatile call_outer)(long) = outer;

/* vm:cb/0, a VM function, and the callback tracer of its session. */
static bpt_vm_word cb_word = 0x100;
static bpt_func *cb_func;
static uint64_t cb_arg(const void *frame, int i) { (void)frame; (void)i; return 0; }
static const bpt_vm_ops cb_ops = { cb_arg, NULL, NULL };
static volatile int cb_calls;
static void cb_tracer(const bpt_msg *m, void *user) { (void)m; (void)user; cb_calls++; }
static void call_cb(void) {
    if (BPT_VM_FETCH(&cb_word) == 0xBEEF) bpt_vm_breakpoint(cb_func, NULL, NULL);
}

static void *worker(void *arg) {
    long k = (long)(intptr_t)arg;
    tids[k] = (int)syscall(SYS_gettid);
    call_outer(k);
    return NULL;
}

/* The registry's array and length, where the root record says they are
   (bptrace.h >>root: the globals FUNCS and NFUNCS), made to claim n copies
   of record f. */
static void corrupt_registry(uint32_t n, bpt_func *f) {
    bpt_func **fake = (bpt_func **)malloc(sizeof *fake * n);
    uint32_t i;
    if (!fake) { fprintf(stderr, "target: no memory for %u pointers\n", n); exit(1); }
    for (i = 0; i < n; i++) fake[i] = f;
    *(bpt_func ***)(uintptr_t)bpt_root.global[BPT_ROOT_G_FUNCS].p = fake;
    *(uint32_t *)(uintptr_t)bpt_root.global[BPT_ROOT_G_NFUNCS].p = n;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "target: %s: %d %s (%s)\n", what, rc, bpt_strerror(rc), bpt_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    static const struct { void *fn; const char *name; } fns[] = {
        { (void *)once_fn, "once_fn" }, { (void *)tick, "tick" }, { (void *)hold, "hold" },
        { (void *)middle, "middle" }, { (void *)outer, "outer" }, { (void *)burn, "burn" } };
    bpt_func *f[6];
    bpt_session counts, stacks, times, callback;
    bpt_session_desc d;
    pthread_t th[WORKERS];
    char line[64];
    long exit_after = -1, corrupt = 0, i;
    int rc;
    if (argc == 3 && !strcmp(argv[1], "--exit-after")) exit_after = atol(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "--burn")) burning = 1;
    if (argc == 3 && !strcmp(argv[1], "--corrupt-registry")) corrupt = atol(argv[2]);
    for (i = 0; i < 6; i++)
        if ((rc = bpt_register_native(fns[i].fn, "target", fns[i].name, 1, &f[i])) < 0) fail("register", rc);
    memset(&d, 0, sizeof d);
    d.name = "counts";
    if ((rc = bpt_session_create(&d, &counts)) < 0) fail("session counts", rc);
    d.name = "stacks";
    if ((rc = bpt_session_create(&d, &stacks)) < 0) fail("session stacks", rc);
    d.name = "times";
    if ((rc = bpt_session_create(&d, &times)) < 0) fail("session times", rc);
    d.name = "callback";
    d.tracer = cb_tracer;
    if ((rc = bpt_session_create(&d, &callback)) < 0) fail("session callback", rc);
    if ((rc = bpt_register_vm(&cb_word, 0xBEEF, "vm", "cb", 0, &cb_ops, &cb_func)) < 0) fail("register vm", rc);
    if ((rc = bpt_trace_pattern(callback, "vm:cb/0", BPT_CALL, NULL)) != 1) fail("pattern callback", rc);
    for (i = 0; i < 100; i++) call_cb();
    if (cb_calls != 100) fail("callback calls", cb_calls);
    if ((rc = bpt_trace_pattern(times, "target:tick/1", BPT_TIME, NULL)) != 1) fail("pattern time", rc);
    if ((rc = bpt_trace_pattern(counts, "target:tick/1", BPT_COUNT, NULL)) != 1) fail("pattern tick", rc);
    if ((rc = bpt_trace_pattern(counts, "target:once_fn/1", BPT_COUNT, NULL)) != 1) fail("pattern once_fn", rc);
    if ((rc = bpt_trace_pattern(stacks, "target:*/1", BPT_CALL | BPT_RETURN, NULL)) != 6) fail("pattern stacks", rc);
    if ((rc = bpt_trace_pattern(stacks, "target:burn/1", BPT_CALL | BPT_OFF, NULL)) != 1) fail("pattern burn off", rc);
    if ((rc = bpt_trace_pattern(stacks, "target:tick/1", BPT_CALL | BPT_OFF, NULL)) != 1) fail("pattern tick off", rc);
    if ((rc = bpt_trace_pattern(stacks, "target:once_fn/1", BPT_CALL | BPT_OFF, NULL)) != 1) fail("pattern once off", rc);
    for (i = 0; i < 1234; i++) call_once(i);
    for (i = 0; i < WORKERS; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    while (__atomic_load_n(&inside, __ATOMIC_ACQUIRE) < WORKERS) usleep(1000);
    if (corrupt > 0) {
        static bpt_vm_word spare_word = 0x200;
        bpt_func *spare;
        if ((rc = bpt_register_vm(&spare_word, 0xBEEF, "target", "spare", 0, &cb_ops, &spare)) < 0) fail("register spare", rc);
        corrupt_registry((uint32_t)corrupt, spare);
    }
    printf("ready %d %d %d %d\n", (int)getpid(), tids[0], tids[1], tids[2]);
    fflush(stdout);
    if (exit_after >= 0) {
        usleep((useconds_t)exit_after * 1000);
        _exit(0);
    }
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "info", 4)) {
            bpt_info info;
            memset(&info, 0, sizeof info);
            if ((rc = bpt_trace_info(counts, f[1], BPT_INFO_COUNT, &info)) < 0) fail("trace_info", rc);
            printf("tick %llu\n", (unsigned long long)info.count);
            memset(&info, 0, sizeof info);
            if ((rc = bpt_trace_info(times, f[1], BPT_INFO_TIME, &info)) < 0) fail("trace_info time", rc);
            printf("time %llu %llu\nspins %lu %lu %lu\n", (unsigned long long)info.calls, (unsigned long long)info.time_ns,
                   spins[0], spins[1], spins[2]);
            fflush(stdout);
        } else if (!strncmp(line, "pause", 5)) {
            __atomic_store_n(&pausing, 1, __ATOMIC_RELEASE);
            while (__atomic_load_n(&paused, __ATOMIC_ACQUIRE) < WORKERS) usleep(1000);
            printf("paused\n");
            fflush(stdout);
        } else if (!strncmp(line, "quit", 4)) {
            if (corrupt) _exit(0);   /* its registry is not its own */
            break;
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
    if ((rc = bpt_session_destroy(stacks)) < 0 || (rc = bpt_session_destroy(counts)) < 0 ||
        (rc = bpt_session_destroy(times)) < 0 || (rc = bpt_session_destroy(callback)) < 0)
        fail("destroy", rc);
    return 0;
}

/* clock.c: timestamps. Every event's time (call, return, call_time's own
   time) is read on the hit path, so it must be cheap: the CPU's counter,
   not clock_gettime (23-43 ns a read on a virtual machine, 1-3 reads a
   traced call). The counter's rate is calibrated once against
   CLOCK_MONOTONIC; its offset is not trusted for long:

       ns = anchor_ns + (ticks - anchor_tick) * ns_per_tick

   where (anchor_tick, anchor_ns) is a pair of readings of both clocks taken
   together, at most BPT__ANCHOR_US old in the thread's own stream: every
   lane of a session writes a fresh anchor when it opens a chunk and when its
   last one is older than that (session.c), and the reader converts each
   record with its stream's latest anchor (record.c). Three things follow:
     - the stamps stay on CLOCK_MONOTONIC: the calibration's rate error
       (about 1e-5 from 2 ms of measurement) moves a stamp by at most
       1e-5 x BPT__ANCHOR_US, not by 1e-5 x the process's age;
     - a counter that jumps (a virtual machine restored from a snapshot or
       migrated: the reason a hypervisor's kernel boots with tsc=unstable and
       keeps time with kvm-clock) gives a thread stamps off by at most one
       anchor's span, and only while the jump is less than that span: a
       record more than a span past its anchor, or before it, gets a new one;
     - the counter is used where the CPU says it is invariant, whichever
       clocksource the kernel chose (the kernel's kvm-clock is itself this
       counter, scaled per vCPU): cores whose counters disagree cost a thread
       that migrates between them the disagreement, until its next anchor.
   ns_per_tick is kept as a whole part and a 32-bit fraction, so that the
   conversion needs only 64-bit multiplies (tcc has no 128-bit integer).
   Durations (call_time, the protocol's timings) are differences of two
   readings of one thread, scaled by the rate: no anchor needed.

   The counters:
     x86-64    rdtsc, where CPUID says the TSC is invariant (leaf 0x80000007,
               EDX bit 8: it ticks at one rate in every P- and C-state). Its
               rate is measured against CLOCK_MONOTONIC over 2 ms, once.
     aarch64   CNTVCT_EL0, the generic timer's virtual count, the same on
               every core by the architecture, at CNTFRQ_EL0 Hz.
     otherwise clock_gettime(CLOCK_MONOTONIC) itself (tcc on aarch64 does
               not exist; BPT_NO_CYCLE_CLOCK forces it); its anchors are the
               identity.
   bpt_clock_info says which is in use. */
#include "internal.h"

enum { BPT__CLOCK_GETTIME = 0, BPT__CLOCK_TSC = 1, BPT__CLOCK_CNTVCT = 2 };

static struct {
    bpt__clock_cal cal;           /* set once, before ready */
    bpt__atomic_u32 ready;        /* release-stored after cal [K1] */
    bpt__atomic_u32 on_counter;   /* ready, and the CPU's counter is the clock: the hit
                                     path's one test (release-stored after ready [K1]) */
} bpt__clock;
static pthread_once_t bpt__clock_once = PTHREAD_ONCE_INIT;

static uint64_t bpt__clock_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_TSC
BPT__HOT BPT__INTREGS uint64_t bpt__clock_ticks(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* Is the TSC invariant? (Whether the kernel keeps time with it does not
   matter: the anchors bound what a jump or a disagreement between cores can
   do; the comment at the top says how.) */
static int bpt__clock_counter_usable(void) {
    uint32_t r[4];
    return bpt__cpuid_ext(0x80000007u, r) && (r[3] & (1u << 8)) != 0;   /* EDX bit 8: invariant TSC */
}

static uint64_t bpt__clock_nominal_hz(void) { return 0; }   /* measured (bpt__clock_rate) */
#elif defined(__aarch64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_CNTVCT
BPT__HOT BPT__INTREGS uint64_t bpt__clock_ticks(void) {
    uint64_t v;
    /* isb: the read is not taken early, before the code around it. */
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}
static int bpt__clock_counter_usable(void) { return 1; }
static uint64_t bpt__clock_nominal_hz(void) {
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    return hz;
}
#endif

#if defined(BPT__CLOCK_COUNTER)
/* The two clocks read together: the counter on either side of a
   CLOCK_MONOTONIC read, its midpoint taken; the best of `tries` pairs (the
   closest two counter readings), so that a read preempted half-way does
   not count. */
static void bpt__clock_pair(int tries, uint64_t *tick, uint64_t *ns) {
    uint64_t best = ~(uint64_t)0;
    int i;
    *tick = *ns = 0;
    for (i = 0; i < tries; i++) {
        uint64_t a = bpt__clock_ticks(), m = bpt__clock_monotonic(), b = bpt__clock_ticks();
        if (b - a < best) { best = b - a; *tick = a + (b - a) / 2; *ns = m; }
    }
}

/* Ticks per second: the architecture's stated rate, or the counter against
   CLOCK_MONOTONIC over 2 ms, each end the best of 5 pairs. */
static uint64_t bpt__clock_rate(void) {
    uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0, hz = bpt__clock_nominal_hz();
    if (hz) return hz;
    bpt__clock_pair(5, &t0, &n0);
    do bpt__clock_pair(5, &t1, &n1); while (n1 - n0 < 2000000u);
    return (uint64_t)((double)(t1 - t0) * 1e9 / (double)(n1 - n0) + 0.5);
}
#endif

static void bpt__clock_init(void) {
    bpt__clock_cal *c = &bpt__clock.cal;
#if defined(BPT__CLOCK_COUNTER)
    uint64_t hz;
    if (bpt__clock_counter_usable() && (hz = bpt__clock_rate()) != 0) {
        c->hz = hz;
        c->mul_whole = 1000000000u / hz;
        c->mul_frac = (uint64_t)(((double)(1000000000u % hz) / (double)hz) * 4294967296.0);
        bpt__clock_pair(5, &c->tick0, &c->ns0);
        c->source = BPT__CLOCK_COUNTER;
    } else
#endif
    {   /* the ticks are CLOCK_MONOTONIC's ns: the conversion is the identity */
        c->hz = 1000000000u;
        c->mul_whole = 1;
        c->source = BPT__CLOCK_GETTIME;
    }
    bpt__store_release_u32(&bpt__clock.ready, 1);   /* [K1] */
#if defined(BPT__CLOCK_COUNTER)
    if (c->source == BPT__CLOCK_COUNTER) bpt__store_release_u32(&bpt__clock.on_counter, 1);   /* [K1] */
#endif
}

/* Calibrate, once per process. Thread progress's initialisation calls it,
   before any hit can happen (a hit pins first), so that a signal handler's
   hit never runs pthread_once. */
BPT__PRIVATE void bpt__clock_calibrate(void) {
    pthread_once(&bpt__clock_once, bpt__clock_init);
}

/* The counter: what a record keeps. One instruction where the CPU's
   counter is usable; no conversion. */
BPT__HOT uint64_t bpt__now_ticks(void) {
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter))) return bpt__clock_ticks();   /* [K1] */
#endif
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_ticks();
#endif
    return bpt__clock_monotonic();
}

/* The counter for a path that keeps to the integer registers and makes
   no call (>>intregs in port.h; the call path, site_native.c): 1 and the
   reading in *ticks where the CPU's counter is the clock, else 0 and 0 in
   *ticks, nothing read (the full path reads clock_gettime). */
BPT__HOT BPT__INTREGS int bpt__now_ticks_counter(uint64_t *ticks) {
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter))) {   /* [K1] */
        *ticks = bpt__clock_ticks();
        return 1;
    }
#endif
    *ticks = 0;   /* set on every path: gcc -Og cannot tell that callers read it only after a 1 */
    return 0;
}

/* d ticks in ns with calibration c: three 64-bit multiplies (no 128-bit
   integer: tcc has none). */
BPT__HOT BPT__INTREGS uint64_t bpt__clock_scale(const bpt__clock_cal *c, uint64_t d) {
    uint64_t lo = d & 0xffffffffu, hi = d >> 32;
    return d * c->mul_whole + hi * c->mul_frac + ((lo * c->mul_frac) >> 32);
}

/* Ticks to ns from the calibration's own pair: for durations and for
   stamps that need no anchor. A reading a few cycles before the
   calibration's, on another core, counts as the calibration's instant. */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks) {
    uint64_t d = ticks - c->tick0;
    return c->ns0 + ((int64_t)d < 0 ? 0 : bpt__clock_scale(c, d));
}

/* A span of d ticks of the counter (bpt__now_ticks) in ns: call_time's
   frames keep their start in ticks and convert each span they run once
   (frames.c). With clock_gettime the ticks are ns and this is the
   identity. A negative span (d above 2^63: a reading taken before the
   start it is measured from, as when a signal handler restarted a frame
   after its thread read the clock, or a core's counter a few cycles
   behind another's) is 0: converted, it would be a huge span, where the
   ns difference it replaces wrapped back harmlessly. Integer registers,
   no call (the time path, site_native.c). The calibration is complete:
   d is the difference of two readings of bpt__now_ticks, which
   calibrates first [K1]. */
BPT__HOT BPT__INTREGS uint64_t bpt__ticks_ns(uint64_t d) {
    return (int64_t)d < 0 ? 0 : bpt__clock_scale(&bpt__clock.cal, d);
}

/* Ticks to ns from an anchor: the pair (anchor_tick, anchor_ns) read
   together, before or after `ticks` (a lane writes its anchor just ahead
   of the record that found it stale, so that record's reading is a little
   earlier than the anchor's). */
BPT__PRIVATE uint64_t bpt__clock_anchored_ns(const bpt__clock_cal *c, uint64_t anchor_tick, uint64_t anchor_ns,
                                             uint64_t ticks) {
    uint64_t d = ticks - anchor_tick, back;
    if ((int64_t)d >= 0) return anchor_ns + bpt__clock_scale(c, d);
    back = bpt__clock_scale(c, (uint64_t)0 - d);
    return back < anchor_ns ? anchor_ns - back : 0;
}

/* A new anchor: both clocks read now (the best of 2 pairs: about 80 ns,
   once per BPT__ANCHOR_US of a thread's records at most). With no counter,
   the ticks are ns already and the anchor is the identity. */
BPT__PRIVATE void bpt__clock_anchor(uint64_t *tick, uint64_t *ns) {
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) {
        bpt__clock_pair(2, tick, ns);
        return;
    }
#endif
    *tick = *ns = bpt__clock_monotonic();
}

/* How many ticks an anchor serves: BPT__ANCHOR_US of the counter; with no
   counter, for ever (the identity does not age). */
BPT__PRIVATE uint64_t bpt__clock_anchor_span(void) {
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
    if (bpt__clock.cal.source == BPT__CLOCK_GETTIME) return ~(uint64_t)0;
    return bpt__clock.cal.hz / (1000000u / BPT__ANCHOR_US);
}

BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out) {
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
    *out = bpt__clock.cal;
}

/* Nanoseconds on CLOCK_MONOTONIC's scale: one counter read and three
   multiplies, once calibrated. */
BPT__HOT uint64_t bpt__now_ns(void) {
    uint64_t t;
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter)))   /* [K1] */
        return bpt__clock_cal_ns(&bpt__clock.cal, bpt__clock_ticks());
#endif
    t = bpt__now_ticks();   /* calibrates if it must */
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_cal_ns(&bpt__clock.cal, t);
#endif
    return t;
}

/* The calling thread's CPU time, ns (CLOCK_THREAD_CPUTIME_ID: a system
   call, async-signal-safe): call_time's clock for sessions created with
   time_cpu, which charge no time while a thread is scheduled out, as BEAM
   charges none while a process is. */
BPT__PRIVATE uint64_t bpt__thread_cpu_ns(void) {
    struct timespec ts;
    int saved = errno;
    uint64_t ns = 0;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    errno = saved;
    return ns ? ns : 1;   /* 0 means "paused" to a frame (frames.h) */
}

int bpt_clock_info(bpt_clock *out) {
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_clock_info: out is NULL");
    (void)bpt__now_ns();   /* calibrated */
    out->source = bpt__clock.cal.source == BPT__CLOCK_TSC ? "tsc" :
                  bpt__clock.cal.source == BPT__CLOCK_CNTVCT ? "cntvct" : "clock_gettime";
    out->hz = bpt__clock.cal.hz;
    return 0;
}

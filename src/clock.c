/* clock.c: timestamps. Every event's time (call, return, call_time's own
   time) is read on the hit path, so it must be cheap: the CPU's counter,
   not clock_gettime (23-43 ns a read on a virtual machine, 1-3 reads a
   traced call). The counter is converted to nanoseconds on
   CLOCK_MONOTONIC's scale with a calibration taken once:

       ns = ns0 + (ticks - tick0) * ns_per_tick

   ns_per_tick is kept as a whole part and a 32-bit fraction, so that the
   conversion needs only 64-bit multiplies (tcc has no 128-bit integer).

   The counters:
     x86-64    rdtsc, where CPUID says the TSC is invariant (leaf 0x80000007,
               EDX bit 8: it ticks at one rate in every P- and C-state) and
               the kernel's own clocksource is "tsc" (the kernel checked that
               the cores' TSCs agree; it falls back to another clocksource
               when they do not). Its rate is measured against
               CLOCK_MONOTONIC over 2 ms, once.
     aarch64   CNTVCT_EL0, the generic timer's virtual count, the same on
               every core by the architecture, at CNTFRQ_EL0 Hz.
     otherwise clock_gettime(CLOCK_MONOTONIC) itself (tcc on aarch64 does
               not exist; BPT_NO_CYCLE_CLOCK forces it).
   bpt_clock_info says which is in use. CLOCK_MONOTONIC may be slewed by NTP
   after the calibration; the counter is not, so the two drift apart by at
   most the slew (NTP slews at most 500 ppm). */
#include "internal.h"

enum { BPT__CLOCK_GETTIME = 0, BPT__CLOCK_TSC = 1, BPT__CLOCK_CNTVCT = 2 };

static struct {
    bpt__clock_cal cal;           /* set once, before ready */
    bpt__atomic_u32 ready;        /* release-stored after cal [K1] */
} bpt__clock;
static pthread_once_t bpt__clock_once = PTHREAD_ONCE_INIT;

static uint64_t bpt__clock_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_TSC
static inline uint64_t bpt__clock_ticks(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* Is the TSC invariant, and does the kernel keep its clock with it? */
static int bpt__clock_counter_usable(void) {
    uint32_t a = 0x80000000u, b, c, d;
    char name[16] = { 0 };
    int fd;
    ssize_t n;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
    if (a < 0x80000007u) return 0;
    a = 0x80000007u;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
    if (!(d & (1u << 8))) return 0;
    if ((fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, name, sizeof name - 1);
    close(fd);
    return n >= 3 && strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
}

/* Ticks per second: the TSC against CLOCK_MONOTONIC over 2 ms. Each end is
   the reading whose two TSC samples around clock_gettime are closest, so a
   preempted read does not count. */
static void bpt__clock_pair(uint64_t *tick, uint64_t *ns) {
    uint64_t best = ~(uint64_t)0;
    int i;
    for (i = 0; i < 5; i++) {
        uint64_t a = bpt__clock_ticks(), m = bpt__clock_monotonic(), b = bpt__clock_ticks();
        if (b - a < best) { best = b - a; *tick = a + (b - a) / 2; *ns = m; }
    }
}

static uint64_t bpt__clock_rate(void) {
    uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;
    bpt__clock_pair(&t0, &n0);
    do bpt__clock_pair(&t1, &n1); while (n1 - n0 < 2000000u);
    return (uint64_t)((double)(t1 - t0) * 1e9 / (double)(n1 - n0) + 0.5);
}
#elif defined(__aarch64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_CNTVCT
static inline uint64_t bpt__clock_ticks(void) {
    uint64_t v;
    /* isb: the read is not taken early, before the code around it. */
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}
static int bpt__clock_counter_usable(void) { return 1; }
static void bpt__clock_pair(uint64_t *tick, uint64_t *ns) {
    uint64_t a = bpt__clock_ticks(), m = bpt__clock_monotonic(), b = bpt__clock_ticks();
    *tick = a + (b - a) / 2;
    *ns = m;
}
static uint64_t bpt__clock_rate(void) {
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    return hz;
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
        bpt__clock_pair(&c->tick0, &c->ns0);
        c->source = BPT__CLOCK_COUNTER;
    } else
#endif
    {   /* the ticks are CLOCK_MONOTONIC's ns: the conversion is the identity */
        c->hz = 1000000000u;
        c->mul_whole = 1;
        c->source = BPT__CLOCK_GETTIME;
    }
    bpt__store_release_u32(&bpt__clock.ready, 1);   /* [K1] */
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
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_ticks();
#endif
    return bpt__clock_monotonic();
}

/* Ticks to ns with calibration c: three 64-bit multiplies (no 128-bit
   integer: tcc has none). A reading a few cycles before the calibration's,
   on another core, counts as the calibration's instant. */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks) {
    uint64_t d = ticks - c->tick0, lo, hi;
    if ((int64_t)d < 0) d = 0;
    lo = d & 0xffffffffu;
    hi = d >> 32;
    return c->ns0 + d * c->mul_whole + hi * c->mul_frac + ((lo * c->mul_frac) >> 32);
}

BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out) {
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
    *out = bpt__clock.cal;
}

/* Nanoseconds on CLOCK_MONOTONIC's scale: one counter read and three
   multiplies, once calibrated. */
BPT__HOT uint64_t bpt__now_ns(void) {
    uint64_t t = bpt__now_ticks();
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_cal_ns(&bpt__clock.cal, t);
#endif
    return t;
}

int bpt_clock_info(bpt_clock *out) {
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_clock_info: out is NULL");
    (void)bpt__now_ns();   /* calibrated */
    out->source = bpt__clock.cal.source == BPT__CLOCK_TSC ? "tsc" :
                  bpt__clock.cal.source == BPT__CLOCK_CNTVCT ? "cntvct" : "clock_gettime";
    out->hz = bpt__clock.cal.hz;
    return 0;
}

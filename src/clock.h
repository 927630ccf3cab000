/* clock.h: what other parts use of the clock (clock.c): every timestamp
   bptrace takes, in nanoseconds on CLOCK_MONOTONIC's scale, read from the
   CPU's counter where one is usable; and the counter itself, for records,
   converted to ns only when they are read, from an anchor. */

/* A calibration: ns = ns0 + (ticks - tick0) * (mul_whole + mul_frac / 2^32). */
typedef struct bpt__clock_cal {
    uint32_t source;              /* 0 clock_gettime (ticks are ns), 1 tsc, 2 cntvct */
    uint64_t hz, tick0, ns0, mul_whole, mul_frac;
} bpt__clock_cal;

BPT__HOT uint64_t bpt__now_ns(void);
BPT__HOT uint64_t bpt__now_ticks(void);   /* the counter (ns for clock_gettime) */
BPT__HOT BPT__INTREGS int bpt__now_ticks_counter(uint64_t *ticks);   /* 0: not on the CPU's counter */
BPT__HOT BPT__INTREGS uint64_t bpt__ticks_ns(uint64_t d);   /* a span of d ticks, in ns (call_time's frames) */
BPT__PRIVATE void bpt__clock_calibrate(void);   /* once; thread progress's init calls it */
BPT__PRIVATE uint64_t bpt__thread_cpu_ns(void);   /* the thread's CPU time (call_time with time_cpu) */
BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out);   /* the live calibration */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks);

/* Anchors (clock.c's first comment): a record's stamp is its ticks
   converted from the latest anchor of its thread's stream, a pair of
   readings of the counter and CLOCK_MONOTONIC at most BPT__ANCHOR_US old. */
enum { BPT__ANCHOR_US = 1000 };
BPT__PRIVATE void bpt__clock_anchor(uint64_t *tick, uint64_t *ns);   /* both clocks, now */
BPT__PRIVATE uint64_t bpt__clock_anchor_span(void);   /* ticks an anchor serves */
BPT__PRIVATE uint64_t bpt__clock_anchored_ns(const bpt__clock_cal *c, uint64_t anchor_tick, uint64_t anchor_ns,
                                             uint64_t ticks);

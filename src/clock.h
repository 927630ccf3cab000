/* clock.h: what other parts use of the clock (clock.c): every timestamp
   bptrace takes, in nanoseconds on CLOCK_MONOTONIC's scale, read from the
   CPU's counter where one is usable; and the counter itself, for records,
   converted to ns only when they are read. */

/* A calibration: ns = ns0 + (ticks - tick0) * (mul_whole + mul_frac / 2^32). */
typedef struct bpt__clock_cal {
    uint32_t source;              /* 0 clock_gettime (ticks are ns), 1 tsc, 2 cntvct */
    uint64_t hz, tick0, ns0, mul_whole, mul_frac;
} bpt__clock_cal;

BPT__HOT uint64_t bpt__now_ns(void);
BPT__HOT uint64_t bpt__now_ticks(void);   /* the counter (ns for clock_gettime) */
BPT__PRIVATE void bpt__clock_calibrate(void);   /* once; thread progress's init calls it */
BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out);   /* the live calibration */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks);

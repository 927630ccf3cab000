/* clock.h: what other parts use of the clock (clock.c): every timestamp
   bptrace takes, in nanoseconds on CLOCK_MONOTONIC's scale, read from the
   CPU's counter where one is usable. */

BPT__HOT uint64_t bpt__now_ns(void);
BPT__PRIVATE void bpt__clock_calibrate(void);   /* once; thread progress's init calls it */

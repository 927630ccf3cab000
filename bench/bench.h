/* bench/bench.h: what every benchmark shares: a monotonic clock, medians with
   their spread, and the one row format `make bench` prints. Benchmarks print
   figures and ratios; they assert nothing. */
#ifndef BENCH_H
#define BENCH_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* med, min, max of n samples (sorted in place). */
typedef struct { double med, min, max; } bench_stat;
static inline bench_stat bench_stats(double *v, int n) {
    bench_stat s;
    qsort(v, (size_t)n, sizeof v[0], bench_cmp);
    s.med = (n & 1) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

/* One row of the table: section, what, median, min..max, unit, ratio text. */
static inline void bench_row(const char *sec, const char *what, bench_stat s, const char *unit,
                             const char *ratio) {
    printf("%-4s %-46s %11.2f  %11.2f..%-11.2f %-9s %s\n", sec, what, s.med, s.min, s.max, unit,
           ratio ? ratio : "");
    fflush(stdout);
}
static inline void bench_note(const char *sec, const char *text) {
    printf("%-4s   %s\n", sec, text);
    fflush(stdout);
}
#endif

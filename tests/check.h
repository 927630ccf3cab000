/* check.h: the few macros every bptrace test uses.
   A test is one program: it prints what it measured, calls CHECK for each
   claim, and exits 0 only if every CHECK held. tests/run counts programs.
   A test with nothing to run in its configuration (no native sites with tcc)
   returns CHECK_SKIP(reason): it prints "SKIPPED: reason" and exits with
   CHECK_SKIP_STATUS, which tests/run counts as skipped, never as passed. */
#ifndef BPT_CHECK_H
#define BPT_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond, ...) do { \
    if (!(cond)) { \
        check_failures++; \
        fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
    } } while (0)

/* Check an int-returning call against an expected code, printing bpt_last_error(). */
#define CHECK_RC(expr, expected) do { \
    int check_rc_ = (expr); \
    CHECK(check_rc_ == (expected), "%s returned %d (%s), expected %d (%s); last error: %s", \
          #expr, check_rc_, bpt_strerror(check_rc_), (int)(expected), \
          bpt_strerror((int)(expected)), bpt_last_error()); \
    } while (0)

/* automake's convention for "skipped"; tests/run and its sub-runners use it too. */
#define CHECK_SKIP_STATUS 77
/* Skip, unless a CHECK already failed (then the test fails). */
#define CHECK_SKIP(reason) (check_failures ? CHECK_DONE() : (printf("SKIPPED: %s\n", (reason)), CHECK_SKIP_STATUS))

#define CHECK_DONE() (check_failures ? (fprintf(stderr, "%d check(s) failed\n", check_failures), 1) : 0)

/* Iteration counts shrink under emulation and sanitizers: tests/run sets BPT_TEST_SCALE. */
static inline long check_scale(long n) {
    const char *s = getenv("BPT_TEST_SCALE");
    long d = s ? atol(s) : 1;
    if (d < 1) d = 1;
    return n / d > 0 ? n / d : 1;
}
#endif

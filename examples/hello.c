/* hello.c: trace one C function's calls and returns; print them as dbg does. */
#define BPTRACE_IMPLEMENTATION   /* in exactly one .c file, before any other #include */
#include "bptrace.h"

BPT_TRACEABLE long add(long a, long b) { return a + b; }
static long (*volatile call_add)(long, long) = add;   /* a real call, never inlined */

static int fail(const char *what, int rc) {
    fprintf(stderr, "hello: %s: %d %s (%s)\n", what, rc, bpt_strerror(rc), bpt_last_error());
    return 1;
}

int main(void) {
    bpt_func *f;
    bpt_session s;
    bpt_msg msgs[16];
    char line[256];
    int rc, n, i;
    if ((rc = bpt_register_native((void *)add, "hello", "add", 2, &f)) < 0) return fail("register", rc);
    if ((rc = bpt_session_create(NULL, &s)) < 0) return fail("session", rc);
    /* Call trace with return trace; it returns how many functions matched. */
    if ((rc = bpt_trace_pattern(s, "hello:add/2", BPT_CALL | BPT_RETURN, NULL)) != 1) return fail("pattern", rc);
    printf("add(2, 3) = %ld\n", call_add(2, 3));
    n = bpt_session_drain(s, msgs, 16);              /* the messages of every thread */
    for (i = 0; i < n; i++) {
        bpt_format_dbg(&msgs[i], line, sizeof line);
        puts(line);
    }
    if ((rc = bpt_session_destroy(s)) < 0) return fail("destroy", rc);   /* add's entry is as compiled again */
    if ((rc = bpt_unregister(f)) < 0) return fail("unregister", rc);
    return n == 2 ? 0 : fail("drain: expected a call and its return_from", n);
}

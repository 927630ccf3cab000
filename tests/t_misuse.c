/* t_misuse.c: every documented misuse returns its BPT_E* code, sets
   bpt_last_error, does not crash and changes nothing.

   A fake VM site "vm:f/1" (code_f[0]) is counted by session "counter"
   (BPT_COUNT) and call-traced by session "messages" (BPT_CALL). After every
   case, verify() calls f three times and checks that the count rose by exactly
   3, that the breakpoint word is still installed, that the function set is
   unchanged and that exactly 3 call messages can be drained: a misuse that
   half-applied (a pattern parsed too leniently, a flag ignored, a session
   destroyed from a callback, a leaked registration) shows up there.

   Before each case a known failure stamps bpt_last_error with a marker (a
   lookup of an unregistered name; inside a tracer callback or a pinned
   section, where lookups are refused, a bpt_format_dbg(NULL) call); after the
   case the message must be non-empty and no longer the marker, so a failure
   that forgets to set its message is caught.

   Output: one table line per case: number, case, returned code, last error.

   BPT_TEST_CONCURRENCY (tests/run: also run this test under TSAN) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#ifndef BPT_MAX_SESSIONS
#define BPT_MAX_SESSIONS 64   /* the documented default */
#endif

#define BP_WORD ((bpt_vm_word)0xB9B9B9u)   /* the fake VM's breakpoint opcode */
#define ORIG_F  ((bpt_vm_word)0x1001u)
#define ORIG_G  ((bpt_vm_word)0x2002u)
#define ORIG_H  ((bpt_vm_word)0x3003u)

static bpt_vm_word code_f[4] = { ORIG_F, 11, 12, 13 };
static bpt_vm_word code_g[4] = { ORIG_G, 21, 22, 23 };
static bpt_vm_word code_h[4] = { ORIG_H, 31, 32, 33 };
static bpt_func *f;
static bpt_session S;      /* "counter": BPT_COUNT on vm:f/1 */
static bpt_session S2;     /* "messages": BPT_CALL on vm:f/1 */
static uint64_t expect_count;
static int expect_funcs;
static int ncases;
static const char *volatile current_case = "setup";

/* ---- safety timeout: a misuse that deadlocks (e.g. a set-path call from a
   tracer callback that is not refused) must fail, not hang ---- */
static void on_alarm(int sig) {
    static const char msg[] = "t_misuse.c: CHECK failed: watchdog: a case did not return within 20 s: ";
    const char *c = current_case;
    ssize_t r;
    (void)sig;
    r = write(2, msg, sizeof msg - 1);
    r = write(2, c, strlen(c));
    r = write(2, "\n", 1);
    (void)r;
    _exit(3);
}

static const char *code_name(int rc) {
#define T_NAME(name, value, text) if (rc == (value)) return #name;
    BPT_ERRORS(T_NAME)
#undef T_NAME
    return rc > 0 ? "(a count)" : "(not a BPT_E*)";
}

#define MARK "t_misuse-marker"
static void stamp_last_error(void) {
    bpt_func *x = NULL;
    int rc = bpt_func_lookup(MARK, MARK, 0, &x);
    CHECK(rc == BPT_ENOENT, "marker lookup returned %d", rc);
    CHECK(strstr(bpt_last_error(), MARK) != NULL, "marker message missing: '%s'", bpt_last_error());
}
/* The marker where the thread is pinned or inside a tracer callback: a call
   that touches no shared state. */
#define MARK2 "bpt_format_dbg"
static void stamp_last_error_pinned(void) {
    int rc = bpt_format_dbg(NULL, NULL, 0);
    CHECK(rc == BPT_EINVAL, "marker bpt_format_dbg(NULL) returned %d", rc);
    CHECK(strstr(bpt_last_error(), MARK2) != NULL, "marker message missing: '%s'", bpt_last_error());
}

static bpt_vm_word call_site(bpt_vm_word *code, bpt_func *fn) {
    bpt_vm_word w = BPT_VM_FETCH(&code[0]);
    if (w == BP_WORD) w = bpt_vm_breakpoint(fn, NULL, NULL);
    return w;
}
static void call_f(void) {
    bpt_vm_word w = call_site(code_f, f);
    CHECK(w == ORIG_F, "calling f executed word 0x%lx, expected the original 0x%lx",
          (unsigned long)w, (unsigned long)ORIG_F);
}

/* The previously set state still works, exactly. */
static void verify(const char *after) {
    bpt_info info;
    bpt_session_counts st;
    bpt_msg msgs[8];
    bpt_func *lk = NULL;
    int i, n, rc;

    for (i = 0; i < 3; i++) call_f();
    expect_count += 3;
    memset(&info, 0, sizeof info);
    rc = bpt_trace_info(S, f, BPT_INFO_COUNT | BPT_INFO_FLAGS, &info);
    CHECK(rc == 0, "after '%s': bpt_trace_info on the counting session returned %d (%s)",
          after, rc, bpt_last_error());
    CHECK(info.count == expect_count, "after '%s': call_count %lu, expected %lu",
          after, (unsigned long)info.count, (unsigned long)expect_count);
    CHECK(info.flags == BPT_COUNT && !info.count_paused,
          "after '%s': flags 0x%x paused %d, expected BPT_COUNT, not paused",
          after, info.flags, info.count_paused);
    CHECK(bpt_vm_word_at(f) == BP_WORD && BPT_VM_FETCH(&code_f[0]) == BP_WORD,
          "after '%s': the breakpoint word is no longer installed at f", after);
    CHECK(bpt_func_count() == expect_funcs, "after '%s': %d functions registered, expected %d",
          after, bpt_func_count(), expect_funcs);
    CHECK(bpt_func_lookup("vm", "f", 1, &lk) == 0 && lk == f, "after '%s': vm:f/1 lookup failed", after);
    memset(&st, 0, sizeof st);
    CHECK(bpt_session_stats(S, &st) == 0 && strcmp(st.name, "counter") == 0,
          "after '%s': the counting session is no longer valid", after);
    memset(&st, 0, sizeof st);
    CHECK(bpt_session_stats(S2, &st) == 0 && strcmp(st.name, "messages") == 0,
          "after '%s': the message session is no longer valid", after);
    n = bpt_session_drain(S2, msgs, 8);
    CHECK(n == 3, "after '%s': drained %d call messages, expected 3", after, n);
    for (i = 0; i < n && i < 8; i++)
        CHECK(msgs[i].type == BPT_MSG_CALL && msgs[i].module && msgs[i].name &&
              strcmp(msgs[i].module, "vm") == 0 && strcmp(msgs[i].name, "f") == 0 &&
              msgs[i].arity == 1, "after '%s': message %d is not a call of vm:f/1", after, i);
}

/* One table line per case, the checks, then verify(). */
static void report(const char *name, const char *expr, int rc, int expected, int line) {
    const char *le = bpt_last_error();
    ncases++;
    printf("%3d  %-50s -> %-16s %s\n", ncases, name, rc >= 0 && expected >= 0 && rc == expected
           ? (rc == 0 ? "0 (ok)" : "(a count)") : code_name(rc), rc < 0 ? le : "");
    CHECK(rc == expected, "line %d: case '%s': %s returned %d (%s), expected %d (%s); last error: %s",
          line, name, expr, rc, code_name(rc), expected, code_name(expected), le);
    if (expected < 0) {
        CHECK(le != NULL && le[0] != '\0', "line %d: case '%s': bpt_last_error() is empty after a failure",
              line, name);
        CHECK(le == NULL || strstr(le, MARK) == NULL,
              "line %d: case '%s': bpt_last_error() still holds the previous failure's message: '%s'",
              line, name, le);
    }
}
#define CASE(name, expr, expected) do { \
        int rc_; current_case = (name); alarm(20); stamp_last_error(); \
        rc_ = (int)(expr); \
        report((name), #expr, rc_, (expected), __LINE__); verify(name); alarm(0); \
    } while (0)

/* ---- cases whose calls run where the table cannot be printed nor verify()
   run (a tracer callback, a pinned thread, an observer, an info callback):
   recorded there, reported by flush_deferred() in main ---- */
#define ANY_OK 1   /* "alt" value: 0 is accepted too */
struct dcase { const char *name; int rc, expected, alt; char err[512]; };
static struct dcase deferred[32];
static int ndeferred;
static void defer(const char *name, int rc, int expected, int alt) {
    struct dcase *d;
    if (ndeferred >= 32) return;
    d = &deferred[ndeferred++];
    d->name = name;
    d->rc = rc;
    d->expected = expected;
    d->alt = alt;
    strncpy(d->err, rc < 0 ? bpt_last_error() : "", sizeof d->err - 1);
    d->err[sizeof d->err - 1] = '\0';
}
/* Stamp the marker (MARK2), make the call, record it. */
#define DEFER(name, call, expected, alt) do { \
        stamp_last_error_pinned(); defer((name), (int)(call), (expected), (alt)); } while (0)
static void flush_deferred(const char *group) {
    int i;
    for (i = 0; i < ndeferred; i++) {
        struct dcase *d = &deferred[i];
        int ok = d->rc == d->expected || (d->alt == ANY_OK && d->rc == 0);
        ncases++;
        printf("%3d  %-50s -> %-16s %s\n", ncases, d->name,
               d->rc == 0 ? "0 (ok)" : code_name(d->rc), d->err);
        CHECK(ok, "case '%s' returned %d (%s), expected %s%s; last error: %s", d->name, d->rc,
              code_name(d->rc), code_name(d->expected), d->alt == ANY_OK ? " or 0" : "", d->err);
        if (d->rc < 0 && d->expected < 0)
            CHECK(d->err[0] != '\0' && strstr(d->err, MARK2) == NULL,
                  "case '%s': bpt_last_error() was not set by the failure: '%s'", d->name, d->err);
    }
    ndeferred = 0;
    verify(group);
}

/* ---- a tracer callback that tries set-path calls ---- */
static int cb_armed, cb_calls;
static bpt_session C;
static void cb_tracer(const bpt_msg *m, void *user) {
    bpt_session tmp;
    bpt_func *tf = NULL;
    bpt_info info;
    (void)user;
    cb_calls++;
    if (!cb_armed || m->type != BPT_MSG_CALL) return;
    cb_armed = 0;
    tmp.id = 0;
    DEFER("tracer callback: trace_pattern", bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), BPT_EDEADLK, 0);
    DEFER("tracer callback: session_create", bpt_session_create(NULL, &tmp), BPT_EDEADLK, 0);
    DEFER("tracer callback: session_destroy(other)", bpt_session_destroy(S), BPT_EDEADLK, 0);
    DEFER("tracer callback: session_destroy(its own)", bpt_session_destroy(C), BPT_EDEADLK, 0);
    DEFER("tracer callback: thread_progress_wait", bpt_thread_progress_wait(), BPT_EDEADLK, 0);
    DEFER("tracer callback: wait_sync_core", bpt_thread_progress_wait_sync_core(), BPT_EDEADLK, 0);
    DEFER("tracer callback: register_vm", bpt_register_vm(&code_h[0], BP_WORD, "vm", "h", 0, NULL, &tf), BPT_EDEADLK, 0);
    DEFER("tracer callback: unregister", bpt_unregister(f), BPT_EDEADLK, 0);
    DEFER("tracer callback: func_lookup", bpt_func_lookup("vm", "f", 1, &tf), BPT_EDEADLK, 0);
    /* bpt_trace_info is listed among the set-path calls in THREAD-SAFETY RULES, but
       its own comment promises a read that blocks no one: either answer is accepted */
    DEFER("tracer callback: trace_info (EDEADLK or 0)", bpt_trace_info(S, f, BPT_INFO_COUNT, &info), BPT_EDEADLK, ANY_OK);
}

/* ---- callbacks that run under the code modification permission ---- */
static int each_armed, each_calls, obs_armed, obs_calls;
static void each_fn(const bpt_func *fn, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    (void)fn; (void)m; (void)n; (void)a; (void)i; (void)u;
    each_calls++;
    if (!each_armed) return;
    each_armed = 0;
    DEFER("trace_info_each callback: trace_pattern", bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), BPT_EDEADLK, 0);
    DEFER("trace_info_each callback: unregister", bpt_unregister(f), BPT_EDEADLK, 0);
    DEFER("trace_info_each callback: func_count", bpt_func_count(), BPT_EDEADLK, 0);
    DEFER("trace_info_each callback: set_protocol_observer", bpt_set_protocol_observer(NULL, NULL), BPT_EDEADLK, 0);
}
static void obs_fn(int step, int did, uint64_t ns, void *u) {
    (void)step; (void)did; (void)ns; (void)u;
    obs_calls++;
    if (!obs_armed) return;
    obs_armed = 0;
    DEFER("observer: trace_pattern", bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), BPT_EDEADLK, 0);
    DEFER("observer: unregister", bpt_unregister(f), BPT_EDEADLK, 0);
    DEFER("observer: func_count", bpt_func_count(), BPT_EDEADLK, 0);
    DEFER("observer: set_protocol_observer", bpt_set_protocol_observer(NULL, NULL), BPT_EDEADLK, 0);
}

/* ---- misuse from a pinned thread, in a fresh thread (its last error starts "") ---- */
static char tp_initial_err[320];
static int tp_first_rc;
static char tp_first_err[320];
static void *tp_thread(void *arg) {
    bpt_func *tf = NULL;
    (void)arg;
    snprintf(tp_initial_err, sizeof tp_initial_err, "%s", bpt_last_error());
    bpt_thread_progress_pin();
    /* the first failure of this thread: its message must appear where "" was */
    tp_first_rc = bpt_thread_progress_wait();
    snprintf(tp_first_err, sizeof tp_first_err, "%s", bpt_last_error());
    DEFER("pinned: thread_progress_wait", bpt_thread_progress_wait(), BPT_EDEADLK, 0);
    DEFER("pinned: thread_progress_wait_sync_core", bpt_thread_progress_wait_sync_core(), BPT_EDEADLK, 0);
    DEFER("pinned: register_managed", bpt_thread_progress_register_managed(), BPT_EINVAL, 0);
    DEFER("pinned: func_lookup", bpt_func_lookup("vm", "f", 1, &tf), BPT_EDEADLK, 0);
    DEFER("pinned: trace_pattern", bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), BPT_EDEADLK, 0);
    DEFER("pinned: unregister", bpt_unregister(f), BPT_EDEADLK, 0);
    bpt_thread_progress_unpin();
    /* an unpin without a pin is ignored: not pinned after it, and a pin still pins */
    bpt_thread_progress_unpin();
    DEFER("control: wait after a stray unpin (not pinned)", bpt_thread_progress_wait(), 0, 0);
    bpt_thread_progress_pin();
    DEFER("pin after a stray unpin: wait (still pins)", bpt_thread_progress_wait(), BPT_EDEADLK, 0);
    bpt_thread_progress_unpin();
    DEFER("control: wait after its unpin", bpt_thread_progress_wait(), 0, 0);
    /* A managed online thread's pins count too: a wait or a pattern change
       from inside one would wait for the section it is in. (Both returned 0
       before issue 16 moved the managed thread's pins into its state word:
       such a pin was not seen as one.) Going online or offline inside the
       section is ignored: the thread stays online, and a wait after the
       unpin still works. */
    DEFER("managed: register_managed", bpt_thread_progress_register_managed(), 0, 0);
    bpt_thread_progress_pin();
    DEFER("managed, pinned: thread_progress_wait", bpt_thread_progress_wait(), BPT_EDEADLK, 0);
    DEFER("managed, pinned: trace_pattern", bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), BPT_EDEADLK, 0);
    bpt_thread_progress_offline();   /* ignored inside the section */
    bpt_thread_progress();           /* ignored too */
    bpt_thread_progress_unpin();
    DEFER("managed, after the unpin: wait", bpt_thread_progress_wait(), 0, 0);
    bpt_thread_progress_offline();
    return NULL;
}

static void info_fn(const bpt_func *fn, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    (void)fn; (void)m; (void)n; (void)a; (void)i; (void)u;
}

int main(void) {
    bpt_session D, E, bogus, zero, many[BPT_MAX_SESSIONS + 4];
    bpt_session_desc desc;
    bpt_session_counts st;
    bpt_func *g = NULL, *tmpf = NULL, *lk = NULL;
    bpt_info info;
    bpt_msg msgs[4];
    char buf[128], long200[201], long128[129], long127[128], long64[65], long63[64];
    struct sigaction sa;
    int i, created, last_rc;
    pthread_t th;

    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(20);

    memset(long200, 'n', 200); long200[200] = 0;
    memset(long128, 'n', 128); long128[128] = 0;
    memset(long127, 'n', 127); long127[127] = 0;
    memset(long64, 's', 64); long64[64] = 0;
    memset(long63, 's', 63); long63[63] = 0;

    /* "" if none failed yet */
    CHECK(bpt_last_error() != NULL && bpt_last_error()[0] == '\0',
          "bpt_last_error() is '%s' before any failure, expected \"\"", bpt_last_error());

    /* ---- the state every case must leave intact ---- */
    memset(&desc, 0, sizeof desc);
    desc.name = "counter";
    CHECK_RC(bpt_session_create(&desc, &S), 0);
    desc.name = "messages";
    CHECK_RC(bpt_session_create(&desc, &S2), 0);
    CHECK_RC(bpt_register_vm(&code_f[0], BP_WORD, "vm", "f", 1, NULL, &f), 0);
    expect_funcs = 1;
    CHECK_RC(bpt_trace_pattern(S, "vm:f/1", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(S2, "vm:f/1", BPT_CALL, NULL), 1);
    CHECK(f != NULL, "bpt_register_vm gave no record");
    if (!f) return CHECK_DONE();
    call_f();
    expect_count = 1;
    CHECK(bpt_session_drain(S2, msgs, 4) == 1, "setup: expected one call message");
    verify("setup");
    alarm(0);

    printf("  #  case                                               -> code             bpt_last_error()\n");

    /* ---- NULL arguments ---- */
    CASE("session_create: out NULL", bpt_session_create(NULL, NULL), BPT_EINVAL);
    CASE("session_drain: out NULL, max 4", bpt_session_drain(S2, NULL, 4), BPT_EINVAL);
    CASE("session_drain: max -1", bpt_session_drain(S2, msgs, -1), BPT_EINVAL);
    CASE("session_stats: out NULL", bpt_session_stats(S, NULL), BPT_EINVAL);
    CASE("register_vm: first_word NULL", bpt_register_vm(NULL, BP_WORD, "vm", "h", 0, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: module NULL", bpt_register_vm(&code_h[0], BP_WORD, NULL, "h", 0, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: name NULL", bpt_register_vm(&code_h[0], BP_WORD, "vm", NULL, 0, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: out NULL", bpt_register_vm(&code_h[0], BP_WORD, "vm", "h", 0, NULL, NULL), BPT_EINVAL);
    CASE("unregister: NULL", bpt_unregister(NULL), BPT_EINVAL);
    CASE("func_lookup: module NULL", bpt_func_lookup(NULL, "f", 1, &lk), BPT_EINVAL);
    CASE("func_lookup: name NULL", bpt_func_lookup("vm", NULL, 1, &lk), BPT_EINVAL);
    CASE("func_lookup: out NULL", bpt_func_lookup("vm", "f", 1, NULL), BPT_EINVAL);
    CASE("trace_pattern: pattern NULL", bpt_trace_pattern(S, NULL, BPT_OFF, NULL), BPT_EINVAL);
    CASE("trace_info: f NULL", bpt_trace_info(S, NULL, BPT_INFO_COUNT, &info), BPT_EINVAL);
    CASE("trace_info: out NULL", bpt_trace_info(S, f, BPT_INFO_COUNT, NULL), BPT_EINVAL);
    CASE("trace_info: unknown 'what' bit", bpt_trace_info(S, f, BPT_INFO_COUNT | (1u << 7), &info), BPT_EINVAL);
    CASE("trace_info_each: pattern NULL", bpt_trace_info_each(S, NULL, BPT_INFO_COUNT, info_fn, NULL), BPT_EINVAL);
    CASE("format_dbg: m NULL", bpt_format_dbg(NULL, buf, sizeof buf), BPT_EINVAL);
    CASE("format_dbg: buf NULL, size 128", bpt_format_dbg(&msgs[0], NULL, sizeof buf), BPT_EINVAL);
    CASE("thread_progress_stats: NULL", bpt_thread_progress_stats(NULL), BPT_EINVAL);

    /* ---- malformed patterns (with BPT_OFF: a lenient parse would switch f off) ---- */
    CASE("pattern \"\"", bpt_trace_pattern(S, "", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm\"", bpt_trace_pattern(S, "vm", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f\"", bpt_trace_pattern(S, "vm:f", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f/\"", bpt_trace_pattern(S, "vm:f/", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f/x\"", bpt_trace_pattern(S, "vm:f/x", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \":f/1\"", bpt_trace_pattern(S, ":f/1", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:/1\"", bpt_trace_pattern(S, "vm:/1", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f/999\"", bpt_trace_pattern(S, "vm:f/999", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f/1/2\"", bpt_trace_pattern(S, "vm:f/1/2", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:f/-1\"", bpt_trace_pattern(S, "vm:f/-1", BPT_OFF, NULL), BPT_EPATTERN);
    CASE("pattern \"vm:ns::f/1\" (a C++ name: parses, matches nothing)", bpt_trace_pattern(S, "vm:ns::f/1", BPT_OFF, NULL), 0);
    CASE("trace_info_each: pattern \"vm:f\"", bpt_trace_info_each(S, "vm:f", BPT_INFO_COUNT, info_fn, NULL), BPT_EPATTERN);

    /* ---- flags (each would reset or stop the count if it were applied) ---- */
    CASE("flags: unknown bit 1<<12", bpt_trace_pattern(S, "vm:f/1", BPT_COUNT | BPT_RESTART | (1u << 12), NULL), BPT_EFLAGS);
    CASE("flags: BPT_RETURN without BPT_CALL", bpt_trace_pattern(S, "vm:f/1", BPT_COUNT | BPT_RETURN, NULL), BPT_EFLAGS);
    CASE("flags: BPT_CALLER with BPT_OFF", bpt_trace_pattern(S, "vm:f/1", BPT_CALL | BPT_OFF | BPT_CALLER, NULL), BPT_EFLAGS);
    CASE("unwind_to: sp NULL", bpt_unwind_to(NULL), BPT_EINVAL);
    CASE("flags: unknown bit 1<<31", bpt_trace_pattern(S, "vm:f/1", BPT_OFF | (1u << 31), NULL), BPT_EFLAGS);
    CASE("flags: PAUSE without BPT_COUNT", bpt_trace_pattern(S, "vm:f/1", BPT_CALL | BPT_PAUSE, NULL), BPT_EFLAGS);
    CASE("flags: RESTART without BPT_COUNT", bpt_trace_pattern(S, "vm:f/1", BPT_CALL | BPT_RESTART, NULL), BPT_EFLAGS);
    CASE("flags: PAUSE with no kind", bpt_trace_pattern(S, "vm:f/1", BPT_PAUSE, NULL), BPT_EFLAGS);
    CASE("flags: two hows OFF|PAUSE", bpt_trace_pattern(S, "vm:f/1", BPT_OFF | BPT_PAUSE, NULL), BPT_EFLAGS);
    CASE("flags: two hows COUNT|OFF|PAUSE", bpt_trace_pattern(S, "vm:f/1", BPT_COUNT | BPT_OFF | BPT_PAUSE, NULL), BPT_EFLAGS);
    CASE("flags: two hows COUNT|OFF|RESTART", bpt_trace_pattern(S, "vm:f/1", BPT_COUNT | BPT_OFF | BPT_RESTART, NULL), BPT_EFLAGS);
    CASE("flags: two hows COUNT|PAUSE|RESTART", bpt_trace_pattern(S, "vm:f/1", BPT_COUNT | BPT_PAUSE | BPT_RESTART, NULL), BPT_EFLAGS);

    /* ---- a destroyed session (it had its own count on f) ---- */
    memset(&desc, 0, sizeof desc);
    desc.name = "doomed";
    CHECK_RC(bpt_session_create(&desc, &D), 0);
    CHECK_RC(bpt_trace_pattern(D, "vm:f/1", BPT_COUNT | BPT_CALL, NULL), 1);
    CHECK_RC(bpt_session_destroy(D), 0);
    verify("destroying a second session that traced f");
    CASE("destroyed session: trace_pattern", bpt_trace_pattern(D, "vm:f/1", BPT_COUNT, NULL), BPT_ESESSION);
    CASE("destroyed session: drain", bpt_session_drain(D, msgs, 4), BPT_ESESSION);
    CASE("destroyed session: stats", bpt_session_stats(D, &st), BPT_ESESSION);
    CASE("destroyed session: trace_info", bpt_trace_info(D, f, BPT_INFO_COUNT, &info), BPT_ESESSION);
    CASE("destroyed session: trace_info_each", bpt_trace_info_each(D, "_:_/_", BPT_INFO_COUNT, info_fn, NULL), BPT_ESESSION);
    CASE("destroyed session: destroy again", bpt_session_destroy(D), BPT_ESESSION);
    desc.name = "reuser";
    CHECK_RC(bpt_session_create(&desc, &E), 0);
    CHECK(E.id != D.id, "a new session got the destroyed session's id %lu", (unsigned long)D.id);
    CASE("stale handle, slot reused: stats", bpt_session_stats(D, &st), BPT_ESESSION);
    CASE("stale handle, slot reused: trace_pattern", bpt_trace_pattern(D, "vm:f/1", BPT_OFF, NULL), BPT_ESESSION);
    CHECK_RC(bpt_session_stats(E, &st), 0);
    CHECK_RC(bpt_session_destroy(E), 0);
    bogus.id = 12345;
    zero.id = 0;
    CASE("never-created session {12345}: trace_pattern", bpt_trace_pattern(bogus, "vm:f/1", BPT_OFF, NULL), BPT_ESESSION);
    CASE("never-created session {12345}: destroy", bpt_session_destroy(bogus), BPT_ESESSION);
    CASE("never-created session {12345}: stats", bpt_session_stats(bogus, &st), BPT_ESESSION);
    CASE("never-created session {12345}: drain", bpt_session_drain(bogus, msgs, 4), BPT_ESESSION);
    CASE("never-created session {0}: stats", bpt_session_stats(zero, &st), BPT_ESESSION);

    /* ---- session settings ---- */
    memset(&desc, 0, sizeof desc);
    desc.chunk_bytes = 1u << 25;
    CASE("session_create: chunk_bytes 1<<25", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.chunk_bytes = 2048;
    CASE("session_create: chunk_bytes 2048", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.chunk_bytes = 4096 + 8;
    CASE("session_create: chunk_bytes 4104 (not a power of two)", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.chunk_bytes = 0;
    desc.chunks = 1;
    CASE("session_create: chunks 1", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.chunks = 65537;
    CASE("session_create: chunks 65537", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.chunks = 0;
    desc.max_chunks = 15;
    CASE("session_create: max_chunks 15, below the default 16 chunks", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.max_chunks = 65537;
    CASE("session_create: max_chunks 65537", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.max_chunks = 32;
    desc.flight_recorder = 1;
    CASE("session_create: a flight recorder with max_chunks 32", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.max_chunks = 0;
    desc.flight_recorder = 0;
    desc.rate_per_ms = 10;
    CASE("session_create: rate_per_ms without rate_max", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.rate_max = 0x100000000ull;   /* a window's count is 32 bits */
    CASE("session_create: rate_max 2^32 with rate_per_ms", bpt_session_create(&desc, &E), BPT_EINVAL);
    desc.rate_max = 0;
    desc.rate_per_ms = 0;
    desc.name = long64;
    CASE("session_create: name of 64 bytes", bpt_session_create(&desc, &E), BPT_ELIMIT);
    desc.name = long63;
    desc.chunk_bytes = 4096;
    desc.chunks = 2;
    CASE("control: name of 63 bytes, the smallest buffer", bpt_session_create(&desc, &E), 0);
    CHECK_RC(bpt_session_stats(E, &st), 0);
    CHECK(strcmp(st.name, long63) == 0, "the 63-byte session name came back as '%s'", st.name);
    CHECK_RC(bpt_session_destroy(E), 0);

    /* ---- function records ---- */
    CHECK_RC(bpt_register_vm(&code_g[0], BP_WORD, "vm", "g", 0, NULL, &g), 0);
    expect_funcs++;
    CHECK_RC(bpt_trace_pattern(S, "vm:g/0", BPT_COUNT, NULL), 1);
    CHECK(call_site(code_g, g) == ORIG_G && call_site(code_g, g) == ORIG_G, "calling g failed");
    CASE("unregister a traced function", bpt_unregister(g), BPT_EBUSY);
    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(S, g, BPT_INFO_COUNT, &info), 0);
    CHECK(info.count == 2, "g's count is %lu after the refused unregister, expected 2", (unsigned long)info.count);
    CHECK(BPT_VM_FETCH(&code_g[0]) == BP_WORD, "g lost its breakpoint after the refused unregister");
    CHECK_RC(bpt_trace_pattern(S, "vm:g/0", BPT_OFF, NULL), 1);
    CHECK(BPT_VM_FETCH(&code_g[0]) == ORIG_G, "g's original word was not restored by BPT_OFF");
    expect_funcs--;
    CASE("control: unregister after BPT_OFF", bpt_unregister(g), 0);
    CASE("unregister twice", bpt_unregister(g), BPT_ENOENT);
    CASE("unregister a never-registered pointer", bpt_unregister((bpt_func *)(void *)&code_h[0]), BPT_ENOENT);
    /* f's site holds the breakpoint word now: EEXIST is the precise answer (the
       site is registered), whatever breakpoint word the second call passes */
    CASE("register_vm: same first_word twice (traced)", bpt_register_vm(&code_f[0], BP_WORD, "vm", "f2", 1, NULL, &tmpf), BPT_EEXIST);
    CASE("register_vm: same first_word twice, other bp word", bpt_register_vm(&code_f[0], BP_WORD + 1, "vm", "f2", 1, NULL, &tmpf), BPT_EEXIST);
    expect_funcs++;
    CASE("control: register g again", bpt_register_vm(&code_g[0], BP_WORD, "vm", "g", 0, NULL, &g), 0);
    CASE("register_vm: same first_word twice (untraced)", bpt_register_vm(&code_g[0], BP_WORD, "vm", "g", 0, NULL, &tmpf), BPT_EEXIST);
    expect_funcs--;
    CASE("control: unregister g", bpt_unregister(g), 0);
    CASE("register_vm: breakpoint word == original", bpt_register_vm(&code_h[0], ORIG_H, "vm", "h", 0, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: arity 256", bpt_register_vm(&code_h[0], BP_WORD, "vm", "h", 256, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: arity -1", bpt_register_vm(&code_h[0], BP_WORD, "vm", "h", -1, NULL, &tmpf), BPT_EINVAL);
    CASE("register_vm: name of 200 bytes", bpt_register_vm(&code_h[0], BP_WORD, "vm", long200, 0, NULL, &tmpf), BPT_ELIMIT);
    CASE("register_vm: module of 200 bytes", bpt_register_vm(&code_h[0], BP_WORD, long200, "h", 0, NULL, &tmpf), BPT_ELIMIT);
    CASE("register_vm: name of 128 bytes", bpt_register_vm(&code_h[0], BP_WORD, "vm", long128, 0, NULL, &tmpf), BPT_ELIMIT);
    CHECK(BPT_VM_FETCH(&code_h[0]) == ORIG_H, "a refused registration changed h's word");
    tmpf = NULL;
    expect_funcs++;
    CASE("control: register_vm name of 127 bytes", bpt_register_vm(&code_h[0], BP_WORD, "vm", long127, 0, NULL, &tmpf), 0);
    expect_funcs--;
    CASE("control: unregister it", bpt_unregister(tmpf), 0);
    CASE("func_lookup: not registered", bpt_func_lookup("vm", "nosuch", 1, &lk), BPT_ENOENT);
    CASE("trace_info: f not registered", bpt_trace_info(S, (const bpt_func *)(void *)&code_h[0], BPT_INFO_COUNT, &info), BPT_ENOENT);

    /* ---- misuse from a pinned thread (in a fresh thread: its last error starts "") ---- */
    pthread_create(&th, NULL, tp_thread, NULL);
    pthread_join(th, NULL);
    CHECK(tp_initial_err[0] == '\0', "a new thread's bpt_last_error() is '%s', expected \"\" "
          "(it must be per thread)", tp_initial_err);
    CHECK(tp_first_rc == BPT_EDEADLK && tp_first_err[0] != '\0', "the first failure of a fresh thread "
          "(wait while pinned: %d) left bpt_last_error() empty", tp_first_rc);
    flush_deferred("misuse from a pinned thread");

    /* ---- set-path calls from inside a tracer callback ---- */
    memset(&desc, 0, sizeof desc);
    desc.name = "callback";
    desc.tracer = cb_tracer;
    CHECK_RC(bpt_session_create(&desc, &C), 0);
    CHECK_RC(bpt_trace_pattern(C, "vm:f/1", BPT_CALL, NULL), 1);
    cb_armed = 1;
    alarm(20);
    current_case = "set-path calls from a tracer callback";
    call_f();                       /* the callback runs here, in this thread */
    alarm(0);
    expect_count++;
    CHECK_RC(bpt_session_drain(S2, msgs, 4), 1);   /* that call's message in "messages" */
    CHECK(cb_calls == 1 && !cb_armed, "the tracer callback ran %d times, expected once", cb_calls);
    flush_deferred("set-path calls from a tracer callback");
    CHECK(BPT_VM_FETCH(&code_h[0]) == ORIG_H && bpt_func_lookup("vm", "h", 0, &lk) == BPT_ENOENT,
          "register_vm from a tracer callback registered vm:h/0");
    CHECK(cb_calls == 4, "the tracer callback ran %d times, expected 4 (1 + 3 in verify)", cb_calls);
    CHECK_RC(bpt_session_stats(C, &st), 0);
    CHECK_RC(bpt_session_drain(C, msgs, 4), 0);     /* a callback session has nothing to drain */
    CHECK_RC(bpt_session_destroy(C), 0);
    verify("destroying the callback session");
    CHECK(cb_calls == 4, "the tracer callback ran after its session was destroyed (%d calls)", cb_calls);

    /* ---- set-path calls from callbacks that run under the permission ---- */
    each_armed = 1;
    alarm(20);
    current_case = "set-path calls from a trace_info_each callback";
    CHECK_RC(bpt_trace_info_each(S, "vm:f/1", BPT_INFO_COUNT, each_fn, NULL), 1);
    alarm(0);
    CHECK(each_calls == 1, "the trace_info_each callback ran %d times, expected once", each_calls);
    flush_deferred("set-path calls from a trace_info_each callback");
    CHECK_RC(bpt_set_protocol_observer(obs_fn, NULL), 0);
    obs_armed = 1;
    alarm(20);
    current_case = "set-path calls from a protocol observer";
    CHECK_RC(bpt_register_vm(&code_g[0], BP_WORD, "vm", "g", 0, NULL, &g), 0);
    expect_funcs++;
    CHECK_RC(bpt_trace_pattern(S2, "vm:g/0", BPT_COUNT, NULL), 1);   /* the observer runs here */
    alarm(0);
    CHECK(obs_calls >= 1 && !obs_armed, "the protocol observer never ran (%d calls)", obs_calls);
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK_RC(bpt_trace_pattern(S2, "vm:g/0", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_unregister(g), 0);
    expect_funcs--;
    flush_deferred("set-path calls from a protocol observer");

    /* ---- more than BPT_MAX_SESSIONS sessions ---- */
    created = 0;
    last_rc = 0;
    for (i = 0; i < BPT_MAX_SESSIONS + 4; i++) {
        current_case = "creating sessions";
        alarm(20);
        last_rc = bpt_session_create(NULL, &many[i]);
        alarm(0);
        if (last_rc != 0) break;
        created++;
    }
    ncases++;
    printf("%3d  %-50s -> %-16s %s\n", ncases, "session_create beyond BPT_MAX_SESSIONS",
           code_name(last_rc), bpt_last_error());
    printf("     (created %d more sessions with 2 alive; BPT_MAX_SESSIONS = %d)\n", created, BPT_MAX_SESSIONS);
    CHECK(last_rc == BPT_ELIMIT, "session %d beyond the limit: %d (%s), expected BPT_ELIMIT; last error: %s",
          created + 1, last_rc, code_name(last_rc), bpt_last_error());
    CHECK(created == BPT_MAX_SESSIONS - 2, "created %d sessions with 2 alive, expected %d "
          "(a failed create leaked a slot, or the limit is wrong)", created, BPT_MAX_SESSIONS - 2);
    for (i = 0; i < created; i++) CHECK_RC(bpt_session_destroy(many[i]), 0);
    verify("creating and destroying BPT_MAX_SESSIONS sessions");
    CASE("control: session_create after destroying them", bpt_session_create(NULL, &E), 0);
    CHECK_RC(bpt_session_destroy(E), 0);

    /* ---- error strings ---- */
    {
        int nerr = 0;
#define T_STR(name, value, text) \
        nerr++; \
        CHECK(bpt_strerror(value) && bpt_strerror(value)[0] && strcmp(bpt_strerror(value), text) == 0, \
              "bpt_strerror(%s) is '%s', expected '%s'", #name, bpt_strerror(value), text); \
        CHECK(strcmp(bpt_strerror(value), "unknown error") != 0, "bpt_strerror(%s) is 'unknown error'", #name);
        BPT_ERRORS(T_STR)
#undef T_STR
        CHECK(bpt_strerror(12345) && strcmp(bpt_strerror(12345), "unknown error") == 0,
              "bpt_strerror(12345) is '%s'", bpt_strerror(12345));
        CHECK(strcmp(bpt_strerror(1), "unknown error") == 0, "bpt_strerror(1) is '%s'", bpt_strerror(1));
        CHECK(strcmp(bpt_strerror(-16), "unknown error") == 0, "bpt_strerror(-16) is '%s'", bpt_strerror(-16));
        CHECK(strcmp(bpt_strerror(INT_MIN), "unknown error") == 0, "bpt_strerror(INT_MIN) is '%s'",
              bpt_strerror(INT_MIN));
        printf("bpt_strerror: %d codes checked against BPT_ERRORS; 12345 -> \"%s\"; BPT_EDEADLK -> \"%s\"\n",
               nerr, bpt_strerror(12345), bpt_strerror(BPT_EDEADLK));
    }
    CHECK(bpt_protocol_step_name(0) == NULL && bpt_protocol_step_name(14) == NULL &&
          bpt_protocol_step_name(1) != NULL && bpt_protocol_step_name(13) != NULL,
          "bpt_protocol_step_name outside 1..13 must be NULL, inside non-NULL");

    /* ---- teardown: the state is still exactly as set ---- */
    verify("all cases");
    printf("misuse cases: %d; f counted %lu calls exactly\n", ncases, (unsigned long)expect_count);
    CHECK_RC(bpt_trace_pattern(S, "vm:f/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(S2, "vm:f/1", BPT_OFF, NULL), 1);
    CHECK(BPT_VM_FETCH(&code_f[0]) == ORIG_F, "f's original word was not restored");
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_session_destroy(S), 0);
    CHECK_RC(bpt_session_destroy(S2), 0);
    CHECK(bpt_func_count() == 0, "%d functions still registered", bpt_func_count());
    return CHECK_DONE();
}

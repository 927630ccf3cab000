/* t_shortcut: the hit's shortcut per generation (>>shortcut in breakpoint.h;
   issue #16, item 6). Step 3 sums up every session's breakpoint on a
   function as NONE, COUNT (one session counts, nothing else is active),
   CALL (one session traces calls, nothing else is active), CALL_PLAIN (a
   CALL whose record is the function and its arguments alone),
   CALL_RETURN (a CALL_PLAIN that asks for return_from too), ONE (one
   session active, for anything else) or WALK; the hit takes
   the shortcut of the generation it reads. Claims, each on one VM
   function, with exact counts and messages after each change:
   - one session counting: COUNT, and the count is exact;
   - a second session starts counting the same function: its breakpoint is
     parked in the list head's to_insert at step 3 and linked at step 5,
     and must be part of the summary (WALK): both sessions count;
   - the first session pauses: COUNT for the second alone, whose counter
     the shortcut must name (not the first's);
   - the second adds call trace: ONE, naming the second's GenericBp (not
     the paused first's), counts and call messages both;
   - the first traces calls too: WALK, and each session gets its own
     messages;
   - the first back to counting only, paused: ONE for the second again;
   - the second stops counting: CALL_PLAIN (call trace alone, no match
     spec, a session that buffers with no rate limit), naming the second's
     GenericBp, call messages only; CALL under a predicate, with a message,
     and for a session with a rate limit; CALL_RETURN for return or
     exception trace alone, CALL with return_to or the caller too;
   - all of the second switched off, the first restarted: COUNT from 0;
   - the first paused while installed: NONE, nothing counted, no message;
   - everything off: no breakpoint word, nothing counted.
   Each state is also checked against the shortcut itself, so that a change
   that stopped choosing it would not pass unnoticed.
   Then two things that keep a change of many functions fast (issue #16's
   10,000-function change):
   - a COUNT shortcut carries its BpCount's dir and off, the count path's
     only reads of it, so counted hits read no line the set path writes;
   - set-path blocks are recycled (>>recycle in ptrset.c): given back, the
     next take returns them, newest first, and an empty list allocates. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>

#define BP ((bpt_vm_word)0xC0C0)
static bpt_vm_word code[1];
static bpt_func *f;
static bpt_session s1, s2;

static uint64_t vm_arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { .arg = vm_arg };

static void calls(int n) {
    uint64_t frame[1] = { 7 };
    int i;
    for (i = 0; i < n; i++)
        if (BPT_VM_FETCH(&code[0]) == BP) bpt_vm_breakpoint(f, frame, NULL);
}

static uint64_t count_in(bpt_session s) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &in), 0);
    return in.count;
}

static int drained(bpt_session s) {
    bpt_msg m[64];
    int n, total = 0;
    while ((n = bpt_session_drain(s, m, 64)) > 0) total += n;
    return total;
}

static unsigned shortcut(void) { return f->shortcut[bpt_active_bp_ix()].kind; }

static void expect(const char *what, unsigned kind, uint64_t c1, uint64_t c2, int msgs2) {
    int m = drained(s2);
    printf("%-44s shortcut %u, counts %llu %llu, messages %d\n", what, shortcut(),
           (unsigned long long)count_in(s1), (unsigned long long)count_in(s2), m);
    CHECK(shortcut() == kind, "%s: shortcut %u, expected %u", what, shortcut(), kind);
    CHECK(count_in(s1) == c1, "%s: session 1 counted %llu, expected %llu", what,
          (unsigned long long)count_in(s1), (unsigned long long)c1);
    CHECK(count_in(s2) == c2, "%s: session 2 counted %llu, expected %llu", what,
          (unsigned long long)count_in(s2), (unsigned long long)c2);
    CHECK(m == msgs2, "%s: session 2 sent %d messages, expected %d", what, m, msgs2);
}

/* The COUNT shortcut carries its BpCount's dir and off: the count path's
   only reads of it, so that a counted hit reads no line the set path
   writes (the BpCount's refc). */
static void check_count_copies(void) {
    const bpt__shortcut *sc = &f->shortcut[bpt_active_bp_ix()];
    CHECK(sc->kind == BPT__SHORTCUT_COUNT, "counting (%u)", sc->kind);
    CHECK(sc->count_dir == ((const bpt__BpCount *)sc->data)->dir &&
              sc->count_off == ((const bpt__BpCount *)sc->data)->off,
          "the COUNT shortcut carries its BpCount's dir and off");
}

/* The ONE or CALL shortcut names the GenericBp of session s, the one active. */
static void check_named(unsigned kind, bpt_session s, const char *who) {
    const bpt__shortcut *sc = &f->shortcut[bpt_active_bp_ix()];
    const bpt__GenericBp *g;
    for (g = (const bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp); g;
         g = (const bpt__GenericBp *)bpt__load_acquire_ptr((bpt__atomic_ptr *)&g->next))
        if (g->session->id == s.id) break;
    CHECK(g != NULL, "%s has a GenericBp on f", who);
    CHECK(sc->kind == kind && sc->data == (const void *)g,
          "the shortcut %u names %s's GenericBp (kind %u, %p, expected %p)", kind, who, sc->kind, sc->data,
          (const void *)g);
}

static int match_all(const uint64_t *args, int nargs, void *user) {
    (void)args; (void)nargs; (void)user;
    return 1;
}

static void check_recycle(void) {
    bpt__recycle r = { NULL, 48 };
    void *a = bpt__recycle_take(&r), *b = bpt__recycle_take(&r), *c;
    CHECK(a && b && a != b, "an empty list allocates (%p %p)", a, b);
    bpt__recycle_give(&r, a);
    bpt__recycle_give(&r, b);
    bpt__recycle_give(&r, NULL);   /* nothing */
    c = bpt__recycle_take(&r);
    CHECK(c == b, "the newest block first (%p, gave %p)", c, b);
    c = bpt__recycle_take(&r);
    CHECK(c == a, "then the older (%p, gave %p)", c, a);
    CHECK(r.head == NULL, "then the list is empty");
    free(a);
    free(b);
}

int main(void) {
    code[0] = 0x1234;
    CHECK_RC(bpt_register_vm(&code[0], BP, "sc", "f", 1, &ops, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s1), 0);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_COUNT, NULL), 1);
    calls(10);
    expect("one session counts", BPT__SHORTCUT_COUNT, 10, 0, 0);
    check_count_copies();
    check_recycle();

    CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_COUNT, NULL), 1);
    calls(5);
    expect("a second session counts too (to_insert)", BPT__SHORTCUT_WALK, 15, 5, 0);

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    calls(3);
    expect("the first paused: the second alone", BPT__SHORTCUT_COUNT, 15, 8, 0);

    CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, NULL), 1);
    calls(2);
    expect("the second adds call trace", BPT__SHORTCUT_ONE, 15, 10, 2);
    check_named(BPT__SHORTCUT_ONE, s2, "the second session");

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_CALL, NULL), 1);
    calls(3);
    {
        int m1 = drained(s1);
        expect("the first traces calls too", BPT__SHORTCUT_WALK, 15, 13, 3);
        CHECK(m1 == 3, "the first traces calls too: session 1 sent %d messages, expected 3", m1);
    }

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_CALL | BPT_OFF, NULL), 1);
    calls(1);
    {
        int m1 = drained(s1);
        expect("the first back to counting, paused", BPT__SHORTCUT_ONE, 15, 14, 1);
        CHECK(m1 == 0, "the first back to counting, paused: session 1 sent %d messages, expected 0", m1);
    }
    check_named(BPT__SHORTCUT_ONE, s2, "the second session");

    CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_COUNT | BPT_OFF, NULL), 1);
    calls(2);
    expect("the second traces calls only", BPT__SHORTCUT_CALL_PLAIN, 15, 0, 2);
    check_named(BPT__SHORTCUT_CALL_PLAIN, s2, "the second session");

    {   /* a predicate: the record waits on it, so not plain */
        bpt_match m;
        memset(&m, 0, sizeof m);
        m.pred = match_all;
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, &m), 1);
        calls(3);
        expect("the second's calls under a predicate", BPT__SHORTCUT_CALL, 15, 0, 3);
        check_named(BPT__SHORTCUT_CALL, s2, "the second session");
        m.pred = NULL;
        m.message = "tagged";
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, &m), 1);
        calls(1);
        expect("the second's calls with a message", BPT__SHORTCUT_CALL, 15, 0, 1);
        /* return trace alone: the record and a frame (CALL_RETURN); more
           than return_from (return_to, caller): CALL. The shortcut alone:
           a VM call with a frame needs its token back (t_vm_frames). */
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL | BPT_RETURN, NULL), 1);
        check_named(BPT__SHORTCUT_CALL_RETURN, s2, "return trace: the second session");
        m.message = NULL;
        m.actions = BPT_EXCEPTION;
        m.ret = "f64";
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, &m), 1);
        check_named(BPT__SHORTCUT_CALL_RETURN, s2, "exception trace, an f64 value: the second session");
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL | BPT_RETURN_TO, NULL), 1);
        CHECK(shortcut() == BPT__SHORTCUT_CALL, "return_to: shortcut %u, expected CALL", shortcut());
        m.actions = BPT_RETURN | BPT_MS_CALLER;
        m.ret = NULL;
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, &m), 1);
        CHECK(shortcut() == BPT__SHORTCUT_CALL, "return trace with the caller: shortcut %u, expected CALL", shortcut());
        drained(s2);
    }
    {   /* a session with a rate limit: the limit is counted per record */
        bpt_session_desc d;
        bpt_session s3;
        memset(&d, 0, sizeof d);
        d.rate_max = 1000;
        CHECK_RC(bpt_session_create(&d, &s3), 0);
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL | BPT_OFF, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s3, "sc:f/1", BPT_CALL, NULL), 1);
        calls(2);
        CHECK(shortcut() == BPT__SHORTCUT_CALL, "a session with a rate limit traces calls: shortcut %u, expected CALL",
              shortcut());
        CHECK(drained(s3) == 2, "the limited session's 2 calls");
        CHECK_RC(bpt_session_destroy(s3), 0);
        CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_CALL, NULL), 1);
        calls(2);
        expect("the second traces calls only, again", BPT__SHORTCUT_CALL_PLAIN, 15, 0, 2);
    }

    CHECK_RC(bpt_trace_pattern(s2, "sc:f/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    calls(4);
    expect("the second off, the first restarted", BPT__SHORTCUT_COUNT, 4, 0, 0);

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    CHECK(code[0] == BP, "paused: the breakpoint word stays (0x%llx)", (unsigned long long)code[0]);
    calls(6);
    expect("the first paused, installed", BPT__SHORTCUT_NONE, 4, 0, 0);

    CHECK_RC(bpt_trace_pattern(s1, "sc:f/1", BPT_OFF, NULL), 1);
    CHECK(code[0] == 0x1234, "off: the original word is back (0x%llx)", (unsigned long long)code[0]);
    calls(6);
    CHECK(shortcut() == BPT__SHORTCUT_NONE, "off: shortcut %u", shortcut());

    CHECK_RC(bpt_session_destroy(s1), 0);
    CHECK_RC(bpt_session_destroy(s2), 0);
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}

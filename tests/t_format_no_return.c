/* t_format_no_return: the Chrome and folded writers on a session that
   traces some functions' calls and their returns, and others' calls alone
   (two trace patterns, as a user narrows return trace to a few functions).
   VM sites: "outer" with call and return trace, "inner" with call trace
   alone; each outer call makes 100 inner calls, then returns.
     1. The records say which calls no return will end (bpt_msg.no_return):
        inner's all, outer's none; and with exception_trace alone (which
        sends return_from too) none.
     2. Chrome: each inner call is an instant event on its thread, inside
        outer's B and E, and every B has its E. Before, each inner call
        was an open call that nothing closed: past the 64 calls a thread
        keeps, outer's return was taken for the newest inner call's, and
        outer's E was never written.
     3. Folded: one stack, outer, charged its calls' time; inner, which has
        no time (no return), is in no stack. Before, outer's time went
        nowhere and "outer;inner;inner;..." stacks appeared.
     4. A return-traced call that cannot have its return traced says so
        too: outer hit with no token (a VM that keeps no frames) 100 times
        gives 100 instant events (it said no_return 0: 64 B events nested
        in each other, closed by the writer at the end, and 36 not
        written; found by review);
     5. and outer recursing past the shadow stack (BPT_SHADOW_FRAMES deep
        and 88 more), returning, then called twice more: the 88 calls past
        the stack are instants, every return closes its own call, and the
        two later calls are slices of their own (the 88 kept the writer's
        depth above the 64 calls it keeps: no E came from a real return,
        and the two later calls were never written). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "format_fixture.h"
#include <stdio.h>
#include <string.h>

enum { OUTER, INNER, NSITES, ROUNDS = 3, INNER_CALLS = 100 };
static const char *const site_name[NSITES] = { "outer", "inner" };
static bpt_vm_word words[NSITES];
static bpt_func *fs[NSITES];

static bpt_vm_token enter(int i) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&words[i]) == 0xBBBB) bpt_vm_breakpoint(fs[i], NULL, &t);
    return t;
}

static void rounds(void) {
    int r, j;
    for (r = 0; r < ROUNDS; r++) {
        bpt_vm_token o = enter(OUTER);
        for (j = 0; j < INNER_CALLS; j++) bpt_vm_return(enter(INNER), 0);   /* token 0: a no-op */
        bpt_vm_return(o, 0);
    }
}

/* msgs[0..n) through the Chrome writer: its B, E and instant events, the
   deepest nesting, and how many events are wrong (an E that closes no B
   of its name, a B left open at the end, an instant not the thread's). */
typedef struct chrome_counts { int b, e, instants, inside, max_depth, wrong; } chrome_counts;
static chrome_counts chrome_of(const bpt_msg *msgs, int n) {
    chrome_counts c = { 0, 0, 0, 0, 0, 0 };
    char open_[64][32], *text, *p;
    bpt_chrome chrome;
    FILE *out = tmpfile();
    int i, depth = 0;
    CHECK(out != NULL, "tmpfile");
    if (!out) return c;
    CHECK_RC(bpt_chrome_open(&chrome, out), 0);
    for (i = 0; i < n; i++) CHECK_RC(bpt_chrome_write(&chrome, &msgs[i]), 0);
    CHECK(bpt_chrome_close(&chrome) > 0, "bpt_chrome_close");
    text = slurp(out);
    fclose(out);
    for (p = text; p && (p = strstr(p, "\"ph\":\"")) != NULL; p += 6) {
        char *line = p, name[32] = "";
        while (line > text && line[-1] != '\n') line--;
        sscanf(line, "%*[,{]\"name\":\"%31[^\"]", name);
        if (p[6] == 'B') {
            c.b++;
            if (depth < 64) snprintf(open_[depth], sizeof open_[depth], "%s", name);
            if (++depth > c.max_depth) c.max_depth = depth;
        } else if (p[6] == 'E') {
            c.e++;
            c.wrong += depth == 0 || (depth <= 64 && strcmp(open_[depth - 1], name) != 0);
            if (depth) depth--;
        } else if (p[6] == 'i') {
            c.instants++;
            c.inside += depth > 0;
            c.wrong += strstr(line, "\"s\":\"t\"") == NULL;
        }
    }
    c.wrong += depth != 0;
    free(text);
    return c;
}

/* Everything the session holds, into msgs; the count. */
static int drain(bpt_session s, bpt_msg *msgs, int max) {
    int n = 0, k;
    while (n < max && (k = bpt_session_drain(s, msgs + n, max - n)) > 0) n += k;
    return n;
}

int main(void) {
    static bpt_msg msgs[2048];
    static bpt_vm_token tokens[BPT_SHADOW_FRAMES + 88];
    enum { DEEP = BPT_SHADOW_FRAMES + 88 };
    bpt_session_desc d;
    bpt_session s;
    bpt_match m;
    bpt_folded *folded;
    chrome_counts c;
    FILE *out;
    char *text;
    int i, n, wrong = 0, calls = 0, flagged = 0, rets = 0;

    for (i = 0; i < NSITES; i++) {
        words[i] = 0xAAAA;
        CHECK_RC(bpt_register_vm(&words[i], 0xBBBB, "nr", site_name[i], 0, NULL, &fs[i]), 0);
    }
    memset(&d, 0, sizeof d);
    d.name = "no-return";
    d.chunks = 16;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "nr:outer/0", BPT_CALL | BPT_RETURN, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "nr:inner/0", BPT_CALL, NULL), 1);
    rounds();
    n = drain(s, msgs, (int)(sizeof msgs / sizeof msgs[0]));
    CHECK(n == ROUNDS * (INNER_CALLS + 2), "%d messages, want %d", n, ROUNDS * (INNER_CALLS + 2));

    /* 1. */
    for (i = 0; i < n; i++)
        if (msgs[i].type == BPT_MSG_CALL && msgs[i].no_return != (strcmp(msgs[i].name, "inner") == 0)) wrong++;
    printf("1. %d messages; %d calls whose no_return is wrong\n", n, wrong);
    CHECK(wrong == 0, "inner's calls say no_return, outer's do not: %d wrong", wrong);

    /* 2. */
    c = chrome_of(msgs, n);
    printf("2. Chrome: %d B, %d E, %d instant events (%d inside a B), deepest %d; %d wrong\n", c.b, c.e,
           c.instants, c.inside, c.max_depth, c.wrong);
    CHECK(c.b == ROUNDS && c.e == ROUNDS && c.instants == ROUNDS * INNER_CALLS && c.inside == c.instants &&
              c.max_depth == 1 && c.wrong == 0,
          "Chrome: want outer's %d B and E, inner's %d instant events inside them", ROUNDS, ROUNDS * INNER_CALLS);

    /* 3. */
    CHECK_RC(bpt_folded_new(&folded), 0);
    for (i = 0; i < n; i++) CHECK_RC(bpt_folded_add(folded, &msgs[i]), 0);
    out = tmpfile();
    CHECK(out != NULL, "tmpfile");
    CHECK(bpt_folded_write(folded, out) == 1, "one folded stack");
    text = slurp(out);
    fclose(out);
    printf("3. folded: %s", text);
    CHECK(strncmp(text, "outer ", 6) == 0 && strchr(text, '\n') == text + strlen(text) - 1 && !strstr(text, "inner"),
          "folded: outer's line alone, want \"outer N\":\n%.500s", text);
    free(text);
    bpt_folded_free(folded);

    /* 4. */
    CHECK_RC(bpt_trace_pattern(s, "nr:inner/0", BPT_OFF, NULL), 1);
    for (i = 0; i < 100; i++) bpt_vm_breakpoint(fs[OUTER], NULL, NULL);
    n = drain(s, msgs, (int)(sizeof msgs / sizeof msgs[0]));
    for (i = flagged = 0; i < n; i++) flagged += msgs[i].type == BPT_MSG_CALL && msgs[i].no_return;
    c = chrome_of(msgs, n);
    printf("4. no token: %d messages, %d say no_return; Chrome: %d B, %d E, %d instants; %d wrong\n", n, flagged,
           c.b, c.e, c.instants, c.wrong);
    CHECK(n == 100 && flagged == 100 && c.b == 0 && c.e == 0 && c.instants == 100 && c.wrong == 0,
          "a VM hit with no token: 100 calls no return ends, 100 instant events");

    /* 5. */
    for (i = 0; i < DEEP; i++) tokens[i] = enter(OUTER);
    for (i = DEEP; i-- > 0;) bpt_vm_return(tokens[i], 0);   /* token 0 past the stack: a no-op */
    for (i = 0; i < 2; i++) bpt_vm_return(enter(OUTER), 0);
    n = drain(s, msgs, (int)(sizeof msgs / sizeof msgs[0]));
    for (i = calls = flagged = rets = 0; i < n; i++) {
        calls += msgs[i].type == BPT_MSG_CALL;
        flagged += msgs[i].type == BPT_MSG_CALL && msgs[i].no_return;
        rets += msgs[i].type == BPT_MSG_RETURN_FROM;
    }
    c = chrome_of(msgs, n);
    printf("5. %d deep, then 2 calls: %d calls (%d say no_return), %d return_from; Chrome: %d B, %d E, %d "
           "instants, deepest %d; %d wrong\n", DEEP, calls, flagged, rets, c.b, c.e, c.instants, c.max_depth,
           c.wrong);
    CHECK(calls == DEEP + 2 && flagged == DEEP - BPT_SHADOW_FRAMES && rets == BPT_SHADOW_FRAMES + 2,
          "the calls past the shadow stack say no_return");
    CHECK(c.b == 64 + 2 && c.e == c.b && c.instants == DEEP - BPT_SHADOW_FRAMES && c.wrong == 0,
          "Chrome: the 64 kept calls and the 2 later ones as B and E, the %d past the stack as instants",
          DEEP - BPT_SHADOW_FRAMES);

    /* 1, exception_trace: its return_from ends the call. */
    memset(&m, 0, sizeof m);
    m.actions = BPT_EXCEPTION;
    CHECK_RC(bpt_trace_pattern(s, "nr:outer/0", BPT_CALL, &m), 1);
    bpt_vm_return(enter(OUTER), 0);
    n = drain(s, msgs, 4);
    CHECK(n == 2 && msgs[0].type == BPT_MSG_CALL && msgs[0].no_return == 0 && msgs[1].type == BPT_MSG_RETURN_FROM,
          "exception_trace: the call (no_return %d) and its return_from, %d messages", n ? msgs[0].no_return : -1, n);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

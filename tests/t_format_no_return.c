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
        nowhere and "outer;inner;inner;..." stacks appeared. */
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

/* Everything the session holds, into msgs; the count. */
static int drain(bpt_session s, bpt_msg *msgs, int max) {
    int n = 0, k;
    while (n < max && (k = bpt_session_drain(s, msgs + n, max - n)) > 0) n += k;
    return n;
}

int main(void) {
    static bpt_msg msgs[1024];
    bpt_session_desc d;
    bpt_session s;
    bpt_match m;
    bpt_chrome chrome;
    bpt_folded *folded;
    FILE *out;
    char *text, *p;
    int i, n, wrong = 0, b = 0, e = 0, instants = 0, depth = 0, max_depth = 0;

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
    out = tmpfile();
    CHECK(out != NULL, "tmpfile");
    CHECK_RC(bpt_chrome_open(&chrome, out), 0);
    for (i = 0; i < n; i++) CHECK_RC(bpt_chrome_write(&chrome, &msgs[i]), 0);
    CHECK(bpt_chrome_close(&chrome) > 0, "bpt_chrome_close");
    text = slurp(out);
    fclose(out);
    for (p = text; p && (p = strstr(p, "\"ph\":\"")) != NULL; p += 6) {
        const char *line = p;
        while (line > text && line[-1] != '\n') line--;
        switch (p[6]) {
        case 'B':
            b++;
            if (++depth > max_depth) max_depth = depth;
            wrong += strncmp(line, ",{\"name\":\"nr:outer/0\"", 21) != 0 && strncmp(line, "{\"name\":\"nr:outer/0\"", 20) != 0;
            break;
        case 'E':
            e++;
            depth--;
            break;
        case 'i':
            instants++;
            wrong += depth != 1 || strstr(line, "nr:inner/0") == NULL || strstr(line, "\"s\":\"t\"") == NULL;
            break;
        default:
            break;
        }
    }
    printf("2. Chrome: %d B, %d E, %d instant events, deepest %d; %d wrong\n", b, e, instants, max_depth, wrong);
    CHECK(b == ROUNDS && e == ROUNDS && instants == ROUNDS * INNER_CALLS && max_depth == 1 && depth == 0 &&
              wrong == 0,
          "Chrome: %d B, %d E and %d instant events, want outer's %d B and E and inner's %d instant events "
          "inside them:\n%.2000s", b, e, instants, ROUNDS, ROUNDS * INNER_CALLS, text);
    free(text);

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

    /* 1, exception_trace: its return_from ends the call. */
    CHECK_RC(bpt_trace_pattern(s, "nr:inner/0", BPT_OFF, NULL), 1);
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

/* t_format_drops: the Chrome and folded writers at a DROPPED message (issue
   #16, item 4). A drop cuts its thread's open stack: the Chrome writer
   closes the thread's open calls at the notice and marks it with an instant
   event, the folded writer forgets them; returns of calls opened before the
   cut match nothing (no E without its B), calls after it start at the root.
   Before, the writers ignored DROPPED and spliced calls from after a loss
   under calls from before it (a game loop gave
   game_frame;physics_step;game_frame;game_frame). Checked on hand-made
   messages (exact output) and on a real session whose smallest buffer (2 chunks of 4096 bytes) overflows:
   there the assertions are about nesting and possible paths, not about how
   many messages the buffer drops. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "format_fixture.h"
#include <string.h>

static bpt_msg dropped(uint32_t tid, uint64_t count, uint64_t ts_us) {
    bpt_msg m = msg(BPT_MSG_DROPPED, tid, NULL, ts_us);
    m.value = count;
    return m;
}

/* The real program's call graph: the only parent -> child edges it has. A
   stack may start with any function (cut at a drop, it lost its top). */
static int allowed(const char *parent, const char *child) {
    static const char *const edges[][2] = {
        { "frame", "physics" }, { "frame", "render" }, { "physics", "collide" }, { "render", "draw" },
        { "F", "F" },   /* the hand-made recursion */
    };
    size_t i;
    for (i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (strcmp(edges[i][0], parent) == 0 && strcmp(edges[i][1], child) == 0) return 1;
    return 0;
}

/* A Chrome trace's events, per thread: every E closes the newest open B of
   its thread with the same name, no B stays open at the end, a drop's
   instant event finds its thread with no open B, and a B inside another is
   an edge of the call graph (allowed; NULL: any). Names are compared
   without "module:" and "/arity". Returns 1, or 0 after printing why. */
static int paths_ok(const char *text, int (*edge)(const char *, const char *)) {
    struct { unsigned tid; int depth; char name[64][64]; } th[16];
    int nth = 0, i;
    const char *l;
    for (l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *ph = strstr(l, "\"ph\":\""), *nm = strstr(l, "{\"name\":\""), *tid = strstr(l, "\"tid\":");
        const char *eol = strchr(l, '\n'), *colon, *slash;
        char name[64];
        unsigned t;
        size_t len;
        if (!ph || !nm || !tid || (eol && ph > eol) || (ph[6] != 'B' && ph[6] != 'E' && ph[6] != 'i')) continue;
        nm += 9;
        colon = strchr(nm, ':');
        slash = strchr(nm, '/');
        if (ph[6] != 'i' && colon && slash && colon < slash) nm = colon + 1;
        len = (size_t)((ph[6] != 'i' && slash ? slash : strchr(nm, '"')) - nm);
        if (len >= sizeof name) return 0;
        memcpy(name, nm, len);
        name[len] = '\0';
        t = (unsigned)strtoul(tid + 6, NULL, 10);
        for (i = 0; i < nth && th[i].tid != t; i++) {}
        if (i == nth) {
            if (nth == 16) return 0;
            th[nth].tid = t;
            th[nth++].depth = 0;
        }
        if (ph[6] == 'i') {
            if (th[i].depth) {
                fprintf(stderr, "%s on thread %u inside %s\n", name, t, th[i].name[th[i].depth - 1]);
                return 0;
            }
        } else if (ph[6] == 'B') {
            if (th[i].depth == 64) return 0;
            if (th[i].depth && edge && !edge(th[i].name[th[i].depth - 1], name)) {
                fprintf(stderr, "B of %s inside %s on thread %u: not a call the program makes\n", name,
                        th[i].name[th[i].depth - 1], t);
                return 0;
            }
            strcpy(th[i].name[th[i].depth++], name);
        } else if (th[i].depth == 0 || strcmp(th[i].name[--th[i].depth], name) != 0) {
            fprintf(stderr, "E of %s on thread %u closes no B of its name\n", name, t);
            return 0;
        }
    }
    for (i = 0; i < nth; i++)
        if (th[i].depth) return 0;
    return 1;
}

/* Every line of folded stacks is a path of the call graph. */
static int folded_ok(const char *text) {
    const char *l;
    for (l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char parent[64] = "", frame[64];
        const char *p = l;
        for (;;) {
            size_t len = strcspn(p, "; \n");
            if (len >= sizeof frame) return 0;
            memcpy(frame, p, len);
            frame[len] = '\0';
            if (parent[0] && !allowed(parent, frame)) {
                fprintf(stderr, "folded: %s under %s: not a call the program makes\n", frame, parent);
                return 0;
            }
            strcpy(parent, frame);
            if (p[len] != ';') break;
            p += len + 1;
        }
    }
    return 1;
}

/* text with every '@' replaced by the process id: the expected Chrome output. */
static void with_pid(char *out, size_t size, const char *text) {
    size_t n = 0;
    for (; *text && n + 16 < size; text++) {
        if (*text == '@') n += (size_t)snprintf(out + n, size - n, "%d", (int)getpid());
        else out[n++] = *text;
    }
    out[n] = '\0';
}

/* >>real: a game loop on VM sites, traced into the smallest buffer, drained
   every few hundred messages, so that it overflows at times and not at others. */
enum { FRAME, PHYSICS, COLLIDE, RENDER, DRAW, NSITES };
static const char *const site_name[NSITES] = { "frame", "physics", "collide", "render", "draw" };
static bpt_vm_word words[NSITES];
static bpt_func *fs[NSITES];
static bpt_session sess;
static bpt_chrome chrome;
static bpt_folded *folded;
static long steps, next_drain, gap, notices, msgs;

static void drain(void) {
    bpt_msg d[64];
    int k, got;
    while ((got = bpt_session_drain(sess, d, 64)) > 0)
        for (k = 0; k < got; k++) {
            notices += d[k].type == BPT_MSG_DROPPED;
            msgs++;
            CHECK_RC(bpt_chrome_write(&chrome, &d[k]), 0);
            CHECK_RC(bpt_folded_add(folded, &d[k]), 0);
        }
}

/* One traced event happened: drain at the next scheduled step. The gaps
   cycle through lengths under and over what the buffer holds. */
static void tick(void) {
    static const long gaps[] = { 200, 760, 440, 280, 920, 520 };
    if (++steps < next_drain) return;
    drain();
    next_drain = steps + gaps[gap++ % (long)(sizeof gaps / sizeof gaps[0])];
}

static bpt_vm_token enter(int i) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&words[i]) == 0xBBBB) bpt_vm_breakpoint(fs[i], NULL, &t);
    tick();
    return t;
}

static void leave(bpt_vm_token t) {
    bpt_vm_return(t, 0);
    tick();
}

static void game_frame(int it) {
    bpt_vm_token f = enter(FRAME), p, r;
    int j;
    p = enter(PHYSICS);
    for (j = 0; j < it % 3; j++) leave(enter(COLLIDE));
    leave(p);
    r = enter(RENDER);
    for (j = 0; j < 1 + it % 2; j++) leave(enter(DRAW));
    leave(r);
    leave(f);
}

int main(void) {
    static const char A[] = "A", B[] = "B", C[] = "C", D[] = "D", E[] = "E", X[] = "X";
    bpt_msg m[16];
    bpt_folded *f;
    FILE *out;
    char *text, want[4096];
    int i, n;

    /* Thread 5: A (0 us) calls B (10 us); 3 messages are lost (the notice
       at 50 us); then C (60..70 us), B's and A's returns (80, 100 us: their
       calls are from before the loss), D (90 us) unwound at 95 us, E (120
       us) cut by a second loss at 130 us. Thread 6's X (20..55 us) spans
       thread 5's loss untouched. Thread 9 loses 1 message before any call. */
    n = 0;
    m[n++] = msg(BPT_MSG_CALL, 5, A, 1000);
    m[n++] = msg(BPT_MSG_CALL, 5, B, 1010);
    m[n++] = msg(BPT_MSG_CALL, 6, X, 1020);
    m[n++] = dropped(5, 3, 1050);
    m[n++] = msg(BPT_MSG_RETURN_FROM, 6, X, 1055);
    m[n++] = msg(BPT_MSG_CALL, 5, C, 1060);
    m[n++] = msg(BPT_MSG_RETURN_FROM, 5, C, 1070);
    m[n++] = msg(BPT_MSG_RETURN_FROM, 5, B, 1080);
    m[n++] = msg(BPT_MSG_CALL, 5, D, 1090);
    m[n++] = msg(BPT_MSG_EXCEPTION_FROM, 5, D, 1095);
    m[n++] = msg(BPT_MSG_RETURN_FROM, 5, A, 1100);
    m[n++] = dropped(9, 1, 1110);
    m[n++] = msg(BPT_MSG_CALL, 5, E, 1120);
    m[n++] = dropped(5, 2, 1130);

    out = tmpfile();
    CHECK_RC(bpt_chrome_open(&chrome, out), 0);
    for (i = 0; i < n; i++) CHECK_RC(bpt_chrome_write(&chrome, &m[i]), 0);
    CHECK(chrome.unmatched == 2 && chrome.closed == 3, "unmatched %ld (2: B's and A's returns after the loss), "
          "closed %ld (3: B and A at the first loss, E at the second)", chrome.unmatched, chrome.closed);
    CHECK(bpt_chrome_close(&chrome) == 18, "18 records: 6 B, 6 E, 3 instants, 3 thread names");
    text = slurp(out);
    with_pid(want, sizeof want,
             "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":@,\"tid\":5,\"args\":{\"name\":\"thread 5\"}}\n"
             ",{\"name\":\"m:A/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":0.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:B/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":10.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":@,\"tid\":6,\"args\":{\"name\":\"thread 6\"}}\n"
             ",{\"name\":\"m:X/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":20.000,\"pid\":@,\"tid\":6}\n"
             ",{\"name\":\"m:B/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":50.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:A/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":50.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"dropped 3\",\"cat\":\"bptrace\",\"ph\":\"i\",\"s\":\"t\",\"ts\":50.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:X/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":55.000,\"pid\":@,\"tid\":6}\n"
             ",{\"name\":\"m:C/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":60.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:C/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":70.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:D/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":90.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:D/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":95.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":@,\"tid\":9,\"args\":{\"name\":\"thread 9\"}}\n"
             ",{\"name\":\"dropped 1\",\"cat\":\"bptrace\",\"ph\":\"i\",\"s\":\"t\",\"ts\":110.000,\"pid\":@,\"tid\":9}\n"
             ",{\"name\":\"m:E/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":120.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"m:E/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":130.000,\"pid\":@,\"tid\":5}\n"
             ",{\"name\":\"dropped 2\",\"cat\":\"bptrace\",\"ph\":\"i\",\"s\":\"t\",\"ts\":130.000,\"pid\":@,\"tid\":5}\n"
             "]}\n");
    CHECK(strcmp(text, want) == 0, "Chrome:\n%s\nwanted:\n%s", text, want);
    CHECK(paths_ok(text, NULL), "Chrome events do not nest:\n%s", text);
    free(text);
    fclose(out);

    /* Folded: A, B and E were open at a loss: their time is unknown and
       charged nowhere; C and D ran at the root, not under A;B. */
    CHECK_RC(bpt_folded_new(&f), 0);
    for (i = 0; i < n; i++) CHECK_RC(bpt_folded_add(f, &m[i]), 0);
    out = tmpfile();
    CHECK(bpt_folded_write(f, out) == 3, "3 stacks");
    text = slurp(out);
    CHECK(strcmp(text, "X 35\nC 10\nD 5\n") == 0, "folded:\n%s\nwanted:\nX 35\nC 10\nD 5\n", text);
    free(text);
    fclose(out);
    bpt_folded_free(f);

    /* A loss inside recursion 70 deep, past the 64 calls a thread keeps:
       the 64 kept calls are closed at the notice (the 6 deeper ones had no
       B), and none of the 70 returns after it closes anything. */
    {
        static const char F[] = "F";
        int k;
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&chrome, out), 0);
        CHECK_RC(bpt_folded_new(&f), 0);
        for (k = 0; k < 141; k++) {
            bpt_msg r = k < 70 ? msg(BPT_MSG_CALL, 3, F, (uint64_t)k)
                      : k == 70 ? dropped(3, 5, 90) : msg(BPT_MSG_RETURN_FROM, 3, F, (uint64_t)(30 + k));
            CHECK_RC(bpt_chrome_write(&chrome, &r), 0);
            CHECK_RC(bpt_folded_add(f, &r), 0);
        }
        CHECK(chrome.unmatched == 70 && chrome.closed == 64, "deep: unmatched %ld (70), closed %ld (64)",
              chrome.unmatched, chrome.closed);
        CHECK(bpt_chrome_close(&chrome) == 130, "deep: 64 B, 64 E, an instant and a thread name");
        text = slurp(out);
        CHECK(count(text, "\"ph\":\"B\"") == 64 && count(text, "\"ph\":\"E\"") == 64 &&
              count(text, "\"ph\":\"i\"") == 1 && paths_ok(text, allowed), "deep: events:\n%s", text);
        free(text);
        fclose(out);
        out = tmpfile();
        CHECK(bpt_folded_write(f, out) == 0, "deep: no stack: every call was open at the loss");
        fclose(out);
        bpt_folded_free(f);
    }

    /* >>real: the game loop, 2000 frames, traced with call and return trace
       into the smallest buffer, drained at uneven gaps into both writers. */
    {
        bpt_session_desc desc;
        bpt_session_counts st;
        memset(&desc, 0, sizeof desc);
        desc.chunk_bytes = 4096;   /* the smallest buffer: 2 chunks of 4096 bytes, */
        desc.chunks = 2;           /* about 400 of these records, */
        desc.max_chunks = 2;       /* and no growth */
        for (i = 0; i < NSITES; i++) {
            words[i] = (bpt_vm_word)(0x100 + i);
            CHECK_RC(bpt_register_vm(&words[i], 0xBBBB, "vm", site_name[i], 0, NULL, &fs[i]), 0);
        }
        CHECK_RC(bpt_session_create(&desc, &sess), 0);
        CHECK_RC(bpt_trace_pattern(sess, "vm:_/_", BPT_CALL | BPT_RETURN, NULL), NSITES);
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&chrome, out), 0);
        CHECK_RC(bpt_folded_new(&folded), 0);
        next_drain = 200;
        for (i = 0; i < 2000; i++) game_frame(i);
        drain();   /* what is left; drops since the last room are never announced */
        CHECK_RC(bpt_session_stats(sess, &st), 0);
        printf("real: %ld messages drained, %ld DROPPED notices, %llu messages dropped\n", msgs, notices,
               (unsigned long long)st.dropped);
        CHECK(notices > 0 && st.dropped > 0, "the buffer of 2 chunks overflowed: %ld notices", notices);
        CHECK(bpt_chrome_close(&chrome) > 0, "Chrome trace written");
        text = slurp(out);
        CHECK(count(text, "\"ph\":\"i\"") == notices, "one instant event per DROPPED: %ld of %ld",
              count(text, "\"ph\":\"i\""), notices);
        CHECK(paths_ok(text, allowed), "Chrome events nest only as the program calls");
        free(text);
        fclose(out);
        out = tmpfile();
        CHECK(bpt_folded_write(folded, out) > 0, "folded stacks written");
        text = slurp(out);
        printf("%s", text);
        CHECK(folded_ok(text), "every folded stack is a path the program takes:\n%s", text);
        free(text);
        fclose(out);
        bpt_folded_free(folded);
        CHECK_RC(bpt_session_destroy(sess), 0);
        for (i = 0; i < NSITES; i++) CHECK_RC(bpt_unregister(fs[i]), 0);
    }
    return CHECK_DONE();
}

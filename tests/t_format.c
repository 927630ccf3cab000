/* t_format: the off-hot-path writers: Chrome Trace Event JSON and FlameGraph
   folded stacks, from hand-made messages (exact figures) and from a real
   session's drained call/return messages (balanced events); the dbg and
   tprof text. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "format_fixture.h"
#include <string.h>

static bpt_vm_word words[2] = { 0x100, 0x101 };
static bpt_func *fs[2];
static bpt_vm_token enter(int i) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(&words[i]) == 0xBBBB) bpt_vm_breakpoint(fs[i], NULL, &t);
    return t;
}

/* Whether the B and E events of a Chrome trace nest per thread: every E
   closes the newest open B of its thread, with the same name, and no B
   stays open at the end. */
static int nested(const char *text) {
    struct { unsigned tid; int depth; char name[64][64]; } th[16];
    int nth = 0, i;
    const char *l;
    for (l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *ph = strstr(l, "\"ph\":\""), *nm = strstr(l, "{\"name\":\""), *tid = strstr(l, "\"tid\":");
        const char *eol = strchr(l, '\n');
        char name[64];
        unsigned t;
        size_t len;
        if (!ph || !nm || !tid || (eol && ph > eol) || (ph[6] != 'B' && ph[6] != 'E')) continue;
        nm += 9;
        len = (size_t)(strchr(nm, '"') - nm);
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
        if (ph[6] == 'B') {
            if (th[i].depth == 64) return 0;
            strcpy(th[i].name[th[i].depth++], name);
        } else if (th[i].depth == 0 || strcmp(th[i].name[--th[i].depth], name) != 0) {
            return 0;
        }
    }
    for (i = 0; i < nth; i++)
        if (th[i].depth) return 0;
    return 1;
}

int main(void) {
    static const char A[] = "A", B[] = "B", C[] = "C";
    bpt_msg m[12];
    bpt_chrome w;
    bpt_folded *f;
    FILE *out;
    char *text;
    int i, n;

    /* Thread 7: A (0..100 us) calls B (10..40 us), then B again (70..),
       which calls C (80..): both unwound by A's exception_from (no message
       of their own). Thread 8: C (5..25 us), then A (110..), still running
       at the end. A return of C on thread 9, which never called it
       (tracing began inside). A return_to on thread 7 (50 us), a type both
       writers ignore. (A DROPPED message cuts a thread's stack:
       t_format_drops.) */
    m[0] = msg(BPT_MSG_CALL, 7, A, 1000);
    m[1] = msg(BPT_MSG_CALL, 8, C, 1005);
    m[2] = msg(BPT_MSG_CALL, 7, B, 1010);
    m[3] = msg(BPT_MSG_RETURN_FROM, 8, C, 1025);
    m[4] = msg(BPT_MSG_RETURN_FROM, 7, B, 1040);
    m[5] = msg(BPT_MSG_RETURN_TO, 7, A, 1050);
    m[6] = msg(BPT_MSG_RETURN_FROM, 9, C, 1060);
    m[7] = msg(BPT_MSG_CALL, 7, B, 1070);
    m[8] = msg(BPT_MSG_CALL, 7, C, 1080);
    m[9] = msg(BPT_MSG_EXCEPTION_FROM, 7, A, 1100);
    m[10] = msg(BPT_MSG_CALL, 8, A, 1110);

    out = tmpfile();
    CHECK_RC(bpt_chrome_open(&w, out), 0);
    for (i = 0; i < 11; i++) CHECK_RC(bpt_chrome_write(&w, &m[i]), 0);
    CHECK(w.unmatched == 1 && w.closed == 2, "unmatched %ld (1: thread 9's return), closed %ld (2: thread 7's "
          "unwound B and C)", w.unmatched, w.closed);
    n = bpt_chrome_close(&w);
    text = slurp(out);
    printf("%s", text);
    CHECK(n == 14, "%d records (6 B, 6 E and 2 thread names)", n);
    CHECK(count(text, "\"ph\":\"B\"") == 6 && count(text, "\"ph\":\"E\"") == 6, "B/E events");
    CHECK(count(text, "\"thread_name\"") == 2, "one name per thread that called");
    CHECK(nested(text), "B/E events do not nest per thread:\n%s", text);
    CHECK(strstr(text, "\"ts\":10.000") && strstr(text, "\"ts\":0.000"), "ts in us from the first event");
    CHECK(strncmp(text, "{\"displayTimeUnit\"", 17) == 0 && strstr(text, "]}\n"), "JSON framing");
    free(text);
    fclose(out);

    CHECK_RC(bpt_folded_new(&f), 0);
    for (i = 0; i < 11; i++) CHECK_RC(bpt_folded_add(f, &m[i]), 0);
    out = tmpfile();
    n = bpt_folded_write(f, out);
    text = slurp(out);
    printf("%s", text);
    CHECK(n == 3, "%d stacks", n);
    CHECK(strstr(text, "A 70\n") && strstr(text, "A;B 30\n") && strstr(text, "C 20\n"), "own time per stack:\n%s", text);
    free(text);
    fclose(out);
    bpt_folded_free(f);

    /* Recursion 70 deep, past the 64 calls a thread keeps: F calls itself
       at 0..69 us and returns at 100..169 us, innermost first. The returns
       of the 6 calls not kept must pop nothing kept (the folded writer
       used to match them to kept calls of F, popping those early). Chrome:
       64 B and 64 E, nested. Folded: the kept call at depth k (1..64)
       lasts 169 - 2(k-1) us; its own time is 2 us for k < 64 and the 43 us
       of the deepest kept call (its untraced-by-the-writer callees too). */
    {
        static const char F[] = "F";
        char want[16384], *p = want;
        int k;
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&w, out), 0);
        CHECK_RC(bpt_folded_new(&f), 0);
        for (k = 0; k < 140; k++) {
            bpt_msg r = k < 70 ? msg(BPT_MSG_CALL, 3, F, (uint64_t)k) : msg(BPT_MSG_RETURN_FROM, 3, F, (uint64_t)(30 + k));
            CHECK_RC(bpt_chrome_write(&w, &r), 0);
            CHECK_RC(bpt_folded_add(f, &r), 0);
        }
        CHECK(w.unmatched == 0 && w.closed == 0, "deep: unmatched %ld, closed %ld", w.unmatched, w.closed);
        CHECK(bpt_chrome_close(&w) == 129, "deep: 64 B, 64 E and a thread name");
        text = slurp(out);
        CHECK(count(text, "\"ph\":\"B\"") == 64 && count(text, "\"ph\":\"E\"") == 64 && nested(text),
              "deep: B/E events");
        free(text);
        fclose(out);
        /* Most time first (the 43 us line), then the 2 us lines by text: shortest stack first. */
        for (k = 0; k < 64; k++) p += sprintf(p, "%sF", k ? ";" : "");
        p += sprintf(p, " 43\n");
        for (n = 1; n < 64; n++) {
            for (k = 0; k < n; k++) p += sprintf(p, "%sF", k ? ";" : "");
            p += sprintf(p, " 2\n");
        }
        out = tmpfile();
        CHECK(bpt_folded_write(f, out) == 64, "deep: 64 stacks");
        text = slurp(out);
        CHECK(strcmp(text, want) == 0, "deep: folded stacks:\n%s\nwanted:\n%s", text, want);
        free(text);
        fclose(out);
        bpt_folded_free(f);
    }

    /* Two processes on one thread (bpt_process_switch): process 100 calls pa,
       process 200 then calls and returns pb, then pa returns. Each process
       has its own stack: no "pa;pb" (it never ran), and pb's events on a
       track of process 200's (before: one stack per thread; found by
       review). */
    {
        static const char PA[] = "pa", PB[] = "pb";
        bpt_msg pm[4];
        pm[0] = msg(BPT_MSG_CALL, 7, PA, 0);
        pm[1] = msg(BPT_MSG_CALL, 7, PB, 10);
        pm[2] = msg(BPT_MSG_RETURN_FROM, 7, PB, 14);
        pm[3] = msg(BPT_MSG_RETURN_FROM, 7, PA, 30);
        pm[0].process = pm[3].process = 100;
        pm[1].process = pm[2].process = 200;
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&w, out), 0);
        CHECK_RC(bpt_folded_new(&f), 0);
        for (n = 0; n < 4; n++) {
            CHECK_RC(bpt_chrome_write(&w, &pm[n]), 0);
            CHECK_RC(bpt_folded_add(f, &pm[n]), 0);
        }
        CHECK(bpt_chrome_close(&w) == 8, "processes: 2 B, 2 E, 2 thread names, 2 process names");
        text = slurp(out);
        printf("%s", text);
        CHECK(count(text, "\"pid\":200,\"tid\":7") == 3 && count(text, "\"pid\":100,\"tid\":7") == 3 &&
              count(text, "\"process_name\"") == 2 && nested(text) && w.closed == 0 && w.unmatched == 0,
              "each process's calls on its own track");
        free(text);
        fclose(out);
        out = tmpfile();
        CHECK(bpt_folded_write(f, out) == 2, "processes: 2 stacks");
        text = slurp(out);
        printf("%s", text);
        CHECK(strcmp(text, "pa 30\npb 4\n") == 0, "processes: pa's own time is all 30 us, pb a stack of its own:\n%s",
              text);
        free(text);
        fclose(out);
        bpt_folded_free(f);
    }

    /* A process switched to on several threads: threads 1 and 2 run
       process 777, thread 3 process 778, then 777 too, and thread 4 its
       own (the default: its id). Each track has its thread_name record,
       each switched process one process_name record: every new track of
       777 wrote one (3 records of 777, 19 records in all). */
    {
        static const char PA[] = "pa", PB[] = "pb", PC[] = "pc", PD[] = "pd";
        static const struct { int type; uint32_t tid; uint64_t process; const char *name; } sw[10] = {
            { BPT_MSG_CALL, 1, 777, PA },        { BPT_MSG_CALL, 2, 777, PB },
            { BPT_MSG_CALL, 3, 778, PC },        { BPT_MSG_RETURN_FROM, 3, 778, PC },
            { BPT_MSG_CALL, 3, 777, PC },        { BPT_MSG_CALL, 4, 4, PD },
            { BPT_MSG_RETURN_FROM, 1, 777, PA }, { BPT_MSG_RETURN_FROM, 2, 777, PB },
            { BPT_MSG_RETURN_FROM, 3, 777, PC }, { BPT_MSG_RETURN_FROM, 4, 4, PD },
        };
        char own[64];
        int records;
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&w, out), 0);
        for (n = 0; n < 10; n++) {
            bpt_msg sm = msg(sw[n].type, sw[n].tid, sw[n].name, (uint64_t)n);
            sm.process = sw[n].process;
            CHECK_RC(bpt_chrome_write(&w, &sm), 0);
        }
        records = bpt_chrome_close(&w);
        text = slurp(out);
        printf("%s", text);
        snprintf(own, sizeof own, "\"pid\":%lld,\"tid\":4", (long long)getpid());
        CHECK(records == 17, "switched processes: 5 B, 5 E, 5 thread names, 2 process names: %d records", records);
        CHECK(count(text, "\"process_name\",\"ph\":\"M\",\"pid\":777,") == 1 &&
              count(text, "\"process_name\",\"ph\":\"M\",\"pid\":778,") == 1 && count(text, "\"process_name\"") == 2,
              "one process_name record for 777, one for 778, none for thread 4's own process: %ld, %ld, %ld in all",
              count(text, "\"pid\":777,\"args\""), count(text, "\"pid\":778,\"args\""), count(text, "\"process_name\""));
        CHECK(count(text, "\"thread_name\"") == 5 && count(text, "\"pid\":777,\"tid\":1") == 3 &&
              count(text, "\"pid\":777,\"tid\":2") == 3 && count(text, "\"pid\":777,\"tid\":3") == 3 &&
              count(text, "\"pid\":778,\"tid\":3") == 3 && count(text, own) == 3,
              "a thread_name record, a B and an E a track");
        CHECK(nested(text) && w.closed == 0 && w.unmatched == 0, "nested events");
        free(text);
        fclose(out);
    }

    /* tprof table: a name wider than the default column keeps the columns aligned. */
    {
        bpt_profile_row rows[2];
        char tab[1024], *l1, *l2, *l3;
        memset(rows, 0, sizeof rows);
        rows[0].module = "sqlite_live"; rows[0].name = "sqlite3PagerCommitPhaseOne.part.0"; rows[0].calls = 3; rows[0].value = 3000;
        rows[1].module = "m"; rows[1].name = "f"; rows[1].calls = 1; rows[1].value = 1000;
        CHECK(bpt_format_profile(rows, 2, 0, tab, sizeof tab) > 0, "profile");
        printf("%s", tab);
        l1 = strchr(tab, '\n') + 1; l2 = strchr(l1, '\n') + 1; l3 = strchr(l2, '\n') + 1;
        CHECK(l2 - l1 == l3 - l2 && strchr(tab, '\n') - tab + 1 == l2 - l1, "rows of one width:\n%s", tab);
    }

    /* dbg: a STR argument without its NUL in a message built by hand is
       printed to the end of str, not read past it (found by review). */
    {
        struct { bpt_msg m; char after[32]; } w;
        char line[2 * BPT_MSG_STR_BYTES];
        const char *q;
        memset(&w, 'y', sizeof w);
        w.after[sizeof w.after - 1] = '\0';
        w.m.type = BPT_MSG_CALL; w.m.nargs = 1; w.m.thread = 1; w.m.process = 1; w.m.ts_ns = 0; w.m.session = 1;
        w.m.module = "m"; w.m.name = "s"; w.m.arity = 1; w.m.format = NULL; w.m.user = NULL;
        w.m.caller_module = w.m.caller_name = NULL; w.m.caller = 0; w.m.exception_class = NULL;
        w.m.args[0] = 0;
        w.m.argtype[0] = BPT_ARG_STR;
        memset(w.m.str, 'x', sizeof w.m.str);
        CHECK(bpt_format_dbg(&w.m, line, sizeof line) > 0, "dbg of an unterminated STR");
        q = strchr(line, '"');
        CHECK(q && strspn(q + 1, "x") == sizeof w.m.str && q[1 + sizeof w.m.str] == '"' && !strchr(line, 'y'),
              "the STR printed to the end of str, nothing after it: %.80s...", line);
    }

    /* tprof table of call_memory: bytes are a signed net. A function whose
       calls freed more than they allocated ranks last and shows below zero
       (it ranked first, as 18446744073709551516; found by review). */
    {
        bpt_profile_row rows[3];
        char tab[1024], *a, *b, *c;
        memset(rows, 0, sizeof rows);
        rows[0].module = "m"; rows[0].name = "frees"; rows[0].calls = 2; rows[0].value = (uint64_t)(int64_t)-100;
        rows[1].module = "m"; rows[1].name = "grows"; rows[1].calls = 1; rows[1].value = 1000;
        rows[2].module = "m"; rows[2].name = "small"; rows[2].calls = 1; rows[2].value = 10;
        CHECK(bpt_format_profile(rows, 3, 1, tab, sizeof tab) > 0, "memory profile");
        printf("%s", tab);
        a = strstr(tab, "m:grows/0"); b = strstr(tab, "m:small/0"); c = strstr(tab, "m:frees/0");
        CHECK(a && b && c && a < b && b < c, "most bytes first, the net below zero last:\n%s", tab);
        CHECK(c && strstr(c, " -100 ") && strstr(c, " -50.0 "), "-100 B, -50.0 a call:\n%s", tab);
        CHECK(strstr(tab, "  910 ") && !strstr(tab, "18446744073709551"), "total 910 B, nothing unsigned:\n%s", tab);
    }

    /* Misuse. */
    CHECK_RC(bpt_chrome_open(NULL, stdout), BPT_EINVAL);
    CHECK_RC(bpt_chrome_write(NULL, &m[0]), BPT_EINVAL);
    CHECK_RC(bpt_folded_new(NULL), BPT_EINVAL);
    CHECK_RC(bpt_folded_add(NULL, &m[0]), BPT_EINVAL);
    CHECK_RC(bpt_folded_write(NULL, stdout), BPT_EINVAL);

    /* A real session: nested VM calls with return trace, drained into both writers. */
    {
        bpt_session s;
        bpt_msg d[64];
        int k, got;
        long calls = 0, returns = 0;
        CHECK_RC(bpt_register_vm(&words[0], 0xBBBB, "vm", "outer", 0, NULL, &fs[0]), 0);
        CHECK_RC(bpt_register_vm(&words[1], 0xBBBB, "vm", "inner", 0, NULL, &fs[1]), 0);
        CHECK_RC(bpt_session_create(NULL, &s), 0);
        CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_CALL | BPT_RETURN, NULL), 2);
        for (k = 0; k < 5; k++) {
            bpt_vm_token to = enter(0), ti = enter(1);
            bpt_vm_return(ti, 1);
            bpt_vm_return(to, 2);
        }
        out = tmpfile();
        CHECK_RC(bpt_chrome_open(&w, out), 0);
        CHECK_RC(bpt_folded_new(&f), 0);
        while ((got = bpt_session_drain(s, d, 64)) > 0)
            for (k = 0; k < got; k++) {
                calls += d[k].type == BPT_MSG_CALL;
                returns += d[k].type == BPT_MSG_RETURN_FROM;
                CHECK_RC(bpt_chrome_write(&w, &d[k]), 0);
                CHECK_RC(bpt_folded_add(f, &d[k]), 0);
            }
        CHECK(bpt_chrome_close(&w) == 21, "20 events and a thread name");
        text = slurp(out);
        CHECK(calls == 10 && returns == 10 && count(text, "\"ph\":\"B\"") == 10 && count(text, "\"ph\":\"E\"") == 10,
              "%ld calls, %ld returns", calls, returns);
        free(text);
        fclose(out);
        out = tmpfile();
        CHECK(bpt_folded_write(f, out) == 2, "outer and outer;inner");
        text = slurp(out);
        printf("%s", text);
        CHECK(strstr(text, "outer;inner ") && (strstr(text, "\nouter ") != NULL || strncmp(text, "outer ", 6) == 0),
              "stacks:\n%s", text);
        free(text);
        fclose(out);
        bpt_folded_free(f);
        CHECK_RC(bpt_session_destroy(s), 0);
        CHECK_RC(bpt_unregister(fs[0]), 0);
        CHECK_RC(bpt_unregister(fs[1]), 0);
    }
    return CHECK_DONE();
}

/* t_sessions: what sessions, patterns and match specs do, one claim at a time.
   Isolation, pause and restart, match specs (predicate, silent, message),
   patterns in force for functions registered later, callback tracers, full
   rings (DROPPED notices), recon_trace rate limits, dbg formatting. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>

#define BP ((bpt_vm_word)0xBEEF)
static bpt_vm_word code[8];
static uint64_t arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static int fmt_hex(char *buf, size_t n, uint64_t v) { return snprintf(buf, n, "0x%llx", (unsigned long long)v); }
static const bpt_vm_ops ops = { .arg = arg, .format = fmt_hex };

static void call(bpt_func *f, int site, uint64_t a0, uint64_t a1) {
    uint64_t frame[2] = { a0, a1 };
    bpt_vm_word w = BPT_VM_FETCH(&code[site]);
    if (w == BP) w = bpt_vm_breakpoint(f, frame, NULL);
    CHECK(w == (bpt_vm_word)(0x100 + site), "site %d executed %#lx", site, (unsigned long)w);
}

static int drain_calls(bpt_session s, bpt_msg *out, int max) {
    bpt_msg buf[256];
    int n = bpt_session_drain(s, buf, 256), i, k = 0;
    for (i = 0; i < n; i++)
        if (buf[i].type == BPT_MSG_CALL && k < max) out[k++] = buf[i];
    return k;
}

static uint64_t count_of(bpt_session s, bpt_func *f) {
    bpt_info info;
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
    return info.count;
}

static int even_first_arg(const uint64_t *args, int n, void *user) {
    (void)user;
    return n > 0 && args[0] % 2 == 0;
}

static int callback_calls;
static void callback_tracer(const bpt_msg *m, void *user) {
    (void)user;
    if (m->type == BPT_MSG_CALL) callback_calls++;
}

int main(void) {
    bpt_func *f, *g, *late;
    bpt_session a, b, cb, small, limited;
    bpt_session_desc d;
    bpt_session_counts st;
    bpt_msg m[64], all[64];
    char line[256];
    int i, n, dropped_notices = 0;

    for (i = 0; i < 8; i++) code[i] = (bpt_vm_word)(0x100 + i);
    CHECK_RC(bpt_register_vm(&code[0], BP, "m", "f", 2, &ops, &f), 0);
    CHECK_RC(bpt_register_vm(&code[1], BP, "m", "g", 1, &ops, &g), 0);
    CHECK_RC(bpt_session_create(NULL, &a), 0);
    CHECK_RC(bpt_session_create(NULL, &b), 0);

    /* Isolation: A traces f, B counts f; neither sees the other's settings. */
    CHECK_RC(bpt_trace_pattern(a, "m:f/2", BPT_CALL, NULL), 1);
    CHECK_RC(bpt_trace_pattern(b, "m:_/_", BPT_COUNT, NULL), 2);
    for (i = 0; i < 10; i++) call(f, 0, (uint64_t)i, 7);
    CHECK(drain_calls(a, m, 64) == 10, "A got its 10 call messages");
    CHECK(drain_calls(b, m, 64) == 0, "B (count only) got no messages");
    CHECK(count_of(b, f) == 10, "B counted 10");
    CHECK(count_of(a, f) == 0, "A has no count");
    CHECK_RC(bpt_trace_pattern(b, "m:f/2", BPT_OFF, NULL), 1);
    for (i = 0; i < 3; i++) call(f, 0, 1, 2);
    CHECK(drain_calls(a, m, 64) == 3, "switching B off leaves A tracing");
    printf("isolation: checked\n");

    /* Pause keeps the value, restart zeroes it, on counts again. */
    CHECK_RC(bpt_trace_pattern(b, "m:g/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    for (i = 0; i < 5; i++) call(g, 1, 0, 0);
    CHECK(count_of(b, g) == 0, "paused count stays 0 (was 0 and g had no calls)");
    CHECK_RC(bpt_trace_pattern(b, "m:g/1", BPT_COUNT, NULL), 1);
    for (i = 0; i < 5; i++) call(g, 1, 0, 0);
    CHECK(count_of(b, g) == 5, "resumed count is 5: %llu", (unsigned long long)count_of(b, g));
    CHECK_RC(bpt_trace_pattern(b, "m:g/1", BPT_COUNT | BPT_PAUSE, NULL), 1);
    for (i = 0; i < 5; i++) call(g, 1, 0, 0);
    CHECK(count_of(b, g) == 5, "paused keeps 5: %llu", (unsigned long long)count_of(b, g));
    CHECK_RC(bpt_trace_pattern(b, "m:g/1", BPT_COUNT | BPT_RESTART, NULL), 1);
    CHECK(count_of(b, g) == 0, "restart zeroes");
    for (i = 0; i < 4; i++) call(g, 1, 0, 0);
    CHECK(count_of(b, g) == 4, "restart counts again: %llu", (unsigned long long)count_of(b, g));
    printf("pause/restart: checked\n");

    /* Match specs: predicate on arguments, message, silent. */
    {
        bpt_match ms;
        memset(&ms, 0, sizeof ms);
        ms.pred = even_first_arg;
        ms.message = "even";
        CHECK_RC(bpt_trace_pattern(a, "m:f/2", BPT_CALL, &ms), 1);
        for (i = 0; i < 10; i++) call(f, 0, (uint64_t)i, 0xff);
        n = drain_calls(a, m, 64);
        CHECK(n == 5, "predicate passed 5 of 10: %d", n);
        for (i = 0; i < n; i++) {
            CHECK(m[i].args[0] % 2 == 0 && m[i].args[1] == 0xff && m[i].nargs == 2, "args of message %d", i);
            CHECK(m[i].user && strcmp(m[i].user, "even") == 0, "message attached");
        }
        CHECK(bpt_format_dbg(&m[0], line, sizeof line) > 0, "format");
        printf("dbg line: %s\n", line);
        CHECK(strstr(line, "call m:f(0x0,0xff) (even)") != NULL, "dbg shape: %s", line);
        ms.actions = BPT_MS_SILENT;
        CHECK_RC(bpt_trace_pattern(a, "m:f/2", BPT_CALL, &ms), 1);
        for (i = 0; i < 10; i++) call(f, 0, (uint64_t)i, 0);
        CHECK(drain_calls(a, m, 64) == 0, "silent sends nothing");
        CHECK_RC(bpt_trace_pattern(a, "m:f/2", BPT_CALL, NULL), 1);
        for (i = 0; i < 4; i++) call(f, 0, (uint64_t)i, 0);
        CHECK(drain_calls(a, m, 64) == 4, "a NULL match spec replaces it: all calls again");
    }
    printf("match specs: checked\n");

    /* Patterns stay in force for functions registered later. */
    CHECK_RC(bpt_trace_pattern(b, "m:late*/_", BPT_COUNT, NULL), 0);
    CHECK_RC(bpt_register_vm(&code[2], BP, "m", "late_one", 0, &ops, &late), 0);
    CHECK(bpt_vm_word_at(late) == BP, "a later function gets the pattern at registration");
    for (i = 0; i < 6; i++) call(late, 2, 0, 0);
    CHECK(count_of(b, late) == 6, "and counts: %llu", (unsigned long long)count_of(b, late));
    CHECK_RC(bpt_trace_pattern(b, "m:late*/_", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_unregister(late), 0);
    CHECK_RC(bpt_register_vm(&code[2], BP, "m", "late_one", 0, &ops, &late), 0);
    CHECK(bpt_vm_word_at(late) == (bpt_vm_word)0x102, "after BPT_OFF of the same pattern, no longer applied");
    CHECK_RC(bpt_unregister(late), 0);
    printf("later registrations: checked\n");

    /* A callback tracer runs in the traced thread. */
    memset(&d, 0, sizeof d);
    d.tracer = callback_tracer;
    CHECK_RC(bpt_session_create(&d, &cb), 0);
    CHECK_RC(bpt_trace_pattern(cb, "m:g/1", BPT_CALL, NULL), 1);
    for (i = 0; i < 7; i++) call(g, 1, 0, 0);
    CHECK(callback_calls == 7, "callback got 7: %d", callback_calls);
    CHECK_RC(bpt_session_stats(cb, &st), 0);
    CHECK(st.produced == 7 && st.delivered == 7 && st.dropped == 0, "callback stats %llu/%llu/%llu",
          (unsigned long long)st.produced, (unsigned long long)st.delivered, (unsigned long long)st.dropped);
    CHECK_RC(bpt_session_destroy(cb), 0);

    /* A full buffer drops, counts, and marks the drops with DROPPED records
       at the place of the loss. The smallest buffer: 2 chunks of 4096
       bytes. A call with one argument is a 32-byte record (16 of header,
       the types word, the argument); each chunk opens with a 32-byte
       context record (the header, the process and the anchor's ns) and
       keeps its last 56 bytes for a loss's mark (a context record and a
       24-byte DROPPED record); so a chunk holds (4096 - 32 - 56) / 32
       calls. The first loss is marked at once (DROPPED 1, at the end of
       the full chunk), the rest in front of the next record that fits
       (DROPPED 45). */
    {
        int per_chunk = (4096 - 32 - 56) / 32, fit = 2 * per_chunk, extra = 46;
        static bpt_msg many[600];
        memset(&d, 0, sizeof d);
        d.chunk_bytes = 4096;
        d.chunks = 2;
        d.max_chunks = 2;   /* a fixed size: no growth */
        CHECK_RC(bpt_session_create(&d, &small), 0);
        CHECK_RC(bpt_trace_pattern(small, "m:g/1", BPT_CALL, NULL), 1);
        for (i = 0; i < fit + extra; i++) call(g, 1, (uint64_t)i, 0);
        CHECK_RC(bpt_session_stats(small, &st), 0);
        CHECK(st.produced == (uint64_t)(fit + extra) && st.dropped == (uint64_t)extra && st.pending == (uint64_t)fit,
              "2 chunks of 4096: produced %llu dropped %llu pending %llu (expected %d, %d, %d)",
              (unsigned long long)st.produced, (unsigned long long)st.dropped, (unsigned long long)st.pending,
              fit + extra, extra, fit);
        n = bpt_session_drain(small, many, 600);
        CHECK(n == fit + 1, "drained the %d that fit and the first loss's mark: %d", fit, n);
        for (i = 0; i < fit && i < n; i++)
            CHECK(many[i].type == BPT_MSG_CALL && many[i].args[0] == (uint64_t)i, "message %d is call %d", i, i);
        CHECK(n == fit + 1 && many[fit].type == BPT_MSG_DROPPED && many[fit].value == 1,
              "the loss is marked where it began: DROPPED 1 after call %d", fit - 1);
        call(g, 1, 999, 0);   /* room again: the rest of the loss is marked first */
        n = bpt_session_drain(small, all, 64);
        for (i = 0; i < n; i++)
            if (all[i].type == BPT_MSG_DROPPED) {
                dropped_notices++;
                CHECK(all[i].value == (uint64_t)extra - 1, "notice says %d: %llu", extra - 1,
                      (unsigned long long)all[i].value);
            }
        CHECK(n == 2 && all[0].type == BPT_MSG_DROPPED && all[1].type == BPT_MSG_CALL && all[1].args[0] == 999,
              "DROPPED then the call: %d", n);
        bpt_format_dbg(&all[0], line, sizeof line);
        printf("dbg line: %s\n", line);
        CHECK_RC(bpt_session_stats(small, &st), 0);
        CHECK(st.delivered + st.dropped + st.pending == st.produced && st.pending == 0,
              "delivered %llu + dropped %llu + pending %llu == produced %llu",
              (unsigned long long)st.delivered, (unsigned long long)st.dropped, (unsigned long long)st.pending,
              (unsigned long long)st.produced);
        CHECK_RC(bpt_session_destroy(small), 0);
    }

    /* recon_trace's rate limit: 30 messages, then the session stops and says so once. */
    memset(&d, 0, sizeof d);
    d.rate_max = 30;
    CHECK_RC(bpt_session_create(&d, &limited), 0);
    CHECK_RC(bpt_trace_pattern(limited, "m:g/1", BPT_CALL, NULL), 1);
    for (i = 0; i < 100; i++) call(g, 1, 0, 0);
    n = bpt_session_drain(limited, all, 64);
    CHECK(n == 31 && all[30].type == BPT_MSG_LIMIT, "30 calls then one LIMIT: %d", n);
    bpt_format_dbg(&all[30], line, sizeof line);
    printf("dbg line: %s\n", line);
    CHECK_RC(bpt_session_stats(limited, &st), 0);
    CHECK(st.limit_tripped && st.limited == 70, "limited %llu", (unsigned long long)st.limited);
    CHECK_RC(bpt_session_destroy(limited), 0);

    /* The windowed form: at most 5 messages in every second. Five, a new
       window, five more: under the limit. A sixth in one window trips it. */
    memset(&d, 0, sizeof d);
    d.rate_max = 5;
    d.rate_per_ms = 1000;
    CHECK_RC(bpt_session_create(&d, &limited), 0);
    CHECK_RC(bpt_trace_pattern(limited, "m:g/1", BPT_CALL, NULL), 1);
    for (i = 0; i < 5; i++) call(g, 1, 0, 0);
    {
        struct timespec pause = { 1, 100 * 1000000L };
        nanosleep(&pause, NULL);
    }
    for (i = 0; i < 5; i++) call(g, 1, 0, 0);
    CHECK_RC(bpt_session_stats(limited, &st), 0);
    CHECK(!st.limit_tripped && st.produced == 10, "5 + 5 in two windows: not tripped, produced %llu",
          (unsigned long long)st.produced);
    call(g, 1, 0, 0);
    CHECK_RC(bpt_session_stats(limited, &st), 0);
    CHECK(st.limit_tripped && st.limited == 1, "a sixth in the window trips it (limited %llu)",
          (unsigned long long)st.limited);
    CHECK_RC(bpt_session_destroy(limited), 0);
    printf("callback, ring overflow, rate limit (total and per window): checked\n");

    /* A pattern switched on and off again and again is remembered no more
       than once: the list of patterns replayed at registration stays short
       (it grew by one entry per change: 10,000 here, walked on every change). */
    {
        bpt__session *in;
        bpt__pattern_entry *e;
        bpt_func *late2;
        bpt_session t;
        int n = 0;
        CHECK_RC(bpt_session_create(NULL, &t), 0);
        for (i = 0; i < 5000; i++) {
            CHECK_RC(bpt_trace_pattern(t, "m:toggled*/_", BPT_CALL | BPT_RETURN, NULL), 0);
            CHECK_RC(bpt_trace_pattern(t, "m:toggled*/_", BPT_CALL | BPT_OFF, NULL), 0);
        }
        in = bpt__session_lookup(t.id);
        for (e = in ? in->patterns : NULL; e; e = e->next) n += strncmp(e->mfa.function, "toggled", 7) == 0;
        CHECK(n == 0, "%d remembered entries for a pattern switched off", n);
        CHECK_RC(bpt_register_vm(&code[3], BP, "m", "toggled_late", 0, &ops, &late2), 0);
        {
            bpt_info info;
            CHECK_RC(bpt_trace_info(t, late2, BPT_INFO_FLAGS, &info), 0);
            CHECK(info.flags == 0, "a function registered later gets flags %#x from the toggled pattern", info.flags);
        }
        CHECK_RC(bpt_trace_pattern(a, "m:toggled_late/_", BPT_OFF, NULL), 1);
        CHECK_RC(bpt_trace_pattern(b, "m:toggled_late/_", BPT_OFF, NULL), 1);
        CHECK_RC(bpt_unregister(late2), 0);
        CHECK_RC(bpt_session_destroy(t), 0);
    }

    CHECK_RC(bpt_session_destroy(a), 0);
    CHECK_RC(bpt_session_destroy(b), 0);
    CHECK(bpt_vm_word_at(f) == (bpt_vm_word)0x100 && bpt_vm_word_at(g) == (bpt_vm_word)0x101,
          "destroying the sessions restored every word");
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(g), 0);
    CHECK_RC(bpt_func_count(), 0);
    return CHECK_DONE();
}

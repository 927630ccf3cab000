/* t_transport: the event transport (issue #16): compact records in
   per-thread chunked buffers, drained live or written to a trace file.
     1. a trace file read back gives exactly what a live drain gives for the
        same events (every field; timestamps within the two clock reads);
     2. files that are not trace files, cut short, or corrupt;
     3. a flight recorder keeps the newest records and marks what it overwrote;
        a buffer grows while undrained, up to max_chunks, and keeps its size;
     4. 200 threads (past BPT_MAX_THREADS), each with its own buffer, and a
        concurrent drainer: exact counts per thread, in order, nothing lost
        (with the default sizes, and with the smallest buffer growing);
     5. small buffers under load with a concurrent drainer: delivered +
        dropped + pending == produced, exactly;
   4 and 5 again with the drainer writing a trace file, read back after;
   their drainer sleeps in bpt_session_wait between reads;
     6. bpt_session_wait: 0 with nothing sealed, a sleeper woken by a seal
        (and not by its 10 s timeout), 0 again once drained, a sleeper woken
        by the session's destroy (BPT_ESESSION), and its errors.
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#define BP ((bpt_vm_word)0xB0B0)
enum { F_ADD, F_NAME, F_FAIL, F_LOOP, NSITES };
static bpt_vm_word code[NSITES];
static bpt_func *fn[NSITES];

static uint64_t arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static bpt_func *caller_of(const void *frame) { (void)frame; return fn[F_LOOP]; }
static int fmt_hex(char *buf, size_t n, uint64_t v) { return snprintf(buf, n, "0x%llx", (unsigned long long)v); }
static const bpt_vm_ops ops = { arg, fmt_hex, caller_of };

/* A VM call: fetch, hit, run; with a token, return `ret` or unwind. */
static void vm_call(int site, uint64_t a0, uint64_t a1, uint64_t ret, int unwind) {
    uint64_t frame[2] = { a0, a1 };
    bpt_vm_token t = 0;
    bpt_vm_word w = BPT_VM_FETCH(&code[site]);
    if (w == BP) w = bpt_vm_breakpoint(fn[site], frame, &t);
    CHECK(w == (bpt_vm_word)(0x100 + site), "site %d executed %#lx", site, (unsigned long)w);
    if (t && unwind) bpt_vm_unwind(t, ret);
    else if (t) bpt_vm_return(t, ret);
}

static int same_str(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* Every field but the session and the timestamp. */
static int same_msg(const bpt_msg *a, const bpt_msg *b) {
    int i;
    if (a->type != b->type || a->nargs != b->nargs || a->thread != b->thread || a->process != b->process ||
        !same_str(a->module, b->module) || !same_str(a->name, b->name) || a->arity != b->arity ||
        !same_str(a->user, b->user) || a->value != b->value || a->value_type != b->value_type ||
        !same_str(a->exception_class, b->exception_class) || !same_str(a->caller_module, b->caller_module) ||
        !same_str(a->caller_name, b->caller_name) || a->caller_arity != b->caller_arity || a->caller != b->caller ||
        memcmp(a->str, b->str, sizeof a->str) != 0)
        return 0;
    for (i = 0; i < a->nargs; i++)
        if (a->args[i] != b->args[i] || a->argtype[i] != b->argtype[i]) return 0;
    return 1;
}

static const char *names_str = "a string argument";

/* The events both sessions see: calls with int, string and double
   arguments, a caller, a message, returns of an integer and a string,
   an unwound call, return_to, and a process switch. */
static void events(int rounds) {
    int i;
    double x = 2.5;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    for (i = 0; i < rounds; i++) {
        vm_call(F_ADD, (uint64_t)i, (uint64_t)-i, (uint64_t)(2 * i), 0);
        vm_call(F_NAME, (uint64_t)(uintptr_t)names_str, bits, (uint64_t)(uintptr_t)"returned text", 0);
        vm_call(F_FAIL, 7, 8, 99, 1);
        if (i == rounds / 2) bpt_process_switch(4242);
    }
    bpt_process_switch(0);
}

static void set_patterns(bpt_session s) {
    bpt_match add = { 0 }, name = { 0 }, fail = { 0 };
    add.actions = BPT_RETURN | BPT_RETURN_TO | BPT_CALLER;
    add.message = "adding";
    name.args = "str,f64";
    name.ret = "str";
    name.actions = BPT_RETURN;
    fail.actions = BPT_EXCEPTION;
    CHECK_RC(bpt_trace_pattern(s, "tr:add/2", BPT_CALL, &add), 1);
    CHECK_RC(bpt_trace_pattern(s, "tr:name/2", BPT_CALL, &name), 1);
    CHECK_RC(bpt_trace_pattern(s, "tr:fail/2", BPT_CALL, &fail), 1);
}

static void file_round_trip(void) {
    static bpt_msg live[4096], back[4096];
    char path[] = "/tmp/bpt_transport_XXXXXX";
    bpt_session a, b;
    bpt_file_writer w;
    bpt_trace_file *f;
    bpt_session_counts st;
    bpt_clock clk, fclk;
    char name[64];
    uint32_t pid = 0;
    int fd = mkstemp(path), nl, nb = 0, k, rc, i, rounds = 300;
    bpt_session_desc d;
    CHECK(fd >= 0, "mkstemp");
    memset(&d, 0, sizeof d);
    d.name = "live";
    CHECK_RC(bpt_session_create(&d, &a), 0);
    d.name = "to-file";
    d.chunk_bytes = 4096;   /* several chunks: the file holds whole chunks and pieces */
    d.chunks = 64;
    CHECK_RC(bpt_session_create(&d, &b), 0);
    set_patterns(a);
    set_patterns(b);
    memset(&w, 0, sizeof w);
    w.fd = fd;
    events(rounds / 2);
    rc = bpt_session_write(b, &w);   /* a write in the middle: blocks continue a thread's stream */
    CHECK(rc > 0, "first write: %d records", rc);
    events(rounds - rounds / 2);
    rc = bpt_session_write(b, &w);
    CHECK(rc > 0, "second write: %d records", rc);
    CHECK_RC(bpt_session_write(b, &w), 0);   /* nothing new */
    CHECK_RC(bpt_session_stats(b, &st), 0);
    CHECK(st.produced == w.records && st.delivered == w.records && st.dropped == 0 && st.pending == 0,
          "the file session: produced %llu delivered %llu dropped %llu, the writer wrote %llu",
          (unsigned long long)st.produced, (unsigned long long)st.delivered, (unsigned long long)st.dropped,
          (unsigned long long)w.records);
    nl = bpt_session_drain(a, live, 4096);
    CHECK(nl == (int)w.records && nl == rounds * 7, "live drain: %d messages, file %llu, expected %d", nl,
          (unsigned long long)w.records, rounds * 7);
    close(fd);

    CHECK_RC(bpt_trace_file_open(path, &f), 0);
    CHECK_RC(bpt_trace_file_info(f, &pid, &fclk, name), 0);
    CHECK_RC(bpt_clock_info(&clk), 0);
    CHECK(pid == (uint32_t)getpid() && strcmp(name, "to-file") == 0 && strcmp(fclk.source, clk.source) == 0 &&
          fclk.hz == clk.hz, "header: pid %u name %s clock %s %llu Hz", pid, name, fclk.source,
          (unsigned long long)fclk.hz);
    while ((k = bpt_trace_file_read(f, back + nb, 7)) > 0) nb += k;   /* odd batches: reads resume mid-block */
    CHECK(k == 0, "the file ends cleanly: %d (%s)", k, bpt_last_error());
    CHECK(nb == nl, "read back %d messages, drained %d", nb, nl);
    for (i = 0; i < nb && i < nl; i++) {
        int64_t dt = (int64_t)(back[i].ts_ns - live[i].ts_ns);
        if (!same_msg(&back[i], &live[i])) {
            char x[256], y[256];
            bpt_format_dbg(&back[i], x, sizeof x);
            bpt_format_dbg(&live[i], y, sizeof y);
            CHECK(0, "message %d differs:\n  file: %s\n  live: %s", i, x, y);
            break;
        }
        /* The two sessions read the clock a few ns apart; under qemu a first
           hit that makes a buffer takes milliseconds. */
        CHECK(dt > -100000000 && dt < 100000000, "message %d: file ts %llu, live %llu", i,
              (unsigned long long)back[i].ts_ns, (unsigned long long)live[i].ts_ns);
        CHECK(back[i].format == NULL && (live[i].type != BPT_MSG_CALL || live[i].format == fmt_hex),
              "formatters: live keeps the site's, a file has none");
    }
    CHECK(strcmp(back[0].user, "adding") == 0 && strcmp(back[0].caller_name, "loop") == 0 &&
          strcmp(back[3].str, names_str) == 0 && back[3].argtype[1] == BPT_ARG_F64 &&
          strcmp(back[4].str, "returned text") == 0 && back[5].type == BPT_MSG_CALL &&
          back[6].type == BPT_MSG_EXCEPTION_FROM && back[6].value == 99 &&
          strcmp(back[6].exception_class, "throw") == 0, "the first round's fields, as written");
    for (i = 0, k = 0; i < nb; i++) k += back[i].process == 4242;
    CHECK(k > 0 && k < nb, "the process switch reached the file: %d of %d messages", k, nb);
    bpt_trace_file_close(f);

    /* Cut short: the file ends at its last whole block. */
    {
        FILE *in = fopen(path, "rb");
        char cut[] = "/tmp/bpt_transport_cut_XXXXXX";
        long size;
        int cfd = mkstemp(cut), n = 0;
        char *all;
        fseek(in, 0, SEEK_END);
        size = ftell(in);
        rewind(in);
        all = (char *)malloc((size_t)size);
        CHECK(fread(all, 1, (size_t)size, in) == (size_t)size, "read the file");
        fclose(in);
        CHECK(write(cfd, all, (size_t)size - 13) == size - 13, "write the cut file");
        close(cfd);
        CHECK_RC(bpt_trace_file_open(cut, &f), 0);
        while ((k = bpt_trace_file_read(f, back, 64)) > 0) n += k;
        CHECK(k == 0 && n > 0 && n < nb, "a cut file reads %d of %d messages, then ends (%d)", n, nb, k);
        bpt_trace_file_close(f);
        /* Corrupt: a record's type byte in the first records block. */
        {
            long at = 144;
            uint32_t head[2];
            while (at + 8 <= size) {
                memcpy(head, all + at, 8);
                if (head[0] == 'C') { all[at + 8 + 8 + 8] = 0x7f; break; }   /* the first record's type */
                at += 8 + head[1];
            }
        }
        cfd = open(cut, O_WRONLY | O_TRUNC);
        CHECK(write(cfd, all, (size_t)size) == size, "write the corrupt file");
        close(cfd);
        CHECK_RC(bpt_trace_file_open(cut, &f), 0);
        CHECK_RC(bpt_trace_file_read(f, back, 64), BPT_EFORMAT);
        CHECK_RC(bpt_trace_file_read(f, back, 64), BPT_EFORMAT);
        bpt_trace_file_close(f);
        memcpy(all, "NOTATRACE", 9);
        cfd = open(cut, O_WRONLY | O_TRUNC);
        CHECK(write(cfd, all, 200) == 200, "write the foreign file");
        close(cfd);
        CHECK_RC(bpt_trace_file_open(cut, &f), BPT_EFORMAT);
        unlink(cut);
        free(all);
    }
    CHECK_RC(bpt_trace_file_open("/nonexistent/trace.bpt", &f), BPT_ENOENT);
    CHECK_RC(bpt_trace_file_open(NULL, &f), BPT_EINVAL);
    CHECK_RC(bpt_trace_file_read(NULL, back, 1), BPT_EINVAL);
    CHECK_RC(bpt_session_write(b, NULL), BPT_EINVAL);
    w.fd = -1;
    CHECK_RC(bpt_session_write(b, &w), BPT_EINVAL);
    {   /* A write that fails keeps the records in the buffer. */
        bpt_file_writer bad;
        int pipefd[2];
        memset(&bad, 0, sizeof bad);
        CHECK(pipe(pipefd) == 0, "pipe");
        close(pipefd[0]);
        bad.fd = pipefd[1];
        signal(SIGPIPE, SIG_IGN);
        vm_call(F_ADD, 1, 2, 3, 0);
        CHECK_RC(bpt_session_write(b, &bad), BPT_EIO);
        close(pipefd[1]);
        CHECK_RC(bpt_session_stats(b, &st), 0);
        CHECK(st.pending == 3, "after a failed write the records wait: pending %llu", (unsigned long long)st.pending);
    }
    unlink(path);
    CHECK_RC(bpt_session_destroy(a), 0);
    CHECK_RC(bpt_session_destroy(b), 0);
    printf("trace file: %d messages written and read back, equal to the live drain\n", nb);
}

static void flight_recorder(void) {
    static bpt_msg got[1024];
    bpt_session s;
    bpt_session_desc d;
    bpt_session_counts st;
    int i, n, calls = 10000, first;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = 4;
    d.flight_recorder = 1;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL, NULL), 1);
    for (i = 0; i < calls; i++) vm_call(F_LOOP, (uint64_t)i, 0, 0, 0);
    n = bpt_session_drain(s, got, 1024);
    /* 4 chunks of (4096 - 24) / 32 calls: the newest 3 full chunks and the
       one being written are kept. */
    CHECK(n > 2 && got[0].type == BPT_MSG_DROPPED, "a flight recorder's drain starts with the overwritten count: "
          "%d messages, first type %d", n, n ? got[0].type : -1);
    first = calls - (n - 1);
    CHECK(got[0].value == (uint64_t)first, "DROPPED says %llu overwritten, expected %d",
          (unsigned long long)got[0].value, first);
    for (i = 1; i < n; i++)
        if (got[i].type != BPT_MSG_CALL || got[i].args[0] != (uint64_t)(first + i - 1)) {
            CHECK(0, "message %d: type %d arg %llu, expected call %d", i, got[i].type,
                  (unsigned long long)got[i].args[0], first + i - 1);
            break;
        }
    CHECK(got[n - 1].args[0] == (uint64_t)calls - 1, "the newest call is kept");
    CHECK_RC(bpt_session_stats(s, &st), 0);
    CHECK(st.produced == (uint64_t)calls && st.overwritten == st.dropped && st.dropped == (uint64_t)first &&
          st.delivered == (uint64_t)(n - 1) && st.pending == 0, "flight recorder counts: produced %llu "
          "dropped %llu (overwritten %llu) delivered %llu pending %llu", (unsigned long long)st.produced,
          (unsigned long long)st.dropped, (unsigned long long)st.overwritten, (unsigned long long)st.delivered,
          (unsigned long long)st.pending);
    /* It keeps recording after a snapshot. */
    for (i = 0; i < 10; i++) vm_call(F_LOOP, (uint64_t)(calls + i), 0, 0, 0);
    n = bpt_session_drain(s, got, 1024);
    CHECK(n == 10 && got[0].args[0] == (uint64_t)calls, "after the snapshot: %d new calls", n);
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("flight recorder: %d calls, the newest %d kept, %d marked overwritten\n", calls, calls - first, first);
}

/* Drain everything, checking that it is tr:loop's calls from *want on,
   in order, but for those that DROPPED notices say were lost (added to
   *dropped). Returns the calls seen; *want is the next call expected. */
static long drain_calls(bpt_session s, long *want, uint64_t *dropped) {
    static bpt_msg got[512];
    long seen = 0;
    int n, i;
    while ((n = bpt_session_drain(s, got, 512)) > 0)
        for (i = 0; i < n; i++) {
            if (got[i].type == BPT_MSG_DROPPED) {
                *dropped += got[i].value;
                *want += (long)got[i].value;
                continue;
            }
            if (got[i].type != BPT_MSG_CALL || got[i].args[0] != (uint64_t)*want) {
                CHECK(0, "message: type %d arg %llu, expected call %ld", got[i].type,
                      (unsigned long long)got[i].args[0], *want);
                return seen;
            }
            ++*want;
            seen++;
        }
    return seen;
}

/* drain_calls over the calls from .. to-1: the calls seen, *dropped the losses marked. */
static long drain_sequence(bpt_session s, long from, long to, uint64_t *dropped) {
    long want = from, seen;
    *dropped = 0;
    seen = drain_calls(s, &want, dropped);
    CHECK(want == to, "drained up to call %ld, expected %ld", want, to);
    return seen;
}

/* A buffer grows while its drainer falls behind (session.c >>growth): 2
   chunks of 4096 bytes hold about 330 calls. Written 1,000 calls
   undrained, it grows and loses nothing; drained, it keeps its size, and
   100 laps of 300 calls run through the ring's slots with fewer chunks than
   slots (the moved-chunk rule: each lap's calls exact and in order); past
   max_chunks it drops, marked; a flight recorder never grows. */
static void growth(void) {
    bpt_session s;
    bpt_session_desc d;
    bpt_session_counts st;
    uint64_t dropped;
    uint64_t grown;
    long i, lap, next = 0;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = 2;
    d.max_chunks = 16;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL, NULL), 1);
    CHECK_RC(bpt_session_stats(s, &st), 0);
    CHECK(st.chunks == 0 && st.buffer_bytes == 0, "no buffer before the first record: %llu chunks",
          (unsigned long long)st.chunks);
    for (i = 0; i < 1000; i++) vm_call(F_LOOP, (uint64_t)next++, 0, 0, 0);
    CHECK_RC(bpt_session_stats(s, &st), 0);
    grown = st.chunks;
    CHECK(st.dropped == 0 && st.chunks > 2 && st.chunks < 16 && st.buffer_bytes == st.chunks * 4096,
          "1000 calls undrained: dropped %llu, grown to %llu chunks (%llu bytes)", (unsigned long long)st.dropped,
          (unsigned long long)st.chunks, (unsigned long long)st.buffer_bytes);
    CHECK(drain_sequence(s, 0, next, &dropped) == next && dropped == 0, "all 1000 drained in order");
    for (lap = 0; lap < 100; lap++) {
        long from = next;
        for (i = 0; i < 300; i++) vm_call(F_LOOP, (uint64_t)next++, 0, 0, 0);
        if (drain_sequence(s, from, next, &dropped) != 300 || dropped) {
            CHECK(0, "lap %ld: calls lost or out of order", lap);
            break;
        }
    }
    CHECK_RC(bpt_session_stats(s, &st), 0);
    CHECK(st.chunks == grown && st.dropped == 0 && st.produced == (uint64_t)next && st.delivered == (uint64_t)next,
          "after 100 laps: %llu chunks (grown to %llu), dropped %llu, delivered %llu of %ld",
          (unsigned long long)st.chunks, (unsigned long long)grown, (unsigned long long)st.dropped,
          (unsigned long long)st.delivered, next);
    {   /* past the cap: 16 chunks hold about 2,700 calls */
        long from = next;
        for (i = 0; i < 5000; i++) vm_call(F_LOOP, (uint64_t)next++, 0, 0, 0);
        CHECK_RC(bpt_session_stats(s, &st), 0);
        CHECK(st.chunks == 16 && st.dropped > 0, "5000 calls undrained: %llu chunks, dropped %llu",
              (unsigned long long)st.chunks, (unsigned long long)st.dropped);
        dropped = 0;
        drain_calls(s, &from, &dropped);   /* the first loss is marked where it began */
        vm_call(F_LOOP, (uint64_t)next++, 0, 0, 0);   /* the others in front of the next call that fits */
        drain_calls(s, &from, &dropped);
        CHECK(from == next, "drained up to call %ld, expected %ld", from, next);
        CHECK(dropped == st.dropped, "DROPPED notices say %llu, the counters %llu", (unsigned long long)dropped,
              (unsigned long long)st.dropped);
        CHECK_RC(bpt_session_stats(s, &st), 0);
        CHECK(st.produced == st.delivered + st.dropped && st.pending == 0, "accounts: produced %llu delivered "
              "%llu dropped %llu", (unsigned long long)st.produced, (unsigned long long)st.delivered,
              (unsigned long long)st.dropped);
    }
    CHECK_RC(bpt_session_destroy(s), 0);

    d.flight_recorder = 1;   /* does not grow: max_chunks must be chunks */
    CHECK_RC(bpt_session_create(&d, &s), BPT_EINVAL);
    d.max_chunks = 0;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL, NULL), 1);
    for (i = 0; i < 1000; i++) vm_call(F_LOOP, (uint64_t)i, 0, 0, 0);
    CHECK_RC(bpt_session_stats(s, &st), 0);
    CHECK(st.chunks == 2 && st.overwritten > 0, "a flight recorder: %llu chunks, %llu overwritten",
          (unsigned long long)st.chunks, (unsigned long long)st.overwritten);
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("growth: 2 chunks grew to %llu for 1,000 undrained calls, kept that size over 100 laps, "
           "stopped at 16\n", (unsigned long long)grown);
}

/* A match spec message longer than a names block entry holds (65,535
   bytes) is cut there in a file; before, its entry's length wrapped and the
   file read back as corrupt. */
static void long_message(void) {
    static char text[70001];
    static bpt_msg got[8];
    char path[] = "/tmp/bpt_transport_long_XXXXXX";
    bpt_session s;
    bpt_file_writer w;
    bpt_trace_file *f;
    bpt_match m = { 0 };
    int n;
    memset(text, 'x', sizeof text - 1);
    m.message = text;
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL, &m), 1);
    vm_call(F_LOOP, 1, 0, 0, 0);
    memset(&w, 0, sizeof w);
    w.fd = mkstemp(path);
    CHECK(w.fd >= 0, "mkstemp");
    CHECK_RC(bpt_session_write(s, &w), 1);
    close(w.fd);
    CHECK_RC(bpt_trace_file_open(path, &f), 0);
    n = bpt_trace_file_read(f, got, 8);
    CHECK(n == 1 && got[0].user && strlen(got[0].user) == 65535, "the long message read back: %d (%s), %zu bytes",
          n, n < 0 ? bpt_last_error() : "", n == 1 && got[0].user ? strlen(got[0].user) : 0);
    bpt_trace_file_close(f);
    unlink(path);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL | BPT_OFF, NULL), 1);
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("a 70,000-byte message: cut to 65,535 bytes in the file\n");
}

/* A thread that lost records and exited: the thread that takes over its
   thread record (and so its buffer) must not be blamed for the loss. */
static uint32_t lone_tid;
static long lone_calls;
static void *lone(void *p) {
    long i;
    (void)p;
    lone_tid = (uint32_t)syscall(SYS_gettid);
    for (i = 0; i < lone_calls; i++) vm_call(F_LOOP, (uint64_t)i, 0, 0, 0);
    return NULL;
}

static void drops_of_an_exited_thread(void) {
    static bpt_msg got[1024];
    bpt_session s;
    bpt_session_desc d;
    bpt_session_counts st;
    pthread_t t;
    uint32_t first;
    int n;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = 2;
    d.max_chunks = 2;   /* a fixed size: no growth */
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "tr:loop/1", BPT_CALL, NULL), 1);
    lone_calls = 1000;   /* about 250 fit */
    pthread_create(&t, NULL, lone, NULL);
    pthread_join(t, NULL);
    first = lone_tid;
    n = bpt_session_drain(s, got, 1024);
    CHECK_RC(bpt_session_stats(s, &st), 0);
    /* Its calls that fit, then the mark of the loss's start, its own. */
    CHECK(n > 1 && st.dropped == (uint64_t)(1000 - (n - 1)) && got[n - 1].type == BPT_MSG_DROPPED &&
          got[n - 1].value == 1 && got[n - 1].thread == first, "the first thread: %d drained, %llu dropped", n,
          (unsigned long long)st.dropped);
    lone_calls = 1;   /* a new thread: it reuses the exited one's record, and its buffer */
    pthread_create(&t, NULL, lone, NULL);
    pthread_join(t, NULL);
    n = bpt_session_drain(s, got, 1024);
    CHECK(n == 2 && got[0].type == BPT_MSG_DROPPED && got[0].value == st.dropped - 1 && got[0].thread == first &&
          got[1].type == BPT_MSG_CALL && got[1].thread == lone_tid && lone_tid != first,
          "the loss is the first thread's (%u), the call the second's (%u): %d messages, DROPPED of thread %u",
          first, lone_tid, n, n ? got[0].thread : 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("drops of an exited thread: marked as its own, not its successor's\n");
}

/* >>threads */
enum { NTHREADS = 200 };
static bpt_session shared;
static int drain_stop;   /* under stop_lock */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static int stopped(void) {
    int v;
    pthread_mutex_lock(&stop_lock);
    v = drain_stop;
    pthread_mutex_unlock(&stop_lock);
    return v;
}
static void set_stop(int v) {
    pthread_mutex_lock(&stop_lock);
    drain_stop = v;
    pthread_mutex_unlock(&stop_lock);
}
static long per_thread_calls;
static uint32_t tids[NTHREADS];
static long got_calls[NTHREADS];
static uint64_t next_arg[NTHREADS];
static long order_errors, drop_notices, thread_notices[NTHREADS];
static pthread_barrier_t all_alive;   /* every worker exists at once: 200 thread records, 200 buffers */

static void *worker(void *p) {
    int me = (int)(intptr_t)p;
    long i;
    tids[me] = (uint32_t)syscall(SYS_gettid);
    pthread_barrier_wait(&all_alive);
    for (i = 0; i < per_thread_calls; i++) vm_call(F_LOOP, (uint64_t)me << 32 | (uint64_t)i, 0, 0, 0);
    pthread_barrier_wait(&all_alive);   /* none exits (and frees its record for another) before all ran */
    return NULL;
}

static void account(const bpt_msg *m, int n) {
    int i;
    for (i = 0; i < n; i++) {
        int who;
        if (m[i].type == BPT_MSG_DROPPED) {
            int k;
            drop_notices++;
            for (k = 0; k < NTHREADS && tids[k] != m[i].thread; k++) {}
            if (k < NTHREADS) thread_notices[k]++;
            continue;
        }
        who = (int)(m[i].args[0] >> 32);
        if (who < 0 || who >= NTHREADS) { order_errors++; continue; }
        /* After a drop a thread's sequence jumps; without one it is dense. */
        if ((m[i].args[0] & 0xffffffffu) < next_arg[who]) order_errors++;
        next_arg[who] = (m[i].args[0] & 0xffffffffu) + 1;
        got_calls[who]++;
    }
}

static bpt_file_writer to_file;   /* fd >= 0: the drainer writes a trace file instead */

static void *drainer(void *p) {
    static bpt_msg buf[512];
    int n;
    (void)p;
    while (!stopped()) {
        if (to_file.fd >= 0) n = bpt_session_write(shared, &to_file);
        else if ((n = bpt_session_drain(shared, buf, 512)) > 0) account(buf, n);
        CHECK(n >= 0, "drainer: %s", bpt_last_error());
        if (n <= 0) CHECK(bpt_session_wait(shared, 200) >= 0, "bpt_session_wait: %s", bpt_last_error());
    }
    return NULL;
}

/* What is left, then (for a file) the whole file read back into the tally. */
static void drain_rest(void) {
    static bpt_msg buf[512];
    bpt_trace_file *f;
    char path[64];
    int n;
    if (to_file.fd < 0) {
        while ((n = bpt_session_drain(shared, buf, 512)) > 0) account(buf, n);
        return;
    }
    CHECK(bpt_session_write(shared, &to_file) >= 0, "last write: %s", bpt_last_error());
    snprintf(path, sizeof path, "/proc/self/fd/%d", to_file.fd);
    CHECK_RC(bpt_trace_file_open(path, &f), 0);
    while ((n = bpt_trace_file_read(f, buf, 512)) > 0) account(buf, n);
    CHECK(n == 0, "the file read back to its end: %d (%s)", n, bpt_last_error());
    bpt_trace_file_close(f);
    close(to_file.fd);
}

static void many_threads(uint32_t chunk_bytes, uint32_t chunks, uint32_t max_chunks, long calls, int file,
                         const char *what) {
    pthread_t th[NTHREADS], dr;
    bpt_session_desc d;
    bpt_session_counts st;
    long total = 0;
    int i;
    memset(&to_file, 0, sizeof to_file);
    to_file.fd = -1;
    if (file) {
        char path[] = "/tmp/bpt_transport_threads_XXXXXX";
        to_file.fd = mkstemp(path);
        CHECK(to_file.fd >= 0, "mkstemp");
        unlink(path);   /* read back through /proc/self/fd */
    }
    memset(&d, 0, sizeof d);
    d.chunk_bytes = chunk_bytes;
    d.chunks = chunks;
    d.max_chunks = max_chunks;
    CHECK_RC(bpt_session_create(&d, &shared), 0);
    CHECK_RC(bpt_trace_pattern(shared, "tr:loop/1", BPT_CALL, NULL), 1);
    memset(got_calls, 0, sizeof got_calls);
    memset(thread_notices, 0, sizeof thread_notices);
    memset(next_arg, 0, sizeof next_arg);
    order_errors = drop_notices = 0;
    per_thread_calls = calls;
    set_stop(0);
    pthread_barrier_init(&all_alive, NULL, NTHREADS);
    CHECK(pthread_create(&dr, NULL, drainer, NULL) == 0, "drainer");
    for (i = 0; i < NTHREADS; i++) CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0, "worker");
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&all_alive);
    set_stop(1);
    pthread_join(dr, NULL);
    drain_rest();
    CHECK_RC(bpt_session_stats(shared, &st), 0);
    for (i = 0; i < NTHREADS; i++) total += got_calls[i];
    CHECK(order_errors == 0, "%s: %ld messages out of their thread's order", what, order_errors);
    CHECK(st.produced == (uint64_t)NTHREADS * (uint64_t)calls, "%s: produced %llu, expected %ld", what,
          (unsigned long long)st.produced, (long)NTHREADS * calls);
    CHECK(st.delivered == (uint64_t)total && st.pending == 0 && st.delivered + st.dropped == st.produced,
          "%s: delivered %llu (counted %ld) + dropped %llu + pending %llu != produced %llu", what,
          (unsigned long long)st.delivered, total, (unsigned long long)st.dropped, (unsigned long long)st.pending,
          (unsigned long long)st.produced);
    CHECK(st.threads >= NTHREADS, "%s: %llu threads have buffers", what, (unsigned long long)st.threads);
    /* Every loss is marked in its thread's stream, even where the thread
       never recorded again after it. */
    for (i = 0; i < NTHREADS; i++)
        if (got_calls[i] < calls && thread_notices[i] == 0) {
            CHECK(0, "%s: thread %d lost %ld calls and its stream has no DROPPED", what, i, calls - got_calls[i]);
            break;
        }
    if (max_chunks == 0) {   /* a default cap holds every thread's calls: nothing may be lost */
        CHECK(st.dropped == 0, "%s: %llu dropped", what, (unsigned long long)st.dropped);
        for (i = 0; i < NTHREADS; i++)
            if (got_calls[i] != calls) { CHECK(0, "%s: thread %d delivered %ld of %ld", what, i, got_calls[i], calls); break; }
    }
    CHECK_RC(bpt_session_destroy(shared), 0);
    printf("%s: %d threads x %ld calls: delivered %llu, dropped %llu (%ld notices)\n", what, NTHREADS, calls,
           (unsigned long long)st.delivered, (unsigned long long)st.dropped, drop_notices);
}

/* 6. bpt_session_wait. */
static bpt_session waited;
static int wait_rc;
static double wait_s;
static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static void *waiter(void *p) {
    double t0 = mono_s();
    (void)p;
    wait_rc = bpt_session_wait(waited, 10000000);   /* 10 s: a wake-up comes long before */
    wait_s = mono_s() - t0;
    return NULL;
}
static void pause_ms(long ms) {
    struct timespec ts = { 0, ms * 1000000 };
    nanosleep(&ts, NULL);
}
static void nop_tracer(const bpt_msg *m, void *u) { (void)m; (void)u; }

static void session_wait(void) {
    static bpt_msg buf[512];
    bpt_session_desc d;
    bpt_session cb, stale;
    pthread_t t;
    int i;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;   /* about 100 call records of F_ADD a chunk */
    d.chunks = 4;
    CHECK_RC(bpt_session_create(&d, &waited), 0);
    CHECK_RC(bpt_trace_pattern(waited, "tr:add/2", BPT_CALL, NULL), 1);
    CHECK_RC(bpt_session_wait(waited, 0), 0);      /* nothing sealed: look only */
    vm_call(F_ADD, 1, 2, 0, 0);
    CHECK_RC(bpt_session_wait(waited, 1000), 0);   /* a partly filled chunk is not sealed: 1 ms, then 0 */

    CHECK_RC(pthread_create(&t, NULL, waiter, NULL), 0);
    pause_ms(50);   /* asleep by now, most likely; if not, it finds the sealed chunk at once */
    for (i = 0; i < 300; i++) vm_call(F_ADD, (uint64_t)i, 2, 0, 0);
    pthread_join(t, NULL);
    CHECK(wait_rc == 1 && wait_s < 5.0, "woken by the seal: returned %d after %.3f s", wait_rc, wait_s);
    CHECK_RC(bpt_session_wait(waited, 0), 1);   /* still there: not drained */
    while (bpt_session_drain(waited, buf, 512) > 0) {}
    CHECK_RC(bpt_session_wait(waited, 0), 0);

    CHECK_RC(pthread_create(&t, NULL, waiter, NULL), 0);
    pause_ms(50);
    stale = waited;
    CHECK_RC(bpt_session_destroy(waited), 0);
    pthread_join(t, NULL);
    CHECK(wait_rc == BPT_ESESSION && wait_s < 5.0, "woken by the destroy: returned %d after %.3f s", wait_rc, wait_s);
    CHECK_RC(bpt_session_wait(stale, 0), BPT_ESESSION);

    memset(&d, 0, sizeof d);
    d.tracer = nop_tracer;
    CHECK_RC(bpt_session_create(&d, &cb), 0);
    CHECK_RC(bpt_session_wait(cb, 0), BPT_EINVAL);
    bpt_thread_progress_pin();
    CHECK_RC(bpt_session_wait(cb, 1000), BPT_EDEADLK);
    bpt_thread_progress_unpin();
    CHECK_RC(bpt_session_destroy(cb), 0);
}

int main(void) {
    static const char *names[NSITES] = { "add", "name", "fail", "loop" };
    int i;
    for (i = 0; i < NSITES; i++) {
        code[i] = (bpt_vm_word)(0x100 + i);
        CHECK_RC(bpt_register_vm(&code[i], BP, "tr", names[i], i == F_LOOP ? 1 : 2, &ops, &fn[i]), 0);
    }
    file_round_trip();
    flight_recorder();
    drops_of_an_exited_thread();
    long_message();
    growth();
    many_threads(0, 0, 0, check_scale(2000), 0, "default buffers");
    many_threads(0, 0, 0, check_scale(2000), 1, "default buffers, to a file");
    many_threads(4096, 2, 0, check_scale(5000), 0, "smallest buffers, growing");
    many_threads(4096, 2, 2, check_scale(5000), 0, "smallest buffers");
    many_threads(4096, 2, 2, check_scale(5000), 1, "smallest buffers, to a file");
    session_wait();
    return CHECK_DONE();
}

/* t_tracefile_rotate: a reader that takes up a thread's records in the
   middle of a chunk, where another reader stopped, reads them in the
   thread's context: its OS thread id, its process, its clock anchor (found
   by review). A context record opens each chunk and follows a process
   switch; the reader that took it has it, and a second reader took the
   records after it as thread 0, process 0, stamped from the calibration.
   One thread, one chunk (16 KiB; its anchor pinned, so that no renewal
   puts a context record of its own after a read: a write slower than the
   anchor's 1 ms hid the defect), holding in order:
       context P1, calls 0-4, context P2, calls 5-9   first reader
       calls 10-19, context P3, calls 20-24           second reader
       calls 25-29                                    first reader again
   with three pairs of readers:
     1. rotation: file writer A, then a new writer B on file B (as after
        BPT_EIO on a broken stream, whose docs advise a new writer), then
        A again (its stream had P2, while P3 was in effect);
     2. bpt_session_drain, then a writer, then drain again;
     3. a writer, then bpt_session_drain, then the writer again.
   Each call is read once, by thread gettid(), in its process, stamped
   within 20 ms of the CLOCK_MONOTONIC readings around the calls (the
   anchor's error over the test, not its speed), and the stamps of calls
   0-29 never go back, across the readers (one anchor serves them all). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <time.h>

enum { CALLS = 30, P1 = 0x5001, P2 = 0x5002, P3 = 0x5003 };
enum { DRAIN, WRITER };
static const uint64_t SLACK_NS = 20000000;

static bpt_session s;
static char tmpdir[256];

/* A reader of the session: a drain, or a writer to its own file. */
typedef struct reader {
    int kind;
    const char *name;
    bpt_file_writer w;
    char path[300];
    bpt_msg got[256];
    int n;
} reader;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bpt__lane *my_lane(void) {
    return bpt__lane_find(bpt__session_lookup(s.id), bpt__thread_self_or_null());
}

static void reader_start(reader *r, int kind, const char *name) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->name = name;
    r->w.fd = -1;
    if (kind == WRITER) {
        snprintf(r->path, sizeof r->path, "%s/%s.bpt", tmpdir, name);
        r->w.fd = open(r->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        CHECK(r->w.fd >= 0, "open %s", r->path);
    }
}

/* Read what there is: a drain's messages now, a writer's into its file. */
static void reader_take(reader *r, int expected) {
    int k, n = 0;
    if (r->kind == WRITER) {
        n = bpt_session_write(s, &r->w);
    } else {
        while ((k = bpt_session_drain(s, r->got + r->n + n, 256 - r->n - n)) > 0) n += k;
        r->n += n;
    }
    CHECK(n == expected, "%s read %d records, expected %d (%s)", r->name, n, expected, bpt_last_error());
}

/* A writer's file, read back. */
static void reader_finish(reader *r) {
    bpt_trace_file *f;
    int k;
    if (r->kind != WRITER) return;
    close(r->w.fd);
    CHECK_RC(bpt_trace_file_open(r->path, &f), 0);
    while ((k = bpt_trace_file_read(f, r->got + r->n, 256 - r->n)) > 0) r->n += k;
    CHECK_RC(k, 0);
    bpt_trace_file_close(f);
    unlink(r->path);
}

static uint64_t process_of(uint64_t call) { return call < 5 ? P1 : call < 20 ? P2 : P3; }

/* Every call once, in its thread and process, stamped within the clock's
   readings around the calls, the stamps in call order. */
static void check_calls(const char *what, reader *rs[2], uint64_t t0, uint64_t t1) {
    uint32_t me = (uint32_t)syscall(SYS_gettid);
    uint64_t ts[CALLS];
    int seen[CALLS], i, j;
    memset(seen, 0, sizeof seen);
    memset(ts, 0, sizeof ts);
    for (j = 0; j < 2; j++)
        for (i = 0; i < rs[j]->n; i++) {
            const bpt_msg *m = &rs[j]->got[i];
            uint64_t c = m->args[0];
            if (m->type != BPT_MSG_CALL || m->nargs != 1 || c >= CALLS) {
                CHECK(0, "%s: %s's message %d: type %d, %d args, first %llu: not a call of the test", what,
                      rs[j]->name, i, m->type, m->nargs, (unsigned long long)c);
                continue;
            }
            seen[c]++;
            ts[c] = m->ts_ns;
            CHECK(m->thread == me && m->process == process_of(c),
                  "%s: call %llu read by %s: thread %u process %#llx, expected thread %u process %#llx", what,
                  (unsigned long long)c, rs[j]->name, m->thread, (unsigned long long)m->process, me,
                  (unsigned long long)process_of(c));
            CHECK(m->ts_ns + SLACK_NS >= t0 && m->ts_ns <= t1 + SLACK_NS,
                  "%s: call %llu read by %s: stamp %llu, the calls ran in [%llu, %llu] ns", what,
                  (unsigned long long)c, rs[j]->name, (unsigned long long)m->ts_ns, (unsigned long long)t0,
                  (unsigned long long)t1);
        }
    for (i = 0; i < CALLS; i++) CHECK(seen[i] == 1, "%s: call %d read %d times", what, i, seen[i]);
    for (i = 1; i < CALLS; i++)
        if (seen[i - 1] == 1 && seen[i] == 1)
            CHECK(ts[i] >= ts[i - 1], "%s: call %d stamped %llu, before call %d's %llu", what, i,
                  (unsigned long long)ts[i], i - 1, (unsigned long long)ts[i - 1]);
}

static void calls(uint64_t from, uint64_t to) {
    uint64_t i;
    for (i = from; i < to; i++) vm_call(i);
}

/* One pair of readers over the chunk of the top comment. */
static void pair(const char *what, int first_kind, int second_kind) {
    static reader a, b;   /* 10 KB each */
    reader *rs[2];
    bpt_session_desc d;
    bpt__lane *lane;
    uint64_t t0, t1, head;
    memset(&d, 0, sizeof d);
    d.name = "rotate";
    d.chunk_bytes = 16384;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    reader_start(&a, first_kind, first_kind == DRAIN ? "drain" : "A");
    reader_start(&b, second_kind, second_kind == DRAIN ? "drain" : "B");
    rs[0] = &a;
    rs[1] = &b;

    t0 = mono_ns();
    bpt_process_switch(P1);
    calls(0, 1);
    lane = my_lane();
    lane->anchor_span = UINT64_MAX;   /* no renewal: the chunk's context records are the switches' */
    head = lane->head;
    calls(1, 5);
    bpt_process_switch(P2);
    calls(5, 10);
    reader_take(&a, 10);
    calls(10, 20);
    reader_take(&b, 10);
    bpt_process_switch(P3);
    calls(20, 25);
    reader_take(&b, 5);
    calls(25, 30);
    reader_take(&a, 5);
    bpt_process_switch(0);
    t1 = mono_ns();
    CHECK(lane->head == head, "%s: the calls filled chunk %llu, then %llu: the test needs one", what,
          (unsigned long long)head, (unsigned long long)lane->head);

    reader_finish(&a);
    reader_finish(&b);
    printf("%s: %s read %d messages, %s %d; %s's first: thread %u process %#llx\n", what, a.name, a.n, b.name,
           b.n, b.name, b.n ? b.got[0].thread : 0, b.n ? (unsigned long long)b.got[0].process : 0ull);
    check_calls(what, rs, t0, t1);
    CHECK_RC(bpt_session_destroy(s), 0);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/bpt-rotate-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    CHECK_RC(vm_site_register(), 0);
    pair("1. rotation", WRITER, WRITER);
    pair("2. a drain, then a writer", DRAIN, WRITER);
    pair("3. a writer, then a drain", WRITER, DRAIN);
    CHECK_RC(bpt_unregister(f), 0);
    rmdir(tmpdir);
    return CHECK_DONE();
}

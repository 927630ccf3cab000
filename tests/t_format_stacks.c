/* t_format_stacks: the folded and Chrome writers' stacks at their edges
   (review fixes), from hand-made messages, exact figures:
     1. a call unwound without a message (A calls B, B calls C, C returns,
        A returns; B's return never comes): C's time is charged to A;B;C
        once and not again to A, whose own time is its span less C's (A's
        return charged C's 10 us twice: 110 us of stacks for a 100 us span);
     2. a stack 40 calls deep of 120-byte names: the leaf's line names all
        40 frames (a 4096-byte buffer cut it at 33, and charged the leaf's
        time to a stack that never ran it);
     3. a thread's time going back (a return stamped before its call, as
        from messages merged from several sources): the folded writer
        charges 0, not 2^64 - 50,000 ns, and the Chrome writer's E event is
        not before its B (a negative duration breaks the nesting);
     4. BPT_ENOMEM in bpt_folded_add does not count the message, as its doc
        says: a retry of the return charges the same as with no failure
        (the failed return had popped the call already: the retry was
        ignored, and the time lost);
     5. names with the folded format's separators: a ';' is written ':' and
        a newline '?', so each stack is one line of its own frames (a
        "m(Ljava/lang/String;)V" made two frames, a newline a line with no
        count);
     6. 20,000 threads, a call and a return each, through both writers: a
        few slots of the stacks' hash index looked at a message (the
        writers scanned every thread's stack for each message: quadratic,
        12 s for 60,000 threads; counted, not timed); again with each
        thread's process chosen so that process * G + thread is one value
        (the index combined the two so before its keyed hash, and such
        tracks, which a trace file's context records can name, all
        collided whatever the key; found by review);
     7. 20,000 processes a host switched onto one thread, a call each: the
        writers allocate a few hundred bytes a process, the stack of kept
        calls growing as it deepens (each stack had room for 64 calls: 2.6
        KB a process, at least; counted by BPT_MALLOC); and a stack that
        deepens to 70 calls and returns still matches each return;
     8. a stream whose k-th write fails once (a stream buffer of 32 bytes,
        for every k the output takes): bpt_chrome_close, or a write before
        it, says BPT_EINVAL, and bpt_folded_write too when the failed write
        is one of its own (the buffer's flush failed inside fprintf or
        fputc, which returned success: close returned the record count for
        a torn JSON). */
#include <stddef.h>
static void *t_malloc(size_t n);
static void t_free(void *p);
#define BPT_MALLOC(n) t_malloc(n)
#define BPT_FREE(p) t_free(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "format_fixture.h"
#include <string.h>

static int refuse;   /* 1: every allocation fails */
static unsigned long long allocated;   /* bytes asked for, in all */
static void *t_malloc(size_t n) {
    if (refuse) return NULL;
    allocated += n;
    return malloc(n);
}
static void t_free(void *p) { free(p); }

static void add(bpt_folded *f, bpt_msg m) { CHECK_RC(bpt_folded_add(f, &m), 0); }

/* The folded lines of f, NUL-terminated (the caller frees it). */
static char *folded_text(bpt_folded *f) {
    FILE *t = tmpfile();
    char *text;
    CHECK(t != NULL, "tmpfile");
    if (!t) return NULL;
    CHECK(bpt_folded_write(f, t) >= 0, "bpt_folded_write: %s", bpt_last_error());
    text = slurp(t);
    fclose(t);
    return text;
}

static void unwound_callees(void) {
    bpt_folded *f;
    char *text;
    CHECK_RC(bpt_folded_new(&f), 0);
    add(f, msg(BPT_MSG_CALL, 1, "A", 0));
    add(f, msg(BPT_MSG_CALL, 1, "B", 10));
    add(f, msg(BPT_MSG_CALL, 1, "C", 20));
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "C", 30));
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "A", 100));   /* B unwound without a message */
    text = folded_text(f);
    printf("1. unwound B:\n%s", text ? text : "");
    CHECK(text && strcmp(text, "A 90\nA;B;C 10\n") == 0, "the folded lines: %s", text ? text : "(none)");
    free(text);
    bpt_folded_free(f);
}

static void deep_long_names(void) {
    enum { DEPTH = 40, LEN = 120 };
    static char names[DEPTH][LEN + 1];
    bpt_folded *f;
    char *text;
    int i, frames = 0;
    CHECK_RC(bpt_folded_new(&f), 0);
    for (i = 0; i < DEPTH; i++) {
        memset(names[i], 'a' + i % 26, LEN);
        names[i][0] = (char)('0' + i % 10);
        add(f, msg(BPT_MSG_CALL, 1, names[i], (uint64_t)i));
    }
    add(f, msg(BPT_MSG_RETURN_FROM, 1, names[DEPTH - 1], 1000));
    text = folded_text(f);
    if (text) {
        const char *p;
        frames = *text ? 1 : 0;
        for (p = text; *p && *p != '\n'; p++) frames += *p == ';';
        printf("2. %d calls of %d-byte names: the leaf's line has %d frames, %zu bytes\n", DEPTH, LEN, frames,
               strlen(text));
    }
    CHECK(frames == DEPTH, "the leaf's line has %d frames, not %d", frames, DEPTH);
    CHECK(text && strlen(text) == (size_t)DEPTH * LEN + (DEPTH - 1) + strlen(" 961\n"),
          "the line: %zu bytes", text ? strlen(text) : 0);   /* the leaf's own 1000 - 39 us */
    free(text);
    bpt_folded_free(f);
}

static void time_back(void) {
    bpt_folded *f;
    bpt_chrome w;
    FILE *t = tmpfile();
    char *text;
    bpt_msg m;
    CHECK_RC(bpt_folded_new(&f), 0);
    add(f, msg(BPT_MSG_CALL, 1, "A", 100));
    add(f, msg(BPT_MSG_CALL, 1, "B", 110));
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "B", 50));    /* before its call */
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "A", 200));
    text = folded_text(f);
    printf("3. time going back, folded:\n%s", text ? text : "");
    CHECK(text && strcmp(text, "A 100\nA;B 0\n") == 0, "the folded lines: %s", text ? text : "(none)");
    free(text);
    bpt_folded_free(f);

    CHECK(t != NULL, "tmpfile");
    if (!t) return;
    CHECK_RC(bpt_chrome_open(&w, t), 0);
    m = msg(BPT_MSG_CALL, 1, "A", 100);
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    m = msg(BPT_MSG_CALL, 1, "B", 110);
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    m = msg(BPT_MSG_RETURN_FROM, 1, "B", 50);
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    m = msg(BPT_MSG_CALL, 1, "C", 60);              /* after it, still back */
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    CHECK(bpt_chrome_close(&w) >= 0, "bpt_chrome_close: %s", bpt_last_error());
    text = slurp(t);
    fclose(t);
    printf("3. time going back, Chrome:\n%s", text ? text : "");
    CHECK(text && count(text, "\"ts\":-") == 0, "an event before the track's first");
    CHECK(text && count(text, "m:B/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":10.000") == 1,
          "B's E is not at its B's ts (10 us)");
    CHECK(text && count(text, "m:C/1\",\"cat\":\"bptrace\",\"ph\":\"B\",\"ts\":10.000") == 1 &&
          count(text, "m:C/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":10.000") == 1 &&
          count(text, "m:A/1\",\"cat\":\"bptrace\",\"ph\":\"E\",\"ts\":10.000") == 1,
          "C opened and A and C closed at the track's last time");
    free(text);
}

static void nomem_not_counted(void) {
    bpt_folded *f;
    bpt_msg r = msg(BPT_MSG_RETURN_FROM, 1, "B", 30);
    char *text;
    int rc;
    CHECK_RC(bpt_folded_new(&f), 0);
    add(f, msg(BPT_MSG_CALL, 1, "A", 0));
    add(f, msg(BPT_MSG_CALL, 1, "B", 10));
    refuse = 1;
    rc = bpt_folded_add(f, &r);   /* the line's first entry: the table's allocation fails */
    refuse = 0;
    CHECK(rc == BPT_ENOMEM, "the return with no memory: %d", rc);
    add(f, r);                    /* the retry counts it */
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "A", 100));
    text = folded_text(f);
    printf("4. a return refused with BPT_ENOMEM, then retried:\n%s", text ? text : "");
    CHECK(text && strcmp(text, "A 80\nA;B 20\n") == 0, "the folded lines: %s", text ? text : "(none)");
    free(text);
    bpt_folded_free(f);
}

static void separators(void) {
    bpt_folded *f;
    char *text;
    CHECK_RC(bpt_folded_new(&f), 0);
    add(f, msg(BPT_MSG_CALL, 1, "m(Ljava/lang/String;)V", 0));
    add(f, msg(BPT_MSG_CALL, 1, "two\nlines", 10));
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "two\nlines", 30));
    add(f, msg(BPT_MSG_RETURN_FROM, 1, "m(Ljava/lang/String;)V", 100));
    text = folded_text(f);
    printf("5. separators in names:\n%s", text ? text : "");
    CHECK(text && strcmp(text, "m(Ljava/lang/String:)V 80\nm(Ljava/lang/String:)V;two?lines 20\n") == 0,
          "the folded lines: %s", text ? text : "(none)");
    free(text);
    bpt_folded_free(f);
}

/* G^-1 mod 2^64, G odd (Newton's iteration doubles the bits right). */
static uint64_t inverse(uint64_t g) {
    uint64_t x = g;
    int k;
    for (k = 0; k < 6; k++) x *= 2 - g * x;
    return x;
}

/* colliding: the processes make process * G + thread one value for every
   thread, G the golden-ratio constant the index once combined the two
   with before its keyed hash: they all collided whatever the key (found
   by review: 399,980,000 probes for 20,000 tracks). */
static void many_threads(int colliding) {
    enum { THREADS = 20000 };
    const uint64_t G = UINT64_C(0x9e3779b97f4a7c15), K = UINT64_C(12345) * G;
    bpt_folded *f;
    bpt_chrome w;
    FILE *sink = fopen("/dev/null", "w");
    uint64_t chrome_probes = 0;
    uint32_t i;
    CHECK(sink != NULL, "/dev/null");
    if (!sink) return;
    CHECK_RC(bpt_folded_new(&f), 0);
    CHECK_RC(bpt_chrome_open(&w, sink), 0);
    for (i = 0; i < THREADS; i++) {
        bpt_msg c = msg(BPT_MSG_CALL, i + 1, "f", i), r = msg(BPT_MSG_RETURN_FROM, i + 1, "f", i + 1);
        if (colliding) c.process = r.process = (K - (uint64_t)(i + 1)) * inverse(G);
        add(f, c);
        add(f, r);
        CHECK_RC(bpt_chrome_write(&w, &c), 0);
        CHECK_RC(bpt_chrome_write(&w, &r), 0);
    }
    if (w.tracks) chrome_probes = w.tracks->probes;
    printf("6. %d threads%s: %llu index probes (folded), %llu (Chrome), for %d messages each\n", THREADS,
           colliding ? " (processes chosen to collide)" : "", (unsigned long long)f->tracks.probes,
           (unsigned long long)chrome_probes, 2 * THREADS);
    CHECK(f->tracks.probes <= 4ull * 2 * THREADS && chrome_probes <= 4ull * 2 * THREADS,
          "%llu and %llu probes for %d messages: not a lookup in constant time",
          (unsigned long long)f->tracks.probes, (unsigned long long)chrome_probes, 2 * THREADS);
    {   /* a process of its own on each thread: its process_name record too */
        int records = bpt_chrome_close(&w);
        CHECK(records == (colliding ? 4 : 3) * THREADS, "Chrome records: a name, a B and an E per thread%s: %d",
              colliding ? ", and a process name" : "", records);
    }
    bpt_folded_free(f);
    fclose(sink);
}

static void many_processes(void) {
    enum { PROCESSES = 20000, DEEP = 70 };
    bpt_folded *f;
    bpt_chrome w;
    FILE *sink = fopen("/dev/null", "w");
    unsigned long long before, folded_bytes, chrome_bytes;
    char *text;
    uint32_t i;
    CHECK(sink != NULL, "/dev/null");
    if (!sink) return;
    CHECK_RC(bpt_folded_new(&f), 0);
    before = allocated;
    for (i = 0; i < PROCESSES; i++) {
        bpt_msg c = msg(BPT_MSG_CALL, 1, "f", i);
        c.process = 1000 + (uint64_t)i;
        add(f, c);
    }
    folded_bytes = allocated - before;
    bpt_folded_free(f);
    CHECK_RC(bpt_chrome_open(&w, sink), 0);
    before = allocated;
    for (i = 0; i < PROCESSES; i++) {
        bpt_msg c = msg(BPT_MSG_CALL, 1, "f", i);
        c.process = 1000 + (uint64_t)i;
        CHECK_RC(bpt_chrome_write(&w, &c), 0);
    }
    chrome_bytes = allocated - before;
    CHECK(bpt_chrome_close(&w) == 4 * PROCESSES, "Chrome records: a thread and a process name, a B and an E a process");
    fclose(sink);
    printf("7. %d processes of a call each: %llu bytes allocated (folded), %llu (Chrome): %llu and %llu a process\n",
           PROCESSES, folded_bytes, chrome_bytes, folded_bytes / PROCESSES, chrome_bytes / PROCESSES);
    CHECK(folded_bytes < 1024ull * PROCESSES && chrome_bytes < 1024ull * PROCESSES,
          "%llu and %llu bytes for %d stacks of one call", folded_bytes, chrome_bytes, PROCESSES);

    CHECK_RC(bpt_folded_new(&f), 0);   /* one stack through every size of its room, and past the kept 64 */
    for (i = 0; i < DEEP; i++) add(f, msg(BPT_MSG_CALL, 1, i % 2 ? "g" : "f", 10 * (uint64_t)i));
    for (i = DEEP; i-- > 0;) add(f, msg(BPT_MSG_RETURN_FROM, 1, i % 2 ? "g" : "f", 10 * (uint64_t)(2 * DEEP - i)));
    text = folded_text(f);
    printf("7. %d calls deep, then their returns: %ld lines, %ld of 20 us; the heaviest:%s", DEEP,
           text ? count(text, "\n") : 0, text ? count(text, " 20\n") : 0, text && strchr(text, ' ') ? strchr(text, ' ') : "");
    /* Each kept call's own time is 20 us (its span less its callee's), the 64th's 140 us (the calls past
       the kept ones count as its own): 1,400 us in all, the outermost call's span. */
    CHECK(text && count(text, "\n") == 64 && count(text, " 20\n") == 63 && count(text, " 140\n") == 1,
          "64 kept calls, each charged on its own stack");
    free(text);
    bpt_folded_free(f);
}

static int writes, fail_at;   /* the stream's writes so far; the one that fails (1, 2, ...) */
static ssize_t failing_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    (void)buf;
    if (++writes == fail_at) {
        errno = EIO;
        return -1;
    }
    return (ssize_t)n;
}

/* A stream of a 32-byte buffer over failing_write, its fail_at-th write failing. */
static FILE *failing_stream(int k) {
    static char buf[32];
    cookie_io_functions_t io = { NULL, failing_write, NULL, NULL };
    FILE *o = fopencookie(NULL, "w", io);
    CHECK(o != NULL, "fopencookie");
    if (o) setvbuf(o, buf, _IOFBF, sizeof buf);
    writes = 0;
    fail_at = k;
    return o;
}

/* Trace 3 nested calls to o with both writers, Chrome first; the writes
   o took for each (*chrome_writes, *folded_writes); 1 when each writer
   reported a failed write that happened in its part. */
static int write_both(FILE *o, int *chrome_writes, int *folded_writes) {
    static const char *const names[3] = { "first_function", "second_function", "third_function" };
    bpt_chrome w;
    bpt_folded *f = NULL;
    int i, chrome_failed, folded_failed, ok = 1;
    chrome_failed = bpt_chrome_open(&w, o) < 0;
    CHECK_RC(bpt_folded_new(&f), 0);
    for (i = 0; i < 6; i++) {
        bpt_msg m = msg(i < 3 ? BPT_MSG_CALL : BPT_MSG_RETURN_FROM, 1, names[i < 3 ? i : 5 - i], (uint64_t)i);
        if (!chrome_failed) chrome_failed = bpt_chrome_write(&w, &m) < 0;
        add(f, m);
    }
    if (w.out && bpt_chrome_close(&w) < 0) chrome_failed = 1;   /* frees the writer, also after a failed write */
    *chrome_writes = writes;
    folded_failed = bpt_folded_write(f, o) < 0;
    *folded_writes = writes - *chrome_writes;
    bpt_folded_free(f);
    if (fail_at >= 1 && fail_at <= *chrome_writes) ok &= chrome_failed;
    if (fail_at > *chrome_writes && fail_at <= writes) ok &= folded_failed;
    return ok;
}

static void failed_writes(void) {
    int k, chrome_writes = 0, folded_writes = 0, cw, fw, missed = 0;
    FILE *o = failing_stream(0);   /* none fails: how many writes each part takes */
    if (!o) return;
    CHECK(write_both(o, &chrome_writes, &folded_writes), "no write failed");
    fclose(o);
    for (k = 1; k <= chrome_writes + folded_writes; k++) {
        if (!(o = failing_stream(k))) return;
        if (!write_both(o, &cw, &fw)) {
            missed++;
            printf("   the write %d failed: not reported\n", k);
        }
        fclose(o);
    }
    printf("8. a write failing once, at each of %d writes (Chrome %d, folded %d): %d not reported\n",
           chrome_writes + folded_writes, chrome_writes, folded_writes, missed);
    CHECK(chrome_writes > 5 && folded_writes > 2 && missed == 0, "%d failed writes not reported", missed);
}

int main(void) {
    unwound_callees();
    deep_long_names();
    time_back();
    nomem_not_counted();
    separators();
    many_threads(0);
    many_threads(1);
    many_processes();
    failed_writes();
    return CHECK_DONE();
}

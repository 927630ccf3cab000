/* t_drain_handback: BPT_TEST_CONCURRENCY
   A drainer hands each chunk back as soon as it has read it, and a read
   ends at the chunks opened when it began (session.c, bpt__lane_read).
   Before: the tail moved only when the whole read ended, so a producer
   that wrote while a long read went on found no chunk to reuse and grew
   its buffer by everything it wrote meanwhile (make bench section 2: the
   buffers grew to 47 MiB, every new chunk a page fault on the hot path);
   at its cap, as here, it dropped. And the read chased the producer
   through every chunk it opened meanwhile, while the other threads'
   buffers waited.

   1. The main thread's buffer has 2 chunks of 4 KiB and may not grow. It
      fills chunk 0 and starts chunk 1. A drainer thread writes the
      session to a trace file; the test point holds it after its read of
      chunk 0, and there the main thread writes a chunk's worth more:
      chunk 1 fills and the next chunk opens, in chunk 0's memory, which
      the read has handed back. Claims:
      - at the test point the tail stands at chunk 1, still BUSY;
      - nothing is dropped (before: 3,982 records dropped at the cap);
      - that write returns chunk 0's and chunk 1's records, not the ones
        in the chunk opened during the read;
      - a last write takes the rest, and the file holds every record
        once, in order.
   2. The lane is found full at its cap, and only then does the drainer
      hand chunk 0 back (the test point in bpt__lane_advance starts the
      read and waits until it holds after chunk 0): the record that found
      the lane full goes to chunk 0, and is not dropped. For a capped lane
      (the producer looks at the tail again) and for a flight recorder
      (its take-back looked only at the BUSY bit and dropped: helper-45).
      The flight recorder then writes 300 more while the read of chunk 1
      is held: its take-backs must leave that chunk alone (they drop), so
      the file still reads in order, and what it holds plus what was
      dropped is every call. */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bpt_session s;
static bpt__lane *lane;   /* the main thread's, in s */
static bpt_file_writer out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int at_point, go_on, start_read, armed_full;
static uint64_t tail_at_point;
static int first_write;

static void t_test_point(const char *where) {
    if (!strcmp(where, "lane_read: a chunk handed back, the read goes on")) {
        pthread_mutex_lock(&mu);
        if (!at_point) {   /* the first chunk handed back: hold the read here */
            tail_at_point = bpt__load_acquire_u64(&lane->tail);
            at_point = 1;
            pthread_cond_broadcast(&cv);
            while (!go_on) pthread_cond_wait(&cv, &mu);
        }
        pthread_mutex_unlock(&mu);
    } else if (armed_full && !strcmp(where, "lane_advance: full, a flight recorder takes a chunk back")) {
        armed_full = 0;   /* part 2: the lane is full; now the drainer hands chunk 0 back */
        pthread_mutex_lock(&mu);
        start_read = 1;
        pthread_cond_broadcast(&cv);
        while (!at_point) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
}

/* The drainer: one write, when told to start. */
static void *drainer(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!start_read) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    first_write = bpt_session_write(s, &out);
    return NULL;
}

static void set_flag(int *flag) {
    pthread_mutex_lock(&mu);
    *flag = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Wait up to 10 s for the test point; 0 if it never came. */
static int wait_for_point(void) {
    struct timespec until;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (!at_point && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&cv, &mu, &until);
    rc = at_point;
    pthread_mutex_unlock(&mu);
    return rc;
}

/* A session of 2 chunks of 4 KiB a thread that may not grow (a flight
   recorder, or capped), tracing vm:f/1 into a new temporary file; the
   main thread's first record made its lane. Returns the calls made. */
static uint64_t part_begin(int flight, char *path) {
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = 2;
    if (flight) d.flight_recorder = 1;
    else d.max_chunks = 2;   /* no growth: a record with no chunk to go to is dropped */
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
    vm_call(0);   /* the first record makes the lane */
    lane = bpt__lane_at(bpt__session_lookup(s.id), bpt__thread_self_or_null()->index);
    CHECK(lane != NULL, "no lane for the main thread");
    memset(&out, 0, sizeof out);
    out.fd = mkstemp(path);
    CHECK(out.fd >= 0, "mkstemp: %s", strerror(errno));
    at_point = go_on = start_read = 0;
    return 1;
}

/* The file's call records: how many, and how many not after the one
   before (the arguments count up from 0). */
static void file_calls(const char *path, uint64_t *got, uint64_t *unordered) {
    static bpt_msg m[256];
    bpt_trace_file *tf;
    uint64_t last = 0;
    int n, k;
    *got = *unordered = 0;
    CHECK_RC(bpt_trace_file_open(path, &tf), 0);
    while (tf && (n = bpt_trace_file_read(tf, m, 256)) > 0)
        for (k = 0; k < n; k++) {
            if (m[k].type != BPT_MSG_CALL) continue;
            *unordered += *got && m[k].args[0] <= last;
            last = m[k].args[0];
            ++*got;
        }
    if (tf) bpt_trace_file_close(tf);
}

static void part_end(const char *path) {
    close(out.fd);
    unlink(path);
    CHECK_RC(bpt_session_destroy(s), 0);
}

/* 2. Full at the cap, then a chunk handed back. */
static void full_then_handed_back(int flight) {
    const char *what = flight ? "flight recorder" : "capped";
    char path[] = "/tmp/t_drain_handback_XXXXXX";
    bpt_session_counts c;
    pthread_t t;
    uint64_t calls = part_begin(flight, path), kept, got, unordered;
    int k;
    if (!lane || out.fd < 0) return;
    pthread_create(&t, NULL, drainer, NULL);
    armed_full = 1;
    for (k = 0; k < 4096 && armed_full; k++) vm_call(calls++);   /* the last one found the lane full */
    CHECK(!armed_full && at_point, "%s: the lane was never found full, or the read never handed chunk 0 back", what);
    CHECK_RC(bpt_session_stats(s, &c), 0);
    kept = c.dropped;
    CHECK(c.dropped == 0, "%s: the record that found the lane full was dropped, though chunk 0 had been handed back",
          what);
    if (flight)
        for (k = 0; k < 300; k++) vm_call(calls++);   /* the read of chunk 1 is held: take-backs leave it alone */
    set_flag(&go_on);
    pthread_join(t, NULL);
    CHECK(bpt_session_write(s, &out) >= 0, "%s: the last write: %s", what, bpt_last_error());
    CHECK_RC(bpt_session_stats(s, &c), 0);
    file_calls(path, &got, &unordered);
    printf("2. %s: %llu calls, dropped %llu when the lane was found full, %llu in all; the file: %llu call records, "
           "%llu out of order\n", what, (unsigned long long)calls, (unsigned long long)kept,
           (unsigned long long)c.dropped, (unsigned long long)got, (unsigned long long)unordered);
    CHECK(unordered == 0 && got + c.dropped == calls && c.produced == calls,
          "%s: the file holds %llu records (%llu out of order), %llu dropped, of %llu calls", what,
          (unsigned long long)got, (unsigned long long)unordered, (unsigned long long)c.dropped,
          (unsigned long long)calls);
    part_end(path);
}

/* 1. A held read hands chunk 0 back, and ends at the chunks opened when it began. */
static void held_read(void) {
    char path[] = "/tmp/t_drain_handback_XXXXXX";
    bpt_session_counts c;
    pthread_t t;
    uint64_t calls = part_begin(0, path), in_held, got, unordered;
    int k, held, last;
    if (!lane || out.fd < 0) return;
    /* Fill chunk 0, and put a few records in chunk 1. */
    while (bpt__load_acquire_u64(&lane->opened) < 2) vm_call(calls++);
    for (k = 0; k < 5; k++) vm_call(calls++);
    pthread_create(&t, NULL, drainer, NULL);
    set_flag(&start_read);
    held = wait_for_point();
    CHECK(held, "the read never handed a chunk back (waited 10 s)");
    CHECK(tail_at_point == (1u << 1 | BPT__TAIL_BUSY), "the tail at the test point: %llu, expected chunk 1, BUSY (3)",
          (unsigned long long)tail_at_point);
    /* The drainer holds chunk 1's read: fill chunk 1 and open the next, in chunk 0's memory. */
    for (k = 0; k < 4096 && bpt__load_acquire_u64(&lane->opened) < 3; k++) vm_call(calls++);
    CHECK(bpt__load_acquire_u64(&lane->opened) == 3, "no next chunk opened in %d calls (dropped: no chunk to reuse)", k);
    in_held = calls - 1;   /* the last call's record opened the next chunk */
    for (k = 0; k < 5; k++) vm_call(calls++);
    set_flag(&go_on);
    pthread_join(t, NULL);
    last = bpt_session_write(s, &out);
    CHECK_RC(bpt_session_stats(s, &c), 0);
    printf("1. %llu calls: the held write returned %d (chunks 0 and 1 hold %llu), the last %d; "
           "produced %llu, dropped %llu, pending %llu\n",
           (unsigned long long)calls, first_write, (unsigned long long)in_held, last, (unsigned long long)c.produced,
           (unsigned long long)c.dropped, (unsigned long long)c.pending);
    CHECK(c.dropped == 0, "%llu records dropped: the producer found no chunk to reuse during the read",
          (unsigned long long)c.dropped);
    CHECK(c.produced == calls && c.pending == 0, "produced %llu of %llu calls, %llu pending",
          (unsigned long long)c.produced, (unsigned long long)calls, (unsigned long long)c.pending);
    CHECK(first_write > 0 && (uint64_t)first_write == in_held,
          "the held write returned %d, expected %llu (chunks 0 and 1): it read on into the chunk opened meanwhile",
          first_write, (unsigned long long)in_held);
    CHECK((uint64_t)first_write + (uint64_t)last == calls, "written %d + %d of %llu", first_write, last,
          (unsigned long long)calls);
    file_calls(path, &got, &unordered);
    printf("   the file: %llu call records, %llu out of order\n", (unsigned long long)got, (unsigned long long)unordered);
    CHECK(got == calls && unordered == 0, "the file holds %llu of %llu records, %llu out of order",
          (unsigned long long)got, (unsigned long long)calls, (unsigned long long)unordered);
    part_end(path);
}

int main(void) {
    CHECK_RC(vm_site_register(), 0);
    held_read();
    full_then_handed_back(0);
    full_then_handed_back(1);
    return CHECK_DONE();
}

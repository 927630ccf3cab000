/* t_drop_marks: every loss is marked in the stream by DROPPED records that
   stand in the context (thread and process) that lost the records, and
   whose counts add up to what was lost, no more, no less (issue #16: "a
   drop cuts the thread's open stack"; the reader cuts the stack of the
   DROPPED record's thread). The four cases below each failed before the
   fix (found by review):
     1. losses by context: a thread that switches processes while its
        buffer is full. Each process's losses come in a DROPPED record of
        its own (they all came in the context of the process that filled
        the buffer); the first loss after a switch is marked at once in the
        new process; past BPT__LOSS_CONTEXTS contexts the last one's count
        takes the rest, and the sum stays exact.
     2. a thread record reused while its buffer is full: the losses of the
        thread that took it over come in its own context, not in that of
        the exited thread whose records filled the buffer.
     3. a record lost by a signal handler's send nested on its thread's own
        send (the lane was mid-update) is marked too; before, it was only
        counted in the session's stats.
     4. a flight recorder:
        a. the notice of what it overwrote, at a drain's first read of a
           wrapped buffer, stands in the thread's context, at the time the
           stream resumes (it came as thread 0, process 0, at the clock's
           calibration), live and in a trace file;
        b. a DROPPED record already read when its chunk is taken back is
           not announced again (the stream's counts were one too many).
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too (case 3 is a
   signal handler on the same thread). */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "vm_site_fixture.h"
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <time.h>

static bpt_session s;
static bpt_msg got[8192];

/* The test points: case 3 raises a signal inside the thread's send; case
   4b stands for a drainer that holds the read position (blocked in a
   write) when the producer finds the buffer full. */
enum { POINT_NONE, POINT_SIGNAL, POINT_BUSY_TAIL };
static int point;
static bpt__lane *my_lane(void) {
    return bpt__lane_find(bpt__session_lookup(s.id), bpt__thread_self_or_null());
}
static void t_test_point(const char *where) {
    if (point == POINT_SIGNAL && !strcmp(where, "lane_grow: a chunk counted, not yet in its slot")) {
        point = POINT_NONE;
        raise(SIGUSR1);
    } else if (point == POINT_BUSY_TAIL && !strcmp(where, "lane_advance: full, a flight recorder takes a chunk back")) {
        bpt__lane *lane = my_lane();
        point = POINT_NONE;
        bpt__store_relaxed_u64(&lane->tail, bpt__load_relaxed_u64(&lane->tail) | BPT__TAIL_BUSY);
    }
}
static void on_usr1(int sig) { (void)sig; vm_call(777777); }

static void create(uint32_t chunks, uint32_t max_chunks, int flight) {
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.chunk_bytes = 4096;
    d.chunks = chunks;
    d.max_chunks = max_chunks;
    d.flight_recorder = flight;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/1", BPT_CALL, NULL), 1);
}

static int drain_all(void) {
    int n = 0, k;
    while ((k = bpt_session_drain(s, got + n, 8192 - n)) > 0) n += k;
    return n;
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t dropped_now(void) {
    bpt_session_counts st;
    CHECK_RC(bpt_session_stats(s, &st), 0);
    return st.dropped;
}

/* The DROPPED messages of got[0..n): their sum, and (up to 8) each one's
   value, thread and process in order. */
typedef struct { int n; uint64_t sum, value[8], process[8]; uint32_t thread[8]; } drops;
static drops drops_of(int n) {
    drops d;
    int i;
    memset(&d, 0, sizeof d);
    for (i = 0; i < n; i++) {
        if (got[i].type != BPT_MSG_DROPPED) continue;
        d.sum += got[i].value;
        if (d.n < 8) {
            d.value[d.n] = got[i].value;
            d.thread[d.n] = got[i].thread;
            d.process[d.n] = got[i].process;
        }
        d.n++;
    }
    return d;
}

/* 1. Losses by context. */
static void by_process(void) {
    static const struct { uint64_t process; int calls; } lose[] = {
        { 2, 5 }, { 1, 2 }, { 3, 3 }, { 5, 1 }, { 6, 2 }   /* 6 is a fifth context: 5's count takes it */
    };
    uint64_t rest;
    uint32_t me = (uint32_t)syscall(SYS_gettid);
    drops d;
    int i, n, k;
    create(2, 2, 0);
    bpt_process_switch(1);
    for (i = 0; i < 2000; i++) vm_call((uint64_t)i);   /* 2 chunks hold about 300: the rest is lost */
    for (k = 0; k < 5; k++) {
        bpt_process_switch(lose[k].process);
        for (i = 0; i < lose[k].calls; i++) vm_call(50000);
    }
    n = drain_all();
    rest = dropped_now() - 1 - 13;   /* process 1's losses past the first, before the switches */
    bpt_process_switch(4);
    vm_call(60000);   /* fits: the losses are marked ahead of it */
    n += bpt_session_drain(s, got + n, 8192 - n);
    d = drops_of(n);
    CHECK(d.n == 5 && d.sum == dropped_now(), "5 DROPPED messages adding up to the %llu lost: %d adding up to %llu",
          (unsigned long long)dropped_now(), d.n, (unsigned long long)d.sum);
    CHECK(d.value[0] == 1 && d.process[0] == 1, "the first loss, at once, in process 1: %llu in %llu",
          (unsigned long long)d.value[0], (unsigned long long)d.process[0]);
    CHECK(d.value[1] == rest + 2 && d.process[1] == 1, "process 1's other losses: %llu in %llu, expected %llu",
          (unsigned long long)d.value[1], (unsigned long long)d.process[1], (unsigned long long)(rest + 2));
    CHECK(d.value[2] == 5 && d.process[2] == 2, "process 2's: %llu in %llu", (unsigned long long)d.value[2],
          (unsigned long long)d.process[2]);
    CHECK(d.value[3] == 3 && d.process[3] == 3, "process 3's: %llu in %llu", (unsigned long long)d.value[3],
          (unsigned long long)d.process[3]);
    CHECK(d.value[4] == 3 && d.process[4] == 5, "process 5's, with 6's (a fifth context): %llu in %llu",
          (unsigned long long)d.value[4], (unsigned long long)d.process[4]);
    for (i = 0; i < d.n && i < 5; i++) CHECK(d.thread[i] == me, "DROPPED %d of thread %u", i, d.thread[i]);
    CHECK(got[n - 1].type == BPT_MSG_CALL && got[n - 1].process == 4 && got[n - 1].args[0] == 60000,
          "the call after them, in process 4");
    CHECK_RC(bpt_session_destroy(s), 0);

    /* The first loss after a switch is marked at once in the new process:
       fill the last chunk in process 1 until a call of process 2 (which
       needs a context record) no longer fits, though one of process 1
       still would. */
    create(2, 2, 0);
    bpt_process_switch(1);
    vm_call(0);
    {
        bpt__lane *lane = my_lane();
        uintptr_t before;
        uint32_t bytes = 0;
        for (i = 1; i < 2000; i++) {
            int last = lane->head + 1 - (bpt__load_relaxed_u64(&lane->tail) >> 1) >= bpt__load_relaxed_u32(&lane->budget);
            if (last && bytes && (uintptr_t)lane->wp + bytes + BPT__CTX_BYTES > (uintptr_t)lane->wend) break;
            before = (uintptr_t)lane->wp;
            vm_call((uint64_t)i);
            if ((uintptr_t)lane->wp > before) bytes = (uint32_t)((uintptr_t)lane->wp - before);
        }
        CHECK(dropped_now() == 0 && i < 2000, "process 1 filled the buffer without a loss (%llu lost, %d calls)",
              (unsigned long long)dropped_now(), i);
        CHECK((uintptr_t)lane->wp + bytes <= (uintptr_t)lane->wend, "a call of process 1 would still fit");
    }
    bpt_process_switch(2);
    vm_call(70000);
    n = drain_all();
    d = drops_of(n);
    CHECK(d.n == 1 && d.value[0] == 1 && d.process[0] == 2 && got[n - 1].type == BPT_MSG_DROPPED,
          "the loss marked at once, in process 2, after process 1's calls: %d DROPPED, %llu in process %llu",
          d.n, (unsigned long long)d.value[0], (unsigned long long)d.process[0]);
    CHECK_RC(bpt_session_destroy(s), 0);
    bpt_process_switch(0);
    printf("1. losses by process: each marked in its own, the first at once; a fifth context counted with the "
           "fourth; the sum exact\n");
}

/* 2. A thread record reused while its buffer is full. */
static int lone_calls;
static uint32_t lone_tid;
static void *lone(void *p) {
    int i;
    (void)p;
    lone_tid = (uint32_t)syscall(SYS_gettid);
    for (i = 0; i < lone_calls; i++) vm_call((uint64_t)(80000 + i));
    return NULL;
}
static uint32_t run_lone(int calls) {
    pthread_t t;
    lone_calls = calls;
    pthread_create(&t, NULL, lone, NULL);
    pthread_join(t, NULL);
    return lone_tid;
}
static void reused_record(void) {
    uint32_t a, b, c;
    uint64_t lost_a;
    drops d;
    int n;
    create(2, 2, 0);
    a = run_lone(2000);   /* fills the buffer, loses the rest, exits */
    lost_a = dropped_now();
    b = run_lone(3);      /* takes a's thread record over: all 3 lost */
    n = drain_all();
    c = run_lone(1);      /* fits */
    n += bpt_session_drain(s, got + n, 8192 - n);
    d = drops_of(n);
    CHECK(a != b && b != c, "three threads: %u %u %u", a, b, c);
    CHECK(d.n == 3 && d.sum == lost_a + 3 && d.sum == dropped_now(), "3 DROPPED adding up to %llu: %d, %llu",
          (unsigned long long)(lost_a + 3), d.n, (unsigned long long)d.sum);
    CHECK(d.thread[0] == a && d.value[0] == 1 && d.thread[1] == a && d.value[1] == lost_a - 1,
          "the first thread's losses in its own context: %llu of %u, %llu of %u", (unsigned long long)d.value[0],
          d.thread[0], (unsigned long long)d.value[1], d.thread[1]);
    CHECK(d.thread[2] == b && d.value[2] == 3, "the second thread's 3 in its own: %llu of thread %u (it is %u)",
          (unsigned long long)d.value[2], d.thread[2], b);
    CHECK(got[n - 1].type == BPT_MSG_CALL && got[n - 1].thread == c, "the third thread's call after them");
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("2. a thread record reused while full: each thread's losses in its own context\n");
}

/* 3. A nested send's loss. */
static void nested_send(void) {
    struct sigaction sa;
    uint32_t me = (uint32_t)syscall(SYS_gettid);
    drops d;
    int i, n, calls = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    create(2, 8, 0);   /* it grows: the signal comes while the send maps a chunk */
    point = POINT_SIGNAL;
    for (i = 0; i < 400; i++) vm_call((uint64_t)i);
    CHECK(point == POINT_NONE, "the signal was raised inside a send");
    n = drain_all();
    for (i = 0; i < n; i++) calls += got[i].type == BPT_MSG_CALL;
    d = drops_of(n);
    CHECK(calls == 400 && dropped_now() == 1, "the thread's 400 calls drained, the handler's lost: %d, %llu lost",
          calls, (unsigned long long)dropped_now());
    CHECK(d.n == 1 && d.value[0] == 1 && d.thread[0] == me, "the loss marked, in the thread's context: %d DROPPED "
          "of %llu, thread %u", d.n, (unsigned long long)d.value[0], d.n ? d.thread[0] : 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    signal(SIGUSR1, SIG_DFL);
    printf("3. a signal handler's send nested on its thread's: its loss marked in the stream\n");
}

/* 4. A flight recorder. */
static void flight_recorder(void) {
    char path[] = "/tmp/t_drop_marksXXXXXX";
    uint32_t me = (uint32_t)syscall(SYS_gettid);
    bpt_file_writer w;
    bpt_trace_file *tf;
    uint64_t first_ts = 0;
    drops d;
    int i, n, k, fd;
    /* a. Live, then from a file. */
    for (k = 0; k < 2; k++) {
        create(4, 0, 1);
        first_ts = mono_ns();
        for (i = 0; i < 2000; i++) vm_call((uint64_t)i);   /* 4 chunks hold about 600: nothing read yet */
        if (k == 0) {
            n = drain_all();
        } else {
            CHECK((fd = mkstemp(path)) >= 0, "a temporary file");
            memset(&w, 0, sizeof w);
            w.fd = fd;
            CHECK(bpt_session_write(s, &w) > 0, "written");
            close(fd);
            CHECK_RC(bpt_trace_file_open(path, &tf), 0);
            n = 0;
            while ((i = bpt_trace_file_read(tf, got + n, 8192 - n)) > 0) n += i;
            bpt_trace_file_close(tf);
            unlink(path);
        }
        CHECK(n > 2 && got[0].type == BPT_MSG_DROPPED && got[0].thread == me && got[0].process == me &&
              got[1].type == BPT_MSG_CALL, "%s: the notice first, in the thread's context: thread %u process %llu",
              k ? "file" : "live", got[0].thread, (unsigned long long)got[0].process);
        CHECK(got[0].value + (uint64_t)n - 1 == 2000u, "%s: %llu overwritten and %d read of 2000",
              k ? "file" : "live", (unsigned long long)got[0].value, n - 1);
        CHECK(got[0].ts_ns <= got[1].ts_ns && got[0].ts_ns >= first_ts,
              "%s: at the time the stream resumes: %llu, its next call %llu, the first call %llu", k ? "file" : "live",
              (unsigned long long)got[0].ts_ns, (unsigned long long)got[1].ts_ns, (unsigned long long)first_ts);
        CHECK_RC(bpt_session_destroy(s), 0);
    }
    /* b. A DROPPED record read, then its chunk taken back. */
    create(4, 0, 1);
    point = POINT_BUSY_TAIL;
    for (i = 0; i < 4000 && point != POINT_NONE; i++) vm_call((uint64_t)i);   /* full, tail busy: one lost */
    {
        bpt__lane *lane = my_lane();
        bpt__store_relaxed_u64(&lane->tail, bpt__load_relaxed_u64(&lane->tail) & ~(uint64_t)BPT__TAIL_BUSY);
    }
    CHECK(dropped_now() == 1, "one record lost while the tail was busy: %llu", (unsigned long long)dropped_now());
    n = drain_all();   /* reads the DROPPED record of 1 in the open chunk */
    d = drops_of(n);
    for (; i < 3000; i++) vm_call((uint64_t)i);   /* wraps: that chunk is taken back */
    n = drain_all();
    d.sum += drops_of(n).sum;
    CHECK(d.sum == dropped_now(), "the stream's DROPPED add up to %llu, the stats say %llu",
          (unsigned long long)d.sum, (unsigned long long)dropped_now());
    CHECK_RC(bpt_session_destroy(s), 0);
    printf("4. a flight recorder: the notice in the thread's context, live and in a file; a DROPPED read is "
           "not announced again\n");
}

int main(void) {
    CHECK_RC(vm_site_register(), 0);
    by_process();
    reused_record();
    nested_send();
    flight_recorder();
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}

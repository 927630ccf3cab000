/* t_control_fds: the control server's descriptors taken by the program
   (>>descriptors in control.c), on VM sites, in one process. A program
   that closes descriptors it did not open, or dup2()s over them, may give
   the server's numbers to files and sockets of its own; the server must
   never use them past its next check, and must serve on. This test stands
   in for the program, and reads the server's numbers from its state (the
   implementation is compiled in). Each case was found by review of
   e572d7f, which had each use checked once before a wait:
     1. the wake-up pipe's write end replaced (dup2 of /dev/null): a HELLO
        is still answered (POLLHUP on the read end was taken for stop's
        byte, and the listener ended, the socket left listening);
     2. the listening socket's abstract name held by another descriptor of
        the old socket when the program closes the server's: the renew's
        bind fails; once that descriptor goes, a HELLO is answered again
        (one failed renew ended the listener for good);
     3. a client's number replaced while its thread waits to send to it (a
        stream the client does not read): bpt_control_stop returns (its
        shutdown skipped the number, and the thread's blocking send held
        the old socket: stop waited for good);
     4. the stream's memory file's number replaced by the program's file
        while the stream waits to send: the program's file keeps its bytes,
        and none of them reaches the client (they were read into the stream
        and the file truncated);
     5. a client's number replaced by the program's socket, a message
        waiting in it, while the client's thread waits for a request: the
        program's message stays where it is, and its peer gets no reply
        (the thread read it and answered ERR into the program's socket);
     6. the wake-up pipe's read end dup2()ed onto its write end: a HELLO is
        still answered (a pipe's two ends share an inode, so the identity
        check passed while the read end had POLLHUP for good: the listener
        spun, and accepted nothing; found by review of 257a1ae);
     7. the listening socket shut down (shutdown(2) by another holder, as a
        fork child before its exec may): a HELLO is answered again (poll
        reported it at once and accept4 failed with EINVAL: a spin).
     8. a client's number closed by the program between the server's
        check of it and its send (a test point there), the program holding
        a few dozen descriptors (every number below 64) and making a socket
        pair next: the program's peer does not get the server's reply, and
        the server answers on. The server's descriptors lived at low
        numbers, so the program's socket took the client's, and the reply
        went to the program's peer (the window >>descriptors left open; now
        they live at high numbers, bpt__ctl_high).
   Not a concurrency test for TSAN: a descriptor closed in one thread while
   another fstats it is what this test does on purpose, and TSAN reports
   that. */
static void t_test_point(const char *where);   /* 8: the program's close and open there */
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "control_fixture.h"

static char address[64];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether a HELLO on a new connection is answered within `seconds`. */
static int answered(double seconds) {
    double until = now_s() + seconds;
    while (now_s() < until) {
        char buf[256] = "";
        struct timeval tv = { 1, 0 };
        int fd = ctl_dial(address);
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL);
            close(fd);
            if (!strncmp(buf, "OK bptrace", 10)) return 1;
        }
        usleep(50000);
    }
    return 0;
}

static void start(void) {
    bpt_control_desc d;
    memset(&d, 0, sizeof d);
    d.path = address;
    CHECK_RC(bpt_control_start(&d), 0);
}

/* The server's socket of its only client (slot 0), once it has one. */
static int client_number(void) {
    int fd = -1;
    for (int i = 0; i < 1000 && fd < 0; i++) {
        pthread_mutex_lock(&bpt__ctl_lock);
        fd = bpt__ctl.fds[0];
        pthread_mutex_unlock(&bpt__ctl_lock);
        if (fd < 0) usleep(1000);
    }
    return fd;
}

/* 1. */
static void wake_write_end(void) {
    int devnull = open("/dev/null", O_WRONLY);
    start();
    CHECK(answered(5), "no HELLO answered at start");
    CHECK(dup2(devnull, bpt__ctl.wake[1]) >= 0, "dup2: %s", strerror(errno));
    close(devnull);
    usleep(100000);
    CHECK(answered(5), "the wake-up pipe's write end replaced: no HELLO answered within 5 s");
    CHECK_RC(bpt_control_stop(), 0);
}

/* 6. */
static void wake_ends_one(void) {
    start();
    CHECK(dup2(bpt__ctl.wake[0], bpt__ctl.wake[1]) >= 0, "dup2: %s", strerror(errno));
    CHECK(answered(5), "the wake-up pipe's read end on its write end: no HELLO answered within 5 s");
    CHECK_RC(bpt_control_stop(), 0);
}

/* 7. */
static void listener_shut_down(void) {
    start();
    CHECK(shutdown(bpt__ctl.listen_fd, SHUT_RDWR) == 0, "shutdown: %s", strerror(errno));
    CHECK(answered(5), "the listening socket shut down: no HELLO answered within 5 s");
    CHECK_RC(bpt_control_stop(), 0);
}

/* 2. */
static void renew_retried(void) {
    int keep;
    start();
    keep = dup(bpt__ctl.listen_fd);   /* another holder of the old socket: its name stays bound */
    close(bpt__ctl.listen_fd);        /* the program closes the server's number */
    usleep(1500000);                  /* the listener's look: a renew, whose bind fails */
    close(keep);
    CHECK(answered(5), "the old socket gone at last: no HELLO answered within 5 s (the listener gave up)");
    CHECK_RC(bpt_control_stop(), 0);
}

/* A client streaming call,return of t:f that does not read, a thread
   calling t:f until *on is 0: the server's stream thread fills the
   socket and waits to send. The client's socket. */
static volatile int calls_on;
static void *caller(void *arg) {
    (void)arg;
    for (uint64_t i = 0; calls_on; i++) (void)ctl_vm_call(i);
    return NULL;
}
static int stalled_stream(pthread_t *t) {
    char buf[256];
    int fd = ctl_dial(address), small = 4096;
    CHECK(fd >= 0, "cannot connect to %s", address);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK bptrace", 10), "HELLO: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "PATTERN call,return t:f/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "STREAM", buf, sizeof buf, NULL), "OK stream"), "STREAM: %s", buf);
    calls_on = 1;
    CHECK(pthread_create(t, NULL, caller, NULL) == 0, "caller thread");
    usleep(700000);   /* the socket fills; the stream thread waits to send */
    return fd;
}
static void end_calls(pthread_t t) {
    calls_on = 0;
    pthread_join(t, NULL);
}

/* bpt_control_stop in a thread of its own, given `seconds`: 0 when it
   returned 0 in time. */
static volatile int stop_rc = 1;
static void *stopper(void *arg) {
    (void)arg;
    stop_rc = bpt_control_stop();
    return NULL;
}
static int stops_within(double seconds) {
    pthread_t t;
    double until = now_s() + seconds;
    stop_rc = 1;
    CHECK(pthread_create(&t, NULL, stopper, NULL) == 0, "stop thread");
    while (stop_rc == 1 && now_s() < until) usleep(10000);
    if (stop_rc == 1) return 0;   /* left waiting: the process ends with the test */
    pthread_join(t, NULL);
    return stop_rc == 0;
}

/* 3. */
static void client_number_during_send(void) {
    pthread_t t;
    int fd, devnull = open("/dev/null", O_WRONLY);
    start();
    fd = stalled_stream(&t);
    CHECK(dup2(devnull, client_number()) >= 0, "dup2: %s", strerror(errno));
    close(devnull);
    end_calls(t);
    CHECK(stops_within(5), "bpt_control_stop with a client's number taken mid-send: still waiting after 5 s");
    close(fd);
}

/* The stream's memory file's number, from /proc/self/fd. */
static int memfd_number(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int found = -1;
    while (d && (e = readdir(d))) {
        char p[300], l[300];
        ssize_t n;
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        if ((n = readlink(p, l, sizeof l - 1)) < 0) continue;
        l[n] = '\0';
        if (strstr(l, "memfd:bptrace-stream")) found = atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

/* 4. */
static void memfd_number_during_send(void) {
    char path[96], buf[4096];
    pthread_t t;
    struct stat st;
    long total = 0, run = 0, longest = 0;
    int fd, mfd, pf;
    struct timeval tv = { 1, 0 };
    snprintf(path, sizeof path, "/tmp/bpt-t-control-fds-%d.data", (int)getpid());
    start();
    fd = stalled_stream(&t);
    mfd = memfd_number();
    CHECK(mfd >= 0, "no memory file of the stream's in /proc/self/fd");
    pf = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    memset(buf, 'P', sizeof buf);
    for (int i = 0; i < 256; i++) CHECK(write(pf, buf, sizeof buf) == (ssize_t)sizeof buf, "write %s", path);
    CHECK(dup2(pf, mfd) >= 0, "dup2: %s", strerror(errno));
    close(pf);
    end_calls(t);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {   /* read the stream now, to its end */
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
        total += k;
        for (ssize_t i = 0; i < k; i++) {   /* a record may hold a 'P' or two: the file is 1 MiB of them */
            run = buf[i] == 'P' ? run + 1 : 0;
            if (run > longest) longest = run;
        }
    }
    CHECK(stat(path, &st) == 0 && st.st_size == 256 * 4096,
          "the program's file on the memory file's number: %lld bytes left of %d", (long long)st.st_size,
          256 * 4096);
    CHECK(longest < 64, "the stream (%ld bytes) held a run of %ld bytes of the program's file", total, longest);
    close(fd);
    CHECK(stops_within(5), "stop after case 4");
    close(mfd);   /* the program's own (its file) */
    unlink(path);
}

/* 5. */
static void client_number_during_poll(void) {
    char buf[256], got[256];
    int fd, sv[2], num;
    ssize_t k;
    start();
    fd = ctl_dial(address);
    CHECK(fd >= 0 && !strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK bptrace", 10), "HELLO: %s", buf);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    CHECK(send(sv[1], "program message\n", 16, 0) == 16, "the program's message");
    num = client_number();
    CHECK(dup2(sv[0], num) >= 0, "dup2: %s", strerror(errno));
    close(sv[0]);
    usleep(1500000);   /* the client's thread wakes from its poll and looks */
    k = recv(sv[1], got, sizeof got - 1, MSG_DONTWAIT);
    got[k > 0 ? k : 0] = '\0';
    CHECK(k < 0, "the program's peer got a reply from the server: '%s'", got);
    k = recv(num, got, sizeof got - 1, MSG_DONTWAIT);
    CHECK(k == 16, "the program's message was taken from its socket (%zd bytes left)", k);
    close(fd);
    CHECK(stops_within(5), "stop after case 5");
    close(num);
    close(sv[1]);
}

/* 8. */
static volatile int window_armed, window_done;   /* done: the program's part at the test point is over */
static int window_number = -1, window_sv[2] = { -1, -1 };   /* the server's client number; the program's pair */
static void t_test_point(const char *where) {
    int held[64], n = 0, fd = -1;
    if (!window_armed || strcmp(where, "control_send: checked") != 0) return;
    window_armed = 0;
    window_number = bpt__ctl.fds[0];   /* this thread's client: the only one (slot 0) */
    while (n < 64 && (fd = dup(0)) >= 0 && fd < 64) held[n++] = fd;   /* the program's descriptors */
    if (fd >= 64) close(fd);
    close(window_number);              /* the program closes the server's number ... */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, window_sv) < 0) window_sv[0] = window_sv[1] = -1;   /* ... and makes sockets */
    while (n > 0) close(held[--n]);
    window_done = 1;
}

static void reply_window(void) {
    char buf[256] = "", got[256] = "";
    struct timeval tv = { 5, 0 };
    struct rlimit rl;
    ssize_t k;
    int fd;
    /* A soft descriptor limit under 128 leaves the server's numbers low (bpt__ctl_high): raise it. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1024 && rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 128) {   /* the other cases still run */
        printf("8. not run: the descriptor limit is %llu here, under the 128 the server needs to move its "
               "descriptors up\n", (unsigned long long)rl.rlim_cur);
        return;
    }
    start();
    fd = ctl_dial(address);
    CHECK(fd >= 0, "connect");
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    window_armed = 1;
    ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL);   /* ends when the program closes the server's socket */
    for (k = 0; k < 500 && !window_done; k++) usleep(10000);
    CHECK(window_done && window_sv[1] >= 0, "the test point was not reached, or no socket pair");
    if (window_sv[1] >= 0) {   /* the server's send comes after the test point: give it a second */
        struct pollfd p = { window_sv[1], POLLIN, 0 };
        poll(&p, 1, 1000);
    }
    k = window_sv[1] >= 0 ? recv(window_sv[1], got, sizeof got - 1, MSG_DONTWAIT) : -1;
    got[k > 0 ? k : 0] = '\0';
    printf("8. the client's number %d, the program's socket %d; its peer got %zd bytes\n", window_number,
           window_sv[0], k);
    CHECK(k < 0, "the server's reply went to the program's socket (number %d): '%s'", window_sv[0], got);
    close(fd);
    CHECK(answered(5), "no HELLO answered after case 8");
    CHECK(stops_within(5), "stop after case 8");
    close(window_sv[0]);
    close(window_sv[1]);
}

int main(int argc, char **argv) {
#define PART(f) if (argc < 2 || !strcmp(argv[1], #f)) f()
    signal(SIGPIPE, SIG_IGN);
    CHECK_RC(bpt_register_vm(&code, BP, "t", "f", 1, &ops, &fn), 0);
    snprintf(address, sizeof address, "@bpt-t-control-fds-%d", (int)getpid());
    PART(wake_write_end);
    PART(renew_retried);
    PART(client_number_during_send);
    PART(memfd_number_during_send);
    PART(client_number_during_poll);
    PART(wake_ends_one);
    PART(listener_shut_down);
    PART(reply_window);
    return CHECK_DONE();
}

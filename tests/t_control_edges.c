/* t_control_edges: the control server's edges a review found (>>control),
   on VM sites, in one process:
     1. a regular file at the socket path: BPT_EEXIST, the file untouched
        (it was deleted: the probe connect's ECONNREFUSED, which Linux gives
        for any file that is not a socket, was taken for a stale socket);
     2. a socket path served by a peer whose backlog is full: BPT_EEXIST
        (the probe connect blocked forever, holding the server's lock; an
        alarm ends the test instead of hanging the suite);
     3. a relative path: bpt_control_address gives it absolute, and stop
        removes that file after a chdir, not the same name in the new
        directory; nor a file someone put at its path since; a relative
        path too long once absolute: BPT_EINVAL;
     4. HELLO rate=-1/5 and chunks=-1: refused (sscanf took "-1");
     5. a half-closed client (shutdown(SHUT_WR), as socat and nc -N do)
        still gets its stream, until it hangs up;
     6. RLIMIT_FSIZE below what one round writes: the memory file's EFBIG
        ends a round early, not the stream: every call arrives;
     7. fork while a client's session traces: in the child (no server, no
        drainer) its buffer does not grow past what it had at the fork, and
        what does not fit is dropped and counted;
     8. (run last) two threads stop the server at once: the second returns 0 when the
        first has finished (it returned BPT_ENOENT at once, while the
        client's breakpoint was still set). A pinned thread holds up the
        client's session destroy; test points say when each stop is in;
     9. call_memory's net below zero (the calls freed more than they
        allocated): INFO's BYTES reads -100, not 18446744073709551516
        (printed unsigned; found by review);
    10. INFO gives a line only for a function the session has a breakpoint
        of the asked kinds on, as >>control says: a function it only
        traces calls of gave "F 0 0 0 0 1 t:f" to INFO count (found by
        review);
    11. a request line holding a NUL byte is refused ("ERR -1 ..."), and
        the connection goes on: "PATTERN count t:f/_\0junk" set a count
        breakpoint and replied OK, the server reading the line only up to
        its NUL (found by review); a line ended by "\r\n" is not refused;
    12. bpt_control_start with room for its socket but not for its wake-up
        pipe (RLIMIT_NOFILE, in a child): BPT_EIO, and bpt_last_error names
        the pipe (it said "listen: Too many open files");
    13. the listener's poll failing three times in a row, with ENOMEM
        (transient, as poll(2) says) and EINVAL (RLIMIT_NOFILE lowered
        below 2 for a while): a client connecting then still gets its HELLO
        reply (the listener returned, silently, at the first failure: the
        socket stayed, connects were queued, nobody answered; then at the
        EINVAL, found by review). And while every poll of the listener
        fails, its back-off's too, bpt_control_stop returns within a
        second (its join waited as long as the failures lasted, found by
        review). This program's own poll() stands in for libc's to fail
        them;
    14. fork while clients connect: no fork child holds a connection the
        server accepted (its fork handler closes the clients' sockets it
        knows; one accepted and not yet given a slot stayed open in the
        child, which kept the client from seeing its connection end).
        Forks in a loop while a thread connects in a loop; each child looks
        through its descriptors for a connected socket of the server's
        address (found by review).
    15. stop removes its socket file while the socket still listens:
        another server starting at the same path in that moment finds it
        served and leaves it (stop closed the socket first, so that start
        took the file for a dead process's, put its own in its place, and
        stop's unlink then removed the other server's file). A test point
        between stop's check of the file and its unlink plays that start.
    16. two servers starting at one path at once, in two processes: the
        second, started while the first is between its bind and its
        listen, finds the path served once the first listens, and returns
        BPT_EEXIST; the first is reachable. Unlocked, the second's probe
        connect was refused (no listen yet), so it took the first's file
        for a dead process's and put its own in its place: the first was
        left where nobody could reach it. A forked child
        is the second server; a test point after the first's bind lets it
        go.
    17. a stale socket file removed while start looks at it (between its
        failed bind and its probe connect; a test point removes it): start
        binds again and succeeds (the probe's ENOENT was reported as "may
        be served", BPT_EEXIST; found by review).
    18. a start at the default address removes the socket files that dead
        processes of bptrace left in $XDG_RUNTIME_DIR (a prefork server's
        workers that end with _exit under BPTRACE_CONTROL_FORKS filled it
        with them), and nothing else there: not another pid's file that a
        socket still listens at, not a live process's, not a regular file,
        not a name of another form.
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too. */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "timing_fixture.h"
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t t_points_lock = PTHREAD_MUTEX_INITIALIZER;
static int t_stopping, t_waiting;   /* under t_points_lock */
static const char *t_rival_path;    /* 15: where another server starts at stop's unlink */
static int t_rival = -1;            /* 15: its socket, when it took the path */
static void t_rival_start(void);
static int t_second_go = -1;        /* 16: the second server's start signal, and */
static int t_second_rc = -1;        /* its result's pipe */
static void t_second_starts(void);
static const char *t_remove_path;   /* 17: removed at start's look at the file in its way */
static void t_test_point(const char *where) {
    if (!strcmp(where, "control_unlink: checked") && t_rival_path) t_rival_start();
    if (!strcmp(where, "control_start: bound") && t_second_go >= 0) t_second_starts();
    if (!strcmp(where, "control_bind: in use") && t_remove_path) {   /* 17 */
        unlink(t_remove_path);
        t_remove_path = NULL;
    }
    if (strncmp(where, "control_stop: ", 14)) return;   /* the frame code's points: nothing */
    pthread_mutex_lock(&t_points_lock);
    if (!strcmp(where, "control_stop: stopping")) t_stopping = 1;
    if (!strcmp(where, "control_stop: waits for another stop")) t_waiting = 1;
    pthread_mutex_unlock(&t_points_lock);
}

#include "control_fixture.h"

/* 13's failures. The implementation is compiled into this program, so its
   poll calls bind to this poll, not libc's. The listener's wait for a
   connection (the only poll of 2 descriptors) fails with
   the errno values t_poll_errs holds, in order, one a call; while
   t_poll_all is above 0 it fails with ENOMEM, and so does the listener's
   back-off (its only poll of 1 descriptor for 100 ms). Every other call
   is the real poll, through ppoll (there is no SYS_poll on aarch64). */
static pthread_mutex_t t_poll_lock = PTHREAD_MUTEX_INITIALIZER;
static int t_poll_errs[4], t_poll_nerrs, t_poll_all;   /* under t_poll_lock */
static int t_stop_done;   /* under t_poll_lock: 13's stop returned */

int poll(struct pollfd *fds, nfds_t n, int timeout) {
    struct timespec ts;
    int fail = 0;
    pthread_mutex_lock(&t_poll_lock);
    if (n == 2 && t_poll_nerrs > 0) {
        fail = t_poll_errs[0];
        memmove(t_poll_errs, t_poll_errs + 1, sizeof t_poll_errs - sizeof t_poll_errs[0]);
        t_poll_nerrs--;
    } else if ((n == 2 || (n == 1 && timeout == 100)) && t_poll_all > 0) {
        fail = ENOMEM;
        t_poll_all--;
    }
    pthread_mutex_unlock(&t_poll_lock);
    if (fail) {
        errno = fail;
        return -1;
    }
    ts.tv_sec = timeout / 1000;
    ts.tv_nsec = (long)(timeout % 1000) * 1000000L;
    return ppoll(fds, n, timeout < 0 ? NULL : &ts, NULL);
}

static char address[64];

static void vm_call(uint64_t a0) {
    if (ctl_vm_call(a0) != WORD) _exit(3);
}

/* A client with a session that traces t:f with `kinds`; -1 if it could not. */
static int client(const char *hello, const char *pattern) {
    char buf[256];
    int fd = ctl_dial(address);
    CHECK(fd >= 0, "cannot connect to %s", address);
    if (fd < 0) return -1;
    CHECK(!strncmp(ctl_ask(fd, hello, buf, sizeof buf, NULL), "OK bptrace ", 11), "%s: %s", hello, buf);
    CHECK(!strcmp(ctl_ask(fd, pattern, buf, sizeof buf, NULL), "OK 1"), "%s: %s", pattern, buf);
    return fd;
}

static int file_holds(const char *path, const char *text) {
    char got[64] = "";
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, got, sizeof got - 1) : -1;
    if (fd >= 0) close(fd);
    return n == (ssize_t)strlen(text) && !memcmp(got, text, (size_t)n);
}

static void put_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "cannot write %s", path);
    if (fd >= 0) close(fd);
}

/* 1. A regular file where the socket would go. */
static void regular_file(void) {
    char path[96];
    bpt_control_desc d;
    struct stat st;
    int rc;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-edges-%d.txt", (int)getpid());
    put_file(path, "precious\n");
    memset(&d, 0, sizeof d);
    d.path = path;
    rc = bpt_control_start(&d);
    CHECK(rc == BPT_EEXIST && strstr(bpt_last_error(), "not a socket"), "start on a regular file: %d (%s)", rc,
          bpt_last_error());
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && file_holds(path, "precious\n"),
          "the regular file at %s was replaced", path);
    if (rc == 0) bpt_control_stop();
    unlink(path);
}

/* 2. A peer that accepts nothing, its backlog full. */
static void full_backlog(void) {
    char path[96];
    bpt_control_desc d;
    struct sockaddr_un a;
    socklen_t n;
    int l, held[16], nheld = 0, rc;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-edges-%d-full.sock", (int)getpid());
    unlink(path);
    n = ctl_sockaddr(path, &a);
    l = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, n) == 0 && listen(l, 0) == 0, "listener: %s", strerror(errno));
    for (; nheld < 16; nheld++) {   /* fill the backlog: until a connect would block */
        held[nheld] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(held[nheld], (struct sockaddr *)&a, n) < 0) {
            CHECK(errno == EAGAIN, "filling the backlog: %s", strerror(errno));
            close(held[nheld]);
            break;
        }
    }
    CHECK(nheld < 16, "the backlog never filled");
    memset(&d, 0, sizeof d);
    d.path = path;
    alarm(30);   /* a watchdog: the blocking probe hung here for good */
    rc = bpt_control_start(&d);
    alarm(0);
    CHECK(rc == BPT_EEXIST, "start on a served path: %d (%s)", rc, bpt_last_error());
    if (rc == 0) bpt_control_stop();
    while (nheld > 0) close(held[--nheld]);
    close(l);
    unlink(path);
}

/* 3. Relative paths, and a file put at the socket's path after start. */
static void relative_path(void) {
    char home[512], a[96], b[96], want[128], buf[128], deep[200];
    bpt_control_desc d;
    struct stat st;
    CHECK(getcwd(home, sizeof home) != NULL, "getcwd");
    snprintf(a, sizeof a, "/tmp/bpt-t-control-edges-%d-A", (int)getpid());
    snprintf(b, sizeof b, "/tmp/bpt-t-control-edges-%d-B", (int)getpid());
    mkdir(a, 0700);
    mkdir(b, 0700);
    CHECK(chdir(a) == 0, "chdir %s", a);
    memset(&d, 0, sizeof d);
    d.path = "ctl.sock";
    CHECK_RC(bpt_control_start(&d), 0);
    snprintf(want, sizeof want, "%s/ctl.sock", a);
    CHECK(bpt_control_address(buf, sizeof buf) > 0 && !strcmp(buf, want), "address '%s', want '%s'", buf, want);
    CHECK(chdir(b) == 0, "chdir %s", b);
    put_file("ctl.sock", "B's\n");
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(access(want, F_OK) != 0, "stop left %s behind", want);
    CHECK(file_holds("ctl.sock", "B's\n"), "stop removed B's ctl.sock");
    unlink("ctl.sock");
    /* the socket file replaced by another: stop leaves the other */
    CHECK(chdir(a) == 0, "chdir %s", a);
    CHECK_RC(bpt_control_start(&d), 0);
    unlink("ctl.sock");
    put_file("ctl.sock", "new\n");
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(lstat(want, &st) == 0 && file_holds(want, "new\n"), "stop removed a file put at its path after start");
    unlink(want);
    /* too long once absolute: refused, nothing bound */
    memset(deep, 'd', 100);
    deep[100] = '\0';
    CHECK(mkdir(deep, 0700) == 0 && chdir(deep) == 0, "mkdir, chdir %s/%s", a, deep);
    CHECK_RC(bpt_control_start(&d), BPT_EINVAL);
    CHECK(access("ctl.sock", F_OK) != 0, "a socket file was made in %s/%s", a, deep);
    if (access("ctl.sock", F_OK) == 0) bpt_control_stop();
    CHECK(chdir(a) == 0 && rmdir(deep) == 0 && chdir(home) == 0 && rmdir(a) == 0 && rmdir(b) == 0,
          "clean up %s, %s", a, b);
}

/* 15. What another process's bpt_control_start does at the same path
   (bpt__ctl_bind): a probe connect; if it is refused, the file is a dead
   process's, and it binds its own there. */
static void t_rival_start(void) {
    struct sockaddr_un a;
    socklen_t n = ctl_sockaddr(t_rival_path, &a);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0), e;
    e = connect(probe, (struct sockaddr *)&a, n) == 0 ? 0 : errno;
    close(probe);
    t_rival_path = NULL;   /* once */
    if (e != ECONNREFUSED) return;   /* served: left alone */
    t_rival = socket(AF_UNIX, SOCK_STREAM, 0);
    if (unlink(a.sun_path) < 0 || bind(t_rival, (struct sockaddr *)&a, n) < 0 || listen(t_rival, 4) < 0) {
        close(t_rival);
        t_rival = -1;
    }
}

static void stop_window(void) {
    char path[96];
    bpt_control_desc d;
    struct stat st, rival;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-edges-%d-window.sock", (int)getpid());
    unlink(path);
    memset(&d, 0, sizeof d);
    d.path = path;
    CHECK_RC(bpt_control_start(&d), 0);
    t_rival_path = path;
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(t_rival_path == NULL, "stop never reached its unlink's test point");
    t_rival_path = NULL;
    if (t_rival >= 0) {   /* it took the path: its file must still be there */
        CHECK(fstat(t_rival, &rival) == 0 && lstat(path, &st) == 0 && st.st_ino == rival.st_ino,
              "stop removed the socket file another server bound at %s after stop closed its socket", path);
        close(t_rival);
        t_rival = -1;
    } else {
        CHECK(access(path, F_OK) != 0, "stop left %s behind", path);
    }
    unlink(path);
}

/* 16. The first server is bound, not listening: the second starts now,
   and is given 300 ms (it waits for the first's lock, or, unlocked, takes
   the path in that time). */
static void t_second_starts(void) {
    struct pollfd p;
    CHECK(write(t_second_go, "g", 1) == 1, "cannot start the second server");
    p.fd = t_second_rc;
    p.events = POLLIN;
    poll(&p, 1, 300);
    close(t_second_go);
    t_second_go = -1;
}

static void two_starts(void) {
    char path[96], buf[64];
    bpt_control_desc d;
    struct sockaddr_un a;
    struct ucred who;
    socklen_t n, len = sizeof who;
    int go[2], rc[2], quit[2], status, got, c;
    pid_t child;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-edges-%d-two.sock", (int)getpid());
    unlink(path);
    memset(&d, 0, sizeof d);
    d.path = path;
    CHECK(pipe(go) == 0 && pipe(rc) == 0 && pipe(quit) == 0, "pipes");
    if ((child = fork()) == 0) {   /* the second server: start on "g", say its result, stop on a byte */
        int r = read(go[0], buf, 1) == 1 ? bpt_control_start(&d) : -100;
        snprintf(buf, sizeof buf, "%d", r);
        if (write(rc[1], buf, strlen(buf)) < 0) _exit(2);
        if (read(quit[0], buf, 1) < 0) _exit(2);
        if (r == 0) bpt_control_stop();
        _exit(0);
    }
    CHECK(child > 0, "fork");
    close(go[0]);
    close(rc[1]);
    close(quit[0]);
    t_second_go = go[1];
    t_second_rc = rc[0];
    CHECK_RC(bpt_control_start(&d), 0);
    CHECK(t_second_go < 0, "start never reached its test point after bind");
    got = (int)read(rc[0], buf, sizeof buf - 1);   /* the second's result, once it has one */
    buf[got > 0 ? got : 0] = '\0';
    CHECK(got > 0 && atoi(buf) == BPT_EEXIST, "the second server at the same path: %s, want BPT_EEXIST (%d)",
          got > 0 ? buf : "no result", BPT_EEXIST);
    n = ctl_sockaddr(path, &a);   /* the first is the one at the path */
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&a, n) == 0 && getsockopt(c, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 &&
          who.pid == getpid(), "%s is not this process's server (%s; peer %d)", path, strerror(errno),
          (int)who.pid);
    close(c);
    CHECK(write(quit[1], "q", 1) == 1, "cannot end the second server");
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the second server's process: status %d", status);
    close(rc[0]);
    close(quit[1]);
    t_second_rc = -1;
    CHECK_RC(bpt_control_stop(), 0);
    unlink(path);
}

/* 17. The stale file in start's way goes while start looks at it. */
static void file_gone(void) {
    char path[96];
    bpt_control_desc d;
    struct sockaddr_un a;
    socklen_t n;
    int s;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-edges-%d-gone.sock", (int)getpid());
    unlink(path);
    n = ctl_sockaddr(path, &a);
    s = socket(AF_UNIX, SOCK_STREAM, 0);   /* bound, then closed: a dead process's file */
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, n) == 0, "stale file: %s", strerror(errno));
    close(s);
    memset(&d, 0, sizeof d);
    d.path = path;
    t_remove_path = path;
    CHECK_RC(bpt_control_start(&d), 0);
    CHECK(t_remove_path == NULL, "start never reached its test point after a bind in use");
    t_remove_path = NULL;
    CHECK_RC(bpt_control_stop(), 0);
    unlink(path);
}

/* 18. Stale default-address files in $XDG_RUNTIME_DIR. */
static pid_t dead_pid(void) {   /* a pid that was a process's and is no more */
    pid_t p = fork();
    if (p == 0) _exit(0);
    CHECK(p > 0 && waitpid(p, NULL, 0) == p, "fork: %s", strerror(errno));
    return p;
}

static int bound_at(const char *path, int listening) {   /* a socket file at path; the socket, or -1 closed */
    struct sockaddr_un a;
    socklen_t n = ctl_sockaddr(path, &a);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, n) == 0 && (!listening || listen(s, 4) == 0),
          "socket file %s: %s", path, strerror(errno));
    if (!listening) {
        close(s);
        s = -1;
    }
    return s;
}

static void stale_files(void) {
    char dir[64], stale[128], served[128], alive[128], regular[128], other[128], mine[128];
    const char *old = getenv("XDG_RUNTIME_DIR");
    char *saved = old ? strdup(old) : NULL;
    int listener;
    snprintf(dir, sizeof dir, "/tmp/bpt-t-control-edges-%d-xdg-XXXXXX", (int)getpid());
    CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(stale, sizeof stale, "%s/bptrace-%d.sock", dir, (int)dead_pid());
    snprintf(served, sizeof served, "%s/bptrace-%d.sock", dir, (int)dead_pid());
    snprintf(alive, sizeof alive, "%s/bptrace-%d.sock", dir, (int)getppid());
    snprintf(regular, sizeof regular, "%s/bptrace-%d.sock", dir, (int)dead_pid());
    snprintf(other, sizeof other, "%s/bptrace-%d.sock.old", dir, (int)dead_pid());
    snprintf(mine, sizeof mine, "%s/bptrace-%d.sock", dir, (int)getpid());
    bound_at(stale, 0);
    listener = bound_at(served, 1);   /* a dead pid's name, but someone listens */
    bound_at(alive, 0);               /* refused, but its process lives */
    put_file(regular, "not a socket");
    bound_at(other, 0);
    CHECK(setenv("XDG_RUNTIME_DIR", dir, 1) == 0, "setenv");
    CHECK_RC(bpt_control_start(NULL), 0);
    CHECK(access(stale, F_OK) < 0 && errno == ENOENT, "a dead process's socket file is still there: %s", stale);
    CHECK(access(served, F_OK) == 0, "a socket file someone listens at was removed: %s", served);
    CHECK(access(alive, F_OK) == 0, "a live process's socket file was removed: %s", alive);
    CHECK(file_holds(regular, "not a socket"), "a regular file at a default name was touched: %s", regular);
    CHECK(access(other, F_OK) == 0, "a file of another name was removed: %s", other);
    CHECK(access(mine, F_OK) == 0, "the server's own file is missing: %s", mine);
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(access(mine, F_OK) < 0, "stop left its file: %s", mine);
    if (saved) setenv("XDG_RUNTIME_DIR", saved, 1);
    else unsetenv("XDG_RUNTIME_DIR");
    free(saved);
    close(listener);
    unlink(served);
    unlink(alive);
    unlink(regular);
    unlink(other);
    CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
}

/* 4. Negative numbers in HELLO's options. */
static void negative_options(void) {
    char buf[256];
    int fd = ctl_dial(address);
    CHECK(fd >= 0, "cannot connect");
    if (fd < 0) return;
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1 rate=-1/5", buf, sizeof buf, NULL), "ERR -1 ", 7), "rate=-1/5: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1 chunks=-1", buf, sizeof buf, NULL), "ERR -1 ", 7), "chunks=-1: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1 rate=1/5", buf, sizeof buf, NULL), "OK ", 3), "rate=1/5: %s", buf);
    close(fd);
}

static void negative_bytes(void) {
    char buf[256];
    uint64_t frame[1] = { 7 };
    bpt_vm_token t = 0;
    int fd = client("HELLO 1", "PATTERN memory t:f/_");
    if (fd < 0) return;
    CHECK(BPT_VM_FETCH(&code) == BP, "t:f traced");
    if (BPT_VM_FETCH(&code) == BP && bpt_vm_breakpoint(fn, frame, &t) == WORD && t) {
        bpt_account_memory(50);
        bpt_account_memory(-150);   /* freed more than it allocated */
        bpt_vm_return(t, 8);
    }
    send(fd, "INFO memory t:f/_\n", 18, MSG_NOSIGNAL);
    ctl_line(fd, buf, sizeof buf);
    CHECK(!strcmp(buf, "F 0 1 0 -100 1 t:f"), "INFO memory: '%s', want 'F 0 1 0 -100 1 t:f'", buf);
    ctl_line(fd, buf, sizeof buf);
    CHECK(!strcmp(buf, "OK 1"), "INFO's end: '%s'", buf);
    close(fd);   /* hang up: the session goes */
    CHECK(word_becomes(WORD), "the site holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

static void info_kinds(void) {
    char buf[256];
    int rows = 0, fd = client("HELLO 1", "PATTERN call t:f/_");
    if (fd < 0) return;
    CHECK(!strcmp(ctl_ask(fd, "INFO count t:f/_", buf, sizeof buf, &rows), "OK 0") && rows == 0,
          "INFO count of a function only its calls are traced of: %s, %d rows (want OK 0, none)", buf, rows);
    CHECK(!strcmp(ctl_ask(fd, "PATTERN time t:f/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN time: %s", buf);
    rows = 0;
    CHECK(!strcmp(ctl_ask(fd, "INFO count,memory t:f/_", buf, sizeof buf, &rows), "OK 0") && rows == 0,
          "INFO count,memory of a function timed only: %s, %d rows (want OK 0, none)", buf, rows);
    rows = 0;
    CHECK(!strcmp(ctl_ask(fd, "INFO count,time t:f/_", buf, sizeof buf, &rows), "OK 1") && rows == 1,
          "INFO count,time of a function timed: %s, %d rows (want OK 1)", buf, rows);
    close(fd);   /* hang up: the session goes */
    CHECK(word_becomes(WORD), "the site holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

static void nul_byte(void) {
    static const char req[] = "PATTERN count t:f/_\0junk\n";
    char buf[256];
    int fd = ctl_dial(address);
    CHECK(fd >= 0, "cannot connect to %s", address);
    if (fd < 0) return;
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK bptrace ", 11), "HELLO: %s", buf);
    CHECK(send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)sizeof req - 1, "send");
    ctl_line(fd, buf, sizeof buf);
    CHECK(!strncmp(buf, "ERR -1 ", 7), "a line with a NUL byte: '%s', want ERR -1", buf);
    CHECK(bpt_vm_word_at(fn) == WORD, "the site holds %#lx: the line up to its NUL was done",
          (unsigned long)bpt_vm_word_at(fn));
    CHECK(!strcmp(ctl_ask(fd, "PATTERN count nosuch:x/_", buf, sizeof buf, NULL), "OK 0"), "after it: %s", buf);
    /* "\r\n" ends a line as '\n' does: its '\r' is no NUL */
    CHECK(!strcmp(ctl_ask(fd, "PATTERN count nosuch:x/_\r", buf, sizeof buf, NULL), "OK 0"), "a CRLF line: %s", buf);
    close(fd);   /* hang up: the session goes */
    CHECK(word_becomes(WORD), "the site holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

static void no_pipe(void) {
    int status = -1;
    pid_t pid = fork();
    if (pid == 0) {   /* the child: one descriptor more may open, the socket's */
        bpt_control_desc d;
        struct rlimit r;
        char path[64];
        int fd = open("/dev/null", O_RDONLY);   /* the lowest free number: every one below is open */
        if (fd < 0) _exit(2);
        close(fd);
        r.rlim_cur = r.rlim_max = (rlim_t)fd + 1;
        if (setrlimit(RLIMIT_NOFILE, &r) < 0) _exit(2);
        snprintf(path, sizeof path, "@bpt-t-control-edges-nopipe-%d", (int)getpid());
        memset(&d, 0, sizeof d);
        d.path = path;
        if (bpt_control_start(&d) != BPT_EIO) _exit(3);
        if (!strstr(bpt_last_error(), "pipe")) {
            fprintf(stderr, "no pipe: '%s'\n", bpt_last_error());
            _exit(4);
        }
        _exit(0);
    }
    CHECK(pid > 0, "fork");
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's start without room for its pipe: status %d "
          "(3: not BPT_EIO, 4: its message does not name the pipe)", status);
}

/* 13. The listener's poll fails 3 times, from its first call on (armed
   before start: a listener already in poll would not call it again until
   a connection came). A server of its own: a listener lost here must not
   leave the later cases' clients waiting forever. Then every poll of the
   listener fails while stop runs in a thread of its own: it must return
   within a second, the failures disarmed after 5 s if it has not. */
static void *stop_thread(void *arg) {
    *(int *)arg = bpt_control_stop();
    pthread_mutex_lock(&t_poll_lock);
    t_stop_done = 1;
    pthread_mutex_unlock(&t_poll_lock);
    return NULL;
}

static void listener_enomem(void) {
    char path[64], buf[256] = "";
    bpt_control_desc d;
    struct timeval tv;
    pthread_t t;
    int fd, unused, stop_rc = 1, done = 0;
    uint64_t t0;
    snprintf(path, sizeof path, "@bpt-t-control-edges-enomem-%d", (int)getpid());
    memset(&d, 0, sizeof d);
    d.path = path;
    pthread_mutex_lock(&t_poll_lock);
    t_poll_errs[0] = ENOMEM;
    t_poll_errs[1] = EINVAL;
    t_poll_errs[2] = ENOMEM;
    t_poll_nerrs = 3;
    pthread_mutex_unlock(&t_poll_lock);
    CHECK_RC(bpt_control_start(&d), 0);
    fd = ctl_dial(path);   /* queued in the backlog whether or not anyone accepts */
    CHECK(fd >= 0, "cannot connect to %s", path);
    if (fd >= 0) {
        tv.tv_sec = 10;   /* a listener gone never answers: give up after 10 s */
        tv.tv_usec = 0;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL);
        CHECK(!strncmp(buf, "OK bptrace ", 11), "HELLO after the listener's poll failed with ENOMEM, EINVAL, "
              "ENOMEM: '%s' (empty: no reply in 10 s, the listener is gone)", buf);
        close(fd);
    }
    pthread_mutex_lock(&t_poll_lock);
    unused = t_poll_nerrs;
    t_poll_nerrs = 0;
    t_poll_all = 1000000;   /* from now on every poll of the listener fails */
    pthread_mutex_unlock(&t_poll_lock);
    CHECK(unused == 0, "%d of the 3 poll failures were never met: the listener stopped polling", unused);
    fd = ctl_dial(path);   /* wakes the listener, whose next poll fails */
    t0 = now_ns();
    CHECK(pthread_create(&t, NULL, stop_thread, &stop_rc) == 0, "stop thread");
    while (!done && now_ns() - t0 < 5000000000u) {
        usleep(10000);
        pthread_mutex_lock(&t_poll_lock);
        done = t_stop_done;
        pthread_mutex_unlock(&t_poll_lock);
    }
    CHECK(done && now_ns() - t0 < 1000000000u, "bpt_control_stop while every poll of the listener fails: %s after "
          "%.1f s", done ? "returned" : "still waiting", (now_ns() - t0) / 1e9);
    pthread_mutex_lock(&t_poll_lock);
    t_poll_all = 0;   /* let a stop still waiting finish */
    pthread_mutex_unlock(&t_poll_lock);
    pthread_join(t, NULL);
    CHECK_RC(stop_rc, 0);
    if (fd >= 0) close(fd);
}

/* A stream's reader thread: the calls it reads, and whether it saw the end. */
typedef struct {
    int fd;
    pthread_mutex_t lock;
    long got;
    int end;
} reader;

static long got_so_far(reader *r) {
    long n;
    pthread_mutex_lock(&r->lock);
    n = r->got;
    pthread_mutex_unlock(&r->lock);
    return n;
}

static int ended(reader *r) {
    int e;
    pthread_mutex_lock(&r->lock);
    e = r->end;
    pthread_mutex_unlock(&r->lock);
    return e;
}

static void *read_stream(void *arg) {
    reader *r = (reader *)arg;
    bpt_trace_file *tf;
    bpt_msg m[64];
    int n = -1;
    if (bpt_trace_file_fdopen(r->fd, &tf) == 0) {
        while ((n = bpt_trace_file_read(tf, m, 64)) > 0)
            for (int i = 0; i < n; i++)
                if (m[i].type == BPT_MSG_CALL) {
                    pthread_mutex_lock(&r->lock);
                    r->got++;
                    pthread_mutex_unlock(&r->lock);
                }
        bpt_trace_file_close(tf);
    }
    pthread_mutex_lock(&r->lock);
    r->end = 1;
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Until the reader has n calls or the stream ended (at most 20 s). */
static void wait_for(reader *r, long n) {
    for (int i = 0; i < 20000 && got_so_far(r) < n && !ended(r); i++) usleep(1000);
}

static void start_reader(reader *r, pthread_t *t, const char *hello) {
    char buf[256];
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    r->fd = client(hello, "PATTERN call args=u64 t:f/_");
    if (r->fd < 0) return;
    CHECK(!strcmp(ctl_ask(r->fd, "STREAM", buf, sizeof buf, NULL), "OK stream"), "STREAM: %s", buf);
    pthread_create(t, NULL, read_stream, r);
}

static void end_reader(reader *r, pthread_t t) {
    shutdown(r->fd, SHUT_RDWR);   /* a hang-up: the server ends the stream and the session */
    pthread_join(t, NULL);
    close(r->fd);
    CHECK(word_becomes(WORD), "the site holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

/* 5. A half-closed client. The server sees the half-close at its first
   poll after the stream began, so it has seen it before it writes call 1. */
static void half_closed(void) {
    reader r;
    pthread_t t;
    long n = check_scale(1000);
    start_reader(&r, &t, "HELLO 1");
    if (r.fd < 0) return;
    shutdown(r.fd, SHUT_WR);
    vm_call(0);
    wait_for(&r, 1);
    for (long i = 1; i <= n; i++) vm_call((uint64_t)i);
    wait_for(&r, n + 1);
    CHECK(got_so_far(&r) == n + 1 && !ended(&r), "a half-closed client read %ld of %ld calls, stream ended %d",
          got_so_far(&r), n + 1, ended(&r));
    end_reader(&r, t);
}

/* 6. RLIMIT_FSIZE of 64 KiB; the calls made before STREAM take 600 KiB. */
static void file_size_limit(void) {
    struct rlimit old, lim;
    reader r;
    pthread_t t;
    long n = 20000;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    lim = old;
    lim.rlim_cur = 65536;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit: %s", strerror(errno));
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    r.fd = client("HELLO 1", "PATTERN call args=u64 t:f/_");
    if (r.fd >= 0) {
        char buf[256];
        for (long i = 0; i < n; i++) vm_call((uint64_t)i);   /* buffered until STREAM */
        CHECK(!strcmp(ctl_ask(r.fd, "STREAM", buf, sizeof buf, NULL), "OK stream"), "STREAM: %s", buf);
        pthread_create(&t, NULL, read_stream, &r);
        wait_for(&r, n);
        CHECK(got_so_far(&r) == n && !ended(&r), "under RLIMIT_FSIZE 64 KiB: %ld of %ld calls, stream ended %d",
              got_so_far(&r), n, ended(&r));
        end_reader(&r, t);
    }
    setrlimit(RLIMIT_FSIZE, &old);
}

/* 7. fork while a client's session traces this thread. The child finds the
   session among bptrace's own (this test compiles the implementation in),
   calls f, and reports its buffer and drops before and after. */
static void fork_orphan(void) {
    reader r;
    pthread_t t;
    int p[2], st = -1;
    uint64_t got[4] = { 0, 0, 0, 0 };
    pid_t pid;
    start_reader(&r, &t, "HELLO 1 chunks=2 max_chunks=4096");
    if (r.fd < 0) return;
    vm_call(0);   /* this thread's buffer in the session exists at the fork */
    wait_for(&r, 1);
    CHECK(pipe(p) == 0, "pipe");
    pid = fork();
    if (pid == 0) {
        bpt_session s = { 0 };
        bpt_session_counts c0, c1;
        uint64_t out[4] = { 0, 0, 0, 0 };
        for (int i = 0; i < BPT_MAX_SESSIONS; i++) {
            bpt__session *x = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
            if (x && !strncmp(x->name, "bpt-client-", 11)) s.id = x->id;
        }
        if (s.id && bpt_session_stats(s, &c0) == 0) {
            for (long i = 0; i < 20000; i++) vm_call((uint64_t)i);   /* 600 KiB of calls */
            if (bpt_session_stats(s, &c1) == 0) {
                out[0] = c0.buffer_bytes;
                out[1] = c1.buffer_bytes;
                out[2] = c1.dropped - c0.dropped;
                out[3] = 1;
            }
        }
        _exit(write(p[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(p[1]);
    CHECK(pid > 0 && read(p[0], got, sizeof got) == (ssize_t)sizeof got && got[3] == 1,
          "the child found no client session");
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    close(p[0]);
    printf("fork child: the client's session held %llu bytes, then %llu after 20000 calls, %llu dropped\n",
           (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
    CHECK(got[0] > 0 && got[1] == got[0] && got[2] > 0, "in the fork child the orphaned session grew from %llu "
          "to %llu bytes (%llu dropped)", (unsigned long long)got[0], (unsigned long long)got[1],
          (unsigned long long)got[2]);
    end_reader(&r, t);
}

/* 14. Forks while a thread connects. The child: 1 if it holds a
   connection accepted by the server (a socket named with the server's
   address that is not listening), else 0. */
static int fork_accept_stop;   /* under t_points_lock */

static int holds_accepted(void) {
    struct sockaddr_un want, a;
    socklen_t wn = ctl_sockaddr(address, &want);
    for (int fd = 0; fd < 1024; fd++) {
        socklen_t n = sizeof a;
        int listening = 0;
        socklen_t ln = sizeof listening;
        if (getsockname(fd, (struct sockaddr *)&a, &n) < 0 || a.sun_family != AF_UNIX || n != wn ||
            memcmp(a.sun_path, want.sun_path, n - offsetof(struct sockaddr_un, sun_path)))
            continue;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ln) == 0 && !listening) return 1;
    }
    return 0;
}

static void *connect_loop(void *arg) {
    long *n = (long *)arg;
    char buf[256];
    for (;;) {
        int fd, stop;
        pthread_mutex_lock(&t_points_lock);
        stop = fork_accept_stop;
        pthread_mutex_unlock(&t_points_lock);
        if (stop || (fd = ctl_dial(address)) < 0) break;
        ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL);
        close(fd);
        (*n)++;
    }
    return NULL;
}

static void fork_accept(void) {
    pthread_t t;
    long connects = 0, forks = 0, leaks = 0, failed = 0;
    uint64_t end = (uint64_t)time(NULL) + 2;
    CHECK(pthread_create(&t, NULL, connect_loop, &connects) == 0, "connect thread");
    while ((uint64_t)time(NULL) < end && leaks == 0) {
        int st = 0;
        pid_t pid = fork();
        if (pid == 0) _exit(holds_accepted());
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) failed++;
        else leaks += WEXITSTATUS(st) == 1;
        forks++;
    }
    pthread_mutex_lock(&t_points_lock);
    fork_accept_stop = 1;
    pthread_mutex_unlock(&t_points_lock);
    pthread_join(t, NULL);
    printf("fork while connecting: %ld forks, %ld connections; %ld children held an accepted connection\n", forks,
           connects, leaks);
    CHECK(failed == 0, "%ld fork children failed", failed);
    CHECK(connects > 0, "no connection made");
    CHECK(leaks == 0, "a fork child held a connection the server had accepted (%ld of %ld forks)", leaks, forks);
}

/* 8. Two stops at once. The flags and results: under t_points_lock. */
static int release_pin, pinned_flag, second_rc = 1, second_done;
static bpt_vm_word second_word;

static int flag(int *f) {
    int v;
    pthread_mutex_lock(&t_points_lock);
    v = *f;
    pthread_mutex_unlock(&t_points_lock);
    return v;
}

static void *pinner(void *arg) {
    (void)arg;
    bpt_thread_progress_pin();
    pthread_mutex_lock(&t_points_lock);
    pinned_flag = 1;
    pthread_mutex_unlock(&t_points_lock);
    while (!flag(&release_pin)) usleep(1000);
    bpt_thread_progress_unpin();
    return NULL;
}

static void *first_stop(void *arg) {
    *(int *)arg = bpt_control_stop();
    return NULL;
}

static void *second_stop(void *arg) {
    int rc = bpt_control_stop();
    bpt_vm_word w = bpt_vm_word_at(fn);   /* what a caller going on would find */
    (void)arg;
    pthread_mutex_lock(&t_points_lock);
    second_rc = rc;
    second_word = w;
    second_done = 1;
    pthread_mutex_unlock(&t_points_lock);
    return NULL;
}

static void two_stops(void) {
    pthread_t p, s1, s2;
    int fd = client("HELLO 1", "PATTERN count t:f/_"), first_rc = 1, i;
    pthread_create(&p, NULL, pinner, NULL);
    for (i = 0; i < 20000 && !flag(&pinned_flag); i++) usleep(1000);
    pthread_create(&s1, NULL, first_stop, &first_rc);
    for (i = 0; i < 20000 && !flag(&t_stopping); i++) usleep(1000);
    CHECK(flag(&t_stopping), "the first stop never began");
    pthread_create(&s2, NULL, second_stop, NULL);
    for (i = 0; i < 20000 && !flag(&t_waiting) && !flag(&second_done); i++) usleep(1000);
    pthread_mutex_lock(&t_points_lock);
    release_pin = 1;   /* the client's session destroy may finish now */
    pthread_mutex_unlock(&t_points_lock);
    pthread_join(s2, NULL);
    pthread_join(s1, NULL);
    pthread_join(p, NULL);
    CHECK(second_rc == 0 && second_word == WORD, "the second stop returned %d (%s) with the site holding %#lx",
          second_rc, bpt_strerror(second_rc), (unsigned long)second_word);
    CHECK(first_rc == 0, "the first stop returned %d", first_rc);
    CHECK(bpt_vm_word_at(fn) == WORD, "the site holds %#lx after both stops", (unsigned long)bpt_vm_word_at(fn));
    if (fd >= 0) close(fd);
}

/* With an argument, only the part of that name (to see one fail alone). */
int main(int argc, char **argv) {
    bpt_control_desc d;
#define PART(f) if (argc < 2 || !strcmp(argv[1], #f)) f()
    CHECK_RC(bpt_register_vm(&code, BP, "t", "f", 1, &ops, &fn), 0);
    PART(regular_file);
    PART(full_backlog);
    PART(relative_path);
    PART(stop_window);
    PART(two_starts);
    PART(file_gone);
    PART(stale_files);
    PART(listener_enomem);
    snprintf(address, sizeof address, "@bpt-t-control-edges-%d", (int)getpid());
    memset(&d, 0, sizeof d);
    d.path = address;
    CHECK_RC(bpt_control_start(&d), 0);
    PART(negative_options);
    PART(half_closed);
    PART(file_size_limit);
    PART(fork_orphan);
    PART(fork_accept);
    PART(negative_bytes);
    PART(info_kinds);
    PART(nul_byte);
    PART(no_pipe);
    PART(two_stops);
    bpt_control_stop();
    CHECK_RC(bpt_control_stop(), BPT_ENOENT);
    return CHECK_DONE();
}

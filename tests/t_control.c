/* t_control: the control server (>>control) in one process, on VM sites so
   that it runs in every configuration (tcc, sanitizers, aarch64 under qemu):
     1. bad settings, and calls without a server: their codes;
     2. a client: HELLO, PATTERN count, INFO with the exact count, a second
        HELLO refused, a request before HELLO refused, an unknown request,
        a line over 4095 bytes refused while the connection goes on;
     3. STREAM: the calls made after it come back through
        bpt_trace_file_fdopen on the client's socket, in order, and all of
        them while the stream is still open;
     4. a client that hangs up: its session is destroyed and the site's word
        is the original again;
     5. a client that streams and reads nothing while megabytes of calls
        come: another session's bpt_trace_pattern still finishes (the
        server waits on the socket unpinned); bpt_control_stop refused
        while pinned (BPT_EDEADLK); then with a client streaming: it
        returns, the client sees the end of its stream, the word is restored;
     fork: the child has no server, the parent's serves on;
     6. a socket file: mode 0600 while served, replaced when stale (nobody
        serves it), refused (BPT_EEXIST) while another serves it, removed by
        stop.
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control_fixture.h"

static void vm_call(uint64_t a0) {
    bpt_vm_word w = ctl_vm_call(a0);
    CHECK(w == WORD, "executed %#lx", (unsigned long)w);
}

static void settings_and_errors(void) {
    bpt_control_desc d;
    char buf[128];
    memset(&d, 0, sizeof d);
    d.max_clients = BPT_MAX_SESSIONS + 1;
    CHECK_RC(bpt_control_start(&d), BPT_EINVAL);
    d.max_clients = 0;
    d.path = "";
    CHECK_RC(bpt_control_start(&d), BPT_EINVAL);
    d.path = "/nonexistent-dir-of-bptrace/x.sock";
    CHECK_RC(bpt_control_start(&d), BPT_EIO);
    CHECK_RC(bpt_control_stop(), BPT_ENOENT);
    CHECK_RC(bpt_control_address(buf, sizeof buf), BPT_ENOENT);
    CHECK_RC(bpt_control_address(NULL, 0), BPT_EINVAL);
}

static void requests(const char *address) {
    char buf[8192], want[64];
    int fd = ctl_dial(address), rows = 0;
    long n = check_scale(10000);
    CHECK(fd >= 0, "cannot connect to %s", address);
    if (fd < 0) return;
    CHECK(!strncmp(ctl_ask(fd, "PATTERN count t:_/_", buf, sizeof buf, NULL), "ERR -5 ", 7), "before HELLO: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 2", buf, sizeof buf, NULL), "ERR -10 ", 8), "HELLO 2: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK bptrace ", 11), "HELLO: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "ERR -1 ", 7), "HELLO again: %s", buf);
    CHECK(!strncmp(ctl_ask(fd, "JUMP", buf, sizeof buf, NULL), "ERR -1 ", 7) && strstr(buf, "unknown request 'JUMP'"),
          "JUMP: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "PATTERN count t:_/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN: %s", buf);
    CHECK(bpt_vm_word_at(fn) == BP, "the site holds %#lx", (unsigned long)bpt_vm_word_at(fn));
    for (long i = 0; i < n; i++) vm_call((uint64_t)i);
    CHECK(!strcmp(ctl_ask(fd, "INFO count t:_/_", buf, sizeof buf, &rows), "OK 1") && rows == 1, "INFO: %s, %d rows", buf, rows);
    {   /* the F line itself: the exact count */
        char f[256];
        send(fd, "INFO count t:f/_\n", 17, MSG_NOSIGNAL);
        ctl_line(fd, f, sizeof f);
        snprintf(want, sizeof want, "F %ld 0 0 0 1 t:f", n);
        CHECK(!strcmp(f, want), "got '%s', want '%s'", f, want);
        ctl_line(fd, buf, sizeof buf);
    }
    {   /* a line of 8000 bytes: refused, and the connection goes on */
        static char huge[8001];
        memset(huge, 'x', 8000);
        CHECK(!strncmp(ctl_ask(fd, huge, buf, sizeof buf, NULL), "ERR -13 ", 8), "long line: %s", buf);
        CHECK(!strcmp(ctl_ask(fd, "PATTERN count nosuch:x/_", buf, sizeof buf, NULL), "OK 0"), "after it: %s", buf);
    }
    close(fd);   /* hang up: the session goes, the word comes back */
    CHECK(word_becomes(WORD), "the site still holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

typedef struct {
    int fd;
    pthread_mutex_t lock;   /* got: the main thread watches it */
    long got;
    uint64_t first, last;
    int end;
} stream_reader;

static long got_so_far(stream_reader *r) {
    long n;
    pthread_mutex_lock(&r->lock);
    n = r->got;
    pthread_mutex_unlock(&r->lock);
    return n;
}

static void *read_stream(void *arg) {
    stream_reader *r = (stream_reader *)arg;
    bpt_trace_file *tf;
    bpt_msg m[64];
    int n;
    if (bpt_trace_file_fdopen(r->fd, &tf) < 0) return NULL;
    while ((n = bpt_trace_file_read(tf, m, 64)) > 0)
        for (int i = 0; i < n; i++)
            if (m[i].type == BPT_MSG_CALL) {
                pthread_mutex_lock(&r->lock);
                if (!r->got) r->first = m[i].args[0];
                r->last = m[i].args[0];
                r->got++;
                pthread_mutex_unlock(&r->lock);
            }
    r->end = n == 0;
    bpt_trace_file_close(tf);
    return NULL;
}

/* A client that says STREAM and reads nothing, while calls flood in: the
   server blocks on its socket, and must do so unpinned. Another session's
   bpt_trace_pattern (which waits for thread progress) must still finish;
   SIGALRM's default action ends the test if it hangs. */
static void stalled_client(const char *address) {
    char buf[256];
    bpt_session s2;
    long n = check_scale(200000);
    int fd = ctl_dial(address);
    CHECK(fd >= 0, "cannot connect");
    if (fd < 0) return;
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK ", 3), "HELLO: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "PATTERN call t:f/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "STREAM", buf, sizeof buf, NULL), "OK stream"), "STREAM: %s", buf);
    for (long i = 0; i < n; i++) vm_call((uint64_t)i);   /* megabytes: more than the socket holds */
    usleep(200000);                                      /* the server is stuck in its send now */
    alarm(60);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);
    CHECK_RC(bpt_trace_pattern(s2, "t:f/_", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_session_destroy(s2), 0);
    alarm(0);
    close(fd);
    CHECK(word_becomes(WORD), "the site still holds %#lx after the stalled client left",
          (unsigned long)bpt_vm_word_at(fn));
}

/* fork: the child has no server (its threads are the parent's), and says
   so; the parent's serves on. */
static void fork_child(void) {
    char buf[128];
    int st = -1;
    pid_t p = fork();
    if (p == 0) {
        int ok = bpt_control_stop() == BPT_ENOENT && bpt_control_address(buf, sizeof buf) == BPT_ENOENT;
        _exit(ok ? 0 : 1);
    }
    CHECK(p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child saw a server (%d)", st);
    CHECK(bpt_control_address(buf, sizeof buf) > 0, "the parent's server is gone: %s", bpt_last_error());
}

/* STREAM, then bpt_control_stop while it streams. */
static void stream_then_stop(const char *address) {
    char buf[256];
    stream_reader r;
    pthread_t t;
    long n = check_scale(2000);
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    r.fd = ctl_dial(address);
    CHECK(r.fd >= 0, "cannot connect");
    if (r.fd < 0) return;
    CHECK(!strncmp(ctl_ask(r.fd, "HELLO 1", buf, sizeof buf, NULL), "OK ", 3), "HELLO: %s", buf);
    CHECK(!strcmp(ctl_ask(r.fd, "PATTERN call args=u64 t:f/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN: %s", buf);
    CHECK(!strcmp(ctl_ask(r.fd, "STREAM", buf, sizeof buf, NULL), "OK stream"), "STREAM: %s", buf);
    pthread_create(&t, NULL, read_stream, &r);
    for (long i = 0; i < n; i++) vm_call((uint64_t)i);
    for (int i = 0; i < 5000 && got_so_far(&r) < n; i++) usleep(1000);
    /* Live: every call read before the stream ends (the reader returns a
       block's messages as it comes, not only once it has max of them). */
    CHECK(got_so_far(&r) == n, "%ld of %ld calls read while the stream is open", got_so_far(&r), n);
    CHECK_RC(bpt_control_stop(), 0);   /* shuts the client down; its thread destroys the session */
    pthread_join(t, NULL);
    CHECK(r.got == n && r.first == 0 && r.last == (uint64_t)(n - 1) && r.end,
          "streamed %ld calls (%llu..%llu), end %d; want %ld", r.got, (unsigned long long)r.first,
          (unsigned long long)r.last, r.end, n);
    CHECK(bpt_vm_word_at(fn) == WORD, "the site holds %#lx after stop", (unsigned long)bpt_vm_word_at(fn));
    close(r.fd);
}

static void socket_files(void) {
    char path[96], buf[128];
    bpt_control_desc d;
    struct stat st;
    struct sockaddr_un a;
    int other;
    snprintf(path, sizeof path, "/tmp/bpt-t-control-%d.sock", (int)getpid());
    unlink(path);
    memset(&d, 0, sizeof d);
    d.path = path;
    /* stale: a socket file nobody serves */
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    other = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(other, (struct sockaddr *)&a, sizeof a) == 0, "bind");
    close(other);
    CHECK_RC(bpt_control_start(&d), 0);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    CHECK_RC(bpt_control_address(buf, sizeof buf), (int)strlen(path));
    CHECK_RC(bpt_control_address(buf, 4), BPT_EINVAL);
    other = ctl_dial(path);
    CHECK(other >= 0 && !strncmp(ctl_ask(other, "HELLO 1", buf, sizeof buf, NULL), "OK ", 3), "HELLO over the file: %s", buf);
    if (other >= 0) close(other);
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(access(path, F_OK) != 0, "stop left %s behind", path);
    /* served by someone else: refused */
    other = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(other, (struct sockaddr *)&a, sizeof a) == 0 && listen(other, 1) == 0, "bind, listen");
    CHECK_RC(bpt_control_start(&d), BPT_EEXIST);
    close(other);
    unlink(path);
}

int main(void) {
    char address[64], buf[128];
    bpt_control_desc d;
    CHECK_RC(bpt_register_vm(&code, BP, "t", "f", 1, &ops, &fn), 0);
    settings_and_errors();
    snprintf(address, sizeof address, "@bpt-t-control-%d", (int)getpid());
    memset(&d, 0, sizeof d);
    d.path = address;
    CHECK_RC(bpt_control_start(&d), 0);
    CHECK_RC(bpt_control_start(&d), BPT_EEXIST);
    CHECK_RC(bpt_control_address(buf, sizeof buf), (int)strlen(address));
    CHECK(!strcmp(buf, address), "address %s", buf);
    fork_child();
    requests(address);
    stalled_client(address);
    bpt_thread_progress_pin();   /* stop would wait for this thread's own progress */
    CHECK_RC(bpt_control_stop(), BPT_EDEADLK);
    bpt_thread_progress_unpin();
    stream_then_stop(address);
    CHECK_RC(bpt_control_stop(), BPT_ENOENT);
    socket_files();
    return CHECK_DONE();
}

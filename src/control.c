/* control.c: the control server (api_control.h, >>control). One accepting
   thread (the listener) and one thread per client, each client with its
   own trace session. Everything here is set path: the traced threads never
   see the server, and the server only calls the public API (bpt_trace_pattern,
   bpt_trace_info_each, bpt_session_write), as any other thread of the
   program could.

   State and its lock: bpt__ctl (below) is changed only under bpt__ctl_lock.
   The client threads read bpt__ctl.stopping under it too. The clients'
   sockets are in bpt__ctl.fds so that bpt_control_stop can shut them down,
   which wakes a client thread waiting in poll (it never waits in recv or
   send: >>descriptors); each client thread destroys its session, removes
   its own slot, and signals bpt__ctl_gone when it is the last. A session
   whose destroy failed (no memory) is kept in bpt__ctl.left, and destroyed
   again at the next client's departure or bpt_control_stop. */
#include "internal.h"
#include <dirent.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

enum {
    BPT__CTL_LINE = 4096,              /* a request line and its '\n' */
    BPT__CTL_DEFAULT_CLIENTS = 16,
    BPT__CTL_POLL_MS = 20,             /* a stream's wait for records or a hang-up */
    BPT__CTL_LOOK_MS = 1000            /* the longest a server thread waits before it looks at its
                                          descriptors and at stop's flag (>>descriptors) */
};

/* A descriptor's identity: the file it names (fstat's device and inode;
   sockets, pipes and memory files each have an inode of their own).
   {0, 0}: none. See >>descriptors below. */
typedef struct bpt__ctl_fdid { dev_t dev; ino_t ino; } bpt__ctl_fdid;

/* The lock and its condition, apart: a static initializer of the state
   below would have to spell out a sockaddr_un, which C++ warns about. */
static pthread_mutex_t bpt__ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bpt__ctl_gone = PTHREAD_COND_INITIALIZER;   /* nclients fell to 0 */
static pthread_cond_t bpt__ctl_stopped = PTHREAD_COND_INITIALIZER;   /* a stop finished */

static struct {   /* under bpt__ctl_lock; zero until the first start */
    int running;                       /* started and not stopped (a fork's child: 0) */
    int atfork;                        /* the fork handlers are registered */
    int stopping, stop_rc;             /* stop_rc: what the last stop returned */
    int listen_fd, wake[2];            /* wake: bpt_control_stop writes, the listener polls */
    bpt__ctl_fdid listen_id, wake_id[2];
    pthread_t listener;
    struct sockaddr_un addr;
    socklen_t addr_len;
    char address[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];   /* "@name", or an absolute path */
    dev_t dev;                         /* the socket file bind made: stop removes it, */
    ino_t ino;                         /* and not another file put at its path since */
    uint64_t left[BPT_MAX_SESSIONS];   /* ids of sessions whose destroy failed */
    uint32_t nleft;
    int allow_root;
    uint32_t max_clients, nclients;
    int fds[BPT_MAX_SESSIONS];         /* a client's socket, or -1 */
    bpt__ctl_fdid ids[BPT_MAX_SESSIONS];   /* its identity */
    int accepted;                      /* a socket accepted, neither in fds nor closed yet, or -1 */
    bpt__ctl_fdid accepted_id;
} bpt__ctl;

/* >>descriptors: the program's to close. The agent starts the server
   before main, and a program that closes every descriptor it did not open
   (closefrom(3), as daemons do at start) closes the server's too; the
   numbers then come back for the program's own files and sockets. The
   server used them all the same: the listener polled the program's file
   (always readable: a spin at 100 % CPU) and could accept from the
   program's own listening socket, stop wrote its wake-up byte into the
   program's file and closed it, and a client's thread read and wrote the
   program's descriptor (tests/agent kind closefrom).
   So the server keeps each descriptor's identity and checks it before
   each use: accept, recv, each non-blocking send, pread, ftruncate,
   shutdown, close. No server thread waits on a descriptor for more than a
   second (BPT__CTL_LOOK_MS) without checking again, so none holds an old
   file across the program's close. The listener renews its socket and
   pipe when they are gone (bpt__ctl_renew). A check and the call after it
   are two steps: a program that gives the number to a file of its own in
   between still gets that one call, not the ones after; and the stream's
   bpt_session_write into its memory file is one use of many write(2)
   calls. So the server's descriptors live at high numbers
   (bpt__ctl_high): a program's open takes the lowest free number, and
   after a closefrom it reaches the server's old ones only once it holds
   hundreds of descriptors (the window then sent the server's reply to the
   program's own socket; t_control_fds case 8). */
static bpt__ctl_fdid bpt__ctl_id(int fd) {
    bpt__ctl_fdid id = { 0, 0 };
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    return id;
}

/* fd moved to a high number, at or above half the descriptor limit
   (RLIMIT_NOFILE's soft one) and at most 512, so that the kernel's table
   has 1,024 slots at most, 8 KiB of pointers (from 1024 it took 2,048
   once a client came: 16 KiB, copied at every fork; found by review). fd
   itself when the limit is below 128 or the move fails (EMFILE: the low
   number serves). A new descriptor of the server's goes through it before
   its identity is taken (>>descriptors). */
static int bpt__ctl_high(int fd) {
    struct rlimit rl;
    rlim_t floor;
    int h;
    if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0) return fd;
    floor = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > 512 ? 512 : rl.rlim_cur / 2;
    if (floor < 64 || (rlim_t)fd >= floor || (h = fcntl(fd, F_DUPFD_CLOEXEC, (int)floor)) < 0) return fd;
    close(fd);
    return h;
}

/* Whether fd still names the file of identity id. */
static int bpt__ctl_ours(int fd, bpt__ctl_fdid id) {
    bpt__ctl_fdid now = bpt__ctl_id(fd);
    return fd >= 0 && id.ino != 0 && now.dev == id.dev && now.ino == id.ino;
}

/* close(fd) if it is still ours: a number the program has taken is its. */
static void bpt__ctl_close(int fd, bpt__ctl_fdid id) {
    if (bpt__ctl_ours(fd, id)) close(fd);
}

/* Whether bpt_control_stop has asked the server to end. */
static int bpt__ctl_stop_asked(void) {
    int stop;
    pthread_mutex_lock(&bpt__ctl_lock);
    stop = bpt__ctl.stopping;
    pthread_mutex_unlock(&bpt__ctl_lock);
    return stop;
}

/* ---- Replies ---- */

/* Send all of buf to fd, while it is still the socket of identity id
   (>>descriptors): MSG_NOSIGNAL, so a client gone gives EPIPE, not
   SIGPIPE. Never one long wait: when the client does not read, send waits
   in poll a second at a time, and looks at the descriptor and at stop's
   flag in between. (A blocking send held the old socket when the program
   closed the number; stop, which cannot shut down a number that is not
   ours, then waited for that client for good; found by review.) 0; -1
   when the client went away, the number is the program's, or stop asked. */
static int bpt__ctl_send(int fd, bpt__ctl_fdid id, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t k;
        if (!bpt__ctl_ours(fd, id)) return -1;
        BPT_TEST_POINT("control_send: checked");
        k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p;
            int r;
            p.fd = fd;
            p.events = POLLOUT;
            p.revents = 0;
            if ((r = poll(&p, 1, BPT__CTL_LOOK_MS)) < 0 && errno != EINTR) return -1;
            if (r == 0 && bpt__ctl_stop_asked()) return -1;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

static int bpt__ctl_reply(int fd, bpt__ctl_fdid id, const char *fmt, ...) {
    char line[BPT__CTL_LINE + 256];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    return bpt__ctl_send(fd, id, line, (size_t)n);
}

/* ERR CODE TEXT: the code and the calling thread's bpt_last_error, on one
   line (a newline in the text would end the reply early). */
static int bpt__ctl_error(int fd, bpt__ctl_fdid id, int code) {
    char text[512];
    snprintf(text, sizeof text, "%s", *bpt_last_error() ? bpt_last_error() : bpt_strerror(code));
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return bpt__ctl_reply(fd, id, "ERR %d %s", code, text);
}

/* ---- Requests ---- */

/* KINDS: a comma list of names, into trace flags; -1 for an unknown name. */
static long bpt__ctl_kinds(const char *s) {
    static const struct { const char *name; unsigned flag; } names[] = {
        { "call", BPT_CALL }, { "return", BPT_RETURN }, { "exception", BPT_EXCEPTION },
        { "return_to", BPT_RETURN_TO }, { "caller", BPT_CALLER }, { "count", BPT_COUNT },
        { "time", BPT_TIME }, { "memory", BPT_MEMORY }, { "off", BPT_OFF },
        { "pause", BPT_PAUSE }, { "restart", BPT_RESTART },
    };
    unsigned flags = 0;
    while (*s) {
        size_t n = strcspn(s, ","), i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && !strncmp(names[i].name, s, n)) break;
        if (i == sizeof names / sizeof names[0]) return -1;
        flags |= names[i].flag;
        s += n;
        if (*s == ',') s++;
    }
    return (long)flags;
}

/* The next word of *s (ended by a space), NUL-terminated in place. */
static char *bpt__ctl_word(char **s) {
    char *w = *s + strspn(*s, " "), *e = w + strcspn(w, " ");
    *s = e + strspn(e, " ");
    if (*e) *e = '\0';
    return w;
}

typedef struct bpt__ctl_client {
    int fd, slot;
    bpt__ctl_fdid id;                  /* fd's (>>descriptors) */
    pid_t peer;
    bpt_session session;               /* id 0 until HELLO */
} bpt__ctl_client;

static int bpt__ctl_hello(bpt__ctl_client *c, char *rest) {
    bpt_session_desc d;
    char name[64], *version = bpt__ctl_word(&rest), *opt;
    int rc;
    if (c->session.id) return bpt__fail(BPT_EINVAL, "HELLO: this connection said HELLO already");
    if (strcmp(version, "1"))
        return bpt__fail(BPT_ENOTSUP, "HELLO: protocol version '%s'; this server speaks 1", version);
    memset(&d, 0, sizeof d);
    while (*(opt = bpt__ctl_word(&rest))) {
        unsigned long long n, ms;
        char end;
        if (strchr(opt, '-'))   /* strtoull, under sscanf, would take "-1" as 2^64-1 */
            return bpt__fail(BPT_EINVAL, "HELLO: option '%s': numbers are unsigned", opt);
        if (sscanf(opt, "rate=%llu/%llu%c", &n, &ms, &end) == 2 && n > 0 && ms > 0 && ms <= 0xffffffffu) {
            d.rate_max = n;
            d.rate_per_ms = (uint32_t)ms;
        } else if (sscanf(opt, "chunks=%llu%c", &n, &end) == 1 && n <= 0xffffffffu) {
            d.chunks = (uint32_t)n;          /* bpt_session_create checks the ranges */
        } else if (sscanf(opt, "max_chunks=%llu%c", &n, &end) == 1 && n <= 0xffffffffu) {
            d.max_chunks = (uint32_t)n;
        } else {
            return bpt__fail(BPT_EINVAL, "HELLO: unknown option '%s' (rate=N/MS, chunks=N, max_chunks=N)", opt);
        }
    }
    snprintf(name, sizeof name, "bpt-client-%d", (int)c->peer);
    d.name = name;
    /* served: in a fork's child, where no server thread drains it, the
       session stops growing its buffers (session.c, bpt__sessions_atfork_child) */
    if ((rc = bpt__session_create(&d, &c->session, 1)) < 0) return rc;
    return 0;
}

static int bpt__ctl_pattern(bpt__ctl_client *c, char *rest) {
    bpt_match m;
    char *kinds = bpt__ctl_word(&rest);
    long flags = bpt__ctl_kinds(kinds);
    if (flags < 0 || !*kinds)
        return bpt__fail(BPT_EFLAGS, "PATTERN: unknown kinds '%s' (a comma list of call, return, exception, "
                         "return_to, caller, count, time, memory, off, pause, restart)", kinds);
    memset(&m, 0, sizeof m);
    for (;;) {   /* options, then the pattern: the rest of the line */
        rest += strspn(rest, " ");
        if (strncmp(rest, "args=", 5) && strncmp(rest, "ret=", 4)) break;
        if (rest[0] == 'a') m.args = bpt__ctl_word(&rest) + 5;
        else m.ret = bpt__ctl_word(&rest) + 4;
    }
    if (!*rest) return bpt__fail(BPT_EPATTERN, "PATTERN: no pattern after the kinds");
    return bpt_trace_pattern(c->session, rest, (unsigned)flags, &m);
}

/* INFO's lines, gathered in memory while bpt_trace_info_each holds the
   code modification permission, and sent after it returns: a send that
   blocks (a client that does not read) must not hold the permission. */
typedef struct { char *text; size_t len, cap; int lines, failed; unsigned kinds; } bpt__ctl_info_out;

static void bpt__ctl_info_line(const bpt_func *f, const char *module, const char *name, int arity,
                               const bpt_info *in, void *user) {
    bpt__ctl_info_out *o = (bpt__ctl_info_out *)user;
    char line[2 * BPT__NAME_MAX + 128];
    int n;
    (void)f;
    /* Only a function the session has a breakpoint of the asked kinds on
       (>>control): not one whose calls alone it traces, nor one it times
       when INFO asks for counts. */
    if (o->failed || !(in->flags & o->kinds)) return;
    n = snprintf(line, sizeof line, "F %llu %llu %llu %lld %d %s:%s\n", (unsigned long long)in->count,
                 (unsigned long long)in->calls, (unsigned long long)in->time_ns,
                 (long long)(int64_t)in->memory_bytes, arity, module, name);   /* net bytes: signed (api_info.h) */
    if (n < 0 || (size_t)n >= sizeof line) return;
    if (o->len + (size_t)n > o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 4096;
        char *t;
        while (cap < o->len + (size_t)n) cap *= 2;
        if (!(t = (char *)BPT_MALLOC(cap))) { o->failed = 1; return; }
        if (o->len) memcpy(t, o->text, o->len);
        BPT_FREE(o->text);
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, line, (size_t)n);
    o->len += (size_t)n;
    o->lines++;
}

static int bpt__ctl_info(bpt__ctl_client *c, char *rest) {
    char *kinds = bpt__ctl_word(&rest);
    long flags = bpt__ctl_kinds(kinds);
    unsigned what = BPT_INFO_FLAGS;   /* flags: to skip functions with no breakpoint of the kinds asked */
    bpt__ctl_info_out o;
    int rc;
    memset(&o, 0, sizeof o);
    if (flags < 0 || !flags || (flags & ~(long)(BPT_COUNT | BPT_TIME | BPT_MEMORY)))
        return bpt__fail(BPT_EFLAGS, "INFO: kinds '%s': a comma list of count, time, memory", kinds);
    if (flags & BPT_COUNT) what |= BPT_INFO_COUNT;
    if (flags & BPT_TIME) what |= BPT_INFO_TIME;
    if (flags & BPT_MEMORY) what |= BPT_INFO_MEMORY;
    if (!*rest) return bpt__fail(BPT_EPATTERN, "INFO: no pattern after the kinds");
    o.kinds = (unsigned)flags;
    rc = bpt_trace_info_each(c->session, rest, what, bpt__ctl_info_line, &o);
    if (rc >= 0 && o.failed) rc = bpt__fail(BPT_ENOMEM, "INFO: no memory for the reply");
    if (rc >= 0 && o.len && bpt__ctl_send(c->fd, c->id, o.text, o.len) < 0) rc = BPT_EIO;
    BPT_FREE(o.text);
    return rc < 0 ? rc : o.lines;
}

/* STREAM: the session's trace file down the socket until the client hangs
   up (or the server stops). bpt_session_write keeps this thread pinned
   while it writes (it writes straight from the lanes' chunks), and a
   pinned thread holds up every thread progress wait in the process: so it
   writes into a memory file, never to the socket, and the bytes go to the
   socket after it returns, unpinned. A client that stops reading then
   blocks only this thread's send; the traced threads fill the session's
   buffers and drop what does not fit, counted and marked.
   A write error the writer recovers from (the memory file is a file: a
   cut block is taken back), as EFBIG under RLIMIT_FSIZE, only ends this
   round early: what the file holds is sent, and the rest comes next round.
   A client that shuts down its writing half (socat, nc -N) still reads:
   the stream ends on a hang-up (POLLHUP, POLLERR) or a failed send.
   Returns 1 when it replied ERR (the connection goes on), else 0. */
static int bpt__ctl_stream(bpt__ctl_client *c) {
    bpt_file_writer w;
    char *buf;
    int mfd = bpt__ctl_high((int)syscall(SYS_memfd_create, "bptrace-stream", 1u /* MFD_CLOEXEC */));
    bpt__ctl_fdid mid = bpt__ctl_id(mfd);
    short events = POLLIN;   /* 0 once the client shut down its writing half */
    const size_t COPY = 65536;
    if (mfd < 0 || !(buf = (char *)BPT_MALLOC(COPY))) {   /* ERR before OK: the connection goes on */
        int rc = mfd < 0 ? bpt__fail(BPT_EIO, "STREAM: memfd_create: %s", strerror(errno))
                         : bpt__fail(BPT_ENOMEM, "STREAM: no memory for the copy buffer");
        if (mfd >= 0) close(mfd);
        return bpt__ctl_error(c->fd, c->id, rc) == 0;
    }
    if (bpt__ctl_reply(c->fd, c->id, "OK stream") < 0) goto done;
    memset(&w, 0, sizeof w);
    w.fd = mfd;
    for (;;) {
        struct pollfd p;
        char sink[256];
        off_t end, at;
        int rc;
        if (!bpt__ctl_ours(mfd, mid) || !bpt__ctl_ours(c->fd, c->id)) break;   /* the program's (>>descriptors) */
        rc = bpt_session_write(c->session, &w);
        end = lseek(mfd, 0, SEEK_CUR);
        if (rc < 0 && (rc != BPT_EIO || w.broken || end <= 0)) break;   /* no way on */
        for (at = 0; at < end;) {   /* unpinned: this send may wait for the client */
            ssize_t k;
            if (!bpt__ctl_ours(mfd, mid)) goto done;   /* each use checked: the send above may have waited */
            k = pread(mfd, buf, (size_t)(end - at) < COPY ? (size_t)(end - at) : COPY, at);
            if (k <= 0 || bpt__ctl_send(c->fd, c->id, buf, (size_t)k) < 0) goto done;   /* EPIPE: the client left */
            at += k;
        }
        if (!bpt__ctl_ours(mfd, mid)) break;
        if (end > 0 && (ftruncate(mfd, 0) < 0 || lseek(mfd, 0, SEEK_SET) < 0)) break;
        if (rc < 0) continue;   /* recovered: the rest at once */
        p.fd = c->fd;
        p.events = events;
        p.revents = 0;
        if (poll(&p, 1, BPT__CTL_POLL_MS) > 0) {
            ssize_t k = (p.revents & POLLIN) && bpt__ctl_ours(c->fd, c->id)
                            ? recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) : -1;
            if (p.revents & (POLLHUP | POLLERR)) break;   /* hung up */
            if (k == 0) events = 0;                       /* half-closed: it still reads */
        }
        if (bpt__ctl_stop_asked()) break;
    }
done:
    BPT_FREE(buf);
    bpt__ctl_close(mfd, mid);
    return 0;
}

/* One request line: its reply. Returns 1 to go on, 0 to close. */
static int bpt__ctl_request(bpt__ctl_client *c, char *line) {
    char *rest = line, *cmd = bpt__ctl_word(&rest);
    int rc;
    if (!strcmp(cmd, "HELLO")) {
        if ((rc = bpt__ctl_hello(c, rest)) < 0) return bpt__ctl_error(c->fd, c->id, rc) == 0;
        return bpt__ctl_reply(c->fd, c->id, "OK bptrace %s 1 %d", BPTRACE_VERSION, (int)getpid()) == 0;
    }
    if (!strcmp(cmd, "BYE")) {
        bpt__ctl_reply(c->fd, c->id, "OK bye");
        return 0;
    }
    if (strcmp(cmd, "PATTERN") && strcmp(cmd, "INFO") && strcmp(cmd, "STREAM")) {
        bpt__fail(BPT_EINVAL, "unknown request '%.64s' (HELLO, PATTERN, INFO, STREAM, BYE)", cmd);
        return bpt__ctl_error(c->fd, c->id, BPT_EINVAL) == 0;
    }
    if (!c->session.id) {
        bpt__fail(BPT_ESESSION, "%s before HELLO", cmd);
        return bpt__ctl_error(c->fd, c->id, BPT_ESESSION) == 0;
    }
    if (!strcmp(cmd, "STREAM")) return bpt__ctl_stream(c);   /* OK stream and the stream, or ERR */
    rc = !strcmp(cmd, "PATTERN") ? bpt__ctl_pattern(c, rest) : bpt__ctl_info(c, rest);
    if (rc < 0) return bpt__ctl_error(c->fd, c->id, rc) == 0;
    return bpt__ctl_reply(c->fd, c->id, "OK %d", rc) == 0;
}

/* ---- Client threads ---- */

/* Read requests line by line. A line over BPT__CTL_LINE bytes is refused
   and skipped up to its '\n'; so is a line holding a NUL byte, which the
   string code below would read only up to that NUL: another request than
   the one sent, done and replied OK. The connection goes on. */
static void bpt__ctl_serve(bpt__ctl_client *c) {
    char buf[BPT__CTL_LINE];
    size_t have = 0;
    int skipping = 0;
    for (;;) {
        char *nl;
        ssize_t k;
        struct pollfd p;
        if (!bpt__ctl_ours(c->fd, c->id)) return;   /* the program closed it (>>descriptors) */
        p.fd = c->fd;   /* a second at most, then look again: a recv on a number the program closed */
        p.events = POLLIN;   /* would wait on the old file, which stop's shutdown cannot reach */
        p.revents = 0;
        if ((k = poll(&p, 1, BPT__CTL_LOOK_MS)) == 0 || (k < 0 && errno == EINTR)) {
            if (bpt__ctl_stop_asked()) return;
            continue;
        }
        if (k < 0) return;   /* poll failed (no memory): the connection ends, the client may come again */
        if (!bpt__ctl_ours(c->fd, c->id)) return;   /* taken during the poll, whose last look saw the new file */
        k = recv(c->fd, buf + have, sizeof buf - have, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;   /* closed, reset, or shut down by bpt_control_stop */
        have += (size_t)k;
        while ((nl = (char *)memchr(buf, '\n', have)) != NULL) {
            size_t used = (size_t)(nl - buf) + 1;
            int nul = memchr(buf, '\0', (size_t)(nl - buf)) != NULL;   /* before a '\r' is cut */
            *nl = '\0';
            if (nl > buf && nl[-1] == '\r') nl[-1] = '\0';
            if (skipping) {
                skipping = 0;
            } else if (nul) {
                bpt__fail(BPT_EINVAL, "a request line holds a NUL byte: refused");
                if (bpt__ctl_error(c->fd, c->id, BPT_EINVAL) < 0) return;
            } else if (!bpt__ctl_request(c, buf)) {
                return;
            }
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        if (have == sizeof buf) {   /* no '\n' in a whole buffer */
            if (!skipping) {
                bpt__fail(BPT_ELIMIT, "a request line is longer than %d bytes: refused", BPT__CTL_LINE - 1);
                if (bpt__ctl_error(c->fd, c->id, BPT_ELIMIT) < 0) return;
            }
            skipping = 1;
            have = 0;
        }
    }
}

/* Destroy a client's session; when that fails (no memory), keep its id in
   bpt__ctl.left, to be tried again. Without the lock: a destroy waits for
   thread progress. */
static int bpt__ctl_destroy(uint64_t id) {
    bpt_session s;
    int rc;
    s.id = id;
    if ((rc = bpt_session_destroy(s)) < 0 && rc != BPT_ESESSION) {   /* BPT_ESESSION: gone already */
        pthread_mutex_lock(&bpt__ctl_lock);
        if (bpt__ctl.nleft < BPT_MAX_SESSIONS) bpt__ctl.left[bpt__ctl.nleft++] = id;   /* one a session: room */
        pthread_mutex_unlock(&bpt__ctl_lock);
        return rc;
    }
    return 0;
}

/* Try the sessions left over once more. Returns 0 when none is left, or
   the first failure's code. */
static int bpt__ctl_retry_left(void) {
    uint64_t ids[BPT_MAX_SESSIONS];
    uint32_t n, i;
    int rc = 0, r;
    pthread_mutex_lock(&bpt__ctl_lock);
    n = bpt__ctl.nleft;
    memcpy(ids, bpt__ctl.left, n * sizeof ids[0]);
    bpt__ctl.nleft = 0;
    pthread_mutex_unlock(&bpt__ctl_lock);
    for (i = 0; i < n; i++)
        if ((r = bpt__ctl_destroy(ids[i])) < 0 && rc == 0) rc = r;
    return rc;
}

/* A client's slot free again, its socket closed (if still ours) and its
   count taken back: at its thread's end, or when it got no thread. */
static void bpt__ctl_release(int slot) {
    pthread_mutex_lock(&bpt__ctl_lock);
    bpt__ctl_close(bpt__ctl.fds[slot], bpt__ctl.ids[slot]);
    bpt__ctl.fds[slot] = -1;
    if (--bpt__ctl.nclients == 0) pthread_cond_broadcast(&bpt__ctl_gone);
    pthread_mutex_unlock(&bpt__ctl_lock);
}

static void *bpt__ctl_client_main(void *arg) {
    bpt__ctl_client *c = (bpt__ctl_client *)arg;
    bpt__own_enter();   /* bptrace's own thread: its calls through traced slots are not traced */
    bpt__ctl_serve(c);
    /* The client is gone: its session, breakpoints and all, goes with it,
       and any an earlier client left behind. */
    if (c->session.id) bpt__ctl_destroy(c->session.id);
    bpt__ctl_retry_left();
    bpt__ctl_release(c->slot);
    BPT_FREE(c);
    return NULL;
}

/* Refuse the connection just accepted: the reply, then the close under
   the lock, where it leaves the books (bpt__ctl_accept4). */
static void bpt__ctl_refuse(int fd) {
    pthread_mutex_lock(&bpt__ctl_lock);
    bpt__ctl_close(fd, bpt__ctl.accepted_id);
    bpt__ctl.accepted = -1;
    pthread_mutex_unlock(&bpt__ctl_lock);
}

/* A new connection (bpt__ctl.accepted): check who it is, take a slot,
   start its thread. */
static void bpt__ctl_accept(int fd) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    bpt__ctl_client *c;
    pthread_attr_t attr;
    pthread_t t;
    int slot = -1;
    int known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred;
    if (!known || !(cred.uid == geteuid() || (bpt__ctl.allow_root && cred.uid == 0))) {
        bpt__ctl_reply(fd, bpt__ctl.accepted_id, "ERR %d uid %d may not control process %d (uid %d)",
                       BPT_EPERM, known ? (int)cred.uid : -1, (int)getpid(), (int)geteuid());
        bpt__ctl_refuse(fd);
        return;
    }
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl.nclients < bpt__ctl.max_clients)
        for (slot = 0; slot < (int)bpt__ctl.max_clients && bpt__ctl.fds[slot] >= 0; slot++) {}
    if (slot >= 0) {
        bpt__ctl.fds[slot] = fd;   /* in the books as a client's from here on */
        bpt__ctl.ids[slot] = bpt__ctl.accepted_id;
        bpt__ctl.accepted = -1;
        bpt__ctl.nclients++;
    }
    pthread_mutex_unlock(&bpt__ctl_lock);
    if (slot < 0) {
        bpt__ctl_reply(fd, bpt__ctl.accepted_id, "ERR %d %u clients at once already (max_clients)", BPT_ELIMIT,
                       bpt__ctl.max_clients);
        bpt__ctl_refuse(fd);
        return;
    }
    c = (bpt__ctl_client *)BPT_MALLOC(sizeof *c);
    if (c) {
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->id = bpt__ctl.ids[slot];   /* set by this thread, under the lock, above */
        c->slot = slot;
        c->peer = cred.pid;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, bpt__ctl_client_main, c) == 0) {
            pthread_attr_destroy(&attr);
            return;   /* the thread owns c, fd and the slot now */
        }
        pthread_attr_destroy(&attr);
        BPT_FREE(c);
    }
    bpt__ctl_reply(fd, bpt__ctl.ids[slot], "ERR %d no memory or no thread for a client", BPT_ENOMEM);
    bpt__ctl_release(slot);
}

/* The listener's back-off after a failure that may pass (no memory, no
   descriptor): 100 ms, or less when bpt_control_stop writes the wake-up
   pipe. Returns 1 when stop was asked. Retrying at once would spin, as the
   condition is likely still there. Should this poll fail as well, it
   sleeps the 100 ms instead, so that a lasting failure still costs ten
   tries a second, not a CPU, and reads stop's flag itself: the wake-up
   pipe cannot tell it while poll fails, and stop's join would wait as
   long as the failure lasts. */
static int bpt__ctl_back_off(void) {
    struct pollfd w;
    struct timespec t = { 0, 100 * 1000000L };
    w.fd = bpt__ctl.wake[0];
    w.events = POLLIN;
    w.revents = 0;
    if (poll(&w, 1, 100) < 0 && errno != EINTR) nanosleep(&t, NULL);
    return bpt__ctl_stop_asked();   /* its byte woke the poll: its flag was set first */
}

/* Accept a connection, under the lock: a fork in between must find the
   socket in the server's books, or the child (whose handler closes the
   sockets the server knows) kept it open, with nobody serving it: the
   client then never saw its connection end while the child lived. The
   socket stays in bpt__ctl.accepted until bpt__ctl_accept gives it a slot
   or closes it, also under the lock. The listening socket is non-blocking
   (bpt_control_start), so accept4 never waits under the lock: a
   connection poll reported and that is gone since gives EAGAIN. */
static int bpt__ctl_accept4(void) {
    int fd, err;
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl_ours(bpt__ctl.listen_fd, bpt__ctl.listen_id)) {   /* not the program's socket (>>descriptors) */
        fd = accept4(bpt__ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        err = errno;
        fd = bpt__ctl_high(fd);
    } else {
        fd = -1;
        err = EBADF;
    }
    bpt__ctl.accepted = fd;
    bpt__ctl.accepted_id = bpt__ctl_id(fd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    errno = err;   /* accept4's, for the caller */
    return fd;
}

static int bpt__ctl_renew(void);   /* with start and stop, below */

static void *bpt__ctl_listener_main(void *arg) {
    (void)arg;
    bpt__own_enter();   /* as the clients' threads */
    for (;;) {
        struct pollfd p[2];
        int fd, n;
        /* Its descriptors, still ours? (>>descriptors; only this thread
           changes them while the server runs, under the lock) Renewed
           when not; when that fails (an abstract name still held by a
           process that has the old socket: a fork child before its
           handler ran, a spawned child before its exec), again a second
           later, until stop. */
        if (!bpt__ctl_ours(bpt__ctl.listen_fd, bpt__ctl.listen_id) ||
            !bpt__ctl_ours(bpt__ctl.wake[0], bpt__ctl.wake_id[0]) ||
            !bpt__ctl_ours(bpt__ctl.wake[1], bpt__ctl.wake_id[1])) {
            struct timespec t = { BPT__CTL_LOOK_MS / 1000, (BPT__CTL_LOOK_MS % 1000) * 1000000L };
            if (bpt__ctl_stop_asked()) return NULL;
            if (bpt__ctl_renew() < 0) nanosleep(&t, NULL);
            continue;
        }
        p[0].fd = bpt__ctl.listen_fd;
        p[0].events = POLLIN;
        p[1].fd = bpt__ctl.wake[0];
        p[1].events = POLLIN;
        p[0].revents = p[1].revents = 0;
        /* A second at most: the program may close a descriptor this poll
           waits on (it goes on waiting on the file), and stop's byte may
           have had no pipe of ours to go to. */
        if ((n = poll(p, 2, BPT__CTL_LOOK_MS)) < 0) {
            /* A failure that may pass: back off, then poll again. ENOMEM:
               no memory for the kernel's poll table (EAGAIN, where POSIX
               has it). EINVAL: nfds over RLIMIT_NOFILE, which the program
               (or prlimit from outside) may lower below 2 for a while.
               Returning here left the socket listening with no one to
               accept, so clients connected (the backlog queued them) and
               waited for a reply forever. Only EFAULT ends the thread (a
               bad address, which this array on the stack is not), without
               a word: the server has no channel for its own failures
               (bpt_last_error is per thread, bpt__ctl keeps no error, the
               library never writes to stderr); bpt_control_stop still
               joins the thread and cleans up. */
            if (errno == EINTR) continue;
            if (errno == EFAULT) return NULL;
            if (bpt__ctl_back_off()) return NULL;   /* bpt_control_stop */
            continue;
        }
        if (n == 0) {
            if (bpt__ctl_stop_asked()) return NULL;
            continue;
        }
        if (p[1].revents) {   /* stop's byte (its flag is set first); or POLLHUP: the write end was closed */
            if (bpt__ctl_stop_asked()) return NULL;
            continue;   /* the loop's top renews the pipe */
        }
        if (p[0].revents & (POLLHUP | POLLERR)) {
            /* Not listening any more: shut down by another holder of the
               socket (a fork child before its exec). poll reports it at
               once, for good, and accept4 finds nothing: open it again (a
               spin before; found by review). */
            if (bpt__ctl_renew() < 0 && bpt__ctl_back_off()) return NULL;
            continue;
        }
        if (!(p[0].revents & POLLIN)) continue;   /* POLLNVAL: closed; the loop's top renews it */
        if ((fd = bpt__ctl_accept4()) >= 0) {
            bpt__ctl_accept(fd);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* The connection stays queued and poll would report it at once
               again: back off instead of spinning. */
            if (bpt__ctl_back_off()) return NULL;   /* bpt_control_stop */
        }
    }
}

/* ---- Start and stop ---- */

/* The socket's address from desc->path (or the default), into bpt__ctl.
   A relative path is made absolute against the current directory now:
   stop removes this file, wherever the program has moved to since. */
static int bpt__ctl_address(const char *path) {
    char def[sizeof bpt__ctl.address], cwd[sizeof bpt__ctl.address];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    size_t n, room = sizeof bpt__ctl.addr.sun_path;
    if (!path) {
        int k = -1;
        if (xdg && xdg[0] == '/') k = snprintf(def, sizeof def, "%s/bptrace-%d.sock", xdg, (int)getpid());
        if (k < 0 || (size_t)k >= room) snprintf(def, sizeof def, "@bptrace-%d", (int)getpid());
        path = def;
    }
    n = strlen(path);
    if (n == 0 || n >= room || (path[0] == '@' && n == 1))
        return bpt__fail(BPT_EINVAL, "bpt_control_start: path '%s' is empty or over %u bytes", path,
                         (unsigned)room - 1);
    if (path[0] != '/' && path[0] != '@') {
        size_t k = getcwd(cwd, sizeof cwd) ? strlen(cwd) : room;   /* ERANGE: longer than an address */
        if (k + 1 + n >= room)
            return bpt__fail(BPT_EINVAL, "bpt_control_start: path '%s' is relative, and made absolute (the "
                             "current directory before it) it is over %u bytes", path, (unsigned)room - 1);
        cwd[k] = '/';
        memcpy(cwd + k + 1, path, n + 1);
        path = cwd;
        n += k + 1;
    }
    memset(&bpt__ctl.addr, 0, sizeof bpt__ctl.addr);
    bpt__ctl.addr.sun_family = AF_UNIX;
    memcpy(bpt__ctl.addr.sun_path, path, n);
    if (path[0] == '@') bpt__ctl.addr.sun_path[0] = '\0';   /* abstract: no file */
    bpt__ctl.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    memcpy(bpt__ctl.address, path, n + 1);
    return 0;
}

/* The socket file's directory, locked (flock, exclusive) against every
   other bptrace server's start and stop at a path in it, in any process:
   bpt__ctl_bind's "refused: a dead process's file, replace it" is a check
   and then an act, and a server between its bind and its listen is
   refused too. Unlocked, two servers starting at one path could each take
   the other's file for stale: one of them was left bound where nobody
   could reach it, and its stop later removed the other's file
   (t_control_edges case 16). The lock is the directory's own, so
   no lock file is left behind. It is held for a few system calls; one
   held longer than 2 s (a process stopped inside them) is given up on,
   and the start goes on unlocked, as it did before. The descriptor, or -1
   (abstract, or a directory this process cannot open: unlocked). */
static int bpt__ctl_dir_lock(void) {
    char dir[sizeof bpt__ctl.address];
    char *slash;
    int dfd, tries;
    if (bpt__ctl.address[0] != '/') return -1;
    memcpy(dir, bpt__ctl.address, sizeof dir);
    slash = strrchr(dir, '/');
    slash[slash == dir ? 1 : 0] = '\0';   /* "/x.sock": the root */
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) return -1;
    for (tries = 0; flock(dfd, LOCK_EX | LOCK_NB) < 0; tries++) {
        struct timespec ms = { 0, 1000000 };
        if ((errno != EWOULDBLOCK && errno != EINTR) || tries == 2000) {
            close(dfd);
            return -1;
        }
        nanosleep(&ms, NULL);
    }
    BPT_TEST_POINT("control_dir: locked");
    return dfd;
}

static void bpt__ctl_dir_unlock(int dfd) {
    if (dfd >= 0) close(dfd);   /* the close releases the flock */
}

/* A probe of the socket file at a (len bytes): 0 when a connect is taken
   (a server, even one whose backlog is full: the probe does not block, and
   EAGAIN or EINPROGRESS count as taken too), else connect's errno
   (ECONNREFUSED: nobody listens); -1 with errno when no socket. */
static int bpt__ctl_probe(const struct sockaddr *a, socklen_t len) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;
    if (probe < 0) return -1;
    e = connect(probe, a, len) == 0 ? 0 : errno;
    close(probe);
    return e == EAGAIN || e == EINPROGRESS ? 0 : e;
}

/* >>stale files: a process that ends without its stop (killed, or a fork
   child's _exit under the agent's BPTRACE_CONTROL_FORKS) leaves its socket
   file behind, and nothing removed it but a later server of the same pid:
   a prefork server's workers filled $XDG_RUNTIME_DIR with them. A server
   starting at its default address (dfd: that directory, locked) removes
   from it each bptrace-PID.sock of another pid that is this user's socket,
   whose process is gone (kill: ESRCH) and whose connect is refused (nobody
   listens; a server between its bind and its listen holds the lock). Any
   other file is left alone; at most 1,024 entries are looked at, so that
   a crowded directory costs a start little. */
static int bpt__ctl_default_pid(const char *name) {   /* PID of "bptrace-PID.sock", or 0 */
    const char *p = name + 8;
    int pid = 0;
    if (strncmp(name, "bptrace-", 8) != 0 || *p < '1' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9' && pid < INT_MAX / 10 - 1; p++) pid = pid * 10 + (*p - '0');
    return strcmp(p, ".sock") == 0 ? pid : 0;
}

static void bpt__ctl_sweep(int dfd) {
    struct sockaddr_un a;
    struct dirent *ent;
    struct stat st;
    size_t dir_len, n;
    int fd, pid, e, looked = 0;
    DIR *d;
    /* dfd >= 0: the address is a file's, "DIR/bptrace-PID.sock" (bpt__ctl_dir_lock) */
    if (dfd < 0 || (fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) return;
    dir_len = (size_t)(strrchr(bpt__ctl.address, '/') - bpt__ctl.address) + 1;
    if (!(d = fdopendir(fd))) {
        close(fd);
        return;
    }
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, bpt__ctl.address, dir_len);   /* "DIR/" */
    while (looked++ < 1024 && (ent = readdir(d)) != NULL) {
        if ((pid = bpt__ctl_default_pid(ent->d_name)) == 0 || pid == (int)getpid() ||
            (n = strlen(ent->d_name)) + dir_len >= sizeof a.sun_path ||
            fstatat(dfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode) ||
            st.st_uid != geteuid() || kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        memcpy(a.sun_path + dir_len, ent->d_name, n + 1);
        if ((e = bpt__ctl_probe((const struct sockaddr *)&a, (socklen_t)sizeof a)) < 0) break;
        if (e == ECONNREFUSED) unlinkat(dfd, ent->d_name, 0);
    }
    closedir(d);
}

/* bind, replacing a socket file that nobody serves (a dead process's). Any
   other file at the path is left alone. The probe connect does not block:
   a server that accepts nothing (its backlog full: EAGAIN) still serves.
   A file gone between the failed bind and the look at it (removed by a
   server that is not bptrace's, as it stopped) is no reason to fail: bind
   again, up to 3 times (the probe said ENOENT, and start failed with "may
   be served"; found by review, t_control_edges case 17). */
static int bpt__ctl_bind(int fd) {
    const struct sockaddr *a = (const struct sockaddr *)&bpt__ctl.addr;
    struct stat st;
    int e, tries = 0;
again:
    if (bind(fd, a, bpt__ctl.addr_len) == 0) return 0;
    if (errno != EADDRINUSE || bpt__ctl.address[0] == '@')
        return bpt__fail(errno == EADDRINUSE ? BPT_EEXIST : BPT_EIO, "bpt_control_start: bind %s: %s",
                         bpt__ctl.address, strerror(errno));
    BPT_TEST_POINT("control_bind: in use");
    if (lstat(bpt__ctl.address, &st) < 0) {
        if (errno == ENOENT && tries++ < 3) goto again;   /* removed since the bind: bind again */
    } else if (!S_ISSOCK(st.st_mode))
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s exists and is not a socket: left alone",
                         bpt__ctl.address);
    if ((e = bpt__ctl_probe(a, bpt__ctl.addr_len)) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: %s exists, and no socket to probe it: %s",
                         bpt__ctl.address, strerror(errno));
    if (e == ENOENT && tries++ < 3) goto again;   /* removed between the lstat and the probe */
    if (e == 0)
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s: another process serves it", bpt__ctl.address);
    if (e != ECONNREFUSED)   /* not known to be stale: leave it */
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s exists and may be served (connect: %s)",
                         bpt__ctl.address, strerror(e));
    /* refused: nobody listens; a dead process's socket file */
    if ((unlink(bpt__ctl.address) < 0 && errno != ENOENT) || bind(fd, a, bpt__ctl.addr_len) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: bind %s (a stale socket file): %s", bpt__ctl.address,
                         strerror(errno));
    return 0;
}

/* Remove the socket file, if the file at its path is still the one bind
   made (not one put there since by someone else). Called while the socket
   still listens: between the lstat and the unlink, another server's start
   (bpt__ctl_bind) then finds this path served and leaves it alone. Called
   after the close, that start found the file stale, put its own in its
   place, and this unlink removed that one (t_control_edges case 15). */
static void bpt__ctl_unlink(void) {
    struct stat st;
    if (bpt__ctl.address[0] != '@' && lstat(bpt__ctl.address, &st) == 0 && st.st_dev == bpt__ctl.dev &&
        st.st_ino == bpt__ctl.ino) {
        BPT_TEST_POINT("control_unlink: checked");
        unlink(bpt__ctl.address);
    }
}

/* The listening socket and the wake-up pipe, opened at bpt__ctl.address
   (under bpt__ctl_lock and the directory's lock): into bpt__ctl with
   their identities. 0; or a BPT_E* code, with nothing left open or bound. */
static int bpt__ctl_open(void) {
    struct stat st;
    int fd, rc;
    bpt__ctl.listen_fd = bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
    bpt__ctl.dev = 0;
    bpt__ctl.ino = 0;   /* no file has inode 0: until bind made one, bpt__ctl_unlink removes nothing (a
                           renew that fails after its unlink must not remove a file put there since) */
    /* Non-blocking: the listener accepts under the lock (bpt__ctl_accept4). */
    if ((fd = bpt__ctl_high(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0))) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: socket: %s", strerror(errno));
    if ((rc = bpt__ctl_bind(fd)) < 0) {
        close(fd);
        return rc;
    }
    BPT_TEST_POINT("control_start: bound");   /* and not listening: a connect is refused */
    if (bpt__ctl.address[0] != '@' && lstat(bpt__ctl.address, &st) == 0) {
        bpt__ctl.dev = st.st_dev;
        bpt__ctl.ino = st.st_ino;
    }
    /* 0600 before listen: until listen, a connect is refused, so no one
       connects through the mode the umask gave. */
    if (bpt__ctl.address[0] != '@' && chmod(bpt__ctl.address, 0600) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: chmod %s: %s", bpt__ctl.address, strerror(errno));
    else if (listen(fd, 128) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: listen: %s", strerror(errno));
    /* stop's wake-up of the listener: a "pipe" made of a socket pair, whose
       two ends have inodes of their own (a pipe's share one, and the
       program's dup2 of the read end onto the write end passed the
       identity check: POLLHUP at once, a spin; found by review), and a
       send to it with MSG_NOSIGNAL never raises SIGPIPE in stop's thread. */
    else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bpt__ctl.wake) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: no pipe (socket pair) to wake the server at stop: %s",
                       strerror(errno));
    if (rc < 0) {
        bpt__ctl_unlink();
        close(fd);
        bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
        return rc;
    }
    bpt__ctl.listen_fd = fd;
    bpt__ctl.listen_id = bpt__ctl_id(fd);
    bpt__ctl.wake[0] = bpt__ctl_high(bpt__ctl.wake[0]);
    bpt__ctl.wake[1] = bpt__ctl_high(bpt__ctl.wake[1]);
    bpt__ctl.wake_id[0] = bpt__ctl_id(bpt__ctl.wake[0]);
    bpt__ctl.wake_id[1] = bpt__ctl_id(bpt__ctl.wake[1]);
    return 0;
}

/* Close the listening socket and the wake-up pipe, those of them that are
   still ours (>>descriptors). Under bpt__ctl_lock. */
static void bpt__ctl_close_own(void) {
    bpt__ctl_close(bpt__ctl.listen_fd, bpt__ctl.listen_id);
    bpt__ctl_close(bpt__ctl.wake[0], bpt__ctl.wake_id[0]);
    bpt__ctl_close(bpt__ctl.wake[1], bpt__ctl.wake_id[1]);
    bpt__ctl.listen_fd = bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
}

/* The listener's, when the program has closed its socket or its wake-up
   pipe (>>descriptors): what is left of them closed, both opened again at
   the same address (the old socket file, nobody's now, is replaced as a
   dead process's would be). 0; -1 when they could not be opened (the
   listener tries again a second later). */
static int bpt__ctl_renew(void) {
    int dfd, rc;
    pthread_mutex_lock(&bpt__ctl_lock);
    dfd = bpt__ctl_dir_lock();
    bpt__ctl_unlink();   /* ours, if the file is still the one we bound */
    bpt__ctl_close_own();
    rc = bpt__ctl_open();
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc < 0 ? -1 : 0;
}

/* fork: the child has none of the server's threads. The prepare handler
   takes the lock, so that no server thread holds it across the fork; the
   child's handler then closes the inherited sockets and forgets the
   server and the sessions left over. Its clients' sessions stay in the
   child, undrained: they keep the buffers they had and drop what does
   not fit (session.c marks them, bpt__sessions_atfork_child). */
static void bpt__ctl_fork_prepare(void) { pthread_mutex_lock(&bpt__ctl_lock); }
static void bpt__ctl_fork_parent(void) { pthread_mutex_unlock(&bpt__ctl_lock); }
static void bpt__ctl_fork_child(void) {
    if (bpt__ctl.running) {   /* fstat and close: async-signal-safe, as a fork child needs */
        bpt__ctl_close_own();
        for (uint32_t i = 0; i < bpt__ctl.max_clients; i++)
            if (bpt__ctl.fds[i] >= 0) bpt__ctl_close(bpt__ctl.fds[i], bpt__ctl.ids[i]);
        if (bpt__ctl.accepted >= 0)   /* accepted, not yet a client's */
            bpt__ctl_close(bpt__ctl.accepted, bpt__ctl.accepted_id);
        bpt__ctl.accepted = -1;
        bpt__ctl.running = 0;
        bpt__ctl.stopping = 0;
        bpt__ctl.nclients = 0;
    }
    bpt__ctl.nleft = 0;
    pthread_mutex_unlock(&bpt__ctl_lock);
}

int bpt_control_start(const bpt_control_desc *desc) {
    bpt_control_desc d;
    sigset_t all, old;
    int rc, dfd = -1;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (d.max_clients == 0) d.max_clients = BPT__CTL_DEFAULT_CLIENTS;
    if (d.max_clients > BPT_MAX_SESSIONS)
        return bpt__fail(BPT_EINVAL, "bpt_control_start: max_clients %u is over BPT_MAX_SESSIONS (%d)",
                         d.max_clients, BPT_MAX_SESSIONS);
    pthread_mutex_lock(&bpt__ctl_lock);
    if (!bpt__ctl.atfork) {
        if (pthread_atfork(bpt__ctl_fork_prepare, bpt__ctl_fork_parent, bpt__ctl_fork_child) != 0) {
            pthread_mutex_unlock(&bpt__ctl_lock);
            return bpt__fail(BPT_ENOMEM, "bpt_control_start: no memory for the fork handlers");
        }
        bpt__ctl.atfork = 1;
    }
    if (bpt__ctl.running) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_EEXIST, "bpt_control_start: the server runs already, at %s", bpt__ctl.address);
    }
    if ((rc = bpt__ctl_address(d.path)) < 0) goto fail;
    dfd = bpt__ctl_dir_lock();   /* from bind to listen and on: see bpt__ctl_dir_lock */
    if (!d.path) bpt__ctl_sweep(dfd);   /* >>stale files */
    if ((rc = bpt__ctl_open()) < 0) goto fail;
    bpt__ctl.allow_root = d.allow_root;
    bpt__ctl.max_clients = d.max_clients;
    bpt__ctl.nclients = 0;
    bpt__ctl.stopping = 0;
    for (uint32_t i = 0; i < BPT_MAX_SESSIONS; i++) bpt__ctl.fds[i] = -1;
    bpt__ctl.accepted = -1;
    /* The server's threads block every signal (they inherit the mask): the
       program's signals go to its own threads, and SIGPIPE never comes. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&bpt__ctl.listener, NULL, bpt__ctl_listener_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        bpt__ctl_unlink();   /* before the close, as stop */
        bpt__ctl_close_own();
        rc = bpt__fail(BPT_ENOMEM, "bpt_control_start: no thread for the server: %s", strerror(rc));
        goto fail;
    }
    bpt__ctl.running = 1;
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return 0;
fail:
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc;
}

int bpt_control_stop(void) {
    bpt__thread *self = bpt__thread_self_or_null();
    pthread_t listener;
    uint32_t left;
    int rc, dfd;
    /* It waits for the client threads, whose session destroys wait for
       thread progress: not from where this thread would hold that up. */
    if (self && (self->in_tracer || self->holds_permission || bpt__thread_pinned(self)))
        return bpt__fail(BPT_EDEADLK, "bpt_control_stop: called from a tracer callback, under the code "
                         "modification permission, or while pinned: it would wait for itself");
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl.stopping) {   /* another thread stops it: wait until it has, and say what it says */
        BPT_TEST_POINT("control_stop: waits for another stop");
        bpt__block_begin(self);
        while (bpt__ctl.stopping) pthread_cond_wait(&bpt__ctl_stopped, &bpt__ctl_lock);
        bpt__block_end(self);
        rc = bpt__ctl.stop_rc;
        pthread_mutex_unlock(&bpt__ctl_lock);
        return rc < 0 ? bpt__fail(rc, "bpt_control_stop: stopped by another thread, with sessions left over")
                      : 0;
    }
    if (!bpt__ctl.running) {   /* no server; but sessions may be left over from the last */
        left = bpt__ctl.nleft;
        pthread_mutex_unlock(&bpt__ctl_lock);
        return left ? bpt__ctl_retry_left()
                  : bpt__fail(BPT_ENOENT, "bpt_control_stop: no control server runs in this process");
    }
    bpt__ctl.stopping = 1;
    listener = bpt__ctl.listener;
    if (bpt__ctl_ours(bpt__ctl.wake[1], bpt__ctl.wake_id[1]) &&
        send(bpt__ctl.wake[1], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* its reader gone (the program's doing): the listener reads the flag within a second */
    }
    pthread_mutex_unlock(&bpt__ctl_lock);
    BPT_TEST_POINT("control_stop: stopping");
    bpt__block_begin(self);   /* a managed thread goes offline while it waits */
    pthread_join(listener, NULL);   /* no new clients after this */
    pthread_mutex_lock(&bpt__ctl_lock);
    for (uint32_t i = 0; i < bpt__ctl.max_clients; i++)
        if (bpt__ctl_ours(bpt__ctl.fds[i], bpt__ctl.ids[i]))
            shutdown(bpt__ctl.fds[i], SHUT_RDWR);   /* wakes its poll; else it looks within a second */
    while (bpt__ctl.nclients > 0) pthread_cond_wait(&bpt__ctl_gone, &bpt__ctl_lock);
    pthread_mutex_unlock(&bpt__ctl_lock);
    bpt__block_end(self);
    rc = bpt__ctl_retry_left();   /* the sessions whose destroy failed: once more */
    pthread_mutex_lock(&bpt__ctl_lock);
    dfd = bpt__ctl_dir_lock();
    bpt__ctl_unlink();   /* before the close: while it listens, no one takes the file for stale */
    bpt__ctl_dir_unlock(dfd);
    bpt__ctl_close_own();
    bpt__ctl.running = 0;
    bpt__ctl.stopping = 0;
    bpt__ctl.stop_rc = rc;
    pthread_cond_broadcast(&bpt__ctl_stopped);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc;
}

int bpt_control_address(char *buf, size_t size) {
    int n;
    if (!buf) return bpt__fail(BPT_EINVAL, "bpt_control_address: buf is NULL");
    pthread_mutex_lock(&bpt__ctl_lock);
    if (!bpt__ctl.running) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_ENOENT, "bpt_control_address: no control server runs in this process");
    }
    n = (int)strlen(bpt__ctl.address);
    if ((size_t)n >= size) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_EINVAL, "bpt_control_address: %zu bytes are too few for %d", size, n + 1);
    }
    memcpy(buf, bpt__ctl.address, (size_t)n + 1);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return n;
}

/* client.h: bpt's commands that steer a target through its control server
   (bptrace.h >>control; the LD_PRELOAD agent starts one): trace, count,
   profile, record; and those that read a .bpt file offline: replay,
   dump. Included by bpt.c once, after bptrace.h's implementation. */
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>

/* ---- Connecting ---- */

/* VAR's value in /proc/PID/environ, into buf; 0 if found. The whole
   environment, however long: read into a fixed 64 KiB, a variable past it
   (a CI job's environment can be longer) was not found, and bpt did not
   find the server its BPTRACE_CONTROL names. */
static int target_env(int pid, const char *var, char *buf, size_t size) {
    char path[64], *env = NULL;
    size_t n = 0, cap = 0, vlen = strlen(var);
    int rc = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    if (!(f = fopen(path, "rb"))) return -1;
    for (;;) {   /* until EOF, keeping a byte for the NUL after it */
        size_t k;
        if (cap - n < 2) {
            char *g = (char *)realloc(env, cap ? 2 * cap : 65536);
            if (!g) { free(env); fclose(f); return -1; }
            env = g;
            cap = cap ? 2 * cap : 65536;
        }
        if ((k = fread(env + n, 1, cap - n - 1, f)) == 0) break;
        n += k;
    }
    fclose(f);
    env[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (!strncmp(env + i, var, vlen) && env[i + vlen] == '=') {
            snprintf(buf, size, "%s", env + i + vlen + 1);
            rc = 0;
            break;
        }
    free(env);
    return rc;
}

/* ---- How long a reply may take ----
   A target that is stopped (SIGSTOP, a debugger) or stuck accepts a
   connection into its listen backlog, or takes a request, and never
   answers: bpt waited until Ctrl-C. Now a connect, a send, and each wait
   for the next byte of a reply give up after BPT_TIMEOUT seconds of
   silence (a socket's SO_SNDTIMEO and SO_RCVTIMEO: a long reply that keeps
   coming is never cut), and bpt then says what state the process is in
   and exits EXIT_TIMEOUT. A stream's records, once STREAM is answered, may
   be as far apart as the program's calls: no timeout. */

/* BPT_TIMEOUT (environment, seconds, 0.001..86400), or 10 when it is unset
   or not a number in range (with a warning). */
static double reply_timeout(void) {
    static double secs = -1.0;
    const char *env;
    char *end;
    if (secs > 0.0) return secs;
    secs = 10.0;
    if ((env = getenv("BPT_TIMEOUT")) && *env) {
        double v = strtod(env, &end);
        if (*end || !(v >= 0.001 && v <= 86400.0))
            fprintf(stderr, "bpt: warning: BPT_TIMEOUT=%s is not a number of seconds in 0.001..86400: 10 is used\n",
                    env);
        else
            secs = v;
    }
    return secs;
}

/* fd's SO_SNDTIMEO and SO_RCVTIMEO: `seconds`, or none for 0. */
static void socket_timeout(int fd, double seconds) {
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* "no answer to WHAT from process PID in S s: ..." and why, as far as
   /proc/PID/stat tells: the state of its main thread (T: stopped; '?' if
   it cannot be read). what: "a connect", or a request's verb. */
static void say_timed_out(int pid, const char *what) {
    char path[64], stat[512], state = '?';
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if ((f = fopen(path, "r"))) {   /* "PID (COMM) S ...": COMM may hold ')' */
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        char *close_paren;
        stat[n] = '\0';
        if ((close_paren = strrchr(stat, ')')) && close_paren[1] == ' ') state = close_paren[2];
        fclose(f);
    }
    if (state == 'T' || state == 't')
        fprintf(stderr, "bpt: no answer to %s from process %d in %g s: it is stopped (state %c: SIGSTOP, or a "
                "debugger); `kill -CONT %d` resumes it\n", what, pid, reply_timeout(), state, pid);
    else
        fprintf(stderr, "bpt: no answer to %s from process %d in %g s: its control server is busy or stuck "
                "(main thread's state %c); BPT_TIMEOUT=SECONDS waits longer\n", what, pid, reply_timeout(), state);
}

/* A connection to address, and only if the process at the other end is
   the target (a server's SO_PEERCRED): an abstract name can be bound by
   anyone first, and a path can be stale or another process's. -1 if it
   is not there (or not the target's); -2, said why, if the connect timed
   out (the target's listen backlog full: it takes no connections). */
static int connect_to(const char *address, int pid) {
    struct sockaddr_un a;
    struct ucred who;
    socklen_t len = sizeof who;
    size_t n = strlen(address);
    int fd;
    if (n == 0 || n >= sizeof a.sun_path) return -1;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, address, n);
    if (address[0] == '@') a.sun_path[0] = '\0';
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) return -1;
    socket_timeout(fd, reply_timeout());   /* an AF_UNIX connect waits for backlog room up to SO_SNDTIMEO */
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0) {
        int timed_out = errno == EAGAIN;
        close(fd);
        if (!timed_out) return -1;
        say_timed_out(pid, "a connect");
        return -2;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0) {
        if (who.pid == pid && (who.uid == geteuid() || who.uid == 0)) return fd;
        fprintf(stderr, "bpt: %s is served by process %d (uid %d), not by %d: ignored\n", address, (int)who.pid,
                (int)who.uid, pid);
    }
    close(fd);
    return -1;
}

/* Whether process pid holds the socket of inode ino: one of its
   /proc/PID/fd links reads "socket:[INO]". */
static int holds_socket(int pid, unsigned long ino) {
    char dir[64], want[48], link[48];
    struct dirent *e;
    DIR *d;
    int found = 0;
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    snprintf(want, sizeof want, "socket:[%lu]", ino);
    if (!(d = opendir(dir))) return 0;
    while (!found && (e = readdir(d))) {
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            found = !strcmp(link, want);
        }
    }
    closedir(d);
    return found;
}

/* Where the target listens for a relative BPTRACE_CONTROL (not '/' nor
   '@'), into buf: 0 if found; -1 and /proc/PID/cwd/VALUE, the guess left,
   if not; -2, having said why, if the target listens on several sockets
   of that name and none is in its current directory. bpt_control_start
   binds the value against the target's current directory at its start,
   which bpt cannot know: taken as written it names a file in bpt's own
   directory (none, or another process's), and /proc/PID/cwd is where the
   target is now, which a chdir since has changed. The kernel knows the
   address bound: /proc/PID/net/unix lists each socket's flags, inode and
   path. Ours is a listening one (__SO_ACCEPTCON) whose path ends in
   "/" VALUE, of an inode the target holds. The program may listen on a
   socket of its own by that name: connect_to's peer check passes it, and
   bpt would then speak to the program. So of several, the one in the
   target's current directory (where it most likely started); else none,
   rather than a guess. */
static int relative_socket(int pid, const char *value, char *buf, size_t size) {
    char path[64], line[512], cwd[4096], where[4200];
    char found[4][256];   /* a socket path fits in 108 bytes */
    size_t vlen = strlen(value);
    ssize_t cn;
    int nfound = 0, i;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/net/unix", pid);
    for (f = fopen(path, "r"); f && nfound < 4 && fgets(line, sizeof line, f);) {
        unsigned flags;   /* Num RefCount Protocol Flags Type St Inode Path */
        unsigned long ino;
        int at = 0;
        if (sscanf(line, "%*s %*x %*x %x %*x %*x %lu %n", &flags, &ino, &at) < 2 || !at) continue;
        char *p = line + at;
        size_t n = strcspn(p, "\n");
        p[n] = '\0';
        if ((flags & 0x10000) && n > vlen && p[n - vlen - 1] == '/' && !strcmp(p + n - vlen, value) &&
            n < sizeof found[0] && holds_socket(pid, ino))
            memcpy(found[nfound++], p, n + 1);
    }
    if (f) fclose(f);
    if (nfound == 1) {
        snprintf(buf, size, "%s", found[0]);
        return 0;
    }
    snprintf(path, sizeof path, "/proc/%d/cwd", pid);
    if (nfound > 1 && (cn = readlink(path, cwd, sizeof cwd - 1)) > 0) {
        cwd[cn] = '\0';
        snprintf(where, sizeof where, "%s/%s", strcmp(cwd, "/") ? cwd : "", value);
        for (i = 0; i < nfound; i++)
            if (!strcmp(found[i], where)) {
                snprintf(buf, size, "%s", found[i]);
                return 0;
            }
    }
    if (nfound > 1) {
        fprintf(stderr, "bpt: process %d listens on %d sockets named %s, none in its current directory:", pid,
                nfound, value);
        for (i = 0; i < nfound; i++) fprintf(stderr, " %s", found[i]);
        fprintf(stderr, "; give it an absolute BPTRACE_CONTROL\n");
        return -2;
    }
    snprintf(buf, size, "/proc/%d/cwd/%s", pid, value);
    return -1;
}

/* The target's control socket, where bpt_control_start puts it by default
   (or where the target's BPTRACE_CONTROL says: a relative one where the
   target bound it, relative_socket): its XDG_RUNTIME_DIR, ours, then the
   abstract name. */
static int ctl_connect(int pid) {
    char v[4096], addr[4200];
    const char *mine = getenv("XDG_RUNTIME_DIR");
    int fd;
    if (kill(pid, 0) < 0 && errno == ESRCH) {
        fprintf(stderr, "bpt: no process %d\n", pid);
        return -EXIT_GONE;
    }
    if (target_env(pid, "BPTRACE_CONTROL", v, sizeof v) == 0 && strcmp(v, "off")) {
        if (v[0] != '/' && v[0] != '@') {
            if (relative_socket(pid, v, addr, sizeof addr) == -2) return -EXIT_NOBPT;   /* said why */
        } else {
            snprintf(addr, sizeof addr, "%s", v);
        }
        if ((fd = connect_to(addr, pid)) != -1) return fd >= 0 ? fd : -EXIT_TIMEOUT;
    }
    if (target_env(pid, "XDG_RUNTIME_DIR", v, sizeof v) == 0) {
        snprintf(addr, sizeof addr, "%s/bptrace-%d.sock", v, pid);
        if ((fd = connect_to(addr, pid)) != -1) return fd >= 0 ? fd : -EXIT_TIMEOUT;
    }
    if (mine) {
        snprintf(addr, sizeof addr, "%s/bptrace-%d.sock", mine, pid);
        if ((fd = connect_to(addr, pid)) != -1) return fd >= 0 ? fd : -EXIT_TIMEOUT;
    }
    snprintf(addr, sizeof addr, "@bptrace-%d", pid);
    if ((fd = connect_to(addr, pid)) != -1) return fd >= 0 ? fd : -EXIT_TIMEOUT;
    fprintf(stderr, "bpt: process %d has no control server (run it under build/libbptrace-agent.so, "
                    "or call bpt_control_start in it)\n", pid);
    return -EXIT_NOBPT;
}

/* One reply line, read a byte at a time so that nothing after it (a
   STREAM's file) is taken from the socket. 0; -1 at EOF or error; -2 when
   no byte came in BPT_TIMEOUT (SO_RCVTIMEO). */
static int ctl_line(int fd, char *buf, size_t size) {
    size_t n = 0;
    for (;;) {
        char c;
        ssize_t k = recv(fd, &c, 1, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -2;
        if (k <= 0) return -1;
        if (c == '\n') break;
        if (n + 1 < size) buf[n++] = c;
    }
    buf[n] = '\0';
    return 0;
}

/* Send one request; read its reply up to OK or ERR, handing F lines to
   each (may be NULL). The OK line's text in ok (may be NULL). 0 on OK;
   EXIT_BAD after printing an ERR reply; EXIT_GONE after printing that
   the connection was lost; EXIT_TIMEOUT after printing that the target
   did not answer in BPT_TIMEOUT; EXIT_USAGE, sending nothing, if the request
   holds a line break (a pattern or spec from the command line): the
   server reads one request a line, so the rest would be a request of its
   own, and its reply would be taken for the next one's. */
typedef void (*ctl_row_fn)(const char *line, void *user);
static int say_request_timed_out(int fd, const char *request) {
    struct ucred who;
    socklen_t len = sizeof who;
    char what[80];
    snprintf(what, sizeof what, "%.*s", (int)strcspn(request, " "), request);   /* its verb: a pattern may be long */
    say_timed_out(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 ? (int)who.pid : 0, what);
    return EXIT_TIMEOUT;
}
static int ctl_request(int fd, const char *request, ctl_row_fn each, void *user, char *ok, size_t ok_size) {
    char line[8192];
    size_t n = strlen(request);
    if (strpbrk(request, "\r\n")) {
        fprintf(stderr, "bpt: a pattern or spec cannot hold a line break (the server reads a request a line)\n");
        return EXIT_USAGE;
    }
    ssize_t sent = send(fd, request, n, MSG_NOSIGNAL);
    if (sent == (ssize_t)n) sent = send(fd, "\n", 1, MSG_NOSIGNAL) == 1 ? 0 : -1;
    if (sent != 0) {   /* -1 with errno; a short send (never, for a request of 8 KiB) as a lost server */
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return say_request_timed_out(fd, request);
        fprintf(stderr, "bpt: the control server went away\n");
        return EXIT_GONE;
    }
    for (;;) {
        int got = ctl_line(fd, line, sizeof line);
        if (got == -2) return say_request_timed_out(fd, request);
        if (got < 0) {
            fprintf(stderr, "bpt: the control server closed the connection\n");
            return EXIT_GONE;
        }
        if (!strncmp(line, "OK", 2)) {
            if (ok) {   /* the text after "OK ", cut to ok_size */
                const char *t = line[2] ? line + 3 : "";
                size_t m = strlen(t) < ok_size ? strlen(t) : ok_size - 1;
                memcpy(ok, t, m);
                ok[m] = '\0';
            }
            return 0;
        }
        if (!strncmp(line, "ERR ", 4)) {
            fprintf(stderr, "bpt: %s: %s\n", request, line + 4);
            return EXIT_BAD;
        }
        if (each && !strncmp(line, "F ", 2)) each(line + 2, user);
    }
}

/* HELLO, then a PATTERN: the connection, or -(exit status). */
static int ctl_session(int pid, const char *hello_opts, const char *kinds, const char *opts, const char *pattern,
                       int *matched) {
    char req[8192], ok[256];
    int fd = ctl_connect(pid), rc;
    if (fd < 0) return fd;
    snprintf(req, sizeof req, "HELLO 1%s%s", *hello_opts ? " " : "", hello_opts);
    if ((rc = ctl_request(fd, req, NULL, NULL, NULL, 0)) != 0) { close(fd); return -rc; }
    snprintf(req, sizeof req, "PATTERN %s%s%s %s", kinds, *opts ? " " : "", opts, pattern);
    if ((rc = ctl_request(fd, req, NULL, NULL, ok, sizeof ok)) != 0) { close(fd); return -rc; }
    *matched = atoi(ok);
    return fd;
}

/* ---- Durations: SIGINT, SIGTERM or the alarm end a command cleanly ---- */

static volatile sig_atomic_t ending;
static volatile sig_atomic_t ending_fd = -1;
static void on_end(int sig) {
    (void)sig;
    ending = 1;
    if (ending_fd >= 0) shutdown(ending_fd, SHUT_RDWR);   /* async-signal-safe: wakes a blocked read */
}
static sigset_t end_signals;   /* blocked outside wait_end's sigsuspend */
static void end_after(double seconds, int fd) {
    struct sigaction sa;
    sigemptyset(&end_signals);
    sigaddset(&end_signals, SIGINT);
    sigaddset(&end_signals, SIGTERM);
    sigaddset(&end_signals, SIGALRM);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_end;   /* no SA_RESTART: a blocked read returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    ending_fd = fd;
    if (seconds > 0) {
        struct itimerval it;
        memset(&it, 0, sizeof it);
        it.it_value.tv_sec = (time_t)seconds;
        it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
        if (!it.it_value.tv_sec && !it.it_value.tv_usec) it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, NULL);
    }
}
/* Sleep until one of the signals came: blocked while `ending` is tested,
   so none is lost between the test and the sleep. */
static void wait_end(void) {
    sigset_t old;
    sigprocmask(SIG_BLOCK, &end_signals, &old);
    while (!ending) sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- bpt count / bpt profile ---- */

typedef struct { bpt_profile_row *rows; int n, cap, memory; uint64_t total; } rows_t;

/* "COUNT CALLS TIME_NS BYTES ARITY MODULE:NAME" -> a row: calls (the count,
   or call_time's calls) and value (ns, or for memory the net bytes, signed:
   carried as int64_t's two's complement, as bpt_profile_row says). */
static void keep_row(const char *line, void *user) {
    rows_t *r = (rows_t *)user;
    unsigned long long count, calls, ns;
    long long bytes;
    int arity, at = 0;
    if (sscanf(line, "%llu %llu %llu %lld %d %n", &count, &calls, &ns, &bytes, &arity, &at) < 5 || !at) return;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        bpt_profile_row *m = (bpt_profile_row *)realloc(r->rows, (size_t)cap * sizeof *m);
        if (!m) return;
        r->rows = m;
        r->cap = cap;
    }
    const char *full = line + at, *colon = strchr(full, ':');
    char *mod = strdup(full);
    if (!mod || !colon) { free(mod); return; }
    mod[colon - full] = '\0';
    bpt_profile_row *row = &r->rows[r->n++];
    row->module = mod;
    row->name = mod + (colon - full) + 1;
    row->arity = arity;
    row->process = 0;
    row->calls = count ? count : calls;
    row->value = r->memory ? (uint64_t)bytes : ns;
    r->total += row->calls;
}
static void free_rows(rows_t *r) {
    for (int i = 0; i < r->n; i++) free((char *)r->rows[i].module);
    free(r->rows);
}
static int by_calls(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : strcmp(x->name, y->name);
}

static int by_value(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    return x->value < y->value ? 1 : x->value > y->value ? -1 : by_calls(a, b);
}
/* Net bytes, signed: a function whose calls freed more than they
   allocated ranks last (unsigned, it ranked first). */
static int by_bytes(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    int64_t xv = (int64_t)x->value, yv = (int64_t)y->value;
    return xv < yv ? 1 : xv > yv ? -1 : by_calls(a, b);
}

/* The tprof table of rows on stdout, whole however long their names: its
   size from a first call (bpt_format_profile returns the length it wants,
   as snprintf). A room guessed per row (160 bytes) cut the table of long
   names (C++'s, up to 2 x 127 bytes) mid-row, its total line lost. */
static void print_profile(bpt_profile_row *rows, int n, int memory) {
    int len = bpt_format_profile(rows, n, memory, NULL, 0);
    char *text = len >= 0 ? (char *)malloc((size_t)len + 1) : NULL;
    if (len < 0) fprintf(stderr, "bpt: the table: %s\n", bpt_last_error());
    else if (text && bpt_format_profile(rows, n, memory, text, (size_t)len + 1) >= 0) fputs(text, stdout);
    else fprintf(stderr, "bpt: no memory for the table\n");
    free(text);
}

/* what: "count", "time" or "memory"; the shown rows of most calls (or time). */
static int cmd_counting(int pid, const char *pattern, const char *what, double seconds, int shown) {
    char req[8192];
    rows_t r = { NULL, 0, 0, !strcmp(what, "memory"), 0 };
    int matched, rc, fd = ctl_session(pid, "", what, "", pattern, &matched);
    if (fd < 0) return -fd;
    fprintf(stderr, "bpt: %s on %d functions of process %d for %.1f s\n", what, matched, pid, seconds);
    end_after(seconds, -1);
    wait_end();
    snprintf(req, sizeof req, "INFO %s %s", what, pattern);
    rc = ctl_request(fd, req, keep_row, &r, NULL, 0);
    if (rc == 0) ctl_request(fd, "BYE", NULL, NULL, NULL, 0);   /* after a failure, the close says it */
    close(fd);
    if (rc != 0) { free_rows(&r); return rc; }
    if (!strcmp(what, "count")) {
        qsort(r.rows, (size_t)r.n, sizeof r.rows[0], by_calls);
        printf("%14s  FUNCTION\n", "CALLS");
        for (int i = 0; i < r.n && i < shown; i++)
            if (r.rows[i].calls)
                printf("%14llu  %s:%s/%d\n", (unsigned long long)r.rows[i].calls, r.rows[i].module, r.rows[i].name,
                       r.rows[i].arity);
        printf("%14llu  total, %d functions\n", (unsigned long long)r.total, r.n);
    } else {   /* the ROWS functions of most time (or bytes) that ran, as tprof shows them */
        int kept = 0;
        qsort(r.rows, (size_t)r.n, sizeof r.rows[0], r.memory ? by_bytes : by_value);
        for (int i = 0; i < r.n && kept < shown; i++)
            if (r.rows[i].calls) {   /* swap, so that each row's strings are held once */
                bpt_profile_row keep = r.rows[i];
                r.rows[i] = r.rows[kept];
                r.rows[kept++] = keep;
            }
        for (int i = kept; i < r.n; i++) free((char *)r.rows[i].module);
        r.n = kept;
        print_profile(r.rows, r.n, r.memory);
    }
    free_rows(&r);
    return 0;
}

/* ---- bpt trace ---- */

typedef struct {
    const char *pattern, *args, *ret, *limit, *out, *chrome, *folded;
    int ret_trace, exc_trace, caller;
    double seconds;
} trace_opts;

/* The stream's messages as dbg text on stdout, and into the Chrome and
   folded-stack writers when asked. */
static int read_stream(int fd, const trace_opts *o) {
    bpt_trace_file *tf;
    bpt_msg m[256];
    bpt_chrome chrome;
    bpt_folded *folded = NULL;
    FILE *cf = NULL;
    long total = 0;
    long long dropped = 0;
    int n, rc = 0;
    if (bpt_trace_file_fdopen(fd, &tf) < 0) {
        if (ending) return 0;   /* ended before the first record */
        fprintf(stderr, "bpt: %s\n", bpt_last_error());
        return EXIT_BAD;
    }
    if (o->chrome) {
        if (!(cf = fopen(o->chrome, "w")) || bpt_chrome_open(&chrome, cf) < 0) {
            fprintf(stderr, "bpt: %s: cannot write it\n", o->chrome);
            bpt_trace_file_close(tf);
            if (cf) fclose(cf);
            return EXIT_USAGE;
        }
    }
    if (o->folded && bpt_folded_new(&folded) < 0) folded = NULL;
    while ((n = bpt_trace_file_read(tf, m, 256)) > 0) {
        for (int i = 0; i < n; i++) {
            char line[1024];
            if (m[i].type == BPT_MSG_DROPPED) dropped += (long long)m[i].value;
            if (cf) bpt_chrome_write(&chrome, &m[i]);
            if (folded) bpt_folded_add(folded, &m[i]);
            if (!cf && !folded) {
                bpt_format_dbg(&m[i], line, sizeof line);
                puts(line);
            }
        }
        total += n;
        fflush(stdout);
    }
    if (n < 0 && !ending) { fprintf(stderr, "bpt: %s\n", bpt_last_error()); rc = EXIT_BAD; }
    if (cf) { bpt_chrome_close(&chrome); fclose(cf); }
    if (folded) {
        FILE *ff = fopen(o->folded, "w");
        if (!ff || bpt_folded_write(folded, ff) < 0) { fprintf(stderr, "bpt: %s: cannot write it\n", o->folded); rc = EXIT_USAGE; }
        if (ff) fclose(ff);
        bpt_folded_free(folded);
    }
    fprintf(stderr, "bpt: %ld messages", total);
    if (dropped) fprintf(stderr, ", %lld records dropped (the target's buffers were full)", dropped);
    fputc('\n', stderr);
    bpt_trace_file_close(tf);
    return rc;
}

/* The stream as it comes, into a .bpt file. */
static int copy_stream(int fd, const char *path) {
    char buf[65536];
    long long bytes = 0;
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) { fprintf(stderr, "bpt: %s: %s\n", path, strerror(errno)); return EXIT_USAGE; }
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR && !ending) continue;
        if (k <= 0) break;
        if (write(out, buf, (size_t)k) != k) { fprintf(stderr, "bpt: %s: %s\n", path, strerror(errno)); close(out); return EXIT_BAD; }
        bytes += k;
    }
    close(out);
    fprintf(stderr, "bpt: %lld bytes to %s\n", bytes, path);
    return 0;
}

static int cmd_trace(int pid, const trace_opts *o) {
    char kinds[64], opts[512], hello[64] = "";
    int matched, fd, rc;
    snprintf(kinds, sizeof kinds, "call%s%s%s", o->ret_trace ? ",return" : "", o->exc_trace ? ",exception" : "",
             o->caller ? ",caller" : "");
    snprintf(opts, sizeof opts, "%s%s%s%s", o->args ? "args=" : "", o->args ? o->args : "",
             o->ret ? (o->args ? " ret=" : "ret=") : "", o->ret ? o->ret : "");
    if (o->limit) snprintf(hello, sizeof hello, "rate=%s", o->limit);
    if ((fd = ctl_session(pid, hello, kinds, opts, o->pattern, &matched)) < 0) return -fd;
    fprintf(stderr, "bpt: tracing %d functions of process %d%s\n", matched, pid,
            o->seconds > 0 ? "" : " (Ctrl-C ends)");
    if ((rc = ctl_request(fd, "STREAM", NULL, NULL, NULL, 0)) != 0) { close(fd); return rc; }
    socket_timeout(fd, 0);   /* the records come as the program calls: no timeout */
    end_after(o->seconds, fd);
    rc = o->out ? copy_stream(fd, o->out) : read_stream(fd, o);
    close(fd);   /* the server sees the hang-up and destroys the session */
    return rc;
}

/* ---- Offline: bpt replay / bpt dump ---- */

static int cmd_replay(const char *path, const char *chrome, const char *folded) {
    trace_opts o;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
    if (fd < 0) { fprintf(stderr, "bpt: %s: %s\n", path, strerror(errno)); return EXIT_USAGE; }
    memset(&o, 0, sizeof o);
    o.chrome = chrome;
    o.folded = folded;
    rc = read_stream(fd, &o);
    close(fd);
    return rc;
}

/* bpt report FILE.bpt: calls per function and, from each thread's call and
   return_from pairs, own time (a call's time minus its traced callees'), as
   tprof shows it. A DROPPED record cuts the thread's open calls: their time
   is not known. */
typedef struct { const char *module, *name; int arity; uint64_t calls, own_ns; } report_fn;
typedef struct { uint32_t thread; int depth; struct { int fn; uint64_t start, child; } st[256]; } report_stack;

static int report_fn_of(report_fn **fns, int *n, const bpt_msg *m) {
    for (int i = 0; i < *n; i++)   /* names are interned by the reader: compare pointers */
        if ((*fns)[i].name == m->name && (*fns)[i].module == m->module && (*fns)[i].arity == m->arity) return i;
    report_fn *g = (report_fn *)realloc(*fns, (size_t)(*n + 1) * sizeof *g);
    if (!g) return -1;
    *fns = g;
    g[*n].module = m->module; g[*n].name = m->name; g[*n].arity = m->arity; g[*n].calls = g[*n].own_ns = 0;
    return (*n)++;
}

static int cmd_report(const char *path, int shown) {
    bpt_trace_file *tf;
    bpt_msg m[256];
    report_fn *fns = NULL;
    report_stack *threads = NULL;
    int nfns = 0, nthreads = 0, n, rc = 0;
    long long dropped = 0;
    if (bpt_trace_file_open(path, &tf) < 0) { fprintf(stderr, "bpt: %s\n", bpt_last_error()); return EXIT_USAGE; }
    while ((n = bpt_trace_file_read(tf, m, 256)) > 0) {
        for (int i = 0; i < n; i++) {
            report_stack *t = NULL;
            for (int k = 0; k < nthreads; k++) if (threads[k].thread == m[i].thread) t = &threads[k];
            if (!t) {
                report_stack *g = (report_stack *)realloc(threads, (size_t)(nthreads + 1) * sizeof *g);
                if (!g) { rc = EXIT_BAD; goto out; }
                threads = g;
                t = &threads[nthreads++];
                t->thread = m[i].thread;
                t->depth = 0;
            }
            if (m[i].type == BPT_MSG_DROPPED) { dropped += (long long)m[i].value; t->depth = 0; continue; }
            if (m[i].type == BPT_MSG_CALL) {
                int f = report_fn_of(&fns, &nfns, &m[i]);
                if (f < 0) { rc = EXIT_BAD; goto out; }
                fns[f].calls++;
                if (t->depth < 256) {
                    t->st[t->depth].fn = f; t->st[t->depth].start = m[i].ts_ns; t->st[t->depth].child = 0;
                }
                t->depth++;   /* deeper than 256: counted, not timed */
            } else if ((m[i].type == BPT_MSG_RETURN_FROM || m[i].type == BPT_MSG_EXCEPTION_FROM) && t->depth > 0) {
                uint64_t d;
                if (--t->depth >= 256) continue;
                d = m[i].ts_ns - t->st[t->depth].start;
                fns[t->st[t->depth].fn].own_ns += d > t->st[t->depth].child ? d - t->st[t->depth].child : 0;
                if (t->depth > 0) t->st[t->depth - 1].child += d;
            }
        }
    }
    if (n < 0) { fprintf(stderr, "bpt: %s\n", bpt_last_error()); rc = EXIT_BAD; }
    {
        bpt_profile_row *rows = (bpt_profile_row *)calloc((size_t)nfns + 1, sizeof *rows);
        int kept = 0;
        for (int i = 0; rows && i < nfns; i++) {
            rows[i].module = fns[i].module; rows[i].name = fns[i].name; rows[i].arity = fns[i].arity;
            rows[i].calls = fns[i].calls; rows[i].value = fns[i].own_ns;
        }
        if (rows) qsort(rows, (size_t)nfns, sizeof *rows, by_value);
        kept = nfns < shown ? nfns : shown;
        if (rows) print_profile(rows, kept, 0);
        if (dropped) printf("(%lld records were dropped: the calls open at each drop have no time)\n", dropped);
        free(rows);
    }
out:
    free(fns);
    free(threads);
    bpt_trace_file_close(tf);
    return rc;
}

/* ---- bpt record ---- */

/* The agent next to this bpt (build/libbptrace-agent.so), or BPTRACE_AGENT. */
static int agent_path(char *buf, size_t size) {
    const char *env = getenv("BPTRACE_AGENT");
    char self[4096];
    ssize_t n;
    if (env && *env) { snprintf(buf, size, "%s", env); return access(buf, R_OK); }
    if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) < 0) return -1;
    self[n] = '\0';
    if (strrchr(self, '/')) *strrchr(self, '/') = '\0';
    if (snprintf(buf, size, "%s/libbptrace-agent.so", self) >= (int)size) return -1;
    return access(buf, R_OK);
}

static int cmd_record(const char *out, const char *kinds, const char *pattern, char **argv) {
    char agent[4096], spec[8192], *pre = getenv("LD_PRELOAD"), preload[8400];
    pid_t child;
    int status;
    if (agent_path(agent, sizeof agent) < 0) {
        fprintf(stderr, "bpt: no agent at %s (build it with make examples, or set BPTRACE_AGENT)\n", agent);
        return EXIT_USAGE;
    }
    snprintf(spec, sizeof spec, "%s:%s", kinds, pattern);
    snprintf(preload, sizeof preload, "%s%s%s", agent, pre && *pre ? ":" : "", pre && *pre ? pre : "");
    if ((child = fork()) < 0) { fprintf(stderr, "bpt: fork: %s\n", strerror(errno)); return EXIT_BAD; }
    if (child == 0) {
        setenv("LD_PRELOAD", preload, 1);
        setenv("BPTRACE_PATTERN", spec, 1);
        setenv("BPTRACE_OUTPUT", out, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "bpt: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    fprintf(stderr, "bpt: %s exited (%d); the trace is in %s\n", argv[0],
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

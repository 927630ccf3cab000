/* agent.c: the LD_PRELOAD agent, build/libbptrace-agent.so. It makes a
   program that has no bptrace code in it traceable from outside, as long
   as it was compiled with the flags of `make print-cflags` (patchable
   entries):

     LD_PRELOAD=build/libbptrace-agent.so ./prog &
     build/bpt trace $! 'prog:work/_' --return

   At load (a constructor, before main) it registers the main program's
   functions (bpt_register_module(NULL)) and starts the control server
   (bpt_control_start, >>control in bptrace.h), and it interposes dlopen: a
   library loaded later is registered at once, and the patterns already in
   force apply to it before dlopen returns, so its functions are traced from
   their first call.

   Environment:
     BPTRACE_CONTROL   the control socket: a path (a relative one is taken
                       against the directory the program starts in; bpt
                       finds it after a chdir too), "@name" (abstract), or
                       "off" for none; default as bpt_control_start's
     BPTRACE_PATTERN   KINDS:PATTERN traced from the start into a file, e.g.
                       "call,return:prog:work/_" (`bpt record` sets it)
     BPTRACE_OUTPUT    that file (.bpt); default bptrace-PID.bpt
     BPTRACE_VERBOSE   1: say on stderr what was registered and started
     BPTRACE_CONTROL_FORKS
                       1: every child the program forks (daemon() included)
                       starts a server of its own, at the default address
                       of its pid (a prefork server's workers: bpt count
                       WORKER_PID); unset, a child has none (below)

   Libraries loaded by dlopen are kept loaded (RTLD_NODELETE is added):
   bptrace's records of their functions, and any breakpoint set on them,
   must never point into an unmapped library. A dlopen by bare name that
   relies on the calling object's RUNPATH searches the agent's instead (the
   caller glibc sees is the agent): give such a program LD_LIBRARY_PATH.

   The server runs in the process the agent was loaded into: a child it
   forks (daemon() included) has none, as threads do not survive fork,
   unless BPTRACE_CONTROL_FORKS=1. Then the child starts one as it returns
   from fork (a pthread_atfork child handler): a socket, a thread, about a
   millisecond a fork (fork, _exit and wait went from 1.6 to 2.5 ms in a
   review's measure); posix_spawn, system() and popen run no fork
   handlers, so a child that execs at once through them pays nothing. A
   child that ends with _exit, or execs a program without the agent, leaves
   its socket file behind in $XDG_RUNTIME_DIR (the abstract name goes with
   the process), until the next server starts there: a start at the default
   address removes the files of processes that are gone (>>stale files).

   A program that has bptrace in it already has its own registry: it starts
   its own server (bpt_control_start) instead of loading the agent. */
#define BPTRACE_IMPLEMENTATION
#include "bptrace.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int verbose;
#define SAY(...) do { if (verbose) { fprintf(stderr, "bptrace-agent[%d]: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); } } while (0)

/* ---- BPTRACE_PATTERN: a session written to a file from the start ---- */

static bpt_session rec;
static bpt_file_writer rec_out;
static pthread_t rec_thread;
static _Atomic int recording;
static pid_t rec_pid;   /* the process that records: a forked child has no drainer */
static char rec_path[4096];   /* the output file's absolute path, and its identity: */
static struct stat rec_id;    /* see rec_file */

/* The output file's descriptor, checked before each write. The agent
   opens it before main, and a program that closes every descriptor it did
   not open (closefrom(3), as daemons do at start) closes it too, then
   gives the number to a file of its own: the records went into the
   program's file (tests/agent kind closefrom). So the
   descriptor must still name the output file (device and inode); if it
   does not, the file is opened again by its path, appending where it
   ends: the writer's state holds, and the file reads on as one. 0, or -1
   when it cannot be (the file is gone): the records are not written. The
   check comes before each bpt_session_write, not each write(2) inside it:
   a program that takes the number during one still gets that call's
   blocks. */
static int rec_file(void) {
    struct stat st;
    int fd;
    if (fstat(rec_out.fd, &st) == 0 && st.st_dev == rec_id.st_dev && st.st_ino == rec_id.st_ino) return 0;
    fd = open(rec_path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != rec_id.st_dev || st.st_ino != rec_id.st_ino) {
        if (fd >= 0) close(fd);
        return -1;
    }
    SAY("the program closed the output file's descriptor: %s opened again\n", rec_path);
    rec_out.fd = fd;
    return 0;
}

/* The drainer: wait until a chunk is sealed (or 100 ms), write what there is. */
static void *rec_main(void *arg) {
    int lost = 0;
    (void)arg;
    while (atomic_load(&recording)) {
        bpt_session_wait(rec, 100000);
        if (rec_file() < 0) {
            if (!lost++) fprintf(stderr, "bptrace-agent: %s: its descriptor was closed and the file cannot be "
                                 "opened again: recording stops\n", rec_path);
            break;
        }
        if (bpt_session_write(rec, &rec_out) < 0) SAY("write: %s\n", bpt_last_error());
    }
    return NULL;
}

/* KINDS:PATTERN -> flags (the control protocol's names) and the pattern. */
static long parse_kinds(const char *s, size_t n) {
    static const struct { const char *name; unsigned flag; } names[] = {
        { "call", BPT_CALL }, { "return", BPT_RETURN }, { "exception", BPT_EXCEPTION },
        { "return_to", BPT_RETURN_TO }, { "caller", BPT_CALLER }, { "count", BPT_COUNT },
        { "time", BPT_TIME }, { "memory", BPT_MEMORY },
    };
    unsigned flags = 0;
    while (n > 0) {
        size_t k = 0, i;
        while (k < n && s[k] != ',') k++;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == k && !strncmp(names[i].name, s, k)) break;
        if (i == sizeof names / sizeof names[0]) return -1;
        flags |= names[i].flag;
        s += k;
        n -= k;
        if (n > 0) s++, n--;
    }
    return flags ? (long)flags : -1;
}

static void start_recording(const char *spec, const char *out) {
    const char *colon = strchr(spec, ':');
    char path[4096];
    long flags = colon ? parse_kinds(spec, (size_t)(colon - spec)) : -1;
    int rc, fd;
    if (flags < 0) {
        fprintf(stderr, "bptrace-agent: BPTRACE_PATTERN='%s': want KINDS:PATTERN, e.g. call,return:prog:work/_\n", spec);
        return;
    }
    if (!out || !*out) {
        snprintf(path, sizeof path, "bptrace-%d.bpt", (int)getpid());
        out = path;
    }
    if ((fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "bptrace-agent: BPTRACE_OUTPUT %s: cannot create it\n", out);
        return;
    }
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.name = "agent-record";
    if ((rc = bpt_session_create(&d, &rec)) < 0 ||
        (rc = bpt_trace_pattern(rec, colon + 1, (unsigned)flags, NULL)) < 0) {
        fprintf(stderr, "bptrace-agent: BPTRACE_PATTERN '%s': %s\n", spec, bpt_last_error());
        close(fd);
        return;
    }
    SAY("recording %s (%d functions) to %s\n", colon + 1, rc, out);
    rec_out.fd = fd;
    if (fstat(fd, &rec_id) < 0 || !realpath(out, rec_path)) rec_path[0] = '\0';   /* then not opened again */
    rec_pid = getpid();
    atomic_store(&recording, 1);
    {   /* the drainer blocks every signal: the program's go to its own threads */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&rec_thread, NULL, rec_main, NULL) != 0) atomic_store(&recording, 0);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
}

/* At exit: the server stops (its clients' sessions are destroyed and the
   socket file removed); then the last records, and the file. Threads
   still running lose what they make after this. */
__attribute__((destructor)) static void agent_fini(void) {
    bpt_control_stop();   /* BPT_ENOENT when none runs (a forked child has none): nothing to do */
    if (!atomic_load(&recording) || rec_pid != getpid()) return;
    atomic_store(&recording, 0);
    pthread_join(rec_thread, NULL);
    if (rec_file() == 0) {   /* else the number is the program's */
        bpt_session_write(rec, &rec_out);
        close(rec_out.fd);
    }
}

/* ---- The control server ---- */

/* Start it at path (NULL: the default address of this process's pid),
   saying why on stderr if it cannot be. */
static void start_server(const char *path) {
    bpt_control_desc d;
    char where[128];
    memset(&d, 0, sizeof d);
    d.path = path;
    if (bpt_control_start(&d) < 0)
        fprintf(stderr, "bptrace-agent[%d]: no control server: %s\n", (int)getpid(), bpt_last_error());
    else if (bpt_control_address(where, sizeof where) >= 0)
        SAY("control server at %s\n", where);
}

/* BPTRACE_CONTROL_FORKS=1: the child's fork handler. bptrace's own
   (registered by the parent's bpt_control_start, before this one, so it
   runs first) has closed the parent's sockets and forgotten its server;
   this one starts the child's, at the default address of the child's pid.
   The child has one thread here, the one that forked. */
static void child_server(void) {
    start_server(NULL);
}

/* ---- Modules ---- */

static void register_module(const char *module) {
    int n = bpt_register_module(module);
    if (n < 0) SAY("bpt_register_module(%s): %s\n", module ? module : "main program", bpt_last_error());
    else SAY("%s: %d functions registered\n", module ? module : "main program", n);
}

/* dlopen, interposed: the real one, then the new module's functions are
   registered, and the patterns in force apply to them before it returns. */
void *dlopen(const char *file, int mode) {
    static void *(*volatile real)(const char *, int);
    void *h;
    if (!real) {
        void *(*next)(const char *, int);
        *(void **)&next = dlsym(RTLD_NEXT, "dlopen");
        real = next;
    }
    if (!real) return NULL;
    h = real(file, mode | RTLD_NODELETE);   /* never unmapped under bptrace's records */
    if (h && file) register_module(file);
    return h;
}

__attribute__((constructor)) static void agent_init(void) {
    const char *v = getenv("BPTRACE_VERBOSE"), *ctl = getenv("BPTRACE_CONTROL"), *pat = getenv("BPTRACE_PATTERN");
    const char *forks = getenv("BPTRACE_CONTROL_FORKS");
    static char pattern[4096], output[4096], control[4096];
    verbose = v && *v == '1';
    /* A program this one starts inherits LD_PRELOAD, and so its own agent
       and server; not the recording, which would overwrite this file. */
    snprintf(pattern, sizeof pattern, "%s", pat ? pat : "");
    snprintf(output, sizeof output, "%s", getenv("BPTRACE_OUTPUT") ? getenv("BPTRACE_OUTPUT") : "");
    unsetenv("BPTRACE_PATTERN");
    unsetenv("BPTRACE_OUTPUT");
    snprintf(control, sizeof control, "%s", ctl ? ctl : "");
    unsetenv("BPTRACE_CONTROL");   /* a child's server takes its own default address */
    ctl = ctl ? control : NULL;
    register_module(NULL);
    if (!ctl || strcmp(ctl, "off")) {
        start_server(ctl && *ctl ? ctl : NULL);
        /* after the start: its fork handlers are registered, and run first */
        if (forks && !strcmp(forks, "1") && pthread_atfork(NULL, NULL, child_server) != 0)
            fprintf(stderr, "bptrace-agent: BPTRACE_CONTROL_FORKS: no memory for the fork handler\n");
    }
    if (*pattern) start_recording(pattern, output);
}

/* tests/agent/target.c: a program with no bptrace code in it, built only
   with the flags of `make print-cflags`; tests/agent/check.py runs it under
   the agent (build/libbptrace-agent.so) and steers tracing from outside
   with bpt. A spinner thread calls spin_step without pause from start to
   end: its count must keep rising while bpt works (no thread stops).
   Commands on stdin, one a line, each answered on stdout:
     run N          call work(i) for i in 0..N-1  -> done N SUM
     lib PATH N     dlopen PATH, call its lib_work(i) N times -> lib N SUM
     spins          -> spins COUNT
     chdir DIR      -> chdir ok, or chdir error MESSAGE
     listen PATH    a unix socket of the program's own, listening at PATH
                    (as a service's) -> listen ok, or listen error MESSAGE
     fork DIR       fork a child, which waits for DIR/go, calls work(i) for i
                    in 0..499, creates DIR/done, waits for DIR/quit and
                    exits 0 (through exit: destructors run) -> fork PID
     wait           wait for a child -> wait PID STATUS
     closefrom DIR  close every descriptor from 3 up (as a daemon does at
                    start), then open DIR/f0..f15 for writing, kept open:
                    they take the numbers that came free, the first ones
                    put on the closed numbers themselves (dup3), the
                    server's high ones included -> closefrom N (N: how
                    many were open)
     quit           exit 0 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long work(long x) { return 3 * x + 1; }
long spin_step(long x) { return x ^ (x >> 3); }

static long (*volatile call_work)(long) = work;
static long (*volatile call_spin)(long) = spin_step;
static atomic_long spins;

static void *spinner(void *arg) {
    long acc = 0;
    (void)arg;
    for (;;) {
        for (int i = 0; i < 1000; i++) acc = call_spin(acc + i);
        atomic_fetch_add(&spins, 1000);
        struct timespec ts = { 0, 200000 };   /* 0.2 ms: a steady caller, not a CPU hog */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* The forked child of `fork DIR`: it waits for DIR/NAME to exist. */
static void wait_for_file(const char *dir, const char *name) {
    char path[4100];
    struct timespec ms = { 0, 1000000 };
    snprintf(path, sizeof path, "%s/%s", dir, name);
    while (access(path, F_OK) != 0) nanosleep(&ms, NULL);
}

static void forked_child(const char *dir) {
    char path[4100];
    long sum = 0;
    FILE *f;
    wait_for_file(dir, "go");
    for (long i = 0; i < 500; i++) sum += call_work(i);
    snprintf(path, sizeof path, "%s/done", dir);
    if ((f = fopen(path, "w"))) { fprintf(f, "%ld\n", sum); fclose(f); }
    wait_for_file(dir, "quit");
    exit(0);
}

int main(void) {
    char line[4096];
    pthread_t t;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pthread_create(&t, NULL, spinner, NULL) != 0) return 1;
    printf("ready %d\n", (int)getpid());
    while (fgets(line, sizeof line, stdin)) {
        char path[4000];
        long n, sum = 0;
        if (sscanf(line, "run %ld", &n) == 1) {
            for (long i = 0; i < n; i++) sum += call_work(i);
            printf("done %ld %ld\n", n, sum);
        } else if (sscanf(line, "lib %3999s %ld", path, &n) == 2) {
            void *h = dlopen(path, RTLD_NOW);
            long (*lib_work)(long) = h ? (long (*)(long))dlsym(h, "lib_work") : NULL;
            if (!lib_work) { printf("lib error %s\n", dlerror()); continue; }
            for (long i = 0; i < n; i++) sum += lib_work(i);
            printf("lib %ld %ld\n", n, sum);
        } else if (sscanf(line, "chdir %3999s", path) == 1) {
            if (chdir(path) == 0) printf("chdir ok\n");
            else printf("chdir error %s\n", strerror(errno));
        } else if (sscanf(line, "listen %3999s", path) == 1) {
            struct sockaddr_un a;
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);   /* kept open until exit */
            memset(&a, 0, sizeof a);
            a.sun_family = AF_UNIX;
            if (strlen(path) >= sizeof a.sun_path) { printf("listen error the path is too long\n"); continue; }
            memcpy(a.sun_path, path, strlen(path));
            if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0) printf("listen ok\n");
            else printf("listen error %s\n", strerror(errno));
        } else if (sscanf(line, "fork %3999s", path) == 1) {
            pid_t child = fork();
            if (child == 0) forked_child(path);
            printf("fork %d\n", (int)child);
        } else if (sscanf(line, "closefrom %3999s", path) == 1) {
            int closed = 0, fds[4096], n = 0, f;
            DIR *dir = opendir("/proc/self/fd");   /* every open number, as glibc's closefrom finds them */
            struct dirent *e;
            while (dir && (e = readdir(dir)) != NULL && n < 4096)
                if (atoi(e->d_name) >= 3 && atoi(e->d_name) != dirfd(dir)) fds[n++] = atoi(e->d_name);
            if (dir) closedir(dir);
            for (int i = 0; i < n; i++)
                if (close(fds[i]) == 0) fds[closed++] = fds[i];
            for (int i = 0; i < 16; i++) {   /* the files take the closed numbers, the server's (high) too */
                char name[4100];
                snprintf(name, sizeof name, "%s/f%d", path, i);
                if ((f = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) break;
                if (i < closed && f != fds[i] && dup3(f, fds[i], O_CLOEXEC) == fds[i]) close(f);
            }
            printf("closefrom %d\n", closed);
        } else if (!strncmp(line, "wait", 4)) {
            int status = 0;
            pid_t who = wait(&status);
            printf("wait %d %d\n", (int)who, status);
        } else if (!strncmp(line, "spins", 5)) {
            printf("spins %ld\n", (long)atomic_load(&spins));
        } else if (!strncmp(line, "quit", 4)) {
            return 0;
        } else {
            printf("unknown %s", line);
        }
    }
    return 0;
}

/* tests/bpt/shrink_preload.c: LD_PRELOAD'ed into bpt by check.py (bad
   shrink), it makes a file shrink at the one moment that matters, every
   time: when bpt's fstat of the file named by BPT_TEST_SHRINK returns, the
   file is cut to BPT_TEST_SHRINK_TO bytes. bpt then reads a file shorter
   than the size it was told: through an mmap of that size, a read past the
   new end is SIGBUS (found by review); through pread, a short read. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fstat(int fd, struct stat *st) {
    static int (*real)(int, struct stat *);
    static int done;
    const char *want = getenv("BPT_TEST_SHRINK"), *to = getenv("BPT_TEST_SHRINK_TO");
    char link[64], path[PATH_MAX];
    ssize_t n;
    int rc;
    if (!real) real = (int (*)(int, struct stat *))dlsym(RTLD_NEXT, "fstat");
    rc = real(fd, st);
    if (rc || done || !want || !to) return rc;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if ((n = readlink(link, path, sizeof path - 1)) < 0) return rc;
    path[n] = 0;
    if (strcmp(path, want)) return rc;
    done = 1;   /* once: the size bpt was told is the old one */
    if (truncate(want, atoll(to)) == 0) fprintf(stderr, "shrink_preload: %s cut to %s bytes after fstat\n", want, to);
    return rc;
}

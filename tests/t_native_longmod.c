/* t_native_longmod: BPT_TEST_WHOLE_PROGRAM BPT_TEST_SHLIB(tests/lib_native_module.c)
   A module whose file's basename is over 127 bytes (found by review).
   bpt_register_module registered its functions under the whole basename,
   which no pattern can spell (patterns are limited to 127 bytes a part,
   and bpt_register_native refuses such a module name with BPT_ELIMIT).
   Now the name is cut to 127 bytes, as function names are: an exact
   pattern names its functions, they are traced, and bpt_unregister_module
   given the file's path or basename finds them. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"

#if !defined(BPT_NATIVE)
NATIVE_UNSUPPORTED_MAIN("a module with a long file name is registered under its name cut to 127 bytes")
#else
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

static int copy_file(const char *from, const char *to) {
    char buf[65536];
    ssize_t n;
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755), rc = 0;
    if (in < 0 || out < 0) rc = -1;
    while (rc == 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) rc = -1;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return rc;
}

int main(int argc, char **argv) {
    char dir[] = "/tmp/bpt_t_native_longmod.XXXXXX", base[160], path[256], cut[128], pat[200];
    bpt_session s;
    bpt_info info;
    bpt_func *f;
    long (*fn)(long);
    void *h;
    int rc, n;
    if (argc < 2) { fprintf(stderr, "usage: %s LIB\n", argv[0]); return 1; }
    memset(base, 0, sizeof base);
    memcpy(base, "lib", 3);
    memset(base + 3, 'm', 140);
    memcpy(base + 143, ".so", 3);              /* 146 bytes */
    memcpy(cut, base, 127);
    cut[127] = '\0';
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/%s", dir, base);
    if (copy_file(argv[1], path) < 0) { perror(path); return 1; }
    h = dlopen(path, RTLD_NOW);
    CHECK(h != NULL, "dlopen: %s", dlerror());
    if (!h) return CHECK_DONE();
    fn = (long (*)(long))dlsym(h, "lib_fn_10");
    rc = bpt_register_module(base);
    printf("bpt_register_module(%zu-byte basename) = %d %s\n", strlen(base), rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc > 0, "bpt_register_module: %d (%s)", rc, bpt_last_error());
    rc = bpt_func_lookup(cut, "lib_fn_10", 0, &f);
    CHECK(rc == 0, "not registered as %.20s...(127 bytes):lib_fn_10/0: %s", cut, bpt_last_error());
    if (rc == 0) CHECK(strlen(f->module) == 127, "module name of %zu bytes", strlen(f->module));
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    snprintf(pat, sizeof pat, "%s:lib_fn_10/_", cut);
    rc = bpt_trace_pattern(s, pat, BPT_COUNT, NULL);
    printf("bpt_trace_pattern(exact 127-byte module) = %d %s\n", rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc == 1, "an exact pattern matched %d functions (%s)", rc, rc < 0 ? bpt_last_error() : "");
    if (fn) CHECK(fn(1) == 12 && fn(2) == 14, "lib_fn_10 computes");
    if (rc == 1 && bpt_func_lookup(cut, "lib_fn_10", 0, &f) == 0) {
        CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == 2, "counted %llu calls", (unsigned long long)info.count);
    }
    CHECK_RC(bpt_session_destroy(s), 0);
    n = bpt_unregister_module(path);
    printf("bpt_unregister_module(path) = %d\n", n);
    CHECK(n > 0, "bpt_unregister_module by path: %d (%s)", n, bpt_last_error());
    CHECK_RC(bpt_func_lookup(cut, "lib_fn_10", 0, &f), BPT_ENOENT);
    dlclose(h);
    unlink(path);
    rmdir(dir);
    return CHECK_DONE();
}
#endif

/* t_native_module: BPT_TEST_WHOLE_PROGRAM BPT_TEST_SHLIB(tests/lib_native_module.c)
   Whole modules registered from their __patchable_function_entries section
   and named from their ELF symbols.
   - the main executable, built with the patchable-entry flags: every one of
     200 generated functions (60 of them static) is found at its own address
     under its own name, and none of bptrace's own functions is registered
     (tracing them would recurse);
   - a shared object registers after dlopen, is traced, and unregisters
     before dlclose; after a second dlopen it registers again;
   - aarch64: a vector-PCS function (STO_AARCH64_VARIANT_PCS: argument
     registers wider than a traced call keeps) is skipped, and runs right
     under "_:_/_" (it was registered and traced, its z registers' upper
     bits then lost; found by review). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <dlfcn.h>
#include <string.h>

#if defined(BPT_NATIVE)
#define GLOBAL_FN(n) long glob_##n(long x);  long glob_##n(long x) { return x + n; }
#define STATIC_FN(n) static long stat_##n(long x) { return x - n; }
#define TEN(M, b) M(b##0) M(b##1) M(b##2) M(b##3) M(b##4) M(b##5) M(b##6) M(b##7) M(b##8) M(b##9)
TEN(GLOBAL_FN, 1) TEN(GLOBAL_FN, 2) TEN(GLOBAL_FN, 3) TEN(GLOBAL_FN, 4) TEN(GLOBAL_FN, 5) TEN(GLOBAL_FN, 6)
TEN(GLOBAL_FN, 7) TEN(GLOBAL_FN, 8) TEN(GLOBAL_FN, 9) TEN(GLOBAL_FN, 10) TEN(GLOBAL_FN, 11) TEN(GLOBAL_FN, 12)
TEN(GLOBAL_FN, 13) TEN(GLOBAL_FN, 14)
TEN(STATIC_FN, 1) TEN(STATIC_FN, 2) TEN(STATIC_FN, 3) TEN(STATIC_FN, 4) TEN(STATIC_FN, 5) TEN(STATIC_FN, 6)
#if defined(__aarch64__)
__attribute__((aarch64_vector_pcs, noinline)) long vpcs_fn(long x);
__attribute__((aarch64_vector_pcs, noinline)) long vpcs_fn(long x) { return x + 7; }
#endif

typedef struct named { const char *name; long (*fn)(long); } named;
#define ENTRY_G(n) { "glob_" #n, glob_##n },
#define ENTRY_S(n) { "stat_" #n, stat_##n },
static const named table[] = {
    TEN(ENTRY_G, 1) TEN(ENTRY_G, 2) TEN(ENTRY_G, 3) TEN(ENTRY_G, 4) TEN(ENTRY_G, 5) TEN(ENTRY_G, 6)
    TEN(ENTRY_G, 7) TEN(ENTRY_G, 8) TEN(ENTRY_G, 9) TEN(ENTRY_G, 10) TEN(ENTRY_G, 11) TEN(ENTRY_G, 12)
    TEN(ENTRY_G, 13) TEN(ENTRY_G, 14)
    TEN(ENTRY_S, 1) TEN(ENTRY_S, 2) TEN(ENTRY_S, 3) TEN(ENTRY_S, 4) TEN(ENTRY_S, 5) TEN(ENTRY_S, 6)
};
enum { NTABLE = sizeof table / sizeof table[0] };

static int own_functions;
static void count_own(const bpt_func *f, const char *module, const char *name, int arity,
                      const bpt_info *info, void *user) {
    (void)f; (void)module; (void)arity; (void)info; (void)user;
    if (strncmp(name, "bpt_", 4) == 0) own_functions++;
}

/* The module name bptrace gives the main executable: its file's basename. */
static const char *exe_module(void) {
    static char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "?";
    buf[n] = '\0';
    return strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
}

static void shared_object(const char *path, bpt_session s) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    long (*fn)(long), (*call_static)(int, long);
    bpt_msg m[64];
    int round, n, i;
    for (round = 0; round < 2; round++) {
        void *h = dlopen(path, RTLD_NOW);
        CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
        if (!h) return;
        n = bpt_register_module(base);
        printf("round %d: %s registered %d functions\n", round, base, n);
        /* 40 exported, 10 static, and lib_call_static: every function of the file */
        CHECK(n == 51, "the shared object's 51 functions: %d (%s)", n, bpt_last_error());
        CHECK_RC(bpt_trace_pattern(s, "_:lib_*/_", BPT_CALL, NULL), 51);
        *(void **)&fn = dlsym(h, "lib_fn_17");
        *(void **)&call_static = dlsym(h, "lib_call_static");
        CHECK(fn && call_static, "dlsym");
        if (fn) CHECK(fn(4) == 25, "lib_fn_17(4)");
        if (call_static) CHECK(call_static(3, 2) == 59, "lib_static_53(2) through the table");
        n = bpt_session_drain(s, m, 64);
        for (i = 0; i < n; i++) {
            char line[200];
            bpt_format_dbg(&m[i], line, sizeof line);
            printf("  %s\n", line);
        }
        CHECK(n == 3 && strcmp(m[0].name, "lib_fn_17") == 0 && strcmp(m[1].name, "lib_call_static") == 0 &&
              strcmp(m[2].name, "lib_static_53") == 0 && strcmp(m[0].module, base) == 0,
              "three call messages from the shared object, the static one named");
        n = bpt_unregister_module(base);
        CHECK(n == 51, "unregistered %d before dlclose", n);
        CHECK_RC(bpt_trace_pattern(s, "_:lib_*/_", BPT_OFF, NULL), 0);
        CHECK(dlclose(h) == 0, "dlclose");
    }
}

int main(int argc, char **argv) {
    const char *mod = exe_module();
    bpt_session s;
    int n, i, named_right = 0, i_sum = 0;
    n = bpt_register_module(NULL);
    printf("main executable '%s': %d functions registered\n", mod, n);
    CHECK(n >= NTABLE, "at least the %d generated functions: %d (%s)", (int)NTABLE, n, bpt_last_error());
    for (i = 0; i < (int)NTABLE; i++) {
        bpt_func *f;
        if (bpt_func_lookup(mod, table[i].name, 0, &f) == 0 && f->fn == (void *)table[i].fn) named_right++;
        else CHECK(0, "%s not registered at %p: %s", table[i].name, (void *)table[i].fn, bpt_last_error());
    }
    printf("%d of %d generated functions (%d static) found at their address under their name\n",
           named_right, (int)NTABLE, 60);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK(bpt_trace_pattern(s, "_:_/_", BPT_COUNT, NULL) == n, "count on every registered function");
    CHECK(bpt_trace_info_each(s, "_:_/_", BPT_INFO_COUNT, count_own, NULL) == n, "info on each");
    CHECK(own_functions == 0, "%d of bptrace's own functions registered", own_functions);
#if defined(__aarch64__)
    {
        bpt_func *f;
        long (__attribute__((aarch64_vector_pcs)) *volatile pv)(long) = vpcs_fn;
        CHECK_RC(bpt_func_lookup(mod, "vpcs_fn", 0, &f), BPT_ENOENT);
        CHECK(pv(1) == 8, "vpcs_fn(1)");
        printf("vpcs_fn (STO_AARCH64_VARIANT_PCS): not registered\n");
    }
#endif
    for (i = 0; i < (int)NTABLE; i++) i_sum += (int)table[i].fn(1);   /* all traced, counted, no recursion */
    {
        bpt_func *f;
        bpt_info info;
        CHECK_RC(bpt_func_lookup(mod, "stat_42", 0, &f), 0);
        CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == 1, "stat_42 counted %llu", (unsigned long long)info.count);
    }
    CHECK(bpt_trace_pattern(s, "_:_/_", BPT_OFF, NULL) == n, "off");
    if (argc > 1) shared_object(argv[1], s);
    else CHECK(0, "no shared object path given (tests/run passes it)");
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK(bpt_unregister_module(mod) == n, "main executable unregistered");
    return CHECK_DONE() + (i_sum == 0);
}
#else
NATIVE_UNSUPPORTED_MAIN("no module to register")
#endif

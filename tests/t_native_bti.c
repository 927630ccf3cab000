/* t_native_bti: BPT_TEST_WHOLE_PROGRAM BPT_TEST_SHLIB(tests/lib_bti.c)
   BPT_TEST_SHLIB_AARCH64_FLAGS(-mbranch-protection=bti -nostartfiles)
   aarch64 with BTI: a code page the loader guarded (PROT_BTI) stays
   guarded across bptrace's code writes. Every write made the page
   read+write+execute and then read+execute, which dropped PROT_BTI: the
   library's functions could then be entered by any indirect branch
   (found by review; bpt_register_native's doc said so).
   - the library's page is guarded after dlopen (an indirect call to its
     function without a landing pad faults, SIGILL); else SKIPPED;
   - and still guarded after bpt_register_module (its padding write), while
     a function on that page is traced (the install's write), and after
     the trace is switched off (the uninstall's);
   - the traced function itself runs and is counted each time.
   x86-64 has no BTI: SKIPPED there. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>

#if defined(BPT_NATIVE) && defined(__aarch64__)
#ifndef HWCAP2_BTI
#define HWCAP2_BTI (1UL << 17)
#endif
static sigjmp_buf on_fault;
static void fault(int sig) { (void)sig; siglongjmp(on_fault, 1); }

/* 1 when an indirect call to fn (no landing pad) faults: its page is guarded. */
static int guarded(long (*volatile fn)(long)) {
    volatile int faulted = 0;
    if (sigsetjmp(on_fault, 1) == 0) {
        long r = fn(1);
        CHECK(r == 3, "the unguarded function returned %ld", r);
    } else {
        faulted = 1;
    }
    return faulted;
}

static long counted(bpt_session s, bpt_func *f) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    return bpt_trace_info(s, f, BPT_INFO_COUNT, &in) == 0 ? (long)in.count : -1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "", *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    long (*volatile fn)(long), (*volatile bare)(long);
    struct sigaction sa;
    bpt_session s;
    bpt_func *f;
    void *h;
    int n;
    if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI)) return CHECK_SKIP("this CPU has no BTI");
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fault;
    sigaction(SIGILL, &sa, NULL);
    h = dlopen(path, RTLD_NOW);
    CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
    if (!h) return CHECK_DONE();
    *(void **)&fn = dlsym(h, "lib_bti_fn");
    *(void **)&bare = dlsym(h, "lib_bti_unguarded");
    CHECK(fn && bare, "dlsym");
    if (!fn || !bare) return CHECK_DONE();
    CHECK((uintptr_t)fn / 4096 == (uintptr_t)bare / 4096, "both functions on one page: %p %p", *(void **)&fn,
          *(void **)&bare);
    if (!guarded(bare)) return CHECK_SKIP("the loader did not map the BTI library with PROT_BTI");
    printf("after dlopen: guarded\n");

    n = bpt_register_module(base);
    CHECK(n == 1, "registered lib_bti_fn: %d (%s)", n, bpt_last_error());
    CHECK(guarded(bare), "guarded after bpt_register_module wrote the padding");
    CHECK_RC(bpt_func_lookup(base, "lib_bti_fn", 0, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "_:lib_bti_fn/_", BPT_COUNT, NULL), 1);
    CHECK(fn(4) == 9, "lib_bti_fn(4) traced");
    CHECK(guarded(bare), "guarded while lib_bti_fn is traced (the install's write)");
    CHECK(counted(s, f) == 1, "one call counted: %ld", counted(s, f));
    CHECK_RC(bpt_trace_pattern(s, "_:lib_bti_fn/_", BPT_OFF, NULL), 1);
    CHECK(fn(4) == 9, "lib_bti_fn(4) untraced");
    CHECK(guarded(bare), "guarded after the switch-off (the uninstall's write)");
    printf("register, install, uninstall: still guarded\n");
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK(bpt_unregister_module(base) == 1, "unregistered");
    CHECK(dlclose(h) == 0, "dlclose");
    return CHECK_DONE();
}
#elif defined(BPT_NATIVE)
int main(void) { return CHECK_SKIP("BTI (branch target identification) is aarch64's: nothing to guard on x86-64"); }
#else
int main(void) { return CHECK_SKIP("this compiler builds no native sites (BPT_NATIVE)"); }
#endif

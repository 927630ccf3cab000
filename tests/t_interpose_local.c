/* t_interpose_local: BPT_TEST_SHLIB(tests/lib_unwind_local.c)
   BPT_TEST_LDFLAGS(-rdynamic)
   bptrace's stand-in for _Unwind_RaiseException (unwind.c, U1) forwards to
   the runtime's own, found with dlsym(RTLD_NEXT). A program that exports
   its symbols (-rdynamic, or the LD_PRELOAD agent) and loads a library
   that brings the unwinder with it RTLD_LOCAL (a C++ plugin; how Python
   loads extensions) binds that library's throws to the stand-in, but
   RTLD_NEXT cannot see a library outside the global scope: the stand-in
   aborted at the library's first throw, with no tracing at all (found by
   review). Now it takes the function from the unwinder's own library
   when that is loaded (interpose.c). Claims: the library's throw, which
   nothing catches, returns to the library, twice (the pointer is cached);
   on x86-64 with _URC_END_OF_STACK (5). (aarch64's libgcc, under qemu,
   returns another value there without bptrace too.) */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <dlfcn.h>

#if defined(BPT__INTERPOSE)
int main(int argc, char **argv) {
    int (*lib_throw)(void);
    void *h;
    int i;
    if (argc < 2) return CHECK_SKIP("no library path given");
    if (dlopen("libgcc_s.so.1", RTLD_LAZY | RTLD_NOLOAD))
        return CHECK_SKIP("libgcc_s is in the global scope already (a sanitizer's runtime links it): "
                          "RTLD_NEXT finds the unwinder, the case cannot arise");
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", argv[1], dlerror());
    if (!h) return CHECK_DONE();
    *(void **)&lib_throw = dlsym(h, "lib_throw");
    CHECK(lib_throw != NULL, "dlsym lib_throw");
    if (!lib_throw) return CHECK_DONE();
    for (i = 0; i < 2; i++) {
        int r = lib_throw();   /* before the fix: abort, "no _Unwind_RaiseException to forward to" */
        printf("throw %d: returned %d to the library\n", i + 1, r);
#if defined(__x86_64__)
        CHECK(r == 5, "the library's throw reached its unwinder: %d, expected _URC_END_OF_STACK (5)", r);
#endif
    }
    return CHECK_DONE();
}
#else
int main(void) { return CHECK_SKIP("bptrace interposes nothing in this build (no native sites, or BPT_NO_INTERPOSE)"); }
#endif

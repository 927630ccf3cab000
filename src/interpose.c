/* interpose.c: how bptrace's stand-ins for runtime functions (interpose.h)
   reach the runtime's own: dlsym(RTLD_NEXT), once per function. dlsym is
   in glibc's libc from 2.34 (before, link with -ldl).
   RTLD_NEXT searches the global scope after bptrace's object. A program
   that exports its symbols (-rdynamic, or the LD_PRELOAD agent) and loads
   a library RTLD_LOCAL that brings the unwinder and the C++ runtime with
   it (a C++ plugin of a C program; Python's extension modules) binds that
   library's throws to bptrace's stand-ins, but the runtime's own are not
   in the global scope: then they are taken from the runtime's library,
   found already loaded (RTLD_NOLOAD) and kept loaded (RTLD_NODELETE: the
   pointer is cached). A lookup by handle searches that library and its
   dependencies only, never bptrace's object. */
#include "internal.h"

#if defined(BPT__INTERPOSE)
#include <dlfcn.h>

BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name) {
    void *fn = bpt__load_acquire_ptr(cache);   /* racing threads store the same pointer */
    if (!fn) {
        static const char *const runtimes[] = {   /* the unwinder's and the C++ ABI's, GNU's and LLVM's */
            "libgcc_s.so.1", "libstdc++.so.6", "libunwind.so.1", "libunwind.so.8", "libc++abi.so.1", "libc++.so.1"
        };
        size_t i;
        fn = dlsym(RTLD_NEXT, name);
        for (i = 0; !fn && i < sizeof runtimes / sizeof runtimes[0]; i++) {
            void *h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
            if (h) fn = dlsym(h, name);
        }
        if (!fn) {
            char msg[192];
            int n = snprintf(msg, sizeof msg, "bptrace: no %s to forward to after bptrace's (a static link? "
                             "build with -DBPT_NO_INTERPOSE); aborting\n", name);
            if (n > 0) { ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1); (void)w; }
            abort();
        }
        bpt__store_release_ptr(cache, fn);
    }
    return fn;
}
#endif

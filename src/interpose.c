/* interpose.c: how bptrace's stand-ins for runtime functions (interpose.h)
   reach the runtime's own: dlsym(RTLD_NEXT), once per function. dlsym is
   in glibc's libc from 2.34 (before, link with -ldl). */
#include "internal.h"

#if defined(BPT__INTERPOSE)
#include <dlfcn.h>

BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name) {
    void *fn = bpt__load_acquire_ptr(cache);   /* racing threads store the same pointer */
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
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

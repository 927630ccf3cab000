/* The shared object of t_imports_version (tests/run builds it and passes its
   path). It imports getpid from libc, so it has version tables, and it
   defines t_target unversioned: loaded twice, the second copy asks for the
   first's t_target through a PLT slot that stays unbound (RTLD_LAZY). */
#include <unistd.h>
__attribute__((noinline)) long t_target(long x) { return x + (long)getpid(); }
long t_call(long x) { return t_target(x) + 1; }   /* through the PLT: t_target may be interposed */

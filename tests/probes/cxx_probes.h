/* cxx_probes.h: BPT_PROBE where C++ gives a function vague linkage (an
   inline function, a template, a member defined in its class), included by
   cxx_a.cc and cxx_b.cc, which tests/probes/run links together in both
   orders, as a program and as a shared object, at -O0 and -O2 and with
   LTO. g++ put the semaphores of such functions into one comdat group (or
   ignored their section), which broke the link or the notes, until each
   probe name got one semaphore of the module's, defined in assembly. */
#ifndef CXX_PROBES_H
#define CXX_PROBES_H
#include "../../bptrace.h"

inline long probe_f(long x) {
    BPT_PROBE(cxx, f, x);
    return x + 1;
}

template <typename T> T probe_g(T x) {
    BPT_PROBE(cxx, g, x, sizeof(T));
    return x * 2;
}

struct probe_s {
    long k;
    long m(long x) {
        BPT_PROBE(cxx, m, x, this, k);
        return x - k;
    }
};

long only_a(long x);   /* cxx_a.cc */
#endif

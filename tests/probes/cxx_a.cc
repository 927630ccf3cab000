/* cxx_a.cc: uses every probe of cxx_probes.h (see there). */
#include "cxx_probes.h"

long only_a(long x) {
    probe_s s = { 1 };
    return probe_f(x) + probe_g<int>(static_cast<int>(x)) + s.m(x);
}

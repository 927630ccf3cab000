/* cxx_b.cc: uses some of cxx_probes.h's probes, and arguments C++ converts
   without an old-style cast: a pointer to an array, nullptr, an enum class. */
#include "cxx_probes.h"
#include <cstdio>

enum class color { red = 3 };

int main() {
    probe_s s = { 2 };
    char text[] = "sa";
    long v = s.m(10) + probe_g<int>(4) + only_a(5);
    BPT_PROBE(cxx, kinds, text, nullptr, color::red, -1, 2.5, &main);
    std::printf("cxx probes: %ld\n", v);
    return v == 8 + 8 + 6 + 10 + 4 ? 0 : 1;
}

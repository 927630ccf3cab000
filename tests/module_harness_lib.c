/* module_harness_lib.c: the shared object the module scan harness dlopens.
   71 patchable functions (51 exported, 20 static), a weak alias that must
   not name its target, and calls between exported functions (which can make
   gcc emit "f.localalias" local symbols at the same address in a -fPIC build).
   HARNESS_OTHER_BUILD builds a different library of the same name: the
   harness renames it over a loaded copy to check the image comparison. */
#include "module_harness.h"

#define LIB_G(n) H_DEFINE(lib_g_, , n)
#define LIB_S(n) H_DEFINE(lib_s_, static, n)
#define LIB_G_ENTRY(n) H_ENTRY(lib_g_, 0, n)
#define LIB_S_ENTRY(n) H_ENTRY(lib_s_, 1, n)

H_D10(LIB_G, 40) H_D10(LIB_G, 41) H_D10(LIB_G, 42) H_D10(LIB_G, 43) H_D10(LIB_G, 44)
H_D10(LIB_S, 50) H_D10(LIB_S, 51)

int lib_weak_alias(int x) __attribute__((weak, alias("lib_g_400")));

HARNESS_ATTR int lib_caller(int x) {
    return lib_g_401(x) + lib_g_402(x) + lib_weak_alias(x);
}

#if defined(HARNESS_LTO)
const int harness_lib_lto = 1;      /* its weak alias becomes global: see module_harness.c */
#endif

#if defined(HARNESS_OTHER_BUILD)
HARNESS_ATTR int lib_other_build_only(int x) { return x * x * 3 + lib_caller(x); }
#endif

const harness_fn harness_lib_table[] = {
    H_D10(LIB_G_ENTRY, 40) H_D10(LIB_G_ENTRY, 41) H_D10(LIB_G_ENTRY, 42) H_D10(LIB_G_ENTRY, 43)
    H_D10(LIB_G_ENTRY, 44) H_D10(LIB_S_ENTRY, 50) H_D10(LIB_S_ENTRY, 51)
    { "lib_caller", (void *)lib_caller, 0 },
};
const int harness_lib_count = sizeof harness_lib_table / sizeof harness_lib_table[0];

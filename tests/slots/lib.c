/* tests/slots/lib.c: a library the slot test dlopens. Its call to strspn
   goes through its own GOT slot, which the test registers with
   bpt_register_imports("libslots-VARIANT.so", "strspn"). */
#include <string.h>

size_t lib_span(const char *s, const char *accept);
size_t lib_span(const char *s, const char *accept) { return strspn(s, accept); }

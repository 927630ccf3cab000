/* The shared object of t_interpose_local: a library that throws through
   the unwinder, linked with libgcc_s (the compiler links it for the unwinder calls), as a C++
   plugin is. Its exception class is foreign to every personality, and no
   frame catches it: _Unwind_RaiseException returns _URC_END_OF_STACK. */
int lib_throw(void);
#if defined(__TINYC__)   /* no <unwind.h>; t_interpose_local is SKIPPED there (no native sites) */
int lib_throw(void) { return -1; }
#else
#include <string.h>
#include <unwind.h>

static void cleanup(_Unwind_Reason_Code why, struct _Unwind_Exception *e) { (void)why; (void)e; }

int lib_throw(void) {
    static struct _Unwind_Exception e;
    memset(&e, 0, sizeof e);
    memcpy(&e.exception_class, "bptTEST\0", 8);
    e.exception_cleanup = cleanup;
    return (int)_Unwind_RaiseException(&e);
}
#endif

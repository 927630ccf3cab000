/* t_native_flags: BPT_TEST_WHOLE_PROGRAM
   A module compiled with another architecture's -fpatchable-function-entry
   values (x86-64's 26,24 on aarch64, aarch64's 9,8 on x86-64) is refused by
   bpt_register_module with BPT_ENOTPATCHABLE and a message naming the
   function, and nothing is registered. Before the fix the scan registered
   each such entry under a "fn_0x..." name at a NOP inside the padding, where
   a breakpoint traces nothing: SQLite cross-compiled for aarch64 with the
   host's flags registered 1,564 functions and none could be traced. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

#if defined(BPT_NATIVE)
#if defined(__x86_64__)
#  define OTHER_ARCH_ENTRY __attribute__((noinline, patchable_function_entry(9, 8)))
#else
#  define OTHER_ARCH_ENTRY __attribute__((noinline, patchable_function_entry(26, 24)))
#endif
OTHER_ARCH_ENTRY long mis_flagged(long x);
OTHER_ARCH_ENTRY long mis_flagged(long x) { return x * 3; }
BPT_TRACEABLE long well_flagged(long x) { return x + 1; }
static long (*volatile call_mis)(long) = mis_flagged;
static long (*volatile call_well)(long) = well_flagged;

int main(void) {
    bpt_func *f;
    int rc = bpt_register_module(NULL);
    printf("bpt_register_module(NULL): %d (%s)\n", rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc == BPT_ENOTPATCHABLE, "a module with a mis-flagged function registered: %d", rc);
    CHECK(strstr(bpt_last_error(), "mis_flagged") != NULL, "the message names the function: %s", bpt_last_error());
    CHECK(bpt_func_count() == 0, "%d functions registered after the refusal", bpt_func_count());
    CHECK(call_mis(2) == 6 && call_well(2) == 3, "the functions compute wrong");
    /* The well-flagged function still registers by hand. */
    CHECK_RC(bpt_register_native((void *)well_flagged, "m", "well_flagged", 1, &f), 0);
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no module of patchable entries to scan")
#endif

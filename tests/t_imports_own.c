/* t_imports_own: bptrace's own calls through the program's import slots
   are not traced (>>own calls in site_native.c). bptrace.h is compiled
   into the program, so its calls into libc go through the program's own
   slots; a program that traces those slots must see only its own calls.
   Found by review (helper-50): the set path asked pthread_once for the
   processor's prefetch support (bpt__arch_prefetch_setup) before it
   marked its calls as its own, so with pthread_once's slot counted, five
   bpt_trace_pattern calls of another session counted 6 calls nobody made.
   Claims:
   - with call_count on pthread_once's slot, five bpt_trace_pattern calls
     (each seizes the code modification permission) count nothing;
   - the program's own pthread_once through the slot counts 1: the slot
     really is traced.
   Needs pthread_once imported by the executable (glibc 2.34 and later
   have it in libc, as Debian 12's 2.36 does); without such a slot the
   test says SKIPPED. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <string.h>

#if defined(BPT_NATIVE)
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ran;
static void run_once(void) { ran++; }

/* The program's own call, from a function of its own: through the slot. */
__attribute__((noinline)) static int program_once(void) { return pthread_once(&once, run_once); }

static uint64_t count_of(bpt_session s, const char *name) {
    bpt_info info;
    int i;
    memset(&info, 0, sizeof info);
    for (i = 0; i < (int)bpt__registry.len; i++)
        if (strcmp(bpt__registry.funcs[i]->name, name) == 0) {
            CHECK_RC(bpt_trace_info(s, bpt__registry.funcs[i], BPT_INFO_COUNT, &info), 0);
            return info.count;
        }
    CHECK(0, "%s is not registered", name);
    return 0;
}

int main(void) {
    bpt_session s, other;
    int n, i;
    n = bpt_register_imports(NULL, "pthread_once");
    printf("bpt_register_imports(NULL, \"pthread_once\"): %d%s%s\n", n, n < 0 ? ": " : "", n < 0 ? bpt_last_error() : "");
    if (n < 1) return CHECK_SKIP("the executable imports no pthread_once (a libc before 2.34, or static linking)");
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_session_create(NULL, &other), 0);
    CHECK_RC(bpt_trace_pattern(s, "_:pthread_once/_", BPT_COUNT, NULL), 1);
    for (i = 0; i < 5; i++) CHECK_RC(bpt_trace_pattern(other, "nomodule:none/0", BPT_COUNT, NULL), 0);
    CHECK(count_of(s, "pthread_once") == 0, "bptrace's own pthread_once calls were counted: %llu after 5 changes",
          (unsigned long long)count_of(s, "pthread_once"));
    CHECK_RC(program_once(), 0);
    CHECK(ran == 1 && count_of(s, "pthread_once") == 1, "the program's own call counted %llu of 1 (ran %d)",
          (unsigned long long)count_of(s, "pthread_once"), ran);
    CHECK_RC(bpt_trace_pattern(s, "_:pthread_once/_", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_session_destroy(other), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("bptrace's own calls through import slots are not traced")
#endif

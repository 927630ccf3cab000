/* t_own_malloc: a program that defines its own malloc, traced with call
   and return trace (issue #17, item 3). A new thread's first traced call
   makes its thread record, its buffer in the session and its shadow stack;
   if any of them came from malloc, the traced malloc would re-enter the
   hit that is making them, and the thread would recurse until its stack
   overflowed (it did, on the first call). Claims:
   - a new thread whose first call is the traced malloc runs, and its
     malloc(24) gives a call message and a return_from with the pointer;
   - 4 threads x 1,000 malloc/free pairs: every call and every return
     traced, nothing dropped, nothing skipped.
   Not under ASAN (it replaces malloc itself). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <string.h>

#if defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define T_ASAN 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define T_ASAN 1
#endif

#if defined(BPT_NATIVE) && !defined(T_ASAN)
/* The program's own allocator: glibc's, under the program's names. */
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
BPT_TRACEABLE void *malloc(size_t n) { return __libc_malloc(n); }
BPT_TRACEABLE void free(void *p) { __libc_free(p); }
BPT_TRACEABLE void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
BPT_TRACEABLE void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }

static void *(*volatile p_malloc)(size_t) = malloc;
static void (*volatile p_free)(void *) = free;

enum { THREADS = 4, PAIRS = 1000 };
static void *first_block;
static void *first_call(void *arg) {
    (void)arg;
    first_block = p_malloc(24);
    p_free(first_block);
    return NULL;
}
static void *pairs(void *arg) {
    int i;
    (void)arg;
    for (i = 0; i < PAIRS; i++) p_free(p_malloc((size_t)i + 1));
    return NULL;
}

int main(void) {
    static bpt_msg m[4096];
    bpt_session s;
    bpt_session_desc d;
    bpt_session_counts c;
    pthread_t t[THREADS];
    bpt_func *fm = native_reg((void *)malloc, "own", "malloc", 1);
    int i, n, calls = 0, returns = 0, sized = 0, ret_first = 0;
    if (!fm) return CHECK_DONE();
    memset(&d, 0, sizeof d);
    d.chunks = 64;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "own:malloc/1", BPT_CALL | BPT_RETURN, NULL), 1);

    CHECK_RC(pthread_create(&t[0], NULL, first_call, NULL), 0);
    pthread_join(t[0], NULL);
    for (;;) {
        n = bpt_session_drain(s, m, 4096);
        if (n <= 0) break;
        for (i = 0; i < n; i++) {
            if (m[i].type == BPT_MSG_CALL && m[i].nargs == 1 && m[i].args[0] == 24) sized++;
            if (m[i].type == BPT_MSG_RETURN_FROM && m[i].value == (uint64_t)(uintptr_t)first_block) ret_first++;
        }
    }
    CHECK(sized == 1 && ret_first == 1, "the new thread's malloc(24): %d call, %d return_from with its pointer",
          sized, ret_first);

    CHECK_RC(bpt_session_stats(s, &c), 0);
    for (i = 0; i < THREADS; i++) CHECK_RC(pthread_create(&t[i], NULL, pairs, NULL), 0);
    for (i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    sized = 0;
    while ((n = bpt_session_drain(s, m, 4096)) > 0)
        for (i = 0; i < n; i++) {
            calls += m[i].type == BPT_MSG_CALL;
            returns += m[i].type == BPT_MSG_RETURN_FROM;
            sized += m[i].type == BPT_MSG_CALL && m[i].nargs == 1 && m[i].args[0] >= 1 && m[i].args[0] <= PAIRS;
        }
    {
        bpt_session_counts c2;
        CHECK_RC(bpt_session_stats(s, &c2), 0);
        printf("%d threads x %d malloc/free: %d calls (%d of the pairs' sizes), %d returns, %llu dropped, "
               "%llu frames skipped\n", THREADS, PAIRS, calls, sized, returns,
               (unsigned long long)(c2.dropped - c.dropped), (unsigned long long)(c2.frames_skipped - c.frames_skipped));
        CHECK(sized >= THREADS * PAIRS && calls == returns && c2.dropped == c.dropped &&
              c2.frames_skipped == c.frames_skipped, "every malloc traced, call and return");
    }
    CHECK_RC(bpt_trace_pattern(s, "own:malloc/1", BPT_OFF, NULL), 1);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#elif defined(T_ASAN)
int main(void) { return CHECK_SKIP("ASAN replaces malloc: a program cannot define its own under it"); }
#else
NATIVE_UNSUPPORTED_MAIN("a program's own malloc traced with return trace")
#endif

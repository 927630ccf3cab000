/* t_native_renop_live: native functions registered while other threads run
   them, over and over.

   Registration writes the pre-entry padding, which nothing executes yet,
   and on x86-64 it also rewrites gcc's entry NOP, 90 90, as the one
   instruction 66 90 (site_x86_64.c, >>renop). That second write changes
   code that threads are running, with no SYNC_CORE wait after it: it is
   safe only because every word a thread can fetch (90 90, 66 90, a mix of
   their bytes, or the second byte alone) is a NOP. t_native_midsled stops a
   thread inside the word deterministically; this test runs the race at
   full speed instead:
     - 3 threads call 32 traceable functions in a loop and check every result;
     - the main thread registers all 32 while they run, checks each entry
       word is the registered one, switches call_count on and off for them
       (the breakpoint word comes and goes under the callers too), checks
       that the counts grew while it was on, and unregisters them;
     - then, on x86-64, it writes 90 90 back into every entry with one
       atomic 2-byte store each, as gcc compiled them, while the threads
       keep calling: the next round's registration rewrites them again.
   Rounds repeat for about a second (fewer under emulation and sanitizers).
   A wrong result, a crash (SIGILL, SIGSEGV) or a wrong word fails the test.
   clang's entries are 66 90 from the start and aarch64's one NOP word, so
   there registration writes only the padding: the test then checks that
   registering under running callers changes nothing they see. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(BPT_NATIVE)
enum { NFN = 32, NTHREADS = 3 };

#define FN(i) BPT_TRACEABLE unsigned long f##i(unsigned long x) { return x * 3 + i; }
FN(0) FN(1) FN(2) FN(3) FN(4) FN(5) FN(6) FN(7) FN(8) FN(9) FN(10) FN(11) FN(12) FN(13) FN(14) FN(15)
FN(16) FN(17) FN(18) FN(19) FN(20) FN(21) FN(22) FN(23) FN(24) FN(25) FN(26) FN(27) FN(28) FN(29) FN(30) FN(31)
static unsigned long (*volatile fns[NFN])(unsigned long) = {
    f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15,
    f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31,
};

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static atomic_int stop;
static atomic_long calls, wrong;

static void *caller(void *arg) {
    unsigned long x = (unsigned long)(uintptr_t)arg, n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int i;
        for (i = 0; i < NFN; i++) {
            unsigned long r = fns[i](x);
            if (r != x * 3 + (unsigned long)i) atomic_fetch_add(&wrong, 1);
            x = r >> 3;
        }
        n += NFN;
        if ((n & 1023) == 0) atomic_fetch_add_explicit(&calls, 1024, memory_order_relaxed);
    }
    return NULL;
}

/* The entry word's address: fn, or after endbr64 / bti c / paciasp. */
static unsigned char *site_of(int i) {
    unsigned char *p = (unsigned char *)(uintptr_t)fns[i];
#if defined(__x86_64__)
    if (code_byte(p, 0) == 0xF3 && code_byte(p, 1) == 0x0F && code_byte(p, 2) == 0x1E && code_byte(p, 3) == 0xFA) p += 4;
#else
    uint32_t w = (uint32_t)code_byte(p, 0) | (uint32_t)code_byte(p, 1) << 8 | (uint32_t)code_byte(p, 2) << 16 |
                 (uint32_t)code_byte(p, 3) << 24;
    if (w == 0xD503245Fu || w == 0xD503233Fu) p += 4;
#endif
    return p;
}

static int word_is_registered(int i) {
    const unsigned char *s = site_of(i);
#if defined(__x86_64__)
    return code_byte(s, 0) == 0x66 && code_byte(s, 1) == 0x90;
#else
    return code_byte(s, 0) == 0x1F && code_byte(s, 1) == 0x20 && code_byte(s, 2) == 0x03 && code_byte(s, 3) == 0xD5;
#endif
}

#if defined(__x86_64__)
/* Write gcc's compiled word back with one atomic store, threads running. */
static void write_compiled_word(int i) {
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), s = (uintptr_t)site_of(i), page = s & ~(ps - 1);
    CHECK_RC(mprotect((void *)page, ps, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
    __atomic_store_n((uint16_t *)s, (uint16_t)0x9090, __ATOMIC_RELAXED);
    CHECK_RC(mprotect((void *)page, ps, PROT_READ | PROT_EXEC), 0);
}
#endif

int main(void) {
    pthread_t th[NTHREADS];
    bpt_func *f[NFN];
    bpt_session s;
    char name[8];
    int i, rounds = 0, gcc_sled, bad_words = 0, counted_rounds = 0;
    long budget_ms = check_scale(1000), before;
    uint64_t t0;
    struct timespec nap = { 0, 200000 };

    gcc_sled = 0;
#if defined(__x86_64__)
    gcc_sled = code_byte(site_of(0), 0) == 0x90 && code_byte(site_of(0), 1) == 0x90;
#endif
    printf("entry word of f0: %02x %02x (%s)\n", code_byte(site_of(0), 0), code_byte(site_of(0), 1),
           gcc_sled ? "gcc's 90 90: registration rewrites it under the callers"
                    : "already one instruction: registration writes the padding only");
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    for (i = 0; i < NTHREADS; i++) CHECK_RC(pthread_create(&th[i], NULL, caller, (void *)(uintptr_t)(i + 1)), 0);
    while (atomic_load(&calls) == 0) nanosleep(&nap, NULL);

    t0 = now_ms();
    do {
        for (i = 0; i < NFN; i++) {
            snprintf(name, sizeof name, "f%d", i);
            CHECK_RC(bpt_register_native((void *)(uintptr_t)fns[i], "live", name, 1, &f[i]), 0);
        }
        for (i = 0; i < NFN; i++)
            if (!word_is_registered(i)) bad_words++;
        CHECK_RC(bpt_trace_pattern(s, "live:_/1", BPT_COUNT, NULL), NFN);
        before = atomic_load(&calls);
        while (atomic_load(&calls) < before + 4096) nanosleep(&nap, NULL);
        {
            bpt_info info;
            CHECK_RC(bpt_trace_info(s, f[rounds % NFN], BPT_INFO_COUNT, &info), 0);
            if (info.count > 0) counted_rounds++;
        }
        CHECK_RC(bpt_trace_pattern(s, "live:_/1", BPT_OFF, NULL), NFN);
        for (i = 0; i < NFN; i++) {
            if (!word_is_registered(i)) bad_words++;
            CHECK_RC(bpt_unregister(f[i]), 0);
        }
#if defined(__x86_64__)
        if (gcc_sled)
            for (i = 0; i < NFN; i++) write_compiled_word(i);
#endif
        rounds++;
    } while (now_ms() - t0 < (uint64_t)budget_ms);

    atomic_store(&stop, 1);
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    printf("%d rounds of registering %d functions under %d calling threads: %ld calls, %ld wrong results, "
           "%d entry words not the registered one, call_count grew in %d rounds\n",
           rounds, NFN, NTHREADS, atomic_load(&calls), atomic_load(&wrong), bad_words, counted_rounds);
    CHECK(rounds >= 3, "only %d rounds", rounds);
    CHECK(atomic_load(&wrong) == 0, "%ld calls returned a wrong result", atomic_load(&wrong));
    CHECK(bad_words == 0, "%d times an entry word was not the registered one", bad_words);
    CHECK(counted_rounds == rounds, "call_count grew in %d of %d rounds", counted_rounds, rounds);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("native functions registered while threads run them")
#endif

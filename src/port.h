/* port.h: everything that differs by compiler or architecture.
   Atomics, thread-locals, the monotonic clock, futex, membarrier, CPU relax.
   Above this part nothing names a compiler or an instruction set.

   Atomics come in two implementations with one interface:
   - gcc and clang: C11 <stdatomic.h> on _Atomic types;
   - tcc 0.9.27 (no <stdatomic.h>, no __atomic builtins): GNU inline asm for
     x86-64, whose memory model (TSO) makes every plain aligned load an acquire
     and every plain aligned store a release; only the compiler must be kept
     from reordering ("memory" clobbers), and seq_cst needs a locked
     instruction or mfence. */

#if !defined(__linux__)
#  error "bptrace: Linux only (it needs futex(2) and membarrier(2))"
#endif

#include <errno.h>
#include <fcntl.h>
/* glibc fixes its feature macros at the first system header; __USE_GNU is
   how it says _GNU_SOURCE was seen in time (syscall, dl_iterate_phdr). */
#if defined(__GLIBC__) && !defined(__USE_GNU)
#  error "bptrace: the implementation needs GNU and Linux calls (syscall, clock_gettime, dl_iterate_phdr): include bptrace.h before any other header in the file that defines BPTRACE_IMPLEMENTATION, or compile that file with -D_GNU_SOURCE"
#endif
#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#ifndef BPT_ASSERT
#  include <assert.h>
#  define BPT_ASSERT(c) assert(c)
#endif
#if defined(BPT_MALLOC) != defined(BPT_FREE)
#  error "bptrace: define both BPT_MALLOC and BPT_FREE, or neither"
#endif
#ifndef BPT_MALLOC
#  define BPT_MALLOC(n) malloc(n)
#  define BPT_FREE(p) free(p)
#endif
#if defined(BPT_HIT_MAP) != defined(BPT_HIT_UNMAP)
#  error "bptrace: define both BPT_HIT_MAP and BPT_HIT_UNMAP, or neither"
#endif
#ifndef BPT_HIT_MAP   /* the hit path's memory: see bpt__hit_map below */
#  define BPT_HIT_MAP(n) bpt__hit_map(n)
#  define BPT_HIT_UNMAP(p, n) bpt__hit_unmap((p), (n))
#endif
#ifndef BPT_MAX_THREADS
#  define BPT_MAX_THREADS 64
#endif
#ifndef BPT_MAX_SESSIONS
#  define BPT_MAX_SESSIONS 64
#endif
#ifndef BPT_SYNC_CORE_SIGNAL
#  define BPT_SYNC_CORE_SIGNAL (SIGRTMIN + 7)
#endif
#define BPT__SYNC_CORE_SIGNAL BPT_SYNC_CORE_SIGNAL
#if BPT_MAX_THREADS < 1 || BPT_MAX_SESSIONS < 1 || BPT_MAX_SESSIONS > 65535
#  error "bptrace: BPT_MAX_THREADS must be >= 1 and BPT_MAX_SESSIONS in 1..65535"
#endif

/* Linkage of the private names. bptrace.h is one translation unit, so
   private functions are static (BPT__PRIVATE) and data shared by parts is
   static too (BPT__SHARED at its one definition), defined by a part before
   any part that uses it; BPT__DATA in the declarations (internal.h) names
   it for the reader and declares nothing. A part compiled on its own
   (-DBPT__PART_ALONE, make test's check that each part compiles alone)
   sees the other parts' functions and data declared with external linkage
   instead, as Nuklear's NK_LIB does for its parts. */
#if defined(BPT__PART_ALONE)
#  define BPT__PRIVATE __attribute__((unused))
#  define BPT__SHARED
#  define BPT__DATA(type, name) extern type name
#elif defined(__GNUC__) || defined(__clang__) || defined(__TINYC__)
#  define BPT__PRIVATE __attribute__((unused)) static
#else
#  define BPT__PRIVATE static
#endif
#if !defined(BPT__PART_ALONE)
#  define BPT__SHARED static
#  define BPT__DATA(type, name) struct bpt__data_##name   /* a tag, no object: see above */
#endif
/* bpt__hide_provenance(p): p, as a pointer the optimizer can no longer
   trace to the object it came from. A native site reads and writes the
   bytes before a function's entry (its pad) through a pointer made from
   the function's address; when gcc -O2 sees which function that is (a
   caller in the same file, with BPTRACE_STATIC), it calls those bytes
   outside the function "object" (-Warray-bounds) and may reason from it.
   The empty asm claims to change p, which cuts the derivation, as Linux's
   OPTIMIZER_HIDE_VAR does. */
#if defined(__GNUC__) || defined(__clang__)
#  define bpt__hide_provenance(p) __asm__("" : "+r"(p))
#else
#  define bpt__hide_provenance(p) ((void)0)
#endif
/* Branch hints for the hit path: which way the common case goes, so the
   compiler lays it out as the straight line (no taken branch) and moves
   the rare side (the fence fallback, a first pin, a sleeping waiter) out
   of it. liburcu's read side is laid out this way; without the hints
   gcc put each rare side inline and jumped over it, 4 taken branches per
   pin+unpin (PERFORMANCE.md, section 3). Hints only: no behaviour. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)
#  define BPT__LIKELY(x) __builtin_expect(!!(x), 1)
#  define BPT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define BPT__LIKELY(x) (x)
#  define BPT__UNLIKELY(x) (x)
#endif
/* >>prefetch: hints for the set path's passes over many records
   (>>working set in bp.c): start fetching the line at p, which a later
   iteration reads (BPT__PREFETCH_R) or writes (BPT__PREFETCH_W). No fault,
   and no behaviour: a compiler without the builtin (tcc) drops them.
   The write hint asks for the line in the exclusive state, as the store
   will: where another core holds it (a worker running the function whose
   word or record is written), the transfer and the invalidation start
   early and overlap, instead of each store waiting for its own. gcc and
   clang make __builtin_prefetch(p, 1) a plain prefetcht0 on x86-64
   unless built for PREFETCHW (-mprfchw), which some early x86-64
   processors lack (#UD), so on native x86-64 the write hint is
   bpt__arch_prefetch_w (site_x86_64.c): prefetchw where CPUID says so,
   and no hint elsewhere. A change over 10,000 counted functions with one
   worker calling them: installing (step 5) took 215 us instead of 254
   and removing (step 9) 254 instead of 314 with prefetchw in W2 and W3
   (site_native.c); prefetcht0 there made them slower, so it is not the
   fallback (bench/pattern_scale.c steps, the medians of 5 interleaved
   runs; issue #16). aarch64's prfm pstl1keep is a write hint in every
   ARMv8-A. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)
#  define BPT__PREFETCH_R(p) __builtin_prefetch((const void *)(p), 0)
#  if defined(BPT_NATIVE)
#    define BPT__PREFETCH_W(p) bpt__arch_prefetch_w((const void *)(p))
#  elif defined(__aarch64__)
#    define BPT__PREFETCH_W(p) __builtin_prefetch((const void *)(p), 1)
#  else
#    define BPT__PREFETCH_W(p) ((void)(p))
#  endif
#else
#  define BPT__PREFETCH_R(p) ((void)0)
#  define BPT__PREFETCH_W(p) ((void)0)
#endif
/* >>trap: stop the process where a state cannot be represented (a pin
   nested past its count's bits), in every build: an assert would let
   NDEBUG run on and corrupt the state. On gcc and clang it is one trap
   instruction (ud2, brk) and no call, so a path that makes no call
   (>>intregs) saves no registers and keeps no stack aligned for it
   (callgrind: the count path 74.6 to 70.8 instructions). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)
#  define BPT__TRAP() __builtin_trap()
#else
#  define BPT__TRAP() abort()
#endif
/* The few small functions of every hit (pin, unpin, the session walk):
   inlined into the entry handler, which saves a call, a return and their
   spills per hit (callgrind: 178 to 150 instructions per counted call,
   PERFORMANCE.md). Only where the compiler knows the attribute. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__) && !defined(BPT__PART_ALONE)
#  define BPT__HOT __attribute__((unused, always_inline)) static inline
#  define BPT__NOINLINE __attribute__((unused, noinline)) static
#else
#  define BPT__HOT BPT__PRIVATE
#  define BPT__NOINLINE BPT__PRIVATE
#endif

/* A function the assembly stubs call by name: kept (used), not exported
   (hidden), and with C linkage in a C++ build, whose names are mangled. */
#if defined(__cplusplus)
#  define BPT__ASM_CALLED extern "C" __attribute__((used, visibility("hidden")))
#else
#  define BPT__ASM_CALLED __attribute__((used, visibility("hidden")))
#endif

/* >>intregs: functions compiled to use the integer registers only. The
   native entry stubs call the count path (site_native.c) with only the
   integer argument registers saved: a function that counts and nothing
   else need not pay for saving eight vector registers on every call, as
   Linux keeps kernel C code off the FP/SIMD registers with
   -mgeneral-regs-only. The compiler then guarantees that the count path,
   and everything it inlines, leaves the vector registers alone; it cannot
   inline a function without the attribute there, so every helper on that
   path carries it too (atomics, pin, unpin, the count's add). Those are
   always_inline (BPT__HOT) as well: gcc inlines a function built for other
   target options only when told to, and would otherwise call each atomic
   load and store out of line everywhere. tests/count_path_check.sh checks the
   compiled path: no vector register, no call.
   Where the attribute is missing (clang for aarch64, tcc) or a sanitizer
   calls its runtime from every access (ASAN, TSAN: compiled normally, it
   may use vector registers), BPT__COUNT_SAVES_FP says so and the stubs
   save the vector registers for the count path as well. */
#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define BPT__SANITIZED 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define BPT__SANITIZED 1
#endif
#if !defined(__TINYC__) && !defined(BPT__SANITIZED) && defined(__x86_64__) && \
    (defined(__GNUC__) || defined(__clang__))
#  define BPT__INTREGS __attribute__((target("general-regs-only")))
/* >>keeps regs: on x86-64 the count path is also built with
   no_caller_saved_registers: it saves and restores each integer register
   it uses (gcc: 4 pushes, clang: 7), but rax, its result. The
   entry stub's count route then saves only rax and its argument register
   before the call, not all eight argument registers (site_x86_64.c).
   EFLAGS aside, which no function's entry holds live. The attribute
   needs the integer registers only: gcc does not save vector state.
   Only where the compiler says it knows the attribute (gcc 7, clang 5):
   one that ignored it would let the count path clobber registers the
   stub no longer saves; elsewhere the stub saves them all, as before. */
#  if defined(__has_attribute)
#    if __has_attribute(no_caller_saved_registers)
#      define BPT__KEEPS_REGS __attribute__((no_caller_saved_registers))
#      define BPT__COUNT_KEEPS_REGS 1
#    endif
#  endif
#elif !defined(__TINYC__) && !defined(BPT__SANITIZED) && defined(__aarch64__) && \
    defined(__GNUC__) && !defined(__clang__)
/* gcc for aarch64 would also call libgcc's out-of-line atomics (a call,
   though to code that uses x0-x3, x16, x17 alone): inline instead. */
#  define BPT__INTREGS __attribute__((target("general-regs-only,no-outline-atomics")))
#else
#  define BPT__INTREGS
#  define BPT__COUNT_SAVES_FP 1
#endif
#if !defined(BPT__KEEPS_REGS)
#  define BPT__KEEPS_REGS
#endif
/* An object the x86-64 stub's count route reads by name (site_x86_64.c):
   BPT__ASM_READ at its definition instead of BPT__SHARED, after an extern
   declaration (BPT__ASM_READ_DECL). Where the route is built, a hidden
   global that is kept (used), as a function the stubs call is
   (BPT__ASM_CALLED): gcc's link-time optimization renames a static it
   moves between partitions (bpt__active_ix.lto_priv.0), which a reference
   by name in assembly cannot follow. A global's name is the same in C and
   C++. Elsewhere (no route, BPTRACE_STATIC's copies side by side in a
   program without native sites, a part compiled alone), what BPT__SHARED
   makes. */
#if defined(BPT_NATIVE) && defined(__x86_64__) && defined(BPT__COUNT_KEEPS_REGS) && !defined(BPT__PART_ALONE)
#  define BPT__ASM_READ __attribute__((used, visibility("hidden")))
#  define BPT__ASM_READ_DECL(decl) extern __attribute__((visibility("hidden"))) decl;
#else
#  define BPT__ASM_READ BPT__SHARED
#  define BPT__ASM_READ_DECL(decl)
#endif
/* >>line aligned: the count path starts on a cache line, as the entry
   stub does (.p2align 6, site_x86_64.c and site_aarch64.c). Its common
   case is about 140 bytes: 3 lines from a line's start, 4 from 48 bytes
   into one, where the compiler's 16-byte alignment put it after a change
   elsewhere in the header. Aligned, where it falls no longer moves with
   the rest of the code, nor do the benchmarks with it. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)
#  define BPT__LINE_ALIGNED __attribute__((aligned(64)))
#else
#  define BPT__LINE_ALIGNED
#endif

/* Tests name points of the frame code where a signal handler's nested run
   is to be checked (t_fibers); nothing by default. */
#ifndef BPT_TEST_POINT
#  define BPT_TEST_POINT(where) ((void)0)
#endif

#define BPT__CACHE_LINE 64

/* >>atomics */
#if defined(__TINYC__)
#  if !defined(__x86_64__)
#    error "bptrace: tcc is supported on x86-64 only"
#  endif
#  define BPT__ASM_ATOMICS 1
typedef volatile uint32_t bpt__atomic_u32;
typedef volatile uint64_t bpt__atomic_u64;
typedef void *volatile    bpt__atomic_ptr;
#  define bpt__compiler_barrier() __asm__ __volatile__("" ::: "memory")

BPT__PRIVATE uint32_t bpt__load_relaxed_u32(bpt__atomic_u32 *p) { return *p; }
BPT__PRIVATE uint64_t bpt__load_relaxed_u64(bpt__atomic_u64 *p) { return *p; }
BPT__PRIVATE void *bpt__load_relaxed_ptr(bpt__atomic_ptr *p) { return *p; }
/* TSO: a load is not reordered with later loads or stores; the barrier keeps tcc from doing so. */
BPT__PRIVATE uint32_t bpt__load_acquire_u32(bpt__atomic_u32 *p) { uint32_t v = *p; bpt__compiler_barrier(); return v; }
BPT__PRIVATE uint64_t bpt__load_acquire_u64(bpt__atomic_u64 *p) { uint64_t v = *p; bpt__compiler_barrier(); return v; }
BPT__PRIVATE void *bpt__load_acquire_ptr(bpt__atomic_ptr *p) { void *v = *p; bpt__compiler_barrier(); return v; }
BPT__PRIVATE void bpt__store_relaxed_u32(bpt__atomic_u32 *p, uint32_t v) { *p = v; }
BPT__PRIVATE void bpt__store_relaxed_u64(bpt__atomic_u64 *p, uint64_t v) { *p = v; }
BPT__PRIVATE void bpt__store_relaxed_ptr(bpt__atomic_ptr *p, void *v) { *p = v; }
/* TSO: a store is not reordered with earlier loads or stores. */
BPT__PRIVATE void bpt__store_release_u32(bpt__atomic_u32 *p, uint32_t v) { bpt__compiler_barrier(); *p = v; }
BPT__PRIVATE void bpt__store_release_u64(bpt__atomic_u64 *p, uint64_t v) { bpt__compiler_barrier(); *p = v; }
BPT__PRIVATE void bpt__store_release_ptr(bpt__atomic_ptr *p, void *v) { bpt__compiler_barrier(); *p = v; }
/* xchg with memory is implicitly locked: a full barrier. */
BPT__PRIVATE void bpt__store_seq_cst_u32(bpt__atomic_u32 *p, uint32_t v) {
    __asm__ __volatile__("xchgl %0, %1" : "+r"(v), "+m"(*p) : : "memory");
}
BPT__HOT BPT__INTREGS uint64_t bpt__fetch_add_u64(bpt__atomic_u64 *p, uint64_t v) {
    __asm__ __volatile__("lock; xaddq %0, %1" : "+r"(v), "+m"(*p) : : "memory");
    return v;
}
BPT__PRIVATE uint32_t bpt__fetch_add_u32(bpt__atomic_u32 *p, uint32_t v) {
    __asm__ __volatile__("lock; xaddl %0, %1" : "+r"(v), "+m"(*p) : : "memory");
    return v;
}
BPT__PRIVATE int bpt__cas_u32(bpt__atomic_u32 *p, uint32_t expected, uint32_t desired) {
    uint32_t prev = expected;
    __asm__ __volatile__("lock; cmpxchgl %2, %1" : "+a"(prev), "+m"(*p) : "r"(desired) : "memory");
    return prev == expected;
}
BPT__PRIVATE int bpt__cas_u64(bpt__atomic_u64 *p, uint64_t expected, uint64_t desired) {
    uint64_t prev = expected;
    __asm__ __volatile__("lock; cmpxchgq %2, %1" : "+a"(prev), "+m"(*p) : "r"(desired) : "memory");
    return prev == expected;
}
BPT__PRIVATE int bpt__cas_ptr(bpt__atomic_ptr *p, void *expected, void *desired) {
    return bpt__cas_u64((bpt__atomic_u64 *)(void *)p, (uint64_t)(uintptr_t)expected,
                        (uint64_t)(uintptr_t)desired);
}
BPT__PRIVATE void bpt__fence_seq_cst(void) { __asm__ __volatile__("mfence" ::: "memory"); }
BPT__PRIVATE void bpt__cpu_relax(void) { __asm__ __volatile__("pause" ::: "memory"); }

#elif defined(__cplusplus)   /* g++, clang++: the __atomic builtins on plain types */
/* C++ has no _Atomic before C++23 (and <atomic>'s std::atomic is not a C
   type): the implementation compiled in a C++ file uses the builtins that
   gcc and clang build C11's atomics from, with the same orders. A C build
   keeps the _Atomic types, which make any plain access a compile error. */
typedef uint32_t bpt__atomic_u32;
typedef uint64_t bpt__atomic_u64;
typedef void *bpt__atomic_ptr;
#  define bpt__compiler_barrier() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#  define BPT__ATOMIC_OPS(suffix, T, A) \
    BPT__HOT BPT__INTREGS T bpt__load_relaxed_##suffix(A *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); } \
    BPT__HOT BPT__INTREGS T bpt__load_acquire_##suffix(A *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); } \
    BPT__HOT BPT__INTREGS void bpt__store_relaxed_##suffix(A *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); } \
    BPT__HOT BPT__INTREGS void bpt__store_release_##suffix(A *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); } \
    BPT__PRIVATE int bpt__cas_##suffix(A *p, T expected, T desired) { \
        return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE); }
BPT__ATOMIC_OPS(u32, uint32_t, bpt__atomic_u32)
BPT__ATOMIC_OPS(u64, uint64_t, bpt__atomic_u64)
BPT__ATOMIC_OPS(ptr, void *, bpt__atomic_ptr)
#  undef BPT__ATOMIC_OPS
BPT__PRIVATE void bpt__store_seq_cst_u32(bpt__atomic_u32 *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
BPT__HOT BPT__INTREGS uint64_t bpt__fetch_add_u64(bpt__atomic_u64 *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
BPT__PRIVATE uint32_t bpt__fetch_add_u32(bpt__atomic_u32 *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
BPT__HOT BPT__INTREGS void bpt__fence_seq_cst(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#  define BPT__CPU_RELAX_ARCH 1

#else /* gcc, clang: C11 atomics */
#  include <stdatomic.h>
typedef _Atomic(uint32_t) bpt__atomic_u32;
typedef _Atomic(uint64_t) bpt__atomic_u64;
typedef _Atomic(void *)   bpt__atomic_ptr;
#  define bpt__compiler_barrier() atomic_signal_fence(memory_order_seq_cst)
#  define BPT__ATOMIC_OPS(suffix, T, A) \
    BPT__HOT BPT__INTREGS T bpt__load_relaxed_##suffix(A *p) { return atomic_load_explicit(p, memory_order_relaxed); } \
    BPT__HOT BPT__INTREGS T bpt__load_acquire_##suffix(A *p) { return atomic_load_explicit(p, memory_order_acquire); } \
    BPT__HOT BPT__INTREGS void bpt__store_relaxed_##suffix(A *p, T v) { atomic_store_explicit(p, v, memory_order_relaxed); } \
    BPT__HOT BPT__INTREGS void bpt__store_release_##suffix(A *p, T v) { atomic_store_explicit(p, v, memory_order_release); } \
    BPT__PRIVATE int bpt__cas_##suffix(A *p, T expected, T desired) { \
        return atomic_compare_exchange_strong_explicit(p, &expected, desired, \
                   memory_order_acq_rel, memory_order_acquire); }
BPT__ATOMIC_OPS(u32, uint32_t, bpt__atomic_u32)
BPT__ATOMIC_OPS(u64, uint64_t, bpt__atomic_u64)
BPT__ATOMIC_OPS(ptr, void *, bpt__atomic_ptr)
#  undef BPT__ATOMIC_OPS
BPT__PRIVATE void bpt__store_seq_cst_u32(bpt__atomic_u32 *p, uint32_t v) { atomic_store_explicit(p, v, memory_order_seq_cst); }
BPT__HOT BPT__INTREGS uint64_t bpt__fetch_add_u64(bpt__atomic_u64 *p, uint64_t v) { return atomic_fetch_add_explicit(p, v, memory_order_acq_rel); }
BPT__PRIVATE uint32_t bpt__fetch_add_u32(bpt__atomic_u32 *p, uint32_t v) { return atomic_fetch_add_explicit(p, v, memory_order_acq_rel); }
BPT__HOT BPT__INTREGS void bpt__fence_seq_cst(void) { atomic_thread_fence(memory_order_seq_cst); }
#  define BPT__CPU_RELAX_ARCH 1
#endif

#if defined(BPT__CPU_RELAX_ARCH)   /* gcc and clang, C or C++ (tcc's is above) */
BPT__PRIVATE void bpt__cpu_relax(void) {
#  if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause" ::: "memory");
#  elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#  else
    bpt__compiler_barrier();
#  endif
}
#endif

/* A counter that only its owner thread writes: a relaxed load and store, no
   locked instruction, read by others with a relaxed load. */
BPT__HOT BPT__INTREGS void bpt__owner_inc_u64(bpt__atomic_u64 *p, uint64_t v) {
    bpt__store_relaxed_u64(p, bpt__load_relaxed_u64(p) + v);
}

/* The same, by one, as one instruction where the machine has a
   read-modify-write of memory without a lock: x86-64's `addq $1, m`. A
   signal interrupts a thread between instructions, so a handler on the
   owner's thread sees the counter before or after the add, never in the
   middle, and its own add is kept; other CPUs see one aligned 8-byte write
   (not atomic across CPUs, which an owner-only counter does not need).
   Linux's this_cpu_inc on x86 is this instruction for the same reason.
   aarch64 has none (ldr, add, str), so BPT__SIGNAL_ATOMIC_INC stays
   undefined there and the caller guards the update itself (kind_count.c). */
#if defined(__x86_64__)
#  define BPT__SIGNAL_ATOMIC_INC 1
BPT__HOT BPT__INTREGS void bpt__owner_inc1_u64(bpt__atomic_u64 *p) {
    uint64_t *q = (uint64_t *)(void *)p;
    /* "=m" with "m" (read and written) rather than "+m", with which gcc
       puts the address in a register first instead of indexing. */
    __asm__ __volatile__("addq $1, %0" : "=m"(*q) : "m"(*q));
}

/* >>cpuid: CPUID's extended leaf `leaf` (0x80000001 and up) into r: eax,
   ebx, ecx, edx. Leaf 0x80000000 says the highest extended leaf the
   processor has, so it is asked first (Intel SDM vol. 2A, CPUID; AMD's
   APM vol. 3). Returns 1, or 0 with r all 0 where there is no such leaf.
   For the TSC's invariance (clock.c) and prefetchw (site_x86_64.c). */
BPT__PRIVATE int bpt__cpuid_ext(uint32_t leaf, uint32_t r[4]) {
    uint32_t a = 0x80000000u, b, c = 0, d;
    r[0] = r[1] = r[2] = r[3] = 0;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    if (a < leaf) return 0;
    a = leaf;
    c = 0;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    r[0] = a;
    r[1] = b;
    r[2] = c;
    r[3] = d;
    return 1;
}
#endif

/* >>tls: thread-locals. tcc has no __thread, so it keeps the one per-thread
   pointer bptrace needs (the thread record) in a pthread key, which it needs
   anyway for the exit destructor. gcc and clang use the initial-exec model:
   one load from the thread pointer on every pin, also when bptrace is built
   into a shared library (the general-dynamic default calls __tls_get_addr
   there). glibc keeps room in the static TLS block for a library loaded
   later with a few bytes of it, as this 8-byte pointer. */
#if defined(__TINYC__)
#  define BPT__TLS_BY_KEY 1
#else
#  define BPT__THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))
#endif

BPT__PRIVATE uint32_t bpt__gettid(void) { return (uint32_t)syscall(SYS_gettid); }

/* >>hit memory: what a hit allocates (a thread's record, shadow stacks,
   trace buffers, count pages) comes from mmap, never from malloc: a hit may
   be inside malloc (a program's own traced malloc, or a signal handler
   that interrupted it), and mmap runs no user code, takes no user-space
   lock and is async-signal-safe. Zero-filled. NULL when refused; errno is
   kept (the hit may be a handler's). BPT_HIT_MAP/BPT_HIT_UNMAP replace the
   pair (a test's failure injection). */
BPT__PRIVATE void *bpt__hit_map(size_t n) {
    int saved = errno;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return p == MAP_FAILED ? NULL : p;
}
BPT__PRIVATE void bpt__hit_unmap(void *p, size_t n) {
    int saved = errno;
    if (p) munmap(p, n);
    errno = saved;
}

/* >>futex: sleep while *word == expected; wake up to n sleepers. Private
   futexes: the word is never shared with another process. Spurious returns
   (EINTR, EAGAIN) are fine: every caller re-checks its condition. */
BPT__PRIVATE void bpt__futex_wait(bpt__atomic_u32 *word, uint32_t expected) {
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
/* The same, for at most timeout_us microseconds. */
BPT__PRIVATE void bpt__futex_wait_us(bpt__atomic_u32 *word, uint32_t expected, uint32_t timeout_us) {
    struct timespec rel;
    rel.tv_sec = (time_t)(timeout_us / 1000000u);
    rel.tv_nsec = (long)(timeout_us % 1000000u) * 1000;
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, &rel, NULL, 0);
}
BPT__PRIVATE void bpt__futex_wake(bpt__atomic_u32 *word, int n) {
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* >>membarrier: the heavy barrier of an asymmetric fence pair.
   membarrier(PRIVATE_EXPEDITED) makes every running thread of this process
   execute a full memory barrier before it returns (an IPI to each CPU that
   runs one of them), so readers may use a compiler barrier where they would
   otherwise need a fence. SYNC_CORE also serializes each thread's
   instruction stream, as needed after writing code.
   The commands are spelled out rather than taken from <linux/membarrier.h>,
   which old kernels' headers lack. */
enum {
    BPT__MEMBARRIER_CMD_QUERY = 0,
    BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED = 1 << 3,
    BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4,
    BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 5,
    BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 6
};

BPT__PRIVATE long bpt__membarrier(int cmd) {
    if (cmd == BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED) BPT_TEST_POINT("membarrier: PRIVATE_EXPEDITED");
    if (cmd == BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) BPT_TEST_POINT("membarrier: SYNC_CORE");
#if defined(SYS_membarrier)
    return syscall(SYS_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    errno = ENOSYS;
    return -1;
#endif
}

/* Register a membarrier command: 1 if it can be used from now on, 0 if the
   kernel refused (ENOSYS: too old or seccomp; EINVAL: command unknown;
   EPERM: forbidden), and the caller falls back. */
BPT__PRIVATE int bpt__membarrier_register(int query_bit, int register_cmd) {
#if defined(BPT_NO_MEMBARRIER)
    (void)query_bit; (void)register_cmd;
    return 0;
#else
    long supported = bpt__membarrier(BPT__MEMBARRIER_CMD_QUERY);
    if (supported < 0 || !(supported & query_bit)) return 0;
    return bpt__membarrier(register_cmd) == 0;
#endif
}

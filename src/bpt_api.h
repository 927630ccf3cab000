/* bptrace.h - v0.1.0 - BEAM-style live tracing for any C program, as one header.

   bptrace brings Erlang/OTP's breakpoint machinery (beam_bp.c, erl_thr_progress.c,
   Tracing.md) to C programs, game engines and embedded interpreters: switch call
   tracing and call counting on and off for any function while every thread of
   the program keeps running. Nothing is ever stopped: a pattern change is a
   sequence of staged writes and thread-progress waits (the 13 steps of
   Tracing.md), and every hit reads one consistent generation of its settings.

   DO THIS IN ONE FILE (and only one) before you include this header:

       #define BPTRACE_IMPLEMENTATION
       #include "bptrace.h"

   Every other file just includes it. Link with -pthread.

   TABLE OF CONTENTS (search for ">>name" to jump to a section)
       >>config      compile-time options
       >>errors      BPT_E* codes, bpt_strerror, bpt_last_error
       >>progress    thread progress: pin/unpin, waits, managed threads
       >>session     trace sessions, tracers, message rings, rate limits
       >>func        function records and VM instruction-word sites; VM return frames
       >>pattern     bpt_trace_pattern, match specs, trace info
       >>format      dbg-style text
       >>observe     the protocol observer (teaching and tests)
       The implementation parts follow, each between "Begin file X" and "End of X" banners.

   COMPILE-TIME OPTIONS (>>config)
       Set these before including the header. "Everywhere" means every file that
       includes bptrace.h must see the same value; "implementation" means only
       the file that defines BPTRACE_IMPLEMENTATION reads it.

       BPTRACE_STATIC     everywhere      Make every definition static (header used in one file only).
       BPT_API            everywhere      Override the declaration prefix (default: extern, or static
                                          under BPTRACE_STATIC).
       BPT_ASSERT(c)      implementation  Internal assertion (default: assert from <assert.h>).
       BPT_MALLOC(n)      implementation  Allocator (default: malloc). Every allocation on the
       BPT_FREE(p)        implementation  trace_pattern and session paths goes through it; a NULL
                                          return gives BPT_ENOMEM and changes nothing.
       BPT_MAX_THREADS    implementation  Per-thread slots (message rings, later timing tables).
                                          Default 64. Threads beyond it share one overflow slot.
       BPT_MAX_SESSIONS   implementation  Trace sessions alive at once. Default 64.
       BPT_NO_NATIVE      everywhere      Leave out native entry patching (BPT_TRACEABLE expands to
                                          nothing; bpt_register_native returns BPT_ENOTSUP).
       BPT_NO_MEMBARRIER  implementation  Never use membarrier(2): readers pay a full fence on pin.
                                          For kernels without it, and for tests of the fallback.
       BPT_SYNC_CORE_SIGNAL implementation The signal that serializes threads' instruction streams
                                          where membarrier SYNC_CORE is missing. Default SIGRTMIN+7.
       BPT_SHADOW_FRAMES  implementation  Return-trace frames per thread (native and VM stacks each).
                                          Default 512. Past it a call's return is not traced (counted).
       BPT_FRAME_SESSIONS implementation  Sessions one call's return frame serves. Default 4.

   NATIVE FUNCTIONS (gcc and clang, x86-64 and aarch64)
       Mark a function BPT_TRACEABLE, or compile whole files with the flags
       BPT_TRACEABLE_CFLAGS names (`make print-cflags [CC=clang]` prints them):
           x86-64:  -fpatchable-function-entry=26,24 -falign-functions=16
           aarch64: -fpatchable-function-entry=9,8 -falign-functions=16
           and with gcc also -fno-ipa-ra -fno-ipa-stack-alignment: callers in
           the same file must not assume the function leaves call-clobbered
           registers alone or keeps the stack as it found it.
       Then bpt_register_native(fn, ...) or bpt_register_module(NULL) makes it
       traceable; only one aligned instruction word at its entry ever changes.
       Native tracing needs the implementation in one file per program (its
       entry stubs are assembly with fixed names). On tcc BPT_TRACEABLE is
       empty and native registration returns BPT_ENOTSUP; VM sites still work.

   SUPPORTED
       gcc and clang on x86-64 and aarch64 (C11 <stdatomic.h>, __thread);
       tcc 0.9.27 on x86-64 (x86-64 inline asm atomics, pthread keys for
       thread-locals). Linux only (futex, membarrier). The API half compiles as C++.

   THREAD-SAFETY RULES
       - Every public function may be called from any thread.
       - Set-path calls (bpt_register_*, bpt_unregister, bpt_trace_pattern,
         bpt_session_create/destroy, bpt_trace_info) take the one code
         modification permission: they serialize with each other, and they wait
         for thread progress. They must not be called from a tracer callback or a
         signal handler (they return BPT_EDEADLK from a tracer callback).
       - Hit-path calls (bpt_vm_breakpoint, bpt_thread_progress_pin/unpin) never
         block and never take a lock, except that a thread's first message to a
         session allocates that thread's ring. They are async-signal-safe once
         the calling thread has a ring (a signal handler may pin and hit); a
         hit in a handler that interrupts its own thread's message send drops
         its message, counted in the session's dropped count.
       - bpt_session_drain may run concurrently with traced threads; one drainer
         per session at a time (others wait on the session's drain lock).

   LICENSE
       MIT. See the end of this file.
*/
#if defined(BPTRACE_IMPLEMENTATION) && !defined(_GNU_SOURCE)
/* syscall() and clock_gettime() under -std=c99: include bptrace.h first in
   the implementation file, or compile that file with -D_GNU_SOURCE. */
#  define _GNU_SOURCE
#endif
#ifndef BPTRACE_H
#define BPTRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BPTRACE_VERSION_MAJOR 0
#define BPTRACE_VERSION_MINOR 1
#define BPTRACE_VERSION_PATCH 0
#define BPTRACE_VERSION "0.1.0"

/* >>config: BPT_TRACEABLE reserves the patchable entry bptrace needs
   (DESIGN §4.2, §4.3): pre-entry padding for the function record pointer, the
   stub address and the call into the stub, and one word at the entry.
   noipa (gcc) keeps callers from relying on what the function's body does:
   gcc's IPA register allocation would keep values in call-clobbered
   registers that bptrace's hit path uses, and its IPA stack alignment would
   call it with a misaligned stack. Whole files need the same, hence the
   -fno-ipa-* flags in BPT_TRACEABLE_CFLAGS for gcc (clang has neither). */
#if !defined(BPT_NO_NATIVE) && (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__) && \
    (defined(__x86_64__) || defined(__aarch64__))
#  define BPT_NATIVE 1
#  if defined(__clang__)
#    define BPT__NOIPA noinline
#    define BPT__NOIPA_FLAGS ""
#  else
#    define BPT__NOIPA noipa
#    define BPT__NOIPA_FLAGS " -fno-ipa-ra -fno-ipa-stack-alignment"
#  endif
#  if defined(__x86_64__)
#    define BPT_TRACEABLE __attribute__((patchable_function_entry(26, 24), aligned(16), BPT__NOIPA))
#    define BPT_TRACEABLE_CFLAGS "-fpatchable-function-entry=26,24 -falign-functions=16" BPT__NOIPA_FLAGS
#  else
#    define BPT_TRACEABLE __attribute__((patchable_function_entry(9, 8), aligned(16), BPT__NOIPA))
#    define BPT_TRACEABLE_CFLAGS "-fpatchable-function-entry=9,8 -falign-functions=16" BPT__NOIPA_FLAGS
#  endif
#else
#  define BPT_TRACEABLE
#  define BPT_TRACEABLE_CFLAGS ""
#endif

/* >>config: the declaration macro chain, as sokol's SOKOL_API_DECL. */
#ifndef BPT_API
#  ifdef BPTRACE_STATIC
#    define BPT_API static
#  else
#    define BPT_API extern
#  endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>errors
   One X-macro list gives every error a name, a value and a message. Every
   function that can fail returns 0 (or a count) on success and a negative
   BPT_E* on failure; bpt_last_error() then says why, in words, for the
   calling thread. Every function that returns a code may also return
   BPT_ENOMEM on a thread's first bptrace call, when that thread's record (a
   one-time allocation) cannot be made; nothing changes then. */
#define BPT_ERRORS(X) \
    X(BPT_OK,             0,  "success") \
    X(BPT_EINVAL,        -1,  "invalid argument") \
    X(BPT_ENOMEM,        -2,  "out of memory") \
    X(BPT_EPATTERN,      -3,  "malformed trace pattern") \
    X(BPT_EFLAGS,        -4,  "unknown or conflicting trace flags") \
    X(BPT_ESESSION,      -5,  "no such trace session (never created, or destroyed)") \
    X(BPT_EBUSY,         -6,  "function is traced by a session; remove its trace patterns first") \
    X(BPT_EDEADLK,       -7,  "the call would wait for its own thread (tracer callback, pinned section, or callback under the permission)") \
    X(BPT_ENOENT,        -8,  "not found (no such function, module or file)") \
    X(BPT_EEXIST,        -9,  "already registered") \
    X(BPT_ENOTSUP,      -10,  "not supported on this compiler or architecture") \
    X(BPT_EPERM,        -11,  "the system refused the operation (mprotect)") \
    X(BPT_ENOTPATCHABLE,-12,  "function entry is not patchable") \
    X(BPT_ELIMIT,       -13,  "a fixed limit was reached (sessions, name length)")

enum bpt_error {
#define BPT__ERROR_ENUM(name, value, text) name = value,
    BPT_ERRORS(BPT__ERROR_ENUM)
#undef BPT__ERROR_ENUM
    BPT__ERROR_END = 1
};

/* bpt_strerror: the fixed message of an error code.
   In: code, a BPT_E* value (or anything else). Out: a static string, never NULL;
   "unknown error" for a value that is not a BPT_E*. Thread-safe. */
BPT_API const char *bpt_strerror(int code);

/* bpt_last_error: why the calling thread's last failing bptrace call failed.
   Out: a thread-local string (valid until this thread's next failing call),
   e.g. "bpt_trace_pattern: 'vm:fib' has no '/arity'"; "" if none failed yet.
   Thread-safe: each thread sees only its own message. */
BPT_API const char *bpt_last_error(void);

/* >>progress
   Thread progress: an epoch mechanism in the manner of ERTS erl_thr_progress.c
   and liburcu's memb flavour. Readers pin around every use of breakpoint data;
   a waiter learns that every thread has left the pins that were in force
   when the wait began.
   The first use of thread progress registers membarrier(2). Registering
   while other threads already run costs the kernel a grace period (tens of
   ms, once): a program that starts its threads first pays it in its first
   pin or wait. Calling bpt_thread_progress_stats() early, while the program
   is still single-threaded, moves that cost out of the way. */

/* bpt_thread_progress_pin / _unpin: enter / leave a read-side section.
   Nests (counted), also from a signal handler that interrupts a pinned
   section. The first pin of a thread creates its thread record (a one-time
   allocation). A pin costs an acquire load and a store, plus a full fence when
   membarrier(2) is unavailable; a managed online thread's pin costs nothing.
   Never blocks. Unpin wakes a waiter sleeping on this thread; an unpin
   without a pin is ignored.
   Thread-safe; async-signal-safe once the thread has its record.
   Source: rcu_read_lock/unlock in liburcu urcu-memb. */
BPT_API void bpt_thread_progress_pin(void);
BPT_API void bpt_thread_progress_unpin(void);

/* bpt_thread_progress_wait: wait until every thread has passed a quiescent
   point since this call began.
   On return, every pin section that was in force when the call began has
   ended, managed online threads have called bpt_thread_progress() since, and
   all stores made before the call are visible to every thread.
   Offline managed threads, exited threads and unpinned threads never delay
   it. It spins briefly, then sleeps on a futex; it takes no lock that a
   reader takes. Returns 0, or BPT_EDEADLK when called by a pinned thread or
   from a tracer callback (it would wait for itself).
   Thread-safe: concurrent waiters are serialized.
   Source: erts_thr_progress_block / synchronize_rcu. */
BPT_API int bpt_thread_progress_wait(void);

/* bpt_thread_progress_wait_sync_core: as bpt_thread_progress_wait, and in
   addition every running thread of the process has serialized its instruction
   stream (membarrier PRIVATE_EXPEDITED_SYNC_CORE, or a signal to each thread
   with a record where that is missing). Use after writing code.
   Errors: BPT_EDEADLK as above. Source: Linux text_poke_sync. */
BPT_API int bpt_thread_progress_wait_sync_core(void);

/* bpt_thread_progress_register_managed: declare the calling thread managed,
   as ERTS managed threads. It then promises to call bpt_thread_progress() at
   quiescent points (e.g. once per frame) and to go offline before blocking;
   in exchange its pins cost nothing. Where it blocks inside bptrace (a
   set-path call, a wait) bptrace takes it offline meanwhile. Waiters wait for its next
   bpt_thread_progress(). Returns 0, BPT_EINVAL if called while pinned,
   BPT_ENOMEM if its record cannot be allocated. Thread-safe (acts on the caller). */
BPT_API int bpt_thread_progress_register_managed(void);

/* bpt_thread_progress: a managed thread reports a quiescent point: it holds no
   reference to breakpoint data. No-op on unmanaged threads, and ignored inside
   a pinned section or tracer callback (not a quiescent point). Wakes a waiter.
   Never blocks. Source: erts_thr_progress_update. */
BPT_API void bpt_thread_progress(void);

/* bpt_thread_progress_offline / _online: a managed thread leaves (before
   blocking, e.g. in a futex, a condition variable or I/O) and re-enters the
   set of threads that waiters wait for. While offline it must not pin nor hit
   a breakpoint. No-op on unmanaged threads. Never block.
   Source: erts_thr_progress_prepare_wait / erts_thr_progress_finalize_wait. */
BPT_API void bpt_thread_progress_offline(void);
BPT_API void bpt_thread_progress_online(void);

/* What thread progress has done, for tests and benchmarks. */
typedef struct bpt_progress_stats {
    uint64_t epoch;          /* current global epoch (starts at 1) */
    uint64_t waits;          /* completed waits */
    uint64_t futex_sleeps;   /* times a waiter slept on the futex */
    uint64_t futex_wakes;    /* wake-ups readers issued to a sleeping waiter */
    uint32_t threads;        /* thread records in use (live threads that pinned) */
    uint32_t records;        /* thread records ever created (they are reused) */
    int      membarrier;     /* 1: light pins (membarrier registered), 0: fence pins */
    int      sync_core;      /* 1: membarrier SYNC_CORE registered, 0: signal fallback */
} bpt_progress_stats;

/* bpt_thread_progress_stats: fill *out (NULL gives BPT_EINVAL). Counters are
   read without a lock, so they are each exact but not a snapshot. Thread-safe. */
BPT_API int bpt_thread_progress_stats(bpt_progress_stats *out);

/* >>session
   A trace session is an isolated set of trace settings with one tracer, as
   OTP 27's trace:session_create/3. Handles are weak ids (a generation and a
   slot, as sokol's resource handles): a stale handle gives BPT_ESESSION, never
   a crash, and a late message of a dead session is dropped. */
typedef struct bpt_session { uint64_t id; } bpt_session;

/* Message types. */
enum bpt_msg_type {
    BPT_MSG_CALL    = 1,  /* a traced call: func, args */
    BPT_MSG_DROPPED = 2,  /* value = messages this thread's ring dropped since the last report */
    BPT_MSG_LIMIT   = 3,  /* the rate limit tripped; the session traced nothing after it */
    BPT_MSG_RETURN_FROM    = 4,  /* func returned: value, value_type */
    BPT_MSG_EXCEPTION_FROM = 5,  /* func was unwound: exception_class, value */
    BPT_MSG_RETURN_TO      = 6   /* execution resumes in func (module NULL: unknown code at caller) */
};

enum { BPT_MAX_ARGS = 8, BPT_MSG_STR_BYTES = 48 };

/* How an argument is read and shown (an argument spec names them, as
   uftrace's -A does: "i64,ptr,str,f64"). */
enum bpt_arg_type {
    BPT_ARG_I64 = 0,   /* signed integer register (the default) */
    BPT_ARG_U64 = 1,   /* unsigned integer register */
    BPT_ARG_PTR = 2,   /* integer register, shown in hex */
    BPT_ARG_STR = 3,   /* char * in an integer register: the string is copied */
    BPT_ARG_F64 = 4    /* double in the next floating-point register (native sites) */
};

typedef struct bpt_func bpt_func;

/* A value formatter: write value as text into buf (size bytes, always NUL
   terminated), return the length it wanted, as snprintf. */
typedef int (*bpt_format_fn)(char *buf, size_t size, uint64_t value);

/* One trace message. Names point into bptrace's interned strings and stay
   valid until the process exits, so a message outlives its function. */
typedef struct bpt_msg {
    uint16_t type;         /* enum bpt_msg_type */
    uint16_t nargs;        /* valid entries of args[] */
    uint32_t thread;       /* OS thread id (gettid) of the traced thread */
    uint64_t process;      /* the process the call ran in (default: the OS thread id) */
    uint64_t ts_ns;        /* CLOCK_MONOTONIC, ns */
    uint64_t session;      /* the session's weak id */
    const char *module;    /* function, or NULL for DROPPED / LIMIT */
    const char *name;
    int arity;
    bpt_format_fn format;  /* the site's argument formatter, or NULL for decimal */
    const char *user;      /* the match spec's message, or NULL */
    uint64_t value;        /* DROPPED: count; RETURN_FROM: the return value; EXCEPTION_FROM: the exception */
    uint8_t  value_type;   /* RETURN_FROM: enum bpt_arg_type of value (F64: the double's bits) */
    const char *exception_class; /* EXCEPTION_FROM: "throw" (bpt_vm_unwind) or "unwind" (native) */
    const char *caller_module;   /* CALL with BPT_CALLER: the function the call returns to, */
    const char *caller_name;     /* NULL if unknown (not a registered function) */
    int caller_arity;
    uint64_t caller;             /* CALL with BPT_CALLER, RETURN_TO: the return address (native), 0 (VM) */
    uint64_t args[BPT_MAX_ARGS];       /* F64: the double's bits; STR: offset into str */
    uint8_t  argtype[BPT_MAX_ARGS];    /* enum bpt_arg_type */
    char     str[BPT_MSG_STR_BYTES];   /* STR arguments, NUL-separated, truncated to fit */
} bpt_msg;

/* A callback tracer runs in the traced thread, inside the hit path: it must
   not block for long and must not call set-path functions (BPT_EDEADLK).
   Breakpoints hit from inside it are counted but send no messages. */
typedef void (*bpt_tracer_fn)(const bpt_msg *msg, void *user);

/* Session settings. Zero-initialise and set what you need; zero means default. */
typedef struct bpt_session_desc {
    const char   *name;        /* copied; default "session" (at most 63 bytes) */
    bpt_tracer_fn tracer;      /* callback tracer; NULL: per-thread message rings */
    void         *tracer_user;
    uint32_t      ring_size;   /* messages per thread ring, rounded up to a power
                                  of two, at least 2; default 1024, at most 1<<20 */
    uint64_t      rate_max;    /* recon_trace limit: at most rate_max messages ... */
    uint32_t      rate_per_ms; /* ... in every window of this many ms (0: in all) */
} bpt_session_desc;

/* bpt_session_create: create a trace session.
   In: desc (NULL gives the defaults). Out: *out, the session handle.
   Returns 0; BPT_EINVAL (out NULL, ring_size over 1<<20, rate_per_ms without
   rate_max); BPT_ELIMIT (BPT_MAX_SESSIONS alive, or a name over 63 bytes);
   BPT_ENOMEM. Thread-safe (set path). Source: trace:session_create/3 (OTP 27). */
BPT_API int bpt_session_create(const bpt_session_desc *desc, bpt_session *out);

/* bpt_session_destroy: clear every breakpoint of the session through the 13
   steps, then free it after a thread progress wait. Messages still in its
   rings are discarded; frames and messages that outlive it do nothing.
   Returns 0; BPT_ESESSION for a stale or destroyed handle (a double destroy);
   BPT_EDEADLK from a tracer callback; BPT_ENOMEM (the session is unchanged);
   BPT_EPERM (destroyed, but mprotect refused restoring some native words:
   they find no breakpoint and cost a stub round trip). Thread-safe (set path).
   Source: trace:session_destroy/1. */
BPT_API int bpt_session_destroy(bpt_session s);

/* bpt_session_drain: move up to max messages from the session's rings into out.
   Returns how many (0..max), thread by thread, each thread's in order;
   BPT_ESESSION (stale handle), BPT_EINVAL (out NULL with max > 0, max < 0).
   A session with a callback tracer has nothing to drain (returns 0).
   Never blocks a traced thread. Thread-safe: one drainer at a time per session. */
BPT_API int bpt_session_drain(bpt_session s, bpt_msg *out, int max);

typedef struct bpt_session_counts {
    uint64_t produced;   /* messages the session generated (delivered + dropped + pending) */
    uint64_t delivered;  /* handed to the callback tracer, or drained */
    uint64_t dropped;    /* lost to full rings (a traced thread never waits) */
    uint64_t limited;    /* hits suppressed after the rate limit tripped */
    uint64_t frames_skipped; /* calls whose return was not traced: the thread's shadow stack
                                was full (BPT_SHADOW_FRAMES), or it served BPT_FRAME_SESSIONS */
    int      limit_tripped;
    char     name[64];
} bpt_session_counts;

/* bpt_session_stats: fill *out. Returns 0, BPT_ESESSION, BPT_EINVAL (out NULL).
   Counters are each exact, read without stopping anyone. Thread-safe. */
BPT_API int bpt_session_stats(bpt_session s, bpt_session_counts *out);

/* >>func
   A function record (bpt_func, BEAM's ErtsCodeInfo) names one instrumentable
   function and owns its site: here, a VM instruction word. */

/* How a VM lets bptrace read a call's arguments, print values and name a
   call's caller. Zero-initialise it or use designated initializers: fields
   are added over time (caller came with return trace), and NULL always means
   "not provided". */
typedef uint64_t (*bpt_vm_arg_fn)(const void *frame, int index);
typedef bpt_func *(*bpt_vm_caller_fn)(const void *frame);
typedef struct bpt_vm_ops {
    bpt_vm_arg_fn arg;      /* argument index of the frame given to bpt_vm_breakpoint; NULL: no args */
    bpt_format_fn format;   /* how to print an argument; NULL: decimal. Must stay valid for
                               the life of the process (messages keep it). */
    bpt_vm_caller_fn caller;/* the registered function the call returns to, or NULL (unknown):
                               for BPT_CALLER and BPT_RETURN_TO. NULL: always unknown. */
} bpt_vm_ops;

/* A VM instruction word: the interpreter's dispatch word (a label address
   in threaded code, or an opcode). bptrace stores it with one aligned atomic
   store; the VM must load it with BPT_VM_FETCH (one relaxed atomic load). */
typedef uintptr_t bpt_vm_word;
#if defined(__GNUC__) && !defined(__TINYC__)
#  define BPT_VM_FETCH(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#else
#  define BPT_VM_FETCH(p) (*(volatile bpt_vm_word *)(p))
#endif

/* bpt_register_vm: register a VM site.
   In: first_word, the address of the function's first instruction word (the
   VM keeps it at that address while registered); breakpoint_word, the word of
   the VM's breakpoint opcode (must differ from *first_word); module, name
   (copied, interned; at most 127 bytes each), arity 0..255; ops (may be NULL;
   must stay valid while registered). Out: *out, the function record.
   Trace patterns already set by any session apply to it at once, through the
   13 steps, without stopping any thread.
   Returns 0; BPT_EINVAL (a NULL, arity out of range, breakpoint_word equal to
   the first word); BPT_EEXIST (first_word already registered); BPT_ELIMIT (a
   name too long); BPT_ENOMEM (nothing registered, *out untouched); and, with
   *out set, BPT_ENOMEM or BPT_EPERM when the function IS registered but a
   remembered pattern could not be applied to it (bpt_last_error says which;
   apply it again with bpt_trace_pattern). Thread-safe (set path).
   Source: BEAM's code loading plus erts_set_trace_pattern's default patterns. */
BPT_API int bpt_register_vm(bpt_vm_word *first_word, bpt_vm_word breakpoint_word,
                            const char *module, const char *name, int arity,
                            const bpt_vm_ops *ops, bpt_func **out);

/* bpt_register_native: register one BPT_TRACEABLE C function by hand.
   In: fn, the function's address; module, name (copied, interned, at most
   127 bytes each); arity 0..255 (how many integer arguments call messages
   show when the pattern gives no argument spec). Out: *out.
   Checks the entry: the padding must be bptrace's (24 NOP bytes on x86-64,
   8 NOP words on aarch64) and the entry word a 2-byte NOP (gcc 90 90, clang
   66 90) or NOP, optionally after endbr64 / bti c / paciasp; the patched word
   must not cross a cache line. Writes the pre-entry words (function record
   pointer, stub address, call sequence) while nothing can execute them,
   restoring the page to read+execute. Patterns in force apply at once.
   Returns 0; BPT_EINVAL (NULL, arity); BPT_ELIMIT (names); BPT_EEXIST;
   BPT_ENOTPATCHABLE (entry bytes not as compiled by BPT_TRACEABLE;
   bpt_last_error shows them); BPT_EPERM (mprotect refused: the function is
   untouched; the message gives errno, e.g. SELinux execmod or a read-only
   file mapping); BPT_ENOTSUP (tcc, BPT_NO_NATIVE, another architecture);
   BPT_ENOMEM (nothing registered); BPT_EDEADLK; with *out set, the codes of
   bpt_register_vm for a remembered pattern that could not be applied; BPT_ENOTSUP also where a CET shadow stack (x86-64)
   or a guarded control stack (aarch64) is active, which the entry stub's
   redirected return would trip. bptrace does not know the size of a
   function registered by hand, so caller and return_to name it for return
   addresses up to the next registered entry (at most 64 KiB past its own);
   bpt_register_module takes sizes from the ELF symbols and names exactly.
   Thread-safe (set path). Source: DESIGN §4.2-4.4. */
BPT_API int bpt_register_native(void *fn, const char *module, const char *name, int arity, bpt_func **out);

/* bpt_register_module: register every patchable function of a loaded module:
   NULL for the main executable, or the basename ("libfoo.so") or path of a
   shared object. Entries come from its __patchable_function_entries section
   and names from its ELF .symtab (static functions too), else .dynsym. Arity
   is 0 (unknown): give an argument spec in the match spec to see arguments.
   Already registered functions are skipped, and so are bptrace's own (names
   starting with bpt_), which a whole-program build also makes patchable:
   tracing them would recurse. Returns how many functions it
   registered; BPT_ENOENT (not loaded); BPT_EINVAL (malformed ELF);
   BPT_ENOTPATCHABLE (compiled with another architecture's
   -fpatchable-function-entry values: a function symbol lies inside an
   entry's padding; the message names it); BPT_ENOTSUP;
   BPT_EPERM; BPT_ENOMEM (then nothing is registered), except that when a
   remembered pattern cannot be applied the functions stay registered and
   the error says so. Thread-safe (set path). */
BPT_API int bpt_register_module(const char *module);

/* bpt_unregister_module: remove every session's breakpoints from the
   module's functions (the 13 steps), then unregister them. Call it before
   dlclose; the caller guarantees no thread still runs the module's code.
   Returns how many it unregistered; BPT_ENOENT; BPT_EDEADLK; BPT_ENOMEM
   (nothing unregistered; breakpoints already switched off stay off).
   Thread-safe (set path). */
BPT_API int bpt_unregister_module(const char *module);

/* bpt_unregister: forget a function record. It must carry no breakpoint:
   BPT_EBUSY if any session traces it (remove the patterns first). Frees the
   record after a thread progress wait, which covers threads inside
   bpt_vm_breakpoint(f). The caller guarantees, as when unloading code, that
   no thread can still fetch the site's word and call bpt_vm_breakpoint(f)
   afterwards, and that no call of f is still running with a return-trace
   token (its bpt_vm_return would read the freed record, as BEAM's purge
   requires that no process runs old code); VM threads that are managed (as BEAM's schedulers) and report
   progress only between instructions are covered by the wait too.
   Returns 0; BPT_EINVAL (NULL); BPT_ENOENT (not a registered record);
   BPT_EBUSY; BPT_ENOMEM (a native function: no memory for the new index of
   native code that names callers and return_to targets; f stays
   registered); BPT_EDEADLK (see bpt_trace_pattern). Thread-safe (set path). */
BPT_API int bpt_unregister(bpt_func *f);

/* bpt_func_lookup: find a registered function by exact module, name, arity.
   Returns 0 and *out; BPT_EINVAL (a NULL); BPT_ENOENT; BPT_EDEADLK from a
   tracer callback or a pinned section (it takes the code modification
   permission, whose holder may be waiting for that very thread). Thread-safe. */
BPT_API int bpt_func_lookup(const char *module, const char *name, int arity, bpt_func **out);

/* bpt_func_count: how many functions are registered, or BPT_EDEADLK from a
   callback that runs under the permission. Thread-safe. */
BPT_API int bpt_func_count(void);

/* A return-trace frame token (0: none). */
typedef uint64_t bpt_vm_token;

/* bpt_vm_breakpoint: what the VM's breakpoint opcode calls, as BEAM's
   op_i_generic_breakpoint. In: f, the record registered for this site; frame,
   handed back to ops->arg and ops->caller; token, where to say whether the
   VM must push a return-trace frame (NULL: the VM keeps none, and return
   trace of its calls is skipped). Out: the original instruction word, for the
   VM to execute in place of the breakpoint, and *token: 0, or a token the VM
   keeps in a frame of the call (as BEAM pushes a return_trace frame) and
   hands to exactly one of bpt_vm_return or bpt_vm_unwind, on this thread.
   Runs every session's active generation: counts, evaluates match specs,
   sends call messages. Never blocks; takes no lock. Thread-safe and
   async-signal-safe once the thread has a ring in each tracing session. */
BPT_API bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame, bpt_vm_token *token);

/* bpt_vm_return: the call that got token returns value (as the match spec's
   ret type says: i64 by default). Sends return_from (and return_to) to the
   sessions that asked. Frames pushed after token's and not yet returned were
   unwound: they are reported as bpt_vm_unwind reports them (value 0) first.
   A stale or foreign token is ignored. Never blocks. Thread-safe (acts on the
   calling thread's frames); the VM calls it on the thread that hit the
   breakpoint. Source: BEAM's return_trace frame (beam_bp.c erts_trace_return). */
BPT_API void bpt_vm_return(bpt_vm_token token, uint64_t value);

/* bpt_vm_unwind: a throw passes the frame of token, with exception value
   (class "throw"): sends exception_from to the sessions that asked for
   exception trace, and drops the frame (and any pushed after it). As BEAM's
   exception_trace "found while scanning the stack during a throw".
   A stale token is ignored. Never blocks. Thread-safe, as bpt_vm_return. */
BPT_API void bpt_vm_unwind(bpt_vm_token token, uint64_t exception);

/* bpt_unwind_to: the host unwound native frames (longjmp, a C++ throw, a
   coroutine abort) back into the function that calls this: every
   return-trace frame of the calling thread entered at or below sp is
   reported as exception_from (class "unwind", value 0), newest first, and
   dropped. sp: that function's stack pointer or __builtin_frame_address(0)
   (on aarch64 a callee's entry sp can equal it; the function's own entry sp
   is always above). Without this call, bptrace notices such frames at the
   next traced return above them, or when a traced call reuses their place.
   Returns how many frames it dropped, or BPT_EINVAL (sp NULL). Never blocks.
   Thread-safe (acts on the caller).
   Limits: return trace assumes one stack per thread; a thread that switches
   stacks (ucontext fibers, coroutines) must not enable it. */
BPT_API int bpt_unwind_to(const void *sp);

/* bpt_vm_word_at: the word currently stored at a registered site (the
   breakpoint word while installed, the original otherwise). For tests. */
BPT_API bpt_vm_word bpt_vm_word_at(const bpt_func *f);

/* >>pattern */

/* bpt_active_bp_ix: which of the two generations of every breakpoint running
   code reads (0 or 1); the other, bpt_staging_bp_ix(), is where the set path
   stages changes. Step 7 of the protocol (commit) flips them. Thread-safe.
   Source: erts_active_bp_ix / erts_staging_bp_ix in beam_bp.h. */
BPT_API unsigned bpt_active_bp_ix(void);
BPT_API unsigned bpt_staging_bp_ix(void);

/* >>kinds: the breakpoint kinds, one row each: X(NAME, name, flag). NAME
   makes the public flag BPT_NAME; name names the part that implements the
   kind (src/kind_<name>.c, whose hooks src/README.md lists). A new kind is
   a row here and a part of its own. Rows run in this order on a hit.
     BPT_COUNT   call_count: a counter per function, as BEAM's BpCount
     BPT_CALL    local call trace: a call message per call
     BPT_TIME    call_time: calls and own time (ns) per process, per-thread tables
     BPT_MEMORY  call_memory: calls and the bytes bpt_account_memory reported, per process */
#define BPT_KINDS(X) \
    X(COUNT,  count,  1u << 1) \
    X(CALL,   call,   1u << 0) \
    X(TIME,   time,   1u << 6) \
    X(MEMORY, memory, 1u << 7)

/* What a pattern sets (OR them): */
enum bpt_trace_flag {
#define BPT__KIND_FLAG(NAME, name, flag) BPT_##NAME = flag,
    BPT_KINDS(BPT__KIND_FLAG)   /* BPT_COUNT, BPT_CALL, BPT_TIME, BPT_MEMORY */
#undef BPT__KIND_FLAG
    /* With BPT_CALL, the match spec actions of Tracing.md (each also a bpt_match action): */
    BPT_RETURN    = 1u << 2,  /* return_trace: a return_from message with the return value */
    BPT_EXCEPTION = 1u << 3,  /* exception_trace: return_trace, plus exception_from when unwound */
    BPT_RETURN_TO = 1u << 4,  /* return_to: a return_to message naming the function returned to */
    BPT_CALLER    = 1u << 5,  /* caller: the call message names the function it returns to */
    /* How (at most one; none means "switch on"): */
    BPT_OFF     = 1u << 16, /* switch the named kinds off (BPT_OFF alone: all kinds) */
    BPT_PAUSE   = 1u << 17, /* call_count, call_time, call_memory: stop counting, keep the values */
    BPT_RESTART = 1u << 18  /* call_count, call_time, call_memory: set to zero and count */
};

/* Match spec actions. */
enum bpt_match_action {
    BPT_MS_SILENT          = 1u << 0, /* run the predicate but send no message */
    BPT_MS_RETURN_TRACE    = BPT_RETURN,
    BPT_MS_EXCEPTION_TRACE = BPT_EXCEPTION,
    BPT_MS_RETURN_TO       = BPT_RETURN_TO,
    BPT_MS_CALLER          = BPT_CALLER
};

/* A match spec predicate: return non-zero to trace this call. args holds the
   first nargs arguments as 64-bit words. Runs in the traced thread. */
typedef int (*bpt_match_fn)(const uint64_t *args, int nargs, void *user);

/* A match spec: an optional predicate over the arguments plus actions, the
   C counterpart of [{Head, Guards, Body}] for the call trace of a pattern.
   Copied by bpt_trace_pattern; user must stay valid while the pattern is set.
   Zero-initialise it, or use designated initializers: fields are added over
   time, and zero always means the default. */
typedef struct bpt_match {
    bpt_match_fn pred;     /* NULL: every call matches */
    void        *user;
    unsigned     actions;  /* BPT_MS_* */
    const char  *message;  /* copied and interned; attached to each call message */
    const char  *args;     /* argument spec, e.g. "i64,ptr,str,f64" (at most 8; uftrace -A);
                              NULL: the first `arity` arguments as i64. Integer kinds take the
                              next integer register, f64 the next FP register. */
    const char  *ret;      /* return value type for return_from: one of i64 (NULL), u64, ptr,
                              str, f64 (uftrace -R's retval) */
} bpt_match;

/* bpt_trace_pattern: set, change or clear a session's breakpoints on every
   function matching pattern, without stopping any thread (the 13 steps).
   In: pattern "module:function/arity"; each part a glob where '*' matches any
   run of characters, and '_' alone matches anything ("_:_/_" is every
   function). flags: kinds (BPT_CALL, BPT_COUNT, BPT_TIME, BPT_MEMORY) plus
   at most one of BPT_OFF, BPT_PAUSE, BPT_RESTART (PAUSE and RESTART: the
   counting kinds only; RESTART of BPT_TIME or BPT_MEMORY zeroes both
   tables); with BPT_CALL switched on, also
   BPT_RETURN, BPT_EXCEPTION, BPT_RETURN_TO, BPT_CALLER (the same as the
   match spec actions of those names; they apply to the calls the match
   spec accepts, as in BEAM). match: the call-trace match spec (NULL: none).
   The pattern also stays in force for functions registered later, until a
   BPT_OFF call with the same pattern text removes it.
   Return trace (DESIGN §7): a native call's return address is swapped for
   bptrace's return trampoline once, however many sessions trace it, and the
   original is kept on the thread's bounded shadow stack; a VM call gets a
   token (bpt_vm_breakpoint). Frames unwound by longjmp or a throw are found
   at the next traced return above them, or by bpt_unwind_to / bpt_vm_unwind,
   and give exception_from. Tail calls: a traced function entered by a tail
   call from one whose return is traced shares its frame; both get
   return_from, innermost first, and one return_to ends the chain.
   Limits: a C++ exception must not unwind through a return-traced native
   call (the unwinder finds the trampoline, which has no unwind info, and
   calls std::terminate; longjmp is fine); on x86-64 a function returning
   long double (x87 st0) or a 256/512-bit vector must not be return-traced
   (the trampoline keeps rax, rdx and the low 128 bits of xmm0, xmm1); threads
   that switch stacks must not use return trace.
   Returns the number of functions matched (>= 0); BPT_ESESSION; BPT_EINVAL
   (pattern NULL); BPT_EPATTERN (empty or malformed; bpt_last_error says
   where); BPT_EFLAGS (unknown bit, no kind with PAUSE/RESTART, PAUSE or
   RESTART with BPT_CALL or without a counting kind, two hows, BPT_RETURN & co. without BPT_CALL
   switched on); BPT_EPATTERN also for a bad argument or ret spec (an unknown
   type, more than 8); BPT_ENOTSUP (return trace of native functions where a
   CET shadow stack or GCS is active); BPT_EDEADLK (from a tracer callback,
   a pinned section, or an observer or trace_info_each callback);
   BPT_ENOMEM (nothing changed); BPT_EPERM (native sites: mprotect refused a
   code write: the settings are committed, but the functions whose word could
   not be written stay untraced, and the pattern is not remembered).
   Thread-safe (set path).
   Source: erlang:trace_pattern/3 and erts_set_trace_pattern in beam_bp.c. */
BPT_API int bpt_trace_pattern(bpt_session s, const char *pattern, unsigned flags,
                              const bpt_match *match);

/* What bpt_trace_info reports. */
enum bpt_info_flag {
    BPT_INFO_FLAGS  = 1u << 0,
    BPT_INFO_COUNT  = 1u << 1,   /* call_count */
    BPT_INFO_TIME   = 1u << 2,   /* call_time: calls and own time per process (collected, see below) */
    BPT_INFO_MEMORY = 1u << 3    /* call_memory: calls and bytes per process */
};

/* One process's call_time / call_memory on one function. */
typedef struct bpt_info_process {
    uint64_t process;      /* as bpt_process_switch named it (default: the OS thread id) */
    uint64_t calls;        /* calls counted while call_time or call_memory was active */
    uint64_t time_ns;      /* own time: in the function, not in traced callees, not scheduled out */
    uint64_t memory_bytes; /* what bpt_account_memory reported while the function was current */
} bpt_info_process;

typedef struct bpt_info {
    unsigned flags;        /* BPT_CALL | BPT_COUNT | BPT_TIME | BPT_MEMORY (and BPT_RETURN & co.
                              with BPT_CALL) set for f in the session; 0 if none */
    int      count_paused; /* call_count is paused */
    uint64_t count;        /* call_count, exact */
    int      time_paused;  /* call_time / call_memory are paused */
    uint64_t calls;        /* call_time / call_memory: calls, all processes */
    uint64_t time_ns;      /* call_time: own time, all processes, ns */
    uint64_t memory_bytes; /* call_memory: bytes, all processes */
    uint32_t nprocs;       /* out: processes with calls, time or memory on f */
    uint32_t procs_cap;    /* in: room in procs (bpt_trace_info only) */
    bpt_info_process *procs; /* in: an array of procs_cap, or NULL; out: the first
                              min(nprocs, procs_cap) processes, most time first */
} bpt_info;

/* bpt_trace_info: the session's settings, call_count, call_time and
   call_memory for one function.
   call_count is one relaxed atomic load. call_time and call_memory live in
   per-thread tables that only their own thread writes; they are collected
   without blocking any traced thread, by OTP 29's method (timem.c): the
   staging half gets fresh tables, the generations switch, a thread progress
   wait makes the real tables idle, they are summed, and the fresh tables
   carry the sums on. Time is own time, charged as BEAM charges it: a call
   starts its function and pauses the caller's, a return charges the callee
   and resumes the caller; a call still running is counted but its time is
   charged when it returns. Native functions need return frames for time
   (BPT_TIME works like return trace, with its limits).
   Returns 0; BPT_ESESSION; BPT_EINVAL (f or out NULL, unknown what bits);
   BPT_ENOENT (f not registered); BPT_ENOMEM (the collection's tables:
   nothing changed, counts are kept); BPT_EDEADLK (see bpt_trace_pattern: it
   takes the code modification permission). Thread-safe.
   Source: erlang:trace_info/2 (flags, call_count, call_time, call_memory). */
BPT_API int bpt_trace_info(bpt_session s, const bpt_func *f, unsigned what, bpt_info *out);

/* bpt_trace_info_each: bpt_trace_info for every registered function matching
   pattern, calling fn(f, module, name, arity, info, user) for each with a
   breakpoint in the session. Returns how many were reported; errors as
   bpt_trace_info plus BPT_EPATTERN. fn runs in the calling thread, under the
   code modification permission: it must not call set-path functions. */
typedef void (*bpt_info_fn)(const bpt_func *f, const char *module, const char *name,
                            int arity, const bpt_info *info, void *user);
BPT_API int bpt_trace_info_each(bpt_session s, const char *pattern, unsigned what,
                                bpt_info_fn fn, void *user);

/* bpt_process_switch: the calling thread now runs process `process` (0: the
   OS thread itself, the default), for a host with green threads, fibers
   that run to completion, or actors. call_time charges the previous
   process's current function up to now; the time until this thread runs
   that process again is charged to nobody, as BEAM excludes the time a
   process is scheduled out. Messages carry the process too. Never blocks,
   allocates nothing. Thread-safe (acts on the caller); async-signal-safe. */
BPT_API void bpt_process_switch(uint64_t process);

/* bpt_account_memory: the calling thread's current process allocated bytes
   (negative: freed): call_memory charges them to its current traced
   function in each session that has call_memory on it. Never blocks.
   Thread-safe (acts on the caller). Source: call_memory in OTP 26+. */
BPT_API void bpt_account_memory(int64_t bytes);

/* >>format */

/* bpt_format_dbg: one message as a line in the style of OTP's dbg with
   recon_trace's timestamps, e.g.
       15:36:26.123456 (<4711>) call tinyvm:fib(10) (caller tinyvm:loop/3)
       15:36:26.123458 (<4711>) returned from tinyvm:fib/1 -> 55
       15:36:26.123459 (<4711>) returning to tinyvm:loop/3
       15:36:26.123459 (<4711>) exception_from tinyvm:c/1 {throw,10}
       15:36:26.123460 (<4711>) dropped 17 messages
   In: m, buf of size bytes. Out: the text, NUL terminated, no newline.
   Returns the length it wanted (as snprintf), or BPT_EINVAL for a NULL.
   Thread-safe; never touches traced threads. */
BPT_API int bpt_format_dbg(const bpt_msg *m, char *buf, size_t size);

/* One line of a profile table. */
typedef struct bpt_profile_row {
    const char *module, *name;
    int arity;
    uint64_t process;      /* 0: the total over processes */
    uint64_t calls;
    uint64_t value;        /* time in ns (call_time) or bytes (call_memory) */
} bpt_profile_row;

/* bpt_format_profile: a table in the style of OTP's tprof,
       FUNCTION                     CALLS   TIME(us)   PER CALL  [    %]
   sorted by value (rows are sorted in place), with a total line, for
   call_time (memory 0) or call_memory (memory 1: BYTES instead of TIME).
   Rows of several processes may be mixed; each is printed with its process.
   Returns the length it wanted (as snprintf) or BPT_EINVAL (rows NULL with
   n > 0, n < 0, buf NULL with size > 0). Thread-safe. */
BPT_API int bpt_format_profile(bpt_profile_row *rows, int n, int memory, char *buf, size_t size);

/* Chrome Trace Event JSON (chrome://tracing, Perfetto, speedscope): call
   messages become "B" events, return_from and exception_from "E" events,
   with ts in microseconds (fractions kept) from the first event, pid the
   process id, tid the traced thread, and one thread_name record per thread.
   The events nest per thread, as the format requires, whatever the
   messages: the writer keeps each thread's open calls (the first 64; deeper
   calls are not written, nor their returns) and
     - skips a return with no open call of that function (tracing began
       inside the call), counted in `unmatched`;
     - closes, at the same ts, open calls above the one a return matches
       (frames unwound without a message, e.g. with BPT_RETURN but no
       BPT_EXCEPTION), counted in `closed`;
     - closes every call still open at bpt_chrome_close, at its thread's
       last ts (tracing ended inside it), counted in `closed` too.
   Zero-initialise nothing: bpt_chrome_open fills the struct. Off the hot
   path: use it on drained messages. Not thread-safe per writer. */
typedef struct bpt_chrome {
    FILE *out;
    uint64_t base_ns;      /* ts 0: the first event's time */
    long events;           /* records written (thread names included) */
    long unmatched;        /* returns skipped: no open call of theirs */
    long closed;           /* E events the writer added to keep the nesting */
    struct bpt__stack *threads;   /* each thread's open calls */
    int nthreads, cap;
    int err;               /* a write failed */
} bpt_chrome;

/* bpt_chrome_open: start a trace on out (an open FILE). Returns 0, or
   BPT_EINVAL (w or out NULL, or the first write failed). */
BPT_API int bpt_chrome_open(bpt_chrome *w, FILE *out);
/* bpt_chrome_write: one message (other types than call, return_from and
   exception_from are ignored). Returns 0; BPT_EINVAL (NULL, a writer not
   open, or a write failed: errno-level details in bpt_last_error);
   BPT_ENOMEM (the first message of a new thread, when its state cannot be
   allocated: that message is not written). */
BPT_API int bpt_chrome_write(bpt_chrome *w, const bpt_msg *m);
/* bpt_chrome_close: close the calls still open, end the JSON and free the
   writer's state. Returns the number of records written, or BPT_EINVAL (w
   NULL or not open, or a write failed). Does not close the FILE. */
BPT_API int bpt_chrome_close(bpt_chrome *w);

/* FlameGraph folded stacks ("a;b;c 123" lines, as flamegraph.pl and
   speedscope read them) built from call and return messages: each thread's
   stack is rebuilt from its calls and returns, and each function's own time
   (ns, excluding traced callees) is added to the stack it ran on; the lines
   give microseconds. Threads are matched as the Chrome writer does: a
   return closes the newest open call of its function, and the calls above
   it, unwound without a message, count as its own time; a return with no
   open call (tracing began inside the call) is ignored; each thread keeps
   its first 64 calls, and the time of deeper ones counts as the 64th's own
   time. Off the hot path; not thread-safe per object. */
typedef struct bpt_folded bpt_folded;
/* bpt_folded_new: 0 and *out, BPT_EINVAL (out NULL), BPT_ENOMEM. */
BPT_API int bpt_folded_new(bpt_folded **out);
/* bpt_folded_add: one message (other types than call, return_from and
   exception_from are ignored). 0, BPT_EINVAL (a NULL), BPT_ENOMEM (a new
   thread's stack or a new line could not be allocated: the message is not
   counted; the object stays usable). */
BPT_API int bpt_folded_add(bpt_folded *f, const bpt_msg *m);
/* bpt_folded_write: the folded lines, most time first. Returns the number of
   lines, or BPT_EINVAL (a NULL or a write error). */
BPT_API int bpt_folded_write(bpt_folded *f, FILE *out);
BPT_API void bpt_folded_free(bpt_folded *f);

/* >>observe */

/* A protocol observer sees each of the 13 steps of a breakpoint change as it
   ends: step 1..13, did (0 when the step had nothing to do and was skipped),
   the step's duration in ns. bpt_trace_pattern and bpt_session_destroy
   report all 13; a registration that applies remembered patterns reports
   steps 2..12 once per pattern applied. It runs under the code modification permission
   and must not call set-path functions. For examples/protocol_walkthrough and tests. */
typedef void (*bpt_observer_fn)(int step, int did, uint64_t ns, void *user);

/* bpt_set_protocol_observer: install (fn non-NULL) or remove (NULL) the
   observer. Returns 0, or BPT_EDEADLK (see bpt_trace_pattern). Thread-safe (set path). */
BPT_API int bpt_set_protocol_observer(bpt_observer_fn fn, void *user);

/* bpt_protocol_step_name: "seize permission", "allocate", ... for step 1..13,
   NULL otherwise. Thread-safe. */
BPT_API const char *bpt_protocol_step_name(int step);

#ifdef __cplusplus
}
#endif
#endif /* BPTRACE_H */

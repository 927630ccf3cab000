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
       >>config      compile-time options, BPT_TRACEABLE, BPT_API
       >>errors      BPT_E* codes, bpt_strerror, bpt_last_error
       >>progress    thread progress: pin/unpin, waits, managed threads
       >>session     trace sessions, messages, tracers, per-thread buffers, rate limits
       >>tracefile   trace files (.bpt): their format, bpt_session_write, the reader
       >>func        function records: VM and native sites, modules; VM return frames
       >>pattern     bpt_trace_pattern, match specs, the protocol's generations and observer
       >>info        bpt_trace_info (call_count, call_time, call_memory), processes, memory
       >>format      dbg-style text, tprof-style profiles, Chrome trace JSON, folded stacks
       >>probes      USDT probes for bpftrace, perf, gdb, SystemTap; BPT_PROBE, bpt_user_trace
       >>root        the root record an outside reader (examples/bpt) finds; bpt_root_check
       >>control     the control server: other processes steer tracing over a Unix socket
       The implementation parts follow, each between "Begin file X" and "End of X" banners.

   HOW EACH FUNCTION IS DOCUMENTED
       Every public function has one comment in the same order: what it does
       (the contract), then Parameters, Returns, Errors (every BPT_E* code it
       can return, with when), Thread safety, and Source (the OTP or other
       function it is modelled on, or "bptrace"). "none" marks an empty heading;
       a one-line body stands on its heading's line.
       How it is done is not in these comments: see the implementation parts.

   COMPILE-TIME OPTIONS (>>config)
       Set these before including the header. "Everywhere" means every file that
       includes bptrace.h must see the same value; "implementation" means only
       the file that defines BPTRACE_IMPLEMENTATION reads it.

       BPTRACE_STATIC     everywhere      Make every definition static (header used in one file only).
       BPT_API            everywhere      Override the declaration prefix (default: extern, or static
                                          and unused under BPTRACE_STATIC: no warning for the API
                                          a file does not call).
       BPT_ASSERT(c)      implementation  Internal assertion (default: assert from <assert.h>).
       BPT_MALLOC(n)      implementation  Allocator (default: malloc). Every allocation on the
       BPT_FREE(p)        implementation  trace_pattern and session paths goes through it; a NULL
                                          return gives BPT_ENOMEM and changes nothing.
                                          Breakpoints and call counters switched off are
                                          kept for reuse, not freed: their memory stays at
                                          its peak (~170 bytes for each function a
                                          session traces).
       BPT_HIT_MAP(n)     implementation  The hit path's memory (default: mmap, zero-filled): a
       BPT_HIT_UNMAP(p,n) implementation  thread's record, shadow stacks, trace buffers and
                                          call_count pages, made on a thread's first use. Never
                                          malloc: a hit may run inside malloc (a program's own
                                          traced malloc, or a signal handler). NULL: that use is
                                          untraced or its record dropped, counted. A replacement
                                          must return zero-filled memory, as mmap does.
       BPT_MAX_THREADS    implementation  Per-thread slots of the call_time/call_memory tables
                                          held in each breakpoint. Default 64. Threads beyond it
                                          keep their tables in an array mapped for them (512 KiB
                                          of address space a breakpoint, 4 KiB of memory for
                                          every 512 such threads): every thread has its own, as
                                          it has its own trace buffer and call_count counters.
       BPT_MAX_SESSIONS   implementation  Trace sessions alive at once. Default 64 (1..65535).
       BPT_NO_NATIVE      everywhere      Leave out native entry patching (BPT_TRACEABLE expands to
                                          nothing; bpt_register_native returns BPT_ENOTSUP).
       BPT_NO_MEMBARRIER  implementation  Never use membarrier(2): readers pay a full fence on pin.
                                          For kernels without it, and for tests of the fallback.
       BPT_NO_INTERPOSE   implementation  Leave out bptrace's (weak) definitions of the unwinder's
                                          _Unwind_RaiseException, _Unwind_Resume_or_Rethrow,
                                          _Unwind_Resume, __cxa_begin_catch and pthread_exit
                                          (unwind.c), and swapcontext, setcontext (fibers.c), which
                                          forward to the runtime's. For a fully static program, where
                                          there is no runtime's to forward to; then a C++ throw
                                          through a return frame calls std::terminate, and fibers
                                          must not use return frames.
       BPT_NO_PROBES      per file        Leave out the USDT probes (BPT_PROBE expands to nothing;
                                          in the implementation's file: bptrace's own probes too,
                                          and a USDT session gives BPT_ENOTSUP). See >>probes.
       BPT_NO_CYCLE_CLOCK implementation  Timestamps from clock_gettime, not the CPU's counter
                                          (rdtsc, CNTVCT_EL0); bpt_clock_info says which is used.
       BPT_SYNC_CORE_SIGNAL implementation The signal that serializes threads' instruction streams
                                          where membarrier SYNC_CORE is missing. Default SIGRTMIN+7.
       BPT_TEST_POINT(w)  implementation  For tests: called at named points of the frame code where
                                          a nested signal handler matters (w: a string). Default
                                          nothing.
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

   CALLS THROUGH SLOTS (gcc and clang, x86-64 and aarch64; no flags needed)
       bpt_register_imports(module, pattern) makes a module's calls into
       other modules traceable at the 8-byte slots they go through (its GOT
       under a PLT or -fno-plt, lazy binding and full RELRO included, and
       function-pointer tables the dynamic linker fills); bpt_register_slot
       does it for one hand-built function-pointer slot. The slot switches
       between its target and a trampoline with one aligned store (slots.c).

   SUPPORTED
       gcc and clang on x86-64 and aarch64 (C11 <stdatomic.h>, __thread);
       tcc 0.9.27 on x86-64 (x86-64 inline asm atomics, pthread keys for
       thread-locals). Linux only (futex, membarrier). The whole header
       compiles as C++ too (g++, clang++; C++11 to C++20). A C++ exception
       may unwind through traced calls, return frames included (unwind.c);
       C++ names from bpt_register_module are demangled.

   THREAD-SAFETY RULES
       - Every public function may be called from any thread, unless its
         comment says otherwise (the formatters' writer objects are not shared).
       - Set-path calls (bpt_register_*, bpt_unregister*, bpt_func_lookup,
         bpt_func_count, bpt_trace_pattern, bpt_session_create/destroy,
         bpt_trace_info*, bpt_set_protocol_observer) take the one code
         modification permission: they serialize with each other, and they wait
         for thread progress. They must not be called from a tracer callback,
         a pinned section, a callback that runs under the permission (an
         observer, a bpt_trace_info_each visitor) or a signal handler: they
         return BPT_EDEADLK where they can tell.
       - Hit-path calls (bpt_vm_breakpoint, bpt_thread_progress_pin/unpin, and
         a native entry or return) never block and never call malloc. What
         a thread needs is mapped on its first use of it (BPT_HIT_MAP,
         default mmap): its record on its first pin, its buffer on its first
         record in a session, its shadow stack on its first return frame, a
         page of its call_count counters on its first count there, a
         call_time/call_memory table on its first charge of a function. No
         hit takes a lock, however many threads there are.
         A record is a copy into the thread's own chunk and one release
         store; a full buffer grows by a chunk (mapped, a batch at a time)
         up to max_chunks, then drops it (counted, and marked in the
         stream by a DROPPED record) or, in flight-recorder mode, takes the
         oldest unread chunk back. Every kind is async-signal-safe: a signal
         handler may pin and hit, and a traced function may be called from
         one, on any stack. What a handler's hit finds half done on its own
         thread is left alone, and the handler's part dropped and counted:
         a record being copied (the session's dropped count), a call_time
         table being updated (lost), a frame being pushed (kept, never
         settled by it). Frames that a longjmp or a throw left behind are
         settled at the thread's next traced call or return.
       - Not supported: a signal handler that leaves by longjmp or
         siglongjmp after it interrupted bptrace's own code on its thread
         (a native entry's or return's handler, bpt_vm_breakpoint, a pinned
         section), as POSIX forbids it after interrupting any function that
         is not async-signal-safe. That section never ends: the thread stays
         pinned, so a set-path call made on it returns BPT_EDEADLK and one
         made on another thread waits for it without end, and the thread's
         later records are dropped (counted). A handler that leaves so must
         run only where no traced call can be under way on its thread.
       - A C++ throw through return frames (return trace, exception trace,
         return_to, call_time, call_memory): the frames it unwinds get
         exception_from "throw" when the catch begins, and the frames left
         keep their return trace (unwind.c, U1 and U2: bptrace defines the
         ABI's _Unwind_RaiseException, _Unwind_Resume_or_Rethrow,
         _Unwind_Resume and __cxa_begin_catch, and pthread_exit, as
         assembly stubs that jump on to the next definition). Not covered:
         pthread_cancel's unwind (it starts inside the C library): it stops
         at the first return frame, unless a cleanup below that frame
         resumes it (_Unwind_Resume, U1), after which the destructors above
         run. A return-traced frame's return address is the trampoline's,
         so backtrace(3) and other walks by unwind tables stop there.
       - vfork: a thread whose first bptrace call is made in a vfork child
         shares its record with the parent thread, whose later records then
         carry the child's thread id.
       - Fibers that switch stacks with swapcontext/setcontext: each stack's
         frames carry a tag (fibers.c, S1 and S2), so a suspended fiber's
         frames are neither ended nor mistaken for the running stack's, and
         its calls' call_time is paused while it is suspended.
         A coroutine library with its own switch code (boost.context)
         announces each switch: bpt_fiber_switch_begin and _end.
       - Not supported: a fiber resumed on another thread, and an
         unannounced switch of a coroutine library's own: return frames
         there may abort at a return. call_time is wall time unless the
         session asks for the thread's CPU time (bpt_session_desc.time_cpu).
       - bpt_session_drain and bpt_session_write may run concurrently with
         traced threads; one drainer per session at a time (others wait on the
         session's drain lock). A traced thread never waits for a drainer.
       - A thread's first bptrace call allocates its thread record (once).
         Where that allocation fails, calls that need the record return
         BPT_ENOMEM and change nothing; each function's Errors says whether it
         can.

   MAP OF THE SOURCE (src/README.md in the repository has it whole)
       Each part below has one concern and a "Begin file X" banner. The
       implementation opens with its declarations: port.h (compilers and
       architectures), internal.h and one header per concern. The code
       follows from the bottom up:
         progress.c        thread progress: pins, epochs, waits (erl_thr_progress.c, liburcu)
         clock.c           timestamps: the CPU's counter, calibrated against CLOCK_MONOTONIC
         intern.c, names.c interned names; the name table that gives records their ids
         record.c          reading trace records: names from ids, ticks to ns
         locks.c           the lock order and fork()
         ptrset.c          a set of pointers (the registry's checks)
         session.c         trace sessions: per-thread chunked buffers, tracers, rate limits
         pattern.c         trace patterns and match specs
         site_x86_64.c, site_aarch64.c   native entry layouts, stubs, trampolines
         timem.c           call_time / call_memory tables and their collection
         symbols.c         which native function holds a code address
         frames.c          return_from, exception_from, return_to: shadow stacks
         interpose.c       bptrace's stand-ins for runtime functions, and the runtime's own
         unwind.c          C++ exceptions through return frames: the unwinder's hooks
         fibers.c          threads that switch stacks: a tag per stack on their frames
         kind_count.c, kind_call.c, kind_timem.c   the breakpoint kinds (BPT_KINDS)
         hit.c             the hit path: what a breakpoint does when reached
         site_vm.c, site_native.c   writing site words: VM words, checked code batches
         module.c          a module's patchable entries and their ELF names; its import slots
         bp.c              the set path: the 13 steps, one function each
         funcs.c, slots.c, session_life.c, trace_pattern.c, trace_info.c   the API
         format.c          text, Chrome JSON and folded stacks
         tracefile.c       trace files: bpt_session_write and the reader
       The protocol's steps, by function (bp.c): 1 bpt__change_begin,
       2 bpt__allocate, 3 bpt__stage, 4 bpt__wait_staged, 5 bpt__install,
       6 bpt__wait_installed, 7 bpt__commit, 8 bpt__wait_committed,
       9 bpt__uninstall, 10 bpt__wait_uninstalled, 11 bpt__consolidate,
       12 bpt__free_unlinked, 13 bpt__change_end. Every barrier carries a
       tag ([B1] thread progress, [G1] breakpoint lists, [G2] the active
       generation, ...) at both of its ends.

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
   (site_x86_64.c, site_aarch64.c): pre-entry padding for the function record pointer, the
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
#  if defined(BPTRACE_STATIC) && (defined(__GNUC__) || defined(__clang__) || defined(__TINYC__))
/* unused: a file that calls only some of the API must still build
   warning-free under -Wall. */
#    define BPT_API static __attribute__((unused))
#  elif defined(BPTRACE_STATIC)
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
   calling thread. Each function's Errors lists the codes it can return. */
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
    X(BPT_ELIMIT,       -13,  "a fixed limit was reached (sessions, name length, name table)") \
    X(BPT_EIO,          -14,  "a read or write of a file failed") \
    X(BPT_EFORMAT,      -15,  "not a bptrace trace file, or a corrupt one")

/* The error codes (negative; BPT_OK is 0). */
enum bpt_error {
#define BPT__ERROR_ENUM(name, value, text) name = value,
    BPT_ERRORS(BPT__ERROR_ENUM)
#undef BPT__ERROR_ENUM
    BPT__ERROR_END = 1
};

/* bpt_strerror: the fixed message of an error code.

   Parameters     code   a BPT_E* value, or any other int
   Returns        a static string, never NULL; "unknown error" for a value that is not a BPT_E*
   Errors         none
   Thread safety  any thread; async-signal-safe; also from a tracer callback
   Source         strerror(3)
*/
BPT_API const char *bpt_strerror(int code);

/* bpt_last_error: why the calling thread's last failing bptrace call failed,
   e.g. "malformed trace pattern: 'vm:fib' has no '/arity'".

   Parameters     none
   Returns
     a thread-local string, valid until this thread's next failing call; ""
     if none failed yet. A thread whose record could not be allocated gets a
     fixed "out of memory" text.
   Errors         none
   Thread safety  any thread; each thread sees only its own message
   Source         dlerror(3)
*/
BPT_API const char *bpt_last_error(void);


/*** Begin file api_progress.h ***/
/* api_progress.h: thread progress, the public half's one concern here: the
   epoch mechanism that lets bptrace change breakpoints while every thread
   runs (read-side pins, waits for every thread, managed threads). */

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

/* bpt_thread_progress_pin / bpt_thread_progress_unpin: enter / leave a
   read-side section. While the calling thread is pinned, no wait that began
   after the pin returns before the matching unpin. Pins nest (counted),
   also from a signal handler that interrupts a pinned section. A pin is
   cheap (no fence where membarrier(2) is available; for a managed online
   thread it only counts the nesting) and never blocks. Unpin wakes a waiter sleeping on this
   thread; an unpin without a pin is ignored. The first pin of a thread
   creates its thread record; if that allocation fails the pin does nothing.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety
     any thread (acts on the caller); async-signal-safe once the thread has
     its record; a managed thread must be online
   Source         rcu_read_lock / rcu_read_unlock in liburcu urcu-memb
*/
BPT_API void bpt_thread_progress_pin(void);
BPT_API void bpt_thread_progress_unpin(void);

/* bpt_thread_progress_wait: wait until every thread has passed a quiescent
   point since this call began. On return, every pin section that was in
   force when the call began has ended, managed online threads have called
   bpt_thread_progress() since, and all stores made before the call are
   visible to every thread. Offline managed threads, exited threads and
   unpinned threads never delay it. A managed caller is offline while it
   waits.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors
     BPT_EDEADLK   called from a tracer callback, or by a pinned thread (it
                   would wait for itself)
   Thread safety
     any thread except as above; concurrent waiters are serialized; not
     async-signal-safe (it may sleep and takes a lock)
   Source         erts_thr_progress_block in erl_thr_progress.c; liburcu's synchronize_rcu
*/
BPT_API int bpt_thread_progress_wait(void);

/* bpt_thread_progress_wait_sync_core: as bpt_thread_progress_wait, and in
   addition every thread of the process that runs has serialized its
   instruction stream, so that every thread executes code written before the
   call. Use after writing code. Where the kernel has membarrier
   PRIVATE_EXPEDITED_SYNC_CORE, one such call serializes every running
   thread and is also the wait's first heavy barrier [B1] (a thread that is
   not running serializes on its way back to user space); elsewhere, or
   when that call fails, each thread that has a thread progress record
   (one that ever pinned) gets a signal (BPT_SYNC_CORE_SIGNAL), whose
   return serializes it, and a thread without one never ran a breakpoint.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors         BPT_EDEADLK   called from a tracer callback, or by a pinned thread
   Thread safety  as bpt_thread_progress_wait
   Source         Linux text_poke_sync (arch/x86/kernel/alternative.c)
*/
BPT_API int bpt_thread_progress_wait_sync_core(void);

/* bpt_thread_progress_register_managed: declare the calling thread managed,
   as ERTS managed threads. It then promises to call bpt_thread_progress() at
   quiescent points (e.g. once per frame) and to go offline before blocking;
   in exchange its pins cost nothing. Waiters wait for its next
   bpt_thread_progress(). Where it blocks inside bptrace (a set-path call, a
   wait) bptrace takes it offline meanwhile. It starts online. There is no
   way back to unmanaged.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL   called while pinned
     BPT_ENOMEM   the thread's record could not be allocated
   Thread safety  any thread (acts on the caller); not async-signal-safe
   Source         erts_thr_progress_register_managed_thread in erl_thr_progress.c
*/
BPT_API int bpt_thread_progress_register_managed(void);

/* bpt_thread_progress: a managed thread reports a quiescent point: it holds
   no reference to breakpoint data. Wakes a waiter. No-op on unmanaged or
   offline threads; ignored inside a pinned section or tracer callback (not
   a quiescent point). Never blocks.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety  any thread (acts on the caller); never blocks
   Source         erts_thr_progress_update in erl_thr_progress.c
*/
BPT_API void bpt_thread_progress(void);

/* bpt_thread_progress_offline / bpt_thread_progress_online: a managed
   thread leaves (before blocking, e.g. in a futex, a condition variable or
   I/O) and re-enters the set of threads that waiters wait for. While
   offline it must not pin nor hit a breakpoint. Both are ignored inside a
   pinned section (going online there would hide the section's older
   epoch from waiters). No-op on unmanaged threads. Never block.

   Parameters     none
   Returns        nothing
   Errors         none
   Thread safety  any thread (acts on the caller); never blocks
   Source         erts_thr_progress_prepare_wait / erts_thr_progress_finalize_wait
*/
BPT_API void bpt_thread_progress_offline(void);
BPT_API void bpt_thread_progress_online(void);

/* What thread progress has done, for tests and benchmarks. */
typedef struct bpt_progress_stats {
    uint64_t epoch;          /* current global epoch (starts at 1), a count */
    uint64_t waits;          /* completed waits, a count */
    uint64_t sync_core_waits; /* of them, waits that also serialized every thread's instruction
                                stream (bpt_thread_progress_wait_sync_core), a count */
    uint64_t futex_sleeps;   /* times a waiter slept on the futex, a count */
    uint64_t futex_wakes;    /* wake-ups readers issued to a sleeping waiter, a count */
    uint32_t threads;        /* thread records in use (live threads that pinned) */
    uint32_t records;        /* thread records ever created (they are reused) */
    int      membarrier;     /* 1: light pins (membarrier registered), 0: fence pins */
    int      sync_core;      /* 1: membarrier SYNC_CORE registered, 0: signal fallback */
} bpt_progress_stats;

/* bpt_thread_progress_stats: what thread progress has done so far. The
   counters are read without a lock: each is exact, but together they are
   not a snapshot. The first call sets up thread progress (see above).

   Parameters     out   where to write the counters; not NULL
   Returns        0, or a BPT_E* code
   Errors         BPT_EINVAL   out is NULL
   Thread safety  any thread; not from a signal handler on the first call
   Source         bptrace
*/
BPT_API int bpt_thread_progress_stats(bpt_progress_stats *out);
/*** End of api_progress.h ***/

/*** Begin file api_session.h ***/
/* api_session.h: trace sessions, the public half's one concern here: a
   session's settings and handle, the messages it produces, the tracers that
   receive them (a callback, or per-thread rings to drain), and its counters. */

/* >>session
   A trace session is an isolated set of trace settings with one tracer, as
   OTP 27's trace:session_create/3. Handles are weak ids (a generation and a
   slot, as sokol's resource handles): a stale handle gives BPT_ESESSION, never
   a crash, and a late message of a dead session is dropped. */
typedef struct bpt_session { uint64_t id; } bpt_session;   /* 0: never a live session */

/* Message types. */
enum bpt_msg_type {
    BPT_MSG_CALL    = 1,  /* a traced call: func, args */
    BPT_MSG_DROPPED = 2,  /* value = messages this thread's ring dropped since the last report */
    BPT_MSG_LIMIT   = 3,  /* the rate limit tripped; the session traced nothing after it */
    BPT_MSG_RETURN_FROM    = 4,  /* func returned: value, value_type */
    BPT_MSG_EXCEPTION_FROM = 5,  /* func was unwound: exception_class, value */
    BPT_MSG_RETURN_TO      = 6   /* execution resumes in func (module NULL: unknown code at caller) */
};

/* Limits of one message: arguments, and bytes of copied strings. */
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

/* A registered function (opaque; see >>func). */
typedef struct bpt_func bpt_func;

/* A value formatter: write value as text into buf (size bytes, always NUL
   terminated), return the length in bytes it wanted, as snprintf. */
typedef int (*bpt_format_fn)(char *buf, size_t size, uint64_t value);

/* One trace message. Names point into bptrace's interned strings and stay
   valid until the process exits, so a message outlives its function. */
typedef struct bpt_msg {
    uint16_t type;         /* enum bpt_msg_type */
    uint16_t nargs;        /* valid entries of args[] */
    uint32_t thread;       /* OS thread id (gettid) of the traced thread */
    uint64_t process;      /* the process the call ran in (default: the OS thread id) */
    uint64_t ts_ns;        /* ns on CLOCK_MONOTONIC's scale, from the CPU's counter (bpt_clock_info) */
    uint64_t session;      /* the session's weak id */
    const char *module;    /* function, or NULL for DROPPED / LIMIT */
    const char *name;
    int arity;
    bpt_format_fn format;  /* the site's argument formatter, or NULL for decimal */
    const char *user;      /* the match spec's message, or NULL */
    uint8_t no_return;     /* CALL: 1 when no RETURN_FROM will end this call: its session does
                              not trace its return (neither BPT_RETURN nor BPT_EXCEPTION, whose
                              exception_trace sends return_from too), or it cannot (a VM hit
                              with no token, a full shadow stack, a hit already serving
                              BPT_FRAME_SESSIONS sessions). The stack writers take it for a
                              moment, not an open call. 0: a RETURN_FROM or EXCEPTION_FROM ends
                              it, unless it unwinds untraced or a signal handler filled the
                              shadow stack meanwhile; a file before version 3 says 0 */
    uint64_t value;        /* DROPPED: count; LIMIT: rate_max; RETURN_FROM: the return value;
                              EXCEPTION_FROM: the exception */
    uint8_t  value_type;   /* RETURN_FROM: enum bpt_arg_type of value (F64: the double's bits) */
    const char *exception_class; /* EXCEPTION_FROM: "throw" (bpt_vm_unwind; native: a C++ throw,
                                    at its catch) or "unwind" (native: longjmp, or a frame
                                    found dead later) */
    const char *caller_module;   /* CALL with BPT_CALLER: the function the call returns to, */
    const char *caller_name;     /* NULL if unknown (not a registered function) */
    int caller_arity;
    uint64_t caller;             /* CALL with BPT_CALLER, RETURN_TO: the return address (native), 0 (VM) */
    uint64_t args[BPT_MAX_ARGS];       /* F64: the double's bits; STR: byte offset into str */
    uint8_t  argtype[BPT_MAX_ARGS];    /* enum bpt_arg_type */
    char     str[BPT_MSG_STR_BYTES];   /* STR arguments, NUL-separated, truncated to fit */
} bpt_msg;

/* A callback tracer runs in the traced thread, inside the hit path: it must
   not block for long and must not call set-path functions (BPT_EDEADLK).
   Breakpoints hit from inside it are counted but send no messages. */
typedef void (*bpt_tracer_fn)(const bpt_msg *msg, void *user);

/* Session settings. Zero-initialise and set what you need; zero means default.

   Each traced thread writes its records into a buffer of its own per
   session: `chunks` chunks of `chunk_bytes` (sub-buffers, as LTTng-UST and
   uftrace's shared buffers). A thread fills its current chunk with plain
   stores and never waits. When every chunk is full and undrained, the
   buffer grows by a chunk, up to `max_chunks` (as uftrace record maps a
   thread a new buffer when its own are full): a drainer that falls behind
   for a while, descheduled or slow to write, loses nothing. At the cap the
   new record is dropped and counted (a DROPPED message marks the place),
   or, with flight_recorder, the oldest undrained chunk is taken back and
   overwritten (LTTng's snapshot mode; its buffer never grows). A grown
   buffer keeps its size until the session is destroyed. A call record is
   16 bytes; arguments, a caller, a message and strings add 8-byte words
   (see >>tracefile). */
typedef struct bpt_session_desc {
    const char   *name;        /* copied; default "session" (at most 63 bytes) */
    bpt_tracer_fn tracer;      /* callback tracer; NULL: per-thread buffers to drain */
    void         *tracer_user;
    int           usdt;        /* 1: no buffers and no callback: call, return_from,
                                  exception_from and return_to fire the USDT probes
                                  bptrace:call, :return, :exception, :return_to, while
                                  a tool is attached (OTP's dyntrace; >>probes) */
    uint32_t      chunk_bytes; /* bytes of one chunk: a power of two, 4096 ..
                                  1<<24; default 16384 */
    uint32_t      chunks;      /* chunks in each thread's buffer at first, 2 .. 65536; default 16 */
    uint32_t      max_chunks;  /* the most a thread's buffer grows to, chunks .. 65536;
                                  default 64 MiB of chunks (4096 of 16 KiB; never fewer
                                  than chunks); set it to chunks for a fixed size.
                                  A flight recorder's is chunks */
    int           flight_recorder; /* 1: overwrite the oldest undrained chunk when
                                      full, instead of dropping the newest records */
    uint64_t      rate_max;    /* recon_trace limit: at most rate_max messages ... */
    uint32_t      rate_per_ms; /* ... in each window of this many ms, the windows
                                  following each other from the session's creation
                                  (0: in all; with windows, rate_max <= 2^32 - 1) */
    int           time_cpu;    /* call_time's clock. 0 (default): wall time, the time a
                                  thread is scheduled out (sleeping, preempted) included.
                                  1: the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), none
                                  of it, as BEAM charges no time while a process is
                                  scheduled out; a system call per timed call and return
                                  (PERFORMANCE.md gives its cost) */
} bpt_session_desc;

/* bpt_session_create: create a trace session with no trace patterns. Its
   messages go to desc->tracer, or to per-thread rings for bpt_session_drain.

   Parameters
     desc   the settings (copied); NULL: every default
     out    where to write the new handle; not NULL
   Returns        0, or a BPT_E* code (then *out is untouched)
   Errors
     BPT_EINVAL    out is NULL; usdt with a tracer; chunk_bytes not a power of two in 4096 .. 1<<24;
                   chunks not in 2 .. 65536; max_chunks not in chunks .. 65536,
                   or not chunks in a flight recorder; rate_per_ms without
                   rate_max, or with rate_max over 2^32 - 1
     BPT_ELIMIT    name over 63 bytes; BPT_MAX_SESSIONS sessions alive
     BPT_ENOMEM    no memory for the session (or for the thread's record)
     BPT_ENOTSUP   usdt where the probes are compiled out (tcc, BPT_NO_PROBES)
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety
     any thread (set path: serialized with the other set-path calls); not
     from a signal handler
   Source         trace:session_create/3 (OTP 27); usdt: OTP's dyntrace tracer module
*/
BPT_API int bpt_session_create(const bpt_session_desc *desc, bpt_session *out);

/* bpt_session_destroy: clear every breakpoint of the session through the 13
   steps, forget its patterns, and free it. Records still in its buffers are
   discarded; frames and messages that outlive it do nothing. The handle is
   stale from then on.

   Parameters     s   the session
   Returns        0, or a BPT_E* code
   Errors
     BPT_ESESSION   s is stale or destroyed (a double destroy)
     BPT_ENOMEM     no memory for the change (or the thread's record); the
                    session is unchanged
     BPT_ENOTSUP    it traces pointer slots and /proc/self/maps cannot be
                    read; the session is unchanged
     BPT_EPERM      destroyed, but mprotect refused restoring some native
                    entry words: they find no breakpoint and cost a stub
                    round trip
     BPT_ENOTPATCHABLE  destroyed, but some site no longer held bptrace's
                    word (a debugger's, another patcher's): left alone; or a
                    pointer slot it traced is no longer mapped (its module
                    unloaded without bpt_unregister_module): forgotten,
                    nothing written
     BPT_EDEADLK    from a tracer callback, a pinned section, or a callback
                    under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source         trace:session_destroy/1 (OTP 27)
*/
BPT_API int bpt_session_destroy(bpt_session s);

/* bpt_session_drain: move up to max messages from the session's per-thread
   buffers into out, thread by thread, each thread's messages in order,
   decoded from their records (names resolved, timestamps converted to ns).
   The threads take turns: a call that fills out stops in one thread's
   buffer, and the next call starts at the thread after it, so a busy
   thread does not starve the others.
   Where a thread lost records (full buffer, or overwritten in flight-recorder
   mode), a DROPPED message stands at the place of the loss, in the thread
   and process that lost them (a full buffer's first loss at once, the ones
   after it ahead of the thread's next record that fits; records taken back
   by a flight recorder where the stream resumes). Records a signal
   handler's send lost while nested in its own thread's send are marked
   at that thread's next record that starts a chunk or a context (within
   about 1 ms of its records). The DROPPED counts of a session add up to
   its bpt_session_stats dropped, but the losses after a thread's last
   record that fit, and those for want of memory for a thread's buffer
   (there is no buffer to mark them in). A session with a callback
   tracer, or a USDT session, has nothing to drain. Never blocks a traced
   thread.

   Parameters
     s     the session
     out   an array of max messages; NULL allowed when max is 0
     max   room in out, >= 0
   Returns        how many messages it wrote (0..max), or a BPT_E* code
   Errors
     BPT_EINVAL     max < 0; out NULL with max > 0
     BPT_ESESSION   s is stale or destroyed
     BPT_ENOMEM     the calling thread's record could not be allocated
   Thread safety
     any thread, concurrently with traced threads; one drainer per session
     at a time (others wait on the session's drain lock; bpt_session_write
     is a drainer too); not from a signal handler
   Source         bptrace (the tracer process's mailbox, read in batches)
*/
BPT_API int bpt_session_drain(bpt_session s, bpt_msg *out, int max);

/* bpt_session_wait: sleep until a traced thread seals a chunk of s (fills
   it: a whole chunk is ready to drain or write), or for timeout_us. Returns
   at once when a sealed chunk already waits. The drainer's alternative to
   polling, as LTTng-UST's consumer is woken at a sub-buffer switch: a
   thread that traces slowly seals no chunk, so drain on the timeout too
   (its partly filled chunk is read then). A traced thread never waits for
   it: a seal costs a locked add, and a futex wake only while a drainer
   sleeps. The drainer's loop:

       for (;;) {
           bpt_session_wait(s, 1000);
           while ((n = bpt_session_drain(s, buf, max)) > 0) {
               use(buf, n);
               if (n < max) break;   (a short read: back to waiting)
           }
       }

   (or, writing a file, one bpt_session_write after each wait).
   Reading again at once after a short read would chase the traced threads
   through the chunks they are writing, a cache line at a time (call trace
   to a ring: 36 against 90 ns a call, PERFORMANCE.md).
   Traced threads may fill their buffers as fast as a drainer empties them,
   so a loop that drains until a call returns 0 may not end while they run.
   A drainer with other work to do (switching tracing off, say) bounds each
   pass, by time or by count, as examples/tinyvm.c's drain() does.

   Parameters
     s            the session (per-thread buffers: no callback tracer)
     timeout_us   the longest sleep, in microseconds; 0: only look
   Returns        1: a sealed chunk waits; 0: none (the time ran out, or a
                  spurious wake-up, which another session's seals or destroy
                  may cause); or a BPT_E* code
   Errors
     BPT_EINVAL     s has a callback tracer or is a USDT session: nothing to drain
     BPT_ESESSION   s is stale or destroyed, also when its destroy began
                    during the sleep (the destroy wakes it)
     BPT_ENOMEM     the calling thread's record could not be allocated
     BPT_EDEADLK    from a tracer callback or a pinned section: no thread
                    progress could be made while it sleeps
   Thread safety  any thread; any number of waiters; not from a signal
                  handler. A managed thread goes offline while it sleeps.
   Source         bptrace (LTTng-UST's consumer wake-up; BEAM's tracer
                  process sleeps in receive until a message arrives)
*/
BPT_API int bpt_session_wait(bpt_session s, uint32_t timeout_us);

/* A session's counters (counts of messages or calls). When no thread is
   tracing or draining, produced == delivered + dropped + pending exactly. */
typedef struct bpt_session_counts {
    uint64_t produced;   /* messages the session generated (delivered + dropped + pending) */
    uint64_t delivered;  /* handed to the callback tracer or the USDT probes, drained, or written
                            to a file */
    uint64_t dropped;    /* lost: a full buffer (a traced thread never waits), or
                            overwritten (flight recorder), or no buffer (no memory) */
    uint64_t overwritten;/* of dropped: taken back by a flight recorder */
    uint64_t pending;    /* in the buffers, not yet drained */
    uint64_t limited;    /* hits suppressed after the rate limit tripped */
    uint64_t frames_skipped; /* calls whose return was not traced: the thread's shadow stack
                                was full (BPT_SHADOW_FRAMES), or it served BPT_FRAME_SESSIONS */
    uint64_t threads;    /* threads that have a buffer in this session */
    uint64_t chunks;     /* chunks in their buffers now: desc.chunks a thread, and
                            those added while a drainer fell behind (max_chunks) */
    uint64_t buffer_bytes; /* their bytes (chunks * chunk_bytes) */
    int      limit_tripped;  /* 1: the rate limit tripped */
    char     name[64];       /* the session's name, NUL terminated */
} bpt_session_counts;

/* bpt_session_stats: the session's counters. Each is exact, read without
   stopping anyone; together they are not a snapshot.

   Parameters
     s     the session
     out   where to write them; not NULL
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL     out is NULL
     BPT_ESESSION   s is stale or destroyed
     BPT_ENOMEM     the calling thread's record could not be allocated
   Thread safety  any thread; not from a signal handler
   Source         bptrace (trace:session_info/1 gives the settings; these are the counts)
*/
BPT_API int bpt_session_stats(bpt_session s, bpt_session_counts *out);

/* What clock the timestamps come from: the CPU's counter where one is usable
   (its rate calibrated once against CLOCK_MONOTONIC; each thread's records
   anchored to CLOCK_MONOTONIC at least every millisecond), or CLOCK_MONOTONIC. */
typedef struct bpt_clock {
    const char *source;    /* "tsc" (x86-64 rdtsc, where CPUID says it is invariant),
                              "cntvct" (aarch64 CNTVCT_EL0), or "clock_gettime"
                              (neither usable, or BPT_NO_CYCLE_CLOCK) */
    uint64_t hz;           /* the source's ticks per second (10^9 for clock_gettime) */
} bpt_clock;

/* bpt_clock_info: which clock bptrace's timestamps (bpt_msg.ts_ns, call_time)
   are read from, and its rate. The first use in a process calibrates it:
   on x86-64 that measures the TSC against CLOCK_MONOTONIC for 2 ms.

   Parameters     out   filled in; not NULL
   Returns        0, or a BPT_E* code
   Errors         BPT_EINVAL   out is NULL
   Thread safety  any thread
   Source         bptrace; the counters as Linux's vDSO reads them
*/
BPT_API int bpt_clock_info(bpt_clock *out);

/* >>tracefile
   A session's records can go to a file instead of being decoded: the drainer
   copies whole records, as the traced threads wrote them, and names and
   timestamps are resolved when the file is read. The format (.bpt, little
   endian, every length a multiple of 8 bytes):

     header (144 bytes)
       char     magic[8]       "BPTRACE\0"
       uint32_t version        3 (BPT_FILE_VERSION); readers take 1 and 2 too
       uint32_t header_bytes   144
       uint32_t machine        the traced process's ELF e_machine (62 x86-64, 183 aarch64)
       uint32_t pid
       uint32_t clock_source   0 clock_gettime, 1 tsc, 2 cntvct (as bpt_clock)
       uint32_t reserved
       uint64_t clock_hz
       uint64_t tick0, ns0, mul_whole, mul_frac
                               ns = ns0 + (ticks - tick0) * (mul_whole + mul_frac / 2^32)
                               until a thread's first anchor (a context record);
                               after it, ns = anchor_ns + (ticks - anchor_ticks) * the same rate
       uint64_t session        the session's weak id
       char     name[64]       the session's name
     then blocks: uint32_t tag, uint32_t bytes (of payload), payload
       'N' names: entries { uint32_t id; int32_t arity (-1: a match spec's
           message); uint16_t module_bytes, name_bytes; uint32_t 0;
           module, name, padded to 8 }: every id the records after it use.
           Ids run 1, 2, 3... in the order of the entries, up to 2^22 (a
           reader refuses one more than 1024 past the entries before it)
       'C' records of one thread's buffer: uint64_t lane (the buffer's
           number in the session), then whole records, in the order written
     a record: uint64_t ticks; uint8_t type; uint8_t words; uint16_t info;
       uint32_t id; then `words` 8-byte words:
       CALL            id: the function; info: nargs (bits 0-3), caller
                       (bit 4), message (bit 5), no return traced (bit 6,
                       version 3: bpt_msg.no_return); words: [arg types, 4 bits
                       each, | nargs << 32 | string bytes << 40] [args]
                       [string bytes, padded] [caller address, caller id]
                       [message id]
       RETURN_FROM     id: the function; info: the value's bpt_arg_type;
                       words: the value, or a string's bytes (BPT_ARG_STR)
       EXCEPTION_FROM  id: the function; info: 1 throw, 0 unwind; words: the value
       RETURN_TO       id: the function resumed (0: unknown code); words: the address
       DROPPED, LIMIT  words: the count of records lost, the rate limit
       15 (context)    id: the OS thread id; ticks: the anchor's counter
                       reading; words: the process, the anchor's
                       CLOCK_MONOTONIC ns (version 1: the process only). It
                       opens every chunk, follows a thread or process switch,
                       and renews the anchor after 1 ms of the counter (or
                       when the counter went back); a copy of the one in
                       effect opens a thread's first block in a file that
                       takes up its records mid-chunk (bpt_session_write) */
enum { BPT_FILE_VERSION = 3 };

/* Where bpt_session_write writes, and what it has written. Zero-initialise
   it and set fd; keep it for every write to that file. */
typedef struct bpt_file_writer {
    int fd;                /* an open file or pipe; stays the caller's */
    int header_written;    /* private: the header is out */
    uint32_t names_written;/* private: names up to this id are out */
    int broken;            /* private: a write cut short could not be taken back */
    uint64_t bytes;        /* bytes written so far: of whole blocks (and the header) */
    uint64_t records;      /* records written so far */
    uint64_t reader;       /* private: this writer's number among the process's (0 until its
                              first write): a thread's records it takes up where another
                              writer or a drain stopped start with their context */
} bpt_file_writer;

/* bpt_session_write: drain the session's buffers into a trace file: the
   header on the first call, then any names not written yet, then every
   thread's undrained records as they are, one write per run of them (a
   whole chunk when the drainer is behind, the written part of the chunk a
   thread is filling otherwise). Losses are marked as the thread marked
   them; a DROPPED record of its own marks where a flight recorder
   overwrote records. Each record goes to one reader only: to
   bpt_session_drain or to one writer, never to both. A writer (or a drain)
   that takes up a thread's records where another stopped, in the middle
   of a chunk (a new file after rotation, a new writer after BPT_EIO, a
   drain after a write or a write after a drain), gets first a copy of the
   thread's context record in effect there: each file reads on its own,
   with the thread, process and clock anchor of its records.

   Parameters
     s   the session
     w   the writer: w->fd open for writing; not NULL
   Returns        the number of records written by this call (>= 0), or a BPT_E* code
   Errors
     BPT_EINVAL     w is NULL or w->fd < 0
     BPT_ESESSION   s is stale or destroyed
     BPT_EIO        a write failed (errno's text in bpt_last_error: the
                    disk is full, RLIMIT_FSIZE, a pipe's reader went away).
                    The records not written stay in the buffers. A write
                    cut short in a file (where lseek and ftruncate work) is
                    taken back: the file is cut to its last whole block, w
                    stays usable, and a later call, once there is room,
                    writes every record once. In a pipe or socket (or where
                    ftruncate fails) it cannot be: the stream ends in a torn
                    block, which a reader takes as its end; w is broken and
                    every later call returns BPT_EIO at once (write anew to
                    a new file or stream, with a new writer)
     BPT_ENOMEM     the calling thread's record could not be allocated, or
                    a names block
   Thread safety  as bpt_session_drain (one drainer per session at a time).
                  The calling thread stays pinned during each write(2) (it
                  writes from the buffers themselves): a write that blocks,
                  to a pipe or socket whose reader stalls, holds up every
                  thread progress wait (bpt_trace_pattern and the like) until
                  it returns. Write to a file, or to a memory file and copy
                  from there, as the control server does (>>control)
   Source         bptrace; uftrace record's per-thread data files, LTTng's sub-buffers
*/
BPT_API int bpt_session_write(bpt_session s, bpt_file_writer *w);

/* A trace file opened for reading (opaque). */
typedef struct bpt_trace_file bpt_trace_file;

/* bpt_trace_file_open: open a trace file written by bpt_session_write and
   check its header.

   Parameters
     path   the file; not NULL
     out    where to write the handle; not NULL
   Returns        0 (and *out), or a BPT_E* code
   Errors
     BPT_EINVAL    a NULL
     BPT_ENOENT    the file cannot be opened, or is a directory (errno's text
                   in bpt_last_error)
     BPT_EFORMAT   not a bptrace trace file, or a version this header cannot read
     BPT_ENOMEM    no memory for the reader
   Thread safety  any thread
   Source         bptrace
*/
BPT_API int bpt_trace_file_open(const char *path, bpt_trace_file **out);

/* bpt_trace_file_fdopen: bpt_trace_file_open for an open descriptor: a
   pipe, a socket (a control server's STREAM, >>control), or a file. Reads
   block until a whole block has come, so a live stream is read as it is
   written; its end (EOF) ends the reader cleanly, after the last whole
   block. The descriptor is duplicated: it stays the caller's, and closing
   it (or shutdown) while a read waits is how a reader is stopped.

   Parameters
     fd    open for reading, >= 0
     out   where to write the handle; not NULL
   Returns        0 (and *out), or a BPT_E* code
   Errors
     BPT_EINVAL    fd < 0, or out is NULL
     BPT_EIO       fd cannot be duplicated or opened as a stream (errno's text)
     BPT_EFORMAT   the first 144 bytes are not a trace file header this header
                   reads (also: the stream ended before them)
     BPT_ENOMEM    no memory for the reader
   Thread safety  any thread
   Source         fdopen(3)
*/
BPT_API int bpt_trace_file_fdopen(int fd, bpt_trace_file **out);

/* bpt_trace_file_read: the next messages of the file, in the order their
   blocks were written (each thread's in the order it made them), at most
   one block's at a time (so a live stream's are returned as they come), decoded as
   bpt_session_drain decodes them: names from the file's name blocks,
   timestamps converted with the file's clock calibration. Names point into
   the reader and stay valid until bpt_trace_file_close; `format` is NULL.

   Parameters
     f     the reader; not NULL
     out   an array of max messages; NULL allowed when max is 0
     max   room in out, >= 0
   Returns        how many messages it wrote (0 at the end), or a BPT_E* code
   Errors
     BPT_EINVAL    f NULL; max < 0; out NULL with max > 0
     BPT_EFORMAT   a corrupt block or record (a truncated file ends cleanly
                   at its last whole block; so does a stream whose writer
                   broke, bpt_session_write); the reader stops there: a
                   call that decoded messages before it returns them, and
                   every later call returns BPT_EFORMAT
     BPT_ENOMEM    no memory for a block, the names table or a thread's
                   state; nothing is lost: a later call goes on from there
   Thread safety  one thread per reader at a time
   Source         bptrace
*/
BPT_API int bpt_trace_file_read(bpt_trace_file *f, bpt_msg *out, int max);

/* bpt_trace_file_info: the file's header: the traced process, its clock and
   the session.

   Parameters
     f       the reader; not NULL
     pid     where to write the traced process's id; NULL allowed
     clock   where to write the clock it used; NULL allowed
     name    where to write the session's name (64 bytes); NULL allowed
   Returns        0, or a BPT_E* code
   Errors         BPT_EINVAL   f is NULL
   Thread safety  one thread per reader at a time
   Source         bptrace
*/
BPT_API int bpt_trace_file_info(bpt_trace_file *f, uint32_t *pid, bpt_clock *clock, char name[64]);

/* bpt_trace_file_close: close the reader and free it; the names of the
   messages it returned are gone.

   Parameters     f   the reader; NULL does nothing
   Returns        nothing
   Errors         none
   Thread safety  no other use of f at the same time or after
   Source         bptrace
*/
BPT_API void bpt_trace_file_close(bpt_trace_file *f);
/*** End of api_session.h ***/

/*** Begin file api_func.h ***/
/* api_func.h: function records, the public half's one concern here: making
   functions traceable and forgetting them (VM instruction-word sites, native
   BPT_TRACEABLE entries, whole modules), finding them, and the VM's side of
   a traced call (its breakpoint opcode and its return-trace frames). */

/* >>func
   A function record (bpt_func, BEAM's ErtsCodeInfo) names one instrumentable
   function and owns its site: a VM instruction word, or a native entry. */

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
   in threaded code, or an opcode), 8 bytes, 8-byte aligned. bptrace changes
   it with one aligned atomic store; the VM must load it with BPT_VM_FETCH
   (one relaxed atomic load). */
typedef uintptr_t bpt_vm_word;
#if defined(__GNUC__) && !defined(__TINYC__)
#  define BPT_VM_FETCH(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#else
#  define BPT_VM_FETCH(p) (*(volatile bpt_vm_word *)(p))
#endif

/* bpt_register_vm: register a VM site, so that trace patterns can match it.
   Trace patterns already set by any session apply to it at once, through
   the 13 steps, without stopping any thread.

   Parameters
     first_word        the address of the function's first instruction word,
                       8-byte aligned, in writable memory (bptrace stores the
                       breakpoint word there; it does not check, and a
                       read-only word faults at the first install); the VM
                       keeps the word there while it is registered, and
                       fetches it only when the function is entered (a jump
                       back to it is taken for a new call); not NULL
     breakpoint_word   the word of the VM's breakpoint opcode; must differ
                       from *first_word
     module, name      copied and interned; at most 127 bytes each; not NULL
     arity             0..255
     ops               how to read arguments and callers; may be NULL; must
                       stay valid while registered
     out               where to write the record; not NULL
   Returns
     0, or a BPT_E* code. *out is set on success, and also when the function
     is registered but a remembered pattern could not be applied (ENOMEM below).
   Errors
     BPT_EINVAL    a NULL; arity outside 0..255; first_word not 8-byte aligned;
                   breakpoint_word equal to *first_word (or the site already patched)
     BPT_ELIMIT    module or name over 127 bytes; the name table is full
                   (about 4M distinct names of functions and match spec
                   messages per process: ids are never given back)
     BPT_EEXIST    first_word is already registered
     BPT_ENOMEM    nothing registered, *out untouched; or, with *out set, the
                   function IS registered but a remembered pattern could not
                   be applied to it (bpt_last_error says which; apply it
                   again with bpt_trace_pattern)
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source         BEAM's code loading plus erts_set_trace_pattern's default patterns
*/
BPT_API int bpt_register_vm(bpt_vm_word *first_word, bpt_vm_word breakpoint_word,
                            const char *module, const char *name, int arity,
                            const bpt_vm_ops *ops, bpt_func **out);

/* bpt_register_native: register one BPT_TRACEABLE C function by hand, so
   that trace patterns can match it; patterns in force apply at once. Only
   its entry's padding and one aligned entry word ever change: the word
   while traced, and, at registration on x86-64, gcc's two one-byte entry
   NOPs, which become the one NOP 66 90 that clang compiles (an untraced
   call then runs one instruction there, as under Linux ftrace; threads may
   be running the function meanwhile). bptrace does not know the size of a
   function registered by hand, so caller and return_to name it for return
   addresses up to the next registered entry (at most 64 KiB past its own);
   bpt_register_module takes sizes from the ELF symbols and names exactly.
   Limits (both registration calls): a traced call reaches bptrace with its
   integer and 128-bit vector argument registers saved, no wider: a
   function taking 256/512-bit vector arguments (x86-64: __m256 and wider;
   the handler's code may clear their upper halves) or SVE arguments
   (aarch64: the stub's restore of q0-q7 zeroes z0-z7's upper bits, and
   p0-p3 are not saved) must not be registered (bpt_register_module skips
   the aarch64 ones, which their symbols mark; x86-64 symbols say nothing).
   A code write leaves a page read+execute, as the loader mapped it, and
   BTI-guarded (PROT_BTI) where the loader guarded it: an object marked
   for BTI, on a CPU with BTI (module.c, >>BTI guard). Code the program
   mapped itself with PROT_BTI (a JIT) loses the guard: bptrace cannot
   read the flag back from /proc/self/maps.

   Parameters
     fn             the function's address; its entry must be as BPT_TRACEABLE
                    compiles it; not NULL
     module, name   copied and interned; at most 127 bytes each; not NULL
     arity          0..255: how many integer arguments call messages show
                    when the pattern gives no argument spec
     out            where to write the record; not NULL
   Returns
     0, or a BPT_E* code. *out is set on success, and also when the function
     is registered but a remembered pattern could not be applied.
   Errors
     BPT_EINVAL          a NULL; arity outside 0..255
     BPT_ELIMIT          module or name over 127 bytes; the name table is
                         full (as bpt_register_vm)
     BPT_EEXIST          fn is already registered
     BPT_ENOTPATCHABLE   the entry is not as BPT_TRACEABLE compiles it: the
                         padding before it is neither NOPs nor bptrace's, the
                         entry word is not a NOP (optionally after endbr64 /
                         bti c / paciasp), it crosses a cache line (x86-64) or
                         is misaligned (aarch64); bpt_last_error shows the bytes
     BPT_EPERM           mprotect refused writing the padding or the entry
                         NOP: the function is untouched; the message gives
                         errno (e.g. SELinux execmod, a read-only file
                         mapping); or, with *out set, refused installing a
                         remembered pattern
     BPT_ENOTSUP         tcc, BPT_NO_NATIVE or another architecture; or a CET
                         shadow stack (x86-64) or a guarded control stack
                         (aarch64) is active, which native tracing would trip
     BPT_ENOMEM          nothing registered; or, with *out set, a remembered
                         pattern could not be applied (as bpt_register_vm)
     BPT_EDEADLK         from a tracer callback, a pinned section, or a
                         callback under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source
     bptrace (site_x86_64.c, site_aarch64.c, site_native.c); Linux ftrace's patchable entries
*/
BPT_API int bpt_register_native(void *fn, const char *module, const char *name, int arity, bpt_func **out);

/* bpt_register_module: register every patchable function of a loaded module
   that is not registered yet, named from its ELF symbols (static functions
   too; names over 127 bytes are cut). The module name is the basename of
   the module's file, cut to 127 bytes likewise, so that a pattern can
   spell it. Two functions under one name (two static helpers) are two
   functions with a name id each: the bptrace:call probe gives each its own
   address. Arity is 0 (unknown): give an
   argument spec in the match spec to see arguments. bptrace's own functions
   (names starting with bpt_), which a whole-program build also makes
   patchable, are skipped: tracing them would recurse. So are aarch64
   functions marked STO_AARCH64_VARIANT_PCS (vector-PCS and SVE functions:
   their argument registers are wider than a traced call keeps; see
   bpt_register_native's limits). Patterns in force
   apply at once. All or nothing: on an error nothing is registered, except
   when a remembered pattern cannot be applied.

   Parameters
     module   NULL for the main executable, or the basename ("libfoo.so") or
              path of a loaded shared object; not ""
   Returns
     how many functions it registered (0: none new, or no patchable entries),
     or a BPT_E* code
   Errors
     BPT_ENOENT          the module is not loaded, or its file is gone (or
                         /proc/self/exe cannot be resolved)
     BPT_EINVAL          module is ""; the file is not ELF, malformed or
                         truncated, or differs from the loaded image; an
                         entry lies outside the module's code
     BPT_ENOTPATCHABLE   an entry is not as BPT_TRACEABLE compiles it, or the
                         module was compiled with another architecture's
                         -fpatchable-function-entry values (a function symbol
                         lies inside an entry's padding; the message names it)
     BPT_ENOTSUP         as bpt_register_native; or the file is ELF32 or of
                         the other byte order
     BPT_EPERM           the module's file cannot be opened; mprotect refused
                         a code write (nothing registered); or refused
                         installing a remembered pattern (functions registered)
     BPT_ELIMIT          the name table is full (as bpt_register_vm); nothing
                         registered
     BPT_ENOMEM          nothing registered; or a remembered pattern could not
                         be applied (the functions stay registered; the
                         message says so)
     BPT_EDEADLK         from a tracer callback, a pinned section, or a
                         callback under the code modification permission
   Thread safety
     any thread (set path); not from a signal handler; the caller keeps the
     module loaded during the call
   Source         bptrace (module.c); gcc -fpatchable-function-entry, dl_iterate_phdr(3)
*/
BPT_API int bpt_register_module(const char *module);

/* bpt_register_imports: register the import slots of a loaded module, the
   GOT entries its calls into other modules go through (a PLT stub jumps
   through one; code built with -fno-plt calls through one), and the words
   of its function-pointer tables the dynamic linker fills with an imported
   function (SQLite calls pread64 through such a table), so that trace
   patterns can match calls from this module to, say, libc: the equivalent
   of the export entry where Tracing.md's global call trace breaks. Each
   becomes a function named "module:symbol" ("sqlite_live:pread64"; module
   is the file's basename cut to 127 bytes, as bpt_register_module's), arity 0
   (give an argument spec to see arguments). Every kind works on it: call
   trace with arguments from the registers, return_from with the return
   value, exception_from, call_count, call_time, call_memory. Tracing
   switches the slot between its target and a trampoline of bptrace's, with
   one aligned store (slots.c, SL0-SL4); patterns in force apply at once.
   What is and is not traced:
   - only calls through this module's slots: a library's calls to its own
     functions, and other modules' calls (their own slots: register them
     too), are not;
   - a call bptrace itself makes through a traced slot is not traced: from
     its hit paths (mmap, the futex, the clock), its set path (mprotect,
     malloc) and its own threads; nor one a signal handler makes while its
     thread is there (>>own calls, site_native.c). Calls that draining,
     formatting and bpt_session_write make are traced like the program's;
   - functions that return twice or switch contexts (setjmp and its kin,
     vfork, getcontext, swapcontext) are not registered: return trace
     would lose their frame;
   - functions only: slots of data symbols are skipped, and so are slots
     whose target is not code (an untyped weak import nothing defines);
   - while a slot is traced, it holds the trampoline's address: code that
     compares a function pointer read from it with the function's address
     from elsewhere sees them differ (calls are unaffected). A symbol with
     several slots (a PLT slot and a table word) is registered once per
     slot, under the same name.
   Full RELRO (-z now -z relro): the GOT's page is made writable only for
   each batch of slot writes, then given back the protection it has at that
   moment (read again at each change: a program that changes a registered
   slot's page protection while bptrace may write it races with bptrace).
   Slots in shared mappings are refused. Lazy binding: a slot the dynamic
   linker has not bound yet is bound first, by name and version
   (dlvsym(3): the global scope, then the module's own dependencies),
   which is the linker's choice unless the module was loaded with
   RTLD_DEEPBIND or asks for an unversioned symbol that has several
   versions (then the default version is bound). A lazy binding still in flight on another
   thread when tracing starts could write over the trampoline's address:
   that is detected, not silently lost: switching the trace off then
   fails with BPT_ENOTPATCHABLE naming the dynamic linker, and the calls in
   between were untraced. A store of the program's into a slot is never
   overwritten (each switch, and the lazy bind, is a compare-and-swap):
   the switch fails with BPT_ENOTPATCHABLE instead. Each call maps pages
   of its own for its trampolines (64 bytes a slot, at least one page a
   call); records and
   trampolines are never freed (a thread may be on its way into one), and
   a slot registered again with the same target reuses its own. A module
   with bptrace inside it may register its own imports.

   Parameters
     module    NULL for the main executable, or the basename ("libfoo.so")
               or path of a loaded shared object; not ""
     pattern   NULL or "_" for every import, else a glob ('*' for any run)
               on symbol names, 1..127 bytes: "p*64", "malloc"
   Returns
     how many slots it registered (0: none new, or none matched), or a
     BPT_E* code. Slots registered already are skipped.
   Errors
     BPT_ENOTSUP         tcc, BPT_NO_NATIVE or another architecture (the
                         trampolines are native code); a CET shadow stack or
                         GCS is active; /proc/self/maps cannot be read
     BPT_ENOENT          the module is not loaded, or its file is gone
     BPT_EINVAL          module is ""; the file is not ELF, malformed,
                         truncated, or not the image that was loaded; a
                         slot to take is shared, unreadable or outside any
                         mapping (nothing registered)
     BPT_ENOTPATCHABLE   a slot to take lies in executable memory, or a
                         trampoline's record cannot be reached from it
                         (nothing registered)
     BPT_EPATTERN        pattern is "" or over 127 bytes
     BPT_ELIMIT          the name table is full (as bpt_register_vm); nothing
                         registered
     BPT_EPERM           the module's file cannot be opened; mprotect
                         refused the trampolines (nothing registered) or a
                         slot's page while installing a remembered pattern
     BPT_ENOMEM          nothing registered; or a remembered pattern could
                         not be applied (the slots stay registered)
     BPT_EDEADLK         from a tracer callback, a pinned section, or a
                         callback under the code modification permission
   Thread safety  any thread (set path); not from a signal handler, nor
                  from a library constructor (the lookups take the dynamic
                  linker's lock). The module must stay loaded during the call.
   Source         Tracing.md's global call trace (export entries); uftrace's
                  PLT hooking; the gABI and psABI dynamic relocations
*/
BPT_API int bpt_register_imports(const char *module, const char *pattern);

/* bpt_register_slot: register one function-pointer slot, so that trace
   patterns can match the calls made through it: a table of handlers built
   by hand, an interpreter's dispatch table, an engine's table of systems.
   The slot must hold the function's address now, and callers must load it
   at each call, with a relaxed atomic load (__atomic_load_n(slot,
   __ATOMIC_RELAXED): the same instruction as a plain aligned load, and no
   data race in C11 terms while bptrace switches the slot). It is switched as bpt_register_imports' slots are, with
   the same trampolines, kinds and protocol; a slot in read-only memory is
   made writable only while it is written. A write of the program's to the
   slot while it is registered is never overwritten: it is detected at the
   next switch (BPT_ENOTPATCHABLE). Calls that do not load the slot (direct
   calls to the same function) are not traced, and a function that returns
   twice (setjmp-like) must not be return-traced through a slot. Each call
   maps a page for its trampoline (4 KiB, or the system's page size).

   Parameters
     slot           the slot's address: pointer-aligned, mapped, readable,
                    not in executable memory; not NULL
     module, name   copied and interned; at most 127 bytes each; not NULL
     arity          0..255: how many integer arguments call messages show
                    when the pattern gives no argument spec
     out            where to write the record; not NULL
   Returns
     0, or a BPT_E* code. *out is set on success, and also when the slot is
     registered but a remembered pattern could not be applied.
   Errors
     BPT_EINVAL          a NULL; arity outside 0..255; the slot misaligned,
                         outside any readable mapping, in a shared mapping,
                         or holding an address that is not code
     BPT_ELIMIT          module or name over 127 bytes; the name table is
                         full (as bpt_register_vm)
     BPT_EEXIST          the slot is already registered
     BPT_ENOTPATCHABLE   the slot lies in executable memory
     BPT_ENOTSUP, BPT_EPERM, BPT_ENOMEM, BPT_EDEADLK   as bpt_register_imports
   Thread safety  any thread (set path); not from a signal handler
   Source         bptrace (slots.c); BEAM's export entries, Tracing.md
*/
BPT_API int bpt_register_slot(void **slot, const char *module, const char *name, int arity, bpt_func **out);

/* bpt_unregister_module: remove every session's breakpoints from the
   module's native functions (every registered native function whose module
   name is module's basename, also those registered by hand), through the
   13 steps, then unregister them. VM functions are not touched, whatever
   their module name. Call it before
   dlclose; the caller guarantees that no thread still runs the module's code.

   Parameters
     module   the basename or path of the module (only the basename is
              compared, cut to 127 bytes as bpt_register_module names the
              module); not NULL (unlike bpt_register_module)
   Returns        how many functions it unregistered (>= 1), or a BPT_E* code
   Errors
     BPT_EINVAL    module is NULL
     BPT_ENOENT    no registered native function of that module
     BPT_ENOMEM    nothing unregistered; breakpoints already switched off
                   stay off
     BPT_EPERM     mprotect refused restoring an entry word: nothing
                   unregistered; breakpoints already switched off stay off
     BPT_EBUSY     a function still holds its breakpoint word (an earlier
                   switch-off could not restore it: BPT_EPERM or
                   BPT_ENOTPATCHABLE then); nothing unregistered. Once the
                   cause is gone, switch a pattern naming it off again
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source         BEAM's code purging (erts_purge_module), for native modules
*/
BPT_API int bpt_unregister_module(const char *module);

/* bpt_unregister: forget a function record; the record is freed (VM
   sites) or kept for reuse (native sites), and f must not be used again.
   It must carry no breakpoint. The caller guarantees, as when unloading
   code, that no thread can still fetch the site's word and call
   bpt_vm_breakpoint(f) after this call, and that no call of f is still
   running with a return-trace token (its bpt_vm_return would read the
   freed record, as BEAM's purge requires that no process runs old code).
   Threads already inside bpt_vm_breakpoint(f) are covered, and so are
   managed VM threads that report progress only between instructions.

   Parameters     f   a registered record; not NULL
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL    f is NULL
     BPT_ENOENT    f is not a registered record
     BPT_EBUSY     a session traces f (remove its patterns first), or an
                   earlier uninstall was refused (mprotect, or a site that
                   held a foreign word) and the breakpoint word is still in
                   place: once the cause is gone, switch a pattern that names
                   f off again, then unregister
     BPT_ENOMEM    a native function: no memory for the new index of native
                   code that names callers and return_to targets; f stays
                   registered (or the thread's record could not be allocated)
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source         BEAM's code purging (erts_purge_module)
*/
BPT_API int bpt_unregister(bpt_func *f);

/* bpt_func_lookup: find a registered function by exact module, name and arity.

   Parameters
     module, name   exact names, not patterns; not NULL
     arity          0..255 (others are never found)
     out            where to write the record; not NULL
   Returns        0 (and *out), or a BPT_E* code
   Errors
     BPT_EINVAL    a NULL
     BPT_ENOENT    no such function is registered
     BPT_ENOMEM    the calling thread's record could not be allocated
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety
     any thread (it takes the code modification permission); not from a
     signal handler
   Source         erlang:function_exported/3
*/
BPT_API int bpt_func_lookup(const char *module, const char *name, int arity, bpt_func **out);

/* bpt_func_count: how many functions are registered.

   Parameters     none
   Returns        the count (>= 0), or a BPT_E* code
   Errors
     BPT_ENOMEM    the calling thread's record could not be allocated
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety  as bpt_func_lookup
   Source         bptrace
*/
BPT_API int bpt_func_count(void);

/* A return-trace frame token (0: none). */
typedef uint64_t bpt_vm_token;

/* bpt_vm_breakpoint: what the VM's breakpoint opcode calls, as BEAM's
   op_i_generic_breakpoint. Counts the call, evaluates match specs and sends
   call messages for every session tracing f, then gives back the original
   instruction word for the VM to execute in place of the breakpoint.
   Never blocks; takes no lock.

   Parameters
     f       the record registered for this site; not NULL (asserted)
     frame   the VM's frame of the call, handed back to ops->arg and ops->caller
     token   where to write whether the VM must keep a return-trace frame:
             0, or a token the VM keeps in a frame of the call (as BEAM
             pushes a return_trace frame) and hands to exactly one of
             bpt_vm_return or bpt_vm_unwind, on this thread. NULL: the VM
             keeps no frames, and return trace of its calls is skipped.
   Returns        the site's original instruction word
   Errors         none
   Thread safety
     any thread; async-signal-safe once the thread has a ring in each
     tracing session; a managed thread must be online
   Source         op_i_generic_breakpoint and erts_generic_breakpoint in beam_bp.c
*/
BPT_API bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame, bpt_vm_token *token);

/* bpt_vm_return: the call that got token returns value. Sends return_from
   (and return_to) to the sessions that asked. Frames pushed after token's
   and not yet returned were unwound: they are reported first, as
   bpt_vm_unwind reports them (value 0). A stale, foreign or 0 token is
   ignored. Never blocks.

   Parameters
     token   from bpt_vm_breakpoint on this thread
     value   the return value, as the match spec's ret type says (i64 by
             default; f64: the double's bits)
   Returns        nothing
   Errors         none
   Thread safety  the thread that hit the breakpoint (it acts on that thread's frames)
   Source         BEAM's return_trace frame (erts_trace_return in beam_bp.c)
*/
BPT_API void bpt_vm_return(bpt_vm_token token, uint64_t value);

/* bpt_vm_unwind: a throw passes the frame of token: sends exception_from
   (class "throw") to the sessions that asked for exception trace, and drops
   the frame and any pushed after it. A stale, foreign or 0 token is
   ignored. Never blocks.

   Parameters
     token       from bpt_vm_breakpoint on this thread
     exception   the thrown value, shown as the message's value
   Returns        nothing
   Errors         none
   Thread safety  as bpt_vm_return
   Source         BEAM's exception_trace, "found while scanning the stack during a throw"
*/
BPT_API void bpt_vm_unwind(bpt_vm_token token, uint64_t exception);

/* bpt_unwind_to: the host unwound native frames (longjmp, a C++ throw, a
   coroutine abort) back into the function that calls this: every
   return-trace frame of the calling thread entered at or below sp is
   reported as exception_from (class "unwind", value 0), newest first, and
   dropped. Without this call, bptrace notices such frames at the next
   traced return above them, or when a traced call reuses their place.
   Only frames of the stack the thread runs on now are looked at (a fiber
   switched away from with swapcontext keeps its frames; a signal handler
   on the sigaltstack ends only frames on it, not those of the code it
   interrupted), as a traced call settles them (frames.c, F0). Never
   blocks.

   Parameters
     sp   the calling function's stack pointer or __builtin_frame_address(0)
          (on aarch64 a callee's entry sp can equal it; the function's own
          entry sp is always above); not NULL
   Returns        how many frames it dropped (>= 0), or a BPT_E* code
   Errors         BPT_EINVAL   sp is NULL
   Thread safety  any thread (acts on the caller's frames)
   Source         bptrace
*/
BPT_API int bpt_unwind_to(const void *sp);

/* bpt_fiber_switch_begin, bpt_fiber_switch_end: a coroutine library's own
   stack switch (hand-written assembly, boost.context: a switch bptrace does
   not see, unlike swapcontext and setcontext), announced as sanitizers are
   told of one (__sanitizer_start_switch_fiber, _finish_switch_fiber).
   Call begin right before the switch: the calls this stack times are
   paused, and the thread takes a new stack tag, which a fresh coroutine
   keeps. Call end(tag) right after the switch returns to this stack, with
   the tag that begin returned before it: the thread takes this stack's tag
   back and its timed calls resume. Return-trace frames are compared only
   with frames of the same tag, so a suspended coroutine's frames are never
   ended by another stack's calls, nor a return's frame sought among them.
   A coroutine's first code needs no call (it runs with begin's new tag).

   Parameters     tag (end)   what this stack's begin returned
   Returns        begin: the tag of the stack being left; end: nothing
   Errors         none (a thread whose record cannot be made: begin
                  returns 0 and nothing is tagged)
   Thread safety  acts on the calling thread only; async-signal-safe once
                  the thread has its record (any bptrace call made it);
                  never blocks. A coroutine resumed on another thread is
                  not supported (its frames stay on the first thread's)
   Source         fibers.c, S1 and S2 (what bptrace's swapcontext does)
*/
BPT_API uint64_t bpt_fiber_switch_begin(void);
BPT_API void bpt_fiber_switch_end(uint64_t tag);

/* bpt_vm_word_at: the word currently stored at a registered VM site: the
   breakpoint word while installed, the original otherwise. For tests.

   Parameters     f   a registered VM record
   Returns        the word; 0 when f is NULL or a native function
   Errors         none
   Thread safety  any thread
   Source         bptrace
*/
BPT_API bpt_vm_word bpt_vm_word_at(const bpt_func *f);
/*** End of api_func.h ***/

/*** Begin file api_pattern.h ***/
/* api_pattern.h: trace patterns, the public half's one concern here:
   switching tracing on and off (bpt_trace_pattern with its flags and match
   specs) and watching that change happen (the protocol's two generations
   and its step observer). */

/* >>pattern */

/* >>kinds: the breakpoint kinds, one row each: X(NAME, name, flag). NAME
   makes the public flag BPT_NAME; name names the hooks of the part that
   implements the kind (bpt__kind_<name>_prepare, _stage, _ref, _unref,
   _hit, _info: src/README.md lists them). A new kind is a row here and a
   part of its own. Rows run in this order on a hit.
     BPT_COUNT   call_count: a counter per function, as BEAM's BpCount (kind_count.c)
     BPT_CALL    local call trace: a call message per call (kind_call.c)
     BPT_TIME    call_time: calls and own time (ns) per process (kind_timem.c)
     BPT_MEMORY  call_memory: calls and the bytes bpt_account_memory reported,
                 per process (kind_timem.c: it shares call_time's tables) */
#define BPT_KINDS(X) \
    X(COUNT,  count,  1u << 1) \
    X(CALL,   call,   1u << 0) \
    X(TIME,   time,   1u << 6) \
    X(MEMORY, memory, 1u << 7)

/* What a pattern sets (OR them): */
enum bpt_trace_flag {
#define BPT__KIND_FLAG(NAME, name, flag) BPT_##NAME = flag,
    BPT_KINDS(BPT__KIND_FLAG)   /* BPT_COUNT, BPT_CALL, BPT_TIME, BPT_MEMORY: the kinds */
#undef BPT__KIND_FLAG
    /* With BPT_CALL, the match spec actions of Tracing.md (each also a bpt_match action): */
    BPT_RETURN    = 1u << 2,  /* return_trace: a return_from message with the return value */
    BPT_EXCEPTION = 1u << 3,  /* exception_trace: return_trace, plus exception_from when unwound */
    BPT_RETURN_TO = 1u << 4,  /* return_to: a return_to message naming the function returned to */
    BPT_CALLER    = 1u << 5,  /* caller: the call message names the function it returns to */
    /* How (at most one; none means "switch on"): */
    BPT_OFF     = 1u << 16, /* switch the named kinds off (BPT_OFF alone: all kinds) */
    BPT_PAUSE   = 1u << 17, /* call_count, call_time, call_memory: stop counting, keep the values
                               (a call in flight is charged at its return, as in BEAM) */
    BPT_RESTART = 1u << 18  /* call_count, call_time, call_memory, where on: set to zero and count */
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
   first nargs arguments as 64-bit words. Runs in the traced thread, inside
   the hit path (the rules of a callback tracer apply). */
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
                              NULL or "": the first `arity` arguments as i64. Integer kinds
                              take the next integer register, f64 the next FP register. */
    const char  *ret;      /* return value type for return_from: one of i64 (NULL), u64, ptr,
                              str, f64 (uftrace -R's retval) */
} bpt_match;

/* bpt_trace_pattern: set, change or clear a session's breakpoints on every
   registered function matching pattern, without stopping any thread (the 13
   steps). The pattern also stays in force for functions registered later,
   until a BPT_OFF call with the same pattern text removes it.
   Return trace (BPT_RETURN, BPT_EXCEPTION, BPT_RETURN_TO, and BPT_TIME /
   BPT_MEMORY on native functions) follows each traced call to its return.
   Frames unwound by longjmp or a throw are found at the next traced return
   above them, or by bpt_unwind_to / bpt_vm_unwind, and give exception_from.
   Tail calls: a traced function entered by a tail call from one whose
   return is traced shares its frame; both get return_from, innermost first,
   and one return_to ends the chain. Limits of native return trace: on
   x86-64 a function returning long double (x87) or a 256/512-bit vector
   must not be return-traced; a C++ throw through it and a swapcontext
   fiber are fine (bpt_api.h, thread-safety rules), a coroutine library
   with its own stack switch code, or a fiber resumed on another thread,
   is not.

   Parameters
     s         the session
     pattern   "module:function/arity"; module and function each a glob of
               1..127 bytes where '*' matches any run of characters and '_'
               alone matches anything; arity 0..255, or '_' or '*' for any
               ("_:_/_" is every function); not NULL. The module ends at the
               first ':' and the function at the one '/': a function may hold
               ':' (C++ names, demangled: "prog:game::step(long)/_")
     flags     kinds (BPT_CALL, BPT_COUNT, BPT_TIME, BPT_MEMORY) plus at most
               one of BPT_OFF, BPT_PAUSE, BPT_RESTART (PAUSE and RESTART: the
               counting kinds only, and only on functions where the kind is
               on: a function not counting stays so; RESTART of BPT_TIME or
               BPT_MEMORY zeroes both tables). A counting kind switched on
               where it is already on, paused or not, starts from zero, as a
               restart does (erlang:trace_pattern's `true` on call_count and
               call_time); with BPT_CALL switched on, also BPT_RETURN,
               BPT_EXCEPTION, BPT_RETURN_TO, BPT_CALLER (the match spec
               actions of those names; they apply to the calls the match spec
               accepts, as in BEAM)
     match     the call-trace match spec (copied), read only when BPT_CALL is
               switched on; NULL: every call, no actions but the flags'
   Returns        the number of registered functions matched (>= 0), or a BPT_E* code
   Errors
     BPT_EINVAL     pattern is NULL; or a matched pointer slot is no longer
                    mapped (its module unloaded without bpt_unregister_module)
                    and the change may switch something on: nothing changed
                    (a BPT_OFF forgets such a slot: BPT_ENOTPATCHABLE)
     BPT_EPATTERN   pattern empty or malformed (bpt_last_error says where);
                    match->args or match->ret names an unknown type, has more
                    than 8 types, ends with ','; ret is not exactly one type
     BPT_EFLAGS     an unknown flag bit; BPT_RETURN & co. without BPT_CALL
                    switched on; two of OFF/PAUSE/RESTART; PAUSE or RESTART
                    with BPT_CALL or without a counting kind; no kind without
                    BPT_OFF; unknown bits in match->actions
     BPT_ESESSION   s is stale or destroyed
     BPT_ENOTSUP    BPT_RETURN, BPT_EXCEPTION or BPT_RETURN_TO in flags on
                    native functions where a CET shadow stack or a guarded
                    control stack is active; pointer slots to switch and no
                    /proc/self/maps to read their pages' protections from
     BPT_ENOMEM     nothing changed (also: the thread's record)
     BPT_ELIMIT     match->message is a new name and the name table is full
                    (as bpt_register_vm); nothing changed. A call refused
                    for another reason gives its message no id
     BPT_EPERM      native sites and slots: mprotect refused a code write (or
                    a read-only slot's page); the settings
                    are committed, but the functions whose word could not be
                    written stay untraced; the pattern is remembered as if
                    it had succeeded (functions registered later get it)
     BPT_ENOTPATCHABLE  a site did not hold the word bptrace expected there
                    (a debugger's breakpoint, another patcher changed it; a
                    slot written by the program or by lazy binding, which a
                    switch-off finds already holding its target and counts
                    as off; a slot no longer mapped, which a switch-off
                    forgets without a write):
                    that site is left alone, the others are written, and as
                    with BPT_EPERM the settings are committed and the pattern
                    remembered. A switch-off that could not restore a
                    word is retried by the next switch-off of a pattern that
                    names the function (as ftrace_modify_code checks, Linux)
     BPT_EDEADLK    from a tracer callback, a pinned section, or a callback
                    under the code modification permission (an observer, a
                    bpt_trace_info_each visitor)
   Thread safety
     any thread (set path: serialized with the other set-path calls, waits
     for thread progress); not from a signal handler
   Source         erlang:trace_pattern/3; erts_set_trace_pattern in beam_bp.c; Tracing.md
*/
BPT_API int bpt_trace_pattern(bpt_session s, const char *pattern, unsigned flags,
                              const bpt_match *match);

/* bpt_active_bp_ix / bpt_staging_bp_ix: which of the two generations of
   every breakpoint running code reads (0 or 1), and the other, where the
   set path stages changes. The protocol's commit (its seventh step) swaps them.

   Parameters     none
   Returns        0 or 1
   Errors         none
   Thread safety  any thread
   Source         erts_active_bp_ix / erts_staging_bp_ix in beam_bp.h
*/
BPT_API unsigned bpt_active_bp_ix(void);
BPT_API unsigned bpt_staging_bp_ix(void);

/* A protocol observer sees each of the 13 steps of a breakpoint change as it
   ends: step 1..13, did (0 when the step had nothing to do and was skipped),
   the step's duration in ns. bpt_trace_pattern and bpt_session_destroy
   report all 13; a registration that applies remembered patterns reports
   steps 2..12 once per pattern applied. It runs under the code modification
   permission and must not call set-path functions (BPT_EDEADLK). For
   examples/protocol_walkthrough and tests. */
typedef void (*bpt_observer_fn)(int step, int did, uint64_t ns, void *user);

/* bpt_set_protocol_observer: install or remove the one protocol observer
   (it replaces the previous one).

   Parameters
     fn     the observer; NULL removes it
     user   handed to fn
   Returns        0, or a BPT_E* code
   Errors
     BPT_ENOMEM    the calling thread's record could not be allocated
     BPT_EDEADLK   from a tracer callback, a pinned section, or a callback
                   under the code modification permission
   Thread safety  any thread (set path); not from a signal handler
   Source         bptrace (for teaching the 13 steps of Tracing.md)
*/
BPT_API int bpt_set_protocol_observer(bpt_observer_fn fn, void *user);

/* bpt_protocol_step_name: the name of a protocol step: "seize permission",
   "allocate", "stage", ... "release permission".

   Parameters     step   1..13
   Returns        a static string; NULL for a step outside 1..13
   Errors         none
   Thread safety  any thread; async-signal-safe
   Source         the 13 steps of Tracing.md (OTP)
*/
BPT_API const char *bpt_protocol_step_name(int step);
/*** End of api_pattern.h ***/

/*** Begin file api_info.h ***/
/* api_info.h: what tracing measured, the public half's one concern here:
   reading a session's settings, call_count, call_time and call_memory
   (bpt_trace_info), and telling bptrace what it measures against (the
   process a thread runs, the memory it allocates). */

/* >>info */

/* What bpt_trace_info reports. */
enum bpt_info_flag {
    BPT_INFO_FLAGS  = 1u << 0,   /* the flags set (bpt_info.flags, *_paused) */
    BPT_INFO_COUNT  = 1u << 1,   /* call_count */
    BPT_INFO_TIME   = 1u << 2,   /* call_time: calls and own time per process */
    BPT_INFO_MEMORY = 1u << 3    /* call_memory: calls and bytes per process */
};

/* One process's call_time / call_memory on one function. */
typedef struct bpt_info_process {
    uint64_t process;      /* as bpt_process_switch named it (default: the OS thread id) */
    uint64_t calls;        /* calls counted while call_time or call_memory was active */
    uint64_t time_ns;      /* own time, ns: in the function, not in traced callees, not scheduled out */
    uint64_t memory_bytes; /* bytes bpt_account_memory reported while the function was current:
                              the net, allocated minus freed, as int64_t's two's complement
                              (read it as (int64_t)memory_bytes: below zero when the calls freed
                              more than they allocated); sums wrap modulo 2^64 */
} bpt_info_process;

/* A function's settings and counters in one session. */
typedef struct bpt_info {
    unsigned flags;        /* BPT_CALL | BPT_COUNT | BPT_TIME | BPT_MEMORY (and BPT_RETURN & co.
                              with BPT_CALL) set for f in the session; 0 if none */
    int      count_paused; /* 1: call_count is paused */
    uint64_t count;        /* call_count, exact, a count of calls */
    int      time_paused;  /* 1: call_time is set and paused */
    int      memory_paused;/* 1: call_memory is set and paused (BPT_PAUSE pauses each kind
                              named: call_time paused, call_memory counting is a state of its own) */
    uint64_t calls;        /* call_time / call_memory: calls, all processes */
    uint64_t time_ns;      /* call_time: own time, all processes, ns */
    uint64_t memory_bytes; /* call_memory: net bytes, all processes (as bpt_info_process's:
                              read it as int64_t) */
    uint64_t lost_charges; /* call_time / call_memory: charges dropped, a count, all processes,
                              since the tables were made (BPT_RESTART, or the kind switched on
                              again, zeroes it with the rest).
                              A charge is a call's count (then missing from calls) or a return's
                              own time and bytes (then missing from time_ns and memory_bytes).
                              Dropped rather than waited for: a signal handler's charge nested
                              in its thread's charge of the same tables (f's in this session),
                              charges nested more than 4 deep (BPT__TIMEM_NEST), no memory for
                              the thread's table, a thread record past BPT_MAX_THREADS + 65536.
                              0: calls, time_ns and memory_bytes are whole */
    uint32_t nprocs;       /* out: processes with calls, time or memory on f */
    uint32_t procs_cap;    /* in: room in procs, in entries (bpt_trace_info only) */
    bpt_info_process *procs; /* in: an array of procs_cap, or NULL; out: in procs[0..min(nprocs,
                              procs_cap)), the processes with the most time (call_memory alone:
                              the most memory, net and signed: a process that freed more than it
                              allocated ranks last), most first; ties go to more memory, then to
                              the lower process id. Entries past those are left as they were */
} bpt_info;

/* bpt_trace_info: the session's settings, call_count, call_time and
   call_memory for one function, collected without blocking any traced
   thread. Time is own time, charged as BEAM charges it: a call starts its
   function and pauses the caller's, a return charges the callee and resumes
   the caller; a call still running is counted, but its time is charged
   when it returns, also if call_time was paused meanwhile (as BEAM's
   return charges a paused function; the calls after the pause are not
   counted or timed). Native functions need return frames for time and memory
   (BPT_TIME and BPT_MEMORY work like return trace, with its limits). A
   charge that could only be made by waiting or by risking the tables (a
   signal handler's nested in its thread's charge of the same tables, no
   memory, ...) is dropped and counted: out->lost_charges says how many, with
   the sums, and like them it is kept from one call to the next.

   Parameters
     s      the session
     f      a registered function; not NULL
     what   BPT_INFO_* bits: what to report (others stay 0). BPT_INFO_TIME or
            BPT_INFO_MEMORY: calls, time_ns, memory_bytes, lost_charges, nprocs
            and procs (either bit reports them all)
     out    in: procs and procs_cap (procs may be NULL); out: the rest; not
            NULL. procs gets the min(nprocs, procs_cap) processes with the
            most time (call_memory alone: memory), most first, however many
            processes there are (see bpt_info.procs)
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL     f or out is NULL; unknown bits in what
     BPT_ESESSION   s is stale or destroyed
     BPT_ENOENT     f is not registered
     BPT_ENOMEM     no memory for the collection: nothing changed, counts are
                    kept (the next call collects them); or the thread's record
     BPT_EDEADLK    from a tracer callback, a pinned section, or a callback
                    under the code modification permission (it takes the
                    permission)
   Thread safety  any thread (set path); not from a signal handler
   Source
     erlang:trace_info/2 (flags, call_count, call_time, call_memory);
     OTP 29's call_time collection in beam_bp.c
*/
BPT_API int bpt_trace_info(bpt_session s, const bpt_func *f, unsigned what, bpt_info *out);

/* What bpt_trace_info_each calls for each function: info is valid during
   the call only (its procs array too). It runs under the code modification
   permission: it must not call set-path functions (BPT_EDEADLK). */
typedef void (*bpt_info_fn)(const bpt_func *f, const char *module, const char *name,
                            int arity, const bpt_info *info, void *user);

/* bpt_trace_info_each: bpt_trace_info for every registered function that
   matches pattern and has a breakpoint in the session, calling fn for each
   in the calling thread. info->procs holds every process (room is
   allocated; if that fails, the totals are still right and procs is empty).

   Parameters
     s         the session
     pattern   as bpt_trace_pattern's; not NULL
     what      BPT_INFO_* bits
     fn        called once per function; not NULL
     user      handed to fn
   Returns
     how many functions were reported (>= 0), or a BPT_E* code (then fn was
     not called)
   Errors
     BPT_EINVAL     fn or pattern is NULL; unknown bits in what
     BPT_EPATTERN   pattern is empty or malformed
     BPT_ESESSION   s is stale or destroyed
     BPT_ENOMEM     as bpt_trace_info
     BPT_EDEADLK    as bpt_trace_info
   Thread safety  any thread (set path); not from a signal handler
   Source         erlang:trace_info/2 over a pattern (as tprof and eprof gather it)
*/
BPT_API int bpt_trace_info_each(bpt_session s, const char *pattern, unsigned what,
                                bpt_info_fn fn, void *user);

/* bpt_process_switch: the calling thread now runs process `process`, for a
   host with green threads, fibers that run to completion, or actors.
   call_time charges the previous process's current function up to now; the
   time until this thread runs that process again is charged to nobody, as
   BEAM excludes the time a process is scheduled out. Messages carry the
   process too. Never blocks; allocates nothing after the thread's first
   bptrace call.

   Parameters     process   any id the host chooses; 0: the OS thread itself (the default)
   Returns        nothing
   Errors         none
   Thread safety
     any thread (acts on the caller); async-signal-safe once the thread has
     its record. A switch made by a signal handler that interrupted
     bptrace's push of a frame pauses and resumes no frame below it (that
     push may be pausing them right now, and a second pause would charge
     the span twice): one that stays running is charged the time the other
     process runs, as a handler's own calls leave them (>>timem
     attribution in frames.c)
   Source         BEAM's scheduling out and in of a process (call_time's schedule_out)
*/
BPT_API void bpt_process_switch(uint64_t process);

/* bpt_account_memory: the calling thread's current process allocated bytes
   (negative: freed): call_memory charges them to its current traced
   function in each session that has call_memory on it. Never blocks.

   Parameters     bytes   bytes allocated (> 0) or freed (< 0); 0 does nothing
   Returns        nothing
   Errors         none
   Thread safety  any thread (acts on the caller); never blocks
   Source         call_memory in OTP 26+ (erlang:trace_pattern/3)
*/
BPT_API void bpt_account_memory(int64_t bytes);
/*** End of api_info.h ***/

/*** Begin file api_format.h ***/
/* api_format.h: output formats, the public half's one concern here: turning
   drained messages and trace_info figures into text and files that people
   and tools read (dbg lines, tprof tables, Chrome trace JSON, folded stacks).
   All of it is off the hot path: it never touches traced threads. */

/* >>format */

/* bpt_format_dbg: one message as a line in the style of OTP's dbg with
   recon_trace's timestamps, NUL terminated, without a newline, e.g.
       15:36:26.123456 (<4711>) call tinyvm:fib(10) (caller tinyvm:loop/3)
       15:36:26.123458 (<4711>) returned from tinyvm:fib/1 -> 55
       15:36:26.123459 (<4711>) returning to tinyvm:loop/3
       15:36:26.123459 (<4711>) exception_from tinyvm:c/1 {throw,10}
       15:36:26.123460 (<4711>) dropped 17 messages

   Parameters
     m      the message; not NULL
     buf    where to write the text; NULL allowed when size is 0
     size   bytes in buf (the text is truncated to fit, as snprintf)
   Returns        the length in bytes it wanted (as snprintf), or a BPT_E* code
   Errors         BPT_EINVAL   m is NULL; buf is NULL with size > 0
   Thread safety  any thread; not from a signal handler
   Source         OTP's dbg:dhandler; recon_trace's format
*/
BPT_API int bpt_format_dbg(const bpt_msg *m, char *buf, size_t size);

/* One line of a profile table. */
typedef struct bpt_profile_row {
    const char *module, *name;
    int arity;
    uint64_t process;      /* 0: the total over processes */
    uint64_t calls;        /* a count of calls */
    uint64_t value;        /* time in ns (call_time), or bytes (call_memory: the net, allocated
                              minus freed, as int64_t's two's complement, as bpt_info's) */
} bpt_profile_row;

/* bpt_format_profile: a table in the style of OTP's tprof,
       FUNCTION                     CALLS   TIME(us)   PER CALL  [    %]
   sorted by value, with a total line, for call_time or call_memory (BYTES
   instead of TIME: signed, so a function that freed more than it
   allocated ranks last and shows below zero). Rows of several processes may be mixed; each is printed
   with its process.

   Parameters
     rows     the rows, sorted in place by value; NULL allowed when n is 0
     n        how many rows, >= 0
     memory   0: call_time (values in ns, shown in us); 1: call_memory (bytes)
     buf      where to write the table; NULL allowed when size is 0
     size     bytes in buf (truncated to fit, as snprintf)
   Returns        the length in bytes it wanted (as snprintf), or a BPT_E* code
   Errors         BPT_EINVAL   rows NULL with n > 0; n < 0; buf NULL with size > 0
   Thread safety
     any thread (rows are not shared while it sorts them); not from a
     signal handler
   Source         OTP's tprof (tprof:format/1)
*/
BPT_API int bpt_format_profile(bpt_profile_row *rows, int n, int memory, char *buf, size_t size);

/* A Chrome Trace Event JSON writer (chrome://tracing, Perfetto, speedscope):
   call messages become "B" events, return_from and exception_from "E"
   events, a call no return ends (bpt_msg.no_return: trace a pattern with
   its returns for slices) the thread's instant event, with ts in
   microseconds (three decimals, written without the locale) from the
   first event, pid the id of the process writing (for a
   file read back: the reader's), tid the traced thread, and one
   thread_name record per thread. Where a host switched processes on a
   thread (bpt_process_switch), each such process is a pid of its own (its
   bptrace process id, with one process_name record however many threads
   ran it), and its calls on each thread a track of their own (with its
   thread_name record). Names are written as JSON strings of valid UTF-8
   (a byte that is not is written as U+FFFD). The events nest per track,
   as the format requires, whatever the messages: the writer keeps each
   thread's (and process's) open calls (the first 64; deeper calls are not
   written, nor their returns) and
     - skips a return with no open call of that function (tracing began
       inside the call), counted in `unmatched`;
     - closes, at the same ts, open calls above the one a return matches
       (frames unwound without a message, e.g. with BPT_RETURN but no
       BPT_EXCEPTION), counted in `closed`;
     - closes every call still open at bpt_chrome_close, at its thread's
       last ts (tracing ended inside it), counted in `closed` too;
     - at a DROPPED message (its thread's ring was full), closes that
       thread's open calls at the message's ts, newest first, counted in
       `closed`, and writes an instant event ("ph":"i", "s":"t") named
       "dropped N" on the thread: what the lost messages did to the stack is
       unknown, so nothing opened before the loss stays open after it. A
       later return of such a call is skipped and counted in `unmatched`
       (no E without its B); later calls nest from the thread's root.
   A track's time never goes back: a message stamped before the track's
   newest event (messages merged from several sources) is written at that
   event's ts, so that no E is before its B.
   Zero-initialise nothing: bpt_chrome_open fills the struct. */
typedef struct bpt_chrome {
    FILE *out;             /* the stream written; NULL: not open */
    uint64_t base_ns;      /* ts 0: the first event's time, CLOCK_MONOTONIC ns */
    long events;           /* records written (thread names included) */
    long unmatched;        /* returns skipped: no open call of theirs */
    long closed;           /* E events the writer added to keep the nesting */
    struct bpt__tracks *tracks;   /* private: each thread's (and process's) open calls */
    int err;               /* 1: a write failed */
} bpt_chrome;

/* bpt_chrome_open: start a Chrome trace on out: write the JSON's opening.

   Parameters
     w     the writer to fill; not NULL
     out   an open stream; not NULL; stays the caller's
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL   w or out is NULL; the first write failed, or out's error
                  indicator is set (ferror)
   Thread safety  any thread; one thread per writer at a time
   Source         the Trace Event Format (Chrome's catapult)
*/
BPT_API int bpt_chrome_open(bpt_chrome *w, FILE *out);

/* bpt_chrome_write: write one message: a call, return_from or
   exception_from as a B or E event, a call whose return is not traced
   (bpt_msg.no_return) as the thread's instant event ("i": nothing would
   end it), a DROPPED as the thread's cut (see bpt_chrome). Other types are
   ignored.

   Parameters
     w   an open writer; not NULL
     m   the message; not NULL
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL   a NULL; w not open; a write failed, now or earlier (out's
                  error indicator, ferror, is set; errno's text in
                  bpt_last_error)
     BPT_ENOMEM   the first call or DROPPED of a new thread, or a call that
                  deepens its thread's stack, when the room for it cannot
                  be allocated: that message is not written
   Thread safety  any thread; one thread per writer at a time
   Source         the Trace Event Format (Chrome's catapult)
*/
BPT_API int bpt_chrome_write(bpt_chrome *w, const bpt_msg *m);

/* bpt_chrome_close: close the calls still open, end the JSON, flush the
   stream and free the writer's state; the writer is then not open, also
   after a failed write. Does not close the FILE.

   Parameters     w   an open writer; not NULL
   Returns        the number of records written (>= 0), or a BPT_E* code
   Errors
     BPT_EINVAL   w is NULL or not open; a write (now or earlier) failed:
                  the flush, or out's error indicator (ferror) is set
   Thread safety  any thread; one thread per writer at a time
   Source         the Trace Event Format (Chrome's catapult)
*/
BPT_API int bpt_chrome_close(bpt_chrome *w);

/* FlameGraph folded stacks ("a;b;c 123" lines, as flamegraph.pl and
   speedscope read them) built from call and return messages: each thread's
   stack is rebuilt from its calls and returns, and each function's own time
   (ns, excluding traced callees) is added to the stack it ran on; the lines
   give microseconds. Threads, and the processes a host switches on them,
   each have a stack of their own, as the Chrome writer's tracks; they are
   matched as the Chrome writer does: a
   return closes the newest open call of its function, and the calls above
   it, unwound without a message, count as its own time (less their traced
   callees' that returned, which their own stacks have); a return with no
   open call (tracing began inside the call) is ignored; each thread keeps
   its first 64 calls, and the time of deeper ones counts as the 64th's own
   time. A DROPPED message (its thread's ring was full) empties its thread's
   stack, as the Chrome writer closes it: the calls open at the loss are
   charged nothing (their returns may be lost), their returns after it are
   ignored, and calls after it start new stacks at the root, which may lack
   their outer frames but never put a call from after the loss under one
   from before it. Calls still open when the messages end are charged
   nothing either. A stack's time never goes back, as a Chrome track's: a
   return stamped before its call is charged 0. Stacks are written whole,
   however deep their kept calls and long their names; a name's ';' is
   written ':' and its control characters '?' (the format's separators).
   Opaque. */
typedef struct bpt_folded bpt_folded;

/* bpt_folded_new: a new, empty folded-stacks object.

   Parameters     out   where to write it; not NULL
   Returns        0 (and *out), or a BPT_E* code
   Errors
     BPT_EINVAL   out is NULL
     BPT_ENOMEM   no memory for the object
   Thread safety  any thread
   Source         Brendan Gregg's stackcollapse (FlameGraph)
*/
BPT_API int bpt_folded_new(bpt_folded **out);

/* bpt_folded_add: add one message: a call, return_from, exception_from, or
   a DROPPED (the thread's stack is emptied; see bpt_folded). Other types,
   and a call whose return is not traced (bpt_msg.no_return: it has no
   time to charge), are ignored.

   Parameters
     f   the object; not NULL
     m   the message; not NULL
   Returns        0, or a BPT_E* code
   Errors
     BPT_EINVAL   a NULL
     BPT_ENOMEM   a new thread's stack, room for a deeper one, or a new line
                  could not be allocated: the message is not counted; the
                  object stays usable
   Thread safety  any thread; one thread per object at a time
   Source         Brendan Gregg's stackcollapse (FlameGraph)
*/
BPT_API int bpt_folded_add(bpt_folded *f, const bpt_msg *m);

/* bpt_folded_write: write the folded lines, most time first ("a;b;c us").

   Parameters
     f     the object; not NULL
     out   an open stream; not NULL
   Returns        the number of lines written (>= 0), or a BPT_E* code
   Errors
     BPT_EINVAL   a NULL; a write failed (out's error indicator, ferror, is
                  set after the lines; lines still in out's buffer are the
                  caller's to flush)
     BPT_ENOMEM   no memory to sort the lines; nothing written
   Thread safety  any thread; one thread per object at a time
   Source         Brendan Gregg's stackcollapse (FlameGraph)
*/
BPT_API int bpt_folded_write(bpt_folded *f, FILE *out);

/* bpt_folded_free: free the object and everything it holds.

   Parameters     f   the object; NULL does nothing
   Returns        nothing
   Errors         none
   Thread safety  any thread; no other use of f at the same time or after
   Source         bptrace
*/
BPT_API void bpt_folded_free(bpt_folded *f);
/*** End of api_format.h ***/

/*** Begin file api_probes.h ***/
/* api_probes.h: USDT probes, the public half's one concern here: static
   probe sites that bpftrace, perf, gdb and SystemTap find in the ELF file
   and attach to from outside, written by the header itself (no sys/sdt.h),
   as OTP's dyntrace and its erlang_dtrace.d probes. */

/* >>probes
   Every program built with the implementation carries the probes of
   provider `bptrace` (examples/bptrace.d lists each one's arguments, with a
   bpftrace one-liner for each):

     call, return, exception, return_to   a USDT session's events (usdt in
                                          bpt_session_desc: OTP's dyntrace tracer)
     step                                 each of the 13 steps of every change
     pattern__start, pattern__done        bpt_trace_pattern, with its result and ns
     session__create, session__destroy    sessions
     progress__wait__start, __done        thread progress waits (bpt_thread_progress_wait)
     drop                                 a record a session's buffer dropped
     user_trace                           bpt_user_trace: OTP's user_trace-i4s4

   and BPT_PROBE puts the program's own probes beside them.

   A probe site is the SystemTap SDT v3 layout: a NOP in the code, an ELF
   note in .note.stapsdt that names the provider, the probe, the NOP's
   address and the register that holds each argument ("8@%rdi" on x86-64,
   "8@x0" on aarch64), and a 2-byte semaphore in the .probes section (one
   per probe name in each program or shared object) that a tool raises
   while it is attached. The site tests the semaphore first: with nothing
   attached a probe costs one load and an untaken branch, and its
   arguments are not evaluated. Every argument is a 64-bit word (8@):
   integers, or pointers, which a tool reads (bpftrace: str(arg2)).

   Where the notes cannot be written, the probes compile to nothing and
   BPT_PROBES is 0: tcc (no way to emit the notes), an architecture other
   than x86-64 and aarch64, a non-ELF target, or BPT_NO_PROBES defined before
   the header (per file: the implementation's probes follow the file that
   defines BPTRACE_IMPLEMENTATION; a USDT session then gives BPT_ENOTSUP).
*/
#if !defined(BPT_NO_PROBES) && !defined(__TINYC__) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__))
#  define BPT_PROBES 1
#else
#  define BPT_PROBES 0
#endif

/* BPT_PROBE(provider, name, args...): a probe site of the program's own,
   with 0 to 6 integer or pointer arguments, as DTRACE_PROBEn and sys/sdt.h's
   STAP_PROBEn. provider and name are identifiers (a name's "__" is kept:
   bpftrace spells it usdt:PROG:provider:name). It is a statement. The
   sites of one name in a program (or a shared object) share a semaphore,
   and a site evaluates its arguments only while a tool is attached to its
   name. Arguments are integers, enums or pointers (a C++ nullptr too); in
   C, a double is converted to an integer. Compiled out (BPT_PROBES 0), it
   evaluates nothing.
       BPT_PROBE(game, frame__start, frame_no, entity_count);
   Thread safety  any thread, signal handlers included (a NOP, a load)
   Source         sys/sdt.h (SystemTap), DTRACE_PROBEn (DTrace) */
#define BPT_PROBE(...) \
    BPT__SDT_CAT(BPT__PROBE_, BPT__SDT_NARGS(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0, ~))(__VA_ARGS__)

/* bpt_user_trace: fire the bptrace:user_trace probe with four integers and
   four strings (NULL allowed), for a tool attached to it, as OTP's
   dyntrace:p/1..8 fires erlang:user_trace-i4s4: arg0..arg3 are i1..i4,
   arg4..arg7 s1..s4 (bpftrace 0.17 reads up to arg5 on x86-64; gdb, perf
   and SystemTap all eight). With nothing attached (or probes compiled out)
   it returns at once.
   Parameters     i1..i4 any integers; s1..s4 NUL-terminated strings or NULL
   Returns        nothing
   Errors         none
   Thread safety  any thread, signal handlers included
   Source         OTP's dyntrace:p/1..8 and the user_trace-i4s4 probe (dyntrace.c) */
BPT_API void bpt_user_trace(int64_t i1, int64_t i2, int64_t i3, int64_t i4,
                            const char *s1, const char *s2, const char *s3, const char *s4);

/* ---- How a site is written (the macros above use these) ---- */
#define BPT__SDT_CAT(a, b) BPT__SDT_CAT2(a, b)
#define BPT__SDT_CAT2(a, b) a##b
#define BPT__SDT_NARGS(p, n, a1, a2, a3, a4, a5, a6, N, ...) N

#if BPT_PROBES
/* The semaphore of provider:name: one 2-byte word in .probes per module
   (the program, or a shared object), shared by every site of the name
   there. It lives in assembly only: the first site in each object file
   defines it (weak and hidden, so the linker keeps one), each site reads
   it with one PC-relative load of its own, and the note names it by
   symbol. No C object: g++ groups the section-attributed variables of
   inline functions and templates into one comdat group (or ignores the
   attribute), refuses "i"(&variable) for them in position-independent
   code, and ignores a block-scope asm label inside a template. */
#  define BPT__SDT_SEM_SYM(p, n) "bpt__sdt_sem." #p "." #n
#  define BPT__SDT_SEM_DEF(p, n) \
    ".ifndef " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".pushsection .probes,\"aw\"\n" \
    ".weak " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".hidden " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".balign 2\n" \
    BPT__SDT_SEM_SYM(p, n) ": .zero 2\n" \
    ".type " BPT__SDT_SEM_SYM(p, n) ", %%object\n" \
    ".size " BPT__SDT_SEM_SYM(p, n) ", 2\n" \
    ".popsection\n" \
    ".endif\n"
/* BPT__SDT_SEM_LOAD(provider, name, v): v (an unsigned long) := the
   semaphore; volatile, so every test reads it anew. */
#  if defined(__x86_64__)
#    define BPT__SDT_SEM_LOAD(p, n, v) \
    __asm__ __volatile__(BPT__SDT_SEM_DEF(p, n) "movzwl " BPT__SDT_SEM_SYM(p, n) "(%%rip), %k0" : "=r"(v))
#  else
#    define BPT__SDT_SEM_LOAD(p, n, v) \
    __asm__ __volatile__(BPT__SDT_SEM_DEF(p, n) "adrp %0, " BPT__SDT_SEM_SYM(p, n) "\n" \
                         "ldrh %w0, [%0, #:lo12:" BPT__SDT_SEM_SYM(p, n) "]" : "=r"(v))
#  endif
/* An argument: always a 64-bit register, as the untaken branch pays
   nothing for it. sys/sdt.h lets the compiler pick ("nor"), which gives
   memory operands such as "8@sym(%rip)" or "8@200(%rsp)" and constants,
   and not every reader parses every such form on every architecture.
   C++ converts without an old-style cast (-Wold-style-cast). */
#  if defined(__cplusplus)
extern "C++" {
template <typename T> static inline uint64_t bpt__sdt_word(T *p) { return reinterpret_cast<uintptr_t>(p); }
template <typename T> static inline uint64_t bpt__sdt_word(T v) { return static_cast<uint64_t>(v); }
static inline uint64_t bpt__sdt_word(decltype(nullptr)) { return 0; }
}
#    define BPT__SDT_ARG(x) "r"(bpt__sdt_word(x))
#  else
#    define BPT__SDT_ARG(x) "r"((uint64_t)(x))
#  endif
/* One site: the NOP (label 990), then the note (type 3, owner "stapsdt":
   the site's address, the .stapsdt.base address tools use to detect
   prelinking, the semaphore, provider, name, argument locations), and
   once per file the .stapsdt.base byte. "?" puts the
   note in the site's section group, so a discarded inline copy takes its
   note with it. The "memory" clobber makes what a pointer argument points
   to written before the probe fires (only on the attached path). */
#  define BPT__SDT_ASM(p, n, args) \
    "990: nop\n" \
    ".pushsection .note.stapsdt,\"?\",\"note\"\n" \
    ".balign 4\n" \
    ".4byte 992f-991f, 994f-993f, 3\n" \
    "991: .asciz \"stapsdt\"\n" \
    "992: .balign 4\n" \
    "993: .8byte 990b\n" \
    ".8byte _.stapsdt.base\n" \
    ".8byte " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".asciz \"" #p "\"\n" \
    ".asciz \"" #n "\"\n" \
    ".asciz \"" args "\"\n" \
    "994: .balign 4\n" \
    ".popsection\n" \
    ".ifndef _.stapsdt.base\n" \
    ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
    ".weak _.stapsdt.base\n" \
    ".hidden _.stapsdt.base\n" \
    "_.stapsdt.base: .space 1\n" \
    ".size _.stapsdt.base, 1\n" \
    ".popsection\n" \
    ".endif\n"
/* BPT__SDT_FIREn(provider, name, args): the site, with n arguments. The
   caller tests the semaphore first (BPT__SDT_SEM_LOAD). */
#  define BPT__SDT_FIRE0(p, n) __asm__ __volatile__(BPT__SDT_ASM(p, n, "") ::: "memory")
#  define BPT__SDT_FIRE1(p, n, a1) __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0") :: BPT__SDT_ARG(a1) : "memory")
#  define BPT__SDT_FIRE2(p, n, a1, a2) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2) : "memory")
#  define BPT__SDT_FIRE3(p, n, a1, a2, a3) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2), \
                         BPT__SDT_ARG(a3) : "memory")
#  define BPT__SDT_FIRE4(p, n, a1, a2, a3, a4) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2), \
                         BPT__SDT_ARG(a3), BPT__SDT_ARG(a4) : "memory")
#  define BPT__SDT_FIRE5(p, n, a1, a2, a3, a4, a5) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5) : "memory")
#  define BPT__SDT_FIRE6(p, n, a1, a2, a3, a4, a5, a6) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4 8@%5") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5), \
                         BPT__SDT_ARG(a6) : "memory")
/* A site: its name's semaphore, tested before anything is evaluated. */
#  define BPT__PROBE_SITE(p, n, fire) \
    do { \
        unsigned long bpt__sdt_on; \
        BPT__SDT_SEM_LOAD(p, n, bpt__sdt_on); \
        if (__builtin_expect(bpt__sdt_on != 0, 0)) fire; \
    } while (0)
#  define BPT__PROBE_0(p, n) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE0(p, n))
#  define BPT__PROBE_1(p, n, a1) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE1(p, n, a1))
#  define BPT__PROBE_2(p, n, a1, a2) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE2(p, n, a1, a2))
#  define BPT__PROBE_3(p, n, a1, a2, a3) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE3(p, n, a1, a2, a3))
#  define BPT__PROBE_4(p, n, a1, a2, a3, a4) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE4(p, n, a1, a2, a3, a4))
#  define BPT__PROBE_5(p, n, a1, a2, a3, a4, a5) \
    BPT__PROBE_SITE(p, n, BPT__SDT_FIRE5(p, n, a1, a2, a3, a4, a5))
#  define BPT__PROBE_6(p, n, a1, a2, a3, a4, a5, a6) \
    BPT__PROBE_SITE(p, n, BPT__SDT_FIRE6(p, n, a1, a2, a3, a4, a5, a6))
#else
/* Compiled out: nothing is evaluated, but every argument is still named,
   so a variable kept only for a probe draws no "unused" warning. */
#  define BPT__PROBE_0(p, n) do { } while (0)
#  define BPT__PROBE_1(p, n, a1) do { if (0) { (void)(a1); } } while (0)
#  define BPT__PROBE_2(p, n, a1, a2) do { if (0) { (void)(a1); (void)(a2); } } while (0)
#  define BPT__PROBE_3(p, n, a1, a2, a3) do { if (0) { (void)(a1); (void)(a2); (void)(a3); } } while (0)
#  define BPT__PROBE_4(p, n, a1, a2, a3, a4) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); } } while (0)
#  define BPT__PROBE_5(p, n, a1, a2, a3, a4, a5) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); (void)(a5); } } while (0)
#  define BPT__PROBE_6(p, n, a1, a2, a3, a4, a5, a6) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); (void)(a5); (void)(a6); } } while (0)
#endif
/*** End of api_probes.h ***/

/*** Begin file api_root.h ***/
/* api_root.h: the root record, the public half's one concern here: how a
   reader in another process (examples/bpt) finds and walks bptrace's data
   without stopping the program, as think-outside-the-beam reads a BEAM, but
   from a layout the program describes itself rather than offsets a tool
   hard-codes for one version. */

/* >>root
   Every program (or shared object) built with the implementation holds
   one object, `bpt_root` (a bpt_root_record), an exported symbol in its
   ELF symbol table. It is read-only: constant data the compiler lays out,
   relocated at load. It holds:

     magic, version      BPT_ROOT_MAGIC and BPT_ROOT_VERSION; a reader
                         refuses any other (the meaning of a field changed)
     sizes, offsets      the size of every structure a reader walks
                         (BPT_ROOT_STRUCTS) and the offset and width of
                         every field it reads (BPT_ROOT_FIELDS), so that a
                         reader checks each one before it reads anything
     consts              the limits and encodings it needs (BPT_ROOT_CONSTS)
     globals             the addresses where the walks start: the thread
                         records, the registry, the sessions, thread
                         progress's epoch (BPT_ROOT_GLOBALS)

   A reader finds it from /proc/PID/maps and the ELF symbols of each mapped
   file, checks it with bpt_root_check, and reads with process_vm_readv:
   never ptrace, never a stop, never a write. The root holds addresses, not
   writable pointers a reader could use: a reader cannot write through
   process_vm_readv, and the root itself is constant.

   Consistency. The thread records are never freed and their list is
   push-only; a thread's counters, call_time tables and shadow stack are
   its own and change under the reader, who sees each word as it was at some
   moment (a call_time row's calls and time may be a moment apart, and a
   table its owner grew out of may be gone: read it again). The
   registry and the sessions change only under the code modification
   permission, and around each hold the layout sequence count
   (BPT_ROOT_G_SEQ) moves, odd while held [L1]:

     set path (bp.c)   take the permission; seq := seq + 1 (odd); full
                       fence; change ...; release store seq + 1 (even);
                       let go of the permission
     reader            read seq; acquire fence; read the registry, the
                         sessions and what they point at; acquire fence;
                         read seq again: odd, or changed, means torn: read
                         again (bpt retries, then says the data may be torn)

   The reader's reads are process_vm_readv calls on its own CPU, so its
   fences order them as they would order its own loads.
*/
#define BPT_ROOT_MAGIC   0x31544f4f52545042ull   /* "BPTROOT1", little-endian */
#define BPT_ROOT_VERSION 3u   /* 2: call_time's tables past MAX_THREADS (TIMEM_MORE), no overflow table;
                                 3: frames keep no entry time (FRAME_TS gone: no reader used it, and
                                 its clock read cost every return-traced entry ~20 instructions) */

/* The structures a reader walks: (ID, the implementation's type). */
#define BPT_ROOT_STRUCTS(X) \
    X(THREAD,  bpt__thread)          /* a thread record (progress.h) */ \
    X(FUNC,    bpt_func)             /* a registered function (breakpoint.h) */ \
    X(BP,      bpt__GenericBp)       /* one session's breakpoint on a function */ \
    X(BPDATA,  bpt__GenericBpData)   /* one generation of it */ \
    X(COUNT,   bpt__BpCount)         /* call_count's counter slot */ \
    X(FRAME,   bpt__frame)           /* a shadow stack frame (frames.h) */ \
    X(SESSION, bpt__session)         /* a trace session (session.h) */ \
    X(LANE,    bpt__lane)            /* one thread's buffer in a session */ \
    X(PATTERN, bpt__pattern_entry)   /* a pattern in force in a session (pattern.h) */ \
    X(TIMEM,   bpt__BpTimem)         /* call_time/call_memory's tables of one breakpoint (timem.h) */ \
    X(TABLE,   bpt__timem_table)     /* one thread's table */ \
    X(CELL,    bpt__timem_cell)      /* one process's calls, time and memory in it */

/* The fields a reader reads: (ID, its structure's ID, the member). The
   root gives each one's offset and width in bytes. */
#define BPT_ROOT_FIELDS(X) \
    X(THREAD_STATE,        THREAD,  state)          /* u64: epoch << NEST_BITS | ONLINE | pins; 0 offline */ \
    X(THREAD_IN_USE,       THREAD,  in_use)         /* u32: 1 while a live thread owns it */ \
    X(THREAD_NEXT,         THREAD,  next)           /* pointer: the next record, NULL at the end */ \
    X(THREAD_INDEX,        THREAD,  index)          /* u32: its lane number in every session */ \
    X(THREAD_TID,          THREAD,  tid)            /* u32: the owner's OS thread id */ \
    X(THREAD_SHADOW,       THREAD,  shadow)         /* 2 pointers: native and VM frames (NULL: none yet) */ \
    X(THREAD_SHADOW_DEPTH, THREAD,  shadow_depth)   /* 2 u32: frames in use on each */ \
    X(THREAD_FIBER,        THREAD,  fiber)          /* u64: the stack the thread runs on now */ \
    X(THREAD_COUNTS,       THREAD,  counts)         /* COUNT_PAGES pointers to u64 counter pages */ \
    X(FUNC_MODULE,         FUNC,    module)         /* pointer to a NUL-terminated name */ \
    X(FUNC_NAME,           FUNC,    name)           /* pointer to a NUL-terminated name */ \
    X(FUNC_ARITY,          FUNC,    arity)          /* int */ \
    X(FUNC_FID,            FUNC,    fid)            /* u32: the id its records carry */ \
    X(FUNC_KIND,           FUNC,    kind)           /* int: 1 a VM site, 2 a native entry */ \
    X(FUNC_FN,             FUNC,    fn)             /* pointer: a native function's address */ \
    X(FUNC_CODE_SIZE,      FUNC,    code_size)      /* u64: its bytes of code (0: unknown) */ \
    X(FUNC_INSTALLED,      FUNC,    installed)      /* int: the breakpoint word is in place */ \
    X(FUNC_GEN_BP,         FUNC,    gen_bp)         /* pointer: the first session's BP */ \
    X(BP_DATA,             BP,      data)           /* 2 BPDATA: the generations */ \
    X(BP_SESSION,          BP,      session)        /* pointer: its SESSION */ \
    X(BP_NEXT,             BP,      next)           /* pointer: the next session's BP */ \
    X(BPDATA_FLAGS,        BPDATA,  flags)          /* u32: ON(k) = 1 << 2k, ACTIVE(k) = 2 << 2k */ \
    X(BPDATA_DATA,         BPDATA,  data)           /* NKINDS pointers: kind k's data (COUNT for count) */ \
    X(COUNT_SLOT,          COUNT,   slot)           /* u32: counter n of every thread's pages */ \
    X(COUNT_BASE,          COUNT,   base)           /* u64: subtracted (the sum at the last restart) */ \
    X(COUNT_SPILL,         COUNT,   spill)          /* u64: added (hits without a page) */ \
    X(FRAME_FID,           FRAME,   fid)            /* u32: the function's id */ \
    X(FRAME_F,             FRAME,   f)              /* pointer: its FUNC (compare, do not follow) */ \
    X(FRAME_FIBER,         FRAME,   fiber)          /* u64: the stack it was pushed on (native) */ \
    X(FRAME_GONE,          FRAME,   gone)           /* u8: a tombstone (ended under another stack) */ \
    X(SESSION_ID,          SESSION, id)             /* u64: its weak id */ \
    X(SESSION_NAME,        SESSION, name)           /* char[]: NUL-terminated */ \
    X(SESSION_TRACER,      SESSION, tracer)         /* pointer: non-NULL for a callback tracer */ \
    X(SESSION_USDT,        SESSION, usdt)           /* int: 1 for a USDT session */ \
    X(SESSION_CHUNK_BYTES, SESSION, chunk_bytes)    /* u32 */ \
    X(SESSION_CHUNKS,      SESSION, chunks)         /* u32: each lane's chunks at its start */ \
    X(SESSION_MAX_CHUNKS,  SESSION, max_chunks)     /* u32: the most a lane grows to */ \
    X(SESSION_FLIGHT,      SESSION, flight_recorder) /* int */ \
    X(SESSION_DEAD,        SESSION, dead)           /* u32: destroy began */ \
    X(SESSION_LIMITED,     SESSION, limited)        /* u64: records refused by the rate limit */ \
    X(SESSION_SKIPPED,     SESSION, frames_skipped) /* u64: returns that could not be traced */ \
    X(SESSION_LANELESS,    SESSION, lost_laneless)  /* u64: lost before a thread had a lane */ \
    X(SESSION_LANE_DIR,    SESSION, lane_dir)       /* LANE_DIRS pointers to LANES_PER_DIR lane pointers */ \
    X(SESSION_PATTERNS,    SESSION, patterns)       /* pointer: the first PATTERN */ \
    X(LANE_NUMBER,         LANE,    number)         /* u64: the thread record's index */ \
    X(LANE_CHUNK_BYTES,    LANE,    chunk_bytes)    /* u32 */ \
    X(LANE_BUDGET,         LANE,    budget)         /* u32: chunks it holds now */ \
    X(LANE_WRITTEN,        LANE,    written)        /* u64: records put in chunks */ \
    X(LANE_DROPPED,        LANE,    dropped)        /* u64: lost to a full buffer */ \
    X(LANE_OVERWRITTEN,    LANE,    overwritten)    /* u64: taken back by a flight recorder */ \
    X(LANE_DELIVERED,      LANE,    delivered)      /* u64: given to a callback or a USDT probe */ \
    X(LANE_LOST,           LANE,    lost)           /* u64: dropped by a nested send */ \
    X(LANE_DRAINED,        LANE,    drained)        /* u64: read by a drainer or a file writer */ \
    X(PATTERN_NEXT,        PATTERN, next)           /* pointer */ \
    X(PATTERN_MODULE,      PATTERN, mfa.module)     /* char[]: "*" for any */ \
    X(PATTERN_FUNCTION,    PATTERN, mfa.function)   /* char[] */ \
    X(PATTERN_ARITY,       PATTERN, mfa.arity)      /* int: -1 for any */ \
    X(PATTERN_FLAGS,       PATTERN, flags)          /* unsigned: the BPT_* flags it was set with */ \
    X(TIMEM_TABLES,        TIMEM,   table)          /* MAX_THREADS pointers to TABLE, by thread record index */ \
    X(TIMEM_MORE,          TIMEM,   more)           /* pointer (NULL: none): TIMEM_MORE pointers to TABLE, by index - MAX_THREADS */ \
    X(TIMEM_CARRIED,       TIMEM,   carried)        /* pointer: the TABLE of earlier collections' sums */ \
    X(TABLE_CAP,           TABLE,   cap)            /* u32: cells, a power of two */ \
    X(TABLE_CELLS,         TABLE,   cell)           /* the first of cap CELLs (the width of one) */ \
    X(CELL_PROCESS,        CELL,    process)        /* u64: 0 a free cell */ \
    X(CELL_CALLS,          CELL,    calls)          /* u64 */ \
    X(CELL_TIME,           CELL,    time_ns)        /* u64: own time, ns */ \
    X(CELL_MEMORY,         CELL,    mem)            /* i64: bytes */

/* The addresses where the walks start: (ID, what is there). */
#define BPT_ROOT_GLOBALS(X) \
    X(SEQ,       "u64: the layout sequence count [L1]") \
    X(THREADS,   "pointer: the first THREAD") \
    X(NTHREADS,  "u32: thread records made") \
    X(EPOCH,     "u64: thread progress's global epoch") \
    X(WAITS,     "u64: thread progress waits completed") \
    X(FUNCS,     "pointer: an array of NFUNCS pointers to FUNC, in registration order") \
    X(NFUNCS,    "u32: registered functions") \
    X(SESSIONS,  "MAX_SESSIONS pointers to SESSION (NULL: a free slot)") \
    X(ACTIVE_IX, "u32: the active generation, 0 or 1")

/* The limits and encodings: (ID). */
#define BPT_ROOT_CONSTS(X) \
    X(MAX_SESSIONS) X(LANE_DIRS) X(LANES_PER_DIR) X(COUNT_PAGES) X(COUNT_PAGE_SLOTS) \
    X(SHADOW_FRAMES) X(NEST_BITS) X(ONLINE) X(NKINDS) X(KIND_COUNT) \
    X(ENTRY_PAD)   /* bytes before a native entry that its hit runs through (0: no native sites) */ \
    X(MAX_THREADS) X(KIND_TIME) X(TIMEM_MORE)

enum bpt_root_struct {
#define BPT__ROOT_S(id, type) BPT_ROOT_S_##id,
    BPT_ROOT_STRUCTS(BPT__ROOT_S)
#undef BPT__ROOT_S
    BPT_ROOT_NSTRUCTS
};
enum bpt_root_field {
#define BPT__ROOT_F(id, st, member) BPT_ROOT_F_##id,
    BPT_ROOT_FIELDS(BPT__ROOT_F)
#undef BPT__ROOT_F
    BPT_ROOT_NFIELDS
};
enum bpt_root_global {
#define BPT__ROOT_G(id, what) BPT_ROOT_G_##id,
    BPT_ROOT_GLOBALS(BPT__ROOT_G)
#undef BPT__ROOT_G
    BPT_ROOT_NGLOBALS
};
enum bpt_root_const {
#define BPT__ROOT_C(id) BPT_ROOT_C_##id,
    BPT_ROOT_CONSTS(BPT__ROOT_C)
#undef BPT__ROOT_C
    BPT_ROOT_NCONSTS
};

/* An address in the target: 64 bits on every architecture. */
typedef union bpt_root_addr {
    const volatile void *p;       /* what the program stores */
    uint64_t u;                   /* what a reader reads */
} bpt_root_addr;

typedef struct bpt_root_record {
    uint64_t magic;                                /* BPT_ROOT_MAGIC */
    uint32_t version;                              /* BPT_ROOT_VERSION */
    uint32_t bytes;                                /* sizeof(bpt_root_record) */
    char bptrace_version[16];                      /* BPTRACE_VERSION, e.g. "0.1.0" */
    char arch[16];                                 /* "x86_64", "aarch64" or "other" */
    uint32_t nstructs, nfields, nglobals, nconsts; /* the four tables' lengths */
    uint32_t struct_bytes[BPT_ROOT_NSTRUCTS];      /* sizeof each structure */
    uint32_t field_struct[BPT_ROOT_NFIELDS];       /* the structure (BPT_ROOT_S_*) a field is in */
    uint32_t field_off[BPT_ROOT_NFIELDS];          /* its offset in bytes */
    uint32_t field_bytes[BPT_ROOT_NFIELDS];        /* its width in bytes */
    uint32_t consts[BPT_ROOT_NCONSTS];
    uint32_t kind_flag[16];                        /* kind k's public flag (BPT_COUNT ...); 0 past NKINDS */
    bpt_root_addr global[BPT_ROOT_NGLOBALS];
} bpt_root_record;

/* The root record of the program or shared object that defines
   BPTRACE_IMPLEMENTATION (a local symbol with BPTRACE_STATIC). */
#if !defined(BPTRACE_STATIC)
BPT_API const bpt_root_record bpt_root;
#endif

/* bpt_root_check: whether a root record read from a target can be used.

   Parameters
     r             a copy of the target's bpt_root, as read; bytes of it valid
     bytes         how many bytes of it were read
     why, why_len  where to write the reason it is refused (may be NULL)
   Returns
     0 when the magic, version and size match this header's, every table
     length matches, every structure's size is at most 1 MiB, and every
     field lies inside its structure (offset + width <= size) with a width
     that fits what it holds: a word of 1, 2, 4 or 8 bytes, or an array
     of the length the consts give. Otherwise a negative BPT_E* and a
     one-line reason in why.
   Errors
     BPT_EINVAL    r is NULL
     BPT_EFORMAT   bytes < sizeof(bpt_root_record), the magic is wrong, or a size,
                   offset or width is out of range (the reason names it)
     BPT_ENOTSUP   a known magic with another layout version
   Thread safety  any thread; pure (reads only r)
   Source         the check a reader of ELF or of a .bpt file does of a header
*/
BPT_API int bpt_root_check(const bpt_root_record *r, size_t bytes, char *why, size_t why_len);
/*** End of api_root.h ***/

/*** Begin file api_control.h ***/
/* api_control.h: the control server's public half: what another process
   of the same user can ask this one over a Unix socket, and the calls that
   start and stop the server. */

/* >>control
   A control server lets another process steer tracing in this one while
   every thread runs, as Erlang's dbg steers a remote node: `bpt trace`,
   `bpt count` and `bpt profile` (examples/bpt) are its clients, and the
   LD_PRELOAD agent (examples/agent.c) starts it in a program that has no
   bptrace code of its own. It is opt-in: nothing listens until
   bpt_control_start.

   One thread accepts connections on a Unix stream socket; each client gets
   a thread and a trace session of its own, created by HELLO and destroyed
   when the client goes away, however it goes (a close, a crash, SIGKILL):
   its breakpoints are cleared through the 13 steps and every entry word it
   switched on is restored. A client's records go out from the session's
   chunks as bpt_session_write writes them to a file (>>tracefile): nothing
   is re-encoded per event. (It writes into a memory file and sends from
   there: bpt_session_write keeps its thread pinned while it writes, and a
   send that blocks must not hold up thread progress.) Nothing a client does makes a traced thread
   wait: a client that reads slowly only fills its session's buffers, and
   the records that do not fit are dropped, counted, and marked in its
   stream. The server's threads block every signal, so the program's
   signals never land on them, and a client gone mid-write gives EPIPE,
   never SIGPIPE. A program that closes descriptors it did not open
   (closefrom(3), as daemons do at start) may close the server's: the
   server checks each descriptor's identity (device and inode) before each
   call on it, and waits on none for more than a second, so a number the
   program has given to a file of its own gets no call past the next
   check; it ends the connections whose sockets were closed, and opens its
   listening socket and wake-up pipe again within a second. Its
   descriptors live at high numbers (from half the soft RLIMIT_NOFILE, at
   most 512, when that is 128 or more), so that the program's own opens,
   which take the lowest free numbers, reach them only when it holds
   hundreds of descriptors.

   Who may connect: a peer whose effective uid (SO_PEERCRED) is this
   process's, or root when allow_root is set. The socket file is made
   mode 0600 before it listens. A socket file left by a dead process (no
   one accepts on it) is replaced; one that someone serves is not (nor one
   whose server accepts nothing, its backlog full: start never blocks),
   and a file that is not a socket is never touched. Servers of bptrace
   in several processes starting or stopping at one path take turns
   (flock on the socket's directory, held for a few system calls): the
   second to start gets BPT_EEXIST, and a stop removes only its own file.
   A start at the default address also removes, from that directory, the
   bptrace-PID.sock files of this user that dead processes left (killed,
   or a fork child's _exit): each one's pid is gone and its connect is
   refused. Nothing else there is touched (>>stale files in control.c).

   PROTOCOL, version 1. Requests are lines of text (at most 4095 bytes and
   a '\n'); each gets one or more reply lines, the last either "OK ..." or
   "ERR CODE TEXT", CODE being a BPT_E* value (e.g. "ERR -3 malformed trace
   pattern: ..."). Words are separated by one or more spaces; a pattern is
   the rest of its line, so it may hold spaces (C++ names).

     HELLO 1 [rate=N/MS] [chunks=N] [max_chunks=N]
         First, and once. Creates the client's session (rate: at most N
         messages in every MS ms, as recon_trace's limit; chunks and
         max_chunks: each traced thread's buffer, as bpt_session_desc's).
         The numbers are unsigned: "rate=-1/5" is refused.
         -> OK bptrace VERSION 1 PID
     PATTERN KINDS [args=SPEC] [ret=TYPE] PATTERN
         bpt_trace_pattern(session, PATTERN, KINDS, match spec). KINDS is a
         comma list of call, return, exception, return_to, caller, count,
         time, memory, and at most one of off, pause, restart. args and ret
         are the match spec's argument spec and return type (uftrace's -A
         and -R: "i64,str", "f64").
         -> OK MATCHED
     INFO KINDS PATTERN
         bpt_trace_info_each for KINDS (count, time, memory); a line per
         function the session counts, times or measures (a matching
         function it has no such breakpoint on gets no line), then the
         number of lines:
         -> F COUNT CALLS TIME_NS BYTES ARITY MODULE:NAME
            (BYTES: call_memory's net, allocated minus freed, signed)
         -> OK LINES
     STREAM
         -> OK stream, then the session's trace file (the .bpt format of
         >>tracefile: header, names, records), written as it is made, until
         the client hangs up (shutting down only its writing half, as socat
         and nc -N do at their input's end, is not a hang-up) or the server
         stops. No request is read after it. A write to the memory file
         that fails but can be taken back (EFBIG under RLIMIT_FSIZE) only
         ends a round early. -> ERR when there is no memory file or buffer
         for the stream (the connection goes on).
     BYE
         -> OK bye, and the server closes the connection (and the session).

   Errors in a request (an unknown command, a bad pattern, a line over 4095
   bytes or holding a NUL byte, a command before HELLO) are replied to and the connection goes
   on; the server and the traced program carry on whatever a client sends.
   A connection beyond max_clients gets "ERR -13 ..." and is closed. A
   shortage does not end the server: while its listener cannot poll (no
   memory, RLIMIT_NOFILE under 2) or take a connection (no memory, no
   descriptor left), the connections wait in the socket's queue and it
   tries again every 100 ms; bpt_control_stop still ends it within 100 ms.

   fork: the child has no server (threads do not survive fork): fork
   handlers close the inherited sockets in the child (the listening one
   and every connection, one being accepted included), which may start
   its own. Sessions its clients had stay in the child, breakpoints and all,
   with no one to read or destroy them: each keeps the buffers it had at
   the fork (a thread new in the child gets the session's first chunks)
   and never grows them; what does not fit is dropped and counted. */

/* Control server settings. Zero-initialise; zero means default. */
typedef struct bpt_control_desc {
    const char *path;        /* the socket: a file path (a relative one is made absolute
                                against the current directory at start), or "@name"
                                for a name in the abstract namespace (no file); NULL: the file
                                $XDG_RUNTIME_DIR/bptrace-PID.sock, or @bptrace-PID when
                                XDG_RUNTIME_DIR is unset, not absolute, or too long */
    int         allow_root;  /* 1: also accept clients whose effective uid is 0 */
    uint32_t    max_clients; /* clients at once, 1 .. BPT_MAX_SESSIONS; default 16 */
} bpt_control_desc;

/* bpt_control_start: start the control server: bind and listen on its
   socket, start its accepting thread, and return.

   Parameters     desc   the settings (copied; path too); NULL: every default
   Returns        0, or a BPT_E* code (nothing is left listening or running)
   Errors
     BPT_EINVAL    max_clients over BPT_MAX_SESSIONS; path "" or over 107 bytes,
                   or relative and over 107 bytes once made absolute (or
                   the current directory is unknown)
     BPT_EEXIST    this process's server runs already, or another process
                   serves the socket path (or accepts nothing on it: its
                   backlog is full), or a file that is not a socket is
                   there (left as it is)
     BPT_EIO       socket, bind, chmod, listen or socketpair failed (errno's text
                   in bpt_last_error), e.g. a path in a directory that does
                   not exist, or no descriptor left (EMFILE)
     BPT_ENOMEM    no memory or no thread for the server
   Thread safety  any thread; serialized with bpt_control_stop
   Source         bptrace; the idea of Erlang's dbg:n/1 (a remote node traced
                  from a shell) and of uftrace's wish list (#1414, a running
                  process traced live)
*/
BPT_API int bpt_control_start(const bpt_control_desc *desc);

/* bpt_control_stop: stop the server: stop accepting, close every client's
   connection, wait until each client's thread has destroyed its session
   (so every breakpoint they set is cleared), remove the socket file (if
   the file at its path is still the one start made). A session whose
   destroy failed (no memory) when its client left is kept, and destroyed
   at the next client's departure or here.

   Parameters     none
   Returns        0, or a BPT_E* code
   Errors
     BPT_ENOENT    no server runs in this process and no session is left
                   over (also: a fork's child)
     BPT_ENOMEM    (or another code of bpt_session_destroy) the server is
                   stopped, but some client's session could not be
                   destroyed: it stays, breakpoints and all; call
                   bpt_control_stop again (with no server it then only
                   retries those) until it returns 0
     BPT_EDEADLK   from a tracer callback, under the code modification
                   permission, or while pinned: the clients' session
                   destroys would wait for this thread
   Thread safety  any thread but the server's own; not from a signal
                  handler (it waits for the clients; a managed thread goes
                  offline while it does). A call while another thread's
                  stop is under way waits until that one has finished,
                  and returns what it returned (0: every breakpoint of
                  the clients is cleared)
   Source         bptrace
*/
BPT_API int bpt_control_stop(void);

/* bpt_control_address: where the server listens: "@name", or the socket
   file's absolute path (desc->path, made absolute at start if relative).

   Parameters     buf, size   where to write it, NUL-terminated; not NULL
   Returns        its length in bytes, or a BPT_E* code
   Errors
     BPT_EINVAL    buf is NULL, or size too small (108 bytes always suffice)
     BPT_ENOENT    no server runs in this process
   Thread safety  any thread
   Source         bptrace
*/
BPT_API int bpt_control_address(char *buf, size_t size);
/*** End of api_control.h ***/
#ifdef __cplusplus
}
#endif
#endif /* BPTRACE_H */

#ifdef BPTRACE_IMPLEMENTATION
#ifndef BPTRACE_IMPLEMENTATION_DONE
#define BPTRACE_IMPLEMENTATION_DONE

/*** Begin file port.h ***/
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
/*** End of port.h ***/

/*** Begin file internal.h ***/
/* internal.h: the one header every implementation part includes, as
   Nuklear's parts include nuklear_internal.h. It holds what parts share:
   the public half, the portability layer (port.h), the names of the
   private types, and each concern's declarations in dependency order.
   Each part declares here, through its concern's header, only what other
   parts use of it; the rest stays static in the part.

   In bptrace.h these declarations come first and every part follows, so a
   part may call any other part's functions; data is defined by its part
   before any part that uses it (port.h: BPT__SHARED, BPT__DATA). amalgamate.sh
   takes the order of the headers from the #include lines below. Each part
   also compiles on its own:
       cc -fsyntax-only -DBPTRACE_IMPLEMENTATION -DBPT__PART_ALONE src/X.c
   which make test checks for every part. */

/* The private types other parts name before their definition. */
typedef struct bpt__thread bpt__thread;                 /* progress.h */
typedef struct bpt__session bpt__session;               /* session.h */
typedef struct bpt__mfa bpt__mfa;                       /* pattern.h */
typedef struct bpt__ms bpt__ms;                         /* pattern.h */
typedef struct bpt__pattern_entry bpt__pattern_entry;   /* pattern.h */
typedef struct bpt__frame bpt__frame;                   /* frames.h */
typedef struct bpt__hit bpt__hit;                       /* frames.h */


/* The lock order and fork (locks.c). */
BPT__PRIVATE void bpt__locks_init(void);            /* once: the fork handlers */
BPT__DATA(pthread_mutex_t, bpt__intern_lock);       /* intern.c: 3rd in the lock order */
/*** End of internal.h ***/

/*** Begin file clock.h ***/
/* clock.h: what other parts use of the clock (clock.c): every timestamp
   bptrace takes, in nanoseconds on CLOCK_MONOTONIC's scale, read from the
   CPU's counter where one is usable; and the counter itself, for records,
   converted to ns only when they are read, from an anchor. */

/* A calibration: ns = ns0 + (ticks - tick0) * (mul_whole + mul_frac / 2^32). */
typedef struct bpt__clock_cal {
    uint32_t source;              /* 0 clock_gettime (ticks are ns), 1 tsc, 2 cntvct */
    uint64_t hz, tick0, ns0, mul_whole, mul_frac;
} bpt__clock_cal;

BPT__HOT uint64_t bpt__now_ns(void);
BPT__HOT uint64_t bpt__now_ticks(void);   /* the counter (ns for clock_gettime) */
BPT__HOT BPT__INTREGS int bpt__now_ticks_counter(uint64_t *ticks);   /* 0: not on the CPU's counter */
BPT__HOT BPT__INTREGS uint64_t bpt__ticks_ns(uint64_t d);   /* a span of d ticks, in ns (call_time's frames) */
BPT__PRIVATE void bpt__clock_calibrate(void);   /* once; thread progress's init calls it */
BPT__PRIVATE uint64_t bpt__thread_cpu_ns(void);   /* the thread's CPU time (call_time with time_cpu) */
BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out);   /* the live calibration */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks);

/* Anchors (clock.c's first comment): a record's stamp is its ticks
   converted from the latest anchor of its thread's stream, a pair of
   readings of the counter and CLOCK_MONOTONIC at most BPT__ANCHOR_US old. */
enum { BPT__ANCHOR_US = 1000 };
BPT__PRIVATE void bpt__clock_anchor(uint64_t *tick, uint64_t *ns);   /* both clocks, now */
BPT__PRIVATE uint64_t bpt__clock_anchor_span(void);   /* ticks an anchor serves */
BPT__PRIVATE uint64_t bpt__clock_anchored_ns(const bpt__clock_cal *c, uint64_t anchor_tick, uint64_t anchor_ns,
                                             uint64_t ticks);
/*** End of clock.h ***/

/*** Begin file record.h ***/
/* record.h: what other parts use of trace records (record.c) and of the
   name table (names.c). A record is what a traced thread writes for one
   event: 16 bytes of header, then 8-byte words only where the event carries
   more (the layout is public: >>tracefile in api_session.h). Names and ns
   are resolved when a record is read, never on the hit path. */

/* The header every record starts with. */
typedef struct bpt__rec {
    uint64_t ticks;               /* the clock's counter (bpt__now_ticks) */
    uint8_t type;                 /* enum bpt_msg_type, or BPT__REC_CONTEXT */
    uint8_t words;                /* 8-byte words that follow */
    uint16_t info;                /* per type (>>tracefile) */
    uint32_t id;                  /* a name id, or the thread id (context) */
} bpt__rec;

enum {
    BPT__REC_CONTEXT = 15,        /* the thread and process of the records after it, and an anchor */
    BPT__REC_CALL_NARGS = 0x0f,   /* CALL info: argument count */
    BPT__REC_CALL_CALLER = 0x10,  /* CALL info: caller address and id follow */
    BPT__REC_CALL_USER = 0x20,    /* CALL info: a match spec message id follows */
    BPT__REC_CALL_NO_RETURN = 0x40,   /* CALL info: no RETURN_FROM will end it: its session does
                                         not trace its return (neither BPT_RETURN nor
                                         BPT_EXCEPTION), or cannot (bpt__hit_frame_room) (version 3) */
    BPT__REC_CALL_INFO = 0x7f,    /* CALL info: every bit a record may set */
    BPT__REC_MAX_WORDS = 1 + BPT_MAX_ARGS + BPT_MSG_STR_BYTES / 8 + 2 + 1,
    BPT__REC_MAX_BYTES = (int)sizeof(bpt__rec) + 8 * BPT__REC_MAX_WORDS,
    /* What a plain call record is written with (>>plain call in kind_call.c):
       the header, the types word, every argument's */
    BPT__CALL_PLAIN_ROOM = (int)sizeof(bpt__rec) + 8 * (1 + BPT_MAX_ARGS),
    /* A return_from of one word (the plain return, frames.c) */
    BPT__RETURN_PLAIN_BYTES = (int)sizeof(bpt__rec) + 8
};

/* Room for the largest record, built on the stack before it is sent. */
typedef struct bpt__recbuf {
    bpt__rec h;
    uint64_t w[BPT__REC_MAX_WORDS];
} bpt__recbuf;

/* One entry of the name table: a function's names, or (arity -1) a match
   spec's message in `name`. Immutable once published. */
typedef struct bpt__name {
    const char *module, *name;    /* interned */
    int arity;
    bpt_format_fn format;         /* a VM site's argument formatter, or NULL */
    bpt__atomic_u64 addr;         /* native: the entry address of the function registered
                                     last under this id (a re-registration stores it,
                                     relaxed); 0: a VM function. bpt__names_addr reads it */
    int held;                     /* native: a function registered at addr holds the id (names.c;
                                     writers only, under the intern lock) */
} bpt__name;

/* Names (names.c): ids from 1; 0 names nothing. bpt__names_id runs on the
   set path (under the code modification permission); bpt__names_get
   anywhere, for an id a record holds. */
BPT__PRIVATE int bpt__names_id(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, uint32_t *id);
BPT__PRIVATE void bpt__names_release(uint32_t id, const void *addr);
BPT__PRIVATE const char *bpt__names_why(int rc);
BPT__PRIVATE const bpt__name *bpt__names_get(uint32_t id);
BPT__PRIVATE uint32_t bpt__names_count(void);
BPT__PRIVATE uint64_t bpt__names_addr(uint32_t id);   /* the entry address, or 0 (the USDT probes' arg1) */
BPT__PRIVATE const bpt__name *bpt__names_live(void *ctx, uint32_t id);   /* a decoder's name source */

/* How a reader turns a record into a message: names by id, ticks into ns. */
typedef struct bpt__decoder {
    const bpt__name *(*name)(void *ctx, uint32_t id);
    void *ctx;
    bpt__clock_cal cal;
    uint64_t session;
} bpt__decoder;
/* One thread's stream, as far as it was read: whom its records are of,
   the anchor its stamps are converted from (clock.h), and the last stamp
   given (a stream's stamps never go back). */
typedef struct bpt__stream {
    uint32_t tid;
    int anchored;                 /* 0: no anchor read yet; the calibration's own pair serves */
    uint64_t process;
    uint64_t anchor_tick, anchor_ns, last_ns;
} bpt__stream;

/* Records (record.c). */
BPT__PRIVATE void bpt__decoder_live(bpt__decoder *d, uint64_t session);   /* live names, the current calibration */
BPT__PRIVATE uint32_t bpt__rec_bytes(const bpt__rec *r);
BPT__PRIVATE int bpt__rec_check(const void *p, uint32_t avail);   /* bytes of a sound record, or 0 */
BPT__PRIVATE int bpt__rec_decode(const bpt__decoder *d, bpt__stream *st, const bpt__rec *r, bpt_msg *m);
BPT__PRIVATE uint64_t bpt__stream_ns(const bpt__decoder *d, bpt__stream *st, uint64_t ticks);
BPT__PRIVATE void bpt__stream_init(bpt__stream *st);
/*** End of record.h ***/

/*** Begin file progress.h ***/
/* progress.h: what other parts use of thread progress (progress.c): the
   thread record every traced thread owns, pinning, the waits' callers'
   side, and bpt__fail, which keeps a failure's message in the record. */

/* call_count's counters (kind_count.c): a thread record holds up to
   BPT__COUNT_PAGES pages of BPT__COUNT_PAGE_SLOTS counters each, one per
   call_count breakpoint slot. A page is 64 KiB of address space, memory only
   where touched. */
#define BPT__COUNT_PAGE_SLOTS 8192u
#define BPT__COUNT_PAGES 64u
#define BPT__COUNT_SLOTS (BPT__COUNT_PAGES * BPT__COUNT_PAGE_SLOTS)

/* call_time charges open on a thread at once, each nested in the one
   before by a signal handler (timem.c [H1]); a deeper one is dropped. */
#define BPT__TIMEM_NEST 4u

/* A thread's record: created on its first pin, reused after it exits,
   never freed while walkable (progress.c). */
struct bpt__thread {
    /* Written by the owner, read by waiters: first, on its own cache line. */
    bpt__atomic_u64 state;
    bpt__atomic_u32 in_use;         /* 1 while a live thread owns the record */
    bpt__atomic_u32 sync_ack;       /* bumped by the sync-core fallback signal handler */
    uint32_t sync_expect;           /* waiter only: sync_ack before the signal; ~0: none sent */
    struct bpt__thread *next;       /* immutable once the record is published */
    uint32_t index;                 /* slot for per-thread data (rings); stable across reuse */
    uint32_t tid;                   /* OS thread id of the owner */
    pthread_t self;
    int managed;                    /* owner only: registered as a managed thread */
    int in_tracer;                  /* owner only: inside a callback tracer */
    volatile int sending;           /* owner only: inside bpt__session_send (a signal handler may interrupt it) */
    int holds_permission;           /* owner only: holds the code modification permission */
    int offline_to_block;           /* owner only: went offline to block in bptrace; back online after */
    uint64_t process;               /* owner only: the process time is charged to */
    /* Return-trace frames (frames.c): native [0] and VM [1] shadow stacks,
       allocated on first use, kept when the record is reused. Written by the
       owner and by signal handlers nested on it, never by another thread. */
    struct bpt__frame *shadow[2];
    volatile uint32_t shadow_depth[2];
    volatile uint32_t shadow_filling[2];   /* 1 + the index of the frame being filled, 0: none [H1] */
    uintptr_t alt_lo, alt_hi;     /* native: the last armed sigaltstack seen (bpt__altstack_bounds) */
    uint32_t vm_serial;             /* owner only: VM frame tokens' check value */
    uint64_t fiber, fibers;         /* owner only: the stack the thread runs on now, and the last
                                       tag given (fibers.c); native frames carry their stack's tag.
                                       64 bits: a tag is made at every switch, and one reused
                                       while its stack still has frames would mix two stacks */
    void *volatile timem_charging[BPT__TIMEM_NEST];   /* owner only: the call_time tables being
                                       charged, the first timem_depth of them (timem.c) [H1] */
    volatile uint32_t timem_depth;
    volatile uint32_t timem_walking;   /* 1: a process or fiber switch pauses or resumes its frames [H1] */
    bpt__atomic_ptr timem_free;     /* idle call_time tables this thread mapped, to reuse (timem.c) [T2];
                                       kept when the record is reused */
    /* call_count's counter pages (kind_count.c): mapped by the owner on its
       first count in a page, published by CAS [P1], read by bpt_trace_info;
       kept when the record is reused, so an exited thread's counts stay. */
    bpt__atomic_ptr counts[BPT__COUNT_PAGES];
#if !defined(BPT__SIGNAL_ATOMIC_INC)
    volatile int counting;          /* owner only: inside a count update (kind_count.c) [H1] */
#endif
    char errmsg[320];               /* owner only: bpt_last_error() */
};

/* A thread record's state word (progress.c has its meaning): the epoch
   above BPT__NEST_BITS, the ONLINE bit and the count of open pins below. */
#define BPT__NEST_BITS 16
#define BPT__NEST_MASK ((1u << BPT__NEST_BITS) - 1)
#define BPT__ONLINE (1u << (BPT__NEST_BITS - 1))   /* a managed thread, online */
#define BPT__PINS (BPT__ONLINE - 1)                /* the pins open */
#define BPT__PIN_FENCE ((uint64_t)1 << 63)        /* in pin_word only: pins fence (progress.c) */
#define BPT__FUTEX_FENCE 2u                        /* in the futex word: unpins fence (progress.c) */

/* Thread progress's shared state (progress.c). Declared here for the root
   record (root.c), which tells an outside reader where the epoch, the
   counters and the list of records are. */
struct bpt__progress_state {
    bpt__atomic_u64 epoch;          /* global epoch; starts at 1 */
    /* What a pin reads (>>pin word in progress.c): epoch << 16 | 1, which
       it stores as its state, and BPT__PIN_FENCE while pins must fence
       (no membarrier), which it clears from what it stores. Written at
       init and by each waiter, after the epoch. */
    bpt__atomic_u64 pin_word;
    bpt__atomic_u32 futex;          /* bit 0: a waiter sleeps (or is about to); BPT__FUTEX_FENCE:
                                       set for good while sections end with a fence (progress.c) */
    bpt__atomic_ptr records;        /* bpt__thread list head, push-only */
    bpt__atomic_u32 nrecords;
    bpt__atomic_u32 light_pins;     /* membarrier PRIVATE_EXPEDITED registered */
    bpt__atomic_u32 sync_core;      /* membarrier SYNC_CORE registered */
    pthread_mutex_t wait_lock;      /* one waiter at a time */
    pthread_key_t key;              /* exit destructor (and the TLS slot on tcc) */
    bpt__atomic_u64 waits, futex_sleeps, futex_wakes, sync_core_waits;
};
BPT__DATA(struct bpt__progress_state, bpt__progress);   /* progress.c */

BPT__HOT BPT__INTREGS bpt__thread *bpt__thread_self_or_null(void);
BPT__PRIVATE bpt__thread *bpt__thread_records(void);   /* every record ever made: walk ->next */
BPT__PRIVATE bpt__thread *bpt__thread_self(void);   /* creates the record: NULL when out of memory */
BPT__PRIVATE void bpt__progress_ensure_init(void);
BPT__HOT bpt__thread *bpt__pin(void);               /* NULL: no record (out of memory), not pinned */
BPT__HOT void bpt__unpin(bpt__thread *rec);
/* The pin and unpin of the count path (>>intregs in port.h): the thread's
   record exists; the unpin leaves the wake to its caller. */
BPT__HOT BPT__INTREGS void bpt__pin_rec(bpt__thread *rec);
BPT__HOT BPT__INTREGS int bpt__unpin_quiet(bpt__thread *rec);   /* nonzero: call bpt__progress_wake */
BPT__NOINLINE void bpt__progress_wake(void);
BPT__PRIVATE int bpt__thread_pinned(const bpt__thread *rec);
BPT__PRIVATE void bpt__block_begin(bpt__thread *rec);   /* a managed thread goes offline to block */
BPT__PRIVATE void bpt__block_end(bpt__thread *rec);
BPT__PRIVATE void bpt__progress_atfork_child(bpt__thread *self);   /* locks.c's fork child handler */
BPT__PRIVATE int bpt__fail(int code, const char *fmt, ...);
BPT__PRIVATE uint32_t bpt__threads_count(void);   /* thread records made so far: indexes are below it */
/*** End of progress.h ***/

/*** Begin file session.h ***/
/* session.h: what other parts use of trace sessions (session.c): the
   session itself, the table of live sessions, sending a record, and
   reading the per-thread buffers (drain, trace files). */

typedef struct bpt__lane bpt__lane;   /* one thread's buffer in one session (session.c) */

/* One trace session (OTP 27's trace:session_create): its tracer, its rate
   limit, its lanes and the patterns in force. */
struct bpt__session {
    uint64_t id;                  /* weak id: generation << 16 | slot */
    char name[64];
    bpt_tracer_fn tracer;
    void *tracer_user;
    int usdt;                     /* 1: records go to the bptrace USDT probes (probes.c) */
    int buffered;                 /* 1: records go to the lanes' chunks (no tracer, not usdt): the send's one test */
    uint32_t chunk_bytes, chunks; /* each lane's chunks, at its start */
    uint32_t max_chunks;          /* the most chunks a lane grows to (session.c >>growth) */
    int flight_recorder;          /* 1: a full lane overwrites its oldest unread chunk */
    int served;                   /* 1: a control client's (control.c): drained by a server thread */
    int orphan;                   /* 1: served, in a fork child: no one drains it, its lanes do not grow */
    int time_cpu;                 /* 1: call_time by thread CPU time (frames: BPT__FRAME_CPU) */
    uint64_t rate_max;
    uint64_t rate_window_ns;
    bpt__atomic_u32 dead;         /* destroy began: send nothing more */
    bpt__atomic_u32 limit_tripped;
    uint64_t window_base;         /* immutable: rate_window_ns's windows are counted from this time */
    bpt__atomic_u64 window;       /* the rate limit's count: with a window, its index << 32 | its
                                     count (bpt__rate_count); without, the count */
    bpt__atomic_u64 limited;
    bpt__atomic_u64 frames_skipped; /* calls whose return could not be traced (frames.c) */
    bpt__atomic_u64 lost_laneless;  /* messages lost for want of memory for their thread's lane
                                       (unmarked: bpt__session_send_nested) */
    bpt__atomic_ptr lane_dir[256];/* bpt__atomic_ptr[256]: lanes by thread record index [R1] */
    pthread_mutex_t drain_lock;
    uint32_t read_next;             /* under drain_lock: the lane the next read starts at */
    bpt__pattern_entry *patterns; /* set path only: the patterns in force, in order */
};

/* One thread's buffer in one session (session.c has the protocol: [R1]-[R4]).
   Declared here for the root record (root.c): an outside reader reports
   its counters. */
enum {
    BPT__GROW_BATCHES = 20,       /* batches double: 2 << 19 chunks is past any cap */
    BPT__LANES_PER_DIR = 256,     /* a session's lane_dir[i] points at 256 lane pointers */
    BPT__LANE_DIRS = 256,         /* 65536 thread records */
    BPT__LOSS_CONTEXTS = 4        /* contexts whose losses a full lane counts apart (>>losses) */
};
/* Records of a context (a thread and its process) lost since its last
   DROPPED record (>>losses in session.c). */
typedef struct bpt__loss {
    uint32_t tid;
    uint64_t process, n;
} bpt__loss;

/* The ring. Chunk number i (a count from 0) is in slot[i % cap]. The lane
   holds `budget` chunks: while a chunk is open (cur), those of numbers
   head+1-budget .. head, before its first one those of head-budget ..
   head-1. Opening chunk `next` reuses the chunk of next - budget, read by
   then [R3], and moves its pointer to slot next % cap; a grown lane adds a
   chunk there instead (budget + 1). The drainer reads only the slots of
   numbers tail .. opened-1, none of which the producer moves. */
struct bpt__lane {
    uint64_t number;              /* the thread record's index: the file's lane number */
    uint32_t chunks, chunk_bytes; /* immutable: the chunks it starts with (0: a callback
                                     session's lane, counters only), and their size */
    uint32_t cap;                 /* immutable: slots in the ring, the most chunks it may hold */
    bpt__atomic_ptr *slot;        /* immutable: the ring's cap slots, after the lane */
    /* Producer side: the owner thread only. */
    uint64_t head;                /* the chunk being written (a count; in slot[head % cap]) */
    struct bpt__chunk *cur;       /* that chunk (NULL before the first record) */
    unsigned char *wp, *wend;     /* where the next record goes in it, and where records end:
                                     the chunk's last BPT__KEPT_BYTES are kept for a loss's mark */
    uint32_t ctx_tid;             /* the context of the records after wp */
    uint64_t ctx_process;
    uint64_t anchor_tick;         /* the counter's reading in the stream's latest anchor (clock.h) */
    uint64_t anchor_span;         /* ticks an anchor serves (bpt__clock_anchor_span) */
    uint64_t anchor_ns;           /* a callback session's lane: the anchor's ns */
    bpt__loss unreported[BPT__LOSS_CONTEXTS];   /* records lost since the last DROPPED record,
                                     by context */
    uint32_t nunreported;         /* contexts in unreported[] (>>losses) */
    uint64_t lost_marked;         /* `lost` as far as it was counted in unreported[] */
    bpt__atomic_u32 budget;       /* chunks the lane holds (written by the owner; read by stats) */
    uint32_t spare_left;          /* chunks of the last batch not yet used */
    unsigned char *spare;         /* the next of them */
    void *batch[BPT__GROW_BATCHES]; /* the batches mapped while growing (freed with the lane), */
    uint32_t batch_chunks[BPT__GROW_BATCHES];   /* their chunks, */
    bpt__atomic_u32 nbatch;       /* and how many: release-stored after the two [R4] */
    bpt__atomic_u64 opened;       /* head + 1 once chunk head is open: release-stored [R2] */
    bpt__atomic_u64 written;      /* owner counters (bpt__owner_inc_u64): records put in chunks, */
    bpt__atomic_u64 dropped;      /* lost to a full buffer, */
    bpt__atomic_u64 overwritten;  /* taken back by a flight recorder, */
    bpt__atomic_u64 delivered;    /* and given to the callback tracer or the USDT probe */
    bpt__atomic_u64 lost;         /* dropped by a nested send (a signal handler interrupting its
                                     own thread's send): atomic, the owner may be mid-update */
    char pad[BPT__CACHE_LINE];
    /* Consumer side: whoever holds the tail's BUSY bit. */
    bpt__atomic_u64 tail;         /* the chunk being read << 1 | BPT__TAIL_BUSY [R3] */
    uint32_t rpos;                /* bytes of chunk tail already read */
    uint32_t rrec;                /* produced records of chunk tail already read */
    uint64_t rmarked;             /* the counts of chunk tail's DROPPED records already read */
    uint64_t unreported_overwritten;   /* records taken back and not yet marked in what was read */
    uint64_t last_ticks;          /* the last record read: the time of a gap's DROPPED */
    uint32_t rctx;                /* while rpos > 0: the offset in chunk tail of the last context
                                     record read, the one in effect at rpos (bpt__lane_read_resume) */
    uint64_t rreader;             /* the reader that read last (bpt__lane_reader.id; 0: none yet) */
    bpt__stream stream;           /* the drainer's decoding context */
    bpt__atomic_u64 drained;      /* records read (drained or written to a file) */
};

/* bpt_session_wait's words of one slot [W1]: producers count the chunks
   they seal and wake the sleepers. In the table, not in the session: a
   drainer sleeps unpinned, and its futex word must outlive a destroy. */
typedef struct bpt__wake_words {
    bpt__atomic_u32 sealed;       /* chunks sealed (and destroys begun) by the slot's sessions: the futex word */
    bpt__atomic_u32 sleepers;     /* drainers asleep on it, or about to be */
} bpt__wake_words;

/* The registry of live sessions. A slot's pointer is published with a
   release store and cleared before the session is freed after a wait, so a
   pinned reader that finds it may use it. */
struct bpt__sessions {
    bpt__atomic_ptr slot[BPT_MAX_SESSIONS];
    uint64_t generation[BPT_MAX_SESSIONS];    /* under the code modification permission */
    char pad[BPT__CACHE_LINE];    /* a seal's count stays off the lines every hit reads (slot) */
    bpt__wake_words wake[BPT_MAX_SESSIONS]; /* never freed: a sleeper's word (>>wait) */
};
BPT__DATA(struct bpt__sessions, bpt__sessions);   /* session.c */

/* What reads a session's lanes (bpt_session_drain, bpt_session_write):
   take gets a run of whole records of one lane and returns the bytes it
   used (fewer when its room is full); gap gets the count of records a
   flight recorder overwrote before the next run, and returns 0 when it has
   no room for the notice. The read counts in `records` the records taken
   (not context or DROPPED records). `id` names the reader's stream: every
   drain of a session is one (BPT__READER_DRAIN: they decode into the
   lanes' own stream), each file writer another; a lane read last by
   another stream gives this one the context in effect first
   (bpt__lane_read_resume). */
typedef struct bpt__lane_reader bpt__lane_reader;
struct bpt__lane_reader {
    uint32_t (*take)(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes);
    int (*gap)(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks);
    uint64_t records;
    uint64_t id;                  /* BPT__READER_DRAIN, or a file writer's (bpt__file_writer_id) */
};
enum { BPT__READER_DRAIN = 1 };   /* a file writer's id is above it; a lane's rreader 0 is no reader */

/* A session's id: its slot in bpt__sessions.slot in the low 16 bits, the
   slot's generation above (session_life.c). */
enum { BPT__SESSION_SLOT_BITS = 16 };
BPT__HOT uint32_t bpt__session_slot(uint64_t id) { return (uint32_t)(id & ((1u << BPT__SESSION_SLOT_BITS) - 1)); }
BPT__HOT bpt__session *bpt__session_lookup(uint64_t id);   /* pinned or under the permission */
BPT__PRIVATE bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc);
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out);
BPT__PRIVATE int bpt__session_create(const bpt_session_desc *desc, bpt_session *out, int served);
BPT__PRIVATE void bpt__session_free(bpt__session *s);
BPT__HOT int bpt__session_admit(bpt__session *s, bpt__thread *rec);
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session);
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt__rec *r);
/* A send's parts, for the call path (site_native.c), which writes its
   record in place with the integer registers alone (>>intregs, port.h):
   mark the thread's send [H1] (0: one is open already), find room as it
   is in a session that buffers (NULL: the full path's send must run),
   publish what was written at the lane's wp, unmark. */
BPT__HOT BPT__INTREGS int bpt__send_begin(bpt__thread *rec);
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_room(bpt__session *s, const bpt__thread *rec, uint64_t ticks,
                                                uint32_t room);
BPT__HOT BPT__INTREGS void bpt__lane_publish(bpt__lane *lane, uint32_t bytes);
BPT__HOT BPT__INTREGS void bpt__send_end(bpt__thread *rec);
BPT__PRIVATE void bpt__session_read(bpt__session *s, bpt__lane_reader *rd);   /* under drain_lock */
BPT__PRIVATE uint64_t bpt__lane_number(const bpt__lane *lane);
BPT__PRIVATE bpt__stream *bpt__lane_stream(bpt__lane *lane);
BPT__PRIVATE void bpt__sessions_atfork_child(void);
BPT__PRIVATE void bpt__session_wake(bpt__session *s);   /* [W1]: a chunk sealed, or the destroy began */

/* The USDT probes bptrace fires (probes.c). */
BPT__PRIVATE void bpt__probe_event(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r);
BPT__PRIVATE uint64_t bpt__probe_change_id(void);   /* the change the protocol runs now (bp.c) */
/*** End of session.h ***/

/*** Begin file pattern.h ***/
/* pattern.h: what other parts use of trace patterns and match specs
   (pattern.c): the parsed pattern, the match spec a generation holds, the
   patterns a session keeps in force, and the flag groups a pattern sets. */

enum { BPT__NAME_MAX = 127 };

/* A parsed "module:function/arity"; "*" for a part that is any. */
struct bpt__mfa {
    char module[BPT__NAME_MAX + 1];
    char function[BPT__NAME_MAX + 1];
    int arity;                    /* -1: any */
};

/* How a pattern sets its kinds (BPT__KINDS, breakpoint.h), and the
   call-trace actions that need a return frame or a caller (frames.c). */
#define BPT__HOWS (BPT_OFF | BPT_PAUSE | BPT_RESTART)
#define BPT__FRAME_ACTIONS (BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO)
#define BPT__CALL_ACTIONS (BPT__FRAME_ACTIONS | BPT_CALLER)

/* A match spec, shared by the generations that use it and freed when the
   last lets go. refc is changed only under the code modification permission;
   readers never touch it (they are done with a generation before its
   references are dropped: steps 8 and 11). */
struct bpt__ms {
    bpt_match_fn pred;
    void *user;
    unsigned actions;
    const char *message;          /* interned */
    uint32_t message_id;          /* its name id (names.c), for records; 0: none */
    int nspec;                    /* argument spec: how many, or 0 for none */
    uint8_t spec[BPT_MAX_ARGS];   /* enum bpt_arg_type */
    uint8_t rettype;              /* enum bpt_arg_type of return_from's value */
    uint32_t refc;
};

/* A pattern in force in a session: bpt_trace_pattern calls are kept in order
   and replayed on functions registered later. */
struct bpt__pattern_entry {
    bpt__pattern_entry *next;
    bpt__mfa mfa;
    unsigned flags;
    bpt__ms *ms;                  /* one reference */
};

BPT__PRIVATE int bpt__pattern_parse(const char *text, bpt__mfa *out);
BPT__PRIVATE int bpt__mfa_match(const bpt__mfa *p, const char *module, const char *name, int arity);
BPT__PRIVATE int bpt__glob(const char *pattern, const char *s);   /* '*' matches any run */
BPT__PRIVATE int bpt__flags_check(unsigned flags);
BPT__PRIVATE int bpt__ms_new(const bpt_match *m, unsigned extra, bpt__ms **out);
BPT__PRIVATE int bpt__ms_message(bpt__ms *ms, const char *message);
BPT__PRIVATE void bpt__ms_ref(bpt__ms *ms);     /* NULL is no match spec: nothing to count */
BPT__PRIVATE void bpt__ms_unref(bpt__ms *ms);
BPT__PRIVATE void bpt__pattern_entry_free(bpt__pattern_entry *e);
/*** End of pattern.h ***/

/*** Begin file breakpoint.h ***/
/* breakpoint.h: the data the set path (bp.c) writes and the hit path
   (hit.c) reads: the kinds, function records, GenericBp and its two
   generations. Names as in beam_bp.c. */

/* >>kinds: the breakpoint kinds come from one table, BPT_KINDS (the public
   half, api_pattern.h: it also makes the public flags BPT_COUNT, BPT_CALL,
   ...). Each kind
   has a part of its own (kind_count.c, kind_call.c, kind_timem.c) that
   defines its hooks, found by name from the row:

     bpt__kind_<name>_prepare  step 2: allocate what step 3 will need
     bpt__kind_<name>_stage    step 3: write the change into a staging generation
     bpt__kind_<name>_ref      step 11: a second generation shares the data
     bpt__kind_<name>_unref    steps 3, 11, 12: a generation lets go of it
     bpt__kind_<name>_hit      the hit path: what the kind does on a call
     bpt__kind_<name>_info     bpt_trace_info: what it reports

   So a new kind is a row in the table and a part of its own, nothing else.
   Kind k owns two bits of a generation's flags, as beam_bp.c's ERTS_BPF_*
   pairs: ON (set) and ACTIVE (not paused). */
enum {
#define BPT__KIND_IX(NAME, name, flag) BPT__KIX_##NAME,
    BPT_KINDS(BPT__KIND_IX)
#undef BPT__KIND_IX
    BPT__NKINDS
};
#define BPT__BPF_ON(k)     (1u << (2 * (k)))
#define BPT__BPF_ACTIVE(k) (2u << (2 * (k)))
#define BPT__KIND_ACTIVE_OR(NAME, name, flag) | BPT__BPF_ACTIVE(BPT__KIX_##NAME)
#define BPT__BPF_ACTIVE_ALL (0u BPT_KINDS(BPT__KIND_ACTIVE_OR))   /* every kind's ACTIVE bit */
#define BPT__KIND_OR(NAME, name, flag) | (flag)
#define BPT__KINDS (0u BPT_KINDS(BPT__KIND_OR))   /* every kind's public flag */
/* Two flag bits per kind fit a generation's uint32_t flags, and every kind's
   public flag fits a frame's actions (frames.c) and stays below the BPT_OFF /
   BPT_PAUSE / BPT_RESTART bits. */
typedef char bpt__kinds_fit[(BPT__NKINDS <= 16 && BPT__KINDS < (1u << 16)) ? 1 : -1];

/* One generation of one session's settings on one function. */
typedef struct bpt__GenericBpData {
    uint32_t flags;               /* BPT__BPF_ON(k) | BPT__BPF_ACTIVE(k) per kind k */
    void *data[BPT__NKINDS];      /* kind k's data, owned by its part; valid while ON(k) */
} bpt__GenericBpData;

/* What one protocol run (bp.c) does to each affected function's breakpoint
   of one session: switch kinds on (how 0), off, pause or restart them. */
typedef struct bpt__op {
    unsigned kinds;               /* BPT__KINDS bits: the kinds it changes */
    unsigned how;                 /* 0, BPT_OFF, BPT_PAUSE, BPT_RESTART */
    bpt__ms *ms;                  /* for BPT_CALL switched on; the op holds one reference */
} bpt__op;


/* The breakpoint of one trace session on one function. */
typedef struct bpt__GenericBp {
    bpt_vm_word orig_instr;       /* the word the breakpoint replaces */
    bpt__GenericBpData data[2];   /* indexed by bpt_active_bp_ix() / its staging twin */
    bpt__session *session;
    bpt__atomic_ptr next;         /* bpt__GenericBp *: the next session's, walked by readers */
    struct bpt__GenericBp *to_insert;    /* set path: a new session's GenericBp, parked until step 5 */
    struct bpt__GenericBp *next_to_free; /* set path: freed after step 12 */
} bpt__GenericBp;

/* The call_count kind's data (kind_count.c): shared by the generations
   that count into it, freed when the last lets go (refc changes only under
   the code modification permission). Declared here for the root record
   (root.c): an outside reader sums its slot's counters. */
typedef struct bpt__BpCount {
    /* The slot, slot / BPT__COUNT_PAGE_SLOTS and slot % BPT__COUNT_PAGE_SLOTS,
       as the hit uses them: where a thread record holds the page's pointer
       (a byte offset: one load on the hit), and the counter's index in it. */
    uintptr_t dir, off;
    uint32_t slot;
    uint32_t refc;
    uint64_t base;                /* set path: the sum at the last BPT_RESTART */
    bpt__atomic_u64 spill;        /* hits that could not use their own counter (kind_count.c) */
} bpt__BpCount;

enum bpt__site_kind { BPT__SITE_VM = 1, BPT__SITE_NATIVE = 2 };

/* >>shortcut: what a hit on a function does in one generation, worked out
   by the set path when it stages the generation (step 3) rather than by
   every hit, as Linux ftrace gives each call site the ops it needs (arm64
   CALL_OPS) and BEAM's call_count-only breakpoints take their own short
   path. WALK is the general case: every session's GenericBp, every kind
   (hit.c). COUNT: exactly one session's breakpoint is active and it only
   counts; `data` is its BpCount. CALL: exactly one session's breakpoint
   is active and it only traces calls (with or without return trace, which
   is the call kind's match spec); `data` is that GenericBp, and the hit
   runs the call kind alone. CALL_PLAIN: a CALL whose record needs nothing
   but the function and its integer arguments: no match spec, or one with
   no predicate, argument spec, message or action (no return trace), into
   a session that buffers its records and sets no rate limit.
   CALL_RETURN: a CALL_PLAIN but for the match spec's actions, which ask
   for return_from (return_trace, exception_trace) and nothing else: the
   call record, and a return frame (frames.c) of one session. A native
   entry's call-return path (site_native.c) writes the record, and pushes
   the frame, with the integer registers alone; anywhere else it is a
   CALL. TIME: exactly one session's breakpoint is active, with call_time
   alone, and the session times by the wall clock (not time_cpu): a
   native entry's time path (site_native.c) counts the call and pushes
   the frame with the integer registers alone; anywhere else it is a ONE.
   ONE: exactly one session's breakpoint is
   active, for anything else (several kinds, call_memory, call_time by CPU time);
   `data` is that GenericBp, whose kinds the hit runs without walking the
   list. NONE: nothing is active (a breakpoint word not yet
   removed, or every kind paused). A shortcut is a summary of
   the GenericBp data of the same generation and follows its rules: step 3
   writes the staging one, the commit publishes it with the index [G2],
   step 11 copies it, after the wait that keeps hits off it. */
enum bpt__shortcut_kind {
    BPT__SHORTCUT_NONE, BPT__SHORTCUT_COUNT, BPT__SHORTCUT_WALK, BPT__SHORTCUT_ONE, BPT__SHORTCUT_CALL,
    BPT__SHORTCUT_CALL_PLAIN, BPT__SHORTCUT_CALL_RETURN, BPT__SHORTCUT_TIME
};
typedef struct bpt__shortcut {
    uint32_t kind;                /* enum bpt__shortcut_kind */
    void *data;                   /* COUNT: the BpCount (kind_count.c); every other kind but NONE
                                     and WALK: the bpt__GenericBp */
    /* COUNT: the BpCount's dir and off, copied at step 3, so that a counted
       hit reads nothing that the set path writes: the BpCount's refc
       changes at every step 3 and 11 that touches it. A store to a line
       that another core reads costs both cores a transfer of the line:
       while one worker counted 10,000 functions, switching them off took
       step 3 1.17 ms with the hits reading the BpCount, 0.21 ms with these
       copies (bench/pattern_scale.c; PERFORMANCE.md, issue #16). */
    uintptr_t count_dir, count_off;
} bpt__shortcut;

/* A function's record, in cache lines by who reads them (>>working set in
   bp.c): the first line holds what the entry stubs read first (the hint)
   and what the set path reads and writes of every function it installs,
   removes or links (its site and words, list head, installed); the second line the
   shortcuts, which the short paths read and steps 3 and 11 write; the rest
   is read when a pattern is matched, a record formatted, or a function
   registered. The set path stores into the first line only what changes
   (as path_hint, bp.c), since every stub reads it.
   Records start on a line of their own (bpt__func_alloc, funcs.c): laid
   out as they were (these fields spread over three lines, `installed`
   beside the shortcuts, at malloc's 16-byte alignment), a change over
   10,000 functions took 1.13 ms instead of 0.89 (bench/pattern_scale.c
   steps, no worker). */
struct bpt_func {
    /* First, at offset 0, where the entry stubs read it: which short path
       the stub tries before the full one (site_native.c), BPT__HINT_*
       in sites.h: the count path when either generation's shortcut is
       COUNT or NONE, the call path when either is CALL_PLAIN, the
       call-return path when either is CALL_RETURN, the time path when
       either is TIME, else none. A hint, written by the set path with
       the shortcuts; the path decides under its pin. A function that
       times by CPU time or with call_memory, traces returns with more
       than return_from, or mixes kinds goes to the full path at once. */
    uint32_t path_hint;
    /* Beside it, in the cache line the stub reads: 0 for a code site; for
       a pointer slot (slots.c: a GOT entry, a function-pointer table), the
       protection its page had at registration (PROT_READ, maybe
       PROT_WRITE: never 0). Fixed while registered: hits read it as "a
       slot". */
    uint32_t slot_prot;
    int kind;                     /* enum bpt__site_kind */
    int installed;                /* set path: the breakpoint word is in place */
    unsigned word_size;           /* 8, 4 or 2 bytes */
    int code_guarded;             /* native aarch64: its page is BTI-guarded (bpt__module_code_guarded) */
    unsigned page_prot;           /* slot: its page's protection at the current change's step 2 (set path) */
    int padding_fresh;            /* set path, native: the padding written since the last SYNC_CORE
                                     wait; its first install's step 4 waits with SYNC_CORE (bp.c) */
    /* The site: the one word that switches between the original and the
       breakpoint. VM: an 8-byte instruction word. Native: the 2-byte entry
       NOP (x86-64) or the 4-byte entry NOP (aarch64). Slot: the 8-byte
       pointer, which holds the function's address or its trampoline's. */
    void *site;
    uint64_t orig_word;           /* the site's original content */
    uint64_t bp_word;             /* what it holds while a breakpoint is installed */
    bpt__atomic_ptr gen_bp;       /* bpt__GenericBp *: list head, BEAM's ci->gen_bp */
    /* The second line: the short paths' summary of each generation. */
    bpt__shortcut shortcut[2];    /* per generation, as GenericBp's data (>>shortcut above) */
    const char *module, *name;    /* interned */
    int arity;
    uint32_t fid;                 /* its name id (names.c): what its records carry */
    void *fn;                     /* native: the function's address; slot: its trampoline's entry */
    uint64_t code_size;           /* native: bytes of code from the ELF symbol (0: unknown) */
    int signs_lr;                 /* native aarch64: the entry signs the return address (paciasp) */
    uint32_t registry_ix;         /* set path: position in the registry */
    const bpt_vm_ops *ops;        /* VM: argument access and formatting */
    struct bpt_func *next_retired;/* set path: native records are retired, never freed */
    void *alloc_base;             /* what BPT_MALLOC gave (bpt__func_alloc): what BPT_FREE takes */
};

#if defined(BPT_NATIVE)
/* The register frame an entry stub builds on the stack and hands to the
   hit path. Its layout is fixed by the stub's assembly (site_*.c). */
#  if defined(__x86_64__)
typedef struct bpt__regs {
    uint64_t gpr[8];              /* rdi rsi rdx rcx r8 r9 (arguments), rax (varargs count), r10 (static chain) */
    uint64_t rbp;                 /* the stub's frame pointer: the function's return slot is at rbp+16 */
    uint64_t pad;
    uint64_t fp[8][2];            /* xmm0-7: floating-point arguments (low 128 bits) */
} bpt__regs;
/* What the return trampoline saves: the return registers (SysV x86-64). */
typedef struct bpt__retregs {
    uint64_t gpr[2];              /* rax, rdx */
    uint64_t fp[2][2];            /* xmm0, xmm1 (low 128 bits) */
} bpt__retregs;
enum { BPT__INT_ARG_REGS = 6, BPT__FP_ARG_REGS = 8 };
#  else
typedef struct bpt__regs {
    uint64_t gpr[10];             /* x0-x7 (arguments), x8 (indirect result), x9 (the caller's LR) */
    uint64_t fp[8][2];            /* q0-q7: floating-point arguments */
    uint64_t link, pad;           /* x30 at the stub's entry: fn-4, where it returns */
} bpt__regs;
/* What the return trampoline saves: the return registers (AAPCS64). */
typedef struct bpt__retregs {
    uint64_t gpr[8];              /* x0-x7 */
    uint64_t fp[4][2];            /* q0-q3 */
} bpt__retregs;
enum { BPT__INT_ARG_REGS = 8, BPT__FP_ARG_REGS = 8 };
#  endif
#endif

/* >>protocol: the set path (bp.c). */
BPT__PRIVATE int bpt__op_enables(const bpt__op *op);   /* switched on (how 0) */
BPT__PRIVATE int bpt__permission_seize(const char *who);   /* 0, BPT_ENOMEM or BPT_EDEADLK */
BPT__PRIVATE int bpt__set_path_allowed(const char *who);  /* its checks alone: 0, BPT_ENOMEM or BPT_EDEADLK */
BPT__PRIVATE void bpt__permission_release(void);
BPT__PRIVATE bpt__GenericBp *bpt__find_bp(const bpt_func *f, const bpt__session *s);
BPT__PRIVATE int bpt__change_begin(const char *who, uint64_t *t);   /* step 1 */
BPT__PRIVATE int bpt__protocol_run(bpt__session *s, bpt_func **fs, int n, const bpt__op *op, uint64_t *t,
                                   int *committed);   /* steps 2-12 */
BPT__PRIVATE void bpt__commit(void);                                 /* step 7 */
BPT__PRIVATE void bpt__change_end(uint64_t *t);                      /* step 13 */
BPT__DATA(pthread_mutex_t, bpt__code_mod_permission);   /* locks.c */
BPT__DATA(bpt__atomic_u64, bpt__layout_seq);               /* bp.c: [L1], odd while the permission is held */
BPT__DATA(bpt__atomic_u32, bpt__active_ix);                /* hit.c: the active generation [G2] */
BPT__HOT BPT__INTREGS unsigned bpt__active_ix_load(void);

/* >>kinds: every kind's hooks, declared from the table (what each does:
   the comment at the top of this file; who calls them: bp.c, hit.c,
   trace_info.c, each through the table too). */
#define BPT__KIND_HOOKS(NAME, name, flag) \
    BPT__PRIVATE int bpt__kind_##name##_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out); \
    BPT__PRIVATE void bpt__kind_##name##_stage(bpt__GenericBpData *d, const bpt__op *op, void *prepared); \
    BPT__PRIVATE void bpt__kind_##name##_ref(void *data); \
    BPT__PRIVATE void bpt__kind_##name##_unref(void *data); \
    BPT__HOT void bpt__kind_##name##_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d); \
    BPT__PRIVATE void bpt__kind_##name##_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out);
BPT_KINDS(BPT__KIND_HOOKS)
#undef BPT__KIND_HOOKS
/* The count kind's hit without a GenericBp, for the COUNT shortcut. */
BPT__HOT void bpt__kind_count_add(bpt__thread *rec, void *count);
BPT__HOT BPT__INTREGS int bpt__kind_count_try_add(bpt__thread *rec, uintptr_t dir, uintptr_t off, void *count);   /* 0: page not mapped */
#if defined(BPT_NATIVE)
/* The call kind's plain record (>>plain call in kind_call.c), for the call
   path: written in place at p, which has BPT__CALL_PLAIN_ROOM bytes;
   flags: BPT__REC_CALL_NO_RETURN or 0. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_rec_plain(unsigned char *p, const bpt_func *f, const uint64_t *gpr,
                                                   uint64_t ticks, uint16_t flags);
#endif
/*** End of breakpoint.h ***/

/*** Begin file timem.h ***/
/* timem.h: what other parts use of the call_time and call_memory tables
   (timem.c): the kind parts (kind_timem.c) and the frames charge them,
   bpt_trace_info collects and reports them, and the root record (root.c)
   tells an outside reader their layout. */

typedef struct bpt__BpTimem bpt__BpTimem;

/* The tables (timem.c has how they are written and collected). Declared
   here for the root record (root.c): an outside reader sums them while
   their owners write them, each value one an owner wrote. */
typedef struct bpt__timem_cell {
    uint64_t process;             /* 0: a free cell (process ids are never 0) */
    uint64_t calls, time_ns;
    int64_t mem;
} bpt__timem_cell;

/* Open addressing, linear probing, a power-of-two capacity, at most half full. */
typedef struct bpt__timem_table {
    uint32_t cap, used;
    bpt__thread *owner;           /* the thread whose hit mapped it (BPT_HIT_MAP); NULL: the
                                     set path's (BPT_MALLOC) */
    struct bpt__timem_table *next_free;   /* on its owner's list of idle tables [T2] */
    bpt__timem_cell cell[1];
} bpt__timem_table;

enum {
    BPT__TIMEM_HIT_CAP = 64,    /* a hit's first table: 64 cells fill most of a page */
    BPT__TIMEM_MORE = 65536     /* thread records past BPT_MAX_THREADS that get a table: the
                                   count of records that get a trace buffer (session.h's lane
                                   directory), past the first BPT_MAX_THREADS */
};

struct bpt__BpTimem {
    bpt__atomic_ptr table[BPT_MAX_THREADS];   /* bpt__timem_table *, by thread record index */
    bpt__atomic_ptr more;                     /* bpt__atomic_ptr[BPT__TIMEM_MORE]: the tables of thread
                                                 records past BPT_MAX_THREADS, by index - BPT_MAX_THREADS;
                                                 mapped by the first charge that needs it [T3] */
    bpt__timem_table *carried;                /* set path: the sums of earlier collections */
    struct bpt__BpTimem *prev;                /* set path: idle tables a collection could not
                                                 merge (out of memory), summed by the next one */
    bpt__atomic_u64 lost;                     /* charges dropped: no memory for a table, a thread
                                                 record past both, a signal handler's charge
                                                 nested in its thread's of these tables, or one
                                                 nested deeper than BPT__TIMEM_NEST [H1]; added
                                                 to by the charging threads (timem.c) */
    uint64_t lost_carried;                    /* set path: the drops of earlier collections, as
                                                 `carried` holds their sums (C6); reported as
                                                 bpt_info.lost_charges */
    uint32_t refc;                            /* set path: generations that point here */
};

/* The flag bits of the two kinds that share the tables (breakpoint.h's
   BPT__BPF_ON/ACTIVE, as beam_bp.c's ERTS_BPF_TIME_TRACE and friends). */
#define BPT__BPF_TIME_TRACE  BPT__BPF_ON(BPT__KIX_TIME)
#define BPT__BPF_TIME_ACTIVE BPT__BPF_ACTIVE(BPT__KIX_TIME)
#define BPT__BPF_MEM_TRACE   BPT__BPF_ON(BPT__KIX_MEMORY)
#define BPT__BPF_MEM_ACTIVE  BPT__BPF_ACTIVE(BPT__KIX_MEMORY)
#define BPT__BPF_TIMEM_ON     (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)
#define BPT__BPF_TIMEM_ACTIVE (BPT__BPF_TIME_ACTIVE | BPT__BPF_MEM_ACTIVE)

BPT__PRIVATE bpt__BpTimem *bpt__timem_new(void);   /* one reference; NULL when out of memory */
BPT__PRIVATE void bpt__timem_free(bpt__BpTimem *t);
BPT__PRIVATE void bpt__timem_ref(bpt__BpTimem *t);
BPT__PRIVATE void bpt__timem_unref(bpt__BpTimem *t);
BPT__PRIVATE bpt__BpTimem *bpt__timem_of(const bpt__GenericBpData *d);
BPT__PRIVATE void bpt__timem_point(bpt__GenericBpData *d, bpt__BpTimem *t);
BPT__HOT BPT__INTREGS int64_t bpt__mem_add(int64_t a, int64_t b);   /* net bytes, modulo 2^64 */
BPT__HOT void bpt__timem_charge(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                uint64_t calls, uint64_t ns, int64_t mem);
BPT__HOT BPT__INTREGS int bpt__timem_charge_try(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                                uint64_t calls, uint64_t ns, int64_t mem);
BPT__PRIVATE int bpt__timem_collect(bpt__GenericBp **gs, int n);
BPT__PRIVATE void bpt__timem_report(const bpt__BpTimem *tm, bpt_info *out);
BPT__PRIVATE uint32_t bpt__timem_nprocs(const bpt__BpTimem *tm);
/*** End of timem.h ***/

/*** Begin file frames.h ***/
/* frames.h: what other parts use of return, exception and return_to
   frames (frames.c): the shadow frame, what one hit gathers for it, and
   the calls that push and settle frames. */

#ifndef BPT_SHADOW_FRAMES
#  define BPT_SHADOW_FRAMES 512
#endif
#ifndef BPT_FRAME_SESSIONS
#  define BPT_FRAME_SESSIONS 4
#endif
#if BPT_SHADOW_FRAMES < 1 || BPT_FRAME_SESSIONS < 1 || BPT_FRAME_SESSIONS > 255
#  error "bptrace: BPT_SHADOW_FRAMES must be >= 1 and BPT_FRAME_SESSIONS in 1..255"
#endif

enum { BPT__STACK_NATIVE = 0, BPT__STACK_VM = 1 };

/* One session's wish for a call's return. */
typedef struct bpt__frame_session {
    uint64_t id;                  /* the session's weak id */
    uint32_t actions;             /* BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO, and the kinds' flags
                                     (BPT_TIME | BPT_MEMORY): wide enough for every kind (breakpoint.h) */
    uint8_t rettype;              /* enum bpt_arg_type of the return value */
    /* call_time / call_memory (timem.c), as BEAM's process_breakpoint_trace:
       the function runs for this session from `since` (0: paused, while a
       callee the session times runs, or while its process is switched out),
       in the session's clock: the wall clock's ticks (bpt__now_ticks), or the
       thread's CPU ns (BPT__FRAME_CPU); own_ns in ns. */
    uint64_t since, own_ns;
    int64_t mem;
} bpt__frame_session;

#define BPT__FRAME_TIMEM (BPT_TIME | BPT_MEMORY)
#define BPT__FRAME_CPU (1u << 24)   /* the session times by thread CPU time (bpt_session_desc.time_cpu) */

struct bpt__frame {
    uintptr_t ret;                /* native: the original return address, stripped of any
                                     signature; 0: a tail call, the frame below holds it */
    uintptr_t sp;                 /* native: stack pointer at entry; VM: the token's check value */
    uint32_t fid;                 /* the function's name id: valid after it is gone */
    uint32_t caller_fid;          /* VM: the function the call returns to (0: unknown) */
    bpt_func *f;                  /* for call_time: native records live forever; a VM function
                                     is not unregistered while its calls run (bpt_unregister) */
    uint64_t process;             /* the process the call runs in */
    uint64_t fiber;               /* native: the tag of the stack it was pushed on (fibers.c) */
    uint16_t nsess;
    uint8_t unhooked;             /* native: 1 while an unwind has the original address back in
                                     the frame's slot (unwind.c U1..U2) */
    uint8_t gone;                 /* native: ended under a frame of another stack, which is still
                                     alive: a tombstone, dropped once it is on top */
    bpt__frame_session sess[BPT_FRAME_SESSIONS];
};

/* What one hit gathers for its frame while it walks the sessions. */
struct bpt__hit {
    bpt__thread *rec;
    bpt_func *f;
    const void *frame;            /* VM frame, or the stub's bpt__regs */
    int no_frame;                 /* the site keeps no return frame (a VM hit with no token) */
    uint32_t nwant;
    unsigned wanted;              /* every want[i].actions or'ed: what any of them asked for */
    bpt__frame_session want[BPT_FRAME_SESSIONS];
    bpt__session *want_s[BPT_FRAME_SESSIONS];   /* for counting a skipped frame */
};

BPT__HOT void bpt__hit_want_frame(bpt__hit *h, bpt__session *s, unsigned actions, uint8_t rettype);
BPT__HOT int bpt__hit_frame_room(const bpt__hit *h, const bpt__session *s);
BPT__HOT int bpt__breakpoint(bpt__hit *h);   /* hit.c: the hit path; 1: pinned, push h's frame, then unpin */
BPT__PRIVATE int bpt__frame_filling(const bpt__thread *rec, int stack, uint32_t d);   /* being pushed [H1] */
/* A frame of the stack the thread runs on now, not ended (native frames of
   other fibers, and tombstones, are not; every VM frame is). */
BPT__PRIVATE int bpt__frame_mine(const bpt__thread *rec, int stack, const bpt__frame *fr);
/* Pause (0) or resume (1) the call_time of the frames the thread times now:
   a fiber switch (fibers.c), as a process switch. */
BPT__PRIVATE void bpt__frames_fiber_timem(bpt__thread *rec, int resume);
BPT__PRIVATE void bpt__vm_frame_push(bpt__hit *h, bpt_vm_token *token);
/* fork's child: the forking thread's frames of process `from` (its id in
   the parent) run on in process `to` (its id in the child), and those
   timed by the thread's CPU clock by the child's. */
BPT__PRIVATE void bpt__frames_atfork_child(bpt__thread *rec, uint64_t from, uint64_t to);
#if defined(BPT_NATIVE)
BPT__PRIVATE uintptr_t bpt__native_caller(const bpt__hit *h);
BPT__PRIVATE void bpt__native_settle(bpt__hit *h);
/* Frames at or below sp (on the same stack) get exception_from cls
   ("unwind" or "throw") and are popped; tail: sp's own frame is shared by
   a tail call, alive. Pinned. */
BPT__PRIVATE int bpt__native_settle_dead(bpt__thread *rec, uintptr_t sp, int tail, const char *cls);
BPT__PRIVATE void bpt__native_frame_push(bpt__hit *h);
/* The short paths' F0 check and F1 (CALL_RETURN, TIME: site_native.c). */
BPT__HOT BPT__INTREGS int bpt__native_frames_settled(const bpt__thread *rec, uintptr_t sp);
BPT__HOT BPT__INTREGS int bpt__native_frame_plain_ok(const bpt__thread *rec, const bpt_func *f, const uintptr_t *slot);
BPT__HOT BPT__INTREGS void bpt__native_frame_push_plain(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                        unsigned actions, uint8_t rettype, uintptr_t sp,
                                                        uintptr_t *slot, bpt__frame_session *caller, uint64_t now);
/* The time path's caller check (frames.c: 0: only the walk can tell). */
BPT__HOT BPT__INTREGS int bpt__timem_caller_at(bpt__thread *rec, uint32_t d, uint64_t id, uint64_t process,
                                               bpt__frame_session **caller);
/* The thread's sigaltstack [*lo, *hi) (empty: none); 1 when it runs on it
   now, at sp. bpt__altstack_note remembers an armed one (frames.c). */
BPT__PRIVATE int bpt__altstack_bounds(bpt__thread *rec, uintptr_t sp, uintptr_t *lo, uintptr_t *hi);
BPT__PRIVATE void bpt__altstack_note(bpt__thread *rec);
/* Called by the return trampolines' assembly by name: not static. */
BPT__ASM_CALLED uintptr_t bpt__native_return(uintptr_t sp, bpt__retregs *r);
#endif
/*** End of frames.h ***/

/*** Begin file sites.h ***/
/* sites.h: what other parts use of sites, where the instruction word
   lives: the architecture interface each site_<arch>.c defines, the
   VM site writer (site_vm.c), and the batched, checked writer of code and
   its entry from the stubs (site_native.c). */

/* The pages one batch of code writes touches (native sites only; empty
   otherwise). Text pages are made read+write+execute for the writes (not
   read+write: other threads keep executing on them) and read+execute again
   afterwards, each page once per batch however many sites it holds. A
   BTI-guarded page (aarch64) keeps PROT_BTI in both: its entry's low bit
   says so (BPT__PAGE_GUARDED, site_native.c). */
typedef struct bpt__code_batch {
    uintptr_t *pages;
    int n, cap;
} bpt__code_batch;
/* The pages of the pointer slots one batch writes whose mapping is not
   writable (a GOT under full RELRO, a table in .rodata): each made
   writable once for the batch and given back its own protection after. */
typedef struct bpt__slot_pages {
    uintptr_t *pages;
    unsigned *prot;               /* each page's protection outside the batch */
    int n, cap;
} bpt__slot_pages;
/* The protocol's batch, prepared at step 2 with room for every site of
   the change, so that the writes allocate nothing. */
typedef struct bpt__sites_batch {
    bpt__code_batch code;
    bpt__slot_pages data;
} bpt__sites_batch;

BPT__PRIVATE void bpt__site_vm_write(bpt_func *f, uint64_t w);
BPT__PRIVATE int bpt__site_vm_check(const bpt_vm_word *word, bpt_vm_word bp_word);
BPT__PRIVATE int bpt__sites_batch_prepare(bpt__sites_batch *sb, bpt_func **fs, int n, int code, int slots,
                                          int switch_off);
/* How many items on the set path's passes ask for the lines of
   (>>working set in bp.c, >>prefetch in port.h). */
enum { BPT__SET_AHEAD = 8 };
BPT__PRIVATE void bpt__sites_batch_free(bpt__sites_batch *sb);
/* While a thread runs bptrace's own code, its calls through traced slots
   are not traced (>>own calls, site_native.c). */
BPT__PRIVATE void bpt__own_enter(void);
BPT__PRIVATE void bpt__own_leave(void);
BPT__PRIVATE int bpt__sites_write(bpt_func **fs, int n, int install, int *wrote_code,
                                  bpt__sites_batch *sb, int *written);

/* A native entry's stub reads the record's path_hint (breakpoint.h) and
   tries the short path it names, with the integer registers alone
   (site_native.c); the set path writes it (bp.c) in every build. */
#define BPT__HINT_FULL 0       /* none: the full path at once */
#define BPT__HINT_COUNT 1      /* the count path (COUNT, NONE) */
#define BPT__HINT_CALL 2       /* the call path (CALL_PLAIN, NONE) */
#define BPT__HINT_CALL_RETURN 3   /* the call-return path (CALL_RETURN, NONE) */
#define BPT__HINT_TIME 4       /* the time path (TIME, NONE) */

#if defined(BPT_NATIVE)
#  if defined(__x86_64__)
#    define BPT__PAD_BYTES 24      /* fn-24: the stub's address, the record, call/jmp/jmp */
extern __attribute__((visibility("hidden"))) char bpt__x86_64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__x86_64_return_trampoline)
#    define BPT__TRAMP_ENTRY (-10)   /* straight to the padding's call: no jump to take first */
/* The call path's return slot (site_native.c): the one the call pushed,
   at the entry sp (bpt__arch_ret_slot's, from the stack pointer alone). */
#    define BPT__ARCH_SHORT_RET_SLOT(args, sp) ((void)(args), (uintptr_t *)(sp))
#  else
#    define BPT__PAD_BYTES 32      /* fn-32: the record, the stub's address, mov/ldr/blr/b */
extern __attribute__((visibility("hidden"))) char bpt__aarch64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__aarch64_return_trampoline)
#    define BPT__TRAMP_ENTRY 0        /* bti c: a landing pad for the PLT's br x17 */
/* The call path's return slot (site_native.c): x9 in the stub's frame,
   which args is (bpt__arch_ret_slot's). */
#    define BPT__ARCH_SHORT_RET_SLOT(args, sp) ((void)(sp), (uintptr_t *)&(args)[9])
#  endif

/* What registration writes and what the protocol switches, for one entry. */
typedef struct bpt__entry_layout {
    uint8_t *site;
    uint64_t orig_word, bp_word;
    unsigned word_size;
    int signs_lr;                  /* aarch64: paciasp before the site */
    uint8_t pre[BPT__PAD_BYTES];   /* the padding's new content */
} bpt__entry_layout;

/* The architecture interface (site_x86_64.c, site_aarch64.c). */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r);   /* the traced function's return address */
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r);   /* the stack pointer at its entry */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret);
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp);
/* Where a return-traced function keeps the trampoline's address once its
   body runs: [*lo, *hi), given its entry sp and the lowest address its own
   frame can reach (a deeper frame's entry sp, or the current sp). */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi);
BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l);
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f);   /* the record into the padding */
BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn);     /* and back */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word);
BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len);
BPT__PRIVATE void bpt__arch_prefetch_setup(void);            /* once, before bpt__arch_prefetch_w's first use */
BPT__PRIVATE void bpt__arch_prefetch_w(const void *p);       /* >>prefetch in port.h: p's line, for writing */
BPT__PRIVATE int bpt__arch_native_usable(const char *who);

BPT__PRIVATE int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who);

/* Step 2 of a change that writes slots: their protections now (slots.c).
   BPT__SLOT_UNMAPPED in page_prot: a switch-off found the slot's page gone,
   and writes nothing there. */
#define BPT__SLOT_UNMAPPED 0x80000000u
BPT__PRIVATE int bpt__slots_prot_refresh(bpt_func **fs, int n, int switch_off);

/* A pointer slot's trampoline (slots.c): a block of BPT__TRAMP_BYTES,
   aligned to them, laid out as a BPT_TRACEABLE function whose entry word
   always holds the breakpoint, followed by a jump to the slot's original
   target. bpt__arch_tramp_init fills a fresh, writable block with the
   padding's NOPs, the entry NOP and that jump, and returns the function's
   address, for bpt__arch_entry_layout; the slot then points at
   fn + BPT__TRAMP_ENTRY. */
#define BPT__TRAMP_BYTES 64
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target);
/* Called by the entry stubs' assembly by name: not static. A short
   path's result is a number, which the stubs compare: */
#define BPT__PATH_FULL 0       /* nothing done: the full path must run */
#define BPT__PATH_DONE 1       /* done */
#define BPT__PATH_DONE_WAKE 2  /* done; a thread-progress waiter sleeps: wake it, every register saved */
#define BPT__STR_(x) #x
#define BPT__STR(x) BPT__STR_(x)
BPT__ASM_CALLED BPT__INTREGS BPT__KEEPS_REGS BPT__LINE_ALIGNED int bpt__native_count_path(bpt_func *f);
/* args: the integer argument registers, in order (x86-64: rdi rsi rdx rcx
   r8 r9; aarch64: x0-x7), as the stub saved them; sp: the function's
   stack pointer at entry (bpt__arch_entry_sp). An ordinary function
   otherwise: the stub saves what it may clobber. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_path(bpt_func *f, uint64_t *args, uintptr_t sp);
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_return_path(bpt_func *f, uint64_t *args,
                                                                                 uintptr_t sp);
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_time_path(bpt_func *f, uint64_t *args, uintptr_t sp);
BPT__ASM_CALLED void bpt__native_entry(bpt_func *f, bpt__regs *regs, int counted);
#endif
/*** End of sites.h ***/

/*** Begin file interpose.h ***/
/* interpose.h: functions of the C and C++ runtimes that bptrace defines in
   the program in place of theirs (interposition), to see a control-flow
   switch that moves return addresses or stacks under the shadow frames: a
   throw (unwind.c) and a ucontext switch (fibers.c). Each definition does
   its part, then calls the runtime's, found after bptrace's in the
   dynamic linker's search order (interpose.c).
   With BPT_NO_INTERPOSE (for a fully static program, where dlsym has
   nothing to find) none is defined: a throw through a return frame then calls std::terminate, and
   fibers that switch stacks must not use return frames. tcc has no native
   sites, so nothing to keep right: none either. */

#if defined(BPT_NATIVE) && !defined(BPT_NO_INTERPOSE)
#  define BPT__INTERPOSE 1
/* A definition in C that stands in for the runtime's: its assembler name
   is the runtime's (an asm label on the declaration, so that the runtime's
   own declaration, which the user's file may include, does not conflict),
   exported even under -fvisibility=hidden, with C linkage, and without a
   patchable entry even in a program built whole with the flags (module
   registration would name it as the runtime's function: tracing it would
   trace bptrace). Strong: a sanitizer runtime linked into the program
   (clang's ASAN) defines its interceptors weak, and this one must win
   over them, as over the C library's. The unwinder's are weak assembly
   stubs instead (unwind.c). */
#  define BPT__INTERPOSED_ATTRS __attribute__((used, visibility("default"), patchable_function_entry(0, 0)))
#  if defined(__cplusplus)
#    define BPT__INTERPOSED extern "C" BPT__INTERPOSED_ATTRS
#  else
#    define BPT__INTERPOSED BPT__INTERPOSED_ATTRS
#  endif
/* The runtime's definition of name (the next after bptrace's), found once
   and kept in *cache. Never NULL: without one (a static binary) there is
   nothing to forward to, and it aborts with a message saying so. */
BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name);
#endif
/*** End of interpose.h ***/

/*** Begin file registry.h ***/
/* registry.h: what other parts use of the registered functions: the
   registry (funcs.c) and the pointer sets it keeps (ptrset.c), the
   address index that names code addresses (symbols.c), interned names
   (intern.c) and the module scanner that finds patchable entries
   (module.c). Everything here is set path, under the code modification
   permission, except bpt__symbolize (pinned readers) and the interned
   names' pointers (read anywhere). */

/* A set of pointers (ptrset.c). */
typedef struct bpt__ptrset {
    const void **keys;
    size_t cap, len;              /* cap is 0 or a power of two */
} bpt__ptrset;

BPT__PRIVATE int bpt__ptrset_has(const bpt__ptrset *set, const void *p);
BPT__PRIVATE int bpt__ptrset_reserve(bpt__ptrset *set, size_t extra);   /* 0 or BPT_ENOMEM */
BPT__PRIVATE void bpt__ptrset_add(bpt__ptrset *set, const void *p);     /* after reserve */
BPT__PRIVATE void bpt__ptrset_remove(bpt__ptrset *set, const void *p);

/* Blocks of one size that the set path frees and allocates again at every
   change (ptrset.c, >>recycle): GenericBps and BpCounts. */
typedef struct bpt__recycle {
    void *head;                   /* the free blocks, linked through their first word */
    size_t size;                  /* bytes of each block */
} bpt__recycle;

BPT__PRIVATE void *bpt__recycle_take(bpt__recycle *r);           /* NULL: out of memory */
BPT__PRIVATE void bpt__recycle_give(bpt__recycle *r, void *p);   /* p may be NULL */

/* What a pattern matches of a registered function: its names and arity,
   copied from its record (>>match in funcs.c). */
typedef struct bpt__reg_key {
    const char *module, *name;    /* interned, as the record's */
    int arity;
} bpt__reg_key;

/* Every registered function (funcs.c). */
struct bpt__registry {
    bpt_func **funcs;             /* the registered functions, in registration order */
    bpt__reg_key *keys;           /* keys[i]: funcs[i]'s names and arity (>>match in funcs.c) */
    uint32_t len, cap;
    bpt__ptrset records;          /* bpt_func pointers */
    bpt__ptrset sites;            /* site addresses */
};
BPT__DATA(struct bpt__registry, bpt__registry);   /* funcs.c */

BPT__PRIVATE bpt__op bpt__pattern_op(unsigned flags, bpt__ms *ms);   /* a pattern's flags as a protocol op */

/* Registration's steps (funcs.c), which slots.c shares; under the
   permission. Reserve room, make a record, make it known (cannot fail
   after the reserve), apply the patterns in force. */
BPT__PRIVATE int bpt__registry_reserve(uint32_t extra);   /* 0 or BPT_ENOMEM */
BPT__PRIVATE int bpt__register_args_check(const char *who, const char *what, const void *site, const char *module,
                                          const char *name, int arity, bpt_func **out);
BPT__PRIVATE int bpt__func_new(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, const char *who, bpt_func **out);
BPT__PRIVATE void bpt__func_free(bpt_func *f);   /* a record of bpt__func_new's */
BPT__PRIVATE void bpt__registry_add(bpt_func *f, const void *site_key);
BPT__PRIVATE int bpt__registry_match(const bpt__mfa *mfa, bpt_func **fs);   /* how many, into fs */
BPT__PRIVATE const void *bpt__site_key(const bpt_func *f);
BPT__PRIVATE int bpt__apply_patterns(bpt_func *f, uint64_t *t);
#if defined(BPT_NATIVE)
BPT__PRIVATE void bpt__native_discard(bpt_func *f);   /* undo a record a failed registration made */
BPT__PRIVATE bpt_func *bpt__retired_take(const void *fn, const void *slot, uint64_t target);
BPT__PRIVATE int bpt__func_renew(bpt_func *f, const char *module, const char *name, int arity, const void *addr,
                                 const char *who);
#endif

#if defined(BPT_NATIVE)
/* The address index of the native functions (symbols.c). */
typedef struct bpt__addr_index bpt__addr_index;
BPT__PRIVATE const bpt_func *bpt__symbolize(uintptr_t addr);
BPT__PRIVATE bpt__addr_index *bpt__addr_index_alloc(size_t n, const char *who);
BPT__PRIVATE void bpt__addr_index_publish(bpt__addr_index *ix, bpt_func *const *funcs, uint32_t nfuncs);
BPT__PRIVATE uint32_t bpt__native_count(void);   /* funcs.c: how many the index must hold */
#endif

/* Keyed hashes of the readers' tables (intern.c): the writers' tracks
   (format.c) and a trace file's lanes (tracefile.c), whose keys come from
   a file or a host: a key per table, so that no input can pick keys that
   all collide. */
BPT__PRIVATE uint64_t bpt__hash_seed(const void *table);   /* the table's address and the clock */
BPT__PRIVATE uint64_t bpt__hash_u64(uint64_t x, uint64_t seed);   /* splitmix64's finalizer */

/* Interned names (intern.c): copied once, kept for the life of the process. */
BPT__PRIVATE const char *bpt__intern(const char *text);   /* NULL when out of memory */

/* The module scanner (module.c). */
/* Called once per patchable entry of the module, in address order: fn is the
   function's entry address (padding start + pad_bytes), name is valid only
   during the call. Return 0 to continue, a negative BPT_E* to stop
   (propagated). */
typedef int (*bpt__module_visit_fn)(void *fn, const char *name, uint64_t size, void *user);
BPT__PRIVATE int bpt__module_scan(const char *module, size_t pad_bytes, const char **module_name,
                                  bpt__module_visit_fn visit, void *user);
/* Called once per import slot of the module (bpt__module_imports): slot,
   the symbol's name (valid during the call), and target, the function the
   slot calls (resolved first where the dynamic linker has not bound the
   slot yet: then unbound is what the slot held, the address of its PLT
   code, and 0 otherwise). Return 1 when it took the slot, 0 when it
   passed, or a negative BPT_E* to stop (propagated). */
#if defined(BPT_NATIVE)
/* Is the code at addr on a page the loader guarded with BTI (module.c)? */
BPT__PRIVATE int bpt__module_code_guarded(const void *addr);
typedef int (*bpt__import_visit_fn)(void **slot, const char *name, uintptr_t target, uintptr_t unbound,
                                     void *user);
BPT__PRIVATE int bpt__module_imports(const char *module, const char **module_name,
                                     bpt__import_visit_fn visit, void *user);
#endif
/*** End of registry.h ***/

/*** Begin file progress.c ***/
/* progress.c: thread progress, the epoch mechanism every wait of the protocol uses.
   (ERTS erl_thr_progress.c for managed threads; liburcu urcu-memb for the
   pinned read side of unmanaged ones.)

   Each thread that ever pins owns a thread record. Its state word says where
   the thread is:
       state == 0                   quiescent: holds no reference
       state == (epoch << 16) | n   pinned n deep since the thread read epoch
       state == (epoch << 16) | ONLINE | n
                                    a managed thread online since it last
                                    acknowledged epoch, inside n pins
   (n < 2^15, ONLINE = 1 << 15.) A managed online thread moves the epoch
   forward at each bpt_thread_progress(); its pins only count n, which
   refuses a report made inside a section. So pin and unpin treat both kinds
   of thread alike, with no test of which kind they run on: a managed
   thread's state is never 0 or 1 in its low 16 bits, and only those two
   values start and end a section (the pin's and the unpin's common
   branch; every other value only counts).

   A waiter advances the global epoch to E and waits until every record is
   quiescent or carries an epoch >= E. Such a thread started its current
   section after the waiter's stores, and sees them.

   The barrier pairs (each named where it is used):
   [B1] pin:    store state; light barrier; read breakpoint data
        waiter: advance the epoch (then the pin word); heavy barrier; read states
        Either the waiter sees the pin, or the reader sees every store the
        waiter made before advancing the epoch.
   [B2] unpin:  release-store 0; light barrier; read the futex word
        waiter: set bit 0 of the futex word; heavy barrier; re-read the state
        Either the waiter sees the unpin, or the unpinner sees the waiter
        asleep and wakes it: no lost wake-up.
   [B3] the waiter's acquire load of a state pairs with the release store
        that ended the section (unpin, progress, offline, exit), so all the
        reader's accesses happen before whatever the waiter does next (a free).
   The light barrier is a compiler barrier once membarrier(PRIVATE_EXPEDITED)
   is registered (the heavy barrier then runs a full barrier on every running
   thread); otherwise both sides use a full fence.

   >>pin word. A pin does not read the epoch itself: it reads pin_word,
   the state it stores made ready (epoch << 16 | 1), with BPT__PIN_FENCE
   (bit 63) set while pins must fence, so that one load and one test
   replace a shift, an or, and a load and test of light_pins. Init clears
   the flag once membarrier is registered; each waiter stores the new word
   after it advanced the epoch, with a release that pairs with the pin's
   acquire load. A pin that reads the word before that store records the
   old epoch, and the waiter waits for its section to end, as for any pin
   that came before the advance: later, never earlier. Bit 63 is epoch bit
   47 in a state: past 2^47 waits (4.5 years of waits back to back at one
   a microsecond) every pin would fence and record an older epoch than the
   waiter's: slower, never unsafe.

   The unpin's side of the same flag is BPT__FUTEX_FENCE in the futex
   word, set from the start and cleared by init once membarrier is
   registered: the unpin's one look at the futex word [B2] then also says
   whether it must fence first. While the flag is set that look is never
   0, so the unpin fences and looks again; the waiters and the wake keep
   the flag as they set and clear bit 0. */

#define BPT__WAIT_SPINS 200

BPT__ASM_READ_DECL(struct bpt__progress_state bpt__progress)
BPT__ASM_READ struct bpt__progress_state bpt__progress = {   /* read by the count route too */
    1, (uint64_t)1 << BPT__NEST_BITS | 1 | BPT__PIN_FENCE, BPT__FUTEX_FENCE, NULL, 0, 0, 0,
    PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0
};

static pthread_once_t bpt__progress_once = PTHREAD_ONCE_INIT;

#if !defined(BPT__TLS_BY_KEY)
BPT__ASM_READ_DECL(BPT__THREAD_LOCAL bpt__thread *bpt__tls_thread)
BPT__ASM_READ BPT__THREAD_LOCAL bpt__thread *bpt__tls_thread;   /* read by the count route too */
#endif

BPT__HOT BPT__INTREGS bpt__thread *bpt__thread_self_or_null(void) {
#if defined(BPT__TLS_BY_KEY)
    return (bpt__thread *)pthread_getspecific(bpt__progress.key);
#else
    return bpt__tls_thread;
#endif
}

/* The list of records, for readers of every thread's data (kind_count.c):
   push-only, each record complete before it is published. */
BPT__PRIVATE bpt__thread *bpt__thread_records(void) {
    return (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records);
}

/* The light side of the asymmetric barrier pairs [B1] [B2] is inline in
   the pin and the unpin: a compiler barrier once membarrier is registered,
   a fence otherwise, chosen by a flag the pin and the unpin load anyway
   (>>pin word).
   The heavy side [B1] [B2]: after it, every thread's earlier stores are
   visible to us and our earlier stores to every thread. */
BPT__PRIVATE void bpt__heavy_barrier(void) {
    bpt__fence_seq_cst();
    if (bpt__load_relaxed_u32(&bpt__progress.light_pins))
        bpt__membarrier(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* Take a retired record, or make a new one. Records are never freed: a
   waiter may be walking the list at any time. */
static bpt__thread *bpt__thread_create(void) {
    bpt__thread *rec;
    void *raw;
    size_t size;
    bpt__progress_ensure_init();
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (bpt__load_relaxed_u32(&rec->in_use) == 0 && bpt__cas_u32(&rec->in_use, 0, 1))
            break;   /* acquire: sees everything the previous owner did */
    }
    if (!rec) {
        /* A whole number of cache lines, cache-line aligned: no false sharing
           between one thread's pins and another's. */
        size = (sizeof(bpt__thread) + BPT__CACHE_LINE - 1) & ~(size_t)(BPT__CACHE_LINE - 1);
        raw = BPT_HIT_MAP(size + BPT__CACHE_LINE);   /* a first pin may be a hit's: no malloc */
        if (!raw) return NULL;
        rec = (bpt__thread *)(((uintptr_t)raw + BPT__CACHE_LINE) & ~(uintptr_t)(BPT__CACHE_LINE - 1));
        memset(rec, 0, sizeof *rec);
        bpt__store_relaxed_u32(&rec->in_use, 1);
        rec->index = bpt__fetch_add_u32(&bpt__progress.nrecords, 1);
        do {   /* push: next is written before the release CAS publishes rec */
            rec->next = (bpt__thread *)bpt__load_relaxed_ptr(&bpt__progress.records);
        } while (!bpt__cas_ptr(&bpt__progress.records, rec->next, rec));
    }
    rec->tid = bpt__gettid();
    rec->self = pthread_self();
    rec->managed = rec->in_tracer = rec->holds_permission = 0;
    rec->sending = 0;   /* its owner may have died inside a send: a fork child's other threads */
    rec->process = rec->tid;
    rec->shadow_depth[0] = 0;   /* a dead owner's frames mean nothing */
    rec->shadow_depth[1] = 0;
    rec->shadow_filling[0] = 0;
    rec->shadow_filling[1] = 0;
    rec->alt_lo = rec->alt_hi = 0;
#if defined(BPT_NATIVE)
    bpt__altstack_note(rec);   /* before a handler disarms it (frames.c) */
#endif
    rec->timem_depth = 0;
    rec->timem_walking = 0;
#if !defined(BPT__SIGNAL_ATOMIC_INC)
    rec->counting = 0;
#endif
    rec->errmsg[0] = '\0';
    bpt__store_relaxed_u64(&rec->state, 0);
#if !defined(BPT__TLS_BY_KEY)
    bpt__tls_thread = rec;
#endif
    pthread_setspecific(bpt__progress.key, rec);   /* arms the exit destructor */
    return rec;
}

/* The calling thread's record, created on first use; NULL only if memory ran out. */
BPT__PRIVATE bpt__thread *bpt__thread_self(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return BPT__LIKELY(rec != NULL) ? rec : bpt__thread_create();
}

/* End a section: publish the new state [B3]. Returns nonzero when a waiter
   sleeps on the futex: the caller then wakes it (bpt__progress_wake). The
   wake, a system call, is left to the caller so that the count path can
   end its section with the integer registers alone (>>intregs in port.h). */
BPT__HOT BPT__INTREGS int bpt__state_store(bpt__thread *rec, uint64_t state) {
    uint32_t futex;
    bpt__store_release_u64(&rec->state, state);          /* [B3] pairs with the waiter's acquire load */
    bpt__compiler_barrier();                             /* [B2] light barrier, if membarrier is registered */
    futex = bpt__load_relaxed_u32(&bpt__progress.futex);
    if (BPT__LIKELY(futex == 0)) return 0;               /* no sleeper, and no fence needed */
    if (futex & BPT__FUTEX_FENCE) {                      /* no membarrier (>>pin word) */
        bpt__fence_seq_cst();                            /* [B2] light barrier: a fence */
        futex = bpt__load_relaxed_u32(&bpt__progress.futex);
    }
    return BPT__UNLIKELY((futex & 1) != 0);
}

/* The futex word with no sleeper: 0, or the fence flag (>>pin word). */
static uint32_t bpt__futex_idle(void) {
    return bpt__load_relaxed_u32(&bpt__progress.futex) & BPT__FUTEX_FENCE;
}

/* Wake the waiters that sleep until some section ends [B2]. */
BPT__NOINLINE void bpt__progress_wake(void) {
    bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
    bpt__fetch_add_u64(&bpt__progress.futex_wakes, 1);
    bpt__futex_wake(&bpt__progress.futex, INT_MAX);
}

BPT__PRIVATE void bpt__state_store_and_wake(bpt__thread *rec, uint64_t state) {
    if (bpt__state_store(rec, state)) bpt__progress_wake();
}

/* The read side, on a thread that has its record. One load of the thread's
   own state and one store: a signal handler that pins in between restores
   the state before the interrupted code resumes, so the store never loses
   a nesting level. */
BPT__HOT BPT__INTREGS void bpt__pin_rec(bpt__thread *rec) {
    uint64_t s = bpt__load_relaxed_u64(&rec->state);
    if (BPT__LIKELY((s & BPT__NEST_MASK) == 0)) {   /* quiescent: the section starts here */
        /* The acquire pairs with the waiter's release of the pin word
           (>>pin word): a section that reads the new epoch in it sees the
           waiter's earlier stores. */
        s = bpt__load_acquire_u64(&bpt__progress.pin_word);
        if (BPT__LIKELY(!(s & BPT__PIN_FENCE))) {
            bpt__store_relaxed_u64(&rec->state, s);
            bpt__compiler_barrier();           /* [B1] light barrier: membarrier is registered */
        } else {
            bpt__store_relaxed_u64(&rec->state, s & ~BPT__PIN_FENCE);
            bpt__fence_seq_cst();              /* [B1] light barrier: no membarrier */
        }
    } else {   /* nested, or a managed online thread: its reports cover it */
        if (BPT__UNLIKELY((s & BPT__PINS) == BPT__PINS)) BPT__TRAP();   /* one more would carry into ONLINE */
        bpt__store_relaxed_u64(&rec->state, s + 1);
    }
}

/* The same, making the thread's record on its first pin. */
BPT__HOT bpt__thread *bpt__pin(void) {
    bpt__thread *rec = bpt__thread_self();
    if (rec) bpt__pin_rec(rec);
    return rec;
}

/* Unpin without the wake: nonzero when the caller must call
   bpt__progress_wake (see bpt__state_store). */
BPT__HOT BPT__INTREGS int bpt__unpin_quiet(bpt__thread *rec) {
    uint64_t s = bpt__load_relaxed_u64(&rec->state);
    if (BPT__LIKELY((s & BPT__NEST_MASK) == 1))   /* the end of an unmanaged thread's section */
        return bpt__state_store(rec, 0);
    if (s & BPT__PINS)
        bpt__store_relaxed_u64(&rec->state, s - 1);
    /* else no pin is open: an unbalanced unpin, ignored, never a crash */
    return 0;
}

BPT__HOT void bpt__unpin(bpt__thread *rec) {
    if (rec && BPT__UNLIKELY(bpt__unpin_quiet(rec))) bpt__progress_wake();
}

BPT__PRIVATE int bpt__thread_pinned(const bpt__thread *rec) {
    return rec && (bpt__load_relaxed_u64((bpt__atomic_u64 *)&rec->state) & BPT__PINS) != 0;
}

/* The owner's view: is it a managed thread, online? */
static int bpt__online(const bpt__thread *rec) {
    return (bpt__load_relaxed_u64((bpt__atomic_u64 *)&rec->state) & BPT__ONLINE) != 0;
}

/* A managed online thread about to block inside bptrace (on the
   permission, or on another waiter) goes offline first, as ERTS threads do
   in erts_thr_progress_prepare_wait: otherwise a waiter holding what it
   blocks on would wait for its next bpt_thread_progress() forever.
   bpt__block_end brings it back online. */
BPT__PRIVATE void bpt__block_begin(bpt__thread *rec) {
    if (rec && bpt__online(rec) && !rec->offline_to_block) {
        bpt_thread_progress_offline();
        rec->offline_to_block = 1;
    }
}

BPT__PRIVATE void bpt__block_end(bpt__thread *rec) {
    if (rec && rec->offline_to_block) {
        rec->offline_to_block = 0;
        bpt_thread_progress_online();
    }
}

/* How many thread records exist: every index is below it (acquire: a
   record's index is published with the record). */
BPT__PRIVATE uint32_t bpt__threads_count(void) {
    return bpt__load_acquire_u32(&bpt__progress.nrecords);
}

void bpt_thread_progress_pin(void) { (void)bpt__pin(); }

void bpt_thread_progress_unpin(void) { bpt__unpin(bpt__thread_self_or_null()); }

static void bpt__thread_exit_destructor(void *arg) {
    bpt__thread *rec = (bpt__thread *)arg;
    rec->managed = 0;
    /* Quiescent from now on, even if it exited pinned: it will never touch
       breakpoint data again. */
    bpt__state_store_and_wake(rec, 0);
#if !defined(BPT__TLS_BY_KEY)
    bpt__tls_thread = NULL;
#endif
    bpt__store_release_u32(&rec->in_use, 0);   /* pairs with the CAS that reuses it */
}

/* After fork() only the forking thread exists in the child: retire every
   other record, or the child's first wait would wait for ghosts. Called by
   the fork child handler (locks.c), with every lock of bptrace held. */
BPT__PRIVATE void bpt__progress_atfork_child(bpt__thread *self) {
    bpt__thread *rec;
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (rec == self) continue;
        bpt__store_relaxed_u64(&rec->state, 0);
        bpt__store_relaxed_u32(&rec->in_use, 0);
    }
    /* The forking thread has a new id in the child, and so has its process
       unless the host named another (bpt_process_switch), and so have the
       frames it pushed in that process, which run on in the child. */
    if (self) {
        uint32_t parent_tid = self->tid;
        self->tid = bpt__gettid();
        if (self->process == parent_tid) self->process = self->tid;
        bpt__frames_atfork_child(self, parent_tid, self->tid);
    }
    bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
    pthread_mutex_init(&bpt__progress.wait_lock, NULL);
}

/* A record no longer holds a waiter for epoch `target` back. */
BPT__PRIVATE int bpt__state_done(uint64_t s, uint64_t target) {
    return s == 0 || (s >> BPT__NEST_BITS) >= target;
}

static void bpt__wait_for_record(bpt__thread *rec, uint64_t target) {
    int spins = 0;
    while (!bpt__state_done(bpt__load_acquire_u64(&rec->state), target)) {   /* [B3] */
        if (++spins < BPT__WAIT_SPINS) {
            bpt__cpu_relax();
            continue;
        }
        BPT_TEST_POINT("progress wait: about to announce a sleep");   /* t_progress_withdraw */
        /* Sleep. Announce it, then look again after the heavy barrier [B2]:
           an unpin that came before it is seen here, and one after it sees
           the announcement and wakes us. */
        uint32_t asleep = 1 | bpt__futex_idle();
        bpt__store_seq_cst_u32(&bpt__progress.futex, asleep);
        bpt__heavy_barrier();
        if (bpt__state_done(bpt__load_acquire_u64(&rec->state), target)) break;
        bpt__fetch_add_u64(&bpt__progress.futex_sleeps, 1);
        bpt__futex_wait(&bpt__progress.futex, asleep);
    }
    /* Withdraw a sleep announced and not slept: the second look above found
       the section ended by an unpin that came before the announcement, and
       so woke nobody (or futex_wait returned early). Left standing, the
       announcement made the next end of a section anywhere pay a futex
       wake for nobody, and a short path hand its hit to the full path for
       it. One waiter at a time (wait_lock): nobody else sleeps on the word,
       and the next sleep announces afresh [B2]. */
    if (BPT__UNLIKELY(bpt__load_relaxed_u32(&bpt__progress.futex) & 1))
        bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
}

/* Serialize every thread's instruction stream where membarrier SYNC_CORE is
   missing: a signal to each live thread. Returning from a signal handler is
   context synchronizing (iret on x86-64, eret on aarch64). */
static void bpt__sync_core_handler(int sig) {
    bpt__thread *rec = bpt__thread_self_or_null();
    (void)sig;
    if (rec) bpt__fetch_add_u32(&rec->sync_ack, 1);
}

/* Once per process, on the first use of thread progress. */
static void bpt__progress_init(void) {
    pthread_key_create(&bpt__progress.key, bpt__thread_exit_destructor);
    /* light_pins is set only after registration succeeded: a reader that
       sees it knows every later heavy barrier reaches it. */
    if (bpt__membarrier_register(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                                 BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)) {
        bpt__store_release_u32(&bpt__progress.light_pins, 1);
        /* >>pin word: no fence from here on. No pin has run yet (a pin
           needs a record, made after this), and no wait (it inits first). */
        bpt__store_release_u64(&bpt__progress.pin_word,
                               bpt__load_relaxed_u64(&bpt__progress.pin_word) & ~BPT__PIN_FENCE);
        bpt__store_release_u32(&bpt__progress.futex, 0);
    }
    if (bpt__membarrier_register(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
                                 BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE)) {
        bpt__store_release_u32(&bpt__progress.sync_core, 1);
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = bpt__sync_core_handler;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(BPT__SYNC_CORE_SIGNAL, &sa, NULL);
    }
    bpt__locks_init();   /* the fork handlers (locks.c) */
    bpt__clock_calibrate();   /* before any hit (clock.c) */
}

BPT__PRIVATE void bpt__progress_ensure_init(void) {
    pthread_once(&bpt__progress_once, bpt__progress_init);
}

/* Is the thread running or runnable ('R' in /proc/self/task/TID/stat)? A
   thread that is not (blocked in the kernel: futex, sigwait, I/O) passes
   through the kernel's scheduler before it runs user code again, so it
   cannot run stale instructions; membarrier SYNC_CORE itself targets only
   running threads. Unknown (no /proc) counts as running. */
static int bpt__thread_running(uint32_t tid) {
    char path[64], buf[512], *close_paren;
    ssize_t n;
    int fd;
    snprintf(path, sizeof path, "/proc/self/task/%u/stat", (unsigned)tid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return errno != ENOENT;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 1;
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');   /* the name may hold spaces and ')' */
    return !close_paren || close_paren[1] != ' ' || close_paren[2] == 'R';
}

static void bpt__sync_core_by_signal(bpt__thread *self) {
    bpt__thread *rec, *head = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records);
    /* Signal every live thread first, then collect the acknowledgements: the
       threads run their handlers in parallel, in one scheduling round. */
    for (rec = head; rec; rec = rec->next) {
        rec->sync_expect = ~0u;
        if (rec == self || !bpt__load_acquire_u32(&rec->in_use)) continue;
        rec->sync_expect = bpt__load_acquire_u32(&rec->sync_ack);
        if (pthread_kill(rec->self, BPT__SYNC_CORE_SIGNAL) != 0) rec->sync_expect = ~0u;   /* exited meanwhile */
    }
    for (rec = head; rec; rec = rec->next) {
        int spins = 0;
        if (rec->sync_expect == ~0u) continue;
        /* A thread that blocks the signal (sigwait, a fully masked pause)
           never acknowledges: stop waiting once it is seen not running. */
        while (bpt__load_acquire_u32(&rec->sync_ack) == rec->sync_expect && bpt__load_acquire_u32(&rec->in_use)) {
            if (++spins % 64 == 0 && !bpt__thread_running(rec->tid)) break;
            sched_yield();
        }
    }
}

static int bpt__progress_wait(int sync_core) {
    bpt__thread *self = bpt__thread_self_or_null(), *rec;
    uint64_t target, t0;
    int sync_by_ipi;
    const char *who = sync_core ? "bpt_thread_progress_wait_sync_core" : "bpt_thread_progress_wait";
    if (self && self->in_tracer) return bpt__fail(BPT_EDEADLK, "%s: called from inside a tracer callback", who);
    if (bpt__thread_pinned(self)) return bpt__fail(BPT_EDEADLK, "%s: called while pinned: it would wait for itself", who);
    /* The permission holder may wait (the protocol does); nobody else
       waits for it, since readers never take the permission. */
    bpt__progress_ensure_init();
    bpt__block_begin(self);
    pthread_mutex_lock(&bpt__progress.wait_lock);
    /* The acq_rel increment releases every store made before the wait to a
       managed thread that reads the new epoch (bpt_thread_progress, the
       going offline). Pins read the pin word instead: its release, next,
       pairs with their acquire. */
    target = bpt__fetch_add_u64(&bpt__progress.epoch, 1) + 1;
    /* >>pin word: pins record the new epoch from here on. One waiter at a
       time (wait_lock), so the words are stored in epoch order. */
    bpt__store_release_u64(&bpt__progress.pin_word, target << BPT__NEST_BITS | 1 |
                           (bpt__load_relaxed_u64(&bpt__progress.pin_word) & BPT__PIN_FENCE));
    t0 = bpt__now_ns();
    BPT_PROBE(bptrace, progress__wait__start, bpt__gettid(), target, sync_core);
    /* [B1] pairs with the pin's light barrier. A wait that serializes the
       instruction streams makes it with membarrier SYNC_CORE, which is also
       the full barrier on every running thread that PRIVATE_EXPEDITED is
       (membarrier(2)): one round of IPIs for [B1] and the serialization
       (a sleep's announcement [B2] makes its own), where a heavy barrier here and
       SYNC_CORE after the records' wait took two, each about 14 us on a
       KVM guest with one other thread running (twice a step 6 or 10 of
       the protocol). Serializing first serializes no less: the code was
       written before the call, and a stream serialized after that fetches
       it anew. Without SYNC_CORE, the signals come after the records'
       wait, as each thread's handler runs when it runs. */
    sync_by_ipi = sync_core && bpt__load_relaxed_u32(&bpt__progress.sync_core);
    if (sync_by_ipi) {
        bpt__fence_seq_cst();
        /* A refused call (ENOMEM for the kernel's CPU mask, a seccomp rule
           added since init) gave neither: [B1] by the heavy barrier, and
           the streams by the signals (found by review). */
        if (bpt__membarrier(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) != 0) {   /* [B1] */
            sync_by_ipi = 0;
            bpt__heavy_barrier();
        }
    } else {
        bpt__heavy_barrier();                   /* [B1] */
    }
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (rec == self) continue;              /* not pinned (checked above) */
        bpt__wait_for_record(rec, target);
    }
    if (sync_core && !sync_by_ipi) bpt__sync_core_by_signal(self);
    bpt__fetch_add_u64(&bpt__progress.waits, 1);
    if (sync_core) bpt__fetch_add_u64(&bpt__progress.sync_core_waits, 1);
    BPT_PROBE(bptrace, progress__wait__done, bpt__gettid(), target, sync_core, bpt__now_ns() - t0);
    pthread_mutex_unlock(&bpt__progress.wait_lock);
    if (self && !self->holds_permission) bpt__block_end(self);   /* the permission holder stays offline until release */
    return 0;
}

int bpt_thread_progress_wait(void) { return bpt__progress_wait(0); }

int bpt_thread_progress_wait_sync_core(void) { return bpt__progress_wait(1); }

int bpt_thread_progress_register_managed(void) {
    bpt__thread *rec = bpt__thread_self();
    if (!rec) return bpt__fail(BPT_ENOMEM, "bpt_thread_progress_register_managed: no memory for the thread record");
    if (bpt__thread_pinned(rec))
        return bpt__fail(BPT_EINVAL, "bpt_thread_progress_register_managed: called while pinned");
    rec->managed = 1;
    bpt_thread_progress_online();
    return 0;
}

void bpt_thread_progress(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* Inside a pinned section (a hit, a tracer callback, a signal handler on
       a hit) the thread still holds breakpoint data: not a quiescent point. */
    if (!rec || (bpt__load_relaxed_u64(&rec->state) & (BPT__ONLINE | BPT__PINS)) != BPT__ONLINE) return;
    /* Quiescent point: every earlier access is released before the new epoch
       is acknowledged [B3]; the acquire of the epoch makes later reads see
       the waiter's stores. */
    bpt__state_store_and_wake(rec, bpt__load_acquire_u64(&bpt__progress.epoch) << BPT__NEST_BITS | BPT__ONLINE);
}

void bpt_thread_progress_offline(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* Online, and not inside a section: see above. */
    if (!rec || (bpt__load_relaxed_u64(&rec->state) & (BPT__ONLINE | BPT__PINS)) != BPT__ONLINE) return;
    bpt__state_store_and_wake(rec, 0);
}

void bpt_thread_progress_online(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* A managed thread, offline and outside any pinned section (a section's
       older epoch must stay in the state until it ends). */
    if (!rec || !rec->managed || bpt__load_relaxed_u64(&rec->state) != 0) return;
    /* As a pin [B1]: the state must be visible before the thread reads any
       breakpoint data. A full fence: going online is rare. */
    bpt__store_relaxed_u64(&rec->state, bpt__load_acquire_u64(&bpt__progress.epoch) << BPT__NEST_BITS | BPT__ONLINE);
    bpt__fence_seq_cst();
}

int bpt_thread_progress_stats(bpt_progress_stats *out) {
    bpt__thread *rec;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_thread_progress_stats: out is NULL");
    bpt__progress_ensure_init();
    memset(out, 0, sizeof *out);
    out->epoch = bpt__load_relaxed_u64(&bpt__progress.epoch);
    out->waits = bpt__load_relaxed_u64(&bpt__progress.waits);
    out->sync_core_waits = bpt__load_relaxed_u64(&bpt__progress.sync_core_waits);
    out->futex_sleeps = bpt__load_relaxed_u64(&bpt__progress.futex_sleeps);
    out->futex_wakes = bpt__load_relaxed_u64(&bpt__progress.futex_wakes);
    out->records = bpt__load_relaxed_u32(&bpt__progress.nrecords);
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next)
        out->threads += bpt__load_relaxed_u32(&rec->in_use);
    out->membarrier = (int)bpt__load_relaxed_u32(&bpt__progress.light_pins);
    out->sync_core = (int)bpt__load_relaxed_u32(&bpt__progress.sync_core);
    return 0;
}

/* >>errors: the message of the calling thread's last failure. */
static const char *bpt__error_text(int code) {
    switch (code) {
#define BPT__ERROR_CASE(name, value, text) case value: return text;
    BPT_ERRORS(BPT__ERROR_CASE)
#undef BPT__ERROR_CASE
    default: return "unknown error";
    }
}

const char *bpt_strerror(int code) { return bpt__error_text(code); }

/* A thread whose record could not be allocated has nowhere to keep its
   message: it gets this fixed one (per thread where __thread exists; on
   tcc, shared, which only ever holds this one text). */
static const char bpt__no_record_msg[] =
    "out of memory: no memory for this thread's record (its first bptrace call); nothing changed";
#if defined(BPT__TLS_BY_KEY)
static const char *volatile bpt__norec_error;
#else
static BPT__THREAD_LOCAL const char *bpt__norec_error;
#endif

const char *bpt_last_error(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return rec ? rec->errmsg : bpt__norec_error ? bpt__norec_error : "";
}

/* Record why a call failed and return its code, so that failure paths read
   `return bpt__fail(BPT_EPATTERN, "...", ...);`. */
BPT__PRIVATE int bpt__fail(int code, const char *fmt, ...) {
    bpt__thread *rec = bpt__thread_self();
    if (rec) {
        va_list ap;
        int n = snprintf(rec->errmsg, sizeof rec->errmsg, "%s: ", bpt__error_text(code));
        if (n < 0 || (size_t)n >= sizeof rec->errmsg) n = 0;
        va_start(ap, fmt);
        vsnprintf(rec->errmsg + n, sizeof rec->errmsg - (size_t)n, fmt, ap);
        va_end(ap);
    } else {
        bpt__norec_error = bpt__no_record_msg;
    }
    return code;
}
/*** End of progress.c ***/

/*** Begin file clock.c ***/
/* clock.c: timestamps. Every event's time (call, return, call_time's own
   time) is read on the hit path, so it must be cheap: the CPU's counter,
   not clock_gettime (23-43 ns a read on a virtual machine, 1-3 reads a
   traced call). The counter's rate is calibrated once against
   CLOCK_MONOTONIC; its offset is not trusted for long:

       ns = anchor_ns + (ticks - anchor_tick) * ns_per_tick

   where (anchor_tick, anchor_ns) is a pair of readings of both clocks taken
   together, at most BPT__ANCHOR_US old in the thread's own stream: every
   lane of a session writes a fresh anchor when it opens a chunk and when its
   last one is older than that (session.c), and the reader converts each
   record with its stream's latest anchor (record.c). Three things follow:
     - the stamps stay on CLOCK_MONOTONIC: the calibration's rate error
       (about 1e-5 from 2 ms of measurement) moves a stamp by at most
       1e-5 x BPT__ANCHOR_US, not by 1e-5 x the process's age;
     - a counter that jumps (a virtual machine restored from a snapshot or
       migrated: the reason a hypervisor's kernel boots with tsc=unstable and
       keeps time with kvm-clock) gives a thread stamps off by at most one
       anchor's span, and only while the jump is less than that span: a
       record more than a span past its anchor, or before it, gets a new one;
     - the counter is used where the CPU says it is invariant, whichever
       clocksource the kernel chose (the kernel's kvm-clock is itself this
       counter, scaled per vCPU): cores whose counters disagree cost a thread
       that migrates between them the disagreement, until its next anchor.
   ns_per_tick is kept as a whole part and a 32-bit fraction, so that the
   conversion needs only 64-bit multiplies (tcc has no 128-bit integer).
   Durations (call_time, the protocol's timings) are differences of two
   readings of one thread, scaled by the rate: no anchor needed.

   The counters:
     x86-64    rdtsc, where CPUID says the TSC is invariant (leaf 0x80000007,
               EDX bit 8: it ticks at one rate in every P- and C-state). Its
               rate is measured against CLOCK_MONOTONIC over 2 ms, once.
     aarch64   CNTVCT_EL0, the generic timer's virtual count, the same on
               every core by the architecture, at CNTFRQ_EL0 Hz.
     otherwise clock_gettime(CLOCK_MONOTONIC) itself (tcc on aarch64 does
               not exist; BPT_NO_CYCLE_CLOCK forces it); its anchors are the
               identity.
   bpt_clock_info says which is in use. */

enum { BPT__CLOCK_GETTIME = 0, BPT__CLOCK_TSC = 1, BPT__CLOCK_CNTVCT = 2 };

static struct {
    bpt__clock_cal cal;           /* set once, before ready */
    bpt__atomic_u32 ready;        /* release-stored after cal [K1] */
    bpt__atomic_u32 on_counter;   /* ready, and the CPU's counter is the clock: the hit
                                     path's one test (release-stored after ready [K1]) */
} bpt__clock;
static pthread_once_t bpt__clock_once = PTHREAD_ONCE_INIT;

static uint64_t bpt__clock_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_TSC
BPT__HOT BPT__INTREGS uint64_t bpt__clock_ticks(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* Is the TSC invariant? (Whether the kernel keeps time with it does not
   matter: the anchors bound what a jump or a disagreement between cores can
   do; the comment at the top says how.) */
static int bpt__clock_counter_usable(void) {
    uint32_t r[4];
    return bpt__cpuid_ext(0x80000007u, r) && (r[3] & (1u << 8)) != 0;   /* EDX bit 8: invariant TSC */
}

static uint64_t bpt__clock_nominal_hz(void) { return 0; }   /* measured (bpt__clock_rate) */
#elif defined(__aarch64__) && !defined(BPT_NO_CYCLE_CLOCK)
#  define BPT__CLOCK_COUNTER BPT__CLOCK_CNTVCT
BPT__HOT BPT__INTREGS uint64_t bpt__clock_ticks(void) {
    uint64_t v;
    /* isb: the read is not taken early, before the code around it. */
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}
static int bpt__clock_counter_usable(void) { return 1; }
static uint64_t bpt__clock_nominal_hz(void) {
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    return hz;
}
#endif

#if defined(BPT__CLOCK_COUNTER)
/* The two clocks read together: the counter on either side of a
   CLOCK_MONOTONIC read, its midpoint taken; the best of `tries` pairs (the
   closest two counter readings), so that a read preempted half-way does
   not count. */
static void bpt__clock_pair(int tries, uint64_t *tick, uint64_t *ns) {
    uint64_t best = ~(uint64_t)0;
    int i;
    *tick = *ns = 0;
    for (i = 0; i < tries; i++) {
        uint64_t a = bpt__clock_ticks(), m = bpt__clock_monotonic(), b = bpt__clock_ticks();
        if (b - a < best) { best = b - a; *tick = a + (b - a) / 2; *ns = m; }
    }
}

/* Ticks per second: the architecture's stated rate, or the counter against
   CLOCK_MONOTONIC over 2 ms, each end the best of 5 pairs. */
static uint64_t bpt__clock_rate(void) {
    uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0, hz = bpt__clock_nominal_hz();
    if (hz) return hz;
    bpt__clock_pair(5, &t0, &n0);
    do bpt__clock_pair(5, &t1, &n1); while (n1 - n0 < 2000000u);
    return (uint64_t)((double)(t1 - t0) * 1e9 / (double)(n1 - n0) + 0.5);
}
#endif

static void bpt__clock_init(void) {
    bpt__clock_cal *c = &bpt__clock.cal;
#if defined(BPT__CLOCK_COUNTER)
    uint64_t hz;
    if (bpt__clock_counter_usable() && (hz = bpt__clock_rate()) != 0) {
        c->hz = hz;
        c->mul_whole = 1000000000u / hz;
        c->mul_frac = (uint64_t)(((double)(1000000000u % hz) / (double)hz) * 4294967296.0);
        bpt__clock_pair(5, &c->tick0, &c->ns0);
        c->source = BPT__CLOCK_COUNTER;
    } else
#endif
    {   /* the ticks are CLOCK_MONOTONIC's ns: the conversion is the identity */
        c->hz = 1000000000u;
        c->mul_whole = 1;
        c->source = BPT__CLOCK_GETTIME;
    }
    bpt__store_release_u32(&bpt__clock.ready, 1);   /* [K1] */
#if defined(BPT__CLOCK_COUNTER)
    if (c->source == BPT__CLOCK_COUNTER) bpt__store_release_u32(&bpt__clock.on_counter, 1);   /* [K1] */
#endif
}

/* Calibrate, once per process. Thread progress's initialisation calls it,
   before any hit can happen (a hit pins first), so that a signal handler's
   hit never runs pthread_once. */
BPT__PRIVATE void bpt__clock_calibrate(void) {
    pthread_once(&bpt__clock_once, bpt__clock_init);
}

/* The counter: what a record keeps. One instruction where the CPU's
   counter is usable; no conversion. */
BPT__HOT uint64_t bpt__now_ticks(void) {
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter))) return bpt__clock_ticks();   /* [K1] */
#endif
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_ticks();
#endif
    return bpt__clock_monotonic();
}

/* The counter for a path that keeps to the integer registers and makes
   no call (>>intregs in port.h; the call path, site_native.c): 1 and the
   reading in *ticks where the CPU's counter is the clock, else 0 and 0 in
   *ticks, nothing read (the full path reads clock_gettime). */
BPT__HOT BPT__INTREGS int bpt__now_ticks_counter(uint64_t *ticks) {
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter))) {   /* [K1] */
        *ticks = bpt__clock_ticks();
        return 1;
    }
#endif
    *ticks = 0;   /* set on every path: gcc -Og cannot tell that callers read it only after a 1 */
    return 0;
}

/* d ticks in ns with calibration c: three 64-bit multiplies (no 128-bit
   integer: tcc has none). */
BPT__HOT BPT__INTREGS uint64_t bpt__clock_scale(const bpt__clock_cal *c, uint64_t d) {
    uint64_t lo = d & 0xffffffffu, hi = d >> 32;
    return d * c->mul_whole + hi * c->mul_frac + ((lo * c->mul_frac) >> 32);
}

/* Ticks to ns from the calibration's own pair: for durations and for
   stamps that need no anchor. A reading a few cycles before the
   calibration's, on another core, counts as the calibration's instant. */
BPT__PRIVATE uint64_t bpt__clock_cal_ns(const bpt__clock_cal *c, uint64_t ticks) {
    uint64_t d = ticks - c->tick0;
    return c->ns0 + ((int64_t)d < 0 ? 0 : bpt__clock_scale(c, d));
}

/* A span of d ticks of the counter (bpt__now_ticks) in ns: call_time's
   frames keep their start in ticks and convert each span they run once
   (frames.c). With clock_gettime the ticks are ns and this is the
   identity. A negative span (d above 2^63: a reading taken before the
   start it is measured from, as when a signal handler restarted a frame
   after its thread read the clock, or a core's counter a few cycles
   behind another's) is 0: converted, it would be a huge span, where the
   ns difference it replaces wrapped back harmlessly. Integer registers,
   no call (the time path, site_native.c). The calibration is complete:
   d is the difference of two readings of bpt__now_ticks, which
   calibrates first [K1]. */
BPT__HOT BPT__INTREGS uint64_t bpt__ticks_ns(uint64_t d) {
    return (int64_t)d < 0 ? 0 : bpt__clock_scale(&bpt__clock.cal, d);
}

/* Ticks to ns from an anchor: the pair (anchor_tick, anchor_ns) read
   together, before or after `ticks` (a lane writes its anchor just ahead
   of the record that found it stale, so that record's reading is a little
   earlier than the anchor's). */
BPT__PRIVATE uint64_t bpt__clock_anchored_ns(const bpt__clock_cal *c, uint64_t anchor_tick, uint64_t anchor_ns,
                                             uint64_t ticks) {
    uint64_t d = ticks - anchor_tick, back;
    if ((int64_t)d >= 0) return anchor_ns + bpt__clock_scale(c, d);
    back = bpt__clock_scale(c, (uint64_t)0 - d);
    return back < anchor_ns ? anchor_ns - back : 0;
}

/* A new anchor: both clocks read now (the best of 2 pairs: about 80 ns,
   once per BPT__ANCHOR_US of a thread's records at most). With no counter,
   the ticks are ns already and the anchor is the identity. */
BPT__PRIVATE void bpt__clock_anchor(uint64_t *tick, uint64_t *ns) {
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) {
        bpt__clock_pair(2, tick, ns);
        return;
    }
#endif
    *tick = *ns = bpt__clock_monotonic();
}

/* How many ticks an anchor serves: BPT__ANCHOR_US of the counter; with no
   counter, for ever (the identity does not age). */
BPT__PRIVATE uint64_t bpt__clock_anchor_span(void) {
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
    if (bpt__clock.cal.source == BPT__CLOCK_GETTIME) return ~(uint64_t)0;
    return bpt__clock.cal.hz / (1000000u / BPT__ANCHOR_US);
}

BPT__PRIVATE void bpt__clock_cal_get(bpt__clock_cal *out) {
    if (!bpt__load_acquire_u32(&bpt__clock.ready)) bpt__clock_calibrate();   /* [K1] */
    *out = bpt__clock.cal;
}

/* Nanoseconds on CLOCK_MONOTONIC's scale: one counter read and three
   multiplies, once calibrated. */
BPT__HOT uint64_t bpt__now_ns(void) {
    uint64_t t;
#if defined(BPT__CLOCK_COUNTER)
    if (BPT__LIKELY(bpt__load_acquire_u32(&bpt__clock.on_counter)))   /* [K1] */
        return bpt__clock_cal_ns(&bpt__clock.cal, bpt__clock_ticks());
#endif
    t = bpt__now_ticks();   /* calibrates if it must */
#if defined(BPT__CLOCK_COUNTER)
    if (bpt__clock.cal.source == BPT__CLOCK_COUNTER) return bpt__clock_cal_ns(&bpt__clock.cal, t);
#endif
    return t;
}

/* The calling thread's CPU time, ns (CLOCK_THREAD_CPUTIME_ID: a system
   call, async-signal-safe): call_time's clock for sessions created with
   time_cpu, which charge no time while a thread is scheduled out, as BEAM
   charges none while a process is. */
BPT__PRIVATE uint64_t bpt__thread_cpu_ns(void) {
    struct timespec ts;
    int saved = errno;
    uint64_t ns = 0;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    errno = saved;
    return ns ? ns : 1;   /* 0 means "paused" to a frame (frames.h) */
}

int bpt_clock_info(bpt_clock *out) {
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_clock_info: out is NULL");
    (void)bpt__now_ns();   /* calibrated */
    out->source = bpt__clock.cal.source == BPT__CLOCK_TSC ? "tsc" :
                  bpt__clock.cal.source == BPT__CLOCK_CNTVCT ? "cntvct" : "clock_gettime";
    out->hz = bpt__clock.cal.hz;
    return 0;
}
/*** End of clock.c ***/

/*** Begin file intern.c ***/
/* intern.c: interned strings. Module and function names, and match spec
   messages, are copied once and kept for the life of the process, so a trace
   message can name its function after the function is gone. Only the set
   path interns (under its own lock); the hit path only reads the pointers. */

typedef struct bpt__interned {
    struct bpt__interned *next;
    uint32_t hash;
    char text[1];
} bpt__interned;

enum { BPT__INTERN_BUCKETS = 1024 };
static bpt__interned *bpt__intern_table[BPT__INTERN_BUCKETS];
BPT__SHARED pthread_mutex_t bpt__intern_lock = PTHREAD_MUTEX_INITIALIZER;   /* 3rd in the lock order (locks.c) */

/* A key for a table's keyed hash: its address and the monotonic clock,
   mixed (registry.h). */
BPT__PRIVATE uint64_t bpt__hash_seed(const void *table) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)(uintptr_t)table * UINT64_C(0x9e3779b97f4a7c15)) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)ts.tv_sec << 32);
}

/* x under key seed: splitmix64's finalizer (Steele, Lea and Flood), whose
   every output bit depends on every input bit. A key of two fields hashes
   one under the seed before it meets the other (format.c): combined first,
   by any fixed invertible step, inputs chosen to combine to one value
   collide under every seed (found by review). */
BPT__PRIVATE uint64_t bpt__hash_u64(uint64_t x, uint64_t seed) {
    x ^= seed;
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

BPT__PRIVATE uint32_t bpt__hash_str(const char *s) {
    uint32_t h = 2166136261u;   /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* The interned copy of text, or NULL when memory ran out. */
BPT__PRIVATE const char *bpt__intern(const char *text) {
    uint32_t h = bpt__hash_str(text);
    size_t len = strlen(text);
    bpt__interned *e;
    bpt__progress_ensure_init();   /* registers the fork handlers that cover this lock */
    pthread_mutex_lock(&bpt__intern_lock);
    for (e = bpt__intern_table[h % BPT__INTERN_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->text, text) == 0) break;
    if (!e && (e = (bpt__interned *)BPT_MALLOC(sizeof *e + len)) != NULL) {
        e->hash = h;
        memcpy(e->text, text, len + 1);
        e->next = bpt__intern_table[h % BPT__INTERN_BUCKETS];
        bpt__intern_table[h % BPT__INTERN_BUCKETS] = e;
    }
    pthread_mutex_unlock(&bpt__intern_lock);
    return e ? e->text : NULL;
}
/*** End of intern.c ***/

/*** Begin file names.c ***/
/* names.c: the name table. A record names its function by a 32-bit id, not
   by pointers: 4 bytes instead of 24, and an id means the same in a file
   read by another process. An id is given once per distinct (module, name,
   arity, formatter) and its entry never changes or goes away, so a record
   outlives its function: a VM function may be unregistered and freed while
   its records wait in a buffer. Match spec messages get ids too (arity -1).
   Two native functions registered at once under one name (two static
   helpers of one module) get an id each: an id names one entry address
   (the USDT probes report it), and records of the two must not mix. A
   function registered again (a library loaded anew) takes its name's id
   back once the old one is unregistered.

   Entries live in pages that are never moved or freed. Writers (the set
   path) take the intern lock; readers (drainers, formatters) take nothing:
   an id is published by a release store of the count [N1], after its entry
   is written, and a reader that holds an id from a record got it, through
   the record's publication ([R2]), after that store. */

#ifndef BPT__NAMES_PAGES   /* a test build may give fewer (t_names_limit) */
#  define BPT__NAMES_PAGES 4096   /* up to 4M names */
#endif
enum { BPT__NAMES_PAGE = 1024 };

static struct {
    bpt__atomic_ptr page[BPT__NAMES_PAGES];   /* bpt__name[BPT__NAMES_PAGE] */
    bpt__atomic_u32 count;                    /* ids 1..count are published [N1] */
    uint32_t *index;                          /* writers: open addressing, ids by key */
    uint32_t index_cap;                       /* a power of two, or 0 */
} bpt__names;

static uint32_t bpt__names_hash(const char *module, const char *name, int arity, bpt_format_fn format) {
    uintptr_t h = (uintptr_t)module * 31u + (uintptr_t)name;
    h = h * 31u + (uintptr_t)(unsigned)arity;
    h = h * 31u + (format ? 1u : 0u);   /* a function pointer does not convert to an integer in ISO C */
    return (uint32_t)(h ^ (h >> 17) ^ ((uint64_t)h >> 32));
}

static bpt__name *bpt__names_entry(uint32_t id) {
    bpt__name *page = (bpt__name *)bpt__load_relaxed_ptr(&bpt__names.page[(id - 1) / BPT__NAMES_PAGE]);
    return &page[(id - 1) % BPT__NAMES_PAGE];
}

/* Double the index (writers, under the lock). Returns 0 or BPT_ENOMEM. */
static int bpt__names_index_grow(void) {
    uint32_t cap = bpt__names.index_cap ? bpt__names.index_cap * 2 : 1024, i, n;
    uint32_t *ix = (uint32_t *)BPT_MALLOC(cap * sizeof *ix);
    if (!ix) return BPT_ENOMEM;
    memset(ix, 0, cap * sizeof *ix);
    n = bpt__load_relaxed_u32(&bpt__names.count);
    for (i = 1; i <= n; i++) {
        const bpt__name *e = bpt__names_entry(i);
        uint32_t k = bpt__names_hash(e->module, e->name, e->arity, e->format) & (cap - 1);
        while (ix[k]) k = (k + 1) & (cap - 1);
        ix[k] = i;
    }
    BPT_FREE(bpt__names.index);
    bpt__names.index = ix;
    bpt__names.index_cap = cap;
    return 0;
}

/* The id of (module, name, arity, format), given now if it has none.
   module and name are interned; addr, a native function's entry (NULL:
   none), becomes the entry's address, and the function holds the id until
   bpt__names_release: an id another native function holds is not reused
   (a new id is given). Returns 0 with *id, or BPT_ENOMEM or BPT_ELIMIT
   (every id is given: ids are never taken back); the caller's message
   says which (bpt__names_why). */
BPT__PRIVATE int bpt__names_id(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, uint32_t *id) {
    uint32_t k, n;
    bpt__name *page, *e;
    int rc = 0;
    bpt__progress_ensure_init();   /* registers the fork handlers that cover the lock */
    pthread_mutex_lock(&bpt__intern_lock);
    n = bpt__load_relaxed_u32(&bpt__names.count);
    if ((n + 1) * 2 > bpt__names.index_cap && bpt__names_index_grow() < 0) goto nomem;
    k = bpt__names_hash(module, name, arity, format) & (bpt__names.index_cap - 1);
    for (; bpt__names.index[k]; k = (k + 1) & (bpt__names.index_cap - 1)) {
        e = bpt__names_entry(bpt__names.index[k]);
        if (e->module != module || e->name != name || e->arity != arity || e->format != format) continue;
        if (addr && e->held && bpt__load_relaxed_u64(&e->addr) != (uint64_t)(uintptr_t)addr)
            continue;   /* another function's, registered: look on */
        *id = bpt__names.index[k];
        goto hold;
    }
    if (n == (uint32_t)BPT__NAMES_PAGE * BPT__NAMES_PAGES) {
        rc = BPT_ELIMIT;
        goto done;
    }
    page = (bpt__name *)bpt__load_relaxed_ptr(&bpt__names.page[n / BPT__NAMES_PAGE]);
    if (!page) {
        if (!(page = (bpt__name *)BPT_MALLOC(BPT__NAMES_PAGE * sizeof *page))) goto nomem;
        bpt__store_relaxed_ptr(&bpt__names.page[n / BPT__NAMES_PAGE], page);   /* published by [N1] */
    }
    e = &page[n % BPT__NAMES_PAGE];
    e->module = module;
    e->name = name;
    e->arity = arity;
    e->format = format;
    e->held = 0;
    bpt__store_relaxed_u64(&e->addr, 0);
    *id = n + 1;
    bpt__names.index[k] = *id;
    bpt__store_release_u32(&bpt__names.count, *id);   /* [N1] the entry, then its id */
hold:
    if (addr) {   /* registered (again), maybe elsewhere: a library loaded anew */
        bpt__store_relaxed_u64(&e->addr, (uint64_t)(uintptr_t)addr);
        e->held = 1;
    }
done:
    pthread_mutex_unlock(&bpt__intern_lock);
    return rc;
nomem:
    pthread_mutex_unlock(&bpt__intern_lock);
    return BPT_ENOMEM;
}

/* What a bpt__names_id failure means, for the caller's message. */
BPT__PRIVATE const char *bpt__names_why(int rc) {
    return rc == BPT_ELIMIT ? "the name table is full (every id given: distinct names of functions and "
                              "match spec messages, ever)" : "no memory";
}

/* The native function at addr no longer holds id (unregistered, or its
   registration failed): a function registered later under its name may
   take the id. Under the code modification permission. */
BPT__PRIVATE void bpt__names_release(uint32_t id, const void *addr) {
    bpt__name *e;
    pthread_mutex_lock(&bpt__intern_lock);
    if (id && id <= bpt__load_relaxed_u32(&bpt__names.count) &&
        bpt__load_relaxed_u64(&(e = bpt__names_entry(id))->addr) == (uint64_t)(uintptr_t)addr)
        e->held = 0;
    pthread_mutex_unlock(&bpt__intern_lock);
}

/* The entry of an id a record holds, or NULL for 0 or an id never given
   (a corrupt record). */
BPT__PRIVATE const bpt__name *bpt__names_get(uint32_t id) {
    if (id == 0 || id > bpt__load_acquire_u32(&bpt__names.count)) return NULL;   /* [N1] */
    return bpt__names_entry(id);
}

/* The entry address of id's function, read relaxed: a re-registration
   may store a new one meanwhile (either is an address the name had). */
BPT__PRIVATE uint64_t bpt__names_addr(uint32_t id) {
    if (id == 0 || id > bpt__load_acquire_u32(&bpt__names.count)) return 0;   /* [N1] */
    return bpt__load_relaxed_u64(&bpt__names_entry(id)->addr);
}

/* How many ids are given: a file writer writes the names up to it. */
BPT__PRIVATE uint32_t bpt__names_count(void) {
    return bpt__load_acquire_u32(&bpt__names.count);   /* [N1] */
}

/* The live table as a decoder's name source (bpt__decoder.name). */
BPT__PRIVATE const bpt__name *bpt__names_live(void *ctx, uint32_t id) {
    (void)ctx;
    return bpt__names_get(id);
}
/*** End of names.c ***/

/*** Begin file record.c ***/
/* record.c: reading trace records. The hit path writes records (kind_call.c,
   frames.c, session.c) as compact as the event allows; everything that
   costs is done here, when they are read: names from ids, ticks to ns,
   strings copied into a message. The same code reads a live session's
   buffers (bpt_session_drain) and a trace file (bpt_trace_file_read). */

/* The header of every message bptrace makes, in one place: its type, the
   thread and process it happened in, when (ns), and the session it goes to.
   The caller zeroed the message. */
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session) {
    m->type = (uint16_t)type;
    m->thread = (uint32_t)thread;
    m->process = process;
    m->ts_ns = ts_ns;
    m->session = session;
}

BPT__PRIVATE uint32_t bpt__rec_bytes(const bpt__rec *r) {
    return (uint32_t)sizeof *r + 8u * r->words;
}

/* How many words a CALL record's info and first word say it has. */
static uint32_t bpt__rec_call_words(const bpt__rec *r, const uint64_t *w) {
    uint32_t n = r->info & BPT__REC_CALL_NARGS, words = 0;
    if (n) words = 1 + n + (uint32_t)((((w[0] >> 40) & 0xffff) + 7) / 8);
    if (r->info & BPT__REC_CALL_CALLER) words += 2;
    if (r->info & BPT__REC_CALL_USER) words += 1;
    return words;
}

/* The bytes of the record at p if it is sound (a type it knows, its words
   within avail, a CALL's parts adding up), else 0. Files are checked with
   it before anything is decoded; a live buffer holds only what the hit
   path wrote. */
BPT__PRIVATE int bpt__rec_check(const void *p, uint32_t avail) {
    const bpt__rec *r = (const bpt__rec *)p;
    const uint64_t *w = (const uint64_t *)(r + 1);
    uint32_t bytes;
    if (avail < sizeof *r) return 0;
    bytes = bpt__rec_bytes(r);
    if (bytes > avail) return 0;
    switch (r->type) {
    case BPT_MSG_CALL:
        if ((r->info & BPT__REC_CALL_NARGS) > BPT_MAX_ARGS || (r->info & ~(unsigned)BPT__REC_CALL_INFO)) return 0;
        if ((r->info & BPT__REC_CALL_NARGS) && (r->words == 0 || ((w[0] >> 40) & 0xffff) > BPT_MSG_STR_BYTES)) return 0;
        return bpt__rec_call_words(r, w) == r->words ? (int)bytes : 0;
    case BPT_MSG_RETURN_FROM:
        return r->words >= 1 && r->words <= BPT_MSG_STR_BYTES / 8 ? (int)bytes : 0;
    case BPT_MSG_EXCEPTION_FROM: case BPT_MSG_RETURN_TO: case BPT_MSG_DROPPED: case BPT_MSG_LIMIT:
        return r->words == 1 ? (int)bytes : 0;
    case BPT__REC_CONTEXT:   /* version 1 files: no anchor */
        return r->words == 1 || r->words == 2 ? (int)bytes : 0;
    default:
        return 0;
    }
}

static const char bpt__unknown_name[] = "?";

/* A function's entry: the id names a function, not a message (a file's
   record may say anything). */
/* A decoder of this process's own records, as they are read now: names
   from the live table, the clock's current calibration. */
BPT__PRIVATE void bpt__decoder_live(bpt__decoder *d, uint64_t session) {
    d->name = bpt__names_live;
    d->ctx = NULL;
    bpt__clock_cal_get(&d->cal);
    d->session = session;
}

static const bpt__name *bpt__rec_function(const bpt__decoder *d, uint32_t id) {
    const bpt__name *n = id ? d->name(d->ctx, id) : NULL;
    return n && n->arity >= 0 && n->module ? n : NULL;
}

/* Names of an id into a message's fields; an unknown id reads "?". */
static void bpt__rec_names(const bpt__decoder *d, uint32_t id, const char **module, const char **name, int *arity) {
    const bpt__name *n = bpt__rec_function(d, id);
    *module = n ? n->module : bpt__unknown_name;
    *name = n ? n->name : bpt__unknown_name;
    *arity = n ? n->arity : 0;
}

/* A CALL's arguments, caller and message. */
static void bpt__rec_decode_call(const bpt__decoder *d, const bpt__rec *r, bpt_msg *m) {
    const uint64_t *w = (const uint64_t *)(r + 1);
    uint32_t n = r->info & BPT__REC_CALL_NARGS, i;
    const bpt__name *fn = bpt__rec_function(d, r->id);
    bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
    m->format = fn ? fn->format : NULL;
    m->no_return = (r->info & BPT__REC_CALL_NO_RETURN) != 0;
    if (n) {
        uint32_t strbytes = (uint32_t)((w[0] >> 40) & 0xffff);
        m->nargs = (uint16_t)n;
        for (i = 0; i < n; i++) {
            m->argtype[i] = (uint8_t)((w[0] >> (4 * i)) & 0xf);
            m->args[i] = w[1 + i];
        }
        memcpy(m->str, &w[1 + n], strbytes);
        m->str[sizeof m->str - 1] = '\0';
        w += 1 + n + (strbytes + 7) / 8;
    }
    if (r->info & BPT__REC_CALL_CALLER) {
        m->caller = w[0];
        if (w[1] && w[1] <= 0xffffffffu)
            bpt__rec_names(d, (uint32_t)w[1], &m->caller_module, &m->caller_name, &m->caller_arity);
        w += 2;
    }
    if (r->info & BPT__REC_CALL_USER) {
        const bpt__name *u = w[0] <= 0xffffffffu ? d->name(d->ctx, (uint32_t)w[0]) : NULL;
        m->user = u && u->arity < 0 ? u->name : NULL;   /* a message's entry, not a function's */
    }
}

BPT__PRIVATE void bpt__stream_init(bpt__stream *st) { memset(st, 0, sizeof *st); }

/* The stamp of a record of stream st that read `ticks`: from the stream's
   anchor (clock.h), or the calibration's own pair before the first one;
   never earlier than the stream's last stamp (two anchors' conversions of
   neighbouring records can differ by the rate's error over one span). */
BPT__PRIVATE uint64_t bpt__stream_ns(const bpt__decoder *d, bpt__stream *st, uint64_t ticks) {
    uint64_t ns = st->anchored ? bpt__clock_anchored_ns(&d->cal, st->anchor_tick, st->anchor_ns, ticks)
                               : bpt__clock_cal_ns(&d->cal, ticks);
    if (ns < st->last_ns) ns = st->last_ns;
    st->last_ns = ns;
    return ns;
}

/* Decode one sound record of stream st. A context record updates st (its
   thread, process and anchor) and gives no message (0); any other fills m
   (1). */
BPT__PRIVATE int bpt__rec_decode(const bpt__decoder *d, bpt__stream *st, const bpt__rec *r, bpt_msg *m) {
    const uint64_t *w = (const uint64_t *)(r + 1);
    if (r->type == BPT__REC_CONTEXT) {
        st->tid = r->id;
        st->process = w[0];
        if (r->words >= 2) {
            st->anchored = 1;
            st->anchor_tick = r->ticks;
            st->anchor_ns = w[1];
        }
        return 0;
    }
    memset(m, 0, sizeof *m);
    bpt__msg_header(m, r->type, st->tid, st->process, bpt__stream_ns(d, st, r->ticks), d->session);
    switch (r->type) {
    case BPT_MSG_CALL:
        bpt__rec_decode_call(d, r, m);
        break;
    case BPT_MSG_RETURN_FROM:
        bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->value_type = (uint8_t)r->info;
        if (r->info == BPT_ARG_STR) {
            memcpy(m->str, w, 8u * r->words);
            m->str[sizeof m->str - 1] = '\0';
        } else {
            m->value = w[0];
        }
        break;
    case BPT_MSG_EXCEPTION_FROM:
        bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->exception_class = r->info ? "throw" : "unwind";
        m->value = w[0];
        break;
    case BPT_MSG_RETURN_TO:
        if (r->id) bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->caller = w[0];
        break;
    default:   /* DROPPED, LIMIT */
        m->value = w[0];
    }
    return 1;
}
/*** End of record.c ***/

/*** Begin file locks.c ***/
/* locks.c: bptrace's locks, the one order in which they are taken, and
   what fork() does with them.

   The locks, outermost first. A thread that holds one takes only locks
   further down the list, so no two threads can wait for each other:
     1. bpt__code_mod_permission (here; seized in bp.c): every change of
        breakpoints, registrations and sessions, as BEAM's code modification
        permission. Its holder waits for thread progress (2), interns
        names (3), and drains no session.
     2. bpt__progress.wait_lock (progress.c): one thread progress waiter at
        a time.
     3. bpt__intern_lock (intern.c): the table of interned names, and the
        name table that gives records their ids (names.c).
   A leaf, never held while another is taken: a session's drain_lock
   (session.c). The hit path takes none of them: every thread has its own
   trace buffer and call_time tables, however many threads there are.

   fork() copies locks as they are: one held by another thread would stay
   held in the child forever. The prepare handler takes the locks of the
   set path in this order, so a fork never lands in the middle of a
   breakpoint change or an intern (the protocol runs to its end first);
   parent and child release them, and the child resets what belonged to
   threads that do not exist in it. */

BPT__SHARED pthread_mutex_t bpt__code_mod_permission = PTHREAD_MUTEX_INITIALIZER;
static int bpt__fork_took_permission;

/* A managed online thread goes offline while it waits for the permission
   (bpt__block_begin, as every wait inside bptrace does): the holder may be
   waiting at step 4 for that very thread's progress. */
static void bpt__atfork_prepare(void) {
    bpt__thread *self = bpt__thread_self_or_null();
    /* A fork from a callback that runs under the permission keeps it held. */
    bpt__fork_took_permission = !(self && self->holds_permission);
    if (bpt__fork_took_permission) {
        bpt__block_begin(self);
        pthread_mutex_lock(&bpt__code_mod_permission);
    }
    pthread_mutex_lock(&bpt__intern_lock);
}

static void bpt__atfork_release(void) {
    pthread_mutex_unlock(&bpt__intern_lock);
    if (bpt__fork_took_permission) pthread_mutex_unlock(&bpt__code_mod_permission);
}

static void bpt__atfork_parent(void) {
    bpt__atfork_release();
    bpt__block_end(bpt__thread_self_or_null());   /* online again, if the prepare took it offline */
}

/* Only the forking thread runs in the child: its locks are released, and
   the other threads' records and drain locks are reset. */
static void bpt__atfork_child(void) {
    bpt__atfork_release();
    bpt__sessions_atfork_child();
    bpt__progress_atfork_child(bpt__thread_self_or_null());
    bpt__block_end(bpt__thread_self_or_null());
}

/* Once, from thread progress's initialisation. */
BPT__PRIVATE void bpt__locks_init(void) {
    pthread_atfork(bpt__atfork_prepare, bpt__atfork_parent, bpt__atfork_child);
}
/*** End of locks.c ***/

/*** Begin file ptrset.c ***/
/* ptrset.c: the set path's containers: a set of pointers, and free lists
   of blocks of one size (>>recycle, at the end).
   A set of pointers: Open addressing with linear probing and
   backward-shift deletion: membership, insertion and removal in O(1), with
   no tombstones left behind. The registry (funcs.c) keeps two, to validate
   the bpt_func handles a caller passes in and to refuse a site registered
   twice. Not from OTP: ERTS only meets its own code pointers, while a C API
   must check the ones it is given. */

static size_t bpt__ptr_hash(const void *p, size_t mask) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
    return (size_t)x & mask;
}

static size_t bpt__ptrset_slot(const bpt__ptrset *set, const void *p) {
    size_t i = bpt__ptr_hash(p, set->cap - 1);
    while (set->keys[i] && set->keys[i] != p) i = (i + 1) & (set->cap - 1);
    return i;
}

BPT__PRIVATE int bpt__ptrset_has(const bpt__ptrset *set, const void *p) {
    return set->cap && set->keys[bpt__ptrset_slot(set, p)] == p;
}

/* Make room for `extra` more keys. Returns 0 or BPT_ENOMEM (set unchanged). */
BPT__PRIVATE int bpt__ptrset_reserve(bpt__ptrset *set, size_t extra) {
    const void **old = set->keys;
    size_t i, oldcap = set->cap, cap = oldcap ? oldcap : 64;
    if ((set->len + extra) * 2 <= set->cap) return 0;
    while ((set->len + extra) * 2 > cap) cap *= 2;
    set->keys = (const void **)BPT_MALLOC(cap * sizeof *set->keys);
    if (!set->keys) { set->keys = old; return BPT_ENOMEM; }
    memset(set->keys, 0, cap * sizeof *set->keys);
    set->cap = cap;
    for (i = 0; i < oldcap; i++)
        if (old[i]) set->keys[bpt__ptrset_slot(set, old[i])] = old[i];
    BPT_FREE(old);
    return 0;
}

BPT__PRIVATE void bpt__ptrset_add(bpt__ptrset *set, const void *p) {   /* after reserve */
    set->keys[bpt__ptrset_slot(set, p)] = p;
    set->len++;
}

BPT__PRIVATE void bpt__ptrset_remove(bpt__ptrset *set, const void *p) {
    size_t mask = set->cap - 1, i = bpt__ptrset_slot(set, p), j, home;
    if (set->keys[i] != p) return;
    set->keys[i] = NULL;
    set->len--;
    /* Shift back the rest of the cluster whose home is at or before the hole. */
    for (j = (i + 1) & mask; set->keys[j]; j = (j + 1) & mask) {
        home = bpt__ptr_hash(set->keys[j], mask);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            set->keys[i] = set->keys[j];
            set->keys[j] = NULL;
            i = j;
        }
    }
}

/* >>recycle: the set path's blocks of one size, kept for reuse instead of
   freed. Switching call_count off 10,000 functions frees 10,000 GenericBps
   and as many BpCounts at steps 11 and 12; switching it on again allocates
   as many at step 2. Through malloc, each such change also merged the
   freed chunks (malloc_consolidate) at its next large allocation: about a
   fifth of a change's time in bench/pattern_scale.c. A block given back
   goes on the list and the next take reuses it, so the list holds at most
   the peak number of breakpoints, and no block is ever handed back to
   BPT_FREE. As BEAM gives its breakpoint data an allocator type of its own
   (ERTS_ALC_T_BPD). Under the code modification permission: no lock. */
BPT__PRIVATE void *bpt__recycle_take(bpt__recycle *r) {
    void *p = r->head;
    if (!p) return BPT_MALLOC(r->size);
    memcpy(&r->head, p, sizeof r->head);
    return p;
}

#ifndef BPT__RECYCLE_NOTE   /* a test's hook: when a block is given back (t_protocol_steps) */
#  define BPT__RECYCLE_NOTE(p) ((void)0)
#endif
BPT__PRIVATE void bpt__recycle_give(bpt__recycle *r, void *p) {
    if (!p) return;
    BPT__RECYCLE_NOTE(p);
    memcpy(p, &r->head, sizeof r->head);
    r->head = p;
}
/*** End of ptrset.c ***/

/*** Begin file session.c ***/
/* session.c: trace sessions' tracers, per-thread buffers and rate limits
   (OTP 27 trace sessions; LTTng-UST's sub-buffers; recon_trace's limits).

   A session sends each record either to a callback tracer, run in the
   traced thread, to the bptrace USDT probes (a USDT session, probes.c), or
   into the thread's own buffer in that session (its lane): a ring of
   chunks that the thread fills and a drainer empties.

   The producer (the traced thread) owns `head`, the chunk it writes, and its
   write position. It copies a record in with plain stores and publishes it
   with one release store of the chunk's fill [R2]. A full chunk is sealed by
   moving to the next one, published by a release store of `opened` [R2].
   The chunk it moves to is the oldest of the lane's, once it has been read
   (tail, [R3]). When it has not, the lane grows by a chunk, up to
   max_chunks (>>growth), as uftrace's record hands a thread a new buffer
   when its own are full. At the cap the record is dropped and counted. The
   place of the loss is marked in the stream at once, by a DROPPED record in
   the space each chunk keeps at its end, and the losses after it by
   DROPPED records ahead of the next record that fits, each in the context
   (thread and process) that lost them (>>losses). A flight recorder
   never grows: it takes the oldest unread chunk back and overwrites it.

   The consumer (one drainer at a time: drain_lock) owns `tail`, the chunk it
   reads, and its read position. The tail word has a BUSY bit: whoever sets
   it with a CAS owns the read position until it stores the word back
   (release [R3]). The drainer takes it for a read, and hands each chunk it
   has read to the end back at once, by a release store of the next
   chunk's number with the bit still set [R3]: a producer that finds its
   lane full at the cap looks at the tail again before it drops. A flight
   recorder's producer takes the bit to take a chunk back, and never waits
   for it: a busy tail that has not moved means the drainer is reading the
   oldest chunk, so the record is dropped instead. A traced thread never
   waits, in any case.

   Lanes are per thread record (bpt__thread.index), created on a thread's
   first record in the session, in a directory that grows without a limit
   on threads. A signal handler that hits a breakpoint while its own thread
   is inside bpt__session_send must not touch the lane (its record would go
   to the same position): it is dropped and counted. */

enum {
    BPT__TAIL_BUSY = 1,           /* the tail word's owner bit; the chunk index is tail >> 1 */
    BPT__CTX_BYTES = (int)sizeof(bpt__rec) + 16,  /* a context record */
    BPT__DROP_BYTES = (int)sizeof(bpt__rec) + 8,  /* a DROPPED record */
    BPT__KEPT_BYTES = BPT__CTX_BYTES + BPT__DROP_BYTES,   /* kept at a chunk's end for a loss's mark */
    BPT__CHUNK_HEAD = 16          /* bytes in front of a chunk's records */
};

/* One chunk: its header, then chunk_bytes of records. */
typedef struct bpt__chunk {
    bpt__atomic_u32 fill;         /* bytes of whole records; release-stored after each [R2] */
    uint32_t nrec;                /* producer: produced records in it (not context or DROPPED) */
    uint64_t marked;              /* producer: the counts its DROPPED records carry */
} bpt__chunk;


BPT__SHARED struct bpt__sessions bpt__sessions;   /* session.h */

static bpt__lane *bpt__lane_at(bpt__session *s, uint32_t index);
static bpt__chunk *bpt__lane_chunk(const bpt__lane *lane, uint64_t i);
static void bpt__lane_rebuild(bpt__lane *lane, uint64_t next);

/* A fork child's copy of a lane holds the parent's records: they are the
   parent's to drain, not the child's. Mark everything in it read and start
   the counts at 0; the next record opens a chunk of its own (with the
   child's context). Only the forking thread runs, so no producer or drainer
   is mid-way. */
static void bpt__lane_forget(bpt__lane *lane) {
    uint64_t next = lane->cur ? lane->head + 1 : lane->head;
    if (lane->chunks) {   /* the next record opens chunk `next`, where the reader now starts */
        bpt__lane_rebuild(lane, next);
        lane->cur = NULL;
        lane->wp = lane->wend = NULL;   /* >>fits: no chunk */
        lane->head = next;
        lane->nunreported = 0;
        bpt__store_relaxed_u64(&lane->opened, next);   /* nothing open: nothing to read */
    }
    lane->rpos = lane->rrec = 0;
    lane->rmarked = 0;
    lane->unreported_overwritten = 0;
    bpt__store_relaxed_u64(&lane->tail, next << 1);
    bpt__store_relaxed_u64(&lane->written, 0);
    bpt__store_relaxed_u64(&lane->dropped, 0);
    bpt__store_relaxed_u64(&lane->overwritten, 0);
    bpt__store_relaxed_u64(&lane->delivered, 0);
    bpt__store_relaxed_u64(&lane->lost, 0);
    lane->lost_marked = 0;
    bpt__store_relaxed_u64(&lane->drained, 0);
}

/* In a fork child only the forking thread runs: a drain lock another thread
   held at the fork is free again, no drainer sleeps in bpt_session_wait,
   and the buffers start empty (the parent's records stay the parent's).
   A control client's session has lost its drainer (a server thread) for
   good: it becomes an orphan, whose lanes keep the chunks they have and
   drop (counted) what does not fit, instead of growing to max_chunks. */
BPT__PRIVATE void bpt__sessions_atfork_child(void) {
    int i;
    uint32_t k, n = bpt__threads_count();
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        bpt__store_relaxed_u32(&bpt__sessions.wake[i].sleepers, 0);
        if (!s) continue;
        pthread_mutex_init(&s->drain_lock, NULL);
        s->orphan = s->served;   /* read by its lanes' growth, in this thread only so far */
        bpt__store_relaxed_u64(&s->lost_laneless, 0);
        for (k = 0; k < n; k++) {
            bpt__lane *lane = bpt__lane_at(s, k);
            if (lane) bpt__lane_forget(lane);
        }
    }
}

/* The live session of handle `id`, or NULL. The caller is pinned or holds the permission. */
BPT__HOT bpt__session *bpt__session_lookup(uint64_t id) {
    uint32_t slot = bpt__session_slot(id);
    bpt__session *s;
    if (id == 0 || slot >= BPT_MAX_SESSIONS) return NULL;
    s = (bpt__session *)bpt__load_acquire_ptr(&bpt__sessions.slot[slot]);   /* [S1] */
    if (!s || s->id != id || bpt__load_relaxed_u32(&s->dead)) return NULL;   /* [S2] */
    return s;
}

/* >>lanes: finding and making a thread's lane */

/* The chunk of number i. The producer's own, or (the drainer) one of
   tail .. opened-1, whose slots stay put while it reads them. */
static bpt__chunk *bpt__lane_chunk(const bpt__lane *lane, uint64_t i) {
    return (bpt__chunk *)bpt__load_relaxed_ptr(&lane->slot[i % lane->cap]);
}

BPT__HOT BPT__INTREGS unsigned char *bpt__chunk_data(bpt__chunk *c) { return (unsigned char *)c + BPT__CHUNK_HEAD; }

static size_t bpt__chunk_stride(uint32_t chunk_bytes) { return BPT__CHUNK_HEAD + (size_t)chunk_bytes; }

/* The bytes in front of a lane's first chunk: the lane, then its slots. */
static size_t bpt__lane_head_bytes(uint32_t cap) {
    return (sizeof(bpt__lane) + (size_t)cap * sizeof(bpt__atomic_ptr) + 15) & ~(size_t)15;
}

/* A lane's own mapping: the lane, its slots, then its first chunks. */
static size_t bpt__lane_bytes(uint32_t chunks, uint32_t cap, uint32_t chunk_bytes) {
    return bpt__lane_head_bytes(cap) + chunks * bpt__chunk_stride(chunk_bytes);
}

/* Whether s keeps records in buffers: not when a callback tracer or the
   USDT probes take them as they come (their lanes hold only counters). */
static int bpt__session_buffered(const bpt__session *s) { return !s->tracer && !s->usdt; }

/* A thread's lane, made by its first record in the session: a hit, so the
   memory is mapped (BPT_HIT_MAP), never malloc'd (port.h says why). Its
   first chunks sit in the slots of numbers -chunks .. -1, so that the
   first record's chunk 0 is reached by the same rule as every other. */
static bpt__lane *bpt__lane_new(const bpt__session *s, uint64_t number) {
    int buffered = bpt__session_buffered(s);
    uint32_t n = buffered ? s->chunks : 0, cap = buffered ? s->max_chunks : 0, i;
    bpt__lane *lane = (bpt__lane *)BPT_HIT_MAP(bpt__lane_bytes(n, cap, s->chunk_bytes));
    unsigned char *first;
    if (!lane) return NULL;
    memset(lane, 0, sizeof *lane);
    lane->number = number;
    lane->chunks = n;
    lane->cap = cap;
    lane->chunk_bytes = s->chunk_bytes;
    lane->slot = (bpt__atomic_ptr *)(void *)(lane + 1);
    lane->anchor_span = bpt__clock_anchor_span();
    bpt__store_relaxed_u32(&lane->budget, n);
    first = (unsigned char *)lane + bpt__lane_head_bytes(cap);
    /* The other slots are read only after a chunk is put there (zero
       from the mapping until then): not touched, so a large cap costs
       address space alone. */
    for (i = 0; i < n; i++)
        bpt__store_relaxed_ptr(&lane->slot[cap - n + i], first + i * bpt__chunk_stride(s->chunk_bytes));
    return lane;
}

/* Unmap a lane and the chunks it grew. */
static void bpt__lane_free(bpt__lane *lane) {
    uint32_t i, nbatch = bpt__load_relaxed_u32(&lane->nbatch);
    for (i = 0; i < nbatch; i++)
        BPT_HIT_UNMAP(lane->batch[i], lane->batch_chunks[i] * bpt__chunk_stride(lane->chunk_bytes));
    BPT_HIT_UNMAP(lane, bpt__lane_bytes(lane->chunks, lane->cap, lane->chunk_bytes));
}

/* The directory entry of thread record `index`, its directory made on
   first use. Publication is a release CAS [R1] (a directory or lane is
   initialised before others see it), paired with the acquire loads here
   and in the readers. Only the overflow of a CAS race is freed. */
static bpt__atomic_ptr *bpt__lane_slot(bpt__session *s, uint32_t index, int make) {
    bpt__atomic_ptr *dir;
    if (index >= BPT__LANES_PER_DIR * BPT__LANE_DIRS) return NULL;
    dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR]);   /* [R1] */
    if (!dir && make) {
        bpt__atomic_ptr *fresh = (bpt__atomic_ptr *)BPT_HIT_MAP(BPT__LANES_PER_DIR * sizeof *fresh);
        int i;
        if (!fresh) return NULL;
        for (i = 0; i < BPT__LANES_PER_DIR; i++) bpt__store_relaxed_ptr(&fresh[i], NULL);
        if (bpt__cas_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR], NULL, (void *)fresh)) {   /* [R1] */
            dir = fresh;
        } else {   /* a signal handler on this thread won (its send found no lane) */
            BPT_HIT_UNMAP((void *)fresh, BPT__LANES_PER_DIR * sizeof *fresh);
            dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR]);
        }
    }
    return dir ? &dir[index % BPT__LANES_PER_DIR] : NULL;
}

/* The calling thread's lane if it has one: two dependent loads. */
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_find(bpt__session *s, const bpt__thread *rec) {
    bpt__atomic_ptr *dir;
    if (BPT__LIKELY(rec->index < BPT__LANES_PER_DIR * BPT__LANE_DIRS &&
                    (dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[rec->index / BPT__LANES_PER_DIR])) != NULL))   /* [R1] */
        return (bpt__lane *)bpt__load_acquire_ptr(&dir[rec->index % BPT__LANES_PER_DIR]);   /* [R1] */
    return NULL;
}

/* The calling thread's lane, made on its first record in the session:
   the thread's documented first use, which allocates. */
static bpt__lane *bpt__lane_get(bpt__session *s, const bpt__thread *rec) {
    bpt__atomic_ptr *slot;
    bpt__lane *lane = bpt__lane_find(s, rec);
    if (lane) return lane;
    if (!(slot = bpt__lane_slot(s, rec->index, 1))) return NULL;
    if ((lane = (bpt__lane *)bpt__load_acquire_ptr(slot)) != NULL) return lane;   /* [R1] */
    BPT_TEST_POINT("lane_get: making the lane");   /* t_laneless_mark raises a signal here */
    if (!(lane = bpt__lane_new(s, rec->index))) return NULL;
    if (!bpt__cas_ptr(slot, NULL, lane)) {   /* [R1] a signal handler's send on this thread made it */
        bpt__lane_free(lane);
        lane = (bpt__lane *)bpt__load_acquire_ptr(slot);
    }
    return lane;
}

/* Every lane of s, in thread record order, for the readers. */
static bpt__lane *bpt__lane_at(bpt__session *s, uint32_t index) {
    bpt__atomic_ptr *slot = bpt__lane_slot(s, index, 0);
    return slot ? (bpt__lane *)bpt__load_acquire_ptr(slot) : NULL;   /* [R1] */
}

/* >>producer: a traced thread puts a record into its lane */

/* A DROPPED record (or another of one word) at p; returns the end. */
static unsigned char *bpt__put_small(unsigned char *p, unsigned type, uint32_t id, uint64_t ticks, uint64_t word) {
    bpt__rec r;
    r.ticks = ticks;
    r.type = (uint8_t)type;
    r.words = 1;
    r.info = 0;
    r.id = id;
    memcpy(p, &r, sizeof r);
    memcpy(p + sizeof r, &word, 8);
    return p + sizeof r + 8;
}

/* A context record at p: the thread and process of the records after it,
   and a new anchor (the counter in its ticks, CLOCK_MONOTONIC in its
   second word). Returns the end. */
static unsigned char *bpt__put_context(bpt__lane *lane, unsigned char *p, uint32_t tid, uint64_t process) {
    bpt__rec r;
    uint64_t ns;
    bpt__clock_anchor(&lane->anchor_tick, &ns);
    r.ticks = lane->anchor_tick;
    r.type = BPT__REC_CONTEXT;
    r.words = 2;
    r.info = 0;
    r.id = tid;
    memcpy(p, &r, sizeof r);
    memcpy(p + sizeof r, &process, 8);
    memcpy(p + sizeof r + 8, &ns, 8);
    return p + sizeof r + 16;
}

/* Has the drainer handed chunk next - budget back, tail t being the
   tail's word? It moves the tail while it reads, the BUSY bit set [R3]:
   a lane found full a moment ago may not be any more, so a producer at
   the cap asks again before it drops (bpt__lane_advance). */
static int bpt__lane_handed_back(bpt__lane *lane, uint64_t next, uint64_t t) {
    return next - (t >> 1) < bpt__load_relaxed_u32(&lane->budget);
}

/* A flight recorder takes back the oldest unread chunk, unless the drainer
   is reading it. Taking the tail's BUSY bit makes the read position ours
   [R3]: what was read of that chunk is not overwritten news, the rest is
   (its records, and the counts of its DROPPED records, not yet read).
   The drainer may have handed a chunk back since the caller found the
   lane full (while it reads, too): then nothing is taken back. Returns 1
   when chunk next - budget may be reused (handed back, or taken back), 0
   when the drainer holds the tail on it. */
static int bpt__lane_take_back(bpt__lane *lane, uint64_t next) {
    uint64_t t = bpt__load_acquire_u64(&lane->tail), lost;   /* [R3] */
    bpt__chunk *c;
    /* Handed back since the caller looked: the drainer's reads of it are
       over (the acquire above); the rest of the one it reads is unread
       news. (The BUSY bit alone was taken for "the drainer is reading the
       oldest chunk", and the record dropped: helper-45, t_drain_handback.) */
    if (bpt__lane_handed_back(lane, next, t)) return 1;
    if ((t & BPT__TAIL_BUSY) || !bpt__cas_u64(&lane->tail, t, t | BPT__TAIL_BUSY)) return 0;
    c = bpt__lane_chunk(lane, t >> 1);
    lost = c->nrec - lane->rrec;
    lane->unreported_overwritten += lost + c->marked - lane->rmarked;
    lane->rpos = lane->rrec = 0;
    lane->rmarked = 0;
    bpt__owner_inc_u64(&lane->overwritten, lost);
    bpt__store_release_u64(&lane->tail, ((t >> 1) + 1) << 1);   /* [R3] the read position, released */
    return 1;
}

/* >>growth: a lane whose drainer falls behind takes one more chunk, up to
   its cap, instead of dropping. Chunks come in batches that double (the
   first as many as the lane starts with), so a lane grown to n chunks made
   about log2(n / chunks) mappings, and a lane whose drainer keeps up never
   grows. A flight recorder's cap is its size. Returns the new chunk, or
   NULL at the cap or when no memory can be mapped (the record is dropped). */
static bpt__chunk *bpt__lane_grow(bpt__lane *lane) {
    uint32_t budget = bpt__load_relaxed_u32(&lane->budget);
    unsigned char *c;
    if (budget >= lane->cap) return NULL;
    if (!lane->spare_left) {
        uint32_t n = budget < lane->cap - budget ? budget : lane->cap - budget;
        void *b;
        uint32_t nbatch = bpt__load_relaxed_u32(&lane->nbatch);
        if (nbatch == BPT__GROW_BATCHES || !(b = BPT_HIT_MAP(n * bpt__chunk_stride(lane->chunk_bytes))))
            return NULL;
        lane->batch[nbatch] = b;
        lane->batch_chunks[nbatch] = n;
        bpt__store_release_u32(&lane->nbatch, nbatch + 1);   /* [R4] the batch, then its count */
        lane->spare = (unsigned char *)b;
        lane->spare_left = n;
    }
    c = lane->spare;
    lane->spare += bpt__chunk_stride(lane->chunk_bytes);
    lane->spare_left--;
    bpt__store_relaxed_u32(&lane->budget, budget + 1);
    BPT_TEST_POINT("lane_grow: a chunk counted, not yet in its slot");   /* t_fork_growth forks here */
    return (bpt__chunk *)(void *)c;
}

/* A fork child's lane, whose thread did not survive the fork and may have
   been anywhere in bpt__lane_advance (a chunk taken and not yet counted,
   or counted and not yet in its slot). Nothing in it is read again: put
   every chunk the lane has mapped, the first ones and every batch's, used
   or not, in the slots of numbers next - n .. next - 1, and let it hold
   all n. A batch counted in nbatch is complete there [R4]: a batch whose
   count the fork missed stays mapped, unused, until the session ends. */
static void bpt__lane_rebuild(bpt__lane *lane, uint64_t next) {
    uint32_t nbatch = bpt__load_acquire_u32(&lane->nbatch), n = lane->chunks, i, k;   /* [R4] */
    size_t stride = bpt__chunk_stride(lane->chunk_bytes);
    unsigned char *first = (unsigned char *)lane + bpt__lane_head_bytes(lane->cap);
    uint64_t at;
    for (i = 0; i < nbatch; i++) n += lane->batch_chunks[i];   /* never past cap: >>growth */
    at = next + lane->cap - n;   /* number next - n, kept positive for the % */
    for (k = 0; k < lane->chunks; k++) bpt__store_relaxed_ptr(&lane->slot[at++ % lane->cap], first + k * stride);
    for (i = 0; i < nbatch; i++)
        for (k = 0; k < lane->batch_chunks[i]; k++)
            bpt__store_relaxed_ptr(&lane->slot[at++ % lane->cap], (unsigned char *)lane->batch[i] + k * stride);
    bpt__store_relaxed_u32(&lane->budget, n);
    lane->spare_left = 0;
}

/* Seal the current chunk and open the next (>>lanes' ring rule): the oldest
   chunk if it has been read, else a new one (growth), else, in a flight
   recorder, the oldest taken back. Returns 0 when the buffer is full. With
   no current chunk (the lane's first record, or a fork child's) it opens
   chunk `head`, where the reader's tail already is. */
static int bpt__lane_advance(bpt__session *s, bpt__lane *lane) {
    int sealing = lane->cur != NULL;
    uint64_t next = sealing ? lane->head + 1 : lane->head;
    uint32_t budget = bpt__load_relaxed_u32(&lane->budget);
    bpt__chunk *c;
    /* [R3] acquire: the drainer's reads of chunks before tail are over. */
    if (bpt__lane_handed_back(lane, next, bpt__load_acquire_u64(&lane->tail))) {
        c = bpt__lane_chunk(lane, next + lane->cap - budget);   /* number next - budget, read */
    } else if (s->orphan || !(c = bpt__lane_grow(lane))) {   /* full, and at the cap (an orphan's: now) */
        BPT_TEST_POINT("lane_advance: full, a flight recorder takes a chunk back");
        if (!(s->flight_recorder ? bpt__lane_take_back(lane, next)
                                 : bpt__lane_handed_back(lane, next, bpt__load_acquire_u64(&lane->tail))))   /* [R3] */
            return 0;
        c = bpt__lane_chunk(lane, next + lane->cap - budget);   /* the one taken back, or one handed back since */
    }
    bpt__store_relaxed_u32(&c->fill, 0);   /* published by the release below */
    c->nrec = 0;
    c->marked = 0;
    bpt__store_relaxed_ptr(&lane->slot[next % lane->cap], c);   /* and this */
    lane->head = next;
    lane->cur = c;
    lane->wp = bpt__chunk_data(c);
    lane->wend = lane->wp + lane->chunk_bytes - BPT__KEPT_BYTES;
    bpt__store_release_u64(&lane->opened, next + 1);   /* [R2] the sealed chunk's last fill, and this one */
    if (sealing) bpt__session_wake(s);   /* a chunk was sealed: a sleeping drainer has work */
    return 1;
}

/* Write a context record at the lane's wp: the records after it are
   thread tid's, in process. */
static void bpt__lane_context(bpt__lane *lane, uint32_t tid, uint64_t process) {
    lane->wp = bpt__put_context(lane, lane->wp, tid, process);
    lane->ctx_tid = tid;
    lane->ctx_process = process;
}

/* Count n records lost in the context of thread tid in process, to be
   marked in front of the next record that fits (>>losses). */
static void bpt__lane_unreported(bpt__lane *lane, uint32_t tid, uint64_t process, uint64_t n) {
    uint32_t i;
    for (i = 0; i < lane->nunreported; i++)
        if (lane->unreported[i].tid == tid && lane->unreported[i].process == process) break;
    if (i == lane->nunreported) {
        if (i == BPT__LOSS_CONTEXTS) {
            i--;   /* no slot left: the last context's count takes them */
        } else {
            lane->unreported[i].tid = tid;
            lane->unreported[i].process = process;
            lane->unreported[i].n = 0;
            lane->nunreported++;
        }
    }
    lane->unreported[i].n += n;
}

/* >>losses: a record is lost: the buffer is full. The first loss since
   the last record that fit is marked at once, with a DROPPED record of 1
   in the space every chunk keeps for it (BPT__KEPT_BYTES), after a context
   record when the chunk's records so far are another context's: the place
   of the loss is in the stream even if this thread never records again.
   The losses after it are counted by their context and marked, with a
   DROPPED record of their number in each context, in front of the next
   record that fits (bpt__lane_prepare). A context is a thread and its
   process: a thread record is reused after its thread exits (another
   thread then writes its lane), and bpt_process_switch changes the
   process, both possibly while the buffer is full. So every DROPPED record
   of a stream stands in the context that lost the records it counts, and
   those of a context add up to its losses, but the ones after its last
   record that fit. Past BPT__LOSS_CONTEXTS contexts losing records before
   one fits, the last one's count takes the rest: the sum stays exact. */
static void bpt__lane_lost(bpt__lane *lane, const bpt__thread *rec, uint64_t ticks) {
    bpt__owner_inc_u64(&lane->dropped, 1);
    if (lane->cur && lane->wp <= lane->wend) {   /* the kept space is free: this is the first */
        if (lane->ctx_tid != rec->tid || lane->ctx_process != rec->process)
            bpt__lane_context(lane, rec->tid, rec->process);
        lane->wp = bpt__put_small(lane->wp, BPT_MSG_DROPPED, 0, ticks, 1);
        lane->cur->marked += 1;
        /* [R2] pairs with the drainer's acquire of fill. */
        bpt__store_release_u32(&lane->cur->fill, (uint32_t)(lane->wp - bpt__chunk_data(lane->cur)));
        return;
    }
    bpt__lane_unreported(lane, rec->tid, rec->process, 1);
}

/* Is the lane's anchor too old for a record read at `ticks` (or younger
   than it: the counter went back)? Unsigned: both in one compare. */
BPT__HOT BPT__INTREGS int bpt__lane_anchor_stale(const bpt__lane *lane, uint64_t ticks) {
    return ticks - lane->anchor_tick > lane->anchor_span;
}

/* The rare cases before a record: a new chunk (the current one is full or
   there is none), which opens with a context record so that it can be read
   on its own; a context record where the thread or its process changed (a
   thread record is reused after its thread exits), or where the anchor is
   stale; the DROPPED records of losses since the last record that fit,
   each in the context that lost them (>>losses). Records that a signal
   handler's send lost while nested in this thread's (`lost`,
   bpt__session_send_nested) are counted here as losses of the thread's
   current context: marked at this record, the thread's first since that
   takes this way (a new chunk, a new context, or a stale anchor: within
   BPT__ANCHOR_US of its records). Returns 0 when the record must be
   dropped: the buffer is full. */
static int bpt__lane_prepare(bpt__session *s, bpt__lane *lane, const bpt__thread *rec, const bpt__rec *r,
                             uint32_t bytes) {
    uint64_t nested = bpt__load_relaxed_u64(&lane->lost) - lane->lost_marked;
    uint32_t i, room = bytes + BPT__CTX_BYTES;
    int fresh = 0;
    if (nested) {
        lane->lost_marked += nested;
        bpt__lane_unreported(lane, rec->tid, rec->process, nested);
    }
    room += lane->nunreported * BPT__KEPT_BYTES;   /* a context and a DROPPED record each */
    if (!lane->cur || lane->wp + room > lane->wend) {
        if (!bpt__lane_advance(s, lane)) {
            bpt__lane_lost(lane, rec, r->ticks);
            /* For a tool attached to bptrace:drop: the session, the thread,
               and the records this thread's buffer lost in all. */
            BPT_PROBE(bptrace, drop, s->id, rec->tid, bpt__load_relaxed_u64(&lane->dropped));
            return 0;
        }
        fresh = 1;   /* a chunk opens with a context record */
    }
    for (i = 0; i < lane->nunreported; i++) {
        const bpt__loss *u = &lane->unreported[i];
        if (fresh || lane->ctx_tid != u->tid || lane->ctx_process != u->process)
            bpt__lane_context(lane, u->tid, u->process);
        lane->wp = bpt__put_small(lane->wp, BPT_MSG_DROPPED, 0, r->ticks, u->n);
        lane->cur->marked += u->n;
        fresh = 0;
    }
    lane->nunreported = 0;
    if (fresh || lane->ctx_tid != rec->tid || lane->ctx_process != rec->process ||
        bpt__lane_anchor_stale(lane, r->ticks))
        bpt__lane_context(lane, rec->tid, rec->process);
    return 1;
}

/* >>fits: does a record of `bytes` go into the current chunk as it is:
   room, the same thread and process, an anchor young enough for its
   `ticks`? The compare of wp covers two more cases: no current chunk (wp
   and wend are then NULL: a lane starts zeroed, and a fork child's is
   reset so), and records lost since the last one that fit
   (bpt__lane_lost counts them in `unreported` only with no chunk, or once
   wp is past wend; bpt__lane_prepare, which counts a nested send's, marks
   them before it returns, or finds the record lost). Integers, not
   pointers: wp may be NULL. */
BPT__HOT BPT__INTREGS int bpt__lane_fits(const bpt__lane *lane, const bpt__thread *rec, uint64_t ticks,
                                         uint32_t bytes) {
    return BPT__LIKELY((uintptr_t)lane->wp + bytes <= (uintptr_t)lane->wend) &&
           BPT__LIKELY(lane->ctx_tid == rec->tid) && BPT__LIKELY(lane->ctx_process == rec->process) &&
           BPT__LIKELY(!bpt__lane_anchor_stale(lane, ticks));
}

/* The thread's lane in s, a session that buffers its records, if a record
   of at most `room` bytes read at `ticks` goes into its current chunk as
   it is (>>fits), else NULL: the common case of a send, for
   bpt__session_send and the call path (site_native.c), which then write
   the record at the lane's wp and publish it. Called with the thread's
   send marked (bpt__send_begin). */
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_room(bpt__session *s, const bpt__thread *rec, uint64_t ticks,
                                                uint32_t room) {
    bpt__lane *lane = bpt__lane_find(s, rec);
    if (BPT__LIKELY(lane != NULL) && BPT__LIKELY(bpt__lane_fits(lane, rec, ticks, room))) return lane;
    return NULL;
}

/* Publish the record of `bytes` just written at the lane's wp: move wp
   past it, count it, and release the chunk's new fill. */
BPT__HOT BPT__INTREGS void bpt__lane_publish(bpt__lane *lane, uint32_t bytes) {
    bpt__chunk *c = lane->cur;
    lane->wp += bytes;
    c->nrec++;
    bpt__owner_inc_u64(&lane->written, 1);
    /* [R2] pairs with the drainer's acquire of fill. */
    bpt__store_release_u32(&c->fill, (uint32_t)(lane->wp - bpt__chunk_data(c)));
}

/* Copy a record that fits (bpt__lane_fits) into the current chunk, and
   publish it: a copy of 16 to 40 bytes and one release store. */
BPT__HOT void bpt__lane_copy(bpt__lane *lane, const bpt__rec *r, uint32_t bytes) {
    unsigned char *p = lane->wp;
    /* Fixed-size copies (inlined), not one of variable size: gcc makes that
       a rep movsq, whose start-up was a quarter of this function's time for
       a call record of two arguments (3 words; perf, bench_overhead call). */
    memcpy(p, r, sizeof *r);
    switch (r->words) {
    case 0: break;
    case 1: memcpy(p + sizeof *r, r + 1, 8); break;
    case 2: memcpy(p + sizeof *r, r + 1, 16); break;
    case 3: memcpy(p + sizeof *r, r + 1, 24); break;
    case 4: memcpy(p + sizeof *r, r + 1, 32); break;
    default: memcpy(p + sizeof *r, r + 1, 8u * r->words);
    }
    bpt__lane_publish(lane, bytes);
}

/* Put one record into the lane: open a chunk, mark losses and contexts
   first where needed (bpt__lane_prepare), or drop it when the buffer is
   full. */
static void bpt__lane_put(bpt__session *s, bpt__lane *lane, const bpt__thread *rec, const bpt__rec *r) {
    uint32_t bytes = bpt__rec_bytes(r);
    if (!bpt__lane_fits(lane, rec, r->ticks, bytes) && !bpt__lane_prepare(s, lane, rec, r, bytes)) return;
    bpt__lane_copy(lane, r, bytes);
}

/* A callback tracer gets the record as a message, in the traced thread. */
static void bpt__tracer_call(bpt__session *s, bpt__lane *lane, bpt__thread *rec, const bpt__rec *r) {
    bpt__decoder d;
    bpt__stream st;
    bpt_msg m;
    bpt__decoder_live(&d, s->id);
    if (bpt__lane_anchor_stale(lane, r->ticks)) bpt__clock_anchor(&lane->anchor_tick, &lane->anchor_ns);
    bpt__stream_init(&st);
    st.tid = rec->tid;
    st.process = rec->process;
    st.anchored = 1;
    st.anchor_tick = lane->anchor_tick;
    st.anchor_ns = lane->anchor_ns;
    bpt__owner_inc_u64(&lane->written, 1);
    if (!bpt__rec_decode(&d, &st, r, &m)) return;
    rec->in_tracer++;
    s->tracer(&m, s->tracer_user);
    rec->in_tracer--;
    bpt__owner_inc_u64(&lane->delivered, 1);
}

/* A USDT session hands the record to its probe (probes.c), in the traced
   thread; the probe fires only while a tool is attached to it. */
static void bpt__usdt_call(bpt__session *s, bpt__lane *lane, bpt__thread *rec, const bpt__rec *r) {
    bpt__owner_inc_u64(&lane->written, 1);
    bpt__probe_event(s, rec, r);
    bpt__owner_inc_u64(&lane->delivered, 1);
}

/* A signal handler's send nested on its own thread's send: the lane may
   be mid-update, so the record is lost, and counted in the lane's `lost`,
   which the thread's next record marks (bpt__lane_prepare). With no lane
   yet (the interrupted send may be making it) the handler makes it: the
   interrupted send's CAS then finds it [R1] and frees its own, and the
   loss is marked as any other. Only with no memory for a lane is it
   counted in lost_laneless, unmarked (no stream to mark it in). */
BPT__NOINLINE void bpt__session_send_nested(bpt__session *s, const bpt__thread *rec) {
    bpt__lane *lane = bpt__lane_get(s, rec);
    if (lane)
        bpt__fetch_add_u64(&lane->lost, 1);
    else
        bpt__fetch_add_u64(&s->lost_laneless, 1);
}

/* Everything but a record that fits the thread's current chunk: the
   thread's first record in the session (its lane is made), a callback
   tracer, the USDT probes, a new chunk, a full buffer. Out of line, so
   that the common case below saves no registers for it. */
BPT__NOINLINE void bpt__session_send_slow(bpt__session *s, bpt__thread *rec, const bpt__rec *r) {
    bpt__lane *lane = bpt__lane_get(s, rec);
    if (!lane)   /* out of memory: the record is lost (counted), nothing else is */
        bpt__fetch_add_u64(&s->lost_laneless, 1);
    else if (s->tracer)
        bpt__tracer_call(s, lane, rec, r);
    else if (s->usdt)
        bpt__usdt_call(s, lane, rec, r);
    else
        bpt__lane_put(s, lane, rec, r);
}

/* [H1] A thread's send is marked while it touches its lane, so that a
   signal handler's send nested on it leaves the lane alone (its record is
   lost, and counted: bpt__session_send_nested). bpt__send_begin returns 0,
   marking nothing, when a send is open already. */
BPT__HOT BPT__INTREGS int bpt__send_begin(bpt__thread *rec) {
    if (BPT__UNLIKELY(rec->sending)) return 0;
    rec->sending = 1;
    bpt__compiler_barrier();   /* [H1] set before the lane is touched, as a signal handler sees it */
    return 1;
}
BPT__HOT BPT__INTREGS void bpt__send_end(bpt__thread *rec) {
    bpt__compiler_barrier();   /* [H1] cleared after the lane's last store */
    rec->sending = 0;
}

/* Hand one record to the session's tracer. Called pinned, from the hit
   path. The common case, inline: the thread's lane exists, the session
   buffers its records, and the record fits the current chunk. */
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt__rec *r) {
    bpt__lane *lane;
    uint32_t bytes = bpt__rec_bytes(r);
    if (!bpt__send_begin(rec)) {   /* a signal handler nested on this thread's send */
        bpt__session_send_nested(s, rec);
        return;
    }
    if (BPT__LIKELY(s->buffered) && (lane = bpt__lane_room(s, rec, r->ticks, bytes)) != NULL)
        bpt__lane_copy(lane, r, bytes);
    else
        bpt__session_send_slow(s, rec, r);
    bpt__send_end(rec);
}

/* Count a message against the rate limit; returns the count before it.
   Without a window: one more of all. With one: one more in the current
   window. The windows are numbered from window_base, and the word holds
   the current one's number (its low 32 bits) and count (saturating), so
   that one CAS both moves to a later window, counting from 0, and counts:
   a message never counts in a window that is over, nor is wiped from the
   current one. (A CAS of the start, then a store of the count, let a
   message between the two add to the old count, or be wiped: found by
   review; t_rate_window.) Only a later number starts a window: a message
   whose number is behind (its core's clock a little behind another's, or
   read before another message moved the window on) counts in the current
   one, compared by the signed difference. */
static uint64_t bpt__rate_count(bpt__session *s) {
    int64_t since;
    uint32_t at;
    uint64_t w;
    if (!s->rate_window_ns) return bpt__fetch_add_u64(&s->window, 1);
    since = (int64_t)(bpt__now_ns() - s->window_base);   /* < 0: this clock is behind the creator's */
    at = since > 0 ? (uint32_t)((uint64_t)since / s->rate_window_ns) : 0;
    for (w = bpt__load_relaxed_u64(&s->window);; w = bpt__load_relaxed_u64(&s->window)) {
        uint32_t cur = (uint32_t)(w >> 32), n = (uint32_t)w;
        if ((int32_t)(at - cur) > 0) {   /* a later window */
            cur = at;
            n = 0;
        }
        BPT_TEST_POINT("admit: window read, not yet counted");   /* t_rate_window */
        if (bpt__cas_u64(&s->window, w, (uint64_t)cur << 32 | (n + (n != UINT32_MAX)))) return n;
    }
}

/* recon_trace's rule: at most rate_max messages (per window, if one is set);
   past it the session stops tracing and says so once: the message whose
   count passed rate_max trips it. Returns 1 to send. */
static int bpt__session_admit_limited(bpt__session *s, bpt__thread *rec) {
    if (bpt__load_relaxed_u32(&s->limit_tripped)) {
        bpt__fetch_add_u64(&s->limited, 1);
        return 0;
    }
    if (bpt__rate_count(s) < s->rate_max) return 1;
    bpt__fetch_add_u64(&s->limited, 1);
    if (bpt__cas_u32(&s->limit_tripped, 0, 1)) {
        bpt__recbuf b;
        b.h.ticks = bpt__now_ticks();
        b.h.type = BPT_MSG_LIMIT;
        b.h.words = 1;
        b.h.info = 0;
        b.h.id = 0;
        b.w[0] = s->rate_max;
        bpt__session_send(s, rec, &b.h);
    }
    return 0;
}

/* The common case inline: no limit set. */
BPT__HOT int bpt__session_admit(bpt__session *s, bpt__thread *rec) {
    return s->rate_max ? bpt__session_admit_limited(s, rec) : 1;
}

/* >>wait: a drainer sleeps until a chunk is sealed (bpt_session_wait), as
   LTTng-UST's consumer wakes at a sub-buffer switch instead of polling.

   [W1] The producer counts the seal, then looks for sleepers; the drainer
   counts itself a sleeper, then looks for sealed chunks and sleeps only
   while the count is the one it read. Each side's store comes before its
   load, with a full fence between (Dekker's pattern): at least one of the
   two sees the other's store. Either the producer sees the sleeper and
   wakes it, or the drainer sees the sealed chunk (or futex_wait finds the
   count changed) and does not sleep. The seal costs a locked add and a
   fence once per chunk, and a futex wake only when a drainer sleeps.
   A destroy counts and wakes too, after it set dead [S2]: a drainer whose
   count (acquire) holds the destroy's sees dead, and does not sleep. The
   words are the slot's (bpt__sessions.wake), which outlive the session:
   the drainer sleeps unpinned, while a destroy may free the session. */
BPT__PRIVATE void bpt__session_wake(bpt__session *s) {
    bpt__wake_words *w = &bpt__sessions.wake[bpt__session_slot(s->id)];
    bpt__fetch_add_u32(&w->sealed, 1);
    bpt__fence_seq_cst();   /* [W1] the count before the look for sleepers */
    if (bpt__load_relaxed_u32(&w->sleepers)) bpt__futex_wake(&w->sealed, INT_MAX);
}

/* Does a lane of s hold a sealed chunk not yet read? */
static int bpt__session_sealed_waiting(bpt__session *s) {
    uint32_t i, n = bpt__threads_count();
    for (i = 0; i < n; i++) {
        bpt__lane *lane = bpt__lane_at(s, i);
        if (lane && lane->chunks &&   /* a chunk before the open one is unread */
            bpt__load_acquire_u64(&lane->opened) > (bpt__load_acquire_u64(&lane->tail) >> 1) + 1)   /* [R2] [R3] */
            return 1;
    }
    return 0;
}

int bpt_session_wait(bpt_session handle, uint32_t timeout_us) {
    bpt__thread *self = bpt__thread_self_or_null(), *rec;
    bpt__session *s;
    bpt__wake_words *w;
    uint32_t seen;
    int rc, ready, gone;
    if (self && self->in_tracer) return bpt__fail(BPT_EDEADLK, "bpt_session_wait: called from inside a tracer callback");
    if (bpt__thread_pinned(self))
        return bpt__fail(BPT_EDEADLK, "bpt_session_wait: called while pinned: no thread progress while it sleeps");
    if (!(s = bpt__session_pin(handle, "bpt_session_wait", &rec, &rc))) return rc;
    if (!bpt__session_buffered(s)) {
        bpt__unpin(rec);
        return bpt__fail(BPT_EINVAL, "bpt_session_wait: session %llu has a callback tracer or sends to "
                         "USDT probes: nothing to drain",
                         (unsigned long long)handle.id);
    }
    w = &bpt__sessions.wake[bpt__session_slot(s->id)];   /* the slot's: it outlives s */
    seen = bpt__load_acquire_u32(&w->sealed);   /* [W1] pairs with the destroy's count, after its dead */
    bpt__fetch_add_u32(&w->sleepers, 1);
    bpt__fence_seq_cst();   /* [W1] counted a sleeper before the look for sealed chunks */
    ready = bpt__session_sealed_waiting(s);
    gone = (int)bpt__load_relaxed_u32(&s->dead);   /* a destroy counted in seen: no sleep */
    /* Unpinned while asleep: a destroy may free s meanwhile. The sleep is
       on the slot's word, never freed, which the destroy counts and wakes;
       a wake from a later session of the slot is a spurious one. (It was
       s's own: a destroy in this gap freed it before the sleep, which read
       freed memory, and slept its whole timeout where a new session had
       zeroed it: found by review; t_session_wait_destroy.) */
    bpt__unpin(rec);
    BPT_TEST_POINT("wait: unpinned, not yet asleep");   /* t_session_wait_destroy destroys here */
    if (!ready && !gone && timeout_us) {
        bpt__block_begin(rec);
        bpt__futex_wait_us(&w->sealed, seen, timeout_us);
        bpt__block_end(rec);
    }
    bpt__fetch_add_u32(&w->sleepers, (uint32_t)-1);   /* whether or not s lives on */
    /* s again only if it is still the live session of handle. */
    if (!(s = bpt__session_pin(handle, "bpt_session_wait", &rec, &rc))) return rc;
    ready = ready || bpt__session_sealed_waiting(s);
    bpt__unpin(rec);
    return ready;
}

/* >>consumer: the drainer reads lanes */

/* A flight recorder's overwritten records (unreported_overwritten),
   announced with rd->gap where the reader resumes, in chunk c whose fill
   is `fill`: after the context record that opens c when the reader stands
   at its start (every chunk opens with one), so that the notice stands in
   the thread and process the stream resumes with, at that record's time,
   not in the decoding state of whatever was read last (nothing, at a
   drain's first read of a wrapped lane). Nothing yet when c is still
   empty. Returns 0 when the reader is full. */
static int bpt__lane_read_gap(bpt__lane *lane, bpt__lane_reader *rd, bpt__chunk *c, uint32_t fill) {
    const bpt__rec *r = (const bpt__rec *)(const void *)bpt__chunk_data(c);
    if (lane->rpos == 0) {
        uint32_t bytes;
        if (fill == 0) return 1;   /* c is opened, its first records not yet published: next time */
        if (r->type == BPT__REC_CONTEXT) {
            bytes = bpt__rec_bytes(r);
            if (rd->take(rd, lane, (const unsigned char *)r, bytes) < bytes) return 0;
            lane->rpos = bytes;
            lane->rctx = 0;
            lane->last_ticks = r->ticks;
        }
    }
    if (!rd->gap(rd, lane, lane->unreported_overwritten, lane->last_ticks)) return 0;
    lane->unreported_overwritten = 0;
    return 1;
}

/* rd takes up the lane where another reader stopped (lane->rreader): a
   second trace file after the first (rotation, or a new writer after
   BPT_EIO), or a drain after a write, or a write after a drain. Past
   chunk c's start, the context record in effect (the thread, process and
   clock anchor of the records at rpos) went to the other reader's stream,
   and this one would read the records as thread 0, process 0, stamped
   from the calibration (found by review; t_tracefile_rotate). So rd gets
   a copy of it first: the last context record read in c, at rctx (every
   chunk opens with one, bpt__lane_prepare, so a read past c's start has
   read one). c stays put while the reader holds the tail's BUSY bit
   [R3]. At a chunk's start rd reads the chunk's own. Returns 0 when rd is
   full (nothing changed: the next read gives it again). */
static int bpt__lane_read_resume(bpt__lane *lane, bpt__lane_reader *rd, bpt__chunk *c) {
    if (lane->rreader != rd->id && lane->rpos > 0) {
        const bpt__rec *r = (const bpt__rec *)(const void *)(bpt__chunk_data(c) + lane->rctx);
        uint32_t bytes = bpt__rec_bytes(r);
        if (rd->take(rd, lane, (const unsigned char *)r, bytes) < bytes) return 0;
    }
    lane->rreader = rd->id;
    return 1;
}

/* Count n records read from lane, in the lane and in the reader. */
static void bpt__lane_read_count(bpt__lane *lane, bpt__lane_reader *rd, uint64_t n) {
    bpt__owner_inc_u64(&lane->drained, n);   /* one drainer at a time (drain_lock) */
    rd->records += n;
}

/* Read lane's undrained records: rd->take gets each run of whole records,
   in order, and says how many bytes of it it used (it may stop short: its
   room is full); rd->gap gets the records a flight recorder took back
   before the next run (bpt__lane_read_gap). Holds the tail's BUSY bit
   throughout; a flight recorder's producer that finds it busy, and not
   moved, drops rather than waits. Returns 0, or 1 when the reader is full.
   The read ends at the chunks opened when it began: a producer that
   writes as fast as the reader reads would otherwise keep it in this
   lane, and the other lanes, unread, would grow. And each chunk read to
   its end is handed back at once, by a release of the tail that keeps the
   BUSY bit [R3]: the producer reuses it while the read goes on. (The tail
   moved only when the read ended: a long read, e.g. of a lane that had
   grown while the drainer waited for a CPU, left the producer no chunk to
   reuse, so its lane grew by the whole read, every new chunk a page fault
   on the hot path: bench section 2's buffers grew to 47 MiB, and its run
   took 1.4x as long. t_drain_handback.) */
static int bpt__lane_read(bpt__lane *lane, bpt__lane_reader *rd) {
    uint64_t t = bpt__load_acquire_u64(&lane->tail), i, end, drained = 0;   /* [R3] */
    int full = 0;
    if ((t & BPT__TAIL_BUSY) || !bpt__cas_u64(&lane->tail, t, t | BPT__TAIL_BUSY))
        return 0;   /* a flight recorder is taking its oldest chunk back: next time */
    i = t >> 1;
    end = bpt__load_acquire_u64(&lane->opened);   /* [R2] first: a chunk sealed by then has its final fill */
    for (;;) {
        bpt__chunk *c;
        uint32_t fill;
        if (i >= end) break;   /* no chunk opened since the last read (or none yet) */
        c = bpt__lane_chunk(lane, i);
        fill = bpt__load_acquire_u32(&c->fill);   /* [R2] pairs with the producer's release */
        if ((lane->unreported_overwritten || lane->rpos < fill) && !bpt__lane_read_resume(lane, rd, c))
            goto out_full;   /* only with something to read: a lane with nothing new stays the other's */
        if (lane->unreported_overwritten && !bpt__lane_read_gap(lane, rd, c, fill)) goto out_full;
        if (lane->rpos < fill) {
            const unsigned char *p = bpt__chunk_data(c) + lane->rpos, *q;
            uint32_t used = rd->take(rd, lane, p, fill - lane->rpos);
            for (q = p; q < p + used; q += bpt__rec_bytes((const bpt__rec *)(const void *)q)) {
                const bpt__rec *r = (const bpt__rec *)(const void *)q;
                if (r->type == BPT_MSG_DROPPED) {   /* counted in c->marked: read, not overwritten news */
                    uint64_t n;
                    memcpy(&n, r + 1, 8);
                    lane->rmarked += n;
                } else if (r->type == BPT__REC_CONTEXT) {
                    lane->rctx = (uint32_t)(q - bpt__chunk_data(c));   /* in effect from here on */
                } else {
                    lane->rrec++;
                    drained++;
                }
                lane->last_ticks = r->ticks;
            }
            lane->rpos += used;
            if (lane->rpos < fill) goto out_full;
        }
        if (i + 1 >= end) break;   /* the last chunk opened when the read began: up to its fill */
        i++;
        lane->rpos = lane->rrec = 0;
        lane->rmarked = 0;
        bpt__lane_read_count(lane, rd, drained);
        drained = 0;
        bpt__store_release_u64(&lane->tail, i << 1 | BPT__TAIL_BUSY);   /* [R3] chunk i - 1 is read: reusable */
        BPT_TEST_POINT("lane_read: a chunk handed back, the read goes on");   /* t_drain_handback */
    }
    goto out;
out_full:
    full = 1;
out:
    bpt__lane_read_count(lane, rd, drained);
    bpt__store_release_u64(&lane->tail, i << 1);   /* [R3] pairs with the producer's acquire of tail */
    return full;
}

/* Every lane of s through rd, under the drain lock (the caller holds it),
   in turn: a read that fills rd stops in some lane, and the next read
   starts at the lane after it. Each read started at lane 0, so a thread
   whose records filled every read starved the others, whose buffers
   filled and dropped while the drainer kept up (found by review;
   t_drain_turns). */
BPT__PRIVATE void bpt__session_read(bpt__session *s, bpt__lane_reader *rd) {
    uint32_t k, n = bpt__threads_count(), start = s->read_next < n ? s->read_next : 0;
    if (!bpt__session_buffered(s)) return;   /* a callback or USDT session's lanes hold no records */
    for (k = 0; k < n; k++) {
        uint32_t i = start + k < n ? start + k : start + k - n;
        bpt__lane *lane = bpt__lane_at(s, i);
        if (lane && bpt__lane_read(lane, rd)) {
            s->read_next = i + 1;   /* its rest comes after the other lanes' */
            return;
        }
    }
}

BPT__PRIVATE uint64_t bpt__lane_number(const bpt__lane *lane) { return lane->number; }
BPT__PRIVATE bpt__stream *bpt__lane_stream(bpt__lane *lane) { return &lane->stream; }

/* A lane's cap: desc's max_chunks, or by default what 64 MiB holds
   (never fewer than it starts with, never more than 65536); a flight
   recorder's buffer does not grow. */
static uint32_t bpt__session_max_chunks(const bpt_session_desc *d, uint32_t chunks, uint32_t chunk_bytes) {
    uint32_t grown = (64u << 20) / chunk_bytes;
    if (d->flight_recorder) return chunks;
    if (d->max_chunks) return d->max_chunks;
    return grown < chunks ? chunks : grown > 65536 ? 65536 : grown;
}

/* Build a session from its desc (validated by the caller). */
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out) {
    bpt__session *s = (bpt__session *)BPT_MALLOC(sizeof *s);
    int i;
    if (!s) return bpt__fail(BPT_ENOMEM, "bpt_session_create: no memory for the session");
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", d->name ? d->name : "session");
    s->tracer = d->tracer;
    s->tracer_user = d->tracer_user;
    s->usdt = d->usdt != 0;
    s->buffered = !s->tracer && !s->usdt;
    s->chunk_bytes = d->chunk_bytes ? d->chunk_bytes : 16384;
    s->chunks = d->chunks ? d->chunks : 16;
    s->flight_recorder = d->flight_recorder != 0;
    s->max_chunks = bpt__session_max_chunks(d, s->chunks, s->chunk_bytes);
    s->time_cpu = d->time_cpu != 0;
    s->rate_max = d->rate_max;
    s->rate_window_ns = (uint64_t)d->rate_per_ms * 1000000u;
    for (i = 0; i < BPT__LANE_DIRS; i++) bpt__store_relaxed_ptr(&s->lane_dir[i], NULL);
    s->window_base = bpt__now_ns();
    pthread_mutex_init(&s->drain_lock, NULL);
    *out = s;
    return 0;
}

/* Free a session that no thread can reach any more (after a wait). */
BPT__PRIVATE void bpt__session_free(bpt__session *s) {
    int i, k;
    for (i = 0; i < BPT__LANE_DIRS; i++) {
        bpt__atomic_ptr *dir = (bpt__atomic_ptr *)bpt__load_relaxed_ptr(&s->lane_dir[i]);
        if (!dir) continue;
        for (k = 0; k < BPT__LANES_PER_DIR; k++) {
            bpt__lane *lane = (bpt__lane *)bpt__load_relaxed_ptr(&dir[k]);
            if (lane) bpt__lane_free(lane);
        }
        BPT_HIT_UNMAP((void *)dir, BPT__LANES_PER_DIR * sizeof *dir);
    }
    pthread_mutex_destroy(&s->drain_lock);
    BPT_FREE(s);
}

/* Pin, then find the session of handle. Returns it, pinned (*rec), or NULL
   after bpt__fail (BPT_ENOMEM: no thread record; BPT_ESESSION), unpinned.
   Pinned, a concurrent destroy frees the session only after the caller
   unpins. */
BPT__PRIVATE bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc) {
    bpt__session *s;
    if (!(*rec = bpt__pin())) {
        *rc = bpt__fail(BPT_ENOMEM, "%s: no memory for the thread record", who);
        return NULL;
    }
    if (!(s = bpt__session_lookup(handle.id))) {
        bpt__unpin(*rec);
        *rc = bpt__fail(BPT_ESESSION, "%s: session %llu is not alive", who, (unsigned long long)handle.id);
    }
    return s;
}

/* The drain's reader: decode records into the caller's messages. */
typedef struct bpt__drain_reader {
    bpt__lane_reader rd;
    bpt__decoder dec;
    bpt_msg *out;
    int n, max;
} bpt__drain_reader;

static uint32_t bpt__drain_take(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes) {
    bpt__drain_reader *dr = (bpt__drain_reader *)(void *)rd;
    uint32_t used = 0;
    while (used < bytes) {
        const bpt__rec *r = (const bpt__rec *)(const void *)(p + used);
        if (r->type != BPT__REC_CONTEXT && dr->n == dr->max) break;
        dr->n += bpt__rec_decode(&dr->dec, bpt__lane_stream(lane), r, &dr->out[dr->n]);
        used += bpt__rec_bytes(r);
    }
    return used;
}

static int bpt__drain_gap(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks) {
    bpt__drain_reader *dr = (bpt__drain_reader *)(void *)rd;
    bpt__stream *st = bpt__lane_stream(lane);
    bpt_msg *m;
    if (dr->n == dr->max) return 0;
    m = &dr->out[dr->n++];
    memset(m, 0, sizeof *m);
    bpt__msg_header(m, BPT_MSG_DROPPED, st->tid, st->process, bpt__stream_ns(&dr->dec, st, ticks), dr->dec.session);
    m->value = count;
    return 1;
}

int bpt_session_drain(bpt_session handle, bpt_msg *out, int max) {
    bpt__drain_reader dr;
    bpt__thread *rec;
    bpt__session *s;
    int rc;
    if (max < 0 || (max > 0 && !out))
        return bpt__fail(BPT_EINVAL, "bpt_session_drain: out is NULL or max (%d) < 0", max);
    if (!(s = bpt__session_pin(handle, "bpt_session_drain", &rec, &rc))) return rc;
    dr.rd.take = bpt__drain_take;
    dr.rd.gap = bpt__drain_gap;
    dr.rd.records = 0;
    dr.rd.id = BPT__READER_DRAIN;   /* every drain decodes into the lanes' own streams */
    bpt__decoder_live(&dr.dec, s->id);
    dr.out = out;
    dr.n = 0;
    dr.max = max;
    pthread_mutex_lock(&s->drain_lock);
    if (max > 0) bpt__session_read(s, &dr.rd);
    pthread_mutex_unlock(&s->drain_lock);
    bpt__unpin(rec);
    return dr.n;
}

int bpt_session_stats(bpt_session handle, bpt_session_counts *out) {
    bpt__thread *rec;
    bpt__session *s;
    uint32_t i, n;
    uint64_t written = 0, overwritten = 0, drained = 0, chunks = 0;
    int rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_stats: out is NULL");
    if (!(s = bpt__session_pin(handle, "bpt_session_stats", &rec, &rc))) return rc;
    memset(out, 0, sizeof *out);
    n = bpt__threads_count();
    for (i = 0; i < n; i++) {
        bpt__lane *lane = bpt__lane_at(s, i);
        uint64_t lost;
        if (!lane) continue;
        /* What was read first, then what was taken back, then what was
           written: each record of the first two is in the third, so pending
           stays whole while threads trace (on x86-64 exactly; elsewhere the
           loads may pass each other, hence the guard below). */
        drained += bpt__load_acquire_u64(&lane->drained) + bpt__load_acquire_u64(&lane->delivered);
        overwritten += bpt__load_acquire_u64(&lane->overwritten);
        written += bpt__load_acquire_u64(&lane->written);
        lost = bpt__load_relaxed_u64(&lane->dropped) + bpt__load_relaxed_u64(&lane->lost);
        chunks += bpt__load_relaxed_u32(&lane->budget);
        out->produced += lost;
        out->dropped += lost;
        out->threads++;
    }
    out->produced += written + bpt__load_relaxed_u64(&s->lost_laneless);
    out->dropped += overwritten + bpt__load_relaxed_u64(&s->lost_laneless);
    out->overwritten = overwritten;
    out->chunks = chunks;
    out->buffer_bytes = chunks * s->chunk_bytes;
    out->delivered = drained;
    /* Read while threads trace, the counters are not one snapshot: pending
       is what the others leave, never below 0. */
    out->pending = written > overwritten + drained ? written - overwritten - drained : 0;
    out->limited = bpt__load_relaxed_u64(&s->limited);
    out->frames_skipped = bpt__load_relaxed_u64(&s->frames_skipped);
    out->limit_tripped = (int)bpt__load_relaxed_u32(&s->limit_tripped);
    memcpy(out->name, s->name, sizeof out->name);
    bpt__unpin(rec);
    return 0;
}
/*** End of session.c ***/

/*** Begin file probes.c ***/
/* probes.c: the USDT probes of a USDT session (OTP's dyntrace tracer: a
   session whose events go to probes, not to a buffer) and bpt_user_trace
   (dyntrace:p/1..8). The other bptrace probes stand in the parts whose
   events they mark (bp.c step, trace_pattern.c pattern__*, session_life.c
   session__*, progress.c progress__wait__*, session.c drop), each a
   BPT_PROBE; api_probes.h writes the sites. examples/bptrace.d lists them.

   A USDT session's events fire from one site per probe, so that the
   site's semaphore says whether a tool is attached to that probe: with
   none, the record is not even decoded. */

#if BPT_PROBES
/* A site of 8 arguments: user_trace, OTP's shape (i4s4). Every other probe
   has at most 6, all that bpftrace (0.17, Debian 12) reads on x86-64. */
#  define BPT__SDT_FIRE8(p, n, a1, a2, a3, a4, a5, a6, a7, a8) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4 8@%5 8@%6 8@%7") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5), \
                         BPT__SDT_ARG(a6), BPT__SDT_ARG(a7), BPT__SDT_ARG(a8) : "memory")

/* The first argument of a decoded call as a probe word: a copied string's
   address (valid while the probe runs), the bits of a double, or the
   integer; 0 when the call has none. */
static uint64_t bpt__probe_arg0(const bpt_msg *m) {
    if (m->nargs == 0) return 0;
    if (m->argtype[0] == BPT_ARG_STR) return (uint64_t)(uintptr_t)(m->str + m->args[0]);
    return m->args[0];
}

/* The record as a message (names from the live table). 0: unreadable. */
static int bpt__probe_decode(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r, bpt_msg *m) {
    bpt__decoder d;
    bpt__stream st;
    bpt__decoder_live(&d, s->id);
    bpt__stream_init(&st);   /* no anchor: ts_ns is not a probe argument */
    st.tid = rec->tid;
    st.process = rec->process;
    return bpt__rec_decode(&d, &st, r, m);
}
#endif

/* A USDT session's record, to its probe, if a tool is attached to it.
   Every event probe has six arguments: the thread, the function's entry
   address (0: a VM function), module, name, arity, and one word:
     call        the first argument (a string: its address; 0: none)
     return      the return value (as the match spec's ret type says; a
                 string: the address of its copy)
     exception   the exception_from message's value
     return_to   the return address (native; 0: VM)
   Other records (a rate limit's notice) have no probe. Pinned, in the
   traced thread. */
BPT__PRIVATE void bpt__probe_event(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r) {
#if BPT_PROBES
    unsigned long on;
    bpt_msg m;
    uint64_t addr;
    switch (r->type) {   /* attached? (one load; nothing else is done while none is) */
    case BPT_MSG_CALL: BPT__SDT_SEM_LOAD(bptrace, call, on); break;
    case BPT_MSG_RETURN_FROM: BPT__SDT_SEM_LOAD(bptrace, return, on); break;
    case BPT_MSG_EXCEPTION_FROM: BPT__SDT_SEM_LOAD(bptrace, exception, on); break;
    case BPT_MSG_RETURN_TO: BPT__SDT_SEM_LOAD(bptrace, return_to, on); break;
    default: return;
    }
    if (!on) return;
    if (!bpt__probe_decode(s, rec, r, &m)) return;
    addr = bpt__names_addr(r->id);
    switch (r->type) {
    case BPT_MSG_CALL:
        BPT__SDT_FIRE6(bptrace, call, m.thread, addr, m.module, m.name, m.arity,
                       bpt__probe_arg0(&m));
        break;
    case BPT_MSG_RETURN_FROM:
        BPT__SDT_FIRE6(bptrace, return, m.thread, addr, m.module, m.name, m.arity,
                       m.value_type == BPT_ARG_STR ? (uint64_t)(uintptr_t)m.str : m.value);
        break;
    case BPT_MSG_EXCEPTION_FROM:
        BPT__SDT_FIRE6(bptrace, exception, m.thread, addr, m.module, m.name, m.arity,
                       m.value);
        break;
    default:   /* BPT_MSG_RETURN_TO */
        BPT__SDT_FIRE6(bptrace, return_to, m.thread, addr, m.module, m.name, m.arity,
                       m.caller);
        break;
    }
#else
    (void)s; (void)rec; (void)r;   /* no USDT session is ever created */
#endif
}

void bpt_user_trace(int64_t i1, int64_t i2, int64_t i3, int64_t i4,
                    const char *s1, const char *s2, const char *s3, const char *s4) {
#if BPT_PROBES
    unsigned long on;
    BPT__SDT_SEM_LOAD(bptrace, user_trace, on);
    if (on) BPT__SDT_FIRE8(bptrace, user_trace, i1, i2, i3, i4, s1, s2, s3, s4);
#else
    (void)i1; (void)i2; (void)i3; (void)i4; (void)s1; (void)s2; (void)s3; (void)s4;
#endif
}
/*** End of probes.c ***/

/*** Begin file pattern.c ***/
/* pattern.c: trace patterns ("module:function/arity" with globs) and match
   specs, as erlang:trace_pattern/3 takes them. Set path only. */

/* Copy one part of a pattern; '_' alone means any, as '*'. */
static int bpt__pattern_part(char *dst, const char *src, size_t len, const char *what, const char *text) {
    if (len == 0)
        return bpt__fail(BPT_EPATTERN, "'%s': the %s is empty", text, what);
    if (len > BPT__NAME_MAX)
        return bpt__fail(BPT_EPATTERN, "'%s': the %s is longer than %d bytes", text, what, BPT__NAME_MAX);
    if (len == 1 && src[0] == '_') { strcpy(dst, "*"); return 0; }
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

/* Parse "module:function/arity". Errors: BPT_EINVAL (NULL), BPT_EPATTERN,
   with bpt_last_error() saying which part is wrong. */
BPT__PRIVATE int bpt__pattern_parse(const char *text, bpt__mfa *out) {
    const char *colon, *slash, *a;
    int rc, arity = 0;
    if (!text) return bpt__fail(BPT_EINVAL, "the pattern is NULL");
    if (!*text) return bpt__fail(BPT_EPATTERN, "the pattern is empty (expected module:function/arity)");
    colon = strchr(text, ':');
    if (!colon) return bpt__fail(BPT_EPATTERN, "'%s' has no ':' (expected module:function/arity)", text);
    slash = strchr(colon + 1, '/');
    if (!slash) return bpt__fail(BPT_EPATTERN, "'%s' has no '/arity'", text);
    if (strchr(slash + 1, '/'))   /* a ':' after the first is the function's: "game::step(long)" */
        return bpt__fail(BPT_EPATTERN, "'%s' has more than one '/'", text);
    if ((rc = bpt__pattern_part(out->module, text, (size_t)(colon - text), "module", text)) < 0) return rc;
    if ((rc = bpt__pattern_part(out->function, colon + 1, (size_t)(slash - colon - 1), "function", text)) < 0) return rc;
    a = slash + 1;
    if ((a[0] == '_' || a[0] == '*') && a[1] == '\0') { out->arity = -1; return 0; }
    if (!*a) return bpt__fail(BPT_EPATTERN, "'%s': the arity is empty (use '_' for any)", text);
    for (; *a; a++) {
        if (*a < '0' || *a > '9' || arity > 255)
            return bpt__fail(BPT_EPATTERN, "'%s': the arity must be 0..255 or '_'", text);
        arity = arity * 10 + (*a - '0');
    }
    if (arity > 255) return bpt__fail(BPT_EPATTERN, "'%s': the arity must be 0..255 or '_'", text);
    out->arity = arity;
    return 0;
}

/* Glob match: '*' matches any run, everything else itself. Iterative, with
   one backtrack point: linear in practice, never recursive. A pattern that
   ends in '*' matches the rest of s at once: "*" and "prefix*" are the
   common patterns, and bpt_trace_pattern matches every registered name. */
BPT__PRIVATE int bpt__glob(const char *p, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            while (*p == '*') p++;
            if (!*p) return 1;   /* a trailing '*' takes the rest */
            star = p - 1;
            resume = s;
        } else if (*p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++resume; }
        else return 0;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

BPT__PRIVATE int bpt__mfa_match(const bpt__mfa *p, const char *module, const char *name, int arity) {
    return (p->arity < 0 || p->arity == arity) && bpt__glob(p->module, module) && bpt__glob(p->function, name);
}

BPT__PRIVATE int bpt__flags_check(unsigned flags) {
    unsigned how = flags & BPT__HOWS, kinds = flags & BPT__KINDS;
    if (flags & ~(BPT__KINDS | BPT__HOWS | BPT__CALL_ACTIONS))
        return bpt__fail(BPT_EFLAGS, "unknown flag bits 0x%x", flags & ~(BPT__KINDS | BPT__HOWS | BPT__CALL_ACTIONS));
    if ((flags & BPT__CALL_ACTIONS) && (!(kinds & BPT_CALL) || how != 0))
        return bpt__fail(BPT_EFLAGS, "BPT_RETURN, BPT_EXCEPTION, BPT_RETURN_TO and BPT_CALLER go with "
                         "BPT_CALL switched on (they are call-trace match spec actions)");
    if (how & (how - 1))
        return bpt__fail(BPT_EFLAGS, "at most one of BPT_OFF, BPT_PAUSE, BPT_RESTART");
    if ((how & (BPT_PAUSE | BPT_RESTART)) && (!kinds || (kinds & BPT_CALL)))
        return bpt__fail(BPT_EFLAGS, "BPT_PAUSE and BPT_RESTART apply to BPT_COUNT, BPT_TIME and BPT_MEMORY");
    if (!kinds && how != BPT_OFF)
        return bpt__fail(BPT_EFLAGS, "no kind given (BPT_CALL, BPT_COUNT, BPT_TIME, BPT_MEMORY)");
    return 0;
}

/* Parse a list of types, "i64,ptr,str,f64": an argument spec (uftrace -A)
   or a ret spec (uftrace -R), which `what` names in the error message.
   Returns the count or BPT_EPATTERN. */
BPT__PRIVATE int bpt__argspec_parse(const char *what, const char *text, uint8_t *types) {
    static const char *const names[] = { "i64", "u64", "ptr", "str", "f64" };
    const char *p = text;
    int n = 0, k;
    while (*p) {
        size_t len = strcspn(p, ",");
        for (k = 0; k < 5; k++)
            if (len == 3 && strncmp(p, names[k], 3) == 0) break;
        if (k == 5)
            return bpt__fail(BPT_EPATTERN, "%s '%s': '%.*s' is not one of i64, u64, ptr, str, f64",
                             what, text, (int)len, p);
        if (n == BPT_MAX_ARGS)
            return bpt__fail(BPT_EPATTERN, "%s '%s': more than %d types", what, text, BPT_MAX_ARGS);
        types[n++] = (uint8_t)k;
        p += len;
        if (*p == ',' && *++p == '\0')
            return bpt__fail(BPT_EPATTERN, "%s '%s' ends with ','", what, text);
    }
    return n;
}

/* A new match spec with one reference in *out: m (NULL: match every call)
   plus the actions `extra` (BPT_RETURN & co. given as pattern flags),
   without its message yet (bpt__ms_message).
   Returns 0, BPT_EPATTERN (a bad argument or ret spec), BPT_EFLAGS (unknown
   action bits) or BPT_ENOMEM. */
BPT__PRIVATE int bpt__ms_new(const bpt_match *m, unsigned extra, bpt__ms **out) {
    static bpt_match none;   /* all zero, never written (not const: C++ wants a const initialised) */
    uint8_t spec[BPT_MAX_ARGS], ret[BPT_MAX_ARGS];
    int nspec, nret = 0;
    bpt__ms *ms;
    if (!m) m = &none;
    if (m->actions & ~(unsigned)(BPT_MS_SILENT | BPT__CALL_ACTIONS))
        return bpt__fail(BPT_EFLAGS, "bpt_match.actions: unknown bits 0x%x",
                         m->actions & ~(unsigned)(BPT_MS_SILENT | BPT__CALL_ACTIONS));
    nspec = m->args ? bpt__argspec_parse("argument spec", m->args, spec) : 0;
    if (nspec < 0) return nspec;
    if (m->ret && (nret = bpt__argspec_parse("ret spec", m->ret, ret)) != 1)
        return nret < 0 ? nret : bpt__fail(BPT_EPATTERN, "ret spec '%s': give exactly one type", m->ret);
    if (!(ms = (bpt__ms *)BPT_MALLOC(sizeof *ms)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for the match spec");
    ms->pred = m->pred;
    ms->user = m->user;
    ms->actions = m->actions | extra;
    ms->rettype = nret ? ret[0] : (uint8_t)BPT_ARG_I64;
    ms->message = NULL;
    ms->message_id = 0;
    ms->nspec = nspec;
    memcpy(ms->spec, spec, sizeof spec);
    ms->refc = 1;
    *out = ms;
    return 0;
}

/* Give ms its message (NULL: none) and the message's name id. Called once
   every check that can refuse the call has passed: an id is never given
   back. Returns 0, BPT_ENOMEM or BPT_ELIMIT (the name table is full). */
BPT__PRIVATE int bpt__ms_message(bpt__ms *ms, const char *message) {
    int rc;
    if (!message) return 0;
    if (!(ms->message = bpt__intern(message)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for the match spec's message");
    if ((rc = bpt__names_id(NULL, ms->message, -1, NULL, NULL, &ms->message_id)) < 0)
        return bpt__fail(rc, "bpt_trace_pattern: the match spec's message '%s': %s", message, bpt__names_why(rc));
    return 0;
}

BPT__PRIVATE void bpt__ms_ref(bpt__ms *ms) { if (ms) ms->refc++; }

BPT__PRIVATE void bpt__ms_unref(bpt__ms *ms) {
    if (ms && --ms->refc == 0) BPT_FREE(ms);
}

BPT__PRIVATE void bpt__pattern_entry_free(bpt__pattern_entry *e) {
    bpt__ms_unref(e->ms);
    BPT_FREE(e);
}
/*** End of pattern.c ***/

/*** Begin file site_x86_64.c ***/
/* site_x86_64.c: native function entries on x86-64.

   BPT_TRACEABLE compiles a function with 24 NOP bytes before it and a 2-byte
   NOP at its entry (gcc: 90 90, clang: 66 90), after an endbr64 when
   -fcf-protection is on. Registration fills the padding once, while nothing
   can execute it, and makes the entry NOP the one instruction 66 90
   (>>renop); afterwards only the 2-byte entry word ever changes. Both
   entries share the padding; only the resume jump's displacement differs:

   fn-24  &bpt__x86_64_stub (8 bytes; its top two, fn-18 and fn-17, are 0)
   fn-16  bpt_func *, its low 6 bytes (a user-space address fits in 48 bits)
   fn-10  FF 15 EC FF FF FF  call *[fn-24]       the stub returns to fn-4
   fn-4   EB 04 | EB 08      jmp fn+2 | fn+6     on to the word after the site
   fn-2   EB F6              jmp fn-10           the bounce the site jumps to

   plain entry (site = fn)                  endbr64 entry (site = fn+4)
   fn+0   66 90 <-> EB FC    jmp fn-2        fn+0   F3 0F 1E FA        endbr64
                                            fn+4   66 90 <-> EB F8    jmp fn-2

   Why:
   - A thread may sit between gcc's two single-byte NOPs when registration
     makes them 66 90 (it runs 90, a NOP) or, had it not, when the word
     changes; it then executes the jump's displacement byte alone, so that
     byte must be a harmless one-byte instruction: FC is CLD (the direction
     flag is clear at every function entry, SysV ABI 3.2.1), F8 is CLC
     (flags are dead at an entry). Hence the bounce at fn-2: the call sits
     further away than such a displacement reaches.
   - The stub returns where its call came from, fn-4: the CPU's return stack
     predicts that `ret`, and a jump takes it on to the entry's next
     instruction. A stub that rewrote its return slot to skip ahead instead
     mispredicted every hit: 6.5 ns a call more on the AMD EPYC of
     PERFORMANCE.md (bench/ret_predict.c, `make bench` section 1).
   - The stub finds the record with one 8-byte load from fn-18 and one
     shift: the stub's address above it gives the load its two zero bytes.
     The record first and the stub's address after it (until 2026-12-01)
     took a shift each way to clear the address's two low bytes: one
     instruction more in every hit (callgrind: bench/overhead.c).
   - The 2-byte store is atomic as long as it stays within one cache line
     (Intel SDM vol. 3, 9.1.1), which registration checks. The indirect call
     reaches the stub from any distance, and the stub finds the record at a
     fixed offset from its return address, as BEAM finds GenericBp in front
     of the code. */

#if defined(BPT_NATIVE) && defined(__x86_64__)

/* The entry stub: when the record's path_hint says so, call a short
   path with the integer registers alone: the count path,
   bpt__native_count_path(record), for a function that only counts, or
   the call path, bpt__native_call_path(record, args, entry sp), for one
   that only traces calls, the call-return path (the same arguments) for
   one that traces calls and their returns, or the time path (the same
   arguments) for one that only times its calls (>>count path, >>call
   path, >>time path in site_native.c). The count
   path keeps every register but rax (>>keeps regs in port.h), so only rax
   and rdi are saved around it; the call route saves the eight integer
   registers a function's entry may hold. Otherwise, or when the
   short path declines, save the integer and vector argument registers in
   a bpt__regs frame and call bpt__native_entry(record, frame, what the
   short path said). Restore and
   return to fn-4. The ABI leaves rsp 16-aligned here, but before the
   full path the stub realigns it all the same: a caller compiled with
   gcc's IPA stack alignment may not have aligned it. The short routes do
   not: the short paths touch no vector register (>>intregs in port.h), so
   no aligned access of theirs can fault. The frame also holds rbp, so that
   the handler finds the traced function's own return slot at 16(%rbp),
   which return trace swaps (frames.c). Where the count path may use vector
   registers (BPT__COUNT_SAVES_FP, >>intregs in port.h: tcc, a sanitizer)
   it does not keep the others either: the stub then saves the frame,
   vector registers included, before it calls the count path. */
#define BPT__X86_SAVE_XMM \
    "    movaps %xmm0, 80(%rsp)\n" \
    "    movaps %xmm1, 96(%rsp)\n" \
    "    movaps %xmm2, 112(%rsp)\n" \
    "    movaps %xmm3, 128(%rsp)\n" \
    "    movaps %xmm4, 144(%rsp)\n" \
    "    movaps %xmm5, 160(%rsp)\n" \
    "    movaps %xmm6, 176(%rsp)\n" \
    "    movaps %xmm7, 192(%rsp)\n"
#define BPT__X86_LOAD_XMM \
    "    movaps 80(%rsp), %xmm0\n" \
    "    movaps 96(%rsp), %xmm1\n" \
    "    movaps 112(%rsp), %xmm2\n" \
    "    movaps 128(%rsp), %xmm3\n" \
    "    movaps 144(%rsp), %xmm4\n" \
    "    movaps 160(%rsp), %xmm5\n" \
    "    movaps 176(%rsp), %xmm6\n" \
    "    movaps 192(%rsp), %xmm7\n"
typedef char bpt__path_hint_at_0[offsetof(struct bpt_func, path_hint) == 0 ? 1 : -1];   /* the stub reads it there */
#if defined(BPT__COUNT_SAVES_FP)
#  define BPT__X86_XMM_BEFORE_COUNT BPT__X86_SAVE_XMM
#  define BPT__X86_XMM_AFTER_COUNT BPT__X86_LOAD_XMM
#  define BPT__X86_XMM_FOR_ENTRY ""
#else
#  define BPT__X86_XMM_BEFORE_COUNT ""
#  define BPT__X86_XMM_AFTER_COUNT ""
#  define BPT__X86_XMM_FOR_ENTRY BPT__X86_SAVE_XMM
#endif
#define BPT__X86_RECORD_TO_RDI   /* fn-18: the stub's top 2 bytes (0), then the record's 6 */ \
    "    movq -14(%r11), %rdi\n" \
    "    shrq $16, %rdi\n"
#if defined(BPT__COUNT_KEEPS_REGS)
/* >>count route: the count path's common case in the stub itself, steps
   CA1-CA5 for CP1-CP5 (>>count path in site_native.c, whose C is the
   reference): the thread has its record, is quiescent, and pins need no
   fence (membarrier is registered); the active generation counts and no
   return-traced frame is open; the counter page is mapped. Then pin, add
   one to the thread's counter, unpin and return to fn-4, with rax and rdi
   saved and r11 used, and no call: a counted call runs 36 instructions in
   the stub, the hint's dispatch included, where the stub and the C path
   ran 57 (its save of 3 registers, the call, its checks of cases that are
   rare here; callgrind). Anything else goes to the C path with nothing
   changed (label 10: a first hit, a nested pin, a managed thread, pins
   that fence: no membarrier), or, once pinned, unpins and leaves the hit
   to the full path as the C path does (label 12: a frame open, a kind
   other than COUNT or NONE while the hint is COUNT, a counter page not
   mapped). Entered with r11 the record and rax and rdi saved; reads
   bpt__tls_thread, bpt__progress and bpt__active_ix by name (BPT__ASM_READ
   in port.h) and the structures at the offsets checked below. x86-64 only: aarch64 has no add to memory
   that a signal handler cannot split (BPT__SIGNAL_ATOMIC_INC, port.h), so
   a route there would also need the count's mark; its stub calls the C
   path. */
#  define BPT__X86_REC_STATE 0       /* bpt__thread.state */
#  define BPT__X86_REC_DEPTH 96      /* bpt__thread.shadow_depth[BPT__STACK_NATIVE] */
#  define BPT__X86_F_SHORTCUT 64     /* bpt_func.shortcut[0] */
#  define BPT__X86_SC_SHIFT 5        /* sizeof(bpt__shortcut) == 1 << 5 */
#  define BPT__X86_SC_KIND 64        /* + .kind */
#  define BPT__X86_SC_DIR 80         /* + .count_dir */
#  define BPT__X86_SC_OFF 88         /* + .count_off */
#  define BPT__X86_KIND_NONE 0       /* BPT__SHORTCUT_NONE */
#  define BPT__X86_KIND_COUNT 1      /* BPT__SHORTCUT_COUNT */
#  define BPT__X86_PIN_WORD 8        /* bpt__progress.pin_word */
#  define BPT__X86_FUTEX 16          /* bpt__progress.futex */
/* Each offset the assembly uses, and each field's width as it reads it. */
typedef char bpt__x86_route_rec[offsetof(bpt__thread, state) == BPT__X86_REC_STATE &&
                                sizeof(((bpt__thread *)0)->state) == 8 &&
                                sizeof(((bpt__thread *)0)->counts[0]) == 8 &&
                                offsetof(bpt__thread, shadow_depth) + 4 * BPT__STACK_NATIVE == BPT__X86_REC_DEPTH &&
                                sizeof(((bpt__thread *)0)->shadow_depth[0]) == 4 ? 1 : -1];
typedef char bpt__x86_route_sc[offsetof(struct bpt_func, shortcut) == BPT__X86_F_SHORTCUT &&
                               sizeof(bpt__shortcut) == 1u << BPT__X86_SC_SHIFT &&
                               sizeof(((struct bpt_func *)0)->shortcut[0]) == sizeof(bpt__shortcut) &&
                               sizeof(((bpt__shortcut *)0)->kind) == 4 &&
                               sizeof(((bpt__shortcut *)0)->count_dir) == 8 &&
                               sizeof(((bpt__shortcut *)0)->count_off) == 8 &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, kind) == BPT__X86_SC_KIND &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, count_dir) == BPT__X86_SC_DIR &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, count_off) == BPT__X86_SC_OFF &&
                               BPT__SHORTCUT_NONE == BPT__X86_KIND_NONE && BPT__SHORTCUT_COUNT == BPT__X86_KIND_COUNT ? 1 : -1];
typedef char bpt__x86_route_progress[offsetof(struct bpt__progress_state, pin_word) == BPT__X86_PIN_WORD &&
                                     sizeof(bpt__progress.pin_word) == 8 && sizeof(bpt__progress.futex) == 4 &&
                                     sizeof(bpt__atomic_u32) == 4 &&   /* bpt__active_ix (hit.c) */
                                     offsetof(struct bpt__progress_state, futex) == BPT__X86_FUTEX &&
                                     BPT__NEST_MASK == 0xffff && BPT__PIN_FENCE == (uint64_t)1 << 63 ? 1 : -1];
#  define BPT__X86_COUNT_ROUTE \
    /* CA1. The thread's record (initial-exec TLS, as the C path's). */ \
    "    movq bpt__tls_thread@gottpoff(%rip), %rax\n" \
    "    movq %fs:(%rax), %rax\n" \
    "    testq %rax, %rax\n" \
    "    jz 10f\n" \
    /* CA2. Pin, as bpt__pin_rec's quiescent case: the state's low 16 bits */ \
    /* (open pins, ONLINE) are 0, the pin word (acquire: an x86 load) has */ \
    /* no fence flag; store it [B1], the light barrier being this order */ \
    /* (membarrier is registered). */ \
    "    cmpw $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n"      /* the low 16 bits: BPT__NEST_MASK */ \
    "    jne 10f\n" \
    "    movq bpt__progress+" BPT__STR(BPT__X86_PIN_WORD) "(%rip), %rdi\n" \
    "    testq %rdi, %rdi\n"             /* BPT__PIN_FENCE, bit 63 */ \
    "    js 10f\n" \
    "    movq %rdi, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n" \
    /* CA3. The active generation's shortcut [G2] (acquire: an x86 load) */ \
    /* is COUNT or NONE, and no return-traced frame is open. */ \
    "    movl bpt__active_ix(%rip), %edi\n" \
    "    shlq $" BPT__STR(BPT__X86_SC_SHIFT) ", %rdi\n" \
    "    addq %r11, %rdi\n"              /* the shortcut, less BPT__X86_F_SHORTCUT */ \
    "    cmpl $0, " BPT__STR(BPT__X86_REC_DEPTH) "(%rax)\n" \
    "    jne 12f\n" \
    "    cmpl $" BPT__STR(BPT__X86_KIND_COUNT) ", " BPT__STR(BPT__X86_SC_KIND) "(%rdi)\n" \
    "    jne 11f\n" \
    /* CA4. Add one to the thread's counter, if its page is mapped: one */ \
    /* instruction, which a signal handler cannot split [H1] */ \
    /* (bpt__owner_inc1_u64, port.h). */ \
    "    movq " BPT__STR(BPT__X86_SC_DIR) "(%rdi), %r11\n" \
    "    movq (%rax,%r11), %r11\n"       /* the page, at the record's offset count_dir */ \
    "    testq %r11, %r11\n" \
    "    jz 12f\n" \
    "    movq " BPT__STR(BPT__X86_SC_OFF) "(%rdi), %rdi\n" \
    "    addq $1, (%r11,%rdi,8)\n" \
    /* CA5. Unpin, as bpt__state_store: store 0 [B3], the light barrier */ \
    /* (this order) [B2], and a look at the futex word: a sleeper (or any */ \
    /* flag) leaves the wake to the full path, every register saved. The */ \
    /* state is still the one CA2 stored: a signal handler that pins in */ \
    /* between restores it, and none can make the thread managed or online */ \
    /* while it is pinned (progress.c). */ \
    "13:\n" \
    "    movq $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n" \
    "    cmpl $0, bpt__progress+" BPT__STR(BPT__X86_FUTEX) "(%rip)\n" \
    "    jne 14f\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "11:\n"                              /* not COUNT: NONE is done as well */ \
    "    cmpl $" BPT__STR(BPT__X86_KIND_NONE) ", " BPT__STR(BPT__X86_SC_KIND) "(%rdi)\n" \
    "    je 13b\n" \
    "12:\n"                              /* declined once pinned: unpin; the full path's own */ \
    "    movq $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n"    /* unpin wakes a sleeper */ \
    "    movl $" BPT__STR(BPT__PATH_FULL) ", %r11d\n" \
    "    jmp 15f\n" \
    "14:\n" \
    "    movl $" BPT__STR(BPT__PATH_DONE_WAKE) ", %r11d\n" \
    "15:\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "10:\n"
/* The short routes, where the count and call paths keep every register
   but rax (>>keeps regs in port.h). The record and its hint are read with
   r11 alone (free: the entry holds nothing in it), so a function neither
   path can finish goes to the full path at once.
   The count route (BPT__HINT_COUNT): save rax (a variadic callee's count
   of vector arguments) and rdi, run the common case (>>count route, above;
   it returns to fn-4 or goes to the full path itself), else call the C
   path with the record in rdi, and on DONE restore the two and return to
   fn-4. The stub is entered with rsp 16-aligned
   (below), so two words keep it so at the call, as the ABI has it
   (tests/stub_align_check.sh reads rsp at each C function the stub and
   the trampoline call; a third word of padding here had the count path
   entered with rsp 8 off, until 2026-11-28).
   The call route (BPT__HINT_CALL, BPT__HINT_CALL_RETURN, BPT__HINT_TIME:
   the call path, the call-return path or the time path, by the hint):
   each is an ordinary function
   (it saves the registers a callee must keep, and clobbers the others but
   r11's), so push every register a function's entry may hold that it
   may clobber, r9 down to rdi, so that rdi..r9 lie in order at rsp (the
   path's args); 8 words keep the stack 16-aligned. Call with the record in
   rdi, rsp in rsi and the function's entry sp in rdx (above the 8 words
   and the stub's own return address), and pop them all.
   The full path gets what the short path said in r11d. */
#  define BPT__X86_SHORT_ROUTES \
    "    movq (%rsp), %r11\n"             /* return address = fn-4 */ \
    "    movq -14(%r11), %r11\n"          /* fn-18: the stub's top 2 bytes (0), then the record's 6 */ \
    "    shrq $16, %r11\n" \
    "    cmpl $" BPT__STR(BPT__HINT_COUNT) ", (%r11)\n"   /* the record's path_hint, at its offset 0 */ \
    "    jne 6f\n" \
    "    pushq %rax\n" \
    "    pushq %rdi\n"                    /* 2 words: 16-aligned at the call */ \
    BPT__X86_COUNT_ROUTE                  /* >>count route; else on to the C path */ \
    "    movq %r11, %rdi\n" \
    "    call bpt__native_count_path\n" \
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n" \
    "    jne 1f\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "1:\n" \
    "    movl %eax, %r11d\n"              /* FULL or WAKE */ \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "6:\n" \
    "    cmpl $" BPT__STR(BPT__HINT_CALL) ", (%r11)\n" \
    "    jb 4f\n"                          /* BPT__HINT_FULL: no short path can finish this function */ \
    "    pushq %rax\n" \
    "    pushq %r10\n" \
    "    pushq %r9\n" \
    "    pushq %r8\n" \
    "    pushq %rcx\n" \
    "    pushq %rdx\n" \
    "    pushq %rsi\n" \
    "    pushq %rdi\n" \
    "    movq %rsp, %rsi\n"               /* args: rdi rsi rdx rcx r8 r9; 16-aligned */ \
    "    leaq 72(%rsp), %rdx\n"           /* the entry sp: 8 words and fn-4 up */ \
    "    movq %r11, %rdi\n" \
    "    jne 8f\n"                         /* the hint's compare above still: CALL_RETURN or TIME */ \
    "    call bpt__native_call_path\n" \
    "    jmp 9f\n" \
    "8:\n" \
    "    cmpl $" BPT__STR(BPT__HINT_CALL_RETURN) ", (%rdi)\n" \
    "    jne 3f\n" \
    "    call bpt__native_call_return_path\n" \
    "    jmp 9f\n" \
    "3:\n" \
    "    call bpt__native_time_path\n" \
    "9:\n" \
    "    popq %rdi\n" \
    "    popq %rsi\n" \
    "    popq %rdx\n" \
    "    popq %rcx\n" \
    "    popq %r8\n" \
    "    popq %r9\n" \
    "    popq %r10\n" \
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n" \
    "    jne 7f\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "7:\n" \
    "    movl %eax, %r11d\n"              /* FULL or WAKE */ \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "4:\n" \
    "    movl $" BPT__STR(BPT__PATH_FULL) ", %r11d\n" \
    "5:\n"
#  define BPT__X86_FULL_WHAT "    movl %r11d, %edx\n"   /* what the count route said */
#else
#  define BPT__X86_SHORT_ROUTES ""
#  define BPT__X86_FULL_WHAT ""
#endif
__asm__(
    "    .text\n"
    "    .p2align 6\n"                   /* a cache line (>>line aligned, port.h) */
    "    .globl bpt__x86_64_stub\n    .hidden bpt__x86_64_stub\n"   /* global, hidden: gcc's -flto may put this */
                                    /* assembly in a partition of its own (tests/lto_check.sh) */
    "    .type bpt__x86_64_stub, @function\n"
    "bpt__x86_64_stub:\n"
    BPT__X86_SHORT_ROUTES
    "    pushq %rbp\n"
    "    movq %rsp, %rbp\n"
    "    andq $-16, %rsp\n"
    "    subq $208, %rsp\n"
    "    movq %rdi, 0(%rsp)\n"
    "    movq %rsi, 8(%rsp)\n"
    "    movq %rdx, 16(%rsp)\n"
    "    movq %rcx, 24(%rsp)\n"
    "    movq %r8, 32(%rsp)\n"
    "    movq %r9, 40(%rsp)\n"
    "    movq %rax, 48(%rsp)\n"
    "    movq %r10, 56(%rsp)\n"
#if defined(BPT__COUNT_KEEPS_REGS)
    BPT__X86_FULL_WHAT
    "    movq 8(%rbp), %r11\n"             /* fn-4 */
    BPT__X86_RECORD_TO_RDI
#else
    "    movq 8(%rbp), %r11\n"             /* return address = fn-4 */
    BPT__X86_XMM_BEFORE_COUNT
    BPT__X86_RECORD_TO_RDI
    "    xorl %edx, %edx\n"               /* BPT__PATH_FULL, for the full path */
    "    cmpl $" BPT__STR(BPT__HINT_COUNT) ", (%rdi)\n"   /* the record's path_hint, at its offset 0 */
    "    je 6f\n"
    "    cmpl $" BPT__STR(BPT__HINT_CALL) ", (%rdi)\n"
    "    jb 3f\n"                          /* BPT__HINT_FULL: no short path can finish this function */
    "    movq %rsp, %rsi\n"               /* args: the frame's first six words, rdi..r9 */
    "    leaq 16(%rbp), %rdx\n"           /* the entry sp (bpt__arch_entry_sp); the flags stay */
    "    jne 8f\n"
    "    call bpt__native_call_path\n"
    "    jmp 7f\n"
    "8:\n"
    "    cmpl $" BPT__STR(BPT__HINT_CALL_RETURN) ", (%rdi)\n"
    "    jne 9f\n"
    "    call bpt__native_call_return_path\n"
    "    jmp 7f\n"
    "9:\n"
    "    call bpt__native_time_path\n"
    "    jmp 7f\n"
    "6:\n"
    "    call bpt__native_count_path\n"
    "7:\n"
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n"
    "    jne 1f\n"
    BPT__X86_XMM_AFTER_COUNT
    "    jmp 2f\n"
    "1:\n"                                /* the short path said FULL or WAKE */
    "    movl %eax, %edx\n"
    "    movq 8(%rbp), %r11\n"             /* fn-4 again: the count path used r11 */
    BPT__X86_RECORD_TO_RDI
    "3:\n"                                /* the full path, every argument register saved */
#endif
    BPT__X86_XMM_FOR_ENTRY
    "    movq %rbp, 64(%rsp)\n"
    "    movq %rsp, %rsi\n"
    "    call bpt__native_entry\n"
    BPT__X86_LOAD_XMM
    "2:\n"
    "    movq 0(%rsp), %rdi\n"
    "    movq 8(%rsp), %rsi\n"
    "    movq 16(%rsp), %rdx\n"
    "    movq 24(%rsp), %rcx\n"
    "    movq 32(%rsp), %r8\n"
    "    movq 40(%rsp), %r9\n"
    "    movq 48(%rsp), %rax\n"
    "    movq 56(%rsp), %r10\n"
    "    movq %rbp, %rsp\n"
    "    popq %rbp\n"
    "    ret\n"
    "    .size bpt__x86_64_stub, . - bpt__x86_64_stub\n");
/* Hidden, so that references are PC-relative: a GOT entry for a symbol
   local to this object is not reliable (see site_aarch64.c). */
extern __attribute__((visibility("hidden"))) char bpt__x86_64_stub[];

/* The return trampoline (return trace, frames.c). A traced function whose
   return slot the entry handler swapped returns here, with rsp one word
   above that slot. Save the return registers (rax, rdx, and the low 128
   bits of xmm0, xmm1: SysV returns nothing else, x87 st0 aside, which C
   code here leaves alone; so a function returning long double or a 256- or
   512-bit vector must not be return-traced, as api_pattern.h says), ask
   bpt__native_return(slot, saved) for the original return address, restore,
   and jump there. A jmp, not push+ret: the caller's own return addresses
   below stay paired with the return stack buffer. */
__asm__(
    "    .text\n"
    "    .p2align 4\n"
    "    .globl bpt__x86_64_return_trampoline\n    .hidden bpt__x86_64_return_trampoline\n"
    "    .type bpt__x86_64_return_trampoline, @function\n"
    "bpt__x86_64_return_trampoline:\n"
    "    pushq %rbp\n"                    /* lands on the dead return slot */
    "    movq %rsp, %rbp\n"               /* rbp = the slot's address */
    "    andq $-16, %rsp\n"
    "    subq $48, %rsp\n"
    "    movq %rax, 0(%rsp)\n"
    "    movq %rdx, 8(%rsp)\n"
    "    movaps %xmm0, 16(%rsp)\n"
    "    movaps %xmm1, 32(%rsp)\n"
    "    movq %rbp, %rdi\n"
    "    movq %rsp, %rsi\n"
    "    call bpt__native_return\n"
    "    movq %rax, %r11\n"
    "    movaps 16(%rsp), %xmm0\n"
    "    movaps 32(%rsp), %xmm1\n"
    "    movq 0(%rsp), %rax\n"
    "    movq 8(%rsp), %rdx\n"
    "    movq %rbp, %rsp\n"
    "    popq %rbp\n"
    "    jmp *%r11\n"
    "    .size bpt__x86_64_return_trampoline, . - bpt__x86_64_return_trampoline\n");

/* Where the traced function's return address lives while its entry stub
   runs (the slot its caller's call pushed), and the stack pointer at its
   entry, which identifies its frame: the same thing on x86-64. */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r) { return (uintptr_t *)(uintptr_t)(r->rbp + 16); }
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r) { return (uintptr_t)(r->rbp + 16); }
/* Return addresses are stored as they are (no pointer authentication). */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret) { (void)f; return ret; }
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp) { (void)f; (void)sp; return ret; }
/* The call pushed the return address at the entry sp, and there it stays. */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi) {
    (void)below;
    *lo = entry_sp;
    *hi = entry_sp + sizeof(uintptr_t);
}

static const uint8_t bpt__endbr64[4] = { 0xF3, 0x0F, 0x1E, 0xFA };

/* The padding's code from fn-10: the call, the resume jump (its
   displacement set per entry) and the bounce. */
static const uint8_t bpt__x86_pad_code[10] = { 0xFF, 0x15, 0xEC, 0xFF, 0xFF, 0xFF, 0xEB, 0x00, 0xEB, 0xF6 };
enum { BPT__X86_RECORD_AT = 8, BPT__X86_RECORD_BYTES = 6, BPT__X86_CODE_AT = 14 };   /* pre[]: stub, record, code */

/* Is the padding fresh (24 NOPs) or already ours (registered before)? The
   record bytes may differ: a new registration writes its own. */
static int bpt__x86_pad_ok(const uint8_t *fn, const uint8_t *want) {
    int i, fresh = 1;
    for (i = 0; i < BPT__PAD_BYTES; i++) fresh &= fn[i - BPT__PAD_BYTES] == 0x90;
    return fresh || (memcmp(fn - BPT__PAD_BYTES, want, BPT__X86_RECORD_AT) == 0 &&
                     memcmp(fn - BPT__PAD_BYTES + BPT__X86_CODE_AT, want + BPT__X86_CODE_AT,
                            BPT__PAD_BYTES - BPT__X86_CODE_AT) == 0);
}

BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l) {
    uint8_t *fn = (uint8_t *)fnp;
    int endbr = memcmp(fn, bpt__endbr64, 4) == 0;
    uint8_t *site = fn + (endbr ? 4 : 0);
    uintptr_t stub = (uintptr_t)bpt__x86_64_stub;
    if (!((site[0] == 0x90 && site[1] == 0x90) || (site[0] == 0x66 && site[1] == 0x90)))
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: entry bytes %02x %02x %02x %02x %02x %02x are not "
                         "BPT_TRACEABLE's (expected 90 90 or 66 90, optionally after endbr64)",
                         name, fnp, fn[0], fn[1], fn[2], fn[3], fn[4], fn[5]);
    if (((uintptr_t)site & 63) == 63)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the entry word crosses a cache line, so it "
                         "cannot be written atomically", name, fnp);
    if (stub >> 48)   /* the record's load takes the address's top two bytes for zeros */
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: bptrace's entry stub lies at %p, above 2^48, where "
                         "the padding's layout needs it below", name, fnp, (void *)stub);
    memcpy(l->pre, &stub, 8);
    memcpy(l->pre + BPT__X86_CODE_AT, bpt__x86_pad_code, sizeof bpt__x86_pad_code);
    l->pre[BPT__X86_CODE_AT + 7] = (uint8_t)(site + 2 - (fn - 2));   /* jmp fn+2 or fn+6: site+2, from fn-2 */
    if (!bpt__x86_pad_ok(fn, l->pre))
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the %d bytes before the entry are neither NOPs "
                         "nor bptrace's (compiled without patchable_function_entry(26,24)?)",
                         name, fnp, BPT__PAD_BYTES);
    l->site = site;
    l->word_size = 2;
    /* >>renop: the word an untraced site holds once registered is one
       two-byte NOP, 66 90, whatever the compiler emitted: gcc emits two
       one-byte NOPs, 90 90, and every traceable call, traced or not, ran
       both: the second NOPs were 477 of the 33,216 instructions of one of
       bench/sqlite_flags.c's transactions.
       bpt__native_prepare writes it with the site's one aligned store. A
       thread may run the function meanwhile, and whatever it fetches is a
       NOP: 90 90, 66 90, or a mix of the two words' bytes (which is one of
       them); a thread that stood between gcc's NOPs goes on at the second
       byte, 90 in both. After that no thread can stand inside the word.
       No SYNC_CORE wait follows: a core that still runs the old word runs
       NOPs as well. */
    l->orig_word = 0x9066;   /* 66 90, little-endian */
    l->bp_word = endbr ? 0xF8EB : 0xFCEB;   /* jmp fn-2: EB F8 from fn+6 (CLC alone), EB FC from fn+2 (CLD alone) */
    return 0;
}

/* A slot's trampoline (sites.h): the padding at block+8, the function at
   block+32, whose entry word becomes the breakpoint's jump (it is never
   taken: the slot points at the padding's call, fn-10), then
   fn+2   FF 25 00 00 00 00   jmp *[fn+8]     on to the slot's target
   fn+8   the target (8 bytes, aligned)
   and int3 everywhere else. The stub returns to fn-4, whose jump lands on
   fn+2: the traced function's own return address is still the caller's,
   at the top of the stack, as at any entry. */
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target) {
    static const uint8_t jmp_next[6] = { 0xFF, 0x25, 0, 0, 0, 0 };
    uint8_t *fn = block + 32;
    memset(block, 0xCC, BPT__TRAMP_BYTES);
    memset(fn - BPT__PAD_BYTES, 0x90, BPT__PAD_BYTES);
    fn[0] = 0x66;   /* the entry NOP of a registered site (>>renop) */
    fn[1] = 0x90;
    memcpy(fn + 2, jmp_next, sizeof jmp_next);
    memcpy(fn + 8, &target, sizeof target);
    return fn;
}

/* Where the record goes in the padding: its low 6 bytes at fn-16. Returns 0,
   or BPT_ENOTPATCHABLE when it lies above 2^48 (a BPT_MALLOC that maps
   there, with 5-level paging). */
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f) {
    uintptr_t p = (uintptr_t)f;
    if (p >> 48)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s:%s: its record at %p lies above 2^48; the entry padding holds "
                         "48 bits of it", f->module, f->name, (const void *)f);
    memcpy(pre + BPT__X86_RECORD_AT, &p, BPT__X86_RECORD_BYTES);   /* little-endian: the low bytes */
    return 0;
}

BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn) {
    uintptr_t p = 0;
    memcpy(&p, (const uint8_t *)fn - BPT__PAD_BYTES + BPT__X86_RECORD_AT, BPT__X86_RECORD_BYTES);
    return (const bpt_func *)p;
}

/* The one store that switches a site: 2 bytes, atomic within a cache line.
   Instruction fetch on other cores sees it after the SYNC_CORE wait that
   follows every batch of writes (site_native.c). One movw in asm rather than
   a C atomic: a sanitizer must not instrument a store into code (TSAN's
   shadow of text is read-only and faults). */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word) {
    __asm__ __volatile__("movw %1, %0" : "=m"(*(uint16_t *)(void *)site) : "r"((uint16_t)word) : "memory");
}

BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len) { (void)start; (void)len; }   /* coherent on x86 */

/* >>prefetch (port.h) for writing: prefetchw (0F 0D /1) where CPUID
   0x80000001 says PRFCHW (ECX bit 8), else nothing (prefetcht0 made the
   writer's stores slower). Some early x86-64 processors fault on
   prefetchw (64-bit Windows before 8.1 caught the #UD and patched the
   instruction out), so it runs only where CPUID says so.
   bpt__arch_prefetch_setup asks once, at the permission's seizure (bp.c);
   until then there is no hint. Only the permission's holder reads the
   answer. */
static bpt__atomic_u32 bpt__x86_64_prefetchw;
static pthread_once_t bpt__x86_64_prefetchw_once = PTHREAD_ONCE_INIT;

static void bpt__x86_64_prefetchw_probe(void) {
    uint32_t r[4];
    if (bpt__cpuid_ext(0x80000001u, r)) bpt__store_relaxed_u32(&bpt__x86_64_prefetchw, (r[2] >> 8) & 1);   /* ECX bit 8 */
}

BPT__PRIVATE void bpt__arch_prefetch_setup(void) { pthread_once(&bpt__x86_64_prefetchw_once, bpt__x86_64_prefetchw_probe); }

BPT__PRIVATE void bpt__arch_prefetch_w(const void *p) {
    if (bpt__load_relaxed_u32(&bpt__x86_64_prefetchw)) __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
}

/* A CET user shadow stack (arch_prctl ARCH_SHSTK_STATUS, Linux 6.6) would
   fault on return trace's swapped return address. The entry stub returns
   where its call came from, which a shadow stack accepts, but no machine
   here runs one, so registration refuses as well until it is tested.
   Returns 0, or BPT_ENOTSUP saying so. */
BPT__PRIVATE int bpt__arch_native_usable(const char *who) {
    unsigned long features = 0;
    if (syscall(SYS_arch_prctl, 0x5005 /* ARCH_SHSTK_STATUS */, &features) == 0 && (features & 1))
        return bpt__fail(BPT_ENOTSUP, "%s: a CET shadow stack is active in this process; bptrace's return "
                         "trace swaps return addresses and would fault", who);
    return 0;
}

#endif /* BPT_NATIVE && __x86_64__ */
/*** End of site_x86_64.c ***/

/*** Begin file site_aarch64.c ***/
/* site_aarch64.c: native function entries on aarch64.

   BPT_TRACEABLE compiles a function with 8 NOP words before it and one NOP
   at its entry, after a bti c or paciasp with -mbranch-protection. The
   padding is filled once at registration; afterwards only the entry word
   changes:

   fn-32  bpt_func *                  (8 bytes, read by the stub)
   fn-24  &bpt__aarch64_stub          (8 bytes, the literal loaded at fn-12)
   fn-16  AA1E03E9  mov x9, x30       keep the caller's return address
   fn-12  58FFFFB0  ldr x16, fn-24
   fn-8   D63F0200  blr x16           x30 = fn-4: the stub finds the record at x30-28
   fn-4   B site+4                    the stub returns here: on past the site
   site   D503201F  nop  <->  B fn-16 (the only word patched at run time)

   The stub returns to fn-4, where its blr came from, so the return stack
   predicts its `ret`; a stub that returned straight to site+4 would be
   mispredicted on every hit (site_x86_64.c measures the same on x86-64).

   NOP and B are on the ARM ARM's list of instructions that may be changed
   while another core executes them (B2.2.5, "concurrent modification and
   execution of instructions"), as Linux arm64 ftrace relies on. Each write is
   followed by cache maintenance here (clean D, invalidate I) and by a
   SYNC_CORE wait in the protocol (an ISB on every core). The literals are
   written only at registration, while nothing can reach them, because an
   8-byte store to a possibly 4-aligned address is not single-copy atomic. */

#if defined(BPT_NATIVE) && defined(__aarch64__)

#define BPT__A64_NOP 0xD503201Fu

/* The entry stub: `hint #34` is bti c (a landing pad for the blr). It
   saves x0-x9 and its own return address (fn-4) in a bpt__regs frame and,
   when the record's path_hint says so, calls a short path with the
   integer registers alone: the count path, bpt__native_count_path(record),
   for a function that only counts, or the call path,
   bpt__native_call_path(record, frame, entry sp), for one that only
   traces calls, or the call-return path, bpt__native_call_return_path
   (the same arguments), for one that traces calls and their returns, or
   the time path, bpt__native_time_path (the same arguments), for one
   that only times its calls (>>count path, >>call path, >>time path in
   site_native.c). Otherwise, or when the
   short path declines, it saves q0-q7 too and calls
   bpt__native_entry(record, frame, what the short path said). Then it
   restores, puts the caller's return address back in x30 and returns to
   fn-4 with `ret x16`. Where the count path may use the vector registers
   (BPT__COUNT_SAVES_FP, >>intregs in port.h: clang has no
   general-regs-only for aarch64) they are saved before it instead. */
#define BPT__A64_SAVE_Q \
    "    stp q0, q1, [sp, #80]\n" \
    "    stp q2, q3, [sp, #112]\n" \
    "    stp q4, q5, [sp, #144]\n" \
    "    stp q6, q7, [sp, #176]\n"
#define BPT__A64_LOAD_Q \
    "    ldp q0, q1, [sp, #80]\n" \
    "    ldp q2, q3, [sp, #112]\n" \
    "    ldp q4, q5, [sp, #144]\n" \
    "    ldp q6, q7, [sp, #176]\n"
typedef char bpt__path_hint_at_0[offsetof(struct bpt_func, path_hint) == 0 ? 1 : -1];   /* the stub reads it there */
typedef char bpt__regs_224[sizeof(bpt__regs) == 224 ? 1 : -1];   /* the stub's frame, and the entry sp above it */
#if defined(BPT__COUNT_SAVES_FP)
#  define BPT__A64_Q_BEFORE_COUNT BPT__A64_SAVE_Q
#  define BPT__A64_Q_AFTER_COUNT BPT__A64_LOAD_Q
#  define BPT__A64_Q_FOR_ENTRY ""
#else
#  define BPT__A64_Q_BEFORE_COUNT ""
#  define BPT__A64_Q_AFTER_COUNT ""
#  define BPT__A64_Q_FOR_ENTRY BPT__A64_SAVE_Q
#endif
__asm__(
    "    .text\n"
    "    .p2align 6\n"                   /* a cache line (>>line aligned, port.h) */
    "    .globl bpt__aarch64_stub\n    .hidden bpt__aarch64_stub\n"   /* global, hidden: gcc's -flto may put this */
                                    /* assembly in a partition of its own (tests/lto_check.sh) */
    "    .type bpt__aarch64_stub, %function\n"
    "bpt__aarch64_stub:\n"
    "    hint #34\n"
    "    sub sp, sp, #224\n"
    "    stp x0, x1, [sp, #0]\n"
    "    stp x2, x3, [sp, #16]\n"
    "    stp x4, x5, [sp, #32]\n"
    "    stp x6, x7, [sp, #48]\n"
    "    stp x8, x9, [sp, #64]\n"
    "    str x30, [sp, #208]\n"
    BPT__A64_Q_BEFORE_COUNT
    "    ldur x0, [x30, #-28]\n"
    "    ldr w16, [x0]\n"                 /* the record's path_hint, at its offset 0 */
    "    mov w2, #" BPT__STR(BPT__PATH_FULL) "\n"   /* for the full path */
    "    cmp w16, #" BPT__STR(BPT__HINT_COUNT) "\n"
    "    b.eq 6f\n"
    "    cmp w16, #" BPT__STR(BPT__HINT_CALL) "\n"
    "    b.lo 3f\n"                       /* BPT__HINT_FULL: no short path can finish this function */
    "    mov x1, sp\n"                    /* args: the frame's x0-x7 */
    "    add x2, sp, #224\n"              /* the entry sp (bpt__arch_entry_sp) */
    "    b.ne 8f\n"
    "    bl bpt__native_call_path\n"
    "    b 7f\n"
    "8:\n"
    "    cmp w16, #" BPT__STR(BPT__HINT_CALL_RETURN) "\n"
    "    b.ne 9f\n"
    "    bl bpt__native_call_return_path\n"
    "    b 7f\n"
    "9:\n"
    "    bl bpt__native_time_path\n"
    "    b 7f\n"
    "6:\n"
    "    bl bpt__native_count_path\n"
    "7:\n"
    "    cmp w0, #" BPT__STR(BPT__PATH_DONE) "\n"
    "    b.ne 1f\n"
    BPT__A64_Q_AFTER_COUNT
    "    b 2f\n"
    "1:\n"                                /* the short path said FULL or WAKE */
    "    mov w2, w0\n"
    "    ldr x16, [sp, #208]\n"            /* fn-4 again: the call took x30 */
    "    ldur x0, [x16, #-28]\n"
    "3:\n"                                /* the full path, every argument register saved */
    BPT__A64_Q_FOR_ENTRY
    "    mov x1, sp\n"
    "    bl bpt__native_entry\n"
    BPT__A64_LOAD_Q
    "2:\n"
    "    ldr x16, [sp, #208]\n"
    "    ldp x0, x1, [sp, #0]\n"
    "    ldp x2, x3, [sp, #16]\n"
    "    ldp x4, x5, [sp, #32]\n"
    "    ldp x6, x7, [sp, #48]\n"
    "    ldp x8, x9, [sp, #64]\n"
    "    add sp, sp, #224\n"
    "    mov x30, x9\n"
    "    ret x16\n"
    "    .size bpt__aarch64_stub, . - bpt__aarch64_stub\n");
/* Hidden: the assembly symbols are local to this object, and only a
   PC-relative reference (adrp + add) reaches them exactly. A default-
   visibility extern would go through a GOT entry, which the toolchain
   resolves for a local symbol as its section plus nothing: the start of
   this object's text, not the symbol (the trampoline came out as the stub). */
extern __attribute__((visibility("hidden"))) char bpt__aarch64_stub[];

/* The return trampoline (return trace, frames.c). A traced function whose
   saved return address (x9 in the stub's frame) the entry handler swapped
   returns here with sp as it was at its entry. Save the return registers
   (x0-x7, q0-q3: AAPCS64 returns up to four vector registers for an HFA),
   ask bpt__native_return(sp, saved) for the original return address,
   restore, and continue there with `ret x16`: a return, which BTI does not
   check, where a br would need a landing pad at the target. No landing pad
   here either: a ret, not a branch, brings the traced function here. */
__asm__(
    "    .text\n"
    "    .p2align 4\n"
    "    .globl bpt__aarch64_return_trampoline\n    .hidden bpt__aarch64_return_trampoline\n"
    "    .type bpt__aarch64_return_trampoline, %function\n"
    "bpt__aarch64_return_trampoline:\n"
    "    sub sp, sp, #128\n"
    "    stp x0, x1, [sp, #0]\n"
    "    stp x2, x3, [sp, #16]\n"
    "    stp x4, x5, [sp, #32]\n"
    "    stp x6, x7, [sp, #48]\n"
    "    stp q0, q1, [sp, #64]\n"
    "    stp q2, q3, [sp, #96]\n"
    "    add x0, sp, #128\n"
    "    mov x1, sp\n"
    "    bl bpt__native_return\n"
    "    mov x16, x0\n"
    "    ldp q0, q1, [sp, #64]\n"
    "    ldp q2, q3, [sp, #96]\n"
    "    ldp x0, x1, [sp, #0]\n"
    "    ldp x2, x3, [sp, #16]\n"
    "    ldp x4, x5, [sp, #32]\n"
    "    ldp x6, x7, [sp, #48]\n"
    "    add sp, sp, #128\n"
    "    ret x16\n"
    "    .size bpt__aarch64_return_trampoline, . - bpt__aarch64_return_trampoline\n");

/* Where the traced function's return address lives while its entry stub
   runs (x9, saved in the frame and moved back to x30 on the way out), and
   the stack pointer at its entry, which identifies its frame (the stub's
   frame sits right below it). */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r) { return (uintptr_t *)&r->gpr[9]; }
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r) { return (uintptr_t)r + sizeof *r; }

/* A function that begins with paciasp has signed its return address with
   the entry sp as modifier before the stub runs; its autiasp will check
   whatever x30 holds at its return. So the original is kept stripped
   (xpaclri) and the trampoline's address goes in signed the same way
   (pacia1716: x17 signed with modifier x16). Both are hint-space
   instructions: NOPs on a CPU without pointer authentication, where
   paciasp signed nothing either. */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret) {
    register uintptr_t lr __asm__("x30") = ret;
    if (!f->signs_lr) return ret;
    __asm__("hint #7" : "+r"(lr));   /* xpaclri */
    return lr;
}
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp) {
    register uintptr_t x17 __asm__("x17") = ret;
    register uintptr_t x16 __asm__("x16") = sp;
    if (!f->signs_lr) return ret;
    __asm__("hint #8" : "+r"(x17) : "r"(x16));   /* pacia1716 */
    return x17;
}

/* x30 came into the function's body holding the trampoline; the prologue
   stored it in the function's own frame, which lies below its entry sp
   and above anything it called. Where exactly is the compiler's choice
   (gcc puts the frame record at the bottom or, with stack-clash
   protection, at the top), so the range is the whole frame, and at most
   the 1 MiB under the entry sp: a bound, should `below` be on another
   stack after all, never a walk into unmapped memory. */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t floor = entry_sp > ((uintptr_t)1 << 20) ? entry_sp - ((uintptr_t)1 << 20) : 0;
    *lo = below < entry_sp ? below : entry_sp;
    if (*lo < floor) *lo = floor;
    *hi = entry_sp;
}

static uint32_t bpt__a64_word(const uint8_t *p) { uint32_t w; memcpy(&w, p, 4); return w; }

/* B from `from` to `to`: imm26 counts words. */
static uint32_t bpt__a64_branch(uintptr_t from, uintptr_t to) {
    return 0x14000000u | ((uint32_t)((intptr_t)(to - from) >> 2) & 0x03FFFFFFu);
}

BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l) {
    uint8_t *fn = (uint8_t *)fnp;
    uint32_t first = bpt__a64_word(fn);
    uint32_t tail[4] = { 0xAA1E03E9u, 0x58FFFFB0u, 0xD63F0200u, 0 };
    uintptr_t stub = (uintptr_t)bpt__aarch64_stub;
    int i, fresh = 1, landing = first == 0xD503245Fu /* bti c */ || first == 0xD503233Fu /* paciasp */;
    uint8_t *site = fn + (landing ? 4 : 0);
    if ((uintptr_t)fn & 3)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: not 4-byte aligned", name, fnp);
    if (bpt__a64_word(site) != BPT__A64_NOP)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: entry words %08x %08x are not BPT_TRACEABLE's "
                         "(expected NOP, optionally after bti c or paciasp)", name, fnp,
                         (unsigned)first, (unsigned)bpt__a64_word(fn + 4));
    tail[3] = bpt__a64_branch((uintptr_t)(fn - 4), (uintptr_t)site + 4);
    memcpy(l->pre + 8, &stub, 8);
    memcpy(l->pre + 16, tail, 16);
    for (i = 0; i < 8; i++) fresh &= bpt__a64_word(fn - BPT__PAD_BYTES + 4 * i) == BPT__A64_NOP;
    if (!fresh && memcmp(fn - 16, l->pre + 16, 16) != 0)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the 8 words before the entry are neither NOPs nor "
                         "bptrace's (compiled without patchable_function_entry(9,8)?)", name, fnp);
    l->site = site;
    l->word_size = 4;
    l->orig_word = BPT__A64_NOP;
    l->bp_word = bpt__a64_branch((uintptr_t)site, (uintptr_t)(fn - 16));
    l->signs_lr = first == 0xD503233Fu;
    return 0;
}

/* A slot's trampoline (sites.h): the padding at block+0, the function at
   block+32, the slot's entry:
   fn     D503245F   bti c           a landing pad, for the PLT's br x17
   fn+4   the site: NOP, then B fn-16 for good
   fn+8   58000050   ldr x16, fn+16  the target
   fn+12  D61F0200   br x16          x30 is the caller's (or return trace's)
   fn+16  the target (8 bytes, aligned)
   The stub returns to fn-4, whose branch lands on fn+8. */
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target) {
    const uint32_t code[4] = { 0xD503245Fu, BPT__A64_NOP, 0x58000050u, 0xD61F0200u };
    uint8_t *fn = block + 32;
    int i;
    memset(block, 0, BPT__TRAMP_BYTES);   /* udf #0 where nothing goes */
    for (i = 0; i < 8; i++) {
        uint32_t nop = BPT__A64_NOP;
        memcpy(block + 4 * i, &nop, 4);
    }
    memcpy(fn, code, sizeof code);
    memcpy(fn + 16, &target, sizeof target);
    return fn;
}

/* The record pointer at fn-32, all 8 bytes. */
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f) {
    memcpy(pre, &f, sizeof f);
    return 0;
}

BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn) {
    const bpt_func *f;
    memcpy(&f, (const uint8_t *)fn - BPT__PAD_BYTES, sizeof f);
    return f;
}

/* One aligned 4-byte store: single-copy atomic (ARM ARM B2.2.1). A str in
   asm rather than a C atomic: a sanitizer must not instrument a store into
   code (TSAN's shadow of text is read-only). */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word) {
    __asm__ __volatile__("str %w1, %0" : "=m"(*(uint32_t *)(void *)site) : "r"((uint32_t)word) : "memory");
    __builtin___clear_cache((char *)site, (char *)site + 4);
}

BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len) {
    __builtin___clear_cache((char *)start, (char *)start + len);
}

/* >>prefetch (port.h) for writing: prfm pstl1keep, in every ARMv8-A. */
BPT__PRIVATE void bpt__arch_prefetch_setup(void) {}
BPT__PRIVATE void bpt__arch_prefetch_w(const void *p) { __builtin_prefetch(p, 1); }

/* A guarded control stack (prctl PR_GET_SHADOW_STACK_STATUS, Linux 6.13)
   would fault on return trace's swapped return address. The entry stub
   returns where its blr came from, which a GCS accepts, but no machine here
   runs one, so registration refuses as well until it is tested. Returns
   0, or BPT_ENOTSUP saying so. */
BPT__PRIVATE int bpt__arch_native_usable(const char *who) {
    unsigned long status = 0;
    if (syscall(SYS_prctl, 74 /* PR_GET_SHADOW_STACK_STATUS */, &status, 0, 0, 0) == 0 && (status & 1))
        return bpt__fail(BPT_ENOTSUP, "%s: a guarded control stack (GCS) is active in this process; "
                         "bptrace's return trace swaps return addresses and would fault", who);
    return 0;
}

#endif /* BPT_NATIVE && __aarch64__ */
/*** End of site_aarch64.c ***/

/*** Begin file timem.c ***/
/* timem.c: call_time and call_memory tables, as BEAM's
   BpTimemTrace in beam_bp.c.

   A breakpoint's time/memory data holds one hash table per thread slot,
   mapping process -> {calls, own time (ns), memory (bytes)}. A table is
   created on its thread's first charge and written only by that thread, so
   the hit and return paths update it with plain stores, no atomics, no
   lock. Every thread has its own: the first BPT_MAX_THREADS thread records
   find theirs in the breakpoint's data, the others in an array mapped for
   them [T3]. (BEAM's dirty schedulers share one table under a lock; a
   hit here never takes one.)

   Nobody else may read a table its owner may be writing. bpt_trace_info
   therefore collects in nine steps, C1-C9 (OTP 29's method; bpt__timem_collect):
     C1. allocate: give each breakpoint's staging half fresh, empty tables;
     C2. wait for thread progress;
     C3. switch: the protocol's commit (bpt__commit, bp.c) flips the active
         generation: charges now go to the fresh tables;
     C4. wait: no thread still charges the old ("real") tables: they are idle;
     C5. sum the idle real tables, with what earlier collections carried, into
         one merged table per breakpoint, and their `lost` counts likewise;
     C6. carry: the fresh tables keep the merged sums and the summed `lost`
         (carried, lost_carried: only the set path reads them);
     C7. consolidate: both halves point at the fresh tables (staging := active);
     C8. free the real tables (idle since C4);
     C9. the caller reports the merged sums and drops (bpt__timem_report)
         and releases the permission.
   OTP switches back to the real tables and merges the temporaries into
   them; here the fresh tables stay and carry the sums instead, which needs
   no second switch and never writes a table its owner may be writing.

   Every charge either lands in exactly one table, or is dropped and
   counted in exactly one `lost` (that of the tables it was for). A charge
   is dropped, rather than waited for or made unsafe, when it is a signal
   handler's nested in its thread's charge of the same tables [H1], when
   it is nested deeper than BPT__TIMEM_NEST charges, when there is no
   memory for its table (or for `more`), or when its thread record is
   past both arrays [T3]. Each table and each `lost` is summed exactly
   once, when it is idle (C5), and the sums go on in the next tables (C6):
   nothing is counted twice, and no drop is silent: bpt_trace_info
   reports the drops with the sums (bpt_info.lost_charges).

   call_time and call_memory are two kinds (two rows of BPT_KINDS, their
   hooks in kind_timem.c) that share these tables: one cell holds a
   process's calls, time and bytes. While both kinds are on, their data
   slots point at the same bpt__BpTimem, each holding a reference. */

static size_t bpt__timem_table_bytes(uint32_t cap) {
    return sizeof(bpt__timem_table) + sizeof(bpt__timem_cell) * (cap - 1);
}

/* [T2] Idle first-size tables are kept on their owner thread's list
   (bpt__thread.timem_free) for its next first charge, rather than unmapped:
   every collection gives every thread fresh tables, and a map (a page
   fault on first touch) and an unmap (a TLB shootdown of every CPU the
   process runs on) per table and collection cost milliseconds and stalled
   the traced threads (PERFORMANCE.md). The list is a lock-free stack:
   pushes by the set path only (a collection freeing idle tables, under the
   permission; a table a hit grows out of is unmapped), pops by the owner
   and its nested signal handlers. A pop reads the head's next and CASes;
   the head cannot come back between the two (ABA). For it to come back, a
   handler nested between them must pop it (its thread's only other
   popper), put it in some breakpoint's tables, and the set path must then
   free those tables and push it. The set path frees tables only once no
   generation leads to them, after a thread progress wait that began then:
   C4's for a collection (C8 pushes); the commit's for a change that
   switches call_time off or restarts it, a session's destroy included
   (step 8's, or step 10's where step 8 defers it; steps 11 and 12 push,
   bp.c). The pop, and the handler's charge that found those
   tables reachable, run in one pinned section, which began before that
   wait did; the wait waits for the section to end [B1][B3], so the push
   comes after the pop's CAS. One wait suffices because the pop is pinned. */
static bpt__timem_table *bpt__timem_table_pop(bpt__thread *rec) {
    bpt__timem_table *t;
    do {
        t = (bpt__timem_table *)bpt__load_acquire_ptr(&rec->timem_free);   /* [T2] pairs with the push's CAS
                                                                                (bpt__timem_table_push) */
        if (!t) return NULL;
    } while (!bpt__cas_ptr(&rec->timem_free, t, t->next_free));
    return t;
}

static void bpt__timem_table_push(bpt__timem_table *t) {
    bpt__thread *rec = t->owner;
    void *head;
    do {
        head = bpt__load_relaxed_ptr(&rec->timem_free);
        t->next_free = (bpt__timem_table *)head;
    } while (!bpt__cas_ptr(&rec->timem_free, head, t));   /* [T2] release: next_free before the head;
                                                             pairs with bpt__timem_table_pop's acquire */
}

/* An empty table of cap cells. On the hit path (rec: the charging thread)
   it is mapped, never malloc'd (a charge may come from a signal handler
   that interrupted malloc: BPT_HIT_MAP, port.h), or taken from the
   thread's idle tables; on the set path (rec NULL: a collection's sums)
   it comes from BPT_MALLOC. */
static bpt__timem_table *bpt__timem_table_new(uint32_t cap, bpt__thread *rec) {
    size_t bytes = bpt__timem_table_bytes(cap);
    bpt__timem_table *t = NULL;
    if (rec && cap == BPT__TIMEM_HIT_CAP) t = bpt__timem_table_pop(rec);
    if (!t) t = (bpt__timem_table *)(rec ? BPT_HIT_MAP(bytes) : BPT_MALLOC(bytes));
    if (!t) return NULL;
    memset(t, 0, bytes);
    t->cap = cap;
    t->owner = rec;
    return t;
}

/* Free a table: from the set path (hit = 0) a first-size table goes back
   to its owner's idle list [T2]; from the hit path (a table grown out of)
   or at another size, a mapped table is unmapped. */
static void bpt__timem_table_free(bpt__timem_table *t, int hit) {
    if (!t) return;
    if (t->owner && t->cap == BPT__TIMEM_HIT_CAP && !hit) bpt__timem_table_push(t);
    else if (t->owner) BPT_HIT_UNMAP(t, bpt__timem_table_bytes(t->cap));
    else BPT_FREE(t);
}

/* Where process's cell is in t, or the free cell where it would go:
   open addressing, linear probing (process 0 marks a free cell). The loop
   ends: a table is never more than half full (bpt__timem_cell_of). */
BPT__HOT BPT__INTREGS uint32_t bpt__timem_probe(const bpt__timem_table *t, uint64_t process) {
    uint32_t i = (uint32_t)((process * 0x9E3779B97F4A7C15ull) >> 40) & (t->cap - 1);
    while (t->cell[i].process != process && t->cell[i].process != 0) i = (i + 1) & (t->cap - 1);
    return i;
}

/* The cell of process in t, or NULL: nothing is claimed. */
BPT__HOT BPT__INTREGS bpt__timem_cell *bpt__timem_cell_find(bpt__timem_table *t, uint64_t process) {
    uint32_t i = bpt__timem_probe(t, process);
    return t->cell[i].process == process ? &t->cell[i] : NULL;
}

/* The cell of process in t, or a free one claimed for it; NULL if t is half full. */
static bpt__timem_cell *bpt__timem_cell_of(bpt__timem_table *t, uint64_t process) {
    uint32_t i = bpt__timem_probe(t, process);
    if (t->cell[i].process == process) return &t->cell[i];
    if ((t->used + 1) * 2 > t->cap) return NULL;
    t->used++;
    t->cell[i].process = process;
    return &t->cell[i];
}

/* a + b, call_memory's net bytes (bpt_account_memory's signed counts),
   modulo 2^64: a sum past int64_t's range wraps, as the uint64_t
   memory_bytes that reports it does (api_info.h), rather than being a
   signed overflow, undefined behaviour (UBSan stops at it; found by
   review). The same one add instruction as +: the charges' frames
   (frames.c), cells and collections sum with it. */
BPT__HOT BPT__INTREGS int64_t bpt__mem_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);   /* the conversion back: two's complement, as every
                                                      compiler bptrace supports defines it */
}

/* Add one cell's values into t (which has room). */
static void bpt__timem_cell_add(bpt__timem_table *t, const bpt__timem_cell *c) {
    bpt__timem_cell *d = bpt__timem_cell_of(t, c->process);
    d->calls += c->calls;
    d->time_ns += c->time_ns;
    d->mem = bpt__mem_add(d->mem, c->mem);
}

/* A hit's new table: t's cells in one twice as large (or a first one):
   NULL when out of memory. The caller frees t if it changed. */
static bpt__timem_table *bpt__timem_table_grow(bpt__timem_table *t, bpt__thread *rec) {
    bpt__timem_table *n = bpt__timem_table_new(t ? t->cap * 2 : (uint32_t)BPT__TIMEM_HIT_CAP, rec);
    uint32_t i;
    if (!n || !t) return n;
    for (i = 0; i < t->cap; i++)
        if (t->cell[i].process) bpt__timem_cell_add(n, &t->cell[i]);
    return n;
}

/* [T3] The tables of thread records past BPT_MAX_THREADS: an array of
   BPT__TIMEM_MORE table pointers, mapped by the first charge that needs
   it and published by CAS, as a session's lane directory is (session.c
   [R1]): two such threads, or a signal handler nested on one, may race to
   map it, and the loser unmaps its own. It is 512 KiB of address space,
   zero-filled, and memory only where touched: one page for every 512
   threads that charge. The set path reads it only while its tables are
   idle (C5, C8), and only the slots of thread records that exist. */
#define BPT__TIMEM_MORE_BYTES ((size_t)BPT__TIMEM_MORE * sizeof(bpt__atomic_ptr))

/* The slot of thread record `index`'s table in t: NULL past both arrays,
   or when `more` is not mapped (make = 0: the set path's look; make = 1:
   a charge maps it, NULL if that fails). */
static bpt__atomic_ptr *bpt__timem_slot(bpt__BpTimem *t, uint32_t index, int make) {
    bpt__atomic_ptr *more;
    if (index < BPT_MAX_THREADS) return &t->table[index];
    if (index - BPT_MAX_THREADS >= BPT__TIMEM_MORE) return NULL;
    more = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&t->more);   /* [T3] */
    if (!more && make) {
        bpt__atomic_ptr *fresh = (bpt__atomic_ptr *)BPT_HIT_MAP(BPT__TIMEM_MORE_BYTES);   /* zero-filled */
        if (!fresh) return NULL;
        if (bpt__cas_ptr(&t->more, NULL, (void *)fresh)) {   /* [T3] release: pairs with the acquire loads of `more` */
            more = fresh;
        } else {
            BPT_HIT_UNMAP((void *)fresh, BPT__TIMEM_MORE_BYTES);
            more = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&t->more);
        }
    }
    return more ? &more[index - BPT_MAX_THREADS] : NULL;
}

/* [T1] A thread's table is published in its slot (t->table[index], or
   `more`'s [T3]) by its owner only, with a release store, when a charge
   makes or grows it (bpt__timem_charge_new); the set path loads a slot
   with an acquire load (bpt__timem_table_at: C5's sums, C8's frees and
   bpt__timem_free). The pair makes a table found through its slot whole:
   its cap, used, owner and cells written before the pointer. The set path
   reads only idle tables, after a wait the charge's pinned section held
   back ([B3] orders the owner's plain stores to the cells too); the pair
   is what makes the table found whole without that wait, as the root
   record's outside reader finds it (api_root.h). */

/* Thread record index k's table in t, or NULL (the set path, on idle
   tables [T1]). */
static bpt__timem_table *bpt__timem_table_at(const bpt__BpTimem *t, uint32_t k) {
    bpt__atomic_ptr *slot = bpt__timem_slot((bpt__BpTimem *)t, k, 0);
    return slot ? (bpt__timem_table *)bpt__load_acquire_ptr(slot) : NULL;   /* [T1] pairs with the release
                                                                             in bpt__timem_charge_new */
}

/* How many thread record indexes may hold a table of t: every index below
   it; none above, since records are made in index order. */
static uint32_t bpt__timem_slots(const bpt__BpTimem *t) {
    uint32_t n = bpt__threads_count();
    if (n > BPT_MAX_THREADS && !bpt__load_acquire_ptr((bpt__atomic_ptr *)&t->more)) n = BPT_MAX_THREADS;
    return n;
}

BPT__PRIVATE bpt__BpTimem *bpt__timem_new(void) {
    bpt__BpTimem *t = (bpt__BpTimem *)BPT_MALLOC(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->refc = 1;
    return t;
}

BPT__PRIVATE void bpt__timem_free(bpt__BpTimem *t) {
    uint32_t k, n = bpt__timem_slots(t);
    void *more = bpt__load_relaxed_ptr(&t->more);
    for (k = 0; k < n; k++) bpt__timem_table_free(bpt__timem_table_at(t, k), 0);
    if (more) BPT_HIT_UNMAP(more, BPT__TIMEM_MORE_BYTES);
    bpt__timem_table_free(t->carried, 0);
    if (t->prev) bpt__timem_free(t->prev);
    BPT_FREE(t);
}

BPT__PRIVATE void bpt__timem_ref(bpt__BpTimem *t) { t->refc++; }

BPT__PRIVATE void bpt__timem_unref(bpt__BpTimem *t) {
    if (t && --t->refc == 0) bpt__timem_free(t);
}

/* The tables of a generation with call_time or call_memory on, or NULL. */
BPT__PRIVATE bpt__BpTimem *bpt__timem_of(const bpt__GenericBpData *d) {
    if (d->flags & BPT__BPF_TIME_TRACE) return (bpt__BpTimem *)d->data[BPT__KIX_TIME];
    if (d->flags & BPT__BPF_MEM_TRACE) return (bpt__BpTimem *)d->data[BPT__KIX_MEMORY];
    return NULL;
}

/* Point every timem kind that is on in d at t, each with its own reference. */
BPT__PRIVATE void bpt__timem_point(bpt__GenericBpData *d, bpt__BpTimem *t) {
    static const int kix[2] = { BPT__KIX_TIME, BPT__KIX_MEMORY };
    int i;
    for (i = 0; i < 2; i++) {
        if (!(d->flags & BPT__BPF_ON(kix[i]))) continue;
        t->refc++;
        bpt__timem_unref((bpt__BpTimem *)d->data[kix[i]]);
        d->data[kix[i]] = t;
    }
}

/* Add to a cell (inline: the short paths make no call). */
BPT__HOT BPT__INTREGS void bpt__timem_cell_charge(bpt__timem_cell *c, uint64_t calls, uint64_t ns, int64_t mem) {
    c->calls += calls;
    c->time_ns += ns;
    c->mem = bpt__mem_add(c->mem, mem);
}

/* [H1] A thread marks the tables it charges while it charges them
   (rec->timem_charging, the first timem_depth), and a signal handler's
   charge nested in it, of the same tables, is dropped and counted in their
   `lost`: it would interleave with the owner's update (a lost add, a table
   grown and freed twice). One of other tables goes ahead, and marks them
   above: so a second handler, nested in the first's charge, finds the
   thread's tables marked too. bpt__timem_mark returns 0, marking nothing,
   when t is marked already or the marks are full (BPT__TIMEM_NEST
   charges deep); else 1 and *depth, for bpt__timem_unmark. The depth goes
   up before the slot is written: a handler nested between the two marks
   above it, and may find the slot's stale table (a drop, needless but
   safe); the interrupted charge has touched nothing yet. */
BPT__HOT BPT__INTREGS int bpt__timem_mark(bpt__thread *rec, bpt__BpTimem *t, uint32_t *depth) {
    uint32_t d = rec->timem_depth, i;
    if (BPT__UNLIKELY(d != 0)) {   /* nested: in a charge of t, or too deep? */
        if (d == BPT__TIMEM_NEST) return 0;
        for (i = 0; i < d; i++)
            if (rec->timem_charging[i] == (void *)t) return 0;
    }
    rec->timem_depth = d + 1;
    bpt__compiler_barrier();   /* [H1] the slot is ours before it is written */
    rec->timem_charging[d] = t;
    bpt__compiler_barrier();   /* [H1] marked before the table is touched */
    *depth = d;
    return 1;
}

BPT__HOT BPT__INTREGS void bpt__timem_unmark(bpt__thread *rec, uint32_t depth) {
    bpt__compiler_barrier();   /* [H1] the table is left before the mark goes */
    rec->timem_depth = depth;
}

/* The common case of a charge, with the integer registers alone and no
   call (the time path's count of a call, site_native.c; the timed
   return's own time, frames.c; and bpt__timem_charge below): the thread's
   table and the process's cell exist, and the charge can be marked [H1];
   add to the cell. Returns 1 when charged; 0 having changed nothing when
   the table or the cell is still to be made, the thread record is past
   BPT_MAX_THREADS (its table is in `more`), or this runs nested in a
   charge of t: bpt__timem_charge then does it, or counts it lost. The
   cell is looked up after the mark: a handler nested after the look would
   otherwise be free to grow the table and unmap the cell. */
BPT__HOT BPT__INTREGS int bpt__timem_charge_try(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                                uint64_t calls, uint64_t ns, int64_t mem) {
    bpt__timem_table *tab;
    bpt__timem_cell *c = NULL;
    uint32_t depth;
    if (rec->index >= BPT_MAX_THREADS || !bpt__timem_mark(rec, t, &depth)) return 0;
    tab = (bpt__timem_table *)bpt__load_relaxed_ptr(&t->table[rec->index]);
    if (BPT__LIKELY(tab != NULL) && BPT__LIKELY((c = bpt__timem_cell_find(tab, process)) != NULL))
        bpt__timem_cell_charge(c, calls, ns, mem);
    bpt__timem_unmark(rec, depth);
    return c != NULL;
}

/* What bpt__timem_charge_try leaves, out of line (its calls would make
   every charge save registers): marked [H1], make what is missing (the
   `more` slots, the thread's table, a cell for process, a table twice as
   large) and charge. Only the owner writes its table; a table that must
   grow is replaced (published with a release store) and the old one freed
   at once: nobody reads a table its owner may be writing (see above). A
   charge nested in a charge of t, one past BPT__TIMEM_NEST deep, or one
   with no memory for its table, is dropped and counted in `lost`. */
BPT__NOINLINE void bpt__timem_charge_new(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                         uint64_t calls, uint64_t ns, int64_t mem) {
    bpt__atomic_ptr *slot;
    bpt__timem_table *tab, *grown;
    bpt__timem_cell *c = NULL;
    uint32_t depth;
    if (!bpt__timem_mark(rec, t, &depth)) { bpt__fetch_add_u64(&t->lost, 1); return; }   /* [H1] */
    BPT_TEST_POINT("timem_charge_new: marked");   /* t_timem_nesting */
    if ((slot = bpt__timem_slot(t, rec->index, 1)) != NULL) {   /* NULL: no memory for `more`, or past it */
        tab = (bpt__timem_table *)bpt__load_relaxed_ptr(slot);
        while (!tab || !(c = bpt__timem_cell_of(tab, process))) {
            if (!(grown = bpt__timem_table_grow(tab, rec))) break;
            bpt__store_release_ptr(slot, grown);   /* [T1] pairs with bpt__timem_table_at's acquire */
            bpt__timem_table_free(tab, 1);
            tab = grown;
        }
    }
    if (c) bpt__timem_cell_charge(c, calls, ns, mem);
    else bpt__fetch_add_u64(&t->lost, 1);
    bpt__timem_unmark(rec, depth);
}

/* Charge one thread's calls, time and memory for process (the hit and
   return paths, pinned): the common case inline (bpt__timem_charge_try),
   the rest out of line (bpt__timem_charge_new). A signal handler's charge
   nested in one of the same tables is dropped and counted in `lost`
   (bpt__timem_mark) [H1]. */
BPT__HOT void bpt__timem_charge(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                uint64_t calls, uint64_t ns, int64_t mem) {
    if (BPT__LIKELY(bpt__timem_charge_try(t, rec, process, calls, ns, mem))) return;
    bpt__timem_charge_new(t, rec, process, calls, ns, mem);
}

/* >>report: call_time / call_memory of one breakpoint, from what the last
   collection carried (C6). The caller's procs gets the cap processes that
   rank first, in rank order, found in one pass over the carried cells with
   no allocation: procs[0..kept) is a heap whose root ranks last of those
   kept so far, so a cell that ranks before the root replaces it (n cells:
   O(n log cap)); the heap is then sorted in place, first rank first. */

/* 1 when a ranks before b: more time, then more memory, then the lower
   process id. A total order, since a table holds a process once: which
   processes are kept, and their order, depend on the sums alone, not on
   where the hash put them. Memory is a net count, compared signed (the
   cell's int64_t, carried in memory_bytes as its two's complement): a
   process that freed more than it allocated has less than none, and
   ranks after every one that allocated (compared unsigned, -100 B was
   2^64 - 100 and ranked first; found by review). */
static int bpt__proc_before(const bpt_info_process *a, const bpt_info_process *b) {
    int64_t am = (int64_t)a->memory_bytes, bm = (int64_t)b->memory_bytes;
    if (a->time_ns != b->time_ns) return a->time_ns > b->time_ns;
    if (am != bm) return am > bm;
    return a->process < b->process;
}

/* Restore the heap h[0..n) (every entry ranks at or after its children)
   below i, whose entry may rank before a child: move it down past every
   child that ranks after it, the later ranked child first. */
static void bpt__proc_sift_down(bpt_info_process *h, uint32_t n, uint32_t i) {
    bpt_info_process x = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bpt__proc_before(&h[c], &h[c + 1])) c++;   /* c: the child ranking last */
        if (!bpt__proc_before(&x, &h[c])) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* h[i] was just added to the heap h[0..i]: move it up past every parent
   that ranks before it. */
static void bpt__proc_sift_up(bpt_info_process *h, uint32_t i) {
    bpt_info_process x = h[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!bpt__proc_before(&h[parent], &x)) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

BPT__PRIVATE void bpt__timem_report(const bpt__BpTimem *tm, bpt_info *out) {
    const bpt__timem_table *t = tm ? tm->carried : NULL;
    bpt_info_process *procs = out->procs;
    uint32_t i, n = 0, kept = 0, cap = procs ? out->procs_cap : 0;
    if (!tm) return;
    out->lost_charges += tm->lost_carried;   /* set path: C6 wrote it, under the same permission */
    if (!t) return;
    for (i = 0; i < t->cap; i++) {
        const bpt__timem_cell *c = &t->cell[i];
        bpt_info_process p;
        if (!c->process) continue;
        out->calls += c->calls;
        out->time_ns += c->time_ns;
        out->memory_bytes += (uint64_t)c->mem;
        n++;
        if (!cap) continue;
        p.process = c->process;
        p.calls = c->calls;
        p.time_ns = c->time_ns;
        p.memory_bytes = (uint64_t)c->mem;
        if (kept < cap) {                                   /* room: add it */
            procs[kept] = p;
            bpt__proc_sift_up(procs, kept++);
        } else if (bpt__proc_before(&p, &procs[0])) {       /* full: it beats the last kept */
            procs[0] = p;
            bpt__proc_sift_down(procs, kept, 0);
        }
    }
    out->nprocs = n;
    /* Sort the heap: the root, last in rank, goes to the end of what is
       left, so procs[0..kept) ends first rank first. */
    while (kept > 1) {
        bpt_info_process last = procs[0];
        procs[0] = procs[--kept];
        procs[kept] = last;
        bpt__proc_sift_down(procs, kept, 0);
    }
}

/* How many processes the last collection carried sums for (bpt_trace_info_each
   sizes its per-process array with it). */
BPT__PRIVATE uint32_t bpt__timem_nprocs(const bpt__BpTimem *tm) {
    return tm && tm->carried ? tm->carried->used : 0;
}

/* C5 for one breakpoint: its idle tables, what they carried and any
   unmerged older ones, summed into one new table (bpt__timem_merge; NULL
   when out of memory), and their drops into one count (bpt__timem_lost). */
static uint32_t bpt__timem_cells(const bpt__BpTimem *t) {
    uint32_t k, n = 0;
    for (; t; t = t->prev) {
        uint32_t slots = bpt__timem_slots(t);
        for (k = 0; k < slots; k++) {
            const bpt__timem_table *tab = bpt__timem_table_at(t, k);
            if (tab) n += tab->used;
        }
        if (t->carried) n += t->carried->used;
    }
    return n;
}

static void bpt__timem_table_add(bpt__timem_table *m, const bpt__timem_table *t) {
    uint32_t i;
    if (t) for (i = 0; i < t->cap; i++) if (t->cell[i].process) bpt__timem_cell_add(m, &t->cell[i]);
}

/* The drops of real and of its unmerged older tables, each with what its
   collection carried. Every charge of these tables ended before C4's wait
   did ([B3]: a charge runs pinned), so each `lost` is final: a relaxed
   load reads it whole. No thread adds to it any more, and it is summed
   here once: C7 and C8 free these tables once the sums are carried (or, out
   of memory, C6 keeps them whole in `prev`, and the next collection sums
   them, carrying nothing of them now). */
static uint64_t bpt__timem_lost(const bpt__BpTimem *real) {
    uint64_t n = 0;
    for (; real; real = real->prev)
        n += bpt__load_relaxed_u64((bpt__atomic_u64 *)&real->lost) + real->lost_carried;
    return n;
}

static bpt__timem_table *bpt__timem_merge(const bpt__BpTimem *real) {
    uint32_t cells = bpt__timem_cells(real), cap = 8, k;
    bpt__timem_table *m;
    while (cap < cells * 2 + 2) cap *= 2;
    if (!(m = bpt__timem_table_new(cap, NULL))) return NULL;
    for (; real; real = real->prev) {
        uint32_t slots = bpt__timem_slots(real);
        for (k = 0; k < slots; k++) bpt__timem_table_add(m, bpt__timem_table_at(real, k));
        bpt__timem_table_add(m, real->carried);
    }
    return m;
}

/* C1-C8 for the breakpoints gs[0..n), each with call_time or call_memory
   in its active half. Under the code modification permission; C9 is the
   caller's: it reads bpt__timem_of(&gs[i]->data[active])->carried and
   releases the permission. Returns 0, or BPT_ENOMEM: at C1 with nothing
   changed; at C5 with every charge kept (the idle tables that could not be
   merged are kept for the next collection). */
BPT__PRIVATE int bpt__timem_collect(bpt__GenericBp **gs, int n) {
    unsigned active = bpt_active_bp_ix(), staging = active ^ 1;
    bpt__BpTimem **fresh;
    int i, rc = 0;
    if (n == 0) return 0;
    /* C1. allocate: fresh tables in every staging half (which pointed at the
           same tables as the active half, the invariant between changes). */
    if (!(fresh = (bpt__BpTimem **)BPT_MALLOC(sizeof *fresh * (size_t)n)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory for the collection; nothing changed");
    for (i = 0; i < n; i++) {
        if ((fresh[i] = bpt__timem_new()) == NULL) {
            while (i--) bpt__timem_free(fresh[i]);
            BPT_FREE(fresh);
            return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory for the collection's tables; nothing changed");
        }
    }
    for (i = 0; i < n; i++) {
        bpt__timem_point(&gs[i]->data[staging], fresh[i]);
        bpt__timem_unref(fresh[i]);   /* the staging half's references hold it now */
    }
    /* C2. wait (the hit path reads a generation only after the index's
           acquire load, which C3's release covers; the wait is OTP's, and
           keeps the two switches of consecutive collections apart). */
    bpt_thread_progress_wait();
    /* C3. switch: charges go to the fresh tables ([G2], bp.c). */
    bpt__commit();
    /* C4. wait: no thread is still charging a real table. */
    bpt_thread_progress_wait();
    for (i = 0; i < n; i++) {
        bpt__BpTimem *real = bpt__timem_of(&gs[i]->data[active]);
        /* C5. sum the idle real tables. */
        bpt__timem_table *merged = bpt__timem_merge(real);
        /* C6. carry the sums and the drops in the fresh tables (or, out of
               memory, the real tables themselves, merged next time: fresh
               keeps them alive with one reference of its own, and carries
               none of their drops, which stay in them until then). The
               fresh `lost` is left alone: charges made since C3 add to it,
               and the next collection sums it. */
        if (merged) { fresh[i]->carried = merged; fresh[i]->lost_carried = bpt__timem_lost(real); }
        else { fresh[i]->prev = real; real->refc++; rc = BPT_ENOMEM; }
        /* C7 and C8. consolidate: staging := active; the real tables lose
           their last references, idle since C4, and are freed (unless C6
           kept them). */
        bpt__timem_point(&gs[i]->data[active], fresh[i]);
    }
    BPT_FREE(fresh);
    if (rc < 0)
        return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory to sum call_time tables; every count is "
                         "kept and the next collection sums it");
    return 0;
}
/*** End of timem.c ***/

/*** Begin file symbols.c ***/
/* symbols.c: which registered native function holds a code address, for
   the caller of a call message (hit.c) and for return_to (frames.c). ERTS
   answers the same question with beam_ranges.c (erts_lookup_function_info):
   the address ranges of the loaded code, sorted and searched by bisection,
   replaced as a whole when code is loaded or purged. Here the ranges are
   those of the registered native functions. This part knows nothing of the
   registry (funcs.c): it indexes the records it is given. */

#if defined(BPT_NATIVE)
/* The address index: an address-sorted snapshot of the native records,
   replaced as a whole under the code modification permission and freed
   after a thread progress wait, so that pinned readers search it without
   a lock. */
typedef struct bpt__addr_entry {
    uintptr_t start, end;         /* [start, end): the function's code */
    const bpt_func *f;
} bpt__addr_entry;

struct bpt__addr_index {
    size_t n;
    bpt__addr_entry e[1];
};

static bpt__atomic_ptr bpt__addr_index_cur;   /* bpt__addr_index *, release-published */

/* Pinned. The registered native function whose code holds addr, or NULL
   for code bptrace does not know. Native records are never freed. */
BPT__PRIVATE const bpt_func *bpt__symbolize(uintptr_t addr) {
    const bpt__addr_index *ix = (const bpt__addr_index *)bpt__load_acquire_ptr(&bpt__addr_index_cur);   /* [I1] */
    size_t lo = 0, hi;
    if (!ix) return NULL;
    hi = ix->n;
    while (lo < hi) {   /* the first entry starting above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (ix->e[mid].start <= addr) lo = mid + 1; else hi = mid;
    }
    if (lo == 0 || addr >= ix->e[lo - 1].end) return NULL;
    return ix->e[lo - 1].f;
}

/* The address index follows the native functions as they come and go
   (funcs.c registers and unregisters them), in two steps, both under the
   permission:

     A1. bpt__addr_index_alloc, before the registry changes: room for every
         native function there will be. Out of memory here fails the whole
         registration or unregistration with BPT_ENOMEM and changes nothing.
         (An index that stayed old would name an unregistered function as a
         caller: its record is retired, and a later registration may reuse
         it for another function.)
     A2. bpt__addr_index_publish, after the registry changed: fill, sort,
         publish with a release store, and free the old index after a
         thread progress wait, so no pinned reader still searches it. It
         cannot fail.

   A function's extent is its ELF symbol's size; a function registered by
   hand has none, so it extends to the next registered entry, at most
   64 KiB. */
static int bpt__addr_entry_cmp(const void *a, const void *b) {
    uintptr_t x = ((const bpt__addr_entry *)a)->start, y = ((const bpt__addr_entry *)b)->start;
    return x < y ? -1 : x > y;
}

/* A1: room for `n` entries. NULL after bpt__fail(BPT_ENOMEM). */
BPT__PRIVATE bpt__addr_index *bpt__addr_index_alloc(size_t n, const char *who) {
    bpt__addr_index *ix = (bpt__addr_index *)BPT_MALLOC(sizeof *ix + sizeof(bpt__addr_entry) * n);
    if (!ix) bpt__fail(BPT_ENOMEM, "%s: no memory for the address index of %lu native functions; "
                       "nothing changed", who, (unsigned long)n);
    return ix;
}

/* A2: ix came from A1 with room for every native function among
   funcs[0..nfuncs), the records now registered. */
BPT__PRIVATE void bpt__addr_index_publish(bpt__addr_index *ix, bpt_func *const *funcs, uint32_t nfuncs) {
    bpt__addr_index *old;
    size_t k;
    uint32_t i;
    ix->n = 0;
    for (i = 0; i < nfuncs; i++) {
        const bpt_func *f = funcs[i];
        if (f->kind != BPT__SITE_NATIVE) continue;
        ix->e[ix->n].start = (uintptr_t)f->fn;
        ix->e[ix->n].end = f->code_size ? (uintptr_t)f->fn + (uintptr_t)f->code_size : 0;
        ix->e[ix->n++].f = f;
    }
    if (ix->n > 1) qsort(ix->e, ix->n, sizeof ix->e[0], bpt__addr_entry_cmp);
    for (k = 0; k < ix->n; k++) {
        uintptr_t bound = ix->e[k].start + 65536;
        if (k + 1 < ix->n && ix->e[k + 1].start < bound) bound = ix->e[k + 1].start;
        if (!ix->e[k].end || ix->e[k].end > bound) ix->e[k].end = bound;
    }
    old = (bpt__addr_index *)bpt__load_relaxed_ptr(&bpt__addr_index_cur);
    bpt__store_release_ptr(&bpt__addr_index_cur, ix);   /* [I1] pairs with bpt__symbolize's acquire */
    if (old) {
        bpt_thread_progress_wait();
        BPT_FREE(old);
    }
}
#endif
/*** End of symbols.c ***/

/*** Begin file frames.c ***/
/* frames.c: return_from, exception_from and return_to, as
   BEAM's return_trace and exception_trace frames.

   BEAM pushes a return_trace frame on the process stack when a match spec
   asks for it; the frame's code sends return_from when the call returns, and
   a throw that finds it while scanning the stack sends exception_from.
   Native code has no room on its stack for such a frame, so bptrace keeps it
   on a per-thread shadow stack and makes the call return through it:

   F0. Settle (bpt__native_settle, before a native hit's messages): frames
      at or below the new call's stack pointer, on the same stack, were
      left by a longjmp or a throw: exception_from, newest first.
   F1. Entry (bpt__native_frame_push, from the entry handler): save the
      caller's return address in a shadow frame, with the stack pointer at
      entry, which names the frame, and write the return trampoline's
      address in its place (x86-64: the slot the call pushed; aarch64: x9,
      which the stub moves back to x30). Once per call, however many
      sessions asked: the frame lists them. A call that asks for return_from
      alone, or call_time alone, for one session, gets the same frame from
      the entry stub's call-return path or time path (site_native.c;
      bpt__native_frame_push_plain, below).
   F2. Return (bpt__native_return, from the trampoline): find the newest
      frame whose stack pointer is the returning one. Frames above it were
      unwound (longjmp, a host's throw) without returning: exception_from,
      newest first. Then return_from, and return_to once the chain of tail
      calls sharing that stack pointer ends. Continue at the original
      address. The common return, the top frame of one session with no
      tail call and no return_to, copies out only what it sends
      (bpt__native_return_one), or, when it asks for return_from alone,
      writes that straight into the thread's chunk (the plain return,
      bpt__native_return_plain, PR1-PR3), or, when it only times the
      call, charges its own time and resumes its caller at a look (the
      timed return, bpt__native_return_timed, TR1-TR5): those two are
      taken first, by the return route (RR1-RR4, in bpt__native_return);
      the rest go the general way (bpt__native_return_chain).
   F3. Unwind (bpt_unwind_to): the host says how far it unwound.
   Every step looks only at the frames of the stack the thread runs on now:
   a thread that switches stacks (fibers.c) tags each frame with its
   stack's tag, and a frame that ends under another stack's live frames is
   left as a tombstone (gone), dropped when it reaches the top.

   A frame is reserved (depth + 1) before it is filled, and copied out
   before it is released (depth - 1), so that a signal handler nested on
   the same thread, which pushes and pops above it, never touches it.
   While it is filled it is marked (shadow_filling): its stack pointer is
   a previous frame's until it is set, and a handler that settled or timed
   by it would end a live frame (whose return then found no frame: an
   abort) or charge the wrong one. A handler's own push saves the mark and
   puts it back, so the mark survives any nesting [H1].
   Frames hold session weak ids, never session pointers: a frame that
   outlives its session finds no session and sends nothing.

   What the swap costs: an unwinder (a C++ throw) that met the trampoline
   where a return address should be would find no unwind information for
   it and call std::terminate. unwind.c stands between the C++ runtime and
   the unwinder and puts the original addresses back for the unwind (U1,
   U2); longjmp needs no unwind information (F0, F2 end the frames it
   skipped). VM frames use the same frames on a second stack, named by a
   token the VM keeps. */

/* A session that could not get a frame (the hit already serves
   BPT_FRAME_SESSIONS sessions, the shadow stack is full, or the VM keeps no
   frames) has the call's return untraced, counted. */
static BPT__INTREGS void bpt__frame_skipped(bpt__session *s) { bpt__fetch_add_u64(&s->frames_skipped, 1); }

/* The hit's entry for session s (call trace and call_time of one session
   share one), or -1. */
static BPT__INTREGS int bpt__hit_want_of(const bpt__hit *h, const bpt__session *s) {
    uint32_t i;
    for (i = 0; i < h->nwant; i++)
        if (h->want[i].id == s->id) return (int)i;
    return -1;
}

BPT__HOT void bpt__hit_want_frame(bpt__hit *h, bpt__session *s, unsigned actions, uint8_t rettype) {
    bpt__frame_session *w;
    int i;
    actions &= BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU;   /* a kind that wants a frame keeps its bit */
    h->wanted |= actions;
    if ((i = bpt__hit_want_of(h, s)) >= 0) {   /* call trace and call_time of one session: one entry */
        h->want[i].actions |= actions;
        if (actions & (BPT_RETURN | BPT_EXCEPTION)) h->want[i].rettype = rettype;
        return;
    }
    if (h->nwant == BPT_FRAME_SESSIONS) { bpt__frame_skipped(s); return; }
    w = &h->want[h->nwant];
    w->id = s->id;
    w->actions = actions;
    w->rettype = rettype;
    w->since = w->own_ns = 0;
    w->mem = 0;
    h->want_s[h->nwant++] = s;
}

/* Whether a frame that session s wants of this hit now would be pushed:
   the site keeps frames (a VM hit has a token), the hit has room for s,
   and the shadow stack is not full. The call record says when it would
   not (BPT__REC_CALL_NO_RETURN): no return_from will end that call. Not
   foreseen, and counted as skipped at the push as before: a signal
   handler that fills the stack in between, a stack that cannot be
   mapped, a native tail call with no frame to share. */
BPT__HOT int bpt__hit_frame_room(const bpt__hit *h, const bpt__session *s) {
    int stack = h->f->kind == BPT__SITE_VM ? BPT__STACK_VM : BPT__STACK_NATIVE;
    if (h->no_frame || h->rec->shadow_depth[stack] >= BPT_SHADOW_FRAMES) return 0;
    return h->nwant < BPT_FRAME_SESSIONS || bpt__hit_want_of(h, s) >= 0;   /* room, or its entry to add to */
}

/* A shadow stack's first use: one mapping per thread record (BPT_HIT_MAP:
   the call may be a traced malloc's), kept for its life (records are
   reused, never freed), so a thread that exits with live frames leaks
   nothing. Out of line: the mapping's call would make every reserve save
   registers. 0: no memory. */
BPT__NOINLINE int bpt__frame_stack_map(bpt__thread *rec, int stack) {
    rec->shadow[stack] = (bpt__frame *)BPT_HIT_MAP(sizeof(bpt__frame) * BPT_SHADOW_FRAMES);
    return rec->shadow[stack] != NULL;
}

/* Reserve the next frame of a shadow stack that is mapped (F1's first
   half), marked as being filled; NULL when the stack is full. *mark gets
   the mark to put back when the frame is filled (bpt__frame_filled), 0
   with NULL.
   Room is checked here, on the depth it reserves at, and nowhere else
   counts: a signal handler can leave a frame behind between a caller's
   own look at the depth and this (it longjmps out of a return-traced
   function, t_call_path claim 10), and a push that trusted the look wrote
   one frame past the stack. */
BPT__HOT BPT__INTREGS bpt__frame *bpt__frame_reserve_mapped(bpt__thread *rec, int stack, uint32_t *mark) {
    uint32_t d = rec->shadow_depth[stack];
    if (BPT__UNLIKELY(d >= BPT_SHADOW_FRAMES)) return (*mark = 0, (bpt__frame *)NULL);   /* gcc -Og: set on every path */
    rec->shadow[stack][d].gone = 0;   /* whose it is holds from the start (bpt__frame_mine) */
    rec->shadow[stack][d].fiber = rec->fiber;
    *mark = rec->shadow_filling[stack];
    rec->shadow_filling[stack] = d + 1;   /* [H1] marked before it is on the stack */
    bpt__compiler_barrier();
    rec->shadow_depth[stack] = d + 1;   /* reserve, then fill: a nested handler pushes above */
    bpt__compiler_barrier();   /* [H1] */
    return &rec->shadow[stack][d];
}

/* Reserve the next frame of a shadow stack, as bpt__frame_reserve_mapped,
   mapping the stack on its first use; NULL when it is full or cannot be
   mapped. */
BPT__HOT bpt__frame *bpt__frame_reserve(bpt__thread *rec, int stack, uint32_t *mark) {
    if (BPT__UNLIKELY(!rec->shadow[stack]) && !bpt__frame_stack_map(rec, stack)) return NULL;
    return bpt__frame_reserve_mapped(rec, stack, mark);
}

/* The reserved frame is filled: put the mark back as it was. */
BPT__HOT BPT__INTREGS void bpt__frame_filled(bpt__thread *rec, int stack, uint32_t mark) {
    bpt__compiler_barrier();   /* [H1] every field stored before the mark goes */
    rec->shadow_filling[stack] = mark;
}

/* Is frame d of the stack being filled (by this thread, or the code a
   handler interrupted)? Its fields are not to be read. */
BPT__PRIVATE int bpt__frame_filling(const bpt__thread *rec, int stack, uint32_t d) {
    return rec->shadow_filling[stack] == d + 1;
}

BPT__PRIVATE int bpt__frame_mine(const bpt__thread *rec, int stack, const bpt__frame *fr) {
    return stack == BPT__STACK_VM || (!fr->gone && fr->fiber == rec->fiber);
}

/* >>timem attribution: BEAM charges time at calls and returns. A call
   pauses the function its session was timing in this process (the topmost
   frame of that session and process) and starts its own; a return charges
   the callee's own time and resumes the caller, unless the callee returns
   in another process than its own (it switched): then the caller resumes
   when its process is switched back in. */

/* The topmost frame below depth d of this stack that times session id in
   process, and its session entry; NULL if none. The walk stops at floor:
   the depth of a frame that the code a signal handler interrupted was
   pushing (its shadow_filling mark; 0: none). That push pauses the
   callers below it itself, and may be doing so right now, the span added
   to a caller's time and its start not yet cleared [H1]: a handler that
   paused that caller too would charge the span twice (and one whose
   return resumed it would charge the caller its callee's time). So a
   handler's calls pause and resume no frame below the push it
   interrupted; their time goes to the function it interrupted. A process
   or fiber switch's walk pauses and resumes callers too
   (bpt__timem_current_each, timem_walking): a handler's calls that
   interrupted it pause and resume none. */
static bpt__frame_session *bpt__timem_current(bpt__thread *rec, int stack, uint32_t d, uint32_t floor, uint64_t id,
                                              uint64_t process) {
    if (rec->timem_walking) return NULL;   /* [H1] */
    while (d-- > floor) {
        bpt__frame *fr = &rec->shadow[stack][d];
        uint32_t i;
        if (fr->process != process || !bpt__frame_mine(rec, stack, fr)) continue;
        for (i = 0; i < fr->nsess; i++)
            if (fr->sess[i].id == id && (fr->sess[i].actions & BPT__FRAME_TIMEM)) return &fr->sess[i];
    }
    return NULL;
}

/* "Now" in both clocks a frame's sessions may time by: the wall clock's
   ticks (bpt__now_ticks: the CPU's counter, or clock_gettime's ns), read
   by the caller, and the thread's CPU ns, read on the first need (a
   syscall: only sessions created with time_cpu pay it). A frame keeps
   the wall clock's start in ticks and converts each span it runs to ns
   once, when it pauses (bpt__ticks_ns): one conversion per span, not
   one per reading. */
typedef struct bpt__now2 {
    uint64_t ticks, cpu;
} bpt__now2;

static bpt__now2 bpt__now2_at(uint64_t ticks) {
    bpt__now2 n;
    n.ticks = ticks;
    n.cpu = 0;
    return n;
}

/* "Now" for a new frame: the clock is read only when one of its sessions
   times the call (a return trace alone needs no time at entry). */
BPT__HOT bpt__now2 bpt__now2_for(const bpt__hit *h) {
    return bpt__now2_at((h->wanted & BPT__FRAME_TIMEM) ? bpt__now_ticks() : 0);
}

/* The CPU clock's first read: out of line, so that a frame timed by the
   wall clock saves no registers for its call. */
BPT__NOINLINE uint64_t bpt__now_cpu(bpt__now2 *now) {
    if (!now->cpu) now->cpu = bpt__thread_cpu_ns();
    return now->cpu;
}

/* "Now" in fs's clock: wall ticks, or CPU ns. */
static uint64_t bpt__now_for(const bpt__frame_session *fs, bpt__now2 *now) {
    return (fs->actions & BPT__FRAME_CPU) ? bpt__now_cpu(now) : now->ticks;
}

/* The ns fs has run since its start (running: since != 0); 0 when `now`
   is before it (a signal handler nested on the thread restarted fs after
   the thread read `now`: bpt__ticks_ns). */
static uint64_t bpt__timem_span(const bpt__frame_session *fs, bpt__now2 *now) {
    uint64_t d = bpt__now_for(fs, now) - fs->since;
    if (fs->actions & BPT__FRAME_CPU) return (int64_t)d < 0 ? 0 : d;
    return bpt__ticks_ns(d);
}

static void bpt__timem_pause(bpt__frame_session *fs, bpt__now2 *now) {
    if (fs && fs->since) {
        fs->own_ns += bpt__timem_span(fs, now);
        BPT_TEST_POINT("timem pause: the span added, the start not yet cleared");   /* t_timem_nesting */
        fs->since = 0;
    }
}

static void bpt__timem_resume(bpt__frame_session *fs, bpt__now2 *now) {
    if (fs && !fs->since) fs->since = bpt__now_for(fs, now);
}

/* Charge own_ns and mem of a call of f in process to f's tables of
   session id in generation ix, if that session still has the kinds on,
   paused or not (pinned: the GenericBp list and the active generation are
   read as the hit path reads them). A pause stops new calls from being
   counted and timed; a call in flight when it came is charged at its
   return, as erts_trace_time_return in beam_bp.c charges any function
   that still has a call_time breakpoint (get_time_break), active or not. */
BPT__HOT void bpt__timem_charge_session(bpt__thread *rec, bpt_func *f, unsigned ix, uint64_t id,
                                      uint64_t process, uint64_t own_ns, int64_t mem) {
    bpt__GenericBp *g;
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp); g;        /* [G1] */
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next)) {
        const bpt__GenericBpData *d = &g->data[ix];
        bpt__BpTimem *t;
        if (g->session->id != id) continue;
        if (!(d->flags & BPT__BPF_TIMEM_ON)) return;
        t = bpt__timem_of(d);
        if (!(d->flags & BPT__BPF_TIME_TRACE)) own_ns = 0;
        if (!(d->flags & BPT__BPF_MEM_TRACE)) mem = 0;
        bpt__timem_charge(t, rec, process, 0, own_ns, mem);
        return;
    }
}

/* Charge a popped frame's own time and memory to its function's tables in
   each session that times it. */
static void bpt__timem_charge_frame(bpt__thread *rec, bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    unsigned ix = bpt_active_bp_ix();   /* [G2] once per return, as once per hit */
    for (i = 0; i < fr->nsess; i++) {
        bpt__frame_session *fs = &fr->sess[i];
        if (!(fs->actions & BPT__FRAME_TIMEM)) continue;
        bpt__timem_pause(fs, now);
        bpt__timem_charge_session(rec, fr->f, ix, fs->id, fr->process, fs->own_ns, fs->mem);
    }
}

/* A frame was popped: resume, for each session it timed, the caller that
   session was timing in the same process, if the thread runs that process
   now. A call that switched process (bpt_process_switch) and returns in
   another leaves its callers paused: the process they run in is switched
   out, and its switch back in resumes them (bpt__timem_current_each).
   Resumed here, they were charged the time the other process ran. */
static void bpt__timem_resume_callers(bpt__thread *rec, int stack, const bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    if (fr->process != rec->process) return;
    for (i = 0; i < fr->nsess; i++) {
        if (!(fr->sess[i].actions & BPT__FRAME_TIMEM)) continue;
        bpt__timem_resume(bpt__timem_current(rec, stack, rec->shadow_depth[stack], rec->shadow_filling[stack],
                                             fr->sess[i].id, fr->process), now);
    }
}

/* Copy n sessions' wishes, one fixed-size assignment each (a return
   serves one session in the common case). The empty asm keeps it a loop:
   without it gcc makes the loop a call to memmove, whose wide, overlapping
   stores the code after it cannot forward to its loads of the copy. The
   return's first load of sess[0].actions then waited for them: a third of
   bpt__native_return's time under call_time (perf record, bench_overhead
   time; PERFORMANCE.md). */
static void bpt__frame_sessions_copy(bpt__frame_session *to, const bpt__frame_session *from, uint32_t n) {
    uint32_t i;
    if (BPT__LIKELY(n == 1)) {   /* no loop */
        to[0] = from[0];
        return;
    }
    for (i = 0; i < n; i++) {
        to[i] = from[i];
        bpt__compiler_barrier();
    }
}

/* The sessions of a new frame that time it start now: the general case,
   out of line (several sessions, or the CPU clock); bpt__frame_fill
   starts the one wall-clock session's time itself. */
BPT__NOINLINE void bpt__frame_start_timem(bpt__frame *fr, bpt__now2 *now) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & BPT__FRAME_TIMEM) fr->sess[i].since = bpt__now_for(&fr->sess[i], now);
}

/* F1's second half: fill the reserved frame with what the hit gathered
   (h->want), and start the time of the sessions that time the call. */
BPT__HOT void bpt__frame_fill(bpt__frame *fr, const bpt__hit *h, bpt__now2 *now) {
    bpt__frame_sessions_copy(fr->sess, h->want, h->nwant);
    fr->nsess = (uint16_t)h->nwant;
    fr->fid = h->f->fid;
    fr->caller_fid = 0;
    fr->f = h->f;
    fr->process = h->rec->process;
    fr->unhooked = 0;
    if (h->wanted & BPT__FRAME_TIMEM) {
        if (BPT__LIKELY(h->nwant == 1 && !(h->wanted & BPT__FRAME_CPU)))
            fr->sess[0].since = now->ticks;   /* the one session times it, by the wall clock */
        else
            bpt__frame_start_timem(fr, now);
    }
}

/* A frame was reserved at index d: pause the callers below it that its
   sessions were timing (the walk, down to floor; bpt__frame_pause_callers
   decides). */
static void bpt__timem_pause_callers(const bpt__hit *h, int stack, uint32_t d, uint32_t floor, bpt__now2 *now) {
    uint32_t i;
    for (i = 0; i < h->nwant; i++)
        if (h->want[i].actions & BPT__FRAME_TIMEM)
            bpt__timem_pause(bpt__timem_current(h->rec, stack, d, floor, h->want[i].id, h->rec->process), now);
}

/* F1, between reserve and fill: a new frame fr pauses its callers, but
   only when one of its sessions times it (h->wanted) and a frame lies
   below it. A frame of return trace alone, or the first on its stack,
   costs no call. mark: what bpt__frame_reserve saved of the filling mark,
   the depth of a push this hit's signal handler interrupted (0: none),
   below which the walk does not go (bpt__timem_current). */
BPT__HOT void bpt__frame_pause_callers(const bpt__hit *h, int stack, const bpt__frame *fr, uint32_t mark,
                                       bpt__now2 *now) {
    const bpt__frame *first = h->rec->shadow[stack];
    if ((h->wanted & BPT__FRAME_TIMEM) && fr != first)
        bpt__timem_pause_callers(h, stack, (uint32_t)(fr - first), mark, now);
}

/* A popped frame's end: charge it (unwound frames too, as BEAM charges a
   call that ends by an exception), resume its callers. Pinned. */
static void bpt__frame_end(bpt__thread *rec, int stack, bpt__frame *fr) {
    bpt__now2 now;
    uint32_t i;
    for (i = 0; i < fr->nsess && !(fr->sess[i].actions & BPT__FRAME_TIMEM); i++) {}
    if (i == fr->nsess) return;
    now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_charge_frame(rec, fr, &now);
    if (rec->shadow_depth[stack]) bpt__timem_resume_callers(rec, stack, fr, &now);   /* none below: no caller */
}

/* Lower a shadow stack's depth from d to d - 1, unless a signal handler on
   this thread changed it since it was read [H1]: a handler that ran between
   the look at a tombstone and the store may have dropped it and more, and
   pushed again; a plain store of d - 1 would bring frames it ended back to
   life. A compare-and-swap is atomic against a handler on the same thread
   (one instruction, or an exclusive pair that the exception return
   breaks). Tombstones are native frames only: without native sites (tcc)
   there are none. */
static int bpt__frame_lower(bpt__thread *rec, int stack, uint32_t d) {
#if defined(BPT_NATIVE)
    return __atomic_compare_exchange_n(&rec->shadow_depth[stack], &d, d - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#else
    rec->shadow_depth[stack] = d - 1;
    return 1;
#endif
}

/* Copy a frame out of its slot: its fields, and the sessions it has, not
   the slots it does not use (a frame is 256 bytes with BPT_FRAME_SESSIONS
   4). */
static void bpt__frame_copy(bpt__frame *to, const bpt__frame *from) {
    memcpy(to, from, offsetof(bpt__frame, sess));
    bpt__frame_sessions_copy(to->sess, from->sess, from->nsess);
}

/* Copy out the top frame, then release it, and the tombstones it covered
   (never a frame being filled: the code a handler interrupted owns it). */
static void bpt__frame_pop(bpt__thread *rec, int stack, bpt__frame *out) {
    uint32_t d = rec->shadow_depth[stack] - 1;
    bpt__frame_copy(out, &rec->shadow[stack][d]);
    bpt__compiler_barrier();   /* [H1] */
    rec->shadow_depth[stack] = d;
    while (d > 0 && rec->shadow[stack][d - 1].gone && !bpt__frame_filling(rec, stack, d - 1)) {
        BPT_TEST_POINT("frame_pop: a tombstone under the top");   /* t_fibers puts a signal here */
        if (!bpt__frame_lower(rec, stack, d)) break;
        d--;
    }
}

#if defined(BPT_NATIVE)
/* Copy out frame k and end it: popped if on top, else left as a tombstone
   under the live frames of other fibers above it. */
static void bpt__frame_take(bpt__thread *rec, int stack, uint32_t k, bpt__frame *out) {
    if (k + 1 == rec->shadow_depth[stack]) {
        bpt__frame_pop(rec, stack, out);
        return;
    }
    bpt__frame_copy(out, &rec->shadow[stack][k]);
    bpt__compiler_barrier();   /* [H1] copied before it is gone */
    rec->shadow[stack][k].gone = 1;
}

/* The newest frame of this thread's current stack below depth d whose
   entry sp is sp (any sp: sp == 0), or -1. A frame marked as being filled
   is not skipped: the mark may be the interrupted code's, for the index a
   handler then reserved too (it was marked before it was on the stack,
   [H1]), and that frame is the handler's own, complete. */
static long bpt__frame_find(const bpt__thread *rec, uint32_t d, uintptr_t sp) {
    while (d-- > 0) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        if (bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) && (sp == 0 || fr->sp == sp)) return (long)d;
    }
    return -1;
}
#endif

/* F2's frame when no frame of the thread's current stack has sp: one of
   another stack's does, so the thread runs on that stack and its tag was
   lost, by a switch bptrace did not see end (a uc_link return to a
   getcontext, a setcontext to one): the thread takes that frame's tag. */
BPT__PRIVATE long bpt__frame_adopt(bpt__thread *rec, uintptr_t sp) {
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    while (d-- > 0) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        if (!fr->gone && fr->sp == sp) {
            rec->fiber = fr->fiber;
            return (long)d;
        }
    }
    return -1;
}

/* Whether a session of fr asked for one of `actions`. A frame that only
   times its call (call_time, call_memory) builds no record at all. */
static int bpt__frame_wants(const bpt__frame *fr, unsigned actions) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & actions) return 1;
    return 0;
}

/* A frame's record to one of its sessions, fs, if that session asked for
   `action` and still lives. Pinned (session lookup). */
BPT__HOT void bpt__frame_send_one(bpt__thread *rec, const bpt__frame_session *fs, unsigned action, const bpt__rec *r) {
    bpt__session *s;
    if (rec->in_tracer) return;   /* a tracer's own calls are not traced */
    if (!(fs->actions & action)) return;
    if (!(s = bpt__session_lookup(fs->id))) return;   /* ended: frames do nothing */
    if (!bpt__session_admit(s, rec)) return;
    bpt__session_send(s, rec, r);
}

/* The record to each of a frame's sessions that asked for `action`. */
static void bpt__frame_send(bpt__thread *rec, const bpt__frame *fr, unsigned action, const bpt__rec *r) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++) bpt__frame_send_one(rec, &fr->sess[i], action, r);
}

/* A record of one word: its header, now. */
BPT__HOT void bpt__frame_rec(bpt__recbuf *b, int type, uint32_t id, uint16_t info, uint64_t word) {
    b->h.ticks = bpt__now_ticks();
    b->h.type = (uint8_t)type;
    b->h.words = 1;
    b->h.info = info;
    b->h.id = id;
    b->w[0] = word;
}

/* exception_from for a frame that was unwound. BEAM sends it to sessions
   with exception_trace; return_trace alone sends nothing. */
static void bpt__frame_unwound(bpt__thread *rec, const bpt__frame *fr, const char *cls, uint64_t value) {
    bpt__recbuf b;
    if (!bpt__frame_wants(fr, BPT_EXCEPTION)) return;
    bpt__frame_rec(&b, BPT_MSG_EXCEPTION_FROM, fr->fid, cls[0] == 't', value);   /* "throw" or "unwind" */
    bpt__frame_send(rec, fr, BPT_EXCEPTION, &b.h);
}

/* return_from with a string value: its bytes are copied now, since they
   may not outlive the return. Out of line: its copy would make every
   return_from save registers. */
BPT__NOINLINE void bpt__frame_returned_str(bpt__thread *rec, uint32_t fid, const bpt__frame_session *fs,
                                           const char *str) {
    bpt__recbuf b;
    size_t len = str ? strnlen(str, BPT_MSG_STR_BYTES - 1) : 6;
    bpt__frame_rec(&b, BPT_MSG_RETURN_FROM, fid, BPT_ARG_STR, 0);
    memset(b.w, 0, BPT_MSG_STR_BYTES);
    memcpy(b.w, str ? str : "(null)", len);
    b.h.words = (uint8_t)((len + 1 + 7) / 8);
    bpt__frame_send_one(rec, fs, BPT_RETURN | BPT_EXCEPTION, &b.h);
}

/* return_from for function fid to one session of its frame, fs, with the
   value its ret spec asks for. */
static void bpt__frame_returned_one(bpt__thread *rec, uint32_t fid, const bpt__frame_session *fs, uint64_t value) {
    bpt__recbuf b;
    if (BPT__UNLIKELY(fs->rettype == BPT_ARG_STR)) {
        bpt__frame_returned_str(rec, fid, fs, (const char *)(uintptr_t)value);
        return;
    }
    bpt__frame_rec(&b, BPT_MSG_RETURN_FROM, fid, fs->rettype, value);
    bpt__frame_send_one(rec, fs, BPT_RETURN | BPT_EXCEPTION, &b.h);
}

/* return_from to each session of a frame, one record each, with the value
   its ret spec asks for: the integer return register, or the floating-point
   one for f64 (the same value for both on a VM). */
static void bpt__frame_returned(bpt__thread *rec, const bpt__frame *fr, uint64_t int_value, uint64_t fp_value) {
    uint32_t i;
    for (i = 0; i < fr->nsess; i++)
        if (fr->sess[i].actions & (BPT_RETURN | BPT_EXCEPTION))
            bpt__frame_returned_one(rec, fr->fid, &fr->sess[i], fr->sess[i].rettype == BPT_ARG_F64 ? fp_value : int_value);
}

/* return_to: execution resumes in function fid, or in code that is not a
   registered function (0); caller is the native address. */
static void bpt__frame_return_to(bpt__thread *rec, const bpt__frame *fr, uint32_t fid, uintptr_t caller) {
    bpt__recbuf b;
    if (!bpt__frame_wants(fr, BPT_RETURN_TO)) return;
    bpt__frame_rec(&b, BPT_MSG_RETURN_TO, fid, 0, caller);
    bpt__frame_send(rec, fr, BPT_RETURN_TO, &b.h);
}

#if defined(BPT_NATIVE)
/* Never returns: the thread returned through the trampoline but no frame
   names its stack pointer, so the address to continue at is lost. Only a
   broken promise gets here: a thread that switched stacks (fibers), or
   bpt_unwind_to given a stack pointer above a live frame. */
static void bpt__frames_lost(uintptr_t sp) {
    char msg[160];
    int n = snprintf(msg, sizeof msg, "bptrace: return trampoline: no return-trace frame for sp %p "
                     "(stack switched, or bpt_unwind_to above a live frame); aborting\n", (void *)sp);
    if (n > 0) { ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1); (void)w; }
    abort();
}

/* The caller of a native call: where it returns to. If its return slot
   already holds the trampoline, it was entered by a tail call from a
   function whose return is traced: the true address is in that frame. */
BPT__PRIVATE uintptr_t bpt__native_caller(const bpt__hit *h) {
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t ret = bpt__arch_ret_strip(h->f, *bpt__arch_ret_slot(r)), sp = bpt__arch_entry_sp(r);
    long k = (long)h->rec->shadow_depth[BPT__STACK_NATIVE];
    if (ret != BPT__RETURN_TRAMPOLINE) return ret;
    while ((k = bpt__frame_find(h->rec, (uint32_t)k, sp)) >= 0)
        if (h->rec->shadow[BPT__STACK_NATIVE][k].ret) return h->rec->shadow[BPT__STACK_NATIVE][k].ret;
    return 0;
}

/* The calling thread's sigaltstack as [*lo, *hi), empty when it has none
   (or it is disabled). Returns 1 when the thread runs on it now, at sp.
   A stack set up with SS_AUTODISARM (Linux 4.7) is disarmed while a
   handler runs on it, and sigaltstack(2) then reports it disabled, with no
   address: so the last armed stack seen is remembered (rec->alt_lo,
   alt_hi: at the thread record's creation and at every look), and a
   disabled report with sp inside it means the thread runs on it, disarmed.
   A thread whose first call into bptrace is made by such a handler has
   nothing remembered: its handler is taken for one on the thread's stack.
   sigaltstack(2) is async-signal-safe. */
BPT__PRIVATE int bpt__altstack_bounds(bpt__thread *rec, uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
    stack_t alt;
    *lo = *hi = 0;
    if (sigaltstack(NULL, &alt) != 0) return 0;
    if (!(alt.ss_flags & SS_DISABLE)) {
        rec->alt_lo = (uintptr_t)alt.ss_sp;
        rec->alt_hi = rec->alt_lo + alt.ss_size;
    } else if (!(sp >= rec->alt_lo && sp < rec->alt_hi)) {
        return 0;   /* none, or disabled and not running on the one remembered */
    }
    *lo = rec->alt_lo;
    *hi = rec->alt_hi;
    return sp >= *lo && sp < *hi;
}

BPT__PRIVATE void bpt__altstack_note(bpt__thread *rec) {
    uintptr_t lo, hi;
    (void)bpt__altstack_bounds(rec, 0, &lo, &hi);
}

/* The rare half of bpt__native_settle: the top frame's stack pointer is
   at or below this call's, so it and maybe more are dead. The stack grows
   down: a live caller's frame lies above every call it makes, so a frame
   at or below a new call's stack pointer on the same stack was left by a
   longjmp or a throw (at the same one, this call reuses its place; unless
   this call is a tail call that shares it). Frames on a different stack
   are not compared: a handler on the sigaltstack ends only its own dead
   frames there, and a call outside it ends every frame still there (the
   handler is over). Each dead frame gets exception_from, newest first.
   sigaltstack(2) is async-signal-safe, and this path runs only after an
   unwind. */
BPT__NOINLINE int bpt__native_settle_dead(bpt__thread *rec, uintptr_t sp, int tail, const char *cls) {
    uintptr_t lo, hi;
    int on_alt = bpt__altstack_bounds(rec, sp, &lo, &hi), n = 0;
    uint32_t d;
    for (d = rec->shadow_depth[BPT__STACK_NATIVE]; d-- > 0;) {
        const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
        uintptr_t top = fr->sp;
        int in_alt = top >= lo && top < hi;
        bpt__frame dead;
        if (bpt__frame_filling(rec, BPT__STACK_NATIVE, d)) break;   /* being pushed: its caller's, alive */
        if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, fr)) continue;   /* another fiber's stack: not compared */
        if (tail && top == sp) break;   /* the frame this tail call shares: alive */
        if (on_alt ? !(in_alt && top <= sp) : !(in_alt || top <= sp)) break;
        bpt__frame_take(rec, BPT__STACK_NATIVE, d, &dead);
        /* unhooked: a C++ throw's search passed it (unwind.c, U1), and a
           destructor's traced call settles it before the catch would: a throw's. */
        bpt__frame_unwound(rec, &dead, dead.unhooked ? "throw" : cls, 0);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &dead);
        n++;
    }
    return n;
}

/* Before a native hit's messages (called when the thread has frames):
   frames the stack has left behind get their exception_from first, so a
   longjmp over any number of return-traced frames is settled at the next
   traced entry on the thread, with no bpt_unwind_to, and the shadow stack
   never fills with dead frames. The common case is one compare: the top
   frame is a live caller's, above this call. */
BPT__PRIVATE void bpt__native_settle(bpt__hit *h) {
    bpt__thread *rec = h->rec;
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t sp = bpt__arch_entry_sp(r);
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    const bpt__frame *top = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    long k;
    if (bpt__frame_filling(rec, BPT__STACK_NATIVE, d - 1)) return;
    if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, top)) {   /* a suspended fiber's on top: compare ours */
        if ((k = bpt__frame_find(rec, d - 1, 0)) < 0) return;
        top = &rec->shadow[BPT__STACK_NATIVE][k];
    }
    if (top->sp > sp) return;
    bpt__native_settle_dead(rec, sp, bpt__arch_ret_strip(h->f, *bpt__arch_ret_slot(r)) == BPT__RETURN_TRAMPOLINE,
                            "unwind");
}

/* F1: the entry handler's frame, after every session has been walked. */
BPT__NOINLINE void bpt__native_frame_push(bpt__hit *h) {
    bpt__thread *rec = h->rec;
    bpt__regs *r = (bpt__regs *)(uintptr_t)h->frame;
    uintptr_t *slot = bpt__arch_ret_slot(r), sp = bpt__arch_entry_sp(r);
    uintptr_t ret = bpt__arch_ret_strip(h->f, *slot);
    int tail = ret == BPT__RETURN_TRAMPOLINE;
    bpt__frame *fr;
    uint32_t i, mark = 0;
    long k;
    bpt__now2 now = bpt__now2_for(h);
    /* A tail call shares the frame of the call it replaces; there must be one. */
    if (tail && !((k = bpt__frame_find(rec, rec->shadow_depth[BPT__STACK_NATIVE], 0)) >= 0 &&
                  rec->shadow[BPT__STACK_NATIVE][k].sp == sp))
        fr = NULL;
    else
        fr = bpt__frame_reserve(rec, BPT__STACK_NATIVE, &mark);
    if (!fr) {
        for (i = 0; i < h->nwant; i++) bpt__frame_skipped(h->want_s[i]);
        return;
    }
    bpt__frame_pause_callers(h, BPT__STACK_NATIVE, fr, mark, &now);
    bpt__frame_fill(fr, h, &now);
    fr->sp = sp;
    fr->ret = tail ? 0 : ret;
    bpt__frame_filled(rec, BPT__STACK_NATIVE, mark);
    if (!tail) *slot = bpt__arch_ret_sign(h->f, BPT__RETURN_TRAMPOLINE, sp);
}

/* F0 and F1 for the short paths (site_native.c: the call path, the
   call-return path, the time path), with the integer registers alone and
   no call. bpt__native_frames_settled: would
   F0 find nothing to settle at a call whose stack pointer at entry is sp?
   No frame, or the top one is this fiber's, complete, and a live caller's
   (above sp). Anything else (a frame left by a longjmp or a throw, a
   tail call's shared frame, a suspended fiber's frame on top, a frame
   being pushed) is the full path's. */
BPT__HOT BPT__INTREGS int bpt__native_frames_settled(const bpt__thread *rec, uintptr_t sp) {
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    const bpt__frame *top;
    if (BPT__LIKELY(d == 0)) return 1;
    top = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    return rec->shadow_filling[BPT__STACK_NATIVE] != d && !top->gone && top->fiber == rec->fiber && top->sp > sp;
}

/* May the call-return or time path push a frame here: the shadow stack
   is mapped (the full path maps it), has room (a first look, so that a
   full stack goes the full way before the call is traced; the reserve
   checks again), and the return address in *slot is not the trampoline
   (a tail call shares its caller's frame: the full path's) nor signed
   (aarch64 paciasp: the full path signs the trampoline's)? */
BPT__HOT BPT__INTREGS int bpt__native_frame_plain_ok(const bpt__thread *rec, const bpt_func *f, const uintptr_t *slot) {
    return rec->shadow[BPT__STACK_NATIVE] && rec->shadow_depth[BPT__STACK_NATIVE] < BPT_SHADOW_FRAMES &&
           *slot != BPT__RETURN_TRAMPOLINE && !f->signs_lr;
}

/* The frame that a new frame of session id in `process`, reserved at
   depth d of the native stack, pauses (and that its return resumes), when
   it can be told at a look, for the time path and the timed return: the
   frame below, d - 1, when it is complete, this fiber's, in `process`, and
   has the one session id, timing. Returns 1 and *caller, NULL when there
   is no frame below; 0 when only bpt__timem_current's walk can tell (the
   frame below belongs to another session, process or fiber, has several
   sessions, or is being pushed): the general way's. */
BPT__HOT BPT__INTREGS int bpt__timem_caller_at(bpt__thread *rec, uint32_t d, uint64_t id, uint64_t process,
                                               bpt__frame_session **caller) {
    bpt__frame *fr;
    *caller = NULL;
    if (d == 0) return 1;
    fr = &rec->shadow[BPT__STACK_NATIVE][d - 1];
    if (rec->shadow_filling[BPT__STACK_NATIVE] == d || rec->timem_walking || fr->gone || fr->fiber != rec->fiber ||   /* [H1] */
        fr->process != process || fr->nsess != 1 || fr->sess[0].id != id ||
        !(fr->sess[0].actions & BPT__FRAME_TIMEM))
        return 0;
    *caller = &fr->sess[0];
    return 1;
}

/* F1 for one session s, once bpt__native_frame_plain_ok said yes: the
   frame bpt__native_frame_push would push for that hit, and the return
   slot swapped to the trampoline; or, when the stack filled since that
   look (bpt__frame_reserve_mapped), no frame, counted in s's
   frames_skipped, the caller left running, as the full path leaves a
   call it has no frame for. actions: what the session asks of the
   return (its match spec's return_from, or BPT_TIME), rettype the return
   value's type. now: 0 for a frame that does not time its call; else the
   wall clock's ticks its time starts at, and caller (bpt__timem_caller_at,
   NULL: none) the frame the session was timing, paused at now between
   reserve and fill, as bpt__frame_pause_callers does. */
BPT__HOT BPT__INTREGS void bpt__native_frame_push_plain(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                        unsigned actions, uint8_t rettype, uintptr_t sp,
                                                        uintptr_t *slot, bpt__frame_session *caller, uint64_t now) {
    uint32_t mark;
    bpt__frame *fr;
    bpt__frame_session *fs;
    BPT_TEST_POINT("push_plain: room seen, not yet reserved");   /* t_call_path claim 10 */
    if (BPT__UNLIKELY(!(fr = bpt__frame_reserve_mapped(rec, BPT__STACK_NATIVE, &mark)))) {
        bpt__frame_skipped(s);
        return;
    }
    fs = &fr->sess[0];
    if (caller && caller->since) {   /* as bpt__timem_pause, by the wall clock */
        caller->own_ns += bpt__ticks_ns(now - caller->since);
        BPT_TEST_POINT("timem pause: the span added, the start not yet cleared");   /* t_timem_nesting */
        caller->since = 0;
    }
    fs->id = s->id;
    fs->actions = actions & (BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU);   /* as bpt__hit_want_frame */
    fs->rettype = rettype;
    fs->since = now;
    fs->own_ns = 0;
    fs->mem = 0;
    fr->nsess = 1;
    fr->fid = f->fid;
    fr->caller_fid = 0;
    fr->f = f;
    fr->process = rec->process;
    fr->unhooked = 0;
    fr->sp = sp;
    fr->ret = *slot;
    bpt__frame_filled(rec, BPT__STACK_NATIVE, mark);
    *slot = BPT__RETURN_TRAMPOLINE;
}

/* F2, the plain return, taken by the return route (below): a common
   return (bpt__return_is_one) whose session asks for return_from alone (return
   or exception trace: no call_time, call_memory or string value), buffers
   its records with no rate limit, on the CPU's counter clock. The record
   goes straight into the thread's current chunk, as the call path writes
   a call's (site_native.c), where the general way
   (bpt__native_return_one) copies the frame out, builds the record on
   the stack and copies it there: the same record, the same protocol.
   PR1. The frame asks for that, and the thread is not inside a tracer
       (bpt__return_plain_asks: the route's test, before it pins).
   PR2. Its session lives [S1] [S2] and takes records plainly; read the clock.
   PR3. Mark the send [H1]; if the current chunk has room as it is (>>fits
       in session.c), write return_from at its end and publish it with the
       chunk's fill [R2]. Release the frame [H1] (its fields were read
       before), unmark.
   Returns the address to continue at, or 0 having changed nothing (the
   session gone, a tracer's or a USDT session, a rate limit, no counter
   clock, a nested send, a first record, a full chunk, a stale anchor):
   then the general way's. Pinned. */
static int bpt__return_plain_asks(const bpt__thread *rec, const bpt__frame *fr) {   /* PR1 */
    const bpt__frame_session *fs = &fr->sess[0];
    return !(fs->actions & BPT__FRAME_TIMEM) && (fs->actions & (BPT_RETURN | BPT_EXCEPTION)) &&
           fs->rettype != BPT_ARG_STR && !rec->in_tracer;
}

static uintptr_t bpt__native_return_plain(bpt__thread *rec, uint32_t k, const bpt__retregs *r) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    const bpt__frame_session *fs = &fr->sess[0];
    uintptr_t ret = fr->ret;
    bpt__session *s;
    bpt__lane *lane;
    bpt__rec *h;
    uint64_t ticks;
    if (!(s = bpt__session_lookup(fs->id)) || !s->buffered || s->rate_max ||   /* PR2 */
        !bpt__now_ticks_counter(&ticks) || !bpt__send_begin(rec))              /* PR3 [H1] */
        return 0;
    if (BPT__LIKELY((lane = bpt__lane_room(s, rec, ticks, BPT__RETURN_PLAIN_BYTES)) != NULL)) {
        h = (bpt__rec *)(void *)lane->wp;   /* chunk memory: 8-aligned, no declared type */
        h->ticks = ticks;
        h->type = BPT_MSG_RETURN_FROM;
        h->words = 1;
        h->info = fs->rettype;
        h->id = fr->fid;
        *(uint64_t *)(void *)(h + 1) = fs->rettype == BPT_ARG_F64 ? r->fp[0][0] : r->gpr[0];
        bpt__lane_publish(lane, BPT__RETURN_PLAIN_BYTES);   /* [R2] */
        bpt__compiler_barrier();   /* [H1] read out before it is released */
        rec->shadow_depth[BPT__STACK_NATIVE] = k;
    } else {
        ret = 0;
    }
    bpt__send_end(rec);
    return ret;
}

/* F2, the timed return: a common return (bpt__return_is_one: the return
   route or bpt__native_return_one checked the frame) whose session times the call by the wall clock and
   asks for nothing else (call_time alone: no return_from, call_memory or
   CPU clock), with its caller at a look (bpt__timem_caller_at): what
   bpt__frame_end does for such a frame, without its copy, its walks or
   its loops.
   TR1. The frame asks for that, and the caller it resumes is the frame
       below it, or there is none (bpt__timem_caller_at).
   TR2. Read the clock; the frame's own time is what it had plus the time
       since it last started (0: paused, its process switched out).
   TR3. Release the frame [H1] (its fields were read before).
   TR4. Charge its own time to the function's tables of the session
       (bpt__timem_charge_session: nothing if the session has let go).
   TR5. Resume the caller, as bpt__timem_resume, if the thread runs the
       frame's process now (as bpt__timem_resume_callers).
   Returns the address to continue at, or 0 having changed nothing (the
   general way's). Pinned. */
static int bpt__return_timed_asks(const bpt__frame_session *fs) {   /* TR1's first half */
    return (fs->actions & (BPT__FRAME_ACTIONS | BPT__KINDS | BPT__FRAME_CPU)) == BPT_TIME;
}

BPT__HOT uintptr_t bpt__native_return_timed(bpt__thread *rec, uint32_t k) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    const bpt__frame_session *fs = &fr->sess[0];
    bpt__frame_session *caller;
    uintptr_t ret = fr->ret;
    uint64_t now, own, id = fs->id, process = fr->process;
    bpt_func *f = fr->f;
    if (!bpt__return_timed_asks(fs) ||   /* TR1 */
        !bpt__timem_caller_at(rec, k, id, process, &caller))
        return 0;
    now = bpt__now_ticks();                                                               /* TR2 */
    own = fs->own_ns + (fs->since ? bpt__ticks_ns(now - fs->since) : 0);
    bpt__compiler_barrier();   /* [H1] read out before it is released */
    rec->shadow_depth[BPT__STACK_NATIVE] = k;                                             /* TR3 */
    bpt__timem_charge_session(rec, f, bpt_active_bp_ix(), id, process, own, 0);           /* TR4 [G2]: no memory (TR1) */
    if (caller && !caller->since && process == rec->process) caller->since = now;        /* TR5 */
    return ret;
}

/* F2, the common return, without copying the whole frame out: the frame
   is on top, ends its chain (no tail call shares it: ret != 0), serves one
   session, which does not ask for return_to, and no tombstone lies under
   it (bpt__return_is_one). The timed return (above) first; else it
   copies out what the frame's end (call_time, call_memory) and the
   return_from read, releases the frame [H1], then ends it and sends. The
   plain return is the return route's (bpt__native_return): when it
   declined one it would take, this way sends the same return_from.
   Returns the address to continue at, or 0 when the frame is not such a
   one (bpt__native_return_chain's). Pinned. */
BPT__HOT int bpt__return_is_one(const bpt__thread *rec, uint32_t k) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    return k + 1 == rec->shadow_depth[BPT__STACK_NATIVE] && fr->ret && fr->nsess == 1 &&
           !(fr->sess[0].actions & BPT_RETURN_TO) && !(k > 0 && fr[-1].gone);
}

static uintptr_t bpt__native_return_one(bpt__thread *rec, uint32_t k, const bpt__retregs *r) {
    const bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][k];
    bpt__frame one;   /* only what bpt__frame_end and the return_from read */
    uintptr_t ret;
    if (!bpt__return_is_one(rec, k)) return 0;
    if ((ret = bpt__native_return_timed(rec, k)) != 0) return ret;
    one.sess[0] = fr->sess[0];
    one.nsess = 1;
    one.fid = fr->fid;
    one.f = fr->f;
    one.process = fr->process;
    ret = fr->ret;
    bpt__compiler_barrier();   /* [H1] copied out before it is released */
    rec->shadow_depth[BPT__STACK_NATIVE] = k;
    if (one.sess[0].actions & BPT__FRAME_TIMEM) bpt__frame_end(rec, BPT__STACK_NATIVE, &one);
    if (one.sess[0].actions & (BPT_RETURN | BPT_EXCEPTION))
        bpt__frame_returned_one(rec, one.fid, &one.sess[0],
                                one.sess[0].rettype == BPT_ARG_F64 ? r->fp[0][0] : r->gpr[0]);
    return ret;
}

/* F2, every other return: frame k (of sp) and what lies above it and
   below it in its chain. Returns the address to continue at. Pinned. */
BPT__NOINLINE uintptr_t bpt__native_return_chain(bpt__thread *rec, long k, uintptr_t sp, const bpt__retregs *r) {
    uint32_t i, to_sessions = 0;
    const bpt_func *resumed;
    bpt__frame fr, to;
    uintptr_t ret;
    /* 2a. Frames of this stack above ours were unwound without returning
       (frames of other fibers' stacks above it stay: they are suspended). */
    for (i = rec->shadow_depth[BPT__STACK_NATIVE]; i-- > (uint32_t)k + 1;) {
        if (i >= rec->shadow_depth[BPT__STACK_NATIVE] ||
            !bpt__frame_mine(rec, BPT__STACK_NATIVE, &rec->shadow[BPT__STACK_NATIVE][i]))
            continue;
        bpt__frame_take(rec, BPT__STACK_NATIVE, i, &fr);
        bpt__frame_unwound(rec, &fr, "unwind", 0);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &fr);
    }
    /* 2b. Ours, and the frames of the tail calls that replaced it: each
       returns the same value, innermost first; the last holds the address. */
    to.fid = 0;   /* the fields of `to` that 2c reads are set below */
    for (;;) {
        if (k < 0) bpt__frames_lost(sp);
        bpt__frame_take(rec, BPT__STACK_NATIVE, (uint32_t)k, &fr);
        bpt__frame_end(rec, BPT__STACK_NATIVE, &fr);
        bpt__frame_returned(rec, &fr, r->gpr[0], r->fp[0][0]);
        for (i = 0; i < fr.nsess; i++) {
            if (fr.sess[i].actions & BPT_RETURN_TO) {   /* each session once per chain */
                uint32_t s;
                for (s = 0; s < to_sessions && to.sess[s].id != fr.sess[i].id; s++) {}
                if (s == to_sessions && to_sessions < BPT_FRAME_SESSIONS) to.sess[to_sessions++] = fr.sess[i];
            }
        }
        if (!to.fid) to.fid = fr.fid;
        if (fr.ret) break;
        /* the frame it replaced: the next of this stack, with the same sp */
        k = bpt__frame_find(rec, (uint32_t)k, 0);
        if (k >= 0 && rec->shadow[BPT__STACK_NATIVE][k].sp != sp) k = -1;
    }
    ret = fr.ret;
    /* 2c. One return_to ends the chain (Tracing.md: one per chain of tail calls). */
    if (to_sessions) {
        to.nsess = (uint16_t)to_sessions;
        resumed = bpt__symbolize(ret);
        bpt__frame_return_to(rec, &to, resumed ? resumed->fid : 0, ret);
    }
    return ret;
}

/* F2, every return the route below does not take: the frame of sp found
   (adopted from another stack, or lost), pinned, bptrace's own calls
   marked (>>own calls in site_native.c), the common return or the
   general way. Returns where to continue. */
BPT__NOINLINE uintptr_t bpt__native_return_general(uintptr_t sp, bpt__retregs *r) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long k = rec ? bpt__frame_find(rec, rec->shadow_depth[BPT__STACK_NATIVE], sp) : -1;
    uintptr_t ret;
    bpt__own_enter();   /* >>own calls (site_native.c) */
    if (k < 0 && rec) k = bpt__frame_adopt(rec, sp);
    if (k < 0) bpt__frames_lost(sp);
    bpt__pin_rec(rec);   /* a frame was found: the thread has its record */
    if (!(ret = bpt__native_return_one(rec, (uint32_t)k, r))) ret = bpt__native_return_chain(rec, k, sp, r);
    bpt__unpin(rec);
    bpt__own_leave();
    return ret;
}

/* The route's timed return (RR2), out of line: it calls (the charge may
   map a table), so it is pinned here, with bptrace's own calls marked as
   the general way marks them; when it declines, the general way.
   Returns where to continue. */
BPT__NOINLINE uintptr_t bpt__native_return_timed_route(bpt__thread *rec, uint32_t k, uintptr_t sp,
                                                        bpt__retregs *r) {
    uintptr_t ret;
    bpt__own_enter();
    bpt__pin_rec(rec);
    ret = rec->shadow_depth[BPT__STACK_NATIVE] == k + 1 ? bpt__native_return_timed(rec, k) : 0;   /* again: RR2 */
    bpt__unpin(rec);
    bpt__own_leave();
    return ret ? ret : bpt__native_return_general(sp, r);
}

/* The route's wake of a waiter (RR4), out of line: a system call, made
   with bptrace's own calls marked as the general way makes it. */
BPT__NOINLINE uintptr_t bpt__native_return_woke(uintptr_t ret) {
    bpt__own_enter();
    bpt__progress_wake();
    bpt__own_leave();
    return ret;
}

/* F2: called by the return trampoline with the stack pointer the
   traced function had at entry and its return registers; returns where to
   continue. Not static: the trampoline's assembly calls it by name.
   >>return route: the plain return (PR1-PR3) and the timed return
   (TR1-TR5) are taken first, with no call but tail calls, so that the
   function saves few registers; every other return goes the general way
   (bpt__native_return_general), a tail call too. With the general way
   inlined here (a frame's copy on the stack, calls), every return pushed
   6 registers and reserved 312 bytes first (callgrind, bench_overhead:
   call+return 432.9 instructions a call; call_time 389.8).
   RR1. The thread has its record; its newest native frame is sp's (on the
       stack it runs on now, bpt__frame_mine), is the common return
       (bpt__return_is_one: no tail call, one session, no return_to, the
       frame below not left), and asks for the plain return (PR1) or the
       timed one (TR1's first half): else the general way. Read only, and
       unpinned: the thread's own frames, which only a signal handler
       nested on it changes.
   RR2. Pin, as bpt__pin_rec, and look again: a handler that landed
       since RR1 may have left a frame of its own above sp's (it longjmped
       out of a traced function), whose exception_from only the general
       way sends (its step 2a). A timed return goes on out of line, and
       pins and looks there (bpt__native_return_timed_route: TR1-TR5).
       (A handler that lands inside the plain or the timed return, after
       this look, is not covered: its frame is dropped with ours. Found by
       review; as before the route.)
   RR3. The plain return, PR2-PR3; when it declines (see
       bpt__native_return_plain), the general way, which finds the frame
       again.
   RR4. Unpin; a waiter to wake is woken out of line
       (bpt__native_return_woke). When RR3 declined, the wake is left to
       the general way's unpin, as the short paths leave theirs to the
       full path (site_native.c): the futex word keeps its flag until a
       wake clears it. */
BPT__ASM_CALLED uintptr_t bpt__native_return(uintptr_t sp, bpt__retregs *r) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__frame *fr;
    uint32_t k;
    uintptr_t ret;
    int wake;
    if (BPT__UNLIKELY(!rec) || rec->shadow_depth[BPT__STACK_NATIVE] == 0)                     /* RR1 */
        return bpt__native_return_general(sp, r);
    k = rec->shadow_depth[BPT__STACK_NATIVE] - 1;
    fr = &rec->shadow[BPT__STACK_NATIVE][k];
    if (!bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) || fr->sp != sp || !bpt__return_is_one(rec, k))
        return bpt__native_return_general(sp, r);
    if (!bpt__return_plain_asks(rec, fr))
        return bpt__return_timed_asks(&fr->sess[0]) ? bpt__native_return_timed_route(rec, k, sp, r)
                                                     : bpt__native_return_general(sp, r);
    BPT_TEST_POINT("Return route: looked, not pinned");   /* t_call_path claim 13 raises a signal here */
    bpt__pin_rec(rec);                                                                         /* RR2 */
    ret = rec->shadow_depth[BPT__STACK_NATIVE] == k + 1 ? bpt__native_return_plain(rec, k, r) : 0;   /* RR3 */
    wake = bpt__unpin_quiet(rec);                                                              /* RR4 */
    if (BPT__UNLIKELY(!ret)) return bpt__native_return_general(sp, r);
    BPT_TEST_POINT("Return route: done");   /* t_call_path counts them (no call) */
    return BPT__UNLIKELY(wake) ? bpt__native_return_woke(ret) : ret;
}
#endif /* BPT_NATIVE */

/* F3. */
int bpt_unwind_to(const void *spp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    int n = 0;
    if (!spp) return bpt__fail(BPT_EINVAL, "bpt_unwind_to: sp is NULL");
    if (!rec || !rec->shadow_depth[BPT__STACK_NATIVE]) return 0;
    bpt__pin();
#if defined(BPT_NATIVE)
    n = bpt__native_settle_dead(rec, (uintptr_t)spp, 0, "unwind");
#endif
    bpt__unpin(rec);
    return n;
}

/* >>vm frames: the token is (check value << 32) | (index + 1) on the
   thread's VM stack. */
BPT__PRIVATE void bpt__vm_frame_push(bpt__hit *h, bpt_vm_token *token) {
    bpt__thread *rec = h->rec;
    uint32_t i, mark = 0;
    bpt__now2 now = bpt__now2_for(h);
    bpt__frame *fr = token ? bpt__frame_reserve(rec, BPT__STACK_VM, &mark) : NULL;
    const bpt_vm_ops *ops = h->f->ops;
    bpt_func *caller;
    if (!fr) {
        for (i = 0; i < h->nwant; i++) bpt__frame_skipped(h->want_s[i]);
        return;
    }
    bpt__frame_pause_callers(h, BPT__STACK_VM, fr, mark, &now);
    bpt__frame_fill(fr, h, &now);
    if (++rec->vm_serial == 0) rec->vm_serial = 1;
    fr->sp = rec->vm_serial;
    fr->ret = 1;
    if (ops && ops->caller && (caller = ops->caller(h->frame)) != NULL) fr->caller_fid = caller->fid;
    bpt__frame_filled(rec, BPT__STACK_VM, mark);
    *token = (uint64_t)rec->vm_serial << 32 | (uint64_t)(fr - rec->shadow[BPT__STACK_VM] + 1);
}

/* The frame index of a live token, or -1 (stale, foreign, 0). */
static long bpt__vm_token_index(const bpt__thread *rec, bpt_vm_token token) {
    uint64_t ix = (token & 0xffffffffu) - 1;
    if (!rec || token == 0 || ix >= rec->shadow_depth[BPT__STACK_VM] ||
        rec->shadow[BPT__STACK_VM][ix].sp != (uintptr_t)(token >> 32))
        return -1;
    return (long)ix;
}

void bpt_vm_return(bpt_vm_token token, uint64_t value) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long ix = bpt__vm_token_index(rec, token);
    bpt__frame fr;
    if (ix < 0) return;
    bpt__pin();
    while (rec->shadow_depth[BPT__STACK_VM] > (uint32_t)ix + 1) {
        bpt__frame_pop(rec, BPT__STACK_VM, &fr);
        bpt__frame_unwound(rec, &fr, "throw", 0);
        bpt__frame_end(rec, BPT__STACK_VM, &fr);
    }
    bpt__frame_pop(rec, BPT__STACK_VM, &fr);
    bpt__frame_end(rec, BPT__STACK_VM, &fr);
    bpt__frame_returned(rec, &fr, value, value);
    bpt__frame_return_to(rec, &fr, fr.caller_fid, 0);
    bpt__unpin(rec);
}

void bpt_vm_unwind(bpt_vm_token token, uint64_t exception) {
    bpt__thread *rec = bpt__thread_self_or_null();
    long ix = bpt__vm_token_index(rec, token);
    if (ix < 0) return;
    bpt__pin();
    while (rec->shadow_depth[BPT__STACK_VM] > (uint32_t)ix) {
        bpt__frame fr;
        bpt__frame_pop(rec, BPT__STACK_VM, &fr);
        bpt__frame_unwound(rec, &fr, "throw", exception);
        bpt__frame_end(rec, BPT__STACK_VM, &fr);
    }
    bpt__unpin(rec);
}

/* >>process switch and memory accounting */

/* For each session, the topmost frame of process on each stack: pause it
   (switching out), resume it (switching in) or charge it bytes. A switch
   made by a signal handler that interrupted a push pauses and resumes
   nothing below that push, as a handler's calls do (the floor of
   bpt__timem_current): the push may be pausing a caller right now, its
   span added and its start not yet cleared [H1], and a second pause would
   charge the span twice. Bytes skip only the frame being filled: the push
   does not touch its callers' bytes. While it pauses or resumes, the walk
   is marked (timem_walking) [H1]: a handler's calls that interrupt it
   pause and resume nothing (bpt__timem_current, bpt__timem_caller_at),
   and a switch that interrupts it does nothing, as a handler's switch
   and its switch back, both inside the walk, would cancel out.
   The sessions already met are kept by slot, one bit each (every session
   alive has one), so the walk reaches every session's topmost frame. A
   slot's higher frames are its live session's: a frame is filled where it
   is pushed and never moves, so a higher frame is a later push; and every
   frame of a destroyed session was pushed before its slot was free again,
   since destroy switches the session's breakpoints off and waits for
   thread progress (the 13 steps) before it unpublishes the slot [S1], so
   no hit still runs on them then, while a session that reuses the slot
   has its first frame pushed after it was made. The walk once kept 16
   ids and stopped when they were full: a
   17th session's frames were neither paused nor charged bytes
   (t_timem_many_sessions). */
enum { BPT__TIMEM_PAUSE, BPT__TIMEM_RESUME, BPT__TIMEM_MEMORY };
static void bpt__timem_current_each(bpt__thread *rec, uint64_t process, int what, bpt__now2 *now, int64_t bytes) {
    int stack;
    if (what != BPT__TIMEM_MEMORY) {
        if (rec->timem_walking) return;   /* nested in a walk: see above */
        rec->timem_walking = 1;
        bpt__compiler_barrier();   /* [H1] marked before any frame is touched */
    }
    for (stack = 0; stack < 2; stack++) {
        uint64_t seen[(BPT_MAX_SESSIONS + 63) / 64];   /* by slot (bpt__session_slot) */
        uint32_t d = rec->shadow_depth[stack], i, slot;
        uint32_t floor = what == BPT__TIMEM_MEMORY ? 0 : rec->shadow_filling[stack];
        memset(seen, 0, sizeof seen);
        while (d-- > floor) {
            bpt__frame *fr = &rec->shadow[stack][d];
            if (bpt__frame_filling(rec, stack, d) || fr->process != process || !bpt__frame_mine(rec, stack, fr))
                continue;
            for (i = 0; i < fr->nsess; i++) {
                bpt__frame_session *fs = &fr->sess[i];
                unsigned need = what == BPT__TIMEM_MEMORY ? BPT_MEMORY : BPT__FRAME_TIMEM;
                if (!(fs->actions & need) || (slot = bpt__session_slot(fs->id)) >= BPT_MAX_SESSIONS ||
                    (seen[slot / 64] >> (slot % 64) & 1))
                    continue;
                seen[slot / 64] |= (uint64_t)1 << (slot % 64);
                if (what == BPT__TIMEM_PAUSE) bpt__timem_pause(fs, now);
                else if (what == BPT__TIMEM_RESUME) bpt__timem_resume(fs, now);
                else fs->mem = bpt__mem_add(fs->mem, bytes);   /* modulo 2^64 (timem.c) */
            }
        }
    }
    if (what != BPT__TIMEM_MEMORY) {
        bpt__compiler_barrier();   /* [H1] every frame left before the mark goes */
        rec->timem_walking = 0;
    }
}

BPT__PRIVATE void bpt__frames_fiber_timem(bpt__thread *rec, int resume) {
    bpt__now2 now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_current_each(rec, rec->process, resume ? BPT__TIMEM_RESUME : BPT__TIMEM_PAUSE, &now, 0);
}

void bpt_process_switch(uint64_t process) {
    bpt__thread *rec = bpt__thread_self();
    bpt__now2 now;
    if (!rec) return;
    if (process == 0) process = rec->tid;
    if (process == rec->process) return;
    now = bpt__now2_at(bpt__now_ticks());
    bpt__timem_current_each(rec, rec->process, BPT__TIMEM_PAUSE, &now, 0);
    rec->process = process;
    bpt__timem_current_each(rec, process, BPT__TIMEM_RESUME, &now, 0);
}

/* A frame names the process its call runs in; the thread's default
   process is its id, which fork's child changes (progress.c). The frames
   pushed in the parent's id kept it, so in the child no call of the
   thread's process found them: a callee's push paused no caller (charged
   its callee's time as its own), a switch or bpt_account_memory left them
   alone, and their time went to the parent's id. And the child's thread
   has a CPU clock of its own, started near 0 at the fork: a session that
   times by it (BPT__FRAME_CPU) and runs (since != 0) had its start in the
   parent's clock, and its spans in the child came out below zero, so 0
   (bpt__timem_span): it starts again at the child's clock, its span
   before the fork left to the parent's (the wall clock is one for both:
   its frames charge that span in both). Called by the fork child handler,
   with only this thread alive and no handler of bptrace's running on it. */
BPT__PRIVATE void bpt__frames_atfork_child(bpt__thread *rec, uint64_t from, uint64_t to) {
    bpt__now2 now = bpt__now2_at(0);
    int stack;
    uint32_t d, i;
    for (stack = 0; stack < 2; stack++)
        for (d = 0; d < rec->shadow_depth[stack]; d++) {
            bpt__frame *fr = &rec->shadow[stack][d];
            if (fr->process == from) fr->process = to;
            for (i = 0; i < fr->nsess; i++)
                if ((fr->sess[i].actions & BPT__FRAME_CPU) && fr->sess[i].since)
                    fr->sess[i].since = bpt__now_cpu(&now);
        }
}

void bpt_account_memory(int64_t bytes) {
    bpt__thread *rec = bpt__thread_self_or_null();
    if (!rec || !bytes) return;
    bpt__timem_current_each(rec, rec->process, BPT__TIMEM_MEMORY, NULL, bytes);
}
/*** End of frames.c ***/

/*** Begin file interpose.c ***/
/* interpose.c: how bptrace's stand-ins for runtime functions (interpose.h)
   reach the runtime's own: dlsym(RTLD_NEXT), once per function. dlsym is
   in glibc's libc from 2.34 (before, link with -ldl).
   RTLD_NEXT searches the global scope after bptrace's object. A program
   that exports its symbols (-rdynamic, or the LD_PRELOAD agent) and loads
   a library RTLD_LOCAL that brings the unwinder and the C++ runtime with
   it (a C++ plugin of a C program; Python's extension modules) binds that
   library's throws to bptrace's stand-ins, but the runtime's own are not
   in the global scope: then they are taken from the runtime's library,
   found already loaded (RTLD_NOLOAD) and kept loaded (RTLD_NODELETE: the
   pointer is cached). A lookup by handle searches that library and its
   dependencies only, never bptrace's object. */

#if defined(BPT__INTERPOSE)
#include <dlfcn.h>

BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name) {
    void *fn = bpt__load_acquire_ptr(cache);   /* racing threads store the same pointer */
    if (!fn) {
        static const char *const runtimes[] = {   /* the unwinder's and the C++ ABI's, GNU's and LLVM's */
            "libgcc_s.so.1", "libstdc++.so.6", "libunwind.so.1", "libunwind.so.8", "libc++abi.so.1", "libc++.so.1"
        };
        size_t i;
        fn = dlsym(RTLD_NEXT, name);
        for (i = 0; !fn && i < sizeof runtimes / sizeof runtimes[0]; i++) {
            void *h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
            if (h) fn = dlsym(h, name);
        }
        if (!fn) {
            char msg[192];
            int n = snprintf(msg, sizeof msg, "bptrace: no %s to forward to after bptrace's (a static link? "
                             "build with -DBPT_NO_INTERPOSE); aborting\n", name);
            if (n > 0) { ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1); (void)w; }
            abort();
        }
        bpt__store_release_ptr(cache, fn);
    }
    return fn;
}
#endif
/*** End of interpose.c ***/

/*** Begin file unwind.c ***/
/* unwind.c: C++ exceptions through return-traced native frames.

   A return-traced frame's slot holds the return trampoline instead of its
   return address (frames.c F1). longjmp never reads that slot, but an
   unwinder does: it looks up each return address's unwind information,
   finds none for the trampoline, and the throw ends in std::terminate. So
   bptrace stands between the C++ runtime and the unwinder, as uftrace does
   around __cxa_throw and __cxa_begin_catch: it defines (interposes) four
   functions of the Itanium C++ ABI, and pthread_exit, and forwards each to
   the definition after it (interpose.h: libgcc_s, libstdc++, libc).

   U1. Unhook (_Unwind_RaiseException, _Unwind_Resume_or_Rethrow: a throw
       or a rethrow begins; _Unwind_Resume, below; pthread_exit's forced
       unwind): each return-traced frame of the thread gets its original
       return address back in its slot and is marked unhooked. The
       unwinder then walks a plain stack, in its search phase and in its
       cleanup phase. If no handler is found, std::terminate sees that
       plain stack too (its frames are ended later, if ever, by F0).
   U2. Catch (__cxa_begin_catch, which a catch clause's landing pad calls
       first): the frames at or below the catcher's stack pointer were
       unwound: exception_from "throw", newest first (F0's rule, with the
       catcher's sp). The frames left are alive: their slots get the
       trampoline back, so their return_from still comes.
   U1 again at _Unwind_Resume, which a cleanup (destructors) calls to go on
   unwinding: a throw caught inside a destructor has hooked the frames
   above it again (U2), and the outer unwind goes on through them. A
   cleanup's traced calls push and pop above the unhooked frames, and F0
   ends the dead frames it meets.

   Where a frame's slot is (bpt__arch_saved_ret_range):
     x86-64: exactly at its entry stack pointer;
     aarch64: somewhere in the function's own frame, where its prologue
       stored x30. U1 rewrites each word of that frame that holds the
       trampoline (stripped of a pointer signature), U2 each word that holds
       the original. An unwritten local that holds a stale copy is
       rewritten too; nothing reads it.

   What is not covered, and what happens then:
   - a catch whose __cxa_begin_catch call does not reach this definition (a
     library that binds it to its own copy): the live frames stay unhooked,
     their returns are not traced, and F0 later ends them as "unwind";
   - aarch64: a function that moved x30 into a callee-saved register, which
     a deeper frame then saved: the slot is not found and std::terminate
     follows, as before;
   - a C program that loads C++ code with dlopen: a program exports these
     definitions to the libraries it loads only when it is linked with the
     C++ runtime, with -rdynamic, or is the LD_PRELOAD agent; otherwise
     the library's throw reaches the unwinder directly, as without
     bptrace. Exported, they forward to the library's own runtime even
     when it was loaded RTLD_LOCAL (interpose.c; t_interpose_local);
   - a static link: the runtime's own definitions win over these weak
     ones where they are linked in (-static-libstdc++: no U2), and where
     they are not, there is nothing to forward to and the first call of
     one aborts with a message (a throw, and pthread_exit too). A fully
     static program defines BPT_NO_INTERPOSE (and a throw through a
     return frame terminates);
   - pthread_cancel: the unwind starts inside the C library, unseen;
   - tcc, which has no native sites, compiles none of this.
   The thread's shadow stack is its own: U1 and U2 run on the throwing
   thread and touch no other thread's frames. */

#if defined(BPT__INTERPOSE)
/* Rewrite, in frame fr's slot range, each word that holds `from` (once
   stripped) with `to` (signed as the function signs its return address).
   below: the lowest address the frame can reach. Returns the words
   rewritten. */
static int bpt__unwind_swap(const bpt__frame *fr, uintptr_t below, uintptr_t from, uintptr_t to) {
    uintptr_t a, b;
    int n = 0;
    bpt__arch_saved_ret_range(fr->sp, below, &a, &b);
    for (a = (a + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1); a + sizeof(uintptr_t) <= b;
         a += sizeof(uintptr_t)) {
        uintptr_t *w = (uintptr_t *)a;
        if (bpt__arch_ret_strip(fr->f, *w) != from) continue;
        *w = bpt__arch_ret_sign(fr->f, to, fr->sp);
        n++;
    }
    return n;
}

/* U1 (hook = 0) and U2's second half (hook = 1): walk the thread's native
   frames from the newest, each one's range bounded below by the previous
   (newer) frame's entry sp, starting at `below`, the current sp. A frame
   under construction or below the walk (another stack) is left alone; a
   tail call's frame has no slot of its own (the frame it replaced has it). */
static void bpt__unwind_rewrite(bpt__thread *rec, uintptr_t below, int hook) {
    uint32_t i = rec->shadow_depth[BPT__STACK_NATIVE];
    uintptr_t alt_lo, alt_hi;
    (void)bpt__altstack_bounds(rec, below, &alt_lo, &alt_hi);
    while (i-- > 0) {
        bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][i];
        int fr_alt = fr->sp >= alt_lo && fr->sp < alt_hi, below_alt = below >= alt_lo && below < alt_hi;
        if (bpt__frame_filling(rec, BPT__STACK_NATIVE, i) || !bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) ||
            fr->sp < below || fr_alt != below_alt)
            continue;   /* being pushed, another fiber's, ended, or not on this stack (a handler's
                           throw on the sigaltstack unwinds only the sigaltstack) */
        if (fr->ret == 0) continue;
        if (!hook && !fr->unhooked)
            fr->unhooked = bpt__unwind_swap(fr, below, BPT__RETURN_TRAMPOLINE, fr->ret) > 0;
        else if (hook && fr->unhooked) {
            bpt__unwind_swap(fr, below, fr->ret, BPT__RETURN_TRAMPOLINE);
            fr->unhooked = 0;   /* rewritten, or its slot is gone: F0 or F2 will end it */
        }
        below = fr->sp;
    }
}

/* The thread's record if it has native frames, else NULL. */
static bpt__thread *bpt__unwind_frames(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return rec && rec->shadow_depth[BPT__STACK_NATIVE] ? rec : NULL;
}

/* The entry stubs. Each interposed function is a few instructions of
   assembly: save its one argument, call its C half with the stack pointer
   it was entered with (exact: the entry sp that names a callee's place, as
   frames.c's), restore the argument and jump to the runtime's definition,
   which the C half returns. So no frame of bptrace's is on the stack while
   the unwinder runs (the unwinder needs no unwind information of ours, and
   a failed search returns straight to __cxa_throw, whose std::terminate
   then sees the original return addresses), and the runtime's function
   returns to the original caller. The definitions are weak: where the
   runtime's own is linked in statically (-static-libstdc++), the link
   keeps the runtime's and this step does not happen (a throw through a
   return frame then calls std::terminate; a catch ends its frames later,
   as "unwind"). */
#if defined(__x86_64__)
#  define BPT__UNWIND_STUB(name, half)                                        \
    "    .text\n    .p2align 4\n    .weak " name "\n"                          \
    "    .type " name ", @function\n" name ":\n"                              \
    "    push %rdi\n"                  /* the argument; the stack aligned */  \
    "    lea 8(%rsp), %rdi\n"          /* the entry sp: the return address */ \
    "    call " half "\n"                                                    \
    "    pop %rdi\n"                                                         \
    "    jmp *%rax\n"                  /* the runtime's, to our caller */     \
    "    .size " name ", . - " name "\n"
#else
#  define BPT__UNWIND_STUB(name, half)                                        \
    "    .text\n    .p2align 4\n    .weak " name "\n"                          \
    "    .type " name ", %function\n" name ":\n"                              \
    "    hint #34\n"                   /* bti c: a NOP without BTI */         \
    "    stp x0, x30, [sp, #-16]!\n"                                         \
    "    add x0, sp, #16\n"            /* the entry sp */                     \
    "    bl " half "\n"                                                      \
    "    mov x16, x0\n"                                                      \
    "    ldp x0, x30, [sp], #16\n"                                           \
    "    br x16\n"                     /* the runtime's, to our caller */     \
    "    .size " name ", . - " name "\n"
#endif
__asm__(BPT__UNWIND_STUB("_Unwind_RaiseException", "bpt__unwind_raise")
        BPT__UNWIND_STUB("_Unwind_Resume_or_Rethrow", "bpt__unwind_rethrow")
        BPT__UNWIND_STUB("_Unwind_Resume", "bpt__unwind_resume")
        BPT__UNWIND_STUB("pthread_exit", "bpt__unwind_exit")
        BPT__UNWIND_STUB("__cxa_begin_catch", "bpt__unwind_catch"));

/* U1, then the runtime's definition of name. */
static uintptr_t bpt__unwind_leave(bpt__atomic_ptr *next, const char *name, uintptr_t sp) {
    bpt__thread *rec = bpt__unwind_frames();
    if (rec) bpt__unwind_rewrite(rec, sp, 0);
    return (uintptr_t)bpt__interposed_next(next, name);
}

/* U1: a throw (__cxa_throw, std::rethrow_exception). */
BPT__ASM_CALLED uintptr_t bpt__unwind_raise(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_RaiseException", sp);
}

/* U1: a rethrow (`throw;`, __cxa_rethrow). */
BPT__ASM_CALLED uintptr_t bpt__unwind_rethrow(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_Resume_or_Rethrow", sp);
}

/* U1: a cleanup is done and the unwind goes on. */
BPT__ASM_CALLED uintptr_t bpt__unwind_resume(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_Resume", sp);
}

/* U1: pthread_exit's forced unwind, which runs the C++ destructors (and
   pthread_cleanup handlers) of every frame on the way. A cancellation
   (pthread_cancel) unwinds from inside the C library, unseen: a return
   frame stops its unwind, and the destructors above it do not run. */
BPT__ASM_CALLED uintptr_t bpt__unwind_exit(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "pthread_exit", sp);
}

/* U2: a catch clause begins, in the function that called us. */
BPT__ASM_CALLED uintptr_t bpt__unwind_catch(uintptr_t sp) {
    static bpt__atomic_ptr next;
    bpt__thread *rec = bpt__unwind_frames();
    if (rec && bpt__pin()) {
        bpt__native_settle_dead(rec, sp, 0, "throw");
        bpt__unwind_rewrite(rec, sp, 1);
        bpt__unpin(rec);
    }
    return (uintptr_t)bpt__interposed_next(&next, "__cxa_begin_catch");
}
#endif /* BPT__INTERPOSE */
/*** End of unwind.c ***/

/*** Begin file fibers.c ***/
/* fibers.c: threads that switch stacks (makecontext/swapcontext): each
   stack's frames are told apart by a tag.

   A thread has one shadow stack, but a thread that runs fibers runs on
   several native stacks in turn, and a suspended fiber's frames stay in the
   shadow stack, between and under the frames of the others. Compared by
   stack pointer alone, a suspended fiber's live frames look like frames a
   longjmp left behind (they lie at or below the new call's sp, or above
   it: wherever its stack was placed). F0 would end them, and their return
   would then find no frame: an abort. So:

   S1. Leave (swapcontext, setcontext, before the switch): the calls the
       thread times now are paused, as a process switch pauses them, and
       the thread takes a new tag. A fresh context (makecontext) runs with
       it: its frames will carry it.
   S2. Back (swapcontext returns: this stack runs again, whoever switched
       to it, a uc_link return to it included): the thread takes this
       stack's tag back, and the calls it times resume.
   A native frame carries the tag of the stack it was pushed on (F1). F0,
   F2, U1 and bpt_unwind_to look only at frames with the thread's current
   tag (bpt__frame_mine). F2 ends a frame that other tags' frames cover by
   marking it gone: a tombstone, dropped once it is on top. A return whose
   frame carries another tag shows a switch back that bptrace did not see
   (the C library's own setcontext, for a uc_link to a getcontext): F2
   gives the thread that frame's tag (bpt__frame_adopt).

   A coroutine library with its own switch code (boost.context,
   hand-written assembly), which bptrace does not see, calls S1 and S2
   itself: bpt_fiber_switch_begin and _end.

   Not covered:
   - a fiber resumed on another thread: its frames are on the first
     thread's shadow stack, and its return aborts (no frame);
   - a coroutine library's own switch that is not announced;
   - setcontext to a getcontext on the same stack, used as a longjmp, and a
     fiber never resumed: the frames left behind keep their tag and are
     never ended; they take shadow stack room until the thread ends (past
     BPT_SHADOW_FRAMES, returns go untraced, counted). */

/* S1: returns the tag of the stack being left. */
static uint64_t bpt__fiber_leave(bpt__thread *rec) {
    uint64_t mine = rec->fiber;
    bpt__frames_fiber_timem(rec, 0);
    if (++rec->fibers == 0) rec->fibers = 1;   /* 0: the thread's own stack */
    rec->fiber = rec->fibers;
    return mine;
}

/* S2. */
static void bpt__fiber_back(bpt__thread *rec, uint64_t mine) {
    rec->fiber = mine;
    bpt__frames_fiber_timem(rec, 1);
}

uint64_t bpt_fiber_switch_begin(void) {
    bpt__thread *rec = bpt__thread_self();
    return rec ? bpt__fiber_leave(rec) : 0;
}

void bpt_fiber_switch_end(uint64_t tag) {
    bpt__thread *rec = bpt__thread_self_or_null();
    if (rec) bpt__fiber_back(rec, tag);
}

#if defined(BPT__INTERPOSE)
/* ucontext_t * as void *: the same call, without <ucontext.h>. */
BPT__INTERPOSED int bpt__hook_swapcontext(void *oucp, const void *ucp) __asm__("swapcontext");
BPT__INTERPOSED int bpt__hook_setcontext(const void *ucp) __asm__("setcontext");

/* Returns when another context switches back to this one (S2), or at once
   with -1 on an error. The record is made here if the thread has none, so
   that the stack it leaves keeps tag 0 and the fiber gets its own. */
int bpt__hook_swapcontext(void *oucp, const void *ucp) {
    static bpt__atomic_ptr next;
    int (*swap)(void *, const void *) = (int (*)(void *, const void *))bpt__interposed_next(&next, "swapcontext");
    bpt__thread *rec = bpt__thread_self();
    uint64_t mine = rec ? bpt__fiber_leave(rec) : 0;
    int rc = swap(oucp, ucp);
    if ((rec = bpt__thread_self_or_null())) bpt__fiber_back(rec, mine);
    return rc;
}

/* Returns only on an error (-1): then the thread is back on its stack. */
int bpt__hook_setcontext(const void *ucp) {
    static bpt__atomic_ptr next;
    int (*set)(const void *) = (int (*)(const void *))bpt__interposed_next(&next, "setcontext");
    bpt__thread *rec = bpt__thread_self();
    uint64_t mine = rec ? bpt__fiber_leave(rec) : 0;
    int rc = set(ucp);
    if (rec) bpt__fiber_back(rec, mine);
    return rc;
}
#endif
/*** End of fibers.c ***/

/*** Begin file kind_call.c ***/
/* kind_call.c: the local call trace breakpoint kind (BPT_CALL), as
   erts_generic_breakpoint's ERTS_BPF_LOCAL_TRACE branch in beam_bp.c: on
   each call, evaluate the session's match spec over the arguments, send a
   call message, and ask for a return frame when the match spec's actions
   want return_from, exception_from or return_to (frames.c). Its data is the
   match spec (NULL: match every call). Its hooks are the ones the kinds
   table (BPT_KINDS, api_pattern.h) names; breakpoint.h declares them. */

#define BPT__BPF_LOCAL_TRACE BPT__BPF_ON(BPT__KIX_CALL)

/* Step 2: nothing to allocate: the op holds a reference to its match spec. */
BPT__PRIVATE int bpt__kind_call_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    (void)op; (void)staging;
    *out = NULL;
    return 0;
}

BPT__PRIVATE void bpt__kind_call_ref(void *data) { bpt__ms_ref((bpt__ms *)data); }
BPT__PRIVATE void bpt__kind_call_unref(void *data) { bpt__ms_unref((bpt__ms *)data); }

/* Step 3: replace the match spec (on), or clear it (off). Call trace has
   no pause: ON and ACTIVE go together. */
BPT__PRIVATE void bpt__kind_call_stage(bpt__GenericBpData *d, const bpt__op *op, void *unused) {
    (void)unused;
    if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__ms_unref((bpt__ms *)d->data[BPT__KIX_CALL]);
    d->flags &= ~(uint32_t)(BPT__BPF_LOCAL_TRACE | BPT__BPF_ACTIVE(BPT__KIX_CALL));
    d->data[BPT__KIX_CALL] = NULL;
    if (op->how == 0) {
        d->flags |= BPT__BPF_LOCAL_TRACE | BPT__BPF_ACTIVE(BPT__KIX_CALL);
        d->data[BPT__KIX_CALL] = op->ms;
        bpt__ms_ref(op->ms);
    }
}

BPT__PRIVATE void bpt__kind_call_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    if (!(what & BPT_INFO_FLAGS)) return;
    out->flags |= BPT_CALL;
    if (ms) out->flags |= ms->actions & BPT__CALL_ACTIONS;
}

#if defined(BPT_NATIVE)
/* A native call's arguments, from the stub's register frame: integer kinds
   take the next integer register, f64 the next floating-point one, as the
   SysV x86-64 and AAPCS64 ABIs assign simple arguments. */
static void bpt__native_args(const bpt__regs *r, const uint8_t *types, int n, uint64_t *out) {
    int i, gi = 0, fi = 0;
    for (i = 0; i < n; i++) {
        if (types[i] == BPT_ARG_F64) out[i] = fi < BPT__FP_ARG_REGS ? r->fp[fi++][0] : 0;
        else out[i] = gi < BPT__INT_ARG_REGS ? r->gpr[gi++] : 0;
    }
}
#endif

#if defined(BPT_NATIVE)
typedef char bpt__args_fit[(int)BPT_MAX_ARGS >= (int)BPT__INT_ARG_REGS ? 1 : -1];   /* every register's word fits */

/* >>plain call: a CALL record's words for a native site's integer
   arguments, as the record format has them (>>tracefile in
   api_session.h): the types word (every type BPT_ARG_I64, no strings),
   then the first n = min(arity, BPT_MAX_ARGS) values. Every integer
   argument register is copied at once, a fixed-size copy (a loop of n was
   25 instructions for 2 arguments), and the record's length takes the
   first n; arguments past the registers (on the stack) read as 0. So it
   writes 1 + BPT_MAX_ARGS words at w (bpt__args_fit: every register's
   word fits). Returns the record's words: 1 + n, or 0 for a function of
   no argument. Integer registers only (>>intregs in port.h): the call
   path writes the record with it, in place. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_args_plain(const bpt_func *f, const uint64_t *gpr, uint64_t *w) {
    int i, n = f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS;
    if (n == 0) return 0;
    memcpy(w + 1, gpr, sizeof(uint64_t) * BPT__INT_ARG_REGS);
    /* A fixed count too (x86-64: 2, aarch64: none), not up to n: clang made
       that loop a call to memset, which the call path may not make. */
    for (i = BPT__INT_ARG_REGS; i < BPT_MAX_ARGS; i++) w[1 + i] = 0;
    w[0] = (uint64_t)n << 32;   /* every type BPT_ARG_I64 (0), no strings */
    return 1 + (uint32_t)n;
}

/* The call path's record (CALL_PLAIN, site_native.c), written in place at
   p, which has BPT__CALL_PLAIN_ROOM bytes: the header, then
   bpt__call_args_plain's words. The same record the call kind's hit
   sends for a call with no match spec. flags: BPT__REC_CALL_NO_RETURN, or
   0 when the return is traced (the call-return path). Returns its bytes. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_rec_plain(unsigned char *p, const bpt_func *f, const uint64_t *gpr,
                                                   uint64_t ticks, uint16_t flags) {
    bpt__rec *h = (bpt__rec *)(void *)p;   /* chunk memory: 8-aligned, no declared type */
    uint32_t words = bpt__call_args_plain(f, gpr, (uint64_t *)(void *)(h + 1));
    h->ticks = ticks;
    h->type = BPT_MSG_CALL;
    h->words = (uint8_t)words;
    h->info = (uint16_t)((words ? words - 1 : 0) | flags);   /* the argument count, the flag */
    h->id = f->fid;
    return (uint32_t)sizeof *h + 8u * words;
}
#endif

/* A call record's arguments, as the match spec's argument spec says, or
   the first `arity` as i64: the types word, the values, then copied
   strings. VM sites read them through ops->arg; native sites from the
   stub's register frame (integer and floating-point registers counted
   separately, as the ABI assigns them). Returns the words used. */
static uint32_t bpt__call_args_spec(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w);
BPT__HOT uint32_t bpt__call_args(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w) {
#if defined(BPT_NATIVE)
    if (!(ms && ms->nspec) && f->kind == BPT__SITE_NATIVE)   /* the common case, inline */
        return bpt__call_args_plain(f, ((const bpt__regs *)frame)->gpr, w);
#endif
    return bpt__call_args_spec(f, ms, frame, w);
}

/* The general case, out of line: an argument spec, or a VM site. */
static uint32_t bpt__call_args_spec(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w) {
    int i, n = ms && ms->nspec ? ms->nspec : (f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS);
    uint8_t types[BPT_MAX_ARGS];
    uint64_t *args = w + 1, typeword = 0;
    char *str;
    size_t used = 0;
    if (n == 0) return 0;
    if (ms && ms->nspec) memcpy(types, ms->spec, (size_t)n);
    else memset(types, BPT_ARG_I64, sizeof types);
    if (f->kind == BPT__SITE_VM) {
        if (!f->ops || !f->ops->arg) n = 0;
        for (i = 0; i < n; i++) args[i] = f->ops->arg(frame, i);
    }
#if defined(BPT_NATIVE)
    else {
        bpt__native_args((const bpt__regs *)frame, types, n, args);
    }
#endif
    if (n == 0) return 0;
    /* Strings are copied now: the pointer means nothing once the call is
       over. Each takes its bytes and a NUL while room lasts; later ones
       point at the area's last byte, always a NUL. */
    str = (char *)(args + n);
    for (i = 0; i < n; i++) {
        const char *p = (const char *)(uintptr_t)args[i];
        size_t len;
        typeword |= (uint64_t)types[i] << (4 * i);
        if (types[i] != BPT_ARG_STR) continue;
        if (used >= BPT_MSG_STR_BYTES - 1) { args[i] = BPT_MSG_STR_BYTES - 1; continue; }
        if (!p) p = "(null)";
        len = strnlen(p, BPT_MSG_STR_BYTES - used - 1);
        memcpy(str + used, p, len);
        str[used + len] = '\0';
        args[i] = used;
        used += len + 1;
    }
    if (used % 8) memset(str + used, 0, 8 - used % 8);   /* whole words: no stack bytes in a file */
    w[0] = typeword | (uint64_t)n << 32 | (uint64_t)used << 40;
    return 1 + (uint32_t)n + (uint32_t)(used + 7) / 8;
}

/* caller: where the call returns to, and the function that is (native: its
   return address, symbolized; VM: what ops->caller says). */
static void bpt__call_caller(const bpt__hit *h, uint64_t *w) {
    const bpt_func *f = h->f, *c = NULL;
    w[0] = 0;
    if (f->kind == BPT__SITE_VM) {
        c = f->ops && f->ops->caller ? f->ops->caller(h->frame) : NULL;
    }
#if defined(BPT_NATIVE)
    else {
        w[0] = bpt__native_caller(h);
        c = bpt__symbolize((uintptr_t)w[0]);
    }
#endif
    w[1] = c ? c->fid : 0;
}

/* Local call trace of one session: match spec, rate limit, record, and
   the wish for a return frame (return_trace, exception_trace, return_to). */
BPT__HOT void bpt__kind_call_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    bpt__thread *rec = h->rec;
    const bpt_func *f = h->f;
    bpt__recbuf b;
    uint32_t words;
    /* A session is marked dead once its destroy's switch-off has committed
       (session_life.c): from then until the wait before it is freed, a hit
       that found its GenericBp before step 12 unlinked it must send
       nothing. A tracer's own calls are not traced. */
    if (rec->in_tracer || bpt__load_relaxed_u32(&s->dead)) return;   /* [S2] */
    words = bpt__call_args(f, ms, h->frame, b.w);
    b.h.info = (uint16_t)(words ? (b.w[0] >> 32) & 0xff : 0);
    if (ms && ms->pred && !ms->pred(b.w + 1, (int)b.h.info, ms->user)) return;
    if (ms && (ms->actions & BPT_MS_SILENT)) return;
    if (!bpt__session_admit(s, rec)) return;
    if (ms && (ms->actions & BPT_CALLER)) {
        bpt__call_caller(h, b.w + words);
        words += 2;
        b.h.info |= BPT__REC_CALL_CALLER;
    }
    if (ms && ms->message_id) {
        b.w[words++] = ms->message_id;
        b.h.info |= BPT__REC_CALL_USER;
    }
    if (!(ms && (ms->actions & (BPT_RETURN | BPT_EXCEPTION))) || !bpt__hit_frame_room(h, s))
        b.h.info |= BPT__REC_CALL_NO_RETURN;   /* no return_from will end it */
    b.h.ticks = bpt__now_ticks();
    b.h.type = BPT_MSG_CALL;
    b.h.words = (uint8_t)words;
    b.h.id = f->fid;
    bpt__session_send(s, rec, &b.h);
    if (ms && (ms->actions & (BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO)))
        bpt__hit_want_frame(h, s, ms->actions, ms->rettype);
}
/*** End of kind_call.c ***/

/*** Begin file kind_count.c ***/
/* kind_count.c: the call_count breakpoint kind (BPT_COUNT), as BEAM's
   BpCount in beam_bp.c, with its counter split by thread (DESIGN.md 10.1):
   no cache line is written by two threads on the hit path, and the hit has
   no locked or atomic read-modify-write. Its hooks are the ones the kinds
   table (BPT_KINDS, api_pattern.h) names; breakpoint.h declares them.

   Slots. Each BpCount owns a slot, a number below BPT__COUNT_SLOTS, taken
   under the code modification permission (step 2) and given back at its
   last unref. Every thread record holds pages of uint64 counters
   (progress.h): slot n is counter n of each record. A hit adds one to its
   own thread's counter, which no other thread writes; bpt_trace_info adds
   up every record's counter for the slot with relaxed loads, without
   stopping anyone. Records are never freed and keep their pages when a new
   thread reuses them, so an exited thread's counts stay in the sum; a fork
   child inherits records and pages (private mappings) and counts on from
   the parent's sums. Past BPT__COUNT_SLOTS (524,288) counted breakpoints
   at once, step 2 fails with BPT_ENOMEM.

   Storage. A page is mapped on the hit path, by its thread's first count in
   it: with mmap, not BPT_MALLOC, since a hit may run in a signal handler
   that interrupted malloc, or inside a traced malloc; not by the set path,
   which cannot know the threads that will hit (any thread may, at any
   time, and threads have no bound). The page is published with a CAS
   [P1], so a signal handler nested on the same thread that maps it first
   wins, and the interrupted hit unmaps its own and uses the winner's. When
   mmap fails, the hit adds to the breakpoint's shared `spill` counter with
   an atomic add instead: slower, still exact.

   The increment [H1]. A signal handler may hit a counted function on the
   thread whose increment it interrupted. On x86-64 the increment is one
   instruction (bpt__owner_inc1_u64, port.h), which a signal cannot split.
   Elsewhere (aarch64: ldr, add, str) the owner marks its record
   `counting` around the update, and a hit that finds the mark set is a
   handler nested in an update: it adds to `spill` atomically and touches
   no page, so neither add is lost.

   Exactness.
   - A reused slot starts from 0. Its previous BpCount gave it back at its
     last unref, which runs after a wait for thread progress: step 11 after
     the commit's wait (step 8's, or step 10's where step 8 defers it:
     >>deferred wait in bp.c), step 12 after its own (step 3's unref of a switch-off
     never is the last: the active generation still holds one). Every hit
     that could reach the old BpCount ended its pinned section before that
     wait returned [B3], and the permission orders the wait before the next
     prepare, which zeroes the slot's counter in every mapped page (below).
     A hit reaches the new BpCount only through the generation step 3
     staged, which step 7's commit publishes [G2] after the zeroing: its
     relaxed load of its counter sees 0 or a later value. A slot never
     taken before is 0 in every page (mmap zeroes).
   - BPT_RESTART, and BPT_COUNT on a function already counting (paused or
     not), store the current sum as `base`, which info subtracts, under
     the permission (info reads it under the permission too). A counter
     never goes back while its slot is taken, so the count is the calls
     since then: every call that completed before it happens before the
     change's loads, and is in base. Both zero the count, as
     set_function_break in beam_bp.c does for any operation on a counting
     breakpoint but a pause (erlang:trace_pattern's `true` and `restart`);
     BPT_RESTART leaves a function that is not counting alone (bp.c).
   - BPT_PAUSE clears ACTIVE: hits stop at the commit, the counters stay.
   - Off, then on again: the old BpCount gives its slot back; the new one
     takes a fresh or zeroed slot. */

#define BPT__BPF_COUNT        BPT__BPF_ON(BPT__KIX_COUNT)
#define BPT__BPF_COUNT_ACTIVE BPT__BPF_ACTIVE(BPT__KIX_COUNT)
#define BPT__COUNT_PAGE_BYTES (BPT__COUNT_PAGE_SLOTS * sizeof(uint64_t))


/* The slots in use, one bit each, lowest free first, so that the slots in
   use stay in few pages. Under the code modification permission; a fork
   child inherits them consistent (the fork handlers hold it, locks.c). */
static struct {
    uint64_t used[BPT__COUNT_SLOTS / 64];
    uint32_t first;               /* no free bit in used[0..first) */
    uint32_t high;                /* every slot from here up was never taken */
} bpt__count_slots;

/* The index of the lowest 0 bit of a word that has one. A bit scan where
   the compiler has one: a switch of 10,000 functions takes 10,000 slots,
   and a loop over the bits was a fifth of its time. */
static uint32_t bpt__lowest_zero_bit(uint64_t used) {
#if defined(__GNUC__) && !defined(__TINYC__)
    return (uint32_t)__builtin_ctzll(~used);
#else
    uint32_t b = 0;
    while (used >> b & 1) b++;
    return b;
#endif
}

/* Take the lowest free slot: 0, or -1 when every slot is taken. */
static int bpt__count_slot_take(uint32_t *slot) {
    uint32_t w = bpt__count_slots.first, b;
    while (w < BPT__COUNT_SLOTS / 64 && bpt__count_slots.used[w] == ~(uint64_t)0) w++;
    bpt__count_slots.first = w;
    if (w == BPT__COUNT_SLOTS / 64) return -1;
    b = bpt__lowest_zero_bit(bpt__count_slots.used[w]);
    bpt__count_slots.used[w] |= (uint64_t)1 << b;
    *slot = w * 64 + b;
    return 0;
}

static void bpt__count_slot_give(uint32_t slot) {
    bpt__count_slots.used[slot / 64] &= ~((uint64_t)1 << (slot % 64));
    if (slot / 64 < bpt__count_slots.first) bpt__count_slots.first = slot / 64;
}

/* Where rec holds the pointer to the page of a slot: dir is its BpCount's
   (or a COUNT shortcut's copy of it), a byte offset into the record. */
BPT__HOT BPT__INTREGS bpt__atomic_ptr *bpt__count_dir(bpt__thread *rec, uintptr_t dir) {
    return (bpt__atomic_ptr *)(void *)((char *)rec + dir);
}

/* Every thread's counter of c's slot, plus the spill. Never blocks a hit. */
static uint64_t bpt__count_sum(bpt__BpCount *c) {
    uint64_t sum = bpt__load_relaxed_u64(&c->spill);
    bpt__thread *rec;
    for (rec = bpt__thread_records(); rec; rec = rec->next) {
        bpt__atomic_u64 *page = (bpt__atomic_u64 *)bpt__load_acquire_ptr(bpt__count_dir(rec, c->dir));   /* [P1] */
        if (page) sum += bpt__load_relaxed_u64(&page[c->off]);
    }
    return sum;
}

/* BpCounts, recycled (>>recycle in ptrset.c). */
static bpt__recycle bpt__count_blocks = { NULL, sizeof(bpt__BpCount) };

/* Step 2: a fresh counter when the change switches counting on where the
   staging generation has none. A slot used before is zeroed in every
   mapped page: no hit can reach it (see the top of this file). */
BPT__PRIVATE int bpt__kind_count_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    bpt__BpCount *bc;
    bpt__thread *rec;
    uint32_t slot;
    *out = NULL;
    if (!bpt__op_enables(op) || (staging && (staging->flags & BPT__BPF_COUNT))) return 0;
    if (!(bc = (bpt__BpCount *)bpt__recycle_take(&bpt__count_blocks))) return BPT_ENOMEM;
    if (bpt__count_slot_take(&slot) < 0) {   /* more than BPT__COUNT_SLOTS counted breakpoints */
        bpt__recycle_give(&bpt__count_blocks, bc);
        return BPT_ENOMEM;
    }
    bc->dir = offsetof(bpt__thread, counts) + slot / BPT__COUNT_PAGE_SLOTS * sizeof(bpt__atomic_ptr);
    bc->off = slot % BPT__COUNT_PAGE_SLOTS;
    bc->slot = slot;
    bc->refc = 1;
    bc->base = 0;
    bpt__store_relaxed_u64(&bc->spill, 0);
    if (slot < bpt__count_slots.high) {
        for (rec = bpt__thread_records(); rec; rec = rec->next) {
            bpt__atomic_u64 *page = (bpt__atomic_u64 *)bpt__load_acquire_ptr(bpt__count_dir(rec, bc->dir));   /* [P1] */
            if (page) bpt__store_relaxed_u64(&page[bc->off], 0);
        }
    } else {
        bpt__count_slots.high = slot + 1;
    }
    *out = bc;
    return 0;
}

BPT__PRIVATE void bpt__kind_count_ref(void *data) { ((bpt__BpCount *)data)->refc++; }

/* The last unref comes after a wait for thread progress (see the top of
   this file): no hit still counts into the slot it gives back. */
BPT__PRIVATE void bpt__kind_count_unref(void *data) {
    bpt__BpCount *c = (bpt__BpCount *)data;
    if (c && --c->refc == 0) {
        bpt__count_slot_give(c->slot);
        bpt__recycle_give(&bpt__count_blocks, c);
    }
}

/* Step 3: on, off, pause or restart. `fresh` is step 2's counter (its one
   reference moves here), or NULL. */
BPT__PRIVATE void bpt__kind_count_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    switch (op->how) {
    case BPT_OFF:
        if (d->flags & BPT__BPF_COUNT) bpt__kind_count_unref(d->data[BPT__KIX_COUNT]);
        d->flags &= ~(uint32_t)(BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE);
        d->data[BPT__KIX_COUNT] = NULL;
        break;
    case BPT_PAUSE:
        d->flags &= ~(uint32_t)BPT__BPF_COUNT_ACTIVE;
        break;
    default: /* on, restart */
        if (!(d->flags & BPT__BPF_COUNT)) {
            if (!fresh) break;   /* a restart: it touches only counting functions */
            d->data[BPT__KIX_COUNT] = fresh;
            d->flags |= BPT__BPF_COUNT;
        } else {
            /* On again, or restarted: from zero. Shared with the active
               generation, as in BEAM: the reset is seen at once, the
               re-activation at the commit. */
            bpt__BpCount *c = (bpt__BpCount *)d->data[BPT__KIX_COUNT];
            c->base = bpt__count_sum(c);
        }
        d->flags |= BPT__BPF_COUNT_ACTIVE;
    }
}

/* A thread's first count in a page: map it (BPT_HIT_MAP) and publish it
   [P1]. NULL when the map is refused. */
static bpt__atomic_u64 *bpt__count_page_map(bpt__thread *rec, const bpt__BpCount *c) {
    bpt__atomic_ptr *dir = bpt__count_dir(rec, c->dir);
    void *p = BPT_HIT_MAP(BPT__COUNT_PAGE_BYTES);
    if (p && !bpt__cas_ptr(dir, NULL, p)) {   /* [P1] pairs with the readers' acquire loads */
        BPT_HIT_UNMAP(p, BPT__COUNT_PAGE_BYTES);   /* a handler nested on this thread mapped it first */
        p = bpt__load_relaxed_ptr(dir);
    }
    return (bpt__atomic_u64 *)p;
}

/* The hit: one more call on this thread's own counter, if the thread has
   mapped the counter's page. Only this thread (and handlers nested on it)
   writes the record's pages, so the owner reads its page pointer with a
   relaxed load. Returns 0, having counted nothing, when the page is not
   mapped yet. The count path of native entries (site_native.c) calls this
   alone, with the integer registers only (>>intregs in port.h); the
   others call bpt__kind_count_add. `dir` and `off` are the BpCount's
   (the count path passes its shortcut's copies); `count` is the BpCount,
   whose spill takes a count that a handler nested in this thread's own
   update makes. */
BPT__HOT BPT__INTREGS int bpt__kind_count_try_add(bpt__thread *rec, uintptr_t dir, uintptr_t off, void *count) {
    bpt__atomic_ptr *at = bpt__count_dir(rec, dir);
    bpt__atomic_u64 *page;
#if defined(BPT__SIGNAL_ATOMIC_INC)
    (void)count;
    if (BPT__UNLIKELY(!(page = (bpt__atomic_u64 *)bpt__load_relaxed_ptr(at)))) return 0;
    bpt__owner_inc1_u64(&page[off]);   /* [H1] one instruction: a handler cannot split it */
#else
    if (BPT__UNLIKELY(rec->counting)) {   /* [H1] a handler nested in this thread's update */
        bpt__fetch_add_u64(&((bpt__BpCount *)count)->spill, 1);
        return 1;
    }
    rec->counting = 1;
    bpt__compiler_barrier();   /* [H1] marked before the load: a handler from here on spills */
    page = (bpt__atomic_u64 *)bpt__load_relaxed_ptr(at);
    if (BPT__LIKELY(page != NULL)) bpt__owner_inc_u64(&page[off], 1);
    bpt__compiler_barrier();   /* [H1] stored before the mark is cleared */
    rec->counting = 0;
    if (!page) return 0;
#endif
    return 1;
}

/* The same, mapping the page on the thread's first count in it; a count
   that finds no page (the map refused) goes to the spill. The COUNT
   shortcut calls this directly (hit.c), the general walk through the
   kind's hook below. */
BPT__HOT void bpt__kind_count_add(bpt__thread *rec, void *count) {
    bpt__BpCount *c = (bpt__BpCount *)count;
    if (bpt__kind_count_try_add(rec, c->dir, c->off, count)) return;
    if (bpt__count_page_map(rec, c) == NULL || !bpt__kind_count_try_add(rec, c->dir, c->off, count))
        bpt__fetch_add_u64(&c->spill, 1);
}

BPT__HOT void bpt__kind_count_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    (void)s;
    bpt__kind_count_add(h->rec, d->data[BPT__KIX_COUNT]);
}

BPT__PRIVATE void bpt__kind_count_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    if (what & BPT_INFO_FLAGS) {
        out->flags |= BPT_COUNT;
        out->count_paused = !(d->flags & BPT__BPF_COUNT_ACTIVE);
    }
    if (what & BPT_INFO_COUNT) {
        bpt__BpCount *c = (bpt__BpCount *)d->data[BPT__KIX_COUNT];
        out->count = bpt__count_sum(c) - c->base;
    }
}
/*** End of kind_count.c ***/

/*** Begin file kind_timem.c ***/
/* kind_timem.c: the call_time and call_memory breakpoint kinds (BPT_TIME,
   BPT_MEMORY), as BEAM's ERTS_BPF_TIME_TRACE and ERTS_BPF_MEM_TRACE: a hit
   counts the call in its thread's table and asks for a return frame, which
   charges the call's own time and bytes when it ends (frames.c). The two
   kinds share their tables (timem.c); these hooks keep the invariant that
   while both are on, both data slots point at the same bpt__BpTimem. The
   hooks are the ones the kinds table (BPT_KINDS, api_pattern.h) names;
   breakpoint.h declares them. */

/* Step 2: fresh tables where the change switches a kind of the pair on
   (again) or restarts it. A kind that is on starts from zero whether it is
   switched on again or restarted, as set_function_break in beam_bp.c
   resets its table for any operation but a pause; the pair's one table
   means the other kind starts from zero too. A kind switched on beside
   the other shares its tables and zeroes nothing; a restart of kinds that
   are all off changes nothing (bp.c). When one change names both kinds,
   the call_time row allocates for the pair. */
static int bpt__kind_timem_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    uint32_t on = staging ? staging->flags : 0, named = 0;
    *out = NULL;
    if (op->kinds & BPT_TIME) named |= BPT__BPF_ON(BPT__KIX_TIME);
    if (op->kinds & BPT_MEMORY) named |= BPT__BPF_ON(BPT__KIX_MEMORY);
    if (op->how == BPT_OFF || op->how == BPT_PAUSE) return 0;
    if (!(on & named)) {   /* each kind named is off */
        if (op->how == BPT_RESTART || (staging && bpt__timem_of(staging))) return 0;
    }
    if (!(*out = bpt__timem_new())) return BPT_ENOMEM;
    return 0;
}

BPT__PRIVATE int bpt__kind_time_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    return bpt__kind_timem_prepare(op, staging, out);
}

BPT__PRIVATE int bpt__kind_memory_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    if (op->kinds & BPT_TIME) { *out = NULL; return 0; }   /* the call_time row prepares for both */
    return bpt__kind_timem_prepare(op, staging, out);
}

BPT__PRIVATE void bpt__kind_time_ref(void *data) { bpt__timem_ref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_memory_ref(void *data) { bpt__timem_ref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_time_unref(void *data) { bpt__timem_unref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_memory_unref(void *data) { bpt__timem_unref((bpt__BpTimem *)data); }

/* Step 3 for kind k of the pair. `fresh` is step 2's tables, or NULL. On
   or restart with fresh tables, both kinds of the pair that are on move to
   them (as the one shared table they are: a restart of one zeroes the
   other's too), and k is switched on unless restarted; switched on
   without, k shares the other kind's tables. */
static void bpt__kind_timem_stage(bpt__GenericBpData *d, int k, const bpt__op *op, bpt__BpTimem *fresh) {
    uint32_t on = BPT__BPF_ON(k), active = BPT__BPF_ACTIVE(k);
    bpt__BpTimem *shared;
    switch (op->how) {
    case BPT_OFF:
        if (d->flags & on) bpt__timem_unref((bpt__BpTimem *)d->data[k]);
        d->flags &= ~(on | active);
        d->data[k] = NULL;
        break;
    case BPT_PAUSE:
        d->flags &= ~active;
        break;
    default: /* on, restart */
        if (fresh) {
            if (op->how != BPT_RESTART) d->flags |= on;   /* an off slot is NULL: point() fills it */
            bpt__timem_point(d, fresh);   /* each kind that is on: its own reference */
            bpt__timem_unref(fresh);      /* step 2's reference, now held by the slots */
            if (!(d->flags & on)) break;  /* restarted while off: stays off */
        } else if (!(d->flags & on)) {
            if (op->how == BPT_RESTART) break;   /* restart touches only kinds that are on */
            shared = bpt__timem_of(d);
            bpt__timem_ref(shared);
            d->data[k] = shared;
            d->flags |= on;
        }
        d->flags |= active;
    }
}

BPT__PRIVATE void bpt__kind_time_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    bpt__kind_timem_stage(d, BPT__KIX_TIME, op, (bpt__BpTimem *)fresh);
}

BPT__PRIVATE void bpt__kind_memory_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    bpt__kind_timem_stage(d, BPT__KIX_MEMORY, op, (bpt__BpTimem *)fresh);
}

/* The hit: count the call in this thread's table now (so a call still
   running is counted), once for the pair, and ask for a frame, which
   charges the time and memory when the call ends (frames.c). */
BPT__HOT void bpt__kind_time_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    bpt__timem_charge((bpt__BpTimem *)d->data[BPT__KIX_TIME], h->rec, h->rec->process, 1, 0, 0);
    bpt__hit_want_frame(h, s, BPT_TIME | (s->time_cpu ? BPT__FRAME_CPU : 0u), BPT_ARG_I64);
}

BPT__HOT void bpt__kind_memory_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    if (!(d->flags & BPT__BPF_TIME_ACTIVE))   /* else the call_time row counted the call */
        bpt__timem_charge((bpt__BpTimem *)d->data[BPT__KIX_MEMORY], h->rec, h->rec->process, 1, 0, 0);
    bpt__hit_want_frame(h, s, BPT_MEMORY | (s->time_cpu ? BPT__FRAME_CPU : 0u), BPT_ARG_I64);
}

static void bpt__kind_timem_info(const bpt__GenericBpData *d, unsigned what, unsigned flag, bpt_info *out) {
    if (what & BPT_INFO_FLAGS) {   /* each kind's own pause: one flag for both said "not paused" of
                                      call_time paused beside call_memory counting (found by review) */
        out->flags |= flag;
        if (flag == BPT_TIME) out->time_paused = !(d->flags & BPT__BPF_TIME_ACTIVE);
        else out->memory_paused = !(d->flags & BPT__BPF_MEM_ACTIVE);
    }
    /* The sums, the drops (lost_charges) and the processes ranking first:
       what the collection just carried (timem.c >>report). */
    if (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) bpt__timem_report(bpt__timem_of(d), out);
}

BPT__PRIVATE void bpt__kind_time_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    bpt__kind_timem_info(d, what, BPT_TIME, out);
}

BPT__PRIVATE void bpt__kind_memory_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    if (d->flags & BPT__BPF_TIME_TRACE) what &= ~(unsigned)(BPT_INFO_TIME | BPT_INFO_MEMORY);   /* summed once */
    bpt__kind_timem_info(d, what, BPT_MEMORY, out);
}
/*** End of kind_timem.c ***/

/*** Begin file hit.c ***/
/* hit.c: what a breakpoint does when a thread reaches it.
   Pin, read the active index once, and do what the generation's shortcut
   says (>>shortcut, breakpoint.h): nothing; count for the one session that
   only counts; trace the call for the one session that only traces calls;
   run the kinds of the one session that is active; or walk
   the function's GenericBp list (one per session) and run each active
   kind of each session's active generation (kind_*.c: count, call trace,
   call_time, call_memory). Unpin. No lock, no wait: this
   is op_i_generic_breakpoint / erts_generic_breakpoint in beam_bp.c.
   A native entry whose generation only counts never gets here: the stub's
   count path (site_native.c) does the COUNT and NONE shortcuts' work first,
   with the integer registers alone, and leaves its rare cases to this. */

/* The active generation index: 0 or 1. The commit (step 7, bp.c) flips it
   with a release store; a hit reads it once, with an acquire load [G2].
   Defined with the hit, ahead of the count path (site_native.c), which
   inlines its load. */
BPT__ASM_READ_DECL(bpt__atomic_u32 bpt__active_ix)
BPT__ASM_READ bpt__atomic_u32 bpt__active_ix;   /* read by the count route too */
BPT__HOT BPT__INTREGS unsigned bpt__active_ix_load(void) { return bpt__load_acquire_u32(&bpt__active_ix); }

/* One session's breakpoint g in generation ix: run each active kind, in
   the table's order (kind_*.c). */
BPT__HOT void bpt__breakpoint_run(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    const bpt__GenericBpData *d = &g->data[ix];
    if (!d->flags) return;
#define BPT__KIND_HIT(NAME, name, flag) \
    if (d->flags & BPT__BPF_ACTIVE(BPT__KIX_##NAME)) bpt__kind_##name##_hit(h, g->session, d);
    BPT_KINDS(BPT__KIND_HIT)
#undef BPT__KIND_HIT
}

/* The general case: walk every session's breakpoint on h->f in generation
   ix and run each. Out of line, as the ONE shortcut's run below, so that
   the shortcuts' path through bpt__breakpoint stays small (no spills of
   their registers). */
BPT__NOINLINE void bpt__breakpoint_walk(bpt__hit *h, unsigned ix) {
    bpt__GenericBp *g;
    /* [G1] Acquire loads of the list pair with the release stores that
       link a GenericBp (steps 2 and 5, bp.c) and unlink one (step 11). */
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&h->f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next))
        bpt__breakpoint_run(h, g, ix);
}

/* The ONE shortcut: the one session's breakpoint that step 3 found
   active in generation ix, with no walk of the list (>>shortcut). */
BPT__NOINLINE void bpt__breakpoint_one(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    bpt__breakpoint_run(h, g, ix);
}

/* The CALL shortcut: the one session's breakpoint that step 3 found
   active in generation ix traces calls, and nothing else: the call kind
   alone, with no test of the other kinds (callgrind, bench_overhead: a
   call event 295 to 277 instructions, a call+return 657 to 638). Out of
   line, as the ONE shortcut's run. */
BPT__NOINLINE void bpt__breakpoint_call(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    bpt__kind_call_hit(h, g->session, &g->data[ix]);
}

/* Run every session's breakpoint on h->f; gather in h who wants a return
   frame (the site pushes it). The caller then executes the original
   instruction. Returns 0 when the thread has no record (out of memory):
   untraced, never unsafe. */
BPT__HOT int bpt__breakpoint(bpt__hit *h) {
    unsigned ix;
    bpt_func *f = h->f;
    bpt__thread *rec = bpt__pin();
    h->rec = rec;
    h->nwant = 0;
    h->wanted = 0;
    if (!rec) return 0;
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && rec->shadow_depth[BPT__STACK_NATIVE]) bpt__native_settle(h);
#endif
    ix = bpt__active_ix_load();   /* [G2] once per hit: one generation throughout */
    switch (f->shortcut[ix].kind) {   /* published with ix [G2] */
    case BPT__SHORTCUT_NONE:
        break;
    case BPT__SHORTCUT_COUNT:
        bpt__kind_count_add(rec, f->shortcut[ix].data);
        break;
    case BPT__SHORTCUT_CALL:
    case BPT__SHORTCUT_CALL_PLAIN:   /* here, as CALL: the call path (site_native.c) declined it */
    case BPT__SHORTCUT_CALL_RETURN:
        bpt__breakpoint_call(h, (bpt__GenericBp *)f->shortcut[ix].data, ix);
        break;
    case BPT__SHORTCUT_ONE:
    case BPT__SHORTCUT_TIME:   /* here, as ONE: the time path (site_native.c) declined it */
        bpt__breakpoint_one(h, (bpt__GenericBp *)f->shortcut[ix].data, ix);
        break;
    default:
        bpt__breakpoint_walk(h, ix);
    }
    return 1;   /* still pinned: the site pushes its frame, then unpins */
}

bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame, bpt_vm_token *token) {
    bpt__hit h;
    BPT_ASSERT(f && f->kind == BPT__SITE_VM);
    if (token) *token = 0;
    h.f = f;
    h.frame = frame;
    h.no_frame = token == NULL;   /* the VM keeps no frames: return trace of its calls is skipped */
    bpt__own_enter();   /* its calls into libc through traced slots are bptrace's own (site_native.c) */
    if (bpt__breakpoint(&h)) {
        if (h.nwant) bpt__vm_frame_push(&h, token);
        bpt__unpin(h.rec);
    }
    bpt__own_leave();
    return (bpt_vm_word)f->orig_word;   /* immutable while registered */
}
/*** End of hit.c ***/

/*** Begin file site_vm.c ***/
/* site_vm.c: VM instruction-word sites.
   The interpreter registers the address of a function's first instruction
   word; installing a breakpoint stores the breakpoint opcode's word there,
   uninstalling stores the original back. */

typedef char bpt__vm_word_is_64_bits[sizeof(bpt_vm_word) == sizeof(uint64_t) ? 1 : -1];

/* One aligned 8-byte store: single-copy atomic on x86-64 and aarch64, so a
   VM thread's BPT_VM_FETCH sees the old word or the new one, never a mix.
   [V1] It pairs with no acquire: a VM's fetch is a plain load. Its ordering
   with the GenericBp data comes from the waits around it (steps 4 and 6,
   10: [B1] in progress.c), not from this store. */
BPT__PRIVATE void bpt__site_vm_write(bpt_func *f, uint64_t w) {
    bpt__store_release_u64((bpt__atomic_u64 *)f->site, w);   /* [V1] */
}

BPT__PRIVATE int bpt__site_vm_check(const bpt_vm_word *word, bpt_vm_word bp_word) {
    if ((uintptr_t)word % sizeof(bpt_vm_word))
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: first_word %p is not %d-byte aligned",
                         (const void *)word, (int)sizeof(bpt_vm_word));
    if (BPT_VM_FETCH(word) == bp_word)
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: the breakpoint word equals the first "
                         "instruction word (or the site is already patched)");
    return 0;
}

bpt_vm_word bpt_vm_word_at(const bpt_func *f) {
    return f && f->kind == BPT__SITE_VM ? BPT_VM_FETCH((const bpt_vm_word *)f->site) : 0;
}
/*** End of site_vm.c ***/

/*** Begin file site_native.c ***/
/* site_native.c: what native sites share on both architectures: making code
   pages writable in batches, the entry the stubs call, and the one writer the
   protocol uses for every kind of site. */

#if defined(BPT_NATIVE)

static uintptr_t bpt__page_size(void) {
    static uintptr_t size;
    if (!size) size = (uintptr_t)sysconf(_SC_PAGESIZE);
    return size;
}

/* A noted page's low bit: the page is BTI-guarded (bpt__module_code_guarded,
   module.c), and every protection the batch gives it keeps PROT_BTI. */
#define BPT__PAGE_GUARDED ((uintptr_t)1)
#if defined(__aarch64__) && !defined(PROT_BTI)
#  define PROT_BTI 0x10   /* Linux, arch/arm64/include/uapi/asm/mman.h */
#endif

static int bpt__page_prot(uintptr_t noted, int prot) {
#if defined(__aarch64__)
    if (noted & BPT__PAGE_GUARDED) prot |= PROT_BTI;
#else
    (void)noted;
#endif
    return prot;
}

/* Note the pages of [addr, addr+len), guarded or not. Returns 0 or BPT_ENOMEM. */
static int bpt__batch_add(bpt__code_batch *b, const void *addr, size_t len, int guarded) {
    uintptr_t ps = bpt__page_size(), end = (uintptr_t)addr + len, p;
    for (p = (uintptr_t)addr & ~(ps - 1); p < end; p += ps) {
        uintptr_t noted = p | (guarded ? BPT__PAGE_GUARDED : 0);
        if (b->n && b->pages[b->n - 1] == noted) continue;
        if (b->n == b->cap) {
            int cap = b->cap ? b->cap * 2 : 16;
            uintptr_t *pages = (uintptr_t *)BPT_MALLOC(sizeof *pages * (size_t)cap);
            if (!pages) return BPT_ENOMEM;
            if (b->n) memcpy(pages, b->pages, sizeof *pages * (size_t)b->n);
            BPT_FREE(b->pages);
            b->pages = pages;
            b->cap = cap;
        }
        b->pages[b->n++] = noted;
    }
    return 0;
}

static int bpt__uintptr_cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The end of the run of consecutive pages, alike guarded, that starts at
   pages[i] (sorted): one mprotect per run, not per page. A call per page made a 50,000-function
   change take 15 ms and stall other threads 7.7 ms (the kernel's mm lock and
   TLB shootdowns); per run: 0.37 ms and 78 us (bench/pattern_scale). */
static int bpt__batch_run_end(const bpt__code_batch *b, int i, int n) {
    int j = i + 1;
    while (j < n && b->pages[j] == b->pages[j - 1] + bpt__page_size()) j++;   /* the same low bit too */
    return j;
}

/* mprotect the run pages[i..j) to prot, and PROT_BTI where guarded. */
static int bpt__batch_run_protect(const bpt__code_batch *b, int i, int j, int prot) {
    return mprotect((void *)(b->pages[i] & ~BPT__PAGE_GUARDED), bpt__page_size() * (size_t)(j - i),
                    bpt__page_prot(b->pages[i], prot));
}

static void bpt__batch_protect(const bpt__code_batch *b, int n, int prot) {
    int i, j;
    for (i = 0; i < n; i = j) {
        j = bpt__batch_run_end(b, i, n);
        bpt__batch_run_protect(b, i, j, prot);
    }
}

/* Make every noted page writable. Returns 0, or BPT_EPERM with every page
   back to read+execute and the reason in bpt_last_error. */
static int bpt__batch_open(bpt__code_batch *b, const char *who) {
    int i, j, k = 0;
    qsort(b->pages, (size_t)b->n, sizeof *b->pages, bpt__uintptr_cmp);
    for (i = 0; i < b->n; i++)
        if (!k || b->pages[k - 1] != b->pages[i]) b->pages[k++] = b->pages[i];
    b->n = k;
    for (i = 0; i < b->n; i = j) {
        j = bpt__batch_run_end(b, i, b->n);
        if (bpt__batch_run_protect(b, i, j, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
            int e = errno;
            bpt__batch_protect(b, j, PROT_READ | PROT_EXEC);   /* this run too: it may be half changed */
            return bpt__fail(BPT_EPERM, "%s: mprotect(%p, RWX) refused: %s (a read-only file mapping, "
                             "SELinux execmod, or a hardened kernel); nothing was changed",
                             who, (void *)(b->pages[i] & ~BPT__PAGE_GUARDED), strerror(e));
        }
    }
    return 0;
}

/* Back to read+execute: no page stays writable and executable (W^X). The
   page array stays allocated for the next batch (the caller frees it). */
static void bpt__batch_reprotect(bpt__code_batch *b) {
    bpt__batch_protect(b, b->n, PROT_READ | PROT_EXEC);
    b->n = 0;
}

static void bpt__batch_close(bpt__code_batch *b) {
    bpt__batch_reprotect(b);
    BPT_FREE(b->pages);
    b->pages = NULL;
    b->cap = 0;
}

/* >>own calls: bptrace's own calls through a traced slot. The hit path
   calls libc (mmap for a thread's first record, the futex wake, the clock
   where there is no cycle counter) through its module's GOT: with those
   slots traced, a hit would hit again, without end. So a thread notes
   while it runs bptrace's own code: a native entry's full path, a traced
   return (but the return route's plain return, which makes no call:
   frames.c), a VM breakpoint, the set path (under the code modification
   permission) and bptrace's own threads (the control server's). A slot
   reached meanwhile is not traced: the call goes straight on to its
   target. Not covered: a drainer's bpt_session_drain, the formatters and
   bpt_session_write, whose calls through traced slots are traced like the
   program's. A signal handler's call through a slot while its thread is
   inside bptrace goes untraced too; its calls through entries are traced
   as before. */
static BPT__THREAD_LOCAL unsigned bpt__in_bptrace;
BPT__HOT BPT__INTREGS int bpt__own_call(const bpt_func *f) { return f->slot_prot && bpt__in_bptrace; }
BPT__PRIVATE void bpt__own_enter(void) { bpt__in_bptrace++; }
BPT__PRIVATE void bpt__own_leave(void) { bpt__in_bptrace--; }

/* CP5, CL6 and CR7: unpin, and the result. */
BPT__HOT BPT__INTREGS int bpt__short_path_unpin(bpt__thread *rec, int done) {
    if (BPT__UNLIKELY(bpt__unpin_quiet(rec)))
        return done ? BPT__PATH_DONE_WAKE : BPT__PATH_FULL;   /* the full path's unpin wakes */
    return done ? BPT__PATH_DONE : BPT__PATH_FULL;
}

/* >>count path: the hit of a native entry whose active generation only
   counts (the COUNT shortcut, breakpoint.h), or does nothing (NONE), run
   by the entry stubs before they save the vector registers: this function
   and everything it inlines use the integer registers only (>>intregs in
   port.h; tests/count_path_check.sh checks the compiled code). It makes
   no call. On x86-64 it also keeps every integer register but rax
   (>>keeps regs in port.h), and the stub saves none of the others first.
   Anything it cannot finish that way it leaves untouched to the full
   path, bpt__native_entry, which the stub then calls with every argument
   register saved:
   The stub calls it only when the function's path_hint is
   BPT__HINT_COUNT: one generation counts or does nothing (breakpoint.h).
   A function that only traces calls goes to the call path (below), one
   that traces calls and their returns alone to the call-return path, one
   that only times its calls by the wall clock to the time path, one that
   mixes kinds to the full path at once.
   A slot never comes here (its hint is 0, bp.c): bptrace's own calls
   through it are left untraced by the full path (>>own calls).
   CP1. The thread has its record (the full path makes it on a first hit).
   CP2. Pin, and read the active index once [G2], as bpt__breakpoint does.
   CP3. The generation's shortcut is COUNT or NONE, and no return-traced
       frame is open on the thread (F0's settle, frames.c, needs the full
       path: it may send exception_from).
   CP4. Add one to the thread's own counter, if its page is mapped (the
       full path maps it).
   CP5. Unpin; a waiter sleeping on the futex is woken by the stub's second
       call, a system call being no place for the integer registers alone.
   Returns BPT__PATH_DONE, BPT__PATH_DONE_WAKE, or BPT__PATH_FULL having
   changed nothing but a pin it took back.
   On x86-64 the stub runs the common case itself first (>>count route in
   site_x86_64.c) and calls this for the rest. */
BPT__ASM_CALLED BPT__INTREGS BPT__KEEPS_REGS BPT__LINE_ALIGNED int bpt__native_count_path(bpt_func *f) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__shortcut *sc;
    uint32_t kind;
    int done = 0;
    BPT_TEST_POINT("Count path: the C one");   /* t_count_path counts its entries (no call) */
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                      /* CP1 */
    bpt__pin_rec(rec);                                                    /* CP2 */
    sc = &f->shortcut[bpt__active_ix_load()];
    kind = sc->kind;
    if (BPT__LIKELY(rec->shadow_depth[BPT__STACK_NATIVE] == 0)) {         /* CP3 */
        if (BPT__LIKELY(kind == BPT__SHORTCUT_COUNT))                     /* CP4 */
            done = bpt__kind_count_try_add(rec, sc->count_dir, sc->count_off, sc->data);
        else done = kind == BPT__SHORTCUT_NONE;
    }
    return bpt__short_path_unpin(rec, done);                              /* CP5 */
}

/* >>call path: the hit of a native entry whose active generation traces
   calls for one session and asks for nothing but the call record (the
   CALL_PLAIN shortcut, breakpoint.h), or does nothing (NONE). As the count
   path: run by the entry stubs before they save the vector registers,
   with the integer registers only and no call (>>intregs in port.h;
   tests/count_path_check.sh checks it); unlike the count path it may
   clobber what a callee may, and the stub saves those registers, which it
   hands over as args. It writes the record straight into the
   thread's current chunk, where the full path builds it on the stack and
   copies it there (kind_call.c, session.c): the same record, the same
   protocol. Anything it cannot finish that way it leaves untouched to the
   full path. The stub calls it when the function's path_hint is
   BPT__HINT_CALL, with args pointing at the integer argument registers it
   saved (on aarch64 the whole bpt__regs frame) and sp, the function's
   stack pointer at entry (bpt__arch_entry_sp).
   CL1. The thread has its record (the full path makes it on a first hit).
   CL2. Pin, and read the active index once [G2], as bpt__breakpoint does.
   CL3. The generation's shortcut is CALL_PLAIN, and F0 would settle
       nothing: every frame open on the thread is a live caller's
       (bpt__native_frames_settled, frames.c; else the full path, which
       may send exception_from). NONE is done at once, when F0 would
       settle nothing too (as the count path's CP3: the full path sends a
       left frame's exception_from at any hit).
   CL4. The session is alive [S2], the thread is not inside a tracer of
       its own, and the clock is the CPU's counter (clock_gettime is a
       call): read it.
   CL5. Mark the thread's send [H1] (a signal handler's send nested on it
       leaves the lane alone); if none was open and the current chunk has
       room as it is (>>fits in session.c), write the record at its end and
       publish it with the chunk's fill [R2]; unmark. A first record, a
       full chunk, a stale anchor: the full path's send.
   CL6. Unpin, as CP5.
   Returns BPT__PATH_DONE, BPT__PATH_DONE_WAKE, or BPT__PATH_FULL having
   changed nothing but a pin it took back.
   The call-return path below is its twin for CALL_RETURN; each is a
   function of its own so that neither pays for the other's registers
   (one function for both saved 5 registers a call event, 164.9 -> 184.8
   instructions; callgrind, bench_overhead call). */

/* CL4 and CL5, for both paths: 1 when the call record is written.
   flags: the record's BPT__REC_CALL_NO_RETURN (the call path), or 0 (the
   call-return path: its return_from ends the call). */
BPT__HOT BPT__INTREGS int bpt__call_path_record(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                const uint64_t *args, uint16_t flags) {
    uint64_t ticks;
    bpt__lane *lane;
    int done = 0;
    if (BPT__LIKELY(!rec->in_tracer && !bpt__load_relaxed_u32(&s->dead) &&   /* CL4 [S2] */
                    bpt__now_ticks_counter(&ticks)) &&
        BPT__LIKELY(bpt__send_begin(rec))) {                                /* CL5 [H1] */
        if (BPT__LIKELY((lane = bpt__lane_room(s, rec, ticks, BPT__CALL_PLAIN_ROOM)) != NULL)) {
            bpt__lane_publish(lane, bpt__call_rec_plain(lane->wp, f, args, ticks, flags));   /* [R2] */
            done = 1;
        }
        bpt__send_end(rec);
    }
    return done;
}

BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_path(bpt_func *f, uint64_t *args, uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__shortcut *sc;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* CL1 */
    bpt__pin_rec(rec);                                                    /* CL2 */
    sc = &f->shortcut[bpt__active_ix_load()];
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_CALL_PLAIN) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)))   /* CL3 */
        done = bpt__call_path_record(rec, f, ((const bpt__GenericBp *)sc->data)->session, args,
                                     BPT__REC_CALL_NO_RETURN);                                     /* CL4, CL5 */
    else
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    return bpt__short_path_unpin(rec, done);                               /* CL6 */
}

/* >>call-return path: the call path's twin for a generation that traces
   calls and their returns for one session, asking for the call record and
   return_from alone (CALL_RETURN, breakpoint.h): the record, then the
   return frame, both as the full path makes them. The stub calls it when
   the function's path_hint is BPT__HINT_CALL_RETURN, as it calls the call
   path. The return takes the plain return (frames.c).
   CR1, CR2. As CL1, CL2.
   CR3. The shortcut is CALL_RETURN, F0 would settle nothing (as CL3), and
       a frame can be pushed here (bpt__native_frame_plain_ok: the shadow
       stack is mapped and has room, not a tail call, not a signed return
       address). NONE: as CL3.
   CR4, CR5. As CL4, CL5: the call record.
   CR6. Push the return frame and swap the return address for the
       trampoline (F1, bpt__native_frame_push_plain), after the record, as
       the full path does. If a signal handler filled the shadow stack
       since CR3, the frame is skipped and counted, as the full path's.
   CR7. Unpin, as CP5.
   Returns as the call path. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_return_path(bpt_func *f, uint64_t *args,
                                                                                 uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    uintptr_t *slot = BPT__ARCH_SHORT_RET_SLOT(args, sp);
    const bpt__shortcut *sc;
    unsigned ix;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* CR1 */
    bpt__pin_rec(rec);                                                    /* CR2 */
    ix = bpt__active_ix_load();
    sc = &f->shortcut[ix];
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_CALL_RETURN) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)) &&
        BPT__LIKELY(bpt__native_frame_plain_ok(rec, f, slot))) {                                  /* CR3 */
        const bpt__GenericBp *g = (const bpt__GenericBp *)sc->data;
        if ((done = bpt__call_path_record(rec, f, g->session, args, 0))) {                         /* CR4, CR5 */
            const bpt__ms *ms = (const bpt__ms *)g->data[ix].data[BPT__KIX_CALL];   /* the same generation [G2] */
            bpt__native_frame_push_plain(rec, f, g->session, ms->actions, ms->rettype, sp, slot, NULL, 0);   /* CR6 */
        }
    } else {
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    }
    return bpt__short_path_unpin(rec, done);                               /* CR7 */
}

/* >>time path: the hit of a native entry whose active generation times
   calls (call_time) for one session by the wall clock and does nothing
   else (the TIME shortcut, breakpoint.h): count the call in the thread's
   table and push the frame whose return charges the call's own time, as
   the full path's call_time hit (kind_timem.c) and F1 do, with the
   integer registers alone and no call. The stub calls it when the
   function's path_hint is BPT__HINT_TIME, as it calls the call path. The
   return takes the timed return (frames.c).
   TM1, TM2. As CL1, CL2.
   TM3. The shortcut is TIME; F0 would settle nothing and a frame can be
       pushed (as CR3); the frame the new one pauses is the one below it,
       or none (bpt__timem_caller_at: a caller of another session or
       process needs the full path's walk); the clock is the CPU's
       counter: read it (a frame keeps its start in ticks, frames.c).
       NONE: as CL3.
   TM4. Count the call in the thread's table, if the table and the
       process's cell are there (bpt__timem_charge_try, timem.c; the full
       path makes them) and no charge of that table runs below [H1].
   TM5. Push the frame, pausing the caller at the same instant, and swap
       the return address for the trampoline (F1,
       bpt__native_frame_push_plain; skipped and counted as CR6's).
   TM6. Unpin, as CP5.
   Returns as the call path. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_time_path(bpt_func *f, uint64_t *args, uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    uintptr_t *slot = BPT__ARCH_SHORT_RET_SLOT(args, sp);
    const bpt__shortcut *sc;
    const bpt__GenericBp *g;
    bpt__frame_session *caller;
    uint64_t now;
    unsigned ix;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* TM1 */
    bpt__pin_rec(rec);                                                    /* TM2 */
    ix = bpt__active_ix_load();
    sc = &f->shortcut[ix];
    g = (const bpt__GenericBp *)sc->data;
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_TIME) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)) &&   /* TM3 */
        BPT__LIKELY(bpt__native_frame_plain_ok(rec, f, slot)) &&
        BPT__LIKELY(bpt__timem_caller_at(rec, rec->shadow_depth[BPT__STACK_NATIVE], g->session->id, rec->process,
                                         &caller)) &&
        BPT__LIKELY(bpt__now_ticks_counter(&now))) {
        if ((done = bpt__timem_charge_try((bpt__BpTimem *)g->data[ix].data[BPT__KIX_TIME], rec, rec->process, 1, 0, 0)))   /* TM4 */
            bpt__native_frame_push_plain(rec, f, g->session, BPT_TIME, BPT_ARG_I64, sp, slot, caller, now);   /* TM5 */
    } else {
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    }
    return bpt__short_path_unpin(rec, done);                               /* TM6 */
}

/* The full path, with every argument register saved in regs: the general
   hit (hit.c), then the return frame; or only the wake a short path left
   to it (counted: BPT__PATH_DONE_WAKE, from any short path). */
BPT__ASM_CALLED void bpt__native_entry(bpt_func *f, bpt__regs *regs, int counted) {
    bpt__hit h;
    if (bpt__own_call(f)) return;   /* >>own calls */
    BPT_TEST_POINT("Full path: entered");   /* t_count_path counts its entries */
    bpt__own_enter();
    if (counted == BPT__PATH_DONE_WAKE) {
        bpt__progress_wake();
    } else {
        h.f = f;
        h.frame = regs;
        h.no_frame = 0;
        if (bpt__breakpoint(&h)) {
            if (h.nwant) bpt__native_frame_push(&h);
            bpt__unpin(h.rec);
        }
    }
    bpt__own_leave();
}
#else
BPT__PRIVATE void bpt__own_enter(void) {}   /* no slots without native sites */
BPT__PRIVATE void bpt__own_leave(void) {}
#endif /* BPT_NATIVE */

/* The page arrays of the protocol's writes, allocated at step 2 with room
   for every native site of the change (a site's word never crosses a
   page: it stays within a cache line, or is an aligned pointer), so that
   steps 5 and 9 allocate nothing: running out of memory must happen before
   anything changes. code and slots count fs[0..n)'s native code sites
   and slots (step 2 counts them in its pass). Slots' protections are read
   again here (slots.c; switch_off: the change switches nothing on, and
   forgets a slot whose page is gone). Returns 0, BPT_ENOMEM, or a slot's
   refusal (BPT_EINVAL: no longer mapped; BPT_ENOTSUP: no
   /proc/self/maps), with nothing changed. */
BPT__PRIVATE int bpt__sites_batch_prepare(bpt__sites_batch *sb, bpt_func **fs, int n, int code, int slots,
                                          int switch_off) {
    memset(sb, 0, sizeof *sb);
#if defined(BPT_NATIVE)
    if (slots) {
        int rc = bpt__slots_prot_refresh(fs, n, switch_off);   /* their pages as they are now (slots.c) */
        if (rc < 0) return rc;
    }
    if (code && !(sb->code.pages = (uintptr_t *)BPT_MALLOC(sizeof *sb->code.pages * (size_t)code)))
        return bpt__fail(BPT_ENOMEM, "no memory to batch %d code writes; nothing changed", code);
    sb->code.cap = code;
    if (slots && (!(sb->data.pages = (uintptr_t *)BPT_MALLOC(sizeof *sb->data.pages * (size_t)slots)) ||
                  !(sb->data.prot = (unsigned *)BPT_MALLOC(sizeof *sb->data.prot * (size_t)slots)))) {
        bpt__sites_batch_free(sb);
        return bpt__fail(BPT_ENOMEM, "no memory to batch %d slot writes; nothing changed", slots);
    }
    sb->data.cap = slots;
#else
    (void)fs; (void)n; (void)code; (void)slots; (void)switch_off;
#endif
    return 0;
}

BPT__PRIVATE void bpt__sites_batch_free(bpt__sites_batch *sb) {
    BPT_FREE(sb->code.pages);
    BPT_FREE(sb->data.pages);
    BPT_FREE(sb->data.prot);
    memset(sb, 0, sizeof *sb);
}

/* The word a site holds now: an aligned load of word_size bytes (only the
   set path, under the permission, ever writes it). */
static uint64_t bpt__site_read(const bpt_func *f) {
    if (f->word_size == 8) return bpt__load_relaxed_u64((bpt__atomic_u64 *)f->site);
    if (f->word_size == 4) return *(const volatile uint32_t *)f->site;
    return *(const volatile uint16_t *)f->site;
}

#if defined(BPT_NATIVE)
/* Make the pages of the read-only slots among fs[0..n) that this batch
   writes writable (read+write: data is never made executable), each once.
   Returns 0, or BPT_EPERM with every page given back its protection. */
static int bpt__slot_pages_open(bpt__slot_pages *d, bpt_func **fs, int n, int install) {
    uintptr_t ps = bpt__page_size();
    int i, k;
    for (i = 0; i < n; i++) {
        bpt_func *f = fs[i];
        uintptr_t page = (uintptr_t)f->site & ~(ps - 1);
        if (f->kind != BPT__SITE_NATIVE || !f->slot_prot || (f->page_prot & PROT_WRITE) || f->installed == install ||
            f->page_prot == BPT__SLOT_UNMAPPED)
            continue;   /* code, a writable slot, nothing to write, or nowhere to write it */
        for (k = 0; k < d->n && d->pages[k] != page; k++) {}
        if (k < d->n) continue;   /* opened already */
        if (mprotect((void *)page, ps, (int)f->page_prot | PROT_WRITE) != 0) {
            int e = errno;
            for (k = 0; k < d->n; k++) mprotect((void *)d->pages[k], ps, (int)d->prot[k]);
            d->n = 0;
            return bpt__fail(BPT_EPERM, "%s:%s: mprotect(%p, +write) of its slot's page refused: %s; "
                             "nothing was changed", f->module, f->name, (void *)page, strerror(e));
        }
        d->pages[d->n] = page;    /* fits: one page a slot at most (bpt__sites_batch_prepare) */
        d->prot[d->n++] = f->page_prot;
    }
    return 0;
}

/* A slot's one store, a compare-and-swap from the word bptrace expects
   there: a store of the program's between the check and the write is never
   overwritten (*seen: what the slot held, when it fails). An aligned 8-byte
   pointer, single-copy atomic on both architectures, so a call through the
   slot jumps to the old target or the new, never to a torn one. [SL1]
   Release (bpt__cas_u64 is acq_rel): the record and the
   trampoline it points at were complete long before (bpt__slots_register
   published them, page made read+execute and SYNC_CORE, before any slot
   could point there: slots.c, SL0); a thread that loads the new value reaches
   them through a control dependency, as it reaches a patched entry.
   A CAS that loses to a store the program has undone by the time the
   slot is read again (a hook saved and put back) tries again: the slot
   holds what bptrace expects. (It fell through to the code sites' writer,
   a 2- or 4-byte store: a torn pointer, found by review; t_slot_swap.) */
static int bpt__slot_swap(bpt_func *f, uint64_t expect, uint64_t w, uint64_t *seen) {
    for (;;) {
        BPT_TEST_POINT("slot_swap: before the CAS");
        if (bpt__cas_u64((bpt__atomic_u64 *)f->site, expect, w)) return 1;
        BPT_TEST_POINT("slot_swap: the CAS lost");
        if ((*seen = bpt__load_relaxed_u64((bpt__atomic_u64 *)f->site)) != expect) return 0;
    }
}

static void bpt__slot_pages_close(bpt__slot_pages *d) {
    int k;
    for (k = 0; k < d->n; k++) mprotect((void *)d->pages[k], bpt__page_size(), (int)d->prot[k]);
    d->n = 0;
}
#endif

/* The word a write puts at f's site (install: the breakpoint word; else
   the original), and the word it replaces. */
static uint64_t bpt__site_word(const bpt_func *f, int install) { return install ? f->bp_word : f->orig_word; }
static uint64_t bpt__site_replaced(const bpt_func *f, int install) { return bpt__site_word(f, !install); }

/* Does site f, which is to be written, hold the word it replaces (W1 and
   W1s below)? `now` is what it holds. Else says why in bpt_last_error and
   returns 0, having switched a slot off where nothing is lost by it. */
static int bpt__site_expected(bpt_func *f, int install, uint64_t now) {
    uint64_t w = bpt__site_word(f, install), expect = bpt__site_replaced(f, install);
    int forget;
    if (now == expect) return 1;
    if (f->slot_prot && !install && now == w) {
        /* A slot switched back behind bptrace's back (slots.c, SL3): off
           already, and the calls since went untraced. Said. */
        bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its slot %p already held its target again: the dynamic linker "
                  "binding it lazily, or the program, wrote it while traced, and the calls through it since "
                  "were not traced", f->module, f->name, f->arity, f->site);
        f->installed = 0;
        return 0;
    }
    /* A slot switched off that no longer leads to its trampoline (the
       program stored another function there, or its module was unloaded
       and another mapped at the address) is off: nothing is lost if a call
       still reaches the trampoline, which stays, as its record does
       (slots.c, SL2), and runs it untraced. Else it could never be switched
       off, nor unregistered (found by review; t_slot_swap). A code site is
       left installed: its word may still be in place beside the foreign
       one. */
    forget = f->slot_prot && !install;
    bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its site %p holds 0x%llx where bptrace expects 0x%llx: something "
              "else changed it (a debugger's breakpoint, another patcher%s); left alone%s", f->module, f->name,
              f->arity, f->site, (unsigned long long)now, (unsigned long long)expect,
              f->slot_prot ? ", the program itself, or the dynamic linker binding it lazily" : "",
              forget ? ", and its breakpoint is off" : "");
    if (forget) f->installed = 0;
    return 0;
}

/* Write the breakpoint word (install) or the original (uninstall) into
   every site of fs[0..n) that needs it: one batch (sb, prepared for these
   sites), each code page and each read-only slot page opened once. Before
   each store the writer checks that the site holds the word it replaces,
   as ftrace_modify_code does: a site that holds something else was
   changed behind bptrace's back (a debugger's breakpoint, another patcher,
   the dynamic linker binding a slot lazily: see bpt_register_imports) and
   is left alone. *written counts the sites written, and fs[0..*written)
   are they (fs is the caller's scratch, reordered); the caller waits
   after writes, with SYNC_CORE if *wrote_code: a slot is data, and needs
   no SYNC_CORE. Returns 0; BPT_EPERM (mprotect refused) with nothing
   written; or BPT_ENOTPATCHABLE when some site held an unexpected word
   (the others are written).
   In passes, each over the records it needs (>>working set in bp.c):
   W1. One pass over fs: keep the sites to write in fs[0..m), checking
       each code and VM site as it goes (a check only reads, and code
       pages are readable: no page need be open for it) and noting its
       code page; slots are kept unchecked.
   Then the code pages and the slots' pages are made writable.
   W1s. Only where slots were kept: swap each (its check and its write are
       one compare-and-swap), compacting fs[0..k).
   W2. Store the code and VM words (on aarch64 each with its cache
       maintenance).
   W3. Mark the records installed.
   Before, a pass noted the pages and another opened the slots' pages
   before the checks: three reads of 10,000 records' first lines where one
   does (step 5 or 9 of a change over 10,000 counted functions: 0.19 and
   0.19 ms instead of 0.21 and 0.21, bench/pattern_scale.c steps, no
   worker; step 5 0.29 instead of 0.32 with one). Stores are grouped apart
   from loads: while a thread runs the functions being switched off, it
   reads their records' first line at every call, and with one loop each
   site's stores (its word, its record's line) stood between the loads of
   the next site and record, which waited on them; grouped, the stores
   overlap and so do the loads (switching them off took step 9 0.63 ms
   with one loop and 0.45 with the first passes, one worker, 1613a23). */
BPT__PRIVATE int bpt__sites_write(bpt_func **fs, int n, int install, int *wrote_code, bpt__sites_batch *sb, int *written) {
    int i, m = 0, k, slots = 0, rc = 0;
    *written = 0;
    *wrote_code = 0;
    /* W1. */
    for (i = 0; i < n; i++) {
        bpt_func *f = fs[i];
        if (f->installed == install) continue;
#if defined(BPT_NATIVE)
        if (f->slot_prot) {
            fs[m++] = f;   /* checked and swapped at W1s, once its page is open */
            slots++;
            continue;
        }
#endif
        if (!bpt__site_expected(f, install, bpt__site_read(f))) {
            rc = BPT_ENOTPATCHABLE;
            continue;
        }
#if defined(BPT_NATIVE)
        if (f->kind == BPT__SITE_NATIVE)   /* fits: see bpt__sites_batch_prepare */
            bpt__batch_add(&sb->code, f->site, f->word_size, f->code_guarded);
#endif
        fs[m++] = f;
    }
#if defined(BPT_NATIVE)
    if (sb->code.n && bpt__batch_open(&sb->code, install ? "install breakpoints" : "uninstall breakpoints") < 0) {
        sb->code.n = 0;
        return BPT_EPERM;
    }
    if (slots && bpt__slot_pages_open(&sb->data, fs, m, install) < 0) {
        if (sb->code.n) bpt__batch_reprotect(&sb->code);
        return BPT_EPERM;
    }
    /* W1s. */
    for (i = k = 0; i < m && slots; i++) {
        bpt_func *f = fs[i];
        uint64_t now;
        if (f->slot_prot) {
            if (f->page_prot == BPT__SLOT_UNMAPPED) {
                /* Its page is gone (a switch-off only: bpt__slots_prot_refresh):
                   nothing to read or write, and nobody to call through it. Off. */
                rc = bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its slot %p is no longer mapped (its module "
                               "unloaded without bpt_unregister_module?): nothing written, its breakpoint is off",
                               f->module, f->name, f->arity, f->site);
                if (!install) f->installed = 0;
                continue;
            }
            now = bpt__site_read(f);
            if (now == bpt__site_replaced(f, install))   /* written, or now is another word */
                (void)bpt__slot_swap(f, bpt__site_replaced(f, install), bpt__site_word(f, install), &now);
            if (!bpt__site_expected(f, install, now)) {
                rc = BPT_ENOTPATCHABLE;
                continue;
            }
        }
        fs[k++] = f;   /* a slot gets here only swapped: bpt__slot_swap wrote it */
    }
    if (!slots) k = m;   /* nothing to swap: fs[0..m) stands as W1 left it */
#else
    (void)sb;
    (void)slots;
    k = m;
#endif
    /* W2. The words, one store after another, each line asked for
       BPT__SET_AHEAD sites before (>>prefetch in port.h). */
    for (i = 0; i < k; i++) {
        bpt_func *f = fs[i];
        if (i + BPT__SET_AHEAD < k) BPT__PREFETCH_W(fs[i + BPT__SET_AHEAD]->site);
        if (f->kind == BPT__SITE_VM) bpt__site_vm_write(f, bpt__site_word(f, install));
#if defined(BPT_NATIVE)
        else if (!f->slot_prot) {
            bpt__arch_write_site((uint8_t *)f->site, bpt__site_word(f, install));
            *wrote_code = 1;
        }
#endif
    }
    /* W3. Then the records, the same way. */
    for (i = 0; i < k; i++) {
        if (i + BPT__SET_AHEAD < k) BPT__PREFETCH_W(fs[i + BPT__SET_AHEAD]);
        fs[i]->installed = install;
    }
    *written = k;
#if defined(BPT_NATIVE)
    if (sb->code.n) bpt__batch_reprotect(&sb->code);
    bpt__slot_pages_close(&sb->data);
#endif
    return rc;
}

#if defined(BPT_NATIVE)
/* Does the site hold another word than the layout's orig_word, the NOP it
   is to hold once registered? (x86-64 gcc: 90 90, to become 66 90.) */
static int bpt__site_renop_needed(const bpt__entry_layout *l) {
    uint64_t now = 0;
    memcpy(&now, l->site, l->word_size);   /* little-endian, as orig_word */
    return now != l->orig_word;
}

/* Fill the pre-entry padding of fs[0..n) (layouts ls) in one batch of code
   writes. Nothing executes the padding before a site is installed, so plain
   stores do; the icache is synced for aarch64 on this core, and every
   other core serializes at the first install's step 4 (padding_fresh,
   bp.c), before any word leads there. Where the compiler's entry
   NOP is not the layout's orig_word (gcc's two one-byte NOPs on x86-64), the
   site gets orig_word too, by the one aligned store that installs use: a
   thread may be running the function, and every word it can fetch, whole or
   mixed from old and new bytes, is a NOP (site_x86_64.c, >>renop). Returns 0
   or BPT_EPERM / BPT_ENOMEM / BPT_ENOTPATCHABLE (a record the padding cannot
   hold) with nothing written. */
BPT__PRIVATE int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who) {
    bpt__code_batch batch = { NULL, 0, 0 };
    int i, rc;
    for (i = 0; i < n; i++)   /* the record pointer, read by the stub */
        if ((rc = bpt__arch_put_record(ls[i].pre, fs[i])) < 0) return rc;
    for (i = 0; i < n; i++) {   /* the padding and the site after it */
        uint8_t *pad = (uint8_t *)fs[i]->fn - BPT__PAD_BYTES;
        if (bpt__batch_add(&batch, pad, (size_t)(ls[i].site + ls[i].word_size - pad), fs[i]->code_guarded) < 0) {
            BPT_FREE(batch.pages);
            return bpt__fail(BPT_ENOMEM, "%s: no memory to batch %d code writes", who, n);
        }
    }
    if ((rc = bpt__batch_open(&batch, who)) < 0) {
        BPT_FREE(batch.pages);
        return rc;
    }
    for (i = 0; i < n; i++) {
        uint8_t *pad = (uint8_t *)fs[i]->fn - BPT__PAD_BYTES;
        memcpy(pad, ls[i].pre, BPT__PAD_BYTES);
        bpt__arch_sync_icache(pad, BPT__PAD_BYTES);
        if (bpt__site_renop_needed(&ls[i])) {
            bpt__arch_write_site(ls[i].site, ls[i].orig_word);
            bpt__arch_sync_icache(ls[i].site, ls[i].word_size);
        }
        fs[i]->padding_fresh = 1;
    }
    bpt__batch_close(&batch);
    return 0;
}
#endif
/*** End of site_native.c ***/

/*** Begin file module.c ***/
/* module.c: finding a module's patchable entries and naming them from ELF
   symbols. Runs on the set path, under the code modification
   permission; nothing here is reached from a breakpoint.

   The facts this part relies on, and where they come from:
   - gcc's manual (-fpatchable-function-entry=N,M and the
     patchable_function_entry attribute): "the starting addresses of these
     areas, which correspond to their respective function entries minus M,
     are additionally collected in the __patchable_function_entries section".
     M counts NOPs, not bytes: 24 bytes on x86-64 (26,24), 32 on aarch64
     (9,8, four bytes a NOP). The caller passes the byte count. Checked with
     gcc 12 and clang 14 on x86-64 (also with -fcf-protection: endbr64 comes
     after the symbol, so the padding still ends at it) and aarch64 (also with
     -mbranch-protection: bti c likewise).
   - The section is SHF_ALLOC | SHF_WRITE: in a PIE or a shared object every
     entry is an R_X86_64_RELATIVE / R_AARCH64_RELATIVE relocation, which
     ld.so applies at load time. With RELA the addend lives in the relocation
     and the file's bytes are the linker's choice: GNU ld and gold write the
     link-time address, lld writes 0 (unless --apply-dynamic-relocs). So the
     entries are read from memory, already relocated.
   - dl_iterate_phdr(3): dlpi_addr is the load bias (run-time address =
     bias + link-time address) and the first object visited is the main
     program, whose dlpi_name is "".
   - Section headers, .symtab and string tables are not part of any PT_LOAD
     segment, so they are read from the file with pread (System V gABI,
     chapter 4: Sections, String Table, Symbol Table). Everything the file
     says is bounds-checked: a truncated or garbage file gives BPT_EINVAL. */

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#if defined(__TINYC__)
/* tcc 0.9.27 cannot parse glibc's <link.h> (its audit structures have
   __int128_t members). Declare the prefix of dl_phdr_info that
   dl_iterate_phdr(3) documents: glibc passes its own, longer struct and we
   read only these fields. tcc is x86-64 only (port.h), hence Elf64. */
struct dl_phdr_info {
    Elf64_Addr dlpi_addr;
    const char *dlpi_name;
    const Elf64_Phdr *dlpi_phdr;
    Elf64_Half dlpi_phnum;
};
extern int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *info, size_t size, void *data), void *data);
#  define ElfW(type) Elf64_##type
#else
#  include <link.h>
#endif

/* >>module */

#define BPT__PFE_SECTION "__patchable_function_entries"
/* The bytes at a function's entry that bpt__arch_entry_layout reads: x86-64
   fn[0..5] (endbr64, then the two-byte site), aarch64 fn[0..7] (bti c or
   paciasp, then the four-byte site). They must lie in the module's code too. */
#if defined(__aarch64__)
#  define BPT__ENTRY_BYTES 8
#else
#  define BPT__ENTRY_BYTES 6
#endif

/* One STT_FUNC symbol, kept small: a big program has 10^5 of them. */
typedef struct bpt__elf_func {
    uint64_t addr;          /* st_value: the link-time address */
    uint64_t size;          /* st_size: bytes of code (0: unknown) */
    uint32_t name;          /* st_name: offset in the string table */
    uint32_t index;         /* position in the symbol table: the last tie-break */
    uint32_t rank;          /* 0 global, 1 weak, 2 local: which alias names the address */
    uint8_t other;          /* st_other: aarch64's STO_AARCH64_VARIANT_PCS (wide argument registers) */
} bpt__elf_func;

/* What the scan needs from a module's file: its headers and its functions. */
typedef struct bpt__elf_file {
    const char *path;
    int fd;
    uint64_t size;                  /* bytes in the file: the bound of every offset */
    Elf64_Ehdr eh;
    Elf64_Shdr *sh;                 /* section headers; NULL when the file has none */
    size_t shnum;
    Elf64_Phdr *ph;                 /* program headers, to compare with the loaded image */
    size_t phnum;
    char *shstrtab;                 /* section names, NUL-terminated by us */
    size_t shstrtab_size;
    bpt__elf_func *funcs;           /* by address, then best name first */
    size_t nfuncs;
    char *strtab;                   /* the symbol names, NUL-terminated by us */
    size_t strtab_size;
    const char *symtab_name;        /* ".symtab", ".dynsym", or NULL (no names) */
} bpt__elf_file;

/* [off, off + size) lies within [0, limit), computed without overflow:
   every offset and size in a file is untrusted. */
static int bpt__elf_in_bounds(uint64_t off, uint64_t size, uint64_t limit) {
    return size <= limit && off <= limit - size;
}

static int bpt__elf_truncated(const bpt__elf_file *f, uint64_t off, uint64_t size, const char *what) {
    return bpt__fail(BPT_EINVAL, "%s: truncated ELF: %s at offset %llu size %llu is past the end (%llu bytes)",
                     f->path, what, (unsigned long long)off, (unsigned long long)size,
                     (unsigned long long)f->size);
}

/* Read exactly size bytes at off, or fail: the file may also shrink while
   we read it, so a short read is an error and not a zero-fill. */
static int bpt__elf_pread(const bpt__elf_file *f, uint64_t off, uint64_t size, void *buf, const char *what) {
    char *p = (char *)buf;
    if (!bpt__elf_in_bounds(off, size, f->size)) return bpt__elf_truncated(f, off, size, what);
    while (size > 0) {
        ssize_t n = pread(f->fd, p, size > (1u << 30) ? (size_t)1 << 30 : (size_t)size, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return bpt__fail(BPT_EINVAL, "%s: cannot read the %s: %s", f->path, what,
                             n < 0 ? strerror(errno) : "the file shrank");
        p += n; off += (uint64_t)n; size -= (uint64_t)n;
    }
    return 0;
}

/* Allocate and read size bytes at off, plus one NUL byte after them, so that
   a string table the file forgot to terminate cannot run us off its end. */
static int bpt__elf_read_alloc(const bpt__elf_file *f, uint64_t off, uint64_t size, const char *what, char **out) {
    char *buf;
    int rc;
    *out = NULL;
    if (!bpt__elf_in_bounds(off, size, f->size))   /* before allocating what the file claims */
        return bpt__elf_truncated(f, off, size, what);
    if (!(buf = (char *)BPT_MALLOC((size_t)size + 1)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for the %s (%llu bytes)", f->path, what,
                         (unsigned long long)size);
    if ((rc = bpt__elf_pread(f, off, size, buf, what)) < 0) { BPT_FREE(buf); return rc; }
    buf[size] = '\0';
    *out = buf;
    return 0;
}

/* The bytes of a section. SHT_NOBITS (.bss) has none in the file. */
static int bpt__elf_section_alloc(const bpt__elf_file *f, const Elf64_Shdr *s, const char *what, char **out) {
    if (s->sh_type == SHT_NOBITS)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: the %s is SHT_NOBITS", f->path, what);
    return bpt__elf_read_alloc(f, s->sh_offset, s->sh_size, what, out);
}

static const char *bpt__elf_section_name(const bpt__elf_file *f, const Elf64_Shdr *s) {
    return f->shstrtab && s->sh_name < f->shstrtab_size ? f->shstrtab + s->sh_name : "";
}

static int bpt__elf_host_lsb(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* e_ident first: the class decides how to read the rest, and a 32-bit
   file is a clear BPT_ENOTSUP rather than a misread 64-bit header. */
static int bpt__elf_read_header(bpt__elf_file *f) {
    unsigned char id[EI_NIDENT];
    int rc;
    if (f->size < EI_NIDENT) return bpt__fail(BPT_EINVAL, "%s: not an ELF file (%llu bytes)", f->path,
                                              (unsigned long long)f->size);
    if ((rc = bpt__elf_pread(f, 0, EI_NIDENT, id, "ELF identification")) < 0) return rc;
    if (memcmp(id, ELFMAG, SELFMAG) != 0) return bpt__fail(BPT_EINVAL, "%s: not an ELF file", f->path);
    if (id[EI_CLASS] == ELFCLASS32)
        return bpt__fail(BPT_ENOTSUP, "%s: 32-bit ELF (bptrace reads ELF64 only)", f->path);
    if (id[EI_CLASS] != ELFCLASS64)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: unknown class %u", f->path, (unsigned)id[EI_CLASS]);
    if (id[EI_DATA] != (bpt__elf_host_lsb() ? ELFDATA2LSB : ELFDATA2MSB))
        return bpt__fail(BPT_ENOTSUP, "%s: ELF byte order differs from this machine's", f->path);
    return bpt__elf_pread(f, 0, sizeof f->eh, &f->eh, "ELF header");
}

/* Section headers and their names. Extended numbering (gABI, "Sections"):
   with 65280 sections or more, e_shnum is 0 and the count is in section
   0's sh_size, and e_shstrndx is SHN_XINDEX with the index in its sh_link. */
static int bpt__elf_read_sections(bpt__elf_file *f) {
    Elf64_Shdr first;
    uint64_t shnum = f->eh.e_shnum, shstrndx = f->eh.e_shstrndx;
    int rc;
    if (f->eh.e_shoff == 0) return 0;           /* no section headers: nothing to find */
    if (f->eh.e_shentsize != sizeof(Elf64_Shdr))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_shentsize is %u, not %u", f->path,
                         (unsigned)f->eh.e_shentsize, (unsigned)sizeof(Elf64_Shdr));
    if ((rc = bpt__elf_pread(f, f->eh.e_shoff, sizeof first, &first, "section header 0")) < 0) return rc;
    if (shnum == 0) shnum = first.sh_size;
    if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
    if (shnum > f->size / sizeof(Elf64_Shdr))   /* also keeps the product below from overflowing */
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %llu section headers do not fit in the file",
                         f->path, (unsigned long long)shnum);
    if ((rc = bpt__elf_read_alloc(f, f->eh.e_shoff, shnum * sizeof(Elf64_Shdr), "section headers",
                                  (char **)&f->sh)) < 0)
        return rc;
    f->shnum = (size_t)shnum;
    if (shstrndx == SHN_UNDEF) return 0;        /* sections without names: nothing to find */
    if (shstrndx >= shnum)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: section name table index %llu >= %llu sections",
                         f->path, (unsigned long long)shstrndx, (unsigned long long)shnum);
    if ((rc = bpt__elf_section_alloc(f, &f->sh[shstrndx], "section name table", &f->shstrtab)) < 0) return rc;
    f->shstrtab_size = (size_t)f->sh[shstrndx].sh_size;
    return 0;
}

/* Program headers, to check that the file is the image that was loaded.
   PN_XNUM: the count is in section 0's sh_info (gABI, "Program Header"). */
static int bpt__elf_read_segments(bpt__elf_file *f) {
    uint64_t phnum = f->eh.e_phnum;
    if (phnum == PN_XNUM) {
        if (!f->shnum)
            return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_phnum is PN_XNUM without section 0", f->path);
        phnum = f->sh[0].sh_info;
    }
    if (phnum == 0) return 0;
    if (f->eh.e_phentsize != sizeof(Elf64_Phdr))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_phentsize is %u, not %u", f->path,
                         (unsigned)f->eh.e_phentsize, (unsigned)sizeof(Elf64_Phdr));
    f->phnum = (size_t)phnum;                   /* at most 2^32: the product cannot overflow */
    return bpt__elf_read_alloc(f, f->eh.e_phoff, phnum * sizeof(Elf64_Phdr), "program headers", (char **)&f->ph);
}

/* Which of several symbols at one address names it: the global one, so
   that gcc's "f.localalias" (a local alias it emits for global functions in
   shared objects) or a weak alias does not hide "f". */
static uint32_t bpt__elf_symbol_rank(unsigned char info) {
    switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK:   return 1;
    default:         return 2;
    }
}

static int bpt__elf_func_cmp(const void *pa, const void *pb) {
    const bpt__elf_func *a = (const bpt__elf_func *)pa, *b = (const bpt__elf_func *)pb;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Add the function symbols of n Elf64_Sym to f->funcs. Undefined symbols
   are imports (their st_value is 0 or a PLT slot, not the function). */
static void bpt__elf_add_functions(bpt__elf_file *f, const Elf64_Sym *sym, size_t n, size_t first_index) {
    size_t i;
    for (i = 0; i < n; i++) {
        const Elf64_Sym *s = &sym[i];
        bpt__elf_func *out;
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF) continue;
        if (s->st_name == 0 || s->st_name >= f->strtab_size || !f->strtab[s->st_name]) continue;
        out = &f->funcs[f->nfuncs++];
        out->addr = s->st_value;
        out->size = s->st_size;
        out->name = s->st_name;
        out->index = (uint32_t)(first_index + i);
        out->rank = bpt__elf_symbol_rank(s->st_info);
        out->other = s->st_other;
    }
}

/* The function symbols, sorted. .symtab has static functions too; a
   stripped file keeps only .dynsym (exported functions). Neither: no names,
   and every entry gets a fn_0x... name. */
static int bpt__elf_read_functions(bpt__elf_file *f) {
    const Elf64_Shdr *symtab = NULL, *strtab;
    Elf64_Sym chunk[128];                       /* read in chunks: no second copy of the table */
    uint64_t count, done;
    size_t i;
    int rc;
    for (i = 0; i < f->shnum && !symtab; i++)
        if (f->sh[i].sh_type == SHT_SYMTAB) symtab = &f->sh[i];
    for (i = 0; i < f->shnum && !symtab; i++)
        if (f->sh[i].sh_type == SHT_DYNSYM) symtab = &f->sh[i];
    if (!symtab) return 0;
    f->symtab_name = symtab->sh_type == SHT_SYMTAB ? ".symtab" : ".dynsym";
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_size % sizeof(Elf64_Sym) != 0)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s entry size %llu, table size %llu", f->path,
                         f->symtab_name, (unsigned long long)symtab->sh_entsize,
                         (unsigned long long)symtab->sh_size);
    if (symtab->sh_link == 0 || symtab->sh_link >= f->shnum || f->sh[symtab->sh_link].sh_type != SHT_STRTAB)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s links to section %u, not a string table",
                         f->path, f->symtab_name, (unsigned)symtab->sh_link);
    count = symtab->sh_size / sizeof(Elf64_Sym);
    if (!bpt__elf_in_bounds(symtab->sh_offset, symtab->sh_size, f->size))
        return bpt__elf_truncated(f, symtab->sh_offset, symtab->sh_size, f->symtab_name);
    if (count > UINT32_MAX)   /* bpt__elf_func.index is 32 bits */
        return bpt__fail(BPT_EINVAL, "%s: %llu symbols", f->path, (unsigned long long)count);
    strtab = &f->sh[symtab->sh_link];
    if ((rc = bpt__elf_section_alloc(f, strtab, "symbol name table", &f->strtab)) < 0) return rc;
    f->strtab_size = (size_t)strtab->sh_size;
    if (count && !(f->funcs = (bpt__elf_func *)BPT_MALLOC((size_t)count * sizeof *f->funcs)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for %llu symbols", f->path, (unsigned long long)count);
    for (done = 0; done < count; ) {
        size_t n = count - done < 128 ? (size_t)(count - done) : 128;
        if ((rc = bpt__elf_pread(f, symtab->sh_offset + done * sizeof(Elf64_Sym), n * sizeof(Elf64_Sym),
                                 chunk, f->symtab_name)) < 0)
            return rc;
        bpt__elf_add_functions(f, chunk, n, (size_t)done);
        done += n;
    }
    if (f->nfuncs > 1) qsort(f->funcs, f->nfuncs, sizeof *f->funcs, bpt__elf_func_cmp);
    return 0;
}

BPT__PRIVATE void bpt__elf_close(bpt__elf_file *f) {
    if (f->fd >= 0) close(f->fd);
    BPT_FREE(f->sh);
    BPT_FREE(f->ph);
    BPT_FREE(f->shstrtab);
    BPT_FREE(f->funcs);
    BPT_FREE(f->strtab);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Open an ELF file and read its headers and function symbols. The harness
   calls this on truncated and corrupted copies: no offset, size or index in
   the file is trusted. In: path (kept, not copied). Out: *f, to release with
   bpt__elf_close (also after a failure). Returns 0; BPT_ENOENT (no such
   file); BPT_EPERM (cannot open it); BPT_EINVAL (not ELF, malformed or
   truncated); BPT_ENOTSUP (ELF32, or the other byte order); BPT_ENOMEM. */
BPT__PRIVATE int bpt__elf_open(const char *path, bpt__elf_file *f) {
    struct stat st;
    int rc;
    memset(f, 0, sizeof *f);
    f->path = path;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return bpt__fail(errno == ENOENT || errno == ENOTDIR ? BPT_ENOENT : BPT_EPERM,
                         "cannot open %s: %s (section headers and symbols are only in the file)",
                         path, strerror(errno));
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return bpt__fail(BPT_EINVAL, "%s: not a regular file", path);
    f->size = (uint64_t)st.st_size;
    if ((rc = bpt__elf_read_header(f)) < 0 || (rc = bpt__elf_read_sections(f)) < 0 ||
        (rc = bpt__elf_read_segments(f)) < 0 || (rc = bpt__elf_read_functions(f)) < 0)
        return rc;
    return 0;
}

/* The first function symbol at or above link-time address addr, or NULL.
   The first of equal addresses is the best-ranked (see bpt__elf_func_cmp). */
static const bpt__elf_func *bpt__elf_func_from(const bpt__elf_file *f, uint64_t addr) {
    size_t lo = 0, hi = f->nfuncs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->funcs[mid].addr < addr) lo = mid + 1; else hi = mid;
    }
    return lo < f->nfuncs ? &f->funcs[lo] : NULL;
}

#if !defined(STO_AARCH64_VARIANT_PCS)
#  define STO_AARCH64_VARIANT_PCS 0x80
#endif
/* Does the function symbol at addr follow a variant procedure call
   standard (aarch64: the vector PCS, or SVE arguments in z and p
   registers; STO_AARCH64_VARIANT_PCS)? Its arguments are wider than the
   entry stub saves (q0-q7): the stub's restore of a q register zeroes the
   z register's upper bits, so tracing it would corrupt them. */
static int bpt__elf_func_variant_pcs(const bpt__elf_file *f, uint64_t addr) {
#if defined(__aarch64__)
    const bpt__elf_func *e = bpt__elf_func_from(f, addr);
    for (; e && e < f->funcs + f->nfuncs && e->addr == addr; e++)   /* any alias says so */
        if (e->other & STO_AARCH64_VARIANT_PCS) return 1;
#else
    (void)f; (void)addr;
#endif
    return 0;
}

/* The name of the function symbol at addr, or NULL; *size its st_size. */
BPT__PRIVATE const char *bpt__elf_func_name(const bpt__elf_file *f, uint64_t addr, uint64_t *size) {
    const bpt__elf_func *e = bpt__elf_func_from(f, addr);
    if (!e || e->addr != addr) return NULL;
    if (size) *size = e->size;
    return f->strtab + e->name;
}

/* A loaded object, as dl_iterate_phdr reports it. The pointers stay valid
   while the object stays loaded, which the caller guarantees. */
typedef struct bpt__module_object {
    const char *want;               /* NULL: the main program; else a basename or path */
    char *exe_buf;                  /* PATH_MAX bytes for the main program's path */
    const char *exe_path;           /* the main program's path (for matching by name), or NULL */
    const char *exe_open;           /* what to open for its file: "/proc/self/exe" or exe_path */
    unsigned seen;                  /* objects visited: the first is the main program */
    int found;
    int is_main;
    uintptr_t bias;
    const ElfW(Phdr) *phdr;
    size_t phnum;
    const char *path;               /* dlpi_name, or exe_path for the main program */
} bpt__module_object;

static const char *bpt__module_basename(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A path as /proc names it, without the " (deleted)" the kernel appends once
   the file is deleted (say, rebuilt by make): no part of the name a user
   writes in a pattern. */
static char *bpt__module_undeleted(char *path) {
    static const char deleted[] = " (deleted)";
    size_t n = strlen(path), dl = sizeof deleted - 1;
    if (n > dl && strcmp(path + n - dl, deleted) == 0) path[n - dl] = '\0';
    return path;
}

/* The path of the file mapped at addr (/proc/self/maps), into buf (size
   bytes), or NULL: anonymous memory, no /proc, or a longer path. */
static const char *bpt__module_mapped_file(uintptr_t addr, char *buf, size_t size) {
    char line[PATH_MAX + 128];
    const char *found = NULL;
    FILE *fp = fopen("/proc/self/maps", "re");
    int whole = 1;
    if (!fp) return NULL;
    while (!found && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int start = whole, at = 0;   /* a long path's rest is not a line of its own */
        size_t n;
        whole = strchr(line, '\n') != NULL;
        if (!start || sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) != 2 || at == 0 ||
            addr < lo || addr >= hi)
            continue;
        n = strcspn(line + at, "\n");
        if (line[at] != '/' || !whole || n >= size) break;
        memcpy(buf, line + at, n);
        buf[n] = '\0';
        found = bpt__module_undeleted(buf);
    }
    fclose(fp);
    return found;
}

/* The main program's file, for its name and its sections: the one mapped
   where its first PT_LOAD segment is. /proc/self/exe names the same file,
   and opens it even once deleted, so it is opened there; but not when the
   program was started through the dynamic loader
   ("/lib64/ld-linux-x86-64.so.2 ./prog"): then /proc/self/exe is ld.so,
   and the mapped file is opened by its path. */
static void bpt__module_main_file(bpt__module_object *m, const struct dl_phdr_info *info) {
    char mapped[PATH_MAX];
    const char *path = NULL;
    ssize_t n = readlink("/proc/self/exe", m->exe_buf, PATH_MAX - 1);
    int i;
    if (n > 0) {
        m->exe_buf[n] = '\0';
        m->exe_path = bpt__module_undeleted(m->exe_buf);
        m->exe_open = "/proc/self/exe";
    }
    for (i = 0; i < (int)info->dlpi_phnum && !path; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD)
            path = bpt__module_mapped_file((uintptr_t)info->dlpi_addr + (uintptr_t)info->dlpi_phdr[i].p_vaddr,
                                           mapped, sizeof mapped);
    if (path && (!m->exe_path || strcmp(path, m->exe_path) != 0)) {   /* started through ld.so */
        memcpy(m->exe_buf, path, strlen(path) + 1);
        m->exe_path = m->exe_open = m->exe_buf;
    }
}

/* The name a module's functions are registered under, interned: its file's
   basename, cut to BPT__NAME_MAX bytes as function names are (a pattern
   spells no longer name). NULL: no memory. */
static const char *bpt__module_name(const char *path) {
    char buf[BPT__NAME_MAX + 1];
    size_t n = strlen(bpt__module_basename(path));
    if (n > BPT__NAME_MAX) n = BPT__NAME_MAX;
    memcpy(buf, bpt__module_basename(path), n);
    buf[n] = '\0';
    return bpt__intern(buf);
}

static int bpt__module_match(struct dl_phdr_info *info, size_t size, void *data) {
    bpt__module_object *m = (bpt__module_object *)data;
    int is_main = m->seen++ == 0;
    const char *path;
    (void)size;
    if (is_main) bpt__module_main_file(m, info);
    path = is_main ? m->exe_path : info->dlpi_name;
    if (!m->want ? !is_main
                 : !path || !*path || (strcmp(path, m->want) != 0 && strcmp(bpt__module_basename(path), m->want) != 0))
        return 0;
    m->found = 1;
    m->is_main = is_main;
    m->bias = (uintptr_t)info->dlpi_addr;
    m->phdr = info->dlpi_phdr;
    m->phnum = info->dlpi_phnum;
    m->path = path;
    return 1;
}

/* The loaded segment that holds link-time [vaddr, vaddr + size) and has
   every permission in flags, or NULL. */
static const ElfW(Phdr) *bpt__module_segment(const bpt__module_object *m, uint64_t vaddr, uint64_t size,
                                             unsigned flags) {
    size_t i;
    for (i = 0; i < m->phnum; i++) {
        const ElfW(Phdr) *p = &m->phdr[i];
        if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags && vaddr >= p->p_vaddr &&
            bpt__elf_in_bounds(vaddr - p->p_vaddr, size, p->p_memsz))
            return p;
    }
    return NULL;
}

static int bpt__module_phdr_same(const ElfW(Phdr) *mem, const Elf64_Phdr *file) {
    return mem->p_type == file->p_type && mem->p_flags == file->p_flags && mem->p_offset == file->p_offset &&
           mem->p_vaddr == file->p_vaddr && mem->p_paddr == file->p_paddr && mem->p_filesz == file->p_filesz &&
           mem->p_memsz == file->p_memsz && mem->p_align == file->p_align;
}

/* Compare the loaded bytes of one PT_NOTE segment with the file's. */
static int bpt__module_note_same(const bpt__module_object *m, const bpt__elf_file *f, const ElfW(Phdr) *note) {
    char buf[256];
    uint64_t done, n;
    if (!bpt__module_segment(m, note->p_vaddr, note->p_filesz, PF_R)) return 1;   /* not loaded: nothing to compare */
    for (done = 0; done < note->p_filesz; done += n) {
        n = note->p_filesz - done < sizeof buf ? note->p_filesz - done : sizeof buf;
        if (bpt__elf_pread(f, note->p_offset + done, n, buf, "note segment") < 0 ||
            memcmp(buf, (const char *)(m->bias + (uintptr_t)(note->p_vaddr + done)), (size_t)n) != 0)
            return 0;
    }
    return 1;
}

/* The file at the module's path must be the image that was loaded: a library
   rebuilt in place while the program runs would give the new build's section
   addresses and names. Same program headers, and the same notes (which hold
   the build ID when the linker wrote one). */
static int bpt__module_check_image(const bpt__module_object *m, const bpt__elf_file *f) {
    size_t i;
    int same = f->phnum == m->phnum;
    for (i = 0; same && i < m->phnum; i++) same = bpt__module_phdr_same(&m->phdr[i], &f->ph[i]);
    for (i = 0; same && i < m->phnum; i++)
        if (m->phdr[i].p_type == PT_NOTE) same = bpt__module_note_same(m, f, &m->phdr[i]);
    if (!same)
        return bpt__fail(BPT_EINVAL, "%s is not the file that was loaded (program headers or build ID differ: "
                         "rebuilt or replaced since?)", f->path);
    return 0;
}

static int bpt__module_entry_cmp(const void *pa, const void *pb) {
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

/* Copy the relocated entries out of the loaded __patchable_function_entries
   section(s), sorted. A linked file has one such section; several (a
   relocatable link, say) are read alike. */
static int bpt__module_read_entries(const bpt__module_object *m, const bpt__elf_file *f, uint64_t **out, size_t *n) {
    uint64_t total = 0, *e;
    size_t i, k = 0;
    *out = NULL;
    *n = 0;
    for (i = 0; i < f->shnum; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (strcmp(bpt__elf_section_name(f, s), BPT__PFE_SECTION) != 0) continue;
        if (s->sh_size % sizeof(uint64_t) != 0 || !(s->sh_flags & SHF_ALLOC) ||
            !bpt__module_segment(m, s->sh_addr, s->sh_size, PF_R))
            return bpt__fail(BPT_EINVAL, "%s: malformed ELF: " BPT__PFE_SECTION " (address 0x%llx, size %llu) "
                             "is not a whole number of addresses inside a loaded segment", f->path,
                             (unsigned long long)s->sh_addr, (unsigned long long)s->sh_size);
        total += s->sh_size / sizeof(uint64_t);
    }
    if (total == 0) return 0;
    if (total > INT_MAX)   /* the scan returns the count as an int */
        return bpt__fail(BPT_EINVAL, "%s: %llu patchable entries", f->path, (unsigned long long)total);
    if (!(e = (uint64_t *)BPT_MALLOC((size_t)total * sizeof *e)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for %llu patchable entries", f->path, (unsigned long long)total);
    for (i = 0; i < f->shnum; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (strcmp(bpt__elf_section_name(f, s), BPT__PFE_SECTION) != 0 || s->sh_size == 0) continue;
        memcpy(e + k, (const void *)(m->bias + (uintptr_t)s->sh_addr), (size_t)s->sh_size);
        k += (size_t)(s->sh_size / sizeof(uint64_t));
    }
    qsort(e, k, sizeof *e, bpt__module_entry_cmp);
    *out = e;
    *n = k;
    return 0;
}

/* Visit each entry: check it is code of this module, name it, call visit.
   An entry outside the module's executable segments is not a function this
   file compiled; patching there would corrupt memory, so the whole scan
   fails rather than guess. */
static int bpt__module_visit_entries(const bpt__module_object *m, const bpt__elf_file *f, const uint64_t *e, size_t n,
                                     size_t pad_bytes, bpt__module_visit_fn visit, void *user) {
    char unnamed[32];
    size_t i;
    int visited = 0, rc;
    for (i = 0; i < n; i++) {
        uint64_t pad_start = e[i] - m->bias;    /* link-time address */
        uint64_t fn = pad_start + pad_bytes;
        const char *name;
        if (i > 0 && e[i] == e[i - 1]) continue;    /* one function, listed twice: register it once */
        if (fn < pad_start || fn > UINT64_MAX - BPT__ENTRY_BYTES ||
            !bpt__module_segment(m, pad_start, fn - pad_start + BPT__ENTRY_BYTES, PF_X))
            return bpt__fail(BPT_EINVAL, "%s: patchable entry 0x%llx (+%zu bytes of padding, and %d of the "
                             "entry) is not inside the module's code", f->path, (unsigned long long)e[i],
                             pad_bytes, BPT__ENTRY_BYTES);
        /* No symbol (stripped of .symtab and not exported, or no symbol table
           at all): the link-time address names it, as nm and addr2line show it. */
        uint64_t size = 0;
        if (!(name = bpt__elf_func_name(f, fn, &size))) {
            /* A function symbol within 128 bytes of this entry's padding
               (and before the next entry), but not where bptrace's padding
               says the function starts: the file was compiled with other
               -fpatchable-function-entry values (x86-64's 26,24 on aarch64
               puts it 64 bytes later; aarch64's 9,8 on x86-64, 16 bytes
               earlier). Its entries are NOPs inside the padding: patching
               them would trace nothing, silently. */
            uint64_t next = i + 1 < n ? e[i + 1] - m->bias : UINT64_MAX;
            const bpt__elf_func *near = bpt__elf_func_from(f, pad_start);
            if (near && near->addr < next && near->addr - pad_start < 128)
                return bpt__fail(BPT_ENOTPATCHABLE, "%s: function %s starts at 0x%llx, %lld bytes from where its "
                                 "patchable entry puts it with %zu bytes of padding: compiled with other "
                                 "-fpatchable-function-entry values than this architecture's (`make print-cflags`); "
                                 "nothing registered", f->path, f->strtab + near->name,
                                 (unsigned long long)near->addr, (long long)(near->addr - fn), pad_bytes);
            snprintf(unnamed, sizeof unnamed, "fn_0x%llx", (unsigned long long)fn);
            name = unnamed;
        }
        if (bpt__elf_func_variant_pcs(f, fn)) continue;   /* not traceable: skipped, as bptrace's own */
        if ((rc = visit((void *)(m->bias + (uintptr_t)fn), name, size, user)) < 0) return rc;
        visited++;
    }
    return visited;
}

/* Find a loaded module and open its file, checked against the image.
   In: module as bpt__module_scan takes it; exe_buf (PATH_MAX bytes) for the
   main program's path. Out: *m, *f (release f with bpt__elf_close, also
   after a failure), *module_name. Returns 0 or bpt__module_scan's errors. */
static int bpt__module_open(const char *module, char *exe_buf, bpt__module_object *m, bpt__elf_file *f,
                            const char **module_name) {
    int rc;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    memset(m, 0, sizeof *m);
    m->want = module;
    m->exe_buf = exe_buf;
    dl_iterate_phdr(bpt__module_match, m);
    if (!m->found)
        return bpt__fail(BPT_ENOENT, "module '%s' is not loaded", module ? module : "(main program)");
    if (m->is_main && !m->exe_path)
        return bpt__fail(BPT_ENOENT, "cannot find the main program's file in /proc/self/maps or "
                         "/proc/self/exe (is /proc mounted?)");
    rc = bpt__elf_open(m->is_main ? m->exe_open : m->path, f);
    if (rc == 0) rc = bpt__module_check_image(m, f);
    if (rc == 0 && !(*module_name = bpt__module_name(m->path)))
        rc = bpt__fail(BPT_ENOMEM, "no memory for the module name");
    return rc;
}

/* bpt__module_scan: visit every patchable function entry of a loaded module.
   In: module, NULL for the main program, else the basename ("libfoo.so") or
   the path (as dlopen was given it) of a loaded object; the first match in
   load order wins. pad_bytes, the bytes of padding before each function (24
   on x86-64 with (26,24), 32 on aarch64 with (9,8)). visit and user: called
   per entry in address order with the function's run-time address and name
   (".symtab" name, else ".dynsym", else "fn_0x<link-time address>"); a
   negative return stops the scan and is returned as is.
   Out: *module_name, the interned basename of the module's file (cut to
   127 bytes), set before the first visit so that visit may use it.
   Returns the number of entries visited (0 when the module has no
   __patchable_function_entries section, or no section headers at all).
   Errors (with bpt_last_error): BPT_EINVAL (NULL visit or module_name, empty
   module; malformed ELF; the file differs from the loaded image; an entry
   outside the module's code); BPT_ENOENT (not loaded; file gone); BPT_EPERM
   (file unreadable: without it there is no section table to find the
   entries, so nothing is visited); BPT_ENOTSUP (ELF32 or foreign byte
   order); BPT_ENOMEM.
   Thread safety: not by itself; the caller holds the code modification
   permission and keeps the module loaded for the duration of the call.
   Source: dl_iterate_phdr(3); gcc -fpatchable-function-entry. */
BPT__PRIVATE int bpt__module_scan(const char *module, size_t pad_bytes, const char **module_name,
                                  bpt__module_visit_fn visit, void *user) {
    char exe_buf[PATH_MAX];
    bpt__module_object m;
    bpt__elf_file f;
    uint64_t *entries = NULL;
    size_t n = 0;
    int rc;
    if (!module_name || !visit || (module && !*module))
        return bpt__fail(BPT_EINVAL, "module scan: module_name and visit must not be NULL, module not empty");
    rc = bpt__module_open(module, exe_buf, &m, &f, module_name);
    if (rc == 0) rc = bpt__module_read_entries(&m, &f, &entries, &n);
    if (rc == 0) rc = bpt__module_visit_entries(&m, &f, entries, n, pad_bytes, visit, user);
    BPT_FREE(entries);
    bpt__elf_close(&f);
    return rc;
}

#if defined(BPT_NATIVE)
/* >>BTI guard: is the code at addr on a page the loader guarded with
   aarch64's branch target identification (PROT_BTI)? Then an indirect
   branch may enter the page only at a landing pad (bti c / bti j), or the
   CPU raises SIGILL. mprotect sets a page's protection whole, so a code
   write (site_native.c) must ask for PROT_BTI again each time, in its
   read+write+execute and in its read+execute: without it the page loses
   its guard for good. /proc/self/maps does not show the flag, so this asks
   what the loader asks (glibc, sysdeps/aarch64/dl-bti.c, _dl_bti_check):
   the CPU has BTI (AT_HWCAP2 has HWCAP2_BTI), and the object's
   PT_GNU_PROPERTY note has GNU_PROPERTY_AARCH64_FEATURE_1_AND with the BTI
   bit; then every executable PT_LOAD of the object is guarded. The kernel
   asks the same for the loader itself and for a static program (Linux,
   arch/arm64/kernel/process.c, arch_elf_adjust_prot). Code the program
   maps itself (a JIT) is taken as unguarded. Returns 1 or 0; 0 on x86-64. */
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP2_BTI
#  define HWCAP2_BTI (1UL << 17)
#endif
#ifndef PT_GNU_PROPERTY
#  define PT_GNU_PROPERTY 0x6474e553
#endif
#ifndef NT_GNU_PROPERTY_TYPE_0
#  define NT_GNU_PROPERTY_TYPE_0 5
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_AND
#  define GNU_PROPERTY_AARCH64_FEATURE_1_AND 0xc0000000u
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_BTI
#  define GNU_PROPERTY_AARCH64_FEATURE_1_BTI 1u
#endif

/* Does a PT_GNU_PROPERTY segment (in memory, n bytes) say BTI? Its notes
   are 8-aligned: a header, "GNU\0", then properties of type, size, data
   (each 8-aligned); every size is checked against what is left. */
static int bpt__gnu_property_bti(const unsigned char *p, size_t n) {
    while (n >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
        size_t name = (nh->n_namesz + 3u) & ~(size_t)3, desc = (nh->n_descsz + 7u) & ~(size_t)7, at;
        if (sizeof *nh + name > n || desc > n - sizeof *nh - name) return 0;
        if (nh->n_type == NT_GNU_PROPERTY_TYPE_0 && nh->n_namesz == 4 &&
            memcmp(p + sizeof *nh, "GNU", 4) == 0) {
            const unsigned char *d = p + sizeof *nh + name;
            for (at = 0; at + 8 <= nh->n_descsz;) {
                uint32_t type, size, bits;
                memcpy(&type, d + at, 4);
                memcpy(&size, d + at + 4, 4);
                if (size > nh->n_descsz - at - 8) return 0;
                if (type == GNU_PROPERTY_AARCH64_FEATURE_1_AND && size >= 4) {
                    memcpy(&bits, d + at + 8, 4);
                    return (bits & GNU_PROPERTY_AARCH64_FEATURE_1_BTI) != 0;
                }
                at += 8 + (((size_t)size + 7u) & ~(size_t)7);
            }
        }
        p += sizeof *nh + name + desc;
        n -= sizeof *nh + name + desc;
    }
    return 0;
}

typedef struct bpt__guard_query { uintptr_t addr; int guarded; } bpt__guard_query;

static int bpt__module_guard_visit(struct dl_phdr_info *info, size_t size, void *data) {
    bpt__guard_query *q = (bpt__guard_query *)data;
    const ElfW(Phdr) *prop = NULL;
    int i, mine = 0;
    (void)size;
    for (i = 0; i < (int)info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->addr >= start && q->addr - start < ph->p_memsz)
            mine = 1;
        if (ph->p_type == PT_GNU_PROPERTY) prop = ph;
    }
    if (!mine) return 0;
    q->guarded = prop && bpt__gnu_property_bti((const unsigned char *)(uintptr_t)(info->dlpi_addr + prop->p_vaddr),
                                               (size_t)prop->p_memsz);
    return 1;
}

BPT__PRIVATE int bpt__module_code_guarded(const void *addr) {
    bpt__guard_query q;
    if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI)) return 0;
    q.addr = (uintptr_t)addr;
    q.guarded = 0;
    dl_iterate_phdr(bpt__module_guard_visit, &q);
    return q.guarded;
}
#else
BPT__PRIVATE int bpt__module_code_guarded(const void *addr) {
    (void)addr;
    return 0;   /* BTI is aarch64's */
}
#endif
#endif /* BPT_NATIVE */

#if defined(BPT_NATIVE)
/* >>imports: the slots a module calls other modules through, from its
   dynamic relocations (System V gABI and the psABIs: Relocation):
   - R_X86_64_JUMP_SLOT / R_AARCH64_JUMP_SLOT: a .got.plt entry, which the
     module's PLT stub jumps through;
   - R_X86_64_GLOB_DAT / R_AARCH64_GLOB_DAT: a .got entry, which code built
     with -fno-plt calls through (and which a function's address taken
     across modules is read from);
   - R_X86_64_64 / R_AARCH64_ABS64 against a function, addend 0: a word of
     a table of function pointers in the module's data, which the program
     calls through (SQLite keeps pread64 and pwrite64 in such a table,
     aSyscall[], and calls them only through it).
   Each holds the target's address once bound. A JUMP_SLOT the dynamic
   linker has not bound yet (lazy binding: no -z now, no LD_BIND_NOW) points
   into the module's own .plt instead (x86-64: its stub's push; aarch64:
   PLT0); its target is then found as the linker would find it, by name and
   version: first in the global scope, then in the module's own dependencies
   (its local scope, for a library dlopened with RTLD_LOCAL), dlvsym(3). */
#include <dlfcn.h>
#if defined(__x86_64__)
#  define BPT__R_JUMP_SLOT R_X86_64_JUMP_SLOT
#  define BPT__R_GLOB_DAT R_X86_64_GLOB_DAT
#  define BPT__R_ABS64 R_X86_64_64
#else
#  define BPT__R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#  define BPT__R_GLOB_DAT R_AARCH64_GLOB_DAT
#  define BPT__R_ABS64 R_AARCH64_ABS64
#endif

/* A section's bytes, or NULL with *size 0 when the file has none of that
   type (type) and name (NULL: any). */
static const Elf64_Shdr *bpt__elf_section_find(const bpt__elf_file *f, uint32_t type, const char *name) {
    size_t i;
    for (i = 0; i < f->shnum; i++)
        if (f->sh[i].sh_type == type && (!name || strcmp(bpt__elf_section_name(f, &f->sh[i]), name) == 0))
            return &f->sh[i];
    return NULL;
}

/* The System V ELF hash (gABI, "Hash Table"), which glibc keeps of each
   version name. */
static uint32_t bpt__elf_hash(const char *name) {
    uint32_t h = 0, g;
    for (; *name; name++) {
        h = (h << 4) + (unsigned char)*name;
        if ((g = h & 0xf0000000u) != 0) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* The version a module asks of import symbol index `sym` (".gnu.version"
   entry, named in ".gnu.version_r"), or NULL: unversioned. Out-of-range
   data gives NULL: the lookup is then by name alone. So does a name whose
   ELF hash is 0 (the empty name, in a corrupt file): glibc takes the hash
   0 for "no version here" and then strcmp()s the NULL name of a symbol a
   versioned object defines unversioned (dl-lookup.c, check_match): a
   crash inside dlvsym. */
static const char *bpt__imports_version(const char *versym, size_t versym_size, const char *verneed,
                                        size_t verneed_size, size_t verneed_count, const char *dynstr,
                                        size_t dynstr_size, size_t sym) {
    Elf64_Half want;
    size_t off = 0, i;
    if (!versym || (sym + 1) * sizeof want > versym_size) return NULL;
    memcpy(&want, versym + sym * sizeof want, sizeof want);
    want &= 0x7fff;                             /* the hidden bit */
    if (want < 2 || !verneed) return NULL;      /* local or global: no version */
    for (i = 0; i < verneed_count && bpt__elf_in_bounds(off, sizeof(Elf64_Verneed), verneed_size); i++) {
        Elf64_Verneed vn;
        size_t aoff;
        unsigned k;
        memcpy(&vn, verneed + off, sizeof vn);
        for (k = 0, aoff = off + vn.vn_aux; k < vn.vn_cnt && bpt__elf_in_bounds(aoff, sizeof(Elf64_Vernaux), verneed_size); k++) {
            Elf64_Vernaux va;
            memcpy(&va, verneed + aoff, sizeof va);
            if (va.vna_other == want)
                return va.vna_name < dynstr_size && bpt__elf_hash(dynstr + va.vna_name) ? dynstr + va.vna_name : NULL;
            if (!va.vna_next) break;
            aoff += va.vna_next;
        }
        if (!vn.vn_next) break;
        off += vn.vn_next;
    }
    return NULL;
}

/* Where the dynamic linker would bind name@version for this module: the
   global scope, then the module's dependencies (path NULL: the main
   program, whose scope is the global one). 0 when nothing defines it. */
static uintptr_t bpt__imports_resolve(const char *path, const char *name, const char *version) {
    void *p = version ? dlvsym(RTLD_DEFAULT, name, version) : dlsym(RTLD_DEFAULT, name), *h;
    if (!p && path && (h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)) != NULL) {
        p = version ? dlvsym(h, name, version) : dlsym(h, name);
        dlclose(h);
    }
    return (uintptr_t)p;
}

/* The import relocations of one SHT_RELA section, read in chunks. */
typedef struct bpt__imports_scan {
    const bpt__module_object *m;
    const bpt__elf_file *f;
    const char *dynstr, *versym, *verneed;
    size_t dynstr_size, versym_size, verneed_size, verneed_count;
    const Elf64_Sym *dynsym;
    size_t ndynsym;
    uintptr_t plt_lo, plt_hi;                   /* the module's .plt, where an unbound slot points */
    bpt__import_visit_fn visit;
    void *user;
} bpt__imports_scan;

static int bpt__imports_one(const bpt__imports_scan *sc, const Elf64_Rela *r) {
    uint32_t type = (uint32_t)ELF64_R_TYPE(r->r_info);
    size_t symix = (size_t)ELF64_R_SYM(r->r_info);
    const Elf64_Sym *sym;
    const char *name;
    uintptr_t value, target;
    void **slot;
    int lazy;
    unsigned st;
    if (type != BPT__R_JUMP_SLOT && type != BPT__R_GLOB_DAT && !(type == BPT__R_ABS64 && r->r_addend == 0))
        return 0;
    if (symix == 0 || symix >= sc->ndynsym) return 0;
    sym = &sc->dynsym[symix];
    st = ELF64_ST_TYPE(sym->st_info);
    if (st != STT_FUNC && st != STT_NOTYPE && st != STT_GNU_IFUNC) return 0;   /* data, TLS: not calls */
    if (type == BPT__R_ABS64 && st == STT_NOTYPE) return 0;   /* a table word: only a known function */
    if (sym->st_name == 0 || sym->st_name >= sc->dynstr_size || !sc->dynstr[sym->st_name]) return 0;
    name = sc->dynstr + sym->st_name;
    if (!bpt__module_segment(sc->m, r->r_offset, sizeof(void *), PF_R | PF_W) || (r->r_offset & 7))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: the slot of %s at 0x%llx is not an aligned pointer "
                         "in a writable segment", sc->f->path, name, (unsigned long long)r->r_offset);
    slot = (void **)(sc->m->bias + (uintptr_t)r->r_offset);
    value = (uintptr_t)bpt__load_relaxed_ptr((bpt__atomic_ptr *)slot);
    lazy = type == BPT__R_JUMP_SLOT && value >= sc->plt_lo && value < sc->plt_hi;
    target = value;
    if (lazy) {
        const char *ver = bpt__imports_version(sc->versym, sc->versym_size, sc->verneed, sc->verneed_size,
                                               sc->verneed_count, sc->dynstr, sc->dynstr_size, symix);
        target = bpt__imports_resolve(sc->m->is_main ? NULL : sc->m->path, name, ver);
    }
    if (!target) return 0;   /* a weak import nothing defines, or one the linker would not bind either */
    return sc->visit(slot, name, target, lazy ? value : 0, sc->user);
}

/* bpt__module_imports: visit every import slot of a loaded module (>>imports).
   In: module, as bpt__module_scan takes it; visit and user, called per slot
   in relocation order; a negative return stops and is returned.
   Out: *module_name, the interned basename of the module's file (cut to
   127 bytes). Returns the number of slots visited, or bpt__module_scan's errors.
   Not under the code modification permission: the caller keeps the module
   loaded, and the lookups take the dynamic linker's lock, which a library's
   constructor holds while it may wait for the permission. */
BPT__PRIVATE int bpt__module_imports(const char *module, const char **module_name,
                                     bpt__import_visit_fn visit, void *user) {
    char exe_buf[PATH_MAX];
    bpt__module_object m;
    bpt__elf_file f;
    bpt__imports_scan sc;
    const Elf64_Shdr *dynsym, *s;
    char *dynsym_bytes = NULL, *dynstr = NULL, *versym = NULL, *verneed = NULL;
    size_t i;
    int rc, visited = 0;
    if (!module_name || !visit || (module && !*module))
        return bpt__fail(BPT_EINVAL, "module imports: module_name and visit must not be NULL, module not empty");
    memset(&sc, 0, sizeof sc);
    rc = bpt__module_open(module, exe_buf, &m, &f, module_name);
    dynsym = rc == 0 ? bpt__elf_section_find(&f, SHT_DYNSYM, NULL) : NULL;
    if (rc == 0 && dynsym) {
        if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link == 0 || dynsym->sh_link >= f.shnum)
            rc = bpt__fail(BPT_EINVAL, "%s: malformed ELF: .dynsym", f.path);
        else if ((rc = bpt__elf_section_alloc(&f, dynsym, ".dynsym", &dynsym_bytes)) == 0 &&
                 (rc = bpt__elf_section_alloc(&f, &f.sh[dynsym->sh_link], ".dynstr", &dynstr)) == 0) {
            sc.dynsym = (const Elf64_Sym *)(const void *)dynsym_bytes;
            sc.ndynsym = (size_t)(dynsym->sh_size / sizeof(Elf64_Sym));
            sc.dynstr = dynstr;
            sc.dynstr_size = (size_t)f.sh[dynsym->sh_link].sh_size;
        }
    }
    if (rc == 0 && dynsym && (s = bpt__elf_section_find(&f, SHT_GNU_versym, NULL)) != NULL &&
        (rc = bpt__elf_section_alloc(&f, s, ".gnu.version", &versym)) == 0)
        sc.versym = versym, sc.versym_size = (size_t)s->sh_size;
    if (rc == 0 && dynsym && (s = bpt__elf_section_find(&f, SHT_GNU_verneed, NULL)) != NULL &&
        (rc = bpt__elf_section_alloc(&f, s, ".gnu.version_r", &verneed)) == 0)
        sc.verneed = verneed, sc.verneed_size = (size_t)s->sh_size, sc.verneed_count = s->sh_info;
    if (rc == 0 && (s = bpt__elf_section_find(&f, SHT_PROGBITS, ".plt")) != NULL) {
        sc.plt_lo = m.bias + (uintptr_t)s->sh_addr;
        sc.plt_hi = sc.plt_lo + (uintptr_t)s->sh_size;
    }
    sc.m = &m;
    sc.f = &f;
    sc.visit = visit;
    sc.user = user;
    /* Every SHT_RELA section against .dynsym: .rela.dyn and .rela.plt. */
    for (i = 0; rc == 0 && dynsym && i < f.shnum; i++) {
        const Elf64_Shdr *rs = &f.sh[i];
        Elf64_Rela chunk[128];
        uint64_t count, done;
        if (rs->sh_type != SHT_RELA || rs->sh_link != (uint32_t)(dynsym - f.sh)) continue;
        if (rs->sh_entsize != sizeof(Elf64_Rela) || rs->sh_size % sizeof(Elf64_Rela) != 0) {
            rc = bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s entry size %llu", f.path,
                           bpt__elf_section_name(&f, rs), (unsigned long long)rs->sh_entsize);
            break;
        }
        count = rs->sh_size / sizeof(Elf64_Rela);
        for (done = 0; rc == 0 && done < count; ) {
            size_t n = count - done < 128 ? (size_t)(count - done) : 128, k;
            if ((rc = bpt__elf_pread(&f, rs->sh_offset + done * sizeof(Elf64_Rela), n * sizeof(Elf64_Rela),
                                     chunk, "dynamic relocations")) < 0)
                break;
            for (k = 0; k < n && rc == 0; k++) {
                rc = bpt__imports_one(&sc, &chunk[k]);
                if (rc > 0) { visited += rc; rc = 0; }
            }
            done += n;
        }
    }
    BPT_FREE(dynsym_bytes);
    BPT_FREE(dynstr);
    BPT_FREE(versym);
    BPT_FREE(verneed);
    bpt__elf_close(&f);
    return rc < 0 ? rc : visited;
}
#endif /* BPT_NATIVE */
/*** End of module.c ***/

/*** Begin file bp.c ***/
/* bp.c: the set path. How a breakpoint change becomes visible to running
   threads without stopping any of them: the 13 steps of OTP's Tracing.md,
   as erts_set_trace_pattern and friends run them in beam_bp.c.

   Invariant between changes: for every GenericBp, data[active] and
   data[staging] are equal (step 11 makes them so). A change therefore only
   writes staging halves (step 3), flips the global index (step 7), and
   waits for thread progress wherever a reader could still see the past. */

/* The active generation index (bpt__active_ix, hit.c) and its twin. */
unsigned bpt_active_bp_ix(void) { return bpt__active_ix_load(); }   /* [G2] */
unsigned bpt_staging_bp_ix(void) { return bpt__load_acquire_u32(&bpt__active_ix) ^ 1u; }

/* Only a switch-on makes breakpoints. BPT_PAUSE and BPT_RESTART change the
   counting kinds that are on and leave a function without them alone, as
   set_function_break in beam_bp.c inserts no breakpoint for either (cprof's
   pause and restart: "the matching functions that have call count
   breakpoints"). */
BPT__PRIVATE int bpt__op_enables(const bpt__op *op) { return op->how == 0; }

static bpt_observer_fn bpt__observer;
static void *bpt__observer_user;
/* Changes run so far: the one running is the step probes' change id.
   Written under the permission; read by anyone (pattern__done). */
static bpt__atomic_u64 bpt__change_seq;
/* The layout sequence count [L1] (api_root.h): odd while the permission is
   held, so an outside reader of the registry and the sessions can tell a
   torn read. Only the permission's holder writes it. */
BPT__SHARED bpt__atomic_u64 bpt__layout_seq;

BPT__PRIVATE uint64_t bpt__probe_change_id(void) { return bpt__load_relaxed_u64(&bpt__change_seq); }

static const char *const bpt__step_names[13] = {
    "seize permission", "allocate", "stage", "wait", "install", "wait", "commit",
    "wait", "uninstall", "wait", "consolidate", "wait and free", "release permission"
};

const char *bpt_protocol_step_name(int step) {
    return step >= 1 && step <= 13 ? bpt__step_names[step - 1] : NULL;
}

/* Report a step to the observer and to a tool attached to bptrace:step
   (the step, its name, the change's id, whether it had work, its ns), and
   start timing the next. */
static void bpt__step_done(int step, int did, uint64_t *t) {
    uint64_t now = bpt__now_ns();
    if (bpt__observer) bpt__observer(step, did, now - *t, bpt__observer_user);
    BPT_PROBE(bptrace, step, step, bpt__step_names[step - 1], bpt__load_relaxed_u64(&bpt__change_seq), did,
              now - *t);
    *t = bpt__now_ns();
}

/* Seize the code modification permission (step 1). Set-path calls from a
   tracer callback, a pinned section, or a callback run under the permission
   (an observer, a trace_info_each visitor) would wait for themselves. */
BPT__PRIVATE int bpt__set_path_allowed(const char *who) {
    bpt__thread *rec = bpt__thread_self();
    if (!rec) return bpt__fail(BPT_ENOMEM, "%s: no memory for the thread record", who);
    if (rec->in_tracer)
        return bpt__fail(BPT_EDEADLK, "%s: called from inside a tracer callback", who);
    if (rec->holds_permission)
        return bpt__fail(BPT_EDEADLK, "%s: called from a callback that runs under the code "
                         "modification permission (observer or trace_info_each visitor)", who);
    if (bpt__thread_pinned(rec))
        return bpt__fail(BPT_EDEADLK, "%s: called while pinned (bpt_thread_progress_pin)", who);
    return 0;
}

BPT__PRIVATE int bpt__permission_seize(const char *who) {
    bpt__thread *rec;
    int rc = bpt__set_path_allowed(who);
    if (rc < 0) return rc;
    rec = bpt__thread_self_or_null();
    bpt__block_begin(rec);   /* a managed thread stays offline while it holds the permission */
    pthread_mutex_lock(&bpt__code_mod_permission);
    bpt__own_enter();        /* its calls into libc (mprotect, malloc) are bptrace's own (site_native.c) */
#if defined(BPT_NATIVE)
    bpt__arch_prefetch_setup();   /* >>prefetch in port.h; a pthread_once, so after own_enter (t_imports_own) */
#endif
    rec->holds_permission = 1;
    /* [L1] writer, opening: the count goes odd before any change an outside
       reader could see (api_root.h); the fence orders it before them. */
    bpt__store_relaxed_u64(&bpt__layout_seq, bpt__load_relaxed_u64(&bpt__layout_seq) + 1);
    bpt__fence_seq_cst();
    return 0;
}

BPT__PRIVATE void bpt__permission_release(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* [L1] writer, closing: even again, released after every change. */
    bpt__store_release_u64(&bpt__layout_seq, bpt__load_relaxed_u64(&bpt__layout_seq) + 1);
    rec->holds_permission = 0;
    bpt__own_leave();
    pthread_mutex_unlock(&bpt__code_mod_permission);
    bpt__block_end(rec);
}

int bpt_set_protocol_observer(bpt_observer_fn fn, void *user) {
    int rc = bpt__permission_seize("bpt_set_protocol_observer");
    if (rc < 0) return rc;
    bpt__observer = fn;
    bpt__observer_user = user;
    bpt__permission_release();
    return 0;
}

/* The session's breakpoint on f, or NULL. Under the permission. */
BPT__PRIVATE bpt__GenericBp *bpt__find_bp(const bpt_func *f, const bpt__session *s) {
    bpt__GenericBp *g;
    for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr((bpt__atomic_ptr *)&f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
        if (g->session == s) return g;
    return NULL;
}

/* >>kinds: the hooks of every kind, called in the table's order. */

/* Step 2 for one breakpoint: what each kind the op changes needs allocated.
   `staging` is NULL for a fresh breakpoint. Returns 0 or BPT_ENOMEM. */
static int bpt__kinds_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **prepared) {
#define BPT__KIND_PREPARE(NAME, name, flag) \
    if ((op->kinds & (flag)) && bpt__kind_##name##_prepare(op, staging, &prepared[BPT__KIX_##NAME]) < 0) \
        return BPT_ENOMEM;
    BPT_KINDS(BPT__KIND_PREPARE)
#undef BPT__KIND_PREPARE
    return 0;
}

/* Step 3 for one breakpoint: each kind the op changes writes the staging
   generation, taking what step 2 prepared for it. */
static void bpt__kinds_stage(bpt__GenericBpData *d, const bpt__op *op, void **prepared) {
#define BPT__KIND_STAGE(NAME, name, flag) \
    if (op->kinds & (flag)) bpt__kind_##name##_stage(d, op, prepared[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_STAGE)
#undef BPT__KIND_STAGE
}

/* A second generation shares d's data (step 11), or d lets go of it
   (steps 11 and 12), kind by kind. */
static void bpt__kinds_ref(const bpt__GenericBpData *d) {
#define BPT__KIND_REF(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_ref(d->data[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_REF)
#undef BPT__KIND_REF
}

static void bpt__kinds_unref(const bpt__GenericBpData *d) {
#define BPT__KIND_UNREF(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_unref(d->data[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_UNREF)
#undef BPT__KIND_UNREF
}

static int bpt__kinds_prepared_any(void *const *prepared) {
    int k;
    for (k = 0; k < BPT__NKINDS; k++) if (prepared[k]) return 1;
    return 0;
}

/* What step 2 prepared and step 3 did not take (out of memory midway). */
static void bpt__kinds_discard(void **prepared) {
#define BPT__KIND_DISCARD(NAME, name, flag) \
    if (prepared[BPT__KIX_##NAME]) bpt__kind_##name##_unref(prepared[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_DISCARD)
#undef BPT__KIND_DISCARD
}

/* >>steps: one function per step of the protocol, in order.

   >>working set: a change over many functions is bound by memory, not by
   instructions. Each step passes over every item, and each function's
   record and breakpoint span several cache lines: 10,000 of them (3.4 MB)
   do not fit in a core's L2, and a step that reads them all fetches them
   again (a change over 1,000 functions took 50 ns a function, over 10,000
   136 ns; bench/pattern_scale.c `steps`, BENCH_WORKERS=0). So what a later
   step needs to decide is noted in the item when it is learnt: step 5
   reads a function's record only to write its word or publish a parked
   breakpoint, and step 9 reads a function's list only where this
   session's breakpoint has no flag left and another session's may. Step 3
   links a fresh breakpoint, stages it and works out its function's
   shortcut in one pass. And the passes of steps 2, 3 and 11, and the
   writer's W2 and W3 (site_native.c), ask for the lines of the item
   BPT__SET_AHEAD places on while they work on this one (>>prefetch in
   port.h: for reading, or for writing where the pass stores): each
   item's lines are a few misses that depend on nothing the pass
   computes, and the processor alone overlaps only those of the next
   item or two. */

/* One affected function of a change. */
typedef struct bpt__change_item {
    bpt_func *f;
    bpt__GenericBp *g;            /* the session's breakpoint on f */
    void *prepared[BPT__NKINDS];  /* step 2's allocations, taken by step 3 */
    int fresh;                    /* g was allocated by step 2 and is not linked yet (step 3 links it) */
    /* What the later steps need to know of the item, noted where it is
       learnt, so that they pass over the items without reading f and g
       (>>working set above). */
    int parked;                   /* step 3 parked g in the head's to_insert: step 5 publishes it */
    int installs;                 /* step 3: step 5 writes f's breakpoint word */
    uint32_t staged;              /* step 3: g's staged flags, active from step 7 (0 when no g) */
    int alone;                    /* step 2: no other session's breakpoint is on f's list (one
                                     session per change, under the permission: it stays so) */
} bpt__change_item;

/* A change in flight: what the steps hand on to each other. */
typedef struct bpt__change {
    bpt__session *s;
    const bpt__op *op;
    bpt__change_item *items;
    int n;
    bpt_func **sites;             /* scratch for steps 5 and 9: the sites to write */
    bpt__sites_batch batch;       /* their pages, prepared at step 2 */
    int allocated;                /* step 2 allocated something */
    int installs;                 /* sites that step 5 writes (counted at step 3, then written) */
    int fresh;                    /* some of them have padding written since the last SYNC_CORE wait */
    int switched_off;             /* step 3: items whose staged flags are 0 (step 9 may restore their words) */
    int wait_deferred;            /* step 8 left its wait to step 10 */
    int uninstalls;               /* sites that step 9 wrote */
    int wrote_code;               /* step 5 or 9 wrote native code, not only VM words */
    bpt__GenericBp *to_free;      /* unlinked at step 11, freed at step 12 */
    int rc;                       /* a refusal at step 5 or 9 (BPT_EPERM): the change goes on */
} bpt__change;

/* GenericBps, recycled (>>recycle in ptrset.c). */
static bpt__recycle bpt__bp_blocks = { NULL, sizeof(bpt__GenericBp) };

static void bpt__change_free(bpt__change *c) {
    int i;
    for (i = 0; i < c->n; i++) {
        if (c->items[i].fresh) bpt__recycle_give(&bpt__bp_blocks, c->items[i].g);
        bpt__kinds_discard(c->items[i].prepared);
    }
    BPT_FREE(c->items);
    BPT_FREE(c->sites);
    bpt__sites_batch_free(&c->batch);
}

/* Step 1: seize the code modification permission. *t is when the caller
   was entered, so the time the observer sees for step 1 includes the wait
   for the permission. Returns 0, BPT_ENOMEM or BPT_EDEADLK. */
BPT__PRIVATE int bpt__change_begin(const char *who, uint64_t *t) {
    int rc = bpt__permission_seize(who);
    if (rc < 0) return rc;
    bpt__owner_inc_u64(&bpt__change_seq, 1);   /* one writer: the permission's holder */
    bpt__step_done(1, 1, t);
    return 0;
}

/* Step 2: allocate. Everything this change needs is allocated before
   anything shared is touched, so running out of memory changes nothing.
   Fresh breakpoints have both generations disabled (flags 0) and the
   original instruction saved; step 3 links them (bpt__link). The page
   arrays of steps 5 and 9 are sized by the native sites this pass counts
   (a pass of their own over 10,000 records' first lines took 27 us).
   Returns 0, BPT_ENOMEM, or a slot's refusal (bpt__sites_batch_prepare),
   with nothing changed. */
static int bpt__allocate(bpt__change *c, bpt__session *s, bpt_func **fs, int n, const bpt__op *op) {
    unsigned staging = bpt_staging_bp_ix();
    int i, rc, code = 0, slots = 0;
    memset(c, 0, sizeof *c);
    c->s = s;
    c->op = op;
    c->items = (bpt__change_item *)BPT_MALLOC(sizeof *c->items * (size_t)(n ? n : 1));
    c->sites = (bpt_func **)BPT_MALLOC(sizeof *c->sites * (size_t)(n ? n : 1));
    if (!c->items || !c->sites) {
        bpt__change_free(c);
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for %d changes", n);
    }
    for (i = 0; i < n; i++) {
        bpt__change_item *it = &c->items[c->n];
        bpt__GenericBp *g;
        if (i + BPT__SET_AHEAD < n) BPT__PREFETCH_R(fs[i + BPT__SET_AHEAD]);   /* its first line: the list head */
        if (fs[i]->kind == BPT__SITE_NATIVE) {
            if (fs[i]->slot_prot) slots++;
            else code++;
        }
        g = bpt__find_bp(fs[i], s);
        /* Nothing to switch off, unless an earlier uninstall was refused
           (mprotect, or a site holding a foreign word) and left the word
           with no breakpoint behind it: step 9 tries again (g stays NULL). */
        if (!g && !bpt__op_enables(op) && !fs[i]->installed) continue;
        memset(it, 0, sizeof *it);
        it->f = fs[i];
        it->g = g;
        it->alone = bpt__load_relaxed_ptr(&fs[i]->gen_bp) == (void *)g && (!g || !bpt__load_relaxed_ptr(&g->next));
        c->n++;
        if (!g && !bpt__op_enables(op)) continue;
        if (!g) {
            if (!(g = (bpt__GenericBp *)bpt__recycle_take(&bpt__bp_blocks))) goto enomem;
            memset(g, 0, sizeof *g);
            g->orig_instr = fs[i]->orig_word;
            g->session = s;
            it->g = g;
            it->fresh = 1;
            c->allocated = 1;
        }
        if (bpt__kinds_prepare(op, it->fresh ? NULL : &g->data[staging], it->prepared) < 0) goto enomem;
        c->allocated |= bpt__kinds_prepared_any(it->prepared);
    }
    if ((rc = bpt__sites_batch_prepare(&c->batch, fs, n, code, slots, !bpt__op_enables(op))) < 0) {
        bpt__change_free(c);   /* with its reason */
        return rc;
    }
    return 0;
enomem:
    bpt__change_free(c);
    return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: out of memory allocating breakpoints; nothing changed");
}

/* May the count path finish a hit in a generation with this shortcut? */
static int bpt__shortcut_counts_only(uint32_t kind) {
    return kind == BPT__SHORTCUT_NONE || kind == BPT__SHORTCUT_COUNT;
}

/* The entry stubs' hint (bpt_func.path_hint, BPT__HINT_* in sites.h):
   may the count path finish a hit on f in either generation, or else the
   call path, the call-return path, the time path? Never for a slot: a
   slot reached from bptrace's own code is not traced (>>own calls in
   site_native.c), and the full path makes that check, so that the short
   paths of every other function do not.
   Stored only when it changes: every stub reads the hint's line, and a
   store, even of the same value, takes the line from each core that reads
   it. Storing it at both steps 3 and 11 of every change made switching
   10,000 counted functions off take 3.0 ms instead of 2.45 while a worker
   called them (bench/pattern_scale.c; PERFORMANCE.md, issue #16). */
static void bpt__path_hint_update(bpt_func *f) {
    uint32_t hint = BPT__HINT_FULL;
    if (f->slot_prot) {
        /* a slot: the full path */
    } else if (bpt__shortcut_counts_only(f->shortcut[0].kind) || bpt__shortcut_counts_only(f->shortcut[1].kind)) {
        hint = BPT__HINT_COUNT;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_CALL_PLAIN || f->shortcut[1].kind == BPT__SHORTCUT_CALL_PLAIN) {
        hint = BPT__HINT_CALL;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_CALL_RETURN || f->shortcut[1].kind == BPT__SHORTCUT_CALL_RETURN) {
        hint = BPT__HINT_CALL_RETURN;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_TIME || f->shortcut[1].kind == BPT__SHORTCUT_TIME) {
        hint = BPT__HINT_TIME;
    }
    if (f->path_hint != hint) f->path_hint = hint;
}

/* Which CALL does a call trace alone get (>>shortcut in breakpoint.h)?
   CALL_PLAIN when its record needs nothing but the function and its
   integer arguments, CALL_RETURN when that record and a return frame of
   one session (return_trace, exception_trace: nothing else), else CALL.
   The match spec's and the session's fields are fixed while the
   breakpoint holds them. */
static uint32_t bpt__call_shortcut(const bpt__GenericBp *g, const bpt__GenericBpData *d) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    const bpt__session *s = g->session;
    if (!s->buffered || s->rate_max || (ms && (ms->pred || ms->nspec || ms->message_id)))
        return BPT__SHORTCUT_CALL;
    if (!ms || !ms->actions) return BPT__SHORTCUT_CALL_PLAIN;
    return (ms->actions & ~(unsigned)(BPT_RETURN | BPT_EXCEPTION)) ? BPT__SHORTCUT_CALL : BPT__SHORTCUT_CALL_RETURN;
}

/* Step 3's summary of generation ix on f for the hit (>>shortcut in
   breakpoint.h): every session's breakpoint counts, the one a new session
   parked in the head's to_insert too, since step 5 links it before the
   commit. A paused kind (ON without ACTIVE) does nothing on a hit, so only
   the ACTIVE bits matter. */
static void bpt__shortcut_choose(bpt_func *f, unsigned ix) {
    bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp), *g, *only_g = NULL;
    const bpt__GenericBpData *only = NULL;
    int active = 0;
    bpt__shortcut *sc = &f->shortcut[ix];
    for (g = head ? (head->to_insert ? head->to_insert : head) : NULL; g;
         g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
        if (g->data[ix].flags & BPT__BPF_ACTIVE_ALL) {
            active++;
            only = &g->data[ix];
            only_g = g;
        }
    sc->data = NULL;
    sc->count_dir = sc->count_off = 0;
    if (active != 1) {
        sc->kind = active == 0 ? BPT__SHORTCUT_NONE : BPT__SHORTCUT_WALK;
    } else {
        unsigned kinds = only->flags & BPT__BPF_ACTIVE_ALL;   /* the one session's kinds */
        if (kinds == BPT__BPF_ACTIVE(BPT__KIX_COUNT)) {
            sc->kind = BPT__SHORTCUT_COUNT;
            sc->data = only->data[BPT__KIX_COUNT];
            sc->count_dir = ((const bpt__BpCount *)sc->data)->dir;
            sc->count_off = ((const bpt__BpCount *)sc->data)->off;
        } else {
            /* CALL, CALL_PLAIN, CALL_RETURN (call trace only), TIME
               (call_time only, by the wall clock) or ONE (any other mix):
               the GenericBp is linked, or parked in to_insert, which step
               5 links before the commit publishes this generation; freed
               only after step 12's wait, when no hit can read this
               shortcut any more. */
            if (kinds == BPT__BPF_ACTIVE(BPT__KIX_CALL)) sc->kind = bpt__call_shortcut(only_g, only);
            else if (kinds == BPT__BPF_ACTIVE(BPT__KIX_TIME) && !only_g->session->time_cpu)
                sc->kind = BPT__SHORTCUT_TIME;
            else sc->kind = BPT__SHORTCUT_ONE;
            sc->data = only_g;
        }
    }
    bpt__path_hint_update(f);
}

/* Step 3, first for a fresh breakpoint: link it. The first session on a
   function writes its list head [G1], which nobody reaches before step 5
   installs the word (or at once, where an earlier uninstall was refused
   and left the word in place: a hit then finds both generations' flags 0
   and does nothing, the store being a release); a later session's
   breakpoint is parked in the head's to_insert, already pointing at the
   head, for step 5 to publish. Linked here, in step 3's pass, not in a
   pass of step 2's own, as set_function_break in beam_bp.c allocates,
   links and stages a function's breakpoint at once: that pass read
   10,000 records' first lines again (55 us). Step 2 has allocated
   everything by then, and step 3 cannot fail, so nothing is linked that
   running out of memory would have to unlink. */
static void bpt__link(bpt__change_item *it) {
    bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&it->f->gen_bp);
    if (!head) {
        bpt__store_release_ptr(&it->f->gen_bp, it->g);   /* [G1] */
    } else {
        bpt__store_relaxed_ptr(&it->g->next, head);
        head->to_insert = it->g;
        it->parked = 1;
    }
    it->fresh = 0;   /* linked: freed by steps 11 and 12 if left unused */
}

/* Steps 3 and 11 on item i: ask for the lines of the item BPT__SET_AHEAD
   places on (>>working set above): its breakpoint and its shortcuts, which
   both steps write, and its record's first line, which step 3 writes to
   link a fresh breakpoint and otherwise reads (the list head). */
static void bpt__item_prefetch(const bpt__change *c, int i) {
    const bpt__change_item *ahead;
    if (i + BPT__SET_AHEAD >= c->n) return;
    ahead = &c->items[i + BPT__SET_AHEAD];
    BPT__PREFETCH_W(ahead->g);
    BPT__PREFETCH_W(&ahead->f->shortcut[0]);
    if (ahead->fresh) BPT__PREFETCH_W(ahead->f);
    else BPT__PREFETCH_R(ahead->f);
}

/* Step 3: stage. Only staging generations change; running code reads the
   active ones; a breakpoint to be removed gets flags 0 here. Each item's
   function then gets its shortcut for the staging generation worked out
   anew, in the same pass (a second pass over 10,000 functions fetched
   their lines again: step 3 took 225 us where one takes 160). */
static int bpt__stage(bpt__change *c) {
    unsigned staging = bpt_staging_bp_ix();
    int i;
    for (i = 0; i < c->n; i++) {
        bpt__change_item *it = &c->items[i];
        bpt__item_prefetch(c, i);
        if (it->fresh) bpt__link(it);
        if (it->g) {   /* else only a word to restore (step 2) */
            bpt__kinds_stage(&it->g->data[staging], c->op, it->prepared);
            memset(it->prepared, 0, sizeof it->prepared);   /* owned by the breakpoint now */
            it->staged = it->g->data[staging].flags;
            if (!it->f->installed && it->staged) {
                it->installs = 1;
                c->installs++;
                c->fresh |= it->f->padding_fresh;
            }
        }
        c->switched_off += !it->staged;
        /* f's list is final for this generation (each item is another
           function): its summary now, while its lines are at hand. */
        bpt__shortcut_choose(it->f, staging);
    }
    return 1;
}

/* Step 4: wait for thread progress, so that every thread sees the new list
   heads (step 3) before an instruction word leads it there: a VM's fetch
   of the word is not an acquire load. Only when step 5 installs. Where a
   native function to install has padding written since the last
   SYNC_CORE wait (registration, bpt__native_prepare), the wait serializes
   every thread's instruction stream too: the installed word leads into
   that padding, new code that another core may hold stale (prefetched
   with the function before it), and only a context synchronizing event on
   that core makes the new bytes the ones it runs (ARM ARM B2.2.5; Intel
   SDM vol. 3, 9.1.3), as slots' trampolines get at their SL0. Found by
   review: with membarrier the plain wait's IPIs gave it in practice,
   without it nothing did. */
static int bpt__wait_staged(bpt__change *c) {
    int i;
    if (!c->installs) return 0;
    if (!c->fresh) {
        bpt_thread_progress_wait();
        return 1;
    }
    bpt_thread_progress_wait_sync_core();
    for (i = 0; i < c->n; i++)   /* stored where it changes: the line is the stubs' (breakpoint.h) */
        if (c->items[i].f->padding_fresh) c->items[i].f->padding_fresh = 0;
    return 1;
}

/* Step 5: install the breakpoint word, one aligned store per site, in one
   batch (each code page made writable once), and publish the parked
   breakpoints of further sessions: one release store each [G1], so the
   parked breakpoint is seen complete, its active generation disabled.
   A refused mprotect (BPT_EPERM), or a site that does not hold its
   original word (BPT_ENOTPATCHABLE, site_native.c), leaves those functions
   untraced; the settings commit anyway, so the state stays consistent, and
   the caller learns why. */
static int bpt__install(bpt__change *c) {
    int i, nsites = 0, published = 0, written, rc;
    for (i = 0; i < c->n; i++) {
        bpt_func *f = c->items[i].f;
        if (c->items[i].parked) {   /* only step 3 parks, and only step 5 publishes */
            bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
            bpt__store_release_ptr(&f->gen_bp, head->to_insert);   /* [G1] */
            head->to_insert = NULL;
            published++;
        }
        if (c->items[i].installs) c->sites[nsites++] = f;   /* as step 3 found it */
    }
    if ((rc = bpt__sites_write(c->sites, nsites, 1, &c->wrote_code, &c->batch, &written)) < 0) c->rc = rc;
    c->installs = written;
    return written + published != 0;
}

/* The wait after writing site words (steps 6 and 10): a plain wait for VM
   words, which are data; after code writes, one that also serializes every
   thread's instruction stream (membarrier SYNC_CORE: progress.c). */
static void bpt__wait_after_write(int wrote_code) {
    if (wrote_code) bpt_thread_progress_wait_sync_core();
    else bpt_thread_progress_wait();
}

/* Step 6: wait, so that every thread runs the new words before the commit,
   making the switch as atomic as possible. */
static int bpt__wait_installed(bpt__change *c) {
    if (c->installs) bpt__wait_after_write(c->wrote_code);
    return c->installs != 0;
}

/* Step 7: commit. Flip the active index: the staging generation becomes the
   active one. The release store [G2] pairs with the acquire load of
   bpt_active_bp_ix() that every hit and return makes once (hit.c,
   frames.c), so a hit
   that reads the new index sees everything step 3 staged. The only store
   to the index: trace_info's collection switches with it too (C3,
   timem.c). Under the permission. */
BPT__PRIVATE void bpt__commit(void) {
    bpt__store_release_u32(&bpt__active_ix, bpt__load_relaxed_u32(&bpt__active_ix) ^ 1u);   /* [G2] */
}

/* Step 8: wait, so that no thread still reads the old generation: step 11
   overwrites it, and unrefs what it held (>>deferred wait). */
static int bpt__wait_committed(bpt__change *c) {
    if (c->switched_off) {
        c->wait_deferred = 1;
        return 0;
    }
    bpt_thread_progress_wait();
    return 1;
}

/* Step 9: uninstall: restore the original word where no session's active
   generation has any flag left (the OR over all sessions is 0). Where
   this session's breakpoint is alone on the list (step 2), its staged
   flags are that OR: switching 10,000 counted functions off, reading
   their lists took 60 us of step 9's 270 (bench/pattern_scale.c steps,
   no worker). A refused mprotect leaves the words: their breakpoints find
   no active flag and do nothing. */
static int bpt__uninstall(bpt__change *c) {
    unsigned active = bpt_active_bp_ix();
    int i, nsites = 0, written, rc;
    for (i = 0; i < c->n; i++) {
        bpt_func *f = c->items[i].f;
        bpt__GenericBp *g;
        uint32_t all = 0;
        if (c->items[i].staged) continue;   /* its own breakpoint's active flags: the word stays */
        if (!f->installed) continue;
        if (c->items[i].alone) {   /* the OR is this breakpoint's flags: 0 */
            c->sites[nsites++] = f;
            continue;
        }
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
            all |= g->data[active].flags;
        if (!all) c->sites[nsites++] = f;
    }
    if ((rc = bpt__sites_write(c->sites, nsites, 0, &c->wrote_code, &c->batch, &written)) < 0) c->rc = rc;
    c->uninstalls = written;
    return written != 0;
}

/* Step 10: wait, so that no thread still runs a removed breakpoint word
   inside a pinned section. A thread that fetched the word before step 9 but
   pins only after this wait began is not covered: it is step 12's wait,
   and the hit's reading of the list head after its pin, that keep it off
   freed breakpoints (the model's no-step-12 mutant shows it). Also step
   8's wait, where step 8 deferred it, even if step 9 wrote nothing.
   >>deferred wait: Tracing.md waits at step 8 so that no word is restored
   while a thread still uses the old generation's enabled part of its
   breakpoint. Here nothing a hit does depends on the word once fetched:
   a native hit goes on through the padding and the stub, which stay, a
   slot's trampoline jumps to the target it holds itself, a VM runs the
   word bpt_vm_breakpoint returns, and step 9 reads only the new active
   generation's flags. What needs every thread off the old generation is
   step 11, which overwrites it and drops its references (the last one of
   a BpCount or a call_time table: kind_count.c, timem.c). So where step 9
   may restore words (some item's staged flags are 0), step 8 leaves its
   wait here, and one wait serves both: a switch-off of 10,000 counted
   functions with one worker waited twice, 55 and 15 us, and now once
   (bench/pattern_scale.c steps). Every wait after the commit still
   begins after it, and step 11 still runs after one. */
static int bpt__wait_uninstalled(bpt__change *c) {
    if (c->uninstalls) bpt__wait_after_write(c->wrote_code);
    else if (c->wait_deferred) bpt_thread_progress_wait();
    return c->uninstalls != 0 || c->wait_deferred;
}

/* Step 11: consolidate: make staging equal to active again, as
   consolidate_bp_data_session does, and unlink disabled breakpoints, one
   release store each [G1]. A thread walking the list may still stand on an
   unlinked breakpoint: it is freed only after step 12's wait. */
static int bpt__consolidate(bpt__change *c) {
    unsigned active = bpt_active_bp_ix();
    int i;
    for (i = 0; i < c->n; i++) {
        bpt__atomic_ptr *prev = &c->items[i].f->gen_bp;
        bpt__GenericBp *g;
        bpt_func *f = c->items[i].f;
        bpt__item_prefetch(c, i);   /* nothing is fresh by now: step 3 linked it */
        if (f->shortcut[active ^ 1].kind != f->shortcut[active].kind ||
            f->shortcut[active ^ 1].data != f->shortcut[active].data)   /* dir and off follow data */
            f->shortcut[active ^ 1] = f->shortcut[active];   /* only when it differs, as the hint */
        bpt__path_hint_update(f);
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev)) {
            if (g != c->items[i].g) { prev = &g->next; continue; }
            bpt__kinds_unref(&g->data[active ^ 1]);
            g->data[active ^ 1] = g->data[active];
            bpt__kinds_ref(&g->data[active]);
            if (g->data[active].flags == 0) {
                bpt__store_release_ptr(prev, bpt__load_relaxed_ptr(&g->next));   /* [G1] */
                g->next_to_free = c->to_free;
                c->to_free = g;
            }
            break;
        }
    }
    return 1;
}

/* Step 12: wait, because readers may still walk the lists that step 11
   changed; then free what it unlinked. */
static int bpt__free_unlinked(bpt__change *c) {
    int did = c->to_free != NULL;
    if (did) bpt_thread_progress_wait();
    while (c->to_free) {
        bpt__GenericBp *g = c->to_free;
        c->to_free = g->next_to_free;
        bpt__kinds_unref(&g->data[0]);
        bpt__kinds_unref(&g->data[1]);
        bpt__recycle_give(&bpt__bp_blocks, g);
    }
    return did;
}

/* Step 13: report the last step and release the permission. */
BPT__PRIVATE void bpt__change_end(uint64_t *t) {
    bpt__step_done(13, 1, t);
    bpt__permission_release();
}

/* Steps 2-12 for session s on functions fs[0..n), between the caller's
   bpt__change_begin (step 1) and bpt__change_end (step 13), each step
   reported to the observer with whether it had work. Stages with nothing
   to do are skipped. *committed (may be NULL) says which of two kinds an
   error is, which the caller cannot tell from its code: 0 when step 2
   refused (BPT_ENOMEM, a slot no longer mapped, no /proc/self/maps) and
   nothing changed; 1 when the change was committed (steps 3-12 ran, or
   there was nothing to change). Returns 0; step 2's refusal; or, committed,
   BPT_EPERM or BPT_ENOTPATCHABLE when a word could not be written (the
   settings changed, that word did not: see steps 5 and 9). A caller that
   acts on the outcome (forgets a session, remembers a pattern) must ask
   *committed, not the code. */
BPT__PRIVATE int bpt__protocol_run(bpt__session *s, bpt_func **fs, int n, const bpt__op *op, uint64_t *t,
                                   int *committed) {
    bpt__change c;
    int rc = bpt__allocate(&c, s, fs, n, op), step;
    if (committed) *committed = rc >= 0;
    if (rc < 0) return rc;
    bpt__step_done(2, c.allocated, t);
    if (c.n == 0) {   /* nothing to change */
        for (step = 3; step <= 12; step++) bpt__step_done(step, 0, t);
        bpt__change_free(&c);
        return 0;
    }
    bpt__step_done(3, bpt__stage(&c), t);
    bpt__step_done(4, bpt__wait_staged(&c), t);
    bpt__step_done(5, bpt__install(&c), t);
    bpt__step_done(6, bpt__wait_installed(&c), t);
    bpt__commit();
    bpt__step_done(7, 1, t);
    bpt__step_done(8, bpt__wait_committed(&c), t);
    bpt__step_done(9, bpt__uninstall(&c), t);
    bpt__step_done(10, bpt__wait_uninstalled(&c), t);
    bpt__step_done(11, bpt__consolidate(&c), t);
    bpt__step_done(12, bpt__free_unlinked(&c), t);
    bpt__change_free(&c);
    return c.rc;
}
/*** End of bp.c ***/

/*** Begin file funcs.c ***/
/* funcs.c: the function records (bpt_func) and their registration. A
   record names one function and its site: a VM instruction word or a
   native entry. The registry holds every registered record, for trace
   patterns to match (trace_pattern.c) and handles to be checked. ERTS
   knows its functions from the loader; a C program has none, so functions
   are registered, one by one (bpt_register_vm, bpt_register_native) or a
   module's patchable entries at once (bpt_register_module). A function
   registered while patterns are in force gets them at once, through the
   same protocol (bp.c), with no thread stopped. Everything here runs
   under the code modification permission. */

BPT__SHARED struct bpt__registry bpt__registry;   /* registry.h */

/* Make room for `extra` more functions. Returns 0 or BPT_ENOMEM. */
BPT__PRIVATE int bpt__registry_reserve(uint32_t extra) {
    if (bpt__registry.len + extra > bpt__registry.cap) {
        uint32_t cap = bpt__registry.cap ? bpt__registry.cap : 256;
        while (cap < bpt__registry.len + extra) cap *= 2;
        bpt_func **funcs = (bpt_func **)BPT_MALLOC(cap * sizeof *funcs);
        bpt__reg_key *keys = (bpt__reg_key *)BPT_MALLOC(cap * sizeof *keys);
        if (!funcs || !keys) {
            BPT_FREE(funcs);
            BPT_FREE(keys);
            return BPT_ENOMEM;
        }
        if (bpt__registry.len) {
            memcpy(funcs, bpt__registry.funcs, bpt__registry.len * sizeof *funcs);
            memcpy(keys, bpt__registry.keys, bpt__registry.len * sizeof *keys);
        }
        BPT_FREE(bpt__registry.funcs);
        BPT_FREE(bpt__registry.keys);
        bpt__registry.funcs = funcs;
        bpt__registry.keys = keys;
        bpt__registry.cap = cap;
    }
    if (bpt__ptrset_reserve(&bpt__registry.records, extra) < 0 || bpt__ptrset_reserve(&bpt__registry.sites, extra) < 0)
        return BPT_ENOMEM;
    return 0;
}

/* A zeroed record that starts a cache line (the layout in breakpoint.h
   counts on it), from BPT_MALLOC; or NULL. */
static bpt_func *bpt__func_alloc(void) {
    void *base = BPT_MALLOC(sizeof(bpt_func) + BPT__CACHE_LINE - 1);
    bpt_func *f;
    if (!base) return NULL;
    f = (bpt_func *)(((uintptr_t)base + BPT__CACHE_LINE - 1) & ~(uintptr_t)(BPT__CACHE_LINE - 1));
    memset(f, 0, sizeof *f);
    f->alloc_base = base;
    return f;
}

/* Free a record of bpt__func_alloc (NULL: nothing). */
BPT__PRIVATE void bpt__func_free(bpt_func *f) {
    if (f) BPT_FREE(f->alloc_base);
}

/* The shortcuts start the record's second line (breakpoint.h). */
typedef char bpt__func_shortcut_line[offsetof(struct bpt_func, shortcut) == BPT__CACHE_LINE || sizeof(void *) != 8
                                     ? 1 : -1];

/* A new, unregistered function record with interned names and no site yet
   (addr: a native function's entry, or NULL, for its name entry). The
   caller holds the permission. Returns 0, BPT_ENOMEM or BPT_ELIMIT (the
   name table is full); *out is NULL on an error. */
BPT__PRIVATE int bpt__func_new(const char *module, const char *name, int arity, bpt_format_fn format,
                         const void *addr, const char *who, bpt_func **out) {
    bpt_func *f = bpt__func_alloc();
    int rc;
    *out = NULL;   /* on every failure too: a caller's f is never left unset */
    if (!f || bpt__registry_reserve(1) < 0) {
        bpt__func_free(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    if (!(f->module = bpt__intern(module)) || !(f->name = bpt__intern(name))) {
        bpt__func_free(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    if ((rc = bpt__names_id(f->module, f->name, arity, format, addr, &f->fid)) < 0) {
        bpt__func_free(f);
        return bpt__fail(rc, "%s: cannot register %s:%s/%d: %s", who, module, name, arity, bpt__names_why(rc));
    }
    f->arity = arity;
    bpt__store_relaxed_ptr(&f->gen_bp, NULL);
    return (*out = f, 0);
}

/* Make f known: after bpt__registry_reserve, so it cannot fail. */
BPT__PRIVATE void bpt__registry_add(bpt_func *f, const void *site_key) {
    bpt__reg_key *k = &bpt__registry.keys[bpt__registry.len];
    k->module = f->module;
    k->name = f->name;
    k->arity = f->arity;
    f->registry_ix = bpt__registry.len;
    bpt__registry.funcs[bpt__registry.len++] = f;
    bpt__ptrset_add(&bpt__registry.records, f);
    bpt__ptrset_add(&bpt__registry.sites, site_key);
}

/* The registered functions that mfa matches, in registration order, into
   fs (room for bpt__registry.len). Returns how many.
   >>match: a pass over every registered function, which bpt_trace_pattern
   and bpt_trace_info make. It reads the registry's keys, not the records:
   a record's names sit on a line of its own, a miss per function once
   there are 10,000 (>>working set in bp.c), where the keys are one array
   that the processor streams in. What stays a miss is each name's bytes,
   asked for BPT__SET_AHEAD functions on (>>prefetch in port.h). Over
   10,000 functions with no worker, the match took 85 us reading the
   records (with their lines asked for ahead), and takes 45 reading the
   keys (bench/pattern_scale.c steps, an instrumented copy). */
BPT__PRIVATE int bpt__registry_match(const bpt__mfa *mfa, bpt_func **fs) {
    const bpt__reg_key *keys = bpt__registry.keys;
    uint32_t i, len = bpt__registry.len;
    int n = 0;
    for (i = 0; i < len; i++) {
        if (i + BPT__SET_AHEAD < len) BPT__PREFETCH_R(keys[i + BPT__SET_AHEAD].name);
        if (bpt__mfa_match(mfa, keys[i].module, keys[i].name, keys[i].arity)) fs[n++] = bpt__registry.funcs[i];
    }
    return n;
}

/* Records of native functions are never freed. A thread can be between the
   patched jump and its pin in the stub, where no wait sees it, and the stub
   then reads the record through the pointer in the padding: it must stay
   valid. Retired records are kept, and reused when the same function is
   registered again, so their number is bounded by the distinct functions
   ever registered. VM records are freed after a wait: the VM owns the window
   between its fetch and bpt_vm_breakpoint (see bpt_unregister). */
static bpt_func *bpt__retired;   /* under the permission, linked through next_retired */

static void bpt__func_release(bpt_func *f) {
    if (f->kind == BPT__SITE_NATIVE) {
        pthread_mutex_lock(&bpt__code_mod_permission);
        f->next_retired = bpt__retired;
        bpt__retired = f;
        pthread_mutex_unlock(&bpt__code_mod_permission);
        return;
    }
    bpt_thread_progress_wait();   /* a thread still inside bpt_vm_breakpoint(f) */
    bpt__func_free(f);
}

#if defined(BPT_NATIVE)
/* A retired record, unlinked from the retired list, or NULL: with slot
   NULL, a native entry's, for the function at fn (its padding points at
   the record); else a slot's (slots.c), for that slot and target (its
   trampoline already jumps there). */
BPT__PRIVATE bpt_func *bpt__retired_take(const void *fn, const void *slot, uint64_t target) {
    bpt_func **pp;
    for (pp = &bpt__retired; *pp; pp = &(*pp)->next_retired) {
        bpt_func *f = *pp;
        if (slot ? f->slot_prot && f->site == slot && f->orig_word == target : !f->slot_prot && f->fn == fn) {
            *pp = f->next_retired;
            return f;
        }
    }
    return NULL;
}

/* A retired record made new for module:name/arity, as bpt__func_new makes
   a fresh one (addr: what the name entry keeps, as there), every other
   field cleared. Returns 0, or BPT_ENOMEM or BPT_ELIMIT with f back on the
   retired list (something may still point at it: an entry's padding, a
   trampoline). */
BPT__PRIVATE int bpt__func_renew(bpt_func *f, const char *module, const char *name, int arity, const void *addr,
                                 const char *who) {
    const char *m = bpt__intern(module), *nm = bpt__intern(name);
    uint32_t fid = 0;
    int rc = m && nm && bpt__registry_reserve(1) == 0 ? bpt__names_id(m, nm, arity, NULL, addr, &fid) : BPT_ENOMEM;
    if (rc < 0) {
        f->next_retired = bpt__retired;
        bpt__retired = f;
        return bpt__fail(rc, "%s: cannot register %s:%s/%d: %s", who, module, name, arity, bpt__names_why(rc));
    }
    {
        void *base = f->alloc_base;
        memset(f, 0, sizeof *f);
        f->alloc_base = base;
    }
    f->module = m;
    f->name = nm;
    f->arity = arity;
    f->fid = fid;
    return 0;
}
#endif

/* What the registry's site set holds for f: a native entry's address, or
   the word a VM site or a slot switches. */
BPT__PRIVATE const void *bpt__site_key(const bpt_func *f) {
    return f->kind == BPT__SITE_NATIVE && !f->slot_prot ? f->fn : f->site;
}

/* The op a pattern's flags ask for (bp.c): BPT_OFF with no kind switches
   every kind off. */
BPT__PRIVATE bpt__op bpt__pattern_op(unsigned flags, bpt__ms *ms) {
    bpt__op op;
    op.kinds = flags & BPT__KINDS;
    op.how = flags & BPT__HOWS;
    op.ms = ms;
    if (op.how == BPT_OFF && !op.kinds) op.kinds = BPT__KINDS;
    return op;
}

/* Apply the patterns in force in every session to a newly registered
   function, in the order they were set: the same protocol, no thread stopped. */
BPT__PRIVATE int bpt__apply_patterns(bpt_func *f, uint64_t *t) {
    int i, rc;
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        bpt__pattern_entry *e;
        if (!s) continue;
        for (e = s->patterns; e; e = e->next) {
            bpt__op op;
            if (!bpt__mfa_match(&e->mfa, f->module, f->name, f->arity)) continue;
            op = bpt__pattern_op(e->flags, e->ms);
            if ((rc = bpt__protocol_run(s, &f, 1, &op, t, NULL)) < 0) return rc;
        }
    }
    return 0;
}

/* The checks every registration makes of its arguments (who: the API
   call; what: its site argument's name). Returns 0, BPT_EINVAL or
   BPT_ELIMIT. */
BPT__PRIVATE int bpt__register_args_check(const char *who, const char *what, const void *site, const char *module,
                                          const char *name, int arity, bpt_func **out) {
    if (!site || !module || !name || !out)
        return bpt__fail(BPT_EINVAL, "%s: %s, module, name and out must not be NULL", who, what);
    if (arity < 0 || arity > 255)
        return bpt__fail(BPT_EINVAL, "%s: arity %d is outside 0..255", who, arity);
    if (strlen(module) > BPT__NAME_MAX || strlen(name) > BPT__NAME_MAX)
        return bpt__fail(BPT_ELIMIT, "%s: module and name are limited to %d bytes", who, BPT__NAME_MAX);
    return 0;
}

int bpt_register_vm(bpt_vm_word *first_word, bpt_vm_word breakpoint_word, const char *module,
                    const char *name, int arity, const bpt_vm_ops *ops, bpt_func **out) {
    bpt_func *f;
    uint64_t t = bpt__now_ns();
    int rc;
    if ((rc = bpt__register_args_check("bpt_register_vm", "first_word", first_word, module, name, arity, out)) < 0 ||
        (rc = bpt__permission_seize("bpt_register_vm")) < 0)
        return rc;
    /* Duplicates first: a registered site may hold the breakpoint word. */
    if (bpt__ptrset_has(&bpt__registry.sites, first_word)) {
        bpt__permission_release();
        return bpt__fail(BPT_EEXIST, "bpt_register_vm: %s:%s/%d: the site %p is already registered",
                         module, name, arity, (void *)first_word);
    }
    if ((rc = bpt__site_vm_check(first_word, breakpoint_word)) < 0) {
        bpt__permission_release();
        return rc;
    }
    if ((rc = bpt__func_new(module, name, arity, ops ? ops->format : NULL, NULL, "bpt_register_vm", &f)) < 0) {
        bpt__permission_release();
        return rc;
    }
    f->kind = BPT__SITE_VM;
    f->site = first_word;
    f->orig_word = BPT_VM_FETCH(first_word);
    f->bp_word = breakpoint_word;
    f->word_size = sizeof(bpt_vm_word);
    f->ops = ops;
    bpt__registry_add(f, first_word);
    rc = bpt__apply_patterns(f, &t);
    bpt__permission_release();
    *out = f;
    return rc < 0 ? rc : 0;
}

#if defined(BPT_NATIVE)
/* How many registered functions are native: the address index
   (symbols.c) has an entry for each. */
BPT__PRIVATE uint32_t bpt__native_count(void) {
    uint32_t i, n = 0;
    for (i = 0; i < bpt__registry.len; i++) n += bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE;
    return n;
}

/* Undo bpt__native_new when registration fails later (under the
   permission). A record the function's padding already points at, from an
   earlier registration, goes back to the retired list: a thread may still
   be in that entry's stub and read it. Only a record nothing points at is
   freed. */
BPT__PRIVATE void bpt__native_discard(bpt_func *f) {
    if (!f->slot_prot) bpt__names_release(f->fid, f->fn);   /* its name's id: free for another */
    if (bpt__arch_padding_record(f->fn) == f) {
        f->next_retired = bpt__retired;
        bpt__retired = f;
    } else {
        bpt__func_free(f);
    }
}

/* A native function record from its checked layout (not yet registered). */
static int bpt__native_new(void *fn, const char *module, const char *name, int arity,
                           const bpt__entry_layout *l, const char *who, bpt_func **out) {
    bpt_func *f = bpt__retired_take(fn, NULL, 0);
    int rc;
    if (f) {   /* registered before: the padding already points at this record */
        if ((rc = bpt__func_renew(f, module, name, arity, fn, who)) < 0) return rc;
    } else if ((rc = bpt__func_new(module, name, arity, NULL, fn, who, &f)) < 0) {
        return rc;
    }
    f->kind = BPT__SITE_NATIVE;
    f->fn = fn;
    f->site = l->site;
    f->orig_word = l->orig_word;
    f->bp_word = l->bp_word;
    f->word_size = l->word_size;
    f->signs_lr = l->signs_lr;
    f->code_guarded = bpt__module_code_guarded(fn);   /* its code writes keep the guard (site_native.c) */
    *out = f;
    return 0;
}
#endif

int bpt_register_native(void *fn, const char *module, const char *name, int arity, bpt_func **out) {
#if !defined(BPT_NATIVE)
    (void)fn; (void)module; (void)name; (void)arity; (void)out;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_native: native entry patching needs gcc or clang on "
                     "x86-64 or aarch64 without BPT_NO_NATIVE; VM sites work everywhere");
#else
    bpt__entry_layout l;
    bpt__addr_index *ix;
    bpt_func *f = NULL;   /* set by bpt__native_new; gcc -O2 cannot see it once all is static and inlined */
    uint64_t t = bpt__now_ns();
    int rc;
    if ((rc = bpt__register_args_check("bpt_register_native", "fn", fn, module, name, arity, out)) < 0 ||
        (rc = bpt__arch_native_usable("bpt_register_native")) < 0 ||
        (rc = bpt__permission_seize("bpt_register_native")) < 0)
        return rc;
    bpt__hide_provenance(fn);   /* its pad, before fn, is read and written below */
    if (bpt__ptrset_has(&bpt__registry.sites, fn)) {
        bpt__permission_release();
        return bpt__fail(BPT_EEXIST, "bpt_register_native: %s:%s/%d at %p is already registered",
                         module, name, arity, fn);
    }
    memset(&l, 0, sizeof l);
    if ((rc = bpt__arch_entry_layout(fn, name, &l)) < 0 ||
        (rc = bpt__native_new(fn, module, name, arity, &l, "bpt_register_native", &f)) < 0) {
        bpt__permission_release();
        return rc;
    }
    if (!(ix = bpt__addr_index_alloc(bpt__native_count() + 1, "bpt_register_native"))) {
        bpt__native_discard(f);
        bpt__permission_release();
        return BPT_ENOMEM;
    }
    if ((rc = bpt__native_prepare(&f, &l, 1, "bpt_register_native")) < 0) {
        BPT_FREE(ix);
        bpt__native_discard(f);
        bpt__permission_release();
        return rc;
    }
    bpt__registry_add(f, fn);
    bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
    rc = bpt__apply_patterns(f, &t);
    bpt__permission_release();
    *out = f;
    return rc < 0 ? rc : 0;
#endif
}

#if defined(BPT_NATIVE)
/* The patchable entries of a module, as bpt__module_scan reports them. */
typedef struct bpt__module_entries {
    void **fn;
    char **name;
    uint64_t *size;
    int n, cap;
} bpt__module_entries;

static void bpt__module_entries_free(bpt__module_entries *e) {
    int i;
    for (i = 0; i < e->n; i++) BPT_FREE(e->name[i]);
    BPT_FREE(e->fn);
    BPT_FREE(e->name);
    BPT_FREE(e->size);
}

/* C++ names are shown demangled ("game::step(long)") where the program
   has a C++ runtime: a weak reference to the Itanium ABI's __cxa_demangle
   (libstdc++, libc++abi), 0 in a program without one, which keeps the
   symbol's name. An asm label, so that <cxxabi.h>'s declaration of the same
   function in the user's file does not conflict. Its result is malloc'd by
   the runtime: free(), not BPT_FREE. */
extern char *bpt__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status)
    __asm__("__cxa_demangle") __attribute__((weak));

static int bpt__module_collect(void *fn, const char *symbol, uint64_t size, void *user) {
    bpt__module_entries *e = (bpt__module_entries *)user;
    char *demangled = NULL;
    const char *name = symbol;
    size_t len;
    int status = -1;
    if (bpt__ptrset_has(&bpt__registry.sites, fn)) return 0;   /* registered already */
    /* bptrace's own functions, when the whole program is built with the
       patchable-entry flags: tracing the hit path would recurse into itself. */
    if (strncmp(symbol, "bpt_", 4) == 0) return 0;
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 256;
        void **fns = (void **)BPT_MALLOC(sizeof *fns * (size_t)cap);
        char **names = (char **)BPT_MALLOC(sizeof *names * (size_t)cap);
        uint64_t *sizes = (uint64_t *)BPT_MALLOC(sizeof *sizes * (size_t)cap);
        if (!fns || !names || !sizes) {
            BPT_FREE(fns); BPT_FREE(names); BPT_FREE(sizes);
            return bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for %d entries; nothing registered", cap);
        }
        if (e->n) {
            memcpy(fns, e->fn, sizeof *fns * (size_t)e->n);
            memcpy(names, e->name, sizeof *names * (size_t)e->n);
            memcpy(sizes, e->size, sizeof *sizes * (size_t)e->n);
        }
        BPT_FREE(e->fn); BPT_FREE(e->name); BPT_FREE(e->size);
        e->fn = fns; e->name = names; e->size = sizes; e->cap = cap;
    }
    if (strncmp(symbol, "_Z", 2) == 0 && bpt__cxa_demangle &&
        (demangled = bpt__cxa_demangle(symbol, NULL, NULL, &status)) && status == 0 &&
        strlen(demangled) <= BPT__NAME_MAX)
        name = demangled;   /* longer than a pattern can name: the symbol's prefix instead */
    len = strlen(name);
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* C++ symbols can be long: keep a prefix */
    if (!(e->name[e->n] = (char *)BPT_MALLOC(len + 1))) {
        free(demangled);
        return bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for a name; nothing registered");
    }
    memcpy(e->name[e->n], name, len);
    e->name[e->n][len] = '\0';
    free(demangled);
    e->size[e->n] = size;
    e->fn[e->n++] = fn;
    return 0;
}
#endif

int bpt_register_module(const char *module) {
#if !defined(BPT_NATIVE)
    (void)module;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_module: native entry patching needs gcc or clang on "
                     "x86-64 or aarch64 without BPT_NO_NATIVE");
#else
    bpt__module_entries e = { NULL, NULL, NULL, 0, 0 };
    bpt__entry_layout *ls = NULL;
    bpt__addr_index *ix = NULL;
    bpt_func **fs = NULL;
    const char *mod = NULL;
    uint64_t t = bpt__now_ns();
    int i, made = 0, rc;
    if ((rc = bpt__arch_native_usable("bpt_register_module")) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_register_module")) < 0) return rc;
    rc = bpt__module_scan(module, BPT__PAD_BYTES, &mod, bpt__module_collect, &e);
    if (rc >= 0 && e.n) {
        ls = (bpt__entry_layout *)BPT_MALLOC(sizeof *ls * (size_t)e.n);
        fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (size_t)e.n);
        if (!ls || !fs || bpt__registry_reserve((uint32_t)e.n) < 0)
            rc = bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for %d functions", e.n);
        else if (!(ix = bpt__addr_index_alloc(bpt__native_count() + (uint32_t)e.n, "bpt_register_module")))
            rc = BPT_ENOMEM;
    }
    /* Check every entry and make every record before touching any code:
       one refusal or one ENOMEM registers nothing. */
    for (i = 0; rc >= 0 && i < e.n; i++) {
        memset(&ls[i], 0, sizeof ls[i]);
        if ((rc = bpt__arch_entry_layout(e.fn[i], e.name[i], &ls[i])) < 0) break;
        if ((rc = bpt__native_new(e.fn[i], mod, e.name[i], 0, &ls[i], "bpt_register_module", &fs[i])) < 0) break;
        fs[i]->code_size = e.size[i];
        made++;
    }
    if (rc >= 0 && e.n) rc = bpt__native_prepare(fs, ls, e.n, "bpt_register_module");
    if (rc >= 0) {
        for (i = 0; i < e.n; i++) bpt__registry_add(fs[i], e.fn[i]);
        if (e.n) bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
        for (i = 0; i < e.n && rc >= 0; i++) rc = bpt__apply_patterns(fs[i], &t);
        if (rc >= 0) rc = e.n;
    } else {
        for (i = 0; i < made; i++) bpt__native_discard(fs[i]);
        BPT_FREE(ix);
    }
    bpt__permission_release();
    bpt__module_entries_free(&e);
    BPT_FREE(ls);
    BPT_FREE(fs);
    return rc;
#endif
}

/* Forget f; the caller holds the permission, then calls bpt__func_release. */
static void bpt__registry_remove(bpt_func *f) {
    uint32_t ix = f->registry_ix;
    if (f->kind == BPT__SITE_NATIVE && !f->slot_prot) bpt__names_release(f->fid, f->fn);
    bpt__registry.funcs[ix] = bpt__registry.funcs[--bpt__registry.len];
    bpt__registry.keys[ix] = bpt__registry.keys[bpt__registry.len];
    bpt__registry.funcs[ix]->registry_ix = ix;
    bpt__ptrset_remove(&bpt__registry.records, f);
    bpt__ptrset_remove(&bpt__registry.sites, bpt__site_key(f));
}

int bpt_unregister_module(const char *module) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    const char *base;
    size_t len;
    bpt_func **fs, **traced;
    void *ix = NULL;              /* bpt__addr_index *, with BPT_NATIVE */
    uint64_t t = bpt__now_ns();
    uint32_t i;
    int n = 0, k, slot, rc;
    if (!module) return bpt__fail(BPT_EINVAL, "bpt_unregister_module: module is NULL");
    base = strrchr(module, '/') ? strrchr(module, '/') + 1 : module;
    len = strlen(base);
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* registered cut, as module.c cuts it */
    if ((rc = bpt__permission_seize("bpt_unregister_module")) < 0) return rc;
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    traced = (bpt_func **)BPT_MALLOC(sizeof *traced * (bpt__registry.len + 1));
    if (!fs || !traced) {
        BPT_FREE(fs); BPT_FREE(traced);
        bpt__permission_release();
        return bpt__fail(BPT_ENOMEM, "bpt_unregister_module: no memory");
    }
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE && strncmp(bpt__registry.funcs[i]->module, base, len) == 0 &&
            bpt__registry.funcs[i]->module[len] == '\0')
            fs[n++] = bpt__registry.funcs[i];
#if defined(BPT_NATIVE)
    if (n && !(ix = bpt__addr_index_alloc(bpt__native_count(), "bpt_unregister_module"))) {
        BPT_FREE(fs); BPT_FREE(traced);
        bpt__permission_release();
        return BPT_ENOMEM;
    }
#endif
    /* Every session's breakpoints off, through the protocol, session by session. */
    for (slot = 0; slot < BPT_MAX_SESSIONS && rc >= 0; slot++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[slot]);
        int nt = 0;
        if (!s) continue;
        for (k = 0; k < n; k++) if (bpt__find_bp(fs[k], s)) traced[nt++] = fs[k];
        if (nt) rc = bpt__protocol_run(s, traced, nt, &off_all, &t, NULL);
    }
    /* A function whose word an earlier switch-off could not restore (mprotect
       refused, a foreign word there) has no breakpoint left, so no session
       switched it off above; it still holds its word. Refused, as
       bpt_unregister refuses it: forgotten, its entry would run the stub
       for good and refuse a new registration (found by review). */
    for (k = 0; rc >= 0 && k < n; k++)
        if (fs[k]->installed)
            rc = bpt__fail(BPT_EBUSY, "bpt_unregister_module: %s:%s/%d still has its breakpoint word (restoring it "
                           "was refused); once the cause is gone, switch a pattern that names it off again; "
                           "nothing unregistered", fs[k]->module, fs[k]->name, fs[k]->arity);
    if (rc >= 0) for (k = 0; k < n; k++) bpt__registry_remove(fs[k]);
#if defined(BPT_NATIVE)
    if (rc >= 0 && n) bpt__addr_index_publish((bpt__addr_index *)ix, bpt__registry.funcs, bpt__registry.len);
    else BPT_FREE(ix);
#else
    (void)ix;
#endif
    bpt__permission_release();
    BPT_FREE(traced);
    if (rc < 0) { BPT_FREE(fs); return rc; }
    if (n == 0) {
        BPT_FREE(fs);
        return bpt__fail(BPT_ENOENT, "bpt_unregister_module: no registered function of '%s'", base);
    }
    for (k = 0; k < n; k++) bpt__func_release(fs[k]);
    BPT_FREE(fs);
    return n;
}

int bpt_unregister(bpt_func *f) {
    void *ix = NULL;              /* bpt__addr_index *, with BPT_NATIVE */
    int rc;
    if (!f) return bpt__fail(BPT_EINVAL, "bpt_unregister: f is NULL");
    if ((rc = bpt__permission_seize("bpt_unregister")) < 0) return rc;
    if (!bpt__ptrset_has(&bpt__registry.records, f)) {
        bpt__permission_release();
        return bpt__fail(BPT_ENOENT, "bpt_unregister: %p is not a registered function", (void *)f);
    }
    if (bpt__load_relaxed_ptr(&f->gen_bp)) {
        bpt__GenericBp *g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
        /* The message is made under the permission: once it is released, a
           bpt_session_destroy may free that session and its name. */
        rc = bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d is traced by session '%s'",
                       f->module, f->name, f->arity, g->session->name);
        bpt__permission_release();
        return rc;
    }
    if (f->installed) {   /* an uninstall whose mprotect was refused left the word in place */
        rc = bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d still has its breakpoint word (restoring it was "
                       "refused); once the cause is gone, switch a pattern that names it off again",
                       f->module, f->name, f->arity);   /* under the permission: f is still registered */
        bpt__permission_release();
        return rc;
    }
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && !(ix = bpt__addr_index_alloc(bpt__native_count(), "bpt_unregister"))) {
        bpt__permission_release();
        return BPT_ENOMEM;
    }
#endif
    bpt__registry_remove(f);
#if defined(BPT_NATIVE)
    if (ix) bpt__addr_index_publish((bpt__addr_index *)ix, bpt__registry.funcs, bpt__registry.len);
#else
    (void)ix;
#endif
    bpt__permission_release();
    bpt__func_release(f);
    return 0;
}

int bpt_func_lookup(const char *module, const char *name, int arity, bpt_func **out) {
    uint32_t i;
    int rc;
    if (!module || !name || !out) return bpt__fail(BPT_EINVAL, "bpt_func_lookup: a NULL argument");
    if ((rc = bpt__permission_seize("bpt_func_lookup")) < 0) return rc;
    for (i = 0; i < bpt__registry.len; i++) {
        bpt_func *f = bpt__registry.funcs[i];
        if (f->arity == arity && strcmp(f->name, name) == 0 && strcmp(f->module, module) == 0) {
            *out = f;
            bpt__permission_release();
            return 0;
        }
    }
    bpt__permission_release();
    return bpt__fail(BPT_ENOENT, "bpt_func_lookup: %s:%s/%d is not registered", module, name, arity);
}

int bpt_func_count(void) {
    int n = bpt__permission_seize("bpt_func_count");
    if (n < 0) return n;
    n = (int)bpt__registry.len;
    bpt__permission_release();
    return n;
}
/*** End of funcs.c ***/

/*** Begin file slots.c ***/
/* slots.c: pointer slots as sites. A call into a shared library goes
   through an 8-byte slot of the caller's GOT (its PLT stub jumps through
   it; code built with -fno-plt calls through it), as a call from another
   module reaches an Erlang function through its export entry, where
   Tracing.md's global call trace breaks. An interpreter's dispatch table or
   an engine's table of systems is the same thing, built by hand. The slot
   is the site: it holds the target (the original word) or the address of
   a trampoline (the breakpoint word), and the protocol switches it with one
   aligned store, as it switches an entry word (site_native.c).

   A trampoline is a small function of bptrace's own, laid out as a
   BPT_TRACEABLE entry whose word always holds the breakpoint (sites.h,
   site_<arch>.c): the entry stub runs the hit with the caller's return
   address and argument registers as they are at any entry, and then jumps
   on to the target. So every kind works on a slot as on an entry: the
   arguments come from the registers, and return trace swaps the caller's
   return address.

   SL0. Trampolines live in pages bptrace maps for each registration. They
       are written while the pages are read+write, then made read+execute
       (W^X) and every thread's instruction stream is serialized (SYNC_CORE)
       before any slot can point at them. A page that a slot may point at
       is never writable again.
   SL1. A slot is written with one release store (bpt__slot_write,
       site_native.c; [SL1] in src/README.md's barrier pairs). A page that is not writable (a GOT under full RELRO,
       a table in .rodata) is made read+write for the batch of writes and
       given back its protection after.
   SL2. Records and trampolines are never freed: a thread may have loaded
       the slot's old value and be on its way into the trampoline, where no
       wait sees it, as for a native entry's padding (funcs.c). A slot
       registered again with the same target reuses its record.
   SL3. Lazy binding: an import slot the dynamic linker has not bound yet is
       bound first, to the target the linker would choose (module.c,
       >>imports): the slot then holds what it would hold after its first
       call. The bind is a compare-and-swap from the PLT address the scan
       saw: a lazy binding already in flight on another thread writes the
       same value, and a hook the program stored since stays (the first
       switch-on then says BPT_ENOTPATCHABLE). One still in flight when
       the breakpoint is installed (a thread preempted inside the dynamic
       linker for that whole time) would write the target over the
       trampoline's address: that is detected, not silently lost: the
       uninstall's check finds the slot changed (BPT_ENOTPATCHABLE, naming
       the dynamic linker), and a call through it meanwhile goes untraced.
   SL4. Calls that do not go through a slot are not traced through one: a
       library's calls to its own functions, and calls through another
       module's slots (register that module's imports too). */

#if defined(BPT_NATIVE)

/* >>maps: the process's mappings, from /proc/self/maps (proc(5)): where a
   slot's page protection comes from, and whether a target is code. */
typedef struct bpt__mapping {
    uintptr_t lo, hi;
    unsigned prot;
    int shared;                   /* MAP_SHARED: other processes read it too */
} bpt__mapping;
typedef struct bpt__maps {
    bpt__mapping *v;
    size_t n, cap;
} bpt__maps;

static int bpt__maps_read(bpt__maps *m, const char *who) {
    char line[512], perms[8];
    FILE *fp = fopen("/proc/self/maps", "re");
    int whole = 1;
    memset(m, 0, sizeof *m);
    if (!fp) return bpt__fail(BPT_ENOTSUP, "%s: cannot read /proc/self/maps (%s): the slots' mappings are "
                              "unknown", who, strerror(errno));
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int start = whole;        /* a long path's rest is not a line of its own */
        whole = strchr(line, '\n') != NULL;
        if (!start || sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || strlen(perms) != 4) continue;
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 64;
            bpt__mapping *v = (bpt__mapping *)BPT_MALLOC(sizeof *v * cap);
            if (!v) {
                fclose(fp);
                BPT_FREE(m->v);
                return bpt__fail(BPT_ENOMEM, "%s: no memory for the process's mappings", who);
            }
            if (m->n) memcpy(v, m->v, sizeof *v * m->n);
            BPT_FREE(m->v);
            m->v = v;
            m->cap = cap;
        }
        m->v[m->n].lo = (uintptr_t)lo;
        m->v[m->n].hi = (uintptr_t)hi;
        m->v[m->n].shared = perms[3] == 's';
        m->v[m->n++].prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                            (perms[2] == 'x' ? PROT_EXEC : 0);
    }
    fclose(fp);
    return 0;
}

/* The mapping that holds [addr, addr + len), or NULL. */
static const bpt__mapping *bpt__maps_find(const bpt__maps *m, uintptr_t addr, size_t len) {
    size_t i;
    for (i = 0; i < m->n; i++)
        if (addr >= m->v[i].lo && addr - m->v[i].lo + len <= m->v[i].hi - m->v[i].lo) return &m->v[i];
    return NULL;
}

/* Its protection, or -1. */
static int bpt__maps_prot(const bpt__maps *m, uintptr_t addr, size_t len) {
    const bpt__mapping *x = bpt__maps_find(m, addr, len);
    return x ? (int)x->prot : -1;
}

/* Step 2 of a change that writes slots (bpt__sites_batch_prepare): each
   slot's protection as it is now, which the batch opens and restores. The
   program may have changed it since registration (sealed a table it filled,
   say): a protection remembered from then would make the write fault, or
   take write access back from a page the program opened. A slot no
   longer mapped (its module unloaded without bpt_unregister_module) is
   marked BPT__SLOT_UNMAPPED in a switch-off (switch_off), which then
   forgets it without a write (bpt__sites_write): else it could never be
   switched off, its session never destroyed. Anything else refuses it. A
   slot mapped with no access (PROT_NONE) is refused by every change: its
   word is still there, and a switch-off that forgot it would leave the
   trampoline in the slot, unknown (found by review; t_slot_swap).
   Returns 0; BPT_EINVAL for a slot mapped with no access, or for one no
   longer mapped in a change that may switch something on; BPT_ENOTSUP,
   BPT_ENOMEM. */
BPT__PRIVATE int bpt__slots_prot_refresh(bpt_func **fs, int n, int switch_off) {
    bpt__maps maps;
    int i, rc = 0;
    if ((rc = bpt__maps_read(&maps, "bpt_trace_pattern")) < 0) return rc;
    for (i = 0; i < n && rc == 0; i++) {
        int p;
        if (fs[i]->kind != BPT__SITE_NATIVE || !fs[i]->slot_prot) continue;
        if ((p = bpt__maps_prot(&maps, (uintptr_t)fs[i]->site, sizeof(void *))) > 0) {
            if (fs[i]->page_prot != (unsigned)p) fs[i]->page_prot = (unsigned)p;   /* the stubs' line: where it changes */
        }
        else if (p == 0)   /* mapped with no access now: its word stays, until the program gives access back */
            rc = bpt__fail(BPT_EINVAL, "%s:%s: its slot %p is mapped with no access now (PROT_NONE); nothing "
                           "changed: change it again once the program gives access back", fs[i]->module,
                           fs[i]->name, fs[i]->site);
        else if (switch_off)   /* unmapped: nothing to write to */
            fs[i]->page_prot = BPT__SLOT_UNMAPPED;
        else
            rc = bpt__fail(BPT_EINVAL, "%s:%s: its slot %p is no longer mapped (its module unloaded without "
                           "bpt_unregister_module?); nothing changed (a switch-off forgets it)", fs[i]->module,
                           fs[i]->name, fs[i]->site);
    }
    BPT_FREE(maps.v);
    return rc;
}

/* One slot to register. */
typedef struct bpt__slot_req {
    void **slot;
    char *name;                   /* owned */
    uintptr_t target;
    uintptr_t unbound;            /* not bound yet by the dynamic linker: what the slot held (SL3); else 0 */
} bpt__slot_req;

typedef struct bpt__slot_reqs {
    bpt__slot_req *v;
    int n, cap;
    const char *pattern;          /* bpt_register_imports' filter on symbol names */
} bpt__slot_reqs;

static void bpt__slot_reqs_free(bpt__slot_reqs *r) {
    int i;
    for (i = 0; i < r->n; i++) BPT_FREE(r->v[i].name);
    BPT_FREE(r->v);
}

static int bpt__slot_reqs_add(bpt__slot_reqs *r, void **slot, const char *name, uintptr_t target,
                              uintptr_t unbound) {
    size_t len = strlen(name);
    char *copy;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        bpt__slot_req *v = (bpt__slot_req *)BPT_MALLOC(sizeof *v * (size_t)cap);
        if (!v) return bpt__fail(BPT_ENOMEM, "no memory for %d slots; nothing registered", cap);
        if (r->n) memcpy(v, r->v, sizeof *v * (size_t)r->n);
        BPT_FREE(r->v);
        r->v = v;
        r->cap = cap;
    }
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* a long C++ symbol: its prefix, as bpt_register_module */
    if (!(copy = (char *)BPT_MALLOC(len + 1))) return bpt__fail(BPT_ENOMEM, "no memory for a slot's name");
    memcpy(copy, name, len);
    copy[len] = '\0';
    r->v[r->n].slot = slot;
    r->v[r->n].name = copy;
    r->v[r->n].target = target;
    r->v[r->n++].unbound = unbound;
    return 0;
}

/* Functions that return twice or switch contexts: the frame return trace
   pushes at the first return is gone at the second (a longjmp back into
   setjmp's caller, vfork's child and parent, a context resumed), and the
   return trampoline would find no frame. Not registered. */
static int bpt__returns_twice(const char *name) {
    static const char *const names[] = { "setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp", "savectx", "vfork",
                                         "__vfork", "getcontext", "swapcontext" };
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) return 1;
    return 0;
}

/* bpt__module_imports' visitor: keep the slots whose name matches. */
static int bpt__imports_collect(void **slot, const char *name, uintptr_t target, uintptr_t unbound, void *user) {
    bpt__slot_reqs *r = (bpt__slot_reqs *)user;
    if (strncmp(name, "bpt_", 4) == 0) return 0;   /* bptrace's own API, from another module: would recurse */
    if (bpt__returns_twice(name)) return 0;
    if (r->pattern && !bpt__glob(r->pattern, name)) return 0;
    return bpt__slot_reqs_add(r, slot, name, target, unbound) < 0 ? BPT_ENOMEM : 1;
}

/* SL0: n trampolines' pages, read+write, zero-filled. NULL (with the
   error) when mmap refuses. */
static uint8_t *bpt__tramp_map(int n, size_t *bytes, const char *who) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    void *p;
    *bytes = ((size_t)n * BPT__TRAMP_BYTES + ps - 1) / ps * ps;
    p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        bpt__fail(BPT_ENOMEM, "%s: mmap of %zu bytes for trampolines refused: %s", who, *bytes, strerror(errno));
        return NULL;
    }
    return (uint8_t *)p;
}

/* Fill one trampoline for f (its record, registered next): the padding
   as registration writes a BPT_TRACEABLE entry's, and the breakpoint word
   in for good. Returns 0 or the layout's refusal (a record above 2^48). */
static int bpt__tramp_fill(uint8_t *block, bpt_func *f) {
    bpt__entry_layout l;
    uint8_t *fn = bpt__arch_tramp_init(block, (uintptr_t)f->orig_word);
    int rc;
    memset(&l, 0, sizeof l);
    if ((rc = bpt__arch_entry_layout(fn, f->name, &l)) < 0 || (rc = bpt__arch_put_record(l.pre, f)) < 0) return rc;
    memcpy(fn - BPT__PAD_BYTES, l.pre, BPT__PAD_BYTES);
    memcpy(l.site, &l.bp_word, l.word_size);    /* little-endian: the word's low bytes */
    f->fn = fn;
    f->code_size = BPT__TRAMP_BYTES - 32;        /* the function's part of the block */
    return 0;
}

/* Check one request against the mappings and the registry. Returns 1 (go
   on), 0 (skip: imports only) or a BPT_E* code. */
static int bpt__slot_check(const bpt__slot_req *q, const bpt__maps *maps, const char *module, int strict,
                           const char *who, unsigned *prot) {
    const bpt__mapping *x = bpt__maps_find(maps, (uintptr_t)q->slot, sizeof(void *));
    int p = x ? (int)x->prot : -1, tp;
    if (bpt__ptrset_has(&bpt__registry.sites, q->slot))
        return strict ? bpt__fail(BPT_EEXIST, "%s: %s:%s: the slot %p is already registered", who, module,
                                  q->name, (void *)q->slot)
                      : 0;
    if (p < 0)
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p lies outside any mapping", who, module, q->name,
                         (void *)q->slot);
    if (p & PROT_EXEC)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s: %s:%s: the slot %p lies in executable memory; a slot is data",
                         who, module, q->name, (void *)q->slot);
    if (x->shared)
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p lies in a shared mapping: another process would "
                         "read the trampoline's address, which is mapped here only", who, module, q->name,
                         (void *)q->slot);
    if (!(p & PROT_READ))
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p is not readable", who, module, q->name,
                         (void *)q->slot);
    tp = bpt__maps_prot(maps, q->target, 1);
    if (tp < 0 || !(tp & PROT_EXEC)) {
        if (!strict) return 0;   /* an import that is data after all (an untyped GLOB_DAT) */
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p holds %p, which is not code", who, module,
                         q->name, (void *)q->slot, (void *)q->target);
    }
    *prot = (unsigned)p;
    return 1;
}

/* A record for one checked request: a retired one for the same slot and
   target (its trampoline is ready: SL2), or a new one, to fill. */
static int bpt__slot_record(const bpt__slot_req *q, const char *module, int arity, unsigned prot,
                            const char *who, bpt_func **out, int *fresh) {
    bpt_func *f = bpt__retired_take(NULL, (const void *)q->slot, q->target);
    int rc;
    *fresh = !f;
    if (f) {   /* its trampoline stays: fn and code_size survive the renewal */
        void *fn = f->fn;
        uint64_t size = f->code_size;
        if ((rc = bpt__func_renew(f, module, q->name, arity, NULL, who)) < 0) return rc;
        f->fn = fn;
        f->code_size = size;
    } else if ((rc = bpt__func_new(module, q->name, arity, NULL, NULL, who, &f)) < 0) {
        return rc;
    }
    f->arity = arity;
    f->kind = BPT__SITE_NATIVE;
    f->slot_prot = prot;
    f->page_prot = prot;
    f->site = (void *)q->slot;
    f->orig_word = (uint64_t)q->target;
    f->word_size = sizeof(void *);
    *out = f;
    return 0;
}

/* SL3: bind a lazy import slot to its target, as the dynamic linker's
   first call through it would (its page is writable: the linker writes
   lazy slots there itself). A compare-and-swap from the PLT address the
   scan saw, as every slot write is [SL1]: a linker binding the same slot
   meanwhile has stored the same value, and a store of the program's since
   the scan (a plthook-style hook) stays. Such a slot holds neither what
   the record calls nor its trampoline: the first switch-on says
   BPT_ENOTPATCHABLE and leaves it alone (bpt__sites_write). A plain store
   here overwrote the program's hook (found by review, under gdb;
   t_imports_lazy). Release: the resolved target is code, complete before
   the module was mapped. */
static void bpt__slot_bind(const bpt__slot_req *q) {
    BPT_TEST_POINT("slots: about to bind a lazy slot");   /* t_imports_lazy */
    (void)bpt__cas_ptr((bpt__atomic_ptr *)(void *)q->slot, (void *)q->unbound, (void *)q->target);
}

/* Register the checked slots of reqs (bpt_register_imports: strict 0,
   skipping what is not a code slot or registered already;
   bpt_register_slot: strict 1, refusing instead). All or nothing, as
   bpt_register_module. Under the permission. Returns how many were
   registered, or a BPT_E* code. */
static int bpt__slots_register(bpt__slot_reqs *reqs, const bpt__maps *maps, const char *module, int arity,
                               int strict, const char *who, bpt_func **first) {
    bpt_func **fs = NULL;
    int *fresh = NULL, i, n = 0, nfresh = 0, rc, k;
    unsigned *prot = NULL;
    uint8_t *pages = NULL;
    size_t bytes = 0;
    bpt__addr_index *ix = NULL;
    uint64_t t = bpt__now_ns();
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (size_t)(reqs->n + 1));
    fresh = (int *)BPT_MALLOC(sizeof *fresh * (size_t)(reqs->n + 1));
    prot = (unsigned *)BPT_MALLOC(sizeof *prot * (size_t)(reqs->n + 1));
    rc = !fs || !fresh || !prot ? bpt__fail(BPT_ENOMEM, "%s: no memory for %d slots", who, reqs->n) : 0;
    /* Check everything, then make every record, before anything changes.
       The requests that pass move to the front. */
    for (i = 0, k = 0; rc >= 0 && i < reqs->n; i++) {
        unsigned p = 0;
        int ok = bpt__slot_check(&reqs->v[i], maps, module, strict, who, &p);
        if (ok < 0) {
            rc = ok;
        } else if (ok) {
            prot[k] = p;
            if (k != i) {
                reqs->v[k] = reqs->v[i];
                reqs->v[i].name = NULL;
            }
            k++;
        } else {
            BPT_FREE(reqs->v[i].name);   /* skipped */
            reqs->v[i].name = NULL;
        }
    }
    if (rc >= 0) reqs->n = k;
    if (rc >= 0 && reqs->n && (bpt__registry_reserve((uint32_t)reqs->n) < 0 ||
                               !(ix = bpt__addr_index_alloc(bpt__native_count() + (uint32_t)reqs->n, who))))
        rc = bpt__fail(BPT_ENOMEM, "%s: no memory to register %d slots", who, reqs->n);
    for (i = 0; rc >= 0 && i < reqs->n; i++) {
        if ((rc = bpt__slot_record(&reqs->v[i], module, arity, prot[i], who, &fs[i], &fresh[i])) < 0) break;
        n++;
        nfresh += fresh[i];
    }
    /* SL0: the new records' trampolines, written, then read+execute. */
    if (rc >= 0 && nfresh && !(pages = bpt__tramp_map(nfresh, &bytes, who))) rc = BPT_ENOMEM;
    for (i = 0, k = 0; rc >= 0 && i < n; i++)
        if (fresh[i]) rc = bpt__tramp_fill(pages + (size_t)BPT__TRAMP_BYTES * (size_t)k++, fs[i]);
    if (rc >= 0 && pages) {
        if (mprotect(pages, bytes, PROT_READ | PROT_EXEC) != 0)
            rc = bpt__fail(BPT_EPERM, "%s: mprotect of the trampolines read+execute refused: %s", who,
                           strerror(errno));
        else
            bpt__arch_sync_icache(pages, bytes);
    }
    if (rc < 0) {
        /* No slot points at the new trampolines yet: they and their
           records go. A reused record goes back to the retired list. */
        for (i = 0; i < n; i++) {
            if (fresh[i]) bpt__func_free(fs[i]);
            else bpt__native_discard(fs[i]);
        }
        if (pages) munmap(pages, bytes);
        BPT_FREE(ix);
        n = 0;
    } else if (n) {
        if (pages) bpt_thread_progress_wait_sync_core();   /* SL0: before any slot points there */
        for (i = 0; i < n; i++) {
            if (reqs->v[i].unbound) bpt__slot_bind(&reqs->v[i]);   /* SL3 */
            fs[i]->bp_word = (uint64_t)(uintptr_t)((uint8_t *)fs[i]->fn + BPT__TRAMP_ENTRY);
            bpt__registry_add(fs[i], fs[i]->site);
        }
        bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
        if (first) *first = fs[0];
        for (i = 0; i < n && rc >= 0; i++) rc = bpt__apply_patterns(fs[i], &t);
    } else {
        BPT_FREE(ix);
    }
    BPT_FREE(fs);
    BPT_FREE(fresh);
    BPT_FREE(prot);
    return rc < 0 ? rc : n;
}
#endif /* BPT_NATIVE */

int bpt_register_imports(const char *module, const char *pattern) {
#if !defined(BPT_NATIVE)
    (void)module; (void)pattern;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_imports: slot tracing needs gcc or clang on x86-64 or "
                     "aarch64 without BPT_NO_NATIVE (its trampolines are native code)");
#else
    bpt__slot_reqs reqs;
    bpt__maps maps;
    const char *mod = NULL;
    int rc;
    memset(&reqs, 0, sizeof reqs);
    if (module && !*module) return bpt__fail(BPT_EINVAL, "bpt_register_imports: module is \"\"");
    if (pattern && (!*pattern || strlen(pattern) > BPT__NAME_MAX))
        return bpt__fail(BPT_EPATTERN, "bpt_register_imports: the pattern must be 1..%d bytes", BPT__NAME_MAX);
    reqs.pattern = pattern && strcmp(pattern, "_") != 0 ? pattern : NULL;
    if ((rc = bpt__arch_native_usable("bpt_register_imports")) < 0) return rc;
    /* The scan and its lookups before the permission (>>imports, module.c),
       but not where the permission's own checks would refuse: the lookups
       take the dynamic linker's lock, which is no place for a pinned thread. */
    if ((rc = bpt__set_path_allowed("bpt_register_imports")) < 0) return rc;
    if ((rc = bpt__module_imports(module, &mod, bpt__imports_collect, &reqs)) < 0) {
        bpt__slot_reqs_free(&reqs);
        return rc;
    }
    if ((rc = bpt__permission_seize("bpt_register_imports")) < 0) {
        bpt__slot_reqs_free(&reqs);
        return rc;
    }
    if ((rc = bpt__maps_read(&maps, "bpt_register_imports")) == 0) {
        rc = bpt__slots_register(&reqs, &maps, mod, 0, 0, "bpt_register_imports", NULL);
        BPT_FREE(maps.v);
    }
    bpt__permission_release();
    bpt__slot_reqs_free(&reqs);
    return rc;
#endif
}

int bpt_register_slot(void **slot, const char *module, const char *name, int arity, bpt_func **out) {
#if !defined(BPT_NATIVE)
    (void)slot; (void)module; (void)name; (void)arity; (void)out;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_slot: slot tracing needs gcc or clang on x86-64 or "
                     "aarch64 without BPT_NO_NATIVE (its trampolines are native code)");
#else
    bpt__slot_reqs reqs;
    bpt__maps maps;
    bpt_func *f = NULL;
    int rc;
    memset(&reqs, 0, sizeof reqs);
    if ((rc = bpt__register_args_check("bpt_register_slot", "slot", slot, module, name, arity, out)) < 0) return rc;
    if ((uintptr_t)slot & (sizeof(void *) - 1))
        return bpt__fail(BPT_EINVAL, "bpt_register_slot: %s:%s: the slot %p is not pointer-aligned", module,
                         name, (void *)slot);
    if ((rc = bpt__arch_native_usable("bpt_register_slot")) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_register_slot")) < 0) return rc;
    if ((rc = bpt__maps_read(&maps, "bpt_register_slot")) == 0) {
        /* Read the slot only once it is known to be mapped; the same
           snapshot then serves the checks of bpt__slots_register. */
        int prot = bpt__maps_prot(&maps, (uintptr_t)slot, sizeof *slot);
        if (prot < 0 || !(prot & PROT_READ))
            rc = bpt__fail(BPT_EINVAL, "bpt_register_slot: %s:%s: the slot %p lies outside any readable "
                           "mapping", module, name, (void *)slot);
        if (rc == 0)
            rc = bpt__slot_reqs_add(&reqs, slot, name,
                                    (uintptr_t)bpt__load_relaxed_ptr((bpt__atomic_ptr *)slot), 0);
        if (rc == 0) rc = bpt__slots_register(&reqs, &maps, module, arity, 1, "bpt_register_slot", &f);
        BPT_FREE(maps.v);
    }
    bpt__permission_release();
    bpt__slot_reqs_free(&reqs);
    if (f) *out = f;
    return rc < 0 ? rc : 0;
#endif
}
/*** End of slots.c ***/

/*** Begin file session_life.c ***/
/* session_life.c: trace sessions are born and die, as OTP 27's
   trace:session_create/3 and trace:session_destroy/1. Creation publishes a
   session in a free slot under a weak id (a stale handle never matches);
   destruction switches off every breakpoint of the session through the
   protocol (bp.c), then unpublishes the session and frees it after a
   thread progress wait. */

int bpt_session_create(const bpt_session_desc *desc, bpt_session *out) {
    return bpt__session_create(desc, out, 0);
}

/* served: 1 for a control client's session (control.c), marked before it
   is published, so that a fork at any moment finds it marked. */
BPT__PRIVATE int bpt__session_create(const bpt_session_desc *desc, bpt_session *out, int served) {
    static bpt_session_desc defaults;   /* all zero, never written (not const: C++ wants a const initialised) */
    const bpt_session_desc *d = desc ? desc : &defaults;
    bpt__session *s = NULL;
    uint32_t chunks = d->chunks ? d->chunks : 16;   /* bpt__session_alloc's default */
    int slot, rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_create: out is NULL");
    if (d->chunk_bytes && (d->chunk_bytes < 4096 || d->chunk_bytes > (1u << 24) || (d->chunk_bytes & (d->chunk_bytes - 1))))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: chunk_bytes %u is not a power of two in 4096 .. 1<<24",
                         d->chunk_bytes);
    if (d->chunks && (d->chunks < 2 || d->chunks > 65536))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: chunks %u is not in 2 .. 65536", d->chunks);
    if (d->max_chunks && (d->max_chunks < chunks || d->max_chunks > 65536))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: max_chunks %u is not in chunks (%u) .. 65536",
                         d->max_chunks, chunks);
    if (d->flight_recorder && d->max_chunks && d->max_chunks != chunks)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: a flight recorder does not grow: max_chunks %u is not "
                         "chunks (%u)", d->max_chunks, chunks);
    if (d->rate_per_ms && !d->rate_max)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: rate_per_ms needs rate_max");
    if (d->rate_per_ms && d->rate_max > 0xffffffffu)   /* a window's count is 32 bits (session.c) */
        return bpt__fail(BPT_EINVAL, "bpt_session_create: rate_max %llu over 2^32 - 1 with rate_per_ms",
                         (unsigned long long)d->rate_max);
    if (d->name && strlen(d->name) > 63)
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: the name is over 63 bytes");
    if (d->usdt && d->tracer)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: usdt and a callback tracer exclude each other");
    if (d->usdt && !BPT_PROBES)
        return bpt__fail(BPT_ENOTSUP, "bpt_session_create: usdt: the USDT probes are compiled out here "
                         "(tcc, BPT_NO_PROBES, or not ELF on x86-64 or aarch64)");
    if ((rc = bpt__permission_seize("bpt_session_create")) < 0) return rc;
    for (slot = 0; slot < BPT_MAX_SESSIONS; slot++)
        if (!bpt__load_relaxed_ptr(&bpt__sessions.slot[slot])) break;
    if (slot == BPT_MAX_SESSIONS) {
        bpt__permission_release();
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: %d sessions are alive (BPT_MAX_SESSIONS)", BPT_MAX_SESSIONS);
    }
    if ((rc = bpt__session_alloc(d, &s)) < 0) {
        bpt__permission_release();
        return rc;
    }
    s->served = served;
    /* Weak id: a per-slot generation, never 0, so a stale handle never matches. */
    s->id = (++bpt__sessions.generation[slot] << BPT__SESSION_SLOT_BITS) | (uint64_t)slot;
    bpt__store_release_ptr(&bpt__sessions.slot[slot], s);   /* [S1] pairs with bpt__session_lookup (session.c) */
    BPT_PROBE(bptrace, session__create, s->id, s->name, s->usdt);   /* under the permission: s is alive */
    bpt__permission_release();
    out->id = s->id;
    return 0;
}

/* Every registered function with a breakpoint of session s. Caller frees. */
static int bpt__funcs_of_session(const bpt__session *s, bpt_func ***out, int *n) {
    uint32_t i;
    *n = 0;
    *out = (bpt_func **)BPT_MALLOC(sizeof **out * (bpt__registry.len ? bpt__registry.len : 1));
    if (!*out) return BPT_ENOMEM;
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__find_bp(bpt__registry.funcs[i], s)) (*out)[(*n)++] = bpt__registry.funcs[i];
    return 0;
}

int bpt_session_destroy(bpt_session handle) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    bpt__session *s;
    bpt_func **fs;
    bpt__pattern_entry *e;
    uint64_t t = bpt__now_ns();
    int n, rc, committed;
    if ((rc = bpt__change_begin("bpt_session_destroy", &t)) < 0) return rc;
    s = bpt__session_lookup(handle.id);
    if (!s) {
        bpt__change_end(&t);
        return bpt__fail(BPT_ESESSION, "bpt_session_destroy: session %llu is not alive (destroyed twice?)",
                         (unsigned long long)handle.id);
    }
    if (bpt__funcs_of_session(s, &fs, &n) < 0) {
        bpt__change_end(&t);
        return bpt__fail(BPT_ENOMEM, "bpt_session_destroy: out of memory; the session is unchanged");
    }
    rc = bpt__protocol_run(s, fs, n, &off_all, &t, &committed);
    if (!committed) {
        /* Refused at step 2 (no memory, a traced slot no longer mapped):
           nothing changed, and its breakpoints are still linked on its
           functions, where every hit reads the session. Freeing it here
           was a use after free (found by review; t_sessions). */
        BPT_FREE(fs);
        bpt__change_end(&t);
        return rc;
    }
    /* BPT_EPERM, BPT_ENOTPATCHABLE: committed, the breakpoints are off and
       unlinked, only some words stay (they find no breakpoint): the
       session goes on to be destroyed. */
    BPT_FREE(fs);
    /* Announced once committed: a refused destroy changed nothing (it was
       announced before the protocol ran: found by review). */
    BPT_PROBE(bptrace, session__destroy, s->id, s->name);
    /* From here the session is gone for everyone: late hits see dead, and
       lookups by its weak id fail. */
    bpt__store_release_u32(&s->dead, 1);   /* [S2] */
    bpt__store_release_ptr(&bpt__sessions.slot[bpt__session_slot(s->id)], NULL);   /* [S1] */
    bpt__session_wake(s);   /* [W1] a drainer asleep in bpt_session_wait returns, and finds it gone */
    while ((e = s->patterns) != NULL) {
        s->patterns = e->next;
        bpt__pattern_entry_free(e);
    }
    bpt__change_end(&t);
    /* Drainers, stats readers and hits that found the session before it was
       unpublished are pinned: wait for them before freeing. */
    bpt_thread_progress_wait();
    bpt__session_free(s);
    return rc < 0 ? rc : 0;
}
/*** End of session_life.c ***/

/*** Begin file trace_pattern.c ***/
/* trace_pattern.c: bpt_trace_pattern, as erlang:trace_pattern/3 (and
   trace:function/4 in a session): match a pattern against the registered
   functions, switch their breakpoints through the protocol (bp.c), and
   remember the pattern, so that functions registered later get it too
   (funcs.c replays it). */

/* A pattern to remember for functions registered later, or NULL (ENOMEM). */
static bpt__pattern_entry *bpt__pattern_entry_new(const bpt__mfa *mfa, unsigned flags, bpt__ms *ms) {
    bpt__pattern_entry *e = (bpt__pattern_entry *)BPT_MALLOC(sizeof *e);
    if (!e) return NULL;
    e->next = NULL;
    e->mfa = *mfa;
    e->flags = flags;
    e->ms = ms;
    bpt__ms_ref(ms);
    return e;
}

/* Keep e in the session's patterns (it is replayed, in order, on functions
   registered later). A BPT_OFF cancels the earlier entries with the same
   pattern whose kinds it switches off entirely, and is kept itself only if
   an entry remains that it could act on (one with a kind it switches off):
   so a pattern switched on and off again and again leaves nothing behind.
   Never fails: e was allocated before the protocol ran. */
static void bpt__remember_pattern(bpt__session *s, bpt__pattern_entry *e) {
    bpt__pattern_entry **pp = &s->patterns, *old;
    unsigned kinds = e->flags & BPT__KINDS;
    if ((e->flags & BPT__HOWS) == BPT_OFF) {
        int acts = 0;
        if (kinds == 0) kinds = BPT__KINDS;
        while ((old = *pp) != NULL) {
            unsigned okinds = old->flags & BPT__KINDS;
            int old_off = (old->flags & BPT__HOWS) == BPT_OFF;
            if (old_off && !okinds) okinds = BPT__KINDS;   /* BPT_OFF alone: every kind */
            if (memcmp(&old->mfa, &e->mfa, sizeof e->mfa) == 0 && (okinds & ~kinds) == 0) {
                *pp = old->next;
                bpt__pattern_entry_free(old);
            } else {
                acts |= !old_off && (okinds & kinds) != 0;   /* an entry this OFF switches off */
                pp = &old->next;
            }
        }
        if (!acts) { bpt__pattern_entry_free(e); return; }
    }
    while (*pp) pp = &(*pp)->next;
    *pp = e;
}

static int bpt__trace_pattern(bpt_session handle, const char *pattern, unsigned flags, const bpt_match *match,
                              uint64_t *change) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt__op op;
    bpt__pattern_entry *entry;
    bpt_func **fs;
    uint64_t t = bpt__now_ns();
    int n = 0, rc;
    memset(&mfa, 0, sizeof mfa);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0 || (rc = bpt__flags_check(flags)) < 0) return rc;
    op = bpt__pattern_op(flags, NULL);
    if ((match || (flags & BPT__CALL_ACTIONS)) && (op.kinds & BPT_CALL) && op.how == 0 &&
        (rc = bpt__ms_new(match, flags & BPT__CALL_ACTIONS, &op.ms)) < 0)
        return rc;
    if ((rc = bpt__change_begin("bpt_trace_pattern", &t)) < 0) {
        bpt__ms_unref(op.ms);
        return rc;
    }
    *change = bpt__probe_change_id();
    s = bpt__session_lookup(handle.id);
    if (!s) {
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_pattern: session %llu is not alive", (unsigned long long)handle.id);
        goto out;
    }
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len ? bpt__registry.len : 1));
    if (!fs) {
        rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to match '%s'", pattern);
        goto out;
    }
    n = bpt__registry_match(&mfa, fs);
#if defined(BPT_NATIVE)
    {   /* Return trace swaps return addresses: refused where the CPU checks them. */
        int i;
        for (i = 0; (flags & BPT__FRAME_ACTIONS) && op.how == 0 && i < n; i++)
            if (fs[i]->kind == BPT__SITE_NATIVE) {
                if ((rc = bpt__arch_native_usable("bpt_trace_pattern (return trace)")) < 0) {
                    BPT_FREE(fs);
                    goto out;
                }
                break;
            }
    }
#endif
    /* Everything that can fail is allocated before the protocol runs. The
       message's id last: a refused call must not use up an id. */
    if (op.ms && match && (rc = bpt__ms_message(op.ms, match->message)) < 0) {
        BPT_FREE(fs);
        goto out;
    }
    entry = bpt__pattern_entry_new(&mfa, flags, op.ms);
    if (!entry) rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to remember '%s'", pattern);
    else {
        /* Remembered when committed, even if some word could not be written
           (BPT_EPERM, BPT_ENOTPATCHABLE): the generations hold the new
           settings, and functions registered later must get them. An OFF
           left unremembered let the ON it cancels trace them (found by
           review; t_pattern_memory). */
        int committed;
        rc = bpt__protocol_run(s, fs, n, &op, &t, &committed);
        if (committed) bpt__remember_pattern(s, entry);
        else bpt__pattern_entry_free(entry);
    }
    BPT_FREE(fs);
    if (rc == 0) rc = n;
out:
    bpt__ms_unref(op.ms);
    bpt__change_end(&t);
    return rc;
}

/* bpt_trace_pattern, between the probes bptrace:pattern__start (the
   pattern, flags, session) and bptrace:pattern__done (the pattern, flags,
   the result: functions matched or a BPT_E* code, ns, and the id of the
   change its step probes carried, or 0 when no change began). */
int bpt_trace_pattern(bpt_session handle, const char *pattern, unsigned flags, const bpt_match *match) {
    uint64_t t = bpt__now_ns(), change = 0;
    int rc;
    BPT_PROBE(bptrace, pattern__start, pattern, flags, handle.id);
    rc = bpt__trace_pattern(handle, pattern, flags, match, &change);
    BPT_PROBE(bptrace, pattern__done, pattern, flags, rc, bpt__now_ns() - t, change);
    return rc;
}
/*** End of trace_pattern.c ***/

/*** Begin file trace_info.c ***/
/* trace_info.c: bpt_trace_info and bpt_trace_info_each, as
   erlang:trace_info/2 on a function: its flags, call_count, call_time and
   call_memory in one session, read from the active generation of its
   breakpoint. Time and memory are summed first, by the nine-step
   collection of timem.c (OTP 29's method). */

/* What bpt_trace_info reports of g (NULL: no breakpoint of the session). */
static int bpt__info_of(const bpt__GenericBp *g, unsigned what, bpt_info *out, bpt_info_process *procs, uint32_t cap) {
    unsigned ix = bpt_active_bp_ix();
    const bpt__GenericBpData *d;
    memset(out, 0, sizeof *out);
    out->procs = procs;
    out->procs_cap = cap;
    if (!g) return 0;
    d = &g->data[ix];
    /* Each kind that is on reports itself (kind_*.c), in the table's order. */
#define BPT__KIND_INFO(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_info(d, what, out);
    BPT_KINDS(BPT__KIND_INFO)
#undef BPT__KIND_INFO
    return 1;
}

/* The session's breakpoints on the registered functions matching mfa (or f
   alone, which the caller found registered), and the nine-step collection
   when time or memory is asked for. On an error the outputs are NULL, NULL
   and 0. */
static int bpt__info_gather(const bpt__session *s, const bpt__mfa *mfa, const bpt_func *f, unsigned what,
                            bpt_func ***fs_out, bpt__GenericBp ***gs_out, int *n_out, const char *who) {
    bpt_func **fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    bpt__GenericBp **gs = (bpt__GenericBp **)BPT_MALLOC(sizeof *gs * (bpt__registry.len + 1));
    bpt__GenericBp **timed = (bpt__GenericBp **)BPT_MALLOC(sizeof *timed * (bpt__registry.len + 1));
    unsigned ix = bpt_active_bp_ix();
    int i, matched, n = 0, nt = 0, rc = 0;
    *fs_out = NULL;
    *gs_out = NULL;
    *n_out = 0;
    if (!fs || !gs || !timed) {
        BPT_FREE(fs); BPT_FREE(gs); BPT_FREE(timed);
        return bpt__fail(BPT_ENOMEM, "%s: no memory", who);
    }
    if (f) {
        fs[0] = bpt__registry.funcs[f->registry_ix];
        matched = 1;
    } else {
        matched = bpt__registry_match(mfa, fs);
    }
    for (i = 0; i < matched; i++) {   /* fs[0..n) keeps the matched functions with a breakpoint */
        bpt_func *fi = fs[i];
        bpt__GenericBp *g;
        if (!(g = bpt__find_bp(fi, s)) && !f) continue;
        fs[n] = fi;
        gs[n++] = g;
        if (g && (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) &&
            (g->data[ix].flags & BPT__BPF_TIMEM_ON))
            timed[nt++] = g;
    }
    if (nt) rc = bpt__timem_collect(timed, nt);
    BPT_FREE(timed);
    if (rc < 0) { BPT_FREE(fs); BPT_FREE(gs); return rc; }
    *fs_out = fs;
    *gs_out = gs;
    *n_out = n;
    return 0;
}

#define BPT__INFO_ALL (BPT_INFO_FLAGS | BPT_INFO_COUNT | BPT_INFO_TIME | BPT_INFO_MEMORY)

int bpt_trace_info(bpt_session handle, const bpt_func *f, unsigned what, bpt_info *out) {
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs;
    uint32_t cap;
    int rc, n;
    if (!f || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_info: f and out must not be NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info: unknown what bits 0x%x", what);
    procs = out->procs;
    cap = procs ? out->procs_cap : 0;
    if ((rc = bpt__permission_seize("bpt_trace_info")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id)))
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_info: session %llu is not alive", (unsigned long long)handle.id);
    else if (!bpt__ptrset_has(&bpt__registry.records, f))
        rc = bpt__fail(BPT_ENOENT, "bpt_trace_info: %p is not a registered function", (const void *)f);
    else if ((rc = bpt__info_gather(s, NULL, f, what, &fs, &gs, &n, "bpt_trace_info")) == 0)
        bpt__info_of(n ? gs[0] : NULL, what, out, procs, cap);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return rc;
}

int bpt_trace_info_each(bpt_session handle, const char *pattern, unsigned what, bpt_info_fn fn, void *user) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs = NULL;
    int rc, n = 0, i;
    if (!fn) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: fn is NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: unknown what bits 0x%x", what);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_trace_info_each")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id))) {
        bpt__permission_release();
        return bpt__fail(BPT_ESESSION, "bpt_trace_info_each: session %llu is not alive", (unsigned long long)handle.id);
    }
    /* One collection for every function of the pattern. */
    if ((rc = bpt__info_gather(s, &mfa, NULL, what, &fs, &gs, &n, "bpt_trace_info_each")) < 0) {
        bpt__permission_release();
        return rc;
    }
    for (i = 0; i < n; i++) {
        bpt_info info;
        uint32_t cap = 0;
        if (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) {   /* room for every process of this function */
            unsigned ix = bpt_active_bp_ix();
            cap = bpt__timem_nprocs(bpt__timem_of(&gs[i]->data[ix]));
            BPT_FREE(procs);
            procs = cap ? (bpt_info_process *)BPT_MALLOC(sizeof *procs * cap) : NULL;
            if (cap && !procs) cap = 0;   /* totals still right; per process not shown */
        }
        bpt__info_of(gs[i], what, &info, procs, cap);
        fn(fs[i], fs[i]->module, fs[i]->name, fs[i]->arity, &info, user);
    }
    BPT_FREE(procs);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return n;
}
/*** End of trace_info.c ***/

/*** Begin file format.c ***/
/* format.c: trace messages as text, off the hot path (the drainer's or the
   tracer callback's thread). dbg's line shapes, recon_trace's timestamps. */

static int64_t bpt__realtime_offset_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC, once */
static pthread_once_t bpt__format_once = PTHREAD_ONCE_INIT;

/* Against CLOCK_MONOTONIC itself, which a message's ts_ns keeps to (its
   lane's anchor): not bpt__now_ns, the calibration's reading, which drifts
   from it with the process's age (t_clock: dbg's time). */
static void bpt__format_init(void) {
    struct timespec rt, mt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    bpt__realtime_offset_ns = (int64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) -
                              (int64_t)((uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec);
}

/* Append to a bounded buffer, remembering the length it wanted (snprintf's contract). */
typedef struct bpt__buf { char *p; size_t size, len; } bpt__buf;

static void bpt__bprintf(bpt__buf *b, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(b->len < b->size ? b->p + b->len : NULL, b->len < b->size ? b->size - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

/* recon_trace's clock: local wall time, HH:MM:SS.microseconds. */
static void bpt__format_time(bpt__buf *b, uint64_t mono_ns) {
    /* Unsigned: a timestamp read from a file may be anything, and wraps
       rather than overflows. */
    uint64_t ns = mono_ns + (uint64_t)bpt__realtime_offset_ns;
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (!localtime_r(&secs, &tm)) memset(&tm, 0, sizeof tm);
    bpt__bprintf(b, "%02d:%02d:%02d.%06ld", tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ns % 1000000000u / 1000u));
}

/* One value, as its type says; i64 through the site's formatter if it has
   one. A STR value is an offset into m->str, where the hit copied it; it
   is printed up to its NUL or the end of str, whichever comes first (a
   message built by hand without the NUL was read past its end; found by
   review). */
static void bpt__format_value(bpt__buf *b, const bpt_msg *m, uint64_t v, int type) {
    char tmp[128];
    double d;
    switch (type) {
    case BPT_ARG_U64: bpt__bprintf(b, "%llu", (unsigned long long)v); break;
    case BPT_ARG_PTR: bpt__bprintf(b, "0x%llx", (unsigned long long)v); break;
    case BPT_ARG_STR:
        bpt__bprintf(b, "\"%.*s\"", v < sizeof m->str ? (int)(sizeof m->str - v) : 0, v < sizeof m->str ? m->str + v : "");
        break;
    case BPT_ARG_F64: memcpy(&d, &v, sizeof d); bpt__bprintf(b, "%g", d); break;
    default:
        if (m->format) {
            m->format(tmp, sizeof tmp, v);
            bpt__bprintf(b, "%s", tmp);
        } else {
            bpt__bprintf(b, "%lld", (long long)v);
        }
    }
}

int bpt_format_dbg(const bpt_msg *m, char *buf, size_t size) {
    bpt__buf b;
    int i;
    if (!m || (!buf && size)) return bpt__fail(BPT_EINVAL, "bpt_format_dbg: m or buf is NULL");
    pthread_once(&bpt__format_once, bpt__format_init);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    bpt__format_time(&b, m->ts_ns);
    bpt__bprintf(&b, " (<%llu>) ", (unsigned long long)m->process);
    switch (m->type) {
    case BPT_MSG_CALL:
        bpt__bprintf(&b, "call %s:%s(", m->module, m->name);
        for (i = 0; i < m->nargs; i++) {
            if (i) bpt__bprintf(&b, ",");
            bpt__format_value(&b, m, m->args[i], m->argtype[i]);
        }
        bpt__bprintf(&b, ")");
        if (m->nargs < m->arity) bpt__bprintf(&b, "/%d", m->arity);   /* args not shown */
        if (m->user) bpt__bprintf(&b, " (%s)", m->user);
        if (m->caller_module) bpt__bprintf(&b, " (caller %s:%s/%d)", m->caller_module, m->caller_name, m->caller_arity);
        else if (m->caller) bpt__bprintf(&b, " (caller 0x%llx)", (unsigned long long)m->caller);
        break;
    case BPT_MSG_RETURN_FROM:   /* dbg: returned from m:f/a -> value */
        bpt__bprintf(&b, "returned from %s:%s/%d -> ", m->module, m->name, m->arity);
        bpt__format_value(&b, m, m->value, m->value_type);
        break;
    case BPT_MSG_EXCEPTION_FROM:   /* dbg: exception_from m:f/a {class,value} */
        bpt__bprintf(&b, "exception_from %s:%s/%d {%s,", m->module, m->name, m->arity,
                     m->exception_class ? m->exception_class : "error");
        bpt__format_value(&b, m, m->value, BPT_ARG_I64);
        bpt__bprintf(&b, "}");
        break;
    case BPT_MSG_RETURN_TO:   /* dbg: returning to m:f/a */
        if (m->module) bpt__bprintf(&b, "returning to %s:%s/%d", m->module, m->name, m->arity);
        else if (m->caller) bpt__bprintf(&b, "returning to 0x%llx", (unsigned long long)m->caller);
        else bpt__bprintf(&b, "returning to undefined");
        break;
    case BPT_MSG_DROPPED:
        bpt__bprintf(&b, "dropped %llu messages (buffer full)", (unsigned long long)m->value);
        break;
    case BPT_MSG_LIMIT:
        bpt__bprintf(&b, "rate limit tripped (%llu messages): the session stopped tracing",
                     (unsigned long long)m->value);
        break;
    default:
        bpt__bprintf(&b, "unknown message type %u", (unsigned)m->type);
    }
    return (int)b.len;
}

/* >>profile: tprof's table. Largest value first; ties by name. Bytes
   are call_memory's net, signed (api_info.h): a function whose calls
   freed more than they allocated ranks last, and prints below zero (taken
   unsigned, -100 B ranked first as 18446744073709551516; found by review). */
static int bpt__profile_tie(const bpt_profile_row *x, const bpt_profile_row *y) {
    int c;
    if ((c = strcmp(x->module ? x->module : "", y->module ? y->module : "")) != 0) return c;
    if ((c = strcmp(x->name ? x->name : "", y->name ? y->name : "")) != 0) return c;
    return x->process < y->process ? -1 : x->process > y->process;
}
static int bpt__profile_cmp_time(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    if (x->value != y->value) return x->value < y->value ? 1 : -1;
    return bpt__profile_tie(x, y);
}
static int bpt__profile_cmp_bytes(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    int64_t xv = (int64_t)x->value, yv = (int64_t)y->value;
    if (xv != yv) return xv < yv ? 1 : -1;
    return bpt__profile_tie(x, y);
}

int bpt_format_profile(bpt_profile_row *rows, int n, int memory, char *buf, size_t size) {
    bpt__buf b;
    uint64_t total = 0, calls = 0;
    int i, procs = 0, width = 44;   /* the name column: as wide as the widest name */
    char fn[300];
    if ((!rows && n > 0) || n < 0 || (!buf && size))
        return bpt__fail(BPT_EINVAL, "bpt_format_profile: rows NULL with n %d, n < 0, or buf NULL", n);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    if (n > 1) qsort(rows, (size_t)n, sizeof *rows, memory ? bpt__profile_cmp_bytes : bpt__profile_cmp_time);
    for (i = 0; i < n; i++) {
        total += rows[i].value;   /* bytes: modulo 2^64, read back as int64_t */
        calls += rows[i].calls;
        procs |= rows[i].process != 0;
    }
    for (i = 0; i < n; i++) {
        int w = snprintf(fn, sizeof fn, "<%llu>  %s:%s/%d", (unsigned long long)rows[i].process,
                         rows[i].module ? rows[i].module : "?", rows[i].name ? rows[i].name : "?", rows[i].arity);
        if (!procs) w -= snprintf(fn, sizeof fn, "<%llu>  ", (unsigned long long)rows[i].process);
        if (w > width) width = w < (int)sizeof fn - 1 ? w : (int)sizeof fn - 1;
    }
    bpt__bprintf(&b, "%-*s %10s %12s %10s  [    %%]\n", width, procs ? "PROCESS  FUNCTION" : "FUNCTION", "CALLS",
                 memory ? "BYTES" : "TIME(us)", memory ? "PER CALL" : "PER CALL");
    for (i = 0; i < n; i++) {
        const bpt_profile_row *r = &rows[i];
        double v = memory ? (double)(int64_t)r->value : (double)r->value;
        double pct = total ? 100.0 * v / (memory ? (double)(int64_t)total : (double)total) : 0.0;
        if (procs) snprintf(fn, sizeof fn, "<%llu>  %s:%s/%d", (unsigned long long)r->process,
                            r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        else snprintf(fn, sizeof fn, "%s:%s/%d", r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        if (memory)
            bpt__bprintf(&b, "%-*s %10llu %12lld %10.1f  [%5.1f]\n", width, fn, (unsigned long long)r->calls,
                         (long long)(int64_t)r->value, r->calls ? v / (double)r->calls : 0.0, pct);
        else
            bpt__bprintf(&b, "%-*s %10llu %12.1f %10.2f  [%5.1f]\n", width, fn, (unsigned long long)r->calls,
                         (double)r->value / 1e3, r->calls ? (double)r->value / 1e3 / (double)r->calls : 0.0, pct);
    }
    if (memory)
        bpt__bprintf(&b, "%-*s %10llu %12lld %10s  [100.0]\n", width, "", (unsigned long long)calls,
                     (long long)(int64_t)total, "");
    else
        bpt__bprintf(&b, "%-*s %10llu %12.1f %10s  [100.0]\n", width, "", (unsigned long long)calls, (double)total / 1e3, "");
    return (int)b.len;
}

/* >>stacks: each thread's open calls, rebuilt from its call and return
   messages: what the Chrome writer nests its events by and the folded
   writer names its stacks by. A thread keeps its first BPT__STACK_KEPT
   calls; deeper calls are only counted (depth goes on), and each of their
   returns pops one count and matches nothing kept. A return matches the
   newest open call of its function (module, name and arity; by pointer, or
   by text when a message's names were copied); the calls above that one
   were unwound without a message (BPT_RETURN without BPT_EXCEPTION, a
   longjmp past untraced frames).
   A call whose return is not traced (bpt_msg.no_return) opens nothing:
   nothing would end it, and each such call left one more open call on the
   stack, so that past BPT__STACK_KEPT of them the stack kept none of the
   calls after, and a traced caller's return was taken for the newest
   call's (its E never written). The Chrome writer shows it as an instant
   event, the folded writer charges it nothing.
   A DROPPED message cuts its thread's stack (bpt__stack_cut): the lost
   messages may have returned any of the open calls and opened others, so
   what is kept no longer says where the thread is. The stack starts again
   empty; returns of calls opened before the cut then match nothing, and
   calls after it start at the root, never under a call from before it.
   A stack's time never goes back (bpt__stack_ts): a message stamped before
   the stack's newest (messages merged from several sources, a host's own
   stamps) counts as at that newest time, so that a return is never before
   its call: a negative span was charged as 2^64 ns by the folded writer,
   and made an E before its B, which breaks the nesting, in the Chrome one
   (found by review). */
enum { BPT__STACK_KEPT = 64 };

typedef struct bpt__call {
    const char *module, *name;
    int arity;
    uint64_t start_ns;             /* the call's ts */
    uint64_t child_ns;             /* time in its returned traced callees (folded) */
} bpt__call;

struct bpt__stack {
    uint32_t tid, depth;           /* depth counts calls beyond the kept ones too */
    uint64_t process;              /* the process its calls ran in: one stack per thread and process */
    uint64_t last_ns;              /* the time of its newest call, return or cut (bpt__stack_ts) */
    bpt__call *call;               /* the kept calls: room for `room`, grown by doubling up to
                                      BPT__STACK_KEPT as the stack deepens (a fixed 64 cost 2.6 KB
                                      a thread and process: 260 MB for a host's 100,000 processes
                                      of a call or two; found by review) */
    uint32_t room;
};

/* A writer's stacks, one per track (thread and process), found through a
   hash index: a lookup costs O(1) expected however many threads a trace
   has (a scan of them all made a trace of 60,000 threads take 12 s for
   one call each, quadratic; found by review). */
struct bpt__tracks {
    struct bpt__stack *v;          /* the stacks, in the order of their first messages */
    uint32_t n, cap;
    uint32_t *ix;                  /* open addressing: a stack's index in v + 1; 0: empty */
    uint32_t ixcap;                /* a power of two, at least twice n; or 0 */
    uint64_t seed;                 /* the hash's key: a file cannot pick threads that all collide */
    uint64_t probes;               /* index slots looked at, rehashing aside: what the lookups
                                      cost (t_format_stacks counts it) */
    uint64_t *named;               /* Chrome: the switched processes named (bpt__tracks_named);
                                      open addressing, 0: empty */
    uint32_t named_n, named_cap;   /* named_cap a power of two, at least twice named_n; or 0 */
};

/* The slot hash of (thread, process), keyed (registry.h): the thread is
   hashed under the key before it meets the process. Combined first
   (process * G + tid), pairs chosen to give one value all collided
   whatever the key: a trace file's context records name any thread and
   process, and 20,000 such tracks took 399,980,000 probes (found by
   review; t_format_stacks case 6). */
static uint32_t bpt__tracks_hash(const struct bpt__tracks *s, uint32_t tid, uint64_t process) {
    return (uint32_t)bpt__hash_u64(process ^ bpt__hash_u64(tid, s->seed), s->seed);
}

static void bpt__tracks_free(struct bpt__tracks *s) {
    uint32_t i;
    for (i = 0; i < s->n; i++) BPT_FREE(s->v[i].call);
    BPT_FREE(s->v);
    BPT_FREE(s->ix);
    BPT_FREE(s->named);
    s->v = NULL;
    s->ix = NULL;
    s->named = NULL;
    s->n = s->cap = s->ixcap = 0;
    s->named_n = s->named_cap = 0;
}

/* Room for one more stack: v and the index grown by doubling (the index
   rehashed, kept at most half full). 0, or -1 with s as it was. */
static int bpt__tracks_room(struct bpt__tracks *s) {
    uint32_t i, k;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        struct bpt__stack *v = (struct bpt__stack *)BPT_MALLOC(sizeof *v * cap);
        if (!v) return -1;
        if (s->n) memcpy(v, s->v, sizeof *v * s->n);
        BPT_FREE(s->v);
        s->v = v;
        s->cap = cap;
    }
    if ((s->n + 1) * 2 > s->ixcap) {
        uint32_t cap = s->ixcap ? s->ixcap * 2 : 16, mask = cap - 1;
        uint32_t *ix = (uint32_t *)BPT_MALLOC(sizeof *ix * cap);
        if (!ix) return -1;
        memset(ix, 0, sizeof *ix * cap);
        if (!s->ixcap) s->seed = bpt__hash_seed(s);   /* the first index: its key */
        for (i = 0; i < s->n; i++) {
            for (k = bpt__tracks_hash(s, s->v[i].tid, s->v[i].process) & mask; ix[k]; k = (k + 1) & mask) {}
            ix[k] = i + 1;
        }
        BPT_FREE(s->ix);
        s->ix = ix;
        s->ixcap = cap;
    }
    return 0;
}

/* The stack of m's thread and process, or, with create, a new empty one
   added (*created set to 1; the stacks may move). NULL when it is not
   there and create is 0, or when it cannot be allocated. One stack per
   thread and process: processes that a host switches on one thread
   (bpt_process_switch) each have a stack of their own, so one's calls
   never nest under another's (a thread's one stack gave paths that never
   ran, and B/E events of two processes interleaved on one track; found by
   review). */
static struct bpt__stack *bpt__stack_of(struct bpt__tracks *s, const bpt_msg *m, int create, int *created) {
    struct bpt__stack *t;
    uint32_t k, i, mask = s->ixcap - 1;
    *created = 0;
    if (s->ixcap)
        for (k = bpt__tracks_hash(s, m->thread, m->process) & mask; (i = s->ix[k]) != 0; k = (k + 1) & mask) {
            s->probes++;
            if (s->v[i - 1].tid == m->thread && s->v[i - 1].process == m->process) return &s->v[i - 1];
        }
    if (!create || bpt__tracks_room(s) < 0) return NULL;
    mask = s->ixcap - 1;
    for (k = bpt__tracks_hash(s, m->thread, m->process) & mask; s->ix[k]; k = (k + 1) & mask) s->probes++;
    s->ix[k] = s->n + 1;
    t = &s->v[s->n++];
    memset(t, 0, sizeof *t);
    t->tid = m->thread;
    t->process = m->process;
    *created = 1;
    return t;
}

/* The slot of process p in the set v of cap slots: p's, or the empty one
   where it goes. */
static uint32_t bpt__named_slot(const struct bpt__tracks *s, const uint64_t *v, uint32_t cap, uint64_t p) {
    uint32_t k, mask = cap - 1;
    for (k = (uint32_t)bpt__hash_u64(p, s->seed) & mask; v[k] && v[k] != p; k = (k + 1) & mask) {}
    return k;
}

/* Whether switched process p needs its process_name record: 1 the first
   time, which adds p to the set of the processes named, 0 after: each
   new track of p (each thread that ran it) wrote one, duplicate records.
   The set is kept at most half full under the index's keyed hash (the
   seed is set: a track exists), so a check costs O(1) expected, not a
   scan of the tracks. p is never 0 (bpt__stack_switched): 0 marks an
   empty slot. */
static int bpt__tracks_named(struct bpt__tracks *s, uint64_t p) {
    uint32_t i, k;
    if (s->named_cap) {
        k = bpt__named_slot(s, s->named, s->named_cap, p);
        if (s->named[k] == p) return 0;
    }
    if ((s->named_n + 1) * 2 > s->named_cap) {   /* grown by doubling, rehashed */
        uint32_t cap = s->named_cap ? s->named_cap * 2 : 16;
        uint64_t *v = (uint64_t *)BPT_MALLOC(sizeof *v * cap);
        if (!v) return 1;   /* no memory to remember p: a name written twice is better than none */
        memset(v, 0, sizeof *v * cap);
        for (i = 0; i < s->named_cap; i++)
            if (s->named[i]) v[bpt__named_slot(s, v, cap, s->named[i])] = s->named[i];
        BPT_FREE(s->named);
        s->named = v;
        s->named_cap = cap;
    }
    s->named[bpt__named_slot(s, s->named, s->named_cap, p)] = p;
    s->named_n++;
    return 1;
}

/* m's time on t: its ts, or t's newest time when m's is earlier (>>stacks:
   a stack's time never goes back); it becomes t's newest time. */
static uint64_t bpt__stack_ts(struct bpt__stack *t, const bpt_msg *m) {
    if (m->ts_ns > t->last_ns) t->last_ns = m->ts_ns;
    return t->last_ns;
}

/* Room in t for a kept call at t->depth: 0, or -1 (no memory, t as it was). */
static int bpt__stack_room(struct bpt__stack *t) {
    uint32_t room;
    bpt__call *call;
    if (t->depth >= BPT__STACK_KEPT || t->depth < t->room) return 0;
    room = t->room ? t->room * 2 : 4;
    if (room > BPT__STACK_KEPT) room = BPT__STACK_KEPT;
    if (!(call = (bpt__call *)BPT_MALLOC(sizeof *call * room))) return -1;
    if (t->depth) memcpy(call, t->call, sizeof *call * t->depth);
    BPT_FREE(t->call);
    t->call = call;
    t->room = room;
    return 0;
}

/* A call on t: kept if t is not deeper than it keeps, else only counted.
   0, or -1 when there is no room for it and no memory for more: nothing
   changed (the caller does not count the message). */
static int bpt__stack_push(struct bpt__stack *t, const bpt_msg *m) {
    uint64_t ts;
    if (bpt__stack_room(t) < 0) return -1;
    ts = bpt__stack_ts(t, m);
    if (t->depth < BPT__STACK_KEPT) {
        bpt__call *c = &t->call[t->depth];
        c->module = m->module;
        c->name = m->name;
        c->arity = m->arity;
        c->start_ns = ts;
        c->child_ns = 0;
    }
    t->depth++;
    return 0;
}

static int bpt__text_eq(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* A return on t: the index of the kept call it returns from, which the
   caller pops (with the calls above it) by setting t->depth to it; -1 when
   no open call of that function is kept (tracing began inside it: nothing
   changes); -2 when t is deeper than it keeps (the return is from the
   newest call, which was not kept: its count is popped here). Its time
   is t->last_ns after it (bpt__stack_ts). */
static int bpt__stack_return(struct bpt__stack *t, const bpt_msg *m) {
    int k;
    (void)bpt__stack_ts(t, m);
    if (t->depth > BPT__STACK_KEPT) {
        t->depth--;
        return -2;
    }
    for (k = (int)t->depth - 1; k >= 0; k--) {
        const bpt__call *c = &t->call[k];
        if (c->arity == m->arity && bpt__text_eq(c->name, m->name) && bpt__text_eq(c->module, m->module)) break;
    }
    return k;
}

/* A DROPPED message on t: forget its open calls (after the Chrome writer
   closed them). The cut is where the loss was announced, which is after it
   happened: the notice comes with the first message that found room. Its
   time is t->last_ns after it (bpt__stack_ts). */
static void bpt__stack_cut(struct bpt__stack *t, const bpt_msg *m) {
    t->depth = 0;
    (void)bpt__stack_ts(t, m);
}

/* >>chrome: Chrome Trace Event JSON. */

/* The length of the well-formed UTF-8 sequence at s (1..4), or 0 when the
   bytes there are not one (RFC 3629: no overlong form, no surrogate, at
   most U+10FFFF). */
static int bpt__utf8_len(const unsigned char *s) {
    int n, i;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) { n = 2; cp = s[0] & 0x1F; }
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { n = 3; cp = s[0] & 0x0F; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { n = 4; cp = s[0] & 0x07; }
    else return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;   /* also a NUL: a sequence cut short */
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

/* ns as microseconds with 3 decimals, "-12.345", in buf (32 bytes):
   integer arithmetic, since printf's %f follows the program's LC_NUMERIC,
   and a decimal comma (setlocale(LC_ALL, "de_DE.UTF-8")) is not JSON
   (found by review). */
static const char *bpt__json_us(char buf[32], int64_t ns) {
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    snprintf(buf, 32, "%s%llu.%03llu", ns < 0 ? "-" : "", (unsigned long long)(a / 1000),
             (unsigned long long)(a % 1000));
    return buf;
}

/* The "pid" of a stack's track: the process id, or the bptrace process
   its calls ran in where a host switched processes (bpt_process_switch):
   each such process then shows as a process of its own, with a track per
   thread it ran on. */
static int bpt__stack_switched(const struct bpt__stack *t) {
    return t->process != 0 && t->process != t->tid;   /* 0, or the thread's id: the default process */
}
static long long bpt__chrome_pid(const struct bpt__stack *t) {
    return bpt__stack_switched(t) ? (long long)t->process : (long long)getpid();
}

/* Whether a write to out failed: its error indicator, which a failed
   write sets and nothing here clears. The calls' own results do not say
   it: a write that fills the buffer flushes it, and glibc's fprintf and
   fputc return success when that flush fails (the records in the buffer
   lost, the JSON torn, and bpt_chrome_close returned success; found by
   review). */
static int bpt__stream_failed(FILE *out) {
    return ferror(out) != 0;
}

int bpt_chrome_open(bpt_chrome *w, FILE *out) {
    if (!w || !out) return bpt__fail(BPT_EINVAL, "bpt_chrome_open: w and out must not be NULL");
    memset(w, 0, sizeof *w);
    w->out = out;
    if (fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out) < 0 || bpt__stream_failed(out)) w->err = 1;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_open: write failed: %s", strerror(errno)) : 0;
}

/* s's characters inside a JSON string: quotes, backslashes and control
   characters escaped, well-formed UTF-8 kept, and any other byte (a name
   from a C++ symbol or a VM in another encoding) written as U+FFFD: JSON
   text must be UTF-8 (RFC 8259), and one bad byte made the whole trace
   unreadable (found by review). */
static void bpt__json_chars(FILE *out, const char *s) {
    while (s && *s) {
        const unsigned char *u = (const unsigned char *)s;
        int n = bpt__utf8_len(u);
        if (*u == '"' || *u == '\\') fprintf(out, "\\%c", *u);
        else if (*u < 0x20) fprintf(out, "\\u%04x", *u);
        else if (n) fwrite(s, 1, (size_t)n, out);
        else fputs("\\ufffd", out);
        s += n ? n : 1;
    }
}

/* One event on t's track; its name "module:function/arity" written whole
   (a fixed buffer cut long C++ names, sometimes inside a character). An
   instant event ("i") is the thread's own ("s":"t"). */
static void bpt__chrome_event(bpt_chrome *w, const char *ph, const struct bpt__stack *t, uint64_t ts_ns,
                              const char *module, const char *name, int arity) {
    char ts[32];
    fprintf(w->out, "%s{\"name\":\"", w->events ? "," : "");
    bpt__json_chars(w->out, module ? module : "?");
    fputc(':', w->out);
    bpt__json_chars(w->out, name ? name : "?");
    if (fprintf(w->out, "/%d\",\"cat\":\"bptrace\",\"ph\":\"%s\"%s,\"ts\":%s,\"pid\":%lld,\"tid\":%u}\n", arity, ph,
                ph[0] == 'i' ? ",\"s\":\"t\"" : "", bpt__json_us(ts, (int64_t)(ts_ns - w->base_ns)),
                bpt__chrome_pid(t), (unsigned)t->tid) < 0)
        w->err = 1;
    w->events++;
}

/* Close t's kept calls down to depth d, newest first, at ts_ns. Calls
   deeper than the kept ones had no B event: they get no E either. */
static void bpt__chrome_close_to(bpt_chrome *w, struct bpt__stack *t, uint32_t d, uint64_t ts_ns) {
    if (t->depth > BPT__STACK_KEPT) t->depth = BPT__STACK_KEPT;
    while (t->depth > d) {
        const bpt__call *c = &t->call[--t->depth];
        bpt__chrome_event(w, "E", t, ts_ns, c->module, c->name, c->arity);
        w->closed++;
    }
}

/* A DROPPED message: close the thread's open calls at its ts (>>stacks: no
   later return may close them, which keeps every E after its own B), then
   mark the loss with a thread-scoped instant event, which Perfetto and
   speedscope show on the thread's track. */
static void bpt__chrome_dropped(bpt_chrome *w, struct bpt__stack *t, const bpt_msg *m) {
    char ts[32];
    uint64_t at = bpt__stack_ts(t, m);
    bpt__chrome_close_to(w, t, 0, at);
    bpt__stack_cut(t, m);
    fprintf(w->out, "%s{\"name\":\"dropped %llu\"", w->events ? "," : "", (unsigned long long)m->value);
    if (fprintf(w->out, ",\"cat\":\"bptrace\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%s,\"pid\":%lld,\"tid\":%u}\n",
                bpt__json_us(ts, (int64_t)(at - w->base_ns)), bpt__chrome_pid(t), (unsigned)t->tid) < 0)
        w->err = 1;
    w->events++;
}

int bpt_chrome_write(bpt_chrome *w, const bpt_msg *m) {
    struct bpt__stack *t;
    int k, created, opens;
    if (!w || !m || !w->out) return bpt__fail(BPT_EINVAL, "bpt_chrome_write: w and m must not be NULL, w open");
    if (m->type != BPT_MSG_CALL && m->type != BPT_MSG_RETURN_FROM && m->type != BPT_MSG_EXCEPTION_FROM &&
        m->type != BPT_MSG_DROPPED)
        return 0;
    if (!w->events && !w->base_ns) w->base_ns = m->ts_ns;
    opens = m->type == BPT_MSG_CALL || m->type == BPT_MSG_DROPPED;   /* both write on the thread's track */
    if (!w->tracks && (w->tracks = (struct bpt__tracks *)BPT_MALLOC(sizeof *w->tracks)) != NULL)
        memset(w->tracks, 0, sizeof *w->tracks);
    t = w->tracks ? bpt__stack_of(w->tracks, m, opens, &created) : NULL;
    if (!t) {
        if (opens)
            return bpt__fail(BPT_ENOMEM, "bpt_chrome_write: no memory for thread %u's state", (unsigned)m->thread);
        w->unmatched++;                                    /* a return on a thread with no open call */
        return 0;
    }
    if (created) {   /* the track's names: a switched process names its own (bpt__chrome_pid), once */
        fprintf(w->out, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%u,\"args\":{\"name\":\"thread %u\"}}\n",
                w->events ? "," : "", bpt__chrome_pid(t), (unsigned)t->tid, (unsigned)t->tid);
        w->events++;
        if (bpt__stack_switched(t) && bpt__tracks_named(w->tracks, t->process)) {
            fprintf(w->out, ",{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"args\":{\"name\":\"process %llu\"}}\n",
                    bpt__chrome_pid(t), (unsigned long long)t->process);
            w->events++;
        }
    }
    if (m->type == BPT_MSG_DROPPED) {
        bpt__chrome_dropped(w, t, m);
    } else if (m->type == BPT_MSG_CALL && m->no_return) {   /* nothing will end it: a moment (>>stacks) */
        bpt__chrome_event(w, "i", t, bpt__stack_ts(t, m), m->module, m->name, m->arity);
    } else if (m->type == BPT_MSG_CALL) {
        if (bpt__stack_push(t, m) < 0)
            return bpt__fail(BPT_ENOMEM, "bpt_chrome_write: no memory for thread %u's deeper stack", (unsigned)m->thread);
        if (t->depth <= BPT__STACK_KEPT)                   /* too deep: neither it nor its return is written */
            bpt__chrome_event(w, "B", t, t->last_ns, m->module, m->name, m->arity);
    } else if ((k = bpt__stack_return(t, m)) == -1) {
        w->unmatched++;                                    /* also the return of a call opened before a DROPPED */
    } else if (k >= 0) {
        bpt__chrome_close_to(w, t, (uint32_t)k + 1, t->last_ns);   /* calls above it, unwound without a message */
        t->depth = (uint32_t)k;
        bpt__chrome_event(w, "E", t, t->last_ns, m->module, m->name, m->arity);
    }
    if (bpt__stream_failed(w->out)) w->err = 1;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_write: write failed: %s", strerror(errno)) : 0;
}

int bpt_chrome_close(bpt_chrome *w) {
    uint32_t i;
    if (!w || !w->out) return bpt__fail(BPT_EINVAL, "bpt_chrome_close: w is NULL or not open");
    if (w->tracks) {
        for (i = 0; i < w->tracks->n; i++) bpt__chrome_close_to(w, &w->tracks->v[i], 0, w->tracks->v[i].last_ns);
        bpt__tracks_free(w->tracks);
        BPT_FREE(w->tracks);
        w->tracks = NULL;
    }
    if (fputs("]}\n", w->out) < 0 || fflush(w->out) != 0 || bpt__stream_failed(w->out)) w->err = 1;
    w->out = NULL;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_close: a write failed") : (int)w->events;
}

/* >>folded: per-thread stacks (>>stacks) rebuilt from calls and returns;
   own time per stack in an open-addressing table keyed by the stack's text. */
typedef struct bpt__fold_entry { char *stack; uint64_t ns; } bpt__fold_entry;

struct bpt_folded {
    struct bpt__tracks tracks;    /* each thread's (and process's) open calls */
    bpt__fold_entry *e;
    size_t ecap, used;
    char *text;                   /* the stack being charged, "a;b;c" (bpt__fold_text); grown */
    size_t text_cap;
};

int bpt_folded_new(bpt_folded **out) {
    bpt_folded *f;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_folded_new: out is NULL");
    if (!(f = (bpt_folded *)BPT_MALLOC(sizeof *f))) return bpt__fail(BPT_ENOMEM, "bpt_folded_new: no memory");
    memset(f, 0, sizeof *f);
    *out = f;
    return 0;
}

void bpt_folded_free(bpt_folded *f) {
    size_t i;
    if (!f) return;
    for (i = 0; i < f->ecap; i++) BPT_FREE(f->e[i].stack);
    BPT_FREE(f->e);
    bpt__tracks_free(&f->tracks);
    BPT_FREE(f->text);
    BPT_FREE(f);
}

static size_t bpt__fold_hash(const char *s) {
    size_t h = 1469598103934665603ull & (size_t)-1;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
    return h;
}

/* Add ns to the entry of stack (copied on first use). 0 or BPT_ENOMEM. */
static int bpt__fold_charge(bpt_folded *f, const char *stack, uint64_t ns) {
    size_t i;
    if ((f->used + 1) * 2 > f->ecap) {
        size_t cap = f->ecap ? f->ecap * 2 : 256, k;
        bpt__fold_entry *e = (bpt__fold_entry *)BPT_MALLOC(sizeof *e * cap);
        if (!e) return BPT_ENOMEM;
        memset(e, 0, sizeof *e * cap);
        for (k = 0; k < f->ecap; k++) {
            if (!f->e[k].stack) continue;
            for (i = bpt__fold_hash(f->e[k].stack) & (cap - 1); e[i].stack; i = (i + 1) & (cap - 1)) {}
            e[i] = f->e[k];
        }
        BPT_FREE(f->e);
        f->e = e;
        f->ecap = cap;
    }
    for (i = bpt__fold_hash(stack) & (f->ecap - 1); f->e[i].stack; i = (i + 1) & (f->ecap - 1))
        if (strcmp(f->e[i].stack, stack) == 0) { f->e[i].ns += ns; return 0; }
    if (!(f->e[i].stack = (char *)BPT_MALLOC(strlen(stack) + 1))) return BPT_ENOMEM;
    strcpy(f->e[i].stack, stack);
    f->e[i].ns = ns;
    f->used++;
    return 0;
}

/* A name's byte in a folded line: ';' separates frames and a line ends
   at '\n', so a name's own ';' is written ':' and its control bytes '?'
   (a VM's "m(Ljava/lang/String;)V" made two frames, and a name with a
   newline a line flamegraph.pl cannot read; found by review). */
static char bpt__fold_char(char c) {
    return c == ';' ? ':' : (unsigned char)c < 0x20 ? '?' : c;
}

/* The text of t's stack up to its kept call k, "a;b;c", in f->text (grown
   as it needs: names from a file may be 65,535 bytes each, and a fixed
   buffer cut deep stacks short, charging a leaf's time to a stack that
   never ran it; found by review). 0 or BPT_ENOMEM. */
static int bpt__fold_text(bpt_folded *f, const struct bpt__stack *t, int k) {
    size_t need = 1, len = 0;
    int i;
    for (i = 0; i <= k; i++) need += strlen(t->call[i].name ? t->call[i].name : "?") + 1;
    if (need > f->text_cap) {
        char *p = (char *)BPT_MALLOC(need);
        if (!p) return BPT_ENOMEM;
        BPT_FREE(f->text);
        f->text = p;
        f->text_cap = need;
    }
    for (i = 0; i <= k; i++) {
        const char *name = t->call[i].name ? t->call[i].name : "?";
        if (i) f->text[len++] = ';';
        while (*name) f->text[len++] = bpt__fold_char(*name++);
    }
    f->text[len] = '\0';
    return 0;
}

/* The time of t's kept call k's traced callees that returned: its own
   child_ns, and that of the calls above it, which are unwound without a
   message with it (>>stacks). Their own time is k's; their callees' was
   charged to their own stacks already, and is not charged again as k's
   (found by review: it was, and a stack's lines summed to more than its
   span). */
static uint64_t bpt__fold_child_ns(const struct bpt__stack *t, int k) {
    uint64_t ns = 0;
    uint32_t j, top = t->depth < BPT__STACK_KEPT ? t->depth : (uint32_t)BPT__STACK_KEPT;
    for (j = (uint32_t)k; j < top; j++) ns += t->call[j].child_ns;
    return ns;
}

/* A return on t that matches its kept call k: k's own time charged to its
   stack, its span added to its caller's callees; then k and the calls
   above it popped. On BPT_ENOMEM nothing changed but t's time: the
   message is not counted, and a retry counts it. */
static int bpt__fold_return(bpt_folded *f, struct bpt__stack *t, int k) {
    uint64_t elapsed = t->last_ns - t->call[k].start_ns;   /* >= 0: a stack's time never goes back */
    uint64_t child = bpt__fold_child_ns(t, k);
    if (bpt__fold_text(f, t, k) < 0 || bpt__fold_charge(f, f->text, elapsed > child ? elapsed - child : 0) < 0)
        return BPT_ENOMEM;
    t->depth = (uint32_t)k;
    if (k > 0) t->call[k - 1].child_ns += elapsed;
    return 0;
}

int bpt_folded_add(bpt_folded *f, const bpt_msg *m) {
    struct bpt__stack *t;
    int k, created;
    if (!f || !m) return bpt__fail(BPT_EINVAL, "bpt_folded_add: f and m must not be NULL");
    if (m->type != BPT_MSG_CALL && m->type != BPT_MSG_RETURN_FROM && m->type != BPT_MSG_EXCEPTION_FROM &&
        m->type != BPT_MSG_DROPPED)
        return 0;
    if (m->type == BPT_MSG_CALL && m->no_return) return 0;   /* nothing will end it: no time to charge (>>stacks) */
    t = bpt__stack_of(&f->tracks, m, m->type == BPT_MSG_CALL, &created);
    if (!t) {
        if (m->type == BPT_MSG_CALL)
            return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for thread %u's stack", (unsigned)m->thread);
        return 0;                                   /* a return or a drop on a thread with no open call */
    }
    if (m->type == BPT_MSG_CALL) {
        if (bpt__stack_push(t, m) < 0)
            return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for thread %u's deeper stack", (unsigned)m->thread);
        return 0;
    }
    if (m->type == BPT_MSG_DROPPED) {               /* the open calls' time is unknown: none is charged */
        bpt__stack_cut(t, m);
        return 0;
    }
    if ((k = bpt__stack_return(t, m)) < 0) return 0;   /* not kept, or began before tracing or a drop */
    if (bpt__fold_return(f, t, k) < 0) return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for a new stack");
    return 0;
}

static int bpt__fold_cmp(const void *a, const void *b) {
    const bpt__fold_entry *x = *(const bpt__fold_entry *const *)a, *y = *(const bpt__fold_entry *const *)b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return strcmp(x->stack, y->stack);
}

int bpt_folded_write(bpt_folded *f, FILE *out) {
    bpt__fold_entry **v;
    size_t i, n = 0;
    int err = 0;
    if (!f || !out) return bpt__fail(BPT_EINVAL, "bpt_folded_write: f and out must not be NULL");
    if (!f->used) return 0;
    if (!(v = (bpt__fold_entry **)BPT_MALLOC(sizeof *v * f->used))) return bpt__fail(BPT_ENOMEM, "bpt_folded_write: no memory");
    for (i = 0; i < f->ecap; i++) if (f->e[i].stack) v[n++] = &f->e[i];
    qsort(v, n, sizeof *v, bpt__fold_cmp);
    for (i = 0; i < n; i++)
        if (fprintf(out, "%s %llu\n", v[i]->stack, (unsigned long long)((v[i]->ns + 500) / 1000)) < 0) err = 1;
    if (bpt__stream_failed(out)) err = 1;
    BPT_FREE(v);
    return err ? bpt__fail(BPT_EINVAL, "bpt_folded_write: write failed") : (int)n;
}
/*** End of format.c ***/

/*** Begin file tracefile.c ***/
/* tracefile.c: trace files (.bpt; the format is in api_session.h,
   >>tracefile). Writing is draining: bpt_session_write takes each thread's
   undrained records from the session's lanes (session.c) and writes them as
   they are, one block a run, with the names they use written before them;
   a thread's records it takes up mid-chunk, where another writer or a
   drain stopped, start with a copy of the context record in effect there
   (bpt__lane_read_resume), so that every file reads on its own.
   Reading decodes the blocks with record.c, as a drain does, but with the
   file's names and clock calibration. Both run off the hot path. */
#include <sys/stat.h>
#include <sys/uio.h>

/* The header, as written (144 bytes, no padding). */
typedef struct bpt__file_header {
    char magic[8];
    uint32_t version, header_bytes, machine, pid, clock_source, reserved;
    uint64_t clock_hz, tick0, ns0, mul_whole, mul_frac, session;
    char name[64];
} bpt__file_header;
typedef char bpt__file_header_size[sizeof(bpt__file_header) == 144 ? 1 : -1];

static const char bpt__file_magic[8] = { 'B', 'P', 'T', 'R', 'A', 'C', 'E', 0 };
enum {
    BPT__BLOCK_NAMES = 'N', BPT__BLOCK_RECORDS = 'C',
    BPT__BLOCK_MAX = 1 << 26,     /* a reader refuses a larger block: corrupt */
    BPT__FILE_MAX_NAMES = 1 << 22 /* ids 1 .. this: names.c gives up to BPT__NAMES_PAGE * BPT__NAMES_PAGES */
};

#if defined(__x86_64__)
#  define BPT__ELF_MACHINE 62
#elif defined(__aarch64__)
#  define BPT__ELF_MACHINE 183
#else
#  define BPT__ELF_MACHINE 0
#endif

/* >>writer */

/* Write all of iov, retrying short writes and EINTR. 0, or -1 with errno;
   *done: the bytes that went out either way. */
static int bpt__writev_all(int fd, struct iovec *iov, int n, size_t *done) {
    *done = 0;
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        *done += (size_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) { w -= (ssize_t)iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= (size_t)w; }
    }
    return 0;
}

/* A write that failed after `done` bytes of a block (or of the header):
   the file must end at a whole block, or a retry's whole block after the
   cut one would throw the reader out of step for good. A file (lseek and
   ftruncate work) is cut back to where the block began, its offset there
   (the offset after a write is the end of what it wrote, O_APPEND too): a
   retry writes the block again. Anything else (a pipe, a socket, or a
   refused ftruncate) keeps the torn block, which a reader takes as the
   stream's end: the writer is broken and writes no more. errno kept. */
static void bpt__write_failed(bpt_file_writer *w, size_t done) {
    int e = errno;
    off_t end;
    if (done > 0) {
        end = lseek(w->fd, 0, SEEK_CUR);
        if (end < 0 || (uint64_t)end < done || ftruncate(w->fd, end - (off_t)done) < 0 ||
            lseek(w->fd, end - (off_t)done, SEEK_SET) < 0)
            w->broken = 1;
    }
    errno = e;
}

/* All of iov, or -1 with errno and the file as it was (bpt__write_failed). */
static int bpt__write_whole(bpt_file_writer *w, struct iovec *iov, int n) {
    size_t done;
    if (bpt__writev_all(w->fd, iov, n, &done) == 0) {
        w->bytes += done;
        return 0;
    }
    bpt__write_failed(w, done);
    return -1;
}

/* One block: its tag and length, then the payload's pieces, in one writev. */
static int bpt__write_block(bpt_file_writer *w, uint32_t tag, struct iovec *parts, int nparts) {
    struct iovec iov[4];
    uint32_t head[2];
    size_t bytes = 0;
    int i;
    for (i = 0; i < nparts; i++) { iov[i + 1] = parts[i]; bytes += parts[i].iov_len; }
    head[0] = tag;
    head[1] = (uint32_t)bytes;
    iov[0].iov_base = head;
    iov[0].iov_len = sizeof head;
    return bpt__write_whole(w, iov, nparts + 1);
}

static int bpt__write_header(bpt_file_writer *w, const bpt__session *s) {
    bpt__file_header h;
    bpt__clock_cal cal;
    struct iovec iov;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, bpt__file_magic, sizeof h.magic);
    h.version = BPT_FILE_VERSION;
    h.header_bytes = sizeof h;
    h.machine = BPT__ELF_MACHINE;
    h.pid = (uint32_t)getpid();
    bpt__clock_cal_get(&cal);
    h.clock_source = cal.source;
    h.clock_hz = cal.hz;
    h.tick0 = cal.tick0;
    h.ns0 = cal.ns0;
    h.mul_whole = cal.mul_whole;
    h.mul_frac = cal.mul_frac;
    h.session = s->id;
    memcpy(h.name, s->name, sizeof h.name);
    iov.iov_base = &h;
    iov.iov_len = sizeof h;
    if (bpt__write_whole(w, &iov, 1) < 0) return -1;
    w->header_written = 1;
    return 0;
}

/* A name's length in a names block: at most 65,535 bytes (a longer match
   spec message is cut there). */
static uint16_t bpt__name_len(const char *text) {
    size_t n = text ? strlen(text) : 0;
    return (uint16_t)(n > 0xffff ? 0xffff : n);
}

/* The names the file does not have yet, up to every id given so far: a
   record read after this was made after its ids were given ([N1], [R2]). */
static int bpt__write_names(bpt_file_writer *w) {
    uint32_t upto = bpt__names_count(), id;
    size_t bytes = 0, at = 0;
    unsigned char *buf;
    struct iovec iov;
    int rc;
    if (upto <= w->names_written) return 0;
    for (id = w->names_written + 1; id <= upto; id++) {
        const bpt__name *n = bpt__names_get(id);
        bytes += 16 + ((size_t)bpt__name_len(n->module) + bpt__name_len(n->name) + 7) / 8 * 8;
    }
    if (!(buf = (unsigned char *)BPT_MALLOC(bytes))) return -2;
    memset(buf, 0, bytes);
    for (id = w->names_written + 1; id <= upto; id++) {
        const bpt__name *n = bpt__names_get(id);
        uint16_t ml = bpt__name_len(n->module), nl = bpt__name_len(n->name);
        int32_t arity = n->arity;
        memcpy(buf + at, &id, 4);
        memcpy(buf + at + 4, &arity, 4);
        memcpy(buf + at + 8, &ml, 2);
        memcpy(buf + at + 10, &nl, 2);
        if (ml) memcpy(buf + at + 16, n->module, ml);
        memcpy(buf + at + 16 + ml, n->name, nl);
        at += 16 + ((size_t)ml + nl + 7) / 8 * 8;
    }
    iov.iov_base = buf;
    iov.iov_len = bytes;
    rc = bpt__write_block(w, BPT__BLOCK_NAMES, &iov, 1);
    BPT_FREE(buf);
    if (rc == 0) w->names_written = upto;
    return rc;
}

typedef struct bpt__file_out {
    bpt__lane_reader rd;
    bpt_file_writer *w;
    int err;                      /* 0, BPT_EIO or BPT_ENOMEM */
    int saved_errno;
} bpt__file_out;

static int bpt__file_out_fail(bpt__file_out *fo, int rc) {
    fo->err = rc == -2 ? BPT_ENOMEM : BPT_EIO;
    fo->saved_errno = errno;
    return 0;
}

/* A run of records goes out whole, after the names it may use: every
   name given before it was read (bpt__write_names writes up to the
   latest). Nothing here looks at the records one by one. */
static uint32_t bpt__file_take(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes) {
    bpt__file_out *fo = (bpt__file_out *)(void *)rd;
    uint64_t number = bpt__lane_number(lane);
    struct iovec iov[2];
    int rc;
    if (fo->err) return 0;
    if ((rc = bpt__write_names(fo->w)) < 0) return (uint32_t)bpt__file_out_fail(fo, rc);
    iov[0].iov_base = &number;
    iov[0].iov_len = sizeof number;
    iov[1].iov_base = (void *)(uintptr_t)p;
    iov[1].iov_len = bytes;
    if (bpt__write_block(fo->w, BPT__BLOCK_RECORDS, iov, 2) < 0) return (uint32_t)bpt__file_out_fail(fo, -1);
    return bytes;
}

/* Records a flight recorder overwrote: a DROPPED record of its own. */
static int bpt__file_gap(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks) {
    uint64_t rec[3];
    bpt__rec r;
    r.ticks = ticks;
    r.type = BPT_MSG_DROPPED;
    r.words = 1;
    r.info = 0;
    r.id = 0;
    memcpy(rec, &r, sizeof r);
    rec[2] = count;
    return bpt__file_take(rd, lane, (const unsigned char *)rec, sizeof rec) == sizeof rec;
}

/* The writer's reader id, given on its first write: unique in the process
   (any session's writers, on any thread: an atomic count), so that each
   file is a stream of its own to the lanes it reads (session.h,
   bpt__lane_reader): a new writer's file gets each thread's context where
   it takes up the thread's records. A writer zeroed anew is a new one. */
static bpt__atomic_u64 bpt__file_writers;
static uint64_t bpt__file_writer_id(bpt_file_writer *w) {
    if (!w->reader) w->reader = bpt__fetch_add_u64(&bpt__file_writers, 1) + BPT__READER_DRAIN + 1;
    return w->reader;
}

int bpt_session_write(bpt_session handle, bpt_file_writer *w) {
    bpt__file_out fo;
    bpt__thread *rec;
    bpt__session *s;
    int rc;
    if (!w || w->fd < 0) return bpt__fail(BPT_EINVAL, "bpt_session_write: w is NULL or its fd is < 0");
    if (w->broken)
        return bpt__fail(BPT_EIO, "bpt_session_write: fd %d ends in a block an earlier write cut short and could "
                         "not take back (not a regular file, or ftruncate failed): this writer writes no more", w->fd);
    if (!(s = bpt__session_pin(handle, "bpt_session_write", &rec, &rc))) return rc;
    fo.rd.take = bpt__file_take;
    fo.rd.gap = bpt__file_gap;
    fo.w = w;
    fo.err = 0;
    fo.saved_errno = 0;
    fo.rd.records = 0;
    fo.rd.id = bpt__file_writer_id(w);
    pthread_mutex_lock(&s->drain_lock);
    if (!w->header_written && bpt__write_header(w, s) < 0) bpt__file_out_fail(&fo, -1);
    if (!fo.err) bpt__session_read(s, &fo.rd);
    pthread_mutex_unlock(&s->drain_lock);
    bpt__unpin(rec);
    w->records += fo.rd.records;
    if (fo.err == BPT_ENOMEM) return bpt__fail(BPT_ENOMEM, "bpt_session_write: no memory for the names block");
    if (fo.err && w->broken)
        return bpt__fail(BPT_EIO, "bpt_session_write: write to fd %d failed partway: %s; the cut block could not "
                         "be taken back (not a regular file, or ftruncate failed): the stream ends there, and "
                         "this writer writes no more", w->fd, strerror(fo.saved_errno));
    if (fo.err) return bpt__fail(BPT_EIO, "bpt_session_write: write to fd %d failed: %s (the file still ends at a "
                                 "whole block; the records not written stay in the buffers: call again)",
                                 w->fd, strerror(fo.saved_errno));
    return (int)(fo.rd.records > INT_MAX ? INT_MAX : fo.rd.records);
}

/* >>reader */

struct bpt__file_lane { uint64_t lane; bpt__stream st; };

enum {
    BPT__FILE_NO_STREAM = -1, BPT__FILE_TOO_MANY = -2,
    /* The writer gives a file's names in id order from 1 (the n-th entry
       has id n): a reader refuses an id more than this past the entries
       before it, so that a small file cannot make it allocate for 4M
       names (corrupt). */
    BPT__FILE_NAMES_AHEAD = 1024,
    BPT__FILE_MAX_LANES = 1 << 28   /* more lanes than any session has: corrupt */
};

struct bpt_trace_file {
    FILE *in;
    bpt__file_header h;
    bpt__decoder dec;
    bpt__name *names;             /* by id; module and name point into `strings` blocks */
    uint32_t nnames;              /* room in names (a power of two, or 0) */
    uint64_t names_read;          /* the entries of the names blocks taken in */
    char **strings;               /* every names block's text, freed at close */
    uint32_t nstrings, strings_cap;
    uint32_t head[2];             /* the block being read: its tag, its payload's bytes */
    int stage;                    /* 0: a block's head is next; 1: its payload; 2: the payload is in `block` */
    int ended;                    /* the file ends in a block cut short: reads return 0 */
    unsigned char *block;         /* the last block's payload; reused (block_cap bytes) */
    uint32_t block_cap;
    uint32_t block_bytes, pos;    /* the records block being decoded: its bytes, the next record's offset */
    uint64_t lane;                /* its lane */
    int stream;                   /* its lane's index in streams, or BPT__FILE_NO_STREAM (not looked up yet) */
    int last_stream;              /* the index found last, tried first (or BPT__FILE_NO_STREAM) */
    struct bpt__file_lane *streams;   /* each lane's context, in the order of their first blocks */
    uint32_t nstreams, streams_cap;
    uint32_t *lane_index;         /* open addressing: lane -> its index in streams + 1; 0: empty */
    uint32_t lane_index_cap;      /* a power of two, at least twice nstreams; or 0 */
    uint64_t seed;                /* the lane hash's key: a file cannot pick lanes that all collide */
    uint64_t probes;              /* lane-table slots looked at, rehashing aside: what a lookup
                                     costs (t_tracefile_hostile counts it) */
    int corrupt;                  /* 1: every read from now on is BPT_EFORMAT */
    const char *corrupt_why;      /* what was found corrupt, for bpt_last_error */
};

static const bpt__name *bpt__file_name(void *ctx, uint32_t id) {
    bpt_trace_file *f = (bpt_trace_file *)ctx;
    return id < f->nnames && f->names[id].name ? &f->names[id] : NULL;
}

/* An array of n items of `size` bytes grown to `to` items (BPT_MALLOC has
   no realloc), the new items zeroed; NULL: no memory, the old one kept.
   Callers grow by doubling: a file of n blocks costs O(n) copying. */
static void *bpt__grow_to(void *old, size_t n, size_t to, size_t size) {
    unsigned char *p = (unsigned char *)BPT_MALLOC(to * size);
    if (!p) return NULL;
    if (n) memcpy(p, old, n * size);
    memset(p + n * size, 0, (to - n) * size);
    BPT_FREE(old);
    return p;
}

/* The lane hash, keyed by the reader (registry.h). */
static uint32_t bpt__file_lane_hash(const bpt_trace_file *f, uint64_t lane) {
    return (uint32_t)bpt__hash_u64(lane, f->seed);
}

/* The index in streams of lane `lane`'s stream, added on its first block:
   O(1) expected whatever the lanes (one lookup per records block).
   BPT__FILE_NO_STREAM: no memory (nothing lost: a retry looks again);
   BPT__FILE_TOO_MANY: more lanes than BPT__FILE_MAX_LANES (corrupt). */
static int bpt__file_stream(bpt_trace_file *f, uint64_t lane) {
    uint32_t mask = f->lane_index_cap - 1, k, i;
    if (f->last_stream != BPT__FILE_NO_STREAM && f->streams[f->last_stream].lane == lane) return f->last_stream;
    if (f->lane_index_cap)
        for (k = bpt__file_lane_hash(f, lane) & mask; (i = f->lane_index[k]) != 0; k = (k + 1) & mask) {
            f->probes++;
            if (f->streams[i - 1].lane == lane) return f->last_stream = (int)(i - 1);
        }
    if (f->nstreams >= BPT__FILE_MAX_LANES) return BPT__FILE_TOO_MANY;
    if (f->nstreams == f->streams_cap) {   /* a new lane: room for it first */
        uint32_t cap = f->streams_cap ? f->streams_cap * 2 : 16;
        struct bpt__file_lane *grown;
        if (!(grown = (struct bpt__file_lane *)bpt__grow_to(f->streams, f->nstreams, cap, sizeof *grown)))
            return BPT__FILE_NO_STREAM;
        f->streams = grown;
        f->streams_cap = cap;
    }
    if ((f->nstreams + 1) * 2 > f->lane_index_cap) {
        uint32_t cap = f->lane_index_cap ? f->lane_index_cap * 2 : 64, j;
        uint32_t *ix = (uint32_t *)BPT_MALLOC(cap * sizeof *ix);
        if (!ix) return BPT__FILE_NO_STREAM;
        memset(ix, 0, cap * sizeof *ix);
        mask = cap - 1;
        for (j = 0; j < f->nstreams; j++) {
            for (k = bpt__file_lane_hash(f, f->streams[j].lane) & mask; ix[k]; k = (k + 1) & mask) {}
            ix[k] = j + 1;
        }
        BPT_FREE(f->lane_index);
        f->lane_index = ix;
        f->lane_index_cap = cap;
    }
    for (k = bpt__file_lane_hash(f, lane) & mask; f->lane_index[k]; k = (k + 1) & mask) f->probes++;
    f->lane_index[k] = f->nstreams + 1;
    f->streams[f->nstreams].lane = lane;
    bpt__stream_init(&f->streams[f->nstreams].st);
    return f->last_stream = (int)f->nstreams++;
}

/* The reader stops at what: every read from now on is BPT_EFORMAT. */
static void bpt__file_stop(bpt_trace_file *f, const char *what) {
    f->corrupt = 1;
    f->corrupt_why = what;
}

static int bpt__file_corrupt(bpt_trace_file *f, const char *what) {
    bpt__file_stop(f, what);
    return bpt__fail(BPT_EFORMAT, "bpt_trace_file_read: %s", what);
}

/* Take in the names block in f->block: each entry checked against the
   block's end, its strings copied into one text allocation, NUL-terminated
   (room: the block's bytes and two NULs for each entry of at least 16
   bytes). A block without entries costs nothing. After BPT_ENOMEM it may
   be taken in again: an entry taken twice is the same entry. */
static int bpt__file_names(bpt_trace_file *f) {
    const unsigned char *block = f->block;
    uint32_t bytes = f->head[1], at = 0, k = 0;
    char *text;
    if (bytes < 16) return 0;
    if (f->nstrings == f->strings_cap) {
        uint32_t cap = f->strings_cap ? f->strings_cap * 2 : 16;
        char **grown = (char **)bpt__grow_to(f->strings, f->nstrings, cap, sizeof *grown);
        if (!grown) return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for the names");
        f->strings = grown;
        f->strings_cap = cap;
    }
    if (!(text = (char *)BPT_MALLOC(bytes + 2 * (bytes / 16) + 1)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a names block of %u bytes", bytes);
    f->strings[f->nstrings++] = text;
    for (; at + 16 <= bytes; k++) {
        uint32_t id;
        int32_t arity;
        uint16_t ml, nl;
        memcpy(&id, block + at, 4);
        memcpy(&arity, block + at + 4, 4);
        memcpy(&ml, block + at + 8, 2);
        memcpy(&nl, block + at + 10, 2);
        if (id == 0 || id > BPT__FILE_MAX_NAMES || at + 16 + (uint32_t)ml + nl > bytes)
            return bpt__file_corrupt(f, "a name entry is out of bounds");
        if (id > f->names_read + k + 1 + BPT__FILE_NAMES_AHEAD)
            return bpt__file_corrupt(f, "a name's id is far past the names before it (a writer gives them in order)");
        if (id >= f->nnames) {   /* doubling, as far as the entries read allow */
            uint32_t to = f->nnames ? f->nnames : 256;
            bpt__name *grown;
            while (to <= id) to *= 2;
            if (!(grown = (bpt__name *)bpt__grow_to(f->names, f->nnames, to, sizeof *grown)))
                return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for the names");
            f->names = grown;
            f->nnames = to;
        }
        memcpy(text, block + at + 16, ml);
        text[ml] = '\0';
        memcpy(text + ml + 1, block + at + 16 + ml, nl);
        text[ml + 1 + nl] = '\0';
        f->names[id].module = arity < 0 ? NULL : text;
        f->names[id].name = text + ml + 1;
        f->names[id].arity = arity;
        f->names[id].format = NULL;
        bpt__store_relaxed_u64(&f->names[id].addr, 0);   /* a file names functions, not addresses */
        text += ml + nl + 2;
        at += 16 + ((uint32_t)ml + nl + 7) / 8 * 8;
    }
    f->names_read += k;
    return 0;
}

/* The next records block into f; 1: it is ready, 0: the end (or a block
   cut short: the file ends at its last whole block), < 0: an error. The
   stages make BPT_ENOMEM resumable: the next call goes on from the head
   or payload it had read (a stream's bytes cannot be read twice). */
static int bpt__file_next_block(bpt_trace_file *f) {
    if (f->ended) return 0;
    for (;;) {
        int rc;
        if (f->stage == 0) {
            size_t got = fread(f->head, 1, sizeof f->head, f->in);
            if (got != sizeof f->head) {   /* the end; a head cut short ends the file for good */
                if (got) f->ended = 1;
                return 0;
            }
            if (f->head[1] > BPT__BLOCK_MAX || f->head[1] % 8 ||
                (f->head[0] != BPT__BLOCK_NAMES && f->head[0] != BPT__BLOCK_RECORDS) ||
                (f->head[0] == BPT__BLOCK_RECORDS && f->head[1] < 8))
                return bpt__file_corrupt(f, "a block's tag or length is not one this reader knows");
            f->stage = 1;
        }
        if (f->stage == 1) {
            f->block_bytes = f->pos = 0;
            if (f->head[1] > f->block_cap) {   /* the buffer, reused, grows by doubling */
                uint32_t cap = f->block_cap ? f->block_cap : 4096;
                unsigned char *p;
                while (cap < f->head[1]) cap *= 2;
                if (!(p = (unsigned char *)BPT_MALLOC(cap)))
                    return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a block of %u bytes",
                                     f->head[1]);
                BPT_FREE(f->block);
                f->block = p;
                f->block_cap = cap;
            }
            if (f->head[1] && fread(f->block, f->head[1], 1, f->in) != 1) { f->ended = 1; return 0; }
            f->stage = 2;
        }
        if (f->head[0] == BPT__BLOCK_NAMES) {
            if ((rc = bpt__file_names(f)) < 0) return rc;
            f->stage = 0;
            continue;
        }
        f->stage = 0;
        memcpy(&f->lane, f->block, 8);
        f->block_bytes = f->head[1];
        f->pos = 8;
        f->stream = BPT__FILE_NO_STREAM;
        return 1;
    }
}

/* A reader over in (which it owns from here, closed on failure too). */
static int bpt__trace_file_start(FILE *in, const char *what, const char *who, bpt_trace_file **out) {
    bpt_trace_file *f;
    if (!(f = (bpt_trace_file *)BPT_MALLOC(sizeof *f))) {
        fclose(in);
        return bpt__fail(BPT_ENOMEM, "%s: no memory for the reader", who);
    }
    memset(f, 0, sizeof *f);
    f->in = in;
    f->stream = f->last_stream = BPT__FILE_NO_STREAM;
    f->seed = bpt__hash_seed(f);
    if (fread(&f->h, sizeof f->h, 1, in) != 1 || memcmp(f->h.magic, bpt__file_magic, 8) != 0 ||
        f->h.version < 1 || f->h.version > BPT_FILE_VERSION || f->h.header_bytes != sizeof f->h) {
        bpt_trace_file_close(f);
        return bpt__fail(BPT_EFORMAT, "%s: %s is not a bptrace trace file of version 1 to %d",
                         who, what, BPT_FILE_VERSION);
    }
    f->h.name[sizeof f->h.name - 1] = '\0';
    f->dec.name = bpt__file_name;
    f->dec.ctx = f;
    f->dec.cal.source = f->h.clock_source;
    f->dec.cal.hz = f->h.clock_hz;
    f->dec.cal.tick0 = f->h.tick0;
    f->dec.cal.ns0 = f->h.ns0;
    f->dec.cal.mul_whole = f->h.mul_whole;
    f->dec.cal.mul_frac = f->h.mul_frac;
    f->dec.session = f->h.session;
    *out = f;
    return 0;
}

int bpt_trace_file_open(const char *path, bpt_trace_file **out) {
    FILE *in;
    struct stat st;
    if (!path || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_file_open: path or out is NULL");
    if (!(in = fopen(path, "rb")))
        return bpt__fail(BPT_ENOENT, "bpt_trace_file_open: %s: %s", path, strerror(errno));
    if (fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {   /* fopen opens one; its reads fail */
        fclose(in);
        return bpt__fail(BPT_ENOENT, "bpt_trace_file_open: %s: %s", path, strerror(EISDIR));
    }
    return bpt__trace_file_start(in, path, "bpt_trace_file_open", out);
}

int bpt_trace_file_fdopen(int fd, bpt_trace_file **out) {
    FILE *in;
    int own;
    if (fd < 0 || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_file_fdopen: fd %d < 0, or out is NULL", fd);
    if ((own = dup(fd)) < 0 || !(in = fdopen(own, "rb"))) {
        int e = errno;
        if (own >= 0) close(own);
        return bpt__fail(BPT_EIO, "bpt_trace_file_fdopen: fd %d: %s", fd, strerror(e));
    }
    return bpt__trace_file_start(in, "the stream", "bpt_trace_file_fdopen", out);
}

int bpt_trace_file_read(bpt_trace_file *f, bpt_msg *out, int max) {
    int n = 0, rc;
    if (!f || max < 0 || (max > 0 && !out))
        return bpt__fail(BPT_EINVAL, "bpt_trace_file_read: f is NULL, or out is NULL, or max (%d) < 0", max);
    if (f->corrupt) return bpt__fail(BPT_EFORMAT, "bpt_trace_file_read: the file is corrupt: %s", f->corrupt_why);
    while (n < max) {
        const bpt__rec *r;
        int bytes;
        if (f->pos >= f->block_bytes) {
            /* A block is used up: return what there is before reading the
               next, which a live stream (fdopen) may not have sent yet. */
            if (n > 0) return n;
            if ((rc = bpt__file_next_block(f)) <= 0) return rc;
        }
        r = (const bpt__rec *)(const void *)(f->block + f->pos);
        if (!(bytes = bpt__rec_check(r, f->block_bytes - f->pos))) {
            /* The sound records before it in its block are the file's: the
               messages decoded from them go out now, and the next call
               says BPT_EFORMAT (this one's error threw them away, as many
               as out had room for; found by review). */
            if (n > 0) {
                bpt__file_stop(f, "a record is corrupt");
                return n;
            }
            return bpt__file_corrupt(f, "a record is corrupt");
        }
        /* Once a block, at its first record (n is 0 there: nothing is lost). */
        if (f->stream < 0 && (f->stream = bpt__file_stream(f, f->lane)) < 0) {
            if (f->stream == BPT__FILE_TOO_MANY) return bpt__file_corrupt(f, "more threads than a session has");
            return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a thread's state");
        }
        n += bpt__rec_decode(&f->dec, &f->streams[f->stream].st, r, &out[n]);
        f->pos += (uint32_t)bytes;
    }
    return n;
}

int bpt_trace_file_info(bpt_trace_file *f, uint32_t *pid, bpt_clock *clock, char name[64]) {
    if (!f) return bpt__fail(BPT_EINVAL, "bpt_trace_file_info: f is NULL");
    if (pid) *pid = f->h.pid;
    if (clock) {
        clock->source = f->h.clock_source == 1 ? "tsc" : f->h.clock_source == 2 ? "cntvct" : "clock_gettime";
        clock->hz = f->h.clock_hz;
    }
    if (name) memcpy(name, f->h.name, sizeof f->h.name);
    return 0;
}

void bpt_trace_file_close(bpt_trace_file *f) {
    uint32_t i;
    if (!f) return;
    if (f->in) fclose(f->in);
    for (i = 0; i < f->nstrings; i++) BPT_FREE(f->strings[i]);
    BPT_FREE(f->strings);
    BPT_FREE(f->names);
    BPT_FREE(f->streams);
    BPT_FREE(f->lane_index);
    BPT_FREE(f->block);
    BPT_FREE(f);
}
/*** End of tracefile.c ***/

/*** Begin file root.c ***/
/* root.c: the root record (api_root.h): the one object an outside reader
   looks up by name, which tells it where bptrace's data is and how it is
   laid out, and bpt_root_check, which a reader runs on its copy before it
   trusts a single offset.

   The record is constant: every size and offset comes from the compiler
   (sizeof, offsetof) and every address from the loader (relocations), so it
   is right from the program's first instruction, before any bptrace call,
   and nothing on any path writes it. What moves is elsewhere: the layout
   sequence count (bp.c, [L1]) and the data the addresses lead to. */

#if defined(__x86_64__)
#  define BPT__ROOT_ARCH "x86_64"
#elif defined(__aarch64__)
#  define BPT__ROOT_ARCH "aarch64"
#else
#  define BPT__ROOT_ARCH "other"
#endif

/* Kept by the linker and found by name: exported, or, with BPTRACE_STATIC
   (several copies may be linked), a local symbol, which a reader finds in
   the file's .symtab. */
#if defined(BPTRACE_STATIC)
#  define BPT__ROOT_LINKAGE static
#elif defined(__cplusplus)
#  define BPT__ROOT_LINKAGE extern "C"
#else
#  define BPT__ROOT_LINKAGE
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(BPTRACE_STATIC)
#  define BPT__ROOT_KEEP __attribute__((used))
#elif defined(__GNUC__) || defined(__clang__)
#  define BPT__ROOT_KEEP __attribute__((used, visibility("default")))
#else
#  define BPT__ROOT_KEEP
#endif

#if defined(BPT_NATIVE)
#  define BPT__ROOT_PAD BPT__PAD_BYTES
#else
#  define BPT__ROOT_PAD 0
#endif

#define BPT__ROOT_FIELD_BYTES(type, member) ((uint32_t)sizeof(((type *)0)->member))
#define BPT__ROOT_STRUCT_OF(id, st, member) BPT_ROOT_S_##st,
#define BPT__ROOT_TYPE_THREAD  bpt__thread
#define BPT__ROOT_TYPE_FUNC    bpt_func
#define BPT__ROOT_TYPE_BP      bpt__GenericBp
#define BPT__ROOT_TYPE_BPDATA  bpt__GenericBpData
#define BPT__ROOT_TYPE_COUNT   bpt__BpCount
#define BPT__ROOT_TYPE_FRAME   bpt__frame
#define BPT__ROOT_TYPE_SESSION bpt__session
#define BPT__ROOT_TYPE_LANE    bpt__lane
#define BPT__ROOT_TYPE_PATTERN bpt__pattern_entry
#define BPT__ROOT_TYPE_TIMEM   bpt__BpTimem
#define BPT__ROOT_TYPE_TABLE   bpt__timem_table
#define BPT__ROOT_TYPE_CELL    bpt__timem_cell
#define BPT__ROOT_SIZE(id, type) (uint32_t)sizeof(type),
#define BPT__ROOT_OFF(id, st, member) (uint32_t)offsetof(BPT__ROOT_TYPE_##st, member),
#define BPT__ROOT_BYTES(id, st, member) BPT__ROOT_FIELD_BYTES(BPT__ROOT_TYPE_##st, member),
#define BPT__ROOT_KIND_FLAG(NAME, name, flag) flag,

BPT__ROOT_LINKAGE BPT__ROOT_KEEP const bpt_root_record bpt_root = {
    BPT_ROOT_MAGIC, BPT_ROOT_VERSION, (uint32_t)sizeof(bpt_root_record),
    BPTRACE_VERSION, BPT__ROOT_ARCH,
    BPT_ROOT_NSTRUCTS, BPT_ROOT_NFIELDS, BPT_ROOT_NGLOBALS, BPT_ROOT_NCONSTS,
    { BPT_ROOT_STRUCTS(BPT__ROOT_SIZE) },
    { BPT_ROOT_FIELDS(BPT__ROOT_STRUCT_OF) },
    { BPT_ROOT_FIELDS(BPT__ROOT_OFF) },
    { BPT_ROOT_FIELDS(BPT__ROOT_BYTES) },
    {   /* in BPT_ROOT_CONSTS's order */
        BPT_MAX_SESSIONS, BPT__LANE_DIRS, BPT__LANES_PER_DIR, BPT__COUNT_PAGES, BPT__COUNT_PAGE_SLOTS,
        BPT_SHADOW_FRAMES, BPT__NEST_BITS, BPT__ONLINE, BPT__NKINDS, BPT__KIX_COUNT, BPT__ROOT_PAD,
        BPT_MAX_THREADS, BPT__KIX_TIME, BPT__TIMEM_MORE
    },
    { BPT_KINDS(BPT__ROOT_KIND_FLAG) },
    {   /* in BPT_ROOT_GLOBALS's order */
        { &bpt__layout_seq }, { &bpt__progress.records }, { &bpt__progress.nrecords },
        { &bpt__progress.epoch }, { &bpt__progress.waits },
        { &bpt__registry.funcs }, { &bpt__registry.len },
        { &bpt__sessions.slot[0] }, { &bpt__active_ix }
    }
};
/* The tables above are positional: one entry per row of their lists. */
typedef char bpt__root_consts_fit[BPT_ROOT_NCONSTS == 14 && BPT_ROOT_NGLOBALS == 9 ? 1 : -1];

#undef BPT__ROOT_SIZE
#undef BPT__ROOT_OFF
#undef BPT__ROOT_BYTES
#undef BPT__ROOT_STRUCT_OF
#undef BPT__ROOT_KIND_FLAG

/* The structure each field must be in, by this header's list. */
static const uint8_t bpt__root_want_struct[BPT_ROOT_NFIELDS] = {
#define BPT__ROOT_STRUCT_OF(id, st, member) BPT_ROOT_S_##st,
    BPT_ROOT_FIELDS(BPT__ROOT_STRUCT_OF)
#undef BPT__ROOT_STRUCT_OF
};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
static int bpt__root_refuse(char *why, size_t why_len, int code, const char *fmt, ...) {
    va_list ap;
    if (why && why_len) {
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return code;
}
#define BPT__U(x) ((unsigned long long)(x))

/* The width a field must have: [lo, hi] bytes, and whether it must be a
   power of two (a word). Arrays have the length the consts give. */
static void bpt__root_field_want(const bpt_root_record *r, int f, uint64_t *lo, uint64_t *hi, int *word) {
    const uint32_t *c = r->consts;
    *word = 0;
    switch (f) {
    case BPT_ROOT_F_THREAD_SHADOW: *lo = *hi = 16; return;
    case BPT_ROOT_F_THREAD_SHADOW_DEPTH: *lo = *hi = 8; return;
    case BPT_ROOT_F_THREAD_COUNTS: *lo = *hi = 8ull * c[BPT_ROOT_C_COUNT_PAGES]; return;
    case BPT_ROOT_F_BP_DATA: *lo = *hi = 2ull * r->struct_bytes[BPT_ROOT_S_BPDATA]; return;
    case BPT_ROOT_F_BPDATA_DATA: *lo = *hi = 8ull * c[BPT_ROOT_C_NKINDS]; return;
    case BPT_ROOT_F_SESSION_LANE_DIR: *lo = *hi = 8ull * c[BPT_ROOT_C_LANE_DIRS]; return;
    case BPT_ROOT_F_TIMEM_TABLES: *lo = *hi = 8ull * c[BPT_ROOT_C_MAX_THREADS]; return;
    case BPT_ROOT_F_TABLE_CELLS: *lo = *hi = r->struct_bytes[BPT_ROOT_S_CELL]; return;
    case BPT_ROOT_F_SESSION_NAME: case BPT_ROOT_F_PATTERN_MODULE: case BPT_ROOT_F_PATTERN_FUNCTION:
        *lo = 2; *hi = 4096; return;   /* a NUL-terminated string */
    case BPT_ROOT_F_THREAD_NEXT: case BPT_ROOT_F_FUNC_MODULE: case BPT_ROOT_F_FUNC_NAME:
    case BPT_ROOT_F_FUNC_FN: case BPT_ROOT_F_FUNC_GEN_BP: case BPT_ROOT_F_BP_SESSION:
    case BPT_ROOT_F_BP_NEXT: case BPT_ROOT_F_FRAME_F: case BPT_ROOT_F_SESSION_TRACER:
    case BPT_ROOT_F_SESSION_PATTERNS: case BPT_ROOT_F_PATTERN_NEXT:
    case BPT_ROOT_F_TIMEM_MORE: case BPT_ROOT_F_TIMEM_CARRIED:
        *lo = *hi = 8; return;          /* a pointer: 64-bit targets only */
    default: *lo = 1; *hi = 8; *word = 1; return;
    }
}

int bpt_root_check(const bpt_root_record *r, size_t bytes, char *why, size_t why_len) {
    int i;
    if (why && why_len) why[0] = 0;
    if (!r) return bpt__root_refuse(why, why_len, BPT_EINVAL, "no root record given");
    if (bytes < sizeof(r->magic) + sizeof(r->version) || r->magic != BPT_ROOT_MAGIC)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "not a bptrace root record: magic %#llx, not %#llx",
                                BPT__U(bytes >= sizeof(r->magic) ? r->magic : 0), BPT__U(BPT_ROOT_MAGIC));
    if (r->version != BPT_ROOT_VERSION)
        return bpt__root_refuse(why, why_len, BPT_ENOTSUP, "root layout version %llu; this reader reads version %llu",
                                BPT__U(r->version), BPT__U(BPT_ROOT_VERSION));
    if (bytes < sizeof *r || r->bytes != sizeof *r)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root record of %llu bytes, %llu expected",
                                BPT__U(bytes < sizeof *r ? bytes : r->bytes), BPT__U(sizeof *r));
    if (r->nstructs != BPT_ROOT_NSTRUCTS || r->nfields != BPT_ROOT_NFIELDS ||
        r->nglobals != BPT_ROOT_NGLOBALS || r->nconsts != BPT_ROOT_NCONSTS)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root tables of %llu structures and %llu fields do not match "
                                "this reader's", BPT__U(r->nstructs), BPT__U(r->nfields));
    if (!memchr(r->bptrace_version, 0, sizeof r->bptrace_version) || !memchr(r->arch, 0, sizeof r->arch))
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root strings are not terminated");
    for (i = 0; i < BPT_ROOT_NSTRUCTS; i++)
        if (r->struct_bytes[i] == 0 || r->struct_bytes[i] > (1u << 20))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "structure %llu has a size of %llu bytes",
                                    BPT__U(i), BPT__U(r->struct_bytes[i]));
    {
        const uint32_t *c = r->consts;
        if (c[BPT_ROOT_C_NKINDS] == 0 || c[BPT_ROOT_C_NKINDS] > 16 || c[BPT_ROOT_C_KIND_COUNT] >= c[BPT_ROOT_C_NKINDS] ||
            c[BPT_ROOT_C_COUNT_PAGES] == 0 || c[BPT_ROOT_C_COUNT_PAGES] > 4096 ||
            c[BPT_ROOT_C_COUNT_PAGE_SLOTS] == 0 || c[BPT_ROOT_C_COUNT_PAGE_SLOTS] > (1u << 20) ||
            c[BPT_ROOT_C_MAX_SESSIONS] == 0 || c[BPT_ROOT_C_MAX_SESSIONS] > 65535 ||
            c[BPT_ROOT_C_LANE_DIRS] == 0 || c[BPT_ROOT_C_LANE_DIRS] > 65536 ||
            c[BPT_ROOT_C_LANES_PER_DIR] == 0 || c[BPT_ROOT_C_LANES_PER_DIR] > 65536 ||
            c[BPT_ROOT_C_SHADOW_FRAMES] == 0 || c[BPT_ROOT_C_SHADOW_FRAMES] > (1u << 24) ||
            c[BPT_ROOT_C_NEST_BITS] == 0 || c[BPT_ROOT_C_NEST_BITS] > 32 || c[BPT_ROOT_C_ENTRY_PAD] > 256 ||
            c[BPT_ROOT_C_MAX_THREADS] == 0 || c[BPT_ROOT_C_MAX_THREADS] > 65536 ||
            c[BPT_ROOT_C_KIND_TIME] >= c[BPT_ROOT_C_NKINDS] || c[BPT_ROOT_C_TIMEM_MORE] > (1u << 24))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "a root constant is out of range "
                                    "(kinds %llu, count pages %llu)", BPT__U(c[BPT_ROOT_C_NKINDS]), BPT__U(c[BPT_ROOT_C_COUNT_PAGES]));
    }
    for (i = 0; i < BPT_ROOT_NFIELDS; i++) {
        uint64_t lo, hi, w = r->field_bytes[i];
        int word;
        if (r->field_struct[i] != bpt__root_want_struct[i])
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu is in structure %llu, not its own",
                                    BPT__U(i), BPT__U(r->field_struct[i]));
        if ((uint64_t)r->field_off[i] + w > r->struct_bytes[r->field_struct[i]])
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu ends at byte %llu, past its structure",
                                    BPT__U(i), BPT__U(r->field_off[i] + w));
        bpt__root_field_want(r, i, &lo, &hi, &word);
        if (w < lo || w > hi || (word && (w & (w - 1))))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu is %llu bytes wide", BPT__U(i), BPT__U(w));
    }
    return 0;
}
#undef BPT__U
/*** End of root.c ***/

/*** Begin file control.c ***/
/* control.c: the control server (api_control.h, >>control). One accepting
   thread (the listener) and one thread per client, each client with its
   own trace session. Everything here is set path: the traced threads never
   see the server, and the server only calls the public API (bpt_trace_pattern,
   bpt_trace_info_each, bpt_session_write), as any other thread of the
   program could.

   State and its lock: bpt__ctl (below) is changed only under bpt__ctl_lock.
   The client threads read bpt__ctl.stopping under it too. The clients'
   sockets are in bpt__ctl.fds so that bpt_control_stop can shut them down,
   which wakes a client thread waiting in poll (it never waits in recv or
   send: >>descriptors); each client thread destroys its session, removes
   its own slot, and signals bpt__ctl_gone when it is the last. A session
   whose destroy failed (no memory) is kept in bpt__ctl.left, and destroyed
   again at the next client's departure or bpt_control_stop. */
#include <dirent.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

enum {
    BPT__CTL_LINE = 4096,              /* a request line and its '\n' */
    BPT__CTL_DEFAULT_CLIENTS = 16,
    BPT__CTL_POLL_MS = 20,             /* a stream's wait for records or a hang-up */
    BPT__CTL_LOOK_MS = 1000            /* the longest a server thread waits before it looks at its
                                          descriptors and at stop's flag (>>descriptors) */
};

/* A descriptor's identity: the file it names (fstat's device and inode;
   sockets, pipes and memory files each have an inode of their own).
   {0, 0}: none. See >>descriptors below. */
typedef struct bpt__ctl_fdid { dev_t dev; ino_t ino; } bpt__ctl_fdid;

/* The lock and its condition, apart: a static initializer of the state
   below would have to spell out a sockaddr_un, which C++ warns about. */
static pthread_mutex_t bpt__ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bpt__ctl_gone = PTHREAD_COND_INITIALIZER;   /* nclients fell to 0 */
static pthread_cond_t bpt__ctl_stopped = PTHREAD_COND_INITIALIZER;   /* a stop finished */

static struct {   /* under bpt__ctl_lock; zero until the first start */
    int running;                       /* started and not stopped (a fork's child: 0) */
    int atfork;                        /* the fork handlers are registered */
    int stopping, stop_rc;             /* stop_rc: what the last stop returned */
    int listen_fd, wake[2];            /* wake: bpt_control_stop writes, the listener polls */
    bpt__ctl_fdid listen_id, wake_id[2];
    pthread_t listener;
    struct sockaddr_un addr;
    socklen_t addr_len;
    char address[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];   /* "@name", or an absolute path */
    dev_t dev;                         /* the socket file bind made: stop removes it, */
    ino_t ino;                         /* and not another file put at its path since */
    uint64_t left[BPT_MAX_SESSIONS];   /* ids of sessions whose destroy failed */
    uint32_t nleft;
    int allow_root;
    uint32_t max_clients, nclients;
    int fds[BPT_MAX_SESSIONS];         /* a client's socket, or -1 */
    bpt__ctl_fdid ids[BPT_MAX_SESSIONS];   /* its identity */
    int accepted;                      /* a socket accepted, neither in fds nor closed yet, or -1 */
    bpt__ctl_fdid accepted_id;
} bpt__ctl;

/* >>descriptors: the program's to close. The agent starts the server
   before main, and a program that closes every descriptor it did not open
   (closefrom(3), as daemons do at start) closes the server's too; the
   numbers then come back for the program's own files and sockets. The
   server used them all the same: the listener polled the program's file
   (always readable: a spin at 100 % CPU) and could accept from the
   program's own listening socket, stop wrote its wake-up byte into the
   program's file and closed it, and a client's thread read and wrote the
   program's descriptor (tests/agent kind closefrom).
   So the server keeps each descriptor's identity and checks it before
   each use: accept, recv, each non-blocking send, pread, ftruncate,
   shutdown, close. No server thread waits on a descriptor for more than a
   second (BPT__CTL_LOOK_MS) without checking again, so none holds an old
   file across the program's close. The listener renews its socket and
   pipe when they are gone (bpt__ctl_renew). A check and the call after it
   are two steps: a program that gives the number to a file of its own in
   between still gets that one call, not the ones after; and the stream's
   bpt_session_write into its memory file is one use of many write(2)
   calls. So the server's descriptors live at high numbers
   (bpt__ctl_high): a program's open takes the lowest free number, and
   after a closefrom it reaches the server's old ones only once it holds
   hundreds of descriptors (the window then sent the server's reply to the
   program's own socket; t_control_fds case 8). */
static bpt__ctl_fdid bpt__ctl_id(int fd) {
    bpt__ctl_fdid id = { 0, 0 };
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    return id;
}

/* fd moved to a high number, at or above half the descriptor limit
   (RLIMIT_NOFILE's soft one) and at most 512, so that the kernel's table
   has 1,024 slots at most, 8 KiB of pointers (from 1024 it took 2,048
   once a client came: 16 KiB, copied at every fork; found by review). fd
   itself when the limit is below 128 or the move fails (EMFILE: the low
   number serves). A new descriptor of the server's goes through it before
   its identity is taken (>>descriptors). */
static int bpt__ctl_high(int fd) {
    struct rlimit rl;
    rlim_t floor;
    int h;
    if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0) return fd;
    floor = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > 512 ? 512 : rl.rlim_cur / 2;
    if (floor < 64 || (rlim_t)fd >= floor || (h = fcntl(fd, F_DUPFD_CLOEXEC, (int)floor)) < 0) return fd;
    close(fd);
    return h;
}

/* Whether fd still names the file of identity id. */
static int bpt__ctl_ours(int fd, bpt__ctl_fdid id) {
    bpt__ctl_fdid now = bpt__ctl_id(fd);
    return fd >= 0 && id.ino != 0 && now.dev == id.dev && now.ino == id.ino;
}

/* close(fd) if it is still ours: a number the program has taken is its. */
static void bpt__ctl_close(int fd, bpt__ctl_fdid id) {
    if (bpt__ctl_ours(fd, id)) close(fd);
}

/* Whether bpt_control_stop has asked the server to end. */
static int bpt__ctl_stop_asked(void) {
    int stop;
    pthread_mutex_lock(&bpt__ctl_lock);
    stop = bpt__ctl.stopping;
    pthread_mutex_unlock(&bpt__ctl_lock);
    return stop;
}

/* ---- Replies ---- */

/* Send all of buf to fd, while it is still the socket of identity id
   (>>descriptors): MSG_NOSIGNAL, so a client gone gives EPIPE, not
   SIGPIPE. Never one long wait: when the client does not read, send waits
   in poll a second at a time, and looks at the descriptor and at stop's
   flag in between. (A blocking send held the old socket when the program
   closed the number; stop, which cannot shut down a number that is not
   ours, then waited for that client for good; found by review.) 0; -1
   when the client went away, the number is the program's, or stop asked. */
static int bpt__ctl_send(int fd, bpt__ctl_fdid id, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t k;
        if (!bpt__ctl_ours(fd, id)) return -1;
        BPT_TEST_POINT("control_send: checked");
        k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p;
            int r;
            p.fd = fd;
            p.events = POLLOUT;
            p.revents = 0;
            if ((r = poll(&p, 1, BPT__CTL_LOOK_MS)) < 0 && errno != EINTR) return -1;
            if (r == 0 && bpt__ctl_stop_asked()) return -1;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

static int bpt__ctl_reply(int fd, bpt__ctl_fdid id, const char *fmt, ...) {
    char line[BPT__CTL_LINE + 256];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    return bpt__ctl_send(fd, id, line, (size_t)n);
}

/* ERR CODE TEXT: the code and the calling thread's bpt_last_error, on one
   line (a newline in the text would end the reply early). */
static int bpt__ctl_error(int fd, bpt__ctl_fdid id, int code) {
    char text[512];
    snprintf(text, sizeof text, "%s", *bpt_last_error() ? bpt_last_error() : bpt_strerror(code));
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return bpt__ctl_reply(fd, id, "ERR %d %s", code, text);
}

/* ---- Requests ---- */

/* KINDS: a comma list of names, into trace flags; -1 for an unknown name. */
static long bpt__ctl_kinds(const char *s) {
    static const struct { const char *name; unsigned flag; } names[] = {
        { "call", BPT_CALL }, { "return", BPT_RETURN }, { "exception", BPT_EXCEPTION },
        { "return_to", BPT_RETURN_TO }, { "caller", BPT_CALLER }, { "count", BPT_COUNT },
        { "time", BPT_TIME }, { "memory", BPT_MEMORY }, { "off", BPT_OFF },
        { "pause", BPT_PAUSE }, { "restart", BPT_RESTART },
    };
    unsigned flags = 0;
    while (*s) {
        size_t n = strcspn(s, ","), i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && !strncmp(names[i].name, s, n)) break;
        if (i == sizeof names / sizeof names[0]) return -1;
        flags |= names[i].flag;
        s += n;
        if (*s == ',') s++;
    }
    return (long)flags;
}

/* The next word of *s (ended by a space), NUL-terminated in place. */
static char *bpt__ctl_word(char **s) {
    char *w = *s + strspn(*s, " "), *e = w + strcspn(w, " ");
    *s = e + strspn(e, " ");
    if (*e) *e = '\0';
    return w;
}

typedef struct bpt__ctl_client {
    int fd, slot;
    bpt__ctl_fdid id;                  /* fd's (>>descriptors) */
    pid_t peer;
    bpt_session session;               /* id 0 until HELLO */
} bpt__ctl_client;

static int bpt__ctl_hello(bpt__ctl_client *c, char *rest) {
    bpt_session_desc d;
    char name[64], *version = bpt__ctl_word(&rest), *opt;
    int rc;
    if (c->session.id) return bpt__fail(BPT_EINVAL, "HELLO: this connection said HELLO already");
    if (strcmp(version, "1"))
        return bpt__fail(BPT_ENOTSUP, "HELLO: protocol version '%s'; this server speaks 1", version);
    memset(&d, 0, sizeof d);
    while (*(opt = bpt__ctl_word(&rest))) {
        unsigned long long n, ms;
        char end;
        if (strchr(opt, '-'))   /* strtoull, under sscanf, would take "-1" as 2^64-1 */
            return bpt__fail(BPT_EINVAL, "HELLO: option '%s': numbers are unsigned", opt);
        if (sscanf(opt, "rate=%llu/%llu%c", &n, &ms, &end) == 2 && n > 0 && ms > 0 && ms <= 0xffffffffu) {
            d.rate_max = n;
            d.rate_per_ms = (uint32_t)ms;
        } else if (sscanf(opt, "chunks=%llu%c", &n, &end) == 1 && n <= 0xffffffffu) {
            d.chunks = (uint32_t)n;          /* bpt_session_create checks the ranges */
        } else if (sscanf(opt, "max_chunks=%llu%c", &n, &end) == 1 && n <= 0xffffffffu) {
            d.max_chunks = (uint32_t)n;
        } else {
            return bpt__fail(BPT_EINVAL, "HELLO: unknown option '%s' (rate=N/MS, chunks=N, max_chunks=N)", opt);
        }
    }
    snprintf(name, sizeof name, "bpt-client-%d", (int)c->peer);
    d.name = name;
    /* served: in a fork's child, where no server thread drains it, the
       session stops growing its buffers (session.c, bpt__sessions_atfork_child) */
    if ((rc = bpt__session_create(&d, &c->session, 1)) < 0) return rc;
    return 0;
}

static int bpt__ctl_pattern(bpt__ctl_client *c, char *rest) {
    bpt_match m;
    char *kinds = bpt__ctl_word(&rest);
    long flags = bpt__ctl_kinds(kinds);
    if (flags < 0 || !*kinds)
        return bpt__fail(BPT_EFLAGS, "PATTERN: unknown kinds '%s' (a comma list of call, return, exception, "
                         "return_to, caller, count, time, memory, off, pause, restart)", kinds);
    memset(&m, 0, sizeof m);
    for (;;) {   /* options, then the pattern: the rest of the line */
        rest += strspn(rest, " ");
        if (strncmp(rest, "args=", 5) && strncmp(rest, "ret=", 4)) break;
        if (rest[0] == 'a') m.args = bpt__ctl_word(&rest) + 5;
        else m.ret = bpt__ctl_word(&rest) + 4;
    }
    if (!*rest) return bpt__fail(BPT_EPATTERN, "PATTERN: no pattern after the kinds");
    return bpt_trace_pattern(c->session, rest, (unsigned)flags, &m);
}

/* INFO's lines, gathered in memory while bpt_trace_info_each holds the
   code modification permission, and sent after it returns: a send that
   blocks (a client that does not read) must not hold the permission. */
typedef struct { char *text; size_t len, cap; int lines, failed; unsigned kinds; } bpt__ctl_info_out;

static void bpt__ctl_info_line(const bpt_func *f, const char *module, const char *name, int arity,
                               const bpt_info *in, void *user) {
    bpt__ctl_info_out *o = (bpt__ctl_info_out *)user;
    char line[2 * BPT__NAME_MAX + 128];
    int n;
    (void)f;
    /* Only a function the session has a breakpoint of the asked kinds on
       (>>control): not one whose calls alone it traces, nor one it times
       when INFO asks for counts. */
    if (o->failed || !(in->flags & o->kinds)) return;
    n = snprintf(line, sizeof line, "F %llu %llu %llu %lld %d %s:%s\n", (unsigned long long)in->count,
                 (unsigned long long)in->calls, (unsigned long long)in->time_ns,
                 (long long)(int64_t)in->memory_bytes, arity, module, name);   /* net bytes: signed (api_info.h) */
    if (n < 0 || (size_t)n >= sizeof line) return;
    if (o->len + (size_t)n > o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 4096;
        char *t;
        while (cap < o->len + (size_t)n) cap *= 2;
        if (!(t = (char *)BPT_MALLOC(cap))) { o->failed = 1; return; }
        if (o->len) memcpy(t, o->text, o->len);
        BPT_FREE(o->text);
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, line, (size_t)n);
    o->len += (size_t)n;
    o->lines++;
}

static int bpt__ctl_info(bpt__ctl_client *c, char *rest) {
    char *kinds = bpt__ctl_word(&rest);
    long flags = bpt__ctl_kinds(kinds);
    unsigned what = BPT_INFO_FLAGS;   /* flags: to skip functions with no breakpoint of the kinds asked */
    bpt__ctl_info_out o;
    int rc;
    memset(&o, 0, sizeof o);
    if (flags < 0 || !flags || (flags & ~(long)(BPT_COUNT | BPT_TIME | BPT_MEMORY)))
        return bpt__fail(BPT_EFLAGS, "INFO: kinds '%s': a comma list of count, time, memory", kinds);
    if (flags & BPT_COUNT) what |= BPT_INFO_COUNT;
    if (flags & BPT_TIME) what |= BPT_INFO_TIME;
    if (flags & BPT_MEMORY) what |= BPT_INFO_MEMORY;
    if (!*rest) return bpt__fail(BPT_EPATTERN, "INFO: no pattern after the kinds");
    o.kinds = (unsigned)flags;
    rc = bpt_trace_info_each(c->session, rest, what, bpt__ctl_info_line, &o);
    if (rc >= 0 && o.failed) rc = bpt__fail(BPT_ENOMEM, "INFO: no memory for the reply");
    if (rc >= 0 && o.len && bpt__ctl_send(c->fd, c->id, o.text, o.len) < 0) rc = BPT_EIO;
    BPT_FREE(o.text);
    return rc < 0 ? rc : o.lines;
}

/* STREAM: the session's trace file down the socket until the client hangs
   up (or the server stops). bpt_session_write keeps this thread pinned
   while it writes (it writes straight from the lanes' chunks), and a
   pinned thread holds up every thread progress wait in the process: so it
   writes into a memory file, never to the socket, and the bytes go to the
   socket after it returns, unpinned. A client that stops reading then
   blocks only this thread's send; the traced threads fill the session's
   buffers and drop what does not fit, counted and marked.
   A write error the writer recovers from (the memory file is a file: a
   cut block is taken back), as EFBIG under RLIMIT_FSIZE, only ends this
   round early: what the file holds is sent, and the rest comes next round.
   A client that shuts down its writing half (socat, nc -N) still reads:
   the stream ends on a hang-up (POLLHUP, POLLERR) or a failed send.
   Returns 1 when it replied ERR (the connection goes on), else 0. */
static int bpt__ctl_stream(bpt__ctl_client *c) {
    bpt_file_writer w;
    char *buf;
    int mfd = bpt__ctl_high((int)syscall(SYS_memfd_create, "bptrace-stream", 1u /* MFD_CLOEXEC */));
    bpt__ctl_fdid mid = bpt__ctl_id(mfd);
    short events = POLLIN;   /* 0 once the client shut down its writing half */
    const size_t COPY = 65536;
    if (mfd < 0 || !(buf = (char *)BPT_MALLOC(COPY))) {   /* ERR before OK: the connection goes on */
        int rc = mfd < 0 ? bpt__fail(BPT_EIO, "STREAM: memfd_create: %s", strerror(errno))
                         : bpt__fail(BPT_ENOMEM, "STREAM: no memory for the copy buffer");
        if (mfd >= 0) close(mfd);
        return bpt__ctl_error(c->fd, c->id, rc) == 0;
    }
    if (bpt__ctl_reply(c->fd, c->id, "OK stream") < 0) goto done;
    memset(&w, 0, sizeof w);
    w.fd = mfd;
    for (;;) {
        struct pollfd p;
        char sink[256];
        off_t end, at;
        int rc;
        if (!bpt__ctl_ours(mfd, mid) || !bpt__ctl_ours(c->fd, c->id)) break;   /* the program's (>>descriptors) */
        rc = bpt_session_write(c->session, &w);
        end = lseek(mfd, 0, SEEK_CUR);
        if (rc < 0 && (rc != BPT_EIO || w.broken || end <= 0)) break;   /* no way on */
        for (at = 0; at < end;) {   /* unpinned: this send may wait for the client */
            ssize_t k;
            if (!bpt__ctl_ours(mfd, mid)) goto done;   /* each use checked: the send above may have waited */
            k = pread(mfd, buf, (size_t)(end - at) < COPY ? (size_t)(end - at) : COPY, at);
            if (k <= 0 || bpt__ctl_send(c->fd, c->id, buf, (size_t)k) < 0) goto done;   /* EPIPE: the client left */
            at += k;
        }
        if (!bpt__ctl_ours(mfd, mid)) break;
        if (end > 0 && (ftruncate(mfd, 0) < 0 || lseek(mfd, 0, SEEK_SET) < 0)) break;
        if (rc < 0) continue;   /* recovered: the rest at once */
        p.fd = c->fd;
        p.events = events;
        p.revents = 0;
        if (poll(&p, 1, BPT__CTL_POLL_MS) > 0) {
            ssize_t k = (p.revents & POLLIN) && bpt__ctl_ours(c->fd, c->id)
                            ? recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) : -1;
            if (p.revents & (POLLHUP | POLLERR)) break;   /* hung up */
            if (k == 0) events = 0;                       /* half-closed: it still reads */
        }
        if (bpt__ctl_stop_asked()) break;
    }
done:
    BPT_FREE(buf);
    bpt__ctl_close(mfd, mid);
    return 0;
}

/* One request line: its reply. Returns 1 to go on, 0 to close. */
static int bpt__ctl_request(bpt__ctl_client *c, char *line) {
    char *rest = line, *cmd = bpt__ctl_word(&rest);
    int rc;
    if (!strcmp(cmd, "HELLO")) {
        if ((rc = bpt__ctl_hello(c, rest)) < 0) return bpt__ctl_error(c->fd, c->id, rc) == 0;
        return bpt__ctl_reply(c->fd, c->id, "OK bptrace %s 1 %d", BPTRACE_VERSION, (int)getpid()) == 0;
    }
    if (!strcmp(cmd, "BYE")) {
        bpt__ctl_reply(c->fd, c->id, "OK bye");
        return 0;
    }
    if (strcmp(cmd, "PATTERN") && strcmp(cmd, "INFO") && strcmp(cmd, "STREAM")) {
        bpt__fail(BPT_EINVAL, "unknown request '%.64s' (HELLO, PATTERN, INFO, STREAM, BYE)", cmd);
        return bpt__ctl_error(c->fd, c->id, BPT_EINVAL) == 0;
    }
    if (!c->session.id) {
        bpt__fail(BPT_ESESSION, "%s before HELLO", cmd);
        return bpt__ctl_error(c->fd, c->id, BPT_ESESSION) == 0;
    }
    if (!strcmp(cmd, "STREAM")) return bpt__ctl_stream(c);   /* OK stream and the stream, or ERR */
    rc = !strcmp(cmd, "PATTERN") ? bpt__ctl_pattern(c, rest) : bpt__ctl_info(c, rest);
    if (rc < 0) return bpt__ctl_error(c->fd, c->id, rc) == 0;
    return bpt__ctl_reply(c->fd, c->id, "OK %d", rc) == 0;
}

/* ---- Client threads ---- */

/* Read requests line by line. A line over BPT__CTL_LINE bytes is refused
   and skipped up to its '\n'; so is a line holding a NUL byte, which the
   string code below would read only up to that NUL: another request than
   the one sent, done and replied OK. The connection goes on. */
static void bpt__ctl_serve(bpt__ctl_client *c) {
    char buf[BPT__CTL_LINE];
    size_t have = 0;
    int skipping = 0;
    for (;;) {
        char *nl;
        ssize_t k;
        struct pollfd p;
        if (!bpt__ctl_ours(c->fd, c->id)) return;   /* the program closed it (>>descriptors) */
        p.fd = c->fd;   /* a second at most, then look again: a recv on a number the program closed */
        p.events = POLLIN;   /* would wait on the old file, which stop's shutdown cannot reach */
        p.revents = 0;
        if ((k = poll(&p, 1, BPT__CTL_LOOK_MS)) == 0 || (k < 0 && errno == EINTR)) {
            if (bpt__ctl_stop_asked()) return;
            continue;
        }
        if (k < 0) return;   /* poll failed (no memory): the connection ends, the client may come again */
        if (!bpt__ctl_ours(c->fd, c->id)) return;   /* taken during the poll, whose last look saw the new file */
        k = recv(c->fd, buf + have, sizeof buf - have, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;   /* closed, reset, or shut down by bpt_control_stop */
        have += (size_t)k;
        while ((nl = (char *)memchr(buf, '\n', have)) != NULL) {
            size_t used = (size_t)(nl - buf) + 1;
            int nul = memchr(buf, '\0', (size_t)(nl - buf)) != NULL;   /* before a '\r' is cut */
            *nl = '\0';
            if (nl > buf && nl[-1] == '\r') nl[-1] = '\0';
            if (skipping) {
                skipping = 0;
            } else if (nul) {
                bpt__fail(BPT_EINVAL, "a request line holds a NUL byte: refused");
                if (bpt__ctl_error(c->fd, c->id, BPT_EINVAL) < 0) return;
            } else if (!bpt__ctl_request(c, buf)) {
                return;
            }
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        if (have == sizeof buf) {   /* no '\n' in a whole buffer */
            if (!skipping) {
                bpt__fail(BPT_ELIMIT, "a request line is longer than %d bytes: refused", BPT__CTL_LINE - 1);
                if (bpt__ctl_error(c->fd, c->id, BPT_ELIMIT) < 0) return;
            }
            skipping = 1;
            have = 0;
        }
    }
}

/* Destroy a client's session; when that fails (no memory), keep its id in
   bpt__ctl.left, to be tried again. Without the lock: a destroy waits for
   thread progress. */
static int bpt__ctl_destroy(uint64_t id) {
    bpt_session s;
    int rc;
    s.id = id;
    if ((rc = bpt_session_destroy(s)) < 0 && rc != BPT_ESESSION) {   /* BPT_ESESSION: gone already */
        pthread_mutex_lock(&bpt__ctl_lock);
        if (bpt__ctl.nleft < BPT_MAX_SESSIONS) bpt__ctl.left[bpt__ctl.nleft++] = id;   /* one a session: room */
        pthread_mutex_unlock(&bpt__ctl_lock);
        return rc;
    }
    return 0;
}

/* Try the sessions left over once more. Returns 0 when none is left, or
   the first failure's code. */
static int bpt__ctl_retry_left(void) {
    uint64_t ids[BPT_MAX_SESSIONS];
    uint32_t n, i;
    int rc = 0, r;
    pthread_mutex_lock(&bpt__ctl_lock);
    n = bpt__ctl.nleft;
    memcpy(ids, bpt__ctl.left, n * sizeof ids[0]);
    bpt__ctl.nleft = 0;
    pthread_mutex_unlock(&bpt__ctl_lock);
    for (i = 0; i < n; i++)
        if ((r = bpt__ctl_destroy(ids[i])) < 0 && rc == 0) rc = r;
    return rc;
}

/* A client's slot free again, its socket closed (if still ours) and its
   count taken back: at its thread's end, or when it got no thread. */
static void bpt__ctl_release(int slot) {
    pthread_mutex_lock(&bpt__ctl_lock);
    bpt__ctl_close(bpt__ctl.fds[slot], bpt__ctl.ids[slot]);
    bpt__ctl.fds[slot] = -1;
    if (--bpt__ctl.nclients == 0) pthread_cond_broadcast(&bpt__ctl_gone);
    pthread_mutex_unlock(&bpt__ctl_lock);
}

static void *bpt__ctl_client_main(void *arg) {
    bpt__ctl_client *c = (bpt__ctl_client *)arg;
    bpt__own_enter();   /* bptrace's own thread: its calls through traced slots are not traced */
    bpt__ctl_serve(c);
    /* The client is gone: its session, breakpoints and all, goes with it,
       and any an earlier client left behind. */
    if (c->session.id) bpt__ctl_destroy(c->session.id);
    bpt__ctl_retry_left();
    bpt__ctl_release(c->slot);
    BPT_FREE(c);
    return NULL;
}

/* Refuse the connection just accepted: the reply, then the close under
   the lock, where it leaves the books (bpt__ctl_accept4). */
static void bpt__ctl_refuse(int fd) {
    pthread_mutex_lock(&bpt__ctl_lock);
    bpt__ctl_close(fd, bpt__ctl.accepted_id);
    bpt__ctl.accepted = -1;
    pthread_mutex_unlock(&bpt__ctl_lock);
}

/* A new connection (bpt__ctl.accepted): check who it is, take a slot,
   start its thread. */
static void bpt__ctl_accept(int fd) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    bpt__ctl_client *c;
    pthread_attr_t attr;
    pthread_t t;
    int slot = -1;
    int known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred;
    if (!known || !(cred.uid == geteuid() || (bpt__ctl.allow_root && cred.uid == 0))) {
        bpt__ctl_reply(fd, bpt__ctl.accepted_id, "ERR %d uid %d may not control process %d (uid %d)",
                       BPT_EPERM, known ? (int)cred.uid : -1, (int)getpid(), (int)geteuid());
        bpt__ctl_refuse(fd);
        return;
    }
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl.nclients < bpt__ctl.max_clients)
        for (slot = 0; slot < (int)bpt__ctl.max_clients && bpt__ctl.fds[slot] >= 0; slot++) {}
    if (slot >= 0) {
        bpt__ctl.fds[slot] = fd;   /* in the books as a client's from here on */
        bpt__ctl.ids[slot] = bpt__ctl.accepted_id;
        bpt__ctl.accepted = -1;
        bpt__ctl.nclients++;
    }
    pthread_mutex_unlock(&bpt__ctl_lock);
    if (slot < 0) {
        bpt__ctl_reply(fd, bpt__ctl.accepted_id, "ERR %d %u clients at once already (max_clients)", BPT_ELIMIT,
                       bpt__ctl.max_clients);
        bpt__ctl_refuse(fd);
        return;
    }
    c = (bpt__ctl_client *)BPT_MALLOC(sizeof *c);
    if (c) {
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->id = bpt__ctl.ids[slot];   /* set by this thread, under the lock, above */
        c->slot = slot;
        c->peer = cred.pid;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, bpt__ctl_client_main, c) == 0) {
            pthread_attr_destroy(&attr);
            return;   /* the thread owns c, fd and the slot now */
        }
        pthread_attr_destroy(&attr);
        BPT_FREE(c);
    }
    bpt__ctl_reply(fd, bpt__ctl.ids[slot], "ERR %d no memory or no thread for a client", BPT_ENOMEM);
    bpt__ctl_release(slot);
}

/* The listener's back-off after a failure that may pass (no memory, no
   descriptor): 100 ms, or less when bpt_control_stop writes the wake-up
   pipe. Returns 1 when stop was asked. Retrying at once would spin, as the
   condition is likely still there. Should this poll fail as well, it
   sleeps the 100 ms instead, so that a lasting failure still costs ten
   tries a second, not a CPU, and reads stop's flag itself: the wake-up
   pipe cannot tell it while poll fails, and stop's join would wait as
   long as the failure lasts. */
static int bpt__ctl_back_off(void) {
    struct pollfd w;
    struct timespec t = { 0, 100 * 1000000L };
    w.fd = bpt__ctl.wake[0];
    w.events = POLLIN;
    w.revents = 0;
    if (poll(&w, 1, 100) < 0 && errno != EINTR) nanosleep(&t, NULL);
    return bpt__ctl_stop_asked();   /* its byte woke the poll: its flag was set first */
}

/* Accept a connection, under the lock: a fork in between must find the
   socket in the server's books, or the child (whose handler closes the
   sockets the server knows) kept it open, with nobody serving it: the
   client then never saw its connection end while the child lived. The
   socket stays in bpt__ctl.accepted until bpt__ctl_accept gives it a slot
   or closes it, also under the lock. The listening socket is non-blocking
   (bpt_control_start), so accept4 never waits under the lock: a
   connection poll reported and that is gone since gives EAGAIN. */
static int bpt__ctl_accept4(void) {
    int fd, err;
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl_ours(bpt__ctl.listen_fd, bpt__ctl.listen_id)) {   /* not the program's socket (>>descriptors) */
        fd = accept4(bpt__ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        err = errno;
        fd = bpt__ctl_high(fd);
    } else {
        fd = -1;
        err = EBADF;
    }
    bpt__ctl.accepted = fd;
    bpt__ctl.accepted_id = bpt__ctl_id(fd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    errno = err;   /* accept4's, for the caller */
    return fd;
}

static int bpt__ctl_renew(void);   /* with start and stop, below */

static void *bpt__ctl_listener_main(void *arg) {
    (void)arg;
    bpt__own_enter();   /* as the clients' threads */
    for (;;) {
        struct pollfd p[2];
        int fd, n;
        /* Its descriptors, still ours? (>>descriptors; only this thread
           changes them while the server runs, under the lock) Renewed
           when not; when that fails (an abstract name still held by a
           process that has the old socket: a fork child before its
           handler ran, a spawned child before its exec), again a second
           later, until stop. */
        if (!bpt__ctl_ours(bpt__ctl.listen_fd, bpt__ctl.listen_id) ||
            !bpt__ctl_ours(bpt__ctl.wake[0], bpt__ctl.wake_id[0]) ||
            !bpt__ctl_ours(bpt__ctl.wake[1], bpt__ctl.wake_id[1])) {
            struct timespec t = { BPT__CTL_LOOK_MS / 1000, (BPT__CTL_LOOK_MS % 1000) * 1000000L };
            if (bpt__ctl_stop_asked()) return NULL;
            if (bpt__ctl_renew() < 0) nanosleep(&t, NULL);
            continue;
        }
        p[0].fd = bpt__ctl.listen_fd;
        p[0].events = POLLIN;
        p[1].fd = bpt__ctl.wake[0];
        p[1].events = POLLIN;
        p[0].revents = p[1].revents = 0;
        /* A second at most: the program may close a descriptor this poll
           waits on (it goes on waiting on the file), and stop's byte may
           have had no pipe of ours to go to. */
        if ((n = poll(p, 2, BPT__CTL_LOOK_MS)) < 0) {
            /* A failure that may pass: back off, then poll again. ENOMEM:
               no memory for the kernel's poll table (EAGAIN, where POSIX
               has it). EINVAL: nfds over RLIMIT_NOFILE, which the program
               (or prlimit from outside) may lower below 2 for a while.
               Returning here left the socket listening with no one to
               accept, so clients connected (the backlog queued them) and
               waited for a reply forever. Only EFAULT ends the thread (a
               bad address, which this array on the stack is not), without
               a word: the server has no channel for its own failures
               (bpt_last_error is per thread, bpt__ctl keeps no error, the
               library never writes to stderr); bpt_control_stop still
               joins the thread and cleans up. */
            if (errno == EINTR) continue;
            if (errno == EFAULT) return NULL;
            if (bpt__ctl_back_off()) return NULL;   /* bpt_control_stop */
            continue;
        }
        if (n == 0) {
            if (bpt__ctl_stop_asked()) return NULL;
            continue;
        }
        if (p[1].revents) {   /* stop's byte (its flag is set first); or POLLHUP: the write end was closed */
            if (bpt__ctl_stop_asked()) return NULL;
            continue;   /* the loop's top renews the pipe */
        }
        if (p[0].revents & (POLLHUP | POLLERR)) {
            /* Not listening any more: shut down by another holder of the
               socket (a fork child before its exec). poll reports it at
               once, for good, and accept4 finds nothing: open it again (a
               spin before; found by review). */
            if (bpt__ctl_renew() < 0 && bpt__ctl_back_off()) return NULL;
            continue;
        }
        if (!(p[0].revents & POLLIN)) continue;   /* POLLNVAL: closed; the loop's top renews it */
        if ((fd = bpt__ctl_accept4()) >= 0) {
            bpt__ctl_accept(fd);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* The connection stays queued and poll would report it at once
               again: back off instead of spinning. */
            if (bpt__ctl_back_off()) return NULL;   /* bpt_control_stop */
        }
    }
}

/* ---- Start and stop ---- */

/* The socket's address from desc->path (or the default), into bpt__ctl.
   A relative path is made absolute against the current directory now:
   stop removes this file, wherever the program has moved to since. */
static int bpt__ctl_address(const char *path) {
    char def[sizeof bpt__ctl.address], cwd[sizeof bpt__ctl.address];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    size_t n, room = sizeof bpt__ctl.addr.sun_path;
    if (!path) {
        int k = -1;
        if (xdg && xdg[0] == '/') k = snprintf(def, sizeof def, "%s/bptrace-%d.sock", xdg, (int)getpid());
        if (k < 0 || (size_t)k >= room) snprintf(def, sizeof def, "@bptrace-%d", (int)getpid());
        path = def;
    }
    n = strlen(path);
    if (n == 0 || n >= room || (path[0] == '@' && n == 1))
        return bpt__fail(BPT_EINVAL, "bpt_control_start: path '%s' is empty or over %u bytes", path,
                         (unsigned)room - 1);
    if (path[0] != '/' && path[0] != '@') {
        size_t k = getcwd(cwd, sizeof cwd) ? strlen(cwd) : room;   /* ERANGE: longer than an address */
        if (k + 1 + n >= room)
            return bpt__fail(BPT_EINVAL, "bpt_control_start: path '%s' is relative, and made absolute (the "
                             "current directory before it) it is over %u bytes", path, (unsigned)room - 1);
        cwd[k] = '/';
        memcpy(cwd + k + 1, path, n + 1);
        path = cwd;
        n += k + 1;
    }
    memset(&bpt__ctl.addr, 0, sizeof bpt__ctl.addr);
    bpt__ctl.addr.sun_family = AF_UNIX;
    memcpy(bpt__ctl.addr.sun_path, path, n);
    if (path[0] == '@') bpt__ctl.addr.sun_path[0] = '\0';   /* abstract: no file */
    bpt__ctl.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    memcpy(bpt__ctl.address, path, n + 1);
    return 0;
}

/* The socket file's directory, locked (flock, exclusive) against every
   other bptrace server's start and stop at a path in it, in any process:
   bpt__ctl_bind's "refused: a dead process's file, replace it" is a check
   and then an act, and a server between its bind and its listen is
   refused too. Unlocked, two servers starting at one path could each take
   the other's file for stale: one of them was left bound where nobody
   could reach it, and its stop later removed the other's file
   (t_control_edges case 16). The lock is the directory's own, so
   no lock file is left behind. It is held for a few system calls; one
   held longer than 2 s (a process stopped inside them) is given up on,
   and the start goes on unlocked, as it did before. The descriptor, or -1
   (abstract, or a directory this process cannot open: unlocked). */
static int bpt__ctl_dir_lock(void) {
    char dir[sizeof bpt__ctl.address];
    char *slash;
    int dfd, tries;
    if (bpt__ctl.address[0] != '/') return -1;
    memcpy(dir, bpt__ctl.address, sizeof dir);
    slash = strrchr(dir, '/');
    slash[slash == dir ? 1 : 0] = '\0';   /* "/x.sock": the root */
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) return -1;
    for (tries = 0; flock(dfd, LOCK_EX | LOCK_NB) < 0; tries++) {
        struct timespec ms = { 0, 1000000 };
        if ((errno != EWOULDBLOCK && errno != EINTR) || tries == 2000) {
            close(dfd);
            return -1;
        }
        nanosleep(&ms, NULL);
    }
    BPT_TEST_POINT("control_dir: locked");
    return dfd;
}

static void bpt__ctl_dir_unlock(int dfd) {
    if (dfd >= 0) close(dfd);   /* the close releases the flock */
}

/* A probe of the socket file at a (len bytes): 0 when a connect is taken
   (a server, even one whose backlog is full: the probe does not block, and
   EAGAIN or EINPROGRESS count as taken too), else connect's errno
   (ECONNREFUSED: nobody listens); -1 with errno when no socket. */
static int bpt__ctl_probe(const struct sockaddr *a, socklen_t len) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;
    if (probe < 0) return -1;
    e = connect(probe, a, len) == 0 ? 0 : errno;
    close(probe);
    return e == EAGAIN || e == EINPROGRESS ? 0 : e;
}

/* >>stale files: a process that ends without its stop (killed, or a fork
   child's _exit under the agent's BPTRACE_CONTROL_FORKS) leaves its socket
   file behind, and nothing removed it but a later server of the same pid:
   a prefork server's workers filled $XDG_RUNTIME_DIR with them. A server
   starting at its default address (dfd: that directory, locked) removes
   from it each bptrace-PID.sock of another pid that is this user's socket,
   whose process is gone (kill: ESRCH) and whose connect is refused (nobody
   listens; a server between its bind and its listen holds the lock). Any
   other file is left alone; at most 1,024 entries are looked at, so that
   a crowded directory costs a start little. */
static int bpt__ctl_default_pid(const char *name) {   /* PID of "bptrace-PID.sock", or 0 */
    const char *p = name + 8;
    int pid = 0;
    if (strncmp(name, "bptrace-", 8) != 0 || *p < '1' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9' && pid < INT_MAX / 10 - 1; p++) pid = pid * 10 + (*p - '0');
    return strcmp(p, ".sock") == 0 ? pid : 0;
}

static void bpt__ctl_sweep(int dfd) {
    struct sockaddr_un a;
    struct dirent *ent;
    struct stat st;
    size_t dir_len, n;
    int fd, pid, e, looked = 0;
    DIR *d;
    /* dfd >= 0: the address is a file's, "DIR/bptrace-PID.sock" (bpt__ctl_dir_lock) */
    if (dfd < 0 || (fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) return;
    dir_len = (size_t)(strrchr(bpt__ctl.address, '/') - bpt__ctl.address) + 1;
    if (!(d = fdopendir(fd))) {
        close(fd);
        return;
    }
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, bpt__ctl.address, dir_len);   /* "DIR/" */
    while (looked++ < 1024 && (ent = readdir(d)) != NULL) {
        if ((pid = bpt__ctl_default_pid(ent->d_name)) == 0 || pid == (int)getpid() ||
            (n = strlen(ent->d_name)) + dir_len >= sizeof a.sun_path ||
            fstatat(dfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode) ||
            st.st_uid != geteuid() || kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        memcpy(a.sun_path + dir_len, ent->d_name, n + 1);
        if ((e = bpt__ctl_probe((const struct sockaddr *)&a, (socklen_t)sizeof a)) < 0) break;
        if (e == ECONNREFUSED) unlinkat(dfd, ent->d_name, 0);
    }
    closedir(d);
}

/* bind, replacing a socket file that nobody serves (a dead process's). Any
   other file at the path is left alone. The probe connect does not block:
   a server that accepts nothing (its backlog full: EAGAIN) still serves.
   A file gone between the failed bind and the look at it (removed by a
   server that is not bptrace's, as it stopped) is no reason to fail: bind
   again, up to 3 times (the probe said ENOENT, and start failed with "may
   be served"; found by review, t_control_edges case 17). */
static int bpt__ctl_bind(int fd) {
    const struct sockaddr *a = (const struct sockaddr *)&bpt__ctl.addr;
    struct stat st;
    int e, tries = 0;
again:
    if (bind(fd, a, bpt__ctl.addr_len) == 0) return 0;
    if (errno != EADDRINUSE || bpt__ctl.address[0] == '@')
        return bpt__fail(errno == EADDRINUSE ? BPT_EEXIST : BPT_EIO, "bpt_control_start: bind %s: %s",
                         bpt__ctl.address, strerror(errno));
    BPT_TEST_POINT("control_bind: in use");
    if (lstat(bpt__ctl.address, &st) < 0) {
        if (errno == ENOENT && tries++ < 3) goto again;   /* removed since the bind: bind again */
    } else if (!S_ISSOCK(st.st_mode))
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s exists and is not a socket: left alone",
                         bpt__ctl.address);
    if ((e = bpt__ctl_probe(a, bpt__ctl.addr_len)) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: %s exists, and no socket to probe it: %s",
                         bpt__ctl.address, strerror(errno));
    if (e == ENOENT && tries++ < 3) goto again;   /* removed between the lstat and the probe */
    if (e == 0)
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s: another process serves it", bpt__ctl.address);
    if (e != ECONNREFUSED)   /* not known to be stale: leave it */
        return bpt__fail(BPT_EEXIST, "bpt_control_start: %s exists and may be served (connect: %s)",
                         bpt__ctl.address, strerror(e));
    /* refused: nobody listens; a dead process's socket file */
    if ((unlink(bpt__ctl.address) < 0 && errno != ENOENT) || bind(fd, a, bpt__ctl.addr_len) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: bind %s (a stale socket file): %s", bpt__ctl.address,
                         strerror(errno));
    return 0;
}

/* Remove the socket file, if the file at its path is still the one bind
   made (not one put there since by someone else). Called while the socket
   still listens: between the lstat and the unlink, another server's start
   (bpt__ctl_bind) then finds this path served and leaves it alone. Called
   after the close, that start found the file stale, put its own in its
   place, and this unlink removed that one (t_control_edges case 15). */
static void bpt__ctl_unlink(void) {
    struct stat st;
    if (bpt__ctl.address[0] != '@' && lstat(bpt__ctl.address, &st) == 0 && st.st_dev == bpt__ctl.dev &&
        st.st_ino == bpt__ctl.ino) {
        BPT_TEST_POINT("control_unlink: checked");
        unlink(bpt__ctl.address);
    }
}

/* The listening socket and the wake-up pipe, opened at bpt__ctl.address
   (under bpt__ctl_lock and the directory's lock): into bpt__ctl with
   their identities. 0; or a BPT_E* code, with nothing left open or bound. */
static int bpt__ctl_open(void) {
    struct stat st;
    int fd, rc;
    bpt__ctl.listen_fd = bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
    bpt__ctl.dev = 0;
    bpt__ctl.ino = 0;   /* no file has inode 0: until bind made one, bpt__ctl_unlink removes nothing (a
                           renew that fails after its unlink must not remove a file put there since) */
    /* Non-blocking: the listener accepts under the lock (bpt__ctl_accept4). */
    if ((fd = bpt__ctl_high(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0))) < 0)
        return bpt__fail(BPT_EIO, "bpt_control_start: socket: %s", strerror(errno));
    if ((rc = bpt__ctl_bind(fd)) < 0) {
        close(fd);
        return rc;
    }
    BPT_TEST_POINT("control_start: bound");   /* and not listening: a connect is refused */
    if (bpt__ctl.address[0] != '@' && lstat(bpt__ctl.address, &st) == 0) {
        bpt__ctl.dev = st.st_dev;
        bpt__ctl.ino = st.st_ino;
    }
    /* 0600 before listen: until listen, a connect is refused, so no one
       connects through the mode the umask gave. */
    if (bpt__ctl.address[0] != '@' && chmod(bpt__ctl.address, 0600) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: chmod %s: %s", bpt__ctl.address, strerror(errno));
    else if (listen(fd, 128) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: listen: %s", strerror(errno));
    /* stop's wake-up of the listener: a "pipe" made of a socket pair, whose
       two ends have inodes of their own (a pipe's share one, and the
       program's dup2 of the read end onto the write end passed the
       identity check: POLLHUP at once, a spin; found by review), and a
       send to it with MSG_NOSIGNAL never raises SIGPIPE in stop's thread. */
    else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bpt__ctl.wake) < 0)
        rc = bpt__fail(BPT_EIO, "bpt_control_start: no pipe (socket pair) to wake the server at stop: %s",
                       strerror(errno));
    if (rc < 0) {
        bpt__ctl_unlink();
        close(fd);
        bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
        return rc;
    }
    bpt__ctl.listen_fd = fd;
    bpt__ctl.listen_id = bpt__ctl_id(fd);
    bpt__ctl.wake[0] = bpt__ctl_high(bpt__ctl.wake[0]);
    bpt__ctl.wake[1] = bpt__ctl_high(bpt__ctl.wake[1]);
    bpt__ctl.wake_id[0] = bpt__ctl_id(bpt__ctl.wake[0]);
    bpt__ctl.wake_id[1] = bpt__ctl_id(bpt__ctl.wake[1]);
    return 0;
}

/* Close the listening socket and the wake-up pipe, those of them that are
   still ours (>>descriptors). Under bpt__ctl_lock. */
static void bpt__ctl_close_own(void) {
    bpt__ctl_close(bpt__ctl.listen_fd, bpt__ctl.listen_id);
    bpt__ctl_close(bpt__ctl.wake[0], bpt__ctl.wake_id[0]);
    bpt__ctl_close(bpt__ctl.wake[1], bpt__ctl.wake_id[1]);
    bpt__ctl.listen_fd = bpt__ctl.wake[0] = bpt__ctl.wake[1] = -1;
}

/* The listener's, when the program has closed its socket or its wake-up
   pipe (>>descriptors): what is left of them closed, both opened again at
   the same address (the old socket file, nobody's now, is replaced as a
   dead process's would be). 0; -1 when they could not be opened (the
   listener tries again a second later). */
static int bpt__ctl_renew(void) {
    int dfd, rc;
    pthread_mutex_lock(&bpt__ctl_lock);
    dfd = bpt__ctl_dir_lock();
    bpt__ctl_unlink();   /* ours, if the file is still the one we bound */
    bpt__ctl_close_own();
    rc = bpt__ctl_open();
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc < 0 ? -1 : 0;
}

/* fork: the child has none of the server's threads. The prepare handler
   takes the lock, so that no server thread holds it across the fork; the
   child's handler then closes the inherited sockets and forgets the
   server and the sessions left over. Its clients' sessions stay in the
   child, undrained: they keep the buffers they had and drop what does
   not fit (session.c marks them, bpt__sessions_atfork_child). */
static void bpt__ctl_fork_prepare(void) { pthread_mutex_lock(&bpt__ctl_lock); }
static void bpt__ctl_fork_parent(void) { pthread_mutex_unlock(&bpt__ctl_lock); }
static void bpt__ctl_fork_child(void) {
    if (bpt__ctl.running) {   /* fstat and close: async-signal-safe, as a fork child needs */
        bpt__ctl_close_own();
        for (uint32_t i = 0; i < bpt__ctl.max_clients; i++)
            if (bpt__ctl.fds[i] >= 0) bpt__ctl_close(bpt__ctl.fds[i], bpt__ctl.ids[i]);
        if (bpt__ctl.accepted >= 0)   /* accepted, not yet a client's */
            bpt__ctl_close(bpt__ctl.accepted, bpt__ctl.accepted_id);
        bpt__ctl.accepted = -1;
        bpt__ctl.running = 0;
        bpt__ctl.stopping = 0;
        bpt__ctl.nclients = 0;
    }
    bpt__ctl.nleft = 0;
    pthread_mutex_unlock(&bpt__ctl_lock);
}

int bpt_control_start(const bpt_control_desc *desc) {
    bpt_control_desc d;
    sigset_t all, old;
    int rc, dfd = -1;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (d.max_clients == 0) d.max_clients = BPT__CTL_DEFAULT_CLIENTS;
    if (d.max_clients > BPT_MAX_SESSIONS)
        return bpt__fail(BPT_EINVAL, "bpt_control_start: max_clients %u is over BPT_MAX_SESSIONS (%d)",
                         d.max_clients, BPT_MAX_SESSIONS);
    pthread_mutex_lock(&bpt__ctl_lock);
    if (!bpt__ctl.atfork) {
        if (pthread_atfork(bpt__ctl_fork_prepare, bpt__ctl_fork_parent, bpt__ctl_fork_child) != 0) {
            pthread_mutex_unlock(&bpt__ctl_lock);
            return bpt__fail(BPT_ENOMEM, "bpt_control_start: no memory for the fork handlers");
        }
        bpt__ctl.atfork = 1;
    }
    if (bpt__ctl.running) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_EEXIST, "bpt_control_start: the server runs already, at %s", bpt__ctl.address);
    }
    if ((rc = bpt__ctl_address(d.path)) < 0) goto fail;
    dfd = bpt__ctl_dir_lock();   /* from bind to listen and on: see bpt__ctl_dir_lock */
    if (!d.path) bpt__ctl_sweep(dfd);   /* >>stale files */
    if ((rc = bpt__ctl_open()) < 0) goto fail;
    bpt__ctl.allow_root = d.allow_root;
    bpt__ctl.max_clients = d.max_clients;
    bpt__ctl.nclients = 0;
    bpt__ctl.stopping = 0;
    for (uint32_t i = 0; i < BPT_MAX_SESSIONS; i++) bpt__ctl.fds[i] = -1;
    bpt__ctl.accepted = -1;
    /* The server's threads block every signal (they inherit the mask): the
       program's signals go to its own threads, and SIGPIPE never comes. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&bpt__ctl.listener, NULL, bpt__ctl_listener_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        bpt__ctl_unlink();   /* before the close, as stop */
        bpt__ctl_close_own();
        rc = bpt__fail(BPT_ENOMEM, "bpt_control_start: no thread for the server: %s", strerror(rc));
        goto fail;
    }
    bpt__ctl.running = 1;
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return 0;
fail:
    bpt__ctl_dir_unlock(dfd);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc;
}

int bpt_control_stop(void) {
    bpt__thread *self = bpt__thread_self_or_null();
    pthread_t listener;
    uint32_t left;
    int rc, dfd;
    /* It waits for the client threads, whose session destroys wait for
       thread progress: not from where this thread would hold that up. */
    if (self && (self->in_tracer || self->holds_permission || bpt__thread_pinned(self)))
        return bpt__fail(BPT_EDEADLK, "bpt_control_stop: called from a tracer callback, under the code "
                         "modification permission, or while pinned: it would wait for itself");
    pthread_mutex_lock(&bpt__ctl_lock);
    if (bpt__ctl.stopping) {   /* another thread stops it: wait until it has, and say what it says */
        BPT_TEST_POINT("control_stop: waits for another stop");
        bpt__block_begin(self);
        while (bpt__ctl.stopping) pthread_cond_wait(&bpt__ctl_stopped, &bpt__ctl_lock);
        bpt__block_end(self);
        rc = bpt__ctl.stop_rc;
        pthread_mutex_unlock(&bpt__ctl_lock);
        return rc < 0 ? bpt__fail(rc, "bpt_control_stop: stopped by another thread, with sessions left over")
                      : 0;
    }
    if (!bpt__ctl.running) {   /* no server; but sessions may be left over from the last */
        left = bpt__ctl.nleft;
        pthread_mutex_unlock(&bpt__ctl_lock);
        return left ? bpt__ctl_retry_left()
                  : bpt__fail(BPT_ENOENT, "bpt_control_stop: no control server runs in this process");
    }
    bpt__ctl.stopping = 1;
    listener = bpt__ctl.listener;
    if (bpt__ctl_ours(bpt__ctl.wake[1], bpt__ctl.wake_id[1]) &&
        send(bpt__ctl.wake[1], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* its reader gone (the program's doing): the listener reads the flag within a second */
    }
    pthread_mutex_unlock(&bpt__ctl_lock);
    BPT_TEST_POINT("control_stop: stopping");
    bpt__block_begin(self);   /* a managed thread goes offline while it waits */
    pthread_join(listener, NULL);   /* no new clients after this */
    pthread_mutex_lock(&bpt__ctl_lock);
    for (uint32_t i = 0; i < bpt__ctl.max_clients; i++)
        if (bpt__ctl_ours(bpt__ctl.fds[i], bpt__ctl.ids[i]))
            shutdown(bpt__ctl.fds[i], SHUT_RDWR);   /* wakes its poll; else it looks within a second */
    while (bpt__ctl.nclients > 0) pthread_cond_wait(&bpt__ctl_gone, &bpt__ctl_lock);
    pthread_mutex_unlock(&bpt__ctl_lock);
    bpt__block_end(self);
    rc = bpt__ctl_retry_left();   /* the sessions whose destroy failed: once more */
    pthread_mutex_lock(&bpt__ctl_lock);
    dfd = bpt__ctl_dir_lock();
    bpt__ctl_unlink();   /* before the close: while it listens, no one takes the file for stale */
    bpt__ctl_dir_unlock(dfd);
    bpt__ctl_close_own();
    bpt__ctl.running = 0;
    bpt__ctl.stopping = 0;
    bpt__ctl.stop_rc = rc;
    pthread_cond_broadcast(&bpt__ctl_stopped);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return rc;
}

int bpt_control_address(char *buf, size_t size) {
    int n;
    if (!buf) return bpt__fail(BPT_EINVAL, "bpt_control_address: buf is NULL");
    pthread_mutex_lock(&bpt__ctl_lock);
    if (!bpt__ctl.running) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_ENOENT, "bpt_control_address: no control server runs in this process");
    }
    n = (int)strlen(bpt__ctl.address);
    if ((size_t)n >= size) {
        pthread_mutex_unlock(&bpt__ctl_lock);
        return bpt__fail(BPT_EINVAL, "bpt_control_address: %zu bytes are too few for %d", size, n + 1);
    }
    memcpy(buf, bpt__ctl.address, (size_t)n + 1);
    pthread_mutex_unlock(&bpt__ctl_lock);
    return n;
}
/*** End of control.c ***/

#endif /* BPTRACE_IMPLEMENTATION_DONE */
#endif /* BPTRACE_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
MIT License

Copyright (c) 2026 the bptrace authors

Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/

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

/* >>close (amalgamate.sh puts the lines below after the last public part) */
#ifdef __cplusplus
}
#endif
#endif /* BPTRACE_H */

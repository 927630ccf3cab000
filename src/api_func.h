/* api_func.h: function records, the public half's one concern here: making
   functions traceable and forgetting them (VM instruction-word sites, native
   BPT_TRACEABLE entries, whole modules), finding them, and the VM's side of
   a traced call (its breakpoint opcode and its return-trace frames). */
#include "api_session.h"

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

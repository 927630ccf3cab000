/* api_pattern.h: trace patterns, the public half's one concern here:
   switching tracing on and off (bpt_trace_pattern with its flags and match
   specs) and watching that change happen (the protocol's two generations
   and its step observer). */
#include "api_func.h"

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

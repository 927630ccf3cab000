/* api_info.h: what tracing measured, the public half's one concern here:
   reading a session's settings, call_count, call_time and call_memory
   (bpt_trace_info), and telling bptrace what it measures against (the
   process a thread runs, the memory it allocates). */
#include "api_pattern.h"

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

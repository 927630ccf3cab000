/* bptrace.d: the USDT provider `bptrace`, as OTP ships erlang_dtrace.d.
 *
 * bptrace.h writes these probes itself (api_probes.h, >>probes); nothing is
 * generated from this file. It is the reference of every probe's arguments,
 * kept in step with the notes: tests/probes/run compares the two (names and
 * argument counts) on x86-64 and aarch64.
 *
 * Every argument is a 64-bit word in a register. char * arguments are
 * addresses in the traced program: bpftrace reads them with str(argN), gdb
 * with (char *)$_probe_argN. A probe fires only while a tool is attached
 * (its semaphore is raised); then it costs one load and an untaken branch.
 *
 * List them:     bpftrace -l 'usdt:./prog:bptrace:*'
 *                readelf -n ./prog          (the .note.stapsdt notes)
 *                gdb ./prog -ex 'info probes stap bptrace'
 * bpftrace 0.17 (Debian 12) reads arg0..arg5 of a USDT probe on x86-64:
 * every probe but user_trace has at most six arguments.
 */

provider bptrace {
    /* ---- A USDT session's events (bpt_session_desc.usdt = 1: OTP's dyntrace
     * tracer). Sent instead of being buffered; the same match specs, rate
     * limits and return frames as any session. The first five arguments are
     * the same in all four. */

    /* A traced call.
     *   tid     the traced thread's OS id (gettid)
     *   addr    the function's entry address (native); 0 for a VM function
     *   module, name, arity   the registered function
     *   arg0    the first argument word as the match spec reads it (a "str"
     *           argument: the address of its copy, valid while the probe runs)
     * bpftrace -e 'usdt:./prog:bptrace:call { @[str(arg2), str(arg3)] = count(); }' */
    probe call(uint64_t tid, void *addr, char *module, char *name, int arity, uint64_t arg0);

    /* A traced function returned (BPT_RETURN: return_trace).
     *   value   the return value, as the match spec's ret type reads it (a
     *           string: the address of its copy)
     * bpftrace -e 'usdt:./prog:bptrace:return { @ret[str(arg3)] = hist(arg5); }' */
    probe return(uint64_t tid, void *addr, char *module, char *name, int arity, uint64_t value);

    /* A traced function was left by an exception or a longjmp (BPT_EXCEPTION:
     * exception_trace).
     *   value   the exception_from message's value
     * bpftrace -e 'usdt:./prog:bptrace:exception { printf("%s:%s unwound\n", str(arg2), str(arg3)); }' */
    probe exception(uint64_t tid, void *addr, char *module, char *name, int arity, uint64_t value);

    /* Execution resumes in a function after a traced call (BPT_RETURN_TO).
     * module, name, arity: the function returned to (NULL: unknown code).
     *   ret     the return address (native); 0 for a VM function
     * bpftrace -e 'usdt:./prog:bptrace:return_to { @[str(arg3)] = count(); }' */
    probe return_to(uint64_t tid, void *addr, char *module, char *name, int arity, void *ret);

    /* ---- The set path */

    /* One of the 13 steps of a breakpoint change (Tracing.md; bp.c).
     *   step    1..13
     *   what    its name ("seize permission", "stage", "commit", ...)
     *   change  the change's id: every step of one change has the same
     *   did     1 if the step had work (0: skipped, nothing to do)
     *   ns      the step's duration
     * bpftrace -e 'usdt:./prog:bptrace:step { printf("change %d step %2d %-20s %d ns\n", arg2, arg0, str(arg1), arg4); }' */
    probe step(int step, char *what, uint64_t change, int did, uint64_t ns);

    /* bpt_trace_pattern was called.
     * bpftrace -e 'usdt:./prog:bptrace:pattern__start { printf("%s %x\n", str(arg0), arg1); }' */
    probe pattern__start(char *pattern, unsigned flags, uint64_t session);

    /* bpt_trace_pattern returned.
     *   result  the functions matched, or a BPT_E* code (< 0)
     *   ns      its duration, the 13 steps included
     *   change  the id the step probes carried; 0 when no change began
     * bpftrace -e 'usdt:./prog:bptrace:pattern__done { printf("%s: %d functions, %d us\n", str(arg0), arg2, arg3 / 1000); }' */
    probe pattern__done(char *pattern, unsigned flags, int64_t result, uint64_t ns, uint64_t change);

    /* A session was created (usdt: 1 for a USDT session) or is being destroyed
     * (its breakpoints off: a destroy refused, which changed nothing, fires none).
     * bpftrace -e 'usdt:./prog:bptrace:session__create { printf("%s %d\n", str(arg1), arg0); }' */
    probe session__create(uint64_t session, char *name, int usdt);
    probe session__destroy(uint64_t session, char *name);

    /* A thread progress wait (erl_thr_progress.c): every thread's next
     * quiescent point after this epoch. The protocol's steps 4, 6, 8, 10 and
     * 12 are such waits; so is bpt_thread_progress_wait.
     *   tid         the waiting thread
     *   target      the epoch waited for
     *   sync_core   1: a wait after code writes (SYNC_CORE)
     *   ns          how long it took
     * bpftrace -e 'usdt:./prog:bptrace:progress__wait__done { @us = hist(arg3 / 1000); }' */
    probe progress__wait__start(uint64_t tid, uint64_t target, int sync_core);
    probe progress__wait__done(uint64_t tid, uint64_t target, int sync_core, uint64_t ns);

    /* A buffered session's thread buffer was full at its cap: the record was
     * dropped (and marked in the stream).
     *   dropped   the thread's losses in this session so far
     * bpftrace -e 'usdt:./prog:bptrace:drop { @[arg0, arg1] = max(arg2); }' */
    probe drop(uint64_t session, uint64_t tid, uint64_t dropped);

    /* bpt_user_trace(i1, i2, i3, i4, s1, s2, s3, s4): OTP's user_trace-i4s4
     * (dyntrace:p/1..8). Strings may be NULL. bpftrace 0.17 reads arg0..arg5.
     * bpftrace -e 'usdt:./prog:bptrace:user_trace { printf("%d %d %s\n", arg0, arg1, str(arg4)); }' */
    probe user_trace(int64_t i1, int64_t i2, int64_t i3, int64_t i4, char *s1, char *s2, char *s3, char *s4);
};

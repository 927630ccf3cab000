/* api_format.h: output formats, the public half's one concern here: turning
   drained messages and trace_info figures into text and files that people
   and tools read (dbg lines, tprof tables, Chrome trace JSON, folded stacks).
   All of it is off the hot path: it never touches traced threads. */
#include "api_info.h"

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

/* api_session.h: trace sessions, the public half's one concern here: a
   session's settings and handle, the messages it produces, the tracers that
   receive them (a callback, or per-thread rings to drain), and its counters. */
#include "api_progress.h"

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

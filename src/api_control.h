/* api_control.h: the control server's public half: what another process
   of the same user can ask this one over a Unix socket, and the calls that
   start and stop the server. */
#include "api_root.h"

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

#!/usr/bin/env python3
"""tests/agent/check.py: a program with no bptrace code, run under the agent
(build/libbptrace-agent.so), steered from outside by bpt through the control
server (bptrace.h >>control).

  check.py live BPT AGENT TARGET LIB [RUNNER...]
      TARGET (tests/agent/target.c, built with the flags only) runs under
      AGENT, under RUNNER if given (qemu-aarch64 -L ...). In order:
        trace    bpt trace --return --args i64 prints work's 3 calls with
                 their argument and 3 return_from with the value
        count    bpt count: work's count is exactly the program's own (100000)
        profile  bpt profile: a call_time table with work's 100000 calls
        limit    bpt trace --limit 5/100000 lets exactly 5 of 100 calls through
        record   bpt record -o F.bpt runs TARGET under the agent; bpt replay
                 prints its 3 calls and 3 returns; bpt report has work's 3
                 calls; bpt dump --folded, replay's --chrome and --folded files
        kill     bpt trace is killed with SIGKILL: the session is gone
                 (bpt sessions) and work's entry bytes are as before the
                 trace (/proc/PID/mem; under qemu-user, the guest's memory
                 at its own addresses), and differed during it
        dlopen   bpt count on lib_work is set before the target dlopens LIB:
                 its 1000 calls are counted exactly, from the first
      Throughout, a spinner thread's count keeps rising: no thread stops.
  check.py bad BPT AGENT TARGET KIND
      KIND: malformed, pattern, hugeline, midstream, slow, clients, stale,
      otheruid, noserver, bigenv (the target's BPTRACE_CONTROL past the
      first 64 KiB of its environment: bpt finds it), linebreak (a bpt
      pattern holding a line break: refused, nothing sent), relative (a
      relative BPTRACE_CONTROL, the target started in a directory of its
      own and gone elsewhere since: bpt, in another, finds the socket; with
      a listening socket of the program's own by the same name, bpt takes
      the one in the target's directory, or refuses to guess), stopped
      (the target stopped with SIGSTOP: bpt, with BPT_TIMEOUT=1, exits 6
      within seconds saying the process is stopped, both when HELLO goes
      unanswered and when the listen backlog is full; after SIGCONT the
      server serves on), forks (BPTRACE_CONTROL_FORKS=1: a child the
      target forks serves bpt at its own pid, counts its 500 calls
      exactly, and its socket goes with it; unset, bpt says the child has
      no server), closefrom (the target closes every descriptor from 3 up
      and opens 16 files that take the numbers: the server opens its
      socket and pipe again, a count is exact, nothing of bptrace's goes
      into the program's files; and under bpt record, the recording goes
      on in its own file: 12 calls, 5 before and 7 after).
      Each bad input gets its error reply (or bpt its message and exit
      status), and the server and target carry on: a HELLO and a count
      afterwards still work.
"""
import os, re, signal, socket, subprocess, sys, tempfile, time

SKIP = 77

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

def run(argv, expect=0, env=None, input=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, input=input)
    print("$ " + " ".join(argv) + "   (exit %d)" % r.returncode)
    print(r.stdout + r.stderr, end="")
    if r.returncode < 0:
        fail("%s died of signal %d" % (argv[0], -r.returncode))
    if expect is not None and r.returncode != expect:
        fail("%s exited %d, expected %d" % (argv[0], r.returncode, expect))
    return r

class Target:
    def __init__(self, agent, target, runner, env_extra=None, cwd=None):
        env = dict(os.environ)
        env.update(env_extra or {})
        if runner:   # qemu: the guest's LD_PRELOAD, not qemu's own
            argv = runner + ["-E", "LD_PRELOAD=" + agent, target]
        else:
            env["LD_PRELOAD"] = agent
            argv = [target]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        line = self.p.stdout.readline()
        m = re.match(r"ready (\d+)", line)
        if not m:
            fail("target did not start: %r %s" % (line, self.p.stderr.read()))
        self.pid = self.p.pid   # under qemu, the guest's getpid is qemu's pid too
        self.last_spins = -1
    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n"); self.p.stdin.flush()
        return self.p.stdout.readline().split()
    def spinning(self, where):
        """The spinner thread's count must have risen since the last look."""
        time.sleep(0.05)
        n = int(self.ask("spins")[1])
        if n <= self.last_spins:
            fail("%s: the spinner thread stopped (%d, then %d)" % (where, self.last_spins, n))
        self.last_spins = n
    def quit(self):
        self.p.stdin.write("quit\n"); self.p.stdin.flush()
        rc = self.p.wait(timeout=60)
        if rc != 0:
            fail("target exited %d: %s" % (rc, self.p.stderr.read()))

def bg(argv, env=None):
    """bpt in the background; wait for its first line on stderr (the pattern is set)."""
    print("$ " + " ".join(argv) + " &")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = p.stderr.readline()
    print(first, end="")
    if not re.match(r"bpt: (tracing|count|time|memory) ", first):
        out, err = p.communicate(timeout=60)
        fail("bpt did not start: %s%s%s" % (first, out, err))
    return p

def finish(p, what):
    out, err = p.communicate(timeout=120)
    print(out + err, end="")
    if p.returncode != 0:
        fail("%s exited %d" % (what, p.returncode))
    return out

def sessions(bpt, pid):
    return subprocess.run([bpt, "sessions", str(pid)], capture_output=True, text=True, timeout=60).stdout

def entry_bytes(pid, target, fn):
    """fn's patchable entry (the 24-byte pad and 8 bytes on), read through
    /proc/PID/mem (the target is our child: ptrace_scope 1 allows it)."""
    nm = subprocess.run(["nm", target], capture_output=True, text=True).stdout
    m = re.search(r"^([0-9a-f]+) T %s$" % fn, nm, re.M)
    base = None
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == os.path.realpath(target) and int(parts[2], 16) == 0:
                base = int(parts[0].split("-")[0], 16)
                break
    if not m or base is None:
        fail("cannot find %s in %s" % (fn, target))
    addr = base + int(m.group(1), 16)
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(addr - 24)
        return f.read(32)

def live(bpt, agent, target, lib, runner):
    t = Target(agent, target, runner)
    pid = str(t.pid)
    mod = os.path.basename(target)
    t.spinning("start")

    print("-- trace")
    p = bg([bpt, "trace", pid, mod + ":work/_", "--return", "--args", "i64", "--duration", "3"])
    if t.ask("run 3")[:2] != ["done", "3"]: fail("run 3")
    t.spinning("trace")
    out = finish(p, "bpt trace")
    for i in range(3):
        if not re.search(r"call %s:work\(%d\)" % (re.escape(mod), i), out): fail("no call work(%d)" % i)
        if not re.search(r"returned from %s:work/0 -> %d" % (re.escape(mod), 3 * i + 1), out):
            fail("no return_from work -> %d" % (3 * i + 1))
    if len(re.findall(r":work", out)) != 6: fail("expected 6 messages of work")

    print("-- trace with a rate limit")
    p = bg([bpt, "trace", pid, mod + ":work/_", "--limit", "5/100000", "--duration", "3"])
    t.ask("run 100")
    out = finish(p, "bpt trace --limit")
    calls = len(re.findall(r"call %s:work" % re.escape(mod), out))
    if calls != 5: fail("--limit 5/100000 let %d calls through, not 5" % calls)

    print("-- count")
    p = bg([bpt, "count", pid, mod + ":_/_", "--duration", "3"])
    if t.ask("run 100000")[:2] != ["done", "100000"]: fail("run 100000")
    t.spinning("count")
    out = finish(p, "bpt count")
    if not re.search(r"^\s+100000  %s:work/0$" % re.escape(mod), out, re.M): fail("work's count is not 100000")
    if not re.search(r"^\s+\d+  %s:spin_step/0$" % re.escape(mod), out, re.M): fail("spin_step is not counted")

    print("-- profile")
    p = bg([bpt, "profile", pid, mod + ":work/_", "--duration", "3"])
    t.ask("run 100000")
    out = finish(p, "bpt profile")
    if not re.search(r"^%s:work/0\s+100000\s" % re.escape(mod), out, re.M): fail("no call_time row of 100000 calls")

    print("-- record, replay")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "t.bpt")
        env = dict(os.environ, BPTRACE_AGENT=agent)
        run([bpt, "record", "-o", f, mod + ":work/_", "--"] + (runner or []) + [target],
            env=env, input="run 3\nquit\n")
        out = run([bpt, "replay", f]).stdout
        if len(re.findall(r"call %s:work" % re.escape(mod), out)) != 3: fail("replay: not 3 calls")
        if len(re.findall(r"returned from %s:work/0 -> \d+" % re.escape(mod), out)) != 3: fail("replay: not 3 returns")
        out = run([bpt, "report", f]).stdout
        if not re.search(r"^%s:work/0\s+3\s" % re.escape(mod), out, re.M): fail("report: no row of work's 3 calls")
        if not re.search(r"work \d+", run([bpt, "dump", "--folded", f]).stdout): fail("dump --folded: no stack of work")
        run([bpt, "replay", f, "--chrome", f + ".json", "--folded", f + ".folded"])
        if '"ph":"B"' not in open(f + ".json").read(): fail("no Chrome begin event")
        if not re.search(r"work \d+", open(f + ".folded").read()): fail("no folded stack of work")

    print("-- kill")
    # Under qemu-user the guest's memory is the qemu process's, at the guest's
    # addresses (the maps show the guest binary there): the same read works.
    before = entry_bytes(t.pid, target, "work")
    p = bg([bpt, "trace", pid, mod + ":work/_", "--return"])
    if "bpt-client-%d" % p.pid not in sessions(bpt, t.pid): fail("no session of the client")
    if entry_bytes(t.pid, target, "work") == before: fail("work's entry did not change while traced")
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 10
    while "bpt-client-%d" % p.pid in sessions(bpt, t.pid):
        if time.time() > deadline: fail("the killed client's session is still there")
        time.sleep(0.05)
    print("the killed client's session is gone")
    if entry_bytes(t.pid, target, "work") != before: fail("work's entry bytes were not restored")
    print("work's entry bytes are as before the trace")
    t.spinning("kill")

    print("-- dlopen")
    p = bg([bpt, "count", pid, "libagentlib*:lib_work/_", "--duration", "4"])
    r = t.ask("lib %s 1000" % lib)
    if r[:2] != ["lib", "1000"]: fail("lib: %s" % r)
    out = finish(p, "bpt count (dlopen)")
    if not re.search(r"^\s+1000  libagentlib[^:]*:lib_work/0$", out, re.M): fail("lib_work's count is not 1000")
    t.spinning("dlopen")
    t.quit()
    print("OK")

def request(s, line):
    s.sendall((line + "\n").encode())
    reply = b""
    while b"\n" not in reply:   # one byte at a time: a STREAM's file follows its OK line
        k = s.recv(1)
        if not k: break
        reply += k
    return reply.decode(errors="replace")

def connect(pid):
    """A connection to pid's server at its default address: the target's
    $XDG_RUNTIME_DIR/bptrace-PID.sock, or the abstract @bptrace-PID."""
    addr = "\0bptrace-%d" % pid
    with open("/proc/%d/environ" % pid, "rb") as f:
        for var in f.read().split(b"\0"):
            if var.startswith(b"XDG_RUNTIME_DIR=/"):
                addr = os.path.join(var[16:].decode(), "bptrace-%d.sock" % pid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(addr)
    return s

def answered(pid, what):
    """Wait (30 s at most) until the server answers a HELLO."""
    deadline = time.time() + 30
    while True:
        try:
            s = connect(pid)
            r = request(s, "HELLO 1")
            s.close()
            if r.startswith("OK bptrace"): return
        except (BlockingIOError, ConnectionError, socket.timeout, FileNotFoundError):
            pass
        if time.time() > deadline: fail("%s: the server did not answer a HELLO within 30 s" % what)
        time.sleep(0.05)

def fork_child(t, d):
    """The target forks a child (target.c's `fork DIR`); its pid."""
    r = t.ask("fork " + d)
    if len(r) != 2 or r[0] != "fork" or int(r[1]) <= 0: fail("fork: %s" % r)
    return int(r[1])

def serving(pid):
    """Whether a control server of pid listens (/proc/net/unix: @bptrace-PID
    or .../bptrace-PID.sock, the default addresses)."""
    with open("/proc/net/unix") as f:
        for line in f:
            name = line.split()[-1] if len(line.split()) >= 8 else ""
            if name in ("@bptrace-%d" % pid,) or name.endswith("/bptrace-%d.sock" % pid):
                return True
    return False

def counts_work(bpt, t, n, what):
    """bpt count of the target's work while it makes n calls: the count must be n."""
    p = bg([bpt, "count", str(t.pid), os.path.basename(t.target) + ":work/_", "--duration", "2"])
    t.ask("run %d" % n)
    if not re.search(r"^\s+%d  " % n, finish(p, "bpt count"), re.M): fail(what)

def still_works(bpt, t):
    """After a bad input: the server answers a new client, and a count is exact."""
    s = connect(t.pid)
    r = request(s, "HELLO 1")
    if not r.startswith("OK bptrace"): fail("HELLO after the bad input: %r" % r)
    s.close()
    counts_work(bpt, t, 777, "count after the bad input is not 777")
    t.spinning("after")
    deadline = time.time() + 10
    while "bpt-client" in sessions(bpt, t.pid):
        if time.time() > deadline: fail("client sessions left behind")
        time.sleep(0.05)

def bad(bpt, agent, target, kind):
    env = {}
    if kind == "noserver":
        env["BPTRACE_CONTROL"] = "off"
    if kind == "bigenv":   # BPTRACE_CONTROL past the first 64 KiB of the target's environment
        env["BPTRACE_BIG"] = "x" * 70000
        env["BPTRACE_CONTROL"] = "@bpt-bigenv-%d" % os.getpid()
    if kind == "stale":
        d = tempfile.mkdtemp()
        path = os.path.join(d, "stale.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()   # the file stays, nobody serves it: a dead process's
        env["BPTRACE_CONTROL"] = path
    cwd = None
    if kind == "forks":   # the servers bind files there: a child's must go with it
        env["BPTRACE_CONTROL_FORKS"] = "1"
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp()
    if kind == "relative":   # the server binds its directory at start + "/" + the value
        cwd = tempfile.mkdtemp()
        path = os.path.join(cwd, "ctl-%d.sock" % os.getpid())
        env["BPTRACE_CONTROL"] = os.path.basename(path)
    t = Target(agent, target, None, env, cwd)
    t.target = target
    t.spinning("start")
    if kind == "noserver":
        r = run([bpt, "count", str(t.pid), "x:y/_"], expect=4)
        if "has no control server" not in r.stderr: fail("no clear message")
        t.quit(); print("OK"); return
    if kind == "linebreak":   # sent as it was, the line after the break was a request of its own
        work = os.path.basename(target) + ":work/_"
        r = run([bpt, "count", str(t.pid), "nosuch:x/_\nPATTERN call " + work, "--duration", "1"], expect=1)
        if "cannot hold a line break" not in r.stderr: fail("no clear message")
        still_works(bpt, t)   # also: the client's session is gone
        t.quit(); print("OK"); return
    if kind == "bigenv":   # bpt reads the whole environment to find the server
        counts_work(bpt, t, 5, "count through BPTRACE_CONTROL")
        t.quit(); print("OK"); return
    if kind == "stale":
        if not os.path.exists(path): fail("no socket file")
        counts_work(bpt, t, 5, "count through the replaced socket")
        t.quit()
        if os.path.exists(path): fail("the socket file was left behind")
        print("OK"); return
    if kind == "stopped":   # a target that does not answer: bpt says so within BPT_TIMEOUT
        work = os.path.basename(target) + ":work/_"
        quick = dict(os.environ, BPT_TIMEOUT="1")
        os.kill(t.pid, signal.SIGSTOP)
        try:
            # Its listen backlog takes the connection; HELLO goes unanswered.
            t0 = time.time()
            r = run([bpt, "count", str(t.pid), work, "--duration", "1"], expect=6, env=quick)
            took = time.time() - t0
            if "no answer to HELLO" not in r.stderr or "it is stopped" not in r.stderr:
                fail("no clear message for a stopped target")
            if took > 8: fail("bpt took %.1f s with BPT_TIMEOUT=1" % took)
            # Stopped during a count: INFO goes unanswered, and bpt says so once (no BYE after it).
            os.kill(t.pid, signal.SIGCONT)
            t0 = time.time()
            p = bg([bpt, "count", str(t.pid), work, "--duration", "1"], env=quick)
            os.kill(t.pid, signal.SIGSTOP)
            out, err = p.communicate(timeout=60)
            took = time.time() - t0
            print(out + err, end="")
            if p.returncode != 6 or "no answer to INFO" not in err: fail("bpt count exited %d, want 6 naming INFO" % p.returncode)
            if err.count("no answer") != 1: fail("more than one request timed out: BYE was sent after INFO's")
            if took > 8: fail("bpt count took %.1f s with BPT_TIMEOUT=1" % took)
            # Its backlog full (128 pending, as listen() was told): the connect waits, then says so.
            pending = []
            for i in range(300):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(0.2)
                try:
                    c.connect("\0bptrace-%d" % t.pid)
                except (socket.timeout, BlockingIOError):
                    c.close()
                    break
                pending.append(c)
            print("%d connections pending in the stopped target's backlog" % len(pending))
            if len(pending) == 300: fail("the backlog never filled")
            t0 = time.time()
            r = run([bpt, "count", str(t.pid), work], expect=6, env=quick)
            took = time.time() - t0
            if "no answer to a connect" not in r.stderr: fail("no clear message for a full backlog")
            if took > 8: fail("bpt took %.1f s with BPT_TIMEOUT=1" % took)
            for c in pending: c.close()
        finally:
            os.kill(t.pid, signal.SIGCONT)
        # The server takes the 128 abandoned connections, in order, and
        # closes them: once a HELLO of ours is answered, every one queued
        # before it has been taken. (A connect alone that succeeds says
        # only that one place in the backlog came free; and Python's
        # connect with a timeout does not wait for room.)
        answered(t.pid, "after SIGCONT")
        still_works(bpt, t)
        r = run([bpt, "count", str(t.pid), work, "--duration", "0.2"], env=dict(os.environ, BPT_TIMEOUT="x"))
        if "BPT_TIMEOUT=x is not a number" not in r.stderr: fail("no warning for BPT_TIMEOUT=x")
        t.quit(); print("OK"); return
    if kind == "forks":   # BPTRACE_CONTROL_FORKS=1: a forked child serves bpt at its own pid
        work = os.path.basename(target) + ":work/_"
        d = tempfile.mkdtemp()
        child = fork_child(t, d)
        deadline = time.time() + 30
        while not serving(child):
            if time.time() > deadline: fail("the forked child %d started no control server" % child)
            time.sleep(0.01)
        p = bg([bpt, "count", str(child), work, "--duration", "3"])
        open(os.path.join(d, "go"), "w").close()
        out = finish(p, "bpt count of the forked child")
        if not os.path.exists(os.path.join(d, "done")): fail("the child had not made its calls")
        if not re.search(r"^\s+500  ", out, re.M): fail("the forked child's count is not 500")
        open(os.path.join(d, "quit"), "w").close()
        if t.ask("wait") != ["wait", str(child), "0"]: fail("the forked child did not exit 0")
        sock = os.path.join(env["XDG_RUNTIME_DIR"], "bptrace-%d.sock" % child)
        if serving(child) or os.path.exists(sock): fail("the forked child's socket is left behind")
        still_works(bpt, t)   # the parent's server, after the fork
        t.quit()
        for f in ("go", "done", "quit"): os.unlink(os.path.join(d, f))
        # Unset, a child has no server, and bpt says so (asked while the child lives).
        t = Target(agent, target, None, {"XDG_RUNTIME_DIR": env["XDG_RUNTIME_DIR"]})
        t.target = target
        child = fork_child(t, d)
        time.sleep(0.3)
        if not os.path.exists("/proc/%d" % child) or serving(child): fail("the second child: gone, or serving")
        r = run([bpt, "count", str(child), work, "--duration", "0.2"], expect=4)
        if "has no control server" not in r.stderr: fail("no clear message for a child without a server")
        open(os.path.join(d, "go"), "w").close()
        open(os.path.join(d, "quit"), "w").close()
        if t.ask("wait") != ["wait", str(child), "0"]: fail("the second child did not exit 0")
        t.quit()
        for f in ("go", "done", "quit"): os.unlink(os.path.join(d, f))
        os.rmdir(d)
        os.rmdir(env["XDG_RUNTIME_DIR"])
        print("OK"); return
    if kind == "closefrom":   # the program closes the agent's descriptors and reuses the numbers
        d = tempfile.mkdtemp()
        r = t.ask("closefrom " + d)
        if r[0] != "closefrom" or int(r[1]) < 3: fail("closefrom: %s (the server's socket and pipe were not open?)" % r)
        print("the target closed %s descriptors and opened 16 files of its own" % r[1])
        answered(t.pid, "after closefrom")   # the listener opened its socket and pipe again
        counts_work(bpt, t, 5, "count after closefrom")
        t.spinning("closefrom")
        t.quit()   # stop: its wake-up byte must not go into the program's file
        written = [f for f in sorted(os.listdir(d)) if os.path.getsize(os.path.join(d, f))]
        if written: fail("bptrace wrote into the program's files: %s" % written)
        # Recording from the start (bpt record): the output file's descriptor closed under it.
        out = os.path.join(d, "rec.bpt")
        d2 = tempfile.mkdtemp()
        print("$ %s record -o %s 'agent-target:work/_' -- %s  (commands on stdin)" % (bpt, out, target))
        p = subprocess.Popen([bpt, "record", "-o", out, os.path.basename(target) + ":work/_", "--", target],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, BPTRACE_AGENT=agent))
        def ask(cmd):
            p.stdin.write(cmd + "\n"); p.stdin.flush()
            return p.stdout.readline().split()
        if not p.stdout.readline().startswith("ready"): fail("the recorded target did not start")
        if ask("run 5")[:2] != ["done", "5"]: fail("run 5")
        time.sleep(0.3)   # the drainer writes the first calls
        if ask("closefrom " + d2)[0] != "closefrom": fail("closefrom")
        if ask("run 7")[:2] != ["done", "7"]: fail("run 7")
        time.sleep(0.3)
        p.stdin.write("quit\n"); p.stdin.flush()
        o, e = p.communicate(timeout=60)
        print(e, end="")
        if p.returncode != 0: fail("bpt record exited %d" % p.returncode)
        r = run([bpt, "replay", out])
        calls = len(re.findall(r" call ", r.stdout))
        if calls != 12: fail("the recording has %d calls, not 12 (5 before closefrom, 7 after)" % calls)
        written = [f for f in sorted(os.listdir(d2)) if os.path.getsize(os.path.join(d2, f))]
        if written: fail("the recording went into the program's files: %s" % written)
        for dd in (d, d2):
            for f in os.listdir(dd): os.unlink(os.path.join(dd, f))
            os.rmdir(dd)
        print("OK"); return
    if kind == "relative":   # bpt, in another directory, finds where the target bound it
        if not os.path.exists(path): fail("no socket file at " + path)
        if t.ask("chdir /") != ["chdir", "ok"]: fail("the target did not chdir")
        counts_work(bpt, t, 5, "count through a relative BPTRACE_CONTROL")
        # The program listens on a socket of its own by the same name (a
        # service's): bpt must not speak to it. Back in the directory it
        # started in, that one is bptrace's; elsewhere bpt cannot tell them
        # apart and says so (it picked the first listed, and waited for
        # the program's socket to answer HELLO).
        other = tempfile.mkdtemp()
        own = os.path.join(other, os.path.basename(path))
        if t.ask("listen " + own) != ["listen", "ok"]: fail("the target did not listen at " + own)
        if t.ask("chdir " + cwd) != ["chdir", "ok"]: fail("the target did not chdir back")
        counts_work(bpt, t, 6, "count with a same-named socket of the program's")
        if t.ask("chdir /") != ["chdir", "ok"]: fail("the target did not chdir")
        r = run([bpt, "count", str(t.pid), os.path.basename(target) + ":work/_", "--duration", "1"], expect=4)
        if "sockets named" not in r.stderr or own not in r.stderr or path not in r.stderr:
            fail("no clear message naming both sockets")
        t.spinning("after")
        t.quit()
        if os.path.exists(path): fail("the socket file was left behind")
        os.unlink(own)
        os.rmdir(other)
        os.rmdir(cwd)
        print("OK"); return
    s = connect(t.pid)
    if kind == "malformed":
        for line, want in [("", "ERR -1"), ("FOO bar", "ERR -1"), ("PATTERN count x:y/_", "ERR -5"),
                           ("HELLO 2", "ERR -10"), ("HELLO 1 rate=0/0", "ERR -1"), ("HELLO 1", "OK"),
                           ("HELLO 1", "ERR -1"), ("PATTERN", "ERR -4"), ("PATTERN nonsense x:y/_", "ERR -4"),
                           ("PATTERN count", "ERR -3"), ("INFO call x:y/_", "ERR -4"), ("\x00\xff\x01", "ERR -1")]:
            r = request(s, line)
            print("%r -> %s" % (line, r.strip()))
            if not r.startswith(want): fail("%r: expected %s" % (line, want))
    elif kind == "pattern":
        request(s, "HELLO 1")
        for line, want in [("PATTERN count nomodule", "ERR -3"), ("PATTERN count a:b/999", "ERR -3"),
                           ("PATTERN count nosuch:fn/_", "OK 0"), ("PATTERN call ret=bogus x:y/_", "ERR -3"),
                           ("PATTERN call,pause x:y/_", "ERR -4"), ("INFO count nosuch:*/_", "OK 0")]:
            r = request(s, line)
            print("%r -> %s" % (line, r.strip()))
            if not r.startswith(want): fail("%r: expected %s" % (line, want))
    elif kind == "hugeline":
        request(s, "HELLO 1")
        r = request(s, "PATTERN count " + "x" * (1 << 20))
        print("1 MB line -> %s" % r.strip()[:120])
        if not r.startswith("ERR -13"): fail("a 1 MB line: expected ERR -13")
        r = request(s, "PATTERN count nosuch:fn/_")
        print("the next line -> %s" % r.strip())
        if not r.startswith("OK 0"): fail("the connection did not go on after the long line")
    elif kind == "midstream":
        request(s, "HELLO 1")
        request(s, "PATTERN call %s:work/_" % os.path.basename(target))
        if not request(s, "STREAM").startswith("OK stream"): fail("no stream")
        t.ask("run 50000")
        s.recv(1000)   # part of the stream, then hang up in the middle of it
        print("hung up mid-stream")
    elif kind == "slow":
        # A client that does not read: the traced thread never waits; what
        # does not fit in its 2 chunks of 16 KiB (and the socket) is dropped,
        # counted, and marked in the stream. Read late, calls + dropped is
        # exactly what the program made.
        n = 100000
        r = request(s, "HELLO 1 chunks=2 max_chunks=2")
        if not r.startswith("OK"): fail("HELLO with small buffers: %r" % r)
        request(s, "PATTERN call %s:work/_" % os.path.basename(target))
        if not request(s, "STREAM").startswith("OK stream"): fail("no stream")
        t0 = time.time()
        if t.ask("run %d" % n)[:2] != ["done", str(n)]: fail("run")
        print("the program made %d calls in %.3f s while the client read nothing" % (n, time.time() - t0))
        t.spinning("slow client")
        data = b""
        s.settimeout(1.0)
        def read_all():
            nonlocal data
            try:
                while True:
                    k = s.recv(1 << 20)
                    if not k: break
                    data += k
            except socket.timeout:
                pass
        read_all()
        # A thread marks its losses with its next record that fits: one more call.
        t.ask("run 1")
        n += 1
        read_all()
        with tempfile.NamedTemporaryFile(suffix=".bpt") as f:
            f.write(data); f.flush()
            out = subprocess.run([bpt, "replay", f.name], capture_output=True, text=True, timeout=60)
        calls = len(re.findall(r" call ", out.stdout))
        dropped = sum(int(x) for x in re.findall(r"dropped (\d+) messages", out.stdout))
        print("%d bytes read late: %d calls, %d dropped (%s)" % (len(data), calls, dropped, out.stderr.strip()))
        if dropped == 0: fail("nothing was dropped: the buffers were not small enough to test this")
        if calls + dropped != n: fail("calls + dropped = %d, not %d" % (calls + dropped, n))
    elif kind == "clients":
        conns, socks = [connect(t.pid) for i in range(100)], []
        for c in conns:
            try:
                r = request(c, "HELLO 1")
            except OSError:   # refused: the server said why, then closed
                r = c.recv(4096).decode()
            socks.append((c, r))
        ok = sum(1 for _, r in socks if r.startswith("OK"))
        busy = sum(1 for _, r in socks if r.startswith("ERR -13"))
        # max_clients is 16, and this check's first connection holds one
        print("100 more clients at once: %d served, %d refused with ERR -13" % (ok, busy))
        if ok != 15 or busy != 85: fail("expected 15 served and 85 refused")
        t.spinning("100 clients")
        for c, _ in socks: c.close()
    elif kind == "otheruid":
        if os.geteuid() != 0:
            print("SKIPPED: needs root to connect as another uid (nobody)")
            t.quit(); sys.exit(SKIP)
        rd, wr = os.pipe()
        child = os.fork()
        if child == 0:   # as nobody: connect, and hand back the server's first line
            try:
                os.close(rd)
                os.setgid(65534); os.setuid(65534)
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(30)
                c.connect("\0bptrace-%d" % t.pid)
                os.write(wr, c.recv(200))
            finally:
                os._exit(0)
        os.close(wr)
        got = b""
        while True:
            k = os.read(rd, 200)
            if not k: break
            got += k
        os.waitpid(child, 0)
        r = got.decode().strip()
        print("as uid 65534: %s" % r)
        if not r.startswith("ERR -11 uid 65534 may not control"): fail("another uid was not refused")
    else:
        fail("unknown kind " + kind)
    s.close()
    still_works(bpt, t)
    t.quit()
    print("OK")

if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "live":
        live(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    elif len(sys.argv) == 6 and sys.argv[1] == "bad":
        bad(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        print(__doc__)
        sys.exit(2)

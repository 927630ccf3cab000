#!/usr/bin/env python3
"""tests/bpt/check.py: bpt (examples/bpt) against live targets.

  check.py live BPT TARGET [RUNNER...]
      TARGET (tests/bpt/target.c) runs, under RUNNER if given (qemu-aarch64);
      bpt funcs, top (one refresh), pstack, sessions, progress and ps read it.
      Checked: once_fn's count is 1234; tick's count lies between the
      program's own bpt_trace_info before and after, and so does its call_time
      in top; pstack shows each worker in hold <- middle <- outer (and maybe
      in tick); the sessions, their patterns and lanes, and a callback
      session's records counted delivered, not unread; each
      worker's loop ran on across the reads, and no thread was ever traced or
      stopped (/proc/PID/task/*/status, sampled every 2 ms while bpt ran);
      once the workers stop calling tick, top's call_time for it is the
      program's own to the digit (the target is built with
      BPT_MAX_THREADS=2: some of its tables are past the breakpoint's slots).
  check.py sample BPT TARGET
      TARGET --burn: the workers spend their time in burn(), registered but
      untraced, under hold <- middle <- outer. bpt sample names burn the
      hottest function, --pstack puts it under that traced stack, --blame
      names that stack its caller. Where the kernel refuses perf events, the
      check says SKIPPED with bpt's message (exit 77).
  check.py bad BPT TARGET LAYOUT KIND
      bpt against a bad target; it must exit with the expected status and
      message, never a signal, nor hang. KIND: noproc nobptrace magic version
      size offset wild exits eperm fifo shrink registry. LAYOUT: the output of root_layout.
"""
import os, re, shutil, struct, subprocess, sys, tempfile, threading, time

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

class Target:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.match(r"ready (\d+) (\d+) (\d+) (\d+)", line)
        if not m:
            fail("target did not start: %r %s" % (line, self.p.stderr.read()))
        self.pid = int(m.group(1))
        self.tids = [int(m.group(i)) for i in (2, 3, 4)]
    def info(self):
        self.p.stdin.write("info\n"); self.p.stdin.flush()
        tick = int(self.p.stdout.readline().split()[1])
        self.time = [int(x) for x in self.p.stdout.readline().split()[1:]]
        spins = [int(x) for x in self.p.stdout.readline().split()[1:]]
        return tick, spins
    def pause(self):
        self.p.stdin.write("pause\n"); self.p.stdin.flush()
        if self.p.stdout.readline().strip() != "paused":
            fail("target did not pause")
    def quit(self):
        self.p.stdin.write("quit\n"); self.p.stdin.flush()
        rc = self.p.wait(timeout=60)
        if rc != 0:
            fail("target exited %d: %s" % (rc, self.p.stderr.read()))

def run(argv, expect=0):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    print("$ " + " ".join(argv) + "   (exit %d)" % r.returncode)
    print(r.stdout + r.stderr, end="")
    if r.returncode < 0:
        fail("bpt died of signal %d" % -r.returncode)
    if expect is not None and r.returncode != expect:
        fail("bpt exited %d, expected %d" % (r.returncode, expect))
    return r

class Watch(threading.Thread):
    """Samples every thread's status while bpt runs: never traced, never stopped."""
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop, self.bad, self.samples = pid, False, [], 0
    def run(self):
        while not self.stop:
            try:
                for t in os.listdir("/proc/%d/task" % self.pid):
                    with open("/proc/%d/task/%s/status" % (self.pid, t)) as f:
                        st = f.read()
                    state = re.search(r"State:\s+(\S)", st).group(1)
                    tracer = int(re.search(r"TracerPid:\s+(\d+)", st).group(1))
                    if state in "tT" or tracer:
                        self.bad.append("thread %s state %s tracer %d" % (t, state, tracer))
                self.samples += 1
            except (FileNotFoundError, ProcessLookupError, AttributeError):
                pass
            time.sleep(0.002)

def live(bpt, target, runner):
    t = Target(runner + [target])
    w = Watch(t.pid); w.start()
    tick0, spins0 = t.info()
    r = run([bpt, "funcs", str(t.pid)])
    tick1, spins1 = t.info()
    rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
    for name, flags, sess in (("target:once_fn/1", "count", "counts"), ("target:tick/1", "count,time", "counts,times"),
                              ("target:hold/1", "call", "stacks"), ("target:middle/1", "call", "stacks"),
                              ("target:outer/1", "call", "stacks")):
        if name not in rows or rows[name][2] != flags or rows[name][4] != sess:
            fail("funcs: %s should be %s in session %s: %s" % (name, flags, sess, rows.get(name)))
    if rows["target:once_fn/1"][3] != "1234":
        fail("funcs: once_fn counted %s, called 1234 times" % rows["target:once_fn/1"][3])
    seen = int(rows["target:tick/1"][3])
    if not tick0 <= seen <= tick1:
        fail("funcs: tick %d outside the program's own counts %d..%d" % (seen, tick0, tick1))
    print("tick: program %d <= bpt %d <= program %d" % (tick0, seen, tick1))
    r = run([bpt, "funcs", str(t.pid), "*:o*"])
    if [l.split()[0] for l in r.stdout.splitlines()[1:]] != ["target:once_fn/1", "target:outer/1"]:
        fail("funcs PATTERN: expected once_fn and outer")
    time1 = t.time
    r = run([bpt, "top", str(t.pid), "-n", "1", "-d", "0.3"])
    tick2, _ = t.info()
    time2 = t.time
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+target:tick/1$", r.stdout, re.M)
    if not m or not int(m.group(1)) > 0 or not tick1 <= int(m.group(2)) <= tick2:
        fail("top: tick's row should have calls/s > 0 and a count in %d..%d" % (tick1, tick2))
    own_ms = float(m.group(4))
    if not (time1[1] / 1e6 - 0.1 <= own_ms <= time2[1] / 1e6 + 0.1) or not float(m.group(3)) > 0:
        fail("top: tick's own time %.1f ms should lie in the program's own %.1f..%.1f ms, and grow"
             % (own_ms, time1[1] / 1e6, time2[1] / 1e6))
    print("tick's call_time: program %.1f ms <= bpt %.1f ms <= program %.1f ms" % (time1[1] / 1e6, own_ms, time2[1] / 1e6))
    if not re.search(r"^\s*0\s+1234\s+-\s+-\s+target:once_fn/1$", r.stdout, re.M):
        fail("top: once_fn's row should be 0 calls/s, 1234 calls, untimed")
    r = run([bpt, "top", str(t.pid), "-n", "1", "-d", "0.2", "-s", "time", "-r", "1"])
    if not re.search(r"target:tick/1$", r.stdout, re.M):
        fail("top -s time: tick, the one timed function, comes first")
    r = run([bpt, "pstack", str(t.pid)])
    stacks = {}
    for block in re.split(r"^thread ", r.stdout, flags=re.M)[1:]:
        tid = int(block.split()[0])
        stacks[tid] = re.findall(r"#\d+ (\S+)", block)
    # Each worker holds outer -> middle -> hold; it may be inside tick too
    # (timed: a frame while it runs).
    for tid in t.tids:
        if stacks.get(tid) not in (["target:hold/1", "target:middle/1", "target:outer/1"],
                                   ["target:tick/1", "target:hold/1", "target:middle/1", "target:outer/1"]):
            fail("pstack: thread %d should be in hold <- middle <- outer: %s" % (tid, stacks.get(tid)))
    if stacks.get(t.pid) != []:
        fail("pstack: the main thread holds no traced frame: %s" % stacks.get(t.pid))
    r = run([bpt, "sessions", str(t.pid)])
    for want in (r'"counts": buffered', r'"stacks": buffered', r"pattern target:tick/1  count\n",
                 r"pattern target:\*/1  call,return\n", r"pattern target:once_fn/1  call,off\n",
                 r"lanes 3, buffers", r"records written 9, drained 0, unread 9",
                 r'"callback": callback\n', r"records written 100, drained 0, unread 0, delivered 100\n"):
        if not re.search(want, r.stdout):
            fail("sessions: no match for %r" % want)
    r = run([bpt, "progress", str(t.pid)])
    m = re.match(r"epoch (\d+), waits (\d+), thread records (\d+)", r.stdout)
    if not m or int(m.group(3)) != 4 or int(m.group(1)) < 2:
        fail("progress: expected 4 thread records and an epoch moved by the patterns")
    for tid in t.tids + [t.pid]:
        if not re.search(r"^%d\s+\d+\s+(quiescent|pinned x1 since epoch \d+)\s" % tid, r.stdout, re.M):
            fail("progress: thread %d should be quiescent or pinned once" % tid)
    r = run([bpt, "ps"])
    if not re.search(r"^%d\s+0\.\d+\.\d+\s+(x86_64|aarch64)\s" % t.pid, r.stdout, re.M):
        fail("ps: the target is not listed")
    _, spins2 = t.info()
    w.stop = True; w.join()
    # Across all the reads (one read alone can be shorter than a time slice
    # here: three spinning workers on two cores).
    for k in range(3):
        if not spins0[k] < spins2[k]:
            fail("worker %d did not run on across the reads: %s -> %s" % (k, spins0[k], spins2[k]))
    if w.bad or w.samples < 5:
        fail("a thread was stopped or traced while bpt read: %s (%d samples)" % (w.bad[:3], w.samples))
    print("workers ran on: %s -> %s -> %s; %d status samples, none stopped or traced" % (spins0, spins1, spins2, w.samples))
    # tick's call_time, exact: the workers stop calling it, bpt sums the
    # tables its threads charged (built with BPT_MAX_THREADS=2, some are in
    # the array past the breakpoint's slots), then the program sums them.
    t.pause()
    r = run([bpt, "top", str(t.pid), "-n", "1", "-d", "0.1"])
    m = re.search(r"^\s*\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s+target:tick/1$", r.stdout, re.M)
    t.info()
    own = "%.1f" % (t.time[1] / 1e6)
    if not m or m.group(1) != own:
        fail("top: tick's own time once paused should be the program's own %s ms, not %s" % (own, m and m.group(1)))
    print("tick's call_time once paused: bpt %s ms, program %s ms" % (m.group(1), own))
    t.quit()

def sample(bpt, target):
    t = Target([target, "--burn"])
    try:
        r = run([bpt, "sample", str(t.pid), "--duration", "1", "--pstack"], expect=None)
        if r.returncode == 3 and "perf events refused" in r.stderr:
            print("SKIPPED: " + r.stderr.strip())
            t.quit()
            sys.exit(77)
        if r.returncode != 0:
            fail("sample exited %d" % r.returncode)
        m = re.search(r"^\s*(\d+)\s+([\d.]+)%\s+(\S+)$", r.stdout, re.M)
        if not m or m.group(3) != "target:burn/1" or float(m.group(2)) < 50:
            fail("sample: the hottest function should be target:burn/1 with most samples")
        if not re.search(r"^\s*\d+\s+target:outer/1;target:middle/1;target:hold/1;target:burn/1$", r.stdout, re.M):
            fail("sample --pstack: burn should run under outer;middle;hold")
        r = run([bpt, "sample", str(t.pid), "--duration", "0.5", "--blame", "target:burn/1"])
        m = re.search(r"CALLERS.*\n\s*(\d+)\s+(\S+)$", r.stdout, re.M)
        if not m or m.group(2) != "target:outer/1;target:middle/1;target:hold/1":
            fail("sample --blame: burn's traced callers should be outer;middle;hold")
    finally:
        if t.p.poll() is None:
            t.quit()

def patched(target, layout, kind, tmp):
    """A copy of target whose bpt_root has one thing wrong."""
    data = bytearray(open(target, "rb").read())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    root = None
    for s in secs:
        if s[1] == 2:   # SHT_SYMTAB
            strtab = secs[s[6]]
            for j in range(s[5] // 24):
                name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, s[4] + 24 * j)
                end = data.index(b"\0", strtab[4] + name)
                if data[strtab[4] + name:end] == b"bpt_root":
                    sec = secs[shndx]
                    root = value - sec[3] + sec[4]
    if root is None:
        fail("no bpt_root in " + target)
    L = dict(l.split() for l in layout.splitlines())
    L = {k: int(v) for k, v in L.items()}
    off_next = root + L["field_off"] + 4 * L["thread_next"]
    if kind == "magic":
        data[root:root + 8] = b"NOTAROOT"
    elif kind == "version":
        struct.pack_into("<I", data, root + L["version"], 99)
    elif kind == "size":
        struct.pack_into("<I", data, root + L["struct_bytes"] + 4 * L["thread"], 0x7fffffff)
    elif kind == "offset":
        struct.pack_into("<I", data, off_next, 0xfffff0)
    elif kind == "wild":   # the next pointer read from where the tid is: a wild address
        tid_off, = struct.unpack_from("<I", data, root + L["field_off"] + 4 * L["thread_tid"])
        struct.pack_into("<I", data, off_next, tid_off)
    path = os.path.join(tmp, "target-" + kind)
    open(path, "wb").write(data)
    os.chmod(path, 0o755)
    return path

def write_elf(path):
    """An ELF64 shared object of 64 KiB whose first page holds only its ELF
    and program headers: its section headers, symbols and names are past
    60000 bytes."""
    shoff, symoff, stroff = 60000, 61000, 62000
    strs = b"\0bpt_not_root\0"
    data = bytearray(65536)
    struct.pack_into("<16sHHIQQQIHHHHHH", data, 0, b"\x7fELF\x02\x01\x01" + b"\0" * 9, 3, 62, 1, 0, 64, shoff, 0,
                     64, 56, 1, 64, 3, 0)
    struct.pack_into("<IIQQQQQQ", data, 64, 1, 5, 0, 0, 0, 65536, 65536, 4096)   # PT_LOAD
    struct.pack_into("<IIQQQQIIQQ", data, shoff + 64, 0, 2, 0, 0, symoff, 48, 2, 1, 8, 24)   # SHT_SYMTAB
    struct.pack_into("<IIQQQQIIQQ", data, shoff + 128, 0, 3, 0, 0, stroff, len(strs), 0, 0, 1, 0)   # SHT_STRTAB
    struct.pack_into("<IBBHQQ", data, symoff + 24, 1, 0x12, 0, 1, 0x1000, 16)   # a function
    data[stroff:stroff + len(strs)] = strs
    open(path, "wb").write(data)

def bad(bpt, target, layout_file, kind):
    layout = open(layout_file).read()
    tmp = tempfile.mkdtemp()
    try:
        if kind == "noproc":
            r = run([bpt, "funcs", "999999999"], expect=2)
            if "no process" not in r.stderr: fail("expected 'no process'")
            r = run([bpt, "funcs", "12x"], expect=1)
            return
        if kind == "nobptrace":
            p = subprocess.Popen(["sleep", "30"])
            try:
                r = run([bpt, "pstack", str(p.pid)], expect=4)
                if "has no bptrace" not in r.stderr: fail("expected 'has no bptrace'")
            finally:
                p.kill(); p.wait()
            return
        if kind == "fifo":
            # A process (no bptrace in it) maps a file, deletes it, and puts a
            # FIFO where /proc/PID/maps names it, "PATH (deleted)": bpt opened
            # that name and blocked in open() for good (found by review).
            # bpt funcs on it and bpt ps must finish.
            code = ("import mmap, os, sys, time\n"
                    "p = sys.argv[1]\n"
                    "f = open(p, 'wb+'); f.write(b'x' * 4096); f.flush()\n"
                    "m = mmap.mmap(f.fileno(), 4096)\n"
                    "os.unlink(p); os.mkfifo(p + ' (deleted)')\n"
                    "print('ready', flush=True); time.sleep(60)\n")
            p = subprocess.Popen([sys.executable, "-c", code, os.path.join(tmp, "mapped")], stdout=subprocess.PIPE,
                                 text=True)
            try:
                if p.stdout.readline().strip() != "ready": fail("the FIFO's process did not start")
                try:
                    r = subprocess.run([bpt, "funcs", str(p.pid)], capture_output=True, text=True, timeout=20)
                    print("$ bpt funcs %d   (exit %d)\n%s" % (p.pid, r.returncode, r.stdout + r.stderr), end="")
                    if r.returncode != 4: fail("bpt funcs: expected exit 4, 'has no bptrace'")
                    r = subprocess.run([bpt, "ps"], capture_output=True, text=True, timeout=20)
                    print("$ bpt ps   (exit %d)" % r.returncode)
                    if r.returncode < 0: fail("bpt ps died of signal %d" % -r.returncode)
                except subprocess.TimeoutExpired as e:
                    fail("bpt hung on the FIFO (%s)" % " ".join(e.cmd))
            finally:
                p.kill(); p.wait()
            return
        if kind == "shrink":
            # A process (no bptrace in it) maps an ELF file whose section
            # headers and symbols lie past its first page. bpt finds the
            # file in /proc/PID/maps and reads its symbols; the shim
            # (shrink_preload.so) cuts the file to one page as bpt's fstat
            # of it returns. Read through an mmap of the size fstat gave,
            # the section headers were past the end: SIGBUS (found by
            # review). bpt must skip the file and finish: exit 4.
            elf = os.path.join(os.path.realpath(tmp), "shrinks.so")
            write_elf(elf)
            code = ("import mmap, sys, time\n"
                    "f = open(sys.argv[1], 'rb')\n"
                    "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
                    "print('ready', flush=True); time.sleep(60)\n")
            p = subprocess.Popen([sys.executable, "-c", code, elf], stdout=subprocess.PIPE, text=True)
            try:
                if p.stdout.readline().strip() != "ready": fail("the mapping process did not start")
                env = dict(os.environ, LD_PRELOAD=os.path.join(os.path.dirname(bpt), "shrink_preload.so"),
                           BPT_TEST_SHRINK=elf, BPT_TEST_SHRINK_TO="4096")
                r = subprocess.run([bpt, "funcs", str(p.pid)], capture_output=True, text=True, timeout=60, env=env)
                print("$ bpt funcs %d   (exit %d)\n%s" % (p.pid, r.returncode, r.stdout + r.stderr), end="")
                if "cut to 4096 bytes" not in r.stderr: fail("the shim did not cut the file: the check proves nothing")
                if r.returncode < 0: fail("bpt funcs died of signal %d" % -r.returncode)
                if r.returncode != 4 or "has no bptrace" not in r.stderr:
                    fail("bpt funcs: expected exit 4, 'has no bptrace'")
            finally:
                p.kill(); p.wait()
            return
        if kind == "registry":
            # The registry's length says 2M functions (about 1 GB of bpt's
            # records) and every one of them reads: bpt held them all (1 GB
            # resident, found by review). It must refuse the length before
            # it allocates: exit 5, the length named, and its own peak
            # memory far below what the length asks for.
            t = Target([target, "--corrupt-registry", str((1 << 21) + 1)])
            try:
                b = subprocess.Popen([bpt, "funcs", str(t.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
                err = b.stderr.read()
                _, status, usage = os.wait4(b.pid, 0)
                b.returncode = rc = os.waitstatus_to_exitcode(status)
                print("$ bpt funcs %d   (exit %d, peak resident %d KiB)\n%s" % (t.pid, rc, usage.ru_maxrss, err), end="")
                if rc < 0: fail("bpt funcs died of signal %d" % -rc)
                if rc != 5 or "refused the registry's length" not in err or "memory budget" not in err:
                    fail("bpt funcs: expected exit 5, 'refused the registry's length ... memory budget'")
                if usage.ru_maxrss > 128 * 1024:
                    fail("bpt funcs held %d KiB before it refused the length" % usage.ru_maxrss)
            finally:
                t.quit()
            return
        if kind == "exits":
            t = Target([target, "--exit-after", "400"])
            r = run([bpt, "top", str(t.pid), "-n", "1000", "-d", "0.05"], expect=2)
            if "exited" not in r.stderr and "no process" not in r.stderr: fail("expected 'exited'")
            t.p.wait(timeout=30)
            return
        if kind == "eperm":
            if os.geteuid() != 0 or not shutil.which("setpriv"):
                print("SKIPPED: needs root and setpriv to read as another uid")
                sys.exit(77)
            t = Target([target])
            try:
                bcopy = os.path.join(tmp, "bpt"); shutil.copy(bpt, bcopy)
                os.chmod(tmp, 0o755); os.chmod(bcopy, 0o755)
                r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bcopy, "funcs", str(t.pid)],
                        expect=3)
                if "EPERM" not in r.stderr or "ptrace_scope" not in r.stderr: fail("expected EPERM and ptrace_scope")
            finally:
                t.quit()
            return
        expect = {"magic": ("not a bptrace root record", 5), "version": ("layout version 99", 5),
                  "size": ("has a size of", 5), "offset": ("past its structure", 5),
                  "wild": ("cannot read a thread record", 5)}[kind]
        t = Target([patched(target, layout, kind, tmp)])
        try:
            for cmd in ("funcs", "pstack", "progress", "top"):
                r = run([bpt, cmd, str(t.pid)] + (["-n", "1", "-d", "0.1"] if cmd == "top" else []), expect=expect[1])
                if expect[0] not in r.stderr: fail("%s: expected %r" % (cmd, expect[0]))
                if kind != "wild": break
        finally:
            t.quit()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "live":
        live(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "sample":
        sample(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "bad":
        bad(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        print(__doc__); sys.exit(2)
    print("OK")

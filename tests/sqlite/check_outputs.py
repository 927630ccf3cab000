#!/usr/bin/env python3
"""tests/sqlite/check_outputs.py TRACE_JSON STACKS_FOLDED

Checks what the SQLite demo (examples/sqlite_live.c, phase 5) wrote:
  - trace.json is valid JSON in Chrome's Trace Event format (an object with
    a traceEvents list), and its B/E events nest per thread: every E closes
    the newest open B of its (pid, tid) with the same name, no B stays open
    at the end, ts never goes back on a thread, and there is at least one
    B/E pair; a "dropped N" instant event (a full ring) finds its thread
    with no open B (the writer closed them at the loss);
  - stacks.folded has at least one line, and every line is one stack of
    frames separated by ';' (none empty, no spaces) and a count.
Prints what it checked; exits 1 with the first problem, 0 otherwise."""
import json
import re
import sys


def fail(msg):
    print("check_outputs: " + msg)
    sys.exit(1)


def check_trace(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: not valid JSON: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("%s: no traceEvents list" % path)
    stacks, last_ts, pairs, names, drops, moments = {}, {}, 0, 0, 0, 0
    for i, ev in enumerate(doc["traceEvents"]):
        ph = ev.get("ph")
        key = (ev.get("pid"), ev.get("tid"))
        if ph == "M":
            names += 1
            continue
        if ph not in ("B", "E", "i"):
            fail("%s: event %d has ph %r (the writer makes B, E, i and M)" % (path, i, ph))
        if not isinstance(ev.get("ts"), (int, float)) or not isinstance(ev.get("name"), str):
            fail("%s: event %d lacks a numeric ts or a name: %r" % (path, i, ev))
        if ev["ts"] < last_ts.get(key, float("-inf")):
            fail("%s: event %d goes back in time on thread %r: %r after %r" % (path, i, key, ev["ts"], last_ts[key]))
        last_ts[key] = ev["ts"]
        st = stacks.setdefault(key, [])
        if ph == "i" and ev.get("s") == "t" and not ev["name"].startswith("dropped "):
            moments += 1   # a call whose return is not traced: a moment, inside any B
        elif ph == "i":
            if ev.get("s") != "t":
                fail("%s: event %d: an instant event not the thread's: %r" % (path, i, ev))
            if st:
                fail("%s: event %d: %s on thread %r inside open B events %r" % (path, i, ev["name"], key, st[-3:]))
            drops += 1
        elif ph == "B":
            st.append(ev["name"])
        elif not st:
            fail("%s: event %d: E of %s on thread %r with no open B" % (path, i, ev["name"], key))
        elif st[-1] != ev["name"]:
            fail("%s: event %d: E of %s on thread %r closes B of %s" % (path, i, ev["name"], key, st[-1]))
        else:
            st.pop()
            pairs += 1
    open_ = {k: v for k, v in stacks.items() if v}
    if open_:
        fail("%s: B events still open at the end: %r" % (path, {k: v[-3:] for k, v in open_.items()}))
    if pairs == 0:
        fail("%s: no B/E pair at all" % path)
    print("%s: valid JSON, %d B/E pairs on %d threads (%d thread names, %d drop marks, %d calls with no "
          "return traced), nested per thread" % (path, pairs, len(stacks), names, drops, moments))


def check_folded(path):
    line_re = re.compile(r"^[^; ]+(;[^; ]+)* [0-9]+$")
    n = 0
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line_re.match(line.rstrip("\n")):
                    fail("%s:%d: not 'frame;frame;... count': %r" % (path, n, line))
    except OSError as e:
        fail("%s: %s" % (path, e))
    if n == 0:
        fail("%s: empty" % path)
    print("%s: %d well-formed stack lines" % (path, n))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    check_trace(sys.argv[1])
    check_folded(sys.argv[2])

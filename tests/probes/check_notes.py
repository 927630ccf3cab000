#!/usr/bin/env python3
"""tests/probes/check_notes.py ARCH READELF_N_OUTPUT PROVIDER_D

Check a program's USDT notes (the output of `readelf -n PROG`) against the
provider description (examples/bptrace.d): every probe of the provider is
there, once or more, with as many arguments as the description declares,
each "8@" and one register of ARCH (x86_64: %rax..%r15; aarch64: x0..x30),
and with a semaphore. Also the test program's own probes target:user (3
arguments) and target:mem (1). Prints what it checked; exits 0 when all of it held, 1 if not.
"""
import re
import sys

arch, notes_path, d_path = sys.argv[1:4]
reg = {"x86_64": r"%r(ax|bx|cx|dx|si|di|bp|[89]|1[0-5])", "aarch64": r"x([0-9]|[12][0-9]|30)"}[arch]
arg_re = re.compile(r"^8@" + reg + r"$")

# The provider: "probe NAME(TYPE a, TYPE b, ...);"
declared = {}
for m in re.finditer(r"^\s*probe\s+(\w+)\((.*?)\);", open(d_path).read(), re.M):
    args = m.group(2).strip()
    declared[m.group(1)] = 0 if args in ("", "void") else args.count(",") + 1
declared_target = {"user": 3, "mem": 1}

# The notes: Provider / Name / Location ... Semaphore / Arguments, in that order.
found = []
cur = {}
for line in open(notes_path):
    line = line.strip()
    if line.startswith("Provider:"):
        cur = {"provider": line.split(":", 1)[1].strip()}
    elif line.startswith("Name:") and cur:
        cur["name"] = line.split(":", 1)[1].strip()
    elif line.startswith("Location:") and cur:
        m = re.search(r"Semaphore:\s*0x([0-9a-f]+)", line)
        cur["sem"] = int(m.group(1), 16) if m else 0
    elif line.startswith("Arguments:") and cur:
        cur["args"] = line.split(":", 1)[1].split()
        found.append(cur)
        cur = {}
    elif line.startswith("stapsdt") and cur.get("name"):   # a note without arguments
        cur["args"] = []
        found.append(cur)
        cur = {"provider": None}

bad = []
def check(provider, wanted):
    for name, n in sorted(wanted.items()):
        sites = [p for p in found if p.get("provider") == provider and p.get("name") == name]
        if not sites:
            bad.append(f"{provider}:{name}: no note")
            continue
        for p in sites:
            args = p.get("args", [])
            if len(args) != n:
                bad.append(f"{provider}:{name}: {len(args)} arguments {args}, the description says {n}")
            elif not all(arg_re.match(a) for a in args):
                bad.append(f"{provider}:{name}: arguments {args} are not all 8@ and an {arch} register")
            if not p.get("sem"):
                bad.append(f"{provider}:{name}: no semaphore")
        print(f"{provider}:{name}: {len(sites)} site(s), {n} arguments: {' '.join(sites[0].get('args', []))}")

check("bptrace", declared)
check("target", declared_target)
extra = sorted({p["name"] for p in found if p.get("provider") == "bptrace"} - set(declared))
if extra:
    bad.append("bptrace probes the description does not declare: " + ", ".join(extra))
if len(declared) < 13:
    bad.append(f"the description declares {len(declared)} probes; 13 expected")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)

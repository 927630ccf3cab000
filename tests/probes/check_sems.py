#!/usr/bin/env python3
"""tests/probes/check_sems.py ELF [PROVIDER:NAME...]

Check the USDT notes of one ELF file (a program or a shared object), read
from the file itself: each note's semaphore lies inside the .probes
section; every site of one probe name shares one semaphore; each site's
address holds a NOP (x86-64 0x90, aarch64 0xd503201f); the note's base is
.stapsdt.base's address. Each PROVIDER:NAME given must have a note.
Prints one line per probe name; exits 0 when all of it held, 1 if not.
"""
import struct
import sys

path, wanted = sys.argv[1], sys.argv[2:]
data = open(path, "rb").read()
if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    sys.exit(f"{path}: not a little-endian ELF64 file")
machine = struct.unpack_from("<H", data, 18)[0]
shoff, = struct.unpack_from("<Q", data, 40)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
secs = []
for i in range(shnum):
    name, typ, flags, addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    secs.append([name, typ, addr, off, size])
strtab = secs[shstrndx]
def secname(s):
    n = data[strtab[3] + s[0]:]
    return n[:n.index(b"\0")].decode()
by_name = {secname(s): s for s in secs}
bad = []
if ".note.stapsdt" not in by_name:
    sys.exit(f"{path}: no .note.stapsdt section")
probes = by_name.get(".probes")
base_sec = by_name.get(".stapsdt.base")

def file_bytes(vaddr, n):   # bytes at a link-time address, from the section that holds it (not NOBITS)
    for s in secs:
        if s[1] != 8 and s[2] and s[2] <= vaddr < s[2] + s[4]:
            return data[s[3] + vaddr - s[2]:s[3] + vaddr - s[2] + n]
    return None

note = by_name[".note.stapsdt"]
at, end = note[3], note[3] + note[4]
sites = {}
while at + 12 <= end:
    namesz, descsz, typ = struct.unpack_from("<III", data, at)
    desc = at + 12 + ((namesz + 3) & ~3)
    if typ == 3 and data[at + 12:at + 12 + namesz] == b"stapsdt\0":
        pc, base, sem = struct.unpack_from("<QQQ", data, desc)
        strs = data[desc + 24:desc + descsz].split(b"\0")
        key = f"{strs[0].decode()}:{strs[1].decode()}"
        sites.setdefault(key, []).append((pc, base, sem))
    at = desc + ((descsz + 3) & ~3)

nop = {62: b"\x90", 183: struct.pack("<I", 0xd503201f)}.get(machine)
for key, ss in sorted(sites.items()):
    sems = {s[2] for s in ss}
    if len(sems) != 1:
        bad.append(f"{key}: its {len(ss)} sites have {len(sems)} semaphores")
    for pc, base, sem in ss:
        if not probes or not (probes[2] <= sem and sem + 2 <= probes[2] + probes[4]):
            bad.append(f"{key}: semaphore {sem:#x} is not inside .probes")
        if nop is None or file_bytes(pc, len(nop)) != nop:
            bad.append(f"{key}: the site at {pc:#x} is not a NOP")
        if not base_sec or base != base_sec[2]:
            bad.append(f"{key}: base {base:#x} is not .stapsdt.base's address")
    print(f"{key}: {len(ss)} site(s), semaphore {min(sems):#x}")
for w in wanted:
    if w not in sites:
        bad.append(f"{w}: no note")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)

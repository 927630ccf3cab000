#!/usr/bin/env bash
# tests/lto_check.sh COMPILER [FLAGS...]
#
# A program built with link-time optimization (-flto) links and runs. The
# entry stubs and the return trampoline are assembly at file scope, which
# gcc's LTO puts in a partition of their own: they must be global symbols
# (hidden), and every object they read by name too (BPT__ASM_READ in
# src/port.h), or the link fails ("hidden symbol `bpt__x86_64_stub' isn't
# defined", "undefined reference to `bpt__active_ix'": a static is renamed
# bpt__active_ix.lto_priv.0). This builds tests/t_count_path.c, whose
# claims take every stub route and the trampoline, with -O2 -flto, and
# runs it (aarch64 under qemu-user). Warning-free: LTO inlines across the
# test and the header, and gcc's -Wmaybe-uninitialized then sees other paths.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$@" -std=c11 -O2 -flto -Wall -Wextra -Werror -pthread -I. -o "$tmp/t_count_path" tests/t_count_path.c > "$tmp/build.log" 2>&1 ||
    { echo "FAIL: does not build (warning-free) with -O2 -flto: $*"; grep -v 'lto-wrapper' "$tmp/build.log" | tail -n 8; exit 1; }
if "$@" -dM -E -x c /dev/null | grep -q '__aarch64__'; then
    command -v qemu-aarch64 >/dev/null || { echo "SKIPPED: built, but no qemu-aarch64 to run it"; exit 77; }
    (cd tests && qemu-aarch64 -L /usr/aarch64-linux-gnu "$tmp/t_count_path") > "$tmp/run.log" 2>&1
else
    (cd tests && "$tmp/t_count_path") > "$tmp/run.log" 2>&1
fi
rc=$?
tail -n 3 "$tmp/run.log"
[ $rc = 0 ] || { echo "FAIL: built with -flto ($*), it exits $rc"; exit 1; }
echo "$*: built with -O2 -flto, runs: exit 0"

#!/usr/bin/env bash
# tests/count_path_check.sh COMPILER [FLAGS...]
#
# The short paths of native entries, the count path, the call path, the
# call-return path and the time path (>>count path, >>call path,
# >>call-return path, >>time path in src/site_native.c), run before the
# entry stub saves the vector registers, so their compiled code must not
# touch them and must call nothing that might (>>intregs in src/port.h).
# This compiles the implementation with the given compiler at -O2, as a
# user's build does, and reads each path's assembly ($paths below):
# - no vector or floating-point register (x86-64: %xmm/%ymm/%zmm/%st/%mm;
#   aarch64: b/h/s/d/q/v registers);
# - no call and no jump to another function (a tail call), not even one
#   that never returns: the pin's check of its nesting is a trap
#   instruction (>>trap in src/port.h), so that no call makes the compiler
#   save registers or align the stack.
# Where the compiler cannot promise that (BPT__COUNT_SAVES_FP: clang for
# aarch64, a sanitizer), it checks instead that the stub saves the vector
# registers before it calls any of them.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#define BPTRACE_IMPLEMENTATION\n#include "bptrace.h"\n' > "$tmp/impl.c"
"$@" -O2 -S -I. -o "$tmp/impl.s" "$tmp/impl.c" || { echo "does not compile: $*"; exit 1; }
"$@" -O2 -dM -E -I. "$tmp/impl.c" > "$tmp/macros" || exit 1
grep -q '__aarch64__' "$tmp/macros" && arch=aarch64 || arch=x86_64

paths="bpt__native_count_path bpt__native_call_path bpt__native_call_return_path bpt__native_time_path"
if grep -q 'define BPT__COUNT_SAVES_FP' "$tmp/macros"; then
    # The stub's text, from its label to its .size: the vector saves come first.
    stub=$(awk '/^bpt__(x86_64|aarch64)_stub:/,/\.size[[:space:]]+bpt__(x86_64|aarch64)_stub/' "$tmp/impl.s")
    save=$(printf '%s\n' "$stub" | grep -n -m1 -E 'movaps[[:space:]]+%xmm0,|stp[[:space:]]+q0, q1' | cut -d: -f1)
    for p in $paths; do
        call=$(printf '%s\n' "$stub" | grep -n -m1 "$p" | cut -d: -f1)
        echo "$*: BPT__COUNT_SAVES_FP (the short paths may use vector registers); vector saves at stub line ${save:-none}, $p called at ${call:-none}"
        [ -n "$save" ] && [ -n "$call" ] && [ "$save" -lt "$call" ] || { echo "FAIL: the stub calls $p before it saves the vector registers"; exit 1; }
    done
    exit 0
fi

if [ "$arch" = x86_64 ]; then
    vec='%(x|y|z)mm[0-9]|%st\b|%st\(|%mm[0-9]'
    out='^[[:space:]]*(call|jmp)[a-z]*[[:space:]]+[^.]'
else
    vec='(^|[ \t,\[{])(b|h|s|d|q|v)[0-9]{1,2}(\b|\.)'
    out='^[[:space:]]*(bl|blr|br|b)[[:space:]]+[^.]'
fi
rc=0
for p in $paths; do
    body=$(awk -v f="$p" 'index($0, f ":") == 1 {on=1; next} on && $0 ~ "\\.size[[:space:]]+" f "," {exit} on' "$tmp/impl.s" |
           grep -v -E '^[[:space:]]*(\.|#|//|$)|^[.A-Za-z0-9_$]+:')
    [ -n "$body" ] || { echo "FAIL: no $p in the assembly"; rc=1; continue; }
    n=$(printf '%s\n' "$body" | wc -l)
    bad_vec=$(printf '%s\n' "$body" | grep -E "$vec" || true)
    bad_out=$(printf '%s\n' "$body" | grep -E "$out" || true)
    echo "$*: $p is $n instructions ($arch)"
    [ -z "$bad_vec" ] || { echo "FAIL: $p uses vector registers:"; printf '  %s\n' "$bad_vec"; rc=1; }
    [ -z "$bad_out" ] || { echo "FAIL: $p calls or jumps out:"; printf '  %s\n' "$bad_out"; rc=1; }
    [ -z "$bad_vec$bad_out" ] && echo "  integer registers only, no call"
done
exit $rc

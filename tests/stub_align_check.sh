#!/usr/bin/env bash
# tests/stub_align_check.sh COMPILER [FLAGS...]
#
# The x86-64 entry stub and return trampoline call C functions: the count
# path, the call path, the call-return path, the time path and the full
# path (bpt__native_count_path, bpt__native_call_path,
# bpt__native_call_return_path, bpt__native_time_path, bpt__native_entry),
# and bpt__native_return. The
# SysV ABI has rsp + 8 a multiple of 16 at every function's entry (3.2.2),
# and compiled code may rely on it (an aligned spill of a vector register).
# On x86-64 the stub's count route finishes a counted call itself (no
# call, >>count route in src/site_x86_64.c); a call inside a pinned
# section takes the count path. This builds a program, with the given
# compiler, that takes each route,
# runs it under gdb and reads rsp at each function's entry: rsp % 16 must
# be 8 every time. x86-64 only (gdb does not run under qemu-user; aarch64's
# sp is 16-aligned by the architecture's rule, and the stubs move it by
# multiples of 16). SKIPPED where gdb is missing or cannot trace.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v gdb >/dev/null || { echo "SKIPPED: no gdb"; exit 77; }
cat > "$tmp/align.c" <<'C'
#define BPTRACE_IMPLEMENTATION
#include "bptrace.h"
BPT_TRACEABLE long leaf(long x) { return x + 1; }
int main(void) {
    bpt_func *f;
    bpt_session s;
    long (*volatile p)(long) = leaf, i, sum = 0;
    if (bpt_register_native((void *)leaf, "a", "leaf", 1, &f) || bpt_session_create(NULL, &s)) return 2;
    bpt_trace_pattern(s, "a:leaf/1", BPT_COUNT, NULL);              /* the stub's count route */
    for (i = 0; i < 4; i++) sum += p(i);
    bpt_thread_progress_pin();                                       /* a nested pin: the count path */
    for (i = 0; i < 4; i++) sum += p(i);
    bpt_thread_progress_unpin();
    bpt_trace_pattern(s, "a:leaf/1", BPT_OFF, NULL);
    bpt_trace_pattern(s, "a:leaf/1", BPT_CALL, NULL);               /* the call path (the first: the full path) */
    for (i = 0; i < 4; i++) sum += p(i);
    bpt_trace_pattern(s, "a:leaf/1", BPT_CALL | BPT_RETURN, NULL);  /* the call-return path and the trampoline */
    for (i = 0; i < 4; i++) sum += p(i);
    bpt_trace_pattern(s, "a:leaf/1", BPT_OFF, NULL);
    bpt_trace_pattern(s, "a:leaf/1", BPT_TIME, NULL);               /* the time path */
    for (i = 0; i < 4; i++) sum += p(i);
    return sum == 5 * 10 ? 0 : 3;
}
C
"$@" -O2 -g -pthread -I. -o "$tmp/align" "$tmp/align.c" || { echo "FAIL: does not compile: $*"; exit 1; }
"$@" -dM -E -x c /dev/null | grep -q '__x86_64__' || { echo "SKIPPED: not x86-64: $*"; exit 77; }
fns="bpt__native_count_path bpt__native_call_path bpt__native_call_return_path bpt__native_time_path bpt__native_entry bpt__native_return"
{
    for fn in $fns; do
        printf 'break *%s\ncommands\nsilent\nprintf "AT %s %%ld\\n", (long)$rsp %% 16\ncontinue\nend\n' "$fn" "$fn"
    done
    printf 'run\n'
} > "$tmp/gdb.cmd"
ASAN_OPTIONS=detect_leaks=0 gdb -q -batch -x "$tmp/gdb.cmd" "$tmp/align" > "$tmp/gdb.out" 2>&1
if ! grep -q '^AT ' "$tmp/gdb.out"; then
    echo "SKIPPED: gdb stopped at no breakpoint (no ptrace here?):"
    tail -n 5 "$tmp/gdb.out"
    exit 77
fi
rc=0
for fn in $fns; do
    n=$(grep -c "^AT $fn " "$tmp/gdb.out")
    bad=$(grep "^AT $fn " "$tmp/gdb.out" | grep -vc ' 8$')
    echo "$*: $fn entered $n times, rsp % 16 != 8 in $bad"
    [ "$n" -gt 0 ] || { echo "FAIL: $fn never entered"; rc=1; }
    [ "$bad" = 0 ] || { echo "FAIL: $fn entered with the stack misaligned:"; grep "^AT $fn " "$tmp/gdb.out" | sort | uniq -c; rc=1; }
done
grep -q 'exited normally' "$tmp/gdb.out" || { echo "FAIL: the program did not exit 0:"; tail -n 5 "$tmp/gdb.out"; rc=1; }
exit $rc

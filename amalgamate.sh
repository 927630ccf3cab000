#!/bin/sh
# amalgamate.sh: build bptrace.h from the parts in src/, as SQLite's
# mksqlite3c.tcl builds sqlite3.c. The public half (API_PARTS, bpt_api.h
# first) comes first; the implementation (HEADERS, then PARTS) follows
# inside #ifdef BPTRACE_IMPLEMENTATION. Every part after bpt_api.h stands between
# /*** Begin file X ***/ and /*** End of X ***/ banners, with its local
# #include lines removed (everything is one translation unit).
#
#   ./amalgamate.sh          write bptrace.h
#   ./amalgamate.sh --check  exit 1 if the committed bptrace.h differs
#   ./amalgamate.sh --lines  also emit #line directives, so compiler errors
#                            point at src/ (for working on the parts)
set -eu
export LC_ALL=C   # the same order of kind_*.c everywhere
cd "$(dirname "$0")"

# The implementation: first the declarations, port.h, internal.h and the
# headers internal.h includes, in its order; then the code parts (PARTS),
# one concern each, in reading order, from thread progress up to the API.
# The declarations let a part call any other; data is defined by its part
# before any part that uses it (src/README.md has the map).
HEADERS="port.h internal.h $(sed -n 's/^#include "\([a-z_0-9]*\.h\)".*/\1/p' src/internal.h | grep -v -e '^api_' -e '^port.h$' | tr '\n' ' ')"
# The breakpoint kinds are every src/kind_*.c (a new kind is its row in
# BPT_KINDS and its part: nothing to add here).
KINDS="$(cd src && ls kind_*.c | tr '\n' ' ')"
PARTS="progress.c clock.c intern.c names.c record.c locks.c ptrset.c session.c probes.c pattern.c site_x86_64.c site_aarch64.c timem.c symbols.c frames.c interpose.c unwind.c fibers.c $KINDS hit.c site_vm.c site_native.c module.c bp.c funcs.c slots.c session_life.c trace_pattern.c trace_info.c format.c tracefile.c root.c control.c"

# The public half, one concern a part, in order: each part includes the one
# it builds on. bpt_api.h opens the include guard and the extern "C" block;
# its lines after the ">>close" marker close them after the last part, so
# that one guard and one extern "C" cover every declaration.
API_PARTS="bpt_api.h api_progress.h api_session.h api_func.h api_pattern.h api_info.h api_format.h api_probes.h api_root.h api_control.h"

check=0 lines=0
for arg in "$@"; do
    case "$arg" in
        --check) check=1 ;;
        --lines) lines=1 ;;
        *) echo "usage: $0 [--check] [--lines]" >&2; exit 2 ;;
    esac
done

emit_part() {
    echo "/*** Begin file $1 ***/"
    if [ "$lines" = 1 ]; then echo "#line 1 \"src/$1\""; fi
    grep -v '^#include "' "src/$1"
    echo "/*** End of $1 ***/"
}

generate() {
    # bpt_api.h opens the header with the doc block, so it has no banner.
    # The other public parts follow, each with its banners; then the lines
    # after bpt_api.h's ">>close" marker end the guard. The implementation
    # goes after it.
    close='^/\* >>close '
    sed "\\%$close%,\$d" src/bpt_api.h | grep -v '^#include "'
    for p in $API_PARTS; do
        [ "$p" = bpt_api.h ] && continue
        echo
        emit_part "$p"
    done
    if [ "$lines" = 1 ]; then
        echo "#line $(($(grep -n "$close" src/bpt_api.h | cut -d: -f1) + 1)) \"src/bpt_api.h\""
    fi
    sed "1,\\%$close%d" src/bpt_api.h
    echo
    echo "#ifdef BPTRACE_IMPLEMENTATION"
    echo "#ifndef BPTRACE_IMPLEMENTATION_DONE"
    echo "#define BPTRACE_IMPLEMENTATION_DONE"
    for p in $HEADERS $PARTS; do
        echo
        emit_part "$p"
    done
    echo
    echo "#endif /* BPTRACE_IMPLEMENTATION_DONE */"
    echo "#endif /* BPTRACE_IMPLEMENTATION */"
    echo
    cat src/license.txt
}

if [ "$check" = 1 ]; then
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    generate > "$tmp"
    if ! cmp -s "$tmp" bptrace.h; then
        diff -u bptrace.h "$tmp" | head -20 >&2 || true
        echo "bptrace.h is out of date: edit src/, then run ./amalgamate.sh" >&2
        exit 1
    fi
    echo "bptrace.h is up to date"
else
    generate > bptrace.h.tmp
    mv bptrace.h.tmp bptrace.h
    echo "wrote bptrace.h ($(wc -l < bptrace.h) lines)"
fi

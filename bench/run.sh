#!/bin/sh
# bench/run.sh BUILD: run every benchmark built by bench/bench.mk and print one
# table (section, what, median, min..max, unit, ratio). Figures only: nothing
# is asserted. Peers missing (uftrace, liburcu-dev, valgrind) skip their rows.
B=${1:-build}
RUNS=${BENCH_RUNS:-5}
echo "bptrace benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); $(nproc) cores"
echo "compiler: $(${CC:-cc} --version | head -1)"
echo "load: $(uptime | sed 's/.*load average/load average/')"
printf '%-4s %-46s %11s  %-24s %-9s %s\n' sec what median "min..max" unit ratio
"$B/bench_overhead" | tee "$B/bench_overhead.out"
"$B/bench_ret_predict"

# Helpers: wall time per call of a process (section 2), and table rows.
CALLS=1242786   # 2 threads x (121,393 fib entries (gcc turns one recursion into a loop) + 4 x 125,000)
ms_of() {  # command...: wall us of one run (its stderr kept in ms_of.err, where the run is)
    t0=$(date +%s%N); "$@" >/dev/null 2>ms_of.err; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 ))
}
per_call() {  # command...: ns per call of one run, minus a 0-call run
    a=$(ms_of "$@"); z=$(ms_of "$@" 0); echo $(( (a - z) * 1000000 / CALLS ))
}
stat_of() {  # values...: "median min max" (/1000)
    printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.2f %.2f %.2f", m/1000, v[1]/1000, v[NR]/1000}'
}
row() {  # sec what "med min max" unit ratio
    set -- "$1" "$2" $3 "$4" "$5"
    printf '%-4s %-46s %11.2f  %11.2f..%-11.2f %-9s %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
}
# Section 1, the peer: BEAM's call_count on a small function (an escript),
# per call over the same loop untraced, against bptrace's call_count on the
# leaf mix over its untraced run (medians of the rows above).
med_of() { grep -F "$1" "$B/bench_overhead.out" | head -1 | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/ && $(i+1) ~ /\.\./) {print $i; exit}}'; }
if command -v escript >/dev/null; then
    beam=$(escript bench/beam_count.escript 10000000 "$RUNS" 2>&1)
    d=$(echo "$beam" | awk '$1 == "diff" {print $2, $3, $4}')
    if [ -n "$d" ]; then
        bc=$(med_of "leaf mix: call_count  "); bu=$(med_of "leaf mix: traceable, untraced")
        row 1 "BEAM call_count over untraced ($(echo "$beam" | awk '$1 == "otp" {print "OTP " $2 " " $3}'))" "$d" ns/call \
            "$(echo "$bc $bu $d" | awk '{printf "bptrace %.2f ns over untraced: %.2fx BEAM", $1 - $2, ($1 - $2) / $3}')"
    else
        echo "1      BEAM call_count: the escript failed: $beam"
    fi
else
    echo "1      SKIPPED BEAM call_count: erl is not installed (apt-get install erlang-base)"
fi

# Section 2: the same program (2 threads calling at once) under uftrace record
# (-pg build) and traced by bptrace (call+return, default sizes, written to a
# trace file by a drainer thread). Wall time
# of the whole process, minus a run of the same command that makes no traced
# call (last argument 0): start-up and setup cancel out; ns per call.
plain=""; bpt=""; uft=""; bpt_msgs=0; bpt_dropped=0
TOP=$(pwd)
cd "$B" || exit 1   # the -pg build writes gmon.out where it runs: keep it in $B
for i in $(seq "$RUNS"); do
    plain="$plain $(per_call ./bench_vs_uftrace_pg)"
    a=$(ms_of ./bench_vs_uftrace bench_trace.bpt)
    # "bptrace: N messages, D dropped, ...": every run's losses are counted
    m=$(sed -n 's/^bptrace: \([0-9]*\) messages.*/\1/p' ms_of.err)
    lost=$(sed -n 's/^bptrace: [0-9]* messages, \([0-9]*\) dropped.*/\1/p' ms_of.err)
    bpt_msgs=$((bpt_msgs + ${m:-0})); bpt_dropped=$((bpt_dropped + ${lost:-0}))
    z=$(ms_of ./bench_vs_uftrace bench_trace.bpt 0)
    bpt="$bpt $(( (a - z) * 1000000 / CALLS ))"
    if command -v uftrace >/dev/null; then
        rm -rf bench_uftrace.data
        uft="$uft $(per_call uftrace record -d bench_uftrace.data ./bench_vs_uftrace_pg)"
    fi
done
cd "$TOP" || exit 1
sp=$(stat_of $plain); sb=$(stat_of $bpt)
row 2 "-pg build run without uftrace, per call" "$sp" ns ""
if [ -n "$uft" ]; then
    su=$(stat_of $uft)
    row 2 "uftrace record (-pg), all 5 functions, per call" "$su" ns ""
    row 2 "bptrace call+return to a .bpt file, per call" "$sb" ns \
        "$(echo "$su $sb" | awk '{printf "uftrace/bptrace %.2fx", $1/$4}') ($bpt_dropped of $bpt_msgs dropped in $RUNS runs)"
else
    row 2 "bptrace call+return to a .bpt file, per call" "$sb" ns "($bpt_dropped of $bpt_msgs dropped in $RUNS runs)"
    echo "2      skipped uftrace: not installed (apt-get install uftrace)"
fi
once=$("$B/bench_vs_uftrace" "$B/bench_trace.bpt" 2>&1 | head -1)
(cd "$B" && rm -rf bench_uftrace.data && uftrace record -d bench_uftrace.data ./bench_vs_uftrace_pg >/dev/null 2>&1)
echo "2      bytes per call: bptrace $(ls -l "$B/bench_trace.bpt" 2>/dev/null | awk -v c=$CALLS '{printf "%.1f", $5/c}'), uftrace $(du -sb "$B/bench_uftrace.data" 2>/dev/null | awk -v c=$CALLS '{printf "%.1f", $1/c}'); $once"
rm -rf "$B/bench_trace.bpt" "$B/bench_uftrace.data" "$B/ms_of.err"

"$B/bench_vs_urcu"
for n in 1000 10000 50000; do "$B/bench_pattern_$n"; done
"$B/bench_pattern_10000" steps                       # where the time goes, step by step
BENCH_WORKERS=0 "$B/bench_pattern_10000" steps       # the same with no worker
"$B/bench_pattern_1000" info

# Section 6: SQLite built with the patchable-entry flags (its 1,562 functions
# registered, nothing traced) against SQLite built without them, the same
# TPC-B-like transactions on an in-memory database; runs alternate.
if [ -x "$B/bench_sqlite_flags" ] && [ -x "$B/bench_sqlite_plain" ]; then
    fl=""; pl=""
    for i in $(seq "$RUNS"); do
        pl="$pl $("$B/bench_sqlite_plain" 200000 | awk '{print int($6)}')"
        fl="$fl $("$B/bench_sqlite_flags" 200000 | awk '{print int($6)}')"
    done
    sp=$(stat_of $pl); sf=$(stat_of $fl)
    row 6 "SQLite without the flags, transactions/s /1000" "$sp" ktps ""
    row 6 "SQLite with the flags, untraced, tps /1000" "$sf" ktps \
        "$(echo "$sf $sp" | awk '{printf "%.3fx without", $1 / $4}')"
else
    echo "6      SKIPPED SQLite flags: $B/bench_sqlite_flags not built (make bench-build fetches SQLite)"
fi

# Section 7: the USDT probes with nothing attached (issue #18). Both builds
# run in one process (bench_probes_ab: two copies of bptrace and the leaf
# mix, with the probes and with -DBPT_NO_PROBES, their batches alternating
# in pairs), which cancels the machine's drift and load; each process gives
# the median of its pair ratios in/out. Rows: the last process's ns per call
# of each side, then the ratio's median over BENCH_PROBE_RUNS processes
# (min..max). The untraced row is the control: no probe is on its path in
# either copy. Then the instruction counts (callgrind, below).
if [ -x "$B/bench_probes_ab" ]; then
    rc=""; rn=""; rt=""
    for i in $(seq "${BENCH_PROBE_RUNS:-5}"); do
        o=$("$B/bench_probes_ab" 31)
        ratio_of() { echo "$o" | grep -F "$1, probes in" | sed -n 's/.*in\/out \([0-9.]*\)x.*/\1/p' | awk '{print int($1 * 1000 + 0.5)}'; }
        rc="$rc $(ratio_of "untraced (control)")"; rn="$rn $(ratio_of call_count)"; rt="$rt $(ratio_of 'call trace')"
    done
    echo "$o"
    if echo "$o" | grep -q SKIPPED; then :; else
        for k in untraced count call; do
            case $k in untraced) v=$rc; w="untraced (control)";; count) v=$rn; w="call_count";; call) v=$rt; w="call trace";; esac
            # stat_of prints 2 decimals: the text column gives the third (values are x1000)
            m3=$(printf '%s\n' $v | sort -n | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "in/out %.3fx (%.3f..%.3f)", m/1000, v[1]/1000, v[NR]/1000}')
            row 7 "leaf mix: $w, in/out, $(echo $v | wc -w) processes" "$(stat_of $v)" ratio "$m3"
        done
    fi
else
    echo "7      SKIPPED probes: $B/bench_probes_ab not built"
fi

# Instruction counts per call (callgrind): the leaf mix, CG_CALLS calls per
# mode minus a run of 0 calls (setup and pattern changes cancel out), in
# the traced thread alone (callgrind's thread 1, -01): what a call costs the
# program. The drainer thread's share is left out: callgrind runs one
# thread at a time, and whether the drainer gets to decode the records
# before the process exits depends on its scheduling, which made the ring
# modes' rows jump between two values (call: 318 or 612 Ir).
if command -v valgrind >/dev/null; then
    N=${CG_CALLS:-200000}
    mkdir -p "$B/bench_callgrind"
    # cg_ir OUT COMMAND...: the instructions of COMMAND's first thread
    # (callgrind writes OUT-01 for it, OUT-02 for the next, ...).
    cg_ir() { local out=$1; shift
              rm -f "$out" "$out"-[0-9]*
              valgrind --tool=callgrind --smc-check=all --separate-threads=yes --callgrind-out-file="$out" \
                  "$@" >/dev/null 2>&1
              grep '^summary:' "$out-01" | awk '{print $2}'; }
    # A row counts the whole call: the loop's, the call's and the leaf's own
    # instructions with bptrace's. A traced mode's row also gives what
    # tracing adds: its count over `off` (the same calls, traceable and
    # untraced), as the time rows give ns over untraced.
    off=""
    for m in plain off count call return time; do
        a=$(cg_ir "$B/bench_callgrind/cg.$m" "$B/bench_overhead" "$m" "$N")
        z=$(cg_ir "$B/bench_callgrind/cg0.$m" "$B/bench_overhead" "$m" 0)
        ir=$(echo "$a $z $N" | awk '{printf "%.1f", ($1-$2)/$3}')
        [ "$m" = off ] && off=$ir
        over=""
        case $m in plain|off) ;; *) [ -n "$off" ] && over="$(echo "$ir $off" | awk '{printf "%.1f", $1-$2}') over off; " ;; esac
        printf '%-4s %-46s %11s  %-24s %-9s %s\n' cg "leaf mix: $m" "$ir" "" "Ir/call" \
            "${over}callgrind_annotate $B/bench_callgrind/cg.$m-01"
    done
    # The probes' share (section 7): the same two modes built without them.
    for m in count call; do
        a=$(cg_ir "$B/bench_callgrind/cgnp.$m" "$B/bench_overhead_noprobes" "$m" "$N")
        z=$(cg_ir "$B/bench_callgrind/cgnp0.$m" "$B/bench_overhead_noprobes" "$m" 0)
        printf '%-4s %-46s %11s  %-24s %-9s %s\n' cg "leaf mix: $m, probes compiled out" \
            "$(echo "$a $z $N" | awk '{printf "%.1f", ($1-$2)/$3}')" "" "Ir/call" "(section 7)"
    done
    # Section 6's work, without its layout luck: SQLite's instructions per
    # transaction with the flags and without (20,000 transactions minus
    # 10,000: the database's setup cancels out). The time ratio swings
    # with where the hot code lands (builds with other padding ran 0.945x
    # to 1.034x); the instruction count shows what the flags add: one NOP
    # per traceable call, and the code layout's alignment NOPs.
    if [ -x "$B/bench_sqlite_flags" ] && [ -x "$B/bench_sqlite_plain" ]; then
        for s in plain flags; do
            a=$(cg_ir "$B/bench_callgrind/sq.$s.2" "$B/bench_sqlite_$s" 20000)
            z=$(cg_ir "$B/bench_callgrind/sq.$s.1" "$B/bench_sqlite_$s" 10000)
            eval "sq_$s=$(echo "$a $z" | awk '{printf "%.0f", ($1-$2)/10000}')"
        done
        printf '%-4s %-46s %11s  %-24s %-9s %s\n' cg "SQLite without the flags" "$sq_plain" "" "Ir/tx" "(section 6)"
        printf '%-4s %-46s %11s  %-24s %-9s %s\n' cg "SQLite with the flags, untraced" "$sq_flags" "" "Ir/tx" \
            "$(echo "$sq_flags $sq_plain" | awk '{printf "%.4fx without (section 6)", $1 / $2}')"
    fi
else
    echo "cg     skipped: valgrind is not installed (apt-get install valgrind)"
fi

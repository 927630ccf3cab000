#!/bin/sh
# examples/demo-agent.sh BUILD: phase 8 of `make demo`, the outside workflow.
# sqlite_bank (examples/sqlite_bank.c) has no bptrace code: it and SQLite are
# built with the flags of `make print-cflags` only. It runs under the agent,
# and while its threads run, bpt steers tracing in it from outside:
#   bpt count     call_count on every function, for 2 s
#   bpt profile   call_time on every sqlite3 API function, for 2 s
#   bpt trace     sqlite3_step with return trace, 0.5 s, into a Chrome trace
# Each bpt command has its own session in the target, destroyed when it ends.
set -eu
B=${1:-build}
SECONDS_RUN=${DEMO_AGENT_SECONDS:-12}
echo
echo "== phase 8: the outside workflow: a program with no bptrace code, under the agent =="
echo "\$ LD_PRELOAD=$B/libbptrace-agent.so $B/sqlite_bank $SECONDS_RUN 2 &"
mkdir -p "$B/demo"
fifo=$B/demo/sqlite_bank.out
rm -f "$fifo"
LD_PRELOAD=$B/libbptrace-agent.so "$B/sqlite_bank" "$SECONDS_RUN" 2 > "$fifo" &
bank=$!
trap 'kill $bank 2>/dev/null || true' EXIT
i=0
until grep -q '^ready' "$fifo" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $bank 2>/dev/null; then echo "demo-agent: sqlite_bank did not start" >&2; exit 1; fi
    sleep 0.1
done
pid=$bank
echo
echo "\$ $B/bpt count $pid 'sqlite_bank:_/_' --duration 2 -r 12"
"$B/bpt" count $pid 'sqlite_bank:_/_' --duration 2 -r 12
echo
echo "\$ $B/bpt profile $pid 'sqlite_bank:sqlite3_*/_' --duration 2 -r 10"
"$B/bpt" profile $pid 'sqlite_bank:sqlite3_*/_' --duration 2 -r 10
echo
echo "\$ $B/bpt trace $pid 'sqlite_bank:sqlite3_step/_' --return --duration 0.5 --chrome $B/demo/agent-chrome.json"
"$B/bpt" trace $pid 'sqlite_bank:sqlite3_step/_' --return --duration 0.5 --chrome "$B/demo/agent-chrome.json"
echo "(open $B/demo/agent-chrome.json in chrome://tracing or https://ui.perfetto.dev)"
wait $bank
trap - EXIT
echo
cat "$fifo"

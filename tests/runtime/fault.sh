#!/usr/bin/env bash
# fault.sh MODE BIN MPIRUN... — one of four ranks exits (MODE=exit) or hangs
# (MODE=hang) mid-collective; the job must end non-zero within 30 s, with a
# message naming the failure. For a hang only colrt's collective timeout can
# notice, so that mode requires colrt's own message. MODE=exit-stream and
# hang-stream run the collectives on a stream's worker thread; a hang there
# must be reported as such.
set -u
MODE=$1 BIN=$2; shift 2
start=$(date +%s.%N)
out=$(timeout 60 "$@" -np 4 "$BIN" "$MODE" 2>&1)
rc=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}')
echo "$out"
echo "fault.sh: exit status $rc after ${elapsed} s"
[ "$rc" -ne 0 ] || { echo "fault.sh: FAIL: the job exited 0"; exit 1; }
[ "$rc" -ne 124 ] || { echo "fault.sh: FAIL: the job hung (killed by timeout 60)"; exit 1; }
awk "BEGIN{exit !($elapsed < 30)}" || { echo "fault.sh: FAIL: took ${elapsed} s (limit 30)"; exit 1; }
# The failure must be named: colrt's timeout message, or (exit mode) the launcher's report of the dead rank.
pattern="all_reduce on mesh axis [0-9] did not complete"
case "$MODE" in hang*) ;; *) pattern="$pattern|exited on signal|exited with status|non-zero status|noticed that process rank 3" ;; esac
[ "$MODE" = hang-stream ] && pattern="all_reduce on mesh axis [0-9] did not complete within [0-9.]+ s on stream [0-9]+'s worker thread"
echo "$out" | grep -Eq "$pattern" || { echo "fault.sh: FAIL: no message naming the failure"; exit 1; }
echo "$out" | grep -q "finished all iterations" && { echo "fault.sh: FAIL: a rank ran past the dead peer"; exit 1; }
echo "fault.sh: passed"

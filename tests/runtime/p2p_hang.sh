#!/usr/bin/env bash
# p2p_hang.sh BIN MPIRUN... — rank 0 of two waits for a message rank 1 never
# sends (test_p2p hang, timeout 2 s): the watchdog must end the job
# non-zero within 30 s, naming the receive and its peer.
set -u
BIN=$1; shift
start=$(date +%s.%N)
out=$(timeout 60 "$@" -np 2 "$BIN" hang 2>&1)
rc=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}')
echo "$out"
echo "p2p_hang.sh: exit status $rc after ${elapsed} s"
[ "$rc" -ne 0 ] || { echo "p2p_hang.sh: FAIL: the job exited 0"; exit 1; }
[ "$rc" -ne 124 ] || { echo "p2p_hang.sh: FAIL: the job hung (killed by timeout 60)"; exit 1; }
awk "BEGIN{exit !($elapsed < 30)}" || { echo "p2p_hang.sh: FAIL: took ${elapsed} s (limit 30)"; exit 1; }
echo "$out" | grep -Eq "recv from coordinate 1 on mesh axis 0 did not complete within [0-9.]+ s" ||
    { echo "p2p_hang.sh: FAIL: no message naming the receive"; exit 1; }
echo "$out" | grep -q "rank 0: finished" && { echo "p2p_hang.sh: FAIL: rank 0 ran past the missing message"; exit 1; }
echo "p2p_hang.sh: passed"

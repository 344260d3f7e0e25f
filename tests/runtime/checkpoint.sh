#!/usr/bin/env bash
# checkpoint.sh BIN DIR MPIRUN... — a save killed half-way leaves the previous
# checkpoint whole:
#   1. 2 ranks save values v1 (checkpoint generation 1);
#   2. 2 ranks save values v2, rank 1 dies half-way through its file
#      (fault injection): the job fails, the manifest still names generation 1;
#   3. 2 ranks load: v1, intact;
#   4. 1 rank loads the same checkpoint (another mesh: slices are reassembled);
#   5. 2 ranks save v3 (generation 2, replacing the crashed attempt's files)
#      and load it; generation 1's files and the stale temporary are gone;
#   6. a flipped byte is caught by the CRC and the load touches nothing.
set -u
BIN=$1 DIR=$2; shift 2
MPI=("$@")
rm -rf "$DIR"
fail() { echo "checkpoint.sh: FAIL: $*"; exit 1; }
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 1 || fail "save of generation 1"
"${MPI[@]}" -np 2 "$BIN" crash "$DIR" 2 >"$DIR.crash.log" 2>&1 && fail "the crashing save succeeded"
grep -q "fault injection" "$DIR.crash.log" || { cat "$DIR.crash.log"; fail "no fault-injection message"; }
ls "$DIR"
"${MPI[@]}" -np 2 "$BIN" load "$DIR" 1 || fail "generation 1 did not load after the crash"
"$BIN" load "$DIR" 1 || fail "generation 1 did not load on one rank"
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 3 || fail "save of generation 3"
"${MPI[@]}" -np 2 "$BIN" load "$DIR" 3 || fail "generation 3 did not load"
ls "$DIR" | grep -q '^g1-' && fail "generation 1 files were not removed"
ls "$DIR" | grep -q 'tmp$' && fail "stale temporaries were not removed"
"${MPI[@]}" -np 2 "$BIN" corrupt "$DIR" || fail "corruption was not detected"
echo "checkpoint.sh: all phases passed"

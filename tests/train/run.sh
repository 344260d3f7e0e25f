#!/usr/bin/env bash
# run.sh — the training drivers (examples/*/train.c) as a user runs them, on
# 2 MPI ranks: token files from text (tools/make_tokens.py), a run that logs,
# evaluates and saves; a run pre-empted at step 4 and resumed from its
# checkpoint must give bit-identical losses to the straight run (the CSV keeps
# 9 significant digits, which round-trip a float exactly); the loss must fall;
# bad token files and flags get a message and a non-zero exit.
# usage: tests/train/run.sh TRAIN_EXE WORK_DIR SOURCE_DIR
set -euo pipefail
exe=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work"
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$src/tools/make_tokens.py" "$src/README.md" "$src"/docs/*.md -o "$work/text"
common=(--train "$work/text_train.bin" --val "$work/text_val.bin" --steps 8 --warmup 2 --lr 3e-3
        --eval-every 4 --eval-batches 2 --progress off)

echo "== straight: 8 steps"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_a" --log "$work/a.csv" >"$work/a.out"
tail -3 "$work/a.out"
echo "== pre-empted at step 4, then resumed"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_b" --log "$work/b.csv" --stop-at 4 >/dev/null
grep -Eq '"step":[[:space:]]*4,' "$work/ck_b/manifest.json" || fail "no checkpoint naming step 4 after --stop-at"
[ -e "$work/ck_b/train_state" ] && fail "a train_state file beside the manifest (the manifest is the one source of truth)"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_b" --log "$work/b.csv" --resume >"$work/b.out"
head -1 "$work/b.out"
grep -q "resumed from .* at step 4" "$work/b.out" || fail "the second run did not resume at step 4"
# step, loss, lr (and validation losses): everything but the timing column
cut -d, -f1-3 "$work/a.csv" > "$work/a.cmp"
cut -d, -f1-3 "$work/b.csv" > "$work/b.cmp"
[ "$(grep -c '^[0-9]' "$work/a.cmp")" = 8 ] || fail "the straight log does not have 8 steps"
diff "$work/a.cmp" "$work/b.cmp" || fail "the resumed run's losses differ from the straight run's"
echo "resume: steps 5-8 and the validation losses are bit-identical"
first=$(awk -F, 'NR==2 {print $2}' "$work/a.csv")
last=$(awk -F, '/^8,/ {print $2}' "$work/a.csv")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "the loss did not fall (from $first to $last)"
echo "loss $first -> $last"

echo "== pre-empted by SIGUSR1 (what a scheduler sends), then resumed"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 400 --warmup 2 --ckpt "$work/ck_c" --log "$work/c.csv" >"$work/c.out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q '^2,' "$work/c.csv" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid
wait $pid || { cat "$work/c.out"; fail "the signalled run did not end cleanly"; }
grep -q "stopped by signal 10 after step" "$work/c.out" || { cat "$work/c.out"; fail "no stop message after SIGUSR1"; }
stopped=$(sed -n 's/.*stopped by signal 10 after step \([0-9]*\).*/\1/p' "$work/c.out")
grep -Eq "\"step\":[[:space:]]*$stopped," "$work/ck_c/manifest.json" || fail "the checkpoint does not name step $stopped"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 400 --warmup 2 --stop-at $((stopped + 2)) --ckpt "$work/ck_c" \
    --log "$work/c.csv" --resume >"$work/c2.out"
grep -q "resumed from .* at step $stopped" "$work/c2.out" || fail "did not resume at step $stopped after the signal"
echo "SIGUSR1: stopped after step $stopped with a checkpoint, resumed there"

echo "== a checkpoint whose manifest lost its state is refused, not restarted from step 0"
cp -r "$work/ck_b" "$work/ck_d"
python3 - "$work/ck_d/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); del m["state"]; json.dump(m, open(sys.argv[1], "w"))
PY
expect_fail_early() { if "${mpirun[@]}" "$exe" "$@" >"$work/err.out" 2>&1; then fail "succeeded: $*"; fi; }
expect_fail_early "${common[@]}" --ckpt "$work/ck_d" --resume
grep -q "holds no training step" "$work/err.out" || { cat "$work/err.out"; fail "no message for a manifest without state"; }

echo "== bad inputs"
expect_fail() { # expect_fail PATTERN ARGS...
    local pat=$1; shift
    if "${mpirun[@]}" "$exe" "$@" >"$work/err.out" 2>&1; then fail "succeeded: $*"; fi
    grep -q "$pat" "$work/err.out" || { cat "$work/err.out"; fail "no message '$pat' for: $*"; }
}
expect_fail "cannot open" --train "$work/missing.bin"
cp "$src/README.md" "$work/not_tokens.bin"
expect_fail "not a token file" --train "$work/not_tokens.bin"
python3 - "$work/big.bin" <<'PY'
import struct, sys
toks = [1, 2, 300, 4] * 40
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PY
expect_fail "outside the model's vocabulary of 256" --train "$work/big.bin"
python3 - "$work/short.bin" <<'PY'
import struct, sys
toks = [1, 2, 3, 4, 5]  # fewer than one sequence (+1)
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PY
expect_fail "short.bin: fewer tokens than one sequence" --train "$work/text_train.bin" --val "$work/short.bin"
expect_fail "no training file" --steps 3
expect_fail "unknown flag --bogus" --train "$work/text_train.bin" --bogus 1
expect_fail "need --ckpt" --train "$work/text_train.bin" --resume
"${mpirun[@]}" "$exe" --help | grep -q "^usage:" || fail "--help"
echo "train driver test: OK"

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
[ -f "$work/ck_b/train_state" ] || fail "no checkpoint after --stop-at"
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
expect_fail "no training file" --steps 3
expect_fail "unknown flag --bogus" --train "$work/text_train.bin" --bogus 1
expect_fail "need --ckpt" --train "$work/text_train.bin" --resume
"${mpirun[@]}" "$exe" --help | grep -q "^usage:" || fail "--help"
echo "train driver test: OK"

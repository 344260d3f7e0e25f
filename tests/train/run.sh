#!/usr/bin/env bash
# run.sh — the training drivers (examples/*/train.c) as a user runs them, on
# 2 MPI ranks: token files from text (tools/make_tokens.py), a run that logs,
# evaluates and saves; a run pre-empted at step 4 and resumed from its
# checkpoint must give bit-identical losses and gradient norms to the
# straight run (the CSV keeps 9 significant digits, which round-trip a float
# exactly), and its manifest names the step (no train_state file); a run
# sent SIGUSR1 stops with a checkpoint and resumes there; a manifest without
# its state is refused; the loss must fall; resuming at --steps says so, raising --steps
# keeps the checkpoint's learning-rate schedule (--reschedule does not);
# --log-every and JSON lines; sampling continues the prompt, is the same for
# the same seed, and reads llm.c's tokenizer files; bad token files and flags
# get a message and a non-zero exit; no progress bar in redirected output.
# The driver's own features (the schedule on resume, --log-every, JSON
# lines, sampling) run only with a fourth argument, `all` (one driver is
# enough: they are the same code for every model).
# usage: tests/train/run.sh TRAIN_EXE WORK_DIR SOURCE_DIR [all]
set -euo pipefail
exe=$1 work=$2 src=$3 all=${4:-}
rm -rf "$work" && mkdir -p "$work"
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$src/tools/make_tokens.py" "$src/README.md" "$src"/docs/*.md -o "$work/text"
# make_tokens.py: its output folder made; a user's mistake is one line, not a traceback
python3 "$src/tools/make_tokens.py" "$src/README.md" -o "$work/new/folder/t" >/dev/null
[ -f "$work/new/folder/t_train.bin" ] || fail "make_tokens.py did not make its output folder"
if python3 "$src/tools/make_tokens.py" "$work/nosuch.md" -o "$work/t" >"$work/mt.out" 2>&1; then fail "make_tokens.py read a missing file"; fi
grep -q "make_tokens.py: .*nosuch.md: No such file" "$work/mt.out" && ! grep -q Traceback "$work/mt.out" \
    || { cat "$work/mt.out"; fail "make_tokens.py on a missing file"; }
common=(--train "$work/text_train.bin" --val "$work/text_val.bin" --steps 8 --warmup 2 --lr 3e-3
        --eval-every 4 --eval-batches 2 --progress off)

expect_fail() { # expect_fail PATTERN ARGS...
    local pat=$1; shift
    if "${mpirun[@]}" "$exe" "$@" >"$work/err.out" 2>&1; then fail "succeeded: $*"; fi
    grep -q "$pat" "$work/err.out" || { cat "$work/err.out"; fail "no message '$pat' for: $*"; }
}

echo "== straight: 8 steps"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_a" --log "$work/a.csv" >"$work/a.out"
tail -3 "$work/a.out"
! grep -q "ETA" "$work/a.out" || fail "a progress bar in redirected output (--progress auto under mpirun)"
echo "== pre-empted at step 4, then resumed"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_b" --log "$work/b.csv" --stop-at=4 >/dev/null
grep -Eq '"step":[[:space:]]*4,' "$work/ck_b/manifest.json" || fail "no checkpoint naming step 4 after --stop-at"
[ -e "$work/ck_b/train_state" ] && fail "a train_state file beside the manifest (the manifest is the one source of truth)"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_b" --log "$work/b.csv" --resume >"$work/b.out"
head -1 "$work/b.out"
grep -q "resumed from .* at step 4" "$work/b.out" || fail "the second run did not resume at step 4"
# kind, step, loss, lr, grad_norm, loss_scale, skipped_steps (and validation
# losses): everything but the timing columns
head -1 "$work/a.csv" | grep -qx "kind,step,loss,lr,grad_norm,loss_scale,skipped_steps,tokens_per_s,step_ms,mfu" \
    || fail "the CSV header: $(head -1 "$work/a.csv")"
cut -d, -f1-7 "$work/a.csv" > "$work/a.cmp"
cut -d, -f1-7 "$work/b.csv" > "$work/b.cmp"
[ "$(grep -c '^train,' "$work/a.cmp")" = 8 ] || fail "the straight log does not have 8 train rows"
[ "$(grep -c '^val,' "$work/a.cmp")" = 2 ] || fail "the straight log does not have 2 val rows"
diff "$work/a.cmp" "$work/b.cmp" || fail "the resumed run's losses or gradient norms differ from the straight run's"
echo "resume: steps 5-8, their gradient norms and the validation losses are bit-identical"
awk -F, '$1 == "train" && !($5 > 0 && $6 == 1 && $10 > 0) { exit 1 }' "$work/a.csv" \
    || fail "a train row without a positive gradient norm, loss scale 1 and a positive MFU"
first=$(awk -F, '$1 == "train" && $2 == 1 {print $3}' "$work/a.csv")
last=$(awk -F, '$1 == "train" && $2 == 8 {print $3}' "$work/a.csv")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "the loss did not fall (from $first to $last)"
echo "loss $first -> $last"

echo "== pre-empted by SIGUSR1 (what a scheduler sends), then resumed"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 400 --warmup 2 --ckpt "$work/ck_s" --log "$work/s.csv" >"$work/s.out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q '^train,2,' "$work/s.csv" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid
wait $pid || { cat "$work/s.out"; fail "the signalled run did not end cleanly"; }
grep -q "stopped by signal 10 after step" "$work/s.out" || { cat "$work/s.out"; fail "no stop message after SIGUSR1"; }
stopped=$(sed -n 's/.*stopped by signal 10 after step \([0-9]*\).*/\1/p' "$work/s.out")
grep -Eq "\"step\":[[:space:]]*$stopped," "$work/ck_s/manifest.json" || fail "the checkpoint does not name step $stopped"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 400 --warmup 2 --stop-at $((stopped + 2)) --ckpt "$work/ck_s" \
    --log "$work/s.csv" --resume >"$work/s2.out"
grep -q "resumed from .* at step $stopped" "$work/s2.out" || fail "did not resume at step $stopped after the signal"
echo "SIGUSR1: stopped after step $stopped with a checkpoint, resumed there"

echo "== a checkpoint whose manifest lost its state is refused, not restarted from step 0"
cp -r "$work/ck_b" "$work/ck_d"
python3 - "$work/ck_d/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); del m["state"]; json.dump(m, open(sys.argv[1], "w"))
PY
expect_fail "holds no training step" "${common[@]}" --ckpt "$work/ck_d" --resume

if [ "$all" = all ]; then
echo "== resuming at or past --steps, and raising --steps"
"${mpirun[@]}" "$exe" "${common[@]}" --ckpt "$work/ck_a" --resume >"$work/c.out"
grep -q "no training steps to run" "$work/c.out" || fail "resuming at --steps said nothing"
cp -r "$work/ck_a" "$work/ck_c"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 12 --ckpt "$work/ck_c" --resume --log "$work/c.csv" >"$work/c.out"
grep -q "follows the checkpoint's schedule (8 steps" "$work/c.out" || fail "raising --steps did not say whose schedule"
awk -F, '$1 == "train" && $4 != 0.0003 { exit 1 }' "$work/c.csv" \
    || fail "steps past the checkpoint's schedule are not at its final learning rate 3e-4"
"${mpirun[@]}" "$exe" "${common[@]}" --steps 12 --ckpt "$work/ck_a" --resume --reschedule --stop-at 9 >"$work/d.out"
grep -q "^--reschedule: the learning rate follows this run's schedule" "$work/d.out" || fail "--reschedule"

echo "== --log-every, JSON lines"
"${mpirun[@]}" "$exe" "${common[@]}" --log-every=4 --log "$work/e.jsonl" >"$work/e.out"
[ "$(grep -c '^step ' "$work/e.out")" = 3 ] || fail "--log-every 4 over 8 steps: steps 1, 4, 8 (got $(grep -c '^step ' "$work/e.out"))"
python3 - "$work/e.jsonl" <<'PY' || fail "the JSONL log"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
kinds = [(r["kind"], r["step"]) for r in rows]
assert kinds == [("train", 1), ("train", 4), ("val", 4), ("train", 8), ("val", 8)], kinds
assert all(r["grad_norm"] > 0 and r["mfu"] > 0 for r in rows if r["kind"] == "train")
PY

echo "== sampling from the trained model"
"${mpirun[@]}" "$exe" --ckpt "$work/ck_a" --resume --steps 8 --sample 24 --prompt "The " >"$work/s1.out"
"${mpirun[@]}" "$exe" --ckpt "$work/ck_a" --resume --steps 8 --sample 24 --prompt "The " >"$work/s2.out"
sed -n '/^sample:/,$p' "$work/s1.out"
grep -q "^The " "$work/s1.out" || fail "the sample does not continue the prompt"
cmp -s "$work/s1.out" "$work/s2.out" || fail "the same seed sampled different text"
"${mpirun[@]}" "$exe" --ckpt "$work/ck_a" --resume --steps 8 --sample 8 --temperature 0 >"$work/s3.out"
# llm.c's tokenizer file, here mapping byte token i to the text <i>
python3 - "$work/tok.bin" <<'PY'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256I", 20240328, 2, 256, 10, *([0] * 252)))
    for i in range(256):
        t = b"<%d>" % i
        f.write(bytes([len(t)]) + t)
PY
"${mpirun[@]}" "$exe" --ckpt "$work/ck_a" --resume --steps 8 --sample 4 --prompt "<84><104>" --tokenizer "$work/tok.bin" \
    >"$work/s4.out"
grep -Eq "^<84><104>(<[0-9]+>){4}$" "$work/s4.out" || { cat "$work/s4.out"; fail "sampling through a tokenizer file"; }

fi

echo "== bad inputs"
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
expect_fail "unknown flag --bogus=1" --train "$work/text_train.bin" --bogus=1
expect_fail "needs a value" --train "$work/text_train.bin" --steps
[ "$all" != all ] || expect_fail "matches no token" --ckpt "$work/ck_a" --resume --steps 8 --sample 2 --prompt "x" \
    --tokenizer "$work/tok.bin"
expect_fail "need --ckpt" --train "$work/text_train.bin" --resume
# to a file: grep -q would close the pipe early and, under pipefail, fail the test when
# the driver is still writing (seen once under load)
"${mpirun[@]}" "$exe" --help >"$work/help.out" 2>&1 || fail "--help exited non-zero"
grep -q "^usage:" "$work/help.out" || fail "--help"
echo "train driver test: OK"

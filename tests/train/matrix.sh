#!/usr/bin/env bash
# matrix.sh — checkpoints load across plans and rank counts. Every executable
# is the GPT-2 training driver (examples/gpt2/train.c) generated under one
# plan; argument PLAN:RANKS:PATH. Each 2-rank plan trains 4 steps and saves;
# every executable (1, 2 and 4 ranks, every plan) resumes from each of those
# checkpoints and runs steps 5 and 6, whose losses must match the uninterrupted
# 2-rank data-parallel run's within 1e-5 relative (the plans sum in different
# orders; parameters loaded wrongly, or not at all, move step 5's by > 1e-2;
# step 6's is the first that the loaded optimizer state moves).
# usage: matrix.sh WORK PLAN:RANKS:EXE...
set -uo pipefail
work=$1; shift
rm -rf "$work" && mkdir -p "$work"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
fail=0
# tokens below the model's vocabulary of 128, deterministic
python3 - "$work/tok.bin" <<'PY'
import struct, sys
toks = [(i * 7919 + (i >> 3) * 31) % 128 for i in range(20000)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PY
common=(--train "$work/tok.bin" --steps 6 --warmup 1 --lr 3e-3 --progress off)
declare -A exe np
order=()
for a in "$@"; do
  IFS=: read -r plan ranks path <<<"$a"
  exe["$plan:$ranks"]=$path; np["$plan:$ranks"]=$ranks; order+=("$plan:$ranks")
done
# steps 5 and 6's training losses from a driver log (kind,step,loss,...: the header
# names the columns, so a format change fails here instead of comparing nothing);
# step 6's is the first that the loaded optimizer state moves
losses() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
           $c["kind"] == "train" && ($c["step"] == 5 || $c["step"] == 6) { printf "%s%s", n++ ? " " : "", $c["loss"] }' "$1"
}
# both losses of a (two numbers) within 1e-5 relative of b's
close() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (split(a, x, " ") != 2 || split(b, y, " ") != 2) exit 1
    for (i = 1; i <= 2; i++) { if (x[i] !~ /^[0-9]/) exit 1; d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * y[i]) exit 1 } }'
}

# the tensor-parallel plans split parameters on a dim other than the first (the
# generated leaf table: global shape, then this rank's shape), or the matrix
# tests less than it says
for src in ${MATRIX_TP_SOURCES:-}; do
  python3 - "$src" <<'PY' || { echo "FAIL: $src splits no parameter on a dim other than the first"; exit 1; }
import re, sys
n = 0
for l in open(sys.argv[1]):
    m = re.match(r'\s*\{"([^"]+)", \d+, \d+, \d+, \{([^}]*)\}, \{([^}]*)\}', l)
    if m:
        g = [int(x) for x in m.group(2).split(',')]; lo = [int(x) for x in m.group(3).split(',')]
        n += len(g) > 1 and g[1:] != lo[1:]
sys.exit(0 if n else 1)
PY
done

"${mpirun[@]}" -np 2 "${exe[dp:2]}" "${common[@]}" --log "$work/ref.csv" >"$work/ref.out" 2>&1 || { cat "$work/ref.out"; exit 1; }
ref=$(losses "$work/ref.csv")
close "$ref" "$ref" || { echo "FAIL: no step-5 and step-6 losses in $work/ref.csv"; head -3 "$work/ref.csv"; exit 1; }
echo "uninterrupted dp on 2 ranks: steps 5 and 6 losses $ref"
printf '%-12s' "saved by"; for l in "${order[@]}"; do printf ' %-9s' "$l"; done; echo
nsavers=0; for s in "${order[@]}"; do [ "${np[$s]}" = 2 ] && nsavers=$((nsavers + 1)); done
si=-1
for s in "${order[@]}"; do
  [ "${np[$s]}" = 2 ] || continue
  ck="$work/ck_${s/:/_}"
  "${mpirun[@]}" -np 2 "${exe[$s]}" "${common[@]}" --stop-at 4 --ckpt "$ck" >"$work/save.out" 2>&1 ||
    { cat "$work/save.out"; echo "FAIL: save under $s"; fail=1; continue; }
  printf '%-12s' "$s"
  si=$((si + 1)); li=-1
  for l in "${order[@]}"; do
    li=$((li + 1))
    # MATRIX_COVER=1 (the sanitizer build): each loader resumes from one saver
    # (loader i from saver i mod savers), so every plan still saves and loads
    # under the sanitizers in a sixth of the runs; the full cross runs in make test
    if [ "${MATRIX_COVER:-0}" = 1 ] && [ $((li % nsavers)) != "$si" ]; then printf ' %-9s' -; continue; fi
    rm -rf "$work/ck" && cp -r "$ck" "$work/ck"
    rm -f "$work/l.csv"
    if "${mpirun[@]}" -np "${np[$l]}" "${exe[$l]}" "${common[@]}" --ckpt "$work/ck" --resume --log "$work/l.csv" \
        >"$work/l.out" 2>&1 && grep -q "resumed from .* at step 4" "$work/l.out"; then
      got=$(losses "$work/l.csv")
      if close "$got" "$ref"; then
        printf ' %-9s' ok
      else
        printf ' %-9s' "$got"; fail=1
      fi
    else
      printf ' %-9s' FAILED; fail=1
      tail -3 "$work/l.out" | sed 's/^/    /' >"$work/fail_${s/:/_}_${l/:/_}.txt"
    fi
  done
  echo
done
for f in "$work"/fail_*.txt; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
if [ "${MATRIX_COVER:-0}" = 1 ]; then
  [ $fail = 0 ] && echo "checkpoint matrix (cover): every plan saved and every plan resumed, each loader from one saver"
else
  [ $fail = 0 ] && echo "checkpoint matrix: every plan's checkpoint resumes under every plan on 1, 2 and 4 ranks"
fi
exit $fail

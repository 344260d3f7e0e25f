#!/usr/bin/env bash
# gpu.py on a made-up GPU run: a tiny program recorded as a kit records it,
# "measured" at 1.25x its plan, then tabled on the same cluster (the same
# program: a row at 1.250) and on another whose plan makes other code (the
# table must refuse it: a changed program is not the one measured).
set -euo pipefail
ROOT=$1 CC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
args="examples/gpt2/gpt2.c -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8"
# shellcheck disable=SC2086
"$CC" "$ROOT/${args%% *}" ${args#* } --cluster h100:1x1 --emit all --target cuda -q -o "$T/gen/tiny"
echo gpt2 > "$T/gen/tiny/model"
echo "$args" > "$T/gen/tiny/args"
mkdir "$T/res"
python3 "$ROOT/bench/validate/gpu.py" record "$T/gen" > "$T/res/programs.tsv"
plan=$(python3 -c "import json; print(json.load(open('$T/gen/tiny/gpt2.plan.json'))['step_time_s'])")
printf 'program\tmeasured_s\tplanned_s\tsimulated_s\tmodel_flops\ntiny\t%s\t%s\t0\t1\n' \
  "$(python3 -c "print($plan * 1.25)")" "$plan" > "$T/res/steps.tsv"
python3 "$ROOT/bench/validate/gpu.py" table --compiler "$CC" --results "$T/res" --cluster h100:1x1 | tee "$T/out"
grep -q '| tiny | .* | 1.250 | .* | yes |' "$T/out"
grep -q 'predicted 0 within +-15 %' "$T/out"
# bf16 on the same cluster: other code
sed -i 's/--batch 8\t/--batch 8 --dtype bf16\t/' "$T/res/programs.tsv"
if python3 "$ROOT/bench/validate/gpu.py" table --compiler "$CC" --results "$T/res" --cluster h100:1x1 > "$T/out2" 2>&1; then
  cat "$T/out2"; echo "gpu_smoke.sh: a changed program was tabled as the one measured"; exit 1
fi
grep -q 'differ from the ones measured' "$T/out2"
echo "gpu_smoke.sh: ok"

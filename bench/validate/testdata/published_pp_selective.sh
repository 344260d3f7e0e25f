#!/usr/bin/env bash
# published_pp_selective.sh — published.py's "Korthikanti 175B seq. par. + selective" row,
# its forced layout only (t 8, p 8, interleaved v 3, 64 micro-batches of one sequence,
# Megatron-LM's unfused attention and dropouts): selective recompute keeps the linear
# layers' products and the bias adds on them, and re-runs the attention's scores and
# probabilities x values (placement_selective_table), so a stage's 12 layers keep per
# micro-batch qkv 18.9 MB, fc 25.2 MB, the block output 6.3 MB and the two row-parallel
# products' sums as their bias adds hold them, split over the sequence, 6.3 MB each:
# 0.761 GB (1.82 GB when the adds re-ran from the kept products, the partial sums held
# whole, 50.3 MB each; the 100.7 MB of scores a layer kept would add 1.2 GB, and then
# only some model chunks fit their in-flight micro-batches kept).
# usage: published_pp_selective.sh SOURCE_DIR COMPILER
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cir=$(python3 - "$src" "$tmp" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/bench/solver")
import gen_models
gen_models.MODELS["k175"] = ("gpt2", 96, 12288, 96, 96, 4 * 12288, 51200, 2048)
print(gen_models.write(sys.argv[2], "k175", 64, attention="unfused", dropout=True))
PY
)
"$2" "$cir" --emit plan --cluster a100-80gb:8x8 --dtype bf16 --mesh 1x8 -q -o "$tmp/out" --pp 8 \
    --micro-batches 64 --strategy megatron --recompute selective --zero 1 --schedule interleaved:3
python3 - "$tmp/out" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*.plan.json")[0]))
s0 = d["pipeline"]["stages"][0]
act = s0["memory"]["activations_bytes"]
print(f"step {d['step_time_s']:.4g} s (published 13.75), stage 0 {s0['activations']}, "
      f"activations {act / 1e9:.3g} GB a micro-batch")
fail = []
if not 0.7e9 < act < 0.82e9:
    fail.append("stage 0's selective activations are not the linear layers' products")
if s0["activations"] != "kept":
    fail.append("stage 0 does not keep all its in-flight activations")
sys.exit("FAIL: " + "; ".join(fail) if fail else 0)
PY

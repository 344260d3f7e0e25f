#!/usr/bin/env bash
# pp_stage_memory.sh — each pipeline stage's memory plan (its arena and pipeline buffer)
# against its own predicted peak (solver/pipeprice.c), within ±3 %: GPT-2 124M on 8 ranks,
# 2 stages of 4 and 4 stages of 2, 8 micro-batches (bench/memplan/run.sh's pp rows), as
# planned (ZeRO-1 on the tied embedding alone, each group lowered at its own stage) and with
# --zero 0. The last stage holds the tied embedding its head reads: the head's part of its
# gradient is a buffer of its own (the last of 4 stages: 1.093 x without that term).
# usage: pp_stage_memory.sh COMPILER SOURCE_DIR
set -eu
cc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pp in 2 4; do
    for z in auto 0; do
        "$cc" "$src/examples/gpt2/gpt2.c" --batch 32 --cluster h100:1x8 --pp $pp --micro-batches 8 --zero $z \
            --emit code --target cpu -q -o "$tmp/pp$pp-$z"
    done
done
python3 - "$tmp" <<'PY'
import glob, json, sys
bad = []
for pp, z in ((2, "auto"), (2, "0"), (4, "auto"), (4, "0")):
  d = json.load(open(glob.glob(f"{sys.argv[1]}/pp{pp}-{z}/*.plan.json")[0]))
  for s in d["pipeline"]["stages"]:
    m = s["memory"]
    r = (m["planned_arena_bytes"] + m["planned_pipe_buffer_bytes"]) / m["peak_bytes"]
    print(f"pp {pp} --zero {z} stage {s['stage']}: planned {(m['planned_arena_bytes'] + m['planned_pipe_buffer_bytes']) / 1e6:.1f} MB, "
          f"predicted {m['peak_bytes'] / 1e6:.1f} MB, {r:.3f}")
    if not 0.97 <= r <= 1.03:
        bad.append(f"{s['stage']} of {pp} (--zero {z})")
sys.exit(f"FAIL: stages {bad} outside [0.97, 1.03]" if bad else 0)
PY

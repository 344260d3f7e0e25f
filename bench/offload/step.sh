#!/usr/bin/env bash
# bench/offload/step.sh — the CPU backend's training step with and without host
# offload: GPT-2 124M (examples/gpt2/gpt2.c -DSEQ=64 --batch 4, f32, AdamW, one
# rank; bench/codegen_cpu's program) generated with --offload none and with
# --offload optim (every group's moments on the host arena, the update by
# colrt_host_adamw, gradients down and parameters up by copies on copy streams),
# both built with bench/codegen_cpu/train.c, then run in alternation, ROUNDS
# rounds of STEPS timed steps after one warm-up step each, so a slow moment of
# the shared machine hits both. Prints each run's mean s/step, the arenas, and
# the medians of the rounds' means.
# usage: bench/offload/step.sh [BUILD_DIR [ROUNDS [STEPS]]]   (OMP_NUM_THREADS, default 2)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
steps=${3:-3}
out=$build/bench-offload-step
mkdir -p "$out"
for mode in none optim; do
  "$build/compiler/colossal-compile" examples/gpt2/gpt2.c -DSEQ=64 --batch 4 --cluster h100:1x1 \
    --offload "$mode" --emit code --target cpu -q -o "$out/$mode"
  mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -I"$out/$mode" -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h \
    bench/codegen_cpu/train.c "$out/$mode/gpt2.c" "$out/$mode/gpt2_kernels.c" \
    "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/train_$mode"
done
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
: >"$out/means.txt"
for r in $(seq "$rounds"); do
  for mode in none optim; do
    "${mpirun[@]}" -np 1 -x OMP_NUM_THREADS "$out/train_$mode" "$steps" 1e-4 1 >"$out/run.txt"
    mean=$(awk '/s per step \(mean of/ { for (i = 1; i <= NF; i++) if ($i == "s" && $(i+1) == "per") print $(i-1) }' "$out/run.txt")
    arena=$(grep -o 'arena [0-9.]* MB per rank' "$out/run.txt")
    echo "round $r --offload $mode: $mean s/step ($arena; load $(cut -d' ' -f1 /proc/loadavg))"
    echo "$mode $mean" >>"$out/means.txt"
  done
done
python3 - "$out/means.txt" <<'PY'
import statistics, sys
m = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    m.setdefault(k, []).append(float(v))
a, b = statistics.median(m["none"]), statistics.median(m["optim"])
print(f"median s/step: none {a:.4f}, optim {b:.4f}; optim / none {b / a:.3f}")
PY

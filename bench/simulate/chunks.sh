#!/usr/bin/env bash
# bench/simulate/chunks.sh — ZeRO-3 chunks (--chunk-bytes, docs/sharding.md "Chunks (ZeRO-3)").
# 1. Deterministic: the collectives a step, their bytes, the arena and the simulated step
#    (colossal-compile simulate, the H100 preset) of GPT-2 124M (examples/gpt2/gpt2.c, batch 8)
#    ZeRO-3 on 8 ranks and of the tiny GPT-2 (-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256
#    -DCTX=32, batch 8) on 2, without chunks and with each size.
# 2. Measured: the tiny GPT-2's CPU step, ZeRO-3 on 2 ranks, without chunks and with CHUNK
#    (default 64KB), built with bench/codegen_cpu/train.c and run in alternation, ROUNDS rounds
#    of STEPS timed steps after 5 warm-up steps, so a slow moment of a shared machine hits both.
# usage: bench/simulate/chunks.sh [BUILD_DIR [ROUNDS [STEPS [CHUNK]]]]   (OMP_NUM_THREADS, default 1; ROUNDS 0: part 1 only)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
steps=${3:-200}
chunk=${4:-64KB}
cc="$build/compiler/colossal-compile"
out=$build/bench-chunks
mkdir -p "$out"
tiny=(examples/gpt2/gpt2.c -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8)
big=(examples/gpt2/gpt2.c --batch 8)
echo "| model | --chunk-bytes | chunks (params / grads) | all-gathers (bytes) | reduce-scatters (bytes) | collectives | copies | arena MB | planner peak MB | simulated step ms | exposed comm ms | planner ms |"
echo "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
row() { # NAME SIZE ARGS...
  local name=$1 size=$2
  shift 2
  local f=()
  [ "$size" != none ] && f=(--chunk-bytes "$size")
  rm -rf "$out/sim"
  "$cc" "$@" --strategy zero3 "${f[@]}" --emit code --target cuda -q -o "$out/sim"
  "$cc" simulate "$out"/sim/*.plan.json --json >"$out/sim.json"
  python3 - "$name" "$size" "$out" <<'PY'
import glob, json, sys
name, size, out = sys.argv[1:]
j = json.load(open(glob.glob(out + "/sim/*.plan.json")[0])); l = j["lowering"]; s = json.load(open(out + "/sim.json"))
c = l.get("chunks", {})
n = s["collectives"] if isinstance(s["collectives"], int) else sum(k["n"] for k in s["collectives"])
print(f"| {name} | {size} | {c.get('count', 0)} / {c.get('gradient_chunks', 0)} | {l['all_gather_count']} ({l['all_gather_bytes'] / 1e6:.3f} MB) "
      f"| {l['reduce_scatter_count']} ({l['reduce_scatter_bytes'] / 1e6:.3f} MB) | {n} | {s['copies']} "
      f"| {j['memory']['planned_arena_bytes'] / 1e6:.3f} | {j['memory']['predicted_peak_bytes'] / 1e6:.3f} | {s['step_s'] * 1e3:.4f} | {s['exposed_comm_s'] * 1e3:.4f} | {j['step_time_s'] * 1e3:.4f} |")
PY
}
for s in none 16KB 64KB 256KB; do row gpt2-tiny-2 "$s" "${tiny[@]}" --cluster h100:1x2 --mesh 2; done
for s in none 1MB 4MB 16MB 64MB; do row gpt2-124M-8 "$s" "${big[@]}" --cluster h100:1x8 --mesh 8; done

for mode in none chunk; do
  f=()
  [ "$mode" = chunk ] && f=(--chunk-bytes "$chunk")
  "$cc" "${tiny[@]}" --cluster h100:1x2 --mesh 2 --strategy zero3 "${f[@]}" --emit code --target cpu -q -o "$out/$mode"
  mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -I"$out/$mode" -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h \
    bench/codegen_cpu/train.c "$out/$mode/gpt2.c" "$out/$mode/gpt2_kernels.c" \
    "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/train_$mode"
done
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
: >"$out/means.txt"
for r in $(seq "$rounds"); do
  for mode in none chunk; do
    "${mpirun[@]}" -np 2 -x OMP_NUM_THREADS "$out/train_$mode" "$steps" 1e-4 5 >"$out/run.txt"
    mean=$(awk '/s per step \(mean of/ { for (i = 1; i <= NF; i++) if ($i == "s" && $(i+1) == "per") print $(i-1) }' "$out/run.txt")
    echo "round $r $mode: $mean s/step (load $(cut -d' ' -f1 /proc/loadavg))"
    echo "$mode $mean" >>"$out/means.txt"
  done
done
[ "$rounds" -gt 0 ] || exit 0 # ROUNDS 0: the deterministic table only
python3 - "$out/means.txt" "$chunk" <<'PY'
import statistics, sys
m = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    m.setdefault(k, []).append(float(v))
a, b = statistics.median(m["none"]), statistics.median(m["chunk"])
print(f"median s/step: none {a * 1e3:.3f} ms, --chunk-bytes {sys.argv[2]} {b * 1e3:.3f} ms; chunk / none {b / a:.3f}")
PY

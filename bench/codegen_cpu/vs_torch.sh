#!/usr/bin/env bash
# bench/codegen_cpu/vs_torch.sh — the generated GPT-2 124M training step (B=4,
# T=64, f32, AdamW, 1 rank) against PyTorch eager on the same model and
# optimizer (torch_gpt2.py), in one window: ROUNDS rounds, each runs ours and
# then torch for STEPS timed steps (after one warm-up step each), and prints
# both means and the ratio torch / ours (> 1: ours is faster), per round and
# over all rounds (the ratio of the medians of the round means).
# usage: bench/codegen_cpu/vs_torch.sh [BUILD_DIR [ROUNDS [STEPS]]]
# env: OMP_NUM_THREADS (default 2; torch gets as many), TORCH_VENV (a virtual
#      environment with torch; default BUILD_DIR/torch-venv, made with pip from
#      PyPI when missing), TORCH_FUSED=1 (AdamW(fused=True)), COMPILE_FLAGS
#      (extra colossal-compile flags), BASELINE_BIN (another build of train.c,
#      e.g. of an older commit: run third in each round, its ratio printed too),
#      MODEL (gpt2, default, or llama: examples/llama/llama.c at GPT-2 124M's
#      size, 12 layers, d 768, 12 query heads on 4 kv heads, SwiGLU 2048, vocab
#      32000: 123.6M parameters; torch_llama.py), DTYPE (f32, default, or bf16:
#      ours with bf16 parameters and f32 masters, torch under autocast), NP
#      (ranks, default 1: NP > 1 runs ours data parallel on NP ranks of
#      OMP_NUM_THREADS threads each, torch in one process with NP times the
#      threads: the same cores, as one would run PyTorch on one CPU), CLUSTER
#      (NP > 1: the cluster file the planner plans with; default this machine's
#      committed calibration, tools/calibrate/measured/cpu-epyc-2core-1x2-own-
#      kernels.json, 2 ranks), STRATEGY (NP > 1: colossal-compile --strategy,
#      default zero2: the update of each parameter on one rank).
# Not a test: it downloads torch and takes minutes.
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
steps=${3:-4}
threads=${OMP_NUM_THREADS:-2}
venv=${TORCH_VENV:-$build/torch-venv}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "vs_torch: making $venv with torch from PyPI (a few GB)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
model=${MODEL:-gpt2}
dtype=${DTYPE:-f32}
np=${NP:-1}
out=$build/bench-codegen-cpu/$model-$dtype-np$np
mkdir -p "$out"
case $model in
  gpt2) src=(examples/gpt2/gpt2.c -DSEQ=64) torch_py=(torch_gpt2.py) ;;
  llama) src=(examples/llama/llama.c -DN_LAYER=12 -DN_EMBD=768 -DN_HEAD=12 -DN_KV_HEAD=4 -DFFN=2048
              -DVOCAB=32000 -DSEQ=64) torch_py=(torch_llama.py) ;;
  *) echo "vs_torch: MODEL is gpt2 or llama" >&2; exit 2 ;;
esac
cluster=(--cluster h100:1x1)
[ "$np" -gt 1 ] && cluster=(--cluster "${CLUSTER:-tools/calibrate/measured/cpu-epyc-2core-1x2-own-kernels.json}"
                            --mesh "$np" --strategy "${STRATEGY:-zero2}")
# shellcheck disable=SC2086
"$build/compiler/colossal-compile" "${src[@]}" --batch 4 "${cluster[@]}" --dtype "$dtype" \
  --emit code --target cpu -q -o "$out" ${COMPILE_FLAGS:-}
t0=$(date +%s.%N)
mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -I"$out" -DCG_MODEL="$model" -DCG_HEADER="$model.h" \
  "$here/train.c" "$out/$model.c" "$out/${model}_kernels.c" \
  "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/train"
t1=$(date +%s.%N)
echo "generated source: $model.c $(stat -c %s "$out/$model.c") B, ${model}_kernels.c" \
     "$(stat -c %s "$out/${model}_kernels.c") B, $(grep -c "^void ${model}_k" "$out/${model}_kernels.c")" \
     "kernel functions; compiled and linked in $(echo "$t1 - $t0" | bc) s"
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
mpirun+=(-x OMP_NUM_THREADS)
[ -n "${COLRT_PROFILE:-}" ] && mpirun+=(-x COLRT_PROFILE)
fused=()
[ "${TORCH_FUSED:-0}" = 1 ] && fused=(--fused)
ours_all=() torch_all=() base_all=()
for r in $(seq 1 "$rounds"); do
  o=$(OMP_NUM_THREADS=$threads "${mpirun[@]}" -np "$np" "$out/train" "$steps" 1e-4 1 |
      sed -n 's/.*, \([0-9.]*\) s per step.*/\1/p')
  t=$("$venv/bin/python" "$here/${torch_py[0]}" --steps "$steps" --threads $((threads * np)) --dtype "$dtype" \
      "${fused[@]}" | sed -n 's/^torch: \([0-9.]*\) s per step.*/\1/p')
  ours_all+=("$o") torch_all+=("$t")
  printf 'round %d: ours %.3f s, torch %.3f s, torch/ours %.2fx (load %s)\n' "$r" "$o" "$t" \
    "$(echo "$t / $o" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
  if [ -n "${BASELINE_BIN:-}" ]; then
    b=$(OMP_NUM_THREADS=$threads "${mpirun[@]}" -np "$np" "$BASELINE_BIN" "$steps" 1e-4 1 |
        sed -n 's/.*, \([0-9.]*\) s per step.*/\1/p')
    base_all+=("$b")
    printf 'round %d: baseline %.3f s, torch/baseline %.2fx\n' "$r" "$b" "$(echo "$t / $b" | bc -l)"
  fi
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mo=$(med "${ours_all[@]}") mt=$(med "${torch_all[@]}")
printf 'median of %d rounds: ours %.3f s, torch %.3f s per step: torch/ours %.2fx\n' "$rounds" "$mo" "$mt" \
  "$(echo "$mt / $mo" | bc -l)"
if [ -n "${BASELINE_BIN:-}" ]; then
  mb=$(med "${base_all[@]}")
  printf 'median of %d rounds: baseline %.3f s: torch/baseline %.2fx, baseline/ours %.2fx\n' "$rounds" "$mb" \
    "$(echo "$mt / $mb" | bc -l)" "$(echo "$mb / $mo" | bc -l)"
fi

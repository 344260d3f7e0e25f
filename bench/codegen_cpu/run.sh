#!/usr/bin/env bash
# bench/codegen_cpu/run.sh — the generated GPT-2 124M training step (B=4,
# T=64, f32, AdamW) on the CPU backend, 1 rank, OMP_NUM_THREADS threads
# (default 2): seconds per step. Prints the mean of STEPS timed steps after
# one warm-up step.
# usage: bench/codegen_cpu/run.sh [BUILD_DIR [STEPS]]
# llm.c's train_gpt2.c is measured beside it by hand (see README.md).
set -euo pipefail
build=${1:-build}
steps=${2:-5}
out=$build/bench-codegen-cpu
mkdir -p "$out"
"$build/compiler/colossal-compile" examples/gpt2/gpt2.c -DSEQ=64 --batch 4 --cluster h100:1x1 \
  --emit code --target cpu -q -o "$out"
mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -I"$out" -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h \
  bench/codegen_cpu/train.c "$out/gpt2.c" "$out/gpt2_kernels.c" \
  "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/train"
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "${mpirun[@]}" -np 1 -x OMP_NUM_THREADS "$out/train" "$steps" 1e-4 1

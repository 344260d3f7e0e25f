#!/usr/bin/env bash
# demo.sh — the main job: plan GPT-2 124M for 8 x H100, then generate, build
# and train a small GPT-2 on the CPU backend with 2 MPI ranks.
# usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cc=$build/compiler/colossal-compile
out=$build/demo
mkdir -p "$out"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

echo "== 1. GPT-2 124M on one node of 8 x H100: the plan, its report and its CUDA program"
echo "   \$ colossal-compile examples/gpt2/gpt2.c --cluster h100:1x8 --emit all --target cuda -o $out/gpt2-124m"
"$cc" examples/gpt2/gpt2.c --cluster h100:1x8 --emit all --target cuda -o "$out/gpt2-124m"

echo
echo "== 2. A small GPT-2 (2 layers, D=64, 4 heads, 256 tokens, T=32, batch 8) for 2 CPU ranks"
small=(-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8)
echo "   \$ colossal-compile examples/gpt2/gpt2.c ${small[*]} --cluster h100:1x2 --emit code --target cpu -o $out/gpt2-small"
"$cc" examples/gpt2/gpt2.c "${small[@]}" --cluster h100:1x2 --emit code --target cpu -o "$out/gpt2-small"
ls "$out/gpt2-small"

echo
echo "== 3. Build it against the CPU runtime (colrt_cpu) and train 8 steps on 2 ranks"
mpicc -std=c17 -O2 -fopenmp -Wall -Wextra -Werror -Iinclude -I"$out/gpt2-small" \
  -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h bench/codegen_cpu/train.c \
  "$out/gpt2-small/gpt2.c" "$out/gpt2-small/gpt2_kernels.c" \
  "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/gpt2-small/train"
OMP_NUM_THREADS=1 "${mpirun[@]}" -np 2 "$out/gpt2-small/train" 8 3e-3

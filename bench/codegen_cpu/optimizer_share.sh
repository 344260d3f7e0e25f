#!/usr/bin/env bash
# bench/codegen_cpu/optimizer_share.sh — the optimizer step's share of the
# generated GPT-2 124M training step (B=4, T=64, f32, one rank) on the CPU
# backend, for each optimizer given (default: adamw lamb lars).
#
# Generates the model as bench/codegen_cpu/run.sh does, with --optimizer O,
# and times the update part of every step (the global gradient norm, the
# trust-ratio norms and the update kernels: the generated M_update_nodes) by
# wrapping its call in the generated M.c with a clock read before and after
# (a sed over the generated file; the program is otherwise unchanged).
# train.c prints the mean update time and its share of the step, in wall
# time and in the process's CPU time (the latter holds up on a machine shared
# with other jobs: time slices lost to them do not count).
# usage: bench/codegen_cpu/optimizer_share.sh [BUILD_DIR [STEPS [OPTIMIZERS...]]]
set -euo pipefail
build=${1:-build}
steps=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(adamw lamb lars)
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
for opt in "${opts[@]}"; do
  out=$build/bench-optimizer-share/$opt
  mkdir -p "$out"
  "$build/compiler/colossal-compile" examples/gpt2/gpt2.c -DSEQ=64 --batch 4 --cluster h100:1x1 \
    --emit code --target cpu -q -o "$out" --optimizer "$opt"
  # time the update part: gpt2_bench_update_s and gpt2_bench_update_cpu_s accumulate its
  # seconds, wall and the process's CPU time (train.c reads them)
  sed -i -e 's/^    gpt2_update_nodes(M);$/    double bench_u0 = gpt2_now(), bench_c0 = gpt2_bench_cpu();\n    gpt2_update_nodes(M);\n    colrt_device_sync();\n    gpt2_bench_update_s += gpt2_now() - bench_u0;\n    gpt2_bench_update_cpu_s += gpt2_bench_cpu() - bench_c0;/' \
    -e 's/^struct gpt2 {$/double gpt2_bench_update_s, gpt2_bench_update_cpu_s;\nstatic double gpt2_bench_cpu(void) {\n    struct timespec t;\n    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, \&t);\n    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;\n}\nstruct gpt2 {/' "$out/gpt2.c"
  grep -q "gpt2_bench_update_s += " "$out/gpt2.c" || { echo "the generated gpt2.c changed: cannot time its update" >&2; exit 1; }
  mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -I"$out" -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h \
    bench/codegen_cpu/train.c "$out/gpt2.c" "$out/gpt2_kernels.c" \
    "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$out/train"
  echo "== --optimizer $opt"
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "${mpirun[@]}" -np 1 -x OMP_NUM_THREADS "$out/train" "$steps" 1e-4 1
done

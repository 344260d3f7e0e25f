#!/usr/bin/env bash
# bench/offload/adamw_vs_torch.sh — the host AdamW (colrt_host_adamw) against a plain C loop and
# PyTorch's CPU torch.optim.AdamW (foreach and fused) on the same fp32 sizes, at each thread count,
# ROUNDS times in alternation (ours, then torch's), so a slow moment of a shared machine hits both.
# Prints a row per run: threads, elements/s of plain, colrt_host_adamw, torch foreach, torch fused,
# and host / torch-foreach, host / torch-fused (ratios inside one round: measured in the same run).
# usage: bench/offload/adamw_vs_torch.sh [BUILD_DIR [PYTHON [N [REPS [ROUNDS [THREADS...]]]]]]
#        (defaults: build, python3, 8388608, 7, 3, threads 1 2)
set -euo pipefail
build=${1:-build}
py=${2:-python3}
n=${3:-8388608}
reps=${4:-7}
rounds=${5:-3}
shift $(($# < 5 ? $# : 5))
threads=("$@")
[ ${#threads[@]} -eq 0 ] && threads=(1 2)
here=$(cd "$(dirname "$0")" && pwd)
echo "| threads | plain (el/s) | host (el/s) | torch foreach (el/s) | torch fused (el/s) | host / foreach | host / fused |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$rounds"); do
  for t in "${threads[@]}"; do
    ours=$(OMP_NUM_THREADS=$t "$build/bench/offload/bench_host_adamw" "$n" "$reps")
    grep -q "bit-identical: yes" <<<"$ours" || { echo "bench_host_adamw: results differ" >&2; exit 1; }
    plain=$(awk '$1 == "plain" && NF == 4 {print $2}' <<<"$ours")
    host=$(awk '$1 == "host" && NF == 4 {print $2}' <<<"$ours")
    theirs=$(OMP_NUM_THREADS=$t "$py" "$here/torch_adamw.py" "$n" "$reps" "$t")
    fe=$(awk '$1 == "torch-foreach" {print $2}' <<<"$theirs")
    fu=$(awk '$1 == "torch-fused" {print $2}' <<<"$theirs")
    awk -v t="$t" -v a="$plain" -v h="$host" -v f="$fe" -v u="$fu" \
      'BEGIN {printf "| %d | %.3g | %.3g | %.3g | %.3g | %.2f | %.2f |\n", t, a, h, f, u, h / f, h / u}'
  done
done

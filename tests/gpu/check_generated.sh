#!/usr/bin/env bash
# tests/gpu/check_generated.sh audit|ptxas COMPILER OUT_DIR INCLUDE_DIR NVCC MODEL PREFIX [compiler args...]
# Generates MODEL's CUDA program with colossal-compile (--emit code --target
# cuda) into OUT_DIR, then runs the launch audit (tests/gpu/launch_audit.sh)
# or the ptxas budget for sm_90 (tests/gpu/ptxas_budget.sh, with NVCC) on
# OUT_DIR/PREFIX_kernels.cu. No GPU needed; CI runs both for GPT-2 124M and
# LLaMA-2 7B (tests/gpu/CMakeLists.txt).
set -euo pipefail
mode=$1 cc=$2 out=$3 inc=$4 nvcc=$5 model=$6 prefix=$7
shift 7
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"$cc" "$model" --emit code --target cuda -q -o "$out" "$@"
case $mode in
  audit) "$here/launch_audit.sh" "$out/${prefix}_kernels.cu" ;;
  ptxas) "$here/ptxas_budget.sh" "$nvcc" "$out/${prefix}_kernels.cu" "$inc" sm_90 1024 ;;
  *) echo "check_generated.sh: mode $mode: give audit or ptxas" >&2; exit 2 ;;
esac

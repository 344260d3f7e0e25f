#!/usr/bin/env bash
# tests/gpu/run.sh [BUILD_DIR] — for a machine with NVIDIA GPUs: builds the
# CUDA backend (colrt_cuda) beside the CPU one, checks every kernel on the GPU
# against the CPU backend's results, and prints a timing table (GEMM and
# attention at GPT-2 shapes, collectives' bus bandwidth over NCCL).
#
# Needs: nvcc, cuBLASLt and NCCL (under /usr/local/cuda), OpenMPI, the Debian
# packages of scripts/install-deps.sh. Exits non-zero if a kernel differs
# from the CPU beyond tolerance (see compare_dumps.c) or anything fails.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
MPI=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total --format=csv || true
NGPU=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
[ "$NGPU" -ge 1 ] || { echo "run.sh: no GPU found (nvidia-smi -L lists none)"; exit 1; }

echo "== build (Release, CUDA on) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCOLOSSAL_CUDA=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target kernel_dump_cpu kernel_dump_cuda compare_dumps \
  bench_kernels bench_kernels_cuda bench_collectives_cuda test_colrt_kernels >/dev/null
G=$BUILD/tests/gpu B=$BUILD/bench/runtime
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== CPU backend kernel tests (f64 references)"
"$BUILD/tests/runtime/test_colrt_kernels"

echo "== every kernel on the GPU vs the CPU backend"
"$G/kernel_dump_cpu" "$WORK/cpu.dump"
"$G/kernel_dump_cuda" "$WORK/gpu.dump"
"$G/compare_dumps" "$WORK/cpu.dump" "$WORK/gpu.dump"

echo "== timing: GEMM and attention at GPT-2 shapes on the GPU (4096 tokens)"
"$G/bench_kernels_cuda" --tokens 4096 --reps 10

echo "== timing: collectives over NCCL, $NGPU rank(s), one GPU each"
"${MPI[@]}" -np "$NGPU" "$G/bench_collectives_cuda" --max-mb 256 --reps 10

echo "run.sh: all GPU checks passed"

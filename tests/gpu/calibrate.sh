#!/usr/bin/env bash
# tests/gpu/calibrate.sh [BUILD_DIR] [OUT_DIR] — for a machine with NVIDIA
# GPUs: builds colossal-calibrate-cuda (unless BUILD_DIR already has it),
# calibrates the machine on one rank per GPU, checks the file with the
# planner (a plan of GPT-2 124M on it), and prints it next to the preset of
# the same GPU (h200, h100, a100-80gb, a100-40gb by the device name).
# Writes OUT_DIR/<gpu>.json (default: $OUT when set, else the current folder)
# and OUT_DIR/calibrate.log; commit the JSON as tests/gpu/calibrated/<gpu>.json
# and compare it in docs/sharding.md (issue 15).
#
# Standalone: it does not need tests/gpu/bundle.sh. On a machine without a
# build tree, run it from a checkout with the Debian packages of
# scripts/install-deps.sh, nvcc, cuBLASLt and NCCL under /usr/local/cuda.
# The machines lent to this project have none of those packages nor MPI:
# there the kit's calibrate stage (tests/gpu/run.sh, colossal-calibrate-cuda
# built on the one-rank MPI) calibrates one GPU; this script is for a
# machine of several GPUs with MPI.
# Takes a few minutes (GEMMs up to 16384, collectives up to 256 MiB);
# CALIBRATE_ARGS adds options (e.g. "--quick" for a smoke run).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
OUTDIR=${2:-${OUT:-$PWD}}
export PATH=/usr/local/cuda/bin:$PATH
MPI=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
mkdir -p "$OUTDIR"
LOG=$OUTDIR/calibrate.log
exec > >(tee "$LOG") 2>&1

NGPU=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
[ "$NGPU" -ge 1 ] || { echo "calibrate.sh: no GPU found (nvidia-smi -L lists none)"; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$NAME" in
  *H200*) PRESET=h200 ;;
  *H100*) PRESET=h100 ;;
  *A100*80GB*) PRESET=a100-80gb ;;
  *A100*) PRESET=a100-40gb ;;
  *) PRESET="" ;;
esac
SLUG=$(echo "$NAME" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')

CAL=$BUILD/tools/calibrate/colossal-calibrate-cuda
CC=$BUILD/compiler/colossal-compile
if [ ! -x "$CAL" ] || [ ! -x "$CC" ]; then
  echo "== build (Release, CUDA on) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCOLOSSAL_CUDA=ON >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target colossal-calibrate-cuda colossal-compile >/dev/null
fi

# One node: the inter-node link is not measured; it comes from the preset
# (--links-from; the file's calibration.notes says so). With one GPU there is
# no collective to time (NCCL refuses two ranks on one GPU): both links come
# from the preset, and only GEMM, memory bandwidth and the reserve are measured.
LINKS=(--links-from "${PRESET:-h100}")
FILE=$OUTDIR/$SLUG.json
echo "== colossal-calibrate-cuda on $NGPU rank(s) -> $FILE"
# shellcheck disable=SC2086
timeout 900 "${MPI[@]}" -np "$NGPU" "$CAL" -o "$FILE" "${LINKS[@]}" ${CALIBRATE_ARGS:-}

echo "== the planner reads it: GPT-2 124M, batch 8"
"$CC" "$ROOT/examples/gpt2/gpt2.c" --cluster "$FILE" --batch 8 --emit plan -q -o "$OUTDIR/plan-$SLUG"

if [ -n "$PRESET" ]; then
  echo "== $FILE against the preset '$PRESET' (ratio = calibrated / preset)"
  "$CC" "$ROOT/examples/gpt2/gpt2.c" --cluster "$PRESET" --batch 8 --emit plan -q -o "$OUTDIR/plan-$PRESET"
  python3 - "$FILE" "$OUTDIR/plan-$SLUG/gpt2.plan.json" "$OUTDIR/plan-$PRESET/gpt2.plan.json" "$PRESET" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); pc = json.load(open(sys.argv[2])); pp = json.load(open(sys.argv[3]))
preset = {  # docs/sharding.md's preset table and reserve table
    "h200": dict(mem=141, bf16=989.5, f32=67, bw=4800, intra=450, reserve=1320),
    "h100": dict(mem=80, bf16=989.5, f32=67, bw=3350, intra=450, reserve=1320),
    "a100-80gb": dict(mem=80, bf16=312, f32=19.5, bw=2039, intra=300, reserve=988),
    "a100-40gb": dict(mem=40, bf16=312, f32=19.5, bw=1555, intra=300, reserve=988)}[sys.argv[4]]
rows = [("memory GB", c["memory_gb"], preset["mem"]),
        ("peak bf16 TFLOP/s (best measured)", c["peak_tflops"]["bf16"], preset["bf16"]),
        ("peak f32 TFLOP/s (best measured)", c["peak_tflops"]["f32"], preset["f32"]),
        ("memory GB/s", c["mem_bw_gbs"], preset["bw"]),
        ("intra-node GB/s", c["intra"]["bandwidth_gbs"], preset["intra"]),
        ("intra-node latency us", c["intra"]["latency_us"], 2.0),
        ("reserve MiB", sum(c["reserve_mb"].values()), preset["reserve"]),
        ("GPT-2 124M step s (planned)", pc["step_time_s"], pp["step_time_s"])]
print(f"{'quantity':36s} {'calibrated':>12s} {'preset':>12s} {'ratio':>7s}")
for name, a, b in rows:
    print(f"{name:36s} {a:12.4g} {b:12.4g} {a / b:7.3f}")
g = c["gemm_efficiency"]["bf16"]
print("bf16 GEMM efficiency by size (of the best measured rate):")
for f, e in zip(g["flops"], g["efficiency"]):
    print(f"  {f:10.3g} FLOPs  {e:.3f}")
PY
fi
echo "calibrate.sh: wrote $FILE"

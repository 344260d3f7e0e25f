#!/usr/bin/env bash
# tests/gpu/run.sh [BUNDLE [OUT]] — the first GPU run, from a bundle made by
# tests/gpu/bundle.sh, on a machine with one NVIDIA GPU, nvcc and PyTorch's
# CUDA libraries (no MPI, no Debian packages of ours). Stages, each under its
# own timeout, each logging to OUT/<stage>.log (default OUT: $OUT, else
# ./gpu-run), a summary in OUT/summary.txt:
#   probe      the GPU, driver, nvcc, PyTorch's libraries
#   build      build_there.sh: the runtime, drivers and generated programs
#   ldd        every binary's libraries resolve
#   kernels    every runtime kernel on the GPU vs the CPU backend's dump
#   tiny       tiny GPT-2 f32 and bf16, 5 steps, losses vs the CPU backend's
#   sanitizer  tiny GPT-2 f32, 2 steps, under compute-sanitizer (memcheck)
#   profile    per-kernel times of GPT-2 124M (events; nsys too when installed)
#   g124m      GPT-2 124M, B=8, T=1024: seconds per step and MFU
# Exits non-zero if a check fails; later stages still run.
set -uo pipefail
B=$(cd "${1:-$(dirname "$0")}" && pwd)
OUT=${2:-${OUT:-$PWD/gpu-run}}
mkdir -p "$OUT"
BIN=$OUT/bin
SUM=$OUT/summary.txt
: > "$SUM"
fail=0
stage() { # stage NAME TIMEOUT command...
  local name=$1 t=$2
  shift 2
  local t0=$(date +%s)
  timeout --kill-after=10 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local verdict=ok
  [ $rc -eq 0 ] || { verdict="FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; fail=1; }
  printf '%-10s %-40s %4d s\n' "$name" "$verdict" $(($(date +%s) - t0)) | tee -a "$SUM"
  tail -5 "$OUT/$name.log" | sed 's/^/    /'
}

probe() {
  nvidia-smi || true
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
  command -v nvcc && nvcc --version || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
  command -v compute-sanitizer nsys || true
}

lddcheck() {
  local bad=0
  for f in "$BIN"/kernel_dump_cuda "$BIN"/train_*; do
    echo "== $f"
    ldd "$f" | tee /dev/stderr | grep -q 'not found' && bad=1
  done
  return $bad
}

kernels() {
  "$BIN/kernel_dump_cuda" "$OUT/gpu.dump" && "$BIN/compare_dumps" "$B/ref/cpu.dump" "$OUT/gpu.dump"
}

# losses of 6 steps (1 warm-up) vs the CPU backend's: f32 within 1e-4 relative, bf16 3e-2
tiny() {
  local rc=0
  for m in tiny_f32 tiny_bf16; do
    local tol=1e-4
    [ $m = tiny_bf16 ] && tol=3e-2
    "$BIN/train_$m" 5 3e-3 1 | awk '/^step/ { print $4 }' > "$OUT/$m.losses" || rc=1
    paste "$B/ref/$m.losses" "$OUT/$m.losses" | awk -v tol=$tol -v m=$m '
      { c = $1; g = $2; d = (c - g) / c; if (d < 0) d = -d
        printf "%s step %d: cpu %s gpu %s rel %.2e\n", m, NR, c, g, d; if (d > tol) bad = 1; n++ }
      END { if (n != 6) { print m ": expected 6 steps (1 warm-up, 5 timed), got " n; exit 1 } exit bad }' || rc=1
  done
  return $rc
}

sanitizer() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not installed"; return 1; }
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/train_tiny_f32" 2 3e-3 1
}

# per-kernel GPU times of GPT-2 124M (2 steps, 1 warm-up): the generated
# kernels timed by events (kernel_times.txt); with nsys also every runtime
# kernel (GEMMs, cross-entropy; nsys_kernels.txt)
profile() {
  "$BIN/train_g124m_timed" 2 1e-4 1 2> "$OUT/kernel_times.txt" || return 1
  head -40 "$OUT/kernel_times.txt"
  command -v nsys >/dev/null || { echo "nsys not installed: runtime kernels not in the table"; return 0; }
  nsys profile -o "$OUT/g124m" --force-overwrite true "$BIN/train_g124m" 2 1e-4 1 &&
    nsys stats --report cuda_gpu_kern_sum --format table "$OUT/g124m.nsys-rep" > "$OUT/nsys_kernels.txt"
  rm -f "$OUT/g124m.nsys-rep" "$OUT/g124m.sqlite"
}

g124m() {
  "$BIN/train_g124m" 4 1e-4 1 | tee "$OUT/g124m.txt"
  local s=$(awk '/s per step \(mean of/ { for (i = 1; i <= NF; i++) if ($i == "s" && $(i+1) == "per") print $(i-1) }' "$OUT/g124m.txt")
  local flops=$(awk '/total FLOPs/ { print $3 }' "$B/gen/g124m/summary.txt")
  local plan=$(awk '/^plan / { print $3 }' "$B/gen/g124m/summary.txt")
  python3 - "$s" "$flops" "$plan" <<'PY'
import sys
s, tf, plan = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"GPT-2 124M B=8 T=1024 f32: {s:.4f} s/step (plan {plan:.4f} s, ratio {s / plan:.2f}); "
      f"{tf / s:.1f} TFLOP/s; MFU {tf / s / 67:.3f} of f32 non-tensor peak (67 TFLOP/s), {tf / s / 989:.3f} of bf16 dense (989)")
PY
}

stage probe 60 probe
stage build 300 bash "$B/build_there.sh" "$BIN"
stage ldd 30 lddcheck
stage kernels 120 kernels
stage tiny 120 tiny
stage sanitizer 180 sanitizer
stage profile 180 profile
stage g124m 240 g124m
echo "run.sh: results in $OUT" | tee -a "$SUM"
exit $fail

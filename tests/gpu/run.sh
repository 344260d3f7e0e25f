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
#   steps      every step program of gen/ (GPT-2 124M f32 and bf16, ...):
#              its median step against its plan (steps.tsv)
#   calibrate  colossal-calibrate-cuda on the one GPU: OUT/calibrated.json
#              (GEMM, memory-bound kernels, attention, host links, reserve;
#              the GPU-to-GPU links from the preset of the same GPU)
#   sanitizer  tiny GPT-2 f32, 2 steps, under compute-sanitizer (memcheck)
#   profile    per-kernel times of GPT-2 124M, f32 and bf16 (events; nsys too
#              when installed), and its COLRT_PROFILE tables (every node,
#              GEMMs included: profile_*.json)
# Exits non-zero if a check fails; later stages still run. RUN_BUDGET=S
# (seconds) caps the whole run: each stage's timeout is cut to what is left,
# and a stage with under 15 s left is skipped (a lent machine's call has a
# limit; the most telling stages come first).
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin # nvcc, compute-sanitizer where the toolkit is not on PATH
B=$(cd "${1:-$(dirname "$0")}" && pwd)
OUT=${2:-${OUT:-$PWD/gpu-run}}
mkdir -p "$OUT"
BIN=$OUT/bin
SUM=$OUT/summary.txt
: > "$SUM"
fail=0
start=$(date +%s)
stage() { # stage NAME TIMEOUT command...
  local name=$1 t=$2
  shift 2
  local t0=$(date +%s)
  if [ "${RUN_BUDGET:-0}" -gt 0 ]; then
    local left=$((start + RUN_BUDGET - t0))
    [ $left -ge 15 ] || { printf '%-10s %-40s\n' "$name" "SKIPPED (RUN_BUDGET spent)" | tee -a "$SUM"; fail=1; return; }
    [ $left -ge "$t" ] || t=$left
  fi
  # timeout runs programs, not this script's functions: each stage runs in a
  # bash that has them (exported below)
  timeout --kill-after=10 "$t" bash -c 'set -o pipefail; "$@"' "$name" "$@" > "$OUT/$name.log" 2>&1
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
  for f in "$BIN"/kernel_dump_cuda "$BIN"/colossal-calibrate-cuda "$BIN"/train_*; do
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
  # API errors are not reported: NCCL's set-up asks for kernel images of other
  # architectures and handles the refusals (16 such on the first H100 run);
  # the runtime checks every CUDA call of its own and dies on a failure
  compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$BIN/train_tiny_f32" 2 3e-3 1
}

# per-kernel GPU times of GPT-2 124M (2 steps, 1 warm-up): the generated
# kernels timed by events (kernel_times.txt); with nsys also every runtime
# kernel (GEMMs, cross-entropy; nsys_kernels.txt)
profile() {
  "$BIN/train_g124m_timed" 2 1e-4 1 2> "$OUT/kernel_times.txt" || return 1
  head -40 "$OUT/kernel_times.txt"
  "$BIN/train_g124m_bf16_timed" 2 1e-4 1 2> "$OUT/kernel_times_bf16.txt" || return 1
  head -20 "$OUT/kernel_times_bf16.txt"
  # per op class as the schedule runs it, GEMMs and runtime calls included
  # (COLRT_PROFILE: the stream synchronized at each node), for
  # bench/validate/compare_profile.py against the plan and the simulation
  local m
  for m in g124m g124m_bf16; do
    COLRT_PROFILE=1 COLRT_PROFILE_OUT="$OUT/profile_$m.json" "$BIN/train_$m" 2 1e-4 1 > "$OUT/profile_$m.txt" 2>&1 ||
      return 1
  done
  head -30 "$OUT/profile_g124m_bf16.txt"
  command -v nsys >/dev/null || { echo "nsys not installed: runtime kernels not in the table"; return 0; }
  nsys profile -o "$OUT/g124m" --force-overwrite true "$BIN/train_g124m" 2 1e-4 1 &&
    nsys stats --report cuda_gpu_kern_sum --format table "$OUT/g124m.nsys-rep" > "$OUT/nsys_kernels.txt"
  rm -f "$OUT/g124m.nsys-rep" "$OUT/g124m.sqlite"
}

# every step program in gen/ (those with an args file): 4 steps after a
# warm-up; the median step against its plan (OUT/steps.tsv: name, measured
# median s, planned s, simulated s, model FLOPs a step; with programs.tsv,
# bench/validate/gpu.py's input)
steps() {
  local rc=0 g m s
  printf 'program\tmeasured_s\tplanned_s\tsimulated_s\tmodel_flops\n' > "$OUT/steps.tsv"
  cp "$B/gen/programs.tsv" "$OUT/" # bench/validate/gpu.py table reads both
  for g in "$B"/gen/*/; do
    [ -f "$g/args" ] || continue
    m=$(basename "$g")
    echo "== $m: $(cat "$g/args")"
    "$BIN/train_$m" 4 1e-4 1 | tee "$OUT/$m.txt" || { rc=1; continue; }
    s=$(awk '/s per step \(median of/ { for (i = 1; i <= NF; i++) if ($i == "s" && $(i+1) == "per") print $(i-1) }' "$OUT/$m.txt")
    python3 - "$s" "$g/$(cat "$g/model").plan.json" "$m" "$OUT/steps.tsv" <<'PY' || rc=1
import json, sys
s, plan, m = float(sys.argv[1]), json.load(open(sys.argv[2])), sys.argv[3]
tf, pred, sim = plan["throughput"]["model_flops_per_step"], plan["step_time_s"], plan.get("simulated_step_time_s") or 0
print(f"{m}: {s:.4f} s/step (median), plan {pred:.4f} s, simulated {sim:.4f} s, measured/plan {s / pred:.2f}; "
      f"{tf / s / 1e12:.1f} TFLOP/s")
with open(sys.argv[4], "a") as f:
    f.write(f"{m}\t{s:.6g}\t{pred:.6g}\t{sim:.6g}\t{tf:.6g}\n")
PY
  done
  cat "$OUT/steps.tsv"
  return $rc
}

# One node with one GPU: no collective can be timed (NCCL refuses two ranks
# on one GPU), so both links come from the preset of the same GPU.
calibrate() {
  local name preset=h100
  name=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true) | head -1)
  case "$name" in *H200*) preset=h200 ;; *A100*80GB*) preset=a100-80gb ;; *A100*) preset=a100-40gb ;; esac
  # shellcheck disable=SC2086
  "$BIN/colossal-calibrate-cuda" -o "$OUT/calibrated.json" --links-from $preset ${CALIBRATE_ARGS:---min-time 0.1}
}

export B OUT BIN SUM
export -f probe lddcheck kernels tiny sanitizer profile steps calibrate
stage probe 30 probe
stage build 240 bash "$B/build_there.sh" "$BIN"
stage ldd 20 lddcheck
stage kernels 60 kernels
stage tiny 60 tiny
stage steps 150 steps
stage calibrate 200 calibrate
stage sanitizer 120 sanitizer
stage profile 90 profile
echo "run.sh: results in $OUT" | tee -a "$SUM"
exit $fail

#!/usr/bin/env bash
# tests/gpu/bundle.sh [DIR] — builds here, into DIR (default build-gpu-bundle/,
# ignored by git), everything a first run on a lent GPU machine needs, for
# tests/gpu/run.sh to use there (docs/gpu.md says how to launch it):
#   gen/     generated programs for 1 GPU: tiny GPT-2 (2 layers, D=64, T=32,
#            batch 8) in f32 and bf16; the step programs (GPT-2 124M at
#            B=8, T=1024 in f32 and bf16, bf16 with 2 micro-batches and with
#            full recompute, GPT-2 350M and TinyLlama 1.1B in bf16), planned
#            on the GPU's calibration
#   src/     what is compiled there with its nvcc: the runtime (common/,
#            cuda/), colrt.h, the drivers (train.c, kernel_dump.c,
#            compare_dumps.c), colossal-calibrate-cuda (calibrate/, with the
#            ir/ and shard/ code it checks its file with, and the CUDA
#            program's attention kernels it times, calibrate_kernels_cuda.cu,
#            written by colossal-gen-kernels --cuda) and a one-rank MPI
#            (mpi1/: the machine has no MPI)
#   ref/     the CPU backend's results made here: every runtime kernel's
#            dump and the tiny models' losses over 5 steps
#   lib/     cJSON and zlib (their libraries and headers: the machine has no
#            Debian packages); the machine's own CUDA, cuBLASLt and NCCL are used there
# The machine's CUDA version is unknown here, so binaries are built there,
# not here; this script runs that same build once here (nvcc, link only) so
# that a bundle that would not build is caught before device time is spent.
# Needs the project built in BUILD (default build/). Fails over 60 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
DIR=${1:-$ROOT/build-gpu-bundle}
cc=$BUILD/compiler/colossal-compile
[ -x "$cc" ] || { echo "bundle.sh: $cc not found: build the project first (make build)"; exit 1; }
genk=$BUILD/tools/calibrate/colossal-gen-kernels
[ -f "$BUILD/runtime/libcolrt_cpu.a" ] && [ -x "$BUILD/tests/gpu/kernel_dump_cpu" ] && [ -f "$BUILD/shard/cpu_preset.inc" ] &&
  [ -x "$genk" ] ||
  { echo "bundle.sh: libcolrt_cpu.a, kernel_dump_cpu, shard/cpu_preset.inc or colossal-gen-kernels missing in $BUILD"; exit 1; }
rm -rf "$DIR"
mkdir -p "$DIR"/{gen,src,ref,lib/cjson}
D=$(cd "$DIR" && pwd)

echo "== sources"
cp -r "$ROOT/include" "$D/src/include"
mkdir -p "$D/src/runtime"
cp -r "$ROOT/runtime/common" "$ROOT/runtime/cuda" "$D/src/runtime/"
mkdir -p "$D/src/tests/gpu"
cp "$ROOT/tests/gpu/kernel_dump.c" "$ROOT/tests/gpu/compare_dumps.c" "$D/src/tests/gpu/"
cp "$ROOT/bench/codegen_cpu/train.c" "$D/src/"
cp -r "$ROOT/tests/gpu/mpi1" "$D/src/mpi1"
# colossal-calibrate-cuda: its source, and the IR and cluster code it writes
# and checks the file with (shard/, ir/; the cpu preset's bytes as configured)
cp -r "$ROOT/ir" "$ROOT/shard" "$D/src/"
rm -f "$D/src/ir/CMakeLists.txt" "$D/src/shard/CMakeLists.txt"
cp "$BUILD/shard/cpu_preset.inc" "$D/src/shard/"
mkdir -p "$D/src/calibrate"
cp "$ROOT/tools/calibrate/calibrate.c" "$ROOT/tools/calibrate/calibrate_kernels.h" "$D/src/calibrate/"
"$genk" --cuda "$D/src/calibrate/calibrate_kernels_cuda.cu"
cp "$ROOT/tests/gpu/build_there.sh" "$ROOT/tests/gpu/run.sh" "$D/"
cp /usr/include/cjson/cJSON.h "$D/lib/cjson/"
cp -L /usr/lib/x86_64-linux-gnu/libcjson.so.1 "$D/lib/"
ln -s libcjson.so.1 "$D/lib/libcjson.so"
cp /usr/include/zlib.h /usr/include/zconf.h "$D/lib/" # checkpoints' CRC-32
cp -L /usr/lib/x86_64-linux-gnu/libz.so.1 "$D/lib/"

echo "== generated programs"
# Each gen/NAME holds a program, its model's name (gen/NAME/model: the files'
# prefix, train.c's CG_MODEL) and, for the step programs, its plan and the
# arguments it was planned with (gen/NAME/args). The step programs are planned
# on the GPU's calibration (GPU_CLUSTER, default the committed H100 one), so
# the steps run.sh measures are compared with the model that chose them.
CLUSTER=${GPU_CLUSTER:-$ROOT/tests/gpu/calibrated/nvidia-h100-80gb-hbm3.json}
tiny=(-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 --cluster h100:1x1)
"$cc" "$ROOT/examples/gpt2/gpt2.c" "${tiny[@]}" --emit code --target both -q -o "$D/gen/tiny_f32"
"$cc" "$ROOT/examples/gpt2/gpt2.c" "${tiny[@]}" --dtype bf16 --emit code --target both -q -o "$D/gen/tiny_bf16"
echo gpt2 > "$D/gen/tiny_f32/model"
echo gpt2 > "$D/gen/tiny_bf16/model"
gen() { # gen NAME MODEL SOURCE ARGS...: a step program (CUDA, plan) in gen/NAME
  local name=$1 model=$2 src=$3
  shift 3
  # KIT_STEPS="NAME ...": only those (check_bundle.sh: a smaller kit, both models)
  [ -z "${KIT_STEPS:-}" ] || [[ " $KIT_STEPS " == *" $name "* ]] || return 0
  "$cc" "$ROOT/$src" "$@" --cluster "$CLUSTER" --emit all --target cuda -q -o "$D/gen/$name"
  echo "$model" > "$D/gen/$name/model"
  echo "$src $*" > "$D/gen/$name/args"
  rm -f "$D/gen/$name/$model.report.html" # the bundle's size; the plan JSON has it all
}
gen g124m gpt2 examples/gpt2/gpt2.c --batch 8
gen g124m_bf16 gpt2 examples/gpt2/gpt2.c --batch 8 --dtype bf16
gen g124m_bf16_mb2 gpt2 examples/gpt2/gpt2.c --batch 16 --dtype bf16 --micro-batches 2
gen g124m_bf16_full gpt2 examples/gpt2/gpt2.c --batch 8 --dtype bf16 --recompute full
gen g350m_bf16 gpt2 examples/gpt2/gpt2.c -DN_LAYER=24 -DN_EMBD=1024 -DN_HEAD=16 --batch 8 --dtype bf16
gen tinyllama_bf16 llama examples/llama/llama.c --batch 2 --dtype bf16
python3 "$ROOT/bench/validate/gpu.py" record "$D/gen" > "$D/gen/programs.tsv" # the programs as measured

echo "== CPU references"
"$BUILD/tests/gpu/kernel_dump_cpu" "$D/ref/cpu.dump" >/dev/null
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
for m in tiny_f32 tiny_bf16; do
  mpicc -std=c17 -O2 -fopenmp -I"$ROOT/include" -I"$D/gen/$m" -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h \
    "$ROOT/bench/codegen_cpu/train.c" "$D/gen/$m/gpt2.c" "$D/gen/$m/gpt2_kernels.c" \
    "$BUILD/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$D/ref/train_$m"
  OMP_NUM_THREADS=1 "${mpirun[@]}" -np 1 "$D/ref/train_$m" 5 3e-3 1 | awk '/^step/ { print $4 }' > "$D/ref/$m.losses"
  rm -f "$D/ref/train_$m"
done

# BUNDLE_TRIAL=0 skips it (check_bundle.sh runs run.sh, whose build is the same)
if command -v nvcc >/dev/null && [ "${BUNDLE_TRIAL:-1}" != 0 ]; then
  echo "== the build run.sh does there, tried here (compile and link only)"
  trial=$(mktemp -d)
  trap 'rm -rf "$trial"' EXIT
  cp -r "$D" "$trial/b"
  (cd "$trial/b" && ./build_there.sh "$trial/out" > "$trial/build.log" 2>&1) || { cat "$trial/build.log"; exit 1; }
  ls "$trial/out"
fi
size=$(du -sb "$D" | cut -f1)
echo "bundle.sh: $D, $((size / 1024)) KiB"
[ "$size" -lt $((60 * 1024 * 1024)) ] || { echo "bundle.sh: over 60 MiB"; exit 1; }

#!/usr/bin/env bash
# build_there.sh OUT — run from a bundle (tests/gpu/bundle.sh) on the GPU
# machine: compiles the CUDA runtime against the one-rank MPI and the
# bundle's cJSON, the drivers and the generated programs, with this
# machine's nvcc, cuBLASLt and NCCL (CUDA_HOME, or PyTorch's nvidia/*
# wheels, found through python3). Binaries in OUT, colossal-calibrate-cuda
# among them.
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
OUT=$1
mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
# cuBLASLt and NCCL: the toolkit's, else PyTorch's wheels
inc=(-I"$CUDA_HOME/include") libs=(-L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64")
py=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
if [ -n "$py" ]; then
  for d in "$py"/*/; do
    [ -d "$d/include" ] && inc+=(-I"$d/include")
    [ -d "$d/lib" ] && libs+=(-L"$d/lib" -Wl,-rpath,"$d/lib")
  done
fi
# the wheels ship libX.so.N only: link against those names
for l in cublasLt nccl cudart; do
  f=$(for d in "${libs[@]}"; do [ "${d#-L}" != "$d" ] && ls "${d#-L}"/lib$l.so* 2>/dev/null; done | head -1 || true)
  [ -n "$f" ] || { echo "build_there.sh: lib$l not found (CUDA_HOME=$CUDA_HOME, PyTorch wheels: ${py:-none})"; exit 1; }
  [ -e "$OUT/lib$l.so" ] || ln -sf "$f" "$OUT/lib$l.so"
done
arch=${CUDA_ARCH:-90}
common=(-I"$B/src/include" -I"$B/src/mpi1" -I"$B/lib" "${inc[@]}")
# Compiles run side by side (the machine has many cores; the GPT-2 124M kernels
# take the longest); each step's output goes to OUT/log/<name>.log and a
# failed step prints its log and fails the build.
mkdir -p "$OUT/log"
pids=() names=()
bg() { # bg NAME command...
  local n=$1
  shift
  "$@" > "$OUT/log/$n.log" 2>&1 &
  pids+=($!) names+=("$n")
}
join() {
  local i bad=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "build_there.sh: ${names[$i]} failed:"; cat "$OUT/log/${names[$i]}.log"; bad=1; }
  done
  pids=() names=()
  [ $bad -eq 0 ] || exit 1
}
objs=()
for f in "$B"/src/runtime/common/*.c "$B"/src/runtime/cuda/*.c "$B/src/mpi1/mpi1.c"; do
  o="$OUT/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
  bg "$(basename "$o" .o)" gcc -std=c17 -O2 -D_GNU_SOURCE "${common[@]}" -c "$f" -o "$o"
  objs+=("$o")
done
bg kernels_cu "$NVCC" -O3 -arch=sm_$arch "${common[@]}" -c "$B/src/runtime/cuda/kernels.cu" -o "$OUT/kernels_cu.o"
objs+=("$OUT/kernels_cu.o")
# colossal-calibrate-cuda's IR and cluster code
calobjs=()
for f in "$B"/src/ir/*.c "$B"/src/shard/*.c; do
  o="$OUT/cal_$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
  bg "$(basename "$o" .o)" gcc -std=c17 -O2 -I"$B/src/ir" -I"$B/src/shard" "${common[@]}" \
    -DCOLOSSAL_CPU_PRESET_NAME='"bench/validate/testdata/cpu-idle-1x2-2030.json"' -c "$f" -o "$o"
  calobjs+=("$o")
done
bg cal_main gcc -std=c17 -O2 -DCOLOSSAL_CALIBRATE_CUDA -I"$B/src/calibrate" -I"$B/src/ir" -I"$B/src/shard" \
  "${common[@]}" -c "$B/src/calibrate/calibrate.c" -o "$OUT/cal_main.o"
# the CUDA program's attention kernels it times (bundle.sh: colossal-gen-kernels --cuda)
bg cal_kernels "$NVCC" -O3 -arch=sm_$arch "${common[@]}" -I"$B/src/calibrate" \
  -c "$B/src/calibrate/calibrate_kernels_cuda.cu" -o "$OUT/cal_kernels.o"
bg kernel_dump gcc -std=c17 -O2 "${common[@]}" -c "$B/src/tests/gpu/kernel_dump.c" -o "$OUT/kernel_dump.o"
bg compare_dumps gcc -O2 "$B/src/tests/gpu/compare_dumps.c" -lm -o "$OUT/compare_dumps"
# every program in gen/ (gen/NAME/model names its files), and GPT-2 124M
# (f32, bf16) again with every generated launch timed (-DCG_TIME_KERNELS)
for g in "$B"/gen/*/; do
  m=$(basename "$g") model=$(cat "$g/model")
  bg "${m}_kernels" "$NVCC" -O3 -arch=sm_$arch "${common[@]}" -DCG_CHECK_LAUNCHES -c "$g/${model}_kernels.cu" -o "$OUT/${m}_kernels.o"
  bg "${m}_train" gcc -std=c17 -O2 -D_GNU_SOURCE "${common[@]}" -I"$g" -DCG_MODEL=$model -DCG_HEADER=$model.h -c "$B/src/train.c" -o "$OUT/${m}_train.o"
  bg "${m}_sched" gcc -std=c17 -O2 "${common[@]}" -I"$g" -c "$g/$model.c" -o "$OUT/${m}_sched.o"
done
for m in g124m g124m_bf16; do
  [ -d "$B/gen/$m" ] || continue
  bg ${m}_timed_kernels "$NVCC" -O3 -arch=sm_$arch "${common[@]}" -DCG_TIME_KERNELS -c "$B/gen/$m/gpt2_kernels.cu" -o "$OUT/${m}_timed_kernels.o"
done
join
rm -f "$OUT/libcolrt_cuda1.a"
ar rcs "$OUT/libcolrt_cuda1.a" "${objs[@]}"
link=("$OUT/libcolrt_cuda1.a" -L"$OUT" -Wl,-rpath,"$B/lib" -L"$B/lib" "${libs[@]}" -lcublasLt -lnccl -lcjson -l:libz.so.1 -lcudart -lm -lpthread -ldl -lstdc++)
bg kernel_dump_cuda g++ "$OUT/kernel_dump.o" "${link[@]}" -o "$OUT/kernel_dump_cuda"
bg colossal-calibrate-cuda g++ "$OUT/cal_main.o" "$OUT/cal_kernels.o" "${calobjs[@]}" "${link[@]}" -o "$OUT/colossal-calibrate-cuda"
for g in "$B"/gen/*/; do
  m=$(basename "$g")
  bg "train_$m" g++ "$OUT/${m}_train.o" "$OUT/${m}_sched.o" "$OUT/${m}_kernels.o" "${link[@]}" -o "$OUT/train_$m"
done
for m in g124m g124m_bf16; do
  [ -d "$B/gen/$m" ] || continue
  bg train_${m}_timed g++ "$OUT/${m}_train.o" "$OUT/${m}_sched.o" "$OUT/${m}_timed_kernels.o" "${link[@]}" -o "$OUT/train_${m}_timed"
done
join
echo "build_there.sh: built in $OUT"

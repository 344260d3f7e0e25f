#!/usr/bin/env bash
# run.sh — the consumer test: install colossal from BUILD into a temporary
# prefix, then build tests/consumer/project (a user's project that knows only
# find_package(Colossal) and colossal_generate) against that prefix and train
# its model on 2 MPI ranks. Also checks that the compiler reruns only when the
# model file or the options change, that a consumer without the CUDA toolkit
# finds a package built with CUDA (and COMPONENTS cuda says why not), that the
# installed compiler reads the model.h installed beside it, that the drivers'
# headers and the example projects are installed, and that the pkg-config
# file links.
# usage: tests/consumer/run.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== install to $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/colossal-compile include/colossal/colrt.h include/colossal/model.h include/colossal/hf.h lib/libcolrt_cpu.a lib/libcolossal_hf.a \
         lib/cmake/Colossal/ColossalConfig.cmake lib/cmake/Colossal/ColossalGenerate.cmake \
         lib/pkgconfig/colossal-cpu.pc; do
    [ -e "$prefix/$f" ] || fail "the install has no $f"
done

# the project is copied so that nothing can reach the source tree by a relative path
cp -r "$here/project" "$work/src"
echo "== configure and build the consumer project"
cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >"$work/build1.log" 2>&1 || { cat "$work/build1.log"; fail "the first build"; }
grep -q "colossal-compile classifier" "$work/build1.log" || fail "the first build did not run colossal-compile"

echo "== train on 2 ranks"
"${mpirun[@]}" "$work/build/consumer" | tee "$work/train.log" | tail -2
grep -q "^trained: 2 ranks" "$work/train.log" || fail "training did not bring the loss down"

echo "== rebuilds: the compiler runs only when the model or the options change"
cmake --build "$work/build" >"$work/build2.log" 2>&1
! grep -q "colossal-compile classifier" "$work/build2.log" || fail "a no-change rebuild ran colossal-compile"
sleep 1 && touch "$work/src/classifier.c"
cmake --build "$work/build" >"$work/build3.log" 2>&1
grep -q "colossal-compile classifier" "$work/build3.log" || fail "touching the model did not regenerate"
cmake -S "$work/src" -B "$work/build" -DCONSUMER_BATCH=16 >/dev/null
cmake --build "$work/build" >"$work/build4.log" 2>&1
grep -q "colossal-compile classifier" "$work/build4.log" || fail "changing BATCH did not regenerate"
grep -q "classifier_x_ROWS 8" "$work/build/colossal/consumer/classifier.h" \
    || fail "BATCH 16 on 2 ranks should give 8 rows per rank"
cmake -S "$work/src" -B "$work/build" -DCONSUMER_BATCH=16 >/dev/null
cmake --build "$work/build" >"$work/build5.log" 2>&1
! grep -q "colossal-compile classifier" "$work/build5.log" || fail "reconfiguring with the same options regenerated"

echo "== colossal_generate misuse: configure errors that say why"
bad_project() { # bad_project PATTERN CALL
    rm -rf "$work/bad" && mkdir -p "$work/bad"
    cp "$work/src/classifier.c" "$work/src/main.c" "$work/bad/"
    printf 'cmake_minimum_required(VERSION 3.20)\nproject(bad LANGUAGES C)\nfind_package(Colossal REQUIRED)\nadd_executable(app main.c)\n%s\n' "$2" \
        > "$work/bad/CMakeLists.txt"
    if cmake -S "$work/bad" -B "$work/bad/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/bad.log" 2>&1; then
        fail "configured: $2"
    fi
    # CMake wraps messages at its line width (a long path moves the break): join lines first
    tr -s ' \n' '  ' <"$work/bad.log" | grep -q "$1" || { cat "$work/bad.log"; fail "no message '$1' for: $2"; }
}
bad_project "does not exist" "colossal_generate(app nosuch.c)"
bad_project "give one of cpu, cuda" "colossal_generate(app classifier.c TARGETS cpu cuda)"
bad_project "unknown arguments: STEPS" "colossal_generate(app classifier.c STEPS 3)"
bad_project "is not a target" "colossal_generate(nosuchtarget classifier.c)"
bad_project "not a C identifier" "colossal_generate(app classifier.c MODEL my-model)"

echo "== a CPU-only consumer of a package built with CUDA, and the cuda component"
# a machine without the CUDA toolkit: CMake cannot find it
cpuonly=(-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE)
if [ -f "$prefix/lib/cmake/Colossal/ColossalCudaTargets.cmake" ]; then
    cmake -S "$work/src" -B "$work/build-cpu" -DCMAKE_PREFIX_PATH="$prefix" "${cpuonly[@]}" >"$work/cpu.log" 2>&1 \
        || { cat "$work/cpu.log"; fail "a CPU-only consumer could not find_package(Colossal) built with CUDA"; }
    rm -rf "$work/cuda" && mkdir -p "$work/cuda"
    printf 'cmake_minimum_required(VERSION 3.20)\nproject(c LANGUAGES C)\nfind_package(Colossal REQUIRED COMPONENTS cuda)\n' \
        >"$work/cuda/CMakeLists.txt"
    if cmake -S "$work/cuda" -B "$work/cuda/build" -DCMAKE_PREFIX_PATH="$prefix" "${cpuonly[@]}" >"$work/cuda.log" 2>&1; then
        fail "COMPONENTS cuda was found without the CUDA toolkit"
    fi
    tr -s ' \n' '  ' <"$work/cuda.log" | grep -q "the cuda component needs the CUDA toolkit" \
        || { cat "$work/cuda.log"; fail "no message for COMPONENTS cuda without the toolkit"; }
    echo "CPU-only consumer: configured; COMPONENTS cuda: refused with the reason"
else
    echo "(this build has no CUDA: the package has no cuda component to leave out)"
fi

echo "== the installed compiler reads the <colossal/model.h> installed beside it, without -I"
# a copy of the install whose model.h says it is that one; a model that insists on it
cp -r "$prefix" "$work/prefix2"
echo '#define COLOSSAL_THIS_INSTALL 1' >>"$work/prefix2/include/colossal/model.h"
{ echo '#include <colossal/model.h>'; echo '#ifndef COLOSSAL_THIS_INSTALL'; echo '#error not the installed header'; \
  echo '#endif'; cat "$work/src/classifier.c"; } >"$work/installed_header.c"
"$work/prefix2/bin/colossal-compile" "$work/installed_header.c" --model classifier -DIN=8 -DHIDDEN=32 --batch 8 -q \
    || fail "the installed compiler did not read the model.h installed beside it"
for f in include/colossal/train/lm_train.h include/colossal/train/tokens.h include/colossal/train/tokenizer.h \
         share/colossal/examples/gpt2/gpt2.c share/colossal/examples/gpt2/train.c \
         share/colossal/examples/gpt2/CMakeLists.txt share/colossal/examples/llama/llama.c; do
    [ -e "$prefix/$f" ] || fail "the install has no $f"
done

echo "== pkg-config: the same program with mpicc"
gen=$work/build/colossal/consumer
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs colossal-cpu)
mpicc -std=c17 -O2 -I"$gen" "$work/src/main.c" "$gen/classifier.c" "$gen/classifier_kernels.c" $flags \
    -o "$work/consumer-pc"
"${mpirun[@]}" "$work/consumer-pc" | tail -1 | grep "^trained: 2 ranks" || fail "the pkg-config build did not train"
echo "consumer test: OK"

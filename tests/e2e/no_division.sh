#!/usr/bin/env bash
# no_division.sh — the CPU kernels colossal-compile writes compute no
# element's index with a division by a non-power of two (check_no_div.py):
# GPT-2 124M (its wpe add: [B,T,768] + [T,768]) in f32 and bf16, LLaMA ~124M,
# mlp-loud's bias adds ([32,10] + [10]), bcast_mid.cir's middle-dim broadcast,
# its expand and non-trailing sum_to, gpt2-tiny's vocabulary-parallel
# embedding; and GPT-2 124M's kernels, rows and all, compile with
# -Wall -Wextra -Werror -fopenmp (issue 21, bidx21).
# usage: no_division.sh COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
set -u
cc=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail=0
gen() { # gen NAME ARGS...: writes $work/NAME
  local name=$1
  shift
  "$cc" "$@" --emit code --target cpu -q -o "$work/$name" || { echo "FAIL colossal-compile $*"; fail=1; }
}
gen gpt2 "$src/examples/gpt2/gpt2.c" -DSEQ=64 --batch 4 --cluster h100:1x1
gen gpt2_bf16 "$src/examples/gpt2/gpt2.c" -DSEQ=64 --batch 4 --cluster h100:1x1 --dtype bf16
gen llama "$src/examples/llama/llama.c" -DSEQ=64 --batch 4 --cluster h100:1x1
gen mlp_loud "$src/tests/e2e/mlp_loud.cir" --cluster h100:1x1
gen bcast_mid "$src/tests/e2e/bcast_mid.cir" --cluster h100:1x1
gen vocab "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 1x4 --strategy megatron --mem 70KB
grep -q 'o0, d = i % ' "$work/vocab/gpt2_tiny_kernels.c" || grep -q 'int64_t)a0\[i\] - o0' "$work/vocab/gpt2_tiny_kernels.c" ||
  { echo "FAIL the vocabulary-parallel program has no vocabulary-parallel embedding"; fail=1; }
python3 "$src/tests/e2e/check_no_div.py" "$work"/* || fail=1
cc -std=c17 -O2 -fopenmp -Wall -Wextra -Werror -I"$src/include" -c "$work/gpt2/gpt2_kernels.c" -o "$work/gpt2/k.o" ||
  { echo "FAIL GPT-2 124M's kernels do not compile"; fail=1; }
[ $fail = 0 ] && echo "ok   no division per element"
exit $fail

#!/bin/sh
# kernels_as_run.sh CC CC_ID CALIBRATE_KERNELS_C SRC — the generated kernels
# colossal-calibrate times run as a program's do (issue 15):
# - RoPE: each position's angles serve CAL_ROPE_ROWS (16) rows, as a
#   program's B x H rows share them (calibrate_kernels.h); timed with one row
#   a position, its dearest case, the rate priced LLaMA-tiny's RoPE ~10x high.
# - AdamW: the update loop vectorizes at -O2 on x86-64's baseline, the flags
#   calibrate and bench/validate build with (a skipped step by selects, not a
#   branch whose conditional stores kept GCC from vectorizing without masked
#   stores: 3-5x below what a -march=native build ran). GCC only (its
#   -fopt-info); skipped (77) with another compiler.
# - SGD, LARS and LAMB: a program's update kernels (a tiny GPT-2 generated
#   with --optimizer O), those OpenMP runs as "parallel for simd" (more than
#   4096 elements: cg_launch.c), vectorize at -O2 likewise: each had a branch
#   around its stores (LAMB's fused update a select with a load in one arm).
set -eu
cc=$1 cc_id=$2 kern=$3 src=$4 compiler=${5:-}
fail() { echo "FAIL: $*"; exit 1; }
# the row loop of every RoPE of 2^9 elements and up (2^6 has 4 rows: T = 1)
for l in 9 12 15 18 21 24; do
  rows=$(awk -v m="void cal_rope_$l(" 'index($0, m) == 1 { go = 1 } go && /for \(int64_t r = 0; r < / { sub(/.*r < /, ""); sub(/;.*/, ""); print; exit }' "$kern")
  [ "$rows" = 16 ] || fail "cal_rope_$l applies a position's angles to '${rows:-no loop}' rows (want CAL_ROPE_ROWS = 16)"
done
echo "ok: RoPE at 16 rows a position"
if [ "$cc_id" != GNU ]; then
  echo "skipped: the vectorization check reads GCC's -fopt-info"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -DCG_NO_DISPATCH: the baseline kernels alone (with the x86-64-v3/v4 clones,
# docs/cmake.md, a loop vectorized in a clone would pass for the baseline's)
"$cc" -std=c17 -O2 -fopenmp -DCG_NO_DISPATCH -I"$src/include" -I"$src/tools/calibrate" -c "$kern" -o "$work/k.o" \
  -fopt-info-vec-optimized 2>"$work/vec.txt" || fail "compiling $kern"
# the lines of cal_adamw_24, and GCC's notes on a loop among them
range=$(awk -v m="void cal_adamw_24(" 'index($0, m) == 1 { a = NR } a && /^}/ { print a, NR; exit }' "$kern")
[ -n "$range" ] || fail "no cal_adamw_24 in $kern"
set -- $range
awk -F: -v a="$1" -v b="$2" '$2 >= a && $2 <= b && /optimized: loop vectorized/ { ok = 1 } END { exit !ok }' "$work/vec.txt" ||
  fail "cal_adamw_24's loop (lines $1-$2) is not vectorized at -O2"
echo "ok: AdamW's loop vectorized at -O2"
[ -n "$compiler" ] || fail "no colossal-compile given (5th argument)"
for o in sgd lars lamb; do
  "$compiler" "$src/examples/gpt2/gpt2.c" -DN_LAYER=1 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
    --optimizer "$o" --cluster cpu --emit code --target cpu -q -o "$work/$o" || fail "generating the $o program"
  k=$work/$o/gpt2_kernels.c
  "$cc" -std=c17 -O2 -fopenmp -DCG_NO_DISPATCH -I"$src/include" -c "$k" -o "$work/$o.o" -fopt-info-vec-optimized 2>"$work/$o.txt" ||
    fail "compiling $k"
  # each update kernel (a skipped step's flag) OpenMP runs as simd: first and last line
  awk '/^void [a-z0-9_]+\(.*\{$/ { name = $2; sub(/\(.*/, "", name); a = NR; skip = 0; simd = 0 }
       /const int skip = / { skip = 1 } /omp parallel for simd/ { simd = 1 }
       /^}/ && a { if (skip && simd) print name, a, NR; a = 0 }' "$k" >"$work/$o.fns"
  [ -s "$work/$o.fns" ] || fail "$o: no update kernel of more than 4096 elements in $k"
  while read -r name a b; do
    awk -F: -v a="$a" -v b="$b" '$2 >= a && $2 <= b && /optimized: loop vectorized/ { ok = 1 } END { exit !ok }' \
      "$work/$o.txt" || fail "$o: $name's loop (lines $a-$b of $k) is not vectorized at -O2"
  done <"$work/$o.fns"
  echo "ok: $o's update loops vectorized at -O2 ($(wc -l <"$work/$o.fns") kernels)"
done

#!/usr/bin/env bash
# pp_deep.sh — deep pipelines' programs (docs/pipeline.md, "How many stages"):
# 1. a 64-stage program (GPT-2 with 64 small layers on 64 single-GPU nodes, a stage each, 64
#    micro-batches) is generated (about 3 CPU s; ctest's timeout bounds it): the search
#    for repeated runs (compiler/codegen/cg_share.c) asks the longest common prefix of two
#    suffixes of the segments' ids; comparing windows segment by segment it took 78 CPU seconds
#    here (and minutes at 128 stages);
# 2. the compiler's summary of a 33-stage program compares each stage's arena and pipeline
#    buffer with that stage's own predicted peak (compiler/codegen/cg_plan.c, CgMemCheck): no
#    note that the arena is far below "the predicted peak" (it compared the largest stage's
#    arena, without its buffer, with the fullest stage's peak: "78.4 % below").
# usage: pp_deep.sh COMPILER SOURCE_DIR
set -eu
cc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=("$src/examples/gpt2/gpt2.c" -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32)
if ! "$cc" "${model[@]}" -DN_LAYER=64 --batch 64 --cluster h100:64x1 --pp 64 --micro-batches 64 \
        --emit code --target cpu -q -o "$tmp/pp64"; then
    echo "FAIL: the 64-stage program was not generated"
    exit 1
fi
n=$(grep -c "^static void gpt2_r[0-9]*(" "$tmp/pp64/gpt2.c")
echo "64 stages: generated, $n shared functions"
[ "$n" -gt 0 ] || { echo "FAIL: no shared functions in the 64-stage program"; exit 1; }
"$cc" "${model[@]}" -DN_LAYER=36 --batch 33 --cluster h100:33x1 --pp 33 --micro-batches 33 \
    --emit code --target cpu -o "$tmp/pp33" >"$tmp/out" 2>"$tmp/err"
cat "$tmp/err"
grep "memory plan:" "$tmp/out"
if grep -q "below the planner's predicted peak\|above the planner's predicted peak" "$tmp/err"; then
    echo "FAIL: the 33-stage program's summary says its memory plan is far from the prediction"
    exit 1
fi
grep -q "each stage's over its own prediction" "$tmp/out" || { echo "FAIL: no per-stage comparison in the summary"; exit 1; }
echo "ok"

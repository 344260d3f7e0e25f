#!/usr/bin/env bash
# bf16_buckets.sh — under bf16 data parallelism the gradients are summed in
# the buckets on the communication stream (compiler/lower/schedule.c
# make_buckets: a 16-bit gradient's sum sits at its cast to f32, after the
# backward; the cast waits for its bucket, LowerBucket.wait_at), as the
# planner prices them, not one all-reduce per tensor on the compute stream.
# GPT-2 tiny on 2 ranks: every gradient in a bucket, the tied embedding's
# too (summed in place over its two contributions, then bucketed: schedule.c
# tied_sum; until dp15 it was all-reduced on its own, 1 here), and the
# generated program waits for a bucket before the casts.
# usage: bf16_buckets.sh COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
set -euo pipefail
cc=$1 src=$2 work=$3
mkdir -p "$work"
"$cc" "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy dp --dtype bf16 --emit code --target cpu \
  -q -o "$work/bf16" --dump-after lower 2>"$work/bf16.lower"
buckets=$(grep -c '^  bucket [0-9]*: ' "$work/bf16.lower" || true)
single=$(grep -c '^  all-reduce %' "$work/bf16.lower" || true)
waits=$(grep -c 'its gradient bucket, summed' "$work/bf16/gpt2_tiny.c" || true)
echo "buckets $buckets, per-tensor all-reduces $single, casts waiting for a bucket $waits"
[ "$buckets" -ge 3 ] && [ "$single" -eq 0 ] && [ "$waits" -ge 1 ]

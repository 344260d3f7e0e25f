#!/usr/bin/env bash
# regen.sh — rewrites the report tests' frozen inputs (plan JSON written by the
# planner) and their golden Markdown. Run after a deliberate change to the
# planner's output or the Markdown renderer, then review the diff.
# usage: tests/report/regen.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cc=${1:-$root/build}/compiler/colossal-compile
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The MLP: examples/mlp/mlp.c with its default sizes, on 4 H100s.
"$cc" "$root/examples/mlp/mlp.c" --batch 32 --cluster h100:1x4 --emit plan -o "$tmp/mlp" -q
# The tiny GPT-2 of examples/gpt2/gpt2.c, with a memory limit that binds (one
# block recomputes selectively; some runners-up lose on memory) and a sweep.
"$cc" "$root/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 \
  --batch 8 --cluster h100:1x4 --mem 1.1MB --sweep-mem=4 --emit plan -o "$tmp/gpt2" -q
cp "$tmp/mlp/mlp.plan.json" "$here/mlp.plan.json"
cp "$tmp/gpt2/gpt2.plan.json" "$here/gpt2-tiny.plan.json"
for m in mlp gpt2-tiny; do
  "$cc" report "$here/$m.plan.json" -o "$here/$m.report.md"
done
"$cc" report "$here/gpt2-tiny.plan.json" --explain h.0.dense30 -o "$here/gpt2-tiny.explain.md"
echo "regen: wrote $here/{mlp,gpt2-tiny}.plan.json and their golden Markdown"

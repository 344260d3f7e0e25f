#!/usr/bin/env bash
# demo.sh — the main job: compile an example model and print what came out.
# usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cc=$build/compiler/colossal-compile
out=$build/demo
mkdir -p "$out"
echo "== colossal-compile examples/ir/gpt2-2layer.cir --emit ir -o $out/gpt2-2layer.cir"
"$cc" examples/ir/gpt2-2layer.cir --emit ir -o "$out/gpt2-2layer.cir"
cmp -s "$out/gpt2-2layer.cir" examples/ir/gpt2-2layer.cir && echo "   (verified; re-printed byte-identical to the input)"
echo "== first lines of the re-printed IR:"
head -n 12 "$out/gpt2-2layer.cir"

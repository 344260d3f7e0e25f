#!/usr/bin/env bash
# tests/gpu/emu/emulate.sh IN.cu OUT.cpp — a generated kernels file made
# ready for the CPU emulation of tests/gpu/emu/cuda_runtime.h: each launch
# `k<<<grid, block, shm, stream>>>(args);` becomes
# `cgemu::launch(grid, block, shm, [&] { k(args); });`. Fails if a launch
# is left over.
set -euo pipefail
tmp=$(mktemp "$2.XXXXXX")
sed -E 's/([A-Za-z0-9_]+)<<<([^,]+), ([^,]+), ([^,]+), [^>]*>>>\((.*)\);/cgemu::launch(\2, \3, \4, [\&] { \1(\5); });/' "$1" > "$tmp"
if grep -n '<<<' "$tmp"; then
  echo "emulate.sh: launches left in $1" >&2
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$2"

#!/usr/bin/env bash
# tests/e2e/share_cmp.sh COMPILER OUT_DIR MIN_RATIO MODEL [compiler args...] — the
# schedule a plan generates with shared functions (compiler/codegen/cg_share.c)
# and with --no-share, into OUT_DIR/{shared,plain}, compared by check_share.py:
# the shared one expanded is the written-out one token for token, and M.c is
# at least MIN_RATIO times smaller.
set -euo pipefail
cc=$1 out=$2 ratio=$3 model=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out/shared" "$out/plain"
mkdir -p "$out/shared" "$out/plain"
"$cc" "$model" "$@" --emit code --target cpu -q -o "$out/shared"
"$cc" "$model" "$@" --emit code --target cpu -q --no-share -o "$out/plain"
exec python3 "$here/check_share.py" "$out/shared" "$out/plain" "$ratio"

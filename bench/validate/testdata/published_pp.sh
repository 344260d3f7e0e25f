#!/usr/bin/env bash
# published_pp.sh — bench/validate/published.py's pipelined row (Korthikanti 175B, full
# recompute) plans the paper's forced layout (t 8, p 8, interleaved v 3, 64 micro-batches
# of one sequence) and the planner's own plan beside it; checks the row's shape, not the
# numbers (those are the README's table).
# usage: published_pp.sh SOURCE_DIR COMPILER
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(python3 "$src/bench/validate/published.py" --compiler "$2" --work "$tmp" --only "175B full")
echo "$out"
fail=0
grep -qE -- '^\| Korthikanti 175B full recompute \| 64 \| 1x8 --pp 8 --micro-batches 64 .*--schedule interleaved:3 \| 18\.13 \| [0-9.]+ \| [0-9.]+ \|' <<<"$out" \
    || { echo "FAIL: no predicted step for the forced layout"; fail=1; }
grep -qF -- "forced: stage mesh 1x8, p 8, v 3, m 64" <<<"$out" || { echo "FAIL: the plan is not the forced layout"; fail=1; }
grep -qE -- "are the forwards re-run before the backwards" <<<"$out" || { echo "FAIL: no re-run note"; fail=1; }
grep -qE -- "planner's own plan \(--pp auto --schedule auto\): [0-9.]+ s, stage mesh [0-9x]+, p [0-9]+" <<<"$out" \
    || { echo "FAIL: no planner's own plan"; fail=1; }
exit $fail

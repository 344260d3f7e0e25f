#!/usr/bin/env bash
# smoke.sh — bench/validate/table.py on a canned results file (two programs,
# two rounds, one failed run; each run's median and mean step): medians, ratios, the ±15 % count and the order.
# usage: smoke.sh SOURCE_DIR
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#PLANS#$src/bench/validate/testdata#" "$src/bench/validate/testdata/results.tsv" >"$tmp/r.tsv"
out=$(python3 "$src/bench/validate/table.py" "$tmp/r.tsv" --cluster cpu --date D --command C)
echo "$out"
fail=0
want=("| a | 2 | 2 dp | 0.01 | 0.011 | 0.01 | 10% (2 runs) | 0.0115 | 1.00 | 1.10 |"
      "| b | 2 | 1x2 megatron | 0.02 | 0.03 | 0.05 | 0% (1 runs) | 0.06 | 0.40 | 0.60 |"
      "Within +-15 % of measured: predicted 1 of 2, simulated 1 of 2."
      "Measured order (fastest first): a, b"
      "predicted order is the measured order (Kendall tau 1.00)")
for w in "${want[@]}"; do grep -qF -- "$w" <<<"$out" || { echo "FAIL: missing: $w"; fail=1; }; done
exit $fail

#!/usr/bin/env bash
# compare_smoke.sh — bench/validate/compare_profile.py on a canned plan, profile
# and simulation (testdata/compare.*.json; 10 steps profiled): the seconds a
# step per class (the profile's over the steps; the planner's a node's own
# price, a backward node's from its rule entry), their ratios, and the node
# furthest from the planner's price first, with its measured rate; the
# simulator's "elementwise" is the profile's "elemwise", its update part a row
# of its own (its classes leave it out), and a shared run's
# entry "(x2)" is compared with two of its node's prices.
# usage: compare_smoke.sh SOURCE_DIR
set -eu
src=$1
d=$src/bench/validate/testdata
out=$(python3 "$src/bench/validate/compare_profile.py" "$d/compare.plan.json" "$d/compare.profile.json" \
  --steps 10 --sim-json "$d/compare.sim.json")
echo "$out"
fail=0
# class: measured, simulated, planner, sim/meas, plan/meas (hand-computed)
want=("elemwise 0.04000 0.01000 0.00520 0.25 0.13"
      "matmul 0.01500 0.00300 0.00150 0.20 0.10"
      "(sim: update) 0.00200"
      "kernels 0.05500 0.01500 0.00670 0.27 0.12")
for w in "${want[@]}"; do
  tr -s ' ' <<<"$out" | grep -qxF -- "$w" || { echo "FAIL: missing: $w"; fail=1; }
done
grep -q "^norm" <<<"$out" && { echo "FAIL: a class all zero is listed"; fail=1; }
# the nodes: dh (0.03 measured against 0.003 priced) first, at 3e6 bytes / 0.03 s
first=$(grep -A2 "^nodes furthest" <<<"$out" | tail -1 | tr -s ' ')
[ "$first" = "dh gelu_bwd elemwise 0.030000 0.003000 1.0 - 0.10" ] || { echo "FAIL: first node: $first"; fail=1; }
# a shared run's entry (x2) against two of its node's prices
tr -s ' ' <<<"$out" | grep -qxF "h (x2) gelu elemwise 0.010000 0.004400 2.0 - 0.40" || { echo "FAIL: the (x2) entry"; fail=1; }
exit $fail

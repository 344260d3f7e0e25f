#!/usr/bin/env bash
# plan_roundtrip.sh — every plan the compiler writes loads back with its own
# plan loader (`colossal-compile report`, compiler/report/load.c), and its
# values come back exactly: the loader's JSON of the plan is the plan file
# byte for byte (every number, every name), and the only nulls are the ones
# the format allows (timings beside generated code, an unknown gap) — a NaN
# or an infinity would be written as null and lost.
#
# The plans: every plan the e2e suite generated beside its code (the build
# writes them: tests/e2e/<test>/<model>.plan.json), and memory sweeps made
# here (--sweep-mem, with and without a binding --mem, points that do not
# fit, --emit all).
# usage: plan_roundtrip.sh PATH/TO/colossal-compile SOURCE_DIR E2E_BINARY_DIR
set -u
cc=$1
src=$2
e2e=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

gen() { # gen NAME ARGS...: a plan of our own
  local name=$1
  shift
  if ! "$cc" "$@" -q -o "$tmp/$name" >"$tmp/$name.log" 2>&1; then
    echo "FAIL: colossal-compile $* -q -o $tmp/$name"
    sed 's/^/    /' "$tmp/$name.log"
    fail=$((fail + 1))
  fi
}
gen sweep-mlp "$src/examples/mlp/mlp.c" --batch 32 --cluster h100:1x4 --sweep-mem=3 --emit plan
gen sweep-gpt2 "$src/examples/ir/gpt2-tiny.cir" --batch 8 --cluster h100:1x4 --mem 1.1MB --sweep-mem=4 --emit plan
gen sweep-2layer "$src/examples/ir/gpt2-2layer.cir" --cluster h100:2x4 --sweep-mem=5 --emit report
gen sweep-llama-all "$src/examples/ir/llama-tiny.cir" --cluster h100:1x2 --mem 80KB --sweep-mem=3 --emit all --target cpu
gen baseline-222 "$src/examples/ir/mlp.cir" --cluster h100:1x8 --mesh 2x2x2 --strategy zero3 --emit plan
gen offload-auto "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x1 --offload auto --mem 120KB --emit plan

plans=()
while IFS= read -r p; do plans+=("$p"); done < <(find "$e2e" "$tmp" -name '*.plan.json' | sort)
n_e2e=$(find "$e2e" -name '*.plan.json' | wc -l)
# the suite generates one plan per e2e test (about a hundred)
if [ "$n_e2e" -lt 50 ]; then
  echo "FAIL: only $n_e2e plans under $e2e: build the e2e tests first (cmake --build build --target all)"
  fail=$((fail + 1))
fi

checked=0
for p in "${plans[@]}"; do
  checked=$((checked + 1))
  if ! "$cc" report "$p" --format json -o "$tmp/back.json" >"$tmp/report.log" 2>&1; then
    echo "FAIL: the loader rejects $p:"
    sed 's/^/    /' "$tmp/report.log"
    fail=$((fail + 1))
    continue
  fi
  if ! cmp -s "$p" "$tmp/back.json"; then
    echo "FAIL: $p does not round-trip through the loader:"
    diff "$p" "$tmp/back.json" | head -10 | sed 's/^/    /'
    fail=$((fail + 1))
  fi
  # nulls only where the format has them (docs/plan-format.md)
  bad=$(grep -o '"[A-Za-z_0-9]*":[[:space:]]*null' "$p" | grep -v -E '^"(time_s|compile_s|gap)":' | head -3 | tr '\n\t' '  ')
  if [ -n "$bad" ]; then
    echo "FAIL: $p has a null where a number belongs (a NaN or an infinity written): $bad"
    fail=$((fail + 1))
  fi
done
echo "plan_roundtrip: $checked plans ($n_e2e from the e2e suite), $fail failures"
[ "$fail" -eq 0 ]

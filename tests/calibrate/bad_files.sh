#!/bin/sh
# bad_files.sh COMPILE SRC — cluster files with a missing, non-finite or
# non-monotone entry are refused by colossal-compile --cluster: exit 1 and a
# message naming the field. A good file (the same text unbroken) plans. Then
# the planner's memory limit against the preset's reserve.
set -eu
cc=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
good='{"device": "X1", "nodes": 1, "per_node": 2, "memory_gb": 24,
 "peak_tflops": {"f32": 10, "bf16": 100, "f16": 100}, "mem_bw_gbs": 1000,
 "intra": {"latency_us": 1, "bandwidth_gbs": 100},
 "inter": {"latency_us": 10, "bandwidth_gbs": 10},
 "reserve_mb": {"context": 500, "communicator": 200, "workspace": 32},
 "gemm_efficiency": {
   "f32": {"flops": [1e6, 1e9, 1e12], "efficiency": [0.1, 0.5, 0.8]},
   "bf16": {"flops": [1e6, 1e9, 1e12], "efficiency": [0.1, 0.5, 0.8]},
   "f16": {"flops": [1e6, 1e9, 1e12], "efficiency": [0.1, 0.5, 0.8]}}}'
n=0
# case NAME SED-EXPRESSION EXPECTED-TEXT
case_() {
  n=$((n + 1))
  printf '%s\n' "$good" | sed "$2" > "$work/c$n.json"
  set +e
  "$cc" "$src/examples/ir/mlp.cir" --cluster "$work/c$n.json" --emit plan -q -o "$work/p$n" > "$work/e$n.txt" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || { cat "$work/e$n.txt"; fail "$1: exit $rc, expected 1"; }
  grep -qF "$3" "$work/e$n.txt" || { cat "$work/e$n.txt"; fail "$1: the message does not say '$3'"; }
  echo "ok: $1"
}
printf '%s\n' "$good" > "$work/good.json"
"$cc" "$src/examples/ir/mlp.cir" --cluster "$work/good.json" --emit plan -q -o "$work/good" ||
  fail "the good file was refused"
case_ "missing reserve" 's/ "reserve_mb": {[^}]*},//' "missing field 'reserve_mb'"
case_ "missing reserve entry" 's/"communicator": 200, //' "missing field 'reserve_mb.communicator'"
case_ "negative reserve" 's/"workspace": 32/"workspace": -1/' "reserve_mb.workspace"
case_ "reserve over memory" 's/"context": 500/"context": 30000/' "field 'reserve_mb' leaves no memory"
case_ "missing gemm table" 's/"f16": {"flops"/"f16x": {"flops"/' "missing field 'gemm_efficiency.f16'"
case_ "non-finite efficiency" '/"bf16": {"flops"/s/0.5, 0.8/0.5, 1e999/' "gemm_efficiency.bf16.efficiency[2]"
case_ "non-finite size" '/"f32": {"flops"/s/1e12/1e999/' "gemm_efficiency.f32.flops[2]"
case_ "non-monotone efficiency" '/"f32": {"flops"/s/0.1, 0.5, 0.8/0.1, 0.6, 0.5/' \
  "field 'gemm_efficiency.f32.efficiency[2]' must not decrease"
case_ "sizes not increasing" '/"f16": {"flops"/s/1e6, 1e9/1e9, 1e6/' "gemm_efficiency.f16.flops[1]"
case_ "lengths differ" '/"f32": {"flops"/s/0.1, 0.5, 0.8/0.5, 0.8/' "'flops' has 3 entries, 'efficiency' 2"
case_ "non-finite peak" 's/"f32": 10,/"f32": 1e999,/' "peak_tflops.f32"
echo "bad_files.sh: $n bad files refused, each naming its field"

# The reserve rule (docs/sharding.md, "Memory reserve"): by default the limit
# is the device's memory less the reserve; --mem is the plan's own budget
# (the reserve outside it); a --mem above memory less reserve is cut, with a note.
limit() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["memory"]; print(int(m["limit_bytes"]), int(m["reserve_bytes"]))' "$1"; }
"$cc" "$src/examples/ir/mlp.cir" --cluster h100 --emit plan -q -o "$work/r1"
want="$((80000000000 - 1320 * 1048576)) $((1320 * 1048576))"
[ "$(limit "$work/r1/mlp.plan.json")" = "$want" ] || fail "h100 default limit: $(limit "$work/r1/mlp.plan.json"), want $want"
"$cc" "$src/examples/ir/mlp.cir" --cluster h100 --mem 300KB --emit plan -q -o "$work/r2"
[ "$(limit "$work/r2/mlp.plan.json")" = "300000 $((1320 * 1048576))" ] || fail "--mem 300KB: $(limit "$work/r2/mlp.plan.json")"
"$cc" "$src/examples/ir/mlp.cir" --cluster h100 --mem 200GB --emit plan -q -o "$work/r3" 2> "$work/r3.txt"
grep -q "note: --mem 200.0 GB exceeds the device's memory less its reserve" "$work/r3.txt" || { cat "$work/r3.txt"; fail "no note for --mem over the usable memory"; }
[ "$(limit "$work/r3/mlp.plan.json")" = "$want" ] || fail "--mem 200GB not cut: $(limit "$work/r3/mlp.plan.json")"
echo "bad_files.sh: the reserve rule holds (default, --mem inside, --mem cut)"

#!/usr/bin/env bash
# norm_once.sh — the clipping norm's partial sums of squares are summed pending
# and all-reduced once a step (solver/placement.c pending_sum,
# shard/placement.c placement_pending_sum), not one scalar all-reduce per
# sharded parameter: LLaMA tiny on 1x4 under ZeRO-1 (the planner's plan splits
# weights over the mesh: their sums are pending over it) and GPT-2 tiny
# megatron on 2x2. Each lowered program has exactly one all-reduce of the
# summed squares per mesh axis it is pending over, none of a single
# parameter's, and at least one masked partial sum (the ones held whole).
# The numbers themselves are checked by the e2e tests (tests/e2e: every tensor
# parallel plan trains as the 1-rank program does).
# usage: norm_once.sh COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
set -euo pipefail
cc=$1 src=$2 work=$3
mkdir -p "$work"
bad=0
check() { # name want-norm-all-reduces model args...
  local name=$1 want=$2; shift 2
  local dump=$work/$name.lower
  "$cc" "$@" --emit code --target cpu -q -o "$work/$name" --dump-after lower 2>"$dump.all"
  # the program generated: the last one lowered (a limit the arena misses re-plans)
  awk '/^; ---- program after lower ----/ {n++; buf=""} {buf = buf $0 "\n"} END {printf "%s", buf}' "$dump.all" >"$dump"
  local per total masks
  per=$(grep -c 'reshard %[A-Za-z0-9_.]*\.grad_sq .*all-reduce' "$dump" || true)
  total=$(awk '/reshard %grad_norm_sq / {n += gsub(/all-reduce/, "")} END {print n + 0}' "$dump")
  masks=$(grep -c 'grad_sq .*-> mask' "$dump" || true)
  if [ "$per" -ne 0 ] || [ "$total" -ne "$want" ] || [ "$masks" -lt 1 ]; then
    echo "FAIL $name: $per per-parameter all-reduces of a partial sum (want 0), $total of the sum (want $want), $masks masks"
    bad=1
  else
    echo "ok   $name: one sum, $total all-reduce(s) of it, $masks partial sums masked"
  fi
}
check llama_zero1_1x4 1 "$src/examples/ir/llama-tiny.cir" --cluster h100:1x4 --mesh 1x4 --zero 1 --mem 50KB
# (on 2x2 the squares are partial over the tensor-parallel axis only: each gradient is summed over
# the batch axis before them, by the sum its update reads, grad_sync_once.py)
check gpt2_megatron_2x2 1 "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 105KB
exit $bad

#!/usr/bin/env bash
# bench/memplan/run.sh — the static memory plan against its lower bound and
# against the planner's predicted peak, for GPT-2 124M and LLaMA-2 7B under
# several plans, and for the small models of the e2e tests and the README
# demo. Generates each program (colossal-compile --emit code) into a
# temporary directory and reads memory.* from its plan JSON.
# usage: bench/memplan/run.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
cc=$build/compiler/colossal-compile
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpt2=(examples/gpt2/gpt2.c --batch 8)
gpt2xl=(examples/gpt2/gpt2.c -DN_LAYER=48 -DN_EMBD=1600 -DN_HEAD=25 --batch 8)
llama7b=(examples/llama/llama.c -DN_LAYER=32 -DN_EMBD=4096 -DN_HEAD=32 -DN_KV_HEAD=32 -DFFN=11008 -DSEQ=4096 --batch 8)
printf "%-10s %-28s %-6s %12s %12s %9s %12s %10s\n" model plan mesh arena_MB lower_MB arena/lb predicted_MB arena/pred
run() { # name plan-label args...
  local name=$1 label=$2; shift 2
  local out=$tmp/$name-${label//[^a-z0-9]/_}
  if ! "$cc" "$@" --emit code --target cpu -q -o "$out" 2>"$out.err"; then
    printf "%-10s %-28s %s\n" "$name" "$label" "not lowered: $(head -n1 "$out.err" | cut -c1-90)"
    return
  fi
  python3 - "$out"/*.plan.json "$name" "$label" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); m = d["memory"]
a, lb, p = m["planned_arena_bytes"], m["lower_bound_bytes"], m["predicted_peak_bytes"]
mesh = "x".join(str(x) for x in d["mesh"])
f = ".3f" if p < 10e6 else ".1f"  # the small models' rows in kB-sized MB
print(f"{sys.argv[2]:<10} {sys.argv[3]:<28} {mesh:<6} {a/1e6:12{f}} {lb/1e6:12{f}} {a/lb:9.3f} {p/1e6:12{f}} {a/p:10.3f}")
PY
}
run gpt2-124m "1 GPU"                      "${gpt2[@]}" --cluster h100:1x1
run gpt2-124m "1 GPU, dp-recompute"        "${gpt2[@]}" --cluster h100:1x1 --strategy dp-recompute
run gpt2-124m "8 GPUs dp"                  "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy dp
run gpt2-124m "8 GPUs zero1"               "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy zero1
run gpt2-124m "8 GPUs zero2"               "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy zero2
run gpt2-124m "8 GPUs zero2-recompute"     "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy zero2-recompute
run gpt2-124m "8 GPUs zero3"               "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy zero3
run gpt2-124m "8 GPUs auto"                "${gpt2[@]}" --cluster h100:1x8
run gpt2-124m "8 GPUs megatron 2x4"        "${gpt2[@]}" --cluster h100:1x8 --mesh 2x4 --strategy megatron
run gpt2-124m "8 GPUs megatron 1x8"        "${gpt2[@]}" --cluster h100:1x8 --mesh 1x8 --strategy megatron
run gpt2-124m "8 GPUs auto, no ZeRO"       "${gpt2[@]}" --cluster h100:1x8 --zero 0
run gpt2-124m "1 GPU, selective"           "${gpt2[@]}" --cluster h100:1x1 --recompute selective
run gpt2-124m "8 GPUs zero2, selective"    "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --zero 2 --recompute selective
run gpt2-124m "8 GPUs dp, 4 micro-batches" examples/gpt2/gpt2.c --batch 32 --cluster h100:1x8 --mesh 8 --strategy dp --micro-batches 4
run gpt2-124m "8 GPUs zero2, 4 micro-batches" examples/gpt2/gpt2.c --batch 32 --cluster h100:1x8 --mesh 8 --strategy zero2 --micro-batches 4
run gpt2-124m "8 GPUs zero2, bf16, 4 micro" examples/gpt2/gpt2.c --batch 32 --cluster h100:1x8 --mesh 8 --strategy zero2 --dtype bf16 --micro-batches 4
run gpt2-124m "8 GPUs dp, bf16"            "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy dp --dtype bf16
run gpt2-124m "8 GPUs zero2, bf16"         "${gpt2[@]}" --cluster h100:1x8 --mesh 8 --strategy zero2 --dtype bf16
run gpt2-1.5b "8 GPUs auto 2x4"            "${gpt2xl[@]}" --cluster h100:1x8 --mesh 2x4
run llama-7b  "8 GPUs zero2, 1 TB limit"   "${llama7b[@]}" --cluster h100:1x8 --mesh 8 --strategy zero2 --mem 1TB
run llama-7b  "8 GPUs zero2-recompute"     "${llama7b[@]}" --cluster h100:1x8 --mesh 8 --strategy zero2-recompute
run llama-7b  "8 GPUs zero3-recompute"     "${llama7b[@]}" --cluster h100:1x8 --mesh 8 --strategy zero3-recompute
run llama-7b  "8 GPUs zero1-recompute"     "${llama7b[@]}" --cluster h100:1x8 --mesh 8 --strategy zero1-recompute --mem 1TB
run llama-7b  "8 H200s dp-recompute"       "${llama7b[@]}" --cluster h200:1x8 --mesh 8 --strategy dp-recompute --mem 1TB
run llama-7b  "8 GPUs auto"                "${llama7b[@]}" --cluster h100:1x8
run llama-7b  "8 GPUs megatron 1x8"        "${llama7b[@]}" --cluster h100:1x8 --mesh 1x8 --strategy megatron
run llama-7b  "8 GPUs megatron-recompute"  "${llama7b[@]}" --cluster h100:1x8 --mesh 1x8 --strategy megatron-recompute
run llama-7b  "8 GPUs auto, no ZeRO"       "${llama7b[@]}" --cluster h100:1x8 --zero 0
# small models (the e2e tests' and the README demo's): every buffer rounded up to 256 bytes counts
tiny=(examples/ir/gpt2-tiny.cir)
ltiny=(examples/ir/llama-tiny.cir)
demo=(examples/gpt2/gpt2.c -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8)
run gpt2-demo "2 ranks auto (README demo)"  "${demo[@]}" --cluster h100:1x2
run gpt2-tiny "1 rank"                      "${tiny[@]}" --cluster h100:1x1
run gpt2-tiny "2 ranks dp"                  "${tiny[@]}" --cluster h100:1x2 --mesh 2 --strategy dp
run gpt2-tiny "2 ranks dp-recompute"        "${tiny[@]}" --cluster h100:1x2 --mesh 2 --strategy dp-recompute
run gpt2-tiny "2 ranks zero2"               "${tiny[@]}" --cluster h100:1x2 --mesh 2 --strategy zero2
run gpt2-tiny "2 ranks zero3"               "${tiny[@]}" --cluster h100:1x2 --mesh 2 --strategy zero3
run gpt2-tiny "megatron 1x2, 130KB"         "${tiny[@]}" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 130KB
run gpt2-tiny "megatron 2x2, 105KB"         "${tiny[@]}" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 105KB
run gpt2-tiny "zero1 2x2, 72KB (recompute)" "${tiny[@]}" --cluster h100:1x4 --mesh 2x2 --zero 1 --mem 72KB
run gpt2-tiny "selective 2x2, 100KB"        "${tiny[@]}" --cluster h100:1x4 --mesh 2x2 --recompute selective --zero 0 --mem 100KB
run gpt2-tiny "1 rank, 2 micro-batches"     "${tiny[@]}" --cluster h100:1x1 --micro-batches 2
run llama-tiny "1 rank"                     "${ltiny[@]}" --cluster h100:1x1
run llama-tiny "megatron 2x2, 104KB"        "${ltiny[@]}" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 104KB
run llama-tiny "selective zero2 2, 100KB"   "${ltiny[@]}" --cluster h100:1x2 --mesh 2 --recompute selective --mem 100KB
run llama-tiny "2 ranks dp"                 "${ltiny[@]}" --cluster h100:1x2 --mesh 2x1 --strategy dp
# pipelines: each stage its own memory plan (the README's second table)
run gpt2-124m "8 GPUs pp 2, 8 micro"       examples/gpt2/gpt2.c --batch 32 --cluster h100:1x8 --pp 2 --micro-batches 8
run gpt2-124m "8 GPUs pp 4, 8 micro"       examples/gpt2/gpt2.c --batch 32 --cluster h100:1x8 --pp 4 --micro-batches 8

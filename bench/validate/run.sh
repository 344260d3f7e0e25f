#!/usr/bin/env bash
# bench/validate/run.sh — the cost model against measurement on this machine:
# generated CPU programs (tiny and 124M GPT-2, tiny LLaMA; 1 and 2 ranks; dp,
# ZeRO-2, tensor parallel 1x2, full and selective recompute, 2 micro-batches)
# planned for CLUSTER, each built and run on OMP_NUM_THREADS=1 ranks,
# alternating the programs round by round in one window; then the table
# (bench/validate/table.py): predicted (the planner), simulated (the program
# replayed, colossal-compile simulate) and measured seconds per step (each
# run's median step, the median over rounds; the mean beside it), their
# ratios, and whether the plans rank in the measured order.
# usage: bench/validate/run.sh [BUILD_DIR [CLUSTER [ROUNDS [STEPS]]]]
#   CLUSTER: a preset (cpu, the default) or a cluster JSON (colossal-calibrate's)
#   STEPS: timed steps of the GPT-2 124M programs; the tiny ones run
#   TINY_STEPS_X (default 40) times as many
set -euo pipefail
build=${1:-build}
cluster=${2:-cpu}
rounds=${3:-3}
steps=${4:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${VALIDATE_OUT:-$build/bench-validate}
mkdir -p "$out"
cc=$build/compiler/colossal-compile
tiny_gpt2="-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32"
tiny_llama="-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DN_KV_HEAD=2 -DFFN=128 -DVOCAB=256 -DSEQ=32"
small_gpt2="-DCTX=64"  # GPT-2 124M, 64 tokens a row: seconds per step on one core
# name | ranks | model | options
cases=(
  "gpt2-tiny-1|1|gpt2|$tiny_gpt2 --batch 8"
  "gpt2-tiny-dp-2|2|gpt2|$tiny_gpt2 --batch 8 --strategy dp"
  "gpt2-tiny-zero2-2|2|gpt2|$tiny_gpt2 --batch 8 --strategy zero2"
  "gpt2-tiny-tp-1x2|2|gpt2|$tiny_gpt2 --batch 8 --mesh 1x2 --strategy megatron"
  "gpt2-tiny-full-recompute-2|2|gpt2|$tiny_gpt2 --batch 8 --strategy dp-recompute"
  "gpt2-tiny-selective-1|1|gpt2|$tiny_gpt2 --batch 8 --recompute selective"
  "gpt2-tiny-micro2-dp-2|2|gpt2|$tiny_gpt2 --batch 8 --micro-batches 2 --strategy dp"
  "gpt2-tiny-auto-2|2|gpt2|$tiny_gpt2 --batch 8"
  "llama-tiny-1|1|llama|$tiny_llama --batch 8"
  "llama-tiny-dp-2|2|llama|$tiny_llama --batch 8 --strategy dp"
  "gpt2-124m-1|1|gpt2|$small_gpt2 --batch 2"
  "gpt2-124m-dp-2|2|gpt2|$small_gpt2 --batch 4 --strategy dp"
)
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
for c in "${cases[@]}"; do
  IFS='|' read -r name np model opts <<<"$c"
  d=$out/$name
  mesh=1x$np
  # a cluster file describes the machine; each program is planned for the
  # ranks it runs on (one node of $np ranks), as a preset gets :1x$np
  where=$cluster:$mesh
  if [ -f "$cluster" ]; then
    where=$out/cluster-1x$np.json
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["nodes"]=1; d["per_node"]=int(sys.argv[2]); json.dump(d,open(sys.argv[3]+".tmp","w"),indent=1)' \
      "$cluster" "$np" "$where" && mv "$where.tmp" "$where"
  fi
  # shellcheck disable=SC2086
  "$cc" "$root/examples/$model/$model.c" $opts --cluster "$where" \
    --emit code --target cpu -q -o "$d"
  mpicc -std=c17 -O2 -fopenmp -I"$root/include" -I"$d" -DCG_MODEL="$model" -DCG_HEADER="$model.h" \
    "$root/bench/codegen_cpu/train.c" "$d/$model.c" "$d/${model}_kernels.c" \
    "$build/runtime/libcolrt_cpu.a" -lcjson -lz -ldl -lm -lpthread -o "$d/train"
done
results=$out/results.tsv
printf "case\tranks\tround\tmeasured_s\tplan\tmean_s\n" >"$results"
for r in $(seq 1 "$rounds"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name np model opts <<<"$c"
    d=$out/$name
    # the tiny programs take ~10 ms a step: TINY_STEPS_X times the steps, so
    # that each timed run lasts long enough to stand above the scheduler's noise
    n=$steps
    [[ $name == *tiny* ]] && n=$((steps * ${TINY_STEPS_X:-40}))
    # measured: the run's median step (a step the scheduler stretched, on a
    # machine of 2 cores under 2 ranks, moves the mean, not the median); the
    # mean of the steps is kept beside it
    out_run=$(OMP_NUM_THREADS=1 timeout 600 "${mpirun[@]}" -np "$np" -x OMP_NUM_THREADS "$d/train" "$n" 1e-4 2 || true)
    mean=$(sed -n 's/.*), \([0-9.e+-]*\) s per step (mean.*/\1/p' <<<"$out_run")
    s=$(sed -n 's/^\([0-9.e+-]*\) s per step (median.*/\1/p' <<<"$out_run")
    printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$name" "$np" "$r" "${s:-nan}" "$d/$model.plan.json" "${mean:-nan}" >>"$results"
    echo "round $r $name: ${s:-failed} s per step (median; mean ${mean:-?})" >&2
  done
done
python3 "$here/table.py" "$results" --cluster "$cluster" --date "$(date -u +%Y-%m-%d)" \
  --command "bench/validate/run.sh $build $cluster $rounds $steps"

#!/usr/bin/env bash
# validate_plans.sh — the plan JSON of every example validates against
# docs/plan.schema.json: examples/ir/*.cir, examples/mlp/mlp.c, and the tiny
# configurations of examples/gpt2/gpt2.c and examples/llama/llama.c (from
# their header comments), plus the frozen inputs of the golden tests. One
# plan also carries --sweep-mem, one a binding --mem. Skips (77) without
# Python's jsonschema (scripts/install-deps.sh installs python3-jsonschema).
# usage: validate_plans.sh PATH/TO/colossal-compile SOURCE_DIR
set -u
cc=$1
src=$2
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import jsonschema" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: python3 with jsonschema not found (install python3-jsonschema: scripts/install-deps.sh)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
plan() { # plan NAME ARGS...
  local name=$1
  shift
  if ! "$cc" "$@" --emit plan --cluster h100:1x4 -o "$tmp/$name" -q; then
    echo "FAIL: colossal-compile $* --emit plan"
    fail=$((fail + 1))
  fi
}
for f in "$src"/examples/ir/*.cir; do plan "ir-$(basename "$f" .cir)" "$f"; done
plan mlp "$src/examples/mlp/mlp.c" --batch 32 --sweep-mem=3
plan mlp-dp "$src/examples/ir/mlp.cir" --strategy dp --mesh 4
plan gpt2-tiny "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 --mem 1.1MB
plan gpt2-tiny-pp2 "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 --pp 2 \
  --graph training
# the plan that --emit all writes beside generated code (timings null), with its report
if ! "$cc" "$src/examples/mlp/mlp.c" --batch 8 --cluster h100:1x2 --strategy dp --emit all -o "$tmp/mlp-code" -q ||
   [ ! -s "$tmp/mlp-code/mlp.report.md" ]; then
  echo "FAIL: --emit all (code, plan and report)"
  fail=$((fail + 1))
fi
# an interleaved pipeline's program (version 3: chunks, its devices' tables, `na`)
if ! "$cc" "$src/examples/gpt2/gpt2.c" -DN_LAYER=4 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
     --cluster h100:1x2 --pp 2 --schedule interleaved:2 --micro-batches 4 --emit all --target cpu -o "$tmp/ileave-code" -q; then
  echo "FAIL: --emit all of an interleaved pipeline"
  fail=$((fail + 1))
fi
# beside generated code, memory over the step is the static memory plan's: its
# peak is the plan's lower bound, and the report says it is planned
"$py" - "$tmp/mlp-code/mlp.plan.json" <<'PY' || fail=$((fail + 1))
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
tl = m["timeline"]
ok = tl["source"] == "planned" and tl["peak_bytes"] == m["lower_bound_bytes"] and len(tl["points"]) > 0
print("planned timeline:", "ok" if ok else "FAIL", tl["source"], tl["peak_bytes"], m["lower_bound_bytes"])
sys.exit(0 if ok else 1)
PY
grep -q "Memory over the step (planned)" "$tmp/mlp-code/mlp.report.md" || { echo "FAIL: report does not show the planned timeline"; fail=$((fail + 1)); }
# host offload chosen per group (auto) under a binding --mem, in bf16 (the master weights move too)
plan gpt2-offload "$src/examples/ir/gpt2-tiny.cir" --offload auto --mem 120KB --dtype bf16
plan gpt2-offload-optim "$src/examples/ir/gpt2-tiny.cir" --offload optim
# ZeRO-3 chunks priced and chosen (solver/chunks.c): the plan's "chunks"
plan gpt2-chunks "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
  --mesh 4 --strategy zero3 --chunk-bytes auto
plan llama-tiny "$src/examples/llama/llama.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DN_KV_HEAD=2 -DFFN=128 -DVOCAB=256 -DSEQ=16 --batch 8 --dtype bf16
"$py" - "$src/docs/plan.schema.json" "$tmp"/*/*.plan.json "$src"/tests/report/*.plan.json <<'PY' || fail=$((fail + 1))
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
bad = 0
for path in sys.argv[2:]:
    errs = sorted(v.iter_errors(json.load(open(path))), key=lambda e: list(e.path))
    for e in errs[:5]:
        print(f"FAIL: {path}: at {'/'.join(map(str, e.path)) or '(root)'}: {e.message}")
    bad += bool(errs)
print(f"schema: {len(sys.argv) - 2 - bad} of {len(sys.argv) - 2} plans valid")
sys.exit(1 if bad else 0)
PY
# the schema rejects what the report rejects: another schema_version
sed -E 's/"schema_version":[[:space:]]*2/"schema_version": 3/' "$src/tests/report/mlp.plan.json" > "$tmp/v3.json"
if "$py" -c "import json,sys,jsonschema; jsonschema.validate(json.load(open('$tmp/v3.json')), json.load(open('$src/docs/plan.schema.json')))" 2>/dev/null; then
  echo "FAIL: the schema accepts schema_version 3"
  fail=$((fail + 1))
fi
[ "$fail" -eq 0 ]

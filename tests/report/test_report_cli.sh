#!/usr/bin/env bash
# test_report_cli.sh — `colossal-compile report` as a user runs it: every
# format, the filters, --explain, the reports written beside the plan by
# --emit plan and --emit report, --sweep-mem, and the messages (exit 1) for a
# missing file, malformed JSON, another schema_version and an unknown op.
# usage: test_report_cli.sh PATH/TO/colossal-compile SOURCE_DIR
set -u
cc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
plan=$src/tests/report/gpt2-tiny.plan.json

# expect CODE NEEDLE -- ARGS...: exit code and NEEDLE in stdout+stderr.
expect() {
  local code=$1 needle=$2
  shift 3
  local out
  out=$(NO_COLOR=1 "$cc" "$@" 2>&1)
  local rc=$?
  if [ "$rc" -ne "$code" ] || [[ "$out" != *"$needle"* ]]; then
    echo "FAIL: colossal-compile $*"
    echo "  exit $rc (want $code); output (first lines):"
    echo "$out" | head -20 | sed 's/^/    /'
    echo "  wanted to find: $needle"
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
ok() { if "$@"; then pass=$((pass + 1)); else echo "FAIL: $*"; fail=$((fail + 1)); fi; }

# Formats and filters.
expect 0 "# Strategy report: gpt2" -- report "$plan"
expect 0 "## Memory sweep" -- report "$plan" --format md
expect 0 "<svg" -- report "$plan" --format html
expect 0 '"schema_version":' -- report "$plan" --format json
expect 0 "| h.0.mlp.c_fc (h.0.dense30) | dense | 2 |" -- report "$plan" --block h
# the plan in a sentence and a table of contents before the sections
expect 0 "**The plan:** Data parallel over 4 GPUs, ZeRO-3 for 9 of 15 parameter groups, full recompute in 1 of" -- report "$plan"
expect 0 "Contents: [Summary](#summary)" -- report "$plan"
expect 0 "| Plan vs best baseline |" -- report "$plan"
# Markdown for terminals: no line over 120 columns, here and for GPT-2 124M on 64 GPUs
"$cc" "$src/examples/gpt2/gpt2.c" --cluster h100:8x8 --batch 512 --sweep-mem=3 --emit plan -o "$tmp/big" -q
for md in "$tmp/big/gpt2.report.md" "$src/tests/report/gpt2-tiny.report.md" "$src/tests/report/mlp.report.md"; do
  ok awk -v f="$md" 'length($0) > 120 { print f ":" NR ": " length($0) " columns"; bad = 1 } END { exit bad }' "$md"
done
# the HTML: the sentence, the baseline among the cards, a table of contents,
# tooltips on the memory chart, and no Markdown text bars beside its charts
"$cc" report "$tmp/big/gpt2.plan.json" --format html -o "$tmp/big.html"
ok grep -q "<p class=plan><b>The plan:</b> Data parallel" "$tmp/big.html"
ok grep -q "<div class=card>vs the best baseline<b>" "$tmp/big.html"
ok grep -q "<nav class=toc>Contents: <a href='#summary'>" "$tmp/big.html"
ok grep -q "<h2 id='why-these-strategies'>" "$tmp/big.html"
ok grep -q "<rect class=hit [^>]*><title>forward h.0.attn.c_attn: " "$tmp/big.html"
ok grep -q "<title>backward h.11.mlp.c_proj: " "$tmp/big.html"
ok test "$(grep -c '####' "$tmp/big.html")" -eq 0
# a pipeline's step as priced (the stages' 1F1B tables replayed): one lane per stage, on each
# a forward and a backward per micro-batch, then the update
"$cc" "$src/examples/ir/gpt2-tiny.cir" --emit report --cluster h100:1x2 --pp 2 --micro-batches 4 -q -o "$tmp/pp"
ok grep -q "<h2 id='pipeline-timeline'>" "$tmp/pp/gpt2_tiny.report.html"
ok test "$(grep -o '<title>stage [01]: forward, micro-batch [0-3], ' "$tmp/pp/gpt2_tiny.report.html" | wc -l)" -eq 8
ok test "$(grep -o '<title>stage [01]: backward, micro-batch [0-3], ' "$tmp/pp/gpt2_tiny.report.html" | wc -l)" -eq 8
ok test "$(grep -o '<title>stage [01]: update ' "$tmp/pp/gpt2_tiny.report.html" | wc -l)" -eq 2
ok test "$(grep -c "pipeline-timeline" "$tmp/big.html")" -eq 0 # not pipelined: no timeline
# any instance of a tied op explains its group
expect 0 "belongs to group \`h.0.dense11\`" -- report "$plan" --explain h.1.dense43
expect 0 "lost on memory" -- report "$plan" --explain h.0.dense30
expect 0 '"explain"' -- report "$plan" --format json --explain h.0.dense30
"$cc" report "$plan" --op 'h.*.dense3*' -o "$tmp/f.md"
ok grep -q "| h.0.mlp.c_fc (h.0.dense30) |" "$tmp/f.md"
ok test "$(grep -c 'h.0.layer_norm9) | layer_norm' "$tmp/f.md")" -eq 0
"$cc" report "$plan" --format json --op 'logits' -o "$tmp/f.json"
ok python3 -c "import json,sys; d=json.load(open('$tmp/f.json')); sys.exit(0 if [o['name'] for o in d['ops']]==['logits'] else 1)"

# Bad inputs: a clear message, exit 1; bad flags exit 2.
expect 1 "cannot read '$tmp/missing.plan.json'" -- report "$tmp/missing.plan.json"
printf '{\n  "schema_version": 2,\n  "model": \n}\n' > "$tmp/bad.json"
expect 1 "bad.json:4:1: error: malformed JSON" -- report "$tmp/bad.json"
sed -E 's/"schema_version":[[:space:]]*2/"schema_version": 7/' "$plan" > "$tmp/v7.json"
expect 1 "schema_version 7 is not supported (this build reads version 2)" -- report "$tmp/v7.json"
expect 1 "no op 'h.0.dense300' in the plan" -- report "$plan" --explain h.0.dense300
expect 1 "hint: did you mean 'h.0.dense30'?" -- report "$plan" --explain h.0.dense300
expect 1 "no block 'layers' in the plan" -- report "$plan" --block layers
expect 2 "invalid value 'pdf' for --format" -- report "$plan" --format pdf
expect 2 "no plan file" -- report
expect 2 "unknown report option '--frobnicate'" -- report "$plan" --frobnicate

# --emit plan and --emit report write the reports beside the plan; --sweep-mem.
expect 0 "plan mlp:" -- "$src/examples/ir/mlp.cir" --emit plan --cluster h100:1x2 -o "$tmp/out"
ok test -s "$tmp/out/mlp.report.md"
ok grep -q "<svg" "$tmp/out/mlp.report.html"
expect 0 "" -- "$src/examples/ir/mlp.cir" --emit report --cluster h100:1x2 --sweep-mem=3 -o "$tmp/out2" -q
ok grep -q "| memory limit | step time |" "$tmp/out2/mlp.report.md"
ok grep -q '"memory_sweep"' "$tmp/out2/mlp.plan.json"
# a sweep point no search answered (the sweep's time limit ended it): said so, not "no plan"
python3 -c 'import json, sys
p = json.load(open(sys.argv[1])); p["memory_sweep"][0] = {"limit_bytes": p["memory_sweep"][0]["limit_bytes"], "fits": False, "unsolved": True}
json.dump(p, open(sys.argv[2], "w"), indent=2)' "$tmp/out2/mlp.plan.json" "$tmp/unsolved.plan.json"
expect 0 "" -- report "$tmp/unsolved.plan.json" --format md -o "$tmp/unsolved.md"
ok grep -q "| none found in the time limit |" "$tmp/unsolved.md"
expect 0 "" -- report "$tmp/unsolved.plan.json" --format html -o "$tmp/unsolved.html"
ok grep -q "no plan found within the time limit" "$tmp/unsolved.html"
expect 2 "invalid value '0' for --sweep-mem" -- "$src/examples/ir/mlp.cir" --sweep-mem=0

echo "report cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

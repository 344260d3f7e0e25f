#!/usr/bin/env bash
# test_cli.sh — colossal-compile as a user runs it: help and version, every
# exit code, IR round trip through files and stdout, the summary, and the
# messages for bad flags and bad files.
# usage: test_cli.sh PATH/TO/colossal-compile SOURCE_DIR
set -u
cc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE NEEDLE -- ARGS...: runs the compiler, checks the exit code and
# that NEEDLE occurs in stdout+stderr (NEEDLE may be empty).
expect() {
  local code=$1 needle=$2
  shift 3
  local out
  out=$(NO_COLOR=1 "$cc" "$@" 2>&1)
  local rc=$?
  if [ "$rc" -ne "$code" ] || [[ "$out" != *"$needle"* ]]; then
    echo "FAIL: colossal-compile $*"
    echo "  exit $rc (want $code); output:"
    echo "$out" | sed 's/^/    /'
    echo "  wanted to find: $needle"
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}

expect 0 "usage: colossal-compile" -- --help
expect 0 "colossal-compile 0." -- --version
expect 2 "no input file" --
expect 2 "unknown option '--frobnicate'" -- --frobnicate x.cir
expect 2 "option '--batch' needs a value" -- x.cir --batch
expect 2 "invalid value 'zero' for --batch" -- --batch zero x.cir
expect 2 "invalid value '-3' for --batch" -- --batch -3 x.cir
expect 2 "invalid mesh '8x'" -- --mesh 8x x.cir
expect 2 "invalid mesh '2x2x2x2'" -- --mesh 2x2x2x2 x.cir
expect 2 "invalid memory size '80 gigs'" -- --mem "80 gigs" x.cir
expect 2 "choose one of: summary ir plan code report all" -- --emit everything x.cir
expect 2 "invalid value 'fp8' for --dtype" -- --dtype fp8 x.cir
expect 2 "invalid value 'some' for --recompute" -- --recompute some x.cir
expect 2 "invalid value '4' for --zero" -- --zero 4 x.cir
expect 2 "invalid value 'host' for --offload" -- --offload host x.cir
expect 2 "invalid value '0' for --offload-inflight" -- --offload-inflight 0 x.cir
expect 2 "invalid value '65' for --offload-inflight" -- --offload-inflight 65 x.cir
expect 2 "invalid value '0' for --chunk-bytes" -- --chunk-bytes 0 x.cir
expect 2 "invalid value '2GiB' for --chunk-bytes" -- --chunk-bytes 2GiB x.cir
expect 2 "invalid value 'lots' for --chunk-bytes" -- --chunk-bytes lots x.cir
expect 2 "invalid value 'tpu' for --target" -- --target tpu x.cir
expect 2 "invalid value '-1' for --time-limit" -- --time-limit -1 x.cir
expect 2 "unexpected argument 'b.cir'" -- a.cir b.cir
expect 2 "--trust-coef does not apply to --optimizer lamb (it applies to lars)" -- --optimizer lamb --trust-coef 0.01 x.cir
expect 2 "--no-trust does not apply to --optimizer adamw" -- --no-trust '*.bias' x.cir
expect 2 "--betas does not apply to --optimizer sgd" -- --optimizer sgd --betas 0.9,0.99 x.cir
expect 2 "invalid value '0.9' for --betas" -- --optimizer lamb --betas 0.9 x.cir
expect 2 "invalid value '1.5' for --momentum" -- --optimizer lars --momentum 1.5 x.cir
expect 2 "invalid value 'adam' for --optimizer" -- --optimizer adam x.cir
# the large-batch optimizers' settings reach the training graph
expect 0 "lars(%fc1.weight, %fc1.weight.grad, %fc1.weight.momentum, %lr, %grad_coef, %fc1.weight.trust_sq) {momentum=0.8, wd=0.0, trust=0.02}" \
  -- "$src/examples/ir/mlp.cir" --graph training --emit ir -o - --optimizer lars --momentum 0.8 --trust-coef 0.02 --weight-decay 0 --no-trust '*.bias'
expect 0 "lamb(%fc1.bias, %fc1.bias.grad, %fc1.bias.adam_m, %fc1.bias.adam_v, %lr, %step, %grad_coef) {beta1=0.8, beta2=0.99, eps=1e-07, wd=0.0}" \
  -- "$src/examples/ir/mlp.cir" --graph training --emit ir -o - --optimizer lamb --betas 0.8,0.99 --eps 1e-7 --no-decay '*.bias' --no-trust '*.bias'
expect 1 "cannot read 'missing.cir'" -- missing.cir
expect 1 "unknown input kind" -- "$src/README.md"

# The summary of the examples.
expect 0 "parameters:    19,210 (76.8 KB in f32)" -- "$src/examples/ir/mlp.cir"
expect 0 "parameters:    53,561,088 (214.2 MB in f32)" -- "$src/examples/ir/gpt2-2layer.cir"
expect 0 "blocks h x2" -- "$src/examples/ir/gpt2-2layer.cir"
# the counts say what they count: the graph, the dtype
expect 0 "model gpt2: forward graph of 42 nodes" -- "$src/examples/ir/gpt2-2layer.cir"
expect 0 "model mlp: training (forward, backward, update) graph of" -- "$src/examples/ir/mlp.cir" --graph training
expect 0 "(38.4 KB in bf16)" -- "$src/examples/ir/mlp.cir" --graph training --dtype bf16

# -o: made with its parents, checked before solving (a file is refused at once)
tiny=("$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32)
small=("${tiny[@]}" --batch 8)
expect 0 "plan gpt2:" -- "${small[@]}" --cluster h100:1x2 --emit plan -o "$tmp/new/deep/dir"
[ -f "$tmp/new/deep/dir/gpt2.report.md" ] && pass=$((pass + 1)) || { echo "FAIL: -o did not make its parents"; fail=$((fail + 1)); }
touch "$tmp/afile"
expect 1 "-o '$tmp/afile' is not a directory" -- "${small[@]}" --emit plan -o "$tmp/afile"
expect 1 "cannot create the output directory '$tmp/afile/x'" -- "${small[@]}" --emit code -o "$tmp/afile/x/y"
# --batch is the global batch: a generated program runs it in --micro-batches parts
expect 1 "--batch 10 is not a multiple of --micro-batches 4" -- "${tiny[@]}" --batch 10 --micro-batches 4 \
  --cluster h100:1x1 --emit code -o "$tmp/mb"
expect 0 "" -- "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
  --micro-batches 2 --cluster h100:1x2 --strategy dp --emit code --target cpu -o "$tmp/mb" -q
grep -q "#define gpt2_idx_ROWS 2" "$tmp/mb/gpt2.h" \
  && python3 -c "import json,sys; sys.exit(json.load(open('$tmp/mb/gpt2.plan.json'))['batch'] != 8)" \
  && pass=$((pass + 1)) || { echo "FAIL: --batch 8 --micro-batches 2 on 2 ranks: 2 rows a rank a micro-batch"; fail=$((fail + 1)); }
expect 0 "each step runs N micro-batches of batch/N" -- --help
# ZeRO chunks under a tensor-parallel plan: its ZeRO-2 gradients' reduce-scatters over one axis are
# packed (chunk.c chunk_sharded; e2e_gpt2_tp_zero2_chunk_4); ZeRO-3 there (its gathers are
# reshardings per reader) is refused, naming the parameter; over two mesh axes of the data-parallel
# lowering they are built (e2e_gpt2_zero3_chunk_2x2)
expect 0 "" -- "$src/examples/ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 \
  --zero 2 --mem 200KB --chunk-bytes 4KB --emit code --target cpu -o "$tmp/chunktp" -q
expect 1 "the plan is tensor parallel with ZeRO-3 (%fc1.weight)" -- "$src/examples/ir/mlp.cir" --cluster h100:1x4 \
  --mesh 2x2 --zero 3 --mem 200KB --chunk-bytes 4KB --emit code --target cpu -o "$tmp/chunktp3"
# (under micro-batches they are built too: cli_chunk_tp_micro)
# auto on a tensor-parallel plan: the planner prices the sizes by the lowering's members (chunks.c
# price_sharded) and packs the two mlp.c_proj.bias gradients (4 -> 3 reduce-scatters; at 107KB since
# main 98e289f's norm pricing, whose plan at 108KB has no gradient to pack)
expect 0 "" -- "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --zero 2 --mem 107KB \
  --chunk-bytes auto --emit code --target cpu -o "$tmp/chunktpauto" -q
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); c=j['lowering']['chunks']; sys.exit(0 if j['chunks']['chunk_bytes'] > 0 and c['gradient_chunks'] == 1 and j['lowering']['reduce_scatter_count'] == 3 else str(c))" \
  "$tmp/chunktpauto/gpt2_tiny.plan.json" && pass=$((pass + 1)) || { echo "FAIL: --chunk-bytes auto on a tensor-parallel plan"; fail=$((fail + 1)); }
expect 0 "" -- "$src/examples/ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero3 --chunk-bytes 4KB --emit code \
  --target cpu -o "$tmp/chunk2x2" -q
# on one axis: the lowering's chunks in the plan JSON, and fewer all-gathers than without
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB \
  --emit code --target cpu -o "$tmp/chunk" -q
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --emit code --target cpu \
  -o "$tmp/nochunk" -q
# the pass dumps its chunks, rounds and copies (--dump-after lower.chunk)
expect 0 "reduce-scatter chunk" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 \
  --chunk-bytes 8KB --emit code --target cpu -o "$tmp/chunkdump" -q --dump-after lower.chunk
expect 0 "copy %h.0.ln_1.weight out of wpe.weight.chunk -> h.0.ln_1.weight.gathered" -- "$src/examples/ir/gpt2-tiny.cir" \
  --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB --emit code --target cpu -o "$tmp/chunkdump" -q \
  --dump-after lower.chunk
# the tied embedding's gradient is finished last and read where it is scattered: it joins no
# chunk of gradients, so it is gathered alone too (one layout for a chunk's parameters and
# gradients, placement_chunk_layout), and each gradient chunk says whose layout it has
expect 0 "all-gather %wte.weight -> wte.weight.gathered" -- "$src/examples/ir/gpt2-tiny.cir" \
  --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB --emit code --target cpu -o "$tmp/chunkdump" -q \
  --dump-after lower.chunk
expect 0 "-> wpe.weight.grad.rs_chunk.part, chunk 0's layout %wpe.weight.grad@0 %h.0.ln_1.weight.grad@128" -- \
  "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB --emit code \
  --target cpu -o "$tmp/chunkdump" -q --dump-after lower.chunk
python3 - "$tmp/chunk/gpt2_tiny.plan.json" "$tmp/nochunk/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: lowering.chunks"; fail=$((fail + 1)); }
import json, sys
c, n = (json.load(open(f))["lowering"] for f in sys.argv[1:])
ch = c["chunks"]
assert ch["chunk_bytes"] == 8000 and ch["count"] >= 2 and ch["parameters"] > ch["count"], ch
assert ch["largest_part_bytes"] <= 8000 and ch["largest_gathered_bytes"] == 2 * ch["largest_part_bytes"], ch
assert "chunks" not in n and c["all_gather_count"] < n["all_gather_count"], (c, n)
PY
# --chunk-bytes auto: the planner prices the sizes (chunks.c) and takes the fastest that fits: with the
# memory to spare a chunk (the lowering builds as many as it priced); under a limit the chunk's
# memory would pass, none (one collective per tensor)
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes auto \
  --emit code --target cpu -o "$tmp/chunkauto" -q
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes auto \
  --mem 140KB --emit code --target cpu -o "$tmp/chunktight" -q
python3 - "$tmp/chunkauto/gpt2_tiny.plan.json" "$tmp/chunktight/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: --chunk-bytes auto"; fail=$((fail + 1)); }
import json, sys
a, t = (json.load(open(f)) for f in sys.argv[1:])
ca, ct = a["chunks"], t["chunks"]
chosen = [c for c in ca["candidates"] if c["chosen"]]
assert ca["chosen_by"] == "planner" and ca["chunk_bytes"] > 0 and len(chosen) == 1, ca
assert chosen[0]["chunk_bytes"] == ca["chunk_bytes"] and chosen[0]["fits"], ca
assert a["lowering"]["chunks"]["count"] == chosen[0]["chunks"], (a["lowering"]["chunks"], chosen)
assert a["lowering"]["chunks"]["gradient_chunks"] == chosen[0]["gradient_chunks"], (a["lowering"]["chunks"], chosen)
none = ca["candidates"][0]
assert none["chunk_bytes"] == 0 and chosen[0]["collective_s"] + chosen[0]["copy_s"] < none["collective_s"], ca
assert ct["chunk_bytes"] == 0 and "chunks" not in t["lowering"], ct
assert not any(c["fits"] for c in ct["candidates"][1:]), ct
PY
# a forced --chunk-bytes and a tight --mem: the chunks' buffers are on the predicted peak (chunks.c), so a
# size that does not fit beside the plan is refused naming its bytes (the ILP planned again with them held
# back first); one that fits has its arena within the limit and the predicted peak at least 0.97 of it
expect 1 "the chunks of --chunk-bytes 8000 add" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 \
  --strategy zero3 --chunk-bytes 8KB --mem 100KB --emit code --target cpu -o "$tmp/chunkmem" -q
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB \
  --mem 140KB --emit code --target cpu -o "$tmp/chunkmem" -q
# the mixed offload plan: planned with the chunks' bytes held back, it offloads more and fits 60KB
expect 0 "" -- "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 4 --strategy zero3 --dtype bf16 \
  --offload auto --mem 60KB --offload-inflight 3 --chunk-bytes 2KB --emit code --target cpu -o "$tmp/chunkmix" -q
python3 - "$tmp/chunkmem/gpt2_tiny.plan.json" "$tmp/chunkmix/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: chunks' memory"; fail=$((fail + 1)); }
import json, sys
# (the mixed plan read 1.032 while the model counted every instance's stagings at the first block
# instance's backward, whose own are all that is live there: 1.022 since)
for f, limit, tol in zip(sys.argv[1:], (140000, 60000), (1.03, 1.03)):
    j = json.load(open(f))
    m, c = j["memory"], [c for c in j["chunks"]["candidates"] if c["chosen"]][0]
    # the planner's limit: the user's, or a tighter one if the first program came out over it
    assert m["planned_arena_bytes"] <= limit and m["limit_bytes"] <= limit, (f, m)
    assert c["extra_bytes"] > 0 and c["fits"] and m["predicted_peak_bytes"] <= limit, (f, c, m)
    assert m["planned_arena_bytes"] / m["predicted_peak_bytes"] <= tol, (f, m)
PY
# chunks under pipelines (docs/sharding.md "Chunks"): each stage packs its own (the e2e
# gpt2_pp_2_*_chunk_2 programs run them) and the planner prices each size as the pipeline it makes
# (chunks.c plan_price_pipe_chunks): auto takes the fastest step that fits, and the program's chunks
# are the ones priced (one layout: placement_chunk_layout with each member's stage)
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero3 --micro-batches 4 \
  --chunk-bytes auto --emit code --target cpu -q -o "$tmp/chunkpp"
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero3 --micro-batches 4 \
  --chunk-bytes 8KB --emit code --target cpu -q -o "$tmp/chunkpp8"
python3 - "$tmp/chunkpp/gpt2_tiny.plan.json" "$tmp/chunkpp8/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: chunks priced per pipeline stage"; fail=$((fail + 1)); }
import json, sys
a, f = (json.load(open(x)) for x in sys.argv[1:])
ca = a["chunks"]
chosen = [c for c in ca["candidates"] if c["chosen"]]
assert ca["chosen_by"] == "planner" and len(chosen) == 1 and chosen[0]["fits"], ca
fastest = min((c for c in ca["candidates"] if c["fits"]), key=lambda c: c["step_time_s"])
assert chosen[0]["step_time_s"] == fastest["step_time_s"], ca
assert abs(a["step_time_s"] - chosen[0]["step_time_s"]) <= 1e-12 * a["step_time_s"], (a["step_time_s"], chosen)
if ca["chunk_bytes"] > 0:
    assert a["lowering"]["chunks"]["count"] == chosen[0]["chunks"], (a["lowering"]["chunks"], chosen)
    assert a["lowering"]["chunks"]["gradient_chunks"] == chosen[0]["gradient_chunks"], (a["lowering"]["chunks"], chosen)
# the forced size: priced as asked, the program built with the chunks priced, its step the priced one
cf = f["chunks"]
c8 = [c for c in cf["candidates"] if c["chosen"]]
none = cf["candidates"][0]
assert cf["chosen_by"] == "--chunk-bytes" and cf["chunk_bytes"] == 8000 and c8[0]["chunk_bytes"] == 8000, cf
assert none["chunk_bytes"] == 0 and c8[0]["collectives"] < none["collectives"], cf
assert f["lowering"]["chunks"]["count"] == c8[0]["chunks"] > 0, (f["lowering"]["chunks"], c8)
assert f["lowering"]["chunks"]["gradient_chunks"] == c8[0]["gradient_chunks"], (f["lowering"]["chunks"], c8)
assert abs(f["step_time_s"] - c8[0]["step_time_s"]) <= 1e-12 * f["step_time_s"], (f["step_time_s"], c8)
assert any(s["memory"].get("chunk_buffers_bytes", 0) > 0 for s in f["pipeline"]["stages"]), f["pipeline"]["stages"]
PY
# no plan fits with the micro-batches given: the micro-batches that would, named first
expect 1 "hint: --micro-batches 2 should fit" -- "$src/examples/gpt2/gpt2.c" --batch 64 --cluster h100:1x1 --mem 30GB \
  --recompute none --zero 3 --micro-batches 1 --emit plan -o "$tmp/nofit"
# --micro-batches not given: the planner chooses them (the same model fits in 2), says so and
# writes the count; where no count fits (batch/8 rows still too many) it names another knob
expect 0 "(mesh 1, f32, 2 micro-batches)" -- "$src/examples/gpt2/gpt2.c" --batch 64 --cluster h100:1x1 --mem 30GB \
  --recompute none --zero 3 --emit plan -o "$tmp/mbauto"
python3 -c "import json,sys; d=json.load(open('$tmp/mbauto/gpt2.plan.json')); sys.exit(d['micro_batches'] != 2 or d['batch'] != 64)" \
  && pass=$((pass + 1)) || { echo "FAIL: the planner's micro-batch count is not in plan.json"; fail=$((fail + 1)); }
expect 1 "hint: allow recompute (--recompute auto), or use a smaller --batch" -- "${tiny[@]}" --batch 8 \
  --cluster h100:1x1 --mem 2MB --recompute none --emit plan -o "$tmp/mbnofit"
# generated code is built for the count chosen: 4 micro-batches of 2 rows at 3 MB, none at 4 GB
expect 0 "the planner chose 4 micro-batches" -- "${tiny[@]}" --batch 8 --cluster h100:1x1 --mem 3MB --recompute none \
  --emit code --target cpu -o "$tmp/mbcode"
grep -q "#define gpt2_idx_ROWS 2" "$tmp/mbcode/gpt2.h" \
  && python3 -c "import json,sys; d=json.load(open('$tmp/mbcode/gpt2.plan.json')); sys.exit(d['micro_batches'] != 4 or d['batch'] != 8)" \
  && pass=$((pass + 1)) || { echo "FAIL: the code for the planner's 4 micro-batches"; fail=$((fail + 1)); }
"$cc" "${tiny[@]}" --batch 8 --cluster h100:1x1 --emit code --target cpu -o "$tmp/mbcode1" -q \
  && grep -q "#define gpt2_idx_ROWS 8" "$tmp/mbcode1/gpt2.h" \
  && pass=$((pass + 1)) || { echo "FAIL: no memory pressure: one micro-batch"; fail=$((fail + 1)); }
# pipelines (--pp): bad input is a user error naming the numbers, with a hint
ptiny=("$src/examples/ir/gpt2-tiny.cir" --emit code --target cpu -o "$tmp/pp")
expect 2 "invalid value '0' for --pp" -- --pp 0 x.cir
expect 1 "--pp 3 exceeds the 2 instances of block 'h': every stage needs at least one" -- "${ptiny[@]}" --cluster h100:1x3 --pp 3
expect 1 "hint: give --pp 2 or fewer" -- "${ptiny[@]}" --cluster h100:1x3 --pp 3
expect 1 "--pp 4 does not divide the cluster: 1 node of 6 devices (6 devices)" -- "${ptiny[@]}" --cluster h100:1x6 --pp 4
# more than 32 stages (PLACE_MAX_STAGES 128, docs/pipeline.md): a 36-block GPT-2 planned in 33
# stages on 33 nodes and its program generated, the tied wte's leaf on stages 0 and 32 (bit 32
# of the generated table's two 64-bit words; e2e_gpt2_pp_34 runs such a program), and
# 129 stages are refused naming the limit
pp33=("$src/examples/gpt2/gpt2.c" -DN_LAYER=36 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 33 --cluster h100:33x1
  --pp 33 --micro-batches 33)
expect 0 "" -- "${pp33[@]}" --emit plan -o "$tmp/pp33"
python3 -c "import json,sys; p=json.load(open('$tmp/pp33/gpt2.plan.json'))['pipeline']; sys.exit(len(p['stages']) != 33 or not p['step_time_s'] > 0 or p['stages'][32]['instances'] < 1)" \
  && pass=$((pass + 1)) || { echo "FAIL: a plan of 33 pipeline stages"; fail=$((fail + 1)); }
expect 0 "" -- "${pp33[@]}" --emit code --target cpu -q -o "$tmp/pp33c"
grep -qF "gpt2_leaf_stages[][2] = {{0x100000001ull, 0x0ull}" "$tmp/pp33c/gpt2.c" \
  && pass=$((pass + 1)) || { echo "FAIL: the 33-stage program's wte on stages 0 and 32"; fail=$((fail + 1)); }
expect 1 "--pp 129: at most 128 pipeline stages" -- "$src/examples/gpt2/gpt2.c" -DN_LAYER=130 -DN_EMBD=64 -DN_HEAD=4 \
  -DVOCAB=256 -DCTX=32 --batch 129 --cluster h100:129x1 --pp 129 --micro-batches 129 --emit plan -o "$tmp/pp129"
# a model's name prefixes the generated files and identifiers (IR_MAX_GRAPH_NAME 128): a pipelined
# program of a 128-character name writes it whole in the stage tables (they were cut at 96 and
# 256 bytes) and compiles; 129 characters are refused at the name, in IR text and in C
long=$(printf 'm%.0s' $(seq 128))
sed "s/^graph gpt2_tiny\$/graph $long/" "$src/examples/ir/gpt2-tiny.cir" > "$tmp/long.cir"
expect 0 "" -- "$tmp/long.cir" --emit code --target cpu -q --cluster h100:1x2 --pp 2 -o "$tmp/long"
grep -qF "(${long}_leaf_held[i][M->stage >> 6] >> (M->stage & 63) & 1u)) " "$tmp/long/$long.c" \
  && grep -qF "colrt_arena_create(${long}_stage_arena_bytes[M->stage])" "$tmp/long/$long.c" \
  && cc -std=c17 -Wall -Wextra -Werror -fsyntax-only -I"$src/include" "$tmp/long/$long.c" \
  && pass=$((pass + 1)) || { echo "FAIL: a pipelined program of a 128-character model name"; fail=$((fail + 1)); }
sed "s/^graph gpt2_tiny\$/graph ${long}x/" "$src/examples/ir/gpt2-tiny.cir" > "$tmp/long129.cir"
expect 1 "long129.cir:2:7: error: the graph's name is 129 characters; at most 128" -- "$tmp/long129.cir" --emit plan -o "$tmp/long129"
printf '#include <colossal/model.h>\nMODEL(%sx) {\n    tensor w = param_ones("w", 4);\n    return reduce_sum(w, 0, 0);\n}\n' "$long" > "$tmp/long129.c"
expect 1 "the model's name is 129 characters; at most 128" -- "$tmp/long129.c" --emit plan -o "$tmp/long129"
# the stages are outermost in the rank order: whole nodes, or an equal part of one node (2 of 3 nodes: neither)
expect 1 "--pp 2 does not divide the cluster: 3 nodes of 2 devices (6 devices); each stage needs an equal submesh (whole nodes, or an equal part of one node)" \
  -- "${ptiny[@]}" --cluster h100:3x2 --pp 2
expect 1 "hint: give a --pp that divides the nodes, or a multiple of the nodes that divides the devices" -- "${ptiny[@]}" \
  --cluster h100:3x2 --pp 2
expect 1 "--pp 2 with 1 micro-batch: the 1F1B schedule needs at least as many micro-batches as stages" -- "${ptiny[@]}" \
  --cluster h100:1x2 --pp 2 --micro-batches 1
expect 1 "hint: give --micro-batches 2 or more" -- "${ptiny[@]}" --cluster h100:1x2 --pp 2 --micro-batches 1
expect 1 "--batch 1 is not a multiple of --micro-batches 2" -- "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 \
  -DVOCAB=256 -DCTX=32 --batch 1 --pp 2 --cluster h100:1x2 --emit code -o "$tmp/pp"
expect 1 "pipeline stages with LAMB or LARS (trust-ratio norms) are not supported yet" -- "${ptiny[@]}" --cluster h100:1x4 \
  --pp 2 --mesh 2 --optimizer lamb
expect 1 "hint: pipeline stages run with AdamW or SGD for now (not LAMB or LARS)" -- "${ptiny[@]}" --cluster h100:1x4 \
  --pp 2 --mesh 2 --optimizer lamb
expect 0 "" -- "${ptiny[@]}" --cluster h100:1x4 --pp 2 -q
grep -q "#define gpt2_tiny_PIPELINE_STAGES 2" "$tmp/pp/gpt2_tiny.h" && grep -q "#define gpt2_tiny_MICRO_BATCHES 2" "$tmp/pp/gpt2_tiny.h" \
  && pass=$((pass + 1)) || { echo "FAIL: --pp 2: two stages, two micro-batches by default"; fail=$((fail + 1)); }
# the stage boundaries by cost: GPT-2 (6 blocks, 124M's widths) in 4 stages moves blocks off the
# first and last stages (the embedding, the head) from the nearly equal 2,2,1,1, faster than those;
# --pp-blocks gives them instead, and a count or sum that does not match is a user error
# (with the forward run again: kept activations make the equal ranges the best single moves reach)
expect 0 "" -- "$src/examples/gpt2/gpt2.c" -DN_LAYER=6 --batch 8 --cluster h100-sxm:1x8 --dtype bf16 --pp 4 \
  --micro-batches 8 --pp-activations rerun --emit plan -q -o "$tmp/pprb"
python3 - "$tmp/pprb/gpt2.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: stage boundaries by cost"; fail=$((fail + 1)); }
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
inst = [s["instances"] for s in p["stages"]]
assert sum(inst) == 6 and inst != [2, 2, 1, 1], inst
assert p["step_time_s"] < p["equal_ranges_step_time_s"], p
PY
expect 1 "--pp-blocks gives the stages 3 block instances, but the repeated block has 4" -- \
  "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 --pp-blocks 1,2 -o "$tmp/ppbl"
expect 1 "hint: give --pp-blocks 2 counts (one per stage) that sum to 4, e.g. 2,2" -- \
  "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 --pp-blocks 1,2 -o "$tmp/ppbl"
expect 1 "--pp-blocks lists 2 stages but --pp is auto" -- "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 \
  --pp auto --pp-blocks 1,3 -o "$tmp/ppbl"
expect 2 "invalid value '0,4' for --pp-blocks" -- --pp-blocks 0,4 x.cir
# --schedule: interleaved 1F1B's model chunks must divide the block, its micro-batches be a multiple
# of the stages; auto prices 1F1B and every chunk count and keeps the faster
p4=("$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 --pp 2)
expect 2 "invalid value 'interleaved:1' for --schedule" -- --schedule interleaved:1 x.cir
expect 2 "invalid value 'zb' for --schedule" -- --schedule zb x.cir
expect 1 "--schedule interleaved:3 on --pp 2: the 4 instances of block 'h' do not divide into 2 x 3 = 6 equal model chunks" \
  -- "${p4[@]}" --micro-batches 4 --schedule interleaved:3 -o "$tmp/il"
expect 1 "hint: give a chunk count v with 2 x v dividing 4 (interleaved:2), or --schedule 1f1b" \
  -- "${p4[@]}" --micro-batches 4 --schedule interleaved:3 -o "$tmp/il"
expect 1 "--schedule interleaved:2 on --pp 2 with 3 micro-batches: the interleaved schedule runs the micro-batches in groups of the 2 stages" \
  -- "${p4[@]}" --micro-batches 3 --schedule interleaved:2 -o "$tmp/il"
expect 1 "hint: give --micro-batches 4 (or another multiple of 2 that divides the batch), or --schedule 1f1b" \
  -- "${p4[@]}" --micro-batches 3 --schedule interleaved:2 -o "$tmp/il"
expect 1 "--schedule interleaved:2 interleaves the model chunks of a pipeline's stages, but there is no pipeline (--pp 1)" \
  -- "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 --schedule interleaved:2 -o "$tmp/il"
expect 1 "give --pp-blocks with --schedule 1f1b" -- "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x2 \
  --pp-blocks 1,3 --micro-batches 4 --schedule interleaved:2 -o "$tmp/il"
expect 0 "" -- "${p4[@]}" --micro-batches 4 --schedule auto -q -o "$tmp/ila"
python3 - "$tmp/ila/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: --schedule auto: 1f1b and interleaved:2 priced, the faster kept"; fail=$((fail + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
pp = d["pipeline"]
t = {(e["schedule"], e["chunks"]): e for e in pp["schedules_tried"]}
assert sorted(t) == [("1f1b", 1), ("interleaved", 2)], t
best = min(t.values(), key=lambda e: e["step_time_s"])
assert (pp["schedule"], pp["chunks"]) == (best["schedule"], best["chunks"]), (pp["schedule"], pp["chunks"], best)
assert abs(d["step_time_s"] - best["step_time_s"]) <= 1e-12 * best["step_time_s"], d["step_time_s"]
PY
expect 0 "4 stages: --schedule interleaved:2: the 4 block instances do not make 4 x 2 model chunks" -- \
  "$src/tests/e2e/gpt2_tiny_4.cir" --emit plan --cluster h100:1x4 --pp auto --micro-batches 4 --schedule interleaved:2 -o "$tmp/ilpa"
expect 0 "" -- "${p4[@]}" --micro-batches 4 --schedule interleaved:2 -q -o "$tmp/ili"
python3 - "$tmp/ili/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: --schedule interleaved:2 in the plan JSON"; fail=$((fail + 1)); }
import json, sys
pp = json.load(open(sys.argv[1]))["pipeline"]
assert pp["schedule"] == "interleaved" and pp["chunks"] == 2, pp["schedule"]
assert abs(pp["bubble_fraction"] - 1 / 9) < 1e-12, pp["bubble_fraction"]   # (p - 1) / (v m + p - 1)
s0 = pp["stages"][0]
assert [(c["virtual_stage"], c["first_instance"], c["instances"]) for c in s0["model_chunks"]] == [(0, 0, 1), (2, 2, 1)], s0
assert any(a["do"] == "transfer" and len(a["sends"]) == 2 for a in s0["actions"])
PY
# a pipeline's stages sum their gradients in buckets under 1F1B, not under interleaving, whose
# memory plan would share a bucket with a later chunk's backward (compiler/lower/lower.c pipe_buckets)
for sch in 1f1b interleaved:2; do
  expect 0 "" -- "$src/tests/e2e/gpt2_tiny_4.cir" --emit code --target cpu --cluster h100:1x4 --pp 2 --mesh 2 --strategy dp \
    --micro-batches 4 --schedule $sch -q -o "$tmp/ppb-$sch"
done
python3 - "$tmp/ppb-1f1b/gpt2_tiny.plan.json" "$tmp/ppb-interleaved:2/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: pipeline buckets: 1F1B's, not interleaved"; fail=$((fail + 1)); }
import json, sys
one, il = (json.load(open(f))["lowering"]["gradient_buckets"] for f in sys.argv[1:])
assert one >= 2 and il == 0, (one, il)   # each stage's own and the tied wte's
PY
# --pp auto: every stage count the cluster can run is priced; the fastest is kept, the others say why
expect 2 "invalid value 'two' for --pp" -- --pp two x.cir
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --emit plan --cluster h100:1x4 --pp auto --micro-batches 2 -q -o "$tmp/ppa"
python3 - "$tmp/ppa/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: --pp auto: counts 1, 2 planned, 4 needs micro-batches, the fastest chosen"; fail=$((fail + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
pp = d["pipeline"]
c = {e["stages"]: e for e in pp["stage_counts"]}
assert sorted(c) == [1, 2], c                  # 4 stages exceed the 2 blocks: not a count this model can run
assert c[1]["planned"] and c[2]["planned"], c
best = min(c.values(), key=lambda e: e["step_time_s"])
assert len(pp["stages"]) == best["stages"], (len(pp["stages"]), best)
assert abs(d["step_time_s"] - best["step_time_s"]) <= 1e-12 * best["step_time_s"], d["step_time_s"]
PY
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --emit report --cluster h100:1x2 --pp auto --micro-batches 1 -q -o "$tmp/ppb"
grep -q "| 2 | | | | | needs at least 2 micro-batches (--micro-batches 1) |" "$tmp/ppb/gpt2_tiny.report.md" \
  && pass=$((pass + 1)) || { echo "FAIL: --pp auto with one micro-batch: 2 stages need 2"; fail=$((fail + 1)); }
# without --micro-batches each count runs its own: one for the unpipelined plan (no memory pressure),
# at least its stages for a pipeline
expect 0 "" -- "$src/examples/ir/gpt2-tiny.cir" --emit plan --cluster h100:1x2 --pp auto -q -o "$tmp/ppm"
python3 - "$tmp/ppm/gpt2_tiny.plan.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: --pp auto chooses each count's micro-batches"; fail=$((fail + 1)); }
import json, sys
pp = json.load(open(sys.argv[1]))["pipeline"]
c = {e["stages"]: e for e in pp["stage_counts"]}
assert pp["micro_batches_chosen_by"] == "planner", pp
assert c[1]["planned"] and c[1]["micro_batches"] == 1, c
assert c[2]["planned"] and c[2]["micro_batches"] == 2, c   # the batch of 2 rows: 2 is the only count of 2 or more
PY

# IR to a file, then byte-identical with the example; -o - goes to stdout.
for ex in mlp gpt2-2layer; do
  "$cc" -q "$src/examples/ir/$ex.cir" --emit ir -o "$tmp/$ex.cir"
  if cmp -s "$tmp/$ex.cir" "$src/examples/ir/$ex.cir"; then pass=$((pass + 1)); else echo "FAIL: $ex round trip"; fail=$((fail + 1)); fi
  "$cc" "$src/examples/ir/$ex.cir" --emit ir -o - 2>/dev/null > "$tmp/$ex.stdout.cir"
  if cmp -s "$tmp/$ex.stdout.cir" "$src/examples/ir/$ex.cir"; then pass=$((pass + 1)); else echo "FAIL: $ex to stdout"; fail=$((fail + 1)); fi
done
expect 1 "cannot write '$tmp/no/such/dir/x.cir'" -- "$src/examples/ir/mlp.cir" --emit ir -o "$tmp/no/such/dir/x.cir"

# A bad file: location, caret, hint; exit 1.
printf 'graph t\ninput %%x : f32[4,8]\n%%y : f32[4,8] = relux(%%x)\n' > "$tmp/bad.cir"
expect 1 "bad.cir:3:17: error: unknown op 'relux'" -- "$tmp/bad.cir"
expect 1 "hint: did you mean 'relu'?" -- "$tmp/bad.cir"
# --dump-after prints the IR after a stage.
expect 0 "; ---- IR after load ----" -- "$src/examples/ir/mlp.cir" --dump-after load --verify-each


# Hostile inputs (issue 17): each refused with a message, never a hang or a crash.
expect 2 "invalid value 'bogus' for --dump-after" -- "$src/examples/ir/mlp.cir" --dump-after bogus
expect 2 "lower.recompute" -- "$src/examples/ir/mlp.cir" --dump-after lower.bogus
expect 0 "; ---- program after lower.split ----" -- "$src/examples/ir/mlp.cir" --emit code --target cpu --cluster h100:1x1 -o "$tmp/dump-split" -q --dump-after lower.split
expect 2 "invalid value '3e6' for --time-limit" -- --time-limit 3e6 "$src/examples/ir/mlp.cir"
# --time-limit bounds the whole planning, construction included: a 2x2x2
# mesh's problem takes far more than a millisecond to build (about 0.3 s)
expect 1 "planning stopped at --time-limit 0.001 s while building the problem for mesh 2x2x2" -- \
  "$src/examples/ir/gpt2-tiny.cir" --emit plan --cluster h100:1x8 --mesh 2x2x2 --time-limit 0.001 -o "$tmp/tl"
expect 1 "hint: raise --time-limit" -- \
  "$src/examples/ir/gpt2-tiny.cir" --emit plan --cluster h100:1x8 --mesh 2x2x2 --time-limit 0.001 -o "$tmp/tl"
expect 1 "unknown cluster preset 'nope'" -- --cluster nope:1x2 "$src/examples/ir/mlp.cir"
expect 1 "invalid cluster shape '2000000x1024'" -- --cluster h100:2000000x1024 "$src/examples/ir/mlp.cir"
mkdir -p "$tmp/adir.cir" "$tmp/cdir.json"
expect 1 "cannot read '$tmp/adir.cir': Is a directory" -- "$tmp/adir.cir"
expect 1 "cannot read cluster file '$tmp/cdir.json': Is a directory" -- --cluster "$tmp/cdir.json" "$src/examples/ir/mlp.cir"
# the host's transfers in flight (docs/sharding.md "Host offload"): a bad value is refused by name
sed 's/"adamw_gelems": 2.7}/"adamw_gelems": 2.7, "transfers_in_flight": 0}/' \
  "$src/tests/fuzz/seeds/cluster/h100_2x8_host.json" > "$tmp/k0.json"
expect 1 "field 'host.transfers_in_flight' must be a whole number from 1 to 64, got 0" -- \
  --cluster "$tmp/k0.json" "$src/examples/ir/mlp.cir"
sed 's/"adamw_gelems": 2.7}/"adamw_gelems": 2.7, "transfers_in_flight": "two"}/' \
  "$src/tests/fuzz/seeds/cluster/h100_2x8_host.json" > "$tmp/ks.json"
expect 1 "field 'host.transfers_in_flight' must be a whole number from 1 to 64" -- \
  --cluster "$tmp/ks.json" "$src/examples/ir/mlp.cir"
# and its per-call costs (host.copy_latency_us, host.call_latency_us): negative or not a number, by name
sed 's/"copy_latency_us": 6/"copy_latency_us": -1/' \
  "$src/tests/fuzz/seeds/cluster/h100_2x8_host_latency.json" > "$tmp/lat.json"
expect 1 "field 'host.copy_latency_us' must be a finite number of microseconds from 0 to 1e+06, got -1" -- \
  --cluster "$tmp/lat.json" "$src/examples/ir/mlp.cir"
sed 's/"call_latency_us": 0/"call_latency_us": "fast"/' \
  "$src/tests/fuzz/seeds/cluster/h100_2x8_host_latency.json" > "$tmp/lat2.json"
expect 1 "field 'host.call_latency_us' must be a number of microseconds" -- \
  --cluster "$tmp/lat2.json" "$src/examples/ir/mlp.cir"
mkfifo "$tmp/fifo.cir"
expect 1 "not a regular file" -- "$tmp/fifo.cir" # would block forever if it were opened for reading
printf 'graph t\ninput %%x : f32[4,8]\n%%y : f32[4,8] = scale(%%x) {s=1e999}\n' > "$tmp/inf.cir"
expect 1 "number '1e999' is not finite" -- "$tmp/inf.cir"
printf 'graph t\ninput %%x : f32[1073741824,1073741824,1073741824]\n' > "$tmp/huge.cir"
expect 1 "has more than 2^48 elements" -- "$tmp/huge.cir"
# A causal attention over a huge context is priced in closed form (it used to loop over the context).
expect 0 "forward FLOPs" -- "$src/examples/gpt2/gpt2.c" -DCTX=100000000 -DN_LAYER=1 -DVOCAB=256 -DN_EMBD=64 -DN_HEAD=4 --batch 1

# A --strategy name fixes what it names; --zero and --recompute set the rest
# (megatron used to ignore both), and a name they contradict is refused.
tiny=("$src/examples/ir/gpt2-tiny.cir" --cluster h100:1x4 --emit plan -q)
expect 1 "--strategy zero2 is ZeRO stage 2; --zero 1 contradicts it" -- "${tiny[@]}" --strategy zero2 --zero 1 -o "$tmp/sz"
expect 1 "--strategy dp is ZeRO stage 0; --zero 3 contradicts it" -- "${tiny[@]}" --strategy dp --zero 3 -o "$tmp/sz"
expect 1 "--strategy dp-recompute recomputes every block; --recompute selective contradicts it" -- "${tiny[@]}" --strategy dp-recompute --recompute selective -o "$tmp/sz"
for v in "0 none" "1 selective"; do
  set -- $v
  expect 0 "" -- "${tiny[@]}" --mesh 2x2 --strategy megatron --zero "$1" --recompute "$2" -o "$tmp/mz$1"
done
if python3 - "$tmp/mz0/gpt2_tiny.plan.json" "$tmp/mz1/gpt2_tiny.plan.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
stages = lambda d: {z["stage"] for z in d["zero"] if z["params"]}
assert a["chosen_by"] == b["chosen_by"] == "megatron", (a["chosen_by"], b["chosen_by"])
assert stages(a) == {0} and 1 in stages(b), (stages(a), stages(b))
assert all(k["recompute"]["none"] == k["instances"] for k in a["blocks"]), a["blocks"]
assert all(k["recompute"]["selective"] == k["instances"] for k in b["blocks"]), b["blocks"]
assert a["memory"]["predicted_peak_bytes"] > b["memory"]["predicted_peak_bytes"]
PY
then pass=$((pass + 1)); else echo "FAIL: --strategy megatron did not take --zero 1 --recompute selective"; fail=$((fail + 1)); fi

# ZeRO-2 under micro-batches runs as priced: each micro-batch's gradient is
# reduce-scattered into a slice and accumulated there (it used to be
# all-reduced whole into a whole accumulator, ZeRO-1's memory)
for z in 1 2; do
  expect 0 "" -- "$src/examples/ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero$z --micro-batches 2 \
    --emit code --target cpu -q -o "$tmp/zm$z"
done
if grep -q "colrt_reduce_scatter" "$tmp/zm2/llama_tiny.c" && ! grep -q "colrt_all_reduce.*\.grad " "$tmp/zm2/llama_tiny.c" &&
   python3 - "$tmp/zm1/llama_tiny.plan.json" "$tmp/zm2/llama_tiny.plan.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["memory"]["planned_arena_bytes"] for f in sys.argv[1:3])
assert b < a, (a, b)
PY
then pass=$((pass + 1)); else echo "FAIL: ZeRO-2 with micro-batches does not reduce-scatter into a sliced accumulator"; fail=$((fail + 1)); fi

# A pipeline's stages each allocate their own memory plan: the middle stages of
# a 4-stage GPT-2 (no embedding, no head) hold less than the first and the last,
# the largest stage's arena is the program's, and each is near its lower bound.
expect 0 "" -- "$src/tests/e2e/gpt2_tiny_4.cir" --cluster h100:1x4 --pp 4 --micro-batches 4 --emit code --target cpu -q -o "$tmp/pp4"
if grep -q "colrt_arena_create(gpt2_tiny_stage_arena_bytes\[M->stage\])" "$tmp/pp4/gpt2_tiny.c" &&
   python3 - "$tmp/pp4/gpt2_tiny.plan.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
st = [s["memory"] for s in d["pipeline"]["stages"]]
a = [m["planned_arena_bytes"] for m in st]
assert max(a) == d["memory"]["planned_arena_bytes"], a
assert max(a[1], a[2]) < min(a[0], a[3]), a
assert all(m["lower_bound_bytes"] <= m["planned_arena_bytes"] <= 1.1 * m["lower_bound_bytes"] for m in st), st
assert all(0.9 < m["planned_over_predicted"] < 1.1 for m in st), st
PY
then pass=$((pass + 1)); else echo "FAIL: a pipeline's stages do not each get their own memory plan"; fail=$((fail + 1)); fi

# Outputs are atomic: a write that fails (here: past the file size limit)
# leaves the previous file as it was and no temporary beside it.
"$cc" -q "$src/examples/ir/mlp.cir" --emit ir -o "$tmp/atomic.cir"
cp "$tmp/atomic.cir" "$tmp/atomic.prev"
out=$( (trap '' XFSZ; ulimit -f 4; NO_COLOR=1 "$cc" -q "$src/examples/ir/gpt2-2layer.cir" --emit ir -o "$tmp/atomic.cir") 2>&1)
rc=$?
if [ $rc -eq 1 ] && [[ "$out" == *"cannot write '$tmp/atomic.cir': File too large"* ]] && cmp -s "$tmp/atomic.cir" "$tmp/atomic.prev" &&
   [ -z "$(ls -A "$tmp" | grep -F 'atomic.cir.tmp')" ]; then pass=$((pass + 1)); else
  echo "FAIL: a failed --emit ir write (rc $rc: $out) changed the previous file or left a temporary"; ls -A "$tmp"; fail=$((fail + 1)); fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

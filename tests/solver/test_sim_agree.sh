#!/usr/bin/env bash
# test_sim_agree.sh — the planner's predicted step (step_time_s, the ILP's
# terms) and the replay of the program generated from the plan
# (simulated_step_time_s, solver/sim.c) agree within 3 % on small plans of
# each class the lowering builds (docs/simulate.md, bench/simulate): data
# parallel with its gradient buckets on the communication stream (one and two
# mesh axes), ZeRO-1/2/3 (collectives on the compute stream) and micro-batches.
# Tensor parallel: GPT-2's, LLaMA's and the MLP's megatron plans on 1x2, and GPT-2's and
# LLaMA's on 2x2 (their collectives counted against the program's; bench/simulate/README.md). Both are models over the
# same cluster tables, so the comparison is deterministic: 3 % is the
# project's target for the two (issue 15), not a noise allowance.
# usage: test_sim_agree.sh PATH/TO/colossal-compile SOURCE_DIR
set -u
cc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ir=$src/examples/ir
tol=0.03
check() { # name, then the compiler's arguments (the tolerance: $tol)
  local name=$1
  shift
  "$cc" "$@" --target cpu -q --emit code -o "$tmp/$name" || { echo "FAIL: $name: generate"; fail=1; return; }
  python3 - "$name" "$tmp/$name" "$tol" <<'PY' || fail=1
import json, os, sys
name, d, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
pred, sim = plan["step_time_s"], plan.get("simulated_step_time_s", 0)
ok = pred > 0 and abs(sim / pred - 1) <= tol
print("%-28s predicted %.4g s, simulated %.4g s, sim/pred %.3f %s" % (name, pred, sim, sim / pred if pred else 0,
                                                                     "ok" if ok else "FAIL (more than %g %% apart)" % (100 * tol)))
sys.exit(0 if ok else 1)
PY
}
# the end-to-end tests' plans (tests/e2e), generated for the CPU backend on the h100 preset
check mlp_dp_2x2 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --strategy dp
check llama_dp_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2x1 --strategy dp
check mlp_micro2_dp_2 "$ir/mlp.cir" --cluster h100:1x2 --mesh 2 --strategy dp --micro-batches 2
check llama_zero1_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero1
check mlp_zero2_1x2 "$ir/mlp.cir" --cluster h100:1x2 --mesh 1x2 --strategy zero2 --optimizer sgd
check llama_micro2_zero2_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero2 --micro-batches 2
check gpt2_zero3_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3
# ZeRO-2 over a gradient held whole (every op replicated, nothing pending): the norm's squares over
# the whole gradient as held, no all-reduce of the norm (was priced one: 0.918). The lowering runs
# such a plan at ZeRO-1 (one data-parallel rank: compiler/lower/lower.c), which the ZeRO-2 price of
# a whole gradient matches here (no collective either way); not under micro-batches (known gap)
check llama_replicated_zero2_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --recompute selective --zero 2 --mem 100KB
# selective recompute under ZeRO-2 with the batch split (the e2e rule llama_selective_zero2_2)
check llama_selective_zero2_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero2 --recompute selective --mem 100KB
# the data-parallel rows of issue 15 (bench/simulate/README.md, branch dp15; main 5816642 in
# brackets): the tied embedding's gradient sum rides the last bucket (schedule.c tied_sum; it was
# all-reduced on the caller's thread after every bucket, 1.237), the position table's sum its edge
# defers priced at ZeRO 0-1 (IlpEdge.defer_s), recompute's re-runs hiding buckets (1.207), under
# micro-batches one run of buckets after the backward, exposed whole (ilp_buckets_after_backward:
# 0.728), and a bf16 gradient's sum passed through its cast to the f32 accumulator, summed once a
# step (split.c casts_into_accum: it was summed in bf16 each micro-batch, 1.157)
check gpt2_dp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy dp
check gpt2_bf16_dp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy dp --dtype bf16
check gpt2_dp_recompute_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy dp-recompute
check gpt2_micro4_dp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy dp --micro-batches 4
check mlp_bf16_micro2_dp_2 "$ir/mlp.cir" --cluster h100:1x2 --mesh 2 --strategy dp --micro-batches 2 --dtype bf16
# ZeRO-3 with recompute: the re-run forward gathers its parameters once more before the block's
# backward (problem.c IlpProblem.rc_reads, placement_recompute_nodes; 1.333, 1.227 and 1.239
# while the ILP priced none of them)
check gpt2_zero3_recompute_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --recompute full
check gpt2_zero3_selective_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --recompute selective
check llama_zero3_recompute_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy zero3 --recompute full
# ZeRO chunks (--chunk-bytes): the planner prices the chunked program's collectives and copies
# (solver/chunks.c) in place of the ILP's one collective per tensor; without that these are
# 0.12-0.49 (the gathers' latency saved); with full recompute, the recompute's gathers too
check gpt2_zero3_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --chunk-bytes 8KB
check gpt2_zero3_chunk_rc_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --recompute full \
  --chunk-bytes 16KB
check llama_zero3_chunk_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy zero3 --chunk-bytes 8KB
check llama_micro2_zero2_chunk_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero2 --micro-batches 2 \
  --chunk-bytes 8KB
check gpt2_micro2_bf16_zero3_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 --dtype bf16 \
  --micro-batches 2 --chunk-bytes 8KB
# tensor parallel with ZeRO-2 (the ILP's 2x2 plan): the gradient chunks over one mesh axis
# (solver/chunks.c price_sharded, compiler/lower/chunk.c chunk_sharded)
check gpt2_tp_zero2_chunk_2x2 "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --zero 2 --mem 108KB \
  --chunk-bytes 1KB
# ... under 2 micro-batches (1x2: each micro-batch's gradients resharded where they are computed,
# placement_accum_scatter, and its chunk reduce-scattered: price_sharded times the micro-batches;
# one micro-batch's priced alone it is 0.981)
check gpt2_tp_micro2_zero2_chunk_1x2 "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x2 --mesh 1x2 --zero 2 \
  --mem 150KB --micro-batches 2 --chunk-bytes 4KB
# ... on 2x2 (e2e_gpt2_tp_micro2_zero2_chunk_2x2): the members reduce-scattered over axis 0 then sliced
# over axis 1, the slice folded into the copy in (1.000)
check gpt2_tp_micro2_zero2_chunk_2x2 "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --zero 2 \
  --mem 108KB --micro-batches 2 --chunk-bytes 1KB
# ... with ZeRO-3 (e2e_gpt2_tp_zero3_chunk_2's plan): the parameters' gathers (reshardings per reader,
# one all-gather over the axis) in chunk rounds, each resharding copying its whole out (price_sharded
# replays spec.c's copies per phase; the recompute's re-runs gather alone)
check gpt2_tp_zero3_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --zero 3 --mem 100KB --chunk-bytes 4KB
# chunks over two mesh axes: each chunk's collectives in two steps (inner then outer axis for an
# all-gather, outer then inner for a reduce-scatter), priced as cg_emit.c runs them
check gpt2_zero3_chunk_2x2 "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero3 \
  --optimizer sgd --chunk-bytes 2KB
check llama_zero2_chunk_2x2 "$src/tests/e2e/llama_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero2 \
  --chunk-bytes 4KB
check gpt2_offload_params_zero3_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 \
  --offload params --chunk-bytes 8KB
# host offload in runs (docs/sharding.md "Host offload"): a chunk's updates one host call, its
# gradients one copy down (f32: 1.006, per update 1.002: the run's host update waits for all its
# gradients; bf16 under ZeRO-2, from the span its f32 casts write into: 0.983)
check gpt2_offload_master_zero3_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero3 \
  --offload optim+master --chunk-bytes 8KB
check gpt2_offload_bf16_zero2_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 2 --strategy zero2 --dtype bf16 \
  --offload optim+master --chunk-bytes 8KB

# pipelines (1F1B, --pp): each stage's program replayed on its own clock, the transfers waiting
# for the neighbour (docs/simulate.md); the planner's stage times are one micro-batch's (1/m of the
# problem's, which prices m calls a step: the one-micro-batch graph of --emit code was priced m
# times over: gpt2_pp_2 predicted 2.04x its replay); stages of one device, tensor parallel in a stage, kept
# activations over 8 micro-batches, 4 stages
check gpt2_pp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --pp 2 --micro-batches 4
check gpt2_pp_2_tp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 1x2 --strategy megatron --mem 130KB --micro-batches 4
check gpt2_pp_2_keep_m8 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --pp 2 --micro-batches 8 --pp-activations keep
check gpt2_pp_4 "$src/tests/e2e/gpt2_tiny_4.cir" --cluster h100:1x4 --pp 4 --micro-batches 4
check llama_pp_4_rerun "$src/tests/e2e/llama_tiny_4.cir" --cluster h100:1x4 --pp 4 --micro-batches 4 --pp-activations rerun
# data parallel and ZeRO inside the stages (the e2e tests' plans; main c73403f in brackets): each
# stage sums its gradients in buckets of its own (compiler/lower/schedule.c, one set per set of
# stages), launched in its last micro-batch's backward on the communication stream, each set
# priced at least one whole bucket's latency (a collective per gradient in the update: 2.404,
# 1.729, 1.826); ZeRO-2/3's reduce-scatters in each micro-batch's backward, priced there and as
# the stage's nodes run them (chunks.c's replay: 1.148, 1.069, 1.061)
check gpt2_pp_2_dp_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy dp --micro-batches 4
check llama_pp_2_zero1_2 "$ir/llama-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero1 --micro-batches 4
check gpt2_pp_2_bf16_zero1_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero1 --micro-batches 4 \
  --dtype bf16
check gpt2_pp_2_zero2_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero2 --micro-batches 4
check gpt2_pp_2_zero2_chunk_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero2 --micro-batches 4 \
  --chunk-bytes 8KB
check gpt2_pp_2_zero3_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy zero3 --micro-batches 4
# tensor parallel and ZeRO-2 in the stages under full recompute (the e2e plan; main d7c895b in
# brackets): a recomputed instance re-runs the reshardings on the edges into it (IlpEdge.rerun_s) in
# its stage's backward (1.083); a stage running its forward again re-runs the forward's reshardings,
# and a stage's forward and backward each take their own reshardings (IlpStrat.bwd_comm_s,
# IlpEdge.bwd), not a share by compute time (1.149). Full recompute forced: since mem15 (ZeRO-2's
# micro-batched accumulations on the update's slice) the planner's own plan at 80 KB recomputes nothing
# and carries 2 reshardings it did not price (1.145: bench/simulate/README.md)
check gpt2_pp_2_tp_zero2_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 1x2 --zero 2 --mem 80KB --micro-batches 4 \
  --recompute full
check gpt2_pp_2_tp_zero2_rerun_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 1x2 --zero 2 --mem 80KB \
  --micro-batches 4 --pp-activations rerun --recompute full
# ... and the planner's own plan there, the e2e rule's (branch pptie15; main 5cf1d18 1.145): its first
# plan's arena (85.8 KB) missed 80 KB, and the re-plan under the scaled limit (73.9 KB) took a plan of
# 0.1388 ms whose tied embedding's head part, pending over the stage's axis beside a lookup held
# whole, was all-reduced each micro-batch unpriced; now the re-plans go back up from a limit that fit
# (compiler/main.c) and keep the fastest whose arena fits (78 KB's, 0.1288 ms), and the ILP prices
# that sum on the lookup -> head edge (cost_param_part_grad), so the 73.9 KB plan prices as it runs
check gpt2_pp_2_tp_zero2_auto_2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --pp 2 --mesh 1x2 --zero 2 --mem 80KB --micro-batches 4
# ... in chunks (cli_chunk_tp_pp's plan: the 4-block model, each stage's two mlp.c_proj.bias gradients
# one reduce-scatter a micro-batch): the chunks priced per stage (chunks.c stages_sharded, the same
# replay with them less without added to each stage's backward; 1.000, 1.000 without chunks)
check gpt2_pp_2_tp_zero2_chunk_2 "$src/tests/e2e/gpt2_tiny_4.cir" --cluster h100:1x4 --pp 2 --mesh 1x2 --zero 2 \
  --mem 120KB --micro-batches 4 --chunk-bytes 2KB
# interleaved 1F1B (--schedule interleaved:2): each device's virtual stages' functions on its clock, a
# transfer's messages posted at once (colrt_sendrecv_batch), the sums between devices in the
# update; the e2e tests' five interleaved plans, and 4 devices of 2 chunks with data parallel 2
# (the tied parameter's pair all-reduce between devices 0 and 3, the last virtual stage's forward
# run again: as many micro-batches as devices)
il=(--cluster h100:1x2 --pp 2 --schedule interleaved:2)
check gpt2_pp_2_ileave_2 "$src/tests/e2e/gpt2_tiny_4.cir" "${il[@]}" --micro-batches 4
check gpt2_pp_2_ileave_2_m8 "$src/tests/e2e/gpt2_tiny_4.cir" "${il[@]}" --micro-batches 8
check gpt2_pp_2_ileave_2_bf16 "$src/tests/e2e/gpt2_tiny_4.cir" "${il[@]}" --micro-batches 4 --dtype bf16
check llama_pp_2_ileave_2_m8 "$src/tests/e2e/llama_tiny_4.cir" "${il[@]}" --micro-batches 8
check llama_pp_2_ileave_2_bf16 "$src/tests/e2e/llama_tiny_4.cir" "${il[@]}" --micro-batches 4 --dtype bf16
check gpt2_pp_4_ileave_2_dp_2 "$src/examples/gpt2/gpt2.c" -DN_LAYER=8 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
  --cluster h100:1x8 --pp 4 --mesh 2 --schedule interleaved:2 --micro-batches 4
# data parallel in the stages: an interleaved program has no gradient buckets (lower.c pipe_buckets),
# each gradient all-reduced alone in the update, priced so (IlpStrat.sync_alone_s; at its share of a
# bucket's latency it was 2.877)
check gpt2_pp_2_ileave_2_dp_2 "$src/tests/e2e/gpt2_tiny_4.cir" --cluster h100:1x4 --pp 2 --mesh 2 --strategy dp \
  --schedule interleaved:2 --micro-batches 4

# measured collective tables (collective_us): the h100 preset on 1x2 with a table for 2 ranks
# inside the node (h100_1x2_collectives.json; the all-reduce's last segment flat, so a
# bucket past 64 KiB is priced by the β floor), so the ILP and the replay are checked to
# price collectives alike under tables: dp's gradient buckets, ZeRO-2's and ZeRO-3's
# reduce-scatters and gathers, chunked
tab=$src/tests/solver/h100_1x2_collectives.json
check mlp_dp_2_tables "$ir/mlp.cir" --cluster "$tab" --mesh 2 --strategy dp
check llama_zero2_2_tables "$ir/llama-tiny.cir" --cluster "$tab" --mesh 2 --strategy zero2
check gpt2_zero3_chunk_2_tables "$ir/gpt2-tiny.cir" --cluster "$tab" --mesh 2 --strategy zero3 --chunk-bytes 8KB

# mixed precision under micro-batches: each micro-batch's gradient cast to f32 and added into
# the f32 accumulator, in the backward (ir/autodiff.c), 18 bytes an element a micro-batch; priced
# 6 (3 x the bf16 gradient's) and the cast once a step, GPT-2 124M's replay was 1.052 x its price
check gpt2_124m_bf16_micro8 "$src/examples/gpt2/gpt2.c" --batch 32 --cluster h100:1x1 --dtype bf16 --micro-batches 8

# the weight gradients' GEMMs doing their accumulation (lower.fuse, ir_fuse_grad_table): the
# GEMM reads and writes the f32 accumulator, no cast and no add run; the planner prices the
# same rule (problem.c member_bwd, price_params). gpt2-tiny's 8 dense weights on one device, bf16
# and f32 (gpt2-tiny f32 dp 2 with 4 micro-batches replays at 0.73 of its price, fused or not
# (COLOSSAL_DEBUG_UNFUSED_ACCUM=1): its resharding term, not this);
# and the same plans unfused (COLOSSAL_DEBUG_UNFUSED_ACCUM=1): 8 fewer accumulations and casts
# replayed per micro-batch where fused
check gpt2_bf16_micro4_1 "$ir/gpt2-tiny.cir" --cluster h100:1x1 --dtype bf16 --micro-batches 4
check gpt2_micro4_1 "$ir/gpt2-tiny.cir" --cluster h100:1x1 --micro-batches 4
COLOSSAL_DEBUG_UNFUSED_ACCUM=1 check gpt2_bf16_micro4_1_unfused "$ir/gpt2-tiny.cir" --cluster h100:1x1 --dtype bf16 \
  --micro-batches 4
python3 - "$tmp/gpt2_bf16_micro4_1" "$tmp/gpt2_bf16_micro4_1_unfused" <<'PY' || fail=1
import json, os, sys
def load(d):
    plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
    ops = plan["program"]["ops"]
    return (plan["lowering"].get("fused_grad_accumulations"), sum(o.get("o") == "grad_accum" for o in ops),
            sum(o.get("o") == "cast" and o.get("n", "").endswith(".grad32") for o in ops))
fused, unfused = load(sys.argv[1]), load(sys.argv[2])
ok = fused[0] == 8 and unfused[0] == 0 and unfused[1] - fused[1] == 8 and unfused[2] - fused[2] == 8
print("gpt2_bf16_micro4_1: fused accumulations, accumulations and casts replayed: %s, unfused %s %s" %
      (fused, unfused, "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY

# lower.fuse's passes before the GEMMs are in the replay as the planner prices
# the fused adds (solver/cost.c cost_fused_bytes): gpt2-tiny on one device has
# 8 bias adds, 4 of them with the residual after them; each pass one element-wise
# kernel writing the product's buffer (and reading the bias and the residual)
check gpt2_fused_1 "$ir/gpt2-tiny.cir" --cluster h100:1x1
python3 - "$tmp/gpt2_fused_1" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
low = plan["lowering"]
passes = [o for o in plan["program"]["ops"] if o.get("o") == "add" and o.get("f") == 0]
# qkv [2,8,3,2,8] + bias [3,2,8]; with a residual: [2,8,16] written, + bias [16], + the residual read
want = {"h.0.qkv": (768 + 48) * 4, "h.0.x1": (256 + 16 + 256) * 4}
got = {o["n"]: o["b"] for o in passes}
ok = len(passes) == low["fused_bias_adds"] == 8 and low["fused_residual_adds"] == 4 and \
    all(got.get(k) == v for k, v in want.items())
print("gpt2_fused_1: %d fused passes replayed %s %s" % (len(passes), {k: got.get(k) for k in want}, "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# the CPU programs of bench/validate on this machine's idle calibration with the stream's
# hand-off (bench/validate/testdata/cpu-idle-1x2-1035.json, handoff_us 19.47: docs/sharding.md,
# "Collective costs"), within 1 %: ZeRO-2's 56 collectives a step run on the caller's thread
# (priced at the stream's time they were 1.20x the measured step); the data-parallel buckets
# queued one after the other at the backward's end, the first block instance's hidden behind
# the embedding's backward only (IlpGroup.sync_tail: without it 1.013 and 1.017)
cpu=$src/tests/solver/cpu_1x2_handoff.json
tiny=(-DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 --cluster "$cpu")
tol=0.01
check gpt2_tiny_zero2_2_cpu "$src/examples/gpt2/gpt2.c" "${tiny[@]}" --strategy zero2
check gpt2_tiny_dp_2_cpu "$src/examples/gpt2/gpt2.c" "${tiny[@]}" --strategy dp
check gpt2_tiny_dp_recompute_2_cpu "$src/examples/gpt2/gpt2.c" "${tiny[@]}" --strategy dp-recompute
tol=0.03

# tensor parallel (the e2e tests' megatron plans): the clipping norm's all-reduce priced once a
# step over each axis a chosen strategy's parameters hold a partial norm over (ilp_norm_sum_s;
# a share per parameter before: gpt2_tp_1x2 paid 8/26 of it, 0.963 only because its backward's
# gathers were over-priced as much, below; with those fixed and the share kept, 1.160), and a
# gradient an add passes through (dY itself: the MLP output's, past the bias and the residual)
# moved once, from how its readers hold it to where the row-parallel product's backward reads it
# (problem.c grad_chain). mlp_tp_1x2 was 1.142
check gpt2_tp_1x2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 130KB
check mlp_tp_1x2 "$ir/mlp.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 300KB
# LLaMA's megatron plans: gate and up both read the norm's output, column-parallel, and the
# program adds their partial gradients and all-reduces the sum once, where each edge priced its
# own all-reduce (problem.c IlpGradShare; main 0.734); the trust ratios' norms (LARS, LAMB) one
# all-reduce of every parameter's pair per axis, not a share per parameter (ilp_norm_sum_s from
# ILP_TRUST_SHIFT; main 0.835 and 1.134)
check llama_tp_1x2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 80KB --optimizer sgd
check llama_lars_tp_1x2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 80KB --optimizer lars
check gpt2_lamb_bf16_tp_1x2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 128KB \
  --optimizer lamb --dtype bf16
# a recomputed block instance's re-run forward reshards its operands again (lower/recompute.c):
# `down`'s all-reduce before the residual add runs a second time in the backward, priced per
# instance recomputed (IlpStrat.rc_comm_s, IlpEdge.rerun_s; main bbbc0e0: 1.362, 1.389, 1.362;
# the last two 1.061 and 1.058, where the planner chose full recompute of 1 and 2 instances not
# paying their re-runs' all-reduces and gathers; priced, it keeps every instance's activations)
check llama_selective_tp_1x2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --recompute selective --zero 0 --mem 105KB
check llama_selective_tp_4 "$ir/llama-tiny.cir" --cluster h100:1x4 --mesh 4 --recompute selective --zero 0 --mem 90KB
check llama_selective_zero2_2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 2 --recompute selective --mem 100KB
check llama_tp_zero1_2x2 "$ir/llama-tiny.cir" --cluster h100:1x4 --mesh 2x2 --zero 1 --mem 60KB --optimizer sgd
check gpt2_lamb_tp_zero1_2x2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --zero 1 --mem 95KB --optimizer lamb
# and gpt2_tp_zero1_2x2 (main 1.066, full recompute of one instance): with the ILP's re-run rows in
# seconds (coefficients of 1e-10 to 1e-6) its search stopped above the megatron baseline and that
# plan ran 1.223 x its price; in the objective's units it finds the 22 % faster plan it prices right
check gpt2_tp_zero1_2x2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --zero 1 --mem 72KB
# ZeRO-1 per parameter (ilp_zero1_scatters from the held spec; schedule.c sharded_candidates): a plan
# mixing groups that split a parameter with groups that split none. A pending gradient of a parameter
# held unsplit rides a bucket on the communication stream and the update slices its part locally; a
# split one's is reduce-scattered into the slice. Main ecc8703 priced 18 bucketed all-reduces where the
# program reduce-scattered 28 gradients on the compute stream (1.260); the counts are checked too
check gpt2_b4_tp_zero1_2x2 "$src/tests/e2e/gpt2_tiny_b4.cir" --cluster h100:1x4 --mesh 2x2 --zero 1 --mem 90KB
python3 - "$tmp/gpt2_b4_tp_zero1_2x2" <<'PY' || fail=1
import collections, json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
colls = plan["communication"]["collectives"]
ops = [o for o in plan["program"]["ops"] if o["k"] == "coll"]
rs_priced = collections.Counter({c["axis"]: c["count"] for c in colls if c["kind"] == "reduce-scatter"})
rs_run = collections.Counter(o["a"] for o in ops if o["x"] == "reduce-scatter")
ar_priced = collections.Counter({c["axis"]: c["count"] for c in colls
                                 if c["kind"] == "all-reduce" and c["purpose"] == "gradient sync"})
ar_run = collections.Counter(o["a"] for o in ops if o["x"] == "all-reduce" and o.get("s", 0) == 1)
ok = rs_priced == rs_run and ar_priced == ar_run and sum(ar_run.values()) > 0
print("gpt2_b4_tp_zero1_2x2: reduce-scatters priced %s, run %s; bucket all-reduces priced %s, run %s %s" %
      (dict(rs_priced), dict(rs_run), dict(ar_priced), dict(ar_run), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# the gradient buckets hide behind the backward's collectives on the compute stream (its
# gradients' reshardings) as well as its kernels (eval.c hide: IlpStrat.bwd_comm_s, IlpEdge.bwd;
# priced behind the kernels alone: gpt2_vocab_2x2 0.883, gpt2_seq_1x4 0.957)
check gpt2_vocab_2x2 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 90KB
check gpt2_seq_1x4 "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 1x4 --zero 0 --mem 58KB
# and on 2x2 the all-reduces the program runs on the compute stream (the reshardings' and the
# loss's; not the norms') are the ones priced (main: 6 priced over axis 1, 4 run); its step is not
# within 3 % yet (0.816 with its buckets priced behind the backward's kernels alone; 0.964 behind
# its all-reduces too: the contention priced on the whole backward beside the buckets, where the
# replay slows its kernels only)
"$cc" "$ir/llama-tiny.cir" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 104KB --target cpu -q --emit code \
  -o "$tmp/llama_tp_2x2" || { echo "FAIL: llama_tp_2x2: generate"; fail=1; }
python3 - "$tmp/llama_tp_2x2" <<'PY' || fail=1
import collections, json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
priced = collections.Counter({(c["axis"], c["kind"]): c["count"] for c in plan["communication"]["collectives"]
                              if c["purpose"] == "resharding"})
run = collections.Counter((o["a"], o["x"]) for o in plan["program"]["ops"]
                          if o["k"] == "coll" and o.get("s", 0) == 0 and o["n"] not in ("grad_norm_sq", "trust-ratio norms"))
ok = priced == run and sum(run.values()) > 0
print("llama_tp_2x2: reshardings priced %s, run %s %s" % (dict(priced), dict(run), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# on 2x2 the collectives the program runs are the ones priced (8 all-gathers priced where 6 ran
# before grad_chain); its step is not within 3 % yet (1.055: its buckets of gradients pending over
# both axes run an all-reduce over each, 4 us of latency each, priced as the members' share of
# their run's (cost_grad_sync_latency: 8 us of 24 unpriced); the position table's sum on the
# caller's thread, priced in a bucket; 0.940 while the buckets were priced behind the backward's
# kernels alone)
"$cc" "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 105KB --target cpu -q --emit code \
  -o "$tmp/gpt2_tp_2x2" || { echo "FAIL: gpt2_tp_2x2: generate"; fail=1; }
python3 - "$tmp/gpt2_tp_2x2" <<'PY' || fail=1
import collections, json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
# the reshardings' gathers and scatters (the all-reduces also count the loss's and the norm's sums)
priced = collections.Counter({(c["axis"], c["kind"]): c["count"] for c in plan["communication"]["collectives"]
                              if c["purpose"] == "resharding" and c["kind"] in ("all-gather", "reduce-scatter")})
run = collections.Counter((o["a"], o["x"]) for o in plan["program"]["ops"]
                          if o["k"] == "coll" and o["x"] in ("all-gather", "reduce-scatter"))
ok = priced == run and sum(run.values()) > 0
print("gpt2_tp_2x2: gathers and scatters priced %s, run %s %s" % (dict(priced), dict(run), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# a tied embedding's two gradient parts (the head's, resharded from [R,R]P0; the lookup's,
# [R,S1]P0) added pending and the sum bucketed once, as the ILP prices it (solver/placement.c
# defers_sum, placement_defer_sum); each part was all-reduced on the caller's thread (2 x 4 us
# beside the priced all-reduces: 1.150; now 1.141, the mixed-axis buckets above its gap)
"$cc" "$ir/gpt2-tiny.cir" --cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 125KB --dtype f16 --target cpu -q \
  --emit code -o "$tmp/gpt2_f16_tp_2x2" || { echo "FAIL: gpt2_f16_tp_2x2: generate"; fail=1; }
python3 - "$tmp/gpt2_f16_tp_2x2" <<'PY' || fail=1
import collections, json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
priced = collections.Counter({c["axis"]: c["count"] for c in plan["communication"]["collectives"]
                              if c["purpose"] == "resharding" and c["kind"] == "all-reduce"})
run = collections.Counter(o["a"] for o in plan["program"]["ops"]
                          if o["k"] == "coll" and o.get("s", 0) == 0 and o["x"] == "all-reduce" and o["n"] != "grad_norm_sq")
buckets = plan["lowering"]["gradient_buckets"]
ok = priced == run and sum(run.values()) > 0 and buckets == 4
print("gpt2_f16_tp_2x2: all-reduces on the compute stream priced %s, run %s; %d buckets %s" %
      (dict(priced), dict(run), buckets, "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# an activation two groups read in the same spec is resharded once in the forward, its copy read
# by both (solver/placement.c held, compiler/lower/spec.c): LLaMA's embedding output, split over
# the features, gathered for the first norm and the residual add (IlpGradShare.fwd; each edge
# priced its own gather before: 0.944)
check llama_bf16_sgd_tp_1x2 "$ir/llama-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 70KB \
  --dtype bf16 --optimizer sgd
# ZeRO slices a parameter only where the lowering can (shard_zero_axes): the MLP's fc2.bias (10
# elements) stays whole under the data-parallel lowering on 4 ranks (10 % 4: its update at stage
# 0, no gather; priced as sliced, 0.885, 0.847, 0.912), and the tensor-parallel lowering slices it
# over axis 0 of 2x2 only (shard_spec_refine: 10 % 2; priced over both, 0.934)
check mlp_zero1_4 "$ir/mlp.cir" --cluster h100:1x4 --mesh 4 --strategy zero1
check mlp_zero2_2x2 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero2
check mlp_lamb_zero1_2x2 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero1 --optimizer lamb
check mlp_tp_zero2_2x2 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --zero 2 --mem 200KB
# ... at 160 KB (branch pptie15; main 5cf1d18 1.151): under the tensor-parallel lowering a ZeRO-2
# gradient held whole over the ZeRO axis is cut into the update's slice as it is made and squared
# there, so the norm is a partial sum over that axis too: two all-reduces of it where one was priced
# (problem.c norm_slice); 200 KB's re-plans reach this plan too, now that they go back up
check mlp_tp_zero2_2x2_160 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --zero 2 --mem 160KB
# micro-batches under tensor parallel: a gradient pending a sum (the MLP's output bias under the
# sequence split) is accumulated as this rank's partial sum and summed once a step, as priced
# (solver/placement.c accumulates_pending); the accumulator was held reduce-scattered, each
# micro-batch's gradient reduce-scattered into it and the sum gathered back (1.291). Its step: below
"$cc" "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 120KB --micro-batches 2 \
  --optimizer sgd --target cpu -q --emit code -o "$tmp/gpt2_tp_micro2_1x2" || { echo "FAIL: gpt2_tp_micro2_1x2: generate"; fail=1; }
python3 - "$tmp/gpt2_tp_micro2_1x2" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".plan.json")))))
ops = plan["program"]["ops"]
grads = [o["n"] for o in ops if o["k"] == "coll" and ".bias.grad" in o["n"]]  # a bias gradient's own collective
once = [o["n"] for o in ops if o["k"] == "coll" and o["n"].startswith("gradient bucket") and o.get("lm")]
ok = not grads and len(once) == 1
print("gpt2_tp_micro2_1x2: bias gradients' collectives %s, buckets after the last micro-batch %s %s" %
      (grads, once, "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
# a run of buckets pays one whole bucket's latency however few of its parameters ride it
# (IlpBucketRun, solver.h): the riders' shares are of every parameter of the run, and a choice
# keeps some out (tensor parallel: the split weights have no sum; ZeRO-2: fc2.weight
# reduce-scattered, fc2.bias, which ZeRO cannot slice over 4 ranks, alone in the bucket). Under
# micro-batches the one run after the backward is exposed whole: 1.096 and 1.136 before
check gpt2_tp_micro2_1x2 "$ir/gpt2-tiny.cir" --cluster h100:1x2 --mesh 1x2 --strategy megatron --mem 120KB \
  --micro-batches 2 --optimizer sgd
check mlp_micro2_zero2_chunk_2x2 "$ir/mlp.cir" --cluster h100:1x4 --mesh 2x2 --strategy zero2 --micro-batches 2 \
  --chunk-bytes 4KB
[ $fail -eq 0 ] && echo "test_sim_agree: ok"
exit $fail

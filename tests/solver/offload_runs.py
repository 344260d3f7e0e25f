"""offload_runs.py — host offload in runs (docs/sharding.md "Host offload", "In chunks").

usage: offload_runs.py COLOSSAL_COMPILE GPT2_TINY_CIR OUT_DIR

gpt2-tiny on 2 ZeRO-3 ranks with --offload optim+master, per update and with 8KB chunks:
per update every update is its own host call and copies its gradient and three scalars down
(28 updates: 28 calls, 112 copies down); in chunks the 27 chunked updates run as 2 runs, the
tied embedding (gathered alone) as its own: 3 colrt_host_adamw calls in the generated C (none
shared: the runs cross the block instances), 3 x (one gradient copy + 3 scalars) = 12 copies
down; the parameters still come up each into its own slice (28). The recorder's trace (plan
JSON program.ops, what `simulate` replays) holds exactly those host calls and copies, and
the same bytes as the lowering's count; the planner's per-element price of the copies down
differs from them only by the slots' padding and the scalars, and the planner prices the same
number of host calls and copies (plan JSON offload.host_adamw_calls, d2h_copies, h2d_copies: each
has a per-call cost, so runs are a priced saving). With --offload params a round's
transfer copies each run's slices up in one copy; in bf16 under ZeRO-2 a run's f32 gradient casts
are one span, copied down at once. Without chunks, on 2 data-parallel ranks (and ZeRO-1, and with
micro-batches), the runs form over the gradient buckets instead; the planner counts the same.
"""
import json
import os
import re
import subprocess
import sys

cc, model, out = sys.argv[1:4]
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


def gen(name, *extra):
    d = os.path.join(out, name)
    subprocess.run([cc, model, "--emit", "code", "--target", "cpu", "-q", "-o", d, "--cluster", "h100:1x2", "--mesh",
                    "2", "--strategy", "zero3", "--offload", "optim+master", *extra], check=True)
    plan = json.load(open(os.path.join(d, "gpt2_tiny.plan.json")))
    src = open(os.path.join(d, "gpt2_tiny.c")).read()
    return plan, src


for name, extra, want in (("per_update", [], (28, 112, 28)), ("chunks", ["--chunk-bytes", "8KB"], (3, 12, 28))):
    plan, src = gen(name, *extra)
    low, ops = plan["lowering"], plan["program"]["ops"]
    got = (low["host_adamw_calls"], low["d2h_copies"], low["h2d_copies"])
    check(low["host_updates"] == 28 and got == want,
          f"{name}: 28 updates on the host as {got[0]} host calls, {got[1]} copies down, {got[2]} up (want {want})")
    host = [o for o in ops if o["k"] == "host"]
    hcopy = [o for o in ops if o["k"] == "hcopy"]
    traced = sum(o["b"] for o in hcopy)
    check(len(host) == got[0] and len(hcopy) == got[1] + got[2] and traced == low["d2h_bytes"] + low["h2d_bytes"],
          f"{name}: the recorder's trace: {len(host)} host calls, {len(hcopy)} host copies of {traced} bytes")
    # the planner prices the same calls and copies (each its per-call cost: chunks.c forms the runs)
    of = plan["offload"]
    priced_n = (of["host_adamw_calls"], of["d2h_copies"], of["h2d_copies"])
    check(priced_n == got, f"{name}: the plan prices {priced_n} calls and copies, the program makes {got}")
    check(of["pipeline_s"] >= max(of["d2h_stage_s"], of["host_stage_s"], of["h2d_stage_s"]) > 0,
          f"{name}: the pipeline {of['pipeline_s']:.3g} s, at least its slowest stage")
    if name == "chunks":
        calls = len(re.findall(r"colrt_host_adamw\(", src))
        check(calls == 3, f"chunks: {calls} colrt_host_adamw calls in the generated C")
        check(len(re.findall(r"the gradients of \d+ updates", src)) == 2, "chunks: each run's gradients one copy down")
        priced = plan["offload"]["d2h_bytes_per_step"]
        check(0 < low["d2h_bytes"] - priced <= 64 * 28 + 12 * 3,
              f"chunks: {low['d2h_bytes']} bytes down, priced {priced} (the padding and the scalars apart)")
# bf16 under ZeRO-2: the updates read each gradient's f32 cast; a run's casts write into one span, so its
# gradients still go down in one copy: the 27 gradients of one reduce-scatter chunk (8KB of bf16 slices)
# one run, the tied embedding (scattered alone) its own -> 2 calls, 1 + 1 gradient copies and 2 x 3 scalars
plan, src = gen("bf16_zero2", "--chunk-bytes", "8KB", "--strategy", "zero2", "--dtype", "bf16")
low = plan["lowering"]
got = (low["host_adamw_calls"], low["d2h_copies"], low["h2d_copies"])
check(got == (2, 8, 28), f"bf16_zero2: {got[0]} host calls, {got[1]} copies down, {got[2]} up (want (2, 8, 28))")
of = plan["offload"]
check((of["host_adamw_calls"], of["d2h_copies"], of["h2d_copies"]) == got, "bf16_zero2: the plan prices the same counts")
check(len(re.findall(r"the gradients of 27 updates", src)) == 1, "bf16_zero2: the run's f32 gradients one copy down")
# --offload params: the slices live on the host in their runs' spans, laid out as their chunk's
# slots, so each round's transfer copies a run up into the chunk's send buffer in one copy: 2 chunks x
# 2 rounds (forward, backward) = 4 copies for the 27 chunked slices, not 54
plan, src = gen("params", "--chunk-bytes", "8KB", "--offload", "params")
ups = re.findall(r"slice up into chunk \d+(?:, and the (\d+) after it)?", src)
check(len(ups) == 4 and sum(1 + int(n or 0) for n in ups) == 2 * 27,
      f"params: {len(ups)} copies up into the chunks' send buffers for {sum(1 + int(n or 0) for n in ups)} slices")
# gradient buckets (docs/sharding.md "Host offload", "Runs"): the data-parallel lowering sums the
# gradients in buckets (here 4: one per block instance and two outside the blocks), and the offloaded
# updates of a bucket's neighbours run as one; per update it was 28 calls and 112 copies down. In f32
# the run's gradients lie side by side in the bucket: one copy down (4 runs: 4 x 4 copies). ZeRO-1
# updates each rank's slice of a bucket's gradients, not side by side: one copy each, the call and
# the scalars a run's (28 + 4 x 3), and the updated slices up in one copy a run (laid out as on the
# host, offload.c up_span: 4, where dp copies each parameter up, 28). With 2 micro-batches the
# accumulators are one bucket after the backward: one run (28 + 3 down and 1 up in bf16 under
# ZeRO-1, whose f32 accumulators are the bucket's members).
for name, extra, want, spans in (("dp", ["--strategy", "dp"], (4, 16, 28), True),
                                 ("zero1", ["--strategy", "zero1"], (4, 40, 4), False),
                                 ("dp_bf16", ["--strategy", "dp", "--dtype", "bf16"], (4, 16, 28), True),
                                 ("zero1_micro2_bf16", ["--strategy", "zero1", "--micro-batches", "2", "--dtype", "bf16"],
                                  (1, 31, 1), False)):
    plan, src = gen(name, *extra)
    low, ops, of = plan["lowering"], plan["program"]["ops"], plan["offload"]
    got = (low["host_adamw_calls"], low["d2h_copies"], low["h2d_copies"])
    check(low["host_updates"] == 28 and got == want,
          f"{name}: 28 updates on the host as {got[0]} host calls, {got[1]} copies down, {got[2]} up (want {want})")
    # (the source's block instances share a loop: its text holds fewer calls than the trace)
    n_spans = len(re.findall(r"the gradients of \d+ updates", src))
    check((n_spans > 0) == spans, f"{name}: {n_spans} copies of a run's gradients in the source (want some: {spans})")
    host = [o for o in ops if o["k"] == "host"]
    hcopy = [o for o in ops if o["k"] == "hcopy"]
    check(len(host) == got[0] and len(hcopy) == got[1] + got[2],
          f"{name}: the recorder's trace: {len(host)} host calls, {len(hcopy)} host copies")
    priced_n = (of["host_adamw_calls"], of["d2h_copies"], of["h2d_copies"])
    check(priced_n == got, f"{name}: the plan prices {priced_n} calls and copies (plan.c bucket_runs), the program makes {got}")
# a parameter the ranks do not divide stays whole (stage 0, compiler/lower/zero.c) and cuts the run:
# the MLP on 4 ZeRO-1 ranks, fc2.bias (10 elements) alone -> 2 calls, 3 + 1 gradient copies + 2 x 3
# scalars, 2 copies up (the run's 3 slices in one); the planner's runs (plan.c zero_of) the same
d = os.path.join(out, "mlp_zero1_4")
subprocess.run([cc, os.path.join(os.path.dirname(model), "mlp.cir"), "--emit", "code", "--target", "cpu", "-q", "-o", d,
                "--cluster", "h100:1x4", "--mesh", "4", "--strategy", "zero1", "--offload", "optim"], check=True)
plan = json.load(open(os.path.join(d, "mlp.plan.json")))
low, of = plan["lowering"], plan["offload"]
got = (low["host_adamw_calls"], low["d2h_copies"], low["h2d_copies"])
check(got == (2, 10, 2), f"mlp_zero1_4: {got[0]} host calls, {got[1]} copies down, {got[2]} up (want (2, 10, 2))")
check((of["host_adamw_calls"], of["d2h_copies"], of["h2d_copies"]) == got, "mlp_zero1_4: the plan prices the same counts")
sys.exit(1 if fails else 0)

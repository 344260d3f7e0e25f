#!/usr/bin/env python3
"""chunk_tp_zero3.py — ZeRO-3 chunks of a tensor-parallel plan: the planner counts what the lowering builds.

Under tensor parallelism a ZeRO-3 parameter's slice is gathered per reader by a resharding
(compiler/lower/spec.c); where each of a parameter's is one all-gather over one mesh axis
(shard/placement.c placement_chunk_sharded_gather), at nodes no recompute re-runs, the sharded
lowering packs the parameter into chunks (compiler/lower/chunk.c chunk_sharded): a round's one
all-gather, each resharding copying its whole out; its gradient reduce-scattered in the chunk's
layout, or, where its readers ran replicated and the gradient is only sliced, no gradient chunk
(PlaceChunkMember.grad_local). The planner (solver/chunks.c price_sharded) replays the same
reshardings, packs the same members by the same layout and counts the rounds. For each plan: the
chosen candidate's parameter and gradient chunks are the program's, and the ZeRO collectives the
chunks save (none's less the chosen's) are the program's: the gathers and reduce-scatters its
chunks stand in for (lowering.chunks.member_gathers, member_scatters) less the rounds' and the
gradient chunks' own. Before tpz3c19 these plans were
refused ("the plan is tensor parallel with ZeRO-3").
usage: chunk_tp_zero3.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import subprocess
import sys

cc, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
ir = os.path.join(src, "examples/ir")
b4 = os.path.join(src, "tests/e2e/gpt2_tiny_b4.cir")
# name, arguments without --chunk-bytes, the size, (chunks, gradient chunks, rounds)
cases = [
    # e2e_gpt2_tp_zero3_chunk_2's plan: a chunk of 10 parameters whose gradients are only sliced,
    # one of the two mlp.c_proj.bias (reduce-scattered in its layout), 3 rounds
    ("gpt2_2", [os.path.join(ir, "gpt2-tiny.cir"), "--cluster", "h100:1x2", "--mesh", "2", "--zero", "3",
                "--mem", "100KB"], "4KB", (2, 1, 3)),
    # Megatron on 2x2: the MLP weights gathered over axis 0 (a chunk of 5, its gradients in its
    # layout, a round in the forward and one in the backward); the others over both axes, alone
    ("gpt2_megatron_2x2", [b4, "--cluster", "h100:1x4", "--mesh", "2x2", "--strategy", "megatron", "--zero", "3"],
     "4KB", (1, 2, 2)),
]


def make(name, args):
    out = os.path.join(work, name)
    r = subprocess.run([cc] + args + ["--emit", "code", "--target", "cpu", "-q", "-o", out], capture_output=True,
                       text=True)
    if r.returncode:
        return None, "colossal-compile exited %d: %s" % (r.returncode, r.stderr.strip())
    return json.load(open(glob.glob(os.path.join(out, "*.plan.json"))[0])), None


bad = 0
for name, args, size, (chunks, grads, rounds) in cases:
    j, err = make(name, args + ["--chunk-bytes", size])
    if err:
        print("FAIL %s: %s" % (name, err))
        bad = 1
        continue
    ck = j["lowering"]["chunks"]
    cand = j["chunks"]["candidates"]
    chosen = [c for c in cand if c["chosen"]][0]
    none = [c for c in cand if c["chunk_bytes"] == 0][0]
    # the program's: each member's gather and reduce-scatter, less the rounds' and chunks' own
    saved = ck["member_gathers"] + ck["member_scatters"] - ck["gathers"] - ck["gradient_chunks"]
    got = (ck["count"], chosen["chunks"], ck["gradient_chunks"], chosen["gradient_chunks"], ck["gathers"],
           none["collectives"] - chosen["collectives"], saved)
    want = (chunks, chunks, grads, grads, rounds, saved, saved)
    ok = got == want and saved > 0
    print("%s %s: chunks built %d, planned %d; gradient chunks built %d, planned %d; rounds %d; collectives saved "
          "planned %d, in the program %d%s" % ("ok  " if ok else "FAIL", name, *got,
                                               "" if ok else "; want %s" % (want,)))
    bad |= not ok
sys.exit(bad)

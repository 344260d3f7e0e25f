#!/usr/bin/env python3
"""chunk_tp_pp.py — chunks of a tensor-parallel plan with pipeline stages: each stage packs its own.

Under pipeline stages each stage's ranks run their own nodes' reshardings over the stage's submesh,
so the sharded lowering packs each (virtual) stage's members apart (compiler/lower/chunk.c
chunk_sharded, shard/placement.h placement_chunk_key: the mesh axis on the member's one stage; a tied
parameter on two stages alone), and the planner replays the same members stage by stage
(solver/chunks.c stages_sharded, read by pipeprice.c) and prices each size as the pipeline it makes
(plan_price_pipe_chunks). For each plan: the chosen candidate's parameter and gradient chunks are the
program's; the collectives the chunks save (none's less the chosen's, a step: times the
micro-batches) are the program's (lowering.chunks.member_gathers and member_scatters less the rounds'
and gradient chunks' own, each a micro-batch's); every stage packs chunks of its own
(lowering.chunks.stages), its counts adding up to the program's, and the stages' all-gathers and
reduce-scatters with and without chunks are the program's and the same plan's without
--chunk-bytes. Before tppp19 these plans were refused ("the plan is tensor parallel with pipeline
stages"). The ZeRO-3 plan is e2e_gpt2_pp_2_tp_zero3_chunk_2's (it trains as the interpreter does);
the ZeRO-2 plan is cli_sim_agree's gpt2_pp_2_tp_zero2_chunk_2.
usage: chunk_tp_pp.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import subprocess
import sys

cc, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
g4 = os.path.join(src, "tests/e2e/gpt2_tiny_4.cir")
pp = ["--cluster", "h100:1x4", "--pp", "2", "--mesh", "1x2", "--micro-batches", "4"]
# name, arguments without --chunk-bytes, the size, (chunks, gradient chunks, rounds)
cases = [
    # ZeRO-2: each stage's two mlp.c_proj.bias gradients ([R]P1) one reduce-scatter over axis 1
    ("zero2", [g4] + pp + ["--zero", "2", "--mem", "120KB"], "2KB", (0, 2, 0)),
    # ZeRO-3: 5 parameter chunks a stage (9 rounds), one gradient chunk a stage in its layout
    ("zero3", [g4] + pp + ["--zero", "3", "--mem", "128KB"], "2KB", (10, 2, 18)),
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
    j0, err0 = make(name + "_none", args)
    if err or err0:
        print("FAIL %s: %s" % (name, err or err0))
        bad = 1
        continue
    mb = j["micro_batches"]
    low, ck = j["lowering"], j["lowering"]["chunks"]
    cand = j["chunks"]["candidates"]
    chosen = [c for c in cand if c["chosen"]][0]
    none = [c for c in cand if c["chunk_bytes"] == 0][0]
    saved = ck["member_gathers"] + ck["member_scatters"] - ck["gathers"] - ck["gradient_chunks"]
    st = ck["stages"]
    got = (ck["count"], chosen["chunks"], ck["gradient_chunks"], chosen["gradient_chunks"], ck["gathers"],
           (none["collectives"] - chosen["collectives"]) // mb, saved)
    want = (chunks, chunks, grads, grads, rounds, saved, saved)
    ok = got == want and saved > 0 and (none["collectives"] - chosen["collectives"]) % mb == 0
    # each stage its own chunks, adding up to the program's; its collectives as the program counts them
    sums = tuple(sum(s[k] for s in st) for k in ("count", "gathers", "gradient_chunks", "all_gather_count",
                                                 "reduce_scatter_count", "unchunked_all_gather_count",
                                                 "unchunked_reduce_scatter_count"))
    want_st = (ck["count"], ck["gathers"], ck["gradient_chunks"], low["all_gather_count"],
               low["reduce_scatter_count"], j0["lowering"]["all_gather_count"], j0["lowering"]["reduce_scatter_count"])
    each = all(s["count"] + s["gradient_chunks"] > 0 for s in st)
    ok_st = sums == want_st and each and len(st) == 2
    # the chunked plan is the same plan, faster by what its chunks save
    same = j["step_time_s"] < j0["step_time_s"]
    print("%s %s: chunks built %d, planned %d; gradient chunks built %d, planned %d; rounds %d; collectives saved a "
          "micro-batch planned %d, in the program %d; stages %s; step %.5g ms (without chunks %.5g)%s" %
          ("ok  " if ok and ok_st and same else "FAIL", name, *got,
           [(s["count"], s["gathers"], s["gradient_chunks"]) for s in st], 1e3 * j["step_time_s"],
           1e3 * j0["step_time_s"], "" if ok and ok_st else "; want %s, stages %s for %s" % (want, sums, want_st)))
    bad |= not (ok and ok_st and same)
sys.exit(bad)

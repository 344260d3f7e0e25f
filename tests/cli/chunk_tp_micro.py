#!/usr/bin/env python3
"""chunk_tp_micro.py — ZeRO-2 chunks of a tensor-parallel plan under micro-batches.

Each micro-batch's gradient of a ZeRO-2 parameter is resharded where it is
computed into the slice its accumulation reads (shard/placement.c
placement_accum_scatter), so the sharded lowering packs those reduce-scatters
(compiler/lower/chunk.c chunk_sharded) as it packs one micro-batch's, and each
micro-batch runs them. The planner's replay (solver/chunks.c price_sharded)
must pack the same members into the same chunks and count each micro-batch's
collectives: the plan JSON's chosen candidate has the lowering's gradient
chunks, and its collectives a step are the chunks times the micro-batches
(none's: the members times the micro-batches). The numbers are the e2e test's
(e2e_gpt2_tp_micro2_zero2_chunk_2x2: it trains as the interpreter does) and
test_sim_agree's (the step the planner predicts is the replay's).
usage: chunk_tp_micro.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import subprocess
import sys

cc, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
b4 = os.path.join(src, "tests/e2e/gpt2_tiny_b4.cir")
# name, arguments, (gradient chunks, members, micro-batches, reduce-scatters in the program)
cases = [
    # the two mlp.c_proj.bias gradients, [R]P1: one reduce-scatter over axis 1 a micro-batch
    ("gpt2_1x2_mb2", [b4, "--cluster", "h100:1x2", "--mesh", "1x2", "--zero", "2", "--mem", "150KB",
                      "--micro-batches", "2", "--chunk-bytes", "4KB"], (1, 2, 2, 3)),
    # the e2e test's plan on 2x2: the two mlp.c_proj.bias gradients [R]P0 reduce-scattered over axis 0
    # and sliced over axis 1, the slice folded into the copy in (before tppp19 no chunk)
    ("gpt2_2x2_mb2", [b4, "--cluster", "h100:1x4", "--mesh", "2x2", "--zero", "2", "--mem", "108KB",
                      "--micro-batches", "2", "--chunk-bytes", "1KB"], (1, 2, 2, 3)),
]
bad = 0
for name, args, (chunks, members, mb, rs) in cases:
    out = os.path.join(work, name)
    r = subprocess.run([cc] + args + ["--emit", "code", "--target", "cpu", "-q", "-o", out],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL %s: colossal-compile exited %d: %s" % (name, r.returncode, r.stderr.strip()))
        bad = 1
        continue
    j = json.load(open(glob.glob(os.path.join(out, "*.plan.json"))[0]))
    low, cand = j["lowering"], j["chunks"]["candidates"]
    chosen = [c for c in cand if c["chosen"]][0]
    none = [c for c in cand if c["chunk_bytes"] == 0][0]
    got = (low["chunks"]["gradient_chunks"], chosen["gradient_chunks"], chosen["collectives"], none["collectives"],
           low["reduce_scatter_count"])
    want = (chunks, chunks, chunks * mb, members * mb, rs)
    ok = got == want
    print("%s %s: built %d gradient chunk(s), planned %d; collectives a step %d (none %d); "
          "reduce-scatters in the program %d%s" % ("ok  " if ok else "FAIL", name, *got,
                                                    "" if ok else "; want %s" % (want,)))
    bad |= not ok
sys.exit(bad)

#!/usr/bin/env python3
"""zero_groups.py — a data-parallel plan whose parameter groups the planner put
at different ZeRO stages is lowered group by group, as it was priced.

The tiny GPT-2 of bench/validate (examples/gpt2/gpt2.c, batch 8; its vocabulary 512, not
256: at 256 the planner splits the position table over the features since its gradient's
move is priced beside the buckets it hides (eval.c hide), a tensor-parallel plan 0.05 %
faster in price and replay, lowered by the sharded rule and not what this row covers) planned for
2 CPU ranks with the committed calibration (tools/calibrate/measured/
cpu-epyc-2core-1x2-own-kernels.json as one node of 2, as bench/validate/run.sh
plans it): the planner's own plan keeps the norms' parameters whole (stage 0)
and slices the GEMMs' and embeddings' optimizer state (ZeRO-1, the token
embedding ZeRO-2). The lowering used to take the lowest stage for every group
(0: a data-parallel program, every rank updating every parameter, 1.12x the
planned step in its replay); now each update runs at its own group's stage
(compiler/lower/zero.c update_stage). Checked in the lowered program (--dump-
after lower): every update of a stage >= 1 parameter is a ZeRO slice then an
all-gather, no update of a stage 0 parameter is, a stage 2 gradient is
reduce-scattered, and the replay is within 3 % of the planned step. The plan
must have both kinds of groups, or the row does not cover what it says.

usage: zero_groups.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
cal = json.load(open(os.path.join(src, "tools/calibrate/measured/cpu-epyc-2core-1x2-own-kernels.json")))
cal["nodes"], cal["per_node"] = 1, 2
# the collectives priced by the link's alpha-beta fit: measured tables (collective_us,
# a calibration since 2026-12-05) price ZeRO's small collectives dearer and the plan
# may be plain dp; this row covers the lowering of a mixed plan
cal.pop("collective_us", None)
cluster = os.path.join(work, "cluster-1x2.json")
with open(cluster + ".tmp", "w") as f:
    json.dump(cal, f)
os.replace(cluster + ".tmp", cluster)
out = os.path.join(work, "gpt2")
args = [cc, os.path.join(src, "examples/gpt2/gpt2.c"), "-DN_LAYER=2", "-DN_EMBD=64", "-DN_HEAD=4", "-DVOCAB=512",
        "-DCTX=32", "--batch", "8", "--cluster", cluster, "--emit", "code", "--target", "cpu", "-q", "-o", out,
        "--dump-after", "lower"]
r = subprocess.run(args, capture_output=True, text=True)
if r.returncode:
    sys.exit("FAIL: colossal-compile exited %d: %s" % (r.returncode, r.stderr[-2000:]))
# the program generated: the last one lowered (a limit the arena misses re-plans)
dump = r.stderr.split("; ---- program after lower ----")[-1]
plan = json.load(open(os.path.join(out, "gpt2.plan.json")))
stage = {}  # parameter name with its block index as h.* -> stage
for z in plan["zero"]:
    for p in z["params"]:
        stage[re.sub(r"^h\.\d+\.", "h.*.", p)] = z["stage"]
errs, seen = [], set()
for line in dump.splitlines():
    m = re.match(r"\s*\d+ adamw %(\S+)\.next ", line)
    if not m:
        continue
    key = re.sub(r"^h\.\d+\.", "h.*.", m.group(1))
    if key not in stage:
        errs.append("update of %s: no group in the plan" % m.group(1))
        continue
    z, sliced = stage[key], "(ZeRO slice of" in line and "then all-gather" in line
    seen.add(z)
    if (z >= 1) != sliced:
        errs.append("%s (stage %d): the update %s a ZeRO slice" % (m.group(1), z, "is" if sliced else "is not"))
low = plan["lowering"]
if not (0 in seen and any(z >= 1 for z in seen)):
    errs.append("the plan's stages are %s: not a mix of 0 and ZeRO (the row does not cover it)" % sorted(seen))
if 2 in seen and low["reduce_scatter_count"] < 1:
    errs.append("a stage 2 group but no reduce-scatter in the program")
ratio = plan["simulated_step_time_s"] / plan["step_time_s"]
if not 0.97 <= ratio <= 1.03:
    errs.append("replay / planned step %.3f (want within 3 %%)" % ratio)
print("stages %s; %d all-gathers, %d reduce-scatters; replay / planned %.3f" %
      (sorted(seen), low["all_gather_count"], low["reduce_scatter_count"], ratio))
sys.exit("FAIL: " + "; ".join(errs) if errs else 0)

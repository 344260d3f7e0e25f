#!/usr/bin/env python3
"""cuda_attention_price.py — a CUDA cluster's measured attention rates price its
attention: GPT-2 124M (examples/gpt2/gpt2.c, batch 8, T = 1024) planned for the
H100 calibrated on the first lent GPU (tests/gpu/calibrated/nvidia-h100-80gb-hbm3.json,
which colossal-calibrate-cuda wrote before it timed attention) without its
`attention_tflops` (one-point tables read off a profile since) and with a table of
two points a kernel put there instead, as colossal-calibrate-cuda now writes them. Without the table each attention node is
priced at peak x 0.50 (solver/cost.c); with it, at the table's rate at the call's
FLOPs, whatever the device, and its backward at the dq and dkv tables' rates at
their calls' FLOPs (1.5x and 2x the forward's). The table's rates, 11 TFLOP/s at 1e10 FLOPs and 22 at
1e11, put GPT-2's 12.9 GFLOP forward call between its points (log-linear, as
shard_rate_at interpolates), so the check fails if the planner read the class
factor, the wrong point, or the wrong kernel's table; and the step must grow by
what the slower attention adds.

usage: cuda_attention_price.py COMPILER ROOT WORKDIR
"""
import json
import math
import os
import subprocess
import sys

cc, root, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
src = os.path.join(root, "tests/gpu/calibrated/nvidia-h100-80gb-hbm3.json")
with open(src) as f:
    cl = json.load(f)
cl.pop("attention_tflops", None)
without = os.path.join(work, "h100-no-attention.json")
with open(without, "w") as f:
    json.dump(cl, f)
PTS = [1e10, 1e11]
cl["attention_tflops"] = {
    "forward": {"flops": PTS, "tflops": [11, 22]},
    "dq": {"flops": PTS, "tflops": [7, 14]},
    "dkv": {"flops": PTS, "tflops": [5.8, 11.6]},
}
with_table = os.path.join(work, "h100-attention.json")
with open(with_table, "w") as f:
    json.dump(cl, f)


def rate_at(pts, rates, x):
    """shard_rate_at: log-linear between points, clamped outside."""
    if x <= pts[0]:
        return rates[0]
    if x >= pts[-1]:
        return rates[-1]
    u = (math.log(x) - math.log(pts[0])) / (math.log(pts[1]) - math.log(pts[0]))
    return rates[0] + u * (rates[1] - rates[0])


def plan(cluster, out):
    subprocess.run([cc, os.path.join(root, "examples/gpt2/gpt2.c"), "--batch", "8", "--cluster", cluster,
                    "--emit", "plan", "-q", "-o", out], check=True)
    with open(os.path.join(out, "gpt2.plan.json")) as f:
        return json.load(f)


base = plan(without, os.path.join(work, "base"))
meas = plan(with_table, os.path.join(work, "measured"))
bad = 0
peak = cl["peak_tflops"]["f32"] * 1e12
added = 0.0
for b, m in zip([o for o in base["ops"] if o["op"] == "attention"], [o for o in meas["ops"] if o["op"] == "attention"]):
    f = m["flops"]
    want = f / (rate_at(PTS, [11e12, 22e12], f))
    if abs(m["forward_s"] - want) > 1e-6 * want:
        print("cuda_attention_price: %s forward %.6g s, the table says %.6g" % (m["name"], m["forward_s"], want))
        bad = 1
    # the backward: dq (1.5x the FLOPs) and dk/dv (2x) each at its own table's rate at its FLOPs
    # (solver/cost.c; compute-bound here), not the class's 2.5x the forward
    want = 1.5 * f / rate_at(PTS, [7e12, 14e12], 1.5 * f) + 2 * f / rate_at(PTS, [5.8e12, 11.6e12], 2 * f)
    if abs(m["backward_s"] - want) > 1e-6 * want:
        print("cuda_attention_price: %s backward %.6g s, the dq and dkv tables say %.6g" % (m["name"], m["backward_s"], want))
        bad = 1
    was = f / (0.5 * peak)
    if abs(b["forward_s"] - was) > 1e-6 * was:
        print("cuda_attention_price: %s forward %.6g s without the table, peak x 0.50 says %.6g"
              % (b["name"], b["forward_s"], was))
        bad = 1
    added += (m["forward_s"] + m["backward_s"]) - (b["forward_s"] + b["backward_s"])
n = sum(o["op"] == "attention" for o in meas["ops"])
if n != 12:
    print("cuda_attention_price: %d attention nodes, GPT-2 124M has 12" % n)
    bad = 1
grew = meas["step_time_s"] - base["step_time_s"]
if not (added > 0 and abs(grew - added) <= 0.02 * added):
    print("cuda_attention_price: the step grew %.6g s, its attention %.6g s" % (grew, added))
    bad = 1
print("cuda_attention_price: GPT-2 124M on the H100 file: step %.4f s at peak x 0.50, %.4f s at the table "
      "(attention %.4f s more)" % (base["step_time_s"], meas["step_time_s"], added))
sys.exit(bad)

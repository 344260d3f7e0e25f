#!/usr/bin/env python3
"""zero_handoff.py — the hand-off conflict (docs/sharding.md, "Queued or on the
caller's thread"): on a cluster with a stream hand-off, a plan that queues
gradient buckets and reduce-scatters ZeRO-2/3 gradients on the caller's thread
pays each reduce-scatter's hand-off again.

The tiny GPT-2 of bench/validate (examples/gpt2/gpt2.c, batch 8) planned for 2
CPU ranks with the committed idle calibration of 13:43 UTC
(bench/validate/testdata/cpu-idle-1x2-1343.json, hand-off 18.93 us) as one node
of 2, as bench/validate/run.sh plans it. Without the conflict the planner chose
a ZeRO-1/2 mix (4 buckets, 13 reduce-scatters: 2.81 ms priced, 3.87 ms
measured), slower than both the data-parallel program and pure ZeRO-2 on the
machine. Checked: the planner's own plan does not queue buckets beside ZeRO
reduce-scatters (the lowering's counts in plan.json; since plan_sync_way it may
keep such buckets on the caller's thread, `gradient_buckets_queued` 0), it is no dearer than
--strategy zero2 (which queues nothing, so the conflict does not touch it), and
the plan and its replay agree within 3 %.

usage: zero_handoff.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
cal = json.load(open(os.path.join(src, "bench/validate/testdata/cpu-idle-1x2-1343.json")))
cal["nodes"], cal["per_node"] = 1, 2
assert cal["collective_us"]["intra"].get("handoff_us", 0) > 0, "the calibration has no hand-off"
cluster = os.path.join(work, "cluster-1x2.json")
with open(cluster + ".tmp", "w") as f:
    json.dump(cal, f)
os.replace(cluster + ".tmp", cluster)
tiny = ["-DN_LAYER=2", "-DN_EMBD=64", "-DN_HEAD=4", "-DVOCAB=256", "-DCTX=32", "--batch", "8"]


def plan(name, *extra):
    out = os.path.join(work, name)
    subprocess.run([cc, os.path.join(src, "examples/gpt2/gpt2.c"), *tiny, "--cluster", cluster, "--emit", "code",
                    "--target", "cpu", "-q", "-o", out, *extra], check=True)
    return json.load(open(os.path.join(out, "gpt2.plan.json")))


fail = 0
p = plan("auto")
com = p["lowering"]
stages = sorted({g["chosen"]["zero_stage"] for g in p["groups"]})
# buckets summed on the caller's thread (plan_sync_way) run no stream worker: no conflict
mixed = com.get("gradient_buckets_queued", com["gradient_buckets"]) > 0 and com["reduce_scatter_count"] > 0
print("planner's plan: ZeRO stages %s, %d gradient buckets, %d reduce-scatters, %.4g s (simulated %.4g s)"
      % (stages, com["gradient_buckets"], com["reduce_scatter_count"], p["step_time_s"], p["simulated_step_time_s"]))
if mixed:
    print("FAIL: the plan queues gradient buckets beside ZeRO reduce-scatters on the caller's thread")
    fail = 1
ratio = p["simulated_step_time_s"] / p["step_time_s"]
if abs(ratio - 1) > 0.03:
    print("FAIL: simulated / predicted %.3f, more than 3 %% apart" % ratio)
    fail = 1
# pure ZeRO-2 queues nothing: the conflict does not touch it
z2 = plan("zero2", "--strategy", "zero2")
zc = z2["lowering"]
if zc["gradient_buckets"] != 0 or zc["reduce_scatter_count"] == 0:
    print("FAIL: --strategy zero2 should reduce-scatter every gradient and queue no bucket (%d buckets)"
          % zc["gradient_buckets"])
    fail = 1
if p["step_time_s"] > z2["step_time_s"] * (1 + 1e-9):
    print("FAIL: the planner's plan %.6g s is dearer than --strategy zero2 %.6g s" % (p["step_time_s"], z2["step_time_s"]))
    fail = 1
print("zero2: %.4g s (simulated %.4g s)" % (z2["step_time_s"], z2["simulated_step_time_s"]))
sys.exit(fail)

#!/usr/bin/env python3
"""sync_way.py — the gradient buckets queued on a communication stream or summed on
the caller's thread, chosen on price (solver/plan.c plan_sync_way; docs/sharding.md,
"The hand-off conflict").

On a cluster with a stream hand-off, a program that queues buckets runs a stream
worker beside the caller's thread, and every collective on the caller's thread (the
tensor-parallel reshardings, the loss's and the norm's sums, ZeRO's) pays the
stream's time. The tiny GPT-2 of bench/validate (examples/gpt2/gpt2.c, batch 8),
--mesh 1x2 --strategy megatron, planned with the committed idle calibration of 16:28
UTC (bench/validate/testdata/cpu-idle-1x2-1628.json, hand-off 19.6 us): main queued
4 buckets beside 15 caller-thread collectives, priced 2.99 ms, and that program
measured 7-13 ms a step against 3.4 ms with the same buckets on the caller's thread
(COLRT_STREAMS=sync; bench/validate/README.md, issue 15). Checked:
  - megatron 1x2 with the calibration: no bucket queued, no stream made by the
    generated program, and the plan and its replay within 3 %;
  - the same calibration without its hand-off: the buckets queued (the choice
    follows the price: no conflict, and the stream overlaps the backward);
  - --strategy dp with the calibration: the buckets queued (its only caller-thread
    collectives are the loss's and the norm's sums: the overlap wins as priced);
  - --sweep-mem on mesh 1x2 with the calibration: the sweep plans both ways too, so
    its point at the device's limit is the plan itself (its step within 1 %, the same
    way; before, the sweep priced only the queued way, and without the hand-off
    conflict).

usage: sync_way.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
cal = json.load(open(os.path.join(src, "bench/validate/testdata/cpu-idle-1x2-1628.json")))
cal["nodes"], cal["per_node"] = 1, 2
assert cal["collective_us"]["intra"].get("handoff_us", 0) > 0, "the calibration has no hand-off"


def write(name, d):
    path = os.path.join(work, name)
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.replace(path + ".tmp", path)
    return path


cluster = write("cluster-1x2.json", cal)
no_h = json.loads(json.dumps(cal))
for link in no_h["collective_us"].values():
    if isinstance(link, dict):
        link.pop("handoff_us", None)
cluster_no_h = write("cluster-1x2-no-handoff.json", no_h)
tiny = ["-DN_LAYER=2", "-DN_EMBD=64", "-DN_HEAD=4", "-DVOCAB=256", "-DCTX=32", "--batch", "8"]


def plan(name, cl, *extra):
    out = os.path.join(work, name)
    subprocess.run([cc, os.path.join(src, "examples/gpt2/gpt2.c"), *tiny, "--cluster", cl, "--emit", "code",
                    "--target", "cpu", "-q", "-o", out, *extra], check=True)
    p = json.load(open(os.path.join(out, "gpt2.plan.json")))
    code = open(os.path.join(out, "gpt2.c")).read()
    m = re.search(r"if \((\d+)\) M->comm = colrt_stream_create\(\);", code)
    stream = m is not None and m.group(1) != "0"
    low = p["lowering"]
    queued = low.get("gradient_buckets_queued", low["gradient_buckets"])  # older plans queued every bucket
    print("%-22s %d buckets, %d queued, stream %s; %.4g s (simulated %.4g s)"
          % (name, low["gradient_buckets"], queued, "made" if stream else "none", p["step_time_s"],
             p["simulated_step_time_s"]))
    return p, queued, stream


fail = 0
tp, q, stream = plan("megatron", cluster, "--mesh", "1x2", "--strategy", "megatron")
if q or stream:
    print("FAIL: megatron 1x2 with the hand-off queues %d buckets (stream %s): its caller-thread collectives "
          "would pay the stream's time" % (q, "made" if stream else "none"))
    fail = 1
ratio = tp["simulated_step_time_s"] / tp["step_time_s"]
if abs(ratio - 1) > 0.03:
    print("FAIL: megatron 1x2 simulated / predicted %.3f, more than 3 %% apart" % ratio)
    fail = 1
_, q, stream = plan("megatron-no-handoff", cluster_no_h, "--mesh", "1x2", "--strategy", "megatron")
if not q or not stream:
    print("FAIL: without a hand-off megatron 1x2 should queue its buckets (%d queued)" % q)
    fail = 1
dp, q, stream = plan("dp", cluster, "--strategy", "dp")
if not q or not stream:
    print("FAIL: --strategy dp should queue its buckets (%d queued)" % q)
    fail = 1
sw, q, _ = plan("sweep", cluster, "--mesh", "1x2", "--sweep-mem=3")
top = sw["memory_sweep"][-1]
print("sweep at the limit: %.4g s, sums on the caller's thread %s; the plan: %.4g s, %d of %d buckets queued"
      % (top["step_time_s"], top.get("gradient_sums_on_caller"), sw["step_time_s"], q,
         sw["lowering"]["gradient_buckets"]))
if abs(top["step_time_s"] / sw["step_time_s"] - 1) > 0.01:
    print("FAIL: the sweep's point at the device limit prices %.4g s, the plan %.4g s" % (top["step_time_s"], sw["step_time_s"]))
    fail = 1
if top.get("gradient_sums_on_caller") != (q == 0 and sw["lowering"]["gradient_buckets"] > 0):
    print("FAIL: the sweep's point at the device limit runs its sums another way than the plan")
    fail = 1
sys.exit(fail)

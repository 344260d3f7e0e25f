#!/usr/bin/env python3
"""pp_schedule_joint.py — under --schedule auto the planner chooses the schedule and the
stage plan together (solver/plan.c, plan_keep_again; docs/pipeline.md "Interleaved 1F1B"),
so its pipeline is never slower than one it could have chosen: every schedule forced alone
(--schedule 1f1b, interleaved:V), each planned with its own stage plan, at the same stages,
micro-batches and memory limit. Before, the stage plan was made for the memory of the
schedule chosen first and every other schedule priced on it: GPT-2 shapes with 4096-wide
blocks (16 layers, 16 sequences of 2048) on 4 nodes of 2 H100s, 2 stages of 8 micro-batches
at 16 GB, took 1F1B (0.3119 s) where interleaved:4 runs 0.3072 s; 4 stages at 17 GB took
interleaved:4 at 0.2655 s where its own stage plan runs 0.2580 s. Deterministic (the
planner's prices, no run).

    pp_schedule_joint.py COMPILER SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys

cc, src, work = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "bench", "solver"))
import gen_models  # noqa: E402

LAYERS = 16
gen_models.MODELS["gpt2-4096-l16"] = ("gpt2", LAYERS, 4096, 32, 32, 16384, 51200, 2048)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
model = gen_models.write(work, "gpt2-4096-l16", 16)


def plan(pp, mb, mem, schedule):
    d = os.path.join(work, f"p{pp}-m{mb}-{mem}-{schedule.replace(':', '')}")
    os.makedirs(d)
    r = subprocess.run([cc, model, "--emit", "plan", "--cluster", "h100:4x2", "--dtype", "bf16", "--pp", str(pp),
                        "--micro-batches", str(mb), "--mem", mem, "--schedule", schedule, "-q", "-o", d],
                       capture_output=True, text=True)
    if r.returncode:
        return None
    return json.load(open(glob.glob(d + "/*.plan.json")[0]))


bad = []
for pp, mb, mem in ((2, 8, "16GB"), (4, 8, "17GB")):
    auto = plan(pp, mb, mem, "auto")
    if not auto:
        bad.append(f"--pp {pp} --micro-batches {mb} --mem {mem} --schedule auto: no plan")
        continue
    forced = {}
    for v in range(1, LAYERS // pp + 1):
        if LAYERS % (pp * v):
            continue
        p = plan(pp, mb, mem, "1f1b" if v == 1 else f"interleaved:{v}")
        if p:
            forced[v] = p["step_time_s"]
    step, chunks = auto["step_time_s"], auto["pipeline"]["chunks"]
    tried = {t["chunks"]: t.get("step_time_s") for t in auto["pipeline"]["schedules_tried"]}
    print(f"--pp {pp} --micro-batches {mb} --mem {mem}: auto {step:.5g} s (v {chunks}); forced "
          + ", ".join(f"v {v}: {s:.5g}" for v, s in forced.items()))
    if not forced:
        bad.append(f"--pp {pp}: no schedule forced alone has a plan")
        continue
    v, s = min(forced.items(), key=lambda x: x[1])
    if step > s * (1 + 1e-9):
        bad.append(f"--pp {pp} --micro-batches {mb} --mem {mem}: --schedule auto's {step:.5g} s (v {chunks}) is slower "
                   f"than {'1f1b' if v == 1 else f'interleaved:{v}'} forced alone, {s:.5g} s")
    # each schedule's listed price is at most its price forced alone (both its stage plans are among auto's)
    for v, s in forced.items():
        if tried.get(v) is None or tried[v] > s * (1 + 1e-9):
            bad.append(f"--pp {pp} --mem {mem}: schedules_tried lists v {v} at {tried.get(v)}, forced alone {s:.5g} s")
    if abs(tried.get(chunks, 0) - step) > 1e-12 * step:
        bad.append(f"--pp {pp}: the chosen schedule's entry {tried.get(chunks)} is not the plan's step {step}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)

#!/usr/bin/env python3
"""zero_layouts.py — the planner never chooses, for generated code, ZeRO the
lowering cannot run in the plan's layout (shard/placement.c
placement_zero_runs: outside tensor parallelism, ZeRO over at most two busy
mesh axes, with the batch split over every busy axis).

GPT-2 124M (batch 8) on h100:1x8 as a 2x2x2 mesh: the planner's own plan put
the tied embedding at ZeRO-1 (its moments sliced in the price) while the
lowering, which slices updates over two mesh axes at most, generated plain
data parallel with no message (main at 7866b55:
arena / predicted 1.102). Now the planner
plans that mesh again without ZeRO (other meshes keep it), says so in one
note, and the program is what the plan says:
checked in the lowered program (--dump-after lower), every update of a
parameter at stage >= 1 is a ZeRO slice then an all-gather and no other is;
the arena within [0.95, 1.03] of the prediction (plain dp under a ZeRO price
was 10 % above it; this small model's arena is 4 % below, the memory model
over-counting it as it does other small plans: bench/memplan). The model is cut to one
layer of width 384 (the planner still chooses ZeRO there first: the note
says so; half the CPU time of the whole model). Each diagnostic is printed
once (until fix14 the whole search ran again without ZeRO, and --mem's note,
--batch's warning and the --time-limit note came twice). With --zero 1 (ZeRO
forced on every group) the compiler refuses, exit 1, naming the rule.

usage: zero_layouts.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
model = [os.path.join(src, "examples/gpt2/gpt2.c"), "-DN_LAYER=1", "-DN_EMBD=384", "-DN_HEAD=6", "--batch", "8",
         "--cluster", "h100:1x8", "--mesh", "2x2x2", "--emit", "code", "--target", "cpu",
         "--time-limit", "300"]  # its ILP solves in 16-22 CPU s: near the default 60 s on a loaded machine
errs = []
out = os.path.join(work, "auto")
# --mem above the device's memory: its note (the limit is the device's), printed once
r = subprocess.run([cc] + model + ["-o", out, "--dump-after", "lower", "--mem", "1000G"], capture_output=True, text=True)
if r.returncode:
    sys.exit("FAIL: colossal-compile exited %d: %s" % (r.returncode, r.stderr[-2000:]))
dump = r.stderr.split("; ---- program after lower ----")[-1]  # the program generated (the last lowered)
said = [ln for ln in r.stderr.splitlines() if ln.startswith("colossal-compile:")]
for ln in sorted(set(said)):
    if said.count(ln) > 1:
        errs.append("printed %d times: %s" % (said.count(ln), ln))
want = "note: planned without ZeRO on mesh 2x2x2 (ZeRO over 3 mesh axes)"
if sum(want in ln for ln in said) != 1:
    errs.append("want one note '%s': %s" % (want, said))
if not any("--mem" in ln and "exceeds" in ln for ln in said):
    errs.append("no note for --mem 1000G (the check of repeated lines has nothing to see): %s" % said)
plan = json.load(open(os.path.join(out, "gpt2.plan.json")))
def key(name):  # a tied block's group lists instance 0's parameters
    return re.sub(r"^h\.\d+\.", "h.*.", name)


stage = {key(p): z["stage"] for z in plan["zero"] for p in z["params"]}
n_upd = 0
for line in dump.splitlines():
    m = re.match(r"\s*\d+ adamw %(\S+)\.next ", line)
    if not m:
        continue
    n_upd += 1
    z, sliced = stage.get(key(m.group(1)), -1), "(ZeRO slice of" in line and "then all-gather" in line
    if z < 0:
        errs.append("update of %s: no group in the plan" % m.group(1))
    elif (z >= 1) != sliced:
        errs.append("%s: the plan says ZeRO-%d, the update %s a ZeRO slice" % (m.group(1), z, "is" if sliced else "is not"))
if not n_upd:
    errs.append("no update found in the lowered program (the dump's format changed?)")
mem = plan["memory"]
ratio = mem["planned_over_predicted"]
if not 0.95 <= ratio <= 1.03:
    errs.append("arena / predicted %.3f (want within [0.95, 1.03])" % ratio)
print("planned stages %s; %d updates; arena / predicted %.3f" % (sorted(set(stage.values())), n_upd, ratio))
# ZeRO forced: refused with the rule's reason, not lowered without it
r = subprocess.run([cc] + model + ["-q", "--zero", "1", "-o", os.path.join(work, "zero1")],
                   capture_output=True, text=True)
if r.returncode != 1 or "ZeRO over 3 mesh axes" not in r.stderr:
    errs.append("--zero 1 on 2x2x2: exit %d, want 1 with 'ZeRO over 3 mesh axes': %s" % (r.returncode, r.stderr[-400:]))
sys.exit("FAIL: " + "; ".join(errs) if errs else 0)

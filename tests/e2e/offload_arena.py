#!/usr/bin/env python3
"""offload_arena.py — host offload shrinks the device arena by exactly the offloaded bytes.

Usage: offload_arena.py COMPILER MODEL.cir WORKDIR

Generates the model's program (--emit code, cluster h100:1x1) without offload, with every group
offloaded (--offload optim) and with a mixed plan (--offload auto --mem 130KB: some groups on the
host), and checks from the plan JSONs beside the code:
  - with every group offloaded, the device arena (memory.planned_arena_bytes) and its lower bound
    are the plan without offload's less memory.planned_offloaded_bytes, exactly;
  - memory.planned_offloaded_bytes is, for each offloaded parameter (the plan JSON's offload groups),
    its two moments m and v (and in bf16 under optim+master its f32 master) at 4 bytes an element,
    each rounded up to the arena's 256-byte alignment (counted here from the parameter shapes in
    MODEL.cir), and the mixed plan offloads some groups but not all;
  - the program copies each offloaded parameter's gradient down (its f32 copy) and the parameter
    up (in its dtype) (lowering.d2h_bytes, h2d_bytes; plus 12 bytes of scalars down per update),
    what the planner priced: offload.d2h_bytes_per_step and h2d_bytes_per_step.
Parameters on the host (--offload params, ZeRO-3 on 2 ranks, against --offload optim there):
  - planned_offloaded_bytes grows by each parameter's slice (aligned), and the device arena shrinks
    by that, less at most the device stagings the slices are copied up into before their gathers
    (lowering.param_fetch_bytes_per_micro_batch: every staging, of which a few live at once);
  - nothing goes up after the update (lowering.h2d_bytes 0); the gathers copy up 2 slices of every
    parameter a step (forward, backward), what the planner priced (offload.param_fetch_bytes_per_step);
  - a mixed plan like e2e_gpt2_offload_params_mixed_bf16_4's (gpt2_tiny_b4.cir beside this script, 4
    ranks, --strategy zero3 --dtype bf16 --offload auto --mem 41KB, two transfers in flight; that test: 42KB, three) keeps some groups' parameters on the
    host, some groups' optimizer state and master only, and some groups on the device;
  - the device stagings in the planner's memory rows (gpt2_wide.cir beside this script, every slice a multiple
    of the alignment): offload.param_staging_bytes is the K largest transfers in the backward (the slices a
    block instance's backward gathers, its weights, or a group's outside the blocks), counted here from the
    shapes, at most the program's most at once (lowering.param_staging_peak_bytes: the forward's, which
    gathers the biases too); the predicted peak (the first block instance's backward, whose stagings are
    its own transfer) moves by the slices less that; the arena's peak, in the
    backward, holds exactly that many; the predicted peak covers the arena (gpt2_wide and gpt2-tiny);
  - at most K transfers in flight: with --offload-inflight 1 the arena is no larger than with 2;
    K comes from the cluster's host.transfers_in_flight (a cluster file saying 1 plans as the flag 1
    does) unless --offload-inflight overrides it.
"""
import json
import math
import os
import re
import subprocess
import sys

cc, model, work = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(work, exist_ok=True)


def shapes_of(path):
    out = {}
    for line in open(path):
        m = re.match(r"param %(\S+) : f32\[([0-9,]*)\]", line)
        if m:
            out[m.group(1)] = math.prod(int(d) for d in m.group(2).split(",") if d)
    return out


shapes = shapes_of(model)


def gen(name, *args, cluster="h100:1x1", cir=None):
    out = f"{work}/{name}"
    subprocess.run([cc, cir or model, "--emit", "code", "--target", "cpu", "--cluster", cluster, "-q", "-o", out, *args],
                   check=True)
    (pj,) = [f for f in subprocess.run(["ls", out], capture_output=True, text=True).stdout.split() if f.endswith(".plan.json")]
    return json.load(open(f"{out}/{pj}"))


def align(b):
    return (b + 255) // 256 * 256


fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


dev = gen("none", "--offload", "none")
check("planned_offloaded_bytes" not in dev["memory"], "no offload: no host arena")
for name, args in (("optim", ["--offload", "optim"]), ("mixed", ["--offload", "auto", "--mem", "130KB"]),
                   ("bf16", ["--offload", "optim+master", "--dtype", "bf16"])):
    p = gen(name, *args)
    mem, low = p["memory"], p["lowering"]
    groups = [g for g in p["offload"]["groups"] if g["update"] == "host"]
    # a group of a repeated block names its first instance's parameters (h.0.x: also h.1.x, ...)
    params = [re.sub(r"^(\w+)\.0\.", rf"\g<1>.{i}.", q) for g in groups for i in range(g["instances"]) for q in g["params"]]
    moved = 3 if name == "bf16" else 2  # m, v (and under mixed precision the f32 master)
    want = sum(moved * align(4 * shapes[q]) for q in params)
    check(mem["planned_offloaded_bytes"] == want,
          f"{name}: {len(params)} parameters' moments moved to the host: {mem['planned_offloaded_bytes']} bytes, "
          f"counted {want}")
    elems = sum(shapes[q] for q in params)
    up = 2 if name == "bf16" else 4  # the parameter in its dtype
    check(low["host_updates"] == len(params) and low["h2d_bytes"] == up * elems == p["offload"]["h2d_bytes_per_step"]
          and low["d2h_bytes"] == 4 * elems + 12 * len(params) and p["offload"]["d2h_bytes_per_step"] == 4 * elems,
          f"{name}: per step {low['d2h_bytes']} bytes down, {low['h2d_bytes']} up ({elems} elements)")
    if name == "optim":
        check(len(params) == len(shapes), "optim: every parameter on the host")
        for k in ("planned_arena_bytes", "lower_bound_bytes"):
            check(dev["memory"][k] - mem[k] == mem["planned_offloaded_bytes"],
                  f"optim: {k} {dev['memory'][k]} -> {mem[k]}: less exactly the offloaded bytes")
    elif name == "mixed":
        check(0 < len(groups) < len(p["offload"]["groups"]), f"mixed: {len(groups)} of {len(p['offload']['groups'])} "
              "groups on the host")

# parameters on the host under ZeRO-3, 2 ranks: each rank's slice of every parameter (all divide by 2)
z3 = ["--mesh", "2", "--strategy", "zero3"]
opt = gen("z3_optim", *z3, "--offload", "optim", cluster="h100:1x2")
par = gen("z3_params", *z3, "--offload", "params", cluster="h100:1x2")
slices = sum(align(4 * n // 2) for n in shapes.values())
om, pm, pl = opt["memory"], par["memory"], par["lowering"]
check(pm["planned_offloaded_bytes"] - om["planned_offloaded_bytes"] == slices,
      f"params: {pm['planned_offloaded_bytes'] - om['planned_offloaded_bytes']} more bytes moved to the host, "
      f"the slices: {slices}")
shrink = om["planned_arena_bytes"] - pm["planned_arena_bytes"]
staging = pl["param_fetch_bytes_per_micro_batch"]
check(slices - staging <= shrink <= slices and shrink > 0,
      f"params: device arena {om['planned_arena_bytes']} -> {pm['planned_arena_bytes']} (-{shrink}): the slices "
      f"{slices} less stagings (at most {staging}, {pl['transfers_in_flight']} transfers in flight)")
elems = sum(n // 2 for n in shapes.values())
# the planner prices two gathers an element (forward, backward); the program gathers a weight twice, a bias
# once (its gradient does not read it) and the tied embedding three times
priced = par["offload"]["param_fetch_bytes_per_step"]
check(pl["h2d_bytes"] == 0 and priced == 2 * 4 * elems and abs(staging - priced) <= 0.05 * priced,
      f"params: nothing up after the update; the gathers copy {staging} bytes up per step, priced {priced} "
      f"({elems} elements)")
one = gen("z3_params_k1", *z3, "--offload", "params", "--offload-inflight", "1", cluster="h100:1x2")
check(one["lowering"]["transfers_in_flight"] == 1 and one["memory"]["planned_arena_bytes"] <= pm["planned_arena_bytes"],
      f"params, one transfer in flight: arena {one['memory']['planned_arena_bytes']} (two: {pm['planned_arena_bytes']})")
# the cluster's host.transfers_in_flight sets K (the preset's is 2); --offload-inflight overrides it
clf = json.loads(json.dumps(par["program"]["cluster"]))
clf["host"]["transfers_in_flight"] = 1
with open(f"{work}/k1.json", "w") as f:
    json.dump(clf, f)
fk1 = gen("z3_params_file_k1", *z3, "--offload", "params", cluster=f"{work}/k1.json")
fk3 = gen("z3_params_file_k1_flag3", *z3, "--offload", "params", "--offload-inflight", "3", cluster=f"{work}/k1.json")
check(par["lowering"]["transfers_in_flight"] == 2 and fk1["lowering"]["transfers_in_flight"] == 1 ==
      fk1["offload"]["transfers_in_flight"] and fk1["memory"]["planned_arena_bytes"] == one["memory"]["planned_arena_bytes"]
      and fk3["lowering"]["transfers_in_flight"] == 3 == fk3["offload"]["transfers_in_flight"],
      f"transfers in flight: preset {par['lowering']['transfers_in_flight']}, cluster file 1: "
      f"{fk1['lowering']['transfers_in_flight']}, and --offload-inflight 3 over it: {fk3['lowering']['transfers_in_flight']}")
check(all(g["parameters"] == "host" for g in par["offload"]["groups"]), "params: every group's parameters on the host")
mixed = gen("z3_mixed_4", "--mesh", "4", "--strategy", "zero3", "--dtype", "bf16", "--offload", "auto", "--mem", "42KB",
            cluster="h100:1x4", cir=os.path.join(here, "gpt2_tiny_b4.cir"))
where = [g["placement"] for g in mixed["offload"]["groups"]]
check(all(where.count(k) > 0 for k in ("params", "optim+master", "device")),
      f"mixed, 4 ranks: the groups' placements {where}")
# the device stagings in the planner's memory rows, on gpt2_wide.cir (beside this script: every ZeRO slice over 2
# ranks a multiple of the arena's 256-byte alignment, so the planner's bytes and the memory plan's are the same)
wide = os.path.join(here, "gpt2_wide.cir")
wsh = shapes_of(wide)
wo = gen("w_optim", *z3, "--offload", "optim", cluster="h100:1x2", cir=wide)
wp = gen("w_params", *z3, "--offload", "params", cluster="h100:1x2", cir=wide)
K = wp["offload"]["transfers_in_flight"]
# a transfer up in the backward: the slices a block instance's backward gathers, or one group's outside the blocks
# (ln_f's): the weights (a linear layer's and a norm's input gradient read them), not the biases
xfer = {}
for q, n in wsh.items():
    if q.endswith(".bias"):
        continue
    m = re.match(r"h\.(\d+)\.", q)
    key = "h." + m.group(1) if m else q.rsplit(".", 1)[0]
    xfer[key] = xfer.get(key, 0) + 4 * n // 2
stg, wslices = K * max(xfer.values()), sum(4 * n // 2 for n in wsh.values())
wl = wp["lowering"]
check(wp["offload"]["param_staging_bytes"] == stg <= wl["param_staging_peak_bytes"],
      f"stagings: the planner counts {wp['offload']['param_staging_bytes']} bytes, the K={K} largest transfers "
      f"({max(xfer.values())}, counted {stg}); the program holds at most {wl['param_staging_peak_bytes']} at once "
      "(the forward's, with the biases)")
# both peaks priced where the slices count (optim: the update; params: the first block instance's backward, the
# stagings added there: that instance's transfer alone, the later instances' done and nothing after the blocks'
# backward reading a parameter, wte's slice going up for the head's), so the prediction moves by exactly the
# slices less those stagings
# (one transfer in flight: with K = 2 the last instance's backward, holding two, peaks once a member's own
# gradient slice is not counted written at its backward)
stg1 = max(v for k, v in xfer.items() if k.startswith("h."))
wp1 = gen("w_params_k1", *z3, "--offload", "params", "--offload-inflight", "1", cluster="h100:1x2", cir=wide)
dpred = wo["memory"]["predicted_peak_bytes"] - wp1["memory"]["predicted_peak_bytes"]
check(dpred == wslices - stg1 and wp1["memory"]["breakdown"].get("param_staging_bytes") == stg1 and
      wo["memory"]["breakdown"]["peak_at"] == wp1["memory"]["breakdown"]["peak_at"] == "first block backward",
      f"predicted peak {wo['memory']['predicted_peak_bytes']} -> {wp1['memory']['predicted_peak_bytes']} (one transfer "
      f"in flight): less the slices {wslices}, plus the first instance's stagings {stg1}")
# the program's arena peaks with stagings live (at most the planner's), and the prediction covers it (without the
# stagings it would not on gpt2-tiny: 42,112 predicted against a 43,264-byte arena)
at = wl["param_staging_at_peak_bytes"]
check(at == stg, f"gpt2_wide, params: the arena's peak (in the backward) holds {at} bytes of stagings, the planner's {stg}")
for nm, d in (("gpt2_wide", wp), ("gpt2-tiny", par)):
    pk, ar = d["memory"]["predicted_peak_bytes"], d["memory"]["planned_arena_bytes"]
    check(ar <= pk, f"{nm}, params: arena {ar} <= predicted {pk} (stagings {d['offload']['param_staging_bytes']})")
sys.exit(1 if fails else 0)

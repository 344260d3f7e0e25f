#!/usr/bin/env python3
"""pipeline_kept.py COMPILER E2E_SRC WORK — kept activations (--pp-activations,
docs/pipeline.md), read from the generated programs, independently of the
compiler's own layout:
  - each configuration is compiled with `--pp-activations keep` and `rerun`;
  - under keep, every stage's pipeline buffer (PREFIX_stage_pipe_bytes) is
    larger than under rerun by exactly the sum over its kept virtual stages
    of slots x stash, both read from the generated stash function (the
    `j % k` of its slot, its copies each at a 256-byte boundary), and the
    plan JSON's planned_kept_activations_bytes says the same;
  - a kept virtual stage's backward copies its activations back and runs no
    forward; under rerun it runs the forward again (the last stage neither);
  - the planner's predicted slots (pipeline.stages[].memory
    .kept_activations_bytes) are within TOL of the planned ones, and its step
    under keep is shorter than under rerun;
  - the memory plan of the arena itself is the same both ways.
Exit 0 when all hold."""
import json
import os
import re
import subprocess
import sys

cc, src_dir, work = sys.argv[1], sys.argv[2], sys.argv[3]
ir = os.path.join(src_dir, "..", "..", "examples", "ir")
TOL = 0.10  # the per-stage activation model (pipeprice.c) against the stash: gpt2 tiny 1.06
CONFIGS = [
    ("1f1b_2", f"{ir}/gpt2-tiny.cir", "gpt2_tiny", ["--cluster", "h100:1x2", "--pp", "2", "--micro-batches", "4"]),
    ("1f1b_4", f"{src_dir}/gpt2_tiny_4.cir", "gpt2_tiny", ["--cluster", "h100:1x4", "--pp", "4", "--micro-batches", "8"]),
    ("ileave_2", f"{src_dir}/llama_tiny_4.cir", "llama_tiny",
     ["--cluster", "h100:1x2", "--pp", "2", "--schedule", "interleaved:2", "--micro-batches", "4"]),
]
fail = []


def build(name, model, px, args, mode):
    out = os.path.join(work, f"{name}_{mode}")
    subprocess.run([cc, model, "--emit", "code", "--target", "cpu", "-q", "-o", out, "--pp-activations", mode] + args,
                   check=True)
    src = open(f"{out}/{px}.c").read()
    plan = json.load(open(f"{out}/{px}.plan.json"))
    t = re.search(rf"static const size_t {px}_stage_pipe_bytes\[\] = \{{([\d, ]+)\}};", src)
    if not t:
        sys.exit(f"{out}: no {px}_stage_pipe_bytes table")
    pipe = [int(x) for x in t.group(1).split(",")]
    arena = re.search(rf"static const size_t {px}_stage_scratch\[\] = \{{([\d, ]+)\}};", src).group(1)
    stash = {}  # virtual stage -> (slots, bytes a slot)
    for q, body in re.findall(rf"static void {px}_stash_out_s(\d+)\({px} \*M, int j\) \{{(.*?)\n\}}", src, re.S):
        k = int(re.search(r"\(j % (\d+)\)", body).group(1))
        b = sum((int(n) + 255) // 256 * 256 for n in re.findall(r"colrt_memcpy\(slot \+ \d+, [^,]+, (\d+),", body))
        stash[int(q)] = (k, b)
    return src, plan, pipe, arena, stash


for name, model, px, args in CONFIGS:
    sk, pk, pipe_k, arena_k, stash_k = build(name, model, px, args, "keep")
    sr, pr, pipe_r, arena_r, stash_r = build(name, model, px, args, "rerun")
    pp = pk["pipeline"]
    D, v = len(pp["stages"]), pp["chunks"]
    V = D * v
    if stash_r:
        fail.append(f"{name}: rerun stashes virtual stages {sorted(stash_r)}")
    if sorted(stash_k) != list(range(V - 1)):
        fail.append(f"{name}: kept virtual stages {sorted(stash_k)}, expected 0..{V - 2}")
    if arena_k != arena_r:
        fail.append(f"{name}: the stage arenas differ: {arena_k} kept, {arena_r} rerun")
    for d in range(D):
        slots = sum(k * b for q, (k, b) in stash_k.items() if q % D == d)
        grow = pipe_k[d] - pipe_r[d]
        mem = pp["stages"][d]["memory"]
        if grow != slots or mem["planned_kept_activations_bytes"] != slots:
            fail.append(f"{name} stage {d}: pipeline buffer grows by {grow}, the plan says "
                        f"{mem['planned_kept_activations_bytes']}, the stash functions hold {slots}")
        pred = mem["kept_activations_bytes"]
        if slots and not abs(pred / slots - 1) <= TOL:
            fail.append(f"{name} stage {d}: predicted kept {pred:.0f} B against planned {slots} ({pred / slots:.3f})")
        want = "none" if d == D - 1 and v == 1 else "kept"
        if pp["stages"][d]["activations"] != want:
            fail.append(f"{name} stage {d}: activations {pp['stages'][d]['activations']}, expected {want}")
        print(f"{name} stage {d}: kept slots {slots} B (predicted {pred:.0f}), pipeline buffer {pipe_r[d]} -> {pipe_k[d]}")
    # the backward of a kept virtual stage: its stash back, no forward
    for mode, src in (("keep", sk), ("rerun", sr)):
        for q in range(V):
            case = re.search(rf"(?:{px}_stash_in_s{q}\(M, a\[\d\]\);\s*)?(?:(?:M->pipe_rerun = 1;\s*)?{px}_forward_nodes_s{q}\(M\);\s*"
                             rf"(?:M->pipe_rerun = 0;\s*)?)?"
                             rf"(?:{px}_grads_in_s{q}\(M\);\s*)?{px}_backward_nodes_s{q}\(M\);", src)
            if not case:
                fail.append(f"{name} {mode}: no backward of virtual stage {q}")
                continue
            txt = case.group(0)
            fwd, back = f"forward_nodes_s{q}(" in txt, f"stash_in_s{q}(" in txt
            last = q == V - 1
            if mode == "keep" and (fwd or back == last):
                fail.append(f"{name} keep: virtual stage {q}'s backward: forward again {fwd}, stash back {back}")
            if mode == "rerun" and (back or fwd == last):
                fail.append(f"{name} rerun: virtual stage {q}'s backward: forward again {fwd}, stash back {back}")
    if not pk["pipeline"]["step_time_s"] < pr["pipeline"]["step_time_s"]:
        fail.append(f"{name}: predicted step kept {pk['pipeline']['step_time_s']} not below rerun {pr['pipeline']['step_time_s']}")

for f in fail:
    print("FAIL", f)
sys.exit(1 if fail else 0)

#!/usr/bin/env python3
"""grad_sync_once.py — under tensor parallelism each parameter's gradient is
summed over the data-parallel axes by ONE collective, the one the planner
prices (solver/problem.c ilp_grad_bucketed, cost_grad_sync): the clipping
norm's squares and the f32 cast read the gradient in the spec its update
reads it in (solver/placement.c read_cost), so the update reuses that sum
(in a bucket on the communication stream, or its resharded copy; without
ZeRO in a bucket, a 16-bit one's cast waiting for it, and under ZeRO-1 one
of a parameter held unsplit, the update's slice then copied out locally:
compiler/lower/schedule.c sharded_candidates), and a
mixed-precision master is held as its parameter's ZeRO stage says
(placement.c Walk.owner), not sliced by the update's cheapest read.

Before this, the norm read each gradient reduce-scattered (the cheapest read
for it alone) and the update all-reduced the same gradient again: two
collectives per parameter; under f16 the cast read it reduce-scattered, the
update ran on that slice and its result was gathered back (a ZeRO-1 the
planner had not chosen).

For each plan, from the lowered program (--dump-after lower, the last one):
every parameter gradient (X.grad, its f32 cast X.grad32, a micro-batch
accumulator X.grad_acc.next) is read by at most one collective resharding or
bucket, the plans' pending gradients by exactly one, and without ZeRO no
update's result is gathered (no all-gather of an X.next or X.master.next).

usage: grad_sync_once.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import os
import re
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
tiny = os.path.join(src, "examples/ir/gpt2-tiny.cir")
llama = os.path.join(src, "examples/ir/llama-tiny.cir")

# name, model, flags, ZeRO in the plan, the parameters whose sum is not in a bucket without ZeRO
# (GPT-2's tied embedding: its two parts summed in place, compiler/lower/schedule.c bucketable)
TIED = {"wte.weight"}
ROWS = [
    ("gpt2_tp_2x2", tiny, "--cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 105KB", False, TIED),
    ("gpt2_f16_tp_2x2", tiny, "--cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 130KB --dtype f16", False, TIED),
    ("gpt2_bf16_tp_2x2", tiny, "--cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 130KB --dtype bf16", False,
     TIED),
    ("llama_tp_2x2", llama, "--cluster h100:1x4 --mesh 2x2 --strategy megatron --mem 104KB", False, set()),
    ("gpt2_tp_zero1_2x2", tiny, "--cluster h100:1x4 --mesh 2x2 --zero 1 --mem 72KB", True, None),
]
COLL = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
GRAD = re.compile(r"^(.*)\.(grad|grad32|grad_acc\.next)$")

bad = 0
for name, model, flags, zero, unbucketed in ROWS:
    dump = os.path.join(work, name + ".lower")
    with open(dump + ".all", "w") as err:
        r = subprocess.run([cc, model, "--target", "cpu", "--emit", "code", "-q", "-o", os.path.join(work, name),
                            "--dump-after", "lower"] + flags.split(), stderr=err)
    if r.returncode:
        print("FAIL %s: colossal-compile exited %d" % (name, r.returncode))
        bad = 1
        continue
    text = open(dump + ".all").read()
    prog = text[text.rfind("; ---- program after lower ----"):]  # a limit the arena misses re-plans
    params = set(re.findall(r"^\s*\d+ (?:adamw|sgd|lamb|lars) %(\S+?)(?:\.master)?\.next ", prog, re.M))
    sums, pending, gathered, alone = {}, set(), [], set()
    for line in prog.splitlines():
        m = re.match(r"^\s*reshard %(\S+) (\S+) -> (.*) = ", line)
        if m:
            g = GRAD.match(m.group(1))
            if g and g.group(1) in params and any(c in m.group(3) for c in COLL):
                sums[g.group(1)] = sums.get(g.group(1), 0) + 1
                alone.add(g.group(1))
            if g and g.group(1) in params and "P" in m.group(2):
                pending.add(g.group(1))
            if not zero and re.search(r"\.next$", m.group(1)) and "all-gather" in m.group(3):
                gathered.append(m.group(1))
        m = re.match(r"^\s*bucket \d+: .*stream: ([^;]*)", line)  # the members, before "; over" its axes' ranges
        if m:
            for v in m.group(1).split():
                g = GRAD.match(v.lstrip("%"))
                if g and g.group(1) in params:
                    sums[g.group(1)] = sums.get(g.group(1), 0) + 1
                    pending.add(g.group(1))
    twice = sorted(p for p, n in sums.items() if n > 1)
    missing = sorted(p for p in pending if sums.get(p, 0) != 1)
    # without ZeRO, on the communication stream in a bucket (a 16-bit one: its cast waits for it),
    # as the planner prices it (ilp_grad_bucketed), not per tensor on the compute stream
    outside = sorted(alone - unbucketed) if unbucketed is not None else []
    if not params or not pending or twice or missing or gathered or outside:
        print("FAIL %s: %d parameters, %d gradients pending; summed more than once: %s; not once: %s; "
              "%d updates' results gathered without ZeRO: %s; %d summed alone, not in a bucket: %s" %
              (name, len(params), len(pending), " ".join(twice[:4]) or "-", " ".join(missing[:4]) or "-",
               len(gathered), " ".join(gathered[:3]) or "-", len(outside), " ".join(outside[:3]) or "-"))
        bad = 1
    else:
        print("ok   %s: %d parameters, each of %d pending gradients summed by one collective" %
              (name, len(params), len(pending)))
sys.exit(bad)

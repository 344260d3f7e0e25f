#!/usr/bin/env python3
"""bucket_axes.py — the tensor-parallel lowering's gradient buckets: one per run (a block
instance's gradients, the head's, the embedding's) whatever the members' pending axes,
each axis all-reducing the range of the members pending over it
(compiler/lower/schedule.c make_buckets, axes_rank; docs/sharding.md).

GPT-2 tiny's vocabulary-parallel 2x2 plan (tests/e2e gpt2_vocab_2x2): a layer's norm
weights and the row-parallel biases are pending over the tensor-parallel axis as well as
the batch's, between the matrices' gradients pending over the batch's only. The lowering
made a bucket per change of set: 20 bucket all-reduces a step (13 over axis 0, 7 over
axis 1) where one bucket per run needs 7. Checked:
  - each block instance's gradients in one bucket, summed over both axes, axis 1's range
    a part of it (its members pending over axis 1);
  - the generated program all-reduces each bucket once per axis, on that range
    (offset and element count as the lowering's dump says; the plan's gradients f32);
  - the replay runs as many all-reduces on the communication stream.
The planner's price of it (a latency per run and axis): test_solver_planner bucket_latency.

usage: bucket_axes.py COLOSSAL_COMPILE SOURCE_DIR WORK_DIR
"""
import os
import re
import subprocess
import sys

cc, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += 0 if ok else 1


out = os.path.join(work, "vocab")
r = subprocess.run([cc, os.path.join(src, "examples/ir/gpt2-tiny.cir"), "--target", "cpu", "--cluster", "h100:1x4",
                    "--mesh", "2x2", "--strategy", "megatron", "--mem", "90KB", "-q", "--no-share", "--emit", "code", "-o", out,
                    "--dump-after", "lower.buckets"], capture_output=True, text=True, check=True)
buckets = []  # (members, {axis: (lo, hi)})
for line in r.stderr.splitlines():
    m = re.match(r"\s+bucket (\d+): \d+ gradients \(\d+ bytes\) packed, [^:]*: (.*)$", line)
    if not m:
        continue
    members, _, over = m.group(2).partition("; over")
    ranges = {int(a): (int(lo), int(hi)) for a, lo, hi in re.findall(r"@(\d) \[(\d+), (\d+)\)", over)}
    buckets.append(([w.lstrip("%") for w in members.split()], ranges))
check(len(buckets) > 0, "the lowering's dump lists %d buckets" % len(buckets))
for inst in ("h.0.", "h.1."):
    own = [b for b in buckets if any(x.startswith(inst) for x in b[0])]
    check(len(own) == 1 and all(x.startswith(inst) for x in own[0][0]),
          "block instance %s: its gradients in %d bucket(s)" % (inst, len(own)))
    if len(own) == 1:
        rg = own[0][1]
        check(sorted(rg) == [0, 1] and rg[1][1] - rg[1][0] < rg[0][1] - rg[0][0],
              "  summed over axes %s: axis 1 on [%d, %d) of [%d, %d)" %
              (sorted(rg), *rg.get(1, (0, 0)), *rg.get(0, (0, 0))))
code = open(os.path.join(out, "gpt2_tiny.c")).read()
ars = []  # per bucket, its all-reduces (axis, offset, elems)
for blk in re.split(r"/\* gradient bucket \d+:", code)[1:]:
    blk = blk.split("colrt_event_record(M->bucket_done")[0]
    ars.append([(int(a), int(o), int(n)) for a, o, n in re.findall(
        r"colrt_all_reduce\(M->mesh, (\d), M->arena\.base \+ (\d+), M->arena\.base \+ \d+, (\d+), \w+, COLRT_SUM, M->comm\)",
        blk)])
check(len(ars) == len(buckets), "the program packs %d buckets" % len(ars))
same = len(ars) == len(buckets)
for b, a in zip(buckets, ars):
    base = min(o for _, o, _ in a) if a else 0
    want = sorted((ax, (lo - b[1][min(b[1])][0]) * 4, hi - lo) for ax, (lo, hi) in b[1].items())
    got = sorted((ax, o - base, n) for ax, o, n in a)
    same &= want == got
check(same, "each bucket all-reduced once per axis on its range")
n_ar = sum(len(a) for a in ars)
sim = subprocess.run([cc, "simulate", os.path.join(out, "gpt2_tiny.plan.json"), "--breakdown"], capture_output=True,
                     text=True, check=True).stdout
m = re.search(r"all-reduce\s+on the communication stream:\s+(\d+), ([0-9.e+-]+) s", sim)
check(m is not None and int(m.group(1)) == n_ar, "the replay runs %s all-reduces on the communication stream (%d)"
      % (m.group(1) if m else "no", n_ar))
sys.exit(1 if fails else 0)

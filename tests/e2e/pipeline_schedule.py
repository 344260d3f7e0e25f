#!/usr/bin/env python3
"""pipeline_schedule.py DIR PREFIX — the generated pipeline's schedule is
exactly the planned one, and it is sound, checked here independently of the
compiler's own checker (solver/pipeline.c):
  - every stage's action table in DIR/PREFIX.c equals the plan's
    (DIR/PREFIX.plan.json pipeline.stages[].actions), action by action;
  - each stage runs the forward then the backward of every micro-batch once,
    in order, holding at most p - s in flight;
  - every send has its receive: between each pair of neighbours, in each
    direction, the sends and the receives are as many and carry the same
    micro-batches in the same order, and each transfer's element count on
    the sender equals the receiver's (parsed from the generated
    colrt_sendrecv calls);
  - run with rendezvous transfers (a transfer waits for its partner to
    post), every stage reaches its end: no deadlock.
Exit 0 when all hold."""
import json
import re
import sys

d, px = sys.argv[1], sys.argv[2]
src = open(f"{d}/{px}.c").read()
plan = json.load(open(f"{d}/{px}.plan.json"))["pipeline"]
P, m = len(plan["stages"]), plan["micro_batches"]
kinds = {"forward": 0, "backward": 1, "next": 2, "prev": 3}
fail = []

acts = []
for s in range(P):
    t = re.search(rf"static const int {px}_sched_s{s}\[(\d+)\]\[4\] = \{{(.*?)\n\}};", src, re.S)
    if not t:
        sys.exit(f"no schedule table for stage {s}")
    rows = [tuple(int(x) for x in r) for r in re.findall(r"\{(-?\d+), (-?\d+), (\d), (\d)\}", t.group(2))]
    planned = [(kinds[a["do"]], a["micro_batch"], int(a["send"]), int(a["recv"])) for a in plan["stages"][s]["actions"]]
    if len(rows) != int(t.group(1)) or rows != planned:
        fail.append(f"stage {s}: the generated table differs from the plan's actions")
    acts.append(rows)

for s, a in enumerate(acts):  # forwards then backwards, in order, in flight <= p - s
    f = b = 0
    for k, j, _, _ in a:
        if k == 0:
            fail += [f"stage {s}: forward {j}, expected {f}"] if j != f else []
            f += 1
            if f - b > P - s:
                fail.append(f"stage {s}: {f - b} micro-batches in flight")
        elif k == 1:
            fail += [f"stage {s}: backward {j}, expected {b}"] if j != b or b >= f else []
            b += 1
    if f != m or b != m:
        fail.append(f"stage {s}: {f} forwards, {b} backwards of {m}")


def counts(s, fn):  # the elements each colrt_sendrecv half of stage s's transfer function moves: [(send, recv)]
    body = re.search(rf"static void {px}_{fn}_s{s}\(.*?\n\}}", src, re.S)
    out = []
    for c in re.findall(r"colrt_sendrecv\((.*?)\);", body.group(0) if body else ""):
        f = [x.strip() for x in c.split(",")]
        out.append((None if f[2] == "-1" else int(f[4]), None if f[5] == "-1" else int(f[7])))
    return out


for b in range(P - 1):
    nx, pv = counts(b, "next"), counts(b + 1, "prev")
    if [x[0] for x in nx] != [x[1] for x in pv] or [x[1] for x in nx] != [x[0] for x in pv]:
        fail.append(f"stages {b}, {b + 1}: the element counts sent and received differ: {nx} against {pv}")
    for dr in (0, 1):  # 0: forward values b -> b+1; 1: gradients b+1 -> b
        snd, rcv = (b + 1, b) if dr else (b, b + 1)
        sk, rk = (3, 2) if dr else (2, 3)
        sent, got, cur, nxt = [], [], None, 0
        for k, j, sd, rv in acts[snd]:
            if k == (1 if dr else 0):
                cur = j
            if k == sk and sd:
                sent.append(cur)
        for k, j, sd, rv in acts[rcv]:
            if dr and k == 1:
                nxt = j + 1
            if k == rk and rv:
                got.append(nxt if dr else j)
        if sent != got:
            fail.append(f"{'gradients' if dr else 'forward values'} {snd} -> {rcv}: sent {sent}, received {got}")

pc = [0] * P  # rendezvous run
posted = {}  # (stage, kind 'sn'/'rn'/'sp'/'rp') -> halves done


def cur_has(t, kind, half):
    return pc[t] < len(acts[t]) and acts[t][pc[t]][0] == kind and acts[t][pc[t]][half]


progress = True
while progress:
    progress = False
    for s in range(P):
        if pc[s] >= len(acts[s]):
            continue
        k, j, sd, rv = acts[s][pc[s]]
        ok = True
        if k in (2, 3):
            t, pk, mine, theirs = (s + 1, 3, "n", "p") if k == 2 else (s - 1, 2, "p", "n")
            if sd and posted.get((t, "r" + theirs), 0) + cur_has(t, pk, 3) < posted.get((s, "s" + mine), 0) + 1:
                ok = False
            if rv and posted.get((t, "s" + theirs), 0) + cur_has(t, pk, 2) < posted.get((s, "r" + mine), 0) + 1:
                ok = False
            if ok:
                posted[(s, "s" + mine)] = posted.get((s, "s" + mine), 0) + sd
                posted[(s, "r" + mine)] = posted.get((s, "r" + mine), 0) + rv
        if ok:
            pc[s] += 1
            progress = True
for s in range(P):
    if pc[s] < len(acts[s]):
        fail.append(f"deadlock: stage {s} stops at action {pc[s]} of {len(acts[s])}")

for f in fail:
    print("FAIL:", f)
print(f"pipeline_schedule: {P} stages, {m} micro-batches, {sum(len(a) for a in acts)} actions: "
      f"{'ok' if not fail else str(len(fail)) + ' problems'}")
sys.exit(1 if fail else 0)

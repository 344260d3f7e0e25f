#!/usr/bin/env python3
"""pipeline_interleaved.py DIR PREFIX — an interleaved 1F1B program's schedule
(--schedule interleaved:V) is exactly the planned one, and sound, checked here
independently of the compiler's own checker (solver/pipeline.c):
  - every device's action table in DIR/PREFIX.c equals the plan's
    (DIR/PREFIX.plan.json pipeline.stages[].actions), action by action: each
    compute action's model chunk and micro-batch, each transfer's messages;
  - each device runs every chunk's forward then backward of every
    micro-batch once, in order, and Megatron-LM's order: the k-th forward
    runs chunk (k mod pv) / p on micro-batch (k / pv) p + k mod p;
  - a virtual stage's inputs arrive before it runs and its results leave
    after; every message is received once, and between each ordered pair of
    devices in the order sent; the generated transfer function moves as many
    elements on the sender as on the receiver, to and from the right peer;
  - run with rendezvous transfers (each transfer's messages wait for their
    partners), every device reaches its end: no deadlock.
Exit 0 when all hold."""
import json
import re
import sys

d, px = sys.argv[1], sys.argv[2]
src = open(f"{d}/{px}.c").read()
plan = json.load(open(f"{d}/{px}.plan.json"))["pipeline"]
P, m, v = len(plan["stages"]), plan["micro_batches"], plan["chunks"]
V = P * v
fail = []
if plan["schedule"] != "interleaved" or v < 2:
    sys.exit(f"not an interleaved plan: schedule {plan['schedule']}, chunks {v}")

acts = []  # per device: ("F"|"B", chunk, mb) or ("X", [(send, grad, q, mb), ...])
for s in range(P):
    t = re.search(rf"static const int {px}_sched_s{s}\[(\d+)\]\[20\] = \{{(.*?)\n\}};", src, re.S)
    if not t:
        sys.exit(f"no schedule table for stage {s}")
    rows = []
    for r in re.findall(r"\{([-\d, ]+)\}", t.group(2)):
        x = [int(y) for y in r.split(",")]
        if x[0] in (0, 1):
            rows.append(("FB"[x[0]], x[1], x[2]))
        elif x[0] == 4:
            rows.append(("X", [tuple(x[4 + 4 * i:8 + 4 * i]) for i in range(x[3])]))
        else:
            fail.append(f"stage {s}: action kind {x[0]}")
    planned = []
    for a in plan["stages"][s]["actions"]:
        if a["do"] in ("forward", "backward"):
            planned.append(("F" if a["do"] == "forward" else "B", a["chunk"], a["micro_batch"]))
        else:
            ms = [(1, int(x["what"] == "gradients"), x["virtual_stage"], x["micro_batch"]) for x in a["sends"]]
            ms += [(0, int(x["what"] == "gradients"), x["virtual_stage"], x["micro_batch"]) for x in a["receives"]]
            planned.append(("X", ms))
    if len(rows) != int(t.group(1)) or rows != planned:
        fail.append(f"stage {s}: the generated table differs from the plan's actions")
    acts.append(rows)

for s, a in enumerate(acts):  # Megatron-LM's order; each chunk's forwards then backwards, in order
    fw = [(c, j) for k, *r in a if k == "F" for c, j in [r]]
    bw = [(c, j) for k, *r in a if k == "B" for c, j in [r]]
    want_f = [((k % (P * v)) // P, (k // (P * v)) * P + k % P) for k in range(m * v)]
    want_b = [(v - 1 - (k % (P * v)) // P, (k // (P * v)) * P + k % P) for k in range(m * v)]
    if fw != want_f or bw != want_b:
        fail.append(f"stage {s}: not Megatron-LM's interleaved order")
    done_f = set()
    for k, *r in a:
        if k == "F":
            done_f.add(tuple(r))
        elif k == "B" and tuple(r) not in done_f:
            fail.append(f"stage {s}: backward of chunk {r[0]} micro-batch {r[1]} before its forward")

got, sent = set(), set()
pairs = {}  # (from, to) -> [message] in the sender's order, and the receiver's
for s, a in enumerate(acts):
    for k, *r in a:
        if k in "FB":
            c, j = r
            q = c * P + s
            need = None if (k == "F" and q == 0) or (k == "B" and q == V - 1) else ((0, q - 1, j) if k == "F" else (1, q + 1, j))
            if need and need not in got:
                fail.append(f"stage {s}: virtual stage {q}'s {k} of micro-batch {j} runs before its input arrives")
            sent_ok = (0 if k == "F" else 1, q, j)
            sent.add(("ran",) + sent_ok)
        else:
            for snd, g, q, j in r[0]:
                to, frm = ((q - 1 if g else q + 1) % P, q % P)
                if snd:
                    if ("ran", g, q, j) not in sent or frm != s:
                        fail.append(f"stage {s}: sends virtual stage {q}'s message of micro-batch {j} before computing it")
                    pairs.setdefault((frm, to), [[], []])[0].append((g, q, j))
                else:
                    if to != s or (g, q, j) in got:
                        fail.append(f"stage {s}: receives virtual stage {q}'s message of micro-batch {j} twice or not its own")
                    got.add((g, q, j))
                    pairs.setdefault((frm, to), [[], []])[1].append((g, q, j))
for k, (a, b) in pairs.items():
    if a != b:
        fail.append(f"devices {k[0]} -> {k[1]}: received in another order than sent")

# the transfer function's cases: (virtual stage q, gradients, send) -> (elements, peer)
body = re.search(rf"static void {px}_xfer\(.*?\n\}}\n", src, re.S)
cases = {}
for c, cnt, peer in re.findall(r"case (\d+):.*?x\[i\]\.count = (\d+), x\[i\]\.peer = (\d+);", body.group(0) if body else "", re.S):
    c = int(c)
    cases[(c // 4, c // 2 % 2, c % 2)] = (int(cnt), int(peer))
for q in range(V):
    for g in (0, 1):
        if (g and q == 0) or (not g and q == V - 1):
            continue
        s_, r_ = cases.get((q, g, 1)), cases.get((q, g, 0))
        to = (q - 1 if g else q + 1) % P
        if not s_ or not r_ or s_[0] != r_[0] or s_[1] != to or r_[1] != q % P:
            fail.append(f"virtual stage {q}'s {'gradients' if g else 'forward values'}: send {s_} and receive {r_} do not match")

# rendezvous: a transfer completes when every message's partner half is posted
ordn = []
cnt = {}
for s, a in enumerate(acts):
    o = []
    for k, *r in a:
        if k != "X":
            o.append(None)
            continue
        hs = []
        for snd, g, q, j in r[0]:
            key = ((q % P, (q - 1 if g else q + 1) % P), snd)
            cnt[key] = cnt.get(key, 0) + 1
            hs.append((key, cnt[key]))
        o.append(hs)
    ordn.append(o)
pc, posted = [0] * P, set()


def post(s):
    if pc[s] < len(acts[s]) and ordn[s][pc[s]]:
        posted.update(ordn[s][pc[s]])


for s in range(P):
    post(s)
progress = True
while progress:
    progress = False
    for s in range(P):
        if pc[s] >= len(acts[s]):
            continue
        hs = ordn[s][pc[s]]
        if not hs or all(((pair, 1 - snd), n) in posted for (pair, snd), n in hs):
            pc[s] += 1
            post(s)
            progress = True
for s in range(P):
    if pc[s] < len(acts[s]):
        fail.append(f"deadlock: stage {s} waits at action {pc[s]} of {len(acts[s])}")

for f in fail:
    print("FAIL:", f)
print(f"{'ok' if not fail else 'FAILED'}: {P} stages x {v} chunks, {m} micro-batches, {sum(len(a) for a in acts)} actions")
sys.exit(1 if fail else 0)

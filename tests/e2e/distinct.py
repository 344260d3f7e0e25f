#!/usr/bin/env python3
"""distinct.py — every e2e program tests what its name says, and no two test one program.

An e2e rule asks the planner for a plan (a --mem limit, a forced stage); as the cost model
changes, the planner may answer another plan. llama_selective_zero2_2 (selective recompute
under ZeRO-2 at 100 KB) drifted to ZeRO 0 and became, byte for byte, llama_selective_tp_1x2's
program: nothing ran selective recompute under ZeRO-2 any more, and no test said so. This
checks, over the generated programs in the build tree:

- no two programs' C sources and headers are identical, except the pairs that are one
  program by design (a CUDA program's C twin: NAME_cuda; the PyTorch comparisons: *torch*,
  the interpreter's same program under its own name; and the pairs listed in SAME, each
  with its reason);
- a program named ..._zeroN_... plans some group at ZeRO stage N, and, outside the
  tensor-parallel lowering (whose `lowering.zero_stage` is 0: it runs each group's stage from
  the Placement), is lowered at stage N or above: a plan with every op replicated (one
  data-parallel rank) is lowered at ZeRO-1 at most whatever it plans (compiler/lower/lower.c
  lower_build), and llama_selective_zero2_2, forced to --zero 2, had become such a plan: planned
  at ZeRO-2, lowered at ZeRO-1 (2026-12-06).

usage: distinct.py E2E_BUILD_DIR
"""
import glob
import hashlib
import json
import os
import re
import sys

# one program under two names, on purpose
SAME = {
    # --pp-activations keep forced where the planner's auto keeps too: kept so that a change of
    # auto leaves the kept interleaved schedule tested (tests/e2e/CMakeLists.txt)
    frozenset(("gpt2_pp_2_ileave_2_m8", "gpt2_pp_2_ileave_2_keep_m8")),
}

root = sys.argv[1]
progs = {}
for d in sorted(glob.glob(os.path.join(root, "*/"))):
    name = os.path.basename(d.rstrip("/"))
    files = sorted(f for f in glob.glob(d + "*") if f.endswith((".c", ".h")))
    plans = glob.glob(d + "*.plan.json")
    if not files or not plans:
        continue
    h = hashlib.sha256()
    for f in files:
        h.update(os.path.basename(f).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(fh.read())
    progs[name] = (h.hexdigest(), plans[0])

if len(progs) < 50:
    sys.exit("FAIL: %d generated e2e programs under %s; the suite generates over 150" % (len(progs), root))

errs = []
by_hash = {}
for name, (digest, _) in progs.items():
    by_hash.setdefault(digest, []).append(name)


def twin(a, b):
    if frozenset((a, b)) in SAME:
        return True
    for x, y in ((a, b), (b, a)):
        if x.endswith("_cuda") or "torch" in x:
            return True
    return False


for names in by_hash.values():
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if not twin(a, b):
                errs.append("%s and %s generate the same program: one of the two rules no longer plans "
                            "what its name says (force it: --zero, --strategy, --recompute)" % (a, b))

checked = 0
for name, (_, plan_path) in progs.items():
    m = re.search(r"(?:^|_)zero([0-3])(?:_|$)", name)
    if not m:
        continue
    with open(plan_path) as fh:
        plan = json.load(fh)
    stages = sorted({z["stage"] for z in plan.get("zero", [])})
    checked += 1
    if int(m.group(1)) not in stages:
        errs.append("%s: no group at ZeRO-%s (stages %s)" % (name, m.group(1), stages))
    low = plan.get("lowering", {})
    if not low.get("tensor_parallel") and low.get("zero_stage", 0) < int(m.group(1)):
        errs.append("%s: planned at ZeRO-%s, lowered at ZeRO-%s (data-parallel ranks %s: every op replicated "
                    "runs ZeRO-1 at most; force a batch split, e.g. --strategy zero%s)"
                    % (name, m.group(1), low.get("zero_stage"), low.get("data_parallel_ranks"), m.group(1)))

for e in errs:
    print("FAIL:", e)
print("%d e2e programs, %d distinct; %d named for a ZeRO stage, checked" % (len(progs), len(by_hash), checked))
sys.exit(1 if errs else 0)

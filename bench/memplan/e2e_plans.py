#!/usr/bin/env python3
"""e2e_plans.py — plan and lower every e2e test's program, as its test does.

Reads each colossal_e2e(NAME MODEL PREFIX NP args...) call of
tests/e2e/CMakeLists.txt, runs `colossal-compile MODEL --emit code --target
cpu -q -o DIR args...` (the test's own command) and prints, from the plan
JSON: the arena over the predicted peak (memory.planned_over_predicted) and
the completion's unpriced reshardings (completion.unpriced_reshardings). The
last lines count the plans within [0.97, 1.03] and those with an unpriced
resharding. With --unchunked, a plan made with --chunk-bytes is made again
without it and its ratio printed beside (the memory model's terms without
chunks: what the chunks' own terms stand on). Deterministic (no timing).

usage: bench/memplan/e2e_plans.py [BUILD_DIR] [-j N] [--only REGEX] [--unchunked]
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def calls():
    """The colossal_e2e calls: (name, model, args), variables substituted."""
    text = open(os.path.join(src, "tests/e2e/CMakeLists.txt")).read()
    text = re.sub(r"#[^\n]*", "", text)
    var = {"PROJECT_SOURCE_DIR": src, "CMAKE_CURRENT_SOURCE_DIR": os.path.join(src, "tests/e2e")}
    out = []
    pos = 0
    pat = re.compile(r"\b(set|colossal_e2e)\(")
    while True:
        m = pat.search(text, pos)
        if not m:
            break
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        body = text[m.end():i - 1]
        pos = i
        for _ in range(3):
            body = re.sub(r"\$\{(\w+)\}", lambda v: var.get(v.group(1), v.group(0)), body)
        words = body.split()
        if m.group(1) == "set":
            if len(words) >= 2:
                var[words[0]] = " ".join(words[1:])
            continue
        if "$" in body or words[0] == "name":  # the function's definition, or a call in a loop
            continue
        out.append((words[0], words[1], words[4:]))
    return out


def plan(cc, work, call):
    name, model, args = call
    d = os.path.join(work, name)
    r = subprocess.run([cc, model, "--emit", "code", "--target", "cpu", "-q", "-o", d] + args,
                       capture_output=True, text=True)
    if r.returncode:
        return name, None, r.stderr.strip().splitlines()[:1]
    js = [f for f in os.listdir(d) if f.endswith(".plan.json")]
    return name, json.load(open(os.path.join(d, js[0]))), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--unchunked", action="store_true")
    a = ap.parse_args()
    cc = os.path.join(a.build, "compiler/colossal-compile")
    todo = [c for c in calls() if re.search(a.only, c[0])]

    def unchunked(c):
        name, model, args = c
        if not a.unchunked or "--chunk-bytes" not in args:
            return None
        k = args.index("--chunk-bytes")
        r = plan(cc, work, (name + ".unchunked", model, args[:k] + args[k + 2:]))[1]
        return r["memory"].get("planned_over_predicted", 0) if r else None

    fit = unpriced = lowered = 0
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(a.j) as ex:
        print(f"{'test':<40} {'mesh':<6} {'arena/pred':>10} {'unpriced':>8} {'unpriced_s':>10}"
              + (f" {'unchunked':>9}" if a.unchunked else ""))
        for (name, p, err), u in zip(ex.map(lambda c: plan(cc, work, c), todo), ex.map(unchunked, todo)):
            if p is None:
                print(f"{name:<40} not lowered: {err}")
                continue
            lowered += 1
            ratio = p["memory"].get("planned_over_predicted", 0)
            c = p.get("completion", {})
            n, s = c.get("unpriced_reshardings", 0), c.get("unpriced_resharding_s", 0)
            mesh = "x".join(str(x) for x in p["mesh"])
            fit += 0.97 <= ratio <= 1.03
            unpriced += n > 0
            flag = "" if 0.97 <= ratio <= 1.03 else "  *"
            print(f"{name:<40} {mesh:<6} {ratio:10.3f} {n:8d} {s:10.3g}" + (f" {u:9.3f}" if u else "") + flag)
    print(f"{len(todo)} plans, {lowered} lowered: {fit} within [0.97, 1.03]; {unpriced} with unpriced reshardings")
    return 0


if __name__ == "__main__":
    sys.exit(main())

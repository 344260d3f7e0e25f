#!/usr/bin/env python3
"""run.py — how far the planner's predicted step (step_time_s, the ILP's
terms) and the simulated step (the generated program replayed op by op,
colossal-compile simulate) disagree, over every end-to-end test's plan
(tests/e2e/CMakeLists.txt, CPU programs of tiny models on 1-4 ranks) and the
planner benchmark's models (bench/solver/gen_models.py, bf16 on H100s).

    python3 bench/simulate/run.py --compiler build/compiler/colossal-compile [--set e2e,bench] [--only REGEX]

For each plan it writes one Markdown row: predicted and simulated seconds,
their ratio, and the difference split by cause (simulated less predicted):
  compute    forward+backward kernels (not recomputed)  vs  compute_s
  recompute  recomputed kernels                          vs  recompute_s
  update     the update part's kernels (norms, optimizer) and every device copy (the
             gradient buckets' packing, the strided staging of reshardings, the
             commits into the leaves) vs optimizer_s (which prices the packing; the
             staging is priced with the resharding, in comm) less grad_norm_sum_s
             + chunk_copy_s (ZeRO chunks' copies)
  comm       the step less kernels and copies (collectives on the critical path)
             vs resharding_s + grad_sync_exposed_s + zero_gather_s + grad_norm_sum_s
             (the gradient norm's all-reduces, of optimizer_s) (less local copies),
             both without host offload's work
  offload    host offload: what the host AdamW and the host copies add to the simulated step
             (offload_exposed_s) vs offload_exposed_s + param_fetch_exposed_s
A pipelined (1F1B) plan's row has the step only (the step_breakdown's terms are the whole
model's, not the pipeline's: compare pipeline.stages[] with simulate's per-stage lines) and
the share of it the links' latency makes; the causes' means leave those rows out.
  of which latency   the simulation's exposed communication less the same replay with
             every link's latency ~0 (--cluster with latency_us 1e-6): the share of
             the comm column the collectives' per-call latency makes
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "solver"))
import gen_models  # noqa: E402


def e2e_cases():
    """The e2e tests' plans on the examples' models (${_ir}), and every interleaved one (on
    tests/e2e's own 4-block models; `set(_ileave ...)` expanded)."""
    e2e = os.path.join(ROOT, "tests", "e2e")
    text = open(os.path.join(e2e, "CMakeLists.txt")).read()
    var = {"_ir": os.path.join(ROOT, "examples", "ir"), "CMAKE_CURRENT_SOURCE_DIR": e2e}
    for m in re.finditer(r"^set\((_ileave) ([^)]*)\)", text, re.M):
        var[m.group(1)] = m.group(2)
    for m in re.finditer(r"^colossal_e2e\(([^)]*)\)", text, re.M):
        call = re.sub(r"\$\{(\w+)\}", lambda v: var.get(v.group(1), v.group(0)), m.group(1).replace("\n", " "))
        words = shlex.split(call)
        ileave = any(w.startswith("interleaved") for w in words)
        if len(words) < 4 or not ("${_ir}" in m.group(1).split()[1] or ileave) or "${" in call:
            continue
        name, model, args = words[0], words[1], words[4:]
        yield "e2e " + name, [model, "--target", "cpu"] + args


def bench_cases(work):
    clusters = {8: "h100:1x8", 64: "h100:8x8"}
    for m in ["gpt2-124m", "gpt2-1.5b", "llama-7b", "llama-70b"]:
        for n in (8, 64):
            d = os.path.join(work, f"{m}-{n}")
            os.makedirs(d, exist_ok=True)
            cir = gen_models.write(d, m, n)
            yield f"bench {m} {n}", [cir, "--cluster", clusters[n], "--dtype", "bf16", "--target", "cuda",
                                     "--time-limit", "60"]


def row(cc, name, args, out):
    t0 = time.monotonic()
    p = subprocess.run([cc] + args + ["--emit", "code", "-q", "-o", out], capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0].replace("colossal-compile: error: ", "")
        return f"| {name} | | | | no code: {msg[:80]} |||||| "
    plan = [f for f in os.listdir(out) if f.endswith(".plan.json")][0]
    path = os.path.join(out, plan)
    d = json.load(open(path))
    if "program" not in d:  # written by a compiler that records no program for it (before SIM_VERSION 3: interleaved)
        return f"| {name} | | | | no program recorded |||||| "
    s = json.loads(subprocess.run([cc, "simulate", path, "--json"], capture_output=True, text=True, check=True).stdout)
    # the same replay with every link's latency ~0: how much of the exposed communication is latency
    pipe = "pipeline" in d["program"]  # a pipelined program: --cluster is the whole cluster
    cl = d["program"]["pipeline"]["cluster"] if pipe else d["program"]["cluster"]
    for link in ("intra", "inter"):
        cl[link]["latency_us"] = 1e-6
    nolat = os.path.join(out, "no-latency.cluster.json")
    json.dump(cl, open(nolat, "w"))
    s0 = json.loads(subprocess.run([cc, "simulate", path, "--json", "--cluster", nolat], capture_output=True,
                                   text=True, check=True).stdout)
    b = d["step_breakdown"]
    # the gradient norm's all-reduces (of optimizer_s): communication, as the replay counts them
    norm = b.get("grad_norm_sum_s", 0)
    comm_ilp = b["resharding_s"] + b["grad_sync_exposed_s"] + b["zero_gather_s"] + norm
    # the parts' kernels without their copies (an older compiler does not split them: its
    # copies stay in their parts, and the update column leaves them out)
    cp = s.get("copy_by_part", [0, 0, 0])
    copies = s["copy_s"] if "copy_by_part" in s else 0
    kern = [s["forward_s"] - cp[0], s["backward_s"] - cp[1], s["update_s"] - cp[2]]
    cause = {
        "compute": kern[0] + kern[1] - s["recompute_s"] - b["compute_s"],
        "recompute": s["recompute_s"] - b["recompute_s"],
        "update": kern[2] + copies - (b["optimizer_s"] - norm) - b.get("chunk_copy_s", 0),
        "comm": s["exposed_comm_s"] - comm_ilp,
        "offload": s["offload_exposed_s"] - b.get("offload_exposed_s", 0) - b.get("param_fetch_exposed_s", 0),
        "of which latency": s["exposed_comm_s"] - s0["exposed_comm_s"],
    }
    pred, sim = d["step_time_s"], s["step_s"]
    mesh = "x".join(str(x) for x in d["mesh"])
    if pipe:  # the step_breakdown's terms are not the pipeline's (pipeline.stages[] are): the step only,
        # and the share of it the links' latency makes (the causes' means leave these rows out)
        mesh = f"pp{s['stages']} " + mesh
        lat = 100 * (s["step_s"] - s0["step_s"]) / pred
        return (f"| {name} | {mesh} {d['chosen_by']} | {pred:.4g} | {sim:.4g} | {sim / pred:.3f} | | | | | | {lat:+.1f}% |",
                sim / pred, None, pred)
    cells = " | ".join(f"{100 * v / pred:+.1f}%" for v in cause.values())
    return (f"| {name} | {mesh} {d['chosen_by']} | {pred:.4g} | {sim:.4g} | {sim / pred:.3f} | {cells} |",
            sim / pred, cause, pred)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--work", default="/tmp/colossal-bench-simulate")
    ap.add_argument("--set", default="e2e,bench")
    ap.add_argument("--only", default="", help="only the plans whose name matches this regular expression")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cases = []
    if "e2e" in a.set:
        cases += list(e2e_cases())
    if "bench" in a.set:
        cases += list(bench_cases(a.work))
    cases = [c for c in cases if re.search(a.only, c[0])]
    print("| plan | mesh, chosen by | predicted s | simulated s | sim/pred | compute | recompute | update+copies | comm "
          "| offload | of which latency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, causes = [], {}
    # each run's programs in a folder of its own, removed at the end: a case
    # folder reused from an earlier run (another case list) held another
    # model's plan beside this one's, and the row read whichever came first
    run = tempfile.mkdtemp(dir=a.work, prefix="run-")
    for k, (name, args) in enumerate(cases):
        r = row(a.compiler, name, args, os.path.join(run, f"case{k}"))
        if isinstance(r, str):
            print(r, flush=True)
            continue
        print(r[0], flush=True)
        ratios.append(r[1])
        for c, v in (r[2] or {}).items():
            causes.setdefault(c, []).append(abs(v) / r[3])
    shutil.rmtree(run)
    if ratios:
        within = sum(1 for x in ratios if abs(x - 1) <= 0.03)
        ratios.sort()
        print(f"\n{len(ratios)} plans; sim/pred median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}, "
              f"max {ratios[-1]:.3f}; within +-3%: {within}")
        print("mean |difference| by cause, % of the predicted step: " +
              ", ".join(f"{c} {100 * sum(v) / len(v):.1f}%" for c, v in causes.items()))


if __name__ == "__main__":
    main()

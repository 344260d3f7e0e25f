#!/usr/bin/env python3
"""largest.py — the largest GPT that plans on one H200 (141 GB) with 128 GB of
host memory, with host offload (--offload auto) and without (--offload none),
and the offloaded model's predicted step time against the same model on 2 and
4 H200 without offload (issue 19's "Measured" rows, planner predictions only).
With --multi, also the largest on 2 and 4 H200 of one node (128 GB of host memory
for the node) with and without offload: there ZeRO-3 lets `auto` keep parameter
slices on the host too (level params).

The model: GPT-3 13B's width (d 5140 -> 5120, 40 heads, ffn 4d, vocab 50257,
context 2048; bench/solver/gen_models.py's GPT-2 structure), one sequence per
step, bf16 mixed precision (fp32 master weights and AdamW state), depth
searched by bisection: the largest layer count that plans. The cluster is the
h200 preset's figures (shard/cluster.c) with the host's memory set to 128 GB,
written as a cluster file.

    python3 bench/offload/largest.py --compiler build/compiler/colossal-compile --work /tmp/largest
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "solver"))
import gen_models  # noqa: E402

D, H, F, V, T, B = 5120, 40, 20480, 50257, 2048, 1


def cluster(path, per_node, host_gb):
    """The h200 preset (shard/cluster.c) as a file, with host memory host_gb per node."""
    eff = lambda peak: {"flops": [10.0 ** (6 + i) for i in range(8)],
                        "efficiency": [0.7 * 10.0 ** (6 + i) / (10.0 ** (6 + i) + 5e-6 * 0.7 * peak) for i in range(8)]}
    c = {"device": "H200-SXM-141GB", "nodes": 1, "per_node": per_node, "memory_gb": 141,
         "peak_tflops": {"f32": 67, "bf16": 989.5, "f16": 989.5}, "mem_bw_gbs": 4800,
         "intra": {"latency_us": 2, "bandwidth_gbs": 450}, "inter": {"latency_us": 5, "bandwidth_gbs": 50},
         "reserve_mb": {"context": 512 + 264, "communicator": 512, "workspace": 32},
         "gemm_efficiency": {"f32": eff(67e12), "bf16": eff(989.5e12), "f16": eff(989.5e12)},
         "host": {"memory_gb": host_gb, "pcie_gbs": 63, "adamw_gelems": 2.7}}
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def model(work, L):
    p, n = gen_models.gpt2("gpt_13b", L, D, H, V, T, B, F)
    path = os.path.join(work, f"gpt-l{L}.cir")
    lines = ["# colossal-ir 1", "graph gpt_13b", f"block h {L}", f"input %idx : i32[{B},{T}]",
             f"input %targets : i32[{B},{T}]"] + p + n + ["output %loss"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def plan(cc, work, L, clus, offload):
    out = os.path.join(work, f"out-l{L}-{os.path.basename(clus)}-{offload}")
    r = subprocess.run([cc, model(work, L), "--emit", "plan", "--cluster", clus, "--dtype", "bf16", "--offload",
                        offload, "--time-limit", "120", "-q", "-o", out], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.load(open(os.path.join(out, "gpt_13b.plan.json")))


def largest(cc, work, clus, offload, hi=512):
    lo = 0  # plans at lo (0: none), not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if plan(cc, work, mid, clus, offload):
            lo = mid
        else:
            hi = mid
    return lo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--multi", action="store_true", help="also the largest on 2 and 4 H200")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    one = cluster(os.path.join(a.work, "h200x1-host128.json"), 1, 128)
    t0 = time.time()
    rows = []
    for off in ("none", "auto"):
        L = largest(a.compiler, a.work, one, off)
        p = plan(a.compiler, a.work, L, one, off)
        o = p.get("offload", {})
        rows.append((off, L, p["params_total"], p["step_time_s"], p["memory"]["predicted_peak_bytes"],
                     o.get("host_bytes", 0), p))
    bound = 128e9 / 16
    print(f"GPT d={D}, {H} heads, ffn {F}, vocab {V}, context {T}, batch {B}, bf16; one H200 + 128 GB host")
    print("| --offload | layers | parameters | of 16 B/param host bound | step s | device peak GB | host GB | groups on host |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for off, L, n, st, pk, hb, p in rows:
        on = sum(g["update"] == "host" for g in p.get("offload", {}).get("groups", []))
        print(f"| {off} | {L} | {n / 1e9:.2f}e9 | {n / bound:.3f} | {st:.4g} | {pk / 1e9:.1f} | {hb / 1e9:.1f} | {on} |")
    L = rows[1][1]
    base = rows[1][3]
    print(f"\nThe offloaded model ({L} layers) without offload on more H200 (predicted step time):")
    print("| devices | step s | vs 1 H200 with offload |")
    print("|---:|---:|---:|")
    print(f"| 1 (offload auto) | {base:.4g} | 1.000 |")
    for n in (2, 4):
        c = cluster(os.path.join(a.work, f"h200x{n}.json"), n, 128)
        p = plan(a.compiler, a.work, L, c, "none")
        print(f"| {n} | {p['step_time_s']:.4g} | {p['step_time_s'] / base:.3f} |" if p else f"| {n} | no plan | |")
    if a.multi:
        print("\nThe largest on one node of N H200 with 128 GB of host memory for the node:")
        print("| devices | --offload | layers | parameters | step s | groups: state on host | of them with the "
              "parameter's ZeRO-3 slice |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for n in (2, 4):
            c = cluster(os.path.join(a.work, f"h200x{n}.json"), n, 128)
            for off in ("none", "auto"):
                L = largest(a.compiler, a.work, c, off)
                p = plan(a.compiler, a.work, L, c, off)
                g = p.get("offload", {}).get("groups", [])
                print(f"| {n} | {off} | {L} | {p['params_total'] / 1e9:.2f}e9 | {p['step_time_s']:.4g} | "
                      f"{sum(x['update'] == 'host' for x in g)} | {sum(x.get('parameters') == 'host' for x in g)} |")
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""run.py — the solver benchmark: for GPT-2 124M and 1.5B, LLaMA-7B and 70B,
GPT-3 175B on 8 (1x8), 64 (8x8) and 1024 (128x8) H100-80GB, generate the model
(global batch = one sequence per device, bf16), run
`colossal-compile MODEL.cir --emit plan --cluster h100:NxG --dtype bf16`, and
print a Markdown table: compile time (parse to plan, wall), ILP size, predicted
step time, the best baseline that fits, and the ratio.

    run.py --compiler build/compiler/colossal-compile --work /tmp/bench [--models ...] [--sizes 8,64]
    run.py ... --pipelines [--seqs-per-device 1,8] [--micro-batches M] [--schedule auto]   the stage-count table
        instead: `--pp auto` (every stage count the cluster can run, priced as a pipeline;
        docs/pipeline.md) on a global batch of devices x seqs-per-device sequences, each count
        with the micro-batch count it runs fastest with (--micro-batches forces one for all);
        the chosen count and its step against the best unpipelined plan and the best pipeline
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_models  # noqa: E402

CLUSTERS = {8: "h100:1x8", 64: "h100:8x8", 1024: "h100:128x8"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--work", default="/tmp/colossal-bench-solver")
    ap.add_argument("--models", default=",".join(gen_models.MODELS))
    ap.add_argument("--sizes", default="8,64,1024")
    ap.add_argument("--time-limit", default="60")
    ap.add_argument("--pipelines", action="store_true", help="the --pp auto table")
    ap.add_argument("--seqs-per-device", default="1,8", help="--pipelines: global batches, in sequences per device")
    ap.add_argument("--micro-batches", default="", help="--pipelines: force this count on every stage count")
    ap.add_argument("--schedule", default="", help="--pipelines: --schedule (1f1b, interleaved[:V], auto); adds a column")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.pipelines:
        return pipelines(a)
    print("| model | devices | compile s | ILP vars | ILP rows | mesh | step s | peak GB | best baseline (s) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in a.models.split(","):
        for n in [int(x) for x in a.sizes.split(",")]:
            cir = gen_models.write(a.work, m, n)
            out = os.path.join(a.work, f"{m}-{n}")
            cmd = [a.compiler, cir, "--emit", "plan", "--cluster", CLUSTERS[n], "--dtype", "bf16",
                   "--time-limit", a.time_limit, "-q", "-o", out]
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
            if p.returncode != 0:
                msg = p.stderr.strip().splitlines()[0] if p.stderr.strip() else f"exit {p.returncode}"
                msg = msg.replace("colossal-compile: error: ", "")
                print(f"| {m} | {n} | {wall:.2f} | | | | no plan | | | {msg} |")
                continue
            name = m.replace("-", "_").replace(".", "_")
            d = json.load(open(os.path.join(out, f"{name}.plan.json")))
            fits = [b for b in d["baselines"] if b["applicable"] and b["fits"]]
            best = min(fits, key=lambda b: b["step_time_s"]) if fits else None
            sv = d["solver"]
            mesh = "x".join(str(x) for x in d["mesh"])
            bb = f"{best['name']} ({best['step_time_s']:.4g})" if best else "none fits"
            ratio = f"{d['step_time_s'] / best['step_time_s']:.3f}" if best else "-"
            print(f"| {m} | {n} | {wall:.2f} | {sv['variables']} | {sv['constraints']} | {mesh} | "
                  f"{d['step_time_s']:.4g} | {d['memory']['predicted_peak_bytes'] / 1e9:.1f} | {bb} | {ratio} |",
                  flush=True)


def pipelines(a):
    """--pp auto on each model and cluster: compile time (wall, all stage counts), the chosen
    stage count, its micro-batches and the stage's mesh, its predicted step; the unpipelined
    plan's (p = 1) and the best pipeline's (p > 1) from the same run (pipeline.stage_counts),
    each with its own micro-batch count unless --micro-batches forces one."""
    sched = " schedule (v) | schedules tried: v, step s |" if a.schedule else ""
    print("| model | devices | batch | compile s | CPU s | chosen p | micro-batches | stage mesh | step s | p = 1: m, step s | "
          f"best p > 1: p, m, step s | best pipeline / p = 1 |{sched}")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if a.schedule else ""))
    for m in a.models.split(","):
        for n in [int(x) for x in a.sizes.split(",")]:
            for spd in [int(x) for x in a.seqs_per_device.split(",")]:
                cir = gen_models.write(a.work, m, n * spd)
                out = os.path.join(a.work, f"{m}-{n}-pp-b{n * spd}")
                cmd = [a.compiler, cir, "--emit", "plan", "--cluster", CLUSTERS[n], "--dtype", "bf16", "--pp", "auto",
                       "--time-limit", a.time_limit, "-q", "-o", out]
                if a.micro_batches:
                    cmd += ["--micro-batches", a.micro_batches]
                if a.schedule:
                    cmd += ["--schedule", a.schedule]
                t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
                p = subprocess.run(cmd, capture_output=True, text=True)
                wall, r1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                row = f"| {m} | {n} | {n * spd} | {wall:.2f} | {cpu:.2f} |"
                if p.returncode != 0:
                    msg = p.stderr.strip().splitlines()[0] if p.stderr.strip() else f"exit {p.returncode}"
                    print(f"{row} no plan | | | | | | {msg.replace('colossal-compile: error: ', '')} |", flush=True)
                    continue
                name = m.replace("-", "_").replace(".", "_")
                d = json.load(open(os.path.join(out, f"{name}.plan.json")))
                pp = d["pipeline"]
                counts = {e["stages"]: e for e in pp.get("stage_counts", [])}
                one = counts.get(1, {})
                one_s = f"{one['micro_batches']}, {one['step_time_s']:.4g}" if one.get("planned") else "none fits"
                piped = [e for k, e in counts.items() if k > 1 and e["planned"]]
                bp = min(piped, key=lambda e: e["step_time_s"]) if piped else None
                bps = f"{bp['stages']}, {bp['micro_batches']}, {bp['step_time_s']:.4g}" if bp else "none fits"
                ratio = f"{bp['step_time_s'] / one['step_time_s']:.2f}" if bp and one.get("planned") else "-"
                mesh = "x".join(str(x) for x in d["mesh"])
                extra = ""
                if a.schedule:
                    tried = ", ".join(f"{e['chunks']}: {e['step_time_s']:.4g}" if "step_time_s" in e else f"{e['chunks']}: -"
                                      for e in pp.get("schedules_tried", []))
                    extra = f" {pp['schedule']} ({pp.get('chunks', 1)}) | {tried or '-'} |"
                print(f"{row} {len(pp['stages'])} | {pp['micro_batches']} | {mesh} | {d['step_time_s']:.4g} | {one_s} | "
                      f"{bps} | {ratio} |{extra}", flush=True)


if __name__ == "__main__":
    main()

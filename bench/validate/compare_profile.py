#!/usr/bin/env python3
"""compare_profile.py — where the cost model is wrong for one generated program:
the measured time per op class (COLRT_PROFILE=1, docs/generated-api.md) beside
the simulation's (colossal-compile simulate --json: the recorded program
replayed under the cluster's tables; its classes leave out the update part and
recomputation, which get rows of their own) and the planner's (the plan's
`ops`, each node's own time as the ILP priced it, update nodes included), per
step; then each kind of collective, the profile's wall time of its calls
(CPU backend) beside the simulation's; then the nodes whose measured time is
furthest from the planner's.

usage: compare_profile.py PLAN.json PROFILE.json --steps N
           [--compiler build/compiler/colossal-compile] [--cluster C] [--nodes K]
  PLAN.json     the plan written beside the generated code (--emit code)
  PROFILE.json  rank 0's COLRT_PROFILE_OUT of a run of that program
  --steps N     train steps the profiled run made, warm-up included (the
                profile counts every step; bench/codegen_cpu/train.c STEPS + WARMUP)
  --cluster C   simulate under another cluster (a preset or colossal-calibrate's
                file) instead of the plan's; the planner's column stays the plan's
  --sim-json F  the simulation's figures from a file (simulate --json's output)
                instead of running the compiler
Loaded machines: compare the columns as ratios of one run, not absolute speed.
The profile adds its own cost (a clock read and a wait per entry).
"""
import argparse
import json
import re
import subprocess
import sys

# the simulator names the element-wise class "elementwise" (solver/sim.c),
# the profile and the IR "elemwise" (ir_op_class_name): one row
SIM_CLASS = {"elementwise": "elemwise"}


def die(msg):
    print(f"compare_profile.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die(f"{path}: cannot read the {what}: {e}")


def profile_program(prof, path):
    progs = prof.get("programs") if isinstance(prof, dict) else None
    if prof.get("format") != "colrt-profile-1" or not progs:
        die(f"{path}: not a colrt profile (format colrt-profile-1 with programs); run with COLRT_PROFILE=1")
    return progs[0]


# the simulator's collective kinds (solver/sim.c) by the runtime's names (the
# profile's kinds: colrt's collective calls)
COLL_KIND = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
             "all-to-all": "all_to_all", "broadcast": "broadcast", "send/recv": "sendrecv"}


def prof_colls(prof):
    """The profile's collectives by kind: (calls, seconds) over the run."""
    return {c["kind"]: (c.get("calls", 0), float(c.get("seconds", 0) or 0)) for c in prof.get("collectives", [])}


def simulate(compiler, plan_path, cluster):
    cmd = [compiler, "simulate", plan_path, "--json"]
    if cluster:
        cmd += ["--cluster", cluster]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        err = getattr(e, "stderr", "") or ""
        die(f"{' '.join(cmd)} failed: {e} {err.strip()}")


def planner_by_node(plan, path):
    """Each node's own time a step as the planner priced it (docs/plan-format.md
    `ops`): a planner entry's forward_s (its backward is its backward nodes'
    own entries with --emit code), a rule entry's compute_s."""
    ops = plan.get("ops")
    if not isinstance(ops, list) or not ops:
        die(f"{path}: the plan has no `ops` (plan it with --emit code)")
    out = {}
    for o in ops:
        name, op = o.get("name", "?"), o.get("op", "?")
        s = o.get("forward_s", 0) if o.get("placed_by") == "planner" else o.get("compute_s", 0)
        out[name] = (op, float(s or 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("plan")
    ap.add_argument("profile")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--compiler", default="build/compiler/colossal-compile")
    ap.add_argument("--cluster")
    ap.add_argument("--nodes", type=int, default=12)
    ap.add_argument("--sim-json")
    a = ap.parse_args()
    if a.steps < 1:
        die("--steps must be at least 1")
    plan = load(a.plan, "plan")
    a.profile_json = load(a.profile, "profile")
    prog = profile_program(a.profile_json, a.profile)
    sim = load(a.sim_json, "simulation") if a.sim_json else simulate(a.compiler, a.plan, a.cluster)
    nodes = planner_by_node(plan, a.plan)

    # op -> class from the profile's own entries (ir_op_class_name)
    op_class = {n["op"]: n["class"] for n in prog.get("nodes", [])}
    measured = {c["class"]: c["seconds"] / a.steps for c in prog.get("classes", [])}
    simulated = {}
    for c, v in sim.get("kernels_by_class", {}).items():
        c = SIM_CLASS.get(c, c)
        simulated[c] = simulated.get(c, 0.0) + v
    planned = {}
    for name, (op, s) in nodes.items():
        cls = op_class.get(op, "(not run: " + op + ")" if s > 0 else None)
        if cls:
            planned[cls] = planned.get(cls, 0.0) + s

    under = a.cluster or "the plan's cluster"
    print(f"{prog.get('program', '?')}: seconds a step by op class ({a.steps} steps profiled; "
          f"simulated under {under})")
    print(f"{'class':<16} {'measured':>10} {'simulated':>10} {'planner':>10} {'sim/meas':>9} {'plan/meas':>9}")
    classes = sorted(set(measured) | set(simulated) | set(planned),
                     key=lambda c: -max(measured.get(c, 0), simulated.get(c, 0), planned.get(c, 0)))
    tot = [0.0, 0.0, 0.0]
    for c in classes:
        m, s, p = measured.get(c, 0.0), simulated.get(c, 0.0), planned.get(c, 0.0)
        if max(m, s, p) == 0:
            continue
        tot = [tot[0] + m, tot[1] + s, tot[2] + p]
        r = lambda x: f"{x / m:9.2f}" if m > 0 else f"{'-':>9}"
        print(f"{c:<16} {m:10.5f} {s:10.5f} {p:10.5f} {r(s)} {r(p)}")
    # simulate --json's classes leave out the update part and recomputation
    # (compiler/simulate.c): their simulated seconds as rows of their own
    for key, label in (("update_s", "(sim: update)"), ("recompute_s", "(sim: recompute)")):
        v = float(sim.get(key, 0) or 0)
        if v > 0:
            tot[1] += v
            print(f"{label:<16} {'':>10} {v:10.5f}")
    r = lambda x: f"{x / tot[0]:9.2f}" if tot[0] > 0 else f"{'-':>9}"
    print(f"{'kernels':<16} {tot[0]:10.5f} {tot[1]:10.5f} {tot[2]:10.5f} {r(tot[1])} {r(tot[2])}")
    print(f"{'step':<16} {'':>10} {sim.get('step_s', 0):10.5f} {plan.get('step_time_s', 0):10.5f}"
          f"   (the measured step is the run's own print; the profiled entries sum to "
          f"{prog.get('seconds', 0) / a.steps:.5f} s a step)")

    # communication: each kind of collective's wall time a call as the profile
    # timed it (COLRT_PROFILE, CPU backend; on the communication stream it
    # overlaps the kernels above) beside the simulation's busy time of that kind
    # on either stream (simulate --json `collectives`)
    colls = prof_colls(a.profile_json)
    sim_c = {}
    for c in sim.get("collectives", []):
        k = COLL_KIND.get(c.get("kind", "?"), c.get("kind", "?"))
        n, t = sim_c.get(k, (0, 0.0))
        sim_c[k] = (n + c.get("n", 0), t + float(c.get("s", 0) or 0))
    if colls or sim_c:
        print(f"\ncollectives (seconds a step; measured: the wall time of each call on rank 0)")
        print(f"{'kind':<16} {'calls':>6} {'measured':>10} {'sim calls':>9} {'simulated':>10} {'sim/meas':>9}")
        for k in sorted(set(colls) | set(sim_c), key=lambda k: -max(colls.get(k, (0, 0))[1], sim_c.get(k, (0, 0))[1])):
            mc, ms = colls.get(k, (0, 0.0))
            sc, ss = sim_c.get(k, (0, 0.0))
            ms, mc = ms / a.steps, mc / a.steps
            r = f"{ss / ms:9.2f}" if ms > 0 else f"{'-':>9}"
            print(f"{k:<16} {mc:6.1f} {ms:10.6f} {sc:9d} {ss:10.6f} {r}")

    # by kind and size (profiles since 2026-12-05: `collectives_by_size`): each
    # size's calls a step and mean wall time a call, to set beside the cluster
    # file's `collective_us` table (bytes there: the shard into an all-gather,
    # here the larger buffer, the whole tensor)
    by_size = a.profile_json.get("collectives_by_size") or []
    if by_size:
        print(f"\ncollectives by size (rank 0; bytes of the larger buffer, the whole tensor)")
        print(f"{'kind':<16} {'bytes':>21} {'calls':>6} {'us a call':>10} {'s a step':>10}")
        for c in sorted(by_size, key=lambda c: (c.get("kind", "?"), c.get("bytes_min", 0))):
            n = c.get("calls", 0)
            t = float(c.get("seconds", 0) or 0)
            lo, hi = c.get("bytes_min", 0), c.get("bytes_max", 0)
            rng = f"{lo:.0f}" if lo == hi else f"{lo:.0f}-{hi:.0f}"
            print(f"{c.get('kind', '?'):<16} {rng:>21} {n / a.steps:6.1f} {t / n * 1e6 if n else 0:10.1f} "
                  f"{t / a.steps:10.6f}")

    # the nodes furthest from the planner's price
    rows = []
    for n in prog.get("nodes", []):
        # "NAME (recomputed)": NAME's price; "NAME (xN)": the entry stands for
        # its node in N repeats of a shared run (docs/generated-api.md), N prices
        key = n["node"].split(" ")[0]
        rep = re.search(r"\(x(\d+)\)", n["node"])
        m = n["seconds"] / a.steps
        op, p = nodes.get(key, (n["op"], None))
        if p is not None and rep:
            p *= int(rep.group(1))
        rows.append((abs(m - (p or 0)), n["node"], n["op"], n["class"], m, p, n.get("flops_per_call", 0),
                     n.get("bytes_per_call", 0), n["calls"] / a.steps))
    rows.sort(reverse=True)
    print(f"\nnodes furthest from the planner's price (seconds a step; rate as measured):")
    print(f"{'node':<28} {'op':<18} {'class':<12} {'measured':>10} {'planner':>10} {'calls':>6} {'GFLOP/s':>8} {'GB/s':>8}")
    for d, key, op, cls, m, p, f, b, calls in rows[:a.nodes]:
        per = m / calls if calls else 0
        gf = f"{f / per / 1e9:8.2f}" if per > 0 and f > 0 else f"{'-':>8}"
        gb = f"{b / per / 1e9:8.2f}" if per > 0 and b > 0 else f"{'-':>8}"
        ps = f"{p:10.6f}" if p is not None else f"{'(none)':>10}"
        print(f"{key[:28]:<28} {op[:18]:<18} {cls[:12]:<12} {m:10.6f} {ps} {calls:6.1f} {gf} {gb}")


if __name__ == "__main__":
    main()

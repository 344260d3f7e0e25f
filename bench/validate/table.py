#!/usr/bin/env python3
"""table.py — the table of bench/validate/run.sh from its results file.

    table.py RESULTS.tsv [--cluster C] [--date D] [--command CMD]

RESULTS.tsv: case, ranks, round, measured_s (the run's median timed step),
plan (the plan.json written beside the program: step_time_s, the planner's
prediction, and simulated_step_time_s, the program replayed), and optionally
mean_s (the run's mean step). Per case the median over rounds is measured; the
mean steps' median over rounds is shown beside it. Prints a Markdown table (predicted/measured,
simulated/measured, within +-15 %), then the measured order and whether the
predicted and simulated orders match it (Kendall's tau over the pairs)."""
import argparse
import csv
import json
import math
import statistics
import sys


def kendall(a, b):
    n = len(a)
    conc = disc = 0
    for i in range(n):
        for j in range(i + 1, n):
            s = (a[i] - a[j]) * (b[i] - b[j])
            conc += s > 0
            disc += s < 0
    return (conc - disc) / max(1, n * (n - 1) // 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--cluster", default="?")
    ap.add_argument("--date", default="?")
    ap.add_argument("--command", default="bench/validate/run.sh")
    a = ap.parse_args()
    rows = {}
    order = []
    with open(a.results) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            name = r["case"]
            if name not in rows:
                rows[name] = {"ranks": int(r["ranks"]), "runs": [], "means": [], "plan": r["plan"]}
                order.append(name)
            try:
                v = float(r["measured_s"])
            except ValueError:
                v = math.nan
            if math.isfinite(v) and v > 0:
                rows[name]["runs"].append(v)
            try:
                m = float(r.get("mean_s") or "nan")
            except ValueError:
                m = math.nan
            if math.isfinite(m) and m > 0:
                rows[name]["means"].append(m)
    table = []
    for name in order:
        row = rows[name]
        try:
            p = json.load(open(row["plan"]))
        except (OSError, ValueError) as e:
            print(f"{name}: cannot read the plan: {e}", file=sys.stderr)
            continue
        pred, sim = p.get("step_time_s", math.nan), p.get("simulated_step_time_s", math.nan)
        meas = statistics.median(row["runs"]) if row["runs"] else math.nan
        spread = (max(row["runs"]) - min(row["runs"])) / meas if len(row["runs"]) > 1 else 0
        mesh = "x".join(str(x) for x in p.get("mesh", []))
        mean = statistics.median(row["means"]) if row["means"] else math.nan
        table.append((name, row["ranks"], f"{mesh} {p.get('chosen_by', '?')}", pred, sim, meas, spread, len(row["runs"]), mean))
    print(f"Measured {a.date} on this machine, cluster `{a.cluster}`: `{a.command}`\n")
    print("| program | ranks | plan | predicted s | simulated s | measured s (median step) | spread | "
          "mean step s | predicted / measured | simulated / measured |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok_p = ok_s = n = 0
    for name, ranks, plan, pred, sim, meas, spread, k, mean in table:
        rp, rs = pred / meas, sim / meas
        n += math.isfinite(meas)
        ok_p += abs(rp - 1) <= 0.15
        ok_s += abs(rs - 1) <= 0.15
        print(f"| {name} | {ranks} | {plan} | {pred:.4g} | {sim:.4g} | {meas:.4g} | {100 * spread:.0f}% ({k} runs) | {mean:.4g} | "
              f"{rp:.2f} | {rs:.2f} |")
    good = [t for t in table if math.isfinite(t[5])]
    meas_order = sorted(good, key=lambda t: t[5])
    print(f"\nWithin +-15 % of measured: predicted {ok_p} of {n}, simulated {ok_s} of {n}.")
    print("Measured order (fastest first): " + ", ".join(t[0] for t in meas_order))
    for label, k in (("predicted", 3), ("simulated", 4)):
        tau = kendall([t[k] for t in good], [t[5] for t in good])
        same = [t[0] for t in sorted(good, key=lambda t: t[k])] == [t[0] for t in meas_order]
        print(f"{label} order {'is' if same else 'is not'} the measured order (Kendall tau {tau:.2f})")


if __name__ == "__main__":
    main()

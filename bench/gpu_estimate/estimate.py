#!/usr/bin/env python3
"""bench/gpu_estimate/estimate.py DIR [--sms N] [--clock GHZ] — a per-kernel
roofline of one generated training step on its GPU, beside the plan's
predicted step.

Takes a directory written by `colossal-compile ... --emit code --target cuda`
(M.c: the schedule, its shared runs written out; M_kernels.cu: the kernels
and their `cg-audit` lines, which give each launch's FLOPs and bytes from
the IR, count=N times; M.plan.json: the
plan, its device and predicted step). Gives a table by kernel kind and the
estimated step, and exits 1 if it is over twice the plan's prediction.

The model, per launch (each an assumption stated here, not a measurement):
  GEMM (cuBLASLt)   max(flops / (0.75 peak), bytes / (0.8 HBM)); f32 runs
                    without TF32 (the runtime's choice), so peak is the
                    f32 non-tensor peak
  attention         the tiled SIMT kernels (compiler/codegen/cg_attention.c)
                    do one shared-memory load per FMA, and an SM serves 32
                    loads per clock against 128 FMAs: 0.25 of the f32 peak.
                    Matmul units (2 * B*H*T*S*Dh FLOPs each, halved and a
                    tile's diagonal added when causal): forward 2, dq 5
                    (statistics pass 2 + dq pass 3), dk/dv 6 (2 + 4)
  other generated   memory-bound: the IR's bytes / (0.8 HBM)
  runtime kernels   cross-entropy 4 passes over the logits, embedding rows
                    read and written, copies and clears: bytes / (0.8 HBM)
  every launch      at least 3 us
"""
import json
import os
import re
import sys

DEVICES = {  # f32 TFLOP/s, bf16/f16 TFLOP/s, HBM GB/s, SMs (shard/cluster.c)
    "H100-SXM5-80GB": (67.0, 989.5, 3350.0, 132),
    "H200-SXM-141GB": (67.0, 989.5, 4800.0, 132),
    "A100-SXM4-40GB": (19.5, 312.0, 1555.0, 108),
    "A100-SXM4-80GB": (19.5, 312.0, 2039.0, 108),
}
FLOOR = 3e-6
ES = {"COLRT_F32": 4, "COLRT_BF16": 2, "COLRT_F16": 2, "COLRT_I32": 4}


def inline_shared(sched, px):
    """The schedule with each shared run of nodes (compiler/codegen/cg_share.c:
    `for (int r = 0; r < R; r++) M_rN(M, r, ...)`) written out R times, so
    each launch counts once per run."""
    fn = re.compile(r"^static void (%s_r\d+)\(%s \*M, int64_t r[^)]*\) \{\n(.*?)^\}\n" % (px, px), re.S | re.M)
    bodies = {m.group(1): m.group(2) for m in fn.finditer(sched)}
    loop = re.compile(r"^    for \(int r = 0; r < (\d+); r\+\+\) /\*.*?\*/\n        (%s_r\d+)\(M, r[^;]*\);\n" % px, re.M)
    return loop.sub(lambda m: bodies[m.group(2)] * int(m.group(1)), fn.sub("", sched))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    plan_f = [f for f in os.listdir(d) if f.endswith(".plan.json")]
    if not plan_f:
        sys.exit(f"estimate.py: no M.plan.json in {d}")
    px = plan_f[0][: -len(".plan.json")]
    plan = json.load(open(os.path.join(d, plan_f[0])))
    dev = plan["cluster"]["device"]
    if dev not in DEVICES:
        sys.exit(f"estimate.py: device {dev} unknown (known: {', '.join(DEVICES)})")
    f32, f16, hbm, sms = DEVICES[dev]
    peak = f16 * 1e12 if plan.get("dtype") in ("bf16", "f16") else f32 * 1e12
    bw = 0.8 * hbm * 1e9
    rows = {}

    def add(kind, t, times=1):
        n, s = rows.get(kind, (0, 0.0))
        rows[kind] = (n + times, s + times * max(t, FLOOR))

    sched = inline_shared(open(os.path.join(d, px + ".c")).read(), px)
    for m in re.finditer(r"colrt_gemm\(NULL, (COLRT_\w+), (\d), (\d), (\d+), (\d+), (\d+), [^,]+, [^,]+, (\d+), (\d+), [^,]+, (\d+), (\d+), [^,]+, [^,]+, (\d+), (\d+), (\d+)\);", sched):
        es = ES[m.group(1)]
        M, N, K, batch = int(m.group(4)), int(m.group(5)), int(m.group(6)), int(m.group(13))
        gpeak = (f32 if es == 4 else f16) * 1e12
        flops, byts = 2.0 * M * N * K * batch, es * (M * K + K * N + 2 * M * N) * batch
        add("gemm (cuBLASLt)", max(flops / (0.75 * gpeak), byts / bw))
    for m in re.finditer(r"colrt_cross_entropy\(NULL, (COLRT_\w+),.*, (\d+), (\d+), 1\.0f / \d+\);", sched):
        add("cross_entropy (runtime)", 4.0 * int(m.group(2)) * int(m.group(3)) * ES[m.group(1)] / bw)
    for m in re.finditer(r"colrt_embedding_(fwd|bwd)\(NULL, (COLRT_\w+), [^;]*, (\d+), (\d+), (\d+)(, \d)?\);", sched):
        N, D = int(m.group(3)), int(m.group(5))
        add(f"embedding_{m.group(1)} (runtime)", 3.0 * N * D * ES[m.group(2)] / bw)
    for m in re.finditer(r"colrt_memcpy\([^;]*, (\d+), COLRT_D2D, NULL\)", sched):
        add("copies", 2.0 * int(m.group(1)) / bw)
    for m in re.finditer(r"colrt_memset0\([^;]*, (\d+), NULL\)", sched):
        add("clears", int(m.group(1)) / bw)

    cu = open(os.path.join(d, px + "_kernels.cu")).read()
    seen = set()
    for line in re.findall(r"/\* cg-audit (.*) \*/", cu):
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if f["emit"] in seen:  # a node's kernels: its FLOPs and bytes count once
            continue
        seen.add(f["emit"])
        op, flops, byts, work = f["op"], float(f["flops"]), float(f["bytes"]), float(f["work"])
        times = int(f.get("count", 1))  # identical node emissions, written once
        if op.startswith("attention"):
            units = {"attention": 2, "attention_dq": 5, "attention_dkv": 6}[op]
            # the IR's forward FLOPs are 2 units with the causal mask applied;
            # work = B*T*H*S*Dh (every pair), so the mask's share is flops / (4 work)
            frac = min(1.0, flops / (4.0 * work)) if op == "attention" else 0.5
            t_attn = units * 2.0 * work * frac / (0.25 * f32 * 1e12)
            add(op + " (tiled SIMT)", max(t_attn, byts / bw), times)
        else:
            add(op, byts / bw, times)

    total = sum(s for _, s in rows.values())
    pred = plan["step_time_s"]
    print(f"{px}: {dev}, dtype {plan.get('dtype')}, batch {plan.get('batch')}; roofline per launch (see the header)")
    print(f"{'kernel kind':<34} {'calls':>8} {'ms':>10} {'share':>7}")
    for kind, (n, s) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"{kind:<34} {n:>8} {1e3 * s:>10.3f} {100 * s / total:>6.1f}%")
    print(f"estimated step {total:.4f} s; plan predicts {pred:.4f} s; ratio {total / pred:.2f} (target <= 2)")
    return 0 if total <= 2 * pred else 1


if __name__ == "__main__":
    sys.exit(main())

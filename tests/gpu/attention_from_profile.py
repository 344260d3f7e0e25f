#!/usr/bin/env python3
"""tests/gpu/attention_from_profile.py — a GPU cluster file gains the CUDA
program's measured attention rates, read off a per-kernel profile.

usage: attention_from_profile.py CLUSTER.json KERNEL_TIMES.txt B T H DH STEPS -o OUT.json

KERNEL_TIMES.txt is a -DCG_TIME_KERNELS run's table (tests/gpu/run.sh's
profile stage: STEPS steps, the warm-up counted) of a program whose every
attention call has the shape B x T x H x DH (causal, S = T, one program such
as GPT-2 124M). Each kind's time a call is the sum over its passes
(gpt2_k6_p0, ..._p1: one launch each a call) of total / launches; its FLOPs
as the IR counts the node (ir/ops.c rule_attention: 4 B H DH x the T (T+1)/2
pairs the mask keeps; attention_dq 1.5x that, attention_dkv 2x). The three
rates go into OUT.json's attention_tflops as one-point tables (every call
size at that rate: docs/sharding.md), with a calibration note naming the
profile. colossal-calibrate-cuda timed no CUDA attention when the H100 file
was made (it does since, at a ladder of shapes): this reads the rates off the
only GPU run there was, fitted on that one program's profile.
OUT is written atomically.
"""
import json, os, re, sys, tempfile

def main(argv):
    if len(argv) != 10 or argv[8] != "-o":
        sys.exit(__doc__.split("\n\n")[1])
    cluster, prof, out = argv[1], argv[2], argv[9]
    B, T, H, DH, steps = (int(x) for x in argv[3:8])
    c = json.load(open(cluster))
    per_call = {"attention": 0.0, "attention_dq": 0.0, "attention_dkv": 0.0}
    calls = {}
    for line in open(prof).read().splitlines()[1:]:
        m = re.match(r"(\S+) \((attention(?:_dq|_dkv)?)\)\s+(\d+)\s+([\d.]+)", line)
        if not m:
            continue
        name, op, launches, ms = m.group(1), m.group(2), int(m.group(3)), float(m.group(4))
        per_call[op] += ms * 1e-3 / launches
        calls.setdefault(op, set()).add(launches)
    if any(v <= 0 for v in per_call.values()):
        sys.exit(f"{prof}: no attention, attention_dq or attention_dkv kernel in the table")
    if any(len(v) != 1 or next(iter(v)) % steps for v in calls.values()):
        sys.exit(f"{prof}: the attention passes' launch counts {calls} are not one a layer a step of {steps} steps")
    fwd = 4.0 * B * H * DH * T * (T + 1) / 2
    flops = {"forward": fwd, "dq": 1.5 * fwd, "dkv": 2.0 * fwd}
    secs = {"forward": per_call["attention"], "dq": per_call["attention_dq"], "dkv": per_call["attention_dkv"]}
    c["attention_tflops"] = {k: {"flops": [flops[k]], "tflops": [round(flops[k] / secs[k] / 1e12, 4)]} for k in flops}
    notes = c.setdefault("calibration", {}).setdefault("notes", [])
    notes.append(f"attention_tflops: the CUDA program's attention passes as {os.path.basename(prof)} timed them "
                 f"(B={B} T={T} H={H} Dh={DH}, causal; tests/gpu/attention_from_profile.py), one point a kernel: "
                 f"colossal-calibrate-cuda did not time them then")
    d = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".attn.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(c, f, indent=2)
            f.write("\n")
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    for k in flops:
        print(f"{k:8s} {flops[k]:.3g} FLOPs a call, {secs[k] * 1e3:.3f} ms: {flops[k] / secs[k] / 1e12:.2f} TFLOP/s")

if __name__ == "__main__":
    main(sys.argv)

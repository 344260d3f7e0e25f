#!/bin/sh
# calibrate.sh CALIBRATE COMPILE SRC "MPIRUN..." "EXTRA..." — runs
# colossal-calibrate --quick on 2 ranks, checks what it wrote (finite numbers,
# monotone GEMM tables, kernel rate tables by size for every class reaching
# down to a program's smallest tensors, the generated attention kernels'
# FLOP/s tables (forward, dq, dk/dv; FLOPs as the IR counts each node, rates
# from the times kept beside them), each collective's time table by size (from
# 64 bytes, monotone), a positive reserve, the run's shape, no temp file
# left), and plans a tiny GPT-2 with the file: the plan carries the file's
# device and reserve_bytes, and its memory limit is the file's memory less
# the reserve. A run that cannot write (a missing folder) exits 1 naming it.
set -eu
cal=$1 cc=$2 src=$3 mpirun=$4 extra=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Under the sanitizer build, MPI's own allocations are suppressed for the MPI
# program only (CALIBRATE_LSAN_OPTIONS; colossal-compile runs without them).
calrun() {
  # shellcheck disable=SC2086
  if [ -n "${CALIBRATE_LSAN_OPTIONS:-}" ]; then LSAN_OPTIONS=$CALIBRATE_LSAN_OPTIONS $mpirun "$@"
  else $mpirun "$@"; fi
}
# shellcheck disable=SC2086
calrun -np 2 "$cal" --quick $extra -o "$work/cpu.json" > "$work/out.txt" 2>&1 ||
  { cat "$work/out.txt"; fail "colossal-calibrate exited $?"; }
grep -q "wrote $work/cpu.json" "$work/out.txt" || { cat "$work/out.txt"; fail "no 'wrote' line"; }
ls "$work" | grep -q tmp && fail "a temp file was left beside the output"

python3 - "$work/cpu.json" <<'PY' || fail "the calibrated file's checks"
import json, math, sys
c = json.load(open(sys.argv[1]))
def nums(x):
    if isinstance(x, bool): return
    if isinstance(x, (int, float)): yield x
    elif isinstance(x, dict):
        for v in x.values(): yield from nums(v)
    elif isinstance(x, list):
        for v in x: yield from nums(v)
bad = [v for v in nums(c) if not math.isfinite(v)]
assert not bad, f"non-finite numbers: {bad}"
assert c["nodes"] * c["per_node"] == 2, (c["nodes"], c["per_node"])
for dt in ("f32", "bf16", "f16"):
    t = c["gemm_efficiency"][dt]
    f, e = t["flops"], t["efficiency"]
    assert len(f) == len(e) >= 2, dt
    assert all(a < b for a, b in zip(f, f[1:])), f"{dt} sizes not increasing"
    assert all(a <= b for a, b in zip(e, e[1:])), f"{dt} efficiency not monotone: {e}"
    assert all(0 < x <= 1 for x in e), f"{dt} efficiency out of (0,1]: {e}"
    assert c["peak_tflops"][dt] > 0
r = c["reserve_mb"]
assert r["context"] > 0, r            # a process with MPI holds some memory
assert r["communicator"] >= 0 and r["workspace"] >= 0, r
for link in ("intra", "inter"):
    assert c[link]["latency_us"] > 0 and c[link]["bandwidth_gbs"] > 0, c[link]
assert c["mem_bw_gbs"] > 0
k = c["calibration"]["collectives"]["intra"]
assert set(k) >= {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}, list(k)
# each collective's times by size as a program runs it: from 64-byte buffers (the shard for an
# all-gather: 32 bytes on 2 ranks), non-decreasing, the points kept beside them
cu = c["collective_us"]
assert set(cu) == {"intra"} and cu["intra"]["ranks"] == 2, cu.keys()
for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
    t = cu["intra"][kind]
    b, us = t["bytes"], t["us"]
    assert 2 <= len(b) == len(us) and b[0] <= 64, (kind, t)
    assert all(x < y for x, y in zip(b, b[1:])) and all(x <= y for x, y in zip(us, us[1:])), (kind, t)
    assert all(u > 0 for u in us), (kind, t)
    assert [p[0] for p in k[kind]["points_bytes_seconds"]] == b, (kind, b)
# the stream's hand-off: each kind's first 3 sizes also timed on the caller's thread; the
# median of the 12 differences (stream less caller), at least 0, is the link's handoff_us
hd = k["handoff"]
d = []
for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
    cp, sp = hd["caller_points_bytes_seconds"][kind], k[kind]["points_bytes_seconds"][:3]
    assert len(cp) == 3 and [p[0] for p in cp] == [p[0] for p in sp], (kind, cp, sp)
    assert all(p[1] > 0 for p in cp), (kind, cp)
    d += [s[1] - q[1] for s, q in zip(sp, cp)]
d.sort()
want = max(0.0, (d[5] + d[6]) / 2) * 1e6
assert abs(hd["handoff_us"] - want) <= 1e-6 * max(1.0, want), (hd["handoff_us"], want, d)
assert abs(cu["intra"].get("handoff_us", 0) - want) <= 1e-6 * max(1.0, want), (cu["intra"].get("handoff_us"), want)
h, hc = c["host"], c["calibration"]["host_offload"]   # host offload: memory, copies, host AdamW
assert h["memory_gb"] > 0 and h["pcie_gbs"] > 0 and h["adamw_gelems"] > 0, h
assert h["pcie_gbs"] == min(hc["d2h_gbs"], hc["h2d_gbs"]) and h["adamw_gelems"] == hc["adamw_gelems"], (h, hc)
kg = c["kernel_gbs"]   # a rate table per memory-bound kernel class, by a call's bytes
assert set(kg) == {"elementwise", "transcendental", "norm", "softmax", "loss", "reduce", "optimizer", "rope", "silu",
                   "rmsnorm"}, list(kg)
for name, t in kg.items():
    assert 2 <= len(t["bytes"]) == len(t["gbs"]), (name, t)
    assert all(a < b for a, b in zip(t["bytes"], t["bytes"][1:])), (name, t)
    assert all(g > 0 for g in t["gbs"]), (name, t)
for name, t in kg.items():   # the program's own kernels down to its smallest tensors (64 elements); colrt's from 4096
    own = name in ("elementwise", "transcendental", "norm", "reduce", "rope", "silu", "optimizer", "rmsnorm")
    assert (t["bytes"][0] <= 2048) if own else (t["bytes"][0] >= 4096 * 4), (name, t["bytes"])
at, pts = c["attention_tflops"], c["calibration"]["attention"]["points"]   # the program's attention kernels
assert set(at) == {"forward", "dq", "dkv"}, list(at)
assert len(pts) == 4, pts   # --quick: the ladder's first four shapes
for name, t in at.items():
    assert len(t["flops"]) == len(t["tflops"]) == len(pts), (name, t)
    assert all(a < b for a, b in zip(t["flops"], t["flops"][1:])), (name, t)
    assert all(r > 0 for r in t["tflops"]), (name, t)
for i, p in enumerate(pts):   # FLOPs as the IR counts each node: 4 B H Dh T(T+1)/2, dq 1.5x, dk/dv 2x
    f = 4 * p["B"] * p["H"] * p["Dh"] * p["T"] * (p["T"] + 1) / 2
    for name, x in (("forward", 1), ("dq", 1.5), ("dkv", 2)):
        assert abs(at[name]["flops"][i] - x * f) <= 1e-9 * f, (name, i, at[name]["flops"][i], x * f)
        rate = at[name]["flops"][i] / p[name + "_seconds"] / 1e12
        assert abs(at[name]["tflops"][i] - rate) <= 1e-6 * rate, (name, i, at[name]["tflops"][i], rate)
print("calibrated file ok:", c["device"], "reserve", r)
PY

"$cc" "$src/examples/ir/gpt2-tiny.cir" --cluster "$work/cpu.json" --emit plan -q -o "$work/plan" ||
  fail "planning with the calibrated file"
python3 - "$work/cpu.json" "$work/plan/gpt2_tiny.plan.json" <<'PY' || fail "the plan's reserve"
import json, sys
c = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
reserve = sum(c["reserve_mb"].values()) * 1048576
assert abs(p["memory"]["reserve_bytes"] - reserve) <= 1e-6 * reserve + 1, (p["memory"], reserve)
limit = c["memory_gb"] * 1e9 - reserve
assert abs(p["memory"]["limit_bytes"] - limit) <= 1e-6 * limit, (p["memory"]["limit_bytes"], limit)
assert p["cluster"]["device"] == c["device"][:31], p["cluster"]
print("plan ok: limit", p["memory"]["limit_bytes"], "reserve", p["memory"]["reserve_bytes"])
PY

# a folder that does not exist: exit 1, the path named, nothing written
# shellcheck disable=SC2086
if calrun -np 2 "$cal" --quick $extra -o "$work/nope/x.json" > "$work/err.txt" 2>&1; then
  fail "writing into a missing folder succeeded"
fi
grep -q "$work/nope" "$work/err.txt" || { cat "$work/err.txt"; fail "the error does not name the path"; }
echo "calibrate.sh: ok"

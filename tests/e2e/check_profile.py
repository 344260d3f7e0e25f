"""check_profile.py OUT_DIR PROFILE_JSON [STEPS] — the COLRT_PROFILE table a
generated program wrote (runtime/common/profile.c) against its source: one
entry per M_prof(k) mark in M.c, each called at least once, times >= 0 and
some > 0, the op classes' sums equal to the nodes', matrix products with FLOPs,
the kernels' instruction set named.
With STEPS (a multi-rank run of that many steps): the collectives timed, at
least the program's all-reduces (its plan's lowering.all_reduce_count, with
their bytes) each step, with time > 0, and by kind and size
(`collectives_by_size`) summing to each kind's calls and seconds."""
import glob
import json
import re
import sys

out, path = sys.argv[1], sys.argv[2]
src = open([f for f in glob.glob(out + "/*.c") if not f.endswith("_kernels.c")][0]).read()
marks = {int(k) for k in re.findall(r"^    \w+_prof\((\d+)\);$", src, re.M)}
d = json.load(open(path))
errs = []
if d.get("format") != "colrt-profile-1":
    errs.append("format %r" % d.get("format"))
p = d["programs"][0]
nodes = p["nodes"]
if len(nodes) != len(marks) or marks != set(range(len(nodes))):
    errs.append("%d entries in the profile, %d marks in the source" % (len(nodes), len(marks)))
if any(n["calls"] < 1 or n["seconds"] < 0 for n in nodes):
    errs.append("an entry never called or with negative time")
total = sum(n["seconds"] for n in nodes)
if not total > 0:
    errs.append("no time measured")
cls = sum(c["seconds"] for c in p["classes"])
if abs(cls - total) > 1e-9 * max(1.0, total) + 1e-12 * len(nodes):
    errs.append("classes sum to %g s, nodes to %g s" % (cls, total))
# the instruction set the kernels ran with (M_kernels_isa(): "x86-64-v4 (dispatched)",
# "compile target", ...; tests/consumer/vector_kernels.sh checks its level)
if not p.get("kernels"):
    errs.append("no 'kernels' (the kernels' instruction set) in the profile")
if p.get("runtime_kernels", "").split(" ")[0] not in ("generic", "avx2", "avx512", "cuda"):
    errs.append("runtime_kernels %r: want generic, avx2, avx512 or cuda (colrt_runtime_kernels())"
                % p.get("runtime_kernels"))
mm = [c for c in p["classes"] if c["class"] == "matmul"]
if not mm or not mm[0]["flops"] > 0:
    errs.append("no matmul class with FLOPs")
if len(sys.argv) > 3:
    steps = int(sys.argv[3])
    low = json.load(open(glob.glob(out + "/*.plan.json")[0]))["lowering"]
    ar = [c for c in d.get("collectives", []) if c["kind"] == "all_reduce"]
    if not ar:
        errs.append("no all_reduce among the profile's collectives %s" % [c["kind"] for c in d.get("collectives", [])])
    elif (ar[0]["calls"] < steps * low["all_reduce_count"] or ar[0]["bytes"] < steps * low["all_reduce_bytes"]
          or not ar[0]["seconds"] > 0):
        errs.append("all_reduce: %d calls, %g bytes, %g s; want at least %d calls and %d bytes (%d steps of the "
                    "program's) in > 0 s" % (ar[0]["calls"], ar[0]["bytes"], ar[0]["seconds"],
                                           steps * low["all_reduce_count"], steps * low["all_reduce_bytes"], steps))
    else:
        print("all_reduce: %d calls, %.0f bytes, %.6f s" % (ar[0]["calls"], ar[0]["bytes"], ar[0]["seconds"]))
    # by kind and size: each kind's sizes sum to its calls and seconds; a size's
    # bytes within one power of 4; the program's all-reduces have several sizes
    # (the loss's 4 bytes, the gradient buckets')
    by = d.get("collectives_by_size", [])
    for c in d.get("collectives", []):
        mine = [b for b in by if b["kind"] == c["kind"]]
        n, t = sum(b["calls"] for b in mine), sum(b["seconds"] for b in mine)
        if n != c["calls"] or abs(t - c["seconds"]) > 1e-9 * max(1.0, c["seconds"]):
            errs.append("%s by size: %d calls, %g s; by kind %d calls, %g s" % (c["kind"], n, t, c["calls"], c["seconds"]))
        if any(not (b["bytes_min"] <= b["bytes_max"] < 4 * max(b["bytes_min"], 1)) for b in mine):
            errs.append("%s: a size bucket wider than a power of 4: %s" % (c["kind"], mine))
    if len([b for b in by if b["kind"] == "all_reduce"]) < 2:
        errs.append("all_reduce by size: %s (want the loss's and the buckets' sizes apart)" % by)
print("%d entries, %.4f s, classes: %s" % (len(nodes), total, ", ".join(c["class"] for c in p["classes"])))
sys.exit("; ".join(errs) if errs else 0)

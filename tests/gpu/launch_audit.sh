#!/usr/bin/env bash
# tests/gpu/launch_audit.sh FILE.cu [MAX_SERIAL] — the launch audit of a generated
# kernels file: every node's kernels must together launch at least
#   min(fill, max(parallel, work / MAX_SERIAL))
# threads, where parallel is the node's parallel extent (points of the
# iterators that index a result, from the IR's iteration space), work all
# the points of its iteration space, and fill a full H100/H200 (132 SMs x
# 2048 threads): no thread loops over a parallel dimension of the work, and
# none does more than MAX_SERIAL (default 1024) points of a reduction alone
# unless the GPU is already full. The numbers are the generator's
# `cg-audit` lines (compiler/codegen/cg_launch.c; count=N: N node emissions
# with those kernels and extents, the first one named). Exits 1 naming every
# kernel that launches too few threads. Needs no GPU.
set -euo pipefail
cu=$1 serial=${2:-1024}
grep -q '^/\* cg-audit ' "$cu" || { echo "launch_audit: no cg-audit lines in $cu"; exit 1; }
awk -v serial="$serial" '
  /^\/\* cg-audit / {
    delete f
    for (i = 3; i <= NF; i++) if (split($i, kv, "=") == 2) f[kv[1]] = kv[2]
    key = f["emit"]
    if (!(key in par)) { order[++n] = key; times[key] = ("count" in f) ? f["count"] : 1; launches += times[key] }
    par[key] = f["parallel"]; work[key] = f["work"]; fill[key] = f["fill"]
    thr[key] += f["threads"]; names[key] = names[key] (names[key] == "" ? "" : "+") f["kernel"]
    what[key] = f["op"] " " f["value"]
  }
  END {
    bad = 0
    for (k = 1; k <= n; k++) {
      e = order[k]
      need = par[e]; w = work[e] / serial
      if (w > need) need = w
      if (need > fill[e]) need = fill[e]
      need = int(need)
      if (thr[e] < need) {
        printf "TOO FEW THREADS %s (%s, x%d): %.0f threads, needs %.0f (parallel %.0f, work %.0f)\n", names[e], what[e], times[e], thr[e], need, par[e], work[e]
        bad += times[e]
      }
    }
    printf "launch_audit: %d launches audited (%d distinct), %d with too few threads\n", launches, n, bad
    exit bad > 0
  }' "$cu"

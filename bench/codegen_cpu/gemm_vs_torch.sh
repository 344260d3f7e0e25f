#!/usr/bin/env bash
# bench/codegen_cpu/gemm_vs_torch.sh — the GEMMs of the generated GPT-2 124M
# step (B=4, T=64, f32) one by one, ours (colrt_gemm: the runtime's library)
# against torch's (gemm_shapes.py: MKL), alternating round by round in one
# window, OMP_NUM_THREADS threads each (default 2).
# First checks that gemm_shapes.c's table is the generated program's GEMMs:
# the distinct (transposes, M, N, K, beta) of its colrt_gemm calls.
# Prints per shape the median best-of-REPS seconds of each side, torch / ours,
# and what the shape weighs in a step (calls x the difference).
# usage: bench/codegen_cpu/gemm_vs_torch.sh [BUILD_DIR [ROUNDS [REPS]]]
#   TORCH_VENV: a virtual environment with torch (default /tmp/torch-venv)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
reps=${3:-5}
venv=${TORCH_VENV:-/tmp/torch-venv}
threads=${OMP_NUM_THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)
out=$build/bench-codegen-cpu/gemm
mkdir -p "$out"
"$build/compiler/colossal-compile" examples/gpt2/gpt2.c -DSEQ=64 --batch 4 --cluster h100:1x1 \
  --emit code --target cpu -q -o "$out"
mpicc -std=c17 -O2 -Iinclude "$here/gemm_shapes.c" "$build/runtime/libcolrt_cpu.a" \
  -lcjson -lz -ldl -lm -lpthread -fopenmp -o "$out/gemm_shapes"
# colrt_gemm(s, dtype, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, ...): fields 3-7 and 15
grep -o 'colrt_gemm([^;]*;' "$out/gpt2.c" |
  awk -F', ' '{b = $15; sub(/\.0f$/, "", b); print $3, $4, $5, $6, $7, b}' | sort -u > "$out/program.txt"
"$out/gemm_shapes" list | sort -u > "$out/table.txt"
if ! diff "$out/program.txt" "$out/table.txt" > "$out/shapes.diff"; then
  echo "gemm_shapes.c's table is not the generated program's GEMMs (< program, > table):" >&2
  cat "$out/shapes.diff" >&2
  exit 1
fi
echo "the table's $(wc -l < "$out/table.txt") shapes are the program's; $rounds rounds, best of $reps, $threads threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  OMP_NUM_THREADS=$threads "$out/gemm_shapes" colrt "$reps" > "$out/colrt.$r"
  "$venv/bin/python" "$here/gemm_shapes.py" "$reps" "$threads" > "$out/torch.$r"
done
python3 - "$out" "$rounds" <<'PY'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def read(side):
    rows = {}
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{side}.{r}").read().splitlines()[1:]:
            f = line.split()
            if len(f) >= 7 and f[-1].isdigit():  # name M N K GFLOP/s best calls
                rows.setdefault(" ".join(f[:-6]), []).append((float(f[-2]), int(f[-1])))
    return rows
ours, torch = read("colrt"), read("torch")
print(f"{'shape':16s} {'ours s':>9s} {'torch s':>9s} {'torch/ours':>10s} {'step delta s':>12s}")
so = st = 0
for name in ours:
    o, t = (statistics.median(x[0] for x in side[name]) for side in (ours, torch))
    c = ours[name][0][1]
    so += c * o; st += c * t
    print(f"{name:16s} {o:9.5f} {t:9.5f} {t / o:10.2f} {c * (o - t):+12.4f}")
print(f"{'step GEMMs':16s} {so:9.4f} {st:9.4f} {st / so:10.2f}")
PY

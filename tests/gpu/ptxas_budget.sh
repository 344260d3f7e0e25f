#!/usr/bin/env bash
# tests/gpu/ptxas_budget.sh NVCC FILE.cu INCLUDE_DIR [ARCH [MAX_STACK]] — compiles a
# generated kernels file for one architecture (default sm_90) with
# `-Xptxas -v` and holds every function ptxas reports to no spill stores or
# loads and at most MAX_STACK bytes of stack frame (default 1024). Prints
# the worst functions; exits 1 naming each function over budget (2 if the
# file does not compile). Needs no GPU.
set -euo pipefail
nvcc=$1 cu=$2 inc=$3 arch=${4:-sm_90} max_stack=${5:-1024}
log=$(mktemp)
obj=$(mktemp --suffix=.o)
trap 'rm -f "$log" "$obj"' EXIT
if ! "$nvcc" -arch="$arch" -O3 -c -Xptxas -v -I"$inc" "$cu" -o "$obj" >"$log" 2>&1; then
  cat "$log" >&2
  echo "ptxas_budget: $cu does not compile for $arch" >&2
  exit 2
fi
demangle=cat
command -v c++filt >/dev/null && demangle=c++filt
awk -v max="$max_stack" '
  /Function properties for / { fn = $NF; next }
  /bytes stack frame/ {
    stack = $1; st = $5; ld = $9
    n++
    if (stack + 0 > worst) worst = stack + 0
    if (st + 0 > 0 || ld + 0 > 0 || stack + 0 > max) {
      printf "OVER BUDGET %s: %d bytes stack, %d bytes spill stores, %d bytes spill loads\n", fn, stack, st, ld
      bad++
    }
  }
  /Used [0-9]+ registers/ { regs = $5; if (regs + 0 > maxregs) { maxregs = regs + 0; regfn = fn } }
  END {
    printf "ptxas_budget: %d functions, largest stack frame %d bytes (limit %d), most registers %d (%s), %d over budget\n", n, worst, max, maxregs, regfn, bad
    if (n == 0) { print "ptxas_budget: ptxas reported no functions"; exit 1 }
    exit bad > 0
  }' "$log" | $demangle
exit "${PIPESTATUS[0]}"

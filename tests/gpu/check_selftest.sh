#!/usr/bin/env bash
# tests/gpu/check_selftest.sh NVCC INCLUDE_DIR — the GPU checks can fail:
# launch_audit.sh must reject a launch with too few threads and name it, and
# (when NVCC is not "none") ptxas_budget.sh must reject a kernel with a
# large per-thread array and name it. Exits 0 when both checks catch them.
set -uo pipefail
nvcc=$1 inc=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
cat > "$tmp/a.cu" <<'CU'
/* cg-audit kernel=m_k0 node=1 emit=1 op=add value=%x parallel=1000 work=1000 threads=1024 fill=270336 flops=0 bytes=0 */
/* cg-audit kernel=m_k1 node=2 emit=2 op=layer_norm_dw value=%dw parallel=768 work=6291456 threads=768 fill=270336 flops=0 bytes=0 */
CU
out=$("$here/launch_audit.sh" "$tmp/a.cu")
if [ $? -eq 0 ] || ! grep -q 'TOO FEW THREADS m_k1' <<<"$out" || grep -q 'm_k0' <<<"$out"; then
  echo "check_selftest: launch_audit.sh did not flag m_k1 alone:"; echo "$out"; bad=1
fi
if [ "$nvcc" != none ]; then
  cat > "$tmp/b.cu" <<'CU'
__global__ void small_kernel(float *o) { o[threadIdx.x] = 1.f; }
__global__ void big_stack_kernel(float *o, int k) {
    float a[4096];
    for (int i = 0; i < 4096; i++) a[i] = o[i] * 2.f;
    o[threadIdx.x] = a[k];
}
CU
  out=$("$here/ptxas_budget.sh" "$nvcc" "$tmp/b.cu" "$inc")
  if [ $? -eq 0 ] || ! grep -q 'OVER BUDGET big_stack_kernel' <<<"$out" || grep -q 'OVER BUDGET small_kernel' <<<"$out"; then
    echo "check_selftest: ptxas_budget.sh did not flag big_stack_kernel alone:"; echo "$out"; bad=1
  fi
fi
[ $bad -eq 0 ] && echo "check_selftest: both checks catch what they should"
exit $bad

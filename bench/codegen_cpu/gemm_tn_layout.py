# gemm_tn_layout.py — torch's side of gemm_tn_layout.c: torch.mm(X^T, Y) on the
# transposed view of a K x M tensor (MKL), best wall and CPU time of REPS calls.
# usage: python3 bench/codegen_cpu/gemm_tn_layout.py M N K REPS [THREADS]
import sys, time, torch

M, N, K, reps = map(int, sys.argv[1:5])
torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else 2)
a = torch.randn(K, M).t()
b = torch.randn(K, N)
c = torch.zeros(M, N)
best = cb = 1e30
for r in range(reps + 1):
    t0, c0 = time.perf_counter(), time.process_time()
    torch.mm(a, b, out=c)
    t, ct = time.perf_counter() - t0, time.process_time() - c0
    if r:
        best, cb = min(best, t), min(cb, ct)
print(f"torch    {M:5d} {N:5d} {K:5d}  best {best:8.5f} s {2e-9*M*N*K/best:6.1f} GFLOP/s  cpu best {cb:8.5f} s")

"""gemm_shapes.py — the torch side of gemm_shapes.c: the same 15 GEMMs of one
GPT-2 124M training step (256 tokens, f32, row-major layouts as ours) with
torch.mm (MKL here; bf16: oneDNN, as autocast runs a linear; beta = 1:
c.addmm_(a, b), the product added onto c as ours), best of REPS each, and the
step's GEMM seconds.
usage: python gemm_shapes.py [REPS] [THREADS] [f32|bf16]"""
import sys
import time

import torch

# name, transposes, M, N, K, beta, calls per step (gemm_shapes.c's table)
SHAPES = [("qkv fwd", 0, 0, 256, 2304, 768, 1, 12), ("qkv dx", 0, 1, 256, 768, 2304, 0, 12),
          ("qkv dw", 1, 0, 768, 2304, 256, 0, 12), ("attn.proj fwd", 0, 0, 256, 768, 768, 1, 12),
          ("attn.proj dx", 0, 1, 256, 768, 768, 0, 12), ("attn.proj dw", 1, 0, 768, 768, 256, 0, 12),
          ("mlp.fc fwd", 0, 0, 256, 3072, 768, 1, 12), ("mlp.fc dx", 0, 1, 256, 768, 3072, 0, 12),
          ("mlp.fc dw", 1, 0, 768, 3072, 256, 0, 12), ("mlp.proj fwd", 0, 0, 256, 768, 3072, 1, 12),
          ("mlp.proj dx", 0, 1, 256, 3072, 768, 0, 12), ("mlp.proj dw", 1, 0, 3072, 768, 256, 0, 12),
          ("lm_head fwd", 0, 1, 256, 50257, 768, 0, 1), ("lm_head dx", 0, 0, 256, 768, 50257, 0, 1),
          ("lm_head dw", 1, 0, 50257, 768, 256, 0, 1)]
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
dtype = sys.argv[3] if len(sys.argv) > 3 else "f32"
dt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
step = flops = 0.0
print(f"{'torch':16s} {'M':>6s} {'N':>6s} {'K':>6s} {'GFLOP/s':>8s} {'best s':>9s} {'calls':>5s}  ({dtype})")
for name, ta, tb, m, n, k, beta, count in SHAPES:
    a = torch.randn(k, m, dtype=dt).t() if ta else torch.randn(m, k, dtype=dt)  # stored as ours: transposed views
    b = torch.randn(n, k, dtype=dt).t() if tb else torch.randn(k, n, dtype=dt)
    c = torch.zeros(m, n, dtype=dt)
    best = 1e30
    for r in range(reps + 1):
        t0 = time.perf_counter()
        if beta:
            c.addmm_(a, b)
        else:
            torch.mm(a, b, out=c)
        t = time.perf_counter() - t0
        if r:
            best = min(best, t)
    f = 2.0 * m * n * k
    print(f"{name:16s} {m:6d} {n:6d} {k:6d} {1e-9 * f / best:8.1f} {best:9.6f} {count:5d}")
    step += best * count
    flops += f * count
print(f"torch {dtype}: step GEMMs {step:.4f} s (best of {reps} each), {1e-9 * flops / step:.1f} GFLOP/s")

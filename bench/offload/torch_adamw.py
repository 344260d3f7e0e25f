#!/usr/bin/env python3
"""torch_adamw.py — PyTorch's CPU AdamW on the state bench_host_adamw updates, elements per second.

Usage: torch_adamw.py N REPS THREADS
Times torch.optim.AdamW's step on one fp32 parameter of N elements with a fixed gradient (lr 1e-3,
betas 0.9/0.999, eps 1e-8, weight decay 0.01: bench_host_adamw's), in two variants, interleaved (so a
slow moment of a shared machine hits both), REPS steps each, best step kept:
  torch-foreach   foreach=True (the multi-tensor path: a pass over memory per operation)
  torch-fused     fused=True (one kernel per step, PyTorch >= 2.4 on the CPU)
on THREADS intra-op threads (torch.set_num_threads). Prints one line per variant:
`NAME ELEMENTS_PER_S`, what adamw_vs_torch.sh reads. Needs torch (a CPU wheel is enough).
"""
import sys
import time

import torch

n, reps, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
g = (torch.arange(n, dtype=torch.int64) * 13 % 29 - 14).float() * 0.003
start = (torch.arange(n, dtype=torch.int64) * 37 % 101 - 50).float() * 0.01
opts = {}
for name, kw in (("torch-foreach", {"foreach": True}), ("torch-fused", {"fused": True})):
    p = torch.nn.Parameter(start.clone())
    p.grad = g.clone()
    opts[name] = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **kw)
best = {k: float("inf") for k in opts}
with torch.no_grad():
    for _ in range(reps):
        for name, opt in opts.items():
            t0 = time.perf_counter()
            opt.step()
            best[name] = min(best[name], time.perf_counter() - t0)
for name in opts:
    print(f"{name} {n / best[name]:.6g}")

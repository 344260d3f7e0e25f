"""torch_gpt2.py — PyTorch eager's training step for the model bench/codegen_cpu
generates: GPT-2 (pre-LN, fused QKV, tanh GELU, learned positions, head tied
to wte; examples/gpt2/gpt2.c), cross-entropy loss, AdamW (betas 0.9/0.999,
eps 1e-8, weight decay 0.01 on every parameter, no clipping: the generated
program's defaults), f32, or bf16 as PyTorch does mixed precision (--dtype
bf16: torch.autocast("cpu", bfloat16) over f32 parameters), on the CPU.

Takes: --steps N (timed), --warmup N, --threads N, --batch, --seq, the sizes.
Gives: one line per step and `torch: S s per step (mean of N)` (S: seconds).
Not a test; bench/codegen_cpu/vs_torch.sh runs it beside the generated program.
"""
import argparse
import contextlib
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, d, h, vocab, ctx):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def step_args(ap, vocab):
    """The arguments every torch bench model takes (torch_llama.py too)."""
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=vocab)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True) instead of the default (foreach)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")


def time_steps(a, make_model):
    """Trains make_model() (built after the seed) with AdamW on random tokens,
    a.warmup + a.steps steps, and prints each step and the timed steps' mean."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = make_model()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            **({"fused": True} if a.fused else {}))
    g = torch.Generator().manual_seed(1)
    times = []
    for s in range(a.warmup + a.steps):
        idx = torch.randint(0, 256, (a.batch, a.seq), generator=g)
        tgt = torch.randint(0, 256, (a.batch, a.seq), generator=g)
        t0 = time.perf_counter()
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if a.dtype == "bf16" else contextlib.nullcontext()
        with ctx:
            loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= a.warmup:
            times.append(dt)
        print(f"step {s + 1:3d}: loss {loss.item():.4f}  ({dt:.3f} s{', warm-up' if s < a.warmup else ''})", flush=True)
    mean = sum(times) / len(times) if times else math.nan
    print(f"torch {torch.__version__}, {n_params} parameters, {a.threads} threads, "
          f"AdamW {'fused' if a.fused else 'default (foreach)'}, {a.dtype}")
    print(f"torch: {mean:.3f} s per step (mean of {len(times)})")


def main():
    ap = argparse.ArgumentParser()
    step_args(ap, 50257)
    ap.add_argument("--ctx", type=int, default=1024)
    a = ap.parse_args()
    time_steps(a, lambda: GPT2(a.layers, a.embd, a.heads, a.vocab, a.ctx))


if __name__ == "__main__":
    main()

"""torch_llama.py — PyTorch eager's training step for the LLaMA bench/codegen_cpu
generates (examples/llama/llama.c): RMSNorm (eps 1e-5), rotary embedding
(theta 1e4, pairs (j, j + Dh/2) as the generated kernel rotates them),
grouped-query attention (SDPA causal, enable_gqa), SwiGLU MLP, untied head,
no biases; cross-entropy loss, AdamW (betas 0.9/0.999, eps 1e-8, weight
decay 0.01 on every parameter, no clipping: the generated program's
defaults), f32, or bf16 as PyTorch does mixed precision (--dtype bf16:
torch.autocast("cpu", bfloat16) over f32 parameters; the generated program
keeps bf16 parameters and f32 masters), on the CPU.

Takes: --steps N (timed), --warmup N, --threads N, --batch, --seq, the sizes,
--dtype f32|bf16.
Gives: one line per step and `torch: S s per step (mean of N)` (S: seconds).
Not a test; bench/codegen_cpu/vs_torch.sh runs it beside the generated program
(MODEL=llama).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_gpt2 import step_args, time_steps  # the shared arguments and timed loop


def rope(x, theta):
    # x [b, h, t, dh]: rotates (x_j, x_{j+dh/2}) by t * theta^(-2j/dh)
    b, h, t, dh = x.shape
    half = dh // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float32) / dh)
    ang = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)


class Layer(nn.Module):
    def __init__(self, d, h, kvh, ffn, theta):
        super().__init__()
        self.h, self.kvh, self.dh, self.theta = h, kvh, d // h, theta
        self.input_layernorm = nn.RMSNorm(d, eps=1e-5)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kvh * self.dh, bias=False)
        self.v_proj = nn.Linear(d, kvh * self.dh, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(d, eps=1e-5)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        y = self.input_layernorm(x)
        q = self.q_proj(y).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(y).view(b, t, self.kvh, self.dh).transpose(1, 2)
        v = self.v_proj(y).view(b, t, self.kvh, self.dh).transpose(1, 2)
        q, k = rope(q, self.theta), rope(k, self.theta)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, d))
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(nn.Module):
    def __init__(self, layers, d, h, kvh, ffn, vocab, theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, h, kvh, ffn, theta) for _ in range(layers))
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    step_args(ap, 32000)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--theta", type=float, default=10000.0)
    a = ap.parse_args()
    time_steps(a, lambda: Llama(a.layers, a.embd, a.heads, a.kv_heads, a.ffn, a.vocab, a.theta))


if __name__ == "__main__":
    main()

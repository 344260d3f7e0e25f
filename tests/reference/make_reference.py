#!/usr/bin/env python3
"""make_reference.py: writes the PyTorch reference data for test_reference.

Builds the tiny GPT-2 (transformers' GPT2LMHeadModel) and the tiny LLaMA
(LlamaForCausalLM) of examples/ir/{gpt2,llama}-tiny.cir with fixed seeds, in
float64, and writes to tests/reference/{gpt2,llama}_tiny.safetensors:

  param.NAME   initial weights, in colossal's names and layouts (see below)
  input.NAME   token ids and targets (int32)
  logits, loss forward results
  grad.NAME    d loss / d param, loss = mean token cross-entropy
  step3.NAME   params after 3 AdamW steps on the same batch
               (lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.01)

Layouts (Hugging Face -> colossal): GPT-2's Conv1D weights are [in, out]:
c_attn [D, 3D] -> [D, 3, H, Dh] and its bias [3D] -> [3, H, Dh]; attn.c_proj
[D, D] -> [H, Dh, D]; the rest keep their shapes. LLaMA's nn.Linear weights
are [out, in] and are transposed: q_proj -> [D, H, Dh], k_proj/v_proj ->
[D, Hkv, Dh], o_proj -> [H, Dh, D], gate/up -> [D, F], down -> [F, D],
lm_head -> [D, V].

Regenerate: pip install torch transformers safetensors; then
    python3 tests/reference/make_reference.py
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, V = 2, 8, 64
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-8, 0.01


def perturb(model, seed):
    """Random biases and norm weights too, so no gradient is trivially zero."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if ("ln" in name or "norm" in name) and name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def llama_in_float64(model, theta, head_dim):
    """Hugging Face's LLaMA computes RMSNorm and the rotary angles in float32
    (for bf16 training), which would round a float64 reference to float32 in
    every layer. Same formulas, kept in float64 here. (Attention uses PyTorch's
    SDPA, which stays in float64; the "eager" path has a float32 softmax.)"""
    from transformers.models.llama import modeling_llama as ml

    def rms_forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.variance_epsilon))

    def rope_forward(self, x, position_ids):
        freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(torch.float64)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)

    ml.LlamaRMSNorm.forward = rms_forward
    ml.LlamaRotaryEmbedding.forward = rope_forward
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    for m in model.modules():
        if isinstance(m, ml.LlamaRotaryEmbedding):
            m.inv_freq = inv.clone()


def gpt2_layout(name, t, D, H):
    Dh = D // H
    name = name.removeprefix("transformer.")
    if name.endswith("attn.c_attn.weight"):
        t = t.reshape(D, 3, H, Dh)
    elif name.endswith("attn.c_attn.bias"):
        t = t.reshape(3, H, Dh)
    elif name.endswith("attn.c_proj.weight"):
        t = t.reshape(H, Dh, D)
    return name, t


def llama_layout(name, t, D, H, G):
    Dh = D // H
    if name.endswith("q_proj.weight"):
        t = t.t().reshape(D, H, Dh)
    elif name.endswith("k_proj.weight") or name.endswith("v_proj.weight"):
        t = t.t().reshape(D, G, Dh)
    elif name.endswith("o_proj.weight"):
        t = t.t().reshape(H, Dh, D)
    elif name.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight")) or name == "lm_head.weight":
        t = t.t()
    return name, t


def run(model, layout, idx, tgt, path, meta):
    out = {"input.idx": idx.to(torch.int32), "input.targets": tgt.to(torch.int32)}
    params = [(n, p) for n, p in model.named_parameters()]
    for n, p in params:
        k, t = layout(n, p.detach())
        out["param." + k] = t.contiguous().clone()

    def loss_fn():
        logits = model(input_ids=idx).logits
        return logits, F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))

    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    for step in range(3):
        opt.zero_grad()
        logits, loss = loss_fn()
        loss.backward()
        if step == 0:
            out["logits"] = logits.detach().clone()
            out["loss"] = loss.detach().clone().reshape(())
            for n, p in params:
                k, t = layout(n, p.grad.detach())
                out["grad." + k] = t.contiguous().clone()
        opt.step()
    for n, p in params:
        k, t = layout(n, p.detach())
        out["step3." + k] = t.contiguous().clone()
    meta = dict(meta, lr=str(LR), beta1=str(BETAS[0]), beta2=str(BETAS[1]), eps=str(EPS),
                weight_decay=str(WD), torch=torch.__version__)
    save_file(out, path, metadata=meta)
    print(f"{os.path.basename(path)}: loss {out['loss'].item():.10f}, {len(out)} tensors, "
          f"{os.path.getsize(path)} bytes")


def main():
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(1234)
    idx = torch.randint(0, V, (B, T), generator=g)
    tgt = torch.randint(0, V, (B, T), generator=g)

    D, H = 16, 2
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=V, n_positions=16, n_embd=D, n_layer=2, n_head=H,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                     activation_function="gelu_new", attn_implementation="eager",
                     bos_token_id=0, eos_token_id=0)
    gpt2 = GPT2LMHeadModel(cfg).double()
    perturb(gpt2, 1)
    gpt2.train()
    run(gpt2, lambda n, t: gpt2_layout(n, t, D, H), idx, tgt,
        os.path.join(HERE, "gpt2_tiny.safetensors"), {"model": "examples/ir/gpt2-tiny.cir"})

    D, H, G = 16, 4, 2
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=16,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                      attn_implementation="sdpa", bos_token_id=0, eos_token_id=0)
    llama = LlamaForCausalLM(cfg).double()
    llama_in_float64(llama, 10000.0, D // H)
    perturb(llama, 2)
    llama.train()
    run(llama, lambda n, t: llama_layout(n, t, D, H, G), idx, tgt,
        os.path.join(HERE, "llama_tiny.safetensors"), {"model": "examples/ir/llama-tiny.cir"})


if __name__ == "__main__":
    main()

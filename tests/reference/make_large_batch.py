#!/usr/bin/env python3
"""make_large_batch.py: writes the LAMB and LARS reference data for test_reference.

The optimizers as their papers write them, in float64, on the tiny GPT-2 and
LLaMA of make_reference.py (the same models, weights and batch: the script
checks that it rebuilds exactly the `param.*` and `input.*` stored in
{gpt2,llama}_tiny.safetensors), 3 steps on the same batch, gradients from
PyTorch's autograd (loss = mean token cross-entropy). Writes
tests/reference/{gpt2,llama}_tiny_large_batch.safetensors:

  lamb.step3.NAME  params after 3 LAMB steps
  lars.step3.NAME  params after 3 LARS steps
  metadata         each optimizer's settings (lamb.lr, lamb.beta1, ...,
                   lars.trust, lars.no_decay, ...), torch's version

LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training
BERT in 76 minutes", Algorithm 2, with bias correction), per parameter
tensor w with gradient g at step t:

  m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
  r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  u = r + wd w
  w = w - lr * phi(||w||) / ||u|| * u,    phi(z) = z

LARS (You et al. 2017, "Large Batch Training of Convolutional Networks",
Algorithm 1, with momentum):

  local_lr = trust * ||w|| / (||g|| + wd ||w||)
  v = momentum v + lr * local_lr * (g + wd w)
  w = w - v

A trust ratio whose norms are zero is 1 (as TensorFlow's LAMB and LARS).
Parameters matching a glob of `no_decay` have wd = 0; those matching
`no_trust` a trust ratio (LAMB) or local lr (LARS) of 1 (the paper's "layer"
is a parameter tensor; names and globs are colossal's).

Regenerate (as make_reference.py: torch and transformers from PyPI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install torch transformers safetensors
    /tmp/ref/bin/python tests/reference/make_large_batch.py
"""
import fnmatch
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_reference as ref  # noqa: E402  (the models, perturbations, layouts)

# Settings per model and optimizer: the C test reads them from the metadata.
CASES = {
    "gpt2": {
        "lamb": dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6, wd=0.01,
                     no_decay="*.bias,*ln_*", no_trust="*.bias,*ln_*"),
        "lars": dict(lr=0.5, momentum=0.9, wd=5e-4, trust=0.001, no_decay="*ln_*", no_trust="*ln_*"),
    },
    "llama": {
        "lamb": dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6, wd=0.01, no_decay="", no_trust=""),
        "lars": dict(lr=0.5, momentum=0.9, wd=5e-4, trust=0.001, no_decay="*norm*", no_trust=""),
    },
}


def matches(globs, name):
    return any(fnmatch.fnmatchcase(name, p) for p in globs.split(",") if p)


def trust_ratio(num, den):
    return num / den if num > 0 and den > 0 else torch.ones((), dtype=torch.float64)


def lamb_step(named, state, t, s):
    for name, w in named:
        g = w.grad
        st = state.setdefault(name, {"m": torch.zeros_like(w), "v": torch.zeros_like(w)})
        st["m"].mul_(s["beta1"]).add_((1 - s["beta1"]) * g)
        st["v"].mul_(s["beta2"]).add_((1 - s["beta2"]) * g * g)
        r = (st["m"] / (1 - s["beta1"] ** t)) / ((st["v"] / (1 - s["beta2"] ** t)).sqrt() + s["eps"])
        u = r + (0.0 if matches(s["no_decay"], name) else s["wd"]) * w
        ratio = 1.0 if matches(s["no_trust"], name) else trust_ratio(w.norm(), u.norm())
        w.sub_(s["lr"] * ratio * u)


def lars_step(named, state, t, s):
    del t
    for name, w in named:
        g = w.grad
        wd = 0.0 if matches(s["no_decay"], name) else s["wd"]
        local = 1.0 if matches(s["no_trust"], name) else \
            trust_ratio(s["trust"] * w.norm(), g.norm() + wd * w.norm())
        st = state.setdefault(name, {"v": torch.zeros_like(w)})
        st["v"].mul_(s["momentum"]).add_(s["lr"] * local * (g + wd * w))
        w.sub_(st["v"])


def train(model, layout, idx, tgt, step_fn, settings):
    """3 steps from a fresh copy of the model's initial weights."""
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    named = []
    for n, p in model.named_parameters():
        named.append((layout(n, p.detach())[0], p))
    state = {}
    for t in range(1, 4):
        model.zero_grad()
        logits = model(input_ids=idx).logits
        loss = F.cross_entropy(logits.reshape(-1, ref.V), tgt.reshape(-1))
        loss.backward()
        with torch.no_grad():
            step_fn(named, state, t, settings)
    out = {}
    for n, p in model.named_parameters():
        k, x = layout(n, p.detach())
        out[k] = x.contiguous().clone()
    with torch.no_grad():  # back to the start for the next optimizer
        for n, p in model.named_parameters():
            p.copy_(init[n])
    return out


def write(model, layout, key, stored, idx, tgt):
    for n, p in model.named_parameters():  # the same model as make_reference.py wrote
        k, x = layout(n, p.detach())
        assert torch.equal(x, stored["param." + k]), f"{key}: param {k} differs from the stored one"
    assert torch.equal(idx.to(torch.int32), stored["input.idx"])
    assert torch.equal(tgt.to(torch.int32), stored["input.targets"])
    out, meta = {}, {"model": stored_model(key), "torch": torch.__version__}
    for opt, fn in (("lamb", lamb_step), ("lars", lars_step)):
        s = CASES[key][opt]
        for k, x in train(model, layout, idx, tgt, fn, s).items():
            out[f"{opt}.step3.{k}"] = x
        meta.update({f"{opt}.{k}": str(v) for k, v in s.items()})
    path = os.path.join(HERE, f"{key}_tiny_large_batch.safetensors")
    save_file(out, path, metadata=meta)
    print(f"{os.path.basename(path)}: {len(out)} tensors, {os.path.getsize(path)} bytes")


def stored_model(key):
    return f"examples/ir/{key}-tiny.cir"


def main():
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(1234)  # as make_reference.main()
    idx = torch.randint(0, ref.V, (ref.B, ref.T), generator=g)
    tgt = torch.randint(0, ref.V, (ref.B, ref.T), generator=g)

    D, H = 16, 2
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=ref.V, n_positions=16, n_embd=D, n_layer=2, n_head=H,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                     activation_function="gelu_new", attn_implementation="eager",
                     bos_token_id=0, eos_token_id=0)
    gpt2 = GPT2LMHeadModel(cfg).double()
    ref.perturb(gpt2, 1)
    gpt2.train()
    write(gpt2, lambda n, t: ref.gpt2_layout(n, t, D, H), "gpt2",
          load_file(os.path.join(HERE, "gpt2_tiny.safetensors")), idx, tgt)

    D, H, G = 16, 4, 2
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=ref.V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=16,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                      attn_implementation="sdpa", bos_token_id=0, eos_token_id=0)
    llama = LlamaForCausalLM(cfg).double()
    ref.llama_in_float64(llama, 10000.0, D // H)
    ref.perturb(llama, 2)
    llama.train()
    write(llama, lambda n, t: ref.llama_layout(n, t, D, H, G), "llama",
          load_file(os.path.join(HERE, "llama_tiny.safetensors")), idx, tgt)


if __name__ == "__main__":
    main()

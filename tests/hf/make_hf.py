#!/usr/bin/env python3
"""make_hf.py — makes the Hugging Face interop test files in tests/hf/:

  gpt2/   a tiny GPT2LMHeadModel  (2 layers, n_embd 32, 4 heads, vocab 128, 32 positions)
  gpt2_sharded/  the same, saved in shards of 50 KB (model.safetensors.index.json)
  llama/  a tiny LlamaForCausalLM (2 layers, hidden 32, 4 heads, 2 kv heads, FFN 64,
          vocab 128, untied head)

each written with save_pretrained (config.json, model.safetensors, float32)
from a random initialization with fixed seeds (weights N(0, 0.15), biases and
norm weights randomized too, so that no layout mistake can hide behind zeros
or ones), plus batch.json: a fixed batch (idx [2,16], targets = the next
tokens) and transformers' mean cross-entropy on it, computed in float32 and,
as a cross-check, in float64.

    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers safetensors
    /tmp/hf/bin/python tests/hf/make_hf.py            # writes tests/hf/{gpt2,llama}
    /tmp/hf/bin/python tests/hf/make_hf.py --check-export DIR MODEL
        # loads DIR/model.safetensors written by colhf_save, with MODEL's
        # config.json, into transformers and prints the loss on the same batch

The C test (tests/hf/test_hf.c) needs none of this: only the files.
"""
import json
import os
import shutil
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, VOCAB = 2, 16, 128


def configs():
    g = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=32,
                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                activation_function="gelu_new", layer_norm_epsilon=1e-5,
                                bos_token_id=0, eos_token_id=0)
    l = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                 max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
                                 tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
    return {"gpt2": (transformers.GPT2LMHeadModel, g), "llama": (transformers.LlamaForCausalLM, l)}


def batch():
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, VOCAB, (B, T + 1), generator=g)
    return x[:, :T].contiguous(), x[:, 1:].contiguous()


def loss_of(model, idx, tgt):
    with torch.no_grad():
        logits = model(input_ids=idx).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)).item()


def make(name, cls, cfg, seed):
    torch.manual_seed(seed)
    cfg._attn_implementation = "eager"
    model = cls(cfg).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.15)
            elif "ln" in pname or "norm" in pname:
                p.copy_(1 + 0.2 * torch.randn_like(p)) if pname.endswith("weight") else p.normal_(0, 0.1)
            else:
                p.normal_(0, 0.1)
    out = os.path.join(HERE, name)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    if name == "gpt2":  # the same weights as a sharded checkpoint (index + 3 files)
        sharded = os.path.join(HERE, "gpt2_sharded")
        model.save_pretrained(sharded, safe_serialization=True, max_shard_size="50KB")
        if os.path.exists(os.path.join(sharded, "generation_config.json")):
            os.remove(os.path.join(sharded, "generation_config.json"))
    idx, tgt = batch()
    loss32 = loss_of(model, idx, tgt)
    loss64 = loss_of(model.double(), idx, tgt)
    with open(os.path.join(out, "batch.json"), "w") as f:
        json.dump({"idx": idx.tolist(), "targets": tgt.tolist(), "loss_f32": loss32, "loss_f64": loss64,
                   "torch": torch.__version__, "transformers": transformers.__version__}, f, indent=1)
    print("%s: loss %.7f (float64 %.7f)" % (name, loss32, loss64))
    if name == "gpt2":
        shutil.copy(os.path.join(out, "batch.json"), os.path.join(HERE, "gpt2_sharded"))


def check_export(d, name):
    import tempfile
    cls = configs()[name][0]
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(d, "model.safetensors"), tmp)
    shutil.copy(os.path.join(HERE, name, "config.json"), tmp)  # colhf_save writes the weights only
    model = cls.from_pretrained(tmp, attn_implementation="eager").eval()
    idx, tgt = batch()
    print("%s from %s: loss %.7f" % (name, d, loss_of(model, idx, tgt)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--check-export":
        check_export(sys.argv[2], sys.argv[3])
    else:
        for i, (name, (cls, cfg)) in enumerate(configs().items()):
            make(name, cls, cfg, 1234 + i)

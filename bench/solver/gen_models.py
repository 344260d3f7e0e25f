#!/usr/bin/env python3
"""gen_models.py — writes benchmark models as IR text (.cir) until the C front
end lands: GPT-2 (the structure of examples/ir/gpt2-2layer.cir) and LLaMA
(RMSNorm, RoPE, grouped-query attention, SwiGLU), with repeated blocks `h`.

    gen_models.py OUTDIR --batch B [--models gpt2-124m,llama-7b,...] [--layers N]
"""
import argparse
import os

MODELS = {
    # name: family, layers, d_model, heads, kv heads, ffn, vocab, context
    "gpt2-124m": ("gpt2", 12, 768, 12, 12, 3072, 50257, 1024),
    "gpt2-1.5b": ("gpt2", 48, 1600, 25, 25, 6400, 50257, 1024),
    "llama-7b": ("llama", 32, 4096, 32, 32, 11008, 32000, 2048),
    "llama-70b": ("llama", 80, 8192, 64, 8, 28672, 32000, 2048),
    "gpt3-175b": ("gpt2", 96, 12288, 96, 96, 49152, 50257, 2048),
}


def gpt2(name, L, D, H, V, T, B, F, attention="fused", dropout=False):
    """attention: "fused" (one attention op, FlashAttention's kernel) or "unfused"
    (Megatron-LM's of 2021-22: the scores Q K^T as a batched GEMM, a causal
    softmax over them in memory, the probabilities times V as a GEMM; the
    layouts [B,H,T,Dh] by permutes). dropout: Megatron's three dropouts a
    layer (on the attention probabilities, unfused only, and on the attention's
    and the MLP's outputs before the residual adds), each written as the
    element-wise pass it is, x / (1 - p) with p = 0.1 (a scale: the IR has no
    dropout op; its 1-byte mask a element is not counted)."""
    Dh = D // H
    p, n = [], []
    p.append(f"param %wte.weight : f32[{V},{D}] init=normal(0.02)")
    p.append(f"param %wpe.weight : f32[{T},{D}] init=normal(0.01)")
    n.append(f"%tok : f32[{B},{T},{D}] = embedding(%idx, %wte.weight)")
    n.append(f"%pos : f32[{T},{D}] = position_embedding(%wpe.weight) {{len={T}}}")
    n.append(f"%x0 : f32[{B},{T},{D}] = add(%tok, %pos)")
    x = "%x0"
    for i in range(L):
        h, a = f"h.{i}", f"@h[{i}]"
        p += [f"param %{h}.ln_1.weight : f32[{D}] init=ones",
              f"param %{h}.ln_1.bias : f32[{D}] init=zeros",
              f"param %{h}.attn.c_attn.weight : f32[{D},3,{H},{Dh}] init=normal(0.02)",
              f"param %{h}.attn.c_attn.bias : f32[3,{H},{Dh}] init=zeros",
              f"param %{h}.attn.c_proj.weight : f32[{H},{Dh},{D}] init=normal(0.02)",
              f"param %{h}.attn.c_proj.bias : f32[{D}] init=zeros",
              f"param %{h}.ln_2.weight : f32[{D}] init=ones",
              f"param %{h}.ln_2.bias : f32[{D}] init=zeros",
              f"param %{h}.mlp.c_fc.weight : f32[{D},{F}] init=normal(0.02)",
              f"param %{h}.mlp.c_fc.bias : f32[{F}] init=zeros",
              f"param %{h}.mlp.c_proj.weight : f32[{F},{D}] init=normal(0.02)",
              f"param %{h}.mlp.c_proj.bias : f32[{D}] init=zeros"]
        act = f"f32[{B},{T},{D}]"
        hd = f"f32[{B},{T},{H},{Dh}]"
        one = f"f32[{B},{T},1,{H},{Dh}]"
        n += [f"%{h}.ln1 : {act} = layer_norm({x}, %{h}.ln_1.weight, %{h}.ln_1.bias) {{eps=1e-05}} {a}",
              f"%{h}.qkv0 : f32[{B},{T},3,{H},{Dh}] = dense(%{h}.ln1, %{h}.attn.c_attn.weight) {{k=1}} {a}",
              f"%{h}.qkv : f32[{B},{T},3,{H},{Dh}] = add(%{h}.qkv0, %{h}.attn.c_attn.bias) {a}",
              f"%{h}.q5 : {one}, %{h}.k5 : {one}, %{h}.v5 : {one} = split(%{h}.qkv) {{axis=2, parts=3}} {a}",
              f"%{h}.q : {hd} = reshape(%{h}.q5) {{shape=[{B},{T},{H},{Dh}]}} {a}",
              f"%{h}.k : {hd} = reshape(%{h}.k5) {{shape=[{B},{T},{H},{Dh}]}} {a}",
              f"%{h}.v : {hd} = reshape(%{h}.v5) {{shape=[{B},{T},{H},{Dh}]}} {a}",
              ] + ([f"%{h}.att : {hd} = attention(%{h}.q, %{h}.k, %{h}.v) {{causal=1, scale=0.0}} {a}"]
                   if attention == "fused" else unfused_attention(h, a, B, T, H, Dh, dropout)) + [
              f"%{h}.proj0 : {act} = dense(%{h}.att, %{h}.attn.c_proj.weight) {{k=2}} {a}",
              f"%{h}.proj{'d' if dropout else ''} : {act} = add(%{h}.proj0, %{h}.attn.c_proj.bias) {a}"] + (
              [f"%{h}.proj : {act} = scale(%{h}.projd) {{s=1.1111111}} {a}"] if dropout else []) + [
              f"%{h}.x1 : {act} = add({x}, %{h}.proj) {a}",
              f"%{h}.ln2 : {act} = layer_norm(%{h}.x1, %{h}.ln_2.weight, %{h}.ln_2.bias) {{eps=1e-05}} {a}",
              f"%{h}.fc0 : f32[{B},{T},{F}] = dense(%{h}.ln2, %{h}.mlp.c_fc.weight) {{k=1}} {a}",
              f"%{h}.fc : f32[{B},{T},{F}] = add(%{h}.fc0, %{h}.mlp.c_fc.bias) {a}",
              f"%{h}.act : f32[{B},{T},{F}] = gelu(%{h}.fc) {a}",
              f"%{h}.mp0 : {act} = dense(%{h}.act, %{h}.mlp.c_proj.weight) {{k=1}} {a}",
              f"%{h}.mp{'d' if dropout else ''} : {act} = add(%{h}.mp0, %{h}.mlp.c_proj.bias) {a}"] + (
              [f"%{h}.mp : {act} = scale(%{h}.mpd) {{s=1.1111111}} {a}"] if dropout else []) + [
              f"%{h}.out : {act} = add(%{h}.x1, %{h}.mp) {a}"]
        x = f"%{h}.out"
    p += [f"param %ln_f.weight : f32[{D}] init=ones", f"param %ln_f.bias : f32[{D}] init=zeros"]
    n += [f"%xf : f32[{B},{T},{D}] = layer_norm({x}, %ln_f.weight, %ln_f.bias) {{eps=1e-05}}",
          f"%logits : f32[{B},{T},{V}] = matmul(%xf, %wte.weight) {{ta=0, tb=1}}",
          "%loss : f32[] = cross_entropy(%logits, %targets)"]
    return p, n


def unfused_attention(h, a, B, T, H, Dh, dropout=False):
    bh, tt = f"f32[{B},{H},{T},{Dh}]", f"f32[{B},{H},{T},{T}]"
    return [f"%{h}.qh : {bh} = permute(%{h}.q) {{perm=[0,2,1,3]}} {a}",
            f"%{h}.kh : {bh} = permute(%{h}.k) {{perm=[0,2,1,3]}} {a}",
            f"%{h}.vh : {bh} = permute(%{h}.v) {{perm=[0,2,1,3]}} {a}",
            f"%{h}.sc : {tt} = matmul(%{h}.qh, %{h}.kh) {{ta=0, tb=1}} {a}",
            f"%{h}.pr{'d' if dropout else ''} : {tt} = softmax(%{h}.sc) {{causal=1}} {a}"] + (
           [f"%{h}.pr : {tt} = scale(%{h}.prd) {{s=1.1111111}} {a}"] if dropout else []) + [
            f"%{h}.ctx : {bh} = matmul(%{h}.pr, %{h}.vh) {{ta=0, tb=0}} {a}",
            f"%{h}.att : f32[{B},{T},{H},{Dh}] = permute(%{h}.ctx) {{perm=[0,2,1,3]}} {a}"]


def llama(name, L, D, H, Hkv, V, T, B, F):
    Dh = D // H
    p, n = [f"param %tok_embeddings.weight : f32[{V},{D}] init=normal(0.02)"], []
    n.append(f"%x0 : f32[{B},{T},{D}] = embedding(%idx, %tok_embeddings.weight)")
    x = "%x0"
    for i in range(L):
        h, a = f"h.{i}", f"@h[{i}]"
        p += [f"param %{h}.attention_norm.weight : f32[{D}] init=ones",
              f"param %{h}.attention.wq.weight : f32[{D},{H},{Dh}] init=normal(0.02)",
              f"param %{h}.attention.wk.weight : f32[{D},{Hkv},{Dh}] init=normal(0.02)",
              f"param %{h}.attention.wv.weight : f32[{D},{Hkv},{Dh}] init=normal(0.02)",
              f"param %{h}.attention.wo.weight : f32[{H},{Dh},{D}] init=normal(0.02)",
              f"param %{h}.ffn_norm.weight : f32[{D}] init=ones",
              f"param %{h}.feed_forward.w1.weight : f32[{D},{F}] init=normal(0.02)",
              f"param %{h}.feed_forward.w3.weight : f32[{D},{F}] init=normal(0.02)",
              f"param %{h}.feed_forward.w2.weight : f32[{F},{D}] init=normal(0.02)"]
        act, ff = f"f32[{B},{T},{D}]", f"f32[{B},{T},{F}]"
        q, kv = f"f32[{B},{T},{H},{Dh}]", f"f32[{B},{T},{Hkv},{Dh}]"
        n += [f"%{h}.n1 : {act} = rms_norm({x}, %{h}.attention_norm.weight) {{eps=1e-05}} {a}",
              f"%{h}.q0 : {q} = dense(%{h}.n1, %{h}.attention.wq.weight) {{k=1}} {a}",
              f"%{h}.k0 : {kv} = dense(%{h}.n1, %{h}.attention.wk.weight) {{k=1}} {a}",
              f"%{h}.v : {kv} = dense(%{h}.n1, %{h}.attention.wv.weight) {{k=1}} {a}",
              f"%{h}.q : {q} = rope(%{h}.q0) {{theta=10000}} {a}",
              f"%{h}.k : {kv} = rope(%{h}.k0) {{theta=10000}} {a}",
              f"%{h}.att : {q} = attention(%{h}.q, %{h}.k, %{h}.v) {{causal=1, scale=0.0}} {a}",
              f"%{h}.o : {act} = dense(%{h}.att, %{h}.attention.wo.weight) {{k=2}} {a}",
              f"%{h}.x1 : {act} = add({x}, %{h}.o) {a}",
              f"%{h}.n2 : {act} = rms_norm(%{h}.x1, %{h}.ffn_norm.weight) {{eps=1e-05}} {a}",
              f"%{h}.g : {ff} = dense(%{h}.n2, %{h}.feed_forward.w1.weight) {{k=1}} {a}",
              f"%{h}.u : {ff} = dense(%{h}.n2, %{h}.feed_forward.w3.weight) {{k=1}} {a}",
              f"%{h}.s : {ff} = silu(%{h}.g) {a}",
              f"%{h}.m : {ff} = mul(%{h}.s, %{h}.u) {a}",
              f"%{h}.d : {act} = dense(%{h}.m, %{h}.feed_forward.w2.weight) {{k=1}} {a}",
              f"%{h}.out : {act} = add(%{h}.x1, %{h}.d) {a}"]
        x = f"%{h}.out"
    p += [f"param %norm.weight : f32[{D}] init=ones", f"param %output.weight : f32[{D},{V}] init=normal(0.02)"]
    n += [f"%xf : f32[{B},{T},{D}] = rms_norm({x}, %norm.weight) {{eps=1e-05}}",
          f"%logits : f32[{B},{T},{V}] = dense(%xf, %output.weight) {{k=1}}",
          "%loss : f32[] = cross_entropy(%logits, %targets)"]
    return p, n


def write(outdir, name, B, layers=None, attention="fused", dropout=False):
    fam, L, D, H, Hkv, F, V, T = MODELS[name]
    L = layers or L
    gname = name.replace("-", "_").replace(".", "_")
    if fam == "gpt2":
        p, n = gpt2(gname, L, D, H, V, T, B, F, attention, dropout)
    else:
        p, n = llama(gname, L, D, H, Hkv, V, T, B, F)
    lines = ["# colossal-ir 1", f"graph {gname}", f"block h {L}",
             f"input %idx : i32[{B},{T}]", f"input %targets : i32[{B},{T}]"] + p + n + ["output %loss"]
    path = os.path.join(outdir, f"{name}-b{B}{f'-l{L}' if layers else ''}.cir")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--layers", type=int, help="blocks per model (default: the model's)")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for m in a.models.split(","):
        print(write(a.outdir, m, a.batch, a.layers))


if __name__ == "__main__":
    main()

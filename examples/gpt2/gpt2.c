/*
 * gpt2.c — the GPT-2 family: learned position embedding, pre-LN blocks,
 * fused QKV projection, GELU MLP, and the output head tied to wte.
 *
 * Sizes come from -D (defaults: GPT-2 124M, 124,439,808 parameters):
 *   N_LAYER, N_EMBD, N_HEAD, VOCAB, CTX   the architecture
 *   SEQ                                   tokens per sequence (default CTX)
 *   BATCH                                 sequences per step (--batch N)
 * Configurations:
 *   GPT-2 124M     (defaults)
 *   GPT-2 medium   -DN_LAYER=24 -DN_EMBD=1024 -DN_HEAD=16          354,823,168 parameters
 *   GPT-2 large    -DN_LAYER=36 -DN_EMBD=1280 -DN_HEAD=20
 *   GPT-2 xl       -DN_LAYER=48 -DN_EMBD=1600 -DN_HEAD=25
 *   GPT-3 175B     -DN_LAYER=96 -DN_EMBD=12288 -DN_HEAD=96 -DCTX=2048
 *   tiny (tests)   -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32
 * Parameter names follow Hugging Face's GPT2Model (wte.weight,
 * h.N.attn.c_attn.weight, ...); weights keep their structure in shapes
 * (c_attn is [D, 3, H, Dh]), converted to HF's layout at load and save.
 */
#include <colossal/model.h>

#ifndef N_LAYER
#define N_LAYER 12
#endif
#ifndef N_EMBD
#define N_EMBD 768
#endif
#ifndef N_HEAD
#define N_HEAD 12
#endif
#ifndef VOCAB
#define VOCAB 50257
#endif
#ifndef CTX
#define CTX 1024
#endif
#ifndef SEQ
#define SEQ CTX
#endif

enum { D = N_EMBD, H = N_HEAD, DH = N_EMBD / N_HEAD };

/* Causal self-attention: x [B, T, D] -> [B, T, D]. */
static tensor attn(tensor x) {
    tensor qkv = projection(x, "attn.c_attn", 1, BIAS, 3, H, DH); /* [B, T, 3, H, Dh] */
    tensor q = reshape(split(qkv, 2, 3, 0), BATCH, SEQ, H, DH);
    tensor k = reshape(split(qkv, 2, 3, 1), BATCH, SEQ, H, DH);
    tensor v = reshape(split(qkv, 2, 3, 2), BATCH, SEQ, H, DH);
    tensor att = attention(q, k, v, CAUSAL);                      /* [B, T, H, Dh] */
    return projection(att, "attn.c_proj", 2, BIAS, D);            /* weight [H, Dh, D] */
}

static tensor mlp(tensor x) {
    tensor h = gelu(linear(x, 4 * D, "mlp.c_fc"));
    return linear(h, D, "mlp.c_proj");
}

static tensor block(tensor x) {
    x = add(x, attn(layer_norm(x, "ln_1")));
    return add(x, mlp(layer_norm(x, "ln_2")));
}

MODEL(gpt2) {
    tensor idx = input("idx", I32, BATCH, SEQ);
    tensor targets = input("targets", I32, BATCH, SEQ);
    tensor tok = embedding(idx, VOCAB, D, "wte");
    tensor pos = position_embedding(SEQ, CTX, D, "wpe");
    tensor x = add(tok, pos);
    for (int l = 0; l < N_LAYER; l++)
        x = scope("h", l, block(x));
    x = layer_norm(x, "ln_f");
    tensor logits = matmul_nt(x, param_of("wte")); /* the head is tied to wte */
    return cross_entropy(logits, targets);
}

/*
 * llama.c — the LLaMA family: RMSNorm, SwiGLU MLP, rotary position
 * embedding, grouped-query attention, and an untied output head.
 *
 * Sizes come from -D (defaults: TinyLlama-1.1B, 1,100,048,384 parameters):
 *   N_LAYER, N_EMBD, N_HEAD, N_KV_HEAD, FFN, VOCAB   the architecture
 *   SEQ                                              tokens per sequence (default 2048)
 *   EPS, ROPE_THETA                                  RMSNorm epsilon, RoPE base
 *   BATCH                                            sequences per step (--batch N)
 * Configurations:
 *   TinyLlama-1.1B (defaults)
 *   LLaMA-2 7B     -DN_LAYER=32 -DN_EMBD=4096 -DN_HEAD=32 -DN_KV_HEAD=32 -DFFN=11008 -DSEQ=4096
 *   tiny (tests)   -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DN_KV_HEAD=2 -DFFN=128 -DVOCAB=256 -DSEQ=16
 * Parameter names follow Hugging Face's LlamaForCausalLM
 * (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...,
 * lm_head.weight); projections keep heads as a dim (q_proj is [D, H, Dh]).
 */
#include <colossal/model.h>

#ifndef N_LAYER
#define N_LAYER 22
#endif
#ifndef N_EMBD
#define N_EMBD 2048
#endif
#ifndef N_HEAD
#define N_HEAD 32
#endif
#ifndef N_KV_HEAD
#define N_KV_HEAD 4
#endif
#ifndef FFN
#define FFN 5632
#endif
#ifndef VOCAB
#define VOCAB 32000
#endif
#ifndef SEQ
#define SEQ 2048
#endif
#ifndef EPS
#define EPS 1e-5
#endif
#ifndef ROPE_THETA
#define ROPE_THETA 10000.0
#endif

enum { D = N_EMBD, H = N_HEAD, KVH = N_KV_HEAD, DH = N_EMBD / N_HEAD };

/* Grouped-query attention: H query heads share KVH key/value heads. */
static tensor self_attn(tensor x) {
    tensor q = rope_theta(projection(x, "self_attn.q_proj", 1, NO_BIAS, H, DH), ROPE_THETA);
    tensor k = rope_theta(projection(x, "self_attn.k_proj", 1, NO_BIAS, KVH, DH), ROPE_THETA);
    tensor v = projection(x, "self_attn.v_proj", 1, NO_BIAS, KVH, DH);
    tensor att = attention(q, k, v, CAUSAL);                   /* [B, T, H, Dh] */
    return projection(att, "self_attn.o_proj", 2, NO_BIAS, D); /* weight [H, Dh, D] */
}

/* SwiGLU: down(silu(gate(x)) * up(x)). */
static tensor mlp(tensor x) {
    tensor gate = silu(linear_nobias(x, FFN, "mlp.gate_proj"));
    tensor up = linear_nobias(x, FFN, "mlp.up_proj");
    return linear_nobias(mul(gate, up), D, "mlp.down_proj");
}

static tensor decoder_layer(tensor x) {
    x = add(x, self_attn(rms_norm_eps(x, EPS, "input_layernorm")));
    return add(x, mlp(rms_norm_eps(x, EPS, "post_attention_layernorm")));
}

MODEL(llama) {
    tensor idx = input("idx", I32, BATCH, SEQ);
    tensor targets = input("targets", I32, BATCH, SEQ);
    tensor x = embedding(idx, VOCAB, D, "model.embed_tokens");
    for (int l = 0; l < N_LAYER; l++)
        x = scope("model.layers", l, decoder_layer(x));
    x = rms_norm_eps(x, EPS, "model.norm");
    /* untied head, stored as Hugging Face stores it: [vocab, D] */
    tensor logits = matmul_nt(x, param_normal("lm_head.weight", 0.02, VOCAB, D));
    return cross_entropy(logits, targets);
}

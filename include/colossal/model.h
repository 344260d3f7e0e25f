/*
 * colossal/model.h — the header a model description includes.
 *
 * A model is a plain C file: it includes this header, defines one or more
 * models with MODEL(name), and builds its graph with the builtins below.
 * colossal-compile never runs the file: it parses it with libclang and
 * interprets a small subset of C symbolically (docs/model-language.md), so
 * the declarations here have no definitions. They exist so that the file
 * type-checks (`cc -fsyntax-only -I include model.c`) and editors understand it.
 *
 * Shapes are written outermost first: [B, T, D] is batch, time, features.
 * Builtins that create parameters name them under the current scope
 * (`scope("h", 3, ...)` + "mlp.c_fc" gives "h.3.mlp.c_fc.weight").
 */
#ifndef COLOSSAL_MODEL_H
#define COLOSSAL_MODEL_H

/* A tensor of the graph being built: only builtins make and take them. */
typedef struct colossal_tensor {
    int id_;
} tensor;

/* Element types. */
typedef enum colossal_dtype { F32, BF16, F16, I32 } dtype;

/* Attention masks, bias switches: named ints for readable calls. */
enum { FULL = 0, CAUSAL = 1 };
enum { NO_BIAS = 0, BIAS = 1 };

/* The batch size: `colossal-compile --batch N` defines it; 8 otherwise. */
#ifndef BATCH
#define BATCH 8
#endif

/* A model: `MODEL(gpt2) { ...; return loss; }`. The returned tensor is the
 * graph's output (the scalar loss for training). */
#define MODEL(name) tensor colossal_model_##name(void)

/* ---- leaves -------------------------------------------------------------- */

/* Data fed each step: input("idx", I32, BATCH, T). */
tensor input(const char *name, dtype dt, ...);
/* A parameter with an explicit initializer; dims follow. */
tensor param_normal(const char *name, double std, ...);
tensor param_zeros(const char *name, ...);
tensor param_ones(const char *name, ...);
/* An existing parameter by its full name ("wte" or "wte.weight"): tying. */
tensor param_of(const char *name);

/* ---- layers: create their parameters under the current scope -------------- */

/* x [..., in] -> [..., out]; weight [in, out] ~ N(0, 0.02), bias [out] = 0. */
tensor linear(tensor x, int out, const char *name);
tensor linear_nobias(tensor x, int out, const char *name);
/* Contracts x's last k dims with a weight [x's last k dims..., out dims...]
 * (N(0, 0.02)); bias (BIAS or NO_BIAS) has the out dims. Keeps structure in
 * shapes: projection(x, "c_attn", 1, BIAS, 3, H, Dh) has weight [D, 3, H, Dh]. */
tensor projection(tensor x, const char *name, int k, int bias, ...);
/* idx [...] (i32) -> [..., dim]; weight [vocab, dim] ~ N(0, 0.02). */
tensor embedding(tensor idx, int vocab, int dim, const char *name);
/* -> [len, dim] (rows 0..len-1); weight [positions, dim] ~ N(0, 0.01). */
tensor position_embedding(int len, int positions, int dim, const char *name);
/* Normalize the last dim; weight = 1 (and bias = 0 for layer norm), eps 1e-5. */
tensor layer_norm(tensor x, const char *name);
tensor layer_norm_eps(tensor x, double eps, const char *name);
tensor rms_norm(tensor x, const char *name);
tensor rms_norm_eps(tensor x, double eps, const char *name);

/* ---- scopes ---------------------------------------------------------------- */

/* Evaluates body as instance i of the repeated block `name`: parameters are
 * named name.i.*, and the solver ties the instances together. */
tensor scope(const char *name, int i, tensor body);
/* Evaluates body with parameter names prefixed by `name.` (no repetition). */
tensor group(const char *name, tensor body);

/* ---- one builtin per IR op ------------------------------------------------- */

tensor matmul(tensor a, tensor b);            /* [..., m, k] x [..., k, n] */
tensor matmul_nt(tensor a, tensor b);         /* [..., m, k] x [..., n, k] (b transposed) */
tensor matmul_tn(tensor a, tensor b);         /* [..., k, m] x [..., k, n] (a transposed) */
tensor dense(tensor x, tensor w, int k);      /* contract x's last k dims with w's first k */
tensor add(tensor a, tensor b);               /* element-wise, numpy broadcasting */
tensor sub(tensor a, tensor b);
tensor mul(tensor a, tensor b);
tensor divide(tensor a, tensor b);            /* the IR op div (stdlib.h has a div) */
tensor scale(tensor x, double s);             /* x * s */
tensor gelu(tensor x);
tensor relu(tensor x);
tensor silu(tensor x);
tensor tensor_tanh(tensor x);
tensor tensor_exp(tensor x);
tensor softmax(tensor x);                     /* over the last dim */
tensor softmax_causal(tensor x);              /* [..., t, s], masks s > t */
tensor layer_norm_op(tensor x, tensor weight, tensor bias, double eps);
tensor rms_norm_op(tensor x, tensor weight, double eps);
tensor embedding_op(tensor idx, tensor table);
tensor position_embedding_op(tensor table, int len);
tensor cross_entropy(tensor logits, tensor targets); /* [..., V] and [...] (i32) -> [] */
/* q [B, T, H, Dh], k and v [B, S, Hkv, Dh] (H a multiple of Hkv) -> [B, T, H, Dh]. */
tensor attention(tensor q, tensor k, tensor v, int causal);
tensor attention_scaled(tensor q, tensor k, tensor v, int causal, double scale);
tensor rope(tensor x);                        /* [B, T, H, Dh], theta 10000 */
tensor rope_theta(tensor x, double theta);
tensor reshape(tensor x, ...);                /* new dims; one may be -1 */
tensor permute(tensor x, ...);                /* axes */
tensor split(tensor x, int axis, int parts, int i); /* part i of `parts` equal parts */
tensor concat(int axis, tensor a, tensor b, ...);
tensor reduce_sum(tensor x, int axis, int keepdim);
tensor reduce_mean(tensor x, int axis, int keepdim);
tensor reduce_max(tensor x, int axis, int keepdim);
tensor cast(tensor x, dtype to);

/* ---- queries ------------------------------------------------------------- */

int rank(tensor x);
int dim(tensor x, int axis);                  /* axis < 0 counts from the end */

#endif

/*
 * interp.c — the reference interpreter (see interp.h): one plain loop nest
 * per op, f64 throughout, results rounded to bf16/f16 where the value says so.
 * The op semantics here are the definition docs/training-graph.md refers to.
 */
#include "interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct Interp {
    const Graph *g;
    double **buf;
};

/* ---- rounding -------------------------------------------------------------- */

/* Rounds to `bits` significant bits (round half to even), with the smallest
 * normal exponent emin (below it, subnormal spacing) and overflow to inf
 * above maxv. */
static double round_sig(double x, int bits, int emin, double maxv) {
    if (!isfinite(x) || x == 0) return x;
    int e;
    frexp(x, &e); /* x = m * 2^e, 0.5 <= |m| < 1 */
    if (e - 1 < emin) e = emin + 1;
    double q = ldexp(1.0, e - bits); /* spacing of representable numbers */
    double r = nearbyint(x / q) * q; /* default rounding mode: half to even */
    if (fabs(r) > maxv) return x < 0 ? -INFINITY : INFINITY;
    return r;
}

double interp_round(DType t, double x) {
    switch (t) {
    case DT_BF16: return round_sig(x, 8, -126, 3.3895313892515355e38);
    case DT_F16: return round_sig(x, 11, -14, 65504.0);
    default: return x;
    }
}

/* ---- setup ----------------------------------------------------------------- */

static int64_t numel(const Value *v) { return ir_shape_numel(v->shape); }

Interp *interp_new(const Graph *g) {
    Interp *it = ir_alloc(sizeof *it);
    it->g = g;
    it->buf = ir_alloc(sizeof(double *) * (size_t)(g->n_values ? g->n_values : 1));
    for (ValueId v = 0; v < g->n_values; v++)
        it->buf[v] = ir_alloc(sizeof(double) * (size_t)numel(&g->values[v]));
    return it;
}

void interp_free(Interp *it) {
    if (!it) return;
    for (ValueId v = 0; v < it->g->n_values; v++) ir_free(it->buf[v]);
    ir_free(it->buf);
    ir_free(it);
}

double *interp_data(Interp *it, ValueId v) {
    IR_ASSERT(v >= 0 && v < it->g->n_values);
    return it->buf[v];
}

void interp_set(Interp *it, ValueId v, const double *src) {
    const Value *x = &it->g->values[v];
    for (int64_t i = 0; i < numel(x); i++) it->buf[v][i] = interp_round(x->dtype, src[i]);
}

void interp_set_scalar(Interp *it, ValueId v, double x) { interp_set(it, v, &x); }

/* splitmix64 + Box-Muller: deterministic and portable. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) { return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0; }

void interp_init_leaves(Interp *it, uint64_t seed) {
    uint64_t s = seed;
    for (ValueId v = 0; v < it->g->n_values; v++) {
        const Value *x = &it->g->values[v];
        if (x->def != IR_NONE) continue;
        double *p = it->buf[v];
        for (int64_t i = 0; i < numel(x); i++) {
            double r = 0;
            switch (x->init.kind) {
            case INIT_NONE:
            case INIT_ZEROS: r = 0; break;
            case INIT_ONES: r = 1; break;
            case INIT_NORMAL:
                r = x->init.a * sqrt(-2 * log(rng_unit(&s))) * cos(6.283185307179586 * rng_unit(&s));
                break;
            case INIT_UNIFORM: r = x->init.a + (x->init.b - x->init.a) * rng_unit(&s); break;
            }
            p[i] = interp_round(x->dtype, r);
        }
    }
}

void interp_commit_nodes(Interp *it, int first, int last) {
    for (ValueId v = 0; v < it->g->n_values; v++) {
        const Value *x = &it->g->values[v];
        if (x->updates != IR_NONE && x->def >= first && x->def < last)
            memcpy(it->buf[x->updates], it->buf[v], sizeof(double) * (size_t)numel(x));
    }
}

void interp_commit(Interp *it) { interp_commit_nodes(it, 0, it->g->n_nodes); }

/* ---- indexing helpers -------------------------------------------------------- */

/* Offset in a tensor of shape s broadcast (numpy rules) to shape o, for the
 * flat index i of o. */
static int64_t bcast_off(Shape s, Shape o, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int d = o.rank - 1; d >= 0; d--) {
        int64_t c = i % o.d[d];
        i /= o.d[d];
        int sd = d - (o.rank - s.rank);
        if (sd >= 0) {
            if (s.d[sd] != 1) off += c * stride;
            stride *= s.d[sd];
        }
    }
    return off;
}

/* Splits shape s at axis into outer * n * inner. */
static void around(Shape s, int ax, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++) *outer *= s.d[d];
    *n = s.d[ax];
    for (int d = ax + 1; d < s.rank; d++) *inner *= s.d[d];
}

static int norm_axis(int64_t ax, int rank) { return (int)(ax < 0 ? ax + rank : ax); }

/* ---- op helpers ------------------------------------------------------------ */

typedef struct Ctx {
    Interp *it;
    const Node *n;
    const Value *in[IR_MAX_IN];
    const Value *out[IR_MAX_OUT];
    double *x[IR_MAX_IN];
    double *y[IR_MAX_OUT];
    StrBuf *err;
} Ctx;

static const double GELU_C = 0.7978845608028654; /* sqrt(2/pi) */

static double gelu(double x) { return 0.5 * x * (1 + tanh(GELU_C * (x + 0.044715 * x * x * x))); }
static double gelu_d(double x) {
    double t = tanh(GELU_C * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
}
static double sigm(double x) { return 1 / (1 + exp(-x)); }

static void run_unary(Ctx *c) {
    int64_t N = numel(c->out[0]);
    int op = c->n->op;
    for (int64_t i = 0; i < N; i++) {
        double x = c->x[0][i], r = 0;
        switch (op) {
        case OP_SCALE: r = x * c->n->attr[0].f; break;
        case OP_GELU: r = gelu(x); break;
        case OP_RELU: r = x > 0 ? x : 0; break;
        case OP_SILU: r = x * sigm(x); break;
        case OP_TANH: r = tanh(x); break;
        case OP_EXP: r = exp(x); break;
        case OP_CAST: r = x; break;
        case OP_ZEROS_LIKE: r = 0; break;
        default: IR_ASSERT(0);
        }
        c->y[0][i] = r;
    }
}

static void run_elem_bwd(Ctx *c) {
    int64_t N = numel(c->out[0]);
    for (int64_t i = 0; i < N; i++) {
        double a = c->x[0][i], dy = c->x[1][i], r = 0;
        switch (c->n->op) {
        case OP_GELU_BWD: r = dy * gelu_d(a); break;
        case OP_RELU_BWD: r = a > 0 ? dy : 0; break;
        case OP_SILU_BWD: r = dy * sigm(a) * (1 + a * (1 - sigm(a))); break;
        case OP_TANH_BWD: r = dy * (1 - a * a); break;
        case OP_GRAD_ACCUM: r = a + c->n->attr[0].f * dy; break;
        default: IR_ASSERT(0);
        }
        c->y[0][i] = r;
    }
}

static void run_binary(Ctx *c) {
    Shape o = c->out[0]->shape;
    int64_t N = numel(c->out[0]);
    for (int64_t i = 0; i < N; i++) {
        double a = c->x[0][bcast_off(c->in[0]->shape, o, i)];
        double b = c->x[1][bcast_off(c->in[1]->shape, o, i)];
        double r = 0;
        switch (c->n->op) {
        case OP_ADD: r = a + b; break;
        case OP_SUB: r = a - b; break;
        case OP_MUL: r = a * b; break;
        case OP_DIV: r = a / b; break;
        default: IR_ASSERT(0);
        }
        c->y[0][i] = r;
    }
}

static void run_expand(Ctx *c) {
    Shape o = c->out[0]->shape;
    for (int64_t i = 0; i < numel(c->out[0]); i++) c->y[0][i] = c->x[0][bcast_off(c->in[0]->shape, o, i)];
}

static void run_sum_to(Ctx *c) {
    Shape x = c->in[0]->shape;
    memset(c->y[0], 0, sizeof(double) * (size_t)numel(c->out[0]));
    for (int64_t i = 0; i < numel(c->in[0]); i++) c->y[0][bcast_off(c->out[0]->shape, x, i)] += c->x[0][i];
}

/* matmul with numpy batch broadcasting and optional transposes. */
static void run_matmul(Ctx *c) {
    Shape a = c->in[0]->shape, b = c->in[1]->shape, o = c->out[0]->shape;
    bool ta = c->n->attr[0].i, tb = c->n->attr[1].i;
    int64_t M = o.d[o.rank - 2], N = o.d[o.rank - 1];
    int64_t K = ta ? a.d[a.rank - 2] : a.d[a.rank - 1];
    Shape ob = {o.rank - 2, {0}}, ab = {a.rank - 2, {0}}, bb = {b.rank - 2, {0}};
    for (int d = 0; d < ob.rank; d++) ob.d[d] = o.d[d];
    for (int d = 0; d < ab.rank; d++) ab.d[d] = a.d[d];
    for (int d = 0; d < bb.rank; d++) bb.d[d] = b.d[d];
    int64_t nb = ir_shape_numel(ob);
    for (int64_t bi = 0; bi < nb; bi++) {
        const double *A = c->x[0] + bcast_off(ab, ob, bi) * M * K;
        const double *B = c->x[1] + bcast_off(bb, ob, bi) * K * N;
        double *C = c->y[0] + bi * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[n * K + k] : B[k * N + n]);
                C[m * N + n] = s;
            }
    }
}

/* dense and its gradients are matrix products once the dim groups are
 * flattened: x [L, K] . w [K, N]. */
static void run_dense_family(Ctx *c) {
    int64_t k = c->n->attr[0].i;
    int op = c->n->op;
    const Value *w = op == OP_DENSE_DW ? NULL : c->in[1];
    int64_t L = 1, K = 1, N = 1;
    if (op == OP_DENSE) {
        Shape x = c->in[0]->shape;
        for (int d = 0; d < x.rank - k; d++) L *= x.d[d];
        for (int d = 0; d < k; d++) K *= w->shape.d[d];
        N = ir_shape_numel(w->shape) / K;
    } else if (op == OP_DENSE_DX) {
        for (int d = 0; d < k; d++) K *= w->shape.d[d];
        N = ir_shape_numel(w->shape) / K;
        L = numel(c->in[0]) / N;
    } else {
        Shape x = c->in[0]->shape;
        for (int d = 0; d < x.rank - k; d++) L *= x.d[d];
        K = numel(c->in[0]) / L;
        N = numel(c->in[1]) / L;
    }
    const double *A = c->x[0], *B = c->x[1];
    double *C = c->y[0];
    if (op == OP_DENSE) { /* C[L,N] = A[L,K] B[K,N] */
        for (int64_t l = 0; l < L; l++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t q = 0; q < K; q++) s += A[l * K + q] * B[q * N + n];
                C[l * N + n] = s;
            }
    } else if (op == OP_DENSE_DX) { /* C[L,K] = dy[L,N] w[K,N]^T */
        for (int64_t l = 0; l < L; l++)
            for (int64_t q = 0; q < K; q++) {
                double s = 0;
                for (int64_t n = 0; n < N; n++) s += A[l * N + n] * B[q * N + n];
                C[l * K + q] = s;
            }
    } else { /* C[K,N] = x[L,K]^T dy[L,N] */
        for (int64_t q = 0; q < K; q++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t l = 0; l < L; l++) s += A[l * K + q] * B[l * N + n];
                C[q * N + n] = s;
            }
    }
}

/* Causal softmax masks column j of row i when j > i + (cols - rows), rows
 * being the second-to-last dim. */
static bool masked(bool causal, int64_t i, int64_t j, int64_t rows, int64_t cols) {
    return causal && j > i + (cols - rows);
}

static void run_softmax(Ctx *c) {
    Shape s = c->in[0]->shape;
    int64_t V = s.d[s.rank - 1], R = s.rank >= 2 ? s.d[s.rank - 2] : 1;
    int64_t rows = numel(c->in[0]) / V;
    bool causal = c->n->attr[0].i;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = c->x[0] + r * V;
        double *y = c->y[0] + r * V;
        if (c->n->op == OP_SOFTMAX) {
            double mx = -INFINITY, z = 0;
            for (int64_t j = 0; j < V; j++)
                if (!masked(causal, r % R, j, R, V) && x[j] > mx) mx = x[j];
            for (int64_t j = 0; j < V; j++) {
                y[j] = masked(causal, r % R, j, R, V) ? 0 : exp(x[j] - mx);
                z += y[j];
            }
            for (int64_t j = 0; j < V; j++) y[j] /= z;
        } else { /* softmax_bwd(y, dy): y * (dy - sum(y * dy)) */
            const double *dy = c->x[1] + r * V;
            double s2 = 0;
            for (int64_t j = 0; j < V; j++) s2 += x[j] * dy[j];
            for (int64_t j = 0; j < V; j++) y[j] = x[j] * (dy[j] - s2);
        }
    }
}

/* layer_norm, rms_norm and their gradients, one row at a time. */
static void run_norm(Ctx *c) {
    int op = c->n->op;
    bool ln = op == OP_LAYER_NORM || op == OP_LAYER_NORM_DX || op == OP_LAYER_NORM_DW;
    double eps = c->n->attr[0].f;
    Shape s = c->in[0]->shape;
    int64_t D = s.d[s.rank - 1], rows = numel(c->in[0]) / D;
    if (op == OP_LAYER_NORM_DW || op == OP_RMS_NORM_DW) memset(c->y[0], 0, sizeof(double) * (size_t)D);
    for (int64_t r = 0; r < rows; r++) {
        const double *x = c->x[0] + r * D;
        double mean = 0, ss = 0;
        if (ln) {
            for (int64_t j = 0; j < D; j++) mean += x[j];
            mean /= (double)D;
        }
        for (int64_t j = 0; j < D; j++) ss += (x[j] - mean) * (x[j] - mean);
        double rstd = 1 / sqrt(ss / (double)D + eps);
        switch (op) {
        case OP_LAYER_NORM:
        case OP_RMS_NORM: {
            double *y = c->y[0] + r * D;
            for (int64_t j = 0; j < D; j++)
                y[j] = (x[j] - mean) * rstd * c->x[1][j] + (ln ? c->x[2][j] : 0);
            break;
        }
        case OP_LAYER_NORM_DX:
        case OP_RMS_NORM_DX: {
            const double *w = c->x[1], *dy = c->x[2] + r * D;
            double *dx = c->y[0] + r * D;
            double mg = 0, mgx = 0; /* mean(g), mean(g * xhat), g = dy * w */
            for (int64_t j = 0; j < D; j++) {
                double g = dy[j] * w[j];
                mg += g;
                mgx += g * (x[j] - mean) * rstd;
            }
            mg /= (double)D;
            mgx /= (double)D;
            for (int64_t j = 0; j < D; j++) {
                double xh = (x[j] - mean) * rstd;
                dx[j] = rstd * (dy[j] * w[j] - (ln ? mg : 0) - xh * mgx);
            }
            break;
        }
        default: { /* *_dw: sum over rows of dy * xhat */
            const double *dy = c->x[1] + r * D;
            for (int64_t j = 0; j < D; j++) c->y[0][j] += dy[j] * (x[j] - mean) * rstd;
        }
        }
    }
}

static bool bad_index(Ctx *c, int64_t i, int64_t n, const char *what) {
    sb_printf(c->err, "%s index %lld is outside 0..%lld", what, (long long)i, (long long)n - 1);
    return false;
}

static bool run_embedding(Ctx *c) {
    int op = c->n->op;
    const Value *tab = op == OP_EMBEDDING ? c->in[1] : c->out[0];
    int64_t V = tab->shape.d[0], D = tab->shape.d[1];
    int64_t n = numel(c->in[0]);
    if (op == OP_EMBEDDING_DW) memset(c->y[0], 0, sizeof(double) * (size_t)(V * D));
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)c->x[0][i];
        if (r < 0 || r >= V) return bad_index(c, r, V, "embedding");
        for (int64_t j = 0; j < D; j++) {
            if (op == OP_EMBEDDING) c->y[0][i * D + j] = c->x[1][r * D + j];
            else c->y[0][r * D + j] += c->x[1][i * D + j];
        }
    }
    return true;
}

static void run_pos_embedding(Ctx *c) {
    if (c->n->op == OP_POS_EMBEDDING) {
        memcpy(c->y[0], c->x[0], sizeof(double) * (size_t)numel(c->out[0]));
    } else {
        memset(c->y[0], 0, sizeof(double) * (size_t)numel(c->out[0]));
        memcpy(c->y[0], c->x[0], sizeof(double) * (size_t)numel(c->in[0]));
    }
}

/* cross_entropy: mean over tokens of logsumexp(logits) - logits[target]. */
static bool run_cross_entropy(Ctx *c) {
    Shape l = c->in[0]->shape;
    int64_t V = l.d[l.rank - 1], N = numel(c->in[0]) / V;
    double total = 0, dl = c->n->op == OP_CROSS_ENTROPY_BWD ? c->x[2][0] : 0;
    for (int64_t r = 0; r < N; r++) {
        const double *x = c->x[0] + r * V;
        int64_t t = (int64_t)c->x[1][r];
        if (t < 0 || t >= V) return bad_index(c, t, V, "cross_entropy target");
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < V; j++) z += exp(x[j] - mx);
        if (c->n->op == OP_CROSS_ENTROPY) {
            total += mx + log(z) - x[t];
        } else {
            for (int64_t j = 0; j < V; j++)
                c->y[0][r * V + j] = (exp(x[j] - mx) / z - (j == t)) * dl / (double)N;
        }
    }
    if (c->n->op == OP_CROSS_ENTROPY) c->y[0][0] = total / (double)N;
    return true;
}

/* attention and its gradients: q [B,T,H,Dh], k, v [B,S,G,Dh], head h reads
 * kv head h / (H/G); causal keeps s <= t + (S - T). */
static void run_attention(Ctx *c) {
    Shape q = c->in[0]->shape, k = c->in[1]->shape;
    int64_t B = q.d[0], T = q.d[1], H = q.d[2], Dh = q.d[3], S = k.d[1], G = k.d[2], R = H / G;
    bool causal = c->n->attr[0].i;
    double scale = c->n->attr[1].f != 0 ? c->n->attr[1].f : 1 / sqrt((double)Dh);
    int op = c->n->op;
    const double *Q = c->x[0], *K = c->x[1], *Vv = c->x[2], *dY = op == OP_ATTENTION ? NULL : c->x[3];
    for (int o = 0; o < c->n->n_out; o++) memset(c->y[o], 0, sizeof(double) * (size_t)numel(c->out[o]));
    double *p = ir_alloc(sizeof(double) * (size_t)S), *dp = ir_alloc(sizeof(double) * (size_t)S);
#define QI(b, t, h, d) ((((b) * T + (t)) * H + (h)) * Dh + (d))
#define KI(b, s, g, d) ((((b) * S + (s)) * G + (g)) * Dh + (d))
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                int64_t g = h / R, ns = causal ? t + (S - T) + 1 : S;
                double mx = -INFINITY, z = 0;
                for (int64_t s = 0; s < ns; s++) {
                    double a = 0;
                    for (int64_t d = 0; d < Dh; d++) a += Q[QI(b, t, h, d)] * K[KI(b, s, g, d)];
                    p[s] = a * scale;
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int64_t s = 0; s < ns; s++) z += (p[s] = exp(p[s] - mx));
                for (int64_t s = 0; s < ns; s++) p[s] /= z;
                if (op == OP_ATTENTION) {
                    for (int64_t s = 0; s < ns; s++)
                        for (int64_t d = 0; d < Dh; d++)
                            c->y[0][QI(b, t, h, d)] += p[s] * Vv[KI(b, s, g, d)];
                    continue;
                }
                double sum = 0; /* dS = p * (dP - sum(p * dP)), dP = dy . v */
                for (int64_t s = 0; s < ns; s++) {
                    dp[s] = 0;
                    for (int64_t d = 0; d < Dh; d++) dp[s] += dY[QI(b, t, h, d)] * Vv[KI(b, s, g, d)];
                    sum += p[s] * dp[s];
                }
                for (int64_t s = 0; s < ns; s++) {
                    double ds = p[s] * (dp[s] - sum) * scale;
                    for (int64_t d = 0; d < Dh; d++) {
                        if (op == OP_ATTENTION_DQ) {
                            c->y[0][QI(b, t, h, d)] += ds * K[KI(b, s, g, d)];
                        } else {
                            c->y[0][KI(b, s, g, d)] += ds * Q[QI(b, t, h, d)];
                            c->y[1][KI(b, s, g, d)] += p[s] * dY[QI(b, t, h, d)];
                        }
                    }
                }
            }
#undef QI
#undef KI
    ir_free(p);
    ir_free(dp);
}

/* rope: rotates pairs (j, j + Dh/2) of each head by angle t * theta^(-2j/Dh),
 * t the position (dim 1); Hugging Face's rotate_half convention. rope_bwd
 * rotates by the opposite angle. */
static void run_rope(Ctx *c) {
    Shape s = c->in[0]->shape;
    int64_t B = s.d[0], T = s.d[1], H = s.d[2], Dh = s.d[3], half = Dh / 2;
    double theta = c->n->attr[0].f, sign = c->n->op == OP_ROPE ? 1 : -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const double *x = c->x[0] + ((b * T + t) * H + h) * Dh;
                double *y = c->y[0] + ((b * T + t) * H + h) * Dh;
                for (int64_t j = 0; j < half; j++) {
                    double ang = (double)t * pow(theta, -2.0 * (double)j / (double)Dh);
                    double cs = cos(ang), sn = sign * sin(ang);
                    y[j] = x[j] * cs - x[j + half] * sn;
                    y[j + half] = x[j + half] * cs + x[j] * sn;
                }
            }
}

static void run_permute(Ctx *c) {
    Shape x = c->in[0]->shape, o = c->out[0]->shape;
    const Attr *p = &c->n->attr[0];
    int64_t xs[IR_MAX_DIMS], st = 1;
    for (int d = x.rank - 1; d >= 0; d--) { xs[d] = st; st *= x.d[d]; }
    for (int64_t i = 0; i < numel(c->out[0]); i++) {
        int64_t r = i, off = 0;
        for (int d = o.rank - 1; d >= 0; d--) {
            off += (r % o.d[d]) * xs[p->v[d]];
            r /= o.d[d];
        }
        c->y[0][i] = c->x[0][off];
    }
}

/* split, concat and slice move blocks of (outer, n, inner). */
static void run_split_concat(Ctx *c) {
    int op = c->n->op;
    const Value *whole = op == OP_CONCAT ? c->out[0] : c->in[0];
    int ax = norm_axis(c->n->attr[0].i, whole->shape.rank);
    int64_t outer, n, inner;
    around(whole->shape, ax, &outer, &n, &inner);
    int parts = op == OP_CONCAT ? c->n->n_in : op == OP_SPLIT ? c->n->n_out : 1;
    int64_t at = op == OP_SLICE ? c->n->attr[1].i : 0;
    for (int k = 0; k < parts; k++) {
        const Value *pv = op == OP_CONCAT ? c->in[k] : c->out[k];
        int64_t pn = pv->shape.d[ax];
        double *part = op == OP_CONCAT ? c->x[k] : c->y[k];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < pn; j++) {
                double *w = (op == OP_CONCAT ? c->y[0] : c->x[0]) + (o * n + at + j) * inner;
                double *pp = part + (o * pn + j) * inner;
                if (op == OP_CONCAT) memcpy(w, pp, sizeof(double) * (size_t)inner);
                else memcpy(pp, w, sizeof(double) * (size_t)inner);
            }
        at += pn;
    }
}

static void run_reduce(Ctx *c) {
    int op = c->n->op;
    Shape x = c->in[0]->shape;
    int ax = norm_axis(c->n->attr[0].i, x.rank);
    int64_t outer, n, inner;
    around(x, ax, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *p = c->x[0] + o * n * inner + i;
            if (op == OP_REDUCE_MAX_BWD) {
                double mx = c->x[1][o * inner + i], dy = c->x[2][o * inner + i];
                for (int64_t j = 0; j < n; j++) c->y[0][o * n * inner + i + j * inner] = p[j * inner] == mx ? dy : 0;
                continue;
            }
            double s = op == OP_REDUCE_MAX ? -INFINITY : 0;
            for (int64_t j = 0; j < n; j++)
                s = op == OP_REDUCE_MAX ? fmax(s, p[j * inner]) : s + p[j * inner];
            c->y[0][o * inner + i] = op == OP_REDUCE_MEAN ? s / (double)n : s;
        }
}

/* ---- optimizer ops ---------------------------------------------------------- */

static void run_scalars(Ctx *c) {
    const Attr *at = c->n->attr;
    if (c->n->op == OP_SUMSQ) {
        double s = 0;
        for (int64_t i = 0; i < numel(c->in[0]); i++) s += c->x[0][i] * c->x[0][i];
        c->y[0][0] = s;
    } else if (c->n->op == OP_GRAD_COEF) {
        /* 1/scale (unscale), times min(1, max_norm / (norm + 1e-6)) as torch's
         * clip_grad_norm_; NaN (skip the step) when the gradients overflowed. */
        double sumsq = c->x[0][0], scale = c->x[1][0], coef = 1 / scale;
        double norm = sqrt(sumsq) / scale;
        if (!isfinite(sumsq)) coef = NAN;
        else if (at[0].f > 0 && norm > at[0].f) coef *= at[0].f / (norm + 1e-6);
        c->y[0][0] = coef;
    } else { /* loss_scale_update(scale, good, sumsq) */
        double scale = c->x[0][0], good = c->x[1][0];
        if (!isfinite(c->x[2][0])) {
            scale *= at[1].f;
            good = 0;
        } else if (++good >= (double)at[2].i) {
            scale *= at[0].f;
            good = 0;
        }
        c->y[0][0] = scale;
        c->y[1][0] = good;
    }
}

/* LAMB's moments and update direction at element i (You et al. 2019, with
 * bias correction): m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2,
 * u = (m'/bc1) / (sqrt(v'/bc2) + eps) + wd p, g the coefficient times the
 * gradient. Operands p, g, m, v are x[0..3]. */
static double lamb_dir(const Ctx *c, int64_t i, double coef, double bc1, double bc2, double *m, double *v) {
    const Attr *at = c->n->attr;
    double b1 = at[0].f, b2 = at[1].f, eps = at[2].f, wd = at[3].f, g = c->x[1][i] * coef;
    *m = b1 * c->x[2][i] + (1 - b1) * g;
    *v = b2 * c->x[3][i] + (1 - b2) * g * g;
    return *m / bc1 / (sqrt(*v / bc2) + eps) + wd * c->x[0][i];
}

/* The trust ratio from norms [sum p^2, sum u^2] (operand k; absent: 1). */
static bool trust_norms(const Ctx *c, int k, double *wn, double *un) {
    if (k >= c->n->n_in) return false;
    *wn = sqrt(c->x[k][0]);
    *un = sqrt(c->x[k][1]);
    return true;
}

/* lamb_norms, lars_norms: [sum p^2, sum u^2] (LAMB's update direction u) or
 * [sum p^2, sum g^2] (LARS, the gradient before the coefficient). */
static void run_trust_norms(Ctx *c) {
    int64_t N = numel(c->in[0]);
    bool lamb = c->n->op == OP_LAMB_NORMS;
    double sp = 0, su = 0, coef = 0, bc1 = 1, bc2 = 1;
    if (lamb) {
        coef = c->x[5][0];
        bc1 = 1 - pow(c->n->attr[0].f, c->x[4][0]);
        bc2 = 1 - pow(c->n->attr[1].f, c->x[4][0]);
    }
    for (int64_t i = 0; i < N; i++) {
        double p = c->x[0][i], m, v;
        double u = lamb ? lamb_dir(c, i, coef, bc1, bc2, &m, &v) : c->x[1][i];
        sp += p * p;
        su += u * u;
    }
    c->y[0][0] = sp;
    c->y[0][1] = su;
}

static void run_optimizer(Ctx *c) {
    const Attr *at = c->n->attr;
    int64_t N = numel(c->in[0]);
    int op = c->n->op, n_state = c->n->n_out - 1;
    /* operands after p, g and the state: lr, [step,] coef[, norms] */
    int k_lr = 2 + n_state, k_coef = k_lr + (op == OP_ADAMW || op == OP_LAMB ? 2 : 1);
    double lr = c->x[k_lr][0], coef = c->x[k_coef][0];
    bool skip = !isfinite(coef);
    for (int o = 0; o < c->n->n_out; o++)
        if (skip) memcpy(c->y[o], c->x[o == 0 ? 0 : o + 1], sizeof(double) * (size_t)N);
    if (skip) return;
    if (op == OP_ADAMW) { /* torch.optim.AdamW: decoupled decay, then the bias-corrected step */
        double b1 = at[0].f, b2 = at[1].f, eps = at[2].f, wd = at[3].f, step = c->x[5][0];
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        for (int64_t i = 0; i < N; i++) {
            double g = c->x[1][i] * coef, p = c->x[0][i] * (1 - lr * wd);
            double m = b1 * c->x[2][i] + (1 - b1) * g, v = b2 * c->x[3][i] + (1 - b2) * g * g;
            c->y[0][i] = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps);
            c->y[1][i] = m;
            c->y[2][i] = v;
        }
    } else if (op == OP_SGD) { /* torch.optim.SGD with momentum (no dampening, no Nesterov) */
        double mom = at[0].f, wd = at[1].f;
        for (int64_t i = 0; i < N; i++) {
            double d = c->x[1][i] * coef + wd * c->x[0][i];
            double b = mom * c->x[2][i] + d;
            c->y[0][i] = c->x[0][i] - lr * b;
            c->y[1][i] = b;
        }
    } else if (op == OP_LAMB) { /* p' = p - lr * ratio * u, ratio = ||p|| / ||u|| (1 if either is 0) */
        double step = c->x[5][0], bc1 = 1 - pow(at[0].f, step), bc2 = 1 - pow(at[1].f, step);
        double wn, un, ratio = 1;
        if (trust_norms(c, 7, &wn, &un) && wn > 0 && un > 0) ratio = wn / un;
        for (int64_t i = 0; i < N; i++) {
            double m, v, u = lamb_dir(c, i, coef, bc1, bc2, &m, &v);
            c->y[0][i] = c->x[0][i] - lr * ratio * u;
            c->y[1][i] = m;
            c->y[2][i] = v;
        }
    } else { /* LARS (You et al. 2017): local lr = trust ||p|| / (||g|| + wd ||p||) (1 if either
              * is 0); b' = momentum b + lr local_lr (g + wd p); p' = p - b' */
        double mom = at[0].f, wd = at[1].f, wn, gn, local = 1;
        if (trust_norms(c, 5, &wn, &gn) && wn > 0 && gn * fabs(coef) > 0)
            local = at[2].f * wn / (gn * fabs(coef) + wd * wn);
        for (int64_t i = 0; i < N; i++) {
            double b = mom * c->x[2][i] + lr * local * (c->x[1][i] * coef + wd * c->x[0][i]);
            c->y[0][i] = c->x[0][i] - b;
            c->y[1][i] = b;
        }
    }
}

/* ---- driver ---------------------------------------------------------------- */

static bool run_node(Interp *it, NodeId id, StrBuf *err) {
    const Graph *g = it->g;
    Ctx c = {.it = it, .n = &g->nodes[id], .err = err};
    for (int i = 0; i < c.n->n_in; i++) {
        c.in[i] = &g->values[c.n->in[i]];
        c.x[i] = it->buf[c.n->in[i]];
    }
    for (int k = 0; k < c.n->n_out; k++) {
        c.out[k] = &g->values[c.n->out[k]];
        c.y[k] = it->buf[c.n->out[k]];
    }
    bool ok = true;
    switch (c.n->op) {
    case OP_MATMUL: run_matmul(&c); break;
    case OP_DENSE: case OP_DENSE_DX: case OP_DENSE_DW: run_dense_family(&c); break;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: run_binary(&c); break;
    case OP_SCALE: case OP_GELU: case OP_RELU: case OP_SILU: case OP_TANH: case OP_EXP:
    case OP_CAST: case OP_ZEROS_LIKE: run_unary(&c); break;
    case OP_GELU_BWD: case OP_RELU_BWD: case OP_SILU_BWD: case OP_TANH_BWD:
    case OP_GRAD_ACCUM: run_elem_bwd(&c); break;
    case OP_SOFTMAX: case OP_SOFTMAX_BWD: run_softmax(&c); break;
    case OP_LAYER_NORM: case OP_RMS_NORM: case OP_LAYER_NORM_DX: case OP_LAYER_NORM_DW:
    case OP_RMS_NORM_DX: case OP_RMS_NORM_DW: run_norm(&c); break;
    case OP_EMBEDDING: case OP_EMBEDDING_DW: ok = run_embedding(&c); break;
    case OP_POS_EMBEDDING: case OP_POS_EMBEDDING_DW: run_pos_embedding(&c); break;
    case OP_CROSS_ENTROPY: case OP_CROSS_ENTROPY_BWD: ok = run_cross_entropy(&c); break;
    case OP_ATTENTION: case OP_ATTENTION_DQ: case OP_ATTENTION_DKV: run_attention(&c); break;
    case OP_ROPE: case OP_ROPE_BWD: run_rope(&c); break;
    case OP_RESHAPE: memcpy(c.y[0], c.x[0], sizeof(double) * (size_t)numel(c.out[0])); break;
    case OP_PERMUTE: run_permute(&c); break;
    case OP_SPLIT: case OP_CONCAT: case OP_SLICE: run_split_concat(&c); break;
    case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MAX_BWD:
        run_reduce(&c); break;
    case OP_SUM_TO: run_sum_to(&c); break;
    case OP_EXPAND: run_expand(&c); break;
    case OP_SUMSQ: case OP_GRAD_COEF: case OP_LOSS_SCALE_UPDATE: run_scalars(&c); break;
    case OP_ADAMW: case OP_SGD: case OP_LAMB: case OP_LARS: run_optimizer(&c); break;
    case OP_LAMB_NORMS: case OP_LARS_NORMS: run_trust_norms(&c); break;
    default: ir_panic(__FILE__, __LINE__, "interp: no semantics for op %s", ir_op(c.n->op)->name);
    }
    if (!ok) return false;
    for (int k = 0; k < c.n->n_out; k++)
        if (c.out[k]->dtype == DT_BF16 || c.out[k]->dtype == DT_F16)
            for (int64_t i = 0; i < numel(c.out[k]); i++) c.y[k][i] = interp_round(c.out[k]->dtype, c.y[k][i]);
    return true;
}

bool interp_run_range(Interp *it, int first, int last, StrBuf *err) {
    for (NodeId n = first; n < last; n++)
        if (!run_node(it, n, err)) {
            StrBuf pre;
            sb_init(&pre);
            sb_printf(&pre, "node %d (%s): ", n, ir_op(it->g->nodes[n].op)->name);
            sb_puts(&pre, sb_cstr(err));
            err->len = 0;
            sb_puts(err, sb_cstr(&pre));
            sb_free(&pre);
            return false;
        }
    return true;
}

bool interp_run(Interp *it, StrBuf *err) { return interp_run_range(it, 0, it->g->n_nodes, err); }

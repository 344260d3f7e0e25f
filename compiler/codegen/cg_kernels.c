/*
 * cg_kernels.c — the emitters of the kernel table (cg_ops.def): each writes
 * one node's launch into the schedule, calling the runtime (GEMM,
 * embedding, cross-entropy, copies) or a kernel it generates, specialized
 * to the node's local shapes, through cg_kernel(). Kernel bodies mirror the
 * reference interpreter's loops (ir/interp.c); reductions accumulate in
 * double. Storage follows each value's dtype: f32, or bf16/f16 held as
 * uint16_t, widened on load and rounded on store (cg_body's placeholders),
 * so one body serves every dtype (docs/generated-api.md, mixed precision).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"

/* The local shape of what a read of v at the current node reads. */
static Shape L(CgCtx *c, ValueId v) { return c->lp->v[cg_read(c, v)].local; }
static int64_t numel(Shape s) { return ir_shape_numel(s); }
static const Node *N_(CgCtx *c, NodeId id) { return ir_node(c->g, id); }

static bool unsupported(CgCtx *c, NodeId id, const char *why) {
    sb_printf(c->err, "%s %%%s: %s", ir_op(N_(c, id)->op)->name,
              ir_val(c->g, N_(c, id)->out[0])->name, why);
    return false;
}

/* ---- dtypes: 16-bit floats are storage, arithmetic is float/double ------------- */

static const struct {
    const char *colrt, *ctype, *ld, *st; /* ld/st: NULL for f32, i32 */
} cg_dt[DT__COUNT] = {
    [DT_F32] = {"COLRT_F32", "float", NULL, NULL},
    [DT_BF16] = {"COLRT_BF16", "uint16_t", "cg_bf16_f32", "cg_f32_bf16"},
    [DT_F16] = {"COLRT_F16", "uint16_t", "cg_f16_f32", "cg_f32_f16"},
    [DT_I32] = {"COLRT_I32", "int32_t", NULL, NULL},
};

const char *cg_colrt_dtype(DType t) { return cg_dt[t].colrt; }
const char *cg_ctype(DType t) { return cg_dt[t].ctype; }
bool cg_is_half(DType t) { return t == DT_BF16 || t == DT_F16; }

static DType dt_of(CgCtx *c, ValueId v) { return ir_val(c->g, v)->dtype; }

bool cg_graph_has_half(const Graph *g) {
    for (ValueId v = 0; v < g->n_values; v++)
        if (cg_is_half(ir_val(g, v)->dtype)) return true;
    return false;
}

void cg_half_helpers(StrBuf *b, const Graph *g, bool cuda) {
    /* C: a helper a file does not call is not an error (clang's -Wunused-function
     * warns of unused static functions in a main file) */
    const char *hd = cuda ? "__host__ __device__ " : "CG_UNUSED ";
    if (!cuda) sb_puts(b, CG_UNUSED_DEF);
    bool bf = !g, f16 = !g; /* only those the graph uses: nvcc warns of unused static functions */
    for (ValueId v = 0; g && v < g->n_values; v++) {
        bf |= ir_val(g, v)->dtype == DT_BF16;
        f16 |= ir_val(g, v)->dtype == DT_F16;
    }
    sb_puts(b, "/* bf16/f16 are storage only: loads widen to float, stores round to nearest\n"
               " * even (NaN stays NaN, f16 overflow gives inf), as colrt's\n"
               " * runtime/common/half.h and the reference interpreter round. */\n"
               "typedef union { uint32_t u; float f; } cg_bits;\n");
    if (bf)
        sb_printf(b,
                  "static inline %sfloat cg_bf16_f32(uint16_t h) {\n"
                  "    cg_bits c;\n    c.u = (uint32_t)h << 16;\n    return c.f;\n}\n"
                  "static inline %suint16_t cg_f32_bf16(float f) {\n"
                  "    cg_bits c;\n    c.f = f;\n    uint32_t x = c.u;\n"
                  "    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);\n"
                  "    x += 0x7fffu + ((x >> 16) & 1u);\n    return (uint16_t)(x >> 16);\n}\n",
                  hd, hd);
    if (f16)
        sb_printf(b,
                  "static inline %sfloat cg_f16_f32(uint16_t h) {\n"
                  "    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
                  "    cg_bits c;\n"
                  "    if (e == 0) return (s ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;\n"
                  "    c.u = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112u) << 23) | (m << 13);\n"
                  "    return c.f;\n}\n"
                  "static inline %suint16_t cg_f32_f16(float f) {\n"
                  "    cg_bits c;\n    c.f = f;\n    uint32_t x = c.u & 0x7fffffffu;\n"
                  "    const uint16_t sign = (uint16_t)((c.u >> 16) & 0x8000u);\n"
                  "    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);\n"
                  "    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);\n"
                  "    if (x < 0x38800000u) { c.u = x; return (uint16_t)(sign | (uint32_t)rintf(c.f * 16777216.0f)); }\n"
                  "    uint32_t h = (((x >> 23) - 112u) << 10) | ((x & 0x7fffffu) >> 13), rem = x & 0x1fffu;\n"
                  "    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;\n"
                  "    return (uint16_t)(sign | h);\n}\n",
                  hd, hd);
    sb_puts(b, "\n");
}

ValueId cg_master_of(const Graph *g, ValueId state) {
    for (ValueId w = 0; w < g->n_values; w++) {
        const Value *x = ir_val(g, w);
        if (x->updates == IR_NONE || x->def == IR_NONE || ir_node(g, x->def)->op != OP_CAST) continue;
        const Value *src = ir_val(g, ir_node(g, x->def)->in[0]);
        if (src->def == IR_NONE) continue;
        const Node *opt = ir_node(g, src->def);
        if (ir_op_is_update(opt->op) && opt->in[0] == state) return x->updates;
    }
    return IR_NONE;
}

/* Kernel bodies name operand k's element type $Tk, read an element as
 * $Lk(expr) (a float) and convert a result for storing as $Wk(expr); here
 * they become the operand's C type (dts[k]) and conversions. */
void cg_body_dt(StrBuf *out, int nargs, const DType *dts, const char *body) {
    for (const char *p = body; *p; p++) {
        if (p[0] != '$' || !(p[1] == 'T' || p[1] == 'L' || p[1] == 'W') || p[2] < '0' || p[2] > '9') {
            sb_putc(out, *p);
            continue;
        }
        char kind = p[1];
        char *end;
        long k = strtol(p + 2, &end, 10);
        IR_ASSERT(k >= 0 && k < nargs);
        DType t = dts[k];
        p = end - 1;
        if (kind == 'T') { sb_puts(out, cg_dt[t].ctype); continue; }
        IR_ASSERT(p[1] == '(');
        p++; /* at the '(' */
        if (kind == 'W') {
            if (cg_dt[t].st) sb_printf(out, "%s(", cg_dt[t].st);
            else sb_printf(out, "(%s)(", cg_dt[t].ctype);
            continue;
        }
        if (cg_dt[t].ld) { sb_printf(out, "%s(", cg_dt[t].ld); continue; }
        /* a plain load: the expression itself, without the parentheses */
        int depth = 1;
        const char *q = p + 1;
        for (; *q && depth; q++) depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
        IR_ASSERT(depth == 0);
        StrBuf inner;
        sb_init(&inner);
        sb_printf(&inner, "%.*s", (int)(q - 1 - (p + 1)), p + 1);
        cg_body_dt(out, nargs, dts, sb_cstr(&inner));
        sb_free(&inner);
        p = q - 1;
    }
}

void cg_body(CgCtx *c, StrBuf *out, int nargs, const KArg *args, const char *body) {
    DType dts[CG_MAX_KARGS];
    IR_ASSERT(nargs <= CG_MAX_KARGS);
    for (int k = 0; k < nargs; k++) dts[k] = dt_of(c, args[k].v);
    cg_body_dt(out, nargs, dts, body);
}

/* Offset into a tensor of shape s broadcast to o, for flat index `i` of o. */
static void bidx(StrBuf *b, Shape s, Shape o, const char *i) {
    if (ir_shape_eq(s, o)) { sb_puts(b, i); return; }
    int64_t ns = numel(s);
    if (ns == 1) { sb_puts(b, "0"); return; }
    bool suffix = s.rank <= o.rank;
    for (int d = 0; suffix && d < s.rank; d++) suffix = s.d[d] == o.d[o.rank - s.rank + d];
    if (suffix) { sb_printf(b, "(%s %% %lld)", i, (long long)ns); return; }
    sb_puts(b, "(0");
    int64_t ost = 1, sst = 1;
    for (int d = o.rank - 1; d >= 0; d--) {
        int sd = d - (o.rank - s.rank);
        if (sd >= 0 && s.d[sd] != 1)
            sb_printf(b, " + ((%s / %lld) %% %lld) * %lld", i, (long long)ost, (long long)o.d[d],
                      (long long)sst);
        if (sd >= 0) sst *= s.d[sd];
        ost *= o.d[d];
    }
    sb_puts(b, ")");
}

/* C's rows of a broadcast to o, so that no element pays a division (an
 * `omp simd` loop over a0[i] + a1[i % 192], GCC 12 -O2: 108 us against 7 us
 * for a plain add, fuse35; GPT-2 124M's a1[i % 49152]: 170 us against 26 by
 * rows, bench/codegen_cpu/broadcast_rows.c, bidx21): o's trailing dims from the last leftward
 * make a row, while each operand s[q] stays whole over them (read at its
 * row's base + j) or broadcast (its row's base alone), until the row holds
 * CG_ROW_MIN elements (the row's divisions then cost little). Writes operand
 * q's base for row `i` (the rows being o's leading dims) into base[q] and
 * whether it is whole into whole[q]; returns the row's width. */
enum { CG_ROW_MIN = 256 };
static int64_t brows(const Shape *s, int ns, Shape o, StrBuf *base, bool *whole) {
    int kind[CG_MAX_KARGS] = {0}; /* 0 all ones so far, 1 whole, 2 broadcast */
    IR_ASSERT(ns <= CG_MAX_KARGS && o.rank > 0);
    int64_t w = 1;
    int k = o.rank;
    while (k > 0 && (k == o.rank || w < CG_ROW_MIN)) {
        int d = k - 1, kd[CG_MAX_KARGS];
        bool ok = true;
        for (int q = 0; q < ns; q++) {
            int sd = d - (o.rank - s[q].rank);
            kd[q] = o.d[d] == 1 ? 0 : sd >= 0 && s[q].d[sd] == o.d[d] ? 1 : 2;
            ok &= !kd[q] || !kind[q] || kd[q] == kind[q];
        }
        if (!ok) break;
        for (int q = 0; q < ns; q++)
            if (kd[q]) kind[q] = kd[q];
        w *= o.d[d];
        k = d;
    }
    Shape ol = {.rank = k};
    for (int d = 0; d < k; d++) ol.d[d] = o.d[d];
    for (int q = 0; q < ns; q++) {
        int lead = k - (o.rank - s[q].rank);
        Shape sl = {.rank = lead > 0 ? lead : 0};
        for (int d = 0; d < sl.rank; d++) sl.d[d] = s[q].d[d];
        whole[q] = kind[q] == 1;
        StrBuf r;
        sb_init(&r);
        bidx(&r, sl, ol, "i");
        if (!strcmp(sb_cstr(&r), "0")) sb_puts(&base[q], "0");
        else if (whole[q]) sb_printf(&base[q], "%s * %lld", sb_cstr(&r), (long long)w);
        else sb_puts(&base[q], sb_cstr(&r));
        sb_free(&r);
    }
    return w;
}

/* A point kernel of n points (body, a point i) whose C form runs instead
 * `rows` rows of c_body (row i), OpenMP over them when the points are many,
 * as it would be over the points; CUDA keeps a thread per point. */
static void kernel_c_rows(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *body, int64_t rows,
                          const char *c_body, const char *off) {
    StrBuf e;
    sb_init(&e);
    sb_printf(&e, "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (i >= %lld) return;\n    {\n        %s\n    }", (long long)n, body);
    CgKernel k = {.n = rows, .prologue = "", .body = c_body, .off = off, .parallel = n > 4096, .npass = 1};
    k.pass[0] = (CgPass){(n + 255) / 256, 256, 0, sb_cstr(&e)};
    cg_kernel_ex(c, id, nargs, args, &k);
    sb_free(&e);
}

/* A point kernel over o reading operands of shapes s[0..ns) broadcast (bidx),
 * its body `line` with %q for operand q's index (q < 10) and %o for the
 * output's: writes the flat point body into `flat` and the body of C's row i
 * (brows; its elements j in an `omp simd` loop) into `row`; returns the number
 * of rows, 0 when no flat index divides (the flat kernel is then the same). */
static int64_t brow_body(StrBuf *row, StrBuf *flat, const Shape *s, int ns, Shape o, const char *line) {
    StrBuf base[CG_MAX_KARGS], fi[CG_MAX_KARGS];
    /* whole: brows sets it; without a division the row below is built but not used */
    bool whole[CG_MAX_KARGS] = {false}, divides = false;
    for (int q = 0; q < ns; q++) {
        sb_init(&base[q]);
        sb_init(&fi[q]);
        bidx(&fi[q], s[q], o, "i");
        divides |= strpbrk(sb_cstr(&fi[q]), "%/") != NULL;
    }
    int64_t w = divides ? brows(s, ns, o, base, whole) : 1;
    sb_puts(row, "const int64_t ");
    for (int q = 0; q < ns; q++) sb_printf(row, "%sr%d = %s", q ? ", " : "", q, sb_cstr(&base[q]));
    sb_printf(row, ";\n#ifdef _OPENMP\n#pragma omp simd\n#endif\n        for (int64_t j = 0; j < %lld; j++) ", (long long)w);
    for (const char *p = line; *p; p++) {
        if (p[0] == '%' && p[1] == 'o') {
            sb_printf(row, "i * %lld + j", (long long)w);
            sb_puts(flat, "i");
        } else if (p[0] == '%' && p[1] >= '0' && p[1] <= '9') {
            int q = p[1] - '0';
            sb_printf(row, whole[q] ? "r%d + j" : "r%d", q);
            sb_puts(flat, sb_cstr(&fi[q]));
        } else {
            sb_putc(row, *p);
            sb_putc(flat, *p);
            continue;
        }
        p++;
    }
    for (int q = 0; q < ns; q++) sb_free(&base[q]), sb_free(&fi[q]);
    return divides ? numel(o) / w : 0;
}

static void gemm_beta(CgCtx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, ValueId A, int64_t lda,
                      int64_t sA, ValueId B, int64_t ldb, int64_t sB, ValueId C, int64_t ldc, int64_t sC,
                      int64_t batch, int beta) {
    StrBuf *s = c->sched;
    sb_printf(s, "    colrt_gemm(NULL, %s, %d, %d, %lld, %lld, %lld, 1.0f, ", cg_colrt_dtype(dt_of(c, C)), ta, tb,
              (long long)M, (long long)N, (long long)K);
    cg_ptr(c, s, A);
    sb_printf(s, ", %lld, %lld, ", (long long)lda, (long long)sA);
    cg_ptr(c, s, B);
    sb_printf(s, ", %lld, %lld, %d.0f, ", (long long)ldb, (long long)sB, beta);
    cg_ptr(c, s, C);
    sb_printf(s, ", %lld, %lld, %lld);\n", (long long)ldc, (long long)sC, (long long)batch);
}

static void gemm(CgCtx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, ValueId A, int64_t lda,
                 int64_t sA, ValueId B, int64_t ldb, int64_t sB, ValueId C, int64_t ldc, int64_t sC,
                 int64_t batch) {
    gemm_beta(c, ta, tb, M, N, K, A, lda, sA, B, ldb, sB, C, ldc, sC, batch, 0);
}

/* The runtime's GEMM takes one dtype for A, B and C. */
static bool gemm_dtypes(CgCtx *c, NodeId id, ValueId C) {
    const Node *n = N_(c, id);
    if (dt_of(c, n->in[0]) != dt_of(c, C) || dt_of(c, n->in[1]) != dt_of(c, C))
        return unsupported(c, id, "operands of different float types (the runtime's GEMM takes one)");
    return true;
}

static bool emit_matmul(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    NodeId s2 = c->lp->n[id].sum_into;
    if (!gemm_dtypes(c, id, s2 != IR_NONE ? N_(c, s2)->out[0] : n->out[0])) return false;
    Shape sa = L(c, n->in[0]), sb = L(c, n->in[1]), so = L(c, n->out[0]);
    int ta = (int)n->attr[0].i, tb = (int)n->attr[1].i;
    int64_t M = so.d[so.rank - 2], N = so.d[so.rank - 1];
    int64_t K = ta ? sa.d[sa.rank - 2] : sa.d[sa.rank - 1];
    int64_t nb = numel(so) / (M * N);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (s2 != IR_NONE) { /* sum over the batch: K runs over the flattened batch too */
        gemm(c, 1, 0, M, N, K * nb, n->in[0], M, 0, n->in[1], N, 0, N_(c, s2)->out[0], N, 0, 1);
        return true;
    }
    if (nb == 1 || (sb.rank == 2 && !ta && sa.rank == so.rank)) {
        gemm(c, ta, tb, M * nb, N, K, n->in[0], lda, 0, n->in[1], ldb, 0, n->out[0], N, 0, 1);
        return true;
    }
    for (int k = 0; k < 2; k++) { /* each operand: full batch dims, or none */
        Shape x = k ? sb : sa;
        if (x.rank == 2) continue;
        if (x.rank != so.rank) return unsupported(c, id, "partly broadcast batch dims");
        for (int d = 0; d < so.rank - 2; d++)
            if (x.d[d] != so.d[d]) return unsupported(c, id, "broadcast batch dims");
    }
    gemm(c, ta, tb, M, N, K, n->in[0], lda, sa.rank == 2 ? 0 : M * K, n->in[1], ldb,
         sb.rank == 2 ? 0 : K * N, n->out[0], N, M * N, nb);
    return true;
}

static bool emit_dense(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    if (!gemm_dtypes(c, id, n->out[0])) return false;
    int64_t k = n->attr[0].i, Lr = 1, K = 1, N = 1;
    Shape x = L(c, n->in[0]);
    if (n->op == OP_DENSE) {
        Shape w = L(c, n->in[1]);
        for (int d = 0; d < x.rank - k; d++) Lr *= x.d[d];
        for (int d = 0; d < k; d++) K *= w.d[d];
        N = numel(w) / K;
        NodeId ba = c->lp->n[id].bias_add, ra = c->lp->n[id].res_add;
        ValueId bias = IR_NONE, res = IR_NONE;
        if (ba != IR_NONE) {
            const Node *an = N_(c, ba);
            bias = an->in[0] == n->out[0] ? an->in[1] : an->in[0];
        }
        if (ra != IR_NONE) { /* the add's other operand than the product (or its bias sum) */
            const Node *rn = N_(c, ra);
            ValueId s = ba != IR_NONE ? N_(c, ba)->out[0] : n->out[0];
            res = rn->in[0] == s ? rn->in[1] : rn->in[0];
        }
        /* the bias a row at a time: a flat point kernel's a0[i % N] divides per
         * point (N no power of two: GCC 12 -O2 -fopenmp, `omp simd`: 108 us for
         * gpt2-tiny's qkv bias, 256 x 192 points, against 14 us by rows; fuse35) */
        char body[160];
        if (res != IR_NONE && bias != IR_NONE) { /* lower.fuse: the product is written onto residual + bias */
            snprintf(body, sizeof body, "CG_FOR(j, %lld) a2[i * %lld + j] = a0[i * %lld + j] + a1[j];", (long long)N,
                     (long long)N, (long long)N);
            KArg a[3] = {{res, 0, 0}, {bias, 0, 0}, {n->out[0], 1, 0}};
            cg_kernel_rows(c, id, 3, a, Lr, N, body, NULL);
        } else if (bias != IR_NONE) { /* onto the bias broadcast over the rows */
            snprintf(body, sizeof body, "CG_FOR(j, %lld) a1[i * %lld + j] = a0[j];", (long long)N, (long long)N);
            KArg a[2] = {{bias, 0, 0}, {n->out[0], 1, 0}};
            cg_kernel_rows(c, id, 2, a, Lr, N, body, NULL);
        } else if (res != IR_NONE) { /* onto the residual */
            KArg a[2] = {{res, 0, 0}, {n->out[0], 1, 0}};
            cg_kernel(c, id, 2, a, Lr * N, "", "a1[i] = a0[i];");
        }
        gemm_beta(c, 0, 0, Lr, N, K, n->in[0], K, 0, n->in[1], N, 0, n->out[0], N, 0, 1, ba != IR_NONE || ra != IR_NONE);
    } else if (n->op == OP_DENSE_DX) { /* [L,K] = dy[L,N] w[K,N]^T */
        Shape w = L(c, n->in[1]);
        for (int d = 0; d < k; d++) K *= w.d[d];
        N = numel(w) / K;
        Lr = numel(x) / N;
        gemm(c, 0, 1, Lr, K, N, n->in[0], N, 0, n->in[1], N, 0, n->out[0], K, 0, 1);
    } else { /* [K,N] = x[L,K]^T dy[L,N] */
        for (int d = 0; d < x.rank - k; d++) Lr *= x.d[d];
        K = numel(x) / Lr;
        N = numel(L(c, n->in[1])) / Lr;
        NodeId ga = c->lp->n[id].grad_acc;
        if (ga == IR_NONE) {
            gemm(c, 1, 0, K, N, Lr, n->in[0], K, 0, n->in[1], N, 0, n->out[0], N, 0, 1);
            return true;
        }
        /* lower.fuse: acc += scale x^T dy in f32, the gradient accumulation's add
         * (and the cast to f32 before it) done by the GEMM */
        const Node *an = N_(c, ga);
        StrBuf *sc = c->sched;
        sb_printf(sc, "    colrt_gemm_f32c(NULL, %s, 1, 0, %lld, %lld, %lld, (float)%.17g, ", cg_colrt_dtype(dt_of(c, n->out[0])),
                  (long long)K, (long long)N, (long long)Lr, an->attr[0].f);
        cg_ptr(c, sc, n->in[0]);
        sb_printf(sc, ", %lld, 0, ", (long long)K);
        cg_ptr(c, sc, n->in[1]);
        sb_printf(sc, ", %lld, 0, 1.0f, ", (long long)N);
        cg_ptr(c, sc, an->in[0]);
        sb_printf(sc, ", %lld, 0, 1); /* accumulates into %%%s */\n", (long long)N, ir_val(c->g, an->in[0])->name);
    }
    return true;
}

/* The body of an element-wise binary op: a2[o] = a0[i0] op a1[i1]. */
static void binary_body(StrBuf *b, int op, const char *o, const char *i0, const char *i1) {
    static const char ops[] = {[OP_ADD] = '+', [OP_SUB] = '-', [OP_MUL] = '*', [OP_DIV] = '/'};
    sb_printf(b, "a2[%s] = $W2($L0(a0[%s]) %c $L1(a1[%s]));", o, i0, ops[op], i1);
}

static bool emit_binary(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    if (c->lp->n[id].fused && (c->lp->n[id].add_norm == IR_NONE || cg_add_by_norm(c, id))) {
        bool bias = false;
        for (int k = 0; k < 2; k++)
            bias |= ir_val(c->g, n->in[k])->def != IR_NONE && c->lp->n[ir_val(c->g, n->in[k])->def].bias_add == id;
        sb_puts(c->sched, bias ? "    /* added by the GEMM above (lower.fuse) */\n"
                          : c->lp->n[id].res_of != IR_NONE ? "    /* the residual, added by the GEMM above (lower.fuse) */\n"
                          : c->lp->n[id].add_norm != IR_NONE ? "    /* added by the norm below, row by row (lower.fuse) */\n"
                                                           : "    /* summed by the embedding gradient's scatter-add above */\n");
        return true;
    }
    Shape o = L(c, n->out[0]), s[2] = {L(c, n->in[0]), L(c, n->in[1])};
    StrBuf line, row, flat;
    sb_init(&line);
    sb_init(&row);
    sb_init(&flat);
    binary_body(&line, n->op, "%o", "%0", "%1");
    int64_t rows = brow_body(&row, &flat, s, 2, o, sb_cstr(&line));
    KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
    if (rows) kernel_c_rows(c, id, 3, a, numel(o), sb_cstr(&flat), rows, sb_cstr(&row), NULL);
    else cg_kernel(c, id, 3, a, numel(o), "", sb_cstr(&flat));
    sb_free(&line);
    sb_free(&row);
    sb_free(&flat);
    return true;
}

#define GELU_T "cg_tanhf(0.7978845608f * (x + 0.044715f * x * x * x))"

/* The body of an element-wise unary op (a1 = f(a0)); attr: scale's factor;
 * fcast: a cast between float types. */
static void unary_body(StrBuf *b, int op, double attr, bool fcast) {
    if (op == OP_GELU) /* in float: cg_tanhf vectorizes */
        sb_puts(b, "const float x = $L0(a0[i]), r = 0.5f * x * (1 + " GELU_T ");\n        ");
    else if (op == OP_SILU) /* in float: cg_expf vectorizes (libm's exp in double was 2.7 % of
                             * LLaMA ~124M's bf16 step at 0.16 GB/s; issue 21) */
        sb_puts(b, "const float x = $L0(a0[i]), r = x / (1 + cg_expf(-x));\n        ");
    else if (fcast) /* a float holds every f32, bf16 and f16 value exactly: one rounding either
                     * way, and no detour through double (vectorizes at full width) */
        sb_puts(b, "const float r = $L0(a0[i]);\n        ");
    else
        sb_puts(b, "double x = $L0(a0[i]), r;\n        ");
    switch (op) {
    case OP_GELU: break;
    case OP_SCALE: sb_printf(b, "r = x * %.17g;", attr); break;
    case OP_RELU: sb_puts(b, "r = x > 0 ? x : 0;"); break;
    case OP_SILU: break;
    case OP_TANH: sb_puts(b, "r = tanh(x);"); break;
    case OP_EXP: sb_puts(b, "r = exp(x);"); break;
    case OP_CAST: if (!fcast) sb_puts(b, "r = x;"); break;
    default: sb_puts(b, "r = 0 * x;"); break; /* zeros_like */
    }
    sb_puts(b, "\n        a1[i] = $W1(r);");
}

/* A cast or a gradient accumulation the weight gradient's GEMM does (lower.fuse). */
static bool fused_grad_acc(CgCtx *c, NodeId id) {
    if (!c->lp->n[id].fused) return false;
    sb_puts(c->sched, "    /* accumulated by the weight gradient's GEMM above (lower.fuse) */\n");
    return true;
}

static bool emit_update_group(CgCtx *c, NodeId run);

static bool emit_unary(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    if (n->op == OP_CAST && fused_grad_acc(c, id)) return true;
    NodeId run = c->lp->n[id].upd_run; /* lower.updates: the cast of an update's result in its group */
    if (run != IR_NONE && run != id) {
        sb_printf(c->sched, "    /* written by node %d's kernel, with its group */\n", run);
        return true;
    }
    if (run != IR_NONE) return emit_update_group(c, id);
    if (numel(L(c, n->in[0])) != numel(L(c, n->out[0]))) /* mixed precision under ZeRO-3 */
        return unsupported(c, id, "its operand is a ZeRO slice and its result whole (a sharded f32 master cast "
                                  "to a whole compute-dtype parameter is not lowered yet)");
    bool fcast = n->op == OP_CAST && ir_dtype_is_float(dt_of(c, n->in[0]));
    StrBuf b;
    sb_init(&b);
    unary_body(&b, n->op, n->attr[0].f, fcast);
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel(c, id, 2, a, numel(L(c, n->out[0])), "", sb_cstr(&b));
    sb_free(&b);
    return true;
}

/* The body of an element-wise backward (a2 = f(a0, dy = a1)); attr:
 * grad_accum's factor. */
static void elem_bwd_body(StrBuf *b, int op, double attr) {
    if (op == OP_GELU_BWD) /* in float: cg_tanhf vectorizes */
        sb_puts(b, "const float x = $L0(a0[i]), dy = $L1(a1[i]), t = " GELU_T ";\n        "
                    "const float r = dy * (0.5f * (1 + t) + 0.5f * x * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * x * x));");
    else if (op == OP_SILU_BWD) /* in float: cg_expf vectorizes */
        sb_puts(b, "const float x = $L0(a0[i]), dy = $L1(a1[i]), sg = 1 / (1 + cg_expf(-x));\n        "
                   "const float r = dy * sg * (1 + x * (1 - sg));");
    else
        sb_puts(b, "double x = $L0(a0[i]), dy = $L1(a1[i]), r;\n        ");
    switch (op) {
    case OP_GELU_BWD: break;
    case OP_SILU_BWD: break;
    case OP_RELU_BWD: sb_puts(b, "r = x > 0 ? dy : 0;"); break;
    case OP_TANH_BWD: sb_puts(b, "r = dy * (1 - x * x);"); break;
    default: sb_printf(b, "r = x + %.17g * dy;", attr); break; /* grad_accum */
    }
    sb_puts(b, "\n        a2[i] = $W2(r);");
}

static bool emit_elem_bwd(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    if (n->op == OP_GRAD_ACCUM && fused_grad_acc(c, id)) return true;
    StrBuf b;
    sb_init(&b);
    elem_bwd_body(&b, n->op, n->attr[0].f);
    KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel(c, id, 3, a, numel(L(c, n->out[0])), "", sb_cstr(&b));
    sb_free(&b);
    return true;
}

/* colossal-calibrate's kernel k, named `name`, in the CPU program's form (a C
 * function) or the CUDA program's (its passes and launcher); op names it in
 * the CUDA launch checks. */
static void calibrate_function(StrBuf *out, const char *name, bool cuda, int op, int nargs, const DType *dts,
                               const bool *outs, const CgKernel *k) {
    if (cuda) cg_cuda_function(out, name, nargs, dts, outs, k, ir_op(op)->name);
    else cg_c_function(out, name, nargs, dts, outs, k);
}

static bool elementwise_function(StrBuf *out, const char *name, bool cuda, int op, int64_t n) {
    if (n < 1) return false;
    StrBuf b;
    sb_init(&b);
    int nargs;
    if (op == OP_ADD || op == OP_SUB || op == OP_MUL || op == OP_DIV) binary_body(&b, op, "i", "i", "i"), nargs = 3;
    else if (op == OP_GELU || op == OP_SCALE || op == OP_RELU || op == OP_SILU || op == OP_TANH || op == OP_EXP ||
             op == OP_CAST)
        unary_body(&b, op, 1.0, op == OP_CAST), nargs = 2; /* f32 to f32 */
    else if (op == OP_GELU_BWD || op == OP_RELU_BWD || op == OP_SILU_BWD || op == OP_TANH_BWD)
        elem_bwd_body(&b, op, 1.0), nargs = 3;
    else {
        sb_free(&b);
        return false;
    }
    DType dts[3] = {DT_F32, DT_F32, DT_F32};
    bool outs[3] = {false, nargs == 2, true};
    CgKernel k = {.n = n, .prologue = "", .body = sb_cstr(&b)};
    calibrate_function(out, name, cuda, op, nargs, dts, outs, &k);
    sb_free(&b);
    return true;
}

bool cg_elementwise_c_function(StrBuf *out, const char *name, int op, int64_t n) {
    return elementwise_function(out, name, false, op, n);
}

bool cg_elementwise_cuda_function(StrBuf *out, const char *name, int op, int64_t n) {
    return elementwise_function(out, name, true, op, n);
}

static bool emit_expand(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    Shape o = L(c, n->out[0]), s = L(c, n->in[0]);
    StrBuf row, flat;
    sb_init(&row);
    sb_init(&flat);
    int64_t rows = brow_body(&row, &flat, &s, 1, o, "a1[%o] = $W1($L0(a0[%0]));");
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    if (rows) kernel_c_rows(c, id, 2, a, numel(o), sb_cstr(&flat), rows, sb_cstr(&row), NULL);
    else cg_kernel(c, id, 2, a, numel(o), "", sb_cstr(&flat));
    sb_free(&row);
    sb_free(&flat);
    return true;
}

/* C's column sums (sum_to, *_norm_dw): blocks of this many contiguous
 * columns, each summed row by row in SIMD lanes, the blocks over the threads */
enum { CG_SUM_COLS = 64 };

/* A two-pass column reduction over `rows` rows on CUDA: chunks of rows, so
 * that (column, chunk) threads fill the GPU with at least 16 rows each; the
 * rows per chunk in *per. */
static int64_t col_chunks(int64_t rows, int64_t cols, int64_t *per) {
    int64_t ch = (CG_FILL_THREADS + cols - 1) / cols, most = (rows + 15) / 16;
    if (ch > most) ch = most;
    if (ch < 1) ch = 1;
    *per = (rows + ch - 1) / ch;
    return (rows + *per - 1) / *per;
}

static bool emit_sum_to(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    if (c->lp->n[id].fused) {
        sb_puts(c->sched, "    /* summed by the GEMM above */\n");
        return true;
    }
    Shape s = L(c, n->in[0]), o = L(c, n->out[0]);
    int64_t sst[IR_MAX_DIMS], ost[IR_MAX_DIMS], st = 1;
    for (int d = s.rank - 1; d >= 0; d--) { sst[d] = st; st *= s.d[d]; }
    st = 1;
    for (int d = o.rank - 1; d >= 0; d--) { ost[d] = st; st *= o.d[d]; }
    /* off: a summed element's offset from its point's base by the flat index
     * r over the summed dims (CUDA's chunks of r); loops, off_r: the same
     * elements in the same order by a loop per summed dim (no division per
     * element: the same sum, bit for bit) */
    StrBuf base, off, loops, off_r;
    sb_init(&base);
    sb_init(&off);
    sb_init(&loops);
    sb_init(&off_r);
    sb_puts(&base, "0");
    sb_puts(&off, "0");
    sb_puts(&off_r, "0");
    int64_t R = 1;
    for (int sd = s.rank - 1; sd >= 0; sd--) {
        int od = sd - (s.rank - o.rank);
        if (od >= 0 && o.d[od] == s.d[sd]) {
            if (s.d[sd] > 1)
                sb_printf(&base, " + ((i / %lld) %% %lld) * %lld", (long long)ost[od],
                          (long long)o.d[od], (long long)sst[sd]);
        } else {
            sb_printf(&off, " + ((r / %lld) %% %lld) * %lld", (long long)R, (long long)s.d[sd],
                      (long long)sst[sd]);
            R *= s.d[sd];
        }
    }
    for (int sd = 0; sd < s.rank; sd++) {
        int od = sd - (s.rank - o.rank);
        if (od >= 0 && o.d[od] == s.d[sd]) continue;
        sb_printf(&loops, "for (int64_t r%d = 0; r%d < %lld; r%d++) ", sd, sd, (long long)s.d[sd], sd);
        sb_printf(&off_r, " + r%d * %lld", sd, (long long)sst[sd]);
    }
    StrBuf b, p0, p1;
    sb_init(&b);
    sb_init(&p0);
    sb_init(&p1);
    sb_printf(&b, "const int64_t base = %s;\n        double acc = 0;\n"
                  "        %sacc += $L0(a0[base + %s]);\n"
                  "        a1[i] = $W1(acc);",
              sb_cstr(&base), sb_cstr(&loops), sb_cstr(&off_r));
    sb_free(&loops);
    sb_free(&off_r);
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    int64_t P = numel(o), per, ch = col_chunks(R, P, &per);
    CgKernel k = {.n = P, .prologue = "", .body = sb_cstr(&b)};
    /* the kept dims trailing (a bias gradient: rows summed): C sums blocks of
     * CG_SUM_COLS contiguous columns row by row, in SIMD lanes, each column in
     * the same order as above (bit-identical), blocks over the threads */
    bool trailing = o.rank <= s.rank && numel(o) > 1;
    for (int d = 0; trailing && d < o.rank; d++) trailing = o.d[d] == s.d[s.rank - o.rank + d];
    StrBuf cb, one;
    sb_init(&cb);
    sb_init(&one);
    if (trailing) {
        sb_printf(&cb,
                  "const int64_t j0 = i * %d, nj = j0 + %d < %lld ? %d : %lld - j0;\n"
                  "        double acc[%d];\n"
                  "        for (int64_t j = 0; j < nj; j++) acc[j] = 0;\n"
                  "        for (int64_t r = 0; r < %lld; r++) {\n"
                  "            const $T0 *x = a0 + r * %lld + j0;\n"
                  "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
                  "            for (int64_t j = 0; j < nj; j++) acc[j] += $L0(x[j]);\n"
                  "        }\n"
                  "        for (int64_t j = 0; j < nj; j++) a1[j0 + j] = $W1(acc[j]);",
                  CG_SUM_COLS, CG_SUM_COLS, (long long)P, CG_SUM_COLS, (long long)P, CG_SUM_COLS, (long long)R,
                  (long long)P);
        k.n = (P + CG_SUM_COLS - 1) / CG_SUM_COLS;
        k.body = sb_cstr(&cb);
        k.parallel = true;
        if (ch <= 1) { /* CUDA: a thread per column, as the C form was */
            sb_printf(&one, "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i >= %lld) return;\n    %s",
                      (long long)P, sb_cstr(&b));
            k.npass = 1;
            k.pass[0] = (CgPass){(P + 255) / 256, 256, 0, sb_cstr(&one)};
        }
    }
    if (ch > 1) { /* CUDA: partial sums over chunks of r, then each point's partials in order */
        sb_printf(&p0,
                  "const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (t >= %lld) return;\n"
                  "    const int64_t i = t %% %lld, r0 = (t / %lld) * %lld, r1 = r0 + %lld < %lld ? r0 + %lld : %lld;\n"
                  "    const int64_t base = %s;\n"
                  "    float acc = 0.f;\n"
                  "    for (int64_t r = r0; r < r1; r++) acc += $L0(a0[base + %s]);\n"
                  "    cg_w[t] = acc;",
                  (long long)(ch * P), (long long)P, (long long)P, (long long)per, (long long)per, (long long)R,
                  (long long)per, (long long)R, sb_cstr(&base), sb_cstr(&off));
        sb_printf(&p1,
                  "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (i >= %lld) return;\n"
                  "    float acc = 0.f;\n"
                  "    for (int64_t q = 0; q < %lld; q++) acc += cg_w[q * %lld + i];\n"
                  "    a1[i] = $W1(acc);",
                  (long long)P, (long long)ch, (long long)P);
        k.npass = 2;
        k.pass[0] = (CgPass){(ch * P + 255) / 256, 256, 0, sb_cstr(&p0)};
        k.pass[1] = (CgPass){(P + 255) / 256, 256, 0, sb_cstr(&p1)};
        k.work_bytes = 4 * ch * P;
    }
    cg_kernel_ex(c, id, 2, a, &k);
    sb_free(&b);
    sb_free(&cb);
    sb_free(&one);
    sb_free(&p0);
    sb_free(&p1);
    sb_free(&base);
    sb_free(&off);
    return true;
}

static bool emit_softmax(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    Shape s = L(c, n->in[0]);
    int64_t V = s.d[s.rank - 1], R = s.rank >= 2 ? s.d[s.rank - 2] : 1, rows = numel(s) / V;
    StrBuf b;
    sb_init(&b);
    if (n->op == OP_SOFTMAX) {
        int causal = (int)n->attr[0].i;
        /* the limit: causal keeps j <= q + (V - R), q = i mod R */
        StrBuf lim;
        sb_init(&lim);
        if (causal) sb_printf(&lim, "(i %% %lld) + %lld + 1", (long long)R, (long long)(V - R));
        else sb_printf(&lim, "%lld", (long long)V);
        StrBuf b2;
        sb_init(&b2);
        sb_printf(&b2,
                  "const $T0 *x = a0 + i * %lld;\n        $T1 *y = a1 + i * %lld;\n"
                  "        const int64_t lim = %s;\n"
                  "        cg_acc mx = -INFINITY, z = 0;\n"
                  "        CG_FOR(j, lim) if ($L0(x[j]) > mx) mx = $L0(x[j]);\n"
                  "        CG_MAX(mx);\n"
                  "        CG_FOR(j, lim) z += exp($L0(x[j]) - mx);\n"
                  "        CG_SUM(z);\n"
                  "        CG_FOR(j, %lld) y[j] = $W1(j < lim ? exp($L0(x[j]) - mx) / z : 0.0);",
                  (long long)V, (long long)V, sb_cstr(&lim), (long long)V);
        sb_free(&b);
        b = b2;
        sb_free(&lim);
        KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel_rows(c, id, 2, a, rows, V, sb_cstr(&b), NULL);
    } else {
        sb_printf(&b,
                  "const $T0 *y = a0 + i * %lld;\n        const $T1 *dy = a1 + i * %lld;\n        $T2 *dx = a2 + i * %lld;\n"
                  "        cg_acc s = 0;\n"
                  "        CG_FOR(j, %lld) s += (cg_acc)$L0(y[j]) * $L1(dy[j]);\n"
                  "        CG_SUM(s);\n"
                  "        CG_FOR(j, %lld) dx[j] = $W2($L0(y[j]) * ($L1(dy[j]) - s));",
                  (long long)V, (long long)V, (long long)V, (long long)V, (long long)V);
        KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel_rows(c, id, 3, a, rows, V, sb_cstr(&b), NULL);
    }
    sb_free(&b);
    return true;
}

/* Row statistics of x (a0) for norms: mean (0 for rms) and rstd, in double. */
static void norm_stats(StrBuf *b, bool ln, int64_t D, double eps, const char *row) {
    sb_printf(b, "const $T0 *x = a0 + %s * %lld;\n        cg_acc mean = 0, ss = 0;\n", row,
              (long long)D);
    if (ln)
        sb_printf(b, "        CG_FOR_SUM(j, %lld, mean) mean += $L0(x[j]);\n        CG_SUM(mean);\n        mean /= %lld;\n",
                  (long long)D, (long long)D);
    sb_printf(b,
              "        CG_FOR_SUM(j, %lld, ss) ss += ($L0(x[j]) - mean) * ($L0(x[j]) - mean);\n"
              "        CG_SUM(ss);\n"
              "        const cg_acc rstd = 1 / sqrt(ss / %lld + %.17g);\n",
              (long long)D, (long long)D, eps);
}

/* A norm's forward, row i: y = (x - mean) rstd w (+ b): layer norm's operands
 * x, w, b -> y (a0..a3), RMS norm's x, w -> y (a0..a2). */
static void norm_fwd_body(StrBuf *b, bool ln, int64_t D, double eps) {
    norm_stats(b, ln, D, eps, "i");
    const char *y = ln ? "a3" : "a2";
    sb_printf(b, "        CG_FOR(j, %lld) %s[i * %lld + j] = $W%d(($L0(x[j]) - mean) * rstd * $L1(a1[j])%s);",
              (long long)D, y, (long long)D, ln ? 3 : 2, ln ? " + $L2(a2[j])" : "");
}

/* A norm's dx, row i: x, w, dy -> dx (a0..a3). */
static void norm_dx_body(StrBuf *b, bool ln, int64_t D, double eps) {
    norm_stats(b, ln, D, eps, "i");
    /* layer norm subtracts the mean of g = dy * w; RMS norm has no mean (no mg) */
    char mg_div[48] = "";
    if (ln) snprintf(mg_div, sizeof mg_div, "mg /= %lld; ", (long long)D);
    sb_printf(b,
              "        const $T2 *dy = a2 + i * %lld;\n        $T3 *dx = a3 + i * %lld;\n"
              "        cg_acc %smgx = 0;\n"
              "        CG_FOR_SUM(j, %lld, %smgx) { cg_acc g = (cg_acc)$L2(dy[j]) * $L1(a1[j]); %smgx += g * ($L0(x[j]) - mean) * rstd; }\n"
              "        %sCG_SUM(mgx);\n"
              "        %smgx /= %lld;\n"
              "        CG_FOR(j, %lld) dx[j] = $W3(rstd * ((cg_acc)$L2(dy[j]) * $L1(a1[j]) - %s - ($L0(x[j]) - mean) * rstd * mgx));",
              (long long)D, (long long)D, ln ? "mg = 0, " : "", (long long)D, ln ? "mg, " : "", ln ? "mg += g; " : "",
              ln ? "CG_SUM(mg);\n        " : "", mg_div, (long long)D, (long long)D, ln ? "mg" : "0");
}

/* A norm's dw in C, the kernel's one point (x, dy -> dw as a0..a2): the
 * rows' statistics into the workspace cg_w (2 rows floats: f32, as the CUDA
 * form keeps them), OpenMP over the rows; then OpenMP over blocks of
 * CG_SUM_COLS columns, each summed over the rows in double SIMD lanes (as
 * sum_to). It was one thread's pass over the rows. */
static void norm_dw_c_body(StrBuf *b, bool ln, int64_t rows, int64_t D, double eps) {
    sb_puts(b, "#ifdef _OPENMP\n#pragma omp parallel for schedule(static)\n#endif\n");
    sb_printf(b, "        for (int64_t r = 0; r < %lld; r++) {\n        ", (long long)rows);
    norm_stats(b, ln, D, eps, "r");
    sb_puts(b, "        cg_w[2 * r] = (float)mean;\n        cg_w[2 * r + 1] = (float)rstd;\n        }\n");
    sb_puts(b, "#ifdef _OPENMP\n#pragma omp parallel for schedule(static)\n#endif\n");
    sb_printf(b,
              "        for (int64_t q = 0; q < %lld; q++) {\n"
              "        const int64_t j0 = q * %d, nj = j0 + %d < %lld ? %d : %lld - j0;\n"
              "        double acc[%d];\n"
              "        for (int64_t j = 0; j < nj; j++) acc[j] = 0;\n"
              "        for (int64_t r = 0; r < %lld; r++) {\n"
              "            const $T0 *x = a0 + r * %lld + j0;\n            const $T1 *dy = a1 + r * %lld + j0;\n"
              "            const double mean = cg_w[2 * r], rstd = cg_w[2 * r + 1];\n"
              "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
              "            for (int64_t j = 0; j < nj; j++) acc[j] += (double)$L1(dy[j]) * ($L0(x[j]) - mean) * rstd;\n"
              "        }\n"
              "        for (int64_t j = 0; j < nj; j++) a2[j0 + j] = $W2(acc[j]);\n"
              "        }\n        (void)i;",
              (long long)((D + CG_SUM_COLS - 1) / CG_SUM_COLS), CG_SUM_COLS, CG_SUM_COLS, (long long)D, CG_SUM_COLS,
              (long long)D, CG_SUM_COLS, (long long)rows, (long long)D, (long long)D);
}

/* A layer norm's (ln: x, weight, bias -> y) or an RMS norm's (x, weight -> y)
 * forward over rows x D f32 elements, eps 1e-5, in either form. */
static void norm_function(StrBuf *out, const char *name, bool cuda, bool ln, int64_t rows, int64_t D) {
    IR_ASSERT(rows > 0 && D > 0);
    StrBuf b;
    sb_init(&b);
    norm_fwd_body(&b, ln, D, 1e-5);
    DType dts[4] = {DT_F32, DT_F32, DT_F32, DT_F32};
    bool outs[4] = {false, false, !ln, ln};
    CgKernel k = {.n = rows, .prologue = "", .body = sb_cstr(&b), .rows = true, .rows_width = D};
    calibrate_function(out, name, cuda, ln ? OP_LAYER_NORM : OP_RMS_NORM, ln ? 4 : 3, dts, outs, &k);
    sb_free(&b);
}

void cg_layer_norm_c_function(StrBuf *out, const char *name, int64_t rows, int64_t D) {
    norm_function(out, name, false, true, rows, D);
}

void cg_rms_norm_c_function(StrBuf *out, const char *name, int64_t rows, int64_t D) {
    norm_function(out, name, false, false, rows, D);
}

void cg_norm_cuda_function(StrBuf *out, const char *name, bool rms, int64_t rows, int64_t D) {
    norm_function(out, name, true, !rms, rows, D);
}

void cg_layer_norm_bwd_c_functions(StrBuf *out, const char *dx, const char *dw, int64_t rows, int64_t D) {
    IR_ASSERT(rows > 0 && D > 0);
    StrBuf b;
    sb_init(&b);
    norm_dx_body(&b, true, D, 1e-5);
    DType dts[4] = {DT_F32, DT_F32, DT_F32, DT_F32};
    bool outs[4] = {false, false, false, true};
    CgKernel k = {.n = rows, .prologue = "", .body = sb_cstr(&b), .rows = true, .rows_width = D};
    cg_c_function(out, dx, 4, dts, outs, &k);
    sb_free(&b);
    sb_init(&b);
    norm_dw_c_body(&b, true, rows, D, 1e-5);
    outs[1] = false, outs[2] = true;
    k = (CgKernel){.n = 1, .prologue = "", .body = sb_cstr(&b), .npass = 1, .work_bytes = 8 * rows};
    cg_c_function(out, dw, 3, dts, outs, &k);
    sb_free(&b);
}

static bool emit_norm(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    bool ln = n->op == OP_LAYER_NORM || n->op == OP_LAYER_NORM_DX;
    Shape s = L(c, n->in[0]);
    int64_t D = s.d[s.rank - 1], rows = numel(s) / D;
    StrBuf b;
    sb_init(&b);
    NodeId fa = cg_norm_add(c, id); /* lower.fuse: the add before it, done here first */
    int na = ln ? 4 : 3;
    if (fa != IR_NONE) /* the sum, rounded as the add rounds it; each thread reads back its own j */
        sb_printf(&b, "CG_FOR(j, %lld) a0[i * %lld + j] = $W0($L%d(a%d[i * %lld + j]) + $L%d(a%d[i * %lld + j]));\n        ",
                  (long long)D, (long long)D, na, na, (long long)D, na + 1, na + 1, (long long)D);
    if (n->op == OP_LAYER_NORM || n->op == OP_RMS_NORM) {
        norm_fwd_body(&b, ln, D, n->attr[0].f);
        KArg a[6] = {{n->in[0], fa != IR_NONE, 0}, {n->in[1], 0, 0}, {ln ? n->in[2] : n->out[0], !ln, 0},
                     {n->out[0], 1, 0}};
        if (fa != IR_NONE) {
            a[na] = (KArg){N_(c, fa)->in[0], 0, 0};
            a[na + 1] = (KArg){N_(c, fa)->in[1], 0, 0};
        }
        cg_kernel_rows(c, id, fa != IR_NONE ? na + 2 : na, a, rows, D, sb_cstr(&b), NULL);
    } else { /* dx(x, w, dy) */
        norm_dx_body(&b, ln, D, n->attr[0].f);
        KArg a[4] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->in[2], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel_rows(c, id, 4, a, rows, D, sb_cstr(&b), NULL);
    }
    sb_free(&b);
    return true;
}

/* *_norm_dw(x, dy). C: norm_dw_c_body. CUDA: the rows' statistics (a block
 * per row), then column partials over chunks of rows, then each column's
 * partials in chunk order (deterministic). */
static bool emit_norm_dw(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    bool ln = n->op == OP_LAYER_NORM_DW;
    Shape s = L(c, n->in[0]);
    int64_t D = s.d[s.rank - 1], rows = numel(s) / D;
    if (!ir_shape_eq(L(c, n->in[1]), s) || numel(L(c, n->out[0])) != D) /* a split feature dim */
        return unsupported(c, id, "x, dy and the weight gradient must hold the same features on each device");
    StrBuf b, p0, p1, p2;
    sb_init(&b);
    sb_init(&p0);
    sb_init(&p1);
    sb_init(&p2);
    int64_t per, ch = col_chunks(rows, D, &per);
    norm_dw_c_body(&b, ln, rows, D, n->attr[0].f);
    sb_puts(&p0, "const int64_t r = blockIdx.x;\n    ");
    norm_stats(&p0, ln, D, n->attr[0].f, "r");
    sb_puts(&p0, "    if (threadIdx.x == 0) { cg_w[2 * r] = mean; cg_w[2 * r + 1] = rstd; }");
    sb_printf(&p1,
              "const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (t >= %lld) return;\n"
              "    const int64_t j = t %% %lld, r0 = (t / %lld) * %lld, r1 = r0 + %lld < %lld ? r0 + %lld : %lld;\n"
              "    float acc = 0.f;\n"
              "    for (int64_t r = r0; r < r1; r++)\n"
              "        acc += $L1(a1[r * %lld + j]) * ($L0(a0[r * %lld + j]) - cg_w[2 * r]) * cg_w[2 * r + 1];\n"
              "    cg_w[%lld + t] = acc;",
              (long long)(ch * D), (long long)D, (long long)D, (long long)per, (long long)per, (long long)rows,
              (long long)per, (long long)rows, (long long)D, (long long)D, (long long)(2 * rows));
    sb_printf(&p2,
              "const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (j >= %lld) return;\n"
              "    float acc = 0.f;\n"
              "    for (int64_t q = 0; q < %lld; q++) acc += cg_w[%lld + q * %lld + j];\n"
              "    a2[j] = $W2(acc);",
              (long long)D, (long long)ch, (long long)(2 * rows), (long long)D);
    CgKernel k = {.n = 1, .prologue = "", .body = sb_cstr(&b), .npass = 3,
                  .work_bytes = 4 * (2 * rows + ch * D)};
    k.pass[0] = (CgPass){rows, cg_rows_threads(D), 0, sb_cstr(&p0)};
    k.pass[1] = (CgPass){(ch * D + 255) / 256, 256, 0, sb_cstr(&p1)};
    k.pass[2] = (CgPass){(D + 255) / 256, 256, 0, sb_cstr(&p2)};
    KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel_ex(c, id, 3, a, &k);
    sb_free(&b);
    sb_free(&p0);
    sb_free(&p1);
    sb_free(&p2);
    return true;
}

/* Vocabulary parallel: this rank holds the table's rows [o0, o0 + V) (o0 from
 * the mesh coordinates). The forward looks up the indices it holds and
 * writes zeros for the others (a pending sum over the split axes); the
 * backward adds, column by column in index order (deterministic), the rows of
 * the indices it holds. */
static bool emit_embedding_vocab(CgCtx *c, NodeId id, const char *off) {
    const Node *n = N_(c, id);
    int64_t N = numel(L(c, n->in[0]));
    char body[1024];
    if (n->op == OP_EMBEDDING) {
        Shape t = L(c, n->in[1]);
        if (dt_of(c, n->in[1]) != dt_of(c, n->out[0])) return unsupported(c, id, "a table and result of different float types");
        snprintf(body, sizeof body,
                 "const int64_t v = (int64_t)a0[i / %lld] - o0, d = i %% %lld;\n"
                 "        a2[i] = (v >= 0 && v < %lld) ? a1[v * %lld + d] : $W2(0.0);",
                 (long long)t.d[1], (long long)t.d[1], (long long)t.d[0], (long long)t.d[1]);
        char rows[1024]; /* C: an index's row at a time (no division per element) */
        snprintf(rows, sizeof rows,
                 "const int64_t v = (int64_t)a0[i] - o0;\n#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
                 "        for (int64_t j = 0; j < %lld; j++) a2[i * %lld + j] = (v >= 0 && v < %lld) ? a1[v * %lld + j] : $W2(0.0);",
                 (long long)t.d[1], (long long)t.d[1], (long long)t.d[0], (long long)t.d[1]);
        KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
        kernel_c_rows(c, id, 3, a, N * t.d[1], body, N, rows, off);
        return true;
    }
    ValueId acc = c->lp->n[id].acc_into, dst = acc != IR_NONE ? acc : n->out[0];
    if (cg_is_half(dt_of(c, dst))) return unsupported(c, id, "a vocabulary-parallel gradient of a 16-bit table");
    Shape t = L(c, n->out[0]);
    snprintf(body, sizeof body,
             "%s"
             "        for (int64_t r = 0; r < %lld; r++) {\n"
             "            const int64_t v = (int64_t)a0[r] - o0;\n"
             "            if (v >= 0 && v < %lld) a2[v * %lld + i] += a1[r * %lld + i];\n"
             "        }",
             acc != IR_NONE ? "" : "for (int64_t v = 0; v < VV; v++) a2[v * DD + i] = 0;\n",
             (long long)N, (long long)t.d[0], (long long)t.d[1], (long long)t.d[1]);
    StrBuf b;
    sb_init(&b);
    for (const char *p = body; *p; p++) { /* VV, DD: the local table's rows and columns */
        if (!strncmp(p, "VV", 2)) { sb_printf(&b, "%lld", (long long)t.d[0]); p++; }
        else if (!strncmp(p, "DD", 2)) { sb_printf(&b, "%lld", (long long)t.d[1]); p++; }
        else sb_putc(&b, *p);
    }
    KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {dst, 1, 0}};
    cg_kernel_off(c, id, 3, a, t.d[1], "", sb_cstr(&b), off);
    sb_free(&b);
    return true;
}

static bool emit_embedding(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    StrBuf *s = c->sched;
    StrBuf off;
    sb_init(&off);
    if (cg_shard_start(c, n->op == OP_EMBEDDING ? n->in[1] : n->out[0], 0, &off)) {
        bool ok = emit_embedding_vocab(c, id, sb_cstr(&off));
        sb_free(&off);
        return ok;
    }
    sb_free(&off);
    if (n->op == OP_EMBEDDING) {
        Shape t = L(c, n->in[1]);
        if (dt_of(c, n->in[1]) != dt_of(c, n->out[0])) return unsupported(c, id, "a table and result of different float types");
        sb_printf(s, "    colrt_embedding_fwd(NULL, %s, ", cg_colrt_dtype(dt_of(c, n->out[0])));
        cg_ptr(c, s, n->in[0]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->in[1]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->out[0]);
        sb_printf(s, ", %lld, %lld, %lld);\n", (long long)numel(L(c, n->in[0])), (long long)t.d[0],
                  (long long)t.d[1]);
    } else { /* embedding_dw(idx, dy), or scatter-added into the add's other operand */
        Shape t = L(c, n->out[0]);
        ValueId acc = c->lp->n[id].acc_into;
        if (dt_of(c, n->in[1]) != dt_of(c, acc != IR_NONE ? acc : n->out[0]))
            return unsupported(c, id, "a gradient and table gradient of different float types");
        sb_printf(s, "    colrt_embedding_bwd(NULL, %s, ", cg_colrt_dtype(dt_of(c, n->out[0])));
        cg_ptr(c, s, n->in[1]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->in[0]);
        sb_puts(s, ", ");
        cg_ptr(c, s, acc != IR_NONE ? acc : n->out[0]);
        sb_printf(s, ", %lld, %lld, %lld, %d);%s\n", (long long)numel(L(c, n->in[0])),
                  (long long)t.d[0], (long long)t.d[1], acc != IR_NONE,
                  acc != IR_NONE ? " /* accumulates: the add below is done */" : "");
    }
    return true;
}

static bool emit_pos_embedding(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    StrBuf *s = c->sched;
    if (dt_of(c, n->in[0]) != dt_of(c, n->out[0])) return unsupported(c, id, "an operand and result of different float types");
    const int64_t es = ir_dtype_size(dt_of(c, n->out[0]));
    int64_t ob = numel(L(c, n->out[0])) * es, ib = numel(L(c, n->in[0])) * es;
    Shape lo = L(c, n->out[0]);
    int64_t row = lo.d[1] * es; /* rows of this rank's columns */
    StrBuf off; /* sequence parallel: this rank's rows start here */
    sb_init(&off);
    bool split = cg_shard_start(c, n->out[0], 0, &off);
    if (n->op == OP_POS_EMBEDDING_DW) {
        sb_puts(s, "    colrt_memset0(");
        cg_ptr(c, s, n->out[0]);
        sb_printf(s, ", %lld, NULL);\n", (long long)ob);
    }
    if (split && n->op == OP_POS_EMBEDDING) { /* the table's rows [start, start + T) */
        sb_puts(s, "    colrt_memcpy(");
        cg_ptr(c, s, n->out[0]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->in[0]);
        sb_printf(s, " + (size_t)(%s) * %lld, %lld, COLRT_D2D, NULL);\n", sb_cstr(&off), (long long)lo.d[1], (long long)ob);
    } else if (split) { /* this rank's rows of the table: dy's rows from start, as many as dy has */
        int64_t T = L(c, n->in[0]).d[0];
        sb_printf(s, "    { int64_t r0 = %s, nr = %lld - r0; if (nr > %lld) nr = %lld;\n      if (nr > 0) colrt_memcpy(",
                  sb_cstr(&off), (long long)T, (long long)lo.d[0], (long long)lo.d[0]);
        cg_ptr(c, s, n->out[0]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->in[0]);
        sb_printf(s, " + (size_t)r0 * %lld, (size_t)nr * %lld, COLRT_D2D, NULL); }\n", (long long)lo.d[1], (long long)row);
    } else {
        sb_puts(s, "    colrt_memcpy(");
        cg_ptr(c, s, n->out[0]);
        sb_puts(s, ", ");
        cg_ptr(c, s, n->in[0]);
        sb_printf(s, ", %lld, COLRT_D2D, NULL);\n", (long long)(ob < ib ? ob : ib));
    }
    sb_free(&off);
    return true;
}

/* cross_entropy_bwd with bf16/f16 logits: one point per row, dloss (the loss
 * scale) applied before the one rounding, as the interpreter does; the
 * runtime's kernel would round (softmax - onehot) / N first, which f16 can
 * only hold as a subnormal for unlikely classes. In place over the logits
 * when the lowering fused it (a row is read before it is written). In float
 * with the vectorizable cg_expf and SIMD reductions (the runtime's forward
 * kernel sums the same way): a double libm exp per element, summed in index
 * order, ran GPT-2 124M's bf16 loss gradient at 0.3 GB/s, 7 % of the step
 * (bench/codegen_cpu/README.md); the float terms' error (~1e-7 relative) is
 * far below the one 16-bit rounding. C: OpenMP over the rows (256 rows of
 * 50257 are far more work than the 4096-point threshold of point kernels). */
static void ce_bwd_half(CgCtx *c, NodeId id, int64_t V, int64_t rows, int64_t Ng) {
    const Node *n = N_(c, id);
    char body[1536];
    snprintf(body, sizeof body,
             "const $T0 *x = a0 + i * %lld;\n        $T3 *y = a3 + i * %lld;\n"
             "        const int64_t t = a1[i];\n"
             "        const float g = (float)($L2(a2[0]) / %lld.0);\n"
             "        float mx = -INFINITY, z = 0;\n"
             "#ifdef _OPENMP\n#pragma omp simd reduction(max : mx)\n#endif\n"
             "        CG_FOR(j, %lld) mx = $L0(x[j]) > mx ? $L0(x[j]) : mx;\n"
             "        CG_MAX(mx);\n"
             "#ifdef _OPENMP\n#pragma omp simd reduction(+ : z)\n#endif\n"
             "        CG_FOR(j, %lld) z += cg_expf($L0(x[j]) - mx);\n"
             "        CG_SUM(z);\n"
             "        const float f = g / z;\n"
             "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
             "        CG_FOR(j, %lld) y[j] = $W3(t < 0 ? 0.0f : cg_expf($L0(x[j]) - mx) * f - (j == t ? g : 0.0f));",
             (long long)V, (long long)V, (long long)Ng, (long long)V, (long long)V, (long long)V);
    KArg a[4] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->in[2], 0, 0}, {n->out[0], 1, 0}};
    CgKernel k = {.n = rows, .prologue = "", .body = body, .rows = true, .rows_width = V, .parallel = true};
    cg_kernel_ex(c, id, 4, a, &k);
}

/* cross_entropy: the runtime's fused kernel, scaled by 1/(global tokens) so
 * that data-parallel shards sum to the global mean. */
static bool emit_cross_entropy(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    const Value *lg = ir_val(c->g, n->in[0]);
    Shape s = L(c, n->in[0]);
    int64_t V = s.d[s.rank - 1], Nl = numel(s) / V, Ng = ir_shape_numel(lg->shape) / V;
    StrBuf *b = c->sched;
    bool fwd = n->op == OP_CROSS_ENTROPY;
    if (cg_is_half(lg->dtype) && !fwd) {
        if (dt_of(c, n->out[0]) != lg->dtype) return unsupported(c, id, "logits and their gradient of different float types");
        ce_bwd_half(c, id, V, Nl, Ng);
        return true;
    }
    /* 16-bit logits: the loss only here, the gradient by ce_bwd_half */
    NodeId fused_bwd = fwd && !cg_is_half(lg->dtype) ? c->lp->n[id].ce_grad : IR_NONE;
    if (!fwd && c->lp->n[id].fused) { /* the forward wrote softmax - onehot here */
        sb_puts(b, "    /* softmax - onehot: written by the cross_entropy above */\n");
    } else {
        sb_puts(b, "    colrt_memset0(");
        if (fwd) cg_ptr(c, b, n->out[0]);
        else sb_printf(b, "CG_F(%s)", cg_scratch(c, 0).s);
        if (!fwd && dt_of(c, n->in[0]) != dt_of(c, n->out[0]))
            return unsupported(c, id, "logits and their gradient of different float types");
        sb_printf(b, ", 4, NULL);\n    colrt_cross_entropy(NULL, %s, ", cg_colrt_dtype(dt_of(c, n->in[0])));
        cg_ptr(c, b, n->in[0]);
        sb_puts(b, ", ");
        cg_ptr(c, b, n->in[1]);
        sb_puts(b, ", ");
        if (fwd) cg_ptr(c, b, n->out[0]);
        else sb_printf(b, "CG_F(%s)", cg_scratch(c, 0).s);
        sb_puts(b, ", NULL, ");
        if (fused_bwd != IR_NONE) cg_ptr(c, b, n->in[0]); /* in place over the logits */
        else if (fwd) sb_puts(b, "NULL");
        else cg_ptr(c, b, n->out[0]);
        sb_printf(b, ", %lld, %lld, 1.0f / %lld);\n", (long long)Nl, (long long)V, (long long)Ng);
    }
    if (!fwd) { /* times the incoming gradient (the loss scale) */
        KArg a[2] = {{n->in[2], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel(c, id, 2, a, numel(s), "", "a1[i] = $W1($L1(a1[i]) * $L0(a0[0]));");
    }
    return true;
}

typedef struct AttDims {
    int64_t B, T, H, Dh, S, G;
    int causal;
    double scale;
    int64_t Tg;                /* the queries of the whole sequence (T: this rank's) */
    char off[256];             /* where this rank's queries start (the o0 argument), "" if at 0 */
} AttDims;

static AttDims att_dims(CgCtx *c, const Node *n) {
    Shape q = L(c, n->in[0]), k = L(c, n->in[1]);
    AttDims a = {q.d[0], q.d[1], q.d[2], q.d[3], k.d[1], k.d[2],
                 (int)n->attr[0].i, n->attr[1].f, ir_val(c->g, n->in[0])->shape.d[1], ""};
    if (a.scale == 0) a.scale = 1 / sqrt((double)a.Dh);
    StrBuf o; /* sequence parallel: the causal mask needs the queries' global positions */
    sb_init(&o);
    if (a.causal && cg_shard_start(c, n->in[0], 1, &o)) snprintf(a.off, sizeof a.off, "%s", sb_cstr(&o));
    sb_free(&o);
    return a;
}

/* The kernel of an attention node, kind 0 forward, 1 dq, 2 dk/dv, in both
 * forms: its C body (body) and CUDA passes (cu) as the emitters below and
 * colossal-calibrate's kernels (cg_attention_c_function) write it. */
static void attention_kernel(int kind, const AttDims *d, const char *cs, StrBuf *body, StrBuf cu[2], CgKernel *k) {
    int64_t points = cg_attention_c(kind, d->B, d->T, d->S, d->H, d->G, d->Dh, d->scale, cs, body);
    *k = (CgKernel){.n = points, .prologue = "", .body = sb_cstr(body), .off = d->off[0] ? d->off : NULL, .parallel = true};
    cg_attention_cuda(kind, d->B, d->T, d->S, d->H, d->G, d->Dh, d->scale, cs, cu, k);
}

/* attention(q, k, v) -> out, attention_dq(q, k, v, dy) -> dq and
 * attention_dkv(q, k, v, dy) -> dk, dv: tiled with online softmax in both
 * forms (C: cg_attention_c.c, CUDA: cg_attention.c); query t sees key s
 * when s <= t + cs. Every point owns the rows it writes: no atomics. */
static bool emit_attention(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    AttDims d = att_dims(c, n);
    int kind = n->op == OP_ATTENTION ? 0 : n->op == OP_ATTENTION_DQ ? 1 : 2;
    char cs[300];
    if (d.causal && d.off[0]) snprintf(cs, sizeof cs, "o0 + %lld", (long long)(d.S - d.Tg));
    else if (d.causal) snprintf(cs, sizeof cs, "%lld", (long long)(d.S - d.T));
    else snprintf(cs, sizeof cs, "%lld", (long long)d.S);
    StrBuf body, cu[2];
    sb_init(&body);
    sb_init(&cu[0]);
    sb_init(&cu[1]);
    CgKernel k;
    attention_kernel(kind, &d, cs, &body, cu, &k);
    KArg a[6] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->in[2], 0, 0}, {kind == 0 ? n->out[0] : n->in[3], kind == 0, 0},
                 {n->out[0], 1, 0}, {kind == 2 ? n->out[1] : IR_NONE, 1, 0}};
    cg_kernel_ex(c, id, kind == 0 ? 4 : kind == 1 ? 5 : 6, a, &k);
    sb_free(&cu[0]);
    sb_free(&cu[1]);
    sb_free(&body);
    return true;
}

/* colossal-calibrate's attention kernels: a causal node's kernel (S = T,
 * f32) as a C function or as CUDA passes and their launcher, with the
 * operands emit_attention passes: q, k, v, then out (forward) or dy and the
 * gradients. Returns the workspace's bytes. */
static int64_t attention_function(StrBuf *out, const char *name, bool cuda, int kind, int64_t B, int64_t T, int64_t H,
                                  int64_t G, int64_t Dh) {
    IR_ASSERT(kind >= 0 && kind <= 2 && B > 0 && T > 0 && H > 0 && G > 0 && H % G == 0 && Dh > 0);
    AttDims d = {B, T, H, Dh, T, G, 1, 1 / sqrt((double)Dh), T, ""};
    StrBuf body, cu[2];
    sb_init(&body);
    sb_init(&cu[0]);
    sb_init(&cu[1]);
    CgKernel k;
    attention_kernel(kind, &d, "0", &body, cu, &k); /* causal, S = T: the shift is 0 */
    DType dts[6] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32};
    bool outs[6] = {false, false, false, kind == 0, true, true};
    int nargs = kind == 0 ? 4 : kind == 1 ? 5 : 6;
    int op = kind == 0 ? OP_ATTENTION : kind == 1 ? OP_ATTENTION_DQ : OP_ATTENTION_DKV;
    calibrate_function(out, name, cuda, op, nargs, dts, outs, &k);
    sb_free(&cu[0]);
    sb_free(&cu[1]);
    sb_free(&body);
    return k.work_bytes;
}

int64_t cg_attention_c_function(StrBuf *out, const char *name, int kind, int64_t B, int64_t T, int64_t H, int64_t G,
                                int64_t Dh) {
    return attention_function(out, name, false, kind, B, T, H, G, Dh);
}

int64_t cg_attention_cuda_function(StrBuf *out, const char *name, int kind, int64_t B, int64_t T, int64_t H, int64_t G,
                                   int64_t Dh) {
    return attention_function(out, name, true, kind, B, T, H, G, Dh);
}

/* RoPE (or its backward) over x [B,T,H,Dh] -> a1, a point per pair (j, j +
 * Dh/2) of a row; split: the position is o0 past the row's (sequence
 * parallel). The CUDA form: a thread per pair. */
static void rope_body(StrBuf *b, int op, int64_t T, int64_t H, int64_t Dh, double theta, bool split) {
    int64_t half = Dh / 2;
    sb_printf(b,
              "const int64_t j = i %% %lld, row = i / %lld, t = (row / %lld) %% %lld%s;\n"
              "        const double ang = (double)t * pow(%.17g, -2.0 * (double)j / %lld);\n"
              "        const double cs = cos(ang), sn = %s sin(ang);\n"
              "        const double x0 = $L0(a0[row * %lld + j]), x1 = $L0(a0[row * %lld + j + %lld]);\n"
              "        a1[row * %lld + j] = $W1(x0 * cs - x1 * sn);\n"
              "        a1[row * %lld + j + %lld] = $W1(x1 * cs + x0 * sn);",
              (long long)half, (long long)half, (long long)H, (long long)T, split ? " + o0" : "", theta,
              (long long)Dh, op == OP_ROPE ? "" : "-", (long long)Dh, (long long)Dh,
              (long long)half, (long long)Dh, (long long)Dh, (long long)half);
}

/* The C form of RoPE: a point per position t (local index i), its Dh/2
 * angles computed once (the same double pow, cos and sin as the CUDA form's,
 * so the same values) and applied to the B x H rows at t in a loop over j
 * that vectorizes. A point per pair computed the angle's cos and sin per
 * element: 3 libm calls in double, scalar, for each of B x T x H x Dh/2
 * pairs (LLaMA ~124M bf16: 3 % of the step at 0.05 GFLOP/s; issue 21). */
static void rope_c_body(StrBuf *b, int op, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta, bool split) {
    int64_t half = Dh / 2;
    sb_printf(b,
              "const int64_t t = i%s;\n"
              "        double cs[%lld], sn[%lld];\n"
              "        for (int64_t j = 0; j < %lld; j++) {\n"
              "            const double ang = (double)t * pow(%.17g, -2.0 * (double)j / %lld);\n"
              "            cs[j] = cos(ang);\n"
              "            sn[j] = %s sin(ang);\n"
              "        }\n"
              "        for (int64_t r = 0; r < %lld; r++) {\n"
              "            const int64_t row = ((r / %lld) * %lld + i) * %lld + r %% %lld;\n"
              "            const $T0 *x = a0 + row * %lld;\n"
              "            $T1 *y = a1 + row * %lld;\n"
              "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
              "            for (int64_t j = 0; j < %lld; j++) {\n"
              "                const double x0 = $L0(x[j]), x1 = $L0(x[j + %lld]);\n"
              "                y[j] = $W1(x0 * cs[j] - x1 * sn[j]);\n"
              "                y[j + %lld] = $W1(x1 * cs[j] + x0 * sn[j]);\n"
              "            }\n"
              "        }",
              split ? " + o0" : "", (long long)half, (long long)half, (long long)half, theta, (long long)Dh,
              op == OP_ROPE ? "" : "-", (long long)(B * H), (long long)H, (long long)T, (long long)H, (long long)H,
              (long long)Dh, (long long)Dh, (long long)half, (long long)half, (long long)half);
}

/* RoPE's kernel: the C form a point per position, the CUDA form a thread per
 * pair (one pass; the body rope_body's). */
static void rope_kernel(CgKernel *k, StrBuf *cbody, StrBuf *pass, int op, int64_t B, int64_t T, int64_t H, int64_t Dh,
                        double theta, bool split) {
    int64_t pairs = B * T * H * (Dh / 2);
    StrBuf pt;
    sb_init(&pt);
    rope_body(&pt, op, T, H, Dh, theta, split);
    sb_printf(pass, "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lld) return;\n    {\n        %s\n    }",
              (long long)pairs, sb_cstr(&pt));
    sb_free(&pt);
    rope_c_body(cbody, op, B, T, H, Dh, theta, split);
    *k = (CgKernel){.n = T, .prologue = "", .body = sb_cstr(cbody), .parallel = true, .npass = 1};
    k->pass[0] = (CgPass){(pairs + 255) / 256, 256, 0, sb_cstr(pass)};
}

static void rope_function(StrBuf *out, const char *name, bool cuda, bool backward, int64_t B, int64_t T, int64_t H,
                          int64_t Dh) {
    IR_ASSERT(B > 0 && T > 0 && H > 0 && Dh > 1 && Dh % 2 == 0);
    StrBuf b, pass;
    sb_init(&b);
    sb_init(&pass);
    CgKernel k;
    rope_kernel(&k, &b, &pass, backward ? OP_ROPE_BWD : OP_ROPE, B, T, H, Dh, 10000, false);
    DType dts[2] = {DT_F32, DT_F32};
    bool outs[2] = {false, true};
    calibrate_function(out, name, cuda, backward ? OP_ROPE_BWD : OP_ROPE, 2, dts, outs, &k);
    sb_free(&b);
    sb_free(&pass);
}

void cg_rope_c_function(StrBuf *out, const char *name, bool backward, int64_t B, int64_t T, int64_t H, int64_t Dh) {
    rope_function(out, name, false, backward, B, T, H, Dh);
}

void cg_rope_cuda_function(StrBuf *out, const char *name, int64_t B, int64_t T, int64_t H, int64_t Dh) {
    rope_function(out, name, true, false, B, T, H, Dh);
}

static bool emit_rope(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    Shape s = L(c, n->in[0]);
    int64_t T = s.d[1], H = s.d[2], Dh = s.d[3], B = numel(s) / (T * H * Dh);
    StrBuf b, pass, off; /* sequence parallel: the angle of the position's global index */
    sb_init(&b);
    sb_init(&pass);
    sb_init(&off);
    bool split = cg_shard_start(c, n->in[0], 1, &off);
    CgKernel k;
    rope_kernel(&k, &b, &pass, n->op, B, T, H, Dh, n->attr[0].f, split);
    k.off = split ? sb_cstr(&off) : NULL;
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel_ex(c, id, 2, a, &k);
    sb_free(&b);
    sb_free(&pass);
    sb_free(&off);
    return true;
}

static bool emit_view(CgCtx *c, NodeId id) {
    sb_printf(c->sched, "    /* %%%s: a view of %%%s */\n", ir_val(c->g, N_(c, id)->out[0])->name,
              ir_val(c->g, N_(c, id)->in[0])->name);
    return true;
}

/* A layout copy (permute, split, concat, slice) of n elements in runs of
 * `run` contiguous ones on both sides: C copies run by run (rows = n / run
 * points, OpenMP over them when n is large), each run's loop a plain copy
 * that vectorizes, instead of one point per element whose source index is a
 * chain of divisions; CUDA keeps a thread per element (`elem`, coalesced).
 * row_src and row_dst: the offsets of run i's first element (in terms of
 * i). The same element conversions either way ($W1($L0(...))). */
static void copy_runs(CgCtx *c, NodeId id, const KArg a[2], int64_t n, int64_t run, const char *row_src,
                      const char *row_dst, const char *elem) {
    if (run <= 1 || n % run) { /* no runs: one point per element in both forms */
        cg_kernel(c, id, 2, a, n, "", elem);
        return;
    }
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "const $T0 *src = a0 + (%s);\n        $T1 *dst = a1 + (%s);\n"
                  "        for (int64_t q = 0; q < %lld; q++) dst[q] = $W1($L0(src[q]));",
              row_src, row_dst, (long long)run);
    kernel_c_rows(c, id, 2, a, n, elem, n / run, sb_cstr(&b), NULL);
    sb_free(&b);
}

static bool emit_permute(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    Shape x = L(c, n->in[0]), o = L(c, n->out[0]);
    int64_t xs[IR_MAX_DIMS], st = 1;
    for (int d = x.rank - 1; d >= 0; d--) { xs[d] = st; st *= x.d[d]; }
    StrBuf b, src;
    sb_init(&b);
    sb_init(&src);
    sb_puts(&b, "a1[i] = $W1($L0(a0[0");
    st = 1;
    for (int d = o.rank - 1; d >= 0; d--) {
        sb_printf(&b, " + ((i / %lld) %% %lld) * %lld", (long long)st, (long long)o.d[d],
                  (long long)xs[n->attr[0].v[d]]);
        st *= o.d[d];
    }
    sb_puts(&b, "]));");
    /* the trailing output dims that are the input's trailing dims in order: one run */
    int t = 0;
    int64_t run = 1;
    while (t < o.rank && t < x.rank && n->attr[0].v[o.rank - 1 - t] == x.rank - 1 - t) run *= o.d[o.rank - 1 - t++];
    sb_puts(&src, "0");
    st = 1;
    for (int d = o.rank - 1 - t; d >= 0; d--) {
        sb_printf(&src, " + ((i / %lld) %% %lld) * %lld", (long long)st, (long long)o.d[d],
                  (long long)xs[n->attr[0].v[d]]);
        st *= o.d[d];
    }
    char dst[48];
    snprintf(dst, sizeof dst, "i * %lld", (long long)run);
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    copy_runs(c, id, a, numel(o), run, sb_cstr(&src), dst, sb_cstr(&b));
    sb_free(&b);
    sb_free(&src);
    return true;
}

/* split, concat, slice: one copy kernel per part, blocks of (outer, n, inner):
 * each of the outer blocks a contiguous run of the part's n * inner elements. */
static bool emit_split_concat(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    int op = n->op;
    ValueId whole = op == OP_CONCAT ? n->out[0] : n->in[0];
    Shape w = L(c, whole);
    int ax = (int)(n->attr[0].i < 0 ? n->attr[0].i + w.rank : n->attr[0].i);
    if (ax == 0 && c->lp->v[whole].split) return unsupported(c, id, "splits the batch dim");
    int64_t outer = 1, nn = w.d[ax], inner = 1;
    for (int d = 0; d < ax; d++) outer *= w.d[d];
    for (int d = ax + 1; d < w.rank; d++) inner *= w.d[d];
    int parts = op == OP_CONCAT ? n->n_in : op == OP_SPLIT ? n->n_out : 1;
    int64_t at = op == OP_SLICE ? n->attr[1].i : 0;
    for (int k = 0; k < parts; k++) {
        ValueId pv = op == OP_CONCAT ? n->in[k] : n->out[k];
        int64_t pn = L(c, pv).d[ax];
        StrBuf b;
        sb_init(&b);
        sb_printf(&b, "const int64_t o = i / %lld, j = (i / %lld) %% %lld, q = i %% %lld;\n        ",
                  (long long)(pn * inner), (long long)inner, (long long)pn, (long long)inner);
        if (op == OP_CONCAT)
            sb_printf(&b, "a1[(o * %lld + %lld + j) * %lld + q] = $W1($L0(a0[i]));", (long long)nn, (long long)at,
                      (long long)inner);
        else
            sb_printf(&b, "a1[i] = $W1($L0(a0[(o * %lld + %lld + j) * %lld + q]));", (long long)nn, (long long)at,
                      (long long)inner);
        char part[48], wh[64];
        snprintf(part, sizeof part, "i * %lld", (long long)(pn * inner));
        snprintf(wh, sizeof wh, "(i * %lld + %lld) * %lld", (long long)nn, (long long)at, (long long)inner);
        KArg a[2] = {{op == OP_CONCAT ? pv : whole, 0, 0}, {op == OP_CONCAT ? whole : pv, 1, 0}};
        copy_runs(c, id, a, outer * pn * inner, pn * inner, op == OP_CONCAT ? part : wh, op == OP_CONCAT ? wh : part,
                  sb_cstr(&b));
        sb_free(&b);
        at += pn;
    }
    return true;
}

static bool emit_reduce(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    Shape x = L(c, n->in[0]);
    int ax = (int)(n->attr[0].i < 0 ? n->attr[0].i + x.rank : n->attr[0].i);
    if (ax == 0 && c->lp->v[n->in[0]].split) return unsupported(c, id, "reduces the batch dim");
    int64_t outer = 1, nn = x.d[ax], inner = 1;
    for (int d = 0; d < ax; d++) outer *= x.d[d];
    for (int d = ax + 1; d < x.rank; d++) inner *= x.d[d];
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "const $T0 *p = a0 + (i / %lld) * %lld + i %% %lld;\n        ", (long long)inner,
              (long long)(nn * inner), (long long)inner);
    if (n->op == OP_REDUCE_MAX_BWD) {
        sb_printf(&b, "$T3 *dx = a3 + (i / %lld) * %lld + i %% %lld;\n"
                      "        for (int64_t j = 0; j < %lld; j++) dx[j * %lld] = $W3($L0(p[j * %lld]) == $L1(a1[i]) ? $L2(a2[i]) : 0.0f);",
                  (long long)inner, (long long)(nn * inner), (long long)inner, (long long)nn,
                  (long long)inner, (long long)inner);
        KArg a[4] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->in[2], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel(c, id, 4, a, outer * inner, "", sb_cstr(&b));
    } else if (inner == 1) { /* rows: a block per row on CUDA */
        bool mx = n->op == OP_REDUCE_MAX;
        sb_free(&b);
        sb_init(&b);
        char mean[64] = "";
        if (n->op == OP_REDUCE_MEAN) snprintf(mean, sizeof mean, " / %lld.0", (long long)nn);
        sb_printf(&b, "const $T0 *p = a0 + i * %lld;\n        cg_acc s = %s;\n"
                      "        CG_FOR(j, %lld) s = %s;\n        %s(s);\n"
                      "        CG_ONE(a1[i] = $W1(s%s);)",
                  (long long)nn, mx ? "-INFINITY" : "0", (long long)nn, mx ? "fmax(s, $L0(p[j]))" : "s + $L0(p[j])",
                  mx ? "CG_MAX" : "CG_SUM", mean);
        KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel_rows(c, id, 2, a, outer, nn, sb_cstr(&b), NULL);
    } else {
        bool mx = n->op == OP_REDUCE_MAX;
        sb_printf(&b, "double s = %s;\n        for (int64_t j = 0; j < %lld; j++) s = %s;\n"
                      "        a1[i] = $W1(s%s);",
                  mx ? "-INFINITY" : "0", (long long)nn,
                  mx ? "fmax(s, $L0(p[j * INNER]))" : "s + $L0(p[j * INNER])",
                  n->op == OP_REDUCE_MEAN ? " / NN" : "");
        /* substitute INNER and NN */
        StrBuf f;
        sb_init(&f);
        for (const char *p = sb_cstr(&b); *p; p++) {
            if (!strncmp(p, "INNER", 5)) { sb_printf(&f, "%lld", (long long)inner); p += 4; }
            else if (!strncmp(p, "NN", 2)) { sb_printf(&f, "%lld.0", (long long)nn); p += 1; }
            else sb_putc(&f, *p);
        }
        KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
        cg_kernel(c, id, 2, a, outer * inner, "", sb_cstr(&f));
        sb_free(&f);
    }
    sb_free(&b);
    return true;
}

/* sumsq: C, one sequential sum in double; CUDA, block partials over a
 * strided share of the elements, then one block sums them in order. */
/* The C body of a sum of squares of N elements (a0 -> a1[0]): fixed chunks
 * (at most 1024) summed in parallel, each in SIMD lanes, then the chunks'
 * sums in order: the same result on any thread count. */
static void sumsq_c_body(char *body, size_t nbody, int64_t N) {
    int64_t ch = (N + 1023) / 1024 > 4096 ? (N + 1023) / 1024 : 4096, nch = (N + ch - 1) / ch;
    snprintf(body, nbody,
             "double s = 0, part[%lld];\n"
             "#ifdef _OPENMP\n#pragma omp parallel for schedule(static) if (%lld > 1)\n#endif\n"
             "        for (int64_t q = 0; q < %lld; q++) {\n"
             "            const int64_t e = q * %lld + %lld < %lld ? q * %lld + %lld : %lld;\n"
             "            double t = 0;\n"
             "#ifdef _OPENMP\n#pragma omp simd reduction(+ : t)\n#endif\n"
             "            for (int64_t j = q * %lld; j < e; j++) t += (double)$L0(a0[j]) * $L0(a0[j]);\n"
             "            part[q] = t;\n        }\n"
             "        for (int64_t q = 0; q < %lld; q++) s += part[q];\n"
             "        a1[i] = $W1(s);",
             (long long)nch, (long long)nch, (long long)nch, (long long)ch, (long long)ch, (long long)N, (long long)ch,
             (long long)ch, (long long)N, (long long)ch, (long long)nch);
}

/* CUDA's blocks of a sum of squares of N elements (its workspace's floats). */
static int64_t sumsq_blocks(int64_t N) {
    int64_t nb = (N + 256 * 16 - 1) / (256 * 16);
    return nb > 1024 ? 1024 : nb < 1 ? 1 : nb;
}

void cg_sumsq_c_function(StrBuf *out, const char *name, int64_t n) {
    IR_ASSERT(n > 0);
    char body[1024];
    sumsq_c_body(body, sizeof body, n);
    DType dts[2] = {DT_F32, DT_F32};
    bool outs[2] = {false, true};
    CgKernel k = {.n = 1, .prologue = "", .body = body, .npass = 2, .work_bytes = 4 * sumsq_blocks(n)};
    cg_c_function(out, name, 2, dts, outs, &k);
}

static bool emit_sumsq(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    char body[1024], p0[768], p1[512];
    int64_t N = numel(L(c, cg_read(c, n->in[0])));
    sumsq_c_body(body, sizeof body, N);
    int64_t nb = sumsq_blocks(N);
    snprintf(p0, sizeof p0,
             "float s = 0.f;\n"
             "    for (int64_t e = (int64_t)blockIdx.x * 256 + threadIdx.x; e < %lld; e += %lld) {\n"
             "        const float x = $L0(a0[e]);\n"
             "        s += x * x;\n"
             "    }\n"
             "    s = cg_bsum(s);\n"
             "    if (threadIdx.x == 0) cg_w[blockIdx.x] = s;",
             (long long)N, (long long)(nb * 256));
    snprintf(p1, sizeof p1,
             "float s = 0.f;\n"
             "    for (int64_t q = threadIdx.x; q < %lld; q += 256) s += cg_w[q];\n"
             "    s = cg_bsum(s);\n"
             "    if (threadIdx.x == 0) a1[0] = $W1(s);",
             (long long)nb);
    CgKernel k = {.n = 1, .prologue = "", .body = body, .npass = 2, .work_bytes = 4 * nb};
    k.pass[0] = (CgPass){nb, 256, 0, p0};
    k.pass[1] = (CgPass){1, 256, 0, p1};
    KArg a[2] = {{n->in[0], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel_ex(c, id, 2, a, &k);
    return true;
}

static bool emit_grad_coef(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    char body[512];
    snprintf(body, sizeof body,
             "const double sumsq = $L0(a0[0]), scale = $L1(a1[0]), norm = sqrt(sumsq) / scale, mx = %.17g;\n"
             "        double coef = 1 / scale;\n"
             "        if (!isfinite(sumsq)) coef = NAN;\n"
             "        else if (mx > 0 && norm > mx) coef *= mx / (norm + 1e-6);\n"
             "        a2[i] = $W2(coef);",
             n->attr[0].f);
    KArg a[3] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->out[0], 1, 0}};
    cg_kernel(c, id, 3, a, 1, "", body);
    /* kept past the step for m_last_step (cg_readout.c): the squared norm and the loss scale */
    for (int k = 0; k < 2; k++) {
        sb_printf(c->sched, "    colrt_memcpy(M->arena.base + %s, ", cg_scratch(c, CG_SCRATCH_NORM + 4 * k).s);
        cg_ptr(c, c->sched, n->in[k]);
        sb_puts(c->sched, ", 4, COLRT_D2D, NULL);\n");
    }
    return true;
}

static bool emit_loss_scale_update(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    char body[512];
    snprintf(body, sizeof body,
             "double scale = $L0(a0[0]), good = $L1(a1[0]);\n"
             "        if (!isfinite($L2(a2[0]))) { scale *= %.17g; good = 0; }\n"
             "        else if (++good >= %lld) { scale *= %.17g; good = 0; }\n"
             "        a3[i] = $W3(scale);\n        a4[i] = $W4(good);",
             n->attr[1].f, (long long)n->attr[2].i, n->attr[0].f);
    KArg a[5] = {{n->in[0], 0, 0}, {n->in[1], 0, 0}, {n->in[2], 0, 0}, {n->out[0], 1, 0}, {n->out[1], 1, 0}};
    cg_kernel(c, id, 5, a, 1, "", body);
    return true;
}

/* ZeRO: an update (and its trust-ratio norms) runs on this rank's slice of
 * the flattened parameter; the parameter (stages 1, 2) and a whole gradient
 * (stage 1, or its bucket view) are read through pointers moved to the
 * slice. Returns the elements this rank updates. */
static int64_t zero_slice(CgCtx *c, NodeId id, int64_t *pshift, int64_t *gshift) {
    const Node *n = N_(c, id);
    const LowerNode *ln = &c->lp->n[id];
    *pshift = *gshift = 0;
    if (!ln->zero) return numel(L(c, n->in[0]));
    *pshift = c->lp->v[n->in[0]].zchunk ? 0 : ln->zchunk; /* stage 3: the parameter is the slice */
    *gshift = c->lp->v[cg_read(c, n->in[1])].zchunk ? 0 : ln->zchunk;
    return ln->zchunk;
}

/* x as a C float literal ("0.5f", "0.0f", "1e-06f"). */
static const char *f32_lit(char buf[40], double x) {
    int n = snprintf(buf, 32, "%.9g", x);
    if (!strpbrk(buf, ".eE")) buf[n++] = '.', buf[n++] = '0';
    buf[n++] = 'f';
    buf[n] = 0;
    return buf;
}

/* LAMB's moments and update direction u of element j, in float as the
 * update applies it (the reference is ir/interp.c's lamb_dir); needs the
 * prologue's fc (coefficient), rbc1 = 1/bc1, rbc2 = 1/bc2. */
static void lamb_dir_body(StrBuf *b, const Attr *at, const char *j, const char *indent) {
    char l[6][40];
    sb_printf(b,
              "const float g = $L1(a1[%s]) * fc;\n"
              "%sconst float m = %s * $L2(a2[%s]) + %s * g, v = %s * $L3(a3[%s]) + %s * g * g;\n"
              "%sconst float u = m * rbc1 / (cg_sqrtf(v * rbc2) + %s) + %s * $L0(a0[%s]);\n",
              j, indent, f32_lit(l[0], at[0].f), j, f32_lit(l[1], 1 - at[0].f), f32_lit(l[2], at[1].f), j,
              f32_lit(l[3], 1 - at[1].f), indent, f32_lit(l[4], at[2].f), f32_lit(l[5], at[3].f), j);
}

static void lamb_prologue(StrBuf *b, const Attr *at, int k_step, int k_coef) {
    sb_printf(b,
              "const double step = a%d[0], coef = a%d[0];\n"
              "    const int skip = !isfinite(coef);\n"
              "    const float fc = (float)coef, rbc1 = (float)(1 / (1 - pow(%.17g, step))), rbc2 = (float)(1 / (1 - pow(%.17g, step)));\n",
              k_step, k_coef, at[0].f, at[1].f);
}

/* One element j of a norms sweep: w (the parameter) and u (LAMB's update
 * direction, LARS's gradient) as floats; fused (fy >= 0, LowerNode.dir_for):
 * also writes the lamb node's moments m', v' (operands fy, fy + 1, over m
 * and v) and u over the gradient (operand fy + 2). */
static void norms_elem(StrBuf *b, const Node *n, const char *j, const char *indent, int fy) {
    if (n->op == OP_LAMB_NORMS) lamb_dir_body(b, n->attr, j, indent);
    else sb_printf(b, "const float u = $L1(a1[%s]);\n%s", j, indent);
    if (n->op == OP_LAMB_NORMS) sb_puts(b, indent);
    sb_printf(b, "const float w = $L0(a0[%s]);\n", j);
    if (fy >= 0)
        sb_printf(b, "%sa%d[%s] = skip ? a2[%s] : m;\n%sa%d[%s] = skip ? a3[%s] : v;\n%sa%d[%s] = u;\n", indent, fy, j, j,
                  indent, fy + 1, j, j, indent, fy + 2, j);
}

/* lamb_norms, lars_norms: [sum p^2, sum u^2 (LAMB's update direction) or g^2]
 * over this rank's elements (its shard, or ZeRO slice): a partial sum the
 * fused collective completes (norms.c); LAMB's sweep may also do its update's
 * element-wise work (LowerNode.dir_for, norms_elem). C: fixed chunks (in
 * parallel), each summed in 8 lanes (independent chains: they pipeline and
 * vectorize), lanes and chunks added in order, in double. CUDA: two passes,
 * block partials over a strided share of the elements through the block
 * tree, then one block sums them in order (as sumsq; no atomics). Neither
 * depends on the thread count or timing. */
static bool emit_trust_norms(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    int64_t pshift, gshift, N = zero_slice(c, id, &pshift, &gshift);
    int64_t chunk = 1 << 16, nch = (N + chunk - 1) / chunk;
    if (nch > 64) chunk = (N + 63) / 64, nch = (N + chunk - 1) / chunk;
    if (nch < 1) nch = 1;
    bool lamb = n->op == OP_LAMB_NORMS;
    NodeId fu = lamb ? c->lp->n[id].dir_for : IR_NONE;
    int y = n->n_in, fy = fu != IR_NONE ? y + 1 : -1; /* a[y]: the pair; fused: a[y+1..y+3] m', v', u */
    StrBuf pro, body, p0, p1;
    sb_init(&pro);
    sb_init(&body);
    sb_init(&p0);
    sb_init(&p1);
    if (lamb) lamb_prologue(&pro, n->attr, 4, 5);
    sb_printf(&body,
              "double part[%lld];\n%s"
              "        for (int64_t q = 0; q < %lld; q++) {\n"
              "            double sp[8] = {0}, su[8] = {0};\n"
              "            const int64_t s0 = q * %lld, e = s0 + %lld < %lld ? s0 + %lld : %lld, e8 = s0 + (e - s0) / 8 * 8;\n"
              "            int64_t j = s0;\n"
              "            for (; j < e8; j += 8)\n"
              "                for (int k = 0; k < 8; k++) {\n                    ",
              (long long)(2 * nch), nch > 1 ? "#ifdef _OPENMP\n#pragma omp parallel for schedule(static)\n#endif\n" : "",
              (long long)nch, (long long)chunk, (long long)chunk, (long long)N, (long long)chunk, (long long)N);
    norms_elem(&body, n, "j + k", "                    ", fy);
    sb_puts(&body, "                    sp[k] += (double)w * w;\n                    su[k] += (double)u * u;\n"
                   "                }\n"
                   "            for (; j < e; j++) {\n                ");
    norms_elem(&body, n, "j", "                ", fy);
    sb_printf(&body,
              "                sp[0] += (double)w * w;\n                su[0] += (double)u * u;\n"
              "            }\n"
              "            part[2 * q] = part[2 * q + 1] = 0;\n"
              "            for (int k = 0; k < 8; k++) part[2 * q] += sp[k], part[2 * q + 1] += su[k];\n"
              "        }\n"
              "        double sp = 0, su = 0;\n"
              "        for (int64_t q = 0; q < %lld; q++) sp += part[2 * q], su += part[2 * q + 1];\n"
              "        a%d[0] = (float)sp;\n        a%d[1] = (float)su;%s",
              (long long)nch, y, y, lamb && fy < 0 ? "\n        (void)skip;" : "");
    /* CUDA: 4 elements a thread at least, at most 1024 blocks */
    int64_t nb = (N + 1023) / 1024;
    if (nb > 1024) nb = 1024;
    if (nb < 1) nb = 1;
    sb_printf(&p0, "%s%sfloat sp = 0.f, su = 0.f;\n"
                   "    for (int64_t j = (int64_t)blockIdx.x * 256 + threadIdx.x; j < %lld; j += %lld) {\n        ",
              sb_cstr(&pro), lamb ? "    (void)skip;\n    " : "", (long long)N, (long long)(nb * 256));
    norms_elem(&p0, n, "j", "        ", fy);
    sb_puts(&p0, "        sp += w * w;\n        su += u * u;\n    }\n"
                 "    sp = cg_bsum(sp);\n    su = cg_bsum(su);\n"
                 "    if (threadIdx.x == 0) { cg_w[2 * blockIdx.x] = sp; cg_w[2 * blockIdx.x + 1] = su; }");
    sb_printf(&p1,
              "float sp = 0.f, su = 0.f;\n"
              "    for (int64_t q = threadIdx.x; q < %lld; q += 256) { sp += cg_w[2 * q]; su += cg_w[2 * q + 1]; }\n"
              "    sp = cg_bsum(sp);\n    su = cg_bsum(su);\n"
              "    if (threadIdx.x == 0) { a%d[0] = sp; a%d[1] = su; }",
              (long long)nb, y, y);
    KArg a[10];
    for (int i = 0; i < n->n_in; i++) a[i] = (KArg){n->in[i], 0, 0};
    a[y] = (KArg){n->out[0], 1, 0};
    int nargs = y + 1;
    if (fy >= 0) { /* the lamb node's moments (in place over m, v) and u over the gradient as read here */
        const Node *un = N_(c, fu);
        a[nargs++] = (KArg){un->out[1], 1, 0};
        a[nargs++] = (KArg){un->out[2], 1, 0};
        a[nargs++] = (KArg){n->in[1], 1, gshift};
    }
    a[0].zshift = pshift;
    a[1].zshift = gshift;
    CgKernel k = {.n = 1, .prologue = sb_cstr(&pro), .body = sb_cstr(&body), .npass = 2, .work_bytes = 8 * nb};
    k.pass[0] = (CgPass){nb, 256, 0, sb_cstr(&p0)};
    k.pass[1] = (CgPass){1, 256, 0, sb_cstr(&p1)};
    cg_kernel_ex(c, id, nargs, a, &k);
    sb_free(&pro);
    sb_free(&body);
    sb_free(&p0);
    sb_free(&p1);
    return true;
}

/* AdamW's prologue and per-element body (operands p, g, m, v, lr, step,
 * coef; results p', m', v' as a7, a8, a9): scalars in double once, the
 * per-element update in float (vectorizes). A skipped step (a non-finite
 * coef) keeps p, m and v by selects, not a branch around the update: the
 * branch's conditional stores kept GCC from vectorizing the loop without
 * masked stores (-O2 for x86-64's baseline, as bench/validate and
 * colossal-calibrate build it: scalar divss, 1.4 GB/s against 3.4-5.1 GB/s
 * vectorized on GPT-2 124M's wte, alternating, loaded; -march=native with
 * AVX-512 vectorized it, so the calibrated rate was 3-5x below what such a
 * build ran). Every operand is read before any result is written (results
 * alias their leaves). */
static void adamw_text(char *pro, size_t npro, char *body, size_t nbody, double b1, double b2, double eps, double wd) {
    snprintf(pro, npro,
             "const double lr = a4[0], step = a5[0], coef = a6[0];\n"
             "    const double bc1 = 1 - pow(%.17g, step), bc2 = 1 - pow(%.17g, step);\n"
             "    const int skip = !isfinite(coef);\n"
             "    const float fc = (float)coef, decay = (float)(1 - lr * %.17g), size = (float)(lr / bc1);\n"
             "    const float rb2 = (float)(1 / sqrt(bc2));\n",
             b1, b2, wd);
    snprintf(body, nbody,
             "const float p0 = a0[i], m0 = a2[i], v0 = a3[i];\n"
             "        const float g = $L1(a1[i]) * fc, p = p0 * decay;\n"
             "        const float m = %.9gf * m0 + %.9gf * g, v = %.9gf * v0 + %.9gf * g * g;\n"
             "        const float u = p - size * m / (cg_sqrtf(v) * rb2 + %.9gf);\n"
             "        a7[i] = skip ? p0 : u;\n        a8[i] = skip ? m0 : m;\n        a9[i] = skip ? v0 : v;",
             b1, 1 - b1, b2, 1 - b2, eps);
}

void cg_adamw_c_function(StrBuf *out, const char *name, int64_t n) {
    IR_ASSERT(n > 0);
    char pro[512], body[1024];
    adamw_text(pro, sizeof pro, body, sizeof body, 0.9, 0.999, 1e-8, 0.01); /* AdamW's defaults (ir/autodiff.c) */
    DType dts[10];
    bool outs[10];
    for (int i = 0; i < 10; i++) dts[i] = DT_F32, outs[i] = i >= 7;
    CgKernel k = {.n = n, .prologue = pro, .body = body};
    cg_c_function(out, name, 10, dts, outs, &k);
}

/* A group of AdamW updates (lower.updates: consecutive, the same
 * hyperparameters and step operands, each on the whole parameter or each on
 * its ZeRO-3 slice (a chunk's members: one kernel a chunk), each with the
 * cast of its result to the 16-bit parameter after it or none), run by its last
 * node `run` as one multi-tensor kernel with one update's body: the step's
 * scalars (lr, step, coefficient) shared, each member's parameter,
 * gradient, moments and results (and 16-bit parameter) its own. The other
 * members emitted a comment at their slots; the simulator sees each
 * member's kernels here, at the slot where the group runs. */
static bool emit_update_group(CgCtx *c, NodeId run) {
    const LowerProgram *lp = c->lp;
    NodeId first = lp->n[run].upd_first;
    const Node *n0 = N_(c, first);
    int unit = first + 1 <= run && N_(c, first + 1)->op == OP_CAST ? 2 : 1;
    int nseg = (run - first + 1) / unit;
    IR_ASSERT(n0->op == OP_ADAMW && nseg >= 2 && nseg <= LOWER_UPDATE_GROUP_MAX && (run - first + 1) % unit == 0);
    const Attr *at = n0->attr;
    char pro[512], body[1200];
    adamw_text(pro, sizeof pro, body, sizeof body, at[0].f, at[1].f, at[2].f, at[3].f);
    if (unit == 2) /* the cast, from the value just stored (a float: one rounding, as the cast rounds) */
        snprintf(body + strlen(body), sizeof body - strlen(body), "\n        a10[i] = $W10(a7[i]);");
    NodeId ids[LOWER_UPDATE_GROUP_MAX];
    int64_t npts[LOWER_UPDATE_GROUP_MAX];
    int nt = n0->n_in + n0->n_out + (unit == 2);
    bool shared[CG_MAX_KARGS];
    for (int j = 0; j < nt; j++) shared[j] = j >= 4 && j < 7; /* lr, step, coefficient */
    KArg a[CG_MAX_GROUP_ARGS];
    int na = 0;
    for (int s = 0; s < nseg; s++) {
        NodeId id = first + s * unit;
        const Node *n = N_(c, id);
        IR_ASSERT(n->op == OP_ADAMW && n->n_in + n->n_out + (unit == 2) == nt && lp->n[id].upd_run == run);
        ids[s] = id;
        int64_t pshift, gshift; /* ZeRO: the member's slice (its own size and shifts) */
        npts[s] = zero_slice(c, id, &pshift, &gshift);
        for (int j = 0; j < nt; j++) {
            if (s > 0 && shared[j]) {
                IR_ASSERT(n->in[j] == n0->in[j]);
                continue;
            }
            IR_ASSERT(na < CG_MAX_GROUP_ARGS);
            if (j < n->n_in) a[na++] = (KArg){n->in[j], 0, j == 0 ? pshift : j == 1 ? gshift : 0};
            else if (j < n->n_in + n->n_out) a[na++] = (KArg){n->out[j - n->n_in], 1, 0};
            else a[na++] = (KArg){N_(c, id + 1)->out[0], 1, 0}; /* the cast's 16-bit parameter */
        }
    }
    cg_kernel_group(c, ids, nseg, nt, shared, a, npts, pro, body);
    for (NodeId id = first; id < run; id++) cg_trace_node(c, id); /* run: cg_emit_node traces it */
    return true;
}

/* adamw, sgd, lamb and lars: element-wise; results may be written over their
 * leaves (the lowering aliases them), so each point reads everything first.
 * The trust ratio (lamb, lars) comes from the norms operand, summed by then.
 * A skipped step keeps the old values by selects between values already
 * computed, all made before the first store: a branch around the stores, a
 * select with a load or an operation in one arm, or selects on one condition
 * with stores between them (GCC merges them into one branch) is control flow
 * GCC does not vectorize at -O2 without masked stores (gcc 12;
 * tests/calibrate/kernels_as_run.sh checks all four). */
static bool emit_optimizer(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    const Attr *at = n->attr;
    char pro[512], body[1024];
    for (int k = 0; k < n->n_out; k++) /* the update is written for f32 master weights and state */
        if (dt_of(c, n->in[k == 0 ? 0 : k + 1]) != DT_F32 || dt_of(c, n->out[k]) != DT_F32)
            return unsupported(c, id, "a parameter or optimizer state that is not f32 (mixed precision updates f32 masters)");
    const LowerNode *ln = &c->lp->n[id];
    if (ln->upd_run != IR_NONE && ln->upd_run != id) { /* lower.updates: the group's last node runs it */
        sb_printf(c->sched, "    /* updated by node %d's kernel, with its group */\n", ln->upd_run);
        return true;
    }
    if (ln->zero && !c->lp->v[n->in[0]].zchunk && c->lp->v[n->out[0]].offset == c->lp->v[n->in[0]].offset)
        return unsupported(c, id, "ZeRO stage 1/2: this rank's updated slice shares storage with the whole "
                                  "parameter it is all-gathered into (mixed precision: the f32 master; the "
                                  "lowering keeps them apart only for parameters)");
    int64_t pshift, gshift, N = zero_slice(c, id, &pshift, &gshift);
    int y = n->n_in; /* the results are operands y, y + 1, ... of the kernel */
    if (n->op == OP_ADAMW) {
        adamw_text(pro, sizeof pro, body, sizeof body, at[0].f, at[1].f, at[2].f, at[3].f);
    } else if (n->op == OP_SGD) {
        snprintf(pro, sizeof pro, "const double lr = a3[0], coef = a4[0];\n    const int skip = !isfinite(coef);\n");
        snprintf(body, sizeof body,
                 "const float p0 = a0[i], b0 = a2[i];\n"
                 "        const double d = $L1(a1[i]) * coef + %.17g * p0;\n"
                 "        const double m = %.17g * b0 + d;\n"
                 "        const float p1 = (float)(p0 - lr * m), b1 = (float)m;\n"
                 "        const float r0 = skip ? p0 : p1, r1 = skip ? b0 : b1;\n"
                 "        a5[i] = r0;\n        a6[i] = r1;",
                 at[1].f, at[0].f);
    } else if (n->op == OP_LAMB) { /* p' = p - lr ratio u, ratio = ||p|| / ||u|| (1 if either is 0 or no norms) */
        /* fused (LowerNode.dir_for): its norms node wrote m', v' and u (over the gradient) */
        bool fused = n->n_in == 8 && c->lp->n[ir_val(c->g, n->in[7])->def].dir_for == id;
        StrBuf pb, bb;
        sb_init(&pb);
        sb_init(&bb);
        if (fused) sb_puts(&pb, "const int skip = !isfinite(a6[0]);\n");
        else lamb_prologue(&pb, at, 5, 6);
        sb_printf(&pb, "    double ratio = 1;\n");
        if (n->n_in == 8)
            sb_puts(&pb, "    if (a7[0] > 0 && a7[1] > 0) ratio = sqrt((double)a7[0]) / sqrt((double)a7[1]);\n");
        sb_puts(&pb, "    const float size = (float)(a4[0] * ratio);\n");
        if (fused) {
            sb_printf(&bb, "const float p0 = a0[i], p1 = p0 - size * a1[i];\n        a%d[i] = skip ? p0 : p1;", y);
        } else { /* lamb_dir_body reads a0, a2 and a3 first: the selects below load nothing conditionally */
            lamb_dir_body(&bb, at, "i", "        ");
            sb_printf(&bb,
                      "        const float p0 = a0[i], m0 = a2[i], v0 = a3[i], p1 = p0 - size * u;\n"
                      "        const float r0 = skip ? p0 : p1, r1 = skip ? m0 : m, r2 = skip ? v0 : v;\n"
                      "        a%d[i] = r0;\n        a%d[i] = r1;\n        a%d[i] = r2;",
                      y, y + 1, y + 2);
        }
        snprintf(pro, sizeof pro, "%s", sb_cstr(&pb));
        snprintf(body, sizeof body, "%s", sb_cstr(&bb));
        sb_free(&pb);
        sb_free(&bb);
    } else { /* lars: b' = momentum b + lr local (g + wd p), p' = p - b',
              * local = trust ||p|| / (||g|| + wd ||p||) (1 if either norm is 0 or no norms) */
        int k = snprintf(pro, sizeof pro, "const double lr = a3[0], coef = a4[0];\n    const int skip = !isfinite(coef);\n"
                                          "    double local = 1;\n");
        if (n->n_in == 6)
            snprintf(pro + k, sizeof pro - (size_t)k,
                     "    const double wn = sqrt((double)a5[0]), gn = sqrt((double)a5[1]) * fabs(coef);\n"
                     "    if (wn > 0 && gn > 0) local = %.17g * wn / (gn + %.17g * wn);\n",
                     at[2].f, at[1].f);
        snprintf(body, sizeof body,
                 "const float p0 = a0[i], b0 = a2[i];\n"
                 "        const double b = %.17g * b0 + lr * local * ($L1(a1[i]) * coef + %.17g * p0);\n"
                 "        const float p1 = (float)(p0 - b), b1 = (float)b;\n"
                 "        const float r0 = skip ? p0 : p1, r1 = skip ? b0 : b1;\n"
                 "        a%d[i] = r0;\n        a%d[i] = r1;",
                 at[0].f, at[1].f, y, y + 1);
    }
    if (ln->upd_first != IR_NONE) return emit_update_group(c, id);
    KArg a[IR_MAX_IN + IR_MAX_OUT];
    for (int i = 0; i < n->n_in; i++) a[i] = (KArg){n->in[i], 0, 0};
    for (int k = 0; k < n->n_out; k++) a[y + k] = (KArg){n->out[k], 1, 0};
    a[0].zshift = pshift;
    a[1].zshift = gshift;
    cg_kernel(c, id, y + n->n_out, a, N, pro, body);
    return true;
}

static CgEmitFn cg_emitter(int op) {
    switch (op) {
#define CG(o, fn) case o: return fn;
#include "cg_ops.def"
#undef CG
    default: return NULL;
    }
}

/* Whether s[from, to) holds a line that is not a comment (a launch, a call). */
static bool writes_code(const char *s, size_t from, size_t to) {
    for (size_t i = from; i < to;) {
        while (i < to && (s[i] == ' ' || s[i] == '\n')) i++;
        if (i >= to) break;
        if (!(s[i] == '/' && i + 1 < to && s[i + 1] == '*')) return true;
        while (i < to && s[i] != '\n') i++;
    }
    return false;
}

bool cg_emit_node(CgCtx *c, NodeId id) {
    const Node *n = N_(c, id);
    CgEmitFn fn = cg_emitter(n->op);
    if (!fn) return unsupported(c, id, "no emitter in the kernel table (compiler/codegen/cg_ops.def)");
    c->emit_serial++;
    size_t before = c->sched->len;
    bool ok = fn(c, id);
    if (ok && writes_code(c->sched->data, before, c->sched->len)) cg_trace_node(c, id); /* a view or a fused
                                                                                      * node: a comment only */
    return ok;
}

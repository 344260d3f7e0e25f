/*
 * cg_attention.c — the CUDA form of the generated attention kernels:
 * tiled, FlashAttention-style, f32 accumulation, deterministic (no atomics;
 * every sum in a fixed order). Takes a node's shapes; gives the passes of
 * its CgKernel (cg_internal.h). The C form, tiled the same way for the
 * CPU's caches, is cg_attention_c.c.
 *
 *   attention      a block per (batch, head, tile of BR queries): key/value
 *                  tiles of BC keys in shared memory, online softmax.
 *   attention_dq   pass 0: each query's log-sum-exp and delta = sum_s p dp
 *                  (online, into the workspace); pass 1: a block per query
 *                  tile, dq = scale * sum_s p (dp - delta) k.
 *   attention_dkv  pass 0 as dq's; pass 1: a block per (batch, kv head, tile
 *                  of BK keys), over the group's query heads and the query
 *                  tiles that see the keys: dv = sum p dy, dk = scale * sum
 *                  p (dp - delta) q.
 * A row (a query, or a key) is TPR adjacent lanes; each holds DH/TPR <= 16
 * of the row's accumulators (d = lane + TPR*k) and BC/TPR scores, so no
 * per-thread array grows with the model: TPR grows with the head dim.
 * Operands: q [B,T,H,DH], k, v [B,S,G,DH], dy like q; query t sees key s
 * when s <= t + cs (cs: S - T, or from the queries' first position when
 * sequence parallel; S when not causal).
 */
#include <string.h>

#include "cg_internal.h"

void cg_subst(StrBuf *out, const char *text, const CgSub *subs, int n) {
    for (const char *p = text; *p; p++) {
        if (*p == '@') {
            int k = 0;
            for (; k < n; k++) {
                size_t l = strlen(subs[k].key);
                if (!strncmp(p + 1, subs[k].key, l) && p[1 + l] == '@') {
                    sb_puts(out, subs[k].val);
                    p += l + 1;
                    break;
                }
            }
            if (k < n) continue;
        }
        sb_putc(out, *p);
    }
}

/* Shared: the tile loaders. Q-like rows: a0 (q) or a3 (dy) at [b, t, h]. */
static const char *stats_body =
    "CG_SHM_DECL;\n"
    "    float *Qs = cg_sm, *Ys = Qs + @BR@ * @DP@, *Ks = Ys + @BR@ * @DP@, *Vs = Ks + @BC@ * @DP@;\n"
    "    const int tid = threadIdx.x, r = tid / @TPR@, q = tid % @TPR@;\n"
    "    const int64_t nt = (@T@ + @BR@ - 1) / @BR@, tile = blockIdx.x % nt, bh = blockIdx.x / nt;\n"
    "    const int64_t h = bh % @H@, b = bh / @H@, g = h / @R@, t0 = tile * @BR@, t = t0 + r;\n"
    "    const int64_t cs = @CS@;\n"
    "    for (int e = tid; e < @BR@ * @DH@; e += 256) {\n"
    "        const int rr = e / @DH@, d = e % @DH@;\n"
    "        const int64_t tt = t0 + rr, o = ((b * @T@ + tt) * @H@ + h) * @DH@ + d;\n"
    "        Qs[rr * @DP@ + d] = tt < @T@ ? $L0(a0[o]) : 0.f;\n"
    "        Ys[rr * @DP@ + d] = tt < @T@ ? $L3(a3[o]) : 0.f;\n"
    "    }\n"
    "    float m = -INFINITY, l = 0.f, ds = 0.f;\n"
    "    int64_t smax = t0 + @BR@ - 1 + cs;\n"
    "    if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "    for (int64_t s0 = 0; s0 <= smax; s0 += @BC@) {\n"
    "        __syncthreads();\n"
    "        for (int e = tid; e < @BC@ * @DH@; e += 256) {\n"
    "            const int cc = e / @DH@, d = e % @DH@;\n"
    "            const int64_t sk = s0 + cc, o = ((b * @S@ + sk) * @G@ + g) * @DH@ + d;\n"
    "            Ks[cc * @DP@ + d] = sk < @S@ ? $L1(a1[o]) : 0.f;\n"
    "            Vs[cc * @DP@ + d] = sk < @S@ ? $L2(a2[o]) : 0.f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        float sc[@SPT@], dp[@SPT@], mt = -INFINITY;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) sc[k] = dp[k] = 0.f;\n"
    "        for (int d = 0; d < @DH@; d++) {\n"
    "            const float qd = Qs[r * @DP@ + d], yd = Ys[r * @DP@ + d];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @SPT@; k++) {\n"
    "                sc[k] += qd * Ks[(q + @TPR@ * k) * @DP@ + d];\n"
    "                dp[k] += yd * Vs[(q + @TPR@ * k) * @DP@ + d];\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const int64_t sk = s0 + q + @TPR@ * k;\n"
    "            sc[k] = sk <= t + cs && sk < @S@ ? sc[k] * @SCALE@f : -INFINITY;\n"
    "            mt = fmaxf(mt, sc[k]);\n"
    "        }\n"
    "        for (int o2 = @TPR@ / 2; o2 > 0; o2 >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o2));\n"
    "        const float mn = fmaxf(m, mt), corr = mn == -INFINITY ? 1.f : expf(m - mn);\n"
    "        float ls = 0.f, dsum = 0.f;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const float p = sc[k] == -INFINITY ? 0.f : expf(sc[k] - mn);\n"
    "            ls += p;\n"
    "            dsum += p * dp[k];\n"
    "        }\n"
    "        for (int o2 = @TPR@ / 2; o2 > 0; o2 >>= 1) {\n"
    "            ls += __shfl_xor_sync(0xffffffffu, ls, o2);\n"
    "            dsum += __shfl_xor_sync(0xffffffffu, dsum, o2);\n"
    "        }\n"
    "        l = l * corr + ls;\n"
    "        ds = ds * corr + dsum;\n"
    "        m = mn;\n"
    "    }\n"
    "    if (q == 0 && t < @T@) {\n"
    "        const int64_t row = (b * @H@ + h) * @T@ + t;\n"
    "        cg_w[row] = l > 0.f ? m + logf(l) : -INFINITY;\n"
    "        cg_w[@NROWS@ + row] = l > 0.f ? ds / l : 0.f;\n"
    "    }";

static const char *fwd_body =
    "CG_SHM_DECL;\n"
    "    float *Qs = cg_sm, *Ks = Qs + @BR@ * @DP@, *Vs = Ks + @BC@ * @DP@, *Ps = Vs + @BC@ * @DP@;\n"
    "    const int tid = threadIdx.x, r = tid / @TPR@, q = tid % @TPR@;\n"
    "    const int64_t nt = (@T@ + @BR@ - 1) / @BR@, tile = blockIdx.x % nt, bh = blockIdx.x / nt;\n"
    "    const int64_t h = bh % @H@, b = bh / @H@, g = h / @R@, t0 = tile * @BR@, t = t0 + r;\n"
    "    const int64_t cs = @CS@;\n"
    "    for (int e = tid; e < @BR@ * @DH@; e += 256) {\n"
    "        const int rr = e / @DH@, d = e % @DH@;\n"
    "        const int64_t tt = t0 + rr;\n"
    "        Qs[rr * @DP@ + d] = tt < @T@ ? $L0(a0[((b * @T@ + tt) * @H@ + h) * @DH@ + d]) : 0.f;\n"
    "    }\n"
    "    float m = -INFINITY, l = 0.f, acc[@DPT@];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < @DPT@; k++) acc[k] = 0.f;\n"
    "    int64_t smax = t0 + @BR@ - 1 + cs;\n"
    "    if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "    for (int64_t s0 = 0; s0 <= smax; s0 += @BC@) {\n"
    "        __syncthreads();\n"
    "        for (int e = tid; e < @BC@ * @DH@; e += 256) {\n"
    "            const int cc = e / @DH@, d = e % @DH@;\n"
    "            const int64_t sk = s0 + cc, o = ((b * @S@ + sk) * @G@ + g) * @DH@ + d;\n"
    "            Ks[cc * @DP@ + d] = sk < @S@ ? $L1(a1[o]) : 0.f;\n"
    "            Vs[cc * @DP@ + d] = sk < @S@ ? $L2(a2[o]) : 0.f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        float sc[@SPT@], mt = -INFINITY;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) sc[k] = 0.f;\n"
    "        for (int d = 0; d < @DH@; d++) {\n"
    "            const float qd = Qs[r * @DP@ + d];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @SPT@; k++) sc[k] += qd * Ks[(q + @TPR@ * k) * @DP@ + d];\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const int64_t sk = s0 + q + @TPR@ * k;\n"
    "            sc[k] = sk <= t + cs && sk < @S@ ? sc[k] * @SCALE@f : -INFINITY;\n"
    "            mt = fmaxf(mt, sc[k]);\n"
    "        }\n"
    "        for (int o2 = @TPR@ / 2; o2 > 0; o2 >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o2));\n"
    "        const float mn = fmaxf(m, mt), corr = mn == -INFINITY ? 1.f : expf(m - mn);\n"
    "        float ls = 0.f;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const float p = sc[k] == -INFINITY ? 0.f : expf(sc[k] - mn);\n"
    "            Ps[r * @PP@ + q + @TPR@ * k] = p;\n"
    "            ls += p;\n"
    "        }\n"
    "        for (int o2 = @TPR@ / 2; o2 > 0; o2 >>= 1) ls += __shfl_xor_sync(0xffffffffu, ls, o2);\n"
    "        l = l * corr + ls;\n"
    "        m = mn;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @DPT@; k++) acc[k] *= corr;\n"
    "        __syncwarp();\n"
    "        for (int cc = 0; cc < @BC@; cc++) {\n"
    "            const float p = Ps[r * @PP@ + cc];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @DPT@; k++)\n"
    "                if (q + @TPR@ * k < @DH@) acc[k] += p * Vs[cc * @DP@ + q + @TPR@ * k];\n"
    "        }\n"
    "    }\n"
    "    if (t < @T@)\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @DPT@; k++)\n"
    "            if (q + @TPR@ * k < @DH@)\n"
    "                a3[((b * @T@ + t) * @H@ + h) * @DH@ + q + @TPR@ * k] = $W3(l > 0.f ? acc[k] / l : 0.f);";

static const char *dq_body =
    "CG_SHM_DECL;\n"
    "    float *Qs = cg_sm, *Ys = Qs + @BR@ * @DP@, *Ks = Ys + @BR@ * @DP@, *Vs = Ks + @BC@ * @DP@, *Ps = Vs + @BC@ * @DP@;\n"
    "    const int tid = threadIdx.x, r = tid / @TPR@, q = tid % @TPR@;\n"
    "    const int64_t nt = (@T@ + @BR@ - 1) / @BR@, tile = blockIdx.x % nt, bh = blockIdx.x / nt;\n"
    "    const int64_t h = bh % @H@, b = bh / @H@, g = h / @R@, t0 = tile * @BR@, t = t0 + r;\n"
    "    const int64_t cs = @CS@;\n"
    "    for (int e = tid; e < @BR@ * @DH@; e += 256) {\n"
    "        const int rr = e / @DH@, d = e % @DH@;\n"
    "        const int64_t tt = t0 + rr, o = ((b * @T@ + tt) * @H@ + h) * @DH@ + d;\n"
    "        Qs[rr * @DP@ + d] = tt < @T@ ? $L0(a0[o]) : 0.f;\n"
    "        Ys[rr * @DP@ + d] = tt < @T@ ? $L3(a3[o]) : 0.f;\n"
    "    }\n"
    "    const int64_t row = (b * @H@ + h) * @T@ + (t < @T@ ? t : @T@ - 1);\n"
    "    const float lse = cg_w[row], delta = cg_w[@NROWS@ + row];\n"
    "    float acc[@DPT@];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < @DPT@; k++) acc[k] = 0.f;\n"
    "    int64_t smax = t0 + @BR@ - 1 + cs;\n"
    "    if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "    for (int64_t s0 = 0; s0 <= smax; s0 += @BC@) {\n"
    "        __syncthreads();\n"
    "        for (int e = tid; e < @BC@ * @DH@; e += 256) {\n"
    "            const int cc = e / @DH@, d = e % @DH@;\n"
    "            const int64_t sk = s0 + cc, o = ((b * @S@ + sk) * @G@ + g) * @DH@ + d;\n"
    "            Ks[cc * @DP@ + d] = sk < @S@ ? $L1(a1[o]) : 0.f;\n"
    "            Vs[cc * @DP@ + d] = sk < @S@ ? $L2(a2[o]) : 0.f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        float sc[@SPT@], dp[@SPT@];\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) sc[k] = dp[k] = 0.f;\n"
    "        for (int d = 0; d < @DH@; d++) {\n"
    "            const float qd = Qs[r * @DP@ + d], yd = Ys[r * @DP@ + d];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @SPT@; k++) {\n"
    "                sc[k] += qd * Ks[(q + @TPR@ * k) * @DP@ + d];\n"
    "                dp[k] += yd * Vs[(q + @TPR@ * k) * @DP@ + d];\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const int64_t sk = s0 + q + @TPR@ * k;\n"
    "            const float p = sk <= t + cs && sk < @S@ && lse != -INFINITY ? expf(sc[k] * @SCALE@f - lse) : 0.f;\n"
    "            Ps[r * @PP@ + q + @TPR@ * k] = p * (dp[k] - delta) * @SCALE@f;\n"
    "        }\n"
    "        __syncwarp();\n"
    "        for (int cc = 0; cc < @BC@; cc++) {\n"
    "            const float dsc = Ps[r * @PP@ + cc];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @DPT@; k++)\n"
    "                if (q + @TPR@ * k < @DH@) acc[k] += dsc * Ks[cc * @DP@ + q + @TPR@ * k];\n"
    "        }\n"
    "    }\n"
    "    if (t < @T@)\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @DPT@; k++)\n"
    "            if (q + @TPR@ * k < @DH@) a4[((b * @T@ + t) * @H@ + h) * @DH@ + q + @TPR@ * k] = $W4(acc[k]);";

static const char *dkv_body =
    "CG_SHM_DECL;\n"
    "    float *Ks = cg_sm, *Vs = Ks + @BK@ * @DP@, *Qs = Vs + @BK@ * @DP@, *Ys = Qs + @BQ@ * @DP@;\n"
    "    float *Ps = Ys + @BQ@ * @DP@, *Ds = Ps + @BK@ * @QP@, *Ls = Ds + @BK@ * @QP@, *Dl = Ls + @BQ@;\n"
    "    const int tid = threadIdx.x, c = tid / @TPR@, q = tid % @TPR@;\n"
    "    const int64_t nk = (@S@ + @BK@ - 1) / @BK@, tile = blockIdx.x % nk, bg = blockIdx.x / nk;\n"
    "    const int64_t g = bg % @G@, b = bg / @G@, s0 = tile * @BK@, s = s0 + c;\n"
    "    const int64_t cs = @CS@;\n"
    "    for (int e = tid; e < @BK@ * @DH@; e += 256) {\n"
    "        const int cc = e / @DH@, d = e % @DH@;\n"
    "        const int64_t sk = s0 + cc, o = ((b * @S@ + sk) * @G@ + g) * @DH@ + d;\n"
    "        Ks[cc * @DP@ + d] = sk < @S@ ? $L1(a1[o]) : 0.f;\n"
    "        Vs[cc * @DP@ + d] = sk < @S@ ? $L2(a2[o]) : 0.f;\n"
    "    }\n"
    "    float dk[@DPT@], dv[@DPT@];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < @DPT@; k++) dk[k] = dv[k] = 0.f;\n"
    "    int64_t tfirst = s0 - cs;\n"
    "    if (tfirst < 0) tfirst = 0;\n"
    "    tfirst = tfirst / @BQ@ * @BQ@;\n"
    "    for (int64_t h = g * @R@; h < (g + 1) * @R@; h++)\n"
    "    for (int64_t t0 = tfirst; t0 < @T@; t0 += @BQ@) {\n"
    "        __syncthreads();\n"
    "        for (int e = tid; e < @BQ@ * @DH@; e += 256) {\n"
    "            const int rr = e / @DH@, d = e % @DH@;\n"
    "            const int64_t tt = t0 + rr, o = ((b * @T@ + tt) * @H@ + h) * @DH@ + d;\n"
    "            Qs[rr * @DP@ + d] = tt < @T@ ? $L0(a0[o]) : 0.f;\n"
    "            Ys[rr * @DP@ + d] = tt < @T@ ? $L3(a3[o]) : 0.f;\n"
    "        }\n"
    "        for (int rr = tid; rr < @BQ@; rr += 256) {\n"
    "            const int64_t tt = t0 + rr, row = (b * @H@ + h) * @T@ + tt;\n"
    "            Ls[rr] = tt < @T@ ? cg_w[row] : -INFINITY;\n"
    "            Dl[rr] = tt < @T@ ? cg_w[@NROWS@ + row] : 0.f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        float sc[@SPT@], dp[@SPT@];\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) sc[k] = dp[k] = 0.f;\n"
    "        for (int d = 0; d < @DH@; d++) {\n"
    "            const float kd = Ks[c * @DP@ + d], vd = Vs[c * @DP@ + d];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @SPT@; k++) {\n"
    "                sc[k] += kd * Qs[(q + @TPR@ * k) * @DP@ + d];\n"
    "                dp[k] += vd * Ys[(q + @TPR@ * k) * @DP@ + d];\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @SPT@; k++) {\n"
    "            const int rr = q + @TPR@ * k;\n"
    "            const int64_t tt = t0 + rr;\n"
    "            const float lse = Ls[rr];\n"
    "            const float p = s <= tt + cs && s < @S@ && tt < @T@ && lse != -INFINITY ? expf(sc[k] * @SCALE@f - lse) : 0.f;\n"
    "            Ps[c * @QP@ + rr] = p;\n"
    "            Ds[c * @QP@ + rr] = p * (dp[k] - Dl[rr]) * @SCALE@f;\n"
    "        }\n"
    "        __syncwarp();\n"
    "        for (int rr = 0; rr < @BQ@; rr++) {\n"
    "            const float p = Ps[c * @QP@ + rr], dsc = Ds[c * @QP@ + rr];\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < @DPT@; k++)\n"
    "                if (q + @TPR@ * k < @DH@) {\n"
    "                    dv[k] += p * Ys[rr * @DP@ + q + @TPR@ * k];\n"
    "                    dk[k] += dsc * Qs[rr * @DP@ + q + @TPR@ * k];\n"
    "                }\n"
    "        }\n"
    "    }\n"
    "    if (s < @S@)\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < @DPT@; k++)\n"
    "            if (q + @TPR@ * k < @DH@) {\n"
    "                const int64_t o = ((b * @S@ + s) * @G@ + g) * @DH@ + q + @TPR@ * k;\n"
    "                a4[o] = $W4(dk[k]);\n"
    "                a5[o] = $W5(dv[k]);\n"
    "            }";

void cg_attention_cuda(int kind, int64_t B, int64_t T, int64_t S, int64_t H, int64_t G, int64_t DH, double scale,
                       const char *cs, StrBuf bodies[2], CgKernel *k) {
    int tpr = 4;
    while (tpr < 32 && (DH + tpr - 1) / tpr > 16) tpr *= 2;
    int br = 256 / tpr, bc = DH > 128 ? 32 : 64, dpt = (int)((DH + tpr - 1) / tpr);
    int bk = br, bq = bc; /* dkv: rows are keys */
    int64_t nrows = B * H * T;
    CgSub subs[] = {{"DH", ""}, {"DP", ""},  {"BR", ""},  {"BC", ""},    {"TPR", ""}, {"SPT", ""},
                  {"DPT", ""}, {"PP", ""}, {"T", ""},   {"S", ""},     {"H", ""},   {"G", ""},
                  {"R", ""},  {"CS", ""},  {"SCALE", ""}, {"NROWS", ""}, {"BK", ""},  {"BQ", ""},
                  {"QP", ""}};
    int ns = (int)(sizeof subs / sizeof subs[0]);
    long long vals[] = {DH, DH + 1, br, bc, tpr, (kind == 2 ? bq : bc) / tpr, dpt, bc + 1, T, S, H, G, H / G};
    for (int i = 0; i < 13; i++) snprintf(subs[i].val, sizeof subs[i].val, "%lld", vals[i]);
    snprintf(subs[13].val, sizeof subs[13].val, "%s", cs);
    snprintf(subs[14].val, sizeof subs[14].val, "%.9g", scale);
    if (!strchr(subs[14].val, '.') && !strchr(subs[14].val, 'e')) strcat(subs[14].val, ".0");
    snprintf(subs[15].val, sizeof subs[15].val, "%lld", (long long)nrows);
    snprintf(subs[16].val, sizeof subs[16].val, "%d", bk);
    snprintf(subs[17].val, sizeof subs[17].val, "%d", bq);
    snprintf(subs[18].val, sizeof subs[18].val, "%d", bq + 1);
    int64_t qtiles = B * H * ((T + br - 1) / br);
    int64_t dp = DH + 1;
    k->npass = 0;
    if (kind == 0) {
        cg_subst(&bodies[0], fwd_body, subs, ns);
        k->pass[k->npass++] = (CgPass){qtiles, 256, 4 * (br * dp + 2 * bc * dp + br * (bc + 1)), sb_cstr(&bodies[0])};
        return;
    }
    /* the statistics pass reads dy as a3 in both backward kernels */
    cg_subst(&bodies[0], stats_body, subs, ns);
    k->pass[k->npass++] = (CgPass){qtiles, 256, 4 * (2 * br * dp + 2 * bc * dp), sb_cstr(&bodies[0])};
    k->work_bytes = 4 * 2 * nrows;
    if (kind == 1) {
        cg_subst(&bodies[1], dq_body, subs, ns);
        k->pass[k->npass++] =
            (CgPass){qtiles, 256, 4 * (2 * br * dp + 2 * bc * dp + br * (bc + 1)), sb_cstr(&bodies[1])};
    } else {
        cg_subst(&bodies[1], dkv_body, subs, ns);
        k->pass[k->npass++] = (CgPass){B * G * ((S + bk - 1) / bk), 256,
                                       4 * (2 * bk * dp + 2 * bq * dp + 2 * bk * (bq + 1) + 2 * bq), sb_cstr(&bodies[1])};
    }
}

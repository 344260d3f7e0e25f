/*
 * cg_attention_c.c — the C form of the generated attention kernels: tiled,
 * online softmax (FlashAttention-2's loop order), f32 accumulation,
 * deterministic (every sum in a fixed order, whatever the thread count).
 * Takes a node's shapes; gives the body of one point of its CgKernel (the
 * CUDA passes are cg_attention.c's). No kernel holds a score row longer than
 * a tile: a point's arrays are BR x BC scores and BC x DH key/value tiles,
 * whatever the sequence length (the row kernels before held S doubles per
 * query on the stack).
 *
 *   attention      a point per (batch, head, tile of BR queries): key/value
 *                  tiles of BC keys, a running max m and sum l per query,
 *                  the output rescaled by exp(m_old - m_new) at each tile.
 *   attention_dq   a point per query tile: first its log-sum-exp and
 *                  delta = sum_s p dp (online, the same pass), then over the
 *                  tiles again, p = exp(s - lse), dq += scale p (dp - delta) k.
 *   attention_dkv  a point per (batch, kv head): the statistics of the
 *                  group's query heads into the workspace cg_w (laid out as
 *                  the CUDA passes lay it: lse at row (b H + h) T + t, delta
 *                  NROWS further), then per key tile, over the group's heads
 *                  and the query tiles that see it, dv += p dy and
 *                  dk += scale p (dp - delta) q, rounded once when written.
 * The forward does not save the log-sum-exp (the IR's attention has one
 * result), so both backward kernels first recompute it with delta, online,
 * from the same q.k and dy.v; when all keys fit one tile (S <= BC, GPT-2 at
 * T = 64) that pass's scores are kept and used again, so the backward does
 * the products the row kernels did (dq 3, dk/dv 4 of B H T S DH), else two
 * more per kernel.
 * Operands: q [B,T,H,DH], k, v [B,S,G,DH], dy like q (kv group g = h / R);
 * query t sees key s when s <= t + cs. 16-bit operands are widened when a
 * tile is loaded ($Lk), results rounded once ($Wk).
 */
#include <string.h>

#include "cg_internal.h"

#define SIMD "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
#define SIMD_SUM2(a, b) "#ifdef _OPENMP\n#pragma omp simd reduction(+ : " a ", " b ")\n#endif\n"
#define SIMD_MAX(v) "#ifdef _OPENMP\n#pragma omp simd reduction(max : " v ")\n#endif\n"

/* Query rows t0 .. t0+nq of head h: q (and dy) widened into qs (ys). */
static const char *load_q =
    "for (int64_t r = 0; r < nq; r++) {\n"
    "            const int64_t o = ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
    "            for (int64_t d = 0; d < @DH@; d++) qs[r][d] = $L0(a0[o + d]);\n"
    "        }\n";
static const char *load_y =
    "        for (int64_t r = 0; r < nq; r++) {\n"
    "            const int64_t o = ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
    "            for (int64_t d = 0; d < @DH@; d++) ys[r][d] = $L3(a3[o + d]);\n"
    "        }\n";

/* Keys s0 .. s0+nc of kv head g: k transposed into kt, v into vt (or vs, rows). */
static const char *load_kv_open =
    "            for (int64_t c = 0; c < nc; c++) {\n"
    "                const int64_t o = ((b * @S@ + s0 + c) * @G@ + g) * @DH@;\n"
    "                for (int64_t d = 0; d < @DH@; d++) kt[d][c] = $L1(a1[o + d]);\n";
static const char *load_vt = "                for (int64_t d = 0; d < @DH@; d++) vt[d][c] = $L2(a2[o + d]);\n";
static const char *load_vs = "                for (int64_t d = 0; d < @DH@; d++) vs[c][d] = $L2(a2[o + d]);\n";
static const char *load_ks = "                for (int64_t d = 0; d < @DH@; d++) ks[c][d] = $L1(a1[o + d]);\n";
static const char *load_kv_close = "            }\n";

/* Row r's visible keys of the tile (nv) and its scores q.k (unscaled) in
 * sr[0..nv), with dp = dy.v in pr when dp is asked. */
static const char *scores_open =
    "                const int64_t nv0 = t0 + r + cs - s0 + 1, nv = nv0 < nc ? nv0 : nc;\n"
    "                if (nv <= 0) continue;\n"
    "                float *sr = sc[r];\n";
static const char *scores_s =
    SIMD
    "                for (int64_t c = 0; c < nv; c++) sr[c] = 0.f;\n"
    "                for (int64_t d = 0; d < @DH@; d++) {\n"
    "                    const float x = qs[r][d];\n"
    SIMD
    "                    for (int64_t c = 0; c < nv; c++) sr[c] += x * kt[d][c];\n"
    "                }\n";
static const char *scores_sp =
    "                float *pr = dp[r];\n"
    SIMD
    "                for (int64_t c = 0; c < nv; c++) sr[c] = pr[c] = 0.f;\n"
    "                for (int64_t d = 0; d < @DH@; d++) {\n"
    "                    const float x = qs[r][d], y = ys[r][d];\n"
    SIMD
    "                    for (int64_t c = 0; c < nv; c++) {\n"
    "                        sr[c] += x * kt[d][c];\n"
    "                        pr[c] += y * vt[d][c];\n"
    "                    }\n"
    "                }\n";

/* The query tile's key tiles: up to the last key its last row sees. */
static const char *key_tiles =
    "        int64_t smax = t0 + nq - 1 + cs;\n"
    "        if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "        for (int64_t s0 = 0; s0 <= smax; s0 += @BC@) {\n"
    "            const int64_t nc = smax + 1 - s0 < @BC@ ? smax + 1 - s0 : @BC@;\n";

/* The statistics of the query tile (qs, ys loaded): lse and delta per row. */
static void stats(StrBuf *b) {
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++) m[r] = -INFINITY, l[r] = 0.f, ds[r] = 0.f;\n        {\n");
    sb_puts(b, key_tiles);
    sb_puts(b, load_kv_open);
    sb_puts(b, load_vt);
    sb_puts(b, load_kv_close);
    sb_puts(b, "            for (int64_t r = 0; r < nq; r++) {\n");
    sb_puts(b, scores_open);
    sb_puts(b, scores_sp);
    sb_puts(b, "                float mt = -INFINITY;\n" SIMD_MAX("mt")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    const float x = sr[c] * @SCALE@f;\n"
               "                    mt = x > mt ? x : mt;\n"
               "                }\n"
               "                const float mn = m[r] > mt ? m[r] : mt, corr = cg_expf(m[r] - mn);\n"
               "                float ls = 0.f, dsum = 0.f;\n" SIMD_SUM2("ls", "dsum")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    const float p = cg_expf(sr[c] * @SCALE@f - mn);\n"
               "                    ls += p;\n"
               "                    dsum += p * pr[c];\n"
               "                }\n"
               "                l[r] = l[r] * corr + ls;\n"
               "                ds[r] = ds[r] * corr + dsum;\n"
               "                m[r] = mn;\n"
               "            }\n"
               "        }\n"
               "        }\n"
               "        for (int64_t r = 0; r < nq; r++) {\n"
               "            lse[r] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;\n"
               "            dl[r] = l[r] > 0.f ? ds[r] / l[r] : 0.f;\n"
               "        }\n");
}

static void fwd(StrBuf *b) {
    sb_puts(b, "const int64_t tile = i % @NT@, bh = i / @NT@, h = bh % @H@, b = bh / @H@, g = h / @R@;\n"
               "        const int64_t t0 = tile * @BR@, nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, cs = @CS@;\n"
               "        float qs[@BR@][@DH@], acc[@BR@][@DH@], sc[@BR@][@BC@], kt[@DH@][@BC@], vs[@BC@][@DH@];\n"
               "        float m[@BR@], l[@BR@];\n        ");
    sb_puts(b, load_q);
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++) {\n"
               "            m[r] = -INFINITY, l[r] = 0.f;\n"
               "            for (int64_t d = 0; d < @DH@; d++) acc[r][d] = 0.f;\n"
               "        }\n");
    sb_puts(b, key_tiles);
    sb_puts(b, load_kv_open);
    sb_puts(b, load_vs);
    sb_puts(b, load_kv_close);
    sb_puts(b, "            for (int64_t r = 0; r < nq; r++) {\n");
    sb_puts(b, scores_open);
    sb_puts(b, scores_s);
    sb_puts(b, "                float mt = -INFINITY;\n" SIMD_MAX("mt")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    sr[c] *= @SCALE@f;\n"
               "                    mt = sr[c] > mt ? sr[c] : mt;\n"
               "                }\n"
               "                const float mn = m[r] > mt ? m[r] : mt, corr = cg_expf(m[r] - mn);\n"
               "                float ls = 0.f;\n"
               "#ifdef _OPENMP\n#pragma omp simd reduction(+ : ls)\n#endif\n"
               "                for (int64_t c = 0; c < nv; c++) ls += (sr[c] = cg_expf(sr[c] - mn));\n"
               "                l[r] = l[r] * corr + ls;\n"
               "                m[r] = mn;\n"
               "                float *ar = acc[r];\n" SIMD
               "                for (int64_t d = 0; d < @DH@; d++) ar[d] *= corr;\n"
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    const float p = sr[c];\n" SIMD
               "                    for (int64_t d = 0; d < @DH@; d++) ar[d] += p * vs[c][d];\n"
               "                }\n"
               "            }\n"
               "        }\n"
               "        for (int64_t r = 0; r < nq; r++) {\n"
               "            $T3 *o = a3 + ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
               "            const float inv = l[r] > 0.f ? 1.0f / l[r] : 0.f;\n"
               "            for (int64_t d = 0; d < @DH@; d++) o[d] = $W3(acc[r][d] * inv);\n"
               "        }");
}

/* Keys 0 .. nc of kv head g as rows, into ks (the one-tile case). */
static const char *load_ks_only =
    "            for (int64_t c = 0; c < nc; c++) {\n"
    "                const int64_t o = ((b * @S@ + s0 + c) * @G@ + g) * @DH@;\n"
    "                for (int64_t d = 0; d < @DH@; d++) ks[c][d] = $L1(a1[o + d]);\n"
    "            }\n";

/* The single key tile of a query tile whose keys all fit one (S <= BC):
 * the statistics pass left its scores and dp in sc, dp, so they are read
 * back instead of computed again. */
static const char *one_tile =
    "        {\n"
    "        int64_t smax = t0 + nq - 1 + cs;\n"
    "        if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "        const int64_t s0 = 0, nc = smax + 1;\n";

/* dq's sums over a row's visible keys: ds = p (dp - delta) scale, dq += ds k. */
static const char *dq_acc =
    "                const float lr = lse[r], dr = dl[r];\n" SIMD
    "                for (int64_t c = 0; c < nv; c++) sr[c] = cg_expf(sr[c] * @SCALE@f - lr) * (pr[c] - dr) * @SCALE@f;\n"
    "                float *ar = acc[r];\n"
    "                for (int64_t c = 0; c < nv; c++) {\n"
    "                    const float w = sr[c];\n" SIMD
    "                    for (int64_t d = 0; d < @DH@; d++) ar[d] += w * ks[c][d];\n"
    "                }\n";

/* dk and dv's sums over a row's visible keys: dv += p dy, dk += ds q. */
static const char *dkv_acc =
    "                const float lr = lse[r], dr = dl[r];\n" SIMD
    "                for (int64_t c = 0; c < nv; c++) {\n"
    "                    const float p = cg_expf(sr[c] * @SCALE@f - lr);\n"
    "                    sr[c] = p;\n"
    "                    pr[c] = p * (pr[c] - dr) * @SCALE@f;\n"
    "                }\n"
    "                for (int64_t c = 0; c < nv; c++) {\n"
    "                    const float p = sr[c], w = pr[c];\n" SIMD
    "                    for (int64_t d = 0; d < @DH@; d++) {\n"
    "                        dva[c][d] += p * ys[r][d];\n"
    "                        dka[c][d] += w * qs[r][d];\n"
    "                    }\n"
    "                }\n";

static const char *row_open =
    "            for (int64_t r = 0; r < nq; r++) {\n"
    "                if (lse[r] == -INFINITY) continue;\n";

static void dq(StrBuf *b, bool one) {
    sb_puts(b, "const int64_t tile = i % @NT@, bh = i / @NT@, h = bh % @H@, b = bh / @H@, g = h / @R@;\n"
               "        const int64_t t0 = tile * @BR@, nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, cs = @CS@;\n"
               "        float qs[@BR@][@DH@], ys[@BR@][@DH@], acc[@BR@][@DH@], sc[@BR@][@BC@], dp[@BR@][@BC@];\n"
               "        float kt[@DH@][@BC@], vt[@DH@][@BC@], ks[@BC@][@DH@];\n"
               "        float m[@BR@], l[@BR@], ds[@BR@], lse[@BR@], dl[@BR@];\n        ");
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    stats(b);
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++)\n"
               "            for (int64_t d = 0; d < @DH@; d++) acc[r][d] = 0.f;\n");
    if (one) {
        sb_puts(b, one_tile);
        sb_puts(b, load_ks_only);
        sb_puts(b, row_open);
        sb_puts(b, scores_open);
        sb_puts(b, "                float *pr = dp[r];\n");
    } else {
        sb_puts(b, key_tiles);
        sb_puts(b, load_kv_open);
        sb_puts(b, load_vt);
        sb_puts(b, load_ks);
        sb_puts(b, load_kv_close);
        sb_puts(b, row_open);
        sb_puts(b, scores_open);
        sb_puts(b, scores_sp);
    }
    sb_puts(b, dq_acc);
    sb_puts(b, "            }\n"
               "        }\n"
               "        for (int64_t r = 0; r < nq; r++) {\n"
               "            $T4 *o = a4 + ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
               "            for (int64_t d = 0; d < @DH@; d++) o[d] = $W4(acc[r][d]);\n"
               "        }");
}

/* dk, dv of key tile s0 .. s0+nc written (rounded once). */
static const char *dkv_write =
    "        for (int64_t c = 0; c < nc; c++) {\n"
    "            const int64_t o = ((b * @S@ + s0 + c) * @G@ + g) * @DH@;\n"
    "            for (int64_t d = 0; d < @DH@; d++) {\n"
    "                a4[o + d] = $W4(dka[c][d]);\n"
    "                a5[o + d] = $W5(dva[c][d]);\n"
    "            }\n"
    "        }\n";

/* Opens the loop over the kv group's query heads and query tiles (left open),
 * loads the tile's queries and output gradients and computes their statistics. */
static void group_query_tiles(StrBuf *b) {
    sb_puts(b, "        for (int64_t h = g * @R@; h < (g + 1) * @R@; h++)\n"
               "        for (int64_t t0 = 0; t0 < @T@; t0 += @BR@) {\n"
               "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@;\n        ");
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    stats(b);
}

static void dkv(StrBuf *b, bool one) {
    sb_puts(b, "const int64_t g = i % @G@, b = i / @G@, cs = @CS@;\n"
               "        float qs[@BR@][@DH@], ys[@BR@][@DH@], sc[@BR@][@BC@], dp[@BR@][@BC@];\n"
               "        float kt[@DH@][@BC@], vt[@DH@][@BC@], dka[@BC@][@DH@], dva[@BC@][@DH@];\n"
               "        float m[@BR@], l[@BR@], ds[@BR@], lse[@BR@], dl[@BR@];\n");
    if (one) { /* every key in one tile: per query tile, its statistics, then its sums */
        sb_puts(b, "        for (int64_t c = 0; c < @S@; c++)\n"
                   "            for (int64_t d = 0; d < @DH@; d++) dka[c][d] = dva[c][d] = 0.f;\n");
        group_query_tiles(b);
        sb_puts(b, one_tile);
        sb_puts(b, row_open);
        sb_puts(b, scores_open);
        sb_puts(b, "                float *pr = dp[r];\n");
        sb_puts(b, dkv_acc);
        sb_puts(b, "            }\n"
                   "        }\n"
                   "        }\n"
                   "        {\n"
                   "        const int64_t s0 = 0, nc = @S@;\n");
        sb_puts(b, dkv_write);
        sb_puts(b, "        }");
        return;
    }
    sb_puts(b, "        /* the group's query statistics, into the workspace */\n");
    group_query_tiles(b);
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++) {\n"
               "            const int64_t row = (b * @H@ + h) * @T@ + t0 + r;\n"
               "            cg_w[row] = lse[r];\n"
               "            cg_w[@NROWS@ + row] = dl[r];\n"
               "        }\n"
               "        }\n"
               "        /* per key tile: the query tiles that see it */\n"
               "        for (int64_t s0 = 0; s0 < @S@; s0 += @BC@) {\n"
               "        const int64_t nc = @S@ - s0 < @BC@ ? @S@ - s0 : @BC@;\n");
    sb_puts(b, load_kv_open);
    sb_puts(b, load_vt);
    sb_puts(b, "                for (int64_t d = 0; d < @DH@; d++) dka[c][d] = dva[c][d] = 0.f;\n");
    sb_puts(b, load_kv_close);
    sb_puts(b, "        int64_t tf = s0 - cs;\n"
               "        tf = tf < 0 ? 0 : tf / @BR@ * @BR@;\n"
               "        for (int64_t h = g * @R@; h < (g + 1) * @R@; h++)\n"
               "        for (int64_t t0 = tf; t0 < @T@; t0 += @BR@) {\n"
               "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@;\n        ");
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++) {\n"
               "            const int64_t row = (b * @H@ + h) * @T@ + t0 + r;\n"
               "            lse[r] = cg_w[row];\n"
               "            dl[r] = cg_w[@NROWS@ + row];\n"
               "        }\n");
    sb_puts(b, row_open);
    sb_puts(b, scores_open);
    sb_puts(b, scores_sp);
    sb_puts(b, dkv_acc);
    sb_puts(b, "            }\n"
               "        }\n");
    sb_puts(b, dkv_write);
    sb_puts(b, "        }");
}

int64_t cg_attention_c(int kind, int64_t B, int64_t T, int64_t S, int64_t H, int64_t G, int64_t DH, double scale,
                       const char *cs, StrBuf *body) {
    /* A tile of BR queries against BC keys: a point's arrays stay near the
     * L1 data cache (the forward's qs, acc, sc, kt and vs: 44 KB at DH 64) */
    int64_t br = 16, bc = DH > 64 ? 32 : 64, nt = (T + br - 1) / br;
    CgSub subs[] = {{"DH", ""}, {"BR", ""}, {"BC", ""}, {"T", ""},     {"S", ""},     {"H", ""},
                    {"G", ""},  {"R", ""},  {"NT", ""}, {"NROWS", ""}, {"SCALE", ""}, {"CS", ""}};
    long long vals[] = {DH, br, bc, T, S, H, G, H / G, nt, B * H * T};
    for (int i = 0; i < 10; i++) snprintf(subs[i].val, sizeof subs[i].val, "%lld", vals[i]);
    snprintf(subs[10].val, sizeof subs[10].val, "%.9g", scale);
    if (!strchr(subs[10].val, '.') && !strchr(subs[10].val, 'e')) strcat(subs[10].val, ".0");
    snprintf(subs[11].val, sizeof subs[11].val, "%s", cs);
    StrBuf t;
    sb_init(&t);
    bool one = S <= bc; /* every query tile's keys fit one tile */
    if (kind == 0) fwd(&t);
    else if (kind == 1) dq(&t, one);
    else dkv(&t, one);
    cg_subst(body, sb_cstr(&t), subs, (int)(sizeof subs / sizeof subs[0]));
    sb_free(&t);
    return kind == 2 ? B * G : B * H * nt;
}

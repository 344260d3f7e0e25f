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
 *   attention      a point per (batch, head, tile of BR queries; with one
 *                  key tile per (batch, head), its query tiles in turn): key/value
 *                  tiles of BC keys, a running max m and sum l per query,
 *                  the output rescaled by exp(m_old - m_new) at each tile.
 *   attention_dq   a point per query tile (with one key tile per (batch,
 *                  head), its query tiles in turn): first its log-sum-exp and
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
 * T = 64) that pass's scores and their exponentials are kept and used again
 * (p = exp(s - max) / sum: one exponential a score), so the backward does
 * the products the row kernels did (dq 3, dk/dv 4 of B H T S DH), else two
 * more per kernel and two exponentials a score. With one key tile the
 * forward and dq kernels' point is a (batch, head), not a query tile: its
 * keys and values are loaded (k transposed) once for all its query tiles.
 * Every product of a tile is a small GEMM over whole 4 x 16 blocks
 * (cg_mm4x16, the C prelude's: the four rows' sums held in registers over k):
 * scores = q kt and dp = dy vt (the keys transposed when loaded), acc += p v,
 * dq += ds k, and dv += p^T dy, dk += ds^T q over the query tile's rows. The
 * tiles are zero-padded for it (rows of queries to a multiple of 4, keys to
 * 16, DH to DHP, a multiple of 16) and the weights zero past a row's last
 * visible key. Before, a row at a time with its sums in memory and no FMA
 * (-std=c17 contracts none): GPT-2 124M's three kernels take 1.9x less CPU
 * time now (bench/codegen_cpu/README.md). With one key tile the dk/dv
 * kernel loads it once for all its query tiles.
 * Operands: q [B,T,H,DH], k, v [B,S,G,DH], dy like q (kv group g = h / R);
 * query t sees key s when s <= t + cs. 16-bit operands are widened when a
 * tile is loaded ($Lk), results rounded once ($Wk).
 */
#include <string.h>

#include "cg_internal.h"

#define SIMD "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
#define SIMD_SUM2(a, b) "#ifdef _OPENMP\n#pragma omp simd reduction(+ : " a ", " b ")\n#endif\n"
#define SIMD_MAX(v) "#ifdef _OPENMP\n#pragma omp simd reduction(max : " v ")\n#endif\n"

/* Query rows t0 .. t0+nq of head h: q (and dy) widened into qs (ys); rows up
 * to nqp (nq rounded up to 4) and columns up to DHP (DH rounded up to 16)
 * zero, so the tile products run whole 4 x 16 blocks. */
static const char *load_q =
    "for (int64_t r = 0; r < nqp; r++) {\n"
    "            const int64_t o = ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
    "            if (r < nq)\n"
    "                for (int64_t d = 0; d < @DH@; d++) qs[r][d] = $L0(a0[o + d]);\n"
    "            else\n"
    "                for (int64_t d = 0; d < @DH@; d++) qs[r][d] = 0.f;\n"
    "            for (int64_t d = @DH@; d < @DHP@; d++) qs[r][d] = 0.f;\n"
    "        }\n";
static const char *load_y =
    "        for (int64_t r = 0; r < nqp; r++) {\n"
    "            const int64_t o = ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
    "            if (r < nq)\n"
    "                for (int64_t d = 0; d < @DH@; d++) ys[r][d] = $L3(a3[o + d]);\n"
    "            else\n"
    "                for (int64_t d = 0; d < @DH@; d++) ys[r][d] = 0.f;\n"
    "            for (int64_t d = @DH@; d < @DHP@; d++) ys[r][d] = 0.f;\n"
    "        }\n";

/* Keys s0 .. s0+nc of kv head g into `dst` (kt[d][c], vt: transposed; ks[c][d],
 * vs: rows) from operand a<arg> (1: k, 2: v); keys up to ncp (nc rounded up
 * to 16, defined first by the call with `ncp`) and columns up to DHP zero. */
static void load_keys(StrBuf *b, const char *dst, int arg, bool ncp) {
    if (ncp) sb_puts(b, "            const int64_t ncp = (nc + 15) / 16 * 16;\n");
    sb_printf(b,
              "            for (int64_t c = 0; c < ncp; c++) {\n"
              "                const int64_t o = ((b * @S@ + s0 + c) * @G@ + g) * @DH@;\n"
              "                if (c < nc)\n"
              "                    for (int64_t d = 0; d < @DH@; d++) %s = $L%d(a%d[o + d]);\n"
              "                else\n"
              "                    for (int64_t d = 0; d < @DH@; d++) %s = 0.f;\n"
              "                for (int64_t d = @DH@; d < @DHP@; d++) %s = 0.f;\n"
              "            }\n",
              dst, arg, arg, dst, dst);
}
#define KT "kt[d][c]"
#define VT "vt[d][c]"
#define KS "ks[c][d]"
#define VS "vs[c][d]"

/* The tile's scores q.k (unscaled) into sc, and dp = dy.v into dp: products
 * of the zero-padded tiles (cg_mm4x16, the prelude's), nqp x ncp each. */
static const char *mm_s = "            cg_mm4x16(nqp, ncp, @DHP@, qs[0], @DHP@, 1, kt[0], @BC@, sc[0], @BC@, 0);\n";
static const char *mm_p = "            cg_mm4x16(nqp, ncp, @DHP@, ys[0], @DHP@, 1, vt[0], @BC@, dp[0], @BC@, 0);\n";

/* Row r's visible keys of the tile (nv; none for the padding rows), its
 * scores (and dp) in the tile products' rows. */
static const char *scores_open =
    "                const int64_t nv0 = t0 + r + cs - s0 + 1, nv = r >= nq ? 0 : nv0 < nc ? nv0 : nc;\n"
    "                float *sr = sc[r];\n";
static const char *row_dp = "                float *pr = dp[r];\n";

/* The query tile's key tiles: up to the last key its last row sees. */
static const char *key_tiles =
    "        int64_t smax = t0 + nq - 1 + cs;\n"
    "        if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "        for (int64_t s0 = 0; s0 <= smax; s0 += @BC@) {\n"
    "            const int64_t nc = smax + 1 - s0 < @BC@ ? smax + 1 - s0 : @BC@;\n";

/* The statistics of the query tile (qs, ys loaded): lse and delta per row
 * (-INFINITY and 0 for a row that sees no key and for the padding rows).
 * `load`: load the key tiles into kt, vt; else they are there already, all
 * S keys (one tile: kt's keys past a row's last visible one are never read).
 * `keep` (one key tile only): each visible score's exp(s - max) replaces it
 * in sc, for the weights pass to read (row_p). */
static void stats(StrBuf *b, bool load, bool keep) {
    sb_puts(b, "        for (int64_t r = 0; r < nqp; r++) m[r] = -INFINITY, l[r] = 0.f, ds[r] = 0.f;\n        {\n");
    sb_puts(b, key_tiles);
    if (load) {
        load_keys(b, KT, 1, true);
        load_keys(b, VT, 2, false);
    } else {
        sb_puts(b, "            const int64_t ncp = (nc + 15) / 16 * 16;\n");
    }
    sb_puts(b, mm_s);
    sb_puts(b, mm_p);
    sb_puts(b, "            for (int64_t r = 0; r < nq; r++) {\n");
    sb_puts(b, scores_open);
    sb_puts(b, row_dp);
    sb_puts(b, "                if (nv <= 0) continue;\n"
               "                float mt = -INFINITY;\n" SIMD_MAX("mt")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    const float x = sr[c] * @SCALE@f;\n"
               "                    mt = x > mt ? x : mt;\n"
               "                }\n"
               "                const float mn = m[r] > mt ? m[r] : mt, corr = cg_expf(m[r] - mn);\n"
               "                float ls = 0.f, dsum = 0.f;\n" SIMD_SUM2("ls", "dsum")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    const float p = cg_expf(sr[c] * @SCALE@f - mn);\n");
    if (keep) sb_puts(b, "                    sr[c] = p;\n");
    sb_puts(b, "                    ls += p;\n"
               "                    dsum += p * pr[c];\n"
               "                }\n"
               "                l[r] = l[r] * corr + ls;\n"
               "                ds[r] = ds[r] * corr + dsum;\n"
               "                m[r] = mn;\n"
               "            }\n"
               "        }\n"
               "        }\n"
               "        for (int64_t r = 0; r < nqp; r++) {\n"
               "            lse[r] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;\n"
               "            dl[r] = l[r] > 0.f ? ds[r] / l[r] : 0.f;\n"
               "        }\n");
}

/* The single key tile of a query tile whose keys all fit one (S <= BC):
 * the statistics pass left its scores (their exponentials, `keep`) and dp in
 * sc, dp, so they are read back instead of computed again; the forward's
 * point computes its scores here, from the keys it loaded once. */
static const char *one_tile =
    "        {\n"
    "        int64_t smax = t0 + nq - 1 + cs;\n"
    "        if (smax > @S@ - 1) smax = @S@ - 1;\n"
    "        const int64_t s0 = 0, nc = smax + 1, ncp = (nc + 15) / 16 * 16;\n";

/* `one`: every key fits one tile (S <= BC); a point is then a (batch, head)
 * whose keys and values are loaded once for all its query tiles (else once
 * per query tile: the T = 64 GPT-2 transposed its keys four times a head). */
static void fwd(StrBuf *b, bool one) {
    if (one) {
        sb_puts(b, "const int64_t h = i % @H@, b = i / @H@, g = h / @R@, cs = @CS@;\n"
                   "        float qs[@BR@][@DHP@], acc[@BR@][@DHP@], sc[@BR@][@BC@], kt[@DHP@][@BC@], vs[@BC@][@DHP@];\n"
                   "        float m[@BR@], l[@BR@];\n"
                   "        {\n"
                   "        const int64_t s0 = 0, nc = @S@;\n");
        load_keys(b, KT, 1, true);
        load_keys(b, VS, 2, false);
        sb_puts(b, "        }\n"
                   "        for (int64_t t0 = 0; t0 < @T@; t0 += @BR@) {\n"
                   "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4;\n        ");
    } else {
        sb_puts(b, "const int64_t tile = i % @NT@, bh = i / @NT@, h = bh % @H@, b = bh / @H@, g = h / @R@;\n"
                   "        const int64_t t0 = tile * @BR@, nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4, cs = @CS@;\n"
                   "        float qs[@BR@][@DHP@], acc[@BR@][@DHP@], sc[@BR@][@BC@], kt[@DHP@][@BC@], vs[@BC@][@DHP@];\n"
                   "        float m[@BR@], l[@BR@];\n        ");
    }
    sb_puts(b, load_q);
    sb_puts(b, "        for (int64_t r = 0; r < nqp; r++) {\n"
               "            m[r] = -INFINITY, l[r] = 0.f;\n"
               "            for (int64_t d = 0; d < @DHP@; d++) acc[r][d] = 0.f;\n"
               "        }\n");
    if (one) {
        sb_puts(b, one_tile);
    } else {
        sb_puts(b, key_tiles);
        load_keys(b, KT, 1, true);
        load_keys(b, VS, 2, false);
    }
    sb_puts(b, mm_s);
    sb_puts(b, "            for (int64_t r = 0; r < nqp; r++) {\n");
    sb_puts(b, scores_open);
    /* p = exp(scaled score - running max) over the visible keys, zero past
     * them (and on rows that see none), then acc = acc corr + p v */
    sb_puts(b, "                if (nv <= 0) {\n"
               "                    for (int64_t c = 0; c < ncp; c++) sr[c] = 0.f;\n"
               "                    continue;\n"
               "                }\n"
               "                float mt = -INFINITY;\n" SIMD_MAX("mt")
               "                for (int64_t c = 0; c < nv; c++) {\n"
               "                    sr[c] *= @SCALE@f;\n"
               "                    mt = sr[c] > mt ? sr[c] : mt;\n"
               "                }\n"
               "                const float mn = m[r] > mt ? m[r] : mt, corr = cg_expf(m[r] - mn);\n"
               "                float ls = 0.f;\n"
               "#ifdef _OPENMP\n#pragma omp simd reduction(+ : ls)\n#endif\n"
               "                for (int64_t c = 0; c < nv; c++) ls += (sr[c] = cg_expf(sr[c] - mn));\n"
               "                for (int64_t c = nv; c < ncp; c++) sr[c] = 0.f;\n"
               "                l[r] = l[r] * corr + ls;\n"
               "                m[r] = mn;\n"
               "                float *ar = acc[r];\n" SIMD
               "                for (int64_t d = 0; d < @DHP@; d++) ar[d] *= corr;\n"
               "            }\n"
               "            cg_mm4x16(nqp, @DHP@, ncp, sc[0], @BC@, 1, vs[0], @DHP@, acc[0], @DHP@, 1);\n"
               "        }\n"
               "        for (int64_t r = 0; r < nq; r++) {\n"
               "            $T3 *o = a3 + ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
               "            const float inv = l[r] > 0.f ? 1.0f / l[r] : 0.f;\n"
               "            for (int64_t d = 0; d < @DH@; d++) o[d] = $W3(acc[r][d] * inv);\n"
               "        }");
    if (one) sb_puts(b, "\n        }");
}

/* Row r's weights over the tile, zero past its visible keys and on the rows
 * that see none: dq's ds = p (dp - delta) scale in sr; dk and dv's p in sr
 * and ds in pr. */
static const char *row_open =
    "            for (int64_t r = 0; r < nqp; r++) {\n";
static const char *row_skip =
    "                if (nv <= 0 || lse[r] == -INFINITY) {\n"
    "                    for (int64_t c = 0; c < ncp; c++) sr[c] = pr[c] = 0.f;\n"
    "                    continue;\n"
    "                }\n";
/* p of the row's scores: exp(s - lse), or (`kept`: the statistics pass of
 * the one key tile left exp(s - max) in sr, its max the row's) that over the
 * row's sum, one exponential a score instead of two. */
static void row_p(StrBuf *b, bool kept) {
    sb_puts(b, kept ? "                const float il = 1.0f / l[r], dr = dl[r];\n"
                    : "                const float lr = lse[r], dr = dl[r];\n");
}
#define P_OF(kept) ((kept) ? "sr[c] * il" : "cg_expf(sr[c] * @SCALE@f - lr)")
static void dq_w(StrBuf *b, bool kept) {
    row_p(b, kept);
    sb_printf(b,
              SIMD "                for (int64_t c = 0; c < nv; c++) sr[c] = %s * (pr[c] - dr) * @SCALE@f;\n"
                   "                for (int64_t c = nv; c < ncp; c++) sr[c] = 0.f;\n"
                   "            }\n",
              P_OF(kept));
}
static void dkv_w(StrBuf *b, bool kept) {
    row_p(b, kept);
    sb_printf(b,
              SIMD "                for (int64_t c = 0; c < nv; c++) {\n"
                   "                    const float p = %s;\n"
                   "                    sr[c] = p;\n"
                   "                    pr[c] = p * (pr[c] - dr) * @SCALE@f;\n"
                   "                }\n"
                   "                for (int64_t c = nv; c < ncp; c++) sr[c] = pr[c] = 0.f;\n"
                   "            }\n",
              P_OF(kept));
}

/* dq += ds k; dv += p^T dy, dk += ds^T q (the weights' rows are queries). */
static const char *mm_dq = "            cg_mm4x16(nqp, @DHP@, ncp, sc[0], @BC@, 1, ks[0], @DHP@, acc[0], @DHP@, 1);\n";
static const char *mm_dkv = "            cg_mm4x16(ncp, @DHP@, nqp, sc[0], 1, @BC@, ys[0], @DHP@, dva[0], @DHP@, 1);\n"
                            "            cg_mm4x16(ncp, @DHP@, nqp, dp[0], 1, @BC@, qs[0], @DHP@, dka[0], @DHP@, 1);\n";

static void dq(StrBuf *b, bool one) {
    const char *arrays = "        float qs[@BR@][@DHP@], ys[@BR@][@DHP@], acc[@BR@][@DHP@], sc[@BR@][@BC@], dp[@BR@][@BC@];\n"
                         "        float kt[@DHP@][@BC@], vt[@DHP@][@BC@], ks[@BC@][@DHP@];\n"
                         "        float m[@BR@], l[@BR@], ds[@BR@], lse[@BR@], dl[@BR@];\n";
    if (one) { /* a point per (batch, head): its keys and values loaded once */
        sb_puts(b, "const int64_t h = i % @H@, b = i / @H@, g = h / @R@, cs = @CS@;\n");
        sb_puts(b, arrays);
        sb_puts(b, "        {\n"
                   "        const int64_t s0 = 0, nc = @S@;\n");
        load_keys(b, KT, 1, true);
        load_keys(b, VT, 2, false);
        load_keys(b, KS, 1, false);
        sb_puts(b, "        }\n"
                   "        for (int64_t t0 = 0; t0 < @T@; t0 += @BR@) {\n"
                   "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4;\n        ");
    } else {
        sb_puts(b, "const int64_t tile = i % @NT@, bh = i / @NT@, h = bh % @H@, b = bh / @H@, g = h / @R@;\n"
                   "        const int64_t t0 = tile * @BR@, nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4, cs = @CS@;\n");
        sb_puts(b, arrays);
        sb_puts(b, "        ");
    }
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    stats(b, !one, one);
    sb_puts(b, "        for (int64_t r = 0; r < nqp; r++)\n"
               "            for (int64_t d = 0; d < @DHP@; d++) acc[r][d] = 0.f;\n");
    if (one) {
        sb_puts(b, one_tile);
    } else {
        sb_puts(b, key_tiles);
        load_keys(b, KT, 1, true);
        load_keys(b, VT, 2, false);
        load_keys(b, KS, 1, false);
        sb_puts(b, mm_s);
        sb_puts(b, mm_p);
    }
    sb_puts(b, row_open);
    sb_puts(b, scores_open);
    sb_puts(b, row_dp);
    sb_puts(b, row_skip);
    dq_w(b, one);
    sb_puts(b, mm_dq);
    sb_puts(b, "        }\n"
               "        for (int64_t r = 0; r < nq; r++) {\n"
               "            $T4 *o = a4 + ((b * @T@ + t0 + r) * @H@ + h) * @DH@;\n"
               "            for (int64_t d = 0; d < @DH@; d++) o[d] = $W4(acc[r][d]);\n"
               "        }");
    if (one) sb_puts(b, "\n        }");
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
static void group_query_tiles(StrBuf *b, bool load, bool keep) {
    sb_puts(b, "        for (int64_t h = g * @R@; h < (g + 1) * @R@; h++)\n"
               "        for (int64_t t0 = 0; t0 < @T@; t0 += @BR@) {\n"
               "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4;\n        ");
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    stats(b, load, keep);
}

static void dkv(StrBuf *b, bool one) {
    sb_puts(b, "const int64_t g = i % @G@, b = i / @G@, cs = @CS@;\n"
               "        float qs[@BR@][@DHP@], ys[@BR@][@DHP@], sc[@BR@][@BC@], dp[@BR@][@BC@];\n"
               "        float kt[@DHP@][@BC@], vt[@DHP@][@BC@], dka[@BC@][@DHP@], dva[@BC@][@DHP@];\n"
               "        float m[@BR@], l[@BR@], ds[@BR@], lse[@BR@], dl[@BR@];\n");
    if (one) { /* every key in one tile: per query tile, its statistics, then its sums */
        sb_puts(b, "        for (int64_t c = 0; c < @BC@; c++)\n"
                   "            for (int64_t d = 0; d < @DHP@; d++) dka[c][d] = dva[c][d] = 0.f;\n"
                   "        {\n"
                   "        const int64_t s0 = 0, nc = @S@;\n");
        load_keys(b, KT, 1, true); /* once for all the group's query tiles */
        load_keys(b, VT, 2, false);
        sb_puts(b, "        }\n");
        group_query_tiles(b, false, true);
        sb_puts(b, one_tile);
        sb_puts(b, row_open);
        sb_puts(b, scores_open);
        sb_puts(b, row_dp);
        sb_puts(b, row_skip);
        dkv_w(b, true);
        sb_puts(b, mm_dkv);
        sb_puts(b, "        }\n"
                   "        }\n"
                   "        {\n"
                   "        const int64_t s0 = 0, nc = @S@;\n");
        sb_puts(b, dkv_write);
        sb_puts(b, "        }");
        return;
    }
    sb_puts(b, "        /* the group's query statistics, into the workspace */\n");
    group_query_tiles(b, true, false);
    sb_puts(b, "        for (int64_t r = 0; r < nq; r++) {\n"
               "            const int64_t row = (b * @H@ + h) * @T@ + t0 + r;\n"
               "            cg_w[row] = lse[r];\n"
               "            cg_w[@NROWS@ + row] = dl[r];\n"
               "        }\n"
               "        }\n"
               "        /* per key tile: the query tiles that see it */\n"
               "        for (int64_t s0 = 0; s0 < @S@; s0 += @BC@) {\n"
               "        const int64_t nc = @S@ - s0 < @BC@ ? @S@ - s0 : @BC@;\n");
    load_keys(b, KT, 1, true);
    load_keys(b, VT, 2, false);
    sb_puts(b, "        for (int64_t c = 0; c < ncp; c++)\n"
               "            for (int64_t d = 0; d < @DHP@; d++) dka[c][d] = dva[c][d] = 0.f;\n");
    sb_puts(b, "        int64_t tf = s0 - cs;\n"
               "        tf = tf < 0 ? 0 : tf / @BR@ * @BR@;\n"
               "        for (int64_t h = g * @R@; h < (g + 1) * @R@; h++)\n"
               "        for (int64_t t0 = tf; t0 < @T@; t0 += @BR@) {\n"
               "        const int64_t nq = @T@ - t0 < @BR@ ? @T@ - t0 : @BR@, nqp = (nq + 3) / 4 * 4;\n        ");
    sb_puts(b, load_q);
    sb_puts(b, load_y);
    sb_puts(b, "        for (int64_t r = 0; r < nqp; r++) {\n"
               "            const int64_t row = (b * @H@ + h) * @T@ + t0 + r;\n"
               "            lse[r] = r < nq ? cg_w[row] : -INFINITY;\n"
               "            dl[r] = r < nq ? cg_w[@NROWS@ + row] : 0.f;\n"
               "        }\n");
    sb_puts(b, mm_s);
    sb_puts(b, mm_p);
    sb_puts(b, row_open);
    sb_puts(b, scores_open);
    sb_puts(b, row_dp);
    sb_puts(b, row_skip);
    dkv_w(b, false);
    sb_puts(b, mm_dkv);
    sb_puts(b, "        }\n");
    sb_puts(b, dkv_write);
    sb_puts(b, "        }");
}

int64_t cg_attention_c(int kind, int64_t B, int64_t T, int64_t S, int64_t H, int64_t G, int64_t DH, double scale,
                       const char *cs, StrBuf *body) {
    /* A tile of BR queries against BC keys: a point's arrays stay near the
     * L1 data cache (the forward's qs, acc, sc, kt and vs: 44 KB at DH 64) */
    int64_t br = 16, bc = DH > 64 ? 32 : 64, nt = (T + br - 1) / br;
    CgSub subs[] = {{"DHP", ""}, {"DH", ""}, {"BR", ""}, {"BC", ""},    {"T", ""},     {"S", ""},
                    {"H", ""},   {"G", ""},  {"R", ""},  {"NT", ""}, {"NROWS", ""}, {"SCALE", ""}, {"CS", ""}};
    long long vals[] = {(DH + 15) / 16 * 16, DH, br, bc, T, S, H, G, H / G, nt, B * H * T};
    for (int i = 0; i < 11; i++) snprintf(subs[i].val, sizeof subs[i].val, "%lld", vals[i]);
    snprintf(subs[11].val, sizeof subs[11].val, "%.9g", scale);
    if (!strchr(subs[11].val, '.') && !strchr(subs[11].val, 'e')) strcat(subs[11].val, ".0");
    snprintf(subs[12].val, sizeof subs[12].val, "%s", cs);
    StrBuf t;
    sb_init(&t);
    bool one = S <= bc; /* every query tile's keys fit one tile */
    if (kind == 0) fwd(&t, one);
    else if (kind == 1) dq(&t, one);
    else dkv(&t, one);
    cg_subst(body, sb_cstr(&t), subs, (int)(sizeof subs / sizeof subs[0]));
    sb_free(&t);
    return kind == 2 ? B * G : one ? B * H : B * H * nt;
}

/*
 * gemm_variants.c — GPT-2 124M's step GEMMs (the 15 shapes of gemm_shapes.c,
 * f32, row-major) through the ways oneDNN 2.x (Debian's libdnnl2) can run
 * them, in one process, alternating variant by variant within each round
 * (bench/codegen_cpu/README.md, "The GEMMs by variant"):
 *   sgemm   dnnl_sgemm, one call (oneDNN's own OpenMP partition)
 *   split   one one-thread dnnl_sgemm per OpenMP thread on a block of C's
 *           columns (rows when M > N) — the rule of runtime/cpu/blas.c
 *           dnnl_split, which colrt runs today
 *   splitm, splitn  the same split forced to blocks of C's rows (splitm) or
 *           columns (splitn), whichever split rule would pick
 *   splitk  (K >= 8192 only: the head's input gradient) each thread one
 *           one-thread product over a block of K into a buffer of its own,
 *           then the blocks summed into C in thread order (deterministic)
 *   mm      the matmul primitive on the plain (strided) layouts, created once
 *           per shape (COLRT_GEMM_F32=matmul in colrt)
 *   mmany   the matmul primitive with the weight operand B in the layout
 *           oneDNN picks (format `any`), B reordered into it beforehand:
 *           only the shapes whose B is a weight (forward and input
 *           gradient); the reorder's own time is printed apart ("reorder")
 *   pack    oneDNN's internal packed sgemm (dnnl::impl::cpu::sgemm_pack /
 *           sgemm_compute, exported by libdnnl.so.2 2.x as C++ symbols):
 *           the weight packed beforehand (the pack's time apart), weight
 *           shapes only
 *   rowsK   (M > N only: the head's weight gradient) one-thread products on
 *           chunks of K rows of C, handed out dynamically
 *   colsK   (N >= 8192 only: the head's forward) the same over chunks of K
 *           columns of C
 * `gemm_variants peak` instead measures the cores' f32 FMA peak: each
 * OpenMP thread runs 16 independent chains of 16-lane fused multiply-adds
 * (AVX-512; what no GEMM can beat on this CPU), best of 5 runs of 2^26 FMAs
 * a thread (build with -march=native, or the mode says it is missing).
 * Every variant's C is checked against sgemm's (relative 1e-4).
 * Per shape and variant: the best and the median of REPS calls after one
 * warm-up call, over ROUNDS rounds; the step's GEMM seconds (calls x median)
 * per variant at the end, with the per-step reorder/pack cost beside it.
 *
 * build: cc -std=c17 -O2 -fopenmp bench/codegen_cpu/gemm_variants.c -ldl -o /tmp/gemm_variants
 * run:   OMP_NUM_THREADS=2 /tmp/gemm_variants [ROUNDS [REPS [VARIANT,...]]]
 *        OMP_NUM_THREADS=2 /tmp/gemm_variants peak   (build with -O2 -march=native)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

typedef struct { const char *name; int ta, tb, m, n, k, beta, count, weight; } Shape;
/* weight: B is a parameter (read again next step unchanged until the update) */
static const Shape SHAPES[] = {
    {"qkv fwd", 0, 0, 256, 2304, 768, 1, 12, 1},      {"qkv dx", 0, 1, 256, 768, 2304, 0, 12, 1},
    {"qkv dw", 1, 0, 768, 2304, 256, 0, 12, 0},       {"attn.proj fwd", 0, 0, 256, 768, 768, 1, 12, 1},
    {"attn.proj dx", 0, 1, 256, 768, 768, 0, 12, 1},  {"attn.proj dw", 1, 0, 768, 768, 256, 0, 12, 0},
    {"mlp.fc fwd", 0, 0, 256, 3072, 768, 1, 12, 1},   {"mlp.fc dx", 0, 1, 256, 768, 3072, 0, 12, 1},
    {"mlp.fc dw", 1, 0, 768, 3072, 256, 0, 12, 0},    {"mlp.proj fwd", 0, 0, 256, 768, 3072, 1, 12, 1},
    {"mlp.proj dx", 0, 1, 256, 3072, 768, 0, 12, 1},  {"mlp.proj dw", 1, 0, 3072, 768, 256, 0, 12, 0},
    {"lm_head fwd", 0, 1, 256, 50257, 768, 0, 1, 1},  {"lm_head dx", 0, 0, 256, 768, 50257, 0, 1, 1},
    {"lm_head dw", 1, 0, 50257, 768, 256, 0, 1, 0},
};
enum { NSHAPES = sizeof SHAPES / sizeof *SHAPES };

/* ---- oneDNN's C API by dlsym (no headers; oneDNN 2.x values, dnnl_types.h) ---- */
typedef void *H;
typedef struct { _Alignas(64) unsigned char b[2048]; } Md;
typedef struct { _Alignas(64) unsigned char b[8192]; } MmDesc;
typedef struct { int arg; H mem; } Arg;
enum { F32 = 3, TAG_ANY = 1, Q_WEIGHTS_MD = 131, ARG_SRC = 1, ARG_DST = 17, ARG_WEIGHTS = 33 };
static struct {
    int (*sgemm)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t, float,
                 float *, int64_t);
    int (*engine_create)(H *, int, size_t);
    int (*stream_create)(H *, H, unsigned);
    int (*stream_wait)(H);
    int (*md_strides)(Md *, int, const int64_t *, int, const int64_t *);
    int (*md_tag)(Md *, int, const int64_t *, int, int);
    size_t (*md_size)(const Md *);
    int (*mm_init)(MmDesc *, const Md *, const Md *, const Md *, const Md *);
    int (*attr_create)(H *);
    int (*attr_post_ops)(H, H);
    int (*po_create)(H *);
    int (*po_sum)(H, float);
    int (*pd_create)(H *, const void *, H, H, H);
    const Md *(*pd_query_md)(H, int, int);
    int (*reorder_pd)(H *, const Md *, H, const Md *, H, H);
    int (*prim_create)(H *, H);
    int (*execute)(H, H, int, const Arg *);
    int (*mem_create)(H *, const Md *, H, void *);
    int (*set_handle)(H, void *);
    /* dnnl::impl::cpu::sgemm_pack_get_size / sgemm_pack / sgemm_compute (column-major, dim_t = long) */
    int (*pack_size)(const char *, const char *, const char *, const long *, const long *, const long *,
                     const long *, const long *, size_t *, _Bool *);
    int (*pack)(const char *, const char *, const char *, const long *, const long *, const long *, const long *,
                const long *, const float *, float *);
    int (*compute)(const char *, const char *, const long *, const long *, const long *, const float *, const long *,
                   const float *, const long *, const float *, float *, const long *);
    H engine, stream;
} dn;

static int load(void) {
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
#define S(f, n) (*(void **)&dn.f = dlsym(h, n))
    if (!S(sgemm, "dnnl_sgemm") || !S(engine_create, "dnnl_engine_create") || !S(stream_create, "dnnl_stream_create") ||
        !S(stream_wait, "dnnl_stream_wait") || !S(md_strides, "dnnl_memory_desc_init_by_strides") ||
        !S(md_tag, "dnnl_memory_desc_init_by_tag") || !S(md_size, "dnnl_memory_desc_get_size") ||
        !S(mm_init, "dnnl_matmul_desc_init") || !S(attr_create, "dnnl_primitive_attr_create") ||
        !S(attr_post_ops, "dnnl_primitive_attr_set_post_ops") || !S(po_create, "dnnl_post_ops_create") ||
        !S(po_sum, "dnnl_post_ops_append_sum") || !S(pd_create, "dnnl_primitive_desc_create") ||
        !S(pd_query_md, "dnnl_primitive_desc_query_md") || !S(reorder_pd, "dnnl_reorder_primitive_desc_create") ||
        !S(prim_create, "dnnl_primitive_create") || !S(execute, "dnnl_primitive_execute") ||
        !S(mem_create, "dnnl_memory_create") || !S(set_handle, "dnnl_memory_set_data_handle"))
        return 0;
    S(pack_size, "_ZN4dnnl4impl3cpu19sgemm_pack_get_sizeEPKcS3_S3_PKlS5_S5_S5_S5_PmPb");
    S(pack, "_ZN4dnnl4impl3cpu10sgemm_packEPKcS3_S3_PKlS5_S5_S5_S5_PKfPf");
    S(compute, "_ZN4dnnl4impl3cpu13sgemm_computeEPKcS3_PKlS5_S5_PKfS5_S7_S5_S7_PfS5_");
#undef S
    return !dn.engine_create(&dn.engine, 1, 0) && !dn.stream_create(&dn.stream, dn.engine, 1);
}

static void die(const char *what, int st) {
    fprintf(stderr, "gemm_variants: %s failed (status %d)\n", what, st);
    exit(1);
}

/* A shape's matmul primitive; any: B in the layout oneDNN picks (its reorder
 * primitive and the reordered buffer made too). */
typedef struct { H prim, a, b, c, reorder, bsrc, bdst; float *bbuf; } Mm;
static void mm_make(Mm *m, const Shape *p, int any, const float *B) {
    static Md ma, mb, mbu, mc;
    static MmDesc d;
    int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
    const int64_t da[2] = {p->m, p->k}, sa[2] = {p->ta ? 1 : lda, p->ta ? lda : 1};
    const int64_t db[2] = {p->k, p->n}, sb[2] = {p->tb ? 1 : ldb, p->tb ? ldb : 1};
    const int64_t dc[2] = {p->m, p->n}, sc[2] = {p->n, 1};
    int st = dn.md_strides(&ma, 2, da, F32, sa) || dn.md_strides(&mbu, 2, db, F32, sb) ||
             dn.md_strides(&mc, 2, dc, F32, sc);
    if (any) st = st || dn.md_tag(&mb, 2, db, F32, TAG_ANY);
    else mb = mbu;
    if (st || dn.mm_init(&d, &ma, &mb, NULL, &mc)) die("matmul descriptor", st);
    H attr = NULL, po = NULL, pd = NULL;
    if ((st = dn.attr_create(&attr))) die("attr", st);
    if (p->beta && ((st = dn.po_create(&po)) || (st = dn.po_sum(po, 1.f)) || (st = dn.attr_post_ops(attr, po))))
        die("sum post-op", st);
    if ((st = dn.pd_create(&pd, &d, attr, dn.engine, NULL))) die("matmul primitive descriptor", st);
    if ((st = dn.prim_create(&m->prim, pd))) die("matmul primitive", st);
    const Md *wmd = any ? dn.pd_query_md(pd, Q_WEIGHTS_MD, 0) : &mb;
    if ((st = dn.mem_create(&m->a, &ma, dn.engine, NULL)) || (st = dn.mem_create(&m->c, &mc, dn.engine, NULL)))
        die("memory", st);
    if (!any) {
        if ((st = dn.mem_create(&m->b, &mb, dn.engine, (void *)B))) die("memory", st);
        return;
    }
    m->bbuf = aligned_alloc(64, (dn.md_size(wmd) + 63) / 64 * 64);
    H rpd = NULL;
    if ((st = dn.mem_create(&m->b, wmd, dn.engine, m->bbuf)) || (st = dn.mem_create(&m->bsrc, &mbu, dn.engine, (void *)B)) ||
        (st = dn.reorder_pd(&rpd, &mbu, dn.engine, wmd, dn.engine, NULL)) || (st = dn.prim_create(&m->reorder, rpd)))
        die("weight reorder", st);
}
static void run_prim(H prim, int n, const Arg *args) {
    int st = dn.execute(prim, dn.stream, n, args);
    if (st || (st = dn.stream_wait(dn.stream))) die("execute", st);
}
static H mem_set(H mem, void *p) {
    int st = dn.set_handle(mem, p);
    if (st) die("dnnl_memory_set_data_handle", st);
    return mem;
}

static void sgemm1(const Shape *p, int m, int n, const float *A, int lda, const float *B, int ldb, float *C, int ldc) {
    int st = dn.sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', m, n, p->k, 1.f, A, lda, B, ldb, (float)p->beta, C, ldc);
    if (st) die("dnnl_sgemm", st);
}
/* rows [lo, hi) or columns [lo, hi) of C as one product */
static void part(const Shape *p, int rows, int64_t lo, int64_t hi, const float *A, int lda, const float *B, int ldb,
                 float *C) {
    if (hi <= lo) return;
    if (rows)
        sgemm1(p, (int)(hi - lo), p->n, p->ta ? A + lo : A + lo * lda, lda, B, ldb, C + lo * p->n, p->n);
    else
        sgemm1(p, p->m, (int)(hi - lo), A, lda, p->tb ? B + lo * ldb : B + lo, ldb, C + lo, p->n);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *const VARIANTS[] = {"sgemm", "split", "splitm", "splitn", "splitk", "mm", "mmany", "pack", "rows256", "rows1024", "rows4096",
                                       "cols512", "cols2048", "cols8192"};
enum { NVAR = sizeof VARIANTS / sizeof *VARIANTS, MAXR = 64 };

/* Whether NAME is one of LIST's comma-separated names. */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *q = list; *q; q = strchr(q, ',') ? strchr(q, ',') + 1 : q + strlen(q))
        if (!strncmp(q, name, n) && (q[n] == ',' || !q[n])) return 1;
    return 0;
}

/* The f32 FMA peak of OMP_NUM_THREADS threads, GFLOP/s (0: not built for AVX-512). */
static double fma_peak(void) {
#ifdef __AVX512F__
    double bestt = 1e30;
    enum { CHAINS = 16, ITERS = 1 << 22 }; /* 16 x 2^22 = 2^26 FMAs of 16 lanes a thread */
    int nt = omp_get_max_threads();
    for (int run = 0; run < 5; run++) {
        double t0 = now();
        float sink = 0;
#pragma omp parallel reduction(+ : sink)
        {
            __m512 acc[CHAINS], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
            for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
            for (long i = 0; i < ITERS; i++)
#pragma GCC unroll 16
                for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], x, y);
            for (int c = 0; c < CHAINS; c++) sink += _mm512_reduce_add_ps(acc[c]);
        }
        double t = now() - t0;
        if (sink == 12345.f) printf(" "); /* keeps the chains */
        bestt = t < bestt ? t : bestt;
    }
    return 2.0 * 16 * CHAINS * (double)ITERS * nt / bestt * 1e-9;
#else
    return 0;
#endif
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "peak")) {
        double g = fma_peak();
        if (g == 0) return fprintf(stderr, "gemm_variants peak: built without AVX-512 (-march=native)\n"), 1;
        printf("f32 FMA peak, %d threads: %.1f GFLOP/s\n", omp_get_max_threads(), g);
        return 0;
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 3, reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *only = argc > 3 ? argv[3] : NULL;
    if (rounds < 1 || rounds > MAXR || reps < 1 || reps > 1000)
        return fprintf(stderr, "usage: gemm_variants [ROUNDS (1-%d) [REPS (1-1000) [VARIANT,...]]]\n", MAXR), 2;
    if (!load()) return fprintf(stderr, "cannot load oneDNN 2.x (libdnnl.so.2) and its matmul API\n"), 1;
    int nt = omp_get_max_threads();
    size_t most = 0;
    for (int s = 0; s < NSHAPES; s++) {
        const Shape *p = &SHAPES[s];
        size_t a = (size_t)p->m * p->k, b = (size_t)p->k * p->n, c = (size_t)p->m * p->n;
        most = a > most ? a : most, most = b > most ? b : most, most = c > most ? c : most;
    }
    float *A = malloc(most * 4), *B = malloc(most * 4), *C = malloc(most * 4), *R = malloc(most * 4), *C0 = malloc(most * 4);
    if (!A || !B || !C || !R || !C0) return fprintf(stderr, "out of memory\n"), 1;
    for (size_t i = 0; i < most; i++)
        A[i] = (float)((i * 7919) % 97) / 97.f - 0.5f, B[i] = (float)((i * 104729) % 89) / 89.f - 0.5f,
        C0[i] = (float)(i % 13) / 13.f;
    static double med[NSHAPES][NVAR][MAXR], best[NSHAPES][NVAR], prep[NSHAPES][NVAR];
    for (int s = 0; s < NSHAPES; s++)
        for (int v = 0; v < NVAR; v++) best[s][v] = 1e30, prep[s][v] = -1, med[s][v][0] = -1;
    static Mm mm[NSHAPES], mmany[NSHAPES];
    static float *packed[NSHAPES];
    printf("gemm_variants: %d threads, %d rounds, best/median of %d calls\n", nt, rounds, reps);
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < NSHAPES; s++) {
            const Shape *p = &SHAPES[s];
            int lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
            size_t cn = (size_t)p->m * p->n;
            /* the reference: dnnl_sgemm on C0 */
            memcpy(R, C0, cn * 4);
            sgemm1(p, p->m, p->n, A, lda, B, ldb, R, p->n);
            for (int v = 0; v < NVAR; v++) {
                const char *vn = VARIANTS[v];
                if (only && !listed(only, vn)) continue;
                int rows = p->m > p->n, chunk = !strncmp(vn, "rows", 4) || !strncmp(vn, "cols", 4) ? atoi(vn + 4) : 0;
                int bycols = !strncmp(vn, "cols", 4);
                if (chunk && !bycols && !rows) continue;
                if (bycols && p->n < 8192) continue;
                if (!strcmp(vn, "splitk") && (p->k < 8192 || p->beta || nt < 2)) continue;
                if ((!strcmp(vn, "mmany") || !strcmp(vn, "pack")) && !p->weight) continue;
                if (!strcmp(vn, "pack") && !dn.pack) continue;
                /* once per shape: make the primitive; per round: the reorder / pack (timed apart) */
                double t0 = now();
                if (!strcmp(vn, "mm") && !mm[s].prim) mm_make(&mm[s], p, 0, B);
                if (!strcmp(vn, "mmany")) {
                    if (!mmany[s].prim) mm_make(&mmany[s], p, 1, B);
                    t0 = now();
                    const Arg ra[2] = {{ARG_SRC, mmany[s].bsrc}, {ARG_DST, mmany[s].b}};
                    run_prim(mmany[s].reorder, 2, ra);
                }
                /* packed sgemm: C^T = op(B)^T op(A)^T column-major; B is its "A", packed */
                const long cm = p->n, cnn = p->m, ck = p->k, clda = ldb, cldb = lda, cldc = p->n;
                const char *cta = p->tb ? "T" : "N", *ctb = p->ta ? "T" : "N";
                if (!strcmp(vn, "pack")) {
                    if (!packed[s]) {
                        size_t sz = 0;
                        _Bool want = 1;
                        int st = dn.pack_size("A", cta, ctb, &cm, &cnn, &ck, &clda, &cldb, &sz, &want);
                        if (st) die("sgemm_pack_get_size", st);
                        packed[s] = aligned_alloc(64, (sz + 63) / 64 * 64);
                    }
                    t0 = now();
                    int st = dn.pack("A", cta, ctb, &cm, &cnn, &ck, &clda, &cldb, B, packed[s]);
                    if (st) die("sgemm_pack", st);
                }
                double pt = now() - t0;
                if (prep[s][v] < 0 || pt < prep[s][v]) prep[s][v] = pt;
                double ts[1001];
                for (int i = 0; i <= reps; i++) {
                    memcpy(C, C0, cn * 4);
                    double c0 = now();
                    if (!strcmp(vn, "sgemm")) {
                        sgemm1(p, p->m, p->n, A, lda, B, ldb, C, p->n);
                    } else if (!strncmp(vn, "split", 5)) {
                        int byrows = vn[5] == 'm' ? 1 : vn[5] == 'n' ? 0 : rows, len = byrows ? p->m : p->n;
                        if (nt < 2 || len < 64 * nt) {
                            sgemm1(p, p->m, p->n, A, lda, B, ldb, C, p->n);
                        } else {
#pragma omp parallel num_threads(nt)
                            {
                                int t = omp_get_thread_num(), n = omp_get_num_threads();
                                int64_t lo = (int64_t)len * t / n / 16 * 16;
                                int64_t hi = t == n - 1 ? len : (int64_t)len * (t + 1) / n / 16 * 16;
                                part(p, byrows, lo, hi, A, lda, B, ldb, C);
                            }
                        }
                    } else if (!strcmp(vn, "splitk")) {
                        static float *part_c;
                        if (!part_c && !(part_c = malloc(most * 4 * (size_t)nt))) die("malloc", 1);
#pragma omp parallel num_threads(nt)
                        {
                            int t = omp_get_thread_num(), n = omp_get_num_threads();
                            int64_t lo = (int64_t)p->k * t / n / 16 * 16;
                            int64_t hi = t == n - 1 ? p->k : (int64_t)p->k * (t + 1) / n / 16 * 16;
                            float *Ct = t ? part_c + (size_t)t * cn : C; /* thread 0 writes C itself */
                            int st = dn.sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->m, p->n, hi - lo, 1.f,
                                              p->ta ? A + lo * lda : A + lo, lda, p->tb ? B + lo : B + lo * ldb, ldb,
                                              0.f, Ct, p->n);
                            if (st) die("dnnl_sgemm", st);
#pragma omp barrier
#pragma omp for schedule(static)
                            for (size_t i = 0; i < cn; i++)
                                for (int u = 1; u < n; u++) C[i] += part_c[(size_t)u * cn + i];
                        }
                    } else if (chunk) {
                        int len = bycols ? p->n : p->m, nch = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
                        for (int c = 0; c < nch; c++)
                            part(p, !bycols, (int64_t)c * chunk, c == nch - 1 ? len : (int64_t)(c + 1) * chunk, A, lda,
                                 B, ldb, C);
                    } else if (!strcmp(vn, "mm") || !strcmp(vn, "mmany")) {
                        Mm *m = !strcmp(vn, "mm") ? &mm[s] : &mmany[s];
                        const Arg args[3] = {{ARG_SRC, mem_set(m->a, A)},
                                             {ARG_WEIGHTS, m->bbuf ? m->b : mem_set(m->b, B)},
                                             {ARG_DST, mem_set(m->c, C)}};
                        run_prim(m->prim, 3, args);
                    } else if (!strcmp(vn, "pack")) {
                        const char *P = "P";
                        const float beta = (float)p->beta;
                        int st = dn.compute(P, ctb, &cm, &cnn, &ck, packed[s], &clda, A, &cldb, &beta, C, &cldc);
                        if (st) die("sgemm_compute", st);
                    }
                    ts[i] = now() - c0;
                }
                double e = 0, sc = 0;
                for (size_t i = 0; i < cn; i++) {
                    double d = fabs((double)C[i] - R[i]), a = fabs((double)R[i]);
                    e = d > e ? d : e, sc = a > sc ? a : sc;
                }
                if (e > 1e-4 * (sc > 1 ? sc : 1))
                    return fprintf(stderr, "%s %s differs from dnnl_sgemm by %g (max |C| %g)\n", p->name, vn, e, sc), 1;
                qsort(ts + 1, reps, sizeof(double), cmpd);
                med[s][v][r] = ts[1 + reps / 2];
                if (ts[1] < best[s][v]) best[s][v] = ts[1];
            }
        }
    double step[NVAR] = {0}, prepstep[NVAR] = {0}, wstep[NVAR] = {0};
    int all[NVAR];
    for (int v = 0; v < NVAR; v++) all[v] = 1;
    printf("%-14s", "shape");
    for (int v = 0; v < NVAR; v++) printf(" %9s", VARIANTS[v]);
    printf("   (median over rounds of each round's median, ms; GFLOP/s of sgemm)\n");
    for (int s = 0; s < NSHAPES; s++) {
        const Shape *p = &SHAPES[s];
        printf("%-14s", p->name);
        double ref = 0;
        for (int v = 0; v < NVAR; v++) {
            double *m = med[s][v];
            if (m[0] < 0) {
                printf(" %9s", "-");
                all[v] &= 0;
                continue;
            }
            qsort(m, rounds, sizeof(double), cmpd);
            double x = m[rounds / 2];
            if (v == 0) ref = x;
            printf(" %9.3f", 1e3 * x);
            step[v] += x * p->count;
            if (p->weight) wstep[v] += x * p->count;
            if (prep[s][v] > 0 && strcmp(VARIANTS[v], "mm")) prepstep[v] += prep[s][v] * p->count;
        }
        printf("   %6.1f GFLOP/s\n", 2e-9 * p->m * p->n * p->k / ref);
    }
    printf("%-14s", "step");
    for (int v = 0; v < NVAR; v++) {
        if (all[v]) printf(" %9.4f", step[v]);
        else printf(" %9s", "(part)");
    }
    printf("   s\n%-14s", "partial step");
    for (int v = 0; v < NVAR; v++) printf(" %9.4f", step[v]);
    printf("   s (the shapes each variant runs)\n%-14s", "weight shapes");
    for (int v = 0; v < NVAR; v++) printf(" %9.4f", wstep[v]);
    printf("   s (forward and input-gradient shapes only)\n%-14s", "prep per step");
    for (int v = 0; v < NVAR; v++) printf(" %9.4f", prepstep[v]);
    printf("   s (reorder / pack of every weight once, best)\n");
    return 0;
}

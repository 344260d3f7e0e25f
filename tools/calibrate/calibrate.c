/*
 * colossal-calibrate — measures the machine it runs on and writes a cluster
 * file that `colossal-compile --cluster FILE.json` reads (docs/cluster.md,
 * "Calibrating").
 *
 * Run under mpirun/srun, one rank per device, with either colrt backend
 * linked in. It measures, on every rank at once (as training runs):
 *   - GEMM over a grid of shapes and the three float dtypes: per size
 *     2s^3 FLOPs, three shapes (s,s,s), (2s,2s,s/4), (s/4,2s,2s); the
 *     best rate over dtype and size is the dtype's peak, each size's mean
 *     rate over its shapes / peak its efficiency, made monotone by isotonic
 *     regression (pool-adjacent-violators, least squares);
 *   - memory bandwidth (device copy, GELU) in bytes/s, and one rate table
 *     by call size per memory-bound kernel class (element-wise,
 *     transcendental, norm, softmax, loss, reduce, optimizer, rope, silu, rmsnorm), in bytes/s
 *     as the cost model counts them (the file's kernel_gbs), and the
 *     generated program's own attention kernels, CPU or CUDA (forward, dq,
 *     dk/dv: FLOP/s by call FLOPs, attention_tflops); each class is timed
 *     on the program's own kernel where this tool builds it
 *     (calibrate_kernels.h), else on colrt's;
 *   - the host (host offload): its physical memory, copies between a host
 *     arena and the device arena in each direction on a stream (the smaller
 *     rate is the cluster's PCIe figure), and the host AdamW's elements/s
 *     (colrt_host_adamw, every rank at once: a device's share of the node),
 *     and the per-call costs: a small copy queued on a stream, a small host
 *     AdamW call (its OpenMP region's fork and join);
 *   - all-reduce, all-gather, reduce-scatter and all-to-all per mesh axis
 *     (inside a node; across nodes when there are several), 64 bytes up to a
 *     cap, each call as the generated program makes it (on a communication
 *     stream, between event waits, after a busy pass on every rank: the
 *     median cost over rounds): a time table by size per kind (the file's
 *     collective_us), and each kind fitted to latency + bytes/bandwidth by
 *     least squares on relative error, turned into the ring model's α and β
 *     (for axes of other sizes);
 *   - contention: how much slower a GEMM and a memory-bound kernel run while
 *     all-reduces run beside them on a communication stream (the file's
 *     overlap_slowdown, the `overlap` section says how);
 *   - the memory reserve: what the runtime, the communicators and the GEMM
 *     library hold beyond the program's own buffers.
 * Rank 0 checks the result with the compiler's own loader (every number
 * finite, tables monotone) and writes it atomically (temp + rename); it
 * refuses to write a file the loader would refuse. Exit 0, or 1 with a
 * message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "colossal/colrt.h"
#include "shard.h"
#include "calibrate_kernels.h" /* the generated kernels (attention: both; the others: CPU), RoPE's shape */

#ifdef COLOSSAL_CALIBRATE_CUDA
#include <cuda_runtime.h>
#endif

#define KIB 1024.0
#define MIB 1048576.0

typedef struct Opts {
    const char *out;
    const char *device;
    const char *links_from; /* preset or file for the links not measured */
    bool quick;
    double max_bytes;   /* collectives' largest buffer */
    int gemm_max;       /* largest GEMM side s */
    double min_time;    /* seconds each timed point runs at least */
} Opts;

static int R; /* this rank */

static void usage(FILE *f) {
    fputs("usage: mpirun -np N colossal-calibrate [-o FILE.json] [--quick] [--device NAME]\n"
          "                          [--max-bytes BYTES] [--gemm-max S] [--min-time SECONDS]\n"
          "                          [--links-from PRESET|FILE.json]\n"
          "Measures GEMM, memory bandwidth and collectives on this machine (one rank per device)\n"
          "and writes a cluster file for colossal-compile --cluster FILE.json.\n"
          "  -o FILE.json     where to write (default: calibrated.json)\n"
          "  --quick          small sizes, short timings (well under a minute on 2 CPU ranks)\n"
          "  --device NAME    the device name written to the file (default: detected)\n"
          "  --links-from C   take the links this run cannot measure (inter-node on one node;\n"
          "                   both on one rank) from cluster C (a preset or FILE.json)\n"
          "  --max-bytes B    largest collective buffer (default 256 MiB, quick 1 MiB)\n"
          "  --gemm-max S     largest GEMM side (default 4096 on CPU, 16384 on GPU; quick 256)\n"
          "  --min-time T     seconds each point is timed for at least (default 0.2, quick 0.01)\n",
          f);
}

static void fail(const char *fmt, ...) {
    if (R == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("colossal-calibrate: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* An error every rank meets at the same point (options, the run's shape): a
 * message from rank 0 and a clean exit 1 on all ranks, no MPI_Abort. */
static void fail_all(const char *fmt, ...) {
    if (R == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("colossal-calibrate: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    colrt_finalize();
    exit(1);
}

/* ---- timing ---------------------------------------------------------------- */

typedef void (*Work)(void *ctx);

/* Seconds per call of w on the slowest rank: the best of a single timed call
 * and 3 rounds of as many calls as fill min_time / 3 (counted from the
 * slowest rank's single call and broadcast, so every rank calls collectives
 * the same number of times). */
static double time_op(Work w, void *ctx, double min_time) {
    w(ctx); /* warm-up: first-touch, plan selection, communicator set-up */
    colrt_device_sync();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    w(ctx);
    colrt_device_sync();
    double one = MPI_Wtime() - t0, slow;
    MPI_Allreduce(&one, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int calls = slow > 0 ? (int)fmin(1e5, fmax(1, min_time / 3 / slow)) : 1000;
    MPI_Bcast(&calls, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double best = slow;
    for (int round = 0; round < 3; round++) {
        colrt_device_sync();
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < calls; i++) w(ctx);
        colrt_device_sync();
        double dt = (MPI_Wtime() - t0) / calls;
        MPI_Allreduce(&dt, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (slow < best) best = slow;
    }
    return best;
}

/* ---- memory in use ------------------------------------------------------- */

/* Bytes the device holds for this process now: resident set on the CPU
 * backend, used device memory on CUDA. */
static double mem_used(void) {
#ifdef COLOSSAL_CALIBRATE_CUDA
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) fail("cudaMemGetInfo failed");
    return (double)(tot - fr);
#else
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f || fscanf(f, "%ld %ld", &pages, &rss) != 2) fail("cannot read /proc/self/statm");
    fclose(f);
    return (double)rss * (double)sysconf(_SC_PAGESIZE);
#endif
}

static double mem_total(int local) {
#ifdef COLOSSAL_CALIBRATE_CUDA
    (void)local;
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) fail("cudaMemGetInfo failed");
    return (double)tot;
#else
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / local;
#endif
}

static double max_over_ranks(double v) {
    double m;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* ---- GEMM ------------------------------------------------------------------- */

typedef struct GemmCtx {
    colrt_dtype t;
    int64_t M, N, K;
    void *A, *B, *C;
} GemmCtx;

static void gemm_work(void *p) {
    GemmCtx *g = p;
    /* row-major C[M,N] = A[M,K] B[K,N], no transposes */
    colrt_gemm(NULL, g->t, 0, 0, g->M, g->N, g->K, 1.0f, g->A, g->K, 0, g->B, g->N, 0, 0.0f, g->C,
               g->N, 0, 1);
}

/* isotonic (non-decreasing) least-squares fit of y, in place: pool adjacent
 * violators, equal weights */
static void isotonic(double *y, int n) {
    double val[64], wt[64];
    int len[64], m = 0;
    for (int i = 0; i < n; i++) {
        val[m] = y[i], wt[m] = 1, len[m] = 1, m++;
        while (m > 1 && val[m - 2] > val[m - 1]) {
            double w = wt[m - 2] + wt[m - 1];
            val[m - 2] = (val[m - 2] * wt[m - 2] + val[m - 1] * wt[m - 1]) / w;
            wt[m - 2] = w, len[m - 2] += len[m - 1], m--;
        }
    }
    for (int b = 0, i = 0; b < m; b++)
        for (int j = 0; j < len[b]; j++) y[i++] = val[b];
}

static const colrt_dtype GEMM_DT[3] = {COLRT_F32, COLRT_BF16, COLRT_F16};
static const DType IR_DT[3] = {DT_F32, DT_BF16, DT_F16};

static void bench_gemm(const Opts *o, ShardCluster *cl, cJSON *cal, double *workspace) {
    int sizes[SHARD_EFF_POINTS], ns = 0;
    for (int s = 32; s <= o->gemm_max && ns < SHARD_EFF_POINTS; s *= 2) sizes[ns++] = s;
    if (ns < 2) fail("--gemm-max %d: need at least 64 (two sizes)", o->gemm_max);
    int64_t smax = sizes[ns - 1];
    size_t cap = (size_t)(2 * smax) * (size_t)(2 * smax) * 4; /* the largest operand, f32 */
    colrt_arena a = colrt_arena_create(3 * cap);
    void *A = a.base, *B = (char *)a.base + cap, *C = (char *)a.base + 2 * cap;
    /* real values: small integers, exact in every dtype */
    float *h = malloc(cap);
    if (!h) fail("out of host memory (%zu bytes)", cap);
    for (size_t i = 0; i < cap / 4; i++) h[i] = (float)(i % 7) * 0.125f;
    colrt_memcpy(A, h, cap, COLRT_H2D, NULL);
    colrt_memcpy(B, h, cap, COLRT_H2D, NULL);
    colrt_memcpy(C, h, cap, COLRT_H2D, NULL);
    free(h);
    colrt_device_sync();
    double before = mem_used(); /* every buffer touched: growth from here is the library's */
    cJSON *gj = cJSON_AddObjectToObject(cal, "gemm");
    for (int d = 0; d < 3; d++) {
        double rate[SHARD_EFF_POINTS], best = 0;
        cJSON *pts = cJSON_AddArrayToObject(gj, ir_dtype_name(IR_DT[d]));
        for (int i = 0; i < ns; i++) {
            int64_t s = sizes[i];
            int64_t shp[3][3] = {{s, s, s}, {2 * s, 2 * s, s / 4}, {s / 4, 2 * s, 2 * s}};
            double sum = 0;
            for (int k = 0; k < 3; k++) {
                GemmCtx g = {GEMM_DT[d], shp[k][0], shp[k][1], shp[k][2], A, B, C};
                double t = time_op(gemm_work, &g, o->min_time);
                double r = 2.0 * (double)(g.M * g.N * g.K) / t;
                sum += r;
                if (r > best) best = r;
                cJSON *p = cJSON_CreateObject();
                cJSON_AddNumberToObject(p, "m", (double)g.M);
                cJSON_AddNumberToObject(p, "n", (double)g.N);
                cJSON_AddNumberToObject(p, "k", (double)g.K);
                cJSON_AddNumberToObject(p, "seconds", t);
                cJSON_AddNumberToObject(p, "tflops", r / 1e12);
                cJSON_AddItemToArray(pts, p);
            }
            rate[i] = sum / 3;
        }
        ShardEffTable *t = &cl->gemm[IR_DT[d]];
        cl->peak_flops[IR_DT[d]] = best;
        t->n = ns;
        for (int i = 0; i < ns; i++) {
            t->flops[i] = 2.0 * (double)sizes[i] * sizes[i] * sizes[i];
            t->eff[i] = rate[i] / best;
        }
        isotonic(t->eff, ns);
        if (R == 0)
            printf("gemm %-4s peak %.3f TFLOP/s; efficiency %.3f at %.2g FLOPs .. %.3f at %.2g\n",
                   ir_dtype_name(IR_DT[d]), best / 1e12, t->eff[0], t->flops[0], t->eff[ns - 1],
                   t->flops[ns - 1]);
    }
    cl->gemm[DT_I32] = cl->gemm[DT_F32];
    cl->peak_flops[DT_I32] = cl->peak_flops[DT_F32];
    *workspace = max_over_ranks(fmax(0, mem_used() - before));
    colrt_arena_destroy(&a);
}

/* ---- memory-bound kernels ------------------------------------------------ */

typedef struct MemCtx {
    int kind; /* 0 copy, 1 gelu */
    void *x, *y;
    size_t bytes;
} MemCtx;

static void mem_work(void *p) {
    MemCtx *m = p;
    if (m->kind == 0) colrt_memcpy(m->y, m->x, m->bytes, COLRT_D2D, NULL);
    else colrt_gelu_fwd(NULL, COLRT_F32, m->x, m->y, (int64_t)(m->bytes / 4));
}

static void bench_memory(const Opts *o, ShardCluster *cl, cJSON *cal) {
    size_t bytes = o->quick ? (size_t)32 << 20 : (size_t)256 << 20;
    colrt_arena a = colrt_arena_create(2 * bytes);
    colrt_memset0(a.base, 2 * bytes, NULL);
    static const char *names[] = {"copy", "gelu"};
    cJSON *mj = cJSON_AddObjectToObject(cal, "memory_gbs");
    double best = 0;
    for (int k = 0; k < 2; k++) {
        MemCtx m = {k, a.base, (char *)a.base + bytes, bytes};
        double t = time_op(mem_work, &m, o->min_time);
        double bw = 2.0 * (double)bytes / t; /* read x, write y */
        cJSON_AddNumberToObject(mj, names[k], bw / 1e9);
        if (bw > best) best = bw;
        if (R == 0) printf("memory %-4s %.2f GB/s (%zu MiB buffers)\n", names[k], bw / 1e9, bytes >> 20);
    }
    cl->mem_bw = best;
    colrt_arena_destroy(&a);
}

/* ---- memory-bound kernel classes ------------------------------------------ */

/* One rate table per kernel class (shard.h SHARD_KERNELS): a kernel of that
 * class on f32 operands of 2^6 (kern_min_log2), 2^9, ..., 2^21 and (not
 * --quick) 2^24 elements (256 bytes to 64 MiB a tensor: a program's biases and
 * norm weights are a few hundred bytes, and each of their calls pays the
 * call's fixed cost; on a CPU a small call runs in cache, a large one at DRAM
 * bandwidth), in
 * bytes read and written per second, counted as the cost model counts a
 * node's bytes: every operand and result (cost.c cost_op), the fused loss
 * with its gradient (as the generated program runs it: it calls
 * colrt_cross_entropy). On the CPU the classes the program runs its own
 * kernels for are timed on those kernels (calibrate_kernels.h, written by the
 * code generator at build time): its add (elementwise), GELU (transcendental),
 * layer norm, RMS norm, sum of squares, RoPE (a position's angles, pow, cos and sin a
 * pair, shared by CAL_ROPE_ROWS rows: calibrate_kernels.h), SiLU and AdamW
 * update; the softmax is
 * colrt's, the loss colrt's as the program calls it. On CUDA likewise the
 * CUDA program's own add, GELU, SiLU, layer and RMS norm and RoPE
 * (calibrate_kernels_cuda.cu: a thread per element or pair, a block per row);
 * its sum of squares and AdamW take other paths (a two-pass reduction, a
 * grouped update), timed on colrt's. Rows of the norm and softmax are 256 wide (one row of
 * all the elements below 256), the loss's vocabulary 4096 (at least one row). */
enum { K_COLS = 256, K_VOCAB = 4096, K_MIN_LOG2 = 6, K_COLRT_MIN_LOG2 = 12, K_MAX_LOG2 = 24 };

/* The smallest size a class is timed at: 2^6 elements where the kernel is the
 * program's own (its small calls' fixed cost is the program's); 2^12 where it
 * is colrt's, whose fixed cost on a tiny call (an OpenMP region, a dtype
 * switch) is not the program's kernel's: colrt's sum of squares of 64
 * elements took 0.5 us, pricing the tiny GPT-2's sums ~5x above their
 * measured time (COLRT_PROFILE=1, 2026-12-04, before the program's own sum
 * of squares was timed here); the table is clamped below its first point. */
static int kern_min_log2(int kind) {
#ifdef COLOSSAL_CALIBRATE_CUDA /* the sum of squares and AdamW are colrt's there */
    if (kind == SHARD_K_REDUCE || kind == SHARD_K_OPTIMIZER) return K_COLRT_MIN_LOG2;
#endif
    return kind == SHARD_K_SOFTMAX || kind == SHARD_K_LOSS ? K_COLRT_MIN_LOG2 : K_MIN_LOG2;
}
_Static_assert((int)K_COLS == (int)CAL_NORM_COLS, "the generated norm's rows are calibrate's");

static int64_t kern_cols(int64_t n) { return n < K_COLS ? n : K_COLS; }

typedef struct KernCtx {
    int kind; /* ShardKernel */
    int64_t n; /* elements of each tensor */
    float *a, *b, *c, *d, *w, *bias, *mean, *rstd, *acc;
    int32_t *tgt;
    int64_t step;
    const CalElementwise *elem; /* the program's kernels over n elements */
} KernCtx;

static int64_t loss_rows(int64_t n) { return n / K_VOCAB > 0 ? n / K_VOCAB : 1; }

static void kern_work(void *p) {
    KernCtx *k = p;
    const int64_t n = k->n;
    switch (k->kind) {
    case SHARD_K_ELEMWISE: k->elem->add(NULL, k->a, k->c, k->b); break;
    case SHARD_K_TRANSCENDENTAL: k->elem->gelu(NULL, k->a, k->b); break;
    case SHARD_K_SILU: k->elem->silu(NULL, k->a, k->b); break;
    case SHARD_K_NORM: k->elem->norm(NULL, k->a, k->w, k->bias, k->b); break;
    case SHARD_K_RMSNORM: k->elem->rmsnorm(NULL, k->a, k->w, k->b); break;
    case SHARD_K_SOFTMAX: colrt_softmax_fwd(NULL, COLRT_F32, k->a, k->b, n / kern_cols(n), kern_cols(n), 0, 1.0f, 0); break;
    case SHARD_K_LOSS:
        colrt_memset0(k->acc, sizeof(float), NULL);
        colrt_cross_entropy(NULL, COLRT_F32, k->a, k->tgt, k->acc, NULL, k->b, loss_rows(n), K_VOCAB,
                            1.0f / (float)loss_rows(n));
        break;
#ifdef COLOSSAL_CALIBRATE_CUDA
    case SHARD_K_REDUCE: colrt_sum_squares(NULL, COLRT_F32, k->a, n, k->acc); break;
#else
    case SHARD_K_REDUCE: k->elem->sumsq(NULL, k->a, k->acc, k->d); break;
#endif
    case SHARD_K_ROPE: k->elem->rope(NULL, k->a, k->b); break;
    default:
#ifdef COLOSSAL_CALIBRATE_CUDA
        colrt_adamw(NULL, COLRT_F32, k->a, k->b, k->c, k->d, NULL, n, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, ++k->step, 1.0f);
#else /* in place, as the lowering aliases the results over the leaves; lr, step, coef in acc[1..3] */
        k->elem->adamw(NULL, k->a, k->b, k->c, k->d, k->acc + 1, k->acc + 2, k->acc + 3, k->a, k->c, k->d);
#endif
        break;
    }
}

/* Bytes the cost model counts for one call of kern_work on n elements. */
static double kern_bytes(int kind, int64_t n64) {
    const double n = (double)n64, f = 4;
    switch (kind) {
    case SHARD_K_ELEMWISE: return 3 * n * f;                              /* an add: a, b, the sum */
    case SHARD_K_TRANSCENDENTAL: return 2 * n * f;                        /* x, y */
    case SHARD_K_NORM: return 2 * n * f + 2.0 * (double)kern_cols(n64) * f; /* x, y, weight, bias */
    case SHARD_K_RMSNORM: return 2 * n * f + (double)kern_cols(n64) * f;  /* x, y, weight */
    case SHARD_K_SOFTMAX: return 2 * n * f;                               /* x, y */
    case SHARD_K_ROPE: return 2 * n * f;                                  /* x, y */
    case SHARD_K_SILU: return 2 * n * f;                                  /* x, y */
    case SHARD_K_LOSS: {
        double logits = (double)loss_rows(n64) * K_VOCAB;
        return 2 * logits * f + (double)loss_rows(n64) * 4 + f;           /* logits, their gradient, targets, loss */
    }
    case SHARD_K_REDUCE: return n * f + f;                                /* x, the sum */
    default: return 7 * n * f;                                            /* AdamW: p, g, m, v read; p, m, v written */
    }
}

static void bench_kernels(const Opts *o, ShardCluster *cl, cJSON *cal) {
    int top = o->quick ? 21 : K_MAX_LOG2;
    const int64_t nmax = (int64_t)1 << top;
    const size_t fb = (size_t)nmax * sizeof(float), rows = (size_t)(nmax / K_COLS);
    colrt_arena a = colrt_arena_create(4 * fb + 2 * K_COLS * sizeof(float) + 2 * rows * sizeof(float) + 256 +
                                       (size_t)loss_rows(nmax) * sizeof(int32_t));
    char *base = a.base;
    KernCtx k = {0};
    k.a = (float *)base, k.b = (float *)(base + fb), k.c = (float *)(base + 2 * fb), k.d = (float *)(base + 3 * fb);
    k.w = (float *)(base + 4 * fb), k.bias = k.w + K_COLS, k.mean = k.bias + K_COLS, k.rstd = k.mean + rows;
    k.acc = k.rstd + rows;
    k.tgt = (int32_t *)(k.acc + 64);
    /* real values: x in [-1, 1), weight 1, bias 0, targets in range, v = 0 */
    float *h = malloc(fb);
    if (!h) fail("out of host memory (%zu bytes)", fb);
    for (int64_t i = 0; i < nmax; i++) h[i] = (float)(i % 17) / 8.5f - 1.0f;
    colrt_memcpy(k.a, h, fb, COLRT_H2D, NULL);
    colrt_memcpy(k.b, h, fb, COLRT_H2D, NULL);
    colrt_memcpy(k.c, h, fb, COLRT_H2D, NULL); /* the add's second operand (and AdamW's m) */
    for (int i = 0; i < K_COLS; i++) h[i] = 1.0f;
    colrt_memcpy(k.w, h, K_COLS * sizeof(float), COLRT_H2D, NULL);
    int32_t *t = (int32_t *)h;
    for (int64_t i = 0; i < loss_rows(nmax); i++) t[i] = (int32_t)((i * 37) % K_VOCAB);
    colrt_memcpy(k.tgt, t, (size_t)loss_rows(nmax) * sizeof(int32_t), COLRT_H2D, NULL);
    const float lr_step_coef[3] = {1e-4f, 1.0f, 1.0f}; /* the generated AdamW's scalar operands */
    colrt_memcpy(k.acc + 1, lr_step_coef, sizeof lr_step_coef, COLRT_H2D, NULL);
    free(h);
    colrt_device_sync();
    cJSON *kj = cJSON_AddObjectToObject(cal, "kernels");
    cJSON_AddStringToObject(kj, "kernels",
                            "elementwise: the generated program's add; transcendental: its GELU; norm: its layer "
                            "norm, rows of 256; rope: its RoPE, 16 rows a position, heads of 16; silu: its SiLU; "
                            "rmsnorm: its RMS norm, rows of 256; "
#ifdef COLOSSAL_CALIBRATE_CUDA
                            "(those: the CUDA program's kernels); reduce: colrt_sum_squares; optimizer: colrt_adamw; "
#else
                            "reduce: its sum of squares; optimizer: its AdamW (generated); "
#endif
                            "softmax: colrt_softmax_fwd, rows of 256; loss: colrt_cross_entropy, vocabulary "
                            "4096, writing its gradient (all f32)");
    for (int c = 0; c < SHARD_K__COUNT; c++) {
        k.kind = c;
        ShardRateTable *rt = &cl->kernel[c];
        rt->n = 0;
        for (int l = kern_min_log2(c); l <= top; l += 3) {
            k.n = (int64_t)1 << l;
            k.elem = NULL;
            for (int e = 0; e < cal_elementwise_n; e++)
                if (cal_elementwise[e].n == k.n) k.elem = &cal_elementwise[e];
            if (!k.elem) fail("internal: no generated element-wise kernel of %lld elements", (long long)k.n);
            double s = time_op(kern_work, &k, o->min_time);
            double by = kern_bytes(c, k.n);
            if (rt->n > 0 && !(by > rt->size[rt->n - 1])) continue; /* the loss's smallest sizes are one row */
            rt->size[rt->n] = by;
            rt->rate[rt->n] = by / s;
            rt->n++;
        }
        if (R == 0) {
            printf("kernel %-14s", shard_kernel_name((ShardKernel)c));
            for (int i = 0; i < rt->n; i++) printf(" %.2f", rt->rate[i] / 1e9);
            printf(" GB/s at %.3g .. %.3g bytes\n", rt->size[0], rt->size[rt->n - 1]);
        }
    }
    colrt_arena_destroy(&a);
}

/* Attention: the generated CPU program's own kernels (attention,
 * attention_dq, attention_dkv: compiler/codegen/cg_attention_c.c, written at
 * build time by gen_kernels.c as the code generator writes them), each timed
 * at the ladder's shapes (calibrate_kernels.h: causal, f32, from the
 * validation's tiny programs, T = 32 Dh = 16, to GPT-2 124M's T = 64 Dh = 64
 * and longer sequences), FLOPs as the IR counts each node (rule_attention: 4 B
 * H Dh x the pairs the mask keeps; dq 1.5x that, dk/dv 2x): one FLOP/s table
 * by call FLOPs per kernel. On CUDA likewise the CUDA program's own kernels
 * (the passes of cg_attention.c and the launcher the program calls, written by
 * gen_kernels --cuda into calibrate_kernels_cuda.cu) at a GPU ladder, GPT-2
 * 124M's T = 1024 and T = 2048, 4096 at Dh = 128 among its shapes. */
typedef struct AttnCtx {
    const CalAttention *at;
    int kind;
    float *q, *k, *v, *dy, *o, *o2, *w;
} AttnCtx;

static void attn_work(void *p) {
    AttnCtx *c = p;
    if (c->kind == 0) c->at->fwd(NULL, c->q, c->k, c->v, c->o);
    else if (c->kind == 1) c->at->dq(NULL, c->q, c->k, c->v, c->dy, c->o, c->w);
    else c->at->dkv(NULL, c->q, c->k, c->v, c->dy, c->o, c->o2, c->w);
}

/* FLOPs of one call as the IR counts the node (ir/ops.c rule_attention,
 * ir/ops_train.c rule_attention_dq / _dkv). */
static double attn_flops(const CalAttention *at, int kind) {
    double pairs = (double)at->T * (double)(at->T + 1) / 2; /* causal, S = T */
    double f = 4.0 * (double)(at->B * at->H * at->Dh) * pairs;
    return kind == SHARD_ATT_DQ ? IR_ATTENTION_DQ_FLOPS * f : kind == SHARD_ATT_DKV ? IR_ATTENTION_DKV_FLOPS * f : f;
}

static void bench_attention(const Opts *o, ShardCluster *cl, cJSON *cal) {
    cJSON *aj = cJSON_AddObjectToObject(cal, "attention");
    int npts = o->quick ? cal_attention_quick : cal_attention_n;
    if (npts > SHARD_RATE_POINTS) fail("internal: %d attention shapes, more than a table holds", npts);
    size_t big = 0, work = 0; /* the largest operand and workspace */
    for (int i = 0; i < npts; i++) {
        const CalAttention *at = &cal_attention[i];
        size_t n = (size_t)(at->B * at->T * at->H * at->Dh) * sizeof(float);
        if (n > big) big = n;
        if ((size_t)at->work_bytes > work) work = (size_t)at->work_bytes;
    }
    colrt_arena a = colrt_arena_create(7 * big + work);
    float *h = malloc(big);
    if (!h) fail("out of host memory (%zu bytes)", big);
    for (size_t i = 0; i < big / sizeof(float); i++) h[i] = (float)(i % 13) / 6.5f - 1.0f;
    AttnCtx c = {0};
    float **bufs[7] = {&c.q, &c.k, &c.v, &c.dy, &c.o, &c.o2, &c.w};
    for (int t = 0; t < 7; t++) *bufs[t] = (float *)((char *)a.base + (size_t)t * big);
    for (int t = 0; t < 4; t++) colrt_memcpy(*bufs[t], h, big, COLRT_H2D, NULL);
    free(h);
    colrt_device_sync();
    cJSON_AddStringToObject(aj, "kernel",
#ifdef COLOSSAL_CALIBRATE_CUDA
                            "the generated CUDA program's attention, attention_dq and attention_dkv "
                            "(cg_attention.c: its passes and launchers), f32, causal, S = T, G = H"
#else
                            "the generated CPU program's attention, attention_dq and attention_dkv "
                            "(cg_attention_c.c), f32, causal, S = T, G = H"
#endif
    );
    cJSON *pts = cJSON_AddArrayToObject(aj, "points");
    for (int k = 0; k < SHARD_ATT__COUNT; k++) cl->attention[k].n = npts;
    for (int i = 0; i < npts; i++) {
        c.at = &cal_attention[i];
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "B", (double)c.at->B);
        cJSON_AddNumberToObject(p, "T", (double)c.at->T);
        cJSON_AddNumberToObject(p, "H", (double)c.at->H);
        cJSON_AddNumberToObject(p, "Dh", (double)c.at->Dh);
        if (R == 0) printf("attention B=%lld T=%lld H=%lld Dh=%lld:", (long long)c.at->B, (long long)c.at->T,
                           (long long)c.at->H, (long long)c.at->Dh);
        for (int k = 0; k < SHARD_ATT__COUNT; k++) {
            c.kind = k;
            double s = time_op(attn_work, &c, o->min_time), f = attn_flops(c.at, k);
            ShardRateTable *t = &cl->attention[k];
            t->size[i] = f, t->rate[i] = f / s;
            char key[32];
            snprintf(key, sizeof key, "%s_seconds", shard_attention_name((ShardAttention)k));
            cJSON_AddNumberToObject(p, key, s);
            if (R == 0) printf(" %s %.2f GFLOP/s", shard_attention_name((ShardAttention)k), f / s / 1e9);
        }
        if (R == 0) printf(" (%.3g FLOPs forward)\n", attn_flops(c.at, 0));
        cJSON_AddItemToArray(pts, p);
    }
    colrt_arena_destroy(&a);
}

/* ---- the host (offload) ---------------------------------------------------- */

typedef struct HostCtx {
    int kind; /* 0 device-to-host, 1 host-to-device, 2 host AdamW, 3 small copies down, 4 small AdamW calls */
    char *dev, *host;
    size_t bytes;
    colrt_stream *s;
    int64_t step;
} HostCtx;

/* The per-call figures: HOST_CALLS calls of HOST_SMALL bytes (copies down, queued back to
 * back on the stream as the program queues an update's gradient and scalars, then one
 * wait) or of HOST_SMALL / 16 elements (host AdamW, one after another as the program's
 * updates run); a call's time is their time over HOST_CALLS, its bytes or elements at
 * the measured rates taken off. */
#define HOST_CALLS 64
#define HOST_SMALL 64

static void host_work(void *p) {
    HostCtx *h = p;
    if (h->kind == 2 || h->kind == 4) {
        int64_t n = (int64_t)((h->kind == 2 ? h->bytes : HOST_SMALL) / 16); /* p, g, m, v in the host buffer */
        float *f = (float *)h->host;
        for (int k = 0; k < (h->kind == 2 ? 1 : HOST_CALLS); k++)
            colrt_host_adamw(f, f + n, f + 2 * n, f + 3 * n, n, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, ++h->step, 1.f);
        return;
    }
    if (h->kind == 3)
        for (int k = 0; k < HOST_CALLS; k++)
            colrt_memcpy_async(h->host + (size_t)k * HOST_SMALL, h->dev + (size_t)k * HOST_SMALL, HOST_SMALL, COLRT_D2H, h->s);
    else if (h->kind == 0) colrt_memcpy_async(h->host, h->dev, h->bytes, COLRT_D2H, h->s);
    else colrt_memcpy_async(h->dev, h->host, h->bytes, COLRT_H2D, h->s);
    colrt_stream_sync(h->s);
}

/* Physical memory of the node (on the CPU backend the same memory its ranks'
 * "device" arenas use: a plan's device and host bytes then share it). */
static void bench_host(const Opts *o, ShardCluster *cl, cJSON *cal) {
    size_t bytes = o->quick ? (size_t)16 << 20 : (size_t)256 << 20;
    colrt_arena d = colrt_arena_create(bytes), h = colrt_host_arena_create(bytes);
    HostCtx c = {0, d.base, h.base, bytes, colrt_stream_create(), 0};
    cJSON *hj = cJSON_AddObjectToObject(cal, "host_offload");
    double rate[3], lat[2];
    static const char *names[3] = {"d2h_gbs", "h2d_gbs", "adamw_gelems"};
    for (int k = 0; k < 3; k++) {
        c.kind = k;
        double t = time_op(host_work, &c, o->min_time);
        rate[k] = k < 2 ? (double)bytes / t : (double)(bytes / 16) / t;
        cJSON_AddNumberToObject(hj, names[k], rate[k] / 1e9);
    }
    static const char *lnames[2] = {"copy_latency_us", "call_latency_us"};
    for (int k = 0; k < 2; k++) { /* the per-call figures (HOST_CALLS above) */
        c.kind = 3 + k;
        double t = time_op(host_work, &c, o->min_time) / HOST_CALLS;
        lat[k] = fmax(0, t - (k == 0 ? HOST_SMALL / rate[0] : HOST_SMALL / 16 / rate[2]));
        cJSON_AddNumberToObject(hj, lnames[k], lat[k] * 1e6);
    }
    cJSON_AddStringToObject(hj, "latency_how", "copy: 64 copies of 64 B down queued on a stream, then one wait; "
                                               "call: 64 colrt_host_adamw calls of 4 elements; per call, less its "
                                               "bytes or elements at the rates above");
    cl->pcie_bw = fmin(rate[0], rate[1]);
    cl->host_adamw_rate = rate[2];
    cl->host_copy_lat = lat[0];
    cl->host_call_lat = lat[1];
    cl->host_mem_bytes = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (R == 0)
        printf("host: %.1f GB, copies %.2f GB/s down, %.2f GB/s up (%zu MiB), AdamW %.3g elements/s per rank; "
               "per call: a copy %.2f us, a host AdamW %.2f us\n",
               cl->host_mem_bytes / 1e9, rate[0] / 1e9, rate[1] / 1e9, bytes >> 20, rate[2], lat[0] * 1e6, lat[1] * 1e6);
    colrt_stream_destroy(c.s);
    colrt_host_arena_destroy(&h);
    colrt_arena_destroy(&d);
}

/* ---- collectives ---------------------------------------------------------- */

enum { AR, AG, RS, A2A, NKIND };
static const char *KIND[NKIND] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};

/* the cost model's kind (ShardColl, the file's table order) of each measured kind */
static const ShardColl SHARD_KIND[NKIND] = {COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL};

typedef struct CollCtx {
    colrt_mesh *m;
    int axis, kind, n;
    size_t count; /* f32 elements of the whole buffer: all-gather's result, the others' input */
    void *s, *r;
    colrt_stream *st;          /* the communication stream the call is queued on */
    colrt_event *ready, *done; /* the generated program's pair around it */
} CollCtx;

/* One collective as the generated program issues one. On a stream (st; cg_*:
 * a gradient bucket's sync): the stream waits for the caller's work (event),
 * the call is queued on the communication stream (its worker thread), and
 * the caller waits for it (event): the hand-off to the worker and back is in
 * the time. st NULL: on the caller's thread (ZeRO's collectives, the
 * reshardings, the loss's sum). */
static void coll_work(void *p) {
    CollCtx *c = p;
    size_t per = c->count / (size_t)c->n;
    if (c->st) {
        colrt_event_record(c->ready, NULL);
        colrt_stream_wait(c->st, c->ready);
    }
    switch (c->kind) {
    case AR: colrt_all_reduce(c->m, c->axis, c->s, c->r, c->count, COLRT_F32, COLRT_SUM, c->st); break;
    case AG: colrt_all_gather(c->m, c->axis, c->s, c->r, per, COLRT_F32, c->st); break;
    case RS: colrt_reduce_scatter(c->m, c->axis, c->s, c->r, per, COLRT_F32, COLRT_SUM, c->st); break;
    default: colrt_all_to_all(c->m, c->axis, c->s, c->r, per, COLRT_F32, c->st); break;
    }
    if (c->st) {
        colrt_event_record(c->done, c->st);
        colrt_stream_wait(NULL, c->done);
    }
}

/* The ranks' own work between two collectives, as a program's kernels keep
 * both ranks busy: a fixed element-wise pass over a private 16 KiB buffer,
 * the same on every rank (~10-30 us on a CPU core). The collective after it
 * finds its worker asleep and its peer arriving as a program's does. */
enum { BUSY_ELEMS = 4096, BUSY_PASSES = 8, COLL_ROUNDS = 5 };
static float busy_buf[BUSY_ELEMS];
static volatile float busy_sink;
static void busy(void) {
    float acc = 0;
    for (int r = 0; r < BUSY_PASSES; r++)
        for (int i = 0; i < BUSY_ELEMS; i++) busy_buf[i] = busy_buf[i] * 0.999f + 1.0f, acc += busy_buf[i];
    busy_sink = acc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seconds a collective costs as a program runs it: per call, the median over
 * COLL_ROUNDS rounds of (busy work, then the collective as coll_work issues
 * it) less the median of rounds of the busy work alone, the two kinds of
 * round alternating; each round's time is the slowest rank's. The median, not
 * the best: a program pays the typical call, scheduler and peer included. */
static double time_coll(CollCtx *c, double min_time) {
    coll_work(c); /* warm-up: the stream's communicator, first touch */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    busy();
    coll_work(c);
    double one = MPI_Wtime() - t0, slow;
    MPI_Allreduce(&one, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int calls = slow > 0 ? (int)fmin(1e5, fmax(1, min_time / (2 * COLL_ROUNDS) / slow)) : 1000;
    MPI_Bcast(&calls, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double with[COLL_ROUNDS], alone[COLL_ROUNDS];
    for (int round = 0; round < 2 * COLL_ROUNDS; round++) {
        bool coll = round % 2;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < calls; i++) {
            busy();
            if (coll) coll_work(c);
        }
        double dt = (MPI_Wtime() - t0) / calls;
        MPI_Allreduce(&dt, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        (coll ? with : alone)[round / 2] = slow;
    }
    qsort(with, COLL_ROUNDS, sizeof *with, cmp_double);
    qsort(alone, COLL_ROUNDS, sizeof *alone, cmp_double);
    /* a difference lost in the noise is floored at 0.1 us (the isotonic fit
     * after lifts it to the smaller sizes' time) */
    return fmax(with[COLL_ROUNDS / 2] - alone[COLL_ROUNDS / 2], 1e-7);
}

/* Fits t = a + b x minimizing the squared relative error sum ((a + b x - t) / t)^2,
 * with a >= 0 (refit through the origin when the free fit's a is negative).
 * Returns the largest relative residual. */
static double fit_line(const double *x, const double *t, int n, double *a, double *b) {
    double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
    for (int i = 0; i < n; i++) {
        double w = 1 / (t[i] * t[i]);
        s00 += w, s01 += w * x[i], s11 += w * x[i] * x[i];
        r0 += w * t[i], r1 += w * x[i] * t[i];
    }
    double det = s00 * s11 - s01 * s01;
    *a = (r0 * s11 - r1 * s01) / det;
    *b = (s00 * r1 - s01 * r0) / det;
    if (!(*a >= 0)) *a = 0, *b = r1 / s11;
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(*a + *b * x[i] - t[i]) / t[i]);
    return worst;
}

/* Ring model (docs/sharding.md): time = steps(n) α + bytes_factor(n) x β,
 * where x is each rank's local bytes going in (the shard for all-gather). */
static void ring_factors(int kind, int n, double *steps, double *bytes) {
    double f = (double)(n - 1) / n;
    switch (kind) {
    case AR: *steps = 2.0 * (n - 1), *bytes = 2 * f; break;
    case AG: *steps = n - 1, *bytes = n - 1; break;
    default: *steps = n - 1, *bytes = f; break;
    }
}

/* The hand-off's sizes: each kind's first HANDOFF_POINTS sizes (64 B to
 * 1 KiB), where a call's time is mostly its fixed part. */
enum { HANDOFF_POINTS = 3 };

/* Measures every kind over one axis, from 64-byte buffers (a program's
 * scalars and biases: the loss, the norm's sums) by factors of 4 up to
 * --max-bytes, each as a program runs it (time_coll); each kind's times, made
 * non-decreasing (isotonic least squares), are the link's table (`lt`,
 * shard_coll_time's price for an axis of this size); α and β of the link (the
 * ring model's, for axes of other sizes) are the geometric means over the
 * kinds of each kind's fit. The link's hand-off (lt->handoff, what queuing a
 * call on the stream adds to it on the caller's thread): the median over
 * kinds and the first HANDOFF_POINTS sizes of (the stream's time less the
 * same call's on the caller's thread, by the same method), at least 0. */
static void bench_axis(const Opts *o, colrt_mesh *m, int axis, const char *label, double *lat,
                       double *bw, double *grew, ShardCollLink *lt, cJSON *cj) {
    int n = colrt_mesh_size(m, axis);
    size_t cap = (size_t)o->max_bytes;
    colrt_arena a = colrt_arena_create(2 * cap);
    colrt_memset0(a.base, 2 * cap, NULL);
    void *s = a.base, *r = (char *)a.base + cap;
    colrt_device_sync();
    double before = mem_used();
    cJSON *ax = cJSON_AddObjectToObject(cj, label);
    cJSON_AddNumberToObject(ax, "ranks", n);
    cJSON_AddStringToObject(ax, "method",
                            "each call queued on a communication stream between event waits, after a fixed "
                            "busy pass on every rank; median of 5 rounds less the busy pass's median");
    colrt_stream *st = colrt_stream_create();
    colrt_event *ready = colrt_event_create(), *done = colrt_event_create();
    memset(lt, 0, sizeof *lt);
    lt->ranks = n;
    double log_a = 0, log_b = 0, diff[NKIND * HANDOFF_POINTS];
    int nd = 0;
    cJSON *caller = cJSON_CreateObject();
    for (int k = 0; k < NKIND; k++) {
        double x[SHARD_COLL_POINTS], t[SHARD_COLL_POINTS];
        int np = 0;
        cJSON *pts = cJSON_CreateArray(), *cpts = cJSON_AddArrayToObject(caller, KIND[k]);
        for (double bytes = 64; bytes <= cap && np < SHARD_COLL_POINTS; bytes *= 4) {
            size_t count = (size_t)(bytes / 4) / (size_t)n * (size_t)n;
            if (count == 0) continue;
            CollCtx c = {m, axis, k, n, count, s, r, st, ready, done};
            /* each rank's bytes going in: the shard for all-gather */
            x[np] = (double)(k == AG ? count / (size_t)n : count) * 4;
            t[np] = time_coll(&c, o->min_time);
            cJSON *p = cJSON_CreateArray();
            cJSON_AddItemToArray(p, cJSON_CreateNumber(x[np]));
            cJSON_AddItemToArray(p, cJSON_CreateNumber(t[np]));
            cJSON_AddItemToArray(pts, p);
            if (np < HANDOFF_POINTS) { /* the same call on the caller's thread */
                CollCtx cc = c;
                cc.st = NULL;
                double tc = time_coll(&cc, o->min_time);
                diff[nd++] = t[np] - tc;
                cJSON *q = cJSON_CreateArray();
                cJSON_AddItemToArray(q, cJSON_CreateNumber(x[np]));
                cJSON_AddItemToArray(q, cJSON_CreateNumber(tc));
                cJSON_AddItemToArray(cpts, q);
            }
            np++;
        }
        if (np < 2) fail("--max-bytes %.0f: need at least two collective sizes (256 bytes or more)", o->max_bytes);
        ShardCollTable *tt = &lt->kind[SHARD_KIND[k]];
        tt->n = np;
        for (int i = 0; i < np; i++) tt->bytes[i] = x[i], tt->seconds[i] = t[i];
        isotonic(tt->seconds, np);
        double fa, fb;
        /* the fit on the table's (monotone) times; where it gives no
         * positive bandwidth (times flat over sizes: a loaded machine), the
         * secant from the first point to the last, and if that is flat too
         * the last point's time all as bandwidth (the table prices this axis
         * size; these figures only other sizes) */
        double worst = fit_line(x, tt->seconds, np, &fa, &fb);
        const char *how = "least squares on relative error";
        if (!(fb > 0)) {
            fa = tt->seconds[0];
            fb = (tt->seconds[np - 1] - tt->seconds[0]) / (x[np - 1] - x[0]);
            how = "secant (no positive bandwidth in the least-squares fit)";
            if (!(fb > 0)) fa = 0, fb = tt->seconds[np - 1] / x[np - 1], how = "last point (flat times)";
            worst = 0;
            for (int i = 0; i < np; i++) worst = fmax(worst, fabs(fa + fb * x[i] - tt->seconds[i]) / tt->seconds[i]);
        }
        double steps, factor;
        ring_factors(k, n, &steps, &factor);
        double alpha = fmax(fa / steps, 1e-9); /* a latency of 0 fits as 1 ns */
        double beta = fb / factor;
        if (!(beta > 0) || !isfinite(beta) || !isfinite(alpha))
            fail("%s over %s: the fit gave no positive bandwidth (time does not grow with size); "
                 "rerun with a larger --max-bytes or --min-time",
                 KIND[k], label);
        log_a += log(alpha), log_b += log(beta);
        cJSON *kj = cJSON_AddObjectToObject(ax, KIND[k]);
        cJSON_AddStringToObject(kj, "fit", how);
        cJSON_AddNumberToObject(kj, "fit_latency_us", fa * 1e6);
        cJSON_AddNumberToObject(kj, "fit_us_per_mib", fb * MIB * 1e6);
        cJSON_AddNumberToObject(kj, "alpha_us", alpha * 1e6);
        cJSON_AddNumberToObject(kj, "bandwidth_gbs", 1 / beta / 1e9);
        cJSON_AddNumberToObject(kj, "worst_relative_residual", worst);
        cJSON_AddItemToObject(kj, "points_bytes_seconds", pts);
        if (R == 0)
            printf("%-14s %-5s n=%d: %.1f us at %.0f B .. %.0f us at %.3g B; alpha-beta fit: alpha %.2f us, "
                   "bandwidth %.2f GB/s (worst residual %.0f%%)\n",
                   KIND[k], label, n, tt->seconds[0] * 1e6, tt->bytes[0], tt->seconds[np - 1] * 1e6,
                   tt->bytes[np - 1], alpha * 1e6, 1 / beta / 1e9, worst * 100);
    }
    qsort(diff, (size_t)nd, sizeof *diff, cmp_double);
    double med = nd % 2 ? diff[nd / 2] : (diff[nd / 2 - 1] + diff[nd / 2]) / 2;
    lt->handoff = fmax(0, med);
    cJSON *hj = cJSON_AddObjectToObject(ax, "handoff");
    cJSON_AddStringToObject(hj, "method",
                            "each kind's first 3 sizes also on the caller's thread (no stream, no events), the same "
                            "busy pass and medians; handoff_us: the median over them of the stream's time less the "
                            "caller's, at least 0");
    cJSON_AddNumberToObject(hj, "handoff_us", lt->handoff * 1e6);
    cJSON_AddItemToObject(hj, "caller_points_bytes_seconds", caller);
    if (R == 0)
        printf("%-14s %-5s n=%d: %.1f us (median of %d: the stream's time less the caller's thread's, %.1f .. %.1f us)\n",
               "hand-off", label, n, lt->handoff * 1e6, nd, diff[0] * 1e6, diff[nd - 1] * 1e6);
    colrt_event_destroy(ready);
    colrt_event_destroy(done);
    colrt_stream_destroy(st);
    *lat = exp(log_a / NKIND);
    *bw = 1 / exp(log_b / NKIND);
    *grew += max_over_ranks(fmax(0, mem_used() - before));
    colrt_arena_destroy(&a);
}

/* ---- contention ------------------------------------------------------------ */

/* The compute work beside a collective: a GEMM (f32, s x s x s with s doubled
 * from 128 until one call takes 1 ms, at most --gemm-max) and GELU over 16 MiB
 * (memory-bound), as the backward's kernels are. */
typedef struct OverlapCtx {
    int kind; /* 0: GEMM, 1: GELU */
    GemmCtx g;
    void *x, *y;
    int64_t n;
} OverlapCtx;

static void overlap_work(void *p) {
    OverlapCtx *c = p;
    if (c->kind == 0) gemm_work(&c->g);
    else colrt_gelu_fwd(NULL, COLRT_F32, c->x, c->y, c->n);
}

enum { OVERLAP_ROUNDS = 5 };

/* Seconds per call of `calls` calls of w on the caller (its stream synced), on
 * the slowest rank. */
static double overlap_loop(OverlapCtx *c, int calls) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < calls; i++) overlap_work(c);
    colrt_stream_sync(NULL);
    return (MPI_Wtime() - t0) / calls;
}

/* How much slower compute runs while a collective runs beside it on the
 * communication stream (ShardCluster.overlap_slowdown; docs/sharding.md,
 * "Contention"): per kind of work, rounds alternating the work alone and the
 * work with all-reduces of 4 MiB (or --max-bytes) queued back to back on a
 * stream on every rank before it starts, as many as outlast it (checked: the
 * last one's event not yet done when the work ends, else the round is rerun
 * with twice as many); the kind's slowdown is the median over rounds of
 * with / alone - 1, at least 0, and the cluster's the mean over the two kinds. */
static void bench_overlap(const Opts *o, colrt_mesh *m, int axis, ShardCluster *cl, cJSON *cal) {
    int n = colrt_mesh_size(m, axis);
    size_t bytes = (size_t)fmin(o->max_bytes, 4 * MIB) / 4 / (size_t)n * (size_t)n * 4;
    int64_t gelu_n = (int64_t)(16 * MIB / 4);
    size_t gmax = (size_t)o->gemm_max * (size_t)o->gemm_max * 4;
    size_t need = 2 * bytes + 2 * (size_t)gelu_n * 4 + 3 * gmax;
    colrt_arena a = colrt_arena_create(need);
    colrt_memset0(a.base, need, NULL);
    /* the GEMM's matrices first: with them at the arena's end oneDNN's sgemm read past it
     * (ASan: SEGV in its JIT code; OpenBLAS and BLIS did not); GELU's buffers last */
    char *gb = a.base, *base = gb + 3 * gmax;
    void *cs = base, *cr = base + bytes;
    OverlapCtx c = {0};
    c.x = base + 2 * bytes, c.y = base + 2 * bytes + (size_t)gelu_n * 4, c.n = gelu_n;
    c.g = (GemmCtx){COLRT_F32, 128, 128, 128, gb, gb + gmax, gb + 2 * gmax};
    colrt_stream *st = colrt_stream_create();
    colrt_event *last = colrt_event_create();
    colrt_device_sync();
    /* one all-reduce's time on the stream */
    colrt_all_reduce(m, axis, cs, cr, bytes / 4, COLRT_F32, COLRT_SUM, st);
    colrt_stream_sync(st);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < 4; i++) colrt_all_reduce(m, axis, cs, cr, bytes / 4, COLRT_F32, COLRT_SUM, st);
    colrt_stream_sync(st);
    double ar = max_over_ranks((MPI_Wtime() - t0) / 4);
    cJSON *oj = cJSON_AddObjectToObject(cal, "overlap");
    cJSON_AddStringToObject(oj, "method",
                            "per kind of work, 5 rounds each of the work alone and of the work with all-reduces "
                            "queued on a communication stream on every rank that outlast it; slowdown: the median "
                            "of with / alone - 1 (at least 0); overlap_slowdown: the mean over the kinds");
    cJSON_AddNumberToObject(oj, "all_reduce_bytes", (double)bytes);
    cJSON_AddNumberToObject(oj, "all_reduce_us", ar * 1e6);
    static const char *const kname[2] = {"gemm_f32", "gelu_16mib"};
    double sum = 0;
    for (int k = 0; k < 2; k++) {
        c.kind = k;
        if (k == 0) /* a GEMM of about a millisecond */
            for (;;) {
                double one = max_over_ranks(overlap_loop(&c, 2));
                if (one >= 1e-3 || 2 * c.g.M > o->gemm_max) break;
                c.g.M *= 2, c.g.N *= 2, c.g.K *= 2;
            }
        double one = max_over_ranks(overlap_loop(&c, 2));
        int calls = one > 0 ? (int)fmin(1e5, fmax(2, o->min_time / OVERLAP_ROUNDS / one)) : 100;
        MPI_Bcast(&calls, 1, MPI_INT, 0, MPI_COMM_WORLD);
        double ratio[OVERLAP_ROUNDS];
        int queue = (int)fmin(1e6, ceil(2 * calls * one / fmax(ar, 1e-9)) + 1), reruns = 0, short_rounds = 0;
        for (int r = 0; r < OVERLAP_ROUNDS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double alone = max_over_ranks(overlap_loop(&c, calls));
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < queue; i++) colrt_all_reduce(m, axis, cs, cr, bytes / 4, COLRT_F32, COLRT_SUM, st);
            colrt_event_record(last, st);
            double with = overlap_loop(&c, calls);
            int outlasted = !colrt_event_done(last), all;
            colrt_stream_sync(st);
            MPI_Allreduce(&outlasted, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            with = max_over_ranks(with);
            if (!all && reruns < 6 && queue < 500000) { /* the collectives ended first: again, twice as many */
                queue *= 2, reruns++, r--;
                continue;
            }
            short_rounds += !all; /* kept though the collectives ended first: s under-measured */
            ratio[r] = with / alone;
        }
        qsort(ratio, OVERLAP_ROUNDS, sizeof *ratio, cmp_double);
        double slow = fmax(0, ratio[OVERLAP_ROUNDS / 2] - 1);
        sum += slow;
        cJSON *kj = cJSON_AddObjectToObject(oj, kname[k]);
        if (k == 0) cJSON_AddNumberToObject(kj, "gemm_side", (double)c.g.M);
        cJSON_AddNumberToObject(kj, "alone_us", one * 1e6);
        cJSON_AddNumberToObject(kj, "slowdown", slow);
        if (short_rounds) /* said, not hidden: those rounds overlapped only part of the work */
            cJSON_AddNumberToObject(kj, "rounds_not_wholly_overlapped", short_rounds);
        cJSON *rj = cJSON_AddArrayToObject(kj, "rounds_with_over_alone");
        for (int r = 0; r < OVERLAP_ROUNDS; r++) cJSON_AddItemToArray(rj, cJSON_CreateNumber(ratio[r]));
        if (R == 0)
            printf("%-14s %-10s: %.0f us a call alone, %.1f%% slower beside all-reduces of %.0f KiB (median of %d)\n",
                   "overlap", kname[k], one * 1e6, 100 * slow, bytes / KIB, OVERLAP_ROUNDS);
    }
    cl->overlap_slowdown = fmin(sum / 2, 10);
    cJSON_AddNumberToObject(oj, "overlap_slowdown", cl->overlap_slowdown);
    colrt_event_destroy(last);
    colrt_stream_destroy(st);
    colrt_arena_destroy(&a);
}

/* ---- output ----------------------------------------------------------------- */

static void write_atomic(const char *path, const char *text) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
        fail("output path too long: %s", path);
    int fd = mkstemp(tmp);
    if (fd < 0) fail("cannot create %s: %s (check that the folder exists and is writable)", tmp, strerror(errno));
    FILE *f = fdopen(fd, "w");
    bool ok = f && fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fd) == 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        fail("cannot write %s: %s", path, strerror(e));
    }
}

static void detect_device(char *buf, size_t n) {
#ifdef COLOSSAL_CALIBRATE_CUDA
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, colrt_device()) == cudaSuccess) {
        size_t l = strnlen(p.name, sizeof p.name);
        if (l >= n) l = n - 1;
        memcpy(buf, p.name, l);
        buf[l] = 0;
        return;
    }
#endif
    snprintf(buf, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *v = strchr(line, ':') + 1;
            while (*v == ' ') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(buf, n, "CPU %s", v);
            break;
        }
    if (f) fclose(f);
}

static double parse_num(const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi)
        fail_all("%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    return d;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    R = colrt_rank();
    double used0 = mem_used();
    Opts o = {"calibrated.json", NULL, NULL, false, -1, -1, -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (R == 0) usage(stdout);
            colrt_finalize();
            return 0;
        }
        if (!strcmp(a, "--quick")) { o.quick = true; continue; }
        if (!v) {
            if (R == 0) usage(stderr);
            fail_all("unknown or incomplete option '%s'", a);
        }
        if (!strcmp(a, "-o")) o.out = v;
        else if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "--links-from")) o.links_from = v;
        else if (!strcmp(a, "--max-bytes")) o.max_bytes = parse_num(a, v, 4096, 16e9);
        else if (!strcmp(a, "--gemm-max")) o.gemm_max = (int)parse_num(a, v, 64, 65536);
        else if (!strcmp(a, "--min-time")) o.min_time = parse_num(a, v, 1e-4, 60);
        else {
            if (R == 0) usage(stderr);
            fail_all("unknown option '%s'", a);
        }
        i++;
    }
    size_t ol = strlen(o.out);
    if (ol < 6 || strcmp(o.out + ol - 5, ".json"))
        fail_all("-o %s: the file name must end in .json (colossal-compile --cluster reads FILE.json)", o.out);
    int writable = 0;
    if (R == 0) { /* can we write there? say so now, not after the measurements */
        char probe[4096];
        int fd = snprintf(probe, sizeof probe, "%s.tmp.XXXXXX", o.out) < (int)sizeof probe
                     ? mkstemp(probe)
                     : (errno = ENAMETOOLONG, -1);
        writable = fd >= 0 ? 0 : errno;
        if (fd >= 0) close(fd), remove(probe);
    }
    MPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (writable)
        fail_all("cannot write beside %s: %s (check that the folder exists and is writable)", o.out,
                 strerror(writable));
    bool gpu = !strcmp(colrt_backend(), "cuda");
    if (o.max_bytes < 0) o.max_bytes = o.quick ? MIB : 256 * MIB;
    if (o.gemm_max < 0) o.gemm_max = o.quick ? 256 : gpu ? 16384 : 4096;
    if (o.min_time < 0) o.min_time = o.quick ? 0.01 : 0.2;

    int world = colrt_world(), local = colrt_local_size(), lmin, lmax;
    MPI_Allreduce(&local, &lmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&local, &lmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ShardCluster from;
    if (o.links_from) {
        StrBuf e, h;
        sb_init(&e), sb_init(&h);
        if (!shard_cluster_load(o.links_from, &from, &e, &h))
            fail_all("--links-from: %s (%s)", sb_cstr(&e), sb_cstr(&h));
        sb_free(&e), sb_free(&h);
    }
    if (world < 2 && !o.links_from)
        fail_all("timing collectives needs at least 2 ranks: run under mpirun -np 2 (or more), one rank "
             "per device, or give --links-from PRESET to take the links from a preset");
    if (lmin != lmax || world % local)
        fail_all("every node must run the same number of ranks (found %d to %d per node)", lmin, lmax);
    int nodes = world / local;

    ShardCluster cl;
    memset(&cl, 0, sizeof cl);
    char dev[128];
    if (o.device) snprintf(dev, sizeof dev, "%s", o.device);
    else detect_device(dev, sizeof dev);
    if (strlen(dev) >= sizeof cl.device) dev[sizeof cl.device - 1] = 0; /* the file's limit */
    memcpy(cl.device, dev, strlen(dev) + 1);
    cl.nodes = nodes;
    cl.per_node = local;
    cl.mem_bytes = mem_total(local);

    cJSON *cal = cJSON_CreateObject();
    if (R == 0)
        printf("colossal-calibrate: backend %s, %d rank(s) = %d node(s) x %d, device '%s'%s\n",
               colrt_backend(), world, nodes, local, cl.device, o.quick ? ", quick" : "");

    /* the mesh: [nodes, per node] when there are several nodes, else [ranks] */
    int sizes[2] = {nodes, local};
    colrt_mesh *m = nodes > 1 ? colrt_mesh_create(2, sizes) : colrt_mesh_create(1, &world);
    cJSON *notes = cJSON_AddArrayToObject(cal, "notes");
    double used1 = mem_used();
    double ctx = max_over_ranks(used0);
    double comm0 = max_over_ranks(fmax(0, used1 - used0));

    double ws = 0;
    bench_gemm(&o, &cl, cal, &ws);
    bench_memory(&o, &cl, cal);
    bench_kernels(&o, &cl, cal);
    bench_attention(&o, &cl, cal);
    bench_host(&o, &cl, cal);
    cJSON *cj = cJSON_AddObjectToObject(cal, "collectives");
    double grew = 0;
    char note[256];
    if (world > 1)
        bench_axis(&o, m, nodes > 1 ? 1 : 0, "intra", &cl.intra_lat, &cl.intra_bw, &grew, &cl.coll[0], cj);
    else {
        cl.intra_lat = from.intra_lat, cl.intra_bw = from.intra_bw;
        snprintf(note, sizeof note, "one rank: the intra-node link was not measured; taken from '%s'",
                 o.links_from);
        cJSON_AddItemToArray(notes, cJSON_CreateString(note));
    }
    if (world > 1) bench_overlap(&o, m, nodes > 1 ? 1 : 0, &cl, cal);
    else {
        cl.overlap_slowdown = from.overlap_slowdown;
        snprintf(note, sizeof note, "one rank: contention beside a collective was not measured; taken from '%s'",
                 o.links_from ? o.links_from : "nothing (0)");
        cJSON_AddItemToArray(notes, cJSON_CreateString(note));
    }
    if (nodes > 1) bench_axis(&o, m, 0, "inter", &cl.inter_lat, &cl.inter_bw, &grew, &cl.coll[1], cj);
    else if (o.links_from) {
        cl.inter_lat = from.inter_lat, cl.inter_bw = from.inter_bw;
        snprintf(note, sizeof note, "one node: the inter-node link was not measured; taken from '%s'",
                 o.links_from);
        cJSON_AddItemToArray(notes, cJSON_CreateString(note));
    } else {
        cl.inter_lat = cl.intra_lat, cl.inter_bw = cl.intra_bw;
        cJSON_AddItemToArray(notes, cJSON_CreateString("one node: the inter-node link was not measured; "
                                                       "'inter' repeats 'intra' (--links-from takes it "
                                                       "from a preset)"));
    }
    /* communicator buffers: what creating the mesh took, plus what the
     * collectives kept beyond their (already touched) buffers */
    double comm = comm0 + grew;
    cl.reserve_context = ctx;
    cl.reserve_comm = comm;
    cl.reserve_workspace = ws;
    if (R == 0)
        printf("reserve: context %.1f MiB, communicators %.1f MiB, GEMM workspace %.1f MiB\n", ctx / MIB,
               comm / MIB, ws / MIB);

    int rc = 0;
    if (R == 0) {
        cJSON *root = shard_cluster_to_json(&cl);
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        cJSON_AddStringToObject(cal, "tool", "colossal-calibrate");
        cJSON_AddStringToObject(cal, "date", date);
        cJSON_AddStringToObject(cal, "host", colrt_hostname());
        cJSON_AddStringToObject(cal, "backend", colrt_backend());
        cJSON_AddStringToObject(cal, "gemm_library", colrt_gemm_library());
        cJSON_AddNumberToObject(cal, "ranks", world);
        cJSON_AddBoolToObject(cal, "quick", o.quick);
        cJSON_AddStringToObject(cal, "reserve_method",
                                gpu ? "used device memory (cudaMemGetInfo) after init; growth at mesh "
                                      "creation and during collectives; growth during GEMMs"
                                    : "resident set (/proc/self/statm) after init; growth at mesh "
                                      "creation and during collectives; growth during GEMMs");
        cJSON_AddItemToObject(root, "calibration", cal);
        char *text = cJSON_Print(root);
        /* the compiler's own loader checks what would be written: every
         * number finite, every table monotone */
        ShardCluster back;
        StrBuf err;
        sb_init(&err);
        if (!shard_cluster_from_json(text, o.out, &back, &err)) {
            fprintf(stderr, "colossal-calibrate: error: refusing to write %s: %s\n", o.out, sb_cstr(&err));
            rc = 1;
        } else {
            size_t tl = strlen(text);
            char *withnl = malloc(tl + 2);
            memcpy(withnl, text, tl);
            withnl[tl] = '\n', withnl[tl + 1] = 0;
            write_atomic(o.out, withnl);
            free(withnl);
            printf("colossal-calibrate: wrote %s (use: colossal-compile --cluster %s)\n", o.out, o.out);
        }
        sb_free(&err);
        free(text);
        cJSON_Delete(root);
    } else cJSON_Delete(cal);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    colrt_mesh_destroy(m);
    colrt_finalize();
    return rc;
}

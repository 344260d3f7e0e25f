/*
 * test_collectives — every collective on every axis of every mesh shape that
 * fits the world (1-D [W]; 2-D [a, W/a] for each divisor a, so 1x4, 2x2, 4x1
 * on four ranks; 3-D [1,2,2] or [2,1,1] where it fits), in f32, bf16, f16 and
 * i32, checking every rank's result against the values its peers sent.
 * Values are small integers, so sums of up to four ranks are exact in every
 * dtype: the tolerance is zero (AVG allows one bf16 rounding: 1/128).
 * Also the global gradient norm all-reduced over one axis and over all.
 * Run under mpirun -np 1, 2, 4; each rank exits non-zero on any failure.
 */
#include <stdlib.h>

#include "check.h"
#include "colossal/colrt.h"
#include "../../runtime/common/half.h"

static int W, R;

/* The mesh under test's rank layout: its axes from the slowest-varying to
 * the fastest (colrt_mesh_create_ordered). */
static int ORDER[COLRT_MAX_AXES];

/* The world rank of the peer at coordinate c along axis a. */
static int peer(const colrt_mesh *m, int a, int c) {
    int stride = 1, k = colrt_mesh_naxes(m) - 1;
    for (; ORDER[k] != a; k--) stride *= colrt_mesh_size(m, ORDER[k]);
    return R + (c - colrt_mesh_coord(m, a)) * stride;
}

static float val(int rank, int i) { return (float)(rank + 1 + i % 5); }

static void *fill(colrt_dtype t, size_t n, int rank, int off) {
    void *p = calloc(n ? n : 1, 4);
    for (size_t i = 0; i < n; i++) colrt_st(p, t, (int64_t)i, val(rank, (int)i + off));
    return p;
}

static void test_axis(colrt_mesh *m, int a, colrt_dtype t) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    const size_t count = 37; /* odd on purpose */
    int isfloat = t != COLRT_I32;

    /* all-reduce: sum, max, avg; in place and out of place; 37 elements (MPI's)
     * and 4 x 2^14 (the CPU backend's ring, collectives.c) */
    for (int op = 0; op < 6; op++) {
        const size_t cnt = op < 3 ? count : (size_t)4 << 14;
        if (!isfloat && op % 3 == COLRT_AVG) continue;
        void *x = fill(t, cnt, R, 0), *y = calloc(cnt, 4);
        colrt_all_reduce(m, a, x, y, cnt, t, (colrt_redop)(op % 3), NULL);
        colrt_all_reduce(m, a, x, x, cnt, t, (colrt_redop)(op % 3), NULL); /* in place */
        for (size_t i = 0; i < cnt; i++) {
            float e = op % 3 == COLRT_MAX ? -1e9f : 0.f;
            for (int c = 0; c < n; c++) {
                float v = val(peer(m, a, c), (int)i);
                e = op % 3 == COLRT_MAX ? (v > e ? v : e) : e + v;
            }
            if (op % 3 == COLRT_AVG) e /= (float)n;
            float tol = op % 3 == COLRT_AVG && t != COLRT_F32 ? 1.f / 128 : 0.f;
            CHECK_NEAR(colrt_ld(y, t, (int64_t)i), e, tol);
            CHECK_NEAR(colrt_ld(x, t, (int64_t)i), e, tol);
        }
        free(x), free(y);
    }

    /* all-gather */
    {
        void *x = fill(t, count, R, 0), *y = calloc(count * (size_t)n, 4);
        colrt_all_gather(m, a, x, y, count, t, NULL);
        for (int c = 0; c < n; c++)
            for (size_t i = 0; i < count; i++)
                CHECK_INT(colrt_ld(y, t, (int64_t)(c * count + i)), val(peer(m, a, c), (int)i));
        free(x), free(y);
    }

    /* reduce-scatter (sum): block `me` of the sum */
    {
        void *x = fill(t, count * (size_t)n, R, 0), *y = calloc(count, 4);
        colrt_reduce_scatter(m, a, x, y, count, t, COLRT_SUM, NULL);
        for (size_t i = 0; i < count; i++) {
            float e = 0.f;
            for (int c = 0; c < n; c++) e += val(peer(m, a, c), (int)(me * count + i));
            CHECK_INT(colrt_ld(y, t, (int64_t)i), e);
        }
        free(x), free(y);
    }

    /* all-to-all: block j goes to peer j */
    {
        void *x = calloc(count * (size_t)n, 4), *y = calloc(count * (size_t)n, 4);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < count; i++) colrt_st(x, t, (int64_t)(j * count + i), (float)(R * 16 + j * 4 + (int)i % 4));
        colrt_all_to_all(m, a, x, y, count, t, NULL);
        for (int c = 0; c < n; c++)
            for (size_t i = 0; i < count; i++)
                CHECK_INT(colrt_ld(y, t, (int64_t)(c * count + i)), peer(m, a, c) * 16 + me * 4 + (int)i % 4);
        free(x), free(y);
    }

    /* broadcast from the last coordinate */
    {
        void *x = fill(t, count, R, 0);
        colrt_broadcast(m, a, x, count, t, n - 1, NULL);
        for (size_t i = 0; i < count; i++) CHECK_INT(colrt_ld(x, t, (int64_t)i), val(peer(m, a, n - 1), (int)i));
        free(x);
    }
}

/* order: the rank layout (NULL: colrt_mesh_create's, the last axis fastest). */
static void test_mesh(int naxes, const int *sizes, const int *order) {
    for (int k = 0; k < naxes; k++) ORDER[k] = order ? order[k] : k;
    colrt_mesh *m = order ? colrt_mesh_create_ordered(naxes, sizes, order) : colrt_mesh_create(naxes, sizes);
    CHECK_INT(colrt_mesh_naxes(m), naxes);
    /* row-major in the order's axes: the coordinates spell the rank */
    int r = 0;
    for (int k = 0; k < naxes; k++) r = r * sizes[ORDER[k]] + colrt_mesh_coord(m, ORDER[k]);
    CHECK_INT(r, R);
    for (int a = 0; a < naxes; a++) {
        CHECK_INT(colrt_mesh_size(m, a), sizes[a]);
        for (int t = 0; t < COLRT_NDTYPES; t++) test_axis(m, a, (colrt_dtype)t);
        /* global gradient norm of a tensor sharded along axis a: one element (R+1) per rank */
        float g = (float)(R + 1), acc = 0, e = 0;
        const void *xs[] = {&g};
        int64_t ns[] = {1};
        for (int c = 0; c < sizes[a]; c++) e += (float)((peer(m, a, c) + 1) * (peer(m, a, c) + 1));
        CHECK_NEAR(colrt_grad_norm(NULL, m, 1u << a, 1, xs, ns, COLRT_F32, &acc), sqrtf(e), 1e-6);
    }
    /* sharded over every axis: the norm over the world */
    float g = (float)(R + 1), acc = 0, e = 0;
    const void *xs[] = {&g};
    int64_t ns[] = {1};
    for (int q = 0; q < W; q++) e += (float)((q + 1) * (q + 1));
    CHECK_NEAR(colrt_grad_norm(NULL, m, (1u << naxes) - 1, 1, xs, ns, COLRT_F32, &acc), sqrtf(e), 1e-6);
    colrt_mesh_destroy(m);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    W = colrt_world();
    R = colrt_rank();
    CHECK(R >= 0 && R < W);
    CHECK(colrt_local_rank() >= 0 && colrt_local_rank() < colrt_local_size());
    CHECK_STR(colrt_backend(), "cpu");
    colrt_set_timeout(20); /* a hang here is a failure, not a wait */

    test_mesh(1, (int[]){W}, NULL);
    for (int a = 1; a <= W; a++)
        if (W % a == 0) test_mesh(2, (int[]){a, W / a}, NULL);
    if (W % 4 == 0) test_mesh(3, (int[]){W / 4, 2, 2}, NULL);
    test_mesh(3, (int[]){W, 1, 1}, NULL);
    /* another rank layout: a pipeline's stage axis (the last) outermost */
    if (W % 2 == 0) test_mesh(2, (int[]){W / 2, 2}, (int[]){1, 0});
    if (W % 4 == 0) test_mesh(3, (int[]){2, W / 4, 2}, (int[]){2, 0, 1});
    if (W == 4) { /* the layout spelled out: axis 1 (size 2) outermost, so ranks 0 and 1 share its coordinate 0 */
        colrt_mesh *m = colrt_mesh_create_ordered(2, (int[]){2, 2}, (int[]){1, 0});
        CHECK_INT(colrt_mesh_coord(m, 1), R / 2);
        CHECK_INT(colrt_mesh_coord(m, 0), R % 2);
        colrt_mesh_destroy(m);
    }

    /* the world-wide tally, so rank 0's report covers everyone */
    int fails = check_failures, all = 0;
    colrt_mesh *m = colrt_mesh_create(1, (int[]){W});
    colrt_all_reduce(m, 0, &fails, &all, 1, COLRT_I32, COLRT_SUM, NULL);
    colrt_mesh_destroy(m);
    colrt_barrier();
    if (R == 0) printf("collectives on %d ranks: %d failures over all ranks\n", W, all);
    int rc = check_done("test_colrt_collectives");
    colrt_finalize();
    return rc || all;
}

/*
 * bench_collectives [--min-kb N] [--max-mb N] [--reps R] — bus bandwidth of colrt's
 * collectives over the world (a 1-D mesh), on whichever backend it is linked
 * with, next to a baseline measured in the same run: the plain blocking MPI
 * call on host buffers of the same size. Bus bandwidth follows nccl-tests:
 * algbw = bytes/time; busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for
 * all-gather, reduce-scatter and all-to-all, 1 for broadcast. Sizes from
 * --min-kb (default 64; 1 shows the latency) to --max-mb, 16x apart. Run under
 * mpirun -np N; rank 0 prints the table.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colossal/colrt.h"

enum { AR, AG, RS, A2A, BC, NCOLL };
static const char *NAMES[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};

static void run_colrt(int c, colrt_mesh *m, void *s, void *r, size_t count, int n) {
    switch (c) {
    case AR: colrt_all_reduce(m, 0, s, r, count, COLRT_F32, COLRT_SUM, NULL); break;
    case AG: colrt_all_gather(m, 0, s, r, count / (size_t)n, COLRT_F32, NULL); break;
    case RS: colrt_reduce_scatter(m, 0, s, r, count / (size_t)n, COLRT_F32, COLRT_SUM, NULL); break;
    case A2A: colrt_all_to_all(m, 0, s, r, count / (size_t)n, COLRT_F32, NULL); break;
    default: colrt_broadcast(m, 0, s, count, COLRT_F32, 0, NULL); break;
    }
}

static void run_mpi(int c, void *s, void *r, size_t count, int n) {
    int k = (int)(count / (size_t)n);
    switch (c) {
    case AR: MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case AG: MPI_Allgather(s, k, MPI_FLOAT, r, k, MPI_FLOAT, MPI_COMM_WORLD); break;
    case RS: MPI_Reduce_scatter_block(s, r, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case A2A: MPI_Alltoall(s, k, MPI_FLOAT, r, k, MPI_FLOAT, MPI_COMM_WORLD); break;
    default: MPI_Bcast(s, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int max_mb = 16, reps = 5, min_kb = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max-mb")) max_mb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-kb")) min_kb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    int n = colrt_world(), R = colrt_rank();
    colrt_mesh *m = colrt_mesh_create(1, &n);
    size_t maxb = (size_t)max_mb << 20;
    void *ds = colrt_arena_create(maxb).base, *dr = colrt_arena_create(maxb).base;
    /* Real values in every buffer: untouched calloc pages all map to the zero
     * page, which stays in cache and would flatter the baseline. */
    float *hs = malloc(maxb), *hr = malloc(maxb);
    for (size_t i = 0; i < maxb / 4; i++) hs[i] = hr[i] = (float)(i % 1000);
    colrt_memcpy(ds, hs, maxb, COLRT_H2D, NULL);
    colrt_memcpy(dr, hs, maxb, COLRT_H2D, NULL);
    if (R == 0) {
        printf("bench_collectives: backend %s, %d ranks, f32, best of %d\n", colrt_backend(), n, reps);
        printf("%-15s %10s %12s %12s %14s %8s\n", "collective", "bytes", "colrt ms", "busbw GB/s", "MPI busbw GB/s",
               "ratio");
    }
    for (int c = 0; c < NCOLL; c++)
        for (size_t bytes = (size_t)(min_kb > 0 ? min_kb : 1) << 10; bytes <= maxb; bytes *= 16) {
            size_t count = bytes / 4 / (size_t)n * (size_t)n;
            double best[2] = {1e30, 1e30};
            /* colrt and the baseline alternate, each going first every other
             * rep, so load from other processes falls on both alike */
            for (int r = 0; r <= reps; r++)
                for (int w = 0; w < 2; w++) {
                    int which = (r + w) % 2;
                    colrt_device_sync();
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = MPI_Wtime();
                    if (which == 0) run_colrt(c, m, ds, dr, count, n), colrt_device_sync();
                    else run_mpi(c, hs, hr, count, n);
                    double dt = MPI_Wtime() - t0, slowest = 0;
                    MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    if (r > 0 && slowest < best[which]) best[which] = slowest;
                }
            double f = c == AR ? 2.0 * (n - 1) / n : c == BC ? 1.0 : (double)(n - 1) / n;
            double bw0 = count * 4.0 / best[0] * f / 1e9, bw1 = count * 4.0 / best[1] * f / 1e9;
            if (R == 0)
                printf("%-15s %10zu %12.3f %12.2f %14.2f %8.2f\n", NAMES[c], count * 4, best[0] * 1e3, bw0, bw1,
                       bw1 > 0 ? bw0 / bw1 : 0);
            fflush(stdout);
        }
    free(hs), free(hr);
    colrt_mesh_destroy(m);
    colrt_finalize();
    return 0;
}

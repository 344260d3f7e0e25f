/*
 * bench_overlap [--layers L] [--tokens M] [--dim D] [--reps R] [--sleep-ms S]
 * — does a
 * communication stream overlap gradient all-reduces with backward compute
 * on this backend? One "backward pass" is L layers; each computes a weight
 * gradient dW[D,D] = Xᵀ·dY (a GEMM over M tokens, f32) and all-reduces it
 * (SUM over the world, D*D floats), as generated data-parallel programs do:
 *
 *   sync:   the all-reduce on the NULL stream right after the GEMM;
 *   stream: event_record(ready, NULL); stream_wait(comm, ready);
 *           all_reduce(..., comm); event_record(done[l], comm); and
 *           stream_wait(NULL, done[l]) for every layer at the end.
 *
 * Also timed alone: the L GEMMs (compute) and the L all-reduces (comm), so
 * the best overlap possible is (compute + comm) / max(compute, comm). The
 * modes alternate rep by rep (each going first every other rep), so load
 * from other processes falls on all alike; each time is the slowest rank's,
 * best of R. Both modes' gradients are checked equal. Run under mpirun -np N;
 * rank 0 prints. --sleep-ms S replaces each GEMM by S ms of sleep: compute
 * that leaves the host cores free, as a GPU's does, to see what the
 * mechanism gives when the worker has a core to itself.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colossal/colrt.h"

enum { COMPUTE, COMM, SYNC, STREAM, NMODES };
static const char *NAMES[] = {"compute only", "comm only", "sync", "stream"};

static int L = 12, M = 256, D = 768;
static double sleep_ms = 0;
static float *X, *dY, **G;
static colrt_mesh *mesh;
static colrt_stream *comm;
static colrt_event *ready, **done;

static void grad(int l) {
    if (sleep_ms > 0) {
        struct timespec ts = {(time_t)(sleep_ms / 1e3), (long)(sleep_ms * 1e6) % 1000000000L};
        nanosleep(&ts, NULL);
        return;
    }
    colrt_gemm(NULL, COLRT_F32, 1, 0, D, D, M, 1.f, X, D, 0, dY + (size_t)l * M * D, D, 0, 0.f, G[l], D, 0, 1);
}

static void backward(int mode) {
    size_t n = (size_t)D * D;
    for (int l = 0; l < L; l++) {
        if (mode != COMM) grad(l);
        if (mode == COMM || mode == SYNC) colrt_all_reduce(mesh, 0, G[l], G[l], n, COLRT_F32, COLRT_SUM, NULL);
        if (mode == STREAM) {
            colrt_event_record(ready, NULL);
            colrt_stream_wait(comm, ready);
            colrt_all_reduce(mesh, 0, G[l], G[l], n, COLRT_F32, COLRT_SUM, comm);
            colrt_event_record(done[l], comm);
        }
    }
    if (mode == STREAM)
        for (int l = 0; l < L; l++) colrt_stream_wait(NULL, done[l]);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--layers")) L = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) M = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) D = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sleep-ms")) sleep_ms = atof(argv[i + 1]);
    }
    int W = colrt_world(), R = colrt_rank();
    mesh = colrt_mesh_create(1, &W);
    comm = colrt_stream_create();
    ready = colrt_event_create();
    done = malloc((size_t)L * sizeof *done);
    G = malloc((size_t)L * sizeof *G);
    X = (float *)colrt_arena_create((size_t)M * D * 4).base;
    dY = (float *)colrt_arena_create((size_t)L * M * D * 4 + (size_t)D * 4).base;
    for (size_t i = 0; i < (size_t)M * D; i++) X[i] = (float)((i + (size_t)R) % 7) * 0.25f;
    for (size_t i = 0; i < (size_t)L * M * D; i++) dY[i] = (float)(i % 5) * 0.5f - 1.f;
    for (int l = 0; l < L; l++) {
        done[l] = colrt_event_create();
        G[l] = (float *)colrt_arena_create((size_t)D * D * 4).base;
    }
    if (R == 0)
        printf("bench_overlap: backend %s, %d ranks, %d layers, dW [%d,%d] from %d tokens (%.1f MB all-reduced per "
               "layer), best of %d\n%s\n",
               colrt_backend(), W, L, D, D, M, D * D * 4 / 1e6, reps,
               sleep_ms > 0 ? "compute: sleep (--sleep-ms)" : colrt_gemm_library());
    if (R == 0 && sleep_ms > 0) printf("compute is %.2f ms of sleep per layer, not a GEMM\n", sleep_ms);
    backward(STREAM); /* warm-up: BLAS threads, the stream's communicator duplicate, page faults */
    backward(SYNC);
    double best[NMODES];
    for (int k = 0; k < NMODES; k++) best[k] = 1e30;
    for (int r = 0; r < reps; r++)
        for (int w = 0; w < NMODES; w++) {
            int mode = (r + w) % NMODES;
            colrt_device_sync();
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            backward(mode);
            double dt = MPI_Wtime() - t0, slowest = 0;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (slowest < best[mode]) best[mode] = slowest;
        }
    /* The two modes compute the same sums. */
    float *ref = malloc((size_t)D * D * 4);
    int differ = 0;
    for (int l = 0; l < L && sleep_ms == 0; l++) { /* (sleeping writes no gradient) */
        grad(l);
        colrt_all_reduce(mesh, 0, G[l], G[l], (size_t)D * D, COLRT_F32, COLRT_SUM, NULL);
        memcpy(ref, G[l], (size_t)D * D * 4);
        grad(l);
        colrt_all_reduce(mesh, 0, G[l], G[l], (size_t)D * D, COLRT_F32, COLRT_SUM, comm);
        colrt_stream_sync(comm);
        differ += memcmp(ref, G[l], (size_t)D * D * 4) != 0;
    }
    if (R == 0) {
        for (int k = 0; k < NMODES; k++) printf("%-13s %9.2f ms\n", NAMES[k], best[k] * 1e3);
        double lo = best[COMPUTE] > best[COMM] ? best[COMPUTE] : best[COMM];
        printf("sync / stream = %.2f (ideal overlap: (compute + comm) / max = %.2f); gradients %s\n",
               best[SYNC] / best[STREAM], (best[COMPUTE] + best[COMM]) / lo,
               differ ? "DIFFER" : sleep_ms > 0 ? "not checked" : "equal in both modes");
    }
    free(ref);
    for (int l = 0; l < L; l++) colrt_event_destroy(done[l]);
    colrt_event_destroy(ready);
    colrt_stream_destroy(comm);
    colrt_mesh_destroy(mesh);
    colrt_finalize();
    return differ != 0;
}

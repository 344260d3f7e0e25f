/*
 * coll_stream.c — what an f32 all-reduce costs the generated program on the
 * CPU backend, by the way it is issued (bench/validate/README.md,
 * "Collectives priced as the program runs them"): per size (64 B by 16x to
 * 4 MiB), the median of 5 rounds of ITERS calls, each round's time a call:
 *   caller       colrt_all_reduce on the caller's thread (the old calibration's way)
 *   stream       queued on a communication stream after an event and waited
 *                for through another (a gradient bucket's sync)
 *   work         a busy pass alone (W x an element-wise loop over 64 KiB)
 *   work+stream  the stream's call overlapped with the busy pass; "exposed"
 *                is its time less the busy pass's
 * Rank 0 prints one line a size.
 *
 * build (after the main build):
 *   mpicc -std=c17 -O2 -Iinclude bench/validate/coll_stream.c build/runtime/libcolrt_cpu.a \
 *     -fopenmp -lcjson -ldl -lm -o /tmp/coll_stream
 * run:   mpirun --oversubscribe -np 2 /tmp/coll_stream W ITERS   (e.g. 1 200)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "colossal/colrt.h"

static float buf[1 << 14];
static volatile float sink;
static void work(int n) {
    float s = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < (1 << 14); i++) {
            buf[i] = buf[i] * 0.999f + 1.0f;
            s += buf[i];
        }
    sink = s;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    if (argc != 3) {
        if (colrt_rank() == 0) fprintf(stderr, "usage: mpirun -np 2 %s W ITERS\n", argv[0]);
        colrt_finalize();
        return 2;
    }
    int W = atoi(argv[1]), iters = atoi(argv[2]), w = colrt_world();
    colrt_mesh *m = colrt_mesh_create(1, &w);
    colrt_stream *s = colrt_stream_create();
    colrt_event *rd = colrt_event_create(), *dn = colrt_event_create();
    size_t cap = 1 << 22;
    colrt_arena a = colrt_arena_create(2 * cap);
    colrt_memset0(a.base, 2 * cap, NULL);
    for (size_t bytes = 64; bytes <= cap; bytes *= 16) {
        size_t cnt = bytes / 4;
        double res[4] = {0};
        for (int mode = 0; mode < 4; mode++) {
            double ts[5];
            for (int rep = 0; rep < 5; rep++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int i = 0; i < iters; i++) {
                    if (mode == 0) {
                        colrt_all_reduce(m, 0, a.base, a.base, cnt, COLRT_F32, COLRT_SUM, NULL);
                    } else if (mode == 2) {
                        work(W);
                    } else {
                        colrt_event_record(rd, NULL);
                        colrt_stream_wait(s, rd);
                        colrt_all_reduce(m, 0, a.base, a.base, cnt, COLRT_F32, COLRT_SUM, s);
                        colrt_event_record(dn, s);
                        if (mode == 3) work(W);
                        colrt_stream_wait(NULL, dn);
                    }
                }
                ts[rep] = (MPI_Wtime() - t0) / iters;
            }
            for (int i = 0; i < 5; i++)
                for (int j = i + 1; j < 5; j++)
                    if (ts[j] < ts[i]) {
                        double t = ts[i];
                        ts[i] = ts[j], ts[j] = t;
                    }
            res[mode] = ts[2];
        }
        if (colrt_rank() == 0)
            printf("%8zu B: caller %.1f us, stream %.1f us, work %.1f us, work+stream %.1f us (exposed %.1f)\n", bytes,
                   res[0] * 1e6, res[1] * 1e6, res[2] * 1e6, res[3] * 1e6, (res[3] - res[2]) * 1e6);
    }
    colrt_finalize();
    return 0;
}

/*
 * test_streams — streams and events on the CPU backend, used the way
 * generated programs use them (gradient all-reduces on a communication
 * stream, ordered by events after work in the caller):
 *  - all-reduce (sum, avg), all-gather, reduce-scatter, all-to-all and
 *    broadcast on a stream give bit for bit what the same call on the NULL
 *    stream gives, on every axis of a 1-D and a 2-D mesh, f32 and bf16;
 *  - several dependent operations queued on one stream run in order;
 *  - the same two events recorded and waited on 100 times in a loop;
 *  - colrt_stream_wait(comm, e) orders comm's work after NULL-stream work
 *    and after another stream's work;
 *  - destroying a stream or an event with work still queued finishes it;
 *  - overlap is real: the launch returns before the collective completes
 *    (deterministic, no timing: the peers join the collective only after a
 *    barrier that the launching rank enters after checking its event);
 *  - a worker waiting in a collective for a late peer leaves its core to
 *    the caller: on one CPU with a computing caller it uses under a quarter
 *    of the caller's CPU time (a worker that polled in MPI took about as
 *    much as the caller: issue 15's slow steps);
 *  - misuse (a NULL event) ends the process with a message (1 rank).
 * Values are small integers (and halves), exact in f32 and bf16 for sums of
 * up to four ranks: the tolerance is zero. Run under mpirun -np 1, 2, 4 and
 * once with COLRT_STREAMS=sync (stream work in the caller; the overlap check
 * is skipped there, as nothing overlaps by design).
 */
#define _GNU_SOURCE /* sched_setaffinity, sched_getcpu */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "colossal/colrt.h"
#include "expect_death.h"
#include "../../runtime/common/half.h"
#include "../../runtime/cpu/cpu.h" /* colrt__cpu_streams_async: is there overlap to check? */

static int W, R;

static float val(int rank, size_t i) { return (float)(rank + 1 + (int)(i % 7)) * 0.5f; }

static void *fill(colrt_dtype t, size_t n, int rank) {
    void *p = calloc(n ? n : 1, 4);
    for (size_t i = 0; i < n; i++) colrt_st(p, t, (int64_t)i, val(rank, i));
    return p;
}

/* ---- on a stream == on the NULL stream --------------------------------------------- */

static void same_as_sync(colrt_mesh *m, int a, colrt_dtype t, colrt_stream *s) {
    int n = colrt_mesh_size(m, a);
    const size_t count = 1001; /* odd on purpose */
    size_t es = colrt_dtype_size(t), big = count * (size_t)n * es;
    char what[64];
    snprintf(what, sizeof what, "axis %d of %d, %s", a, colrt_mesh_naxes(m), colrt_dtype_name(t));
    for (int k = 0; k < 6; k++) {
        void *x = fill(t, count * (size_t)n, R), *ys = calloc(1, big), *yq = calloc(1, big);
        void *xq = malloc(big);
        memcpy(xq, x, big);
        switch (k) {
        case 0:
            colrt_all_reduce(m, a, x, ys, count, t, COLRT_SUM, NULL);
            colrt_all_reduce(m, a, x, yq, count, t, COLRT_SUM, s);
            break;
        case 1: /* in place, with the 1/n scaling on the worker */
            colrt_all_reduce(m, a, x, x, count, t, COLRT_AVG, NULL), memcpy(ys, x, count * es);
            colrt_all_reduce(m, a, xq, xq, count, t, COLRT_AVG, s), colrt_stream_sync(s), memcpy(yq, xq, count * es);
            break;
        case 2:
            colrt_all_gather(m, a, x, ys, count, t, NULL);
            colrt_all_gather(m, a, x, yq, count, t, s);
            break;
        case 3:
            colrt_reduce_scatter(m, a, x, ys, count, t, COLRT_SUM, NULL);
            colrt_reduce_scatter(m, a, x, yq, count, t, COLRT_SUM, s);
            break;
        case 4:
            colrt_all_to_all(m, a, x, ys, count, t, NULL);
            colrt_all_to_all(m, a, x, yq, count, t, s);
            break;
        default:
            colrt_broadcast(m, a, x, count, t, n - 1, NULL), memcpy(ys, x, count * es);
            colrt_broadcast(m, a, xq, count, t, n - 1, s), colrt_stream_sync(s), memcpy(yq, xq, count * es);
            break;
        }
        colrt_stream_sync(s);
        if (memcmp(ys, yq, big)) fprintf(stderr, "collective %d on a stream differs from NULL-stream (%s)\n", k, what);
        CHECK(!memcmp(ys, yq, big));
        free(x), free(xq), free(ys), free(yq);
    }
}

/* ---- several dependent operations on one stream run in order ------------------------ */

static void queued_in_order(colrt_mesh *m, colrt_stream *s) {
    const size_t n = 1 << 20, rows = 64, cols = n / rows; /* 4 MiB: the first op takes a while */
    float *src = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n / 2 * 4), *g = malloc(n / 2 * 4 * (size_t)W);
    for (size_t i = 0; i < n; i++) src[i] = val(R, i), a[i] = -1.f;
    colrt_memset0(a, n * 4, s);                                /* a = 0 */
    colrt_memcpy(a, src, n / 2 * 4, COLRT_D2D, s);             /* a = src in the first half */
    colrt_all_reduce(m, 0, a, a, n, COLRT_F32, COLRT_SUM, s);  /* a = sum over ranks */
    colrt_memcpy_2d(b, cols / 2 * 4, a, cols * 4, cols / 2 * 4, rows, s); /* b = left half of every row */
    colrt_all_gather(m, 0, b, g, n / 2, COLRT_F32, s);         /* g = every rank's b */
    colrt_stream_sync(s);
    int bad = 0;
    for (int q = 0; q < W; q++)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols / 2; c++) {
                size_t i = r * cols + c;
                float e = 0.f;
                for (int p = 0; p < W && i < n / 2; p++) e += val(p, i);
                bad += g[(size_t)q * (n / 2) + r * (cols / 2) + c] != e;
            }
    CHECK_INT(bad, 0);
    free(src), free(a), free(b), free(g);
}

/* ---- the generated program's pattern, 100 steps, the same events ------------------------
 * Two gradient buckets per step; each is written by the caller (a GEMM on
 * the NULL stream), then all-reduced on the comm stream after an event; the
 * caller waits for both before the "optimizer" reads them. */

static void events_loop(colrt_mesh *m, colrt_stream *comm) {
    enum { K = 8, N = 16, STEPS = 100 };
    float A[K * K], B[2][K * N], G[2][K * N];
    colrt_event *ready[2] = {colrt_event_create(), colrt_event_create()};
    colrt_event *done[2] = {colrt_event_create(), colrt_event_create()};
    int bad = 0, notdone = 0;
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < K * K; i++) A[i] = i / K == i % K ? (float)(R + 1) : 0.f; /* (R+1) I */
        for (int j = 0; j < 2; j++) {
            for (int i = 0; i < K * N; i++) B[j][i] = (float)(step + j + i % 3);
            colrt_gemm(NULL, COLRT_F32, 0, 0, K, N, K, 1.f, A, K, 0, B[j], N, 0, 0.f, G[j], N, 0, 1);
            colrt_event_record(ready[j], NULL);
            colrt_stream_wait(comm, ready[j]);
            colrt_all_reduce(m, 0, G[j], G[j], K * N, COLRT_F32, COLRT_SUM, comm);
            colrt_event_record(done[j], comm);
        }
        colrt_stream_wait(NULL, done[0]);
        colrt_stream_wait(NULL, done[1]);
        notdone += !colrt_event_done(done[0]) + !colrt_event_done(done[1]);
        float ranks = (float)(W * (W + 1) / 2); /* sum over ranks of (R+1) */
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < K * N; i++) bad += G[j][i] != ranks * (float)(step + j + i % 3);
    }
    CHECK_INT(bad, 0);
    CHECK_INT(notdone, 0);
    for (int j = 0; j < 2; j++) colrt_event_destroy(ready[j]), colrt_event_destroy(done[j]);
}

/* ---- stream_wait orders a stream after another stream's work ------------------------------ */

static void wait_across_streams(colrt_mesh *m, colrt_stream *comm) {
    const size_t n = 1 << 20;
    colrt_stream *other = colrt_stream_create();
    colrt_event *e = colrt_event_create(), *f = colrt_event_create();
    float *junk = malloc(8 * n * 4), *src = malloc(n * 4), *buf = malloc(n * 4);
    for (size_t i = 0; i < n; i++) src[i] = val(R, i), buf[i] = 1e6f;
    colrt_memset0(junk, 8 * n * 4, other); /* 32 MiB first: other is busy for a while */
    colrt_memcpy(buf, src, n * 4, COLRT_D2D, other);
    colrt_event_record(e, other);
    colrt_stream_wait(comm, e); /* comm's all-reduce must see the copy */
    colrt_all_reduce(m, 0, buf, buf, n, COLRT_F32, COLRT_SUM, comm);
    colrt_event_record(f, comm);
    colrt_stream_wait(NULL, f);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float ex = 0.f;
        for (int p = 0; p < W; p++) ex += val(p, i);
        bad += buf[i] != ex;
    }
    CHECK_INT(bad, 0);
    CHECK(colrt_event_done(e) && colrt_event_done(f));
    /* An event never recorded is complete; waiting on it returns. */
    colrt_event *fresh = colrt_event_create();
    CHECK(colrt_event_done(fresh));
    colrt_stream_wait(NULL, fresh);
    colrt_stream_wait(comm, fresh);
    colrt_event_destroy(fresh);
    colrt_event_destroy(e), colrt_event_destroy(f);
    colrt_stream_destroy(other);
    free(junk), free(src), free(buf);
}

/* ---- destroy finishes queued work ------------------------------------------------------------ */

static void destroy_drains(colrt_mesh *m) {
    colrt_stream *s = colrt_stream_create();
    colrt_event *e = colrt_event_create();
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(R + 1);
    for (int k = 0; k < 3; k++) colrt_all_reduce(m, 0, x, x, 64, COLRT_F32, COLRT_SUM, s);
    colrt_event_record(e, s);
    colrt_event_destroy(e); /* waits for the marker */
    colrt_stream_destroy(s); /* waits for the three all-reduces */
    float ex = (float)(W * (W + 1) / 2);
    for (int k = 1; k < 3; k++) ex *= (float)W;
    CHECK_INT(x[0], ex);
    CHECK_INT(x[63], ex);
    colrt_stream_sync(NULL);
    colrt_stream_destroy(NULL);
}

/* ---- the launch returns before the collective completes ---------------------------------------
 * Rank 0 queues a large all-reduce and records `done` after it; the other
 * ranks join that all-reduce only after a barrier that rank 0 enters once it
 * has checked `done` and done a GEMM of its own. So `done` cannot be complete
 * at the check: the collective cannot finish without them. (On the NULL
 * stream, or with a launch that blocked, rank 0 would never reach the barrier
 * and the watchdog would end the job.) The stream has already run a
 * collective on this axis, so its communicator duplicate exists. */

static void overlap(colrt_mesh *m, colrt_stream *comm) {
    const size_t n = 1 << 22; /* 16 MiB */
    float *g = malloc(n * 4);
    for (size_t i = 0; i < n; i++) g[i] = (float)(R + 1);
    colrt_event *done = colrt_event_create();
    if (R == 0) {
        colrt_all_reduce(m, 0, g, g, n, COLRT_F32, COLRT_SUM, comm);
        colrt_event_record(done, comm);
        CHECK(!colrt_event_done(done));
        enum { D = 96 };
        float *A = malloc(D * D * 4), *C = malloc(D * D * 4);
        for (int i = 0; i < D * D; i++) A[i] = 1.f;
        colrt_gemm(NULL, COLRT_F32, 0, 0, D, D, D, 1.f, A, D, 0, A, D, 0, 0.f, C, D, 0, 1); /* compute meanwhile */
        CHECK_INT(C[D * D - 1], D);
        CHECK(!colrt_event_done(done)); /* still: the peers have not joined */
        free(A), free(C);
        colrt_barrier();
    } else {
        colrt_barrier();
        colrt_all_reduce(m, 0, g, g, n, COLRT_F32, COLRT_SUM, comm);
        colrt_event_record(done, comm);
    }
    colrt_stream_wait(NULL, done);
    CHECK(colrt_event_done(done));
    CHECK_INT(g[0], W * (W + 1) / 2);
    CHECK_INT(g[n - 1], W * (W + 1) / 2);
    colrt_event_destroy(done);
    free(g);
}

/* ---- a waiting worker leaves the caller its core ------------------------------------------------
 * Rank 0 pins its thread to the CPU it is on and creates a stream there (the
 * worker inherits the pin), queues a small and a ring-sized all-reduce whose
 * peers join 0.2 s later (they sleep first), and computes until both are
 * done. The worker shares the caller's CPU all the while: it must take only
 * a sliver of it, waiting. A worker that polled inside MPI took its fair
 * share, about the caller's (checked: with the blocking collectives on the
 * worker the ratio was ~1). CPU times, not wall times, so other load on the
 * machine does not decide it. */

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void worker_yields(colrt_mesh *m) {
    cpu_set_t was, one;
    int cpu = sched_getcpu();
    if (sched_getaffinity(0, sizeof was, &was) || cpu < 0) {
        if (R == 0) printf("worker_yields: no CPU affinity here; skipped\n");
        return;
    }
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (R == 0) CHECK(!sched_setaffinity(0, sizeof one, &one));
    colrt_stream *s = colrt_stream_create();
    const size_t small = 1000, big = (size_t)W << 15; /* MPI's all-reduce; the ring (RING_MIN per rank) */
    float *a = malloc(small * 4), *b = malloc(big * 4);
    for (size_t i = 0; i < small; i++) a[i] = 1.f;
    for (size_t i = 0; i < big; i++) b[i] = 1.f;
    colrt_all_reduce(m, 0, a, a, small, COLRT_F32, COLRT_SUM, s); /* the stream's duplicate, made */
    colrt_stream_sync(s);
    colrt_barrier();
    colrt_event *done = colrt_event_create();
    if (R == 0) {
        colrt_all_reduce(m, 0, a, a, small, COLRT_F32, COLRT_SUM, s);
        colrt_all_reduce(m, 0, b, b, big, COLRT_F32, COLRT_SUM, s);
        colrt_event_record(done, s);
        const double w0 = colrt__stream_worker_cpu_s(s), c0 = thread_cpu_s();
        volatile double x = 0;
        while (!colrt_event_done(done))
            for (int i = 0; i < 100000; i++) x = x * 0.5 + 1.0;
        const double worker = colrt__stream_worker_cpu_s(s) - w0, caller = thread_cpu_s() - c0;
        printf("worker_yields: caller %.3f s CPU, its worker beside it %.4f s while waiting\n", caller, worker);
        CHECK(caller > 0.01);          /* the peers joined 0.2 s later: the caller computed meanwhile */
        CHECK(worker < 0.25 * caller); /* a polling worker: ~caller */
        CHECK(!sched_setaffinity(0, sizeof was, &was));
    } else {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        colrt_all_reduce(m, 0, a, a, small, COLRT_F32, COLRT_SUM, s);
        colrt_all_reduce(m, 0, b, b, big, COLRT_F32, COLRT_SUM, s);
        colrt_event_record(done, s);
    }
    colrt_stream_wait(NULL, done);
    CHECK_INT(a[small - 1], W * W);
    CHECK_INT(b[big - 1], W);
    colrt_event_destroy(done);
    colrt_stream_destroy(s);
    free(a), free(b);
}

/* ---- misuse ends the process with a message (1 rank, in a child) -------------------------------- */

static void null_record(void) { colrt_event_record(NULL, NULL); }
static void null_wait(void) { colrt_stream_wait(NULL, NULL); }

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    W = colrt_world();
    R = colrt_rank();
    colrt_set_timeout(20); /* a hang here is a failure, not a wait */
    int async = colrt__cpu_streams_async();
    if (R == 0) printf("streams on %d ranks: %s\n", W, async ? "worker threads" : "in the caller (sync)");

    colrt_stream *comm = colrt_stream_create();
    colrt_mesh *m1 = colrt_mesh_create(1, (int[]){W});
    for (int t = 0; t < 2; t++) same_as_sync(m1, 0, t ? COLRT_BF16 : COLRT_F32, comm);
    if (W % 2 == 0) {
        colrt_mesh *m2 = colrt_mesh_create(2, (int[]){2, W / 2});
        for (int a = 0; a < 2; a++)
            for (int t = 0; t < 2; t++) same_as_sync(m2, a, t ? COLRT_BF16 : COLRT_F32, comm);
        colrt_mesh_destroy(m2); /* comm holds duplicates of m2's communicators: released here */
    }
    queued_in_order(m1, comm);
    events_loop(m1, comm);
    wait_across_streams(m1, comm);
    destroy_drains(m1);
    if (async && W > 1) overlap(m1, comm);
    if (async && W > 1) worker_yields(m1);
    if (W == 1) {
        expect_death("record a NULL event", null_record, "colrt_event_record: the event is NULL");
        expect_death("wait for a NULL event", null_wait, "colrt_stream_wait: the event is NULL");
    }
    colrt_stream_destroy(comm);

    int fails = check_failures, all = 0;
    colrt_all_reduce(m1, 0, &fails, &all, 1, COLRT_I32, COLRT_SUM, NULL);
    colrt_mesh_destroy(m1);
    if (R == 0) printf("streams on %d ranks: %d failures over all ranks\n", W, all);
    int rc = check_done("test_colrt_streams");
    colrt_finalize();
    return rc || all;
}

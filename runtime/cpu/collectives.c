/*
 * collectives.c — the CPU backend's collectives: MPI's (tuned, blocking)
 * collectives under the watchdog (see common/launch.c), so a dead or hung
 * peer ends the job instead of hanging it. bf16/f16 reduce with
 * user-defined MPI ops that add in f32 and round once per step; AVG is SUM
 * then a scale by 1/n. Each call is checked and resolved to MPI terms in the
 * caller, then run now on the mesh axis's communicator (NULL stream) or
 * queued on the stream's worker (stream.c), on the stream's own duplicate,
 * which posts the same collectives nonblocking and yields its core between
 * tests (coll_wait).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/half.h"
#include "../common/internal.h"
#include "cpu.h"

static MPI_Op op16[2][2]; /* [bf16?][max?] */

/* the loops are kernels.c's (vectorized there) */
#define DEF_OP16(name, t, max)                                                \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {     \
        (void)dt;                                                             \
        colrt__run_reduce16((t), (max), in, inout, *len);                     \
    }
DEF_OP16(sum_bf16, COLRT_BF16, 0)
DEF_OP16(max_bf16, COLRT_BF16, 1)
DEF_OP16(sum_f16, COLRT_F16, 0)
DEF_OP16(max_f16, COLRT_F16, 1)

static void ops_init(void) {
    if (op16[0][0]) return;
    COLRT_MPI(MPI_Op_create(sum_f16, 1, &op16[0][0]));
    COLRT_MPI(MPI_Op_create(max_f16, 1, &op16[0][1]));
    COLRT_MPI(MPI_Op_create(sum_bf16, 1, &op16[1][0]));
    COLRT_MPI(MPI_Op_create(max_bf16, 1, &op16[1][1]));
}

static MPI_Datatype mpi_type(colrt_dtype t) {
    switch (t) {
    case COLRT_F32: return MPI_FLOAT;
    case COLRT_BF16:
    case COLRT_F16: return MPI_UINT16_T;
    case COLRT_I32: return MPI_INT32_T;
    default: colrt_die("collective on unknown dtype %d", (int)t);
    }
}

MPI_Datatype colrt__mpi_type(colrt_dtype t) { return mpi_type(t); }

static MPI_Op mpi_op(colrt_dtype t, colrt_redop op) {
    int max = op == COLRT_MAX;
    if (t == COLRT_BF16 || t == COLRT_F16) {
        ops_init();
        return op16[t == COLRT_BF16][max];
    }
    if (t == COLRT_I32 && op == COLRT_AVG) colrt_die("all-reduce AVG on I32 is not defined; use SUM");
    return max ? MPI_MAX : MPI_SUM;
}

static void check_axis(colrt_mesh *m, int axis, const char *what) {
    colrt__require_init(what);
    if (!m || axis < 0 || axis >= m->naxes)
        colrt_die("%s: mesh axis %d out of range (mesh has %d axes)", what, axis, m ? m->naxes : 0);
}

static int icount(size_t n, const char *what) {
    if (n > INT_MAX) colrt_die("%s: %zu elements exceed MPI's int count; split the buffer", what, n);
    return (int)n;
}

static void scale(void *p, size_t n, colrt_dtype t, float f) {
    for (size_t i = 0; i < n; i++) colrt_st(p, t, (int64_t)i, colrt_ld(p, t, (int64_t)i) * f);
}

/* How this thread waits for its collectives' messages. The caller's thread
 * runs MPI's blocking collectives, which poll until they are done. A
 * stream's worker (colrt__coll_polite, stream.c) posts them nonblocking and
 * tests, and after a few tests gives its core away (sched_yield) between
 * tests: with a core per rank (OMP_NUM_THREADS=1, 2 ranks on 2 cores) a
 * worker that polled inside MPI_Allreduce for its peer's half took the core
 * from the caller beside it, or from the peer's caller, in scheduler slices:
 * 104-214 steps of 500 of gpt2-tiny tp-1x2 took 15-30 ms instead of ~2.5
 * (issue 15; bench/validate/README.md). Yielding removes them (1-2 of 500 in
 * 7 rounds of 8, as without a worker); sleeping between tests (nanosleep) removed them too but
 * added ~0.7 ms to every step of the dp-2 program. Where the worker has a
 * core to itself sched_yield returns at once and the loop polls as MPI would.
 * The caller's progress drives the worker's nonblocking collectives too
 * (Open MPI progresses every request from any thread in MPI). */
static _Thread_local int polite;
enum { POLITE_SPINS = 16 }; /* tests before the first yield: a message already under way */

void colrt__coll_polite(void) { polite = 1; }

static void coll_wait(int n, MPI_Request *r) {
    if (!polite) {
        COLRT_MPI(MPI_Waitall(n, r, MPI_STATUSES_IGNORE));
        return;
    }
    for (unsigned tries = 0;; tries++) {
        int done = 0;
        COLRT_MPI(MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        if (tries >= POLITE_SPINS) sched_yield();
    }
}

static void sendrecv(const void *out, void *in, int count, MPI_Datatype dt, int right, int left, MPI_Comm comm) {
    if (!polite) {
        COLRT_MPI(MPI_Sendrecv(out, count, dt, right, 0, in, count, dt, left, 0, comm, MPI_STATUS_IGNORE));
        return;
    }
    MPI_Request r[2];
    COLRT_MPI(MPI_Irecv(in, count, dt, left, 0, comm, &r[0]));
    COLRT_MPI(MPI_Isend(out, count, dt, right, 0, comm, &r[1]));
    coll_wait(2, r);
}

/* Reduce-scatter as a ring: p - 1 steps, each sends one block of count
 * elements to the next rank and adds the previous rank's partial sum of
 * another block into this rank's (MPI_Reduce_local: the same op), so each rank
 * moves and adds (p - 1) / p of the buffer once; rank r ends with block r.
 * Open MPI 4.1's MPI_Reduce_scatter_block took 1.5-2x the time of an
 * all-reduce of the whole buffer on 2 ranks, every algorithm of its tuned
 * component (124.7M bf16, one core each, loaded; bench/codegen_cpu/README.md),
 * which made a ZeRO-2 step's gradient sync dearer than data parallelism's.
 * 0 when it cannot run (recv overlaps send, or no memory): MPI's then. */
static int ring_reduce_scatter(const colrt_coll *c, MPI_Comm comm) {
    int p, r, es;
    COLRT_MPI(MPI_Comm_size(comm, &p));
    COLRT_MPI(MPI_Comm_rank(comm, &r));
    COLRT_MPI(MPI_Type_size(c->dt, &es));
    const size_t blk = (size_t)c->count * (size_t)es;
    const char *send = c->send;
    char *recv = c->recv;
    if (p < 2 || blk == 0 || (recv < send + blk * (size_t)p && send < recv + blk)) return 0;
    char *tmp = p > 2 ? malloc(blk) : NULL;
    if (p > 2 && !tmp) return 0;
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    const char *out = send + blk * (size_t)((r + p - 1) % p); /* step 0 sends this rank's own block r - 1 */
    for (int st = 0; st < p - 1; st++) {
        char *in = (p - 2 - st) % 2 == 0 ? recv : tmp; /* the last step receives into recv */
        int b = ((r - 2 - st) % p + p) % p;            /* the block received: its sum so far, left's */
        sendrecv(out, in, c->count, c->dt, right, left, comm);
        COLRT_MPI(MPI_Reduce_local(send + blk * (size_t)b, in, c->count, c->dt, c->op));
        out = in;
    }
    free(tmp);
    return 1;
}

/* All-reduce as a ring over recv (the send buffer copied in first unless in
 * place): a reduce-scatter in place, after which rank r holds block r + 1
 * summed, then an all-gather of the summed blocks around the same ring. Each
 * block is reduced on one rank, so every rank ends with the same values.
 * 124.7M bf16 on 2 ranks (loaded, one core each): MPI_Allreduce 0.8-0.9 s,
 * a reduce-scatter and an all-gather of it 0.2-0.3 s each. Only for
 * buffers of at least RING_MIN elements a rank that split evenly: small
 * all-reduces (norms, the loss) keep MPI's latency-bound algorithms. 0 when
 * it does not run. */
enum { RING_MIN = 1 << 14 };
static int ring_all_reduce(const colrt_coll *c, MPI_Comm comm) {
    int p, r, es;
    COLRT_MPI(MPI_Comm_size(comm, &p));
    COLRT_MPI(MPI_Comm_rank(comm, &r));
    if (p < 2 || c->count % p || c->count / p < RING_MIN) return 0;
    COLRT_MPI(MPI_Type_size(c->dt, &es));
    const int n = c->count / p;
    const size_t blk = (size_t)n * (size_t)es;
    char *buf = c->recv, *tmp = malloc(blk);
    if (!tmp) return 0;
    if (c->send != c->recv) memcpy(buf, c->send, blk * (size_t)p);
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int st = 0; st < p - 1; st++) { /* send the block summed last step (first: this rank's own) */
        int sb = ((r - st) % p + p) % p, rb = ((r - st - 1) % p + p) % p;
        sendrecv(buf + blk * (size_t)sb, tmp, n, c->dt, right, left, comm);
        COLRT_MPI(MPI_Reduce_local(tmp, buf + blk * (size_t)rb, n, c->dt, c->op));
    }
    for (int st = 0; st < p - 1; st++) { /* pass the summed blocks on: first block r + 1 */
        int sb = ((r + 1 - st) % p + p) % p, rb = ((r - st) % p + p) % p;
        sendrecv(buf + blk * (size_t)sb, buf + blk * (size_t)rb, n, c->dt, right, left, comm);
    }
    free(tmp);
    return 1;
}

/* The bytes of a collective's larger buffer: the whole tensor it reduces,
 * gathers, scatters or exchanges (COLRT_PROFILE's figure). */
static double coll_bytes(const colrt_coll *c, MPI_Comm comm) {
    int p, es;
    COLRT_MPI(MPI_Comm_size(comm, &p));
    COLRT_MPI(MPI_Type_size(c->dt, &es));
    double b = (double)c->count * es;
    return c->kind == COLL_ALL_REDUCE || c->kind == COLL_BROADCAST ? b : b * p;
}

/* Runs on the caller's thread or a stream's worker: touches only c's buffers.
 * COLRT_PROFILE=1: its wall time here, by kind (colrt__profile_coll). */
void colrt__coll_run(const colrt_coll *c, MPI_Comm comm) {
    const double t0 = colrt_profile_enabled() ? colrt__profile_now() : -1;
    colrt__coll_begin(c->what, c->axis);
    const void *send = c->send == c->recv ? MPI_IN_PLACE : c->send;
    MPI_Request r = MPI_REQUEST_NULL;
    switch (c->kind) {
    case COLL_ALL_REDUCE:
        if (ring_all_reduce(c, comm)) break;
        if (polite) COLRT_MPI(MPI_Iallreduce(send, c->recv, c->count, c->dt, c->op, comm, &r));
        else COLRT_MPI(MPI_Allreduce(send, c->recv, c->count, c->dt, c->op, comm));
        break;
    case COLL_ALL_GATHER:
        if (polite) COLRT_MPI(MPI_Iallgather(c->send, c->count, c->dt, c->recv, c->count, c->dt, comm, &r));
        else COLRT_MPI(MPI_Allgather(c->send, c->count, c->dt, c->recv, c->count, c->dt, comm));
        break;
    case COLL_REDUCE_SCATTER:
        if (ring_reduce_scatter(c, comm)) break;
        if (polite) COLRT_MPI(MPI_Ireduce_scatter_block(c->send, c->recv, c->count, c->dt, c->op, comm, &r));
        else COLRT_MPI(MPI_Reduce_scatter_block(c->send, c->recv, c->count, c->dt, c->op, comm));
        break;
    case COLL_ALL_TO_ALL:
        if (polite) COLRT_MPI(MPI_Ialltoall(c->send, c->count, c->dt, c->recv, c->count, c->dt, comm, &r));
        else COLRT_MPI(MPI_Alltoall(c->send, c->count, c->dt, c->recv, c->count, c->dt, comm));
        break;
    case COLL_BROADCAST:
        if (polite) COLRT_MPI(MPI_Ibcast(c->recv, c->count, c->dt, c->root, comm, &r));
        else COLRT_MPI(MPI_Bcast(c->recv, c->count, c->dt, c->root, comm));
        break;
    }
    if (r != MPI_REQUEST_NULL) coll_wait(1, &r);
    colrt__coll_end();
    if (c->avg != 0.f) scale(c->recv, (size_t)c->count, c->t, c->avg);
    if (t0 >= 0) colrt__profile_coll(c->what, coll_bytes(c, comm), colrt__profile_now() - t0);
}

void colrt_all_reduce(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_redop op, colrt_stream *s) {
    check_axis(m, axis, "all_reduce");
    colrt_coll c = {.kind = COLL_ALL_REDUCE, .what = "all_reduce", .axis = axis, .send = send, .recv = recv,
                    .count = icount(count, "all_reduce"), .dt = mpi_type(t), .op = mpi_op(t, op), .t = t};
    if (op == COLRT_AVG) c.avg = 1.f / (float)m->sizes[axis];
    colrt__stream_coll(s, m, &c);
}

void colrt_all_gather(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_stream *s) {
    check_axis(m, axis, "all_gather");
    colrt_coll c = {.kind = COLL_ALL_GATHER, .what = "all_gather", .axis = axis, .send = send, .recv = recv,
                    .count = icount(count, "all_gather"), .dt = mpi_type(t), .t = t};
    colrt__stream_coll(s, m, &c);
}

void colrt_reduce_scatter(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                          colrt_redop op, colrt_stream *s) {
    check_axis(m, axis, "reduce_scatter");
    icount(count * (size_t)m->sizes[axis], "reduce_scatter");
    colrt_coll c = {.kind = COLL_REDUCE_SCATTER, .what = "reduce_scatter", .axis = axis, .send = send, .recv = recv,
                    .count = (int)count, .dt = mpi_type(t), .op = mpi_op(t, op), .t = t};
    if (op == COLRT_AVG) c.avg = 1.f / (float)m->sizes[axis];
    colrt__stream_coll(s, m, &c);
}

void colrt_all_to_all(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_stream *s) {
    check_axis(m, axis, "all_to_all");
    colrt_coll c = {.kind = COLL_ALL_TO_ALL, .what = "all_to_all", .axis = axis, .send = send, .recv = recv,
                    .count = icount(count, "all_to_all"), .dt = mpi_type(t), .t = t};
    colrt__stream_coll(s, m, &c);
}

void colrt_broadcast(colrt_mesh *m, int axis, void *buf, size_t count, colrt_dtype t, int root, colrt_stream *s) {
    check_axis(m, axis, "broadcast");
    if (root < 0 || root >= m->sizes[axis])
        colrt_die("broadcast: root %d out of range for mesh axis %d of size %d", root, axis, m->sizes[axis]);
    colrt_coll c = {.kind = COLL_BROADCAST, .what = "broadcast", .axis = axis, .send = buf, .recv = buf,
                    .count = icount(count, "broadcast"), .dt = mpi_type(t), .root = root, .t = t};
    colrt__stream_coll(s, m, &c);
}

MPI_Op colrt__mpi_sum(colrt_dtype t) { return mpi_op(t, COLRT_SUM); }

/*
 * collectives.c — the CUDA backend's collectives over NCCL. A mesh creates a
 * world communicator (the unique id broadcast over MPI) and splits it into
 * one communicator per axis with ncclCommSplit, and each stream that runs
 * collectives its own duplicates of them. Every live communicator is
 * registered, so host-side waits can poll ncclCommGetAsyncError and, on an
 * error or past the timeout, ncclCommAbort them all before ending the job.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "cuda.h"

#define MAX_COMMS 64
static ncclComm_t live[MAX_COMMS];
static int nlive;

static void reg(ncclComm_t c) {
    if (nlive == MAX_COMMS) colrt_die("too many NCCL communicators (more than %d)", MAX_COMMS);
    live[nlive++] = c;
}

static void unreg(ncclComm_t c) {
    for (int i = 0; i < nlive; i++)
        if (live[i] == c) live[i] = live[--nlive];
}

static void abort_all(void) {
    for (int i = 0; i < nlive; i++) ncclCommAbort(live[i]);
    nlive = 0;
}

void colrt__nccl_fail(ncclResult_t e, const char *call, const char *file, int line) {
    const char *msg = ncclGetErrorString(e), *last = ncclGetLastError(NULL);
    abort_all();
    colrt_die("%s failed: %s%s%s (%s:%d)", call, msg, last && *last ? ": " : "", last ? last : "", file, line);
}

void colrt__cuda_wait(int (*done)(void *), void *arg, const char *what) {
    double t0 = MPI_Wtime();
    for (long spins = 0; !done(arg); spins++) {
        for (int i = 0; i < nlive; i++) {
            ncclResult_t ae = ncclSuccess;
            ncclCommGetAsyncError(live[i], &ae);
            if (ae != ncclSuccess && ae != ncclInProgress) {
                const char *msg = ncclGetErrorString(ae);
                abort_all();
                colrt_die("%s: NCCL reported an asynchronous error: %s; communicators aborted", what, msg);
            }
        }
        if (MPI_Wtime() - t0 > colrt__g.timeout) {
            abort_all();
            colrt_die("%s did not complete within %.1f s: a peer rank died or hung; NCCL communicators aborted", what,
                      colrt__g.timeout);
        }
        if (spins > 100) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

void colrt__backend_mesh_init(colrt_mesh *m) {
    ncclUniqueId id;
    if (colrt__g.rank == 0) COLRT_NCCL(ncclGetUniqueId(&id));
    MPI_Request r;
    COLRT_MPI(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "NCCL id broadcast", -1);
    ncclComm_t world;
    COLRT_NCCL(ncclCommInitRank(&world, colrt__g.world, id, colrt__g.rank));
    for (int a = 0; a < m->naxes; a++) {
        int color = 0;
        for (int b = 0; b < m->naxes; b++) color = color * m->sizes[b] + (b == a ? 0 : m->coords[b]);
        ncclComm_t c;
        COLRT_NCCL(ncclCommSplit(world, color, m->coords[a], &c, NULL));
        m->be[a] = c;
        reg(c);
    }
    COLRT_NCCL(ncclCommDestroy(world));
}

/* A stream's own communicators, as on the CPU backend: a collective on a
 * non-NULL stream runs on a duplicate of its axis communicator, made at the
 * stream's first collective on that axis (ncclCommSplit over the axis, so
 * every rank of the axis makes it at the same point of the program, as for
 * any collective). Collectives on different streams then never share a
 * communicator, which NCCL needs to promise progress when they overlap. */
typedef struct StreamComm {
    colrt_mesh *m;
    int axis;
    cudaStream_t s;
    ncclComm_t c;
} StreamComm;
static StreamComm scomms[MAX_COMMS];
static int nscomms;

static void drop_stream_comms(colrt_mesh *m, cudaStream_t s) {
    for (int i = 0; i < nscomms;) {
        if ((m && scomms[i].m == m) || (s && scomms[i].s == s)) {
            unreg(scomms[i].c);
            COLRT_NCCL(ncclCommDestroy(scomms[i].c));
            scomms[i] = scomms[--nscomms];
        } else {
            i++;
        }
    }
}

void colrt__cuda_stream_gone(cudaStream_t s) { drop_stream_comms(NULL, s); }

void colrt__backend_mesh_destroy(colrt_mesh *m) {
    drop_stream_comms(m, NULL);
    for (int a = 0; a < m->naxes; a++)
        for (int i = 0; m->pair_be[a] && i < m->sizes[a]; i++)
            if (m->pair_be[a][i]) {
                unreg((ncclComm_t)m->pair_be[a][i]);
                COLRT_NCCL(ncclCommDestroy((ncclComm_t)m->pair_be[a][i]));
                m->pair_be[a][i] = NULL;
            }
    for (int a = 0; a < m->naxes; a++) {
        ncclComm_t c = (ncclComm_t)m->be[a];
        unreg(c);
        COLRT_NCCL(ncclCommDestroy(c));
    }
}

static ncclComm_t axis_comm(colrt_mesh *m, int axis, const char *what) {
    colrt__require_init(what);
    if (!m || axis < 0 || axis >= m->naxes)
        colrt_die("%s: mesh axis %d out of range (mesh has %d axes)", what, axis, m ? m->naxes : 0);
    return (ncclComm_t)m->be[axis];
}

static ncclComm_t stream_comm(colrt_mesh *m, int axis, colrt_stream *s, const char *what) {
    ncclComm_t base = axis_comm(m, axis, what);
    cudaStream_t st = colrt__cuda_stream(s);
    if (!st) return base;
    for (int i = 0; i < nscomms; i++)
        if (scomms[i].m == m && scomms[i].axis == axis && scomms[i].s == st) return scomms[i].c;
    if (nscomms == MAX_COMMS) colrt_die("%s: too many stream communicators (more than %d)", what, MAX_COMMS);
    ncclComm_t c;
    COLRT_NCCL(ncclCommSplit(base, 0, m->coords[axis], &c, NULL));
    reg(c);
    scomms[nscomms++] = (StreamComm){m, axis, st, c};
    return c;
}

static ncclDataType_t nccl_type(colrt_dtype t) {
    switch (t) {
    case COLRT_F32: return ncclFloat32;
    case COLRT_BF16: return ncclBfloat16;
    case COLRT_F16: return ncclFloat16;
    case COLRT_I32: return ncclInt32;
    default: colrt_die("collective on unknown dtype %d", (int)t);
    }
}

static ncclRedOp_t nccl_op(colrt_dtype t, colrt_redop op) {
    if (t == COLRT_I32 && op == COLRT_AVG) colrt_die("all-reduce AVG on I32 is not defined; use SUM");
    return op == COLRT_SUM ? ncclSum : op == COLRT_AVG ? ncclAvg : ncclMax;
}

void colrt_all_reduce(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_redop op, colrt_stream *s) {
    ncclComm_t c = stream_comm(m, axis, s, "all_reduce");
    COLRT_NCCL(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(t, op), c, colrt__cuda_stream(s)));
}

void colrt_all_gather(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_stream *s) {
    ncclComm_t c = stream_comm(m, axis, s, "all_gather");
    COLRT_NCCL(ncclAllGather(send, recv, count, nccl_type(t), c, colrt__cuda_stream(s)));
}

void colrt_reduce_scatter(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                          colrt_redop op, colrt_stream *s) {
    ncclComm_t c = stream_comm(m, axis, s, "reduce_scatter");
    COLRT_NCCL(ncclReduceScatter(send, recv, count, nccl_type(t), nccl_op(t, op), c, colrt__cuda_stream(s)));
}

void colrt_all_to_all(colrt_mesh *m, int axis, const void *send, void *recv, size_t count, colrt_dtype t,
                      colrt_stream *s) {
    ncclComm_t c = stream_comm(m, axis, s, "all_to_all");
    size_t bytes = count * colrt_dtype_size(t);
    COLRT_NCCL(ncclGroupStart());
    for (int p = 0; p < m->sizes[axis]; p++) {
        COLRT_NCCL(ncclSend((const char *)send + p * bytes, count, nccl_type(t), p, c, colrt__cuda_stream(s)));
        COLRT_NCCL(ncclRecv((char *)recv + p * bytes, count, nccl_type(t), p, c, colrt__cuda_stream(s)));
    }
    COLRT_NCCL(ncclGroupEnd());
}

void colrt_broadcast(colrt_mesh *m, int axis, void *buf, size_t count, colrt_dtype t, int root, colrt_stream *s) {
    ncclComm_t c = stream_comm(m, axis, s, "broadcast");
    if (root < 0 || root >= m->sizes[axis])
        colrt_die("broadcast: root %d out of range for mesh axis %d of size %d", root, axis, m->sizes[axis]);
    COLRT_NCCL(ncclBroadcast(buf, buf, count, nccl_type(t), root, c, colrt__cuda_stream(s)));
}

/* ---- point-to-point ----------------------------------------------------------------
 * Each pair of ranks along an axis gets a two-rank NCCL communicator at its
 * first exchange (the lower coordinate makes the id and sends it over the
 * pair's MPI communicator), so pipeline transfers never queue behind a
 * collective on the axis's communicator. A transfer is ncclSend/ncclRecv in
 * one group on the stream; host-side waits (colrt_stream_sync, ...) poll
 * every registered communicator, these included, under the timeout. */
void colrt__backend_pair_init(colrt_mesh *m, int axis, int peer, MPI_Comm pair) {
    int me = m->coords[axis] < peer ? 0 : 1;
    ncclUniqueId id;
    MPI_Request r;
    if (me == 0) {
        COLRT_NCCL(ncclGetUniqueId(&id));
        COLRT_MPI(MPI_Isend(&id, sizeof id, MPI_BYTE, 1, 1, pair, &r));
    } else {
        COLRT_MPI(MPI_Irecv(&id, sizeof id, MPI_BYTE, 0, 1, pair, &r));
    }
    colrt__mpi_wait(&r, "NCCL id exchange for a point-to-point communicator", axis);
    ncclComm_t c;
    COLRT_NCCL(ncclCommInitRank(&c, 2, id, me));
    reg(c);
    m->pair_be[axis][peer] = c;
}

void colrt_sendrecv(colrt_mesh *m, int axis, int send_peer, const void *send, size_t send_count, int recv_peer,
                    void *recv, size_t recv_count, colrt_dtype t, colrt_stream *s) {
    const char *call = send_peer >= 0 && recv_peer >= 0 ? "sendrecv" : send_peer >= 0 ? "send" : "recv";
    if (send_peer < 0 && recv_peer < 0) colrt_die("sendrecv: neither a send nor a receive (both peers are -1)");
    if (send_peer >= 0) colrt__pair_comm(m, axis, send_peer, call);
    if (recv_peer >= 0) colrt__pair_comm(m, axis, recv_peer, call);
    cudaStream_t st = colrt__cuda_stream(s);
    COLRT_NCCL(ncclGroupStart());
    if (recv_peer >= 0)
        COLRT_NCCL(ncclRecv(recv, recv_count, nccl_type(t), colrt__pair_peer_rank(m, axis, recv_peer),
                            (ncclComm_t)m->pair_be[axis][recv_peer], st));
    if (send_peer >= 0)
        COLRT_NCCL(ncclSend(send, send_count, nccl_type(t), colrt__pair_peer_rank(m, axis, send_peer),
                            (ncclComm_t)m->pair_be[axis][send_peer], st));
    COLRT_NCCL(ncclGroupEnd());
}

void colrt_sendrecv_batch(colrt_mesh *m, int axis, const colrt_p2p_op *ops, int n, colrt_dtype t, colrt_stream *s) {
    if (n < 1 || n > COLRT_P2P_BATCH_MAX) colrt_die("sendrecv_batch: %d transfers (1 to %d)", n, COLRT_P2P_BATCH_MAX);
    for (int i = 0; i < n; i++) {
        if (ops[i].peer < 0) colrt_die("sendrecv_batch: peer coordinate %d on mesh axis %d is not a rank's", ops[i].peer, axis);
        colrt__pair_comm(m, axis, ops[i].peer, ops[i].send ? "send" : "recv");
    }
    cudaStream_t st = colrt__cuda_stream(s);
    COLRT_NCCL(ncclGroupStart());
    for (int pass = 0; pass < 2; pass++) /* the receives first, then the sends, each in order */
        for (int i = 0; i < n; i++) {
            if (!ops[i].send != !pass) continue;
            ncclComm_t c = (ncclComm_t)m->pair_be[axis][ops[i].peer];
            int peer = colrt__pair_peer_rank(m, axis, ops[i].peer);
            if (pass) COLRT_NCCL(ncclSend(ops[i].buf, ops[i].count, nccl_type(t), peer, c, st));
            else COLRT_NCCL(ncclRecv(ops[i].buf, ops[i].count, nccl_type(t), peer, c, st));
        }
    COLRT_NCCL(ncclGroupEnd());
}

void colrt_send(colrt_mesh *m, int axis, int peer, const void *buf, size_t count, colrt_dtype t, colrt_stream *s) {
    if (peer < 0) colrt_die("send: peer coordinate %d on mesh axis %d is not a rank's", peer, axis);
    colrt_sendrecv(m, axis, peer, buf, count, -1, NULL, 0, t, s);
}

void colrt_recv(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t, colrt_stream *s) {
    if (peer < 0) colrt_die("recv: peer coordinate %d on mesh axis %d is not a rank's", peer, axis);
    colrt_sendrecv(m, axis, -1, NULL, 0, peer, buf, count, t, s);
}

void colrt_pair_all_reduce(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t,
                           colrt_stream *s) {
    colrt__pair_comm(m, axis, peer, "pair_all_reduce");
    COLRT_NCCL(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, (ncclComm_t)m->pair_be[axis][peer],
                             colrt__cuda_stream(s)));
}

/*
 * p2p.c — the CPU backend's point-to-point transfers (colrt_send,
 * colrt_recv, colrt_sendrecv): MPI_Irecv and MPI_Isend on the pair's own
 * communicator (common/p2p.c), then one MPI_Waitall under the watchdog, so
 * a neighbour that died or never posts its half ends the job naming the
 * transfer and the peer. Runs in the caller, after the stream's earlier
 * work (colrt__stream_order): a pipeline's transfers sit between kernels,
 * which run in the caller too. colrt_pair_all_reduce: MPI_Allreduce on the
 * pair's communicator, likewise.
 */
#include <limits.h>

#include "cpu.h"

static int icount(size_t n, const char *what) {
    if (n > INT_MAX) colrt_die("%s: %zu elements exceed MPI's int count; split the buffer", what, n);
    return (int)n;
}

/* COLRT_PROFILE=1: a transfer's wall time since t0, by kind (a literal) */
static void p2p_profile(const char *kind, double count, MPI_Datatype dt, double t0) {
    int es;
    COLRT_MPI(MPI_Type_size(dt, &es));
    colrt__profile_coll(kind, count * es, colrt__profile_now() - t0);
}

void colrt_sendrecv(colrt_mesh *m, int axis, int send_peer, const void *send, size_t send_count, int recv_peer,
                    void *recv, size_t recv_count, colrt_dtype t, colrt_stream *s) {
    const char *call = send_peer >= 0 && recv_peer >= 0 ? "sendrecv" : send_peer >= 0 ? "send" : "recv";
    if (send_peer < 0 && recv_peer < 0) colrt_die("sendrecv: neither a send nor a receive (both peers are -1)");
    MPI_Datatype dt = colrt__mpi_type(t);
    MPI_Comm cs = send_peer >= 0 ? colrt__pair_comm(m, axis, send_peer, call) : MPI_COMM_NULL;
    MPI_Comm cr = recv_peer >= 0 ? colrt__pair_comm(m, axis, recv_peer, call) : MPI_COMM_NULL;
    int ns = send_peer >= 0 ? icount(send_count, call) : 0, nr = recv_peer >= 0 ? icount(recv_count, call) : 0;
    if ((ns && !send) || (nr && !recv)) colrt_die("%s: a NULL buffer for %d elements", call, ns ? ns : nr);
    colrt__stream_order(s);
    const double t0 = colrt_profile_enabled() ? colrt__profile_now() : -1;
    MPI_Request r[2];
    int n = 0;
    if (recv_peer >= 0)
        COLRT_MPI(MPI_Irecv(recv, nr, dt, colrt__pair_peer_rank(m, axis, recv_peer), 0, cr, &r[n++]));
    if (send_peer >= 0)
        COLRT_MPI(MPI_Isend(send, ns, dt, colrt__pair_peer_rank(m, axis, send_peer), 0, cs, &r[n++]));
    colrt__coll_begin(colrt__p2p_what(call, send_peer, recv_peer), axis);
    COLRT_MPI(MPI_Waitall(n, r, MPI_STATUSES_IGNORE));
    colrt__coll_end();
    if (t0 >= 0) p2p_profile(call, (ns > nr ? ns : nr), dt, t0);
}

void colrt_sendrecv_batch(colrt_mesh *m, int axis, const colrt_p2p_op *ops, int n, colrt_dtype t, colrt_stream *s) {
    if (n < 1 || n > COLRT_P2P_BATCH_MAX) colrt_die("sendrecv_batch: %d transfers (1 to %d)", n, COLRT_P2P_BATCH_MAX);
    MPI_Datatype dt = colrt__mpi_type(t);
    MPI_Request r[COLRT_P2P_BATCH_MAX];
    int nr = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].peer < 0) colrt_die("sendrecv_batch: peer coordinate %d on mesh axis %d is not a rank's", ops[i].peer, axis);
        if (!ops[i].buf && ops[i].count) colrt_die("sendrecv_batch: a NULL buffer for %zu elements", ops[i].count);
        colrt__pair_comm(m, axis, ops[i].peer, ops[i].send ? "send" : "recv");
    }
    colrt__stream_order(s);
    const double t0 = colrt_profile_enabled() ? colrt__profile_now() : -1;
    size_t most = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].count > most) most = ops[i].count;
    for (int pass = 0; pass < 2; pass++) /* the receives first, then the sends, each in order */
        for (int i = 0; i < n; i++) {
            if (!ops[i].send != !pass) continue;
            MPI_Comm c = colrt__pair_comm(m, axis, ops[i].peer, pass ? "send" : "recv");
            int cnt = icount(ops[i].count, "sendrecv_batch"), peer = colrt__pair_peer_rank(m, axis, ops[i].peer);
            if (pass) COLRT_MPI(MPI_Isend(ops[i].buf, cnt, dt, peer, 0, c, &r[nr++]));
            else COLRT_MPI(MPI_Irecv(ops[i].buf, cnt, dt, peer, 0, c, &r[nr++]));
        }
    colrt__coll_begin(colrt__p2p_what("sendrecv_batch", ops[0].send ? ops[0].peer : -1, ops[0].send ? -1 : ops[0].peer), axis);
    COLRT_MPI(MPI_Waitall(nr, r, MPI_STATUSES_IGNORE));
    colrt__coll_end();
    if (t0 >= 0) p2p_profile("sendrecv_batch", (double)most, dt, t0);
}

void colrt_send(colrt_mesh *m, int axis, int peer, const void *buf, size_t count, colrt_dtype t, colrt_stream *s) {
    if (peer < 0) colrt_die("send: peer coordinate %d on mesh axis %d is not a rank's", peer, axis);
    colrt_sendrecv(m, axis, peer, buf, count, -1, NULL, 0, t, s);
}

void colrt_recv(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t, colrt_stream *s) {
    if (peer < 0) colrt_die("recv: peer coordinate %d on mesh axis %d is not a rank's", peer, axis);
    colrt_sendrecv(m, axis, -1, NULL, 0, peer, buf, count, t, s);
}

void colrt_pair_all_reduce(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t, colrt_stream *s) {
    MPI_Comm c = colrt__pair_comm(m, axis, peer, "pair_all_reduce");
    int n = icount(count, "pair_all_reduce");
    MPI_Datatype dt = colrt__mpi_type(t);
    MPI_Op op = colrt__mpi_sum(t);
    colrt__stream_order(s);
    const double t0 = colrt_profile_enabled() ? colrt__profile_now() : -1;
    colrt__coll_begin(colrt__p2p_what("pair_all_reduce", peer, -1), axis);
    COLRT_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, n, dt, op, c));
    colrt__coll_end();
    if (t0 >= 0) p2p_profile("pair_all_reduce", n, dt, t0);
}

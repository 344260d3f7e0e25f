/*
 * p2p.c — what both backends' point-to-point calls share: the communicator
 * of each pair of ranks along a mesh axis (pipeline neighbours), made by
 * the two ranks alone at their first exchange with MPI_Comm_create_group
 * over the axis's communicator, under the watchdog, then handed to the
 * backend (the CUDA one builds a two-rank NCCL communicator over it); and
 * the names the watchdog gives a transfer that does not finish.
 * Takes: a mesh, an axis, a peer's coordinate. Gives: MPI communicators
 * cached in the mesh (colrt_mesh.pair), freed with it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

MPI_Comm colrt__pair_comm(colrt_mesh *m, int axis, int peer, const char *what) {
    colrt__require_init(what);
    if (!m || axis < 0 || axis >= m->naxes)
        colrt_die("%s: mesh axis %d out of range (mesh has %d axes)", what, axis, m ? m->naxes : 0);
    int n = m->sizes[axis], me = m->coords[axis];
    if (peer < 0 || peer >= n || peer == me)
        colrt_die("%s: peer coordinate %d on mesh axis %d (size %d) is not another rank's; this rank is at %d",
                  what, peer, axis, n, me);
    if (!m->pair[axis]) {
        m->pair[axis] = malloc(sizeof(MPI_Comm) * (size_t)n);
        m->pair_be[axis] = calloc((size_t)n, sizeof(void *));
        if (!m->pair[axis] || !m->pair_be[axis]) colrt_die("%s: out of memory", what);
        for (int i = 0; i < n; i++) m->pair[axis][i] = MPI_COMM_NULL;
    }
    if (m->pair[axis][peer] != MPI_COMM_NULL) return m->pair[axis][peer];
    /* The axis communicator ranks by coordinate (colrt_mesh_create), so
     * the pair's group is the two coordinates, the lower first. */
    MPI_Group all, two;
    int ranks[2] = {me < peer ? me : peer, me < peer ? peer : me};
    COLRT_MPI(MPI_Comm_group(m->comm[axis], &all));
    COLRT_MPI(MPI_Group_incl(all, 2, ranks, &two));
    MPI_Comm c;
    char what_c[128]; /* lives while the watchdog may read it: until colrt__coll_end */
    snprintf(what_c, sizeof what_c, "%s: making the communicator with coordinate %d", what, peer);
    colrt__coll_begin(what_c, axis);
    COLRT_MPI(MPI_Comm_create_group(m->comm[axis], two, 0, &c));
    colrt__coll_end();
    COLRT_MPI(MPI_Group_free(&two));
    COLRT_MPI(MPI_Group_free(&all));
    COLRT_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    m->pair[axis][peer] = c;
    colrt__backend_pair_init(m, axis, peer, c);
    return c;
}

void colrt__pair_comms_free(colrt_mesh *m) {
    for (int a = 0; a < m->naxes; a++) {
        for (int i = 0; m->pair[a] && i < m->sizes[a]; i++)
            if (m->pair[a][i] != MPI_COMM_NULL) COLRT_MPI(MPI_Comm_free(&m->pair[a][i]));
        free(m->pair[a]);
        free(m->pair_be[a]);
        m->pair[a] = NULL;
        m->pair_be[a] = NULL;
    }
}

const char *colrt__p2p_what(const char *call, int send_peer, int recv_peer) {
    static _Thread_local char buf[96];
    if (send_peer >= 0 && recv_peer >= 0)
        snprintf(buf, sizeof buf, "%s (send to coordinate %d, receive from %d)", call, send_peer, recv_peer);
    else if (send_peer >= 0)
        snprintf(buf, sizeof buf, "%s %s coordinate %d", call, strcmp(call, "send") ? "with" : "to", send_peer);
    else
        snprintf(buf, sizeof buf, "%s from coordinate %d", call, recv_peer);
    return buf;
}

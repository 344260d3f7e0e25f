/*
 * internal.h — what the backend-independent part of colrt (common/) and the
 * backends (cpu/, cuda/) share: process state, the mesh, MPI error checking,
 * and the hooks each backend implements. Not installed; generated code sees
 * only colossal/colrt.h.
 */
#ifndef COLRT_INTERNAL_H
#define COLRT_INTERNAL_H

#include <mpi.h>

#include "colossal/colrt.h"

typedef struct colrt_state {
    int inited, we_init_mpi;
    int thread_multiple; /* MPI gave MPI_THREAD_MULTIPLE: collectives may run on stream threads */
    int rank, world, local_rank, local_size;
    double timeout; /* seconds a collective may take before the job ends */
    int timeout_set; /* colrt_set_timeout was called: hints do not change it */
    char host[256];
} colrt_state;
extern colrt_state colrt__g;

struct colrt_mesh {
    int naxes, sizes[COLRT_MAX_AXES], coords[COLRT_MAX_AXES];
    MPI_Comm comm[COLRT_MAX_AXES]; /* one per axis, ranks ordered by coordinate */
    void *be[COLRT_MAX_AXES];      /* backend communicators (NCCL) */
    /* point-to-point (common/p2p.c): per axis, per peer coordinate, the
     * pair's communicator (NULL array, MPI_COMM_NULL entry: not made yet)
     * and its backend communicator (NCCL) */
    MPI_Comm *pair[COLRT_MAX_AXES];
    void **pair_be[COLRT_MAX_AXES];
};

/* MPI calls: a failure names the call, the MPI error string, rank and host, then aborts. */
void colrt__mpi_fail(int rc, const char *call, const char *file, int line);
#define COLRT_MPI(call)                                                   \
    do {                                                                  \
        int _rc = (call);                                                 \
        if (_rc != MPI_SUCCESS) colrt__mpi_fail(_rc, #call, __FILE__, __LINE__); \
    } while (0)

/* COLRT_PROFILE=1 (profile.c): a monotonic clock in seconds, and one
 * collective or point-to-point call's wall time on the thread that ran it, by
 * kind (a string literal: "all_reduce", "send", ...), with the bytes of its
 * larger buffer; thread-safe (stream workers call it). */
double colrt__profile_now(void);
void colrt__profile_coll(const char *kind, double bytes, double seconds);

/* Brackets a blocking collective: past the timeout inside it, the watchdog
 * ends the job naming `what` and the mesh axis (-1: the world). Each thread
 * that runs collectives (the caller, a CPU stream's worker) has its own
 * watchdog slot, claimed at its first collective; a thread that ends calls
 * colrt__coll_thread_exit to give it back. `who`, when a thread names
 * itself with colrt__coll_thread_name before its first collective, is
 * added to the timeout message ("on stream 2's worker thread"). */
void colrt__coll_begin(const char *what, int axis);
void colrt__coll_end(void);
void colrt__coll_thread_name(const char *who);
void colrt__coll_thread_exit(void);
/* Waits for req under the watchdog. */
void colrt__mpi_wait(MPI_Request *req, const char *what, int axis);
void colrt__require_init(const char *fn);

/* files.c. Writes path atomically (temporary in the same directory, fsync,
 * rename); with die_half writes half of the temporary and exits 42 (fault
 * injection). The temporary is path.tmp with fixed_tmp (checkpoints: a retry
 * overwrites a killed save's, and the names derive from the manifest's),
 * else a hidden name unique to the process. 0, or -1 with errno set and no
 * temporary left. */
int colrt__write_atomic(const char *path, const void *data, size_t n, int die_half, int fixed_tmp);
/* Opens a regular file (a directory, FIFO or device is refused without
 * blocking) and gives its size; -1 with a message. */
int colrt__open_regular(const char *path, int64_t *size, char *err, size_t errlen);
/* A whole regular file of at most max bytes, NUL-terminated (malloc); NULL with a message. */
char *colrt__read_regular(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* Backend hooks. */
extern const int colrt__device_is_host; /* 1: device pointers are host pointers */
void colrt__backend_init(void);
void colrt__backend_finalize(void);
void colrt__backend_mesh_init(colrt_mesh *m);
void colrt__backend_mesh_destroy(colrt_mesh *m);
/* p2p.c: the communicator of this rank and the rank at coordinate peer on
 * the axis (made at the first call, by the two ranks alone; then the
 * backend's, colrt__backend_pair_init, into m->pair_be). Its rank 0 is the
 * lower coordinate. Checks the axis and the peer, naming `what`. */
MPI_Comm colrt__pair_comm(colrt_mesh *m, int axis, int peer, const char *what);
/* The pair's rank of the peer in that communicator. */
static inline int colrt__pair_peer_rank(const colrt_mesh *m, int axis, int peer) {
    return peer < m->coords[axis] ? 0 : 1;
}
void colrt__backend_pair_init(colrt_mesh *m, int axis, int peer, MPI_Comm pair);
/* Frees the MPI pair communicators (after colrt__backend_mesh_destroy freed the backend's). */
void colrt__pair_comms_free(colrt_mesh *m);
/* "send to coordinate 2", "pair_all_reduce with coordinate 3" and the like, in a buffer of the calling thread,
 * for colrt__coll_begin (the watchdog names the call and the peer). */
const char *colrt__p2p_what(const char *call, int send_peer, int recv_peer);

#endif

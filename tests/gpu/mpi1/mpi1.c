/*
 * tests/gpu/mpi1/mpi1.c — the one-rank MPI of mpi.h (see there).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi.h"

static int inited, finalized;

int MPI_Init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    inited = 1;
    return MPI_SUCCESS;
}
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    *provided = required;
    return MPI_Init(argc, argv);
}
int MPI_Initialized(int *flag) { *flag = inited; return MPI_SUCCESS; }
int MPI_Finalized(int *flag) { *flag = finalized; return MPI_SUCCESS; }
int MPI_Finalize(void) { finalized = 1; return MPI_SUCCESS; }
int MPI_Query_thread(int *provided) { *provided = MPI_THREAD_MULTIPLE; return MPI_SUCCESS; }
int MPI_Abort(MPI_Comm comm, int code) {
    (void)comm;
    exit(code ? code : 1);
}
int MPI_Comm_rank(MPI_Comm comm, int *rank) { (void)comm; *rank = 0; return MPI_SUCCESS; }
int MPI_Comm_size(MPI_Comm comm, int *size) { (void)comm; *size = 1; return MPI_SUCCESS; }
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h) { (void)comm, (void)h; return MPI_SUCCESS; }
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
    (void)comm, (void)color, (void)key;
    *out = MPI_COMM_WORLD;
    return MPI_SUCCESS;
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
    (void)type, (void)info;
    return MPI_Comm_split(comm, 0, key, out);
}
int MPI_Comm_free(MPI_Comm *comm) { *comm = MPI_COMM_NULL; return MPI_SUCCESS; }
/* groups: a pair of ranks (runtime/common/p2p.c, pipelines) needs a second
 * rank, which a world of one has not */
int MPI_Comm_group(MPI_Comm comm, MPI_Group *g) { (void)comm; *g = 1; return MPI_SUCCESS; }
int MPI_Group_incl(MPI_Group g, int n, const int *ranks, MPI_Group *out) {
    (void)g, (void)ranks;
    if (n != 1) {
        fprintf(stderr, "mpi1: a group of %d ranks in a world of one\n", n);
        exit(1);
    }
    *out = 1;
    return MPI_SUCCESS;
}
int MPI_Group_free(MPI_Group *g) { *g = 0; return MPI_SUCCESS; }
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group g, int tag, MPI_Comm *out) {
    (void)comm, (void)g, (void)tag;
    *out = MPI_COMM_WORLD;
    return MPI_SUCCESS;
}
int MPI_Error_string(int code, char *s, int *len) {
    *len = snprintf(s, MPI_MAX_ERROR_STRING, "MPI error %d (one-rank stand-in)", code);
    return MPI_SUCCESS;
}
double MPI_Wtime(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
int MPI_Wait(MPI_Request *r, MPI_Status *st) { (void)r, (void)st; return MPI_SUCCESS; }
int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st) { (void)r, (void)st; *flag = 1; return MPI_SUCCESS; }
int MPI_Barrier(MPI_Comm comm) { (void)comm; return MPI_SUCCESS; }
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
    (void)buf, (void)count, (void)t, (void)root, (void)comm;
    return MPI_SUCCESS;
}
int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    (void)op, (void)comm;
    if (send != recv) memmove(recv, send, (size_t)count * (size_t)t);
    return MPI_SUCCESS;
}
/* point to point: a world of one has no peer */
static int no_peer(int rank) {
    fprintf(stderr, "mpi1: a message to or from rank %d in a world of one\n", rank);
    exit(1);
}
int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *r) {
    (void)buf, (void)count, (void)t, (void)tag, (void)comm, (void)r;
    return no_peer(dest);
}
int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request *r) {
    (void)buf, (void)count, (void)t, (void)tag, (void)comm, (void)r;
    return no_peer(src);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *r) { (void)comm; *r = 0; return MPI_SUCCESS; }
int MPI_Ibcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *r) {
    (void)buf, (void)count, (void)t, (void)root, (void)comm;
    *r = 0;
    return MPI_SUCCESS;
}
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request *r) {
    (void)op, (void)comm;
    if (send != recv) memmove(recv, send, (size_t)count * (size_t)t);
    *r = 0;
    return MPI_SUCCESS;
}
int MPI_Igather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt, int root,
                MPI_Comm comm, MPI_Request *r) {
    (void)rcount, (void)rt, (void)root, (void)comm;
    memmove(recv, send, (size_t)scount * (size_t)st);
    *r = 0;
    return MPI_SUCCESS;
}
int MPI_Igatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
                 MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *r) {
    (void)rcounts, (void)root, (void)comm;
    memmove((char *)recv + (size_t)displs[0] * (size_t)rt, send, (size_t)scount * (size_t)st);
    *r = 0;
    return MPI_SUCCESS;
}

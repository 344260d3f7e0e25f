/*
 * tests/gpu/mpi1/mpi.h — a one-rank stand-in for MPI, for the GPU bundle
 * (tests/gpu/bundle.sh): the machine lent for a first GPU run has no MPI, and
 * its checks run on one GPU, so the runtime is built there against this
 * header and mpi1.c. Every call behaves as MPI does with a world of one rank
 * (collectives copy send to receive); nothing else is supported.
 */
#ifndef COLOSSAL_MPI1_H
#define COLOSSAL_MPI1_H

#include <stddef.h>

typedef int MPI_Comm;
typedef int MPI_Request;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Info;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef struct { int MPI_SOURCE, MPI_TAG, MPI_ERROR; } MPI_Status;

#define MPI_SUCCESS 0
#define MPI_COMM_WORLD 1
#define MPI_COMM_NULL 0
#define MPI_INFO_NULL 0
#define MPI_ERRORS_RETURN 1
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_MAX_ERROR_STRING 64
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3
#define MPI_COMM_TYPE_SHARED 1
/* datatypes: their sizes in bytes */
#define MPI_BYTE 1
#define MPI_CHAR 1
#define MPI_INT 4
#define MPI_LONG 8
#define MPI_DOUBLE 8
#define MPI_MAX 1
#define MPI_SUM 2
#define MPI_MIN 3

int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Finalize(void);
int MPI_Query_thread(int *provided);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out);
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_group(MPI_Comm comm, MPI_Group *g);
int MPI_Group_incl(MPI_Group g, int n, const int *ranks, MPI_Group *out);
int MPI_Group_free(MPI_Group *g);
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group g, int tag, MPI_Comm *out);
int MPI_Error_string(int code, char *s, int *len);
double MPI_Wtime(void);
int MPI_Wait(MPI_Request *r, MPI_Status *st);
int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm);
int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm);
int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *r);
int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request *r);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *r);
int MPI_Ibcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *r);
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request *r);
int MPI_Igather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt, int root,
                MPI_Comm comm, MPI_Request *r);
int MPI_Igatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
                 MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *r);

#endif

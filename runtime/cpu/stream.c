/*
 * stream.c — the CPU backend's streams and events, so that communication
 * overlaps computation as it does on a GPU.
 *
 * A stream (non-NULL colrt_stream) is a worker thread with a FIFO queue.
 * Collectives, device-to-device copies and zeroing given a stream are
 * queued and the call returns; the worker runs them in order. Kernels run
 * in the caller whatever their stream (they wait for the stream's earlier
 * work first, colrt__stream_order). The NULL stream is the caller: its work
 * is done when the call returns.
 *
 * Collectives on a worker need MPI_THREAD_MULTIPLE, and two threads must
 * never run collectives on one communicator at once: a stream's first
 * collective on a mesh axis duplicates that axis's communicator (the caller
 * starts MPI_Comm_idup in program order, so every rank of the axis does it
 * at the same point, and queues the wait for it: the caller does not block),
 * and the worker only ever uses its duplicates. Each rank queues a stream's
 * collectives in program order, so they match across ranks.
 *
 * Events count generations: recording gives the event a new generation
 * (`recorded`); the worker marks it complete when it passes the marker
 * (`completed`, never lowered). A wait asks for the generation current when
 * the wait is issued, so the same event can be recorded and waited on every
 * step.
 *
 * Without MPI_THREAD_MULTIPLE (or with COLRT_STREAMS=sync) there are no
 * workers: stream work runs in the caller and every event is complete once
 * recorded, which is the backend's behaviour before streams existed.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

#define MAX_STREAMS 64

typedef enum { OP_DUP, OP_COLL, OP_COPY2D, OP_MEMSET, OP_RECORD, OP_WAIT } op_kind;

typedef struct op {
    op_kind kind;
    union {
        struct {
            MPI_Request req;
            MPI_Comm *comm;
            int axis;
        } dup;
        struct {
            colrt_coll c;
            MPI_Comm *comm; /* read when the op runs: an OP_DUP before it filled it in */
        } coll;
        struct {
            void *dst;
            const void *src;
            size_t dpitch, spitch, width, height;
            const char *what; /* non-NULL: a host copy, run under the watchdog by this name */
        } copy;
        struct {
            void *dst;
            size_t bytes;
        } set;
        struct {
            colrt_event *e;
            uint64_t gen;
        } ev;
    } u;
} op;

/* A stream's duplicates of one mesh's axis communicators (NULL until the
 * stream's first collective on that axis). Each lives in its own cell, as
 * MPI fills it in when the duplication completes, on the worker. */
typedef struct mesh_dup {
    colrt_mesh *m;
    MPI_Comm *comm[COLRT_MAX_AXES];
} mesh_dup;

struct colrt_stream {
    int id;
    int has_thread;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, idle; /* work queued / work finished */
    op *q;                     /* ring buffer: len ops from head; an op stays until it has run */
    size_t cap, head, len;
    uint64_t queued, finished; /* ops ever queued / ever finished */
    int stop;
    mesh_dup *dups; /* touched by the caller only */
    int ndups;
    char name[40];
};

struct colrt_event {
    uint64_t recorded;  /* generation of the latest record */
    uint64_t completed; /* highest generation the worker (or the caller) has passed */
    int pending;        /* queued markers that name this event */
};

/* One lock and condition for all events: waits are rare (a few per step)
 * and short to check. */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

/* Every live stream, for colrt_device_sync, mesh destruction and finalize. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static colrt_stream *streams[MAX_STREAMS];
static int nstreams, next_id;
static int async = 0;

void colrt__streams_init(void) {
    const char *mode = getenv("COLRT_STREAMS");
    if (mode && strcmp(mode, "sync") && strcmp(mode, "async") && strcmp(mode, ""))
        colrt_die("COLRT_STREAMS=%s: unknown mode; hint: use async (the default: streams are worker threads) or sync "
                  "(stream work runs in the caller)",
                  mode);
    int want = !(mode && !strcmp(mode, "sync"));
    async = want && colrt__g.thread_multiple;
    if (want && !async && getenv("COLRT_VERBOSE") && colrt__g.rank == 0)
        fprintf(stderr, "colrt: MPI does not provide MPI_THREAD_MULTIPLE; streams run their work in the caller "
                        "(no overlap of communication and computation)\n");
}

int colrt__cpu_streams_async(void) { return async; }

double colrt__stream_worker_cpu_s(colrt_stream *s) {
    clockid_t id;
    struct timespec t;
    if (!s || !s->has_thread || pthread_getcpuclockid(s->thread, &id) || clock_gettime(id, &t)) return 0;
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the worker ------------------------------------------------------------------ */

static void event_pass(colrt_event *e, uint64_t gen, int wait) {
    pthread_mutex_lock(&ev_mu);
    if (wait)
        while (e->completed < gen) pthread_cond_wait(&ev_cv, &ev_mu);
    else if (gen > e->completed)
        e->completed = gen;
    e->pending--;
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_mu);
}

static void run_op(const op *o) {
    switch (o->kind) {
    case OP_DUP: {
        MPI_Request r = o->u.dup.req;
        colrt__mpi_wait(&r, "communicator duplicate for a stream", o->u.dup.axis);
        COLRT_MPI(MPI_Comm_set_errhandler(*o->u.dup.comm, MPI_ERRORS_RETURN));
        break;
    }
    case OP_COLL: colrt__coll_run(&o->u.coll.c, *o->u.coll.comm); break;
    case OP_COPY2D: {
        const size_t h = o->u.copy.height, w = o->u.copy.width;
        if (o->u.copy.what) colrt__coll_begin(o->u.copy.what, -1);
        if (h == 1) memmove(o->u.copy.dst, o->u.copy.src, w);
        else
            for (size_t r = 0; r < h; r++)
                memcpy((char *)o->u.copy.dst + r * o->u.copy.dpitch, (const char *)o->u.copy.src + r * o->u.copy.spitch,
                       w);
        if (o->u.copy.what) colrt__coll_end();
        break;
    }
    case OP_MEMSET: memset(o->u.set.dst, 0, o->u.set.bytes); break;
    case OP_RECORD: event_pass(o->u.ev.e, o->u.ev.gen, 0); break;
    case OP_WAIT: /* a stream held up by another: under the watchdog, so a stuck copy stream is named */
        colrt__coll_begin("a stream's wait for an event", -1);
        event_pass(o->u.ev.e, o->u.ev.gen, 1);
        colrt__coll_end();
        break;
    }
}

static void *worker(void *arg) {
    colrt_stream *s = arg;
    colrt__coll_thread_name(s->name);
    colrt__coll_polite();
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->len && !s->stop) pthread_cond_wait(&s->work, &s->mu);
        if (!s->len) break; /* stopping, and drained */
        op o = s->q[s->head];
        pthread_mutex_unlock(&s->mu);
        run_op(&o);
        pthread_mutex_lock(&s->mu);
        s->head = (s->head + 1) % s->cap;
        s->len--;
        s->finished++;
        pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    colrt__coll_thread_exit();
    return NULL;
}

static void enqueue(colrt_stream *s, const op *o) {
    pthread_mutex_lock(&s->mu);
    if (s->len == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        op *q = malloc(cap * sizeof *q);
        if (!q) colrt_die("colrt stream %d: out of memory queueing work", s->id);
        for (size_t i = 0; i < s->len; i++) q[i] = s->q[(s->head + i) % s->cap];
        free(s->q);
        s->q = q, s->cap = cap, s->head = 0;
    }
    s->q[(s->head + s->len) % s->cap] = *o;
    s->len++;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

static int queued_on(colrt_stream *s) { return s && async; }

static void drain(colrt_stream *s) {
    if (!s->has_thread) return;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->queued;
    while (s->finished < target) pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* ---- streams ---------------------------------------------------------------------- */

colrt_stream *colrt_stream_create(void) {
    colrt__require_init("colrt_stream_create");
    colrt_stream *s = calloc(1, sizeof *s);
    if (!s) colrt_die("colrt_stream_create: out of memory");
    pthread_mutex_lock(&reg_mu);
    if (nstreams == MAX_STREAMS) {
        pthread_mutex_unlock(&reg_mu);
        colrt_die("colrt_stream_create: more than %d streams", MAX_STREAMS);
    }
    s->id = ++next_id;
    streams[nstreams++] = s;
    pthread_mutex_unlock(&reg_mu);
    snprintf(s->name, sizeof s->name, "stream %d's worker thread", s->id);
    if (async) {
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->work, NULL);
        pthread_cond_init(&s->idle, NULL);
        if (pthread_create(&s->thread, NULL, worker, s)) colrt_die("colrt_stream_create: cannot start a worker thread");
        s->has_thread = 1;
    }
    return s;
}

/* After a drain: the duplications have completed. */
static void free_dups(mesh_dup *d) {
    for (int a = 0; a < d->m->naxes; a++)
        if (d->comm[a]) {
            COLRT_MPI(MPI_Comm_free(d->comm[a]));
            free(d->comm[a]);
            d->comm[a] = NULL;
        }
}

void colrt_stream_destroy(colrt_stream *s) {
    if (!s) return;
    if (s->has_thread) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1; /* the worker finishes what is queued, then ends */
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->idle);
    }
    for (int i = 0; i < s->ndups; i++) free_dups(&s->dups[i]);
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < nstreams; i++)
        if (streams[i] == s) streams[i] = streams[--nstreams];
    pthread_mutex_unlock(&reg_mu);
    free(s->dups);
    free(s->q);
    free(s);
}

void colrt_stream_sync(colrt_stream *s) {
    if (s) drain(s); /* the NULL stream's work is done when its call returns */
}

void colrt_device_sync(void) {
    /* Only the caller creates and destroys streams, so the list is stable here. */
    for (int i = 0; i < nstreams; i++) drain(streams[i]);
}

void colrt__stream_order(colrt_stream *s) {
    if (s) drain(s);
}

void colrt__streams_finalize(void) {
    while (nstreams) colrt_stream_destroy(streams[nstreams - 1]);
}

/* Before a mesh's communicators go, every stream lets go of its duplicates. */
void colrt__streams_mesh_destroy(colrt_mesh *m) {
    for (int i = 0; i < nstreams; i++) {
        colrt_stream *s = streams[i];
        for (int k = 0; k < s->ndups; k++)
            if (s->dups[k].m == m) {
                drain(s);
                free_dups(&s->dups[k]);
                s->dups[k] = s->dups[--s->ndups];
                break;
            }
    }
}

/* Where s's duplicate of m's axis communicator is (or will be, once the
 * worker passes the OP_DUP queued here at the stream's first collective on
 * that axis). MPI_Comm_idup is a collective over the axis, started here in
 * the caller's program order, so the ranks match it like any other. */
static MPI_Comm *stream_comm(colrt_stream *s, colrt_mesh *m, int axis) {
    mesh_dup *d = NULL;
    for (int k = 0; k < s->ndups && !d; k++)
        if (s->dups[k].m == m) d = &s->dups[k];
    if (!d) {
        mesh_dup *grown = realloc(s->dups, (size_t)(s->ndups + 1) * sizeof *grown);
        if (!grown) colrt_die("colrt stream %d: out of memory", s->id);
        s->dups = grown;
        d = &s->dups[s->ndups++];
        *d = (mesh_dup){.m = m};
    }
    if (!d->comm[axis]) {
        MPI_Comm *cell = malloc(sizeof *cell);
        if (!cell) colrt_die("colrt stream %d: out of memory", s->id);
        *cell = MPI_COMM_NULL;
        op o = {.kind = OP_DUP};
        COLRT_MPI(MPI_Comm_idup(m->comm[axis], cell, &o.u.dup.req));
        o.u.dup.comm = cell, o.u.dup.axis = axis;
        d->comm[axis] = cell;
        enqueue(s, &o);
    }
    return d->comm[axis];
}

void colrt__stream_coll(colrt_stream *s, colrt_mesh *m, const colrt_coll *c) {
    if (!queued_on(s)) {
        colrt__coll_run(c, m->comm[c->axis]);
        return;
    }
    op o = {.kind = OP_COLL};
    o.u.coll.c = *c;
    o.u.coll.comm = stream_comm(s, m, c->axis);
    enqueue(s, &o);
}

void colrt__stream_copy2d(colrt_stream *s, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t height) {
    if (!width || !height) return;
    op o = {.kind = OP_COPY2D};
    o.u.copy.dst = dst, o.u.copy.src = src, o.u.copy.dpitch = dpitch, o.u.copy.spitch = spitch;
    o.u.copy.width = width, o.u.copy.height = height;
    if (queued_on(s)) enqueue(s, &o);
    else run_op(&o);
}

void colrt__stream_host_copy(colrt_stream *s, void *dst, const void *src, size_t bytes, const char *what) {
    if (!bytes) return;
    op o = {.kind = OP_COPY2D};
    o.u.copy.dst = dst, o.u.copy.src = src, o.u.copy.width = bytes, o.u.copy.height = 1, o.u.copy.what = what;
    if (queued_on(s)) enqueue(s, &o);
    else run_op(&o);
}

void colrt__stream_memset0(colrt_stream *s, void *dst, size_t bytes) {
    if (!bytes) return;
    op o = {.kind = OP_MEMSET};
    o.u.set.dst = dst, o.u.set.bytes = bytes;
    if (queued_on(s)) enqueue(s, &o);
    else run_op(&o);
}

/* ---- events ------------------------------------------------------------------------ */

colrt_event *colrt_event_create(void) {
    colrt_event *e = calloc(1, sizeof *e);
    if (!e) colrt_die("colrt_event_create: out of memory");
    return e;
}

void colrt_event_destroy(colrt_event *e) {
    if (!e) return;
    /* Markers still queued name it: let them pass first. */
    pthread_mutex_lock(&ev_mu);
    while (e->pending > 0) pthread_cond_wait(&ev_cv, &ev_mu);
    pthread_mutex_unlock(&ev_mu);
    free(e);
}

void colrt_event_record(colrt_event *e, colrt_stream *s) {
    if (!e) colrt_die("colrt_event_record: the event is NULL");
    pthread_mutex_lock(&ev_mu);
    uint64_t gen = ++e->recorded;
    if (!queued_on(s)) { /* the caller's work so far is done: complete now */
        e->completed = gen;
        pthread_cond_broadcast(&ev_cv);
        pthread_mutex_unlock(&ev_mu);
        return;
    }
    e->pending++;
    pthread_mutex_unlock(&ev_mu);
    op o = {.kind = OP_RECORD};
    o.u.ev.e = e, o.u.ev.gen = gen;
    enqueue(s, &o);
}

void colrt_stream_wait(colrt_stream *s, colrt_event *e) {
    if (!e) colrt_die("colrt_stream_wait: the event is NULL");
    pthread_mutex_lock(&ev_mu);
    uint64_t gen = e->recorded;
    if (e->completed >= gen) { /* nothing to wait for */
        pthread_mutex_unlock(&ev_mu);
        return;
    }
    if (!queued_on(s)) { /* the caller waits */
        while (e->completed < gen) pthread_cond_wait(&ev_cv, &ev_mu);
        pthread_mutex_unlock(&ev_mu);
        return;
    }
    e->pending++;
    pthread_mutex_unlock(&ev_mu);
    op o = {.kind = OP_WAIT};
    o.u.ev.e = e, o.u.ev.gen = gen;
    enqueue(s, &o);
}

/* The caller is the host here: waiting on the NULL stream blocks it. */
void colrt_event_sync(colrt_event *e) { colrt_stream_wait(NULL, e); }

void colrt__event_stick(colrt_event *e) {
    pthread_mutex_lock(&ev_mu);
    e->recorded++;
    pthread_mutex_unlock(&ev_mu);
}

int colrt_event_done(colrt_event *e) {
    if (!e) colrt_die("colrt_event_done: the event is NULL");
    pthread_mutex_lock(&ev_mu);
    int done = e->completed >= e->recorded;
    pthread_mutex_unlock(&ev_mu);
    return done;
}

void *colrt_stream_native(colrt_stream *s) {
    (void)s;
    return NULL;
}

/*
 * launch.c — bootstrap and the mesh: MPI_Init under mpirun/srun or as a
 * singleton, rank/world/local rank, fatal errors that take the whole job
 * down, one MPI communicator per mesh axis, and a watchdog thread that ends
 * the job when a collective (on any thread: the caller's or a CPU stream's
 * worker) runs past the timeout, so that a dead or hung peer ends the job
 * instead of hanging it.
 * Used by both backends (the CUDA one bootstraps NCCL over MPI).
 */
#define _POSIX_C_SOURCE 200809L
/* The sanitizer build (COLOSSAL_SANITIZE): colrt_finalize keeps Open MPI's plugins loaded (see
 * there), with glibc's dl_iterate_phdr and RTLD_NODELETE. */
#if defined(__SANITIZE_ADDRESS__)
#define COLRT_PIN_MODULES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLRT_PIN_MODULES 1
#endif
#endif
#ifdef COLRT_PIN_MODULES
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

colrt_state colrt__g = {.timeout = 300.0};

static void watchdog_start(void);
static void watchdog_stop(void);

static int mpi_up(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

void colrt_die(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!colrt__g.host[0]) gethostname(colrt__g.host, sizeof colrt__g.host - 1);
    fprintf(stderr, "colrt: rank %d on %s: %s\n", colrt__g.rank, colrt__g.host, msg);
    fflush(stderr);
    fflush(stdout);
    /* MPI_Abort may come from the watchdog thread: OpenMPI's abort goes to
     * the launcher's daemon, which ends every rank; _exit is the fallback. */
    if (mpi_up() && colrt__g.world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

void colrt__mpi_fail(int rc, const char *call, const char *file, int line) {
    char err[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, err, &len);
    colrt_die("%s failed: %s (%s:%d)", call, err, file, line);
}

void colrt__require_init(const char *fn) {
    if (!colrt__g.inited) colrt_die("%s called before colrt_init", fn);
}

void colrt_set_timeout(double seconds) {
    if (!(seconds > 0)) colrt_die("colrt_set_timeout(%g): the timeout must be positive", seconds);
    colrt__g.timeout = seconds;
    colrt__g.timeout_set = 1;
}

void colrt_timeout_hint(double seconds) {
    if (!colrt__g.timeout_set && seconds > colrt__g.timeout) colrt__g.timeout = seconds;
}

void colrt_init(int *argc, char ***argv) {
    if (colrt__g.inited) colrt_die("colrt_init called twice");
    gethostname(colrt__g.host, sizeof colrt__g.host - 1);
    int init = 0;
    MPI_Initialized(&init);
    int provided = MPI_THREAD_SINGLE;
    if (!init) {
        /* Without a launcher OpenMPI starts as a singleton: a world of one.
         * MULTIPLE: the CPU backend's streams run collectives on their own
         * threads (cpu/stream.c); with less they run in the caller. The
         * CUDA backend's collectives are NCCL's, and COLRT_STREAMS=sync
         * wants no worker threads: FUNNELED is enough for both. */
        const char *mode = getenv("COLRT_STREAMS");
        int want = colrt__device_is_host && !(mode && !strcmp(mode, "sync")) ? MPI_THREAD_MULTIPLE
                                                                             : MPI_THREAD_FUNNELED;
        int rc = MPI_Init_thread(argc, argv, want, &provided);
        if (rc != MPI_SUCCESS) colrt__mpi_fail(rc, "MPI_Init_thread", __FILE__, __LINE__);
        colrt__g.we_init_mpi = 1;
    } else {
        COLRT_MPI(MPI_Query_thread(&provided));
    }
    colrt__g.thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    /* Errors come back to us, so every failure is reported with its call and ends the job. */
    COLRT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    COLRT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &colrt__g.rank));
    COLRT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &colrt__g.world));
    MPI_Comm node;
    COLRT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, colrt__g.rank, MPI_INFO_NULL, &node));
    COLRT_MPI(MPI_Comm_rank(node, &colrt__g.local_rank));
    COLRT_MPI(MPI_Comm_size(node, &colrt__g.local_size));
    COLRT_MPI(MPI_Comm_free(&node));
    colrt__g.inited = 1;
    watchdog_start();
    colrt__backend_init();
}

#ifdef COLRT_PIN_MODULES
/* Sanitizer builds only: every shared object loaded now stays loaded until exit (RTLD_NODELETE),
 * Open MPI's plugins among them, which MPI_Finalize would unload. LeakSanitizer's check at exit
 * then knows the module of the frame that called malloc, and the suppressions of what Open MPI
 * keeps for the life of the process (tests/e2e/lsan.supp) match by module without a full
 * (DWARF) unwind of every allocation: the tests' ASan unwinds malloc by frame pointers, its
 * default (fast_unwind_on_malloc=0, the full unwind, took some 70% of the sanitizer build's
 * e2e CPU time). */
enum { PIN_MAX = 1024 };
static const char *pin_names[PIN_MAX];
static int pin_n;
static int pin_collect(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0] && pin_n < PIN_MAX) pin_names[pin_n++] = info->dlpi_name;
    return 0;
}
static void pin_modules(void) {
    pin_n = 0;
    dl_iterate_phdr(pin_collect, NULL); /* names first: no dlopen under the loader's lock */
    for (int i = 0; i < pin_n; i++) dlopen(pin_names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
#endif

void colrt_finalize(void) {
    colrt__require_init("colrt_finalize");
    colrt__backend_finalize();
    watchdog_stop();
    colrt__g.inited = 0;
#ifdef COLRT_PIN_MODULES
    pin_modules();
#endif
    if (colrt__g.we_init_mpi) COLRT_MPI(MPI_Finalize());
}

int colrt_rank(void) { return colrt__g.rank; }
int colrt_world(void) { return colrt__g.world; }
int colrt_local_rank(void) { return colrt__g.local_rank; }
int colrt_local_size(void) { return colrt__g.local_size; }
const char *colrt_hostname(void) { return colrt__g.host; }

void colrt_barrier(void) {
    colrt__require_init("colrt_barrier");
    MPI_Request r;
    COLRT_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "barrier", -1);
}

/* ---- the watchdog ------------------------------------------------------------
 * Collectives are blocking MPI calls (the tuned algorithms, which are faster
 * here than the nonblocking ones; a CPU stream's worker posts them
 * nonblocking and yields between tests, cpu/collectives.c), bracketed by
 * colrt__coll_begin/end. Every thread that runs collectives owns a slot (the
 * caller's, one per CPU stream worker); a thread checks every 20 ms whether
 * any slot's collective has run past the timeout; if so it names the
 * collective and aborts the job. */

#define WD_SLOTS 72 /* the caller, up to 64 streams, and a few spare */

typedef struct wd_slot {
    int used;
    const char *what; /* NULL: not inside a collective */
    int axis;
    double start;
    char who[48]; /* "" or "stream 2's worker thread" */
} wd_slot;

static struct {
    pthread_mutex_t mu;
    pthread_t thread;
    int running, stop;
    wd_slot slot[WD_SLOTS];
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int wd_mine = -1; /* this thread's slot */
static _Thread_local char wd_name[48];

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *watchdog(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&wd.mu);
        int stop = wd.stop;
        wd_slot late = {0};
        double now = mono();
        for (int i = 0; i < WD_SLOTS && !late.what; i++)
            if (wd.slot[i].used && wd.slot[i].what && now - wd.slot[i].start > colrt__g.timeout) late = wd.slot[i];
        pthread_mutex_unlock(&wd.mu);
        if (stop) return NULL;
        if (late.what) {
            const char *sep = late.who[0] ? " on " : "";
            if (late.axis >= 0)
                colrt_die("%s on mesh axis %d did not complete within %.1f s%s%s: a peer rank died or hung; aborting the job",
                          late.what, late.axis, colrt__g.timeout, sep, late.who);
            colrt_die("%s did not complete within %.1f s%s%s: a peer rank died or hung; aborting the job", late.what,
                      colrt__g.timeout, sep, late.who);
        }
    }
}

static void watchdog_start(void) {
    wd.stop = 0;
    if (pthread_create(&wd.thread, NULL, watchdog, NULL)) colrt_die("cannot start the collective watchdog thread");
    wd.running = 1;
}

static void watchdog_stop(void) {
    if (!wd.running) return;
    pthread_mutex_lock(&wd.mu);
    wd.stop = 1;
    pthread_mutex_unlock(&wd.mu);
    pthread_join(wd.thread, NULL);
    wd.running = 0;
}

void colrt__coll_thread_name(const char *who) { snprintf(wd_name, sizeof wd_name, "%s", who ? who : ""); }

void colrt__coll_begin(const char *what, int axis) {
    pthread_mutex_lock(&wd.mu);
    if (wd_mine < 0) {
        for (int i = 0; i < WD_SLOTS && wd_mine < 0; i++)
            if (!wd.slot[i].used) wd_mine = i;
        if (wd_mine < 0) {
            pthread_mutex_unlock(&wd.mu);
            colrt_die("%s: more than %d threads run collectives", what, WD_SLOTS);
        }
        wd.slot[wd_mine] = (wd_slot){.used = 1};
        memcpy(wd.slot[wd_mine].who, wd_name, sizeof wd_name);
    }
    wd_slot *w = &wd.slot[wd_mine];
    w->what = what, w->axis = axis, w->start = mono();
    pthread_mutex_unlock(&wd.mu);
}

void colrt__coll_end(void) {
    pthread_mutex_lock(&wd.mu);
    if (wd_mine >= 0) wd.slot[wd_mine].what = NULL;
    pthread_mutex_unlock(&wd.mu);
}

void colrt__coll_thread_exit(void) {
    pthread_mutex_lock(&wd.mu);
    if (wd_mine >= 0) wd.slot[wd_mine].used = 0;
    wd_mine = -1;
    pthread_mutex_unlock(&wd.mu);
}

void colrt__mpi_wait(MPI_Request *req, const char *what, int axis) {
    colrt__coll_begin(what, axis);
    COLRT_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
    colrt__coll_end();
}

/* ---- mesh ---------------------------------------------------------------------- */

colrt_mesh *colrt_mesh_create(int naxes, const int *sizes) {
    int order[COLRT_MAX_AXES] = {0, 1, 2};
    if (naxes < 1 || naxes > COLRT_MAX_AXES)
        colrt_die("colrt_mesh_create: %d axes; a mesh has 1 to %d axes", naxes, COLRT_MAX_AXES);
    return colrt_mesh_create_ordered(naxes, sizes, order);
}

colrt_mesh *colrt_mesh_create_ordered(int naxes, const int *sizes, const int *order) {
    colrt__require_init("colrt_mesh_create");
    if (naxes < 1 || naxes > COLRT_MAX_AXES)
        colrt_die("colrt_mesh_create: %d axes; a mesh has 1 to %d axes", naxes, COLRT_MAX_AXES);
    unsigned seen = 0;
    for (int k = 0; k < naxes; k++) {
        if (order[k] < 0 || order[k] >= naxes || (seen >> order[k] & 1u))
            colrt_die("colrt_mesh_create_ordered: order[%d] = %d; the order lists each of the %d axes once", k, order[k],
                      naxes);
        seen |= 1u << order[k];
    }
    long prod = 1;
    for (int a = 0; a < naxes; a++) {
        if (sizes[a] < 1) colrt_die("colrt_mesh_create: axis %d has size %d; sizes must be >= 1", a, sizes[a]);
        prod *= sizes[a];
    }
    if (prod != colrt__g.world)
        colrt_die("colrt_mesh_create: the axis sizes multiply to %ld but the world has %d ranks; hint: launch with mpirun -np %ld",
                  prod, colrt__g.world, prod);
    colrt_mesh *m = calloc(1, sizeof *m);
    if (!m) colrt_die("colrt_mesh_create: out of memory");
    m->naxes = naxes;
    int rest = colrt__g.rank;
    for (int k = naxes - 1; k >= 0; k--) { /* the fastest-varying axis first */
        int a = order[k];
        m->sizes[a] = sizes[a];
        m->coords[a] = rest % sizes[a];
        rest /= sizes[a];
    }
    for (int a = 0; a < naxes; a++) {
        /* Color: the coordinates on every other axis; key: the coordinate on this one. */
        int color = 0;
        for (int b = 0; b < naxes; b++) color = color * sizes[b] + (b == a ? 0 : m->coords[b]);
        COLRT_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, m->coords[a], &m->comm[a]));
        COLRT_MPI(MPI_Comm_set_errhandler(m->comm[a], MPI_ERRORS_RETURN));
    }
    colrt__backend_mesh_init(m);
    return m;
}

void colrt_mesh_destroy(colrt_mesh *m) {
    if (!m) return;
    colrt__backend_mesh_destroy(m);
    colrt__pair_comms_free(m);
    for (int a = 0; a < m->naxes; a++) COLRT_MPI(MPI_Comm_free(&m->comm[a]));
    free(m);
}

int colrt_mesh_naxes(const colrt_mesh *m) { return m->naxes; }

int colrt_mesh_size(const colrt_mesh *m, int axis) {
    if (axis < 0 || axis >= m->naxes) colrt_die("mesh axis %d out of range (mesh has %d axes)", axis, m->naxes);
    return m->sizes[axis];
}

int colrt_mesh_coord(const colrt_mesh *m, int axis) {
    if (axis < 0 || axis >= m->naxes) colrt_die("mesh axis %d out of range (mesh has %d axes)", axis, m->naxes);
    return m->coords[axis];
}

size_t colrt_dtype_size(colrt_dtype t) {
    static const size_t sz[] = {
#define X(e, n, b) b,
        COLRT_DTYPES(X)
#undef X
    };
    if ((unsigned)t >= COLRT_NDTYPES) colrt_die("unknown dtype %d", (int)t);
    return sz[t];
}

const char *colrt_dtype_name(colrt_dtype t) {
    static const char *nm[] = {
#define X(e, n, b) n,
        COLRT_DTYPES(X)
#undef X
    };
    if ((unsigned)t >= COLRT_NDTYPES) colrt_die("unknown dtype %d", (int)t);
    return nm[t];
}

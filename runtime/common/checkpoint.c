/*
 * checkpoint.c — sharded checkpoints that survive a crash mid-save.
 *
 * Layout of a checkpoint directory:
 *   manifest.json              written last, by rank 0; names the generation
 *   g<gen>-r<rank>.safetensors one per rank: that rank's shards
 * A save of generation g+1 writes each rank file through a temporary, fsyncs
 * it, renames it, gathers sizes/CRC-32s/slices to rank 0, which writes the
 * manifest (with the caller's training state, colrt_checkpoint_set_state) the
 * same way over the old one, and only then deletes the files the old manifest
 * named (its own and those it recorded as superseded) that the new one does
 * not. Until that rename the old manifest and its files are untouched, so a
 * crash anywhere leaves generation g loadable; no file a manifest of ours
 * does not name is ever deleted.
 *
 * Load reads the manifest, maps every file it needs, checks each file's size
 * and CRC-32 against the manifest and its safetensors header against the
 * slices, assembles every requested shard in host memory from the slices
 * that overlap it (so a different mesh can load it), and only when every
 * check passed on every rank copies the shards into device memory. Every
 * number of the manifest and headers is range-checked (sizes with checked
 * arithmetic) before it addresses memory: a crafted, CRC-consistent file is
 * refused, not followed.
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "colossal/safetensors.h"
#include "internal.h"

static char ck_err[1024];
static int kill_save_rank = -1;
static char *state_out, *state_in; /* the training state to save; the one last loaded */

#define CK_MAX_JSON ((size_t)256 << 20)    /* a manifest larger than this is refused */
#define CK_MAX_GENERATION ((int64_t)1 << 52) /* exact in the manifest's double */

const char *colrt_checkpoint_error(void) { return ck_err; }
void colrt_fault_kill_save(int rank) { kill_save_rank = rank; }
const char *colrt_checkpoint_state(void) { return state_in; }

void colrt_checkpoint_set_state(const char *json_object) {
    free(state_out);
    state_out = NULL;
    if (!json_object) return;
    cJSON *j = cJSON_Parse(json_object);
    if (!cJSON_IsObject(j)) colrt_die("colrt_checkpoint_set_state: not a JSON object: %.80s", json_object);
    cJSON_Delete(j);
    state_out = strdup(json_object);
}

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck_err, sizeof ck_err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- CRC-32 (zlib's) ------------------------------------------------------------ */

static uint32_t crc32_of(const unsigned char *p, size_t n) { return (uint32_t)crc32_z(0, p, (z_size_t)n); }

/* ---- small MPI helpers (with the job's timeout) ------------------------------ */

static void bcast_long(long *v) {
    MPI_Request r;
    COLRT_MPI(MPI_Ibcast(v, 1, MPI_LONG, 0, MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "checkpoint broadcast", -1);
}

static int all_max(int v) {
    int out = 0;
    MPI_Request r;
    COLRT_MPI(MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "checkpoint agreement", -1);
    return out;
}

/* Rank 0 receives every rank's string (NUL-separated, in rank order). */
static char *gather_strings(const char *mine, int **offsets) {
    int len = (int)strlen(mine) + 1, W = colrt__g.world;
    int *lens = colrt__g.rank == 0 ? calloc((size_t)W, sizeof(int)) : NULL;
    MPI_Request r;
    COLRT_MPI(MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "checkpoint gather", -1);
    int *displs = NULL, total = 0;
    char *all = NULL;
    if (colrt__g.rank == 0) {
        displs = calloc((size_t)W, sizeof(int));
        for (int i = 0; i < W; i++) displs[i] = total, total += lens[i];
        all = malloc((size_t)total);
    }
    COLRT_MPI(MPI_Igatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD, &r));
    colrt__mpi_wait(&r, "checkpoint gather", -1);
    free(lens);
    *offsets = displs;
    return all;
}

/* ---- files ------------------------------------------------------------------------ */

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}


/* Writes data to dir/name atomically (files.c); dies on failure. With die_half, exits half-way. */
static void write_atomic(const char *dir, const char *name, const void *data, size_t n, int die_half) {
    char *path = path_join(dir, name);
    if (colrt__write_atomic(path, data, n, die_half, 1) != 0)
        colrt_die("checkpoint: writing %s failed: %s", path, strerror(errno));
    free(path);
}

/* A JSON file; NULL with a message (a directory, FIFO or oversized file is refused, not read). */
static cJSON *read_json(const char *path, char *err, size_t errlen) {
    size_t len;
    char *s = colrt__read_regular(path, CK_MAX_JSON, &len, err, errlen);
    if (!s) return NULL;
    cJSON *j = cJSON_ParseWithLength(s, len);
    free(s);
    if (!j) snprintf(err, errlen, "%s is not JSON", path);
    return j;
}

/* Every number of a manifest or header that sizes or addresses memory is a
 * whole number in [0, 2^53]: exact in a double, so the arithmetic below stays
 * in int64_t when checked. */
static int whole(const cJSON *e, int64_t *out) {
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 9007199254740992.0) ||
        e->valuedouble != (double)(int64_t)e->valuedouble)
        return 0;
    *out = (int64_t)e->valuedouble;
    return 1;
}

/* The elements of a shape; -1 when it overflows int64_t. */
static int64_t volume(int nd, const int64_t *shape) {
    int64_t v = 1;
    for (int d = 0; d < nd; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(v, shape[d], &v)) return -1;
    return v;
}

/* Bytes of a shape of element size es; -1 when it overflows. */
static int64_t nbytes(int nd, const int64_t *shape, size_t es) {
    int64_t v = volume(nd, shape), b;
    return v < 0 || __builtin_mul_overflow(v, (int64_t)es, &b) ? -1 : b;
}

static cJSON *int_array(int n, const int64_t *v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* An array of at most max whole numbers (see whole()); its length, or -1. */
static int read_ints(const cJSON *a, int64_t *out, int max) {
    if (!cJSON_IsArray(a)) return -1;
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (n == max || !whole(e, &out[n])) return -1;
        n++;
    }
    return n;
}

static int dtype_of(const char *name) {
    for (int t = 0; t < COLRT_NDTYPES; t++)
        if (name && !strcmp(name, colrt_dtype_name((colrt_dtype)t))) return t;
    return -1;
}

/* ---- save ------------------------------------------------------------------------- */

static void check_tensor(const colrt_tensor *t) {
    if (!t->name || t->ndim < 0 || t->ndim > COLRT_MAX_DIMS || (unsigned)t->dtype >= COLRT_NDTYPES)
        colrt_die("checkpoint: tensor %s: bad name, ndim or dtype", t->name ? t->name : "(null)");
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || t->offset[d] < 0 || t->shape[d] > t->global_shape[d] ||
            t->offset[d] > t->global_shape[d] - t->shape[d])
            colrt_die("checkpoint: tensor %s: slice [%lld, +%lld) of dim %d is outside its global size %lld", t->name,
                      (long long)t->offset[d], (long long)t->shape[d], d, (long long)t->global_shape[d]);
    if (nbytes(t->ndim, t->global_shape, colrt_dtype_size(t->dtype)) < 0)
        colrt_die("checkpoint: tensor %s: its global shape overflows 64 bits", t->name);
}

/* The file names a manifest names: its files and those it recorded as superseded. */
static void manifest_names(const cJSON *man, cJSON *into) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(man, "files")) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file");
        if (cJSON_IsString(f)) cJSON_AddItemToArray(into, cJSON_CreateString(f->valuestring));
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(man, "superseded"))
        if (cJSON_IsString(e)) cJSON_AddItemToArray(into, cJSON_CreateString(e->valuestring));
}

/* Only plain names of ours (g<gen>-r<rank>.safetensors) are ever deleted, and only in dir. */
static int our_file_name(const char *s) {
    long g;
    int r, n = 0;
    return !strchr(s, '/') && sscanf(s, "g%ld-r%d.safetensors%n", &g, &r, &n) == 2 && n > 0 && !s[n];
}

void colrt_checkpoint_save(const char *dir, const colrt_mesh *m, const char *plan_json, int n, const colrt_tensor *t) {
    colrt__require_init("colrt_checkpoint_save");
    int R = colrt__g.rank;
    for (int i = 0; i < n; i++) {
        check_tensor(&t[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name)) colrt_die("checkpoint: tensor %s given twice on one rank", t[i].name);
    }
    /* the generation: one more than the manifest's */
    long gen = 1;
    cJSON *old_names = cJSON_CreateArray(); /* rank 0: what the current manifest names */
    if (R == 0) {
        mkdir(dir, 0755);
        char *mp = path_join(dir, "manifest.json"), err[512];
        struct stat st;
        cJSON *old = stat(mp, &st) == 0 ? read_json(mp, err, sizeof err) : NULL;
        if (stat(mp, &st) == 0 && !old) colrt_die("checkpoint: %s (refusing to write over it)", err);
        int64_t g = 0;
        if (old && (!whole(cJSON_GetObjectItemCaseSensitive(old, "generation"), &g) || g >= CK_MAX_GENERATION))
            colrt_die("checkpoint: %s names no valid generation (refusing to write over it)", mp);
        gen = (long)g + 1;
        manifest_names(old, old_names);
        cJSON_Delete(old);
        free(mp);
    }
    bcast_long(&gen);
    mkdir(dir, 0755); /* every rank, in case dir is node-local */

    colrt_device_sync(); /* the tensors may still be in flight on any stream */
    /* this rank's safetensors file (safetensors.c), the data copied into it in place */
    char rank_s[32], gen_s[32], err[512];
    snprintf(rank_s, sizeof rank_s, "%d", R);
    snprintf(gen_s, sizeof gen_s, "%ld", gen);
    const char *meta[] = {"colrt.rank", rank_s, "colrt.generation", gen_s, NULL};
    colrt_st_tensor *st = calloc((size_t)(n ? n : 1), sizeof *st);
    size_t data_bytes = 0, total = 0;
    for (int i = 0; i < n; i++) {
        st[i].name = t[i].name;
        st[i].dtype = colrt_dtype_name(t[i].dtype);
        st[i].ndim = t[i].ndim;
        memcpy(st[i].shape, t[i].shape, sizeof st[i].shape);
        st[i].bytes = (size_t)nbytes(t[i].ndim, t[i].shape, colrt_dtype_size(t[i].dtype)); /* check_tensor: fits */
        data_bytes += st[i].bytes;
    }
    unsigned char *file = colrt_st_build(n, st, meta, &total, err, sizeof err);
    free(st);
    if (!file) colrt_die("checkpoint: %s", err);
    size_t pos = total - data_bytes;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)nbytes(t[i].ndim, t[i].shape, colrt_dtype_size(t[i].dtype));
        colrt_memcpy(file + pos, t[i].data, b, COLRT_D2H, NULL);
        pos += b;
    }
    colrt_device_sync();
    char fname[64];
    snprintf(fname, sizeof fname, "g%ld-r%05d.safetensors", gen, R);
    write_atomic(dir, fname, file, total, kill_save_rank == R);
    uint32_t crc = crc32_of(file, total);
    free(file);

    /* what this rank wrote, for the manifest */
    cJSON *mine = cJSON_CreateObject();
    cJSON_AddNumberToObject(mine, "rank", R);
    cJSON_AddStringToObject(mine, "file", fname);
    cJSON_AddNumberToObject(mine, "bytes", (double)total);
    cJSON_AddNumberToObject(mine, "crc32", crc);
    cJSON *tl = cJSON_AddArrayToObject(mine, "tensors");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t[i].name);
        cJSON_AddStringToObject(e, "dtype", colrt_dtype_name(t[i].dtype));
        cJSON_AddItemToObject(e, "global_shape", int_array(t[i].ndim, t[i].global_shape));
        cJSON_AddItemToObject(e, "offset", int_array(t[i].ndim, t[i].offset));
        cJSON_AddItemToObject(e, "shape", int_array(t[i].ndim, t[i].shape));
        cJSON_AddItemToArray(tl, e);
    }
    char *mtext = cJSON_PrintUnformatted(mine);
    cJSON_Delete(mine);
    int *offs = NULL;
    char *all = gather_strings(mtext, &offs);
    free(mtext);

    if (R == 0) {
        cJSON *man = cJSON_CreateObject();
        cJSON_AddStringToObject(man, "format", "colrt-checkpoint");
        cJSON_AddNumberToObject(man, "version", 1);
        cJSON_AddNumberToObject(man, "generation", (double)gen);
        cJSON_AddNumberToObject(man, "world", colrt__g.world);
        int64_t sizes[COLRT_MAX_AXES];
        for (int a = 0; m && a < m->naxes; a++) sizes[a] = m->sizes[a];
        cJSON_AddItemToObject(man, "mesh", int_array(m ? m->naxes : 0, sizes));
        cJSON *plan = plan_json ? cJSON_Parse(plan_json) : NULL;
        if (plan_json && !plan) plan = cJSON_CreateString(plan_json);
        cJSON_AddItemToObject(man, "plan", plan ? plan : cJSON_CreateNull());
        cJSON *state = state_out ? cJSON_Parse(state_out) : NULL;
        if (state) cJSON_AddItemToObject(man, "state", state);
        cJSON *files = cJSON_AddArrayToObject(man, "files");
        for (int r = 0; r < colrt__g.world; r++) {
            cJSON *f = cJSON_Parse(all + offs[r]);
            if (!f) colrt_die("checkpoint: rank %d sent an unreadable file record", r);
            cJSON_AddItemToArray(files, f);
        }
        /* the old manifest's files that this one does not name: deleted after the
         * rename, and recorded here so that a crash before they are gone leaves
         * them named (the next save deletes them) */
        cJSON *gone = cJSON_CreateArray(), *e;
        cJSON_ArrayForEach(e, old_names) {
            int keep = !our_file_name(e->valuestring);
            const cJSON *f;
            cJSON_ArrayForEach(f, files) keep |= !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file")),
                                                         e->valuestring);
            const cJSON *dup;
            cJSON_ArrayForEach(dup, gone) keep |= !strcmp(dup->valuestring, e->valuestring);
            char *p = path_join(dir, e->valuestring);
            keep |= access(p, F_OK) != 0; /* gone already: no longer recorded */
            free(p);
            if (!keep) cJSON_AddItemToArray(gone, cJSON_CreateString(e->valuestring));
        }
        cJSON_AddItemToObject(man, "superseded", gone);
        char *text = cJSON_Print(man);
        write_atomic(dir, "manifest.json", text, strlen(text), 0);
        free(text);
        /* the new generation is current: the files it supersedes go, and the
         * temporaries of the names it and they carry (a killed save's); nothing else */
        cJSON_ArrayForEach(e, gone) {
            char *p = path_join(dir, e->valuestring);
            if (unlink(p) != 0 && errno != ENOENT)
                fprintf(stderr, "colrt: checkpoint: cannot remove the superseded %s: %s\n", p, strerror(errno));
            free(p);
        }
        cJSON *tmps = cJSON_CreateArray();
        manifest_names(man, tmps);
        cJSON_ArrayForEach(e, tmps) {
            char *p = path_join(dir, e->valuestring), *tp = malloc(strlen(p) + 5);
            sprintf(tp, "%s.tmp", p);
            unlink(tp);
            free(p), free(tp);
        }
        cJSON_Delete(tmps);
        cJSON_Delete(man);
    }
    cJSON_Delete(old_names);
    free(all), free(offs);
    colrt_barrier();
}

/* ---- load --------------------------------------------------------------------------- */

typedef struct {
    const char *file;
    int64_t bytes;
    uint32_t crc;
    const unsigned char *map; /* whole file, once verified */
    size_t map_len;
    colrt_st_file *st; /* its checked safetensors entries */
} CkFile;

static int verify_file(const char *dir, CkFile *f) {
    char *path = path_join(dir, f->file), err[512];
    int64_t size = 0;
    int fd = colrt__open_regular(path, &size, err, sizeof err); /* a FIFO would block every rank */
    int rc = 0;
    if (fd < 0) rc = fail("%s", err);
    else if (size != f->bytes)
        rc = fail("%s has %lld bytes, the manifest says %lld", path, (long long)size, (long long)f->bytes);
    if (rc == 0 && f->bytes > 0) {
        void *p = mmap(NULL, (size_t)f->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) rc = fail("cannot map %s: %s", path, strerror(errno));
        else {
            f->map = p, f->map_len = (size_t)f->bytes;
            uint32_t crc = crc32_of(p, (size_t)f->bytes);
            if (crc != f->crc) rc = fail("%s: CRC-32 %08x, the manifest says %08x (corrupt file)", path, crc, f->crc);
        }
    }
    if (rc == 0 && !(f->st = colrt_st_parse(f->map, f->map_len, path, err, sizeof err))) rc = fail("%s", err);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* The runs of a dense box of a row-major tensor (global shape gs): each a
 * stretch of consecutive elements of the flattened tensor. */
typedef struct {
    int nd;
    const int64_t *gs, *off, *shape;
    int64_t idx[COLRT_MAX_DIMS]; /* the box position of the next run, last dim 0 */
    int64_t pos, n;              /* elements of the box before it; the box's volume */
} Runs;

static void runs_init(Runs *r, int nd, const int64_t *gs, const int64_t *off, const int64_t *shape) {
    memset(r, 0, sizeof *r);
    r->nd = nd, r->gs = gs, r->off = off, r->shape = shape;
    r->n = volume(nd, shape);
}

/* The next run: its start in the flat tensor and its length; 0 when done. */
static int runs_next(Runs *r, int64_t *start, int64_t *len) {
    if (r->pos >= r->n || r->n <= 0) return 0;
    int64_t f = 0;
    for (int d = 0; d < r->nd; d++) f = f * r->gs[d] + r->off[d] + r->idx[d];
    *start = f;
    *len = r->nd ? r->shape[r->nd - 1] : 1;
    r->pos += *len;
    for (int d = r->nd - 2; d >= 0; d--) {
        if (++r->idx[d] < r->shape[d]) break;
        r->idx[d] = 0;
    }
    return 1;
}

/* Copies the intersection of a source box into a destination box of the same
 * tensor seen with different shapes of one volume (one of them flattened):
 * both boxes as runs of the flat tensor, merged in order. */
static void copy_flat(size_t es, int snd, const int64_t *sgs, const int64_t *so, const int64_t *ss, const unsigned char *src,
                      int dnd, const int64_t *dgs, const int64_t *dof, const int64_t *ds, unsigned char *dst,
                      unsigned char *mask) {
    Runs a, b;
    runs_init(&a, snd, sgs, so, ss);
    runs_init(&b, dnd, dgs, dof, ds);
    int64_t as, al, bs, bl, apos = 0, bpos = 0;
    int ha = runs_next(&a, &as, &al), hb = runs_next(&b, &bs, &bl);
    while (ha && hb) {
        int64_t lo = as > bs ? as : bs, hi = as + al < bs + bl ? as + al : bs + bl;
        if (lo < hi) {
            memcpy(dst + (size_t)(bpos + lo - bs) * es, src + (size_t)(apos + lo - as) * es, (size_t)(hi - lo) * es);
            memset(mask + bpos + lo - bs, 1, (size_t)(hi - lo));
        }
        if (as + al <= bs + bl) apos += al, ha = runs_next(&a, &as, &al);
        else bpos += bl, hb = runs_next(&b, &bs, &bl);
    }
}

/* Copies the intersection of a source slice into a destination slice (both dense). */
static void copy_box(int nd, size_t es, const unsigned char *src, const int64_t *so, const int64_t *ss, unsigned char *dst,
                     const int64_t *dof, const int64_t *ds, unsigned char *mask) {
    int64_t lo[COLRT_MAX_DIMS], hi[COLRT_MAX_DIMS], idx[COLRT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        lo[d] = so[d] > dof[d] ? so[d] : dof[d];
        hi[d] = so[d] + ss[d] < dof[d] + ds[d] ? so[d] + ss[d] : dof[d] + ds[d];
        if (lo[d] >= hi[d]) return;
        idx[d] = lo[d];
    }
    if (nd == 0) {
        memcpy(dst, src, es);
        mask[0] = 1;
        return;
    }
    int64_t run = hi[nd - 1] - lo[nd - 1];
    for (;;) {
        int64_t si = 0, di = 0;
        for (int d = 0; d < nd; d++) si = si * ss[d] + (idx[d] - so[d]), di = di * ds[d] + (idx[d] - dof[d]);
        memcpy(dst + (size_t)di * es, src + (size_t)si * es, (size_t)run * es);
        memset(mask + di, 1, (size_t)run);
        int d = nd - 2;
        while (d >= 0 && ++idx[d] == hi[d]) idx[d] = lo[d], d--;
        if (d < 0) return;
    }
}

static int load_local(const char *dir, int n, const colrt_tensor *t, unsigned char ***staged, cJSON **manifest) {
    char *mp = path_join(dir, "manifest.json"), err[512];
    cJSON *man = read_json(mp, err, sizeof err);
    int rc = 0;
    if (!man) rc = fail("%s: no complete checkpoint in %s", err, dir);
    free(mp);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files");
    int nf = cJSON_IsArray(files) ? cJSON_GetArraySize(files) : 0;
    if (rc == 0 && !nf) rc = fail("%s/manifest.json lists no files", dir);
    CkFile *ff = calloc((size_t)(nf ? nf : 1), sizeof *ff);
    char *needed = calloc((size_t)(nf ? nf : 1), 1);
    for (int i = 0; rc == 0 && i < nf; i++) {
        const cJSON *f = cJSON_GetArrayItem(files, i);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "file"), *b = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                    *c = cJSON_GetObjectItemCaseSensitive(f, "crc32");
        int64_t bytes, crc;
        if (!cJSON_IsString(fn) || !our_file_name(fn->valuestring) || !whole(b, &bytes) || !whole(c, &crc) ||
            crc > 0xffffffffLL)
            rc = fail("%s/manifest.json: file record %d is malformed", dir, i);
        else ff[i].file = fn->valuestring, ff[i].bytes = bytes, ff[i].crc = (uint32_t)crc;
    }
    /* which files hold slices this rank needs */
    for (int i = 0; rc == 0 && i < nf; i++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(files, i), "tensors")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            for (int k = 0; k < n; k++)
                if (cJSON_IsString(nm) && !strcmp(nm->valuestring, t[k].name)) needed[i] = 1;
        }
    }
    for (int i = 0; rc == 0 && i < nf; i++)
        if (needed[i]) rc = verify_file(dir, &ff[i]);

    /* assemble every requested shard on the host */
    unsigned char **stage = calloc((size_t)(n ? n : 1), sizeof *stage);
    for (int k = 0; rc == 0 && k < n; k++) {
        const colrt_tensor *x = &t[k];
        check_tensor(x);
        size_t es = colrt_dtype_size(x->dtype);
        int64_t vol = volume(x->ndim, x->shape); /* check_tensor: its bytes fit */
        stage[k] = malloc((size_t)vol * es + 1);
        unsigned char *mask = calloc((size_t)vol + 1, 1);
        int found = 0;
        for (int i = 0; rc == 0 && i < nf; i++) {
            if (!needed[i]) continue;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(files, i), "tensors")) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
                if (!cJSON_IsString(nm) || strcmp(nm->valuestring, x->name)) continue;
                found = 1;
                int64_t gs[COLRT_MAX_DIMS], so[COLRT_MAX_DIMS], ss[COLRT_MAX_DIMS];
                int g = read_ints(cJSON_GetObjectItemCaseSensitive(e, "global_shape"), gs, COLRT_MAX_DIMS);
                int o = read_ints(cJSON_GetObjectItemCaseSensitive(e, "offset"), so, COLRT_MAX_DIMS);
                int s = read_ints(cJSON_GetObjectItemCaseSensitive(e, "shape"), ss, COLRT_MAX_DIMS);
                const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
                if (dtype_of(cJSON_GetStringValue(dt)) != (int)x->dtype) {
                    rc = fail("tensor %s: checkpoint dtype %s, the model wants %s", x->name, cJSON_GetStringValue(dt),
                              colrt_dtype_name(x->dtype));
                    break;
                }
                /* the same global tensor, or the same one flattened (a ZeRO slice of
                 * the flat tensor on one side, a structured shard on the other) */
                int same = g == x->ndim && g >= 0 && !memcmp(gs, x->global_shape, sizeof(int64_t) * (size_t)g);
                int flat = !same && g > 0 && (g == 1 || x->ndim == 1) && volume(g, gs) >= 0 &&
                           volume(g, gs) == volume(x->ndim, x->global_shape);
                if (o != g || s != g || (!same && !flat)) {
                    rc = fail("tensor %s: the checkpoint's global shape differs from the model's", x->name);
                    break;
                }
                int inside = 1; /* whole numbers <= 2^53 (read_ints): these sums do not overflow */
                for (int d = 0; d < g; d++) inside &= so[d] + ss[d] <= gs[d];
                if (!inside) {
                    rc = fail("%s: tensor %s: a slice lies outside the global shape", ff[i].file, x->name);
                    break;
                }
                /* the slice as the file's own header describes it */
                const colrt_st_tensor *h = colrt_st_find(ff[i].st, x->name); /* checked: inside the file */
                int64_t sbytes = nbytes(s, ss, es);
                if (!h || h->ndim != s || memcmp(h->shape, ss, sizeof(int64_t) * (size_t)s) || sbytes < 0 ||
                    strcmp(h->dtype, colrt_dtype_name(x->dtype)) || (int64_t)h->bytes != sbytes) {
                    rc = fail("%s: tensor %s: the safetensors header disagrees with the manifest", ff[i].file, x->name);
                    break;
                }
                if (same) copy_box(x->ndim, es, h->data, so, ss, stage[k], x->offset, x->shape, mask);
                else copy_flat(es, g, gs, so, ss, h->data, x->ndim, x->global_shape, x->offset, x->shape, stage[k], mask);
            }
        }
        if (rc == 0 && !found) rc = fail("tensor %s is not in the checkpoint", x->name);
        for (int64_t e = 0; rc == 0 && e < vol; e++)
            if (!mask[e]) rc = fail("tensor %s: the checkpoint does not cover this rank's slice (element %lld)", x->name, (long long)e);
        free(mask);
    }
    for (int i = 0; i < nf; i++) {
        if (ff[i].map) munmap((void *)ff[i].map, ff[i].map_len);
        colrt_st_close(ff[i].st);
    }
    free(ff), free(needed);
    *manifest = man;
    *staged = stage;
    return rc;
}

int colrt_checkpoint_load(const char *dir, int n, const colrt_tensor *t) {
    colrt__require_init("colrt_checkpoint_load");
    ck_err[0] = 0;
    unsigned char **stage = NULL;
    cJSON *man = NULL;
    int rc = load_local(dir, n, t, &stage, &man);
    /* every rank agrees before any tensor is touched */
    int any = all_max(rc != 0 ? colrt__g.rank + 1 : 0);
    if (any && rc == 0) fail("rank %d could not load the checkpoint (see its message)", any - 1);
    if (!any) {
        for (int k = 0; k < n; k++)
            colrt_memcpy(t[k].data, stage[k], (size_t)nbytes(t[k].ndim, t[k].shape, colrt_dtype_size(t[k].dtype)),
                         COLRT_H2D, NULL);
        colrt_device_sync();
    }
    if (!any) { /* the training state saved with these tensors */
        free(state_in);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(man, "state");
        state_in = cJSON_IsObject(st) ? cJSON_PrintUnformatted(st) : NULL;
    }
    cJSON_Delete(man);
    for (int k = 0; k < n; k++) free(stage ? stage[k] : NULL);
    free(stage);
    return any ? -1 : 0;
}

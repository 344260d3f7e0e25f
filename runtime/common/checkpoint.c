/*
 * checkpoint.c — sharded checkpoints that survive a crash mid-save.
 *
 * Layout of a checkpoint directory:
 *   manifest.json              written last, by rank 0; names the generation
 *   g<gen>-r<rank>.safetensors one per rank: that rank's shards
 * A save of generation g+1 writes each rank file as <name>.tmp, fsyncs it,
 * renames it, gathers sizes/CRC-32s/slices to rank 0, which writes
 * manifest.json.tmp, fsyncs, renames it over the old manifest, and only then
 * deletes generation g's files. Until that rename the old manifest and its
 * files are untouched, so a crash anywhere leaves generation g loadable.
 *
 * Load reads the manifest, maps every file it needs, checks each file's size
 * and CRC-32 against the manifest and its safetensors header against the
 * slices, assembles every requested shard in host memory from the slices
 * that overlap it (so a different mesh can load it), and only when every
 * check passed on every rank copies the shards into device memory.
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

#include "internal.h"

static char ck_err[1024];
static int kill_save_rank = -1;

const char *colrt_checkpoint_error(void) { return ck_err; }
void colrt_fault_kill_save(int rank) { kill_save_rank = rank; }

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck_err, sizeof ck_err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- CRC-32 (IEEE, as zlib) ----------------------------------------------- */

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

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

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) fsync(fd), close(fd);
}

static void write_all(int fd, const void *p, size_t n, const char *path) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) colrt_die("checkpoint: writing %s failed: %s", path, strerror(errno));
        c += w, n -= (size_t)w;
    }
}

/* Writes data to path via path.tmp + fsync + rename. With die_half, exits half-way. */
static void write_atomic(const char *dir, const char *name, const void *data, size_t n, int die_half) {
    char *path = path_join(dir, name), *tmp = malloc(strlen(path) + 5);
    sprintf(tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) colrt_die("checkpoint: cannot create %s: %s", tmp, strerror(errno));
    if (die_half) {
        write_all(fd, data, n / 2, tmp);
        fsync(fd);
        fprintf(stderr, "colrt: rank %d: fault injection: dying half-way through %s\n", colrt__g.rank, tmp);
        _exit(42);
    }
    write_all(fd, data, n, tmp);
    if (fsync(fd)) colrt_die("checkpoint: fsync %s failed: %s", tmp, strerror(errno));
    close(fd);
    if (rename(tmp, path)) colrt_die("checkpoint: rename %s failed: %s", tmp, strerror(errno));
    fsync_dir(dir);
    free(path), free(tmp);
}

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

static int64_t volume(int nd, const int64_t *shape) {
    int64_t v = 1;
    for (int d = 0; d < nd; d++) v *= shape[d];
    return v;
}

static cJSON *int_array(int n, const int64_t *v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static int read_ints(const cJSON *a, int64_t *out, int max) {
    if (!cJSON_IsArray(a)) return -1;
    int n = cJSON_GetArraySize(a);
    if (n > max) return -1;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(e)) return -1;
        out[i] = (int64_t)e->valuedouble;
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
        if (t->shape[d] < 0 || t->offset[d] < 0 || t->offset[d] + t->shape[d] > t->global_shape[d])
            colrt_die("checkpoint: tensor %s: slice [%lld, +%lld) of dim %d is outside its global size %lld", t->name,
                      (long long)t->offset[d], (long long)t->shape[d], d, (long long)t->global_shape[d]);
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
    if (R == 0) {
        mkdir(dir, 0755);
        char *mp = path_join(dir, "manifest.json");
        cJSON *old = read_json(mp);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(old, "generation");
        if (cJSON_IsNumber(g)) gen = (long)g->valuedouble + 1;
        cJSON_Delete(old);
        free(mp);
    }
    bcast_long(&gen);
    mkdir(dir, 0755); /* every rank, in case dir is node-local */

    colrt_device_sync(); /* the tensors may still be in flight on any stream */
    /* this rank's safetensors file: header, padding to 8, data */
    cJSON *hdr = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    char buf[64];
    snprintf(buf, sizeof buf, "%d", R);
    cJSON_AddStringToObject(meta, "colrt.rank", buf);
    snprintf(buf, sizeof buf, "%ld", gen);
    cJSON_AddStringToObject(meta, "colrt.generation", buf);
    cJSON_AddItemToObject(hdr, "__metadata__", meta);
    size_t data_bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)volume(t[i].ndim, t[i].shape) * colrt_dtype_size(t[i].dtype);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", colrt_dtype_name(t[i].dtype));
        cJSON_AddItemToObject(e, "shape", int_array(t[i].ndim, t[i].shape));
        int64_t off[2] = {(int64_t)data_bytes, (int64_t)(data_bytes + b)};
        cJSON_AddItemToObject(e, "data_offsets", int_array(2, off));
        cJSON_AddItemToObject(hdr, t[i].name, e);
        data_bytes += b;
    }
    char *htext = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    size_t hlen = (strlen(htext) + 7) / 8 * 8, total = 8 + hlen + data_bytes;
    unsigned char *file = malloc(total);
    for (int k = 0; k < 8; k++) file[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    memset(file + 8, ' ', hlen);
    memcpy(file + 8, htext, strlen(htext));
    free(htext);
    size_t pos = 8 + hlen;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)volume(t[i].ndim, t[i].shape) * colrt_dtype_size(t[i].dtype);
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
        cJSON *files = cJSON_AddArrayToObject(man, "files");
        for (int r = 0; r < colrt__g.world; r++) {
            cJSON *f = cJSON_Parse(all + offs[r]);
            if (!f) colrt_die("checkpoint: rank %d sent an unreadable file record", r);
            cJSON_AddItemToArray(files, f);
        }
        char *text = cJSON_Print(man);
        cJSON_Delete(man);
        write_atomic(dir, "manifest.json", text, strlen(text), 0);
        free(text);
        /* the new generation is current: older files and stale temporaries go */
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            long g = 0;
            int r = 0;
            size_t len = strlen(e->d_name);
            int stale_tmp = len > 4 && !strcmp(e->d_name + len - 4, ".tmp");
            if (stale_tmp || (sscanf(e->d_name, "g%ld-r%d.safetensors", &g, &r) == 2 && g != gen)) {
                char *p = path_join(dir, e->d_name);
                unlink(p);
                free(p);
            }
        }
        if (d) closedir(d);
    }
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
    cJSON *header;
    const unsigned char *data; /* start of the data section */
} CkFile;

static int verify_file(const char *dir, CkFile *f) {
    char *path = path_join(dir, f->file);
    int fd = open(path, O_RDONLY);
    struct stat st;
    int rc = 0;
    if (fd < 0) rc = fail("cannot open %s: %s", path, strerror(errno));
    else if (fstat(fd, &st) || st.st_size != f->bytes)
        rc = fail("%s has %lld bytes, the manifest says %lld", path, (long long)st.st_size, (long long)f->bytes);
    if (rc == 0 && f->bytes > 0) {
        void *p = mmap(NULL, (size_t)f->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) rc = fail("cannot map %s: %s", path, strerror(errno));
        else {
            f->map = p, f->map_len = (size_t)f->bytes;
            uint32_t crc = crc32_of(p, (size_t)f->bytes);
            if (crc != f->crc) rc = fail("%s: CRC-32 %08x, the manifest says %08x (corrupt file)", path, crc, f->crc);
        }
    }
    if (rc == 0) {
        uint64_t hlen = 0;
        for (int k = 0; k < 8 && f->map_len >= 8; k++) hlen |= (uint64_t)f->map[k] << (8 * k);
        if (f->map_len < 8 || hlen > f->map_len - 8) rc = fail("%s: bad safetensors header length", path);
        else {
            f->header = cJSON_ParseWithLength((const char *)f->map + 8, (size_t)hlen);
            f->data = f->map + 8 + hlen;
            if (!f->header) rc = fail("%s: unreadable safetensors header", path);
        }
    }
    if (fd >= 0) close(fd);
    free(path);
    return rc;
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

static int load_local(const char *dir, int n, const colrt_tensor *t, unsigned char ***staged) {
    char *mp = path_join(dir, "manifest.json");
    cJSON *man = read_json(mp);
    int rc = 0;
    if (!man) rc = fail("%s is missing or not JSON: no complete checkpoint in %s", mp, dir);
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
        if (!cJSON_IsString(fn) || !cJSON_IsNumber(b) || !cJSON_IsNumber(c) || strchr(fn->valuestring, '/'))
            rc = fail("%s/manifest.json: file record %d is malformed", dir, i);
        else ff[i].file = fn->valuestring, ff[i].bytes = (int64_t)b->valuedouble, ff[i].crc = (uint32_t)c->valuedouble;
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
        int64_t vol = volume(x->ndim, x->shape);
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
                if (g != x->ndim || o != g || s != g || memcmp(gs, x->global_shape, sizeof(int64_t) * (size_t)g)) {
                    rc = fail("tensor %s: the checkpoint's global shape differs from the model's", x->name);
                    break;
                }
                /* the slice as the file's own header describes it */
                const cJSON *h = cJSON_GetObjectItemCaseSensitive(ff[i].header, x->name);
                int64_t hs[COLRT_MAX_DIMS], ho[2];
                int hn = read_ints(cJSON_GetObjectItemCaseSensitive(h, "shape"), hs, COLRT_MAX_DIMS);
                int64_t sbytes = volume(s, ss) * (int64_t)es;
                if (hn != s || memcmp(hs, ss, sizeof(int64_t) * (size_t)s) ||
                    read_ints(cJSON_GetObjectItemCaseSensitive(h, "data_offsets"), ho, 2) != 2 || ho[1] - ho[0] != sbytes ||
                    ho[0] < 0 || ho[1] > (int64_t)(ff[i].map_len - (size_t)(ff[i].data - ff[i].map))) {
                    rc = fail("%s: tensor %s: the safetensors header disagrees with the manifest", ff[i].file, x->name);
                    break;
                }
                copy_box(x->ndim, es, ff[i].data + ho[0], so, ss, stage[k], x->offset, x->shape, mask);
            }
        }
        if (rc == 0 && !found) rc = fail("tensor %s is not in the checkpoint", x->name);
        for (int64_t e = 0; rc == 0 && e < vol; e++)
            if (!mask[e]) rc = fail("tensor %s: the checkpoint does not cover this rank's slice (element %lld)", x->name, (long long)e);
        free(mask);
    }
    for (int i = 0; i < nf; i++) {
        if (ff[i].map) munmap((void *)ff[i].map, ff[i].map_len);
        cJSON_Delete(ff[i].header);
    }
    free(ff), free(needed);
    cJSON_Delete(man);
    *staged = stage;
    return rc;
}

int colrt_checkpoint_load(const char *dir, int n, const colrt_tensor *t) {
    colrt__require_init("colrt_checkpoint_load");
    ck_err[0] = 0;
    unsigned char **stage = NULL;
    int rc = load_local(dir, n, t, &stage);
    /* every rank agrees before any tensor is touched */
    int any = all_max(rc != 0 ? colrt__g.rank + 1 : 0);
    if (any && rc == 0) fail("rank %d could not load the checkpoint (see its message)", any - 1);
    if (!any) {
        for (int k = 0; k < n; k++)
            colrt_memcpy(t[k].data, stage[k], (size_t)volume(t[k].ndim, t[k].shape) * colrt_dtype_size(t[k].dtype),
                         COLRT_H2D, NULL);
        colrt_device_sync();
    }
    for (int k = 0; k < n; k++) free(stage ? stage[k] : NULL);
    free(stage);
    return any ? -1 : 0;
}

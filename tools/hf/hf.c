/*
 * hf.c — Hugging Face safetensors checkpoints in and out of a generated
 * model's parameters (include/colossal/hf.h). Takes the colrt_tensor list of
 * m_params(); gives the parameters filled from the file (colhf_load) or a
 * model.safetensors in Hugging Face's names and layouts (colhf_save).
 *
 * Layouts come from hf_layouts.def, by name suffix, expressed through the
 * model width D only, so that ZeRO-3 slices (1-D pieces of the flattened
 * parameter, their structured shape gone) convert as whole parameters do.
 * Loading converts every tensor to our flat order on the host, checks them
 * all, then copies each rank's piece to the device.
 */
#define _POSIX_C_SOURCE 200809L
#include "colossal/hf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colossal/safetensors.h"

typedef enum { XD, DX } HfShape;
typedef enum { COPY, TRANSPOSE } HfTransform;
typedef struct {
    const char *suffix;
    HfShape shape;
    HfTransform transform;
} HfLayout;

static const HfLayout LAYOUTS[] = {
#define X(s, sh, tr) {s, sh, tr},
#include "hf_layouts.def"
#undef X
};

typedef enum { FAM_GPT2, FAM_LLAMA } Family;

/* ---- small helpers ------------------------------------------------------- */

static int say(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t numel(int ndim, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= d[i];
    return n;
}

/* Copies between the row-major array `global` (shape gs) and the dense box of
 * it at offset off with shape sh: into the global array (to_global, marking
 * covered elements when covered is not NULL) or out of it. The box lies
 * inside (the tensor's own contract, checked by colrt). */
static void box_copy(int nd, const int64_t *gs, const int64_t *off, const int64_t *sh, float *global, float *box,
                     int to_global, unsigned char *covered) {
    int64_t n = numel(nd, sh), run = nd ? sh[nd - 1] : 1, idx[COLRT_MAX_DIMS] = {0};
    for (int64_t b = 0; run > 0 && b < n; b += run) {
        int64_t gi = 0;
        for (int d = 0; d < nd; d++) gi = gi * gs[d] + off[d] + (d == nd - 1 ? 0 : idx[d]);
        if (to_global) {
            memcpy(global + gi, box + b, sizeof(float) * (size_t)run);
            if (covered) memset(covered + gi, 1, (size_t)run);
        } else {
            memcpy(box + b, global + gi, sizeof(float) * (size_t)run);
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < sh[d]) break;
            idx[d] = 0;
        }
    }
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf) && (n == m || s[n - m - 1] == '.');
}

static const HfLayout *layout_of(const char *name) {
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++)
        if (ends_with(name, LAYOUTS[i].suffix)) return &LAYOUTS[i];
    return NULL;
}

static const colrt_tensor *find_param(const colrt_tensor *p, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].name, name)) return &p[i];
    return NULL;
}

static int is_whole(const colrt_tensor *t) {
    for (int d = 0; d < t->ndim; d++)
        if (t->offset[d] != 0 || t->shape[d] != t->global_shape[d]) return 0;
    return 1;
}

/* The family and its width D (a final norm's length; norms are never split). */
static int model_family(const colrt_tensor *p, int n, Family *fam, int64_t *D, char *err, size_t errlen) {
    const colrt_tensor *norm;
    if (find_param(p, n, "wte.weight") && (norm = find_param(p, n, "ln_f.weight"))) *fam = FAM_GPT2;
    else if (find_param(p, n, "model.embed_tokens.weight") && (norm = find_param(p, n, "model.norm.weight")))
        *fam = FAM_LLAMA;
    else
        return say(err, errlen, "the model is neither GPT-2 (wte.weight, ln_f.weight) nor LLaMA "
                                "(model.embed_tokens.weight, model.norm.weight): Hugging Face interop knows those two");
    *D = numel(norm->ndim, norm->global_shape);
    return 0;
}

/* Hugging Face's shape of parameter t (rows, cols; cols 0 for 1-D) and the transform. */
static void hf_layout(const colrt_tensor *t, int64_t D, int64_t *rows, int64_t *cols, HfTransform *tr) {
    const HfLayout *l = layout_of(t->name);
    int64_t ne = numel(t->ndim, t->global_shape);
    *tr = COPY;
    if (l && ne % D == 0) {
        *rows = l->shape == XD ? ne / D : D;
        *cols = l->shape == XD ? D : ne / D;
        *tr = l->transform;
        /* an untied head declared [D, V] instead of Hugging Face's [V, D] */
        if (!strcmp(t->name, "lm_head.weight") && t->ndim == 2 && is_whole(t) && t->global_shape[0] == D &&
            t->global_shape[1] != D)
            *tr = TRANSPOSE;
    } else if (t->ndim == 2 && is_whole(t)) {
        *rows = t->global_shape[0];
        *cols = t->global_shape[1];
    } else {
        *rows = ne;
        *cols = 0;
    }
}

/* HF [rows, cols] -> ours (transposed: [cols, rows]), or back (inverse). */
static void convert(const float *src, float *dst, int64_t rows, int64_t cols, HfTransform tr, int inverse) {
    int64_t ne = cols ? rows * cols : rows;
    if (tr == COPY || !cols) {
        memcpy(dst, src, sizeof(float) * (size_t)ne);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            if (!inverse) dst[c * rows + r] = src[r * cols + c];
            else dst[r * cols + c] = src[c * rows + r];
        }
}

/* ---- safetensors reading (colossal/safetensors.h) ----------------------------- */

typedef struct {
    const colrt_st_tensor *t; /* checked by colrt_st_open: inside its file */
    int used;
} StEntry;

/* One or more safetensors files (a sharded checkpoint), mapped read-only. */
#define ST_MAX_PARTS 256
typedef struct {
    colrt_st_file *part[ST_MAX_PARTS];
    int nparts;
    StEntry *e;
    int n, cap;
} StFile;

static void st_free(StFile *f) {
    for (int i = 0; i < f->nparts; i++) colrt_st_close(f->part[i]);
    free(f->e);
    memset(f, 0, sizeof *f);
}

/* Adds the tensors of one safetensors file to f. */
static int st_add(const char *path, StFile *f, char *err, size_t errlen) {
    if (f->nparts == ST_MAX_PARTS) return say(err, errlen, "%s: more than %d files in one checkpoint", path, ST_MAX_PARTS);
    colrt_st_file *p = colrt_st_open(path, err, errlen);
    if (!p) return -1;
    f->part[f->nparts++] = p;
    int need = f->n + colrt_st_count(p) + 1;
    if (need > f->cap) {
        f->cap = need * 2;
        f->e = realloc(f->e, sizeof *f->e * (size_t)f->cap);
    }
    for (int i = 0; i < colrt_st_count(p); i++) f->e[f->n++] = (StEntry){colrt_st_at(p, i), 0};
    return 0;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A JSON file beside the weights (an index, config.json); NULL with a message. */
static cJSON *read_json(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (64 << 20)) {
        say(err, errlen, "%s: cannot read it (%s)", path,
            fd < 0 ? "missing" : S_ISREG(sb.st_mode) ? "over 64 MB" : "not a regular file");
        if (fd >= 0) close(fd);
        return NULL;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (text && got < (size_t)sb.st_size) {
        ssize_t r = read(fd, text + got, (size_t)sb.st_size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    cJSON *j = text ? cJSON_ParseWithLength(text, got) : NULL;
    free(text);
    if (!j) say(err, errlen, "%s: not JSON", path);
    return j;
}

/* PATH: a .safetensors file, a model.safetensors.index.json (shards), or a
 * directory holding either. Sets cfg to the config.json to check. */
static int st_open(const char *path, StFile *f, char *cfg, size_t cfglen, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    char file[4096], dir[2048];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(file, sizeof file, "%s/model.safetensors", path);
        if (!exists(file)) snprintf(file, sizeof file, "%s/model.safetensors.index.json", path);
    } else {
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        snprintf(file, sizeof file, "%s", path);
    }
    snprintf(cfg, cfglen, "%s/config.json", dir);
    size_t n = strlen(file);
    if (n < 11 || strcmp(file + n - 11, ".index.json")) return st_add(file, f, err, errlen);
    /* sharded: the index's weight_map names the files */
    cJSON *idx = read_json(file, err, errlen);
    if (!idx) return -1;
    cJSON *map = cJSON_GetObjectItem(idx, "weight_map");
    int rc = cJSON_IsObject(map) ? 0 : say(err, errlen, "%s: not a safetensors index (no weight_map)", file);
    for (cJSON *it = map ? map->child : NULL; it && !rc; it = it->next) {
        if (!cJSON_IsString(it) || !*it->valuestring || strchr(it->valuestring, '/')) {
            rc = say(err, errlen, "%s: weight_map['%s'] is not a file name beside the index", file, it->string);
            break;
        }
        int seen = 0;
        for (cJSON *p = map->child; p != it && !seen; p = p->next) seen = !strcmp(p->valuestring, it->valuestring);
        if (seen) continue;
        char part[8192];
        snprintf(part, sizeof part, "%s/%s", dir, it->valuestring);
        rc = st_add(part, f, err, errlen);
    }
    cJSON_Delete(idx);
    return rc;
}

static float half_to_f32(uint16_t h, int bf16) {
    uint32_t bits;
    if (bf16) {
        bits = (uint32_t)h << 16;
    } else {
        uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
        if (e == 0 && m == 0) bits = s;
        else if (e == 31) bits = s | 0x7f800000u | m << 13;
        else if (e == 0) { /* subnormal */
            float v = (float)m / 16777216.0f;
            return s ? -v : v;
        } else bits = s | (e + 112) << 23 | m << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The entry's elements as f32 (F32, F64, F16, BF16). */
static int st_to_f32(const colrt_st_tensor *e, float *out, int64_t n, const char *path, char *err, size_t errlen) {
    size_t w = !strcmp(e->dtype, "F32") ? 4 : !strcmp(e->dtype, "F64") ? 8
             : (!strcmp(e->dtype, "F16") || !strcmp(e->dtype, "BF16")) ? 2 : 0;
    if (!w) return say(err, errlen, "%s: tensor '%s' has dtype %s; F32, F64, F16 and BF16 are read", path, e->name, e->dtype);
    if (e->bytes != w * (size_t)n)
        return say(err, errlen, "%s: tensor '%s' holds %zu bytes, not %lld elements of %s", path, e->name, e->bytes,
                   (long long)n, e->dtype);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)e->data + w * (size_t)i;
        if (w == 4) memcpy(&out[i], p, 4);
        else if (w == 8) {
            double d;
            memcpy(&d, p, 8);
            out[i] = (float)d;
        } else {
            uint16_t h;
            memcpy(&h, p, 2);
            out[i] = half_to_f32(h, e->dtype[0] == 'B');
        }
    }
    return 0;
}

/* ---- loading ------------------------------------------------------------------------ */

/* Tensors Hugging Face files carry that have no parameter here. */
static int ignorable(Family fam, const char *name) {
    if (fam == FAM_GPT2)
        return !strcmp(name, "lm_head.weight") || ends_with(name, "attn.bias") || ends_with(name, "attn.masked_bias");
    return ends_with(name, "rotary_emb.inv_freq");
}

static StEntry *st_find(StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].t->name, name)) return &f->e[i];
    return NULL;
}

typedef struct {
    const char *key;
    int64_t ours;
} Want;

/* config.json beside the weights: head counts and width against ours. */
static int check_config(const char *cfg_path, Family fam, int64_t D, const colrt_tensor *p, int n, char *err,
                        size_t errlen) {
    if (!exists(cfg_path)) return 0; /* no config: nothing to check */
    cJSON *c = read_json(cfg_path, err, errlen);
    if (!c) return -1;
    Want want[3];
    int nw = 0;
    const colrt_tensor *t;
    if (fam == FAM_GPT2) {
        want[nw++] = (Want){"n_embd", D};
        if ((t = find_param(p, n, "h.0.attn.c_attn.weight")) && t->ndim == 4) want[nw++] = (Want){"n_head", t->global_shape[2]};
    } else {
        want[nw++] = (Want){"hidden_size", D};
        if ((t = find_param(p, n, "model.layers.0.self_attn.q_proj.weight")) && t->ndim == 3)
            want[nw++] = (Want){"num_attention_heads", t->global_shape[1]};
        if ((t = find_param(p, n, "model.layers.0.self_attn.k_proj.weight")) && t->ndim == 3)
            want[nw++] = (Want){"num_key_value_heads", t->global_shape[1]};
    }
    int rc = 0;
    for (int i = 0; i < nw && !rc; i++) {
        cJSON *v = cJSON_GetObjectItem(c, want[i].key);
        if (cJSON_IsNumber(v) && v->valuedouble != (double)want[i].ours)
            rc = say(err, errlen, "%s: %s is %g but the model has %lld (compile it with the checkpoint's sizes)",
                     cfg_path, want[i].key, v->valuedouble, (long long)want[i].ours);
    }
    cJSON_Delete(c);
    return rc;
}

int colhf_load(const char *path, const colrt_tensor *params, int n, char *err, size_t errlen) {
    Family fam;
    int64_t D;
    if (model_family(params, n, &fam, &D, err, errlen)) return -1;
    char cfg[4096];
    const char *file = path;
    StFile f;
    if (st_open(path, &f, cfg, sizeof cfg, err, errlen)) {
        st_free(&f);
        return -1;
    }
    if (check_config(cfg, fam, D, params, n, err, errlen)) {
        st_free(&f);
        return -1;
    }
    float **conv = calloc((size_t)n, sizeof *conv);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const colrt_tensor *t = &params[i];
        if (t->dtype != COLRT_F32) {
            rc = say(err, errlen, "parameter %s is %s; Hugging Face loading fills F32 parameters", t->name,
                     colrt_dtype_name(t->dtype));
            break;
        }
        char alt[512];
        snprintf(alt, sizeof alt, "transformer.%s", t->name);
        StEntry *e = st_find(&f, t->name);
        if (!e && fam == FAM_GPT2) e = st_find(&f, alt);
        if (!e && fam == FAM_LLAMA && !strcmp(t->name, "lm_head.weight"))
            e = st_find(&f, "model.embed_tokens.weight"); /* tie_word_embeddings */
        if (!e) {
            rc = say(err, errlen, "%s: no tensor %s (is it a %s checkpoint of this size?)", file, t->name,
                     fam == FAM_GPT2 ? "GPT-2" : "LLaMA");
            break;
        }
        e->used = 1;
        const colrt_st_tensor *st = e->t;
        int64_t rows, cols, ne = numel(t->ndim, t->global_shape);
        HfTransform tr;
        hf_layout(t, D, &rows, &cols, &tr);
        int shape_ok = cols ? (st->ndim == 2 && st->shape[0] == rows && st->shape[1] == cols)
                            : (st->ndim == 1 && st->shape[0] == rows);
        if (!shape_ok) {
            char hs[128] = "", want[64];
            for (int d = 0; d < st->ndim; d++)
                snprintf(hs + strlen(hs), sizeof hs - strlen(hs), "%s%lld", d ? ", " : "", (long long)st->shape[d]);
            if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
            else snprintf(want, sizeof want, "[%lld]", (long long)rows);
            rc = say(err, errlen, "%s: tensor %s is [%s]; the model wants %s (compile it with the checkpoint's sizes)",
                     file, st->name, hs, want);
            break;
        }
        float *hf = malloc(sizeof(float) * (size_t)ne);
        conv[i] = malloc(sizeof(float) * (size_t)ne);
        rc = st_to_f32(st, hf, ne, file, err, errlen);
        if (!rc) convert(hf, conv[i], rows, cols, tr, 0);
        free(hf);
    }
    for (int i = 0; i < f.n && !rc; i++) {
        const char *nm = f.e[i].t->name;
        if (f.e[i].used) continue;
        if (fam == FAM_GPT2 && !strncmp(nm, "transformer.", 12) && ignorable(fam, nm + 12)) continue;
        if (ignorable(fam, nm)) continue;
        if (fam == FAM_LLAMA && !strcmp(nm, "lm_head.weight") && !find_param(params, n, nm)) continue;
        rc = say(err, errlen, "%s: tensor %s has no parameter in the model (a different architecture or depth?)",
                 file, nm);
    }
    for (int i = 0; i < n && !rc; i++) { /* every check passed: this rank's piece (any box) to the device */
        const colrt_tensor *t = &params[i];
        int64_t local = numel(t->ndim, t->shape);
        float *box = malloc(sizeof(float) * (size_t)(local ? local : 1));
        box_copy(t->ndim, t->global_shape, t->offset, t->shape, conv[i], box, 0, NULL);
        colrt_memcpy(t->data, box, sizeof(float) * (size_t)local, COLRT_H2D, NULL);
        colrt_device_sync();
        free(box);
    }
    colrt_device_sync();
    for (int i = 0; i < n; i++) free(conv[i]);
    free(conv);
    st_free(&f);
    return rc;
}

/* ---- saving --------------------------------------------------------------------------- */

/* The whole parameter on rank 0 (ours, flat), from every rank's box of it
 * (whole, split on any dims, ZeRO-3 slices of the flattened tensor; replicas
 * agree). Collective. NULL on rank 0 with a message when the boxes do not
 * cover the parameter; NULL elsewhere. */
static float *gather(const colrt_tensor *t, char *err, size_t errlen) {
    int rank = colrt_rank(), world = colrt_world(), nd = t->ndim;
    int64_t ne = numel(nd, t->global_shape), local = numel(nd, t->shape);
    float *mine = malloc(sizeof(float) * (size_t)(local ? local : 1));
    colrt_memcpy(mine, t->data, sizeof(float) * (size_t)local, COLRT_D2H, NULL);
    colrt_device_sync();
    int whole = is_whole(t), any_split = !whole;
    MPI_Allreduce(MPI_IN_PLACE, &any_split, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any_split) {
        if (rank == 0) return mine;
        free(mine);
        return NULL;
    }
    /* every rank's box (offset, shape per dim), then the data */
    long long box[2 * COLRT_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) box[d] = t->offset[d], box[COLRT_MAX_DIMS + d] = t->shape[d];
    long long *all = rank == 0 ? malloc(sizeof box * (size_t)world) : NULL;
    MPI_Gather(box, 2 * COLRT_MAX_DIMS, MPI_LONG_LONG, all, 2 * COLRT_MAX_DIMS, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    int *counts = NULL, *displs = NULL, too_big = 0;
    float *buf = NULL;
    if (rank == 0) {
        counts = malloc(sizeof(int) * (size_t)world);
        displs = malloc(sizeof(int) * (size_t)world);
        int64_t total = 0;
        for (int r = 0; r < world; r++) {
            int64_t c = 1;
            for (int d = 0; d < nd; d++) c *= all[2 * COLRT_MAX_DIMS * r + COLRT_MAX_DIMS + d];
            too_big |= c > INT32_MAX || total > INT32_MAX - c;
            counts[r] = (int)c;
            displs[r] = (int)total;
            total += c;
        }
        buf = too_big ? NULL : malloc(sizeof(float) * (size_t)(total ? total : 1));
    }
    MPI_Bcast(&too_big, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (too_big) { /* MPI counts are ints */
        if (rank == 0) say(err, errlen, "parameter %s: its pieces exceed 2^31 elements together", t->name);
        free(mine), free(all), free(counts), free(displs);
        return NULL;
    }
    MPI_Gatherv(mine, (int)local, MPI_FLOAT, buf, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
    free(mine);
    if (rank != 0) return NULL;
    float *out = malloc(sizeof(float) * (size_t)(ne ? ne : 1));
    unsigned char *covered = calloc((size_t)(ne ? ne : 1), 1);
    for (int r = 0; r < world; r++) {
        const long long *b = all + 2 * COLRT_MAX_DIMS * r;
        int64_t off[COLRT_MAX_DIMS], sh[COLRT_MAX_DIMS];
        for (int d = 0; d < nd; d++) off[d] = b[d], sh[d] = b[COLRT_MAX_DIMS + d];
        box_copy(nd, t->global_shape, off, sh, out, buf + displs[r], 1, covered);
    }
    int64_t hole = -1;
    for (int64_t k = 0; k < ne && hole < 0; k++)
        if (!covered[k]) hole = k;
    free(all), free(counts), free(displs), free(buf), free(covered);
    if (hole >= 0) {
        say(err, errlen, "parameter %s: no rank holds its element %lld, so it cannot be exported", t->name,
            (long long)hole);
        free(out);
        return NULL;
    }
    return out;
}

/* config.json for from_pretrained, from what the parameters tell (sizes,
 * depth, heads when the shapes are structured; the epsilon and RoPE base are
 * the model files' defaults). NULL when the head counts are not known (ZeRO-3
 * slices carry flattened shapes). */
static char *hf_config(Family fam, int64_t D, const colrt_tensor *p, int n) {
    int layers = 0;
    for (int i = 0; i < n; i++) {
        int l = -1;
        if (sscanf(p[i].name, fam == FAM_GPT2 ? "h.%d." : "model.layers.%d.", &l) == 1 && l + 1 > layers) layers = l + 1;
    }
    const colrt_tensor *t;
    cJSON *c = cJSON_CreateObject();
    int ok = 1;
    if (fam == FAM_GPT2) {
        cJSON_AddItemToObject(c, "architectures", cJSON_CreateStringArray((const char *[]){"GPT2LMHeadModel"}, 1));
        cJSON_AddStringToObject(c, "model_type", "gpt2");
        cJSON_AddStringToObject(c, "activation_function", "gelu_new");
        cJSON_AddNumberToObject(c, "n_embd", (double)D);
        cJSON_AddNumberToObject(c, "n_layer", layers);
        ok &= (t = find_param(p, n, "h.0.attn.c_attn.weight")) && t->ndim == 4;
        if (ok) cJSON_AddNumberToObject(c, "n_head", (double)t->global_shape[2]);
        if ((t = find_param(p, n, "wpe.weight"))) {
            cJSON_AddNumberToObject(c, "n_positions", (double)(numel(t->ndim, t->global_shape) / D));
            cJSON_AddNumberToObject(c, "n_ctx", (double)(numel(t->ndim, t->global_shape) / D));
        }
        if ((t = find_param(p, n, "wte.weight"))) cJSON_AddNumberToObject(c, "vocab_size", (double)(numel(t->ndim, t->global_shape) / D));
        cJSON_AddNumberToObject(c, "layer_norm_epsilon", 1e-5);
        cJSON_AddTrueToObject(c, "tie_word_embeddings");
    } else {
        cJSON_AddItemToObject(c, "architectures", cJSON_CreateStringArray((const char *[]){"LlamaForCausalLM"}, 1));
        cJSON_AddStringToObject(c, "model_type", "llama");
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        cJSON_AddNumberToObject(c, "hidden_size", (double)D);
        cJSON_AddNumberToObject(c, "num_hidden_layers", layers);
        ok &= (t = find_param(p, n, "model.layers.0.self_attn.q_proj.weight")) && t->ndim == 3;
        if (ok) cJSON_AddNumberToObject(c, "num_attention_heads", (double)t->global_shape[1]);
        ok &= (t = find_param(p, n, "model.layers.0.self_attn.k_proj.weight")) && t->ndim == 3;
        if (ok) cJSON_AddNumberToObject(c, "num_key_value_heads", (double)t->global_shape[1]);
        if ((t = find_param(p, n, "model.layers.0.mlp.gate_proj.weight")))
            cJSON_AddNumberToObject(c, "intermediate_size", (double)(numel(t->ndim, t->global_shape) / D));
        if ((t = find_param(p, n, "model.embed_tokens.weight")))
            cJSON_AddNumberToObject(c, "vocab_size", (double)(numel(t->ndim, t->global_shape) / D));
        cJSON_AddNumberToObject(c, "rms_norm_eps", 1e-5);
        cJSON_AddNumberToObject(c, "rope_theta", 10000.0);
        cJSON_AddBoolToObject(c, "tie_word_embeddings", !find_param(p, n, "lm_head.weight"));
    }
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    cJSON_AddStringToObject(c, "colossal_note", "written by colhf_save: sizes from the parameters; the epsilon and RoPE "
                                                "base are the model files' defaults (recompiled with -DEPS or "
                                                "-DROPE_THETA? edit them)");
    char *text = ok ? cJSON_Print(c) : NULL;
    cJSON_Delete(c);
    return text;
}

int colhf_save(const char *dir, const colrt_tensor *params, int n, char *err, size_t errlen) {
    Family fam;
    int64_t D;
    if (model_family(params, n, &fam, &D, err, errlen)) return -1;
    int rank0 = colrt_rank() == 0, rc = 0;
    float **hf = calloc((size_t)n, sizeof *hf);
    int64_t *rows = calloc((size_t)n, sizeof *rows), *cols = calloc((size_t)n, sizeof *cols);
    for (int i = 0; i < n; i++) {
        HfTransform tr;
        hf_layout(&params[i], D, &rows[i], &cols[i], &tr);
        float *ours = gather(&params[i], err, errlen); /* collective: every rank, every parameter */
        if (!ours) {
            if (rank0) rc = -1;
            continue;
        }
        int64_t ne = numel(params[i].ndim, params[i].global_shape);
        hf[i] = malloc(sizeof(float) * (size_t)(ne ? ne : 1));
        convert(ours, hf[i], rows[i], cols[i], tr, 1);
        free(ours);
    }
    if (rank0 && rc == 0) {
        mkdir(dir, 0777);
        colrt_st_tensor *st = calloc((size_t)(n ? n : 1), sizeof *st);
        char (*names)[512] = calloc((size_t)(n ? n : 1), sizeof *names);
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "%s%s", fam == FAM_GPT2 ? "transformer." : "", params[i].name);
            st[i] = (colrt_st_tensor){.name = names[i], .dtype = "F32", .ndim = cols[i] ? 2 : 1,
                                      .shape = {rows[i], cols[i]}, .data = hf[i],
                                      .bytes = sizeof(float) * (size_t)(cols[i] ? rows[i] * cols[i] : rows[i])};
        }
        const char *meta[] = {"format", "pt", "producer", "colossal colhf_save", NULL};
        size_t len = 0;
        unsigned char *file = colrt_st_build(n, st, meta, &len, err, errlen);
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (!file) rc = -1;
        else if (colrt_write_file_atomic(path, file, len) != 0)
            rc = say(err, errlen, "%s: cannot write it: %s", path, strerror(errno));
        free(file);
        char *cfg = rc ? NULL : hf_config(fam, D, params, n);
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (cfg && colrt_write_file_atomic(path, cfg, strlen(cfg)) != 0)
            rc = say(err, errlen, "%s: cannot write it: %s", path, strerror(errno));
        free(cfg);
        free(st);
        free(names);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc && !rank0) say(err, errlen, "rank 0 could not write the Hugging Face checkpoint in %s", dir);
    for (int i = 0; i < n; i++) free(hf[i]);
    free(hf);
    free(rows);
    free(cols);
    return rc;
}

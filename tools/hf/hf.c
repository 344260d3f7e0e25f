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

/* ---- safetensors reading ------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[8];
    const unsigned char *data;
    size_t bytes;
    int used;
} StEntry;

/* One or more safetensors files (a sharded checkpoint), mapped read-only. */
#define ST_MAX_PARTS 256
typedef struct {
    void *map[ST_MAX_PARTS];
    size_t len[ST_MAX_PARTS];
    cJSON *header[ST_MAX_PARTS];
    int nparts;
    StEntry *e;
    int n, cap;
} StFile;

static void st_free(StFile *f) {
    for (int i = 0; i < f->nparts; i++) {
        cJSON_Delete(f->header[i]);
        if (f->map[i]) munmap(f->map[i], f->len[i]);
    }
    free(f->e);
    memset(f, 0, sizeof *f);
}

/* Adds the tensors of one safetensors file to f. */
static int st_add(const char *path, StFile *f, char *err, size_t errlen) {
    if (f->nparts == ST_MAX_PARTS) return say(err, errlen, "%s: more than %d files in one checkpoint", path, ST_MAX_PARTS);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return say(err, errlen, "%s: cannot open", path);
    struct stat sb;
    size_t len = fstat(fd, &sb) == 0 ? (size_t)sb.st_size : 0;
    void *map = len >= 8 ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return say(err, errlen, "%s: too short to be a safetensors file", path);
    int part = f->nparts++;
    f->map[part] = map;
    f->len[part] = len;
    const unsigned char *buf = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > (uint64_t)len - 8)
        return say(err, errlen, "%s: not a safetensors file (header length %llu beyond the file's %zu bytes)", path,
                   (unsigned long long)hlen, len);
    cJSON *h = f->header[part] = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    if (!cJSON_IsObject(h)) return say(err, errlen, "%s: not a safetensors file (its header is not a JSON object)", path);
    const unsigned char *data = buf + 8 + hlen;
    size_t data_len = len - 8 - (size_t)hlen;
    int need = f->n + cJSON_GetArraySize(h) + 1;
    if (need > f->cap) {
        f->cap = need * 2;
        f->e = realloc(f->e, sizeof *f->e * (size_t)f->cap);
    }
    for (cJSON *it = h->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) continue;
        StEntry *e = &f->e[f->n];
        memset(e, 0, sizeof *e);
        cJSON *dt = cJSON_GetObjectItem(it, "dtype"), *sh = cJSON_GetObjectItem(it, "shape"),
              *off = cJSON_GetObjectItem(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 8 || !cJSON_IsArray(off) ||
            cJSON_GetArraySize(off) != 2)
            return say(err, errlen, "%s: tensor '%s' has a malformed header entry", path, it->string);
        e->name = it->string;
        e->dtype = dt->valuestring;
        e->ndim = cJSON_GetArraySize(sh);
        for (int d = 0; d < e->ndim; d++) e->shape[d] = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble;
        double b = cJSON_GetArrayItem(off, 0)->valuedouble, x = cJSON_GetArrayItem(off, 1)->valuedouble;
        if (b < 0 || x < b || x > (double)data_len)
            return say(err, errlen, "%s: tensor '%s' lies outside the file", path, e->name);
        e->data = data + (size_t)b;
        e->bytes = (size_t)(x - b);
        f->n++;
    }
    return 0;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
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
    FILE *fp = fopen(file, "rb");
    if (!fp) return say(err, errlen, "%s: cannot open (no model.safetensors either)", file);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, fp);
    fclose(fp);
    text[got] = 0;
    cJSON *idx = cJSON_Parse(text);
    free(text);
    cJSON *map = cJSON_GetObjectItem(idx, "weight_map");
    int rc = cJSON_IsObject(map) ? 0 : say(err, errlen, "%s: not a safetensors index (no weight_map)", file);
    for (cJSON *it = map ? map->child : NULL; it && !rc; it = it->next) {
        int seen = 0;
        for (cJSON *p = map->child; p != it && !seen; p = p->next) seen = !strcmp(p->valuestring, it->valuestring);
        if (seen || !cJSON_IsString(it)) continue;
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
static int st_to_f32(const StEntry *e, float *out, int64_t n, const char *path, char *err, size_t errlen) {
    size_t w = !strcmp(e->dtype, "F32") ? 4 : !strcmp(e->dtype, "F64") ? 8
             : (!strcmp(e->dtype, "F16") || !strcmp(e->dtype, "BF16")) ? 2 : 0;
    if (!w) return say(err, errlen, "%s: tensor '%s' has dtype %s; F32, F64, F16 and BF16 are read", path, e->name, e->dtype);
    if (e->bytes != w * (size_t)n)
        return say(err, errlen, "%s: tensor '%s' holds %zu bytes, not %lld elements of %s", path, e->name, e->bytes,
                   (long long)n, e->dtype);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = e->data + w * (size_t)i;
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
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    return NULL;
}

typedef struct {
    const char *key;
    int64_t ours;
} Want;

/* config.json beside the weights: head counts and width against ours. */
static int check_config(const char *cfg_path, Family fam, int64_t D, const colrt_tensor *p, int n, char *err,
                        size_t errlen) {
    FILE *fp = fopen(cfg_path, "rb");
    if (!fp) return 0; /* no config: nothing to check */
    char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[len] = 0;
    cJSON *c = cJSON_Parse(text);
    if (!c) return say(err, errlen, "%s: not JSON", cfg_path);
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
        if (cJSON_IsNumber(v) && (int64_t)v->valuedouble != want[i].ours)
            rc = say(err, errlen, "%s: %s is %lld but the model has %lld (compile it with the checkpoint's sizes)",
                     cfg_path, want[i].key, (long long)v->valuedouble, (long long)want[i].ours);
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
        int64_t rows, cols, ne = numel(t->ndim, t->global_shape);
        HfTransform tr;
        hf_layout(t, D, &rows, &cols, &tr);
        int shape_ok = cols ? (e->ndim == 2 && e->shape[0] == rows && e->shape[1] == cols)
                            : (numel(e->ndim, e->shape) == rows && e->ndim == 1);
        if (!shape_ok) {
            char hs[128] = "", want[64];
            for (int d = 0; d < e->ndim; d++)
                snprintf(hs + strlen(hs), sizeof hs - strlen(hs), "%s%lld", d ? ", " : "", (long long)e->shape[d]);
            if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
            else snprintf(want, sizeof want, "[%lld]", (long long)rows);
            rc = say(err, errlen, "%s: tensor %s is [%s]; the model wants %s (compile it with the checkpoint's sizes)",
                     file, e->name, hs, want);
            break;
        }
        float *hf = malloc(sizeof(float) * (size_t)ne);
        conv[i] = malloc(sizeof(float) * (size_t)ne);
        rc = st_to_f32(e, hf, ne, file, err, errlen);
        if (!rc) convert(hf, conv[i], rows, cols, tr, 0);
        free(hf);
    }
    for (int i = 0; i < f.n && !rc; i++) {
        const char *nm = f.e[i].name;
        if (f.e[i].used) continue;
        if (fam == FAM_GPT2 && !strncmp(nm, "transformer.", 12) && ignorable(fam, nm + 12)) continue;
        if (ignorable(fam, nm)) continue;
        if (fam == FAM_LLAMA && !strcmp(nm, "lm_head.weight") && !find_param(params, n, nm)) continue;
        rc = say(err, errlen, "%s: tensor %s has no parameter in the model (a different architecture or depth?)",
                 file, nm);
    }
    for (int i = 0; i < n && !rc; i++) { /* every check passed: this rank's pieces to the device */
        const colrt_tensor *t = &params[i];
        if (is_whole(t)) {
            colrt_memcpy(t->data, conv[i], sizeof(float) * (size_t)numel(t->ndim, t->shape), COLRT_H2D, NULL);
        } else if (t->ndim == 1) {
            colrt_memcpy(t->data, conv[i] + t->offset[0], sizeof(float) * (size_t)t->shape[0], COLRT_H2D, NULL);
        } else {
            rc = say(err, errlen, "parameter %s is split in more than one piece per dim; Hugging Face loading "
                                  "handles whole parameters and ZeRO-3 slices", t->name);
        }
    }
    colrt_device_sync();
    for (int i = 0; i < n; i++) free(conv[i]);
    free(conv);
    st_free(&f);
    return rc;
}

/* ---- saving --------------------------------------------------------------------------- */

/* The whole parameter on rank 0 (ours, flat); ZeRO-3 slices gathered. Collective. */
static float *gather(const colrt_tensor *t) {
    int rank = colrt_rank(), world = colrt_world();
    int64_t ne = numel(t->ndim, t->global_shape), local = numel(t->ndim, t->shape);
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
    /* each rank's (offset, count) of the flat tensor, then the data */
    long long oc[2] = {whole ? 0 : t->offset[0], local};
    long long *all = rank == 0 ? malloc(sizeof(long long) * 2 * (size_t)world) : NULL;
    MPI_Gather(oc, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    int *counts = NULL, *displs = NULL;
    float *buf = NULL;
    if (rank == 0) {
        counts = malloc(sizeof(int) * (size_t)world);
        displs = malloc(sizeof(int) * (size_t)world);
        int64_t total = 0;
        for (int r = 0; r < world; r++) {
            counts[r] = (int)all[2 * r + 1];
            displs[r] = (int)total;
            total += all[2 * r + 1];
        }
        buf = malloc(sizeof(float) * (size_t)(total ? total : 1));
    }
    MPI_Gatherv(mine, (int)local, MPI_FLOAT, buf, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
    free(mine);
    if (rank != 0) return NULL;
    float *out = malloc(sizeof(float) * (size_t)ne);
    for (int r = 0; r < world; r++)
        memcpy(out + all[2 * r], buf + displs[r], sizeof(float) * (size_t)counts[r]);
    free(all);
    free(counts);
    free(displs);
    free(buf);
    return out;
}

int colhf_save(const char *dir, const colrt_tensor *params, int n, char *err, size_t errlen) {
    Family fam;
    int64_t D;
    if (model_family(params, n, &fam, &D, err, errlen)) return -1;
    int rank0 = colrt_rank() == 0;
    float **hf = calloc((size_t)n, sizeof *hf);
    int64_t *rows = calloc((size_t)n, sizeof *rows), *cols = calloc((size_t)n, sizeof *cols);
    for (int i = 0; i < n; i++) {
        HfTransform tr;
        hf_layout(&params[i], D, &rows[i], &cols[i], &tr);
        float *ours = gather(&params[i]);
        if (!ours) continue;
        int64_t ne = numel(params[i].ndim, params[i].global_shape);
        hf[i] = malloc(sizeof(float) * (size_t)ne);
        convert(ours, hf[i], rows[i], cols[i], tr, 1);
        free(ours);
    }
    int rc = 0;
    if (rank0) {
        mkdir(dir, 0777);
        cJSON *h = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
        cJSON_AddStringToObject(meta, "format", "pt");
        cJSON_AddStringToObject(meta, "producer", "colossal colhf_save");
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            char name[512];
            snprintf(name, sizeof name, "%s%s", fam == FAM_GPT2 ? "transformer." : "", params[i].name);
            cJSON *e = cJSON_AddObjectToObject(h, name);
            cJSON_AddStringToObject(e, "dtype", "F32");
            cJSON *sh = cJSON_AddArrayToObject(e, "shape");
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)rows[i]));
            if (cols[i]) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)cols[i]));
            size_t bytes = sizeof(float) * (size_t)(cols[i] ? rows[i] * cols[i] : rows[i]);
            cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + bytes)));
            off += bytes;
        }
        char *text = cJSON_PrintUnformatted(h);
        cJSON_Delete(h);
        size_t hlen = strlen(text), padded = (hlen + 7) / 8 * 8; /* data 8-byte aligned, spaces pad */
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *fp = fopen(path, "wb");
        if (!fp) {
            rc = say(err, errlen, "%s: cannot write", path);
        } else {
            unsigned char len8[8];
            for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)padded >> (8 * b));
            int ok = fwrite(len8, 8, 1, fp) == 1 && fwrite(text, 1, hlen, fp) == hlen;
            for (size_t k = hlen; k < padded && ok; k++) ok = fputc(' ', fp) != EOF;
            for (int i = 0; i < n && ok; i++) {
                size_t ne = (size_t)(cols[i] ? rows[i] * cols[i] : rows[i]);
                ok = fwrite(hf[i], sizeof(float), ne, fp) == ne;
            }
            if (fclose(fp) != 0 || !ok) rc = say(err, errlen, "%s: write failed (disk full?)", path);
        }
        free(text);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc && !rank0) say(err, errlen, "rank 0 could not write the Hugging Face checkpoint in %s", dir);
    for (int i = 0; i < n; i++) free(hf[i]);
    free(hf);
    free(rows);
    free(cols);
    return rc;
}

/*
 * safetensors.c — reading and writing safetensors files
 * (include/colossal/safetensors.h): the one implementation behind
 * checkpoints (checkpoint.c) and the Hugging Face interop (tools/hf).
 * Takes a mapped file or a list of host tensors; gives checked entries or a
 * file image. Every number of a header is range-checked before it addresses
 * memory.
 */
#define _POSIX_C_SOURCE 200809L
#include "colossal/safetensors.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* safetensors' own limit is 100 MB */

struct colrt_st_file {
    void *map; /* owned when opened from a path */
    size_t map_len;
    cJSON *header;
    colrt_st_tensor *t;
    int n;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
              {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4},  {"U64", 8}, {"BOOL", 1}};

size_t colrt_st_dtype_size(const char *dtype) {
    for (size_t i = 0; dtype && i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtype, dtypes[i].name)) return dtypes[i].size;
    return 0;
}

static colrt_st_file *bad(colrt_st_file *f, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    colrt_st_close(f);
    return NULL;
}

/* A whole number in [0, 2^53] (exact in the header's double). */
static int whole(const cJSON *e, int64_t *out) {
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 9007199254740992.0) ||
        e->valuedouble != (double)(int64_t)e->valuedouble)
        return 0;
    *out = (int64_t)e->valuedouble;
    return 1;
}

colrt_st_file *colrt_st_parse(const unsigned char *p, size_t len, const char *what, char *err, size_t errlen) {
    colrt_st_file *f = calloc(1, sizeof *f);
    if (!f) return bad(f, err, errlen, "%s: out of memory", what);
    if (len < 8) return bad(f, err, errlen, "%s: not a safetensors file (%zu bytes)", what, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > len - 8 || hlen > ST_MAX_HEADER)
        return bad(f, err, errlen, "%s: not a safetensors file (header length %llu, file %zu bytes)", what,
                   (unsigned long long)hlen, len);
    f->header = cJSON_ParseWithLength((const char *)p + 8, (size_t)hlen);
    if (!cJSON_IsObject(f->header)) return bad(f, err, errlen, "%s: not a safetensors file (the header is not a JSON object)", what);
    const unsigned char *data = p + 8 + hlen;
    uint64_t data_len = len - 8 - hlen;
    int cap = cJSON_GetArraySize(f->header);
    f->t = calloc((size_t)(cap ? cap : 1), sizeof *f->t);
    if (!f->t) return bad(f, err, errlen, "%s: out of memory", what);
    for (const cJSON *it = f->header->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it)) return bad(f, err, errlen, "%s: __metadata__ is not an object", what);
            continue;
        }
        colrt_st_tensor *t = &f->t[f->n];
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(it, "shape"),
                    *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets"), *e;
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
            return bad(f, err, errlen, "%s: tensor '%s' has a malformed header entry", what, it->string);
        t->name = it->string;
        t->dtype = dt->valuestring;
        int64_t vol = 1;
        cJSON_ArrayForEach(e, sh) {
            if (t->ndim == COLRT_MAX_DIMS || !whole(e, &t->shape[t->ndim]) ||
                __builtin_mul_overflow(vol, t->shape[t->ndim], &vol))
                return bad(f, err, errlen, "%s: tensor '%s' has a bad shape (at most %d whole sizes)", what, t->name,
                           COLRT_MAX_DIMS);
            t->ndim++;
        }
        int64_t b, x;
        if (!whole(cJSON_GetArrayItem(off, 0), &b) || !whole(cJSON_GetArrayItem(off, 1), &x) || x < b ||
            (uint64_t)x > data_len)
            return bad(f, err, errlen, "%s: tensor '%s' lies outside the file", what, t->name);
        size_t es = colrt_st_dtype_size(t->dtype);
        int64_t want;
        if (es && (__builtin_mul_overflow(vol, (int64_t)es, &want) || want != x - b))
            return bad(f, err, errlen, "%s: tensor '%s' holds %lld bytes, its shape and dtype %s need %lld", what,
                       t->name, (long long)(x - b), t->dtype, (long long)(es ? vol * (int64_t)es : 0));
        t->data = data + b;
        t->bytes = (size_t)(x - b);
        f->n++;
    }
    return f;
}

colrt_st_file *colrt_st_open(const char *path, char *err, size_t errlen) {
    int64_t size;
    int fd = colrt__open_regular(path, &size, err, errlen);
    if (fd < 0) return NULL;
    if (size < 8) {
        close(fd);
        snprintf(err, errlen, "%s: not a safetensors file (%lld bytes)", path, (long long)size);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map it", path);
        return NULL;
    }
    colrt_st_file *f = colrt_st_parse(map, (size_t)size, path, err, errlen);
    if (!f) {
        munmap(map, (size_t)size);
        return NULL;
    }
    f->map = map;
    f->map_len = (size_t)size;
    return f;
}

void colrt_st_close(colrt_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    cJSON_Delete(f->header);
    free(f->t);
    free(f);
}

int colrt_st_count(const colrt_st_file *f) { return f->n; }
const colrt_st_tensor *colrt_st_at(const colrt_st_file *f, int i) { return i >= 0 && i < f->n ? &f->t[i] : NULL; }

const colrt_st_tensor *colrt_st_find(const colrt_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *colrt_st_meta(const colrt_st_file *f, const char *key) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(f->header, "__metadata__");
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, key));
}

unsigned char *colrt_st_build(int n, const colrt_st_tensor *t, const char *const *meta, size_t *len, char *err,
                              size_t errlen) {
    cJSON *hdr = cJSON_CreateObject();
    if (meta && meta[0]) {
        cJSON *m = cJSON_AddObjectToObject(hdr, "__metadata__");
        for (int i = 0; meta[i] && meta[i + 1]; i += 2) cJSON_AddStringToObject(m, meta[i], meta[i + 1]);
    }
    size_t data_bytes = 0;
    for (int i = 0; i < n; i++) {
        int64_t vol = 1, want = 0;
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0 || __builtin_mul_overflow(vol, t[i].shape[d], &vol)) vol = -1;
        size_t es = colrt_st_dtype_size(t[i].dtype);
        if (vol < 0 || !es || __builtin_mul_overflow(vol, (int64_t)es, &want) || (size_t)want != t[i].bytes ||
            cJSON_GetObjectItemCaseSensitive(hdr, t[i].name)) {
            snprintf(err, errlen, "safetensors: tensor %s: dtype %s, its shape and its %zu bytes disagree (or it is "
                     "given twice)", t[i].name, t[i].dtype ? t[i].dtype : "(null)", t[i].bytes);
            cJSON_Delete(hdr);
            return NULL;
        }
        cJSON *e = cJSON_AddObjectToObject(hdr, t[i].name);
        cJSON_AddStringToObject(e, "dtype", t[i].dtype);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)data_bytes));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(data_bytes + t[i].bytes)));
        data_bytes += t[i].bytes;
    }
    char *text = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    size_t tl = strlen(text), hlen = (tl + 7) / 8 * 8, total = 8 + hlen + data_bytes; /* data 8-byte aligned */
    unsigned char *file = malloc(total);
    if (!file) {
        free(text);
        snprintf(err, errlen, "safetensors: out of memory for a %zu-byte file", total);
        return NULL;
    }
    for (int k = 0; k < 8; k++) file[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    memcpy(file + 8, text, tl);
    memset(file + 8 + tl, ' ', hlen - tl);
    free(text);
    size_t pos = 8 + hlen;
    for (int i = 0; i < n; i++) {
        if (t[i].bytes) {
            if (t[i].data) memcpy(file + pos, t[i].data, t[i].bytes);
            else memset(file + pos, 0, t[i].bytes);
        }
        pos += t[i].bytes;
    }
    *len = total;
    return file;
}

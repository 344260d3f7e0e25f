/*
 * safetensors.h — the one reader and writer of safetensors files, shared by
 * colrt's checkpoints and the Hugging Face interop (colossal/hf.h).
 *
 * A file is an 8-byte little-endian header length, a JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {string: string}}, then the data. Reading checks every
 * entry before anything is used: dtype a string, shape at most
 * COLRT_MAX_DIMS whole numbers, offsets whole numbers inside the data
 * section, and for a known dtype exactly the bytes the shape needs (checked
 * arithmetic: a crafted header cannot make a reader step outside the file).
 * Part of colrt (colrt_cpu, colrt_cuda).
 */
#ifndef COLOSSAL_SAFETENSORS_H
#define COLOSSAL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "colossal/colrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colrt_st_tensor {
    const char *name;
    const char *dtype; /* "F32", "BF16", "F16", "F64", "I32", "I64", ... */
    int ndim;
    int64_t shape[COLRT_MAX_DIMS];
    const void *data; /* reading: inside the file; writing: the caller's host bytes */
    size_t bytes;
} colrt_st_tensor;

typedef struct colrt_st_file colrt_st_file;

/* Bytes per element of a safetensors dtype; 0 when unknown. */
size_t colrt_st_dtype_size(const char *dtype);

/* Maps and checks a file (a directory, FIFO or device is refused without
 * blocking). NULL with a message in err naming the file. */
colrt_st_file *colrt_st_open(const char *path, char *err, size_t errlen);
/* Checks the safetensors image at [p, p+len), which the caller keeps alive
 * (checkpoints map and CRC-check the file first); `what` names it in messages. */
colrt_st_file *colrt_st_parse(const unsigned char *p, size_t len, const char *what, char *err, size_t errlen);
void colrt_st_close(colrt_st_file *f);

int colrt_st_count(const colrt_st_file *f);
const colrt_st_tensor *colrt_st_at(const colrt_st_file *f, int i); /* in header order */
const colrt_st_tensor *colrt_st_find(const colrt_st_file *f, const char *name);
/* A __metadata__ string, or NULL. */
const char *colrt_st_meta(const colrt_st_file *f, const char *key);

/* The image of a file holding t[0..n) (data 8-byte aligned, in the given
 * order: the data section is the last sum(bytes) bytes of the image) and
 * metadata pairs meta[0]=key, meta[1]=value, ... NULL-terminated (may be
 * NULL); malloc'd, its length in *len. A tensor whose data is NULL gets zeros,
 * for the caller to fill in place. NULL with a message when a tensor's bytes
 * differ from its shape's. Write it with colrt_write_file_atomic. */
unsigned char *colrt_st_build(int n, const colrt_st_tensor *t, const char *const *meta, size_t *len, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

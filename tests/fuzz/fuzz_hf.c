/*
 * fuzz_hf.c — libFuzzer target for the Hugging Face index and config
 * (tools/hf/hf.c): the input, split at its first NUL, is a
 * model.safetensors.index.json and a config.json written beside a valid
 * model.safetensors of a tiny GPT-2-shaped model (wte.weight [8,4],
 * ln_f.weight [4]). colhf_load either fills the parameters or returns -1
 * with a message and leaves them untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "colossal/hf.h"
#include "colossal/safetensors.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float wte[32], lnf[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    colrt_init(argc, argv);
    float v[36];
    for (int i = 0; i < 36; i++) v[i] = (float)i;
    colrt_st_tensor t[2] = {{.name = "wte.weight", .dtype = "F32", .ndim = 2, .shape = {8, 4}, .data = v, .bytes = 128},
                            {.name = "ln_f.weight", .dtype = "F32", .ndim = 1, .shape = {4}, .data = v + 32, .bytes = 16}};
    size_t len;
    char err[256], path[256];
    unsigned char *img = colrt_st_build(2, t, NULL, &len, err, sizeof err);
    if (!img) abort();
    snprintf(path, sizeof path, "%s/model.safetensors", fuzz_dir());
    fuzz_write(path, img, len);
    free(img);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char idx[256], cfg[256], err[512] = "";
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", fuzz_dir());
    snprintf(cfg, sizeof cfg, "%s/config.json", fuzz_dir());
    size_t n1, n2;
    const uint8_t *rest = fuzz_split(data, size, &n1, &n2);
    fuzz_write(idx, data, n1);
    fuzz_write(cfg, rest, n2);
    memset(wte, 0x5a, sizeof wte);
    memset(lnf, 0x5a, sizeof lnf);
    colrt_tensor p[2] = {
        {.name = "wte.weight", .dtype = COLRT_F32, .ndim = 2, .global_shape = {8, 4}, .shape = {8, 4}, .data = wte},
        {.name = "ln_f.weight", .dtype = COLRT_F32, .ndim = 1, .global_shape = {4}, .shape = {4}, .data = lnf}};
    if (colhf_load(idx, p, 2, err, sizeof err) != 0) { /* the index, read like a user's path */
        if (!err[0]) abort();
        for (size_t i = 0; i < sizeof wte; i++)
            if (((unsigned char *)wte)[i] != 0x5a) abort();
    }
    return 0;
}

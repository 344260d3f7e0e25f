/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors reader that
 * checkpoints and the Hugging Face interop share (colrt_st_parse). Any input
 * is rejected with a message or gives entries whose every byte lies inside
 * the input (touched here, so the sanitizers see a read outside), whose
 * bytes match shape x dtype for known dtypes, and which build back into a
 * file that parses to the same entries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "colossal/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *copy = malloc(size ? size : 1); /* exactly size bytes: a read past is caught */
    memcpy(copy, data, size);
    char err[512];
    colrt_st_file *f = colrt_st_parse(copy, size, "fuzz", err, sizeof err);
    if (f) {
        int n = colrt_st_count(f);
        colrt_st_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
        unsigned sum = 0;
        for (int i = 0; i < n; i++) {
            t[i] = *colrt_st_at(f, i);
            const unsigned char *p = t[i].data;
            for (size_t k = 0; k < t[i].bytes; k++) sum += p[k];
            if (colrt_st_find(f, t[i].name) == NULL) abort();
        }
        (void)colrt_st_meta(f, "colrt.rank");
        size_t len = 0;
        unsigned char *img = colrt_st_build(n, t, NULL, &len, err, sizeof err);
        if (img) { /* what we write, we read back, the same */
            colrt_st_file *g = colrt_st_parse(img, len, "rebuilt", err, sizeof err);
            if (!g || colrt_st_count(g) != n) abort();
            for (int i = 0; i < n; i++) {
                const colrt_st_tensor *a = colrt_st_at(g, i);
                if (strcmp(a->name, t[i].name) || a->bytes != t[i].bytes || memcmp(a->data, t[i].data, a->bytes)) abort();
            }
            colrt_st_close(g);
            free(img);
        }
        free(t);
        colrt_st_close(f);
        (void)sum;
    }
    free(copy);
    return 0;
}

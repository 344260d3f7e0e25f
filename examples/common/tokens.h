/*
 * tokens.h — token files in llm.c's format, for the training drivers.
 *
 * A file is a header of 256 little-endian int32 followed by the tokens:
 *   header[0] = 20240520  (magic)
 *   header[1] = 1         (version: tokens are uint16, little-endian)
 *   header[2] = n         (number of tokens)
 *   header[3..255] = 0
 *   then n uint16 token ids.
 * (llm.c's version 2 stores uint32 tokens for LLaMA 3's vocabulary; it is not
 * read here: the example vocabularies fit in 16 bits.)
 * tools/make_tokens.py writes such files from text with a byte-level tokenizer.
 */
#ifndef COLOSSAL_EXAMPLES_TOKENS_H
#define COLOSSAL_EXAMPLES_TOKENS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS_MAGIC 20240520
#define TOKENS_HEADER_INTS 256

typedef struct tokens {
    uint16_t *tok;
    int64_t n;
    uint16_t max; /* the largest id in the file */
} tokens;

/* Reads a whole token file. On failure returns 0 and writes why into err. */
static int tokens_read(const char *path, tokens *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (make one with tools/make_tokens.py)", path);
        return 0;
    }
    int32_t h[TOKENS_HEADER_INTS];
    if (fread(h, sizeof h, 1, f) != 1) {
        snprintf(err, errlen, "%s: shorter than the 1024-byte header of a token file", path);
        fclose(f);
        return 0;
    }
    if (h[0] != TOKENS_MAGIC) {
        snprintf(err, errlen, "%s: not a token file (magic %d, expected %d: llm.c's format)", path, h[0],
                 TOKENS_MAGIC);
        fclose(f);
        return 0;
    }
    if (h[1] != 1) {
        snprintf(err, errlen, "%s: token file version %d; only version 1 (uint16 tokens) is read", path, h[1]);
        fclose(f);
        return 0;
    }
    if (h[2] < 2) {
        snprintf(err, errlen, "%s: holds %d tokens; at least 2 are needed", path, h[2]);
        fclose(f);
        return 0;
    }
    out->n = h[2];
    out->tok = malloc(sizeof(uint16_t) * (size_t)out->n);
    if (!out->tok || fread(out->tok, sizeof(uint16_t), (size_t)out->n, f) != (size_t)out->n) {
        snprintf(err, errlen, "%s: the header says %lld tokens but the file is shorter", path, (long long)out->n);
        free(out->tok);
        out->tok = NULL;
        fclose(f);
        return 0;
    }
    fclose(f);
    for (int64_t i = 0; i < out->n; i++)
        if (out->tok[i] > out->max) out->max = out->tok[i];
    return 1;
}

#endif

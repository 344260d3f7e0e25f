/*
 * tokenizer.h — text in and out of token ids, for sampling (lm_train.h,
 * --sample): bytes for the byte-level token files of tools/make_tokens.py
 * (vocabulary 256: token = byte), or llm.c's decoding table
 * (gpt2_tokenizer.bin, written by llm.c's train_gpt2.py) for GPT-2's
 * vocabulary of 50257:
 *   header: 256 little-endian uint32: [0] = 20240328 (magic), [1] = version
 *           (1, or 2 with [3] = the end-of-text token), [2] = vocabulary size
 *   then per token: one byte, its length n (1-255), and its n bytes.
 * The file holds no BPE merges, so a prompt is encoded greedily, the longest
 * token that matches at each position: the same text, in ids that can differ
 * from GPT-2's merges in places (the model reads the text it was trained on
 * almost always so split). Decoding is exact.
 */
#ifndef COLOSSAL_EXAMPLES_TOKENIZER_H
#define COLOSSAL_EXAMPLES_TOKENIZER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZER_MAGIC 20240328

typedef struct tokenizer {
    int32_t n;       /* the vocabulary; 0: bytes */
    int32_t eot;     /* the end-of-text token (-1: none) */
    char **text;     /* text[i]: token i's bytes, len[i] of them */
    uint8_t *len;
    int32_t maxlen;
} tokenizer;

/* Reads llm.c's tokenizer file; on failure 0 and why in err. */
static int tokenizer_read(const char *path, tokenizer *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->eot = -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (llm.c's gpt2_tokenizer.bin)", path);
        return 0;
    }
    uint32_t h[256];
    if (fread(h, sizeof h, 1, f) != 1 || h[0] != TOKENIZER_MAGIC || (h[1] != 1 && h[1] != 2) || h[2] == 0 ||
        h[2] > (1u << 24)) {
        snprintf(err, errlen, "%s: not an llm.c tokenizer file (magic %d, versions 1 and 2)", path, TOKENIZER_MAGIC);
        fclose(f);
        return 0;
    }
    t->n = (int32_t)h[2];
    t->eot = h[1] == 2 ? (int32_t)h[3] : (t->n == 50257 ? 50256 : -1);
    t->text = calloc((size_t)t->n, sizeof *t->text);
    t->len = calloc((size_t)t->n, 1);
    if (!t->text || !t->len) {
        snprintf(err, errlen, "%s: out of memory", path);
        fclose(f);
        return 0;
    }
    for (int32_t i = 0; i < t->n; i++) {
        uint8_t n;
        t->text[i] = malloc(256);
        if (!t->text[i] || fread(&n, 1, 1, f) != 1 || n == 0 || fread(t->text[i], 1, n, f) != n) {
            snprintf(err, errlen, "%s: token %d of %d is cut short or empty", path, i, t->n);
            fclose(f);
            return 0;
        }
        t->len[i] = n;
        if (n > t->maxlen) t->maxlen = n;
    }
    fclose(f);
    return 1;
}

static void tokenizer_free(tokenizer *t) {
    for (int32_t i = 0; t->text && i < t->n; i++) free(t->text[i]);
    free(t->text);
    free(t->len);
    memset(t, 0, sizeof *t);
}

/* Writes token id's text to f: its bytes, or the byte itself without a file. */
static void tokenizer_put(const tokenizer *t, int32_t id, FILE *f) {
    if (!t->n) fputc(id & 0xff, f);
    else if (id >= 0 && id < t->n) fwrite(t->text[id], 1, t->len[id], f);
}

/* Encodes text into at most cap ids (longest match first); returns the count,
 * or -1 with the offending byte's position in *bad when a byte matches no
 * token. */
static int64_t tokenizer_encode(const tokenizer *t, const char *text, int32_t *ids, int64_t cap, int64_t *bad) {
    int64_t n = 0, len = (int64_t)strlen(text);
    for (int64_t p = 0; p < len && n < cap;) {
        if (!t->n) {
            ids[n++] = (uint8_t)text[p++];
            continue;
        }
        int32_t best = -1, best_len = 0;
        for (int32_t i = 0; i < t->n; i++) /* a prompt is short: a scan per position is fine */
            if (t->len[i] > best_len && t->len[i] <= len - p && !memcmp(t->text[i], text + p, t->len[i]))
                best = i, best_len = t->len[i];
        if (best < 0) {
            *bad = p;
            return -1;
        }
        ids[n++] = best;
        p += best_len;
    }
    return n;
}

#endif

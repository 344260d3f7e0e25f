/*
 * fuzz_tokens.c — libFuzzer target for token files (examples/common/tokens.h,
 * llm.c's format): any input is refused with a message or gives n >= 2
 * tokens, all read from the file, whose largest id is the one reported.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/tokens.bin", fuzz_dir());
    fuzz_write(path, data, size);
    tokens t;
    if (tokens_read(path, &t, err, sizeof err)) {
        if (t.n < 2 || (size_t)t.n * 2 + 1024 > size) abort();
        uint16_t mx = 0;
        for (int64_t i = 0; i < t.n; i++) mx = t.tok[i] > mx ? t.tok[i] : mx;
        if (mx != t.max) abort();
        free(t.tok);
    } else if (!err[0]) {
        abort();
    }
    return 0;
}

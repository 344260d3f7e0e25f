/*
 * fuzz_checkpoint.c — libFuzzer target for checkpoint loading: the input,
 * split at its first NUL, is a manifest.json and the shard g1-r00000.safetensors
 * it may name, loaded into a fixed model (w: f32 [6,4], b: f32 [5]; the seed is
 * what tests/runtime/test_checkpoint saves on one rank). Any input
 * loads (and then fills the tensors) or is refused with a message leaving the
 * tensors untouched; never a crash, a hang or a read outside a file.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "colossal/colrt.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    colrt_init(argc, argv); /* a singleton MPI world of one */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char man[256], shard[256];
    snprintf(man, sizeof man, "%s/manifest.json", fuzz_dir());
    snprintf(shard, sizeof shard, "%s/g1-r00000.safetensors", fuzz_dir());
    size_t n1, n2;
    const uint8_t *rest = fuzz_split(data, size, &n1, &n2);
    fuzz_write(man, data, n1);
    fuzz_write(shard, rest, n2);
    float w[24];
    float b[5];
    memset(w, 0x5a, sizeof w);
    memset(b, 0x5a, sizeof b);
    colrt_tensor t[2] = {
        {.name = "w", .dtype = COLRT_F32, .ndim = 2, .global_shape = {6, 4}, .offset = {0, 0}, .shape = {6, 4}, .data = w},
        {.name = "b", .dtype = COLRT_F32, .ndim = 1, .global_shape = {5}, .offset = {0}, .shape = {5}, .data = b}};
    if (colrt_checkpoint_load(fuzz_dir(), 2, t) != 0) {
        if (!colrt_checkpoint_error()[0]) abort(); /* a refusal says why */
        for (size_t i = 0; i < sizeof w; i++)
            if (((unsigned char *)w)[i] != 0x5a) abort(); /* and touches nothing */
    }
    return 0;
}

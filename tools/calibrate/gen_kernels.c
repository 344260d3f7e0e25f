/*
 * gen_kernels.c — writes the attention kernels colossal-calibrate times, at
 * build time: the very C functions the code generator writes into a CPU
 * program's M_kernels.c for attention, attention_dq and attention_dkv nodes
 * (cg_attention_c_function, compiler/codegen), at a ladder of shapes, and the
 * table calibrate.c reads them from (calibrate_kernels.h).
 *
 * usage: colossal-gen-kernels OUT.c          the CPU program's kernels
 *        colossal-gen-kernels --cuda OUT.cu  the CUDA program's (colossal-calibrate-cuda)
 * (written atomically; exit 0, or 1 with a message)
 *
 * The ladder (causal, S = T, f32, G = H): FLOPs a call as the IR counts them
 * (rule_attention: 4 B H Dh x the T (T + 1) / 2 pairs the mask keeps), strictly
 * increasing, so each point is one entry of a table by call size. The shapes
 * are those of the CPU programs bench/validate runs (tiny GPT-2 and LLaMA:
 * T = 32, Dh = 16, B x H from 8 to 32; GPT-2 124M: T = 64, Dh = 64, B x H = 24)
 * and longer sequences at Dh = 64; --quick times the first cal_attention_quick.
 *
 * --cuda: the CUDA program's attention passes (cg_attention_cuda_function:
 * cg_attention.c's __global__ kernels and the launcher the program calls) at
 * a GPU ladder, 1.3e7 to 1.4e11 FLOPs forward: GPT-2 124M's heads (Dh = 64)
 * at T = 64 (as on the CPU ladder), 256 and 1024, B x H up to 96 (batch 8:
 * the first GPU run's), and T = 2048 and 4096 at Dh = 128 (LLaMA-style
 * heads), B x H = 32 and 64; named cal_attention_cuda_*. And the CUDA
 * program's add, GELU, SiLU, layer norm, RMS norm and RoPE at the sizes
 * below (cal_cuda_*; its sum of squares and AdamW stay colrt's there).
 *
 * And the kernels the program runs for an add (the kernel class
 * `elementwise`), a GELU (`transcendental`), a SiLU (`silu`), a layer norm (`norm`, rows of
 * CAL_NORM_COLS), an RMS norm (`rmsnorm`, likewise; cg_rms_norm_c_function)
 * CAL_NORM_COLS), a sum of squares (`reduce`), RoPE (`rope`) and an AdamW
 * update (`optimizer`), over 2^6, 2^9, ..., 2^24 elements
 * (cg_elementwise_c_function, cg_layer_norm_c_function, cg_sumsq_c_function,
 * cg_rope_c_function, cg_adamw_c_function), the sizes of calibrate.c's other
 * kernel classes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibrate_kernels.h"
#include "cg.h"

/* a point of a ladder: q [B, T, H, Dh], causal, S = T, G = H */
typedef struct Rung {
    int64_t B, T, H, Dh;
} Rung;
static const Rung LADDER[] = {
    {1, 16, 4, 16},   /* 35 kFLOP */
    {2, 32, 4, 16},   /* 270 kFLOP: tiny GPT-2, 2 micro-batches on 2 ranks */
    {8, 32, 4, 16},   /* 1.1 MFLOP: tiny GPT-2 on 1 rank */
    {2, 64, 12, 64},  /* 12.8 MFLOP: GPT-2 124M at 64 tokens */
    {2, 128, 12, 64}, /* 51 MFLOP */
    {1, 512, 12, 64}, /* 403 MFLOP */
};
enum { N_LADDER = sizeof LADDER / sizeof LADDER[0], N_QUICK = 4 };
static const Rung LADDER_CUDA[] = {
    {2, 64, 12, 64},    /* 12.8 MFLOP: the CPU ladder's GPT-2 124M at 64 tokens (tests/gpu compares the two) */
    {2, 256, 12, 64},   /* 202 MFLOP */
    {8, 256, 12, 64},   /* 808 MFLOP */
    {2, 1024, 12, 64},  /* 3.2 GFLOP: GPT-2 124M at batch 2 */
    {8, 1024, 12, 64},  /* 12.9 GFLOP: GPT-2 124M at batch 8, one H100 */
    {1, 2048, 32, 128}, /* 34 GFLOP */
    {2, 2048, 32, 128}, /* 69 GFLOP */
    {1, 4096, 32, 128}, /* 137 GFLOP */
};
enum { N_LADDER_CUDA = sizeof LADDER_CUDA / sizeof LADDER_CUDA[0], N_QUICK_CUDA = 3, MAX_LADDER = 8 };
/* a table by call size holds at most SHARD_RATE_POINTS (8) points */
_Static_assert((int)N_LADDER <= (int)MAX_LADDER && N_LADDER_CUDA <= MAX_LADDER, "a ladder longer than a rate table");
enum { ELEM_MIN_LOG2 = 6, ELEM_MAX_LOG2 = 24, ELEM_STEP = 3 };

/* Writes text to path atomically (temp + rename); false with a message. */
static bool write_out(const char *path, const char *text) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        fprintf(stderr, "colossal-gen-kernels: error: output path too long: %s\n", path);
        return false;
    }
    int fd = mkstemp(tmp);
    if (fd >= 0) fchmod(fd, 0644); /* a build output, read like any source (mkstemp makes it 0600) */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        fprintf(stderr, "colossal-gen-kernels: error: cannot write %s: %s\n", path, strerror(errno));
        if (fd >= 0) remove(tmp);
        return false;
    }
    return true;
}

/* The CUDA program's element-wise kernels over 2^6, 2^9, ..., 2^24 elements,
 * as for the CPU below: an add, a GELU, a SiLU, a layer norm and an RMS norm
 * (rows of CAL_NORM_COLS), RoPE; its sum of squares and AdamW update are
 * other code paths (the emitter's two-pass reduction, the grouped update):
 * NULL, colossal-calibrate-cuda times colrt's there. */
static bool elementwise_cuda(StrBuf *b) {
    int n_elem = 0;
    for (int l = ELEM_MIN_LOG2; l <= ELEM_MAX_LOG2; l += ELEM_STEP, n_elem++) {
        char name[64];
        int64_t n = (int64_t)1 << l, cols = n < CAL_NORM_COLS ? n : CAL_NORM_COLS;
        static const struct {
            int op;
            const char *name;
        } ELEM[] = {{OP_ADD, "add"}, {OP_GELU, "gelu"}, {OP_SILU, "silu"}};
        for (int e = 0; e < 3; e++) {
            snprintf(name, sizeof name, "cal_cuda_%s_%d", ELEM[e].name, l);
            if (!cg_elementwise_cuda_function(b, name, ELEM[e].op, n)) {
                fprintf(stderr, "colossal-gen-kernels: error: no CUDA kernel for %s\n", ELEM[e].name);
                return false;
            }
        }
        snprintf(name, sizeof name, "cal_cuda_norm_%d", l);
        cg_norm_cuda_function(b, name, false, n / cols, cols);
        snprintf(name, sizeof name, "cal_cuda_rmsnorm_%d", l);
        cg_norm_cuda_function(b, name, true, n / cols, cols);
        int64_t rB, rT, rH;
        cal_rope_shape(n, &rB, &rT, &rH);
        snprintf(name, sizeof name, "cal_cuda_rope_%d", l);
        cg_rope_cuda_function(b, name, rB, rT, rH, CAL_ROPE_DH);
    }
    sb_printf(b, "const int cal_elementwise_n = %d;\nconst CalElementwise cal_elementwise[] = {\n", n_elem);
    for (int l = ELEM_MIN_LOG2; l <= ELEM_MAX_LOG2; l += ELEM_STEP)
        sb_printf(b,
                  "    {%lld, cal_cuda_add_%d, cal_cuda_gelu_%d, cal_cuda_silu_%d, cal_cuda_norm_%d, cal_cuda_rmsnorm_%d, "
                  "NULL, cal_cuda_rope_%d, NULL},\n",
                  1LL << l, l, l, l, l, l, l);
    sb_puts(b, "};\n\n");
    return true;
}

/* The attention kernels of a ladder (the C or the CUDA program's), then its
 * table; false with a message where a kernel's workspace does not follow
 * CalAttention's signatures. */
static bool attention_ladder(StrBuf *b, bool cuda, int n, const Rung *r, int quick) {
    int64_t work[MAX_LADDER];
    /* the CUDA kernels' own names: a test links them beside the C ones (tests/gpu) */
    const char *fn = cuda ? "cal_attention_cuda" : "cal_attention";
    for (int i = 0; i < n; i++) {
        work[i] = 0;
        for (int kind = 0; kind < 3; kind++) {
            char name[64];
            snprintf(name, sizeof name, "%s_%d_%d", fn, i, kind);
            int64_t w = cuda ? cg_attention_cuda_function(b, name, kind, r[i].B, r[i].T, r[i].H, r[i].H, r[i].Dh)
                             : cg_attention_c_function(b, name, kind, r[i].B, r[i].T, r[i].H, r[i].H, r[i].Dh);
            /* the backward kernels take a workspace, the forward none: the
             * signatures calibrate_kernels.h declares */
            if ((kind == 0) != (w == 0)) {
                fprintf(stderr, "colossal-gen-kernels: error: attention kind %d %s a workspace; "
                                "calibrate_kernels.h's CalAttention must follow cg_attention_%s_function\n",
                        kind, w ? "takes" : "takes no", cuda ? "cuda" : "c");
                return false;
            }
            if (w > work[i]) work[i] = w;
        }
    }
    sb_printf(b, "const int cal_attention_n = %d, cal_attention_quick = %d;\n", n, quick);
    sb_puts(b, "const CalAttention cal_attention[] = {\n");
    for (int i = 0; i < n; i++)
        sb_printf(b, "    {%lld, %lld, %lld, %lld, %lld, %s_%d_0, %s_%d_1, %s_%d_2},\n", (long long)r[i].B,
                  (long long)r[i].T, (long long)r[i].H, (long long)r[i].Dh, (long long)work[i], fn, i, fn, i, fn, i);
    sb_puts(b, "};\n");
    return true;
}

int main(int argc, char **argv) {
    bool cuda = argc == 3 && !strcmp(argv[1], "--cuda");
    if (argc != 2 + cuda || argv[argc - 1][0] == '-') {
        fputs("usage: colossal-gen-kernels OUT.c | --cuda OUT.cu\n", stderr);
        return 1;
    }
    const char *out = argv[argc - 1];
    StrBuf b;
    sb_init(&b);
    if (cuda) {
        sb_puts(&b, "/* Generated by colossal-gen-kernels --cuda (tools/calibrate/gen_kernels.c): the\n"
                    " * CUDA program's attention kernels, as the code generator writes them, at the\n"
                    " * shapes colossal-calibrate-cuda times. Do not edit. */\n"
                    "#include <math.h>\n#include <stdint.h>\n#include <cuda_runtime.h>\n\n"
                    "#include \"colossal/colrt.h\"\n#include \"calibrate_kernels.h\"\n\n");
        cg_cuda_prelude(&b);
        bool ok = attention_ladder(&b, true, N_LADDER_CUDA, LADDER_CUDA, N_QUICK_CUDA) && elementwise_cuda(&b) &&
                  write_out(out, sb_cstr(&b));
        sb_free(&b);
        return ok ? 0 : 1;
    }
    sb_puts(&b, "/* Generated by colossal-gen-kernels (tools/calibrate/gen_kernels.c): the CPU\n"
                " * program's attention kernels, as the code generator writes them, at the shapes\n"
                " * colossal-calibrate times. Do not edit. */\n"
                "#include <math.h>\n#include <stdint.h>\n\n#include \"colossal/colrt.h\"\n#include \"calibrate_kernels.h\"\n\n");
    cg_c_prelude(&b);
    if (!attention_ladder(&b, false, N_LADDER, LADDER, N_QUICK)) return 1;
    /* the element-wise kernels: an add, a GELU and a SiLU per size */
    static const struct {
        int op;
        const char *name;
    } ELEM[] = {{OP_ADD, "add"}, {OP_GELU, "gelu"}, {OP_SILU, "silu"}};
    enum { N_ELEM = sizeof ELEM / sizeof ELEM[0] };
    int n_elem = 0;
    for (int l = ELEM_MIN_LOG2; l <= ELEM_MAX_LOG2; l += ELEM_STEP, n_elem++)
        for (int e = 0; e < N_ELEM; e++) {
            char name[64];
            snprintf(name, sizeof name, "cal_%s_%d", ELEM[e].name, l);
            if (!cg_elementwise_c_function(&b, name, ELEM[e].op, (int64_t)1 << l)) {
                fprintf(stderr, "colossal-gen-kernels: error: no C kernel for %s\n", ELEM[e].name);
                return 1;
            }
        }
    for (int l = ELEM_MIN_LOG2; l <= ELEM_MAX_LOG2; l += ELEM_STEP) {
        char name[64];
        int64_t n = (int64_t)1 << l, cols = n < CAL_NORM_COLS ? n : CAL_NORM_COLS;
        snprintf(name, sizeof name, "cal_adamw_%d", l);
        cg_adamw_c_function(&b, name, n);
        snprintf(name, sizeof name, "cal_norm_%d", l);
        cg_layer_norm_c_function(&b, name, n / cols, cols);
        snprintf(name, sizeof name, "cal_rmsnorm_%d", l);
        cg_rms_norm_c_function(&b, name, n / cols, cols);
        snprintf(name, sizeof name, "cal_sumsq_%d", l);
        cg_sumsq_c_function(&b, name, n);
        /* CAL_ROPE_ROWS rows a position share its angles, as a program's B x H rows do */
        int64_t rB, rT, rH;
        cal_rope_shape(n, &rB, &rT, &rH);
        snprintf(name, sizeof name, "cal_rope_%d", l);
        cg_rope_c_function(&b, name, false, rB, rT, rH, CAL_ROPE_DH);
    }
    sb_printf(&b, "const int cal_elementwise_n = %d;\nconst CalElementwise cal_elementwise[] = {\n", n_elem);
    for (int l = ELEM_MIN_LOG2; l <= ELEM_MAX_LOG2; l += ELEM_STEP)
        sb_printf(&b,
                  "    {%lld, cal_add_%d, cal_gelu_%d, cal_silu_%d, cal_norm_%d, cal_rmsnorm_%d, cal_sumsq_%d, cal_rope_%d, "
                  "cal_adamw_%d},\n",
                  1LL << l, l, l, l, l, l, l, l, l);
    sb_puts(&b, "};\n\n");
    if (!write_out(out, sb_cstr(&b))) return 1;
    sb_free(&b);
    return 0;
}

/*
 * test_hf.c — Hugging Face interop (include/colossal/hf.h) on a generated
 * model, under mpirun. Built per model and plan by tests/hf/CMakeLists.txt
 * with -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h (or llama).
 * usage: test_hf HF_DIR OUT_DIR
 *
 * 1. colhf_load of HF_DIR (written by transformers' save_pretrained,
 *    tests/hf/make_hf.py) into the model, then the loss of m_forward on the
 *    fixed batch of HF_DIR/batch.json equals transformers' float32 loss
 *    within 2e-5 relative: both are float32 with different summation orders
 *    (GEMMs over 32..128 terms, softmax over 128 logits); a layout mistake
 *    moves the loss by more than 1e-2. Measured: printed.
 * 2. colhf_save to OUT_DIR, then colhf_load of OUT_DIR into a second model
 *    gives bit-identical parameters (export is load's inverse); run.sh checks
 *    OUT_DIR's tensors are byte-identical to HF_DIR's (same names, shapes).
 *    The export directory (model.safetensors and the config.json colhf_save
 *    writes) loads back too, its config checked against the model.
 * 3. Bad inputs return -1 with a message and leave the parameters as they
 *    were: a missing path, a file that is not safetensors, the other
 *    family's checkpoint, a config.json whose width differs, or (when the
 *    parameters keep their shapes) whose head count differs; an index whose
 *    weight_map holds a number or a path outside its directory; a directory
 *    or a FIFO where the weights should be (refused without blocking).
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "colossal/hf.h"

#define CG_CAT2(a, b) a##b
#define CG_CAT(a, b) CG_CAT2(a, b)
#define CG_FN(x) CG_CAT(CG_MODEL, CG_CAT(_, x))
#define CG_STR2(x) #x
#define CG_STR(x) CG_STR2(x)
#include CG_STR(CG_HEADER)

static int failures;
#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            failures++;                                                        \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", colrt_rank(), __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    s[n] = 0;
    fclose(f);
    return s;
}

/* This rank's parameters copied to the host, concatenated. */
static float *snapshot(CG_MODEL *m, size_t *count) {
    colrt_tensor p[256];
    int n = CG_FN(params)(m, p, 256);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t c = 1;
        for (int d = 0; d < p[i].ndim; d++) c *= (size_t)p[i].shape[d];
        total += c;
    }
    float *out = malloc(sizeof(float) * total), *q = out;
    for (int i = 0; i < n; i++) {
        size_t c = 1;
        for (int d = 0; d < p[i].ndim; d++) c *= (size_t)p[i].shape[d];
        colrt_memcpy(q, p[i].data, sizeof(float) * c, COLRT_D2H, NULL);
        q += c;
    }
    colrt_device_sync();
    *count = total;
    return out;
}

static int load(CG_MODEL *m, const char *path, char *err, size_t errlen) {
    colrt_tensor p[256];
    int n = CG_FN(params)(m, p, 256);
    return colhf_load(path, p, n, err, errlen);
}

/* A failing load: -1, a message containing `want`, parameters untouched. */
static void expect_load_error(CG_MODEL *m, const char *path, const char *want) {
    size_t n0, n1;
    float *before = snapshot(m, &n0);
    char err[1024] = "";
    int rc = load(m, path, err, sizeof err);
    float *after = snapshot(m, &n1);
    CHECK(rc == -1, "loading %s should fail", path);
    CHECK(strstr(err, want) != NULL, "loading %s: message '%s' lacks '%s'", path, err, want);
    CHECK(n0 == n1 && !memcmp(before, after, sizeof(float) * n0), "a failed load of %s changed the parameters", path);
    if (colrt_rank() == 0) printf("  bad input %s: %s\n", path, err);
    free(before);
    free(after);
}

/* OUT/NAME/ holding a copy of WEIGHTS and a config.json of TEXT: loading it fails with WANT. */
static void bad_config(CG_MODEL *m, const char *out, const char *name, const char *weights, const char *text,
                       const char *want) {
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%s/%s", out, name);
    if (colrt_rank() == 0) {
        mkdir(dir, 0777);
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "w");
        fprintf(f, "%s\n", text);
        fclose(f);
        FILE *in = fopen(weights, "rb");
        fseek(in, 0, SEEK_END);
        long len = ftell(in);
        fseek(in, 0, SEEK_SET);
        char *data = malloc((size_t)len);
        if (fread(data, 1, (size_t)len, in) != (size_t)len) colrt_die("cannot read %s", weights);
        fclose(in);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *o = fopen(path, "wb");
        fwrite(data, 1, (size_t)len, o);
        fclose(o);
        free(data);
    }
    colrt_barrier();
    expect_load_error(m, dir, want);
}

/* True when the attention weights keep their head dims (not ZeRO-3 slices). */
static int whole_heads(CG_MODEL *m) {
    colrt_tensor p[256];
    int n = CG_FN(params)(m, p, 256);
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].name, "h.0.attn.c_attn.weight") || !strcmp(p[i].name, "model.layers.0.self_attn.q_proj.weight"))
            return p[i].ndim > 2;
    return 0;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    if (argc != 3) colrt_die("usage: test_hf HF_DIR OUT_DIR");
    const char *hf = argv[1], *out = argv[2];
    int rank0 = colrt_rank() == 0;
    char err[1024] = "", path[4096];

    /* 1. load and the loss on transformers' batch */
    CG_MODEL *m;
    CG_FN(config) cfg = {.mesh = NULL, .seed = 1};
    if (CG_FN(create)(&cfg, &m) != 0) colrt_die("cannot create the model");
    int rc = load(m, hf, err, sizeof err);
    CHECK(rc == 0, "colhf_load(%s): %s", hf, err);
    snprintf(path, sizeof path, "%s/batch.json", hf);
    char *text = slurp(path);
    cJSON *b = text ? cJSON_Parse(text) : NULL;
    if (!b) colrt_die("cannot read %s", path);
    double want = cJSON_GetObjectItem(b, "loss_f32")->valuedouble;
    int64_t first, rows;
    CG_FN(input_rows)(m, &first, &rows);
    const int64_t T = CG_CAT(CG_MODEL, _idx_ELEMS) / CG_CAT(CG_MODEL, _idx_ROWS);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(rows * T)), *tgt = malloc(sizeof(int32_t) * (size_t)(rows * T));
    cJSON *bi = cJSON_GetObjectItem(b, "idx"), *bt = cJSON_GetObjectItem(b, "targets");
    CHECK(cJSON_GetArraySize(cJSON_GetArrayItem(bi, 0)) == T, "batch.json's sequences are not %lld long", (long long)T);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < T; t++) {
            idx[r * T + t] = cJSON_GetArrayItem(cJSON_GetArrayItem(bi, (int)(first + r)), (int)t)->valueint;
            tgt[r * T + t] = cJSON_GetArrayItem(cJSON_GetArrayItem(bt, (int)(first + r)), (int)t)->valueint;
        }
    CG_FN(inputs) in = {.idx = idx, .targets = tgt};
    float loss = CG_FN(forward)(m, &in);
    double rel = fabs(loss - want) / fabs(want);
    CHECK(rel <= 2e-5, "loss %.7f, transformers %.7f (relative difference %.2e > 2e-5)", loss, want, rel);
    if (rank0)
        printf("%s on %d ranks: loss %.7f, transformers %.7f, relative difference %.2e\n", CG_STR(CG_MODEL),
               colrt_world(), loss, want, rel);

    /* 2. export, and load the export into a second model */
    colrt_tensor p[256];
    int np = CG_FN(params)(m, p, 256);
    int split_late = 0; /* parameters this rank holds split on a dim other than the first */
    for (int i = 0; i < np; i++)
        for (int d = 1; d < p[i].ndim; d++) split_late += p[i].shape[d] != p[i].global_shape[d];
#ifdef HF_EXPECT_SPLIT_DIM /* tensor-parallel builds: the case the export used to get wrong */
    CHECK(split_late > 0, "no parameter is split on a dim other than the first: the test tests nothing new");
#endif
    if (rank0) printf("  %d parameters split on a dim other than the first on rank 0\n", split_late);
    rc = colhf_save(out, p, np, err, sizeof err);
    CHECK(rc == 0, "colhf_save(%s): %s", out, err);
    CG_MODEL *m2;
    CG_FN(config) cfg2 = {.mesh = NULL, .seed = 2};
    if (CG_FN(create)(&cfg2, &m2) != 0) colrt_die("cannot create the second model");
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    rc = load(m2, path, err, sizeof err);
    CHECK(rc == 0, "colhf_load(%s): %s", path, err);
    size_t n1, n2;
    float *s1 = snapshot(m, &n1), *s2 = snapshot(m2, &n2);
    CHECK(n1 == n2 && !memcmp(s1, s2, sizeof(float) * n1), "export then load does not give the same parameters");
    free(s1);
    free(s2);
    CHECK(fabsf(CG_FN(forward)(m2, &in) - loss) == 0, "the re-loaded model's loss differs");

    rc = load(m2, out, err, sizeof err); /* the directory: weights and the config.json written beside them */
    CHECK(rc == 0, "colhf_load(%s) (the export directory): %s", out, err);
    snprintf(path, sizeof path, "%s/config.json", out);
    char *cfg_text = slurp(path);
    /* written wherever the head counts are known (not under ZeRO-3's flattened slices) */
    CHECK(cfg_text != NULL || !whole_heads(m), "colhf_save wrote no %s", path);
    if (cfg_text && whole_heads(m))
        CHECK(strstr(cfg_text, "\"n_head\":\t4") || strstr(cfg_text, "\"num_attention_heads\":\t4"),
              "%s lacks the head count: %s", path, cfg_text);
    free(cfg_text);
    /* 3. bad inputs */
    snprintf(path, sizeof path, "%s/no-such-dir/model.safetensors", out);
    expect_load_error(m2, path, "cannot open");
    snprintf(path, sizeof path, "%s/config.json", hf);
    expect_load_error(m2, path, "not a safetensors file");
    snprintf(path, sizeof path, "%s/../%s/model.safetensors", hf,
             !strcmp(CG_STR(CG_MODEL), "gpt2") ? "llama" : "gpt2");
    expect_load_error(m2, path, "no tensor");
    /* config.json beside the right weights, with another width; and, where
     * the parameters keep their shapes (not ZeRO-3 slices), another head count */
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    bad_config(m2, out, "badwidth", path, "{\"n_embd\": 64, \"hidden_size\": 64}", "is 64 but the model has 32");
    if (whole_heads(m2))
        bad_config(m2, out, "badheads", path, "{\"n_head\": 8, \"num_attention_heads\": 8}", "is 8 but the model has 4");

    /* hostile indexes and files */
    const char *bad_maps[][2] = {{"{\"weight_map\": {\"wte.weight\": 1}}", "is not a file name beside the index"},
                                 {"{\"weight_map\": {\"wte.weight\": \"../gpt2/model.safetensors\"}}",
                                  "is not a file name beside the index"}};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/badindex%d", out, k);
        if (rank0) {
            mkdir(path, 0777);
            char f[4200];
            snprintf(f, sizeof f, "%s/model.safetensors.index.json", path);
            FILE *fp = fopen(f, "w");
            fputs(bad_maps[k][0], fp);
            fclose(fp);
        }
        colrt_barrier();
        expect_load_error(m2, path, bad_maps[k][1]);
    }
    snprintf(path, sizeof path, "%s/dir_as_weights", out);
    if (rank0) {
        mkdir(path, 0777);
        char f[4200];
        snprintf(f, sizeof f, "%s/model.safetensors", path);
        mkdir(f, 0777);
    }
    colrt_barrier();
    expect_load_error(m2, path, "not a regular file");
    snprintf(path, sizeof path, "%s/fifo_as_weights", out);
    if (rank0) {
        mkdir(path, 0777);
        char f[4200];
        snprintf(f, sizeof f, "%s/model.safetensors", path);
        mkfifo(f, 0666);
    }
    colrt_barrier();
    expect_load_error(m2, path, "not a regular file");
    int total = failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank0) printf("%s\n", total ? "FAILED" : "OK");
    cJSON_Delete(b);
    free(text);
    free(idx);
    free(tgt);
    CG_FN(destroy)(m);
    CG_FN(destroy)(m2);
    colrt_finalize();
    return total ? 1 : 0;
}

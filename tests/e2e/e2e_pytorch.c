/*
 * e2e_pytorch.c — the generated program's first step against PyTorch: the
 * tiny GPT-2 / LLaMA reference data (tests/reference/{gpt2,llama}_tiny.safetensors, float64,
 * made by make_reference.py) loaded into a program generated with
 * `--optimizer sgd` (compiled in with -DCG_MODEL=name), one step with lr = 1
 * on the reference batch (each rank its rows):
 *   - the loss: |ours - torch| <= 1e-5 |torch| (f32 against f64);
 *   - every parameter's gradient, read back as p_before - p_after (SGD's
 *     first step with momentum starts its buffer at the gradient: p -= lr g):
 *     max|ours - torch| <= 1e-4 max|torch| + 5e-7 max|p| per tensor. The
 *     second term is the f32 resolution of the parameter the gradient is read
 *     back through (a norm weight of 1 with a gradient of 1e-4 resolves it to
 *     ~1e-3 relative); the first the f32 arithmetic through the model.
 *     Measured: the worst error over the allowance is printed.
 * Usage: e2e_pytorch MODEL.safetensors   (under mpirun for several ranks;
 * built with -DCG_SEQ=the sequence length)
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir.h"

#define CG_CAT2(a, b) a##b
#define CG_CAT(a, b) CG_CAT2(a, b)
#define CG_FN(x) CG_CAT(CG_MODEL, CG_CAT(_, x))
#define CG_STR2(x) #x
#define CG_STR(x) CG_STR2(x)
#include CG_STR(CG_HEADER)

/* A safetensors tensor as doubles (F64, F32, I64, I32). */
typedef struct Ref {
    char name[160];
    int64_t numel;
    double *data;
} Ref;

static int load_refs(const char *path, Ref **out) {
    size_t len;
    char *buf = ir_read_file(path, &len);
    if (!buf || len < 8) return -1;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)buf[i];
    cJSON *h = hl <= len - 8 ? cJSON_ParseWithLength(buf + 8, (size_t)hl) : NULL;
    if (!h) {
        ir_free(buf);
        return -1;
    }
    const unsigned char *data = (const unsigned char *)buf + 8 + hl;
    int n = 0;
    for (cJSON *e = h->child; e; e = e->next) n++;
    Ref *r = calloc((size_t)n + 1, sizeof *r);
    int k = 0;
    for (cJSON *e = h->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        const char *dt = cJSON_GetStringValue(cJSON_GetObjectItem(e, "dtype"));
        cJSON *off = cJSON_GetObjectItem(e, "data_offsets");
        size_t a = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, b = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        int es = !strcmp(dt, "F64") || !strcmp(dt, "I64") ? 8 : 4;
        Ref *t = &r[k++];
        snprintf(t->name, sizeof t->name, "%s", e->string);
        t->numel = (int64_t)((b - a) / (size_t)es);
        t->data = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
        for (int64_t i = 0; i < t->numel; i++) {
            uint64_t u = 0;
            for (int q = es - 1; q >= 0; q--) u = u << 8 | data[a + (size_t)i * (size_t)es + (size_t)q];
            if (!strcmp(dt, "F64")) memcpy(&t->data[i], &u, 8);
            else if (!strcmp(dt, "F32")) { uint32_t w = (uint32_t)u; float x; memcpy(&x, &w, 4); t->data[i] = x; }
            else if (!strcmp(dt, "I32")) t->data[i] = (int32_t)(uint32_t)u;
            else t->data[i] = (double)(int64_t)u;
        }
    }
    cJSON_Delete(h);
    ir_free(buf);
    *out = r;
    return k;
}

static const Ref *find(const Ref *r, int n, const char *prefix, const char *name) {
    char key[200];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].name, key)) return &r[i];
    return NULL;
}

static float *to_host(const colrt_tensor *t, int64_t n) {
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    colrt_memcpy(h, t->data, sizeof(float) * (size_t)n, COLRT_D2H, NULL);
    colrt_device_sync();
    return h;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    colrt_set_timeout(60);
    Ref *refs = NULL;
    int nr = argc > 1 ? load_refs(argv[1], &refs) : -1;
    CHECK(nr > 0);
    if (nr <= 0) return check_done("e2e_pytorch");
    CG_MODEL *m;
    CG_FN(config) cfg = {.mesh = NULL, .seed = 1};
    CHECK(CG_FN(create)(&cfg, &m) == 0);
    colrt_tensor ps[128];
    int np = CG_FN(params)(m, ps, 128);
    float *before[128];
    for (int i = 0; i < np && i < 128; i++) {
        const Ref *w = find(refs, nr, "param.", ps[i].name);
        int64_t n = 1;
        for (int d = 0; d < ps[i].ndim; d++) n *= ps[i].shape[d];
        CHECK(w && w->numel == n);
        before[i] = malloc(sizeof(float) * (size_t)n);
        for (int64_t k = 0; w && k < n; k++) before[i][k] = (float)w->data[k];
        colrt_memcpy(ps[i].data, before[i], sizeof(float) * (size_t)n, COLRT_H2D, NULL);
    }
    const Ref *idx = find(refs, nr, "input.", "idx"), *tgt = find(refs, nr, "input.", "targets");
    const Ref *loss_ref = find(refs, nr, "", "loss");
    CHECK(idx && tgt && loss_ref);
    int64_t first, rows;
    CG_FN(input_rows)(m, &first, &rows);
    const int64_t seq = CG_SEQ; /* both inputs are [batch, seq]: this rank's rows */
    int32_t *a = malloc(sizeof(int32_t) * (size_t)(rows * seq)), *b = malloc(sizeof(int32_t) * (size_t)(rows * seq));
    for (int64_t k = 0; k < rows * seq; k++) {
        a[k] = (int32_t)idx->data[first * seq + k];
        b[k] = (int32_t)tgt->data[first * seq + k];
    }
    const void *ptrs[2] = {a, b};
    CG_FN(inputs) in;
    CHECK(sizeof in == sizeof ptrs);
    memcpy(&in, ptrs, sizeof in);
    float loss = CG_FN(train_step)(m, &in, 1.0f);
    double lrel = fabs(loss - loss_ref->data[0]) / fabs(loss_ref->data[0]);
    CHECK(lrel <= 1e-5);
    double worst = 0, worst_rel = 0;
    const char *worst_name = "";
    for (int i = 0; i < np && i < 128; i++) {
        const Ref *gr = find(refs, nr, "grad.", ps[i].name);
        int64_t n = 1;
        for (int d = 0; d < ps[i].ndim; d++) n *= ps[i].shape[d];
        CHECK(gr && gr->numel == n);
        if (!gr) continue;
        float *after = to_host(&ps[i], n);
        double md = 0, mr = 0, mp = 0;
        for (int64_t k = 0; k < n; k++) {
            double g = (double)before[i][k] - (double)after[k];
            md = fmax(md, fabs(g - gr->data[k]));
            mr = fmax(mr, fabs(gr->data[k]));
            mp = fmax(mp, fabs(before[i][k]));
        }
        double rel = md / (1e-4 * mr + 5e-7 * mp); /* error over the allowance */
        if (rel > worst) { worst = rel; worst_name = ps[i].name; }
        if (md / fmax(mr, 1e-30) > worst_rel) worst_rel = md / fmax(mr, 1e-30);
        CHECK(rel <= 1);
        free(after);
        free(before[i]);
    }
    if (colrt_rank() == 0)
        printf("%s vs PyTorch, %d ranks: loss %.7f (torch %.7f, rel. diff %.1e); gradients: worst error "
               "%.2f of the allowance (%s), worst max|diff|/max|torch| %.1e\n",
               CG_STR(CG_MODEL), colrt_world(), loss, loss_ref->data[0], lrel, worst, worst_name, worst_rel);
    CG_FN(destroy)(m);
    for (int i = 0; i < nr; i++) free(refs[i].data);
    free(refs);
    free(a);
    free(b);
    int rc = check_done("e2e_pytorch");
    colrt_finalize();
    return rc;
}

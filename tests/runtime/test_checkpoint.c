/*
 * test_checkpoint — one phase of the checkpoint test per run; checkpoint.sh
 * runs the phases in order under mpirun (see there for the story):
 *   save DIR GEN       save values of version GEN (w: f32 [6,4] split by rows
 *                      over the ranks; e: bf16 [4,6] split by columns; b: f32
 *                      [5] replicated, saved by rank 0 only)
 *   crash DIR GEN      the same, but the last rank dies half-way through its file
 *   load DIR GEN       load and expect the version-GEN values, exactly; then
 *                      loads into a mismatched model fail with the reason
 *   corrupt DIR        flip a byte in a rank file; load must fail naming the
 *                      CRC and leave the tensors untouched
 *   refuse DIR TEXT    load must fail with TEXT in the message (of some rank)
 *                      and leave the tensors untouched (a crafted directory)
 * save also stores a training state in the manifest ({"step": GEN}), which
 * load reads back.
 * Values are small integers (exact in bf16), so comparisons are exact.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colossal/colrt.h"
#include "../../runtime/common/half.h"

static float value(int gen, int tensor, int64_t global_index) {
    return (float)(gen * 100 + tensor * 30 + global_index % 30);
}

typedef struct { colrt_tensor t[3]; int n; float w[24], b[5]; uint16_t e[24]; } Model;

/* This rank's shards of w, e (and b on rank 0) for a world of W. */
static void model_init(Model *m, int W, int R) {
    memset(m, 0, sizeof *m);
    if (6 % W || 6 % W) colrt_die("test_checkpoint: world %d does not divide 6", W);
    int rows = 6 / W, cols = 6 / W;
    m->t[0] = (colrt_tensor){.name = "w", .dtype = COLRT_F32, .ndim = 2, .global_shape = {6, 4},
                             .offset = {R * rows, 0}, .shape = {rows, 4}, .data = m->w};
    m->t[1] = (colrt_tensor){.name = "e", .dtype = COLRT_BF16, .ndim = 2, .global_shape = {4, 6},
                             .offset = {0, R * cols}, .shape = {4, cols}, .data = m->e};
    m->t[2] = (colrt_tensor){.name = "b", .dtype = COLRT_F32, .ndim = 1, .global_shape = {5}, .offset = {0},
                             .shape = {5}, .data = m->b};
    m->n = 3;
}

static void model_fill(Model *m, int gen) {
    for (int k = 0; k < m->n; k++) {
        colrt_tensor *t = &m->t[k];
        int64_t cols = t->ndim == 2 ? t->shape[1] : t->shape[0], rows = t->ndim == 2 ? t->shape[0] : 1;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                int64_t g = t->ndim == 2 ? (t->offset[0] + r) * t->global_shape[1] + t->offset[1] + c : c;
                colrt_st(t->data, t->dtype, r * cols + c, gen < 0 ? -1.f : value(gen, k, g));
            }
    }
}

static int model_equals(Model *m, int gen) {
    Model want = *m;
    float w[24], b[5];
    uint16_t e[24];
    want.t[0].data = w, want.t[1].data = e, want.t[2].data = b;
    model_fill(&want, gen);
    return !memcmp(w, m->w, sizeof(float) * 6 * 4 / (size_t)(6 / m->t[0].shape[0])) &&
           !memcmp(e, m->e, 2 * (size_t)(4 * m->t[1].shape[1])) && !memcmp(b, m->b, sizeof b);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    colrt_set_timeout(20);
    if (argc < 3) colrt_die("usage: test_checkpoint save|crash|load|corrupt DIR [GEN]");
    const char *mode = argv[1], *dir = argv[2];
    int gen = argc > 3 && strcmp(argv[1], "refuse") ? atoi(argv[3]) : 0, W = colrt_world(), R = colrt_rank();
    colrt_mesh *mesh = colrt_mesh_create(1, (int[]){W});
    Model m;
    model_init(&m, W, R);
    if (!strcmp(mode, "save") || !strcmp(mode, "crash")) {
        model_fill(&m, gen);
        if (!strcmp(mode, "crash")) colrt_fault_kill_save(W - 1);
        char state[64];
        snprintf(state, sizeof state, "{\"step\": %d}", gen);
        colrt_checkpoint_set_state(state);
        colrt_checkpoint_save(dir, mesh, "{\"strategy\": \"data parallel\"}", R == 0 ? 3 : 2, m.t);
        CHECK(strcmp(mode, "crash") || W == 1 || R != W - 1); /* the dying rank never gets here */
    } else if (!strcmp(mode, "load")) {
        model_fill(&m, -1);
        int rc = colrt_checkpoint_load(dir, m.n, m.t);
        if (rc) fprintf(stderr, "load failed: %s\n", colrt_checkpoint_error());
        CHECK_INT(rc, 0);
        CHECK(model_equals(&m, gen));
        char state[64]; /* the state saved with these tensors, from the same manifest */
        snprintf(state, sizeof state, "{\"step\":%d}", gen);
        CHECK(colrt_checkpoint_state() != NULL);
        if (colrt_checkpoint_state()) CHECK_CONTAINS(colrt_checkpoint_state(), state);
        /* a model that does not match the checkpoint: refused with a reason, nothing touched */
        Model bad = m;
        bad.t[0].dtype = COLRT_BF16;
        CHECK_INT(colrt_checkpoint_load(dir, bad.n, bad.t), -1);
        CHECK_CONTAINS(colrt_checkpoint_error(), "checkpoint dtype F32, the model wants BF16");
        bad = m;
        bad.t[2].global_shape[0] = 6, bad.t[2].shape[0] = 6;
        CHECK_INT(colrt_checkpoint_load(dir, bad.n, bad.t), -1);
        CHECK_CONTAINS(colrt_checkpoint_error(), "global shape differs");
        bad = m;
        bad.t[1].name = "missing";
        CHECK_INT(colrt_checkpoint_load(dir, bad.n, bad.t), -1);
        CHECK_CONTAINS(colrt_checkpoint_error(), "tensor missing is not in the checkpoint");
        CHECK(model_equals(&m, gen));
    } else if (!strcmp(mode, "corrupt")) {
        model_fill(&m, -1);
        if (R == 0) { /* flip one data byte of the last rank's file */
            char path[512];
            snprintf(path, sizeof path, "%s/manifest.json", dir);
            FILE *f = fopen(path, "r");
            char text[8192] = "";
            size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
            text[len] = 0;
            if (f) fclose(f);
            const char *last = NULL, *p = text;
            while ((p = strstr(p, "\"file\":"))) last = p++;
            char name[128] = "";
            if (last) sscanf(last, "\"file\": \"%127[^\"]", name);
            snprintf(path, sizeof path, "%s/%s", dir, name);
            f = fopen(path, "r+b");
            CHECK(f != NULL);
            if (f) {
                fseek(f, -3, SEEK_END);
                int c = fgetc(f);
                fseek(f, -3, SEEK_END);
                fputc(c ^ 0x10, f);
                fclose(f);
            }
        }
        colrt_barrier();
        int rc = colrt_checkpoint_load(dir, m.n, m.t);
        CHECK_INT(rc, -1);
        if (R == 0 || W == 1) CHECK_CONTAINS(colrt_checkpoint_error(), W == 1 ? "CRC-32" : "");
        fprintf(stderr, "rank %d: expected failure: %s\n", R, colrt_checkpoint_error());
        CHECK(model_equals(&m, -1)); /* nothing was touched */
        /* a missing checkpoint is an error too, not a crash */
        CHECK_INT(colrt_checkpoint_load("/nonexistent/colrt-ckpt", m.n, m.t), -1);
        CHECK_CONTAINS(colrt_checkpoint_error(), "no complete checkpoint");
    } else if (!strcmp(mode, "refuse") && argc > 3) {
        model_fill(&m, -1);
        int rc = colrt_checkpoint_load(dir, m.n, m.t);
        CHECK_INT(rc, -1);
        /* the failing rank names the reason; the others say which rank failed */
        int mine = strstr(colrt_checkpoint_error(), argv[3]) != NULL, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!any) fprintf(stderr, "rank %d: wanted '%s' in: %s\n", R, argv[3], colrt_checkpoint_error());
        CHECK(any);
        CHECK(model_equals(&m, -1)); /* nothing was touched */
    } else {
        colrt_die("test_checkpoint: unknown mode %s", mode);
    }
    colrt_mesh_destroy(mesh);
    int rc = check_done("test_colrt_checkpoint");
    colrt_finalize();
    return rc;
}

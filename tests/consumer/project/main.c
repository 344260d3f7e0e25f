/* main.c — trains the generated classifier on synthetic data for STEPS steps
 * (default 30) at LR (default 0.02) under mpirun; each rank feeds its rows of the global batch.
 * Prints every step's loss (rank 0) and exits 1 unless the mean loss of the last 5 steps is under 0.6 of the first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "classifier.h"

/* a fixed pseudo-random stream: row r of step s is the same on every rank */
static float uniform(uint64_t s, uint64_t r, uint64_t j) {
    uint64_t z = s * 0x9E3779B97F4A7C15ull + r * 0xBF58476D1CE4E5B9ull + j * 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (float)((z ^ (z >> 31)) >> 11) / 9007199254740992.0f * 2 - 1;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    float lr = argc > 2 ? (float)atof(argv[2]) : 0.02f;
    classifier *m;
    classifier_config cfg = {.mesh = NULL, .seed = 1};
    if (classifier_create(&cfg, &m) != 0) colrt_die("cannot create the model");
    int64_t first, rows;
    classifier_input_rows(m, &first, &rows);
    const int64_t in = classifier_x_ELEMS / classifier_x_ROWS;
    float *x = malloc(sizeof(float) * (size_t)classifier_x_ELEMS);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)classifier_y_ELEMS);
    float loss0 = 0, loss = 0, tail = 0;
    for (int s = 0; s < steps; s++) {
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < in; j++) x[r * in + j] = uniform((uint64_t)s, (uint64_t)(first + r), (uint64_t)j);
            y[r] = (x[r * in] > 0) + 2 * (x[r * in + 1] > 0);
        }
        classifier_inputs batch = {.x = x, .y = y};
        loss = classifier_train_step(m, &batch, lr);
        if (s == 0) loss0 = loss;
        if (s >= steps - 5) tail += loss;
        if (colrt_rank() == 0) printf("step %2d  loss %.4f\n", s + 1, loss);
    }
    int ok = isfinite(loss) && tail / 5 < 0.6f * loss0;
    if (colrt_rank() == 0)
        printf("%s: %d ranks, loss %.4f -> %.4f (mean of the last 5)\n", ok ? "trained" : "FAILED", colrt_world(), loss0, tail / 5);
    classifier_destroy(m);
    free(x);
    free(y);
    colrt_finalize();
    return ok ? 0 : 1;
}

/*
 * mlp.c — a multi-layer perceptron: N_HIDDEN ReLU layers, then a linear
 * head; a classification loss (cross-entropy over CLASSES) by default, or
 * with -DREGRESSION=1 a mean-squared-error loss against f32 targets
 * [BATCH, OUT].
 *
 * Sizes from -D: IN, HIDDEN, N_HIDDEN, CLASSES (or OUT), BATCH (--batch N).
 * Configurations:
 *   default         IN=64 HIDDEN=256 N_HIDDEN=1 CLASSES=10 (examples/ir/mlp.cir with BATCH=32)
 *   deeper          -DN_HIDDEN=4 -DHIDDEN=1024
 *   regression      -DREGRESSION=1 -DOUT=1
 */
#include <colossal/model.h>

#ifndef IN
#define IN 64
#endif
#ifndef HIDDEN
#define HIDDEN 256
#endif
#ifndef N_HIDDEN
#define N_HIDDEN 1
#endif
#ifndef CLASSES
#define CLASSES 10
#endif
#ifndef OUT
#define OUT 1
#endif
#ifndef REGRESSION
#define REGRESSION 0
#endif

/* Mean of (pred - y)^2 over every element. */
static tensor mse(tensor pred, tensor y) {
    tensor d = sub(pred, y);
    tensor per_row = reduce_mean(mul(d, d), 1, 0);
    return reduce_mean(per_row, 0, 0);
}

MODEL(mlp) {
    tensor x = input("x", F32, BATCH, IN);
    tensor h = x;
    for (int i = 0; i < N_HIDDEN; i++)
        h = scope("layers", i, relu(linear(h, HIDDEN, "fc")));
    if (REGRESSION) {
        tensor y = input("y", F32, BATCH, OUT);
        return mse(linear(h, OUT, "head"), y);
    }
    tensor y = input("y", I32, BATCH);
    return cross_entropy(linear(h, CLASSES, "head"), y);
}

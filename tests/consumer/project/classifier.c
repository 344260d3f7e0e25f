/* classifier.c — a small MLP classifier in colossal's model language: which
 * of four quadrants the first two of IN features fall in. */
#include <colossal/model.h>

#ifndef IN
#define IN 8
#endif
#ifndef HIDDEN
#define HIDDEN 32
#endif

MODEL(classifier) {
    tensor x = input("x", F32, BATCH, IN);
    tensor y = input("y", I32, BATCH);
    tensor h = relu(linear(x, HIDDEN, "fc1"));
    h = relu(linear(h, HIDDEN, "fc2"));
    return cross_entropy(linear(h, 4, "head"), y);
}

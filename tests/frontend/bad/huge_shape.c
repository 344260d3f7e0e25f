// A shape whose volume overflows: refused before any size is computed from it.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 1 << 30, 1 << 30, 1 << 30);
    return reduce_mean(x, 0, 0);
}

// expect: bad/huge_shape.c:5:16: error: shape [1073741824,1073741824,1073741824] has more than 2^48 elements

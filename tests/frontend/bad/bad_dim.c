// Dims are positive.
#include <colossal/model.h>

MODEL(m) {
    int d = 8 - 16;
    return input("x", F32, 4, d);
}

// expect: bad/bad_dim.c:6:31: error: a dimension of input() is -8
// expect: hint: dimensions are positive integers

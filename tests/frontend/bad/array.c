// Arrays are outside the subset.
#include <colossal/model.h>

MODEL(m) {
    int dims[2] = {4, 8};
    return input("x", F32, 4, 8);
}

// expect: bad/array.c:5:9: error: variable 'dims' has type 'int[2]', an array, which the model language does not have
// expect: hint: the model language has no arrays: use a loop over scope("name", i, ...) or separate variables

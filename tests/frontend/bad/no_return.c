// A function that can end without returning.
#include <colossal/model.h>

static tensor maybe(tensor x, int n) {
    if (n > 2) return relu(x);
}

MODEL(m) {
    return maybe(input("x", F32, 4, 8), 1);
}

// expect: bad/no_return.c:4:15: error: 'maybe' reached its end without returning a tensor
// expect: hint: end every path with a return statement

// A NaN reaching an op's attribute: generated C could not spell it; an error.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    double zero = 0.0;
    return reduce_mean(scale(x, zero / zero), 0, 0);
}

// expect: bad/not_finite.c:7:24: error: scale's attribute 's' is
// expect: it must be a finite number

// A float outside int64_t converted to an integer (undefined in C): an error.
#include <colossal/model.h>

MODEL(m) {
    long long n = (long long)1e300;
    return input("x", F32, 4, n);
}

// expect: bad/cast_overflow.c:5:19: error: converting 1e+300 to an integer overflows
// expect: hint: the model language computes with 64-bit integers

// Variadic dims must be ints.
#include <colossal/model.h>

MODEL(m) {
    return input("x", F32, 4, 8.5);
}

// expect: bad/float_dim.c:5:31: error: argument 4 of input() must be an int, not float
// expect: hint: dims and axes are integers: convert with (int)

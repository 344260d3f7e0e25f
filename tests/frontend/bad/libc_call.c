// The C library is not part of the model language.
#include <colossal/model.h>
#include <stdlib.h>

MODEL(m) {
    int n = abs(-8);
    return input("x", F32, 4, n);
}

// expect: bad/libc_call.c:6:13: error: call to 'abs', which is neither a builtin nor a function defined in this file
// expect: hint: a model calls the builtins of <colossal/model.h> (docs/model-language.md), the math.h functions sqrt, exp, log, pow, fabs, floor, ceil, and functions defined in the model file

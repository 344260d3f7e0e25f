// Pointers are outside the subset.
#include <colossal/model.h>

MODEL(m) {
    int n = 8;
    int *p = &n;
    return input("x", F32, 4, *p);
}

// expect: bad/pointer.c:6:10: error: variable 'p' has type 'int *', a pointer, which the model language does not have
// expect: hint: the model language has no pointers: pass tensors and numbers by value, names as const char * string literals

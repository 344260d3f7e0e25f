// Taking an address is pointer work too.
#include <colossal/model.h>

static int twice(int n) { return 2 * n; }

MODEL(m) {
    int n = 8;
    return input("x", F32, 4, twice(*&n));
}

// expect: bad/address_of.c:8:37: error: '*' works on pointers, which the model language does not have
// expect: hint: the model language has no pointers: pass tensors and numbers by value, names as const char * string literals

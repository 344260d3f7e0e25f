// Structs are outside the subset.
#include <colossal/model.h>

struct config {
    int d;
};

static int width(struct config c) { return c.d; }

MODEL(m) {
    struct config c = {8};
    return input("x", F32, 4, width(c));
}

// expect: bad/struct.c:11:19: error: variable 'c' has type 'struct config', a struct or union, which the model language does not have
// expect: hint: the model language has no structs: pass the fields as separate parameters

// Two layers with one name.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    for (int i = 0; i < 2; i++)
        x = linear(x, 8, "fc");
    return x;
}

// expect: bad/duplicate_param.c:7:13: error: 'fc.weight' already exists
// expect: hint: give each layer its own name; in a loop, wrap the body in scope("name", i, ...)

// A loop that never ends (run with a small statement limit).
// options: max_steps=1000
#include <colossal/model.h>

MODEL(m) {
    int n = 1;
    while (n > 0)
        n = 1;
    return input("x", F32, 4, 8);
}

// expect: bad/endless.c:8:9: error: the model ran more than 1000 statements without finishing
// expect: hint: a model's loops must end; check the loop condition

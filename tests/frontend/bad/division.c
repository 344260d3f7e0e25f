// Integer division by zero, found while running the model.
#include <colossal/model.h>

MODEL(m) {
    int heads = 0;
    return input("x", F32, 4, 768 / heads);
}

// expect: bad/division.c:6:31: error: integer division by zero
// expect: hint: check the divisor

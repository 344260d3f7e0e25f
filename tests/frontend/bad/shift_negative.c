// Shifting a negative value left (undefined in C): an error.
#include <colossal/model.h>

MODEL(m) {
    int k = -1;
    return input("x", F32, 4, k << 3);
}

// expect: bad/shift_negative.c:6:31: error: shift of the negative value -1
// expect: hint: shift non-negative integers

// A variable read before it has a value.
#include <colossal/model.h>

MODEL(m) {
    tensor x;
    return relu(x);
}

// expect: bad/uninitialized.c:6:17: error: variable 'x' is used before it is given a value
// expect: hint: give it a value where it is declared

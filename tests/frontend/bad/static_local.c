// Static locals keep state between calls.
#include <colossal/model.h>

MODEL(m) {
    static int calls = 0;
    calls++;
    return input("x", F32, 4, 8);
}

// expect: bad/static_local.c:5:16: error: static local variable 'calls' keeps state outside the function
// expect: hint: declare a plain local variable

// A global that can change is outside the subset.
#include <colossal/model.h>

int width = 8;

MODEL(m) {
    return input("x", F32, 4, width);
}

// expect: bad/global.c:7:31: error: 'width' is a global variable that can change
// expect: hint: globals must be constants: use an enum, a #define, or a static const variable, and pass values between functions as arguments

// switch is outside the subset.
#include <colossal/model.h>

MODEL(m) {
    int n = 2, d = 0;
    switch (n) {
    case 2: d = 8; break;
    default: d = 4;
    }
    return input("x", F32, 4, d);
}

// expect: bad/switch.c:6:5: error: switch is not part of the model language
// expect: hint: use if / else if

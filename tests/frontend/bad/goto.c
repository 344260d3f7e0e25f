// goto is outside the subset.
#include <colossal/model.h>

MODEL(m) {
    int n = 0;
again:
    n++;
    if (n < 3) goto again;
    return input("x", F32, 4, n);
}

// expect: bad/goto.c:6:1: error: goto and labels are not part of the model language
// expect: hint: use for, while, break and continue

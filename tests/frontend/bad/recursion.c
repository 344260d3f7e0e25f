// Recursion past the call depth limit.
// options: max_depth=8
#include <colossal/model.h>

static tensor deep(tensor x, int n) {
    return deep(relu(x), n + 1);
}

MODEL(m) {
    return deep(input("x", F32, 4, 8), 0);
}

// expect: bad/recursion.c:6:12: error: call depth limit (8) exceeded calling 'deep'
// expect: hint: end the recursion sooner, or use a loop

// A syntax error: clang's own diagnostic, printed as clang words it.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8)
    return x;
}

// expect: bad/syntax.c:5:37: error: expected ';' at end of declaration

// A type error: clang's own diagnostic (an int where a tensor goes).
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    return add(x, 3);
}

// expect: bad/type_error.c:6:19: error: passing 'int' to parameter of incompatible type 'tensor' (aka 'struct colossal_tensor')

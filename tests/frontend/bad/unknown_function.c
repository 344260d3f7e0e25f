// A function with no body in the file that is not a builtin.
#include <colossal/model.h>

tensor attention_block(tensor x, int heads);

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    return attention_block(x, 2);
}

// expect: bad/unknown_function.c:8:12: error: call to 'attention_block', which is neither a builtin nor a function defined in this file
// expect: hint: a model calls the builtins of <colossal/model.h> (docs/model-language.md), the math.h functions sqrt, exp, log, pow, fabs, floor, ceil, and functions defined in the model file

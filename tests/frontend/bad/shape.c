// A builtin called with a wrong shape: the op's rule, at the call.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    tensor w = param_normal("w", 0.02, 16, 32);
    return matmul(x, w);
}

// expect: bad/shape.c:7:12: error: matmul of [4,8] by [16,32]: inner dims differ (8 vs 16)
// expect: hint: matmul() was given f32[4,8] and f32[16,32]

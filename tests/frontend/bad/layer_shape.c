// Shape errors inside layers point at the layer's call.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 2, 4, 8);
    tensor y = linear(x, 16, "fc");
    return attention(y, y, y, CAUSAL);
}

// expect: bad/layer_shape.c:7:12: error: attention takes q [B,T,H,Dh] and k, v [B,S,Hkv,Dh] of equal shapes
// expect: hint: attention() was given f32[2,4,16], f32[2,4,16] and f32[2,4,16]

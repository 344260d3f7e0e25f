// param_of() of a parameter that does not exist.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    return matmul_nt(x, param_of("wte"));
}

// expect: bad/param_of.c:6:34: error: no parameter named 'wte'
// expect: hint: param_of() takes the name of a parameter created earlier, such as "wte" or "h.0.attn.c_attn.weight"

// Names are letters, digits, '_' and '.' between parts.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    return linear(x, 8, "my layer");
}

// expect: bad/bad_name.c:6:25: error: 'my layer' is not a valid name
// expect: hint: names use letters, digits, '_' and '-', with '.' between parts ("mlp.c_fc")

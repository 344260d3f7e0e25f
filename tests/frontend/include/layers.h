/* layers.h — a user header of model helpers, found through -I (test_language.c). */
#include <colossal/model.h>

static inline tensor mlp_block(tensor x, int hidden) {
    tensor h = relu(linear(x, hidden, "up"));
    return linear(h, dim(x, -1), "down");
}

static inline tensor broken_block(tensor x) {
    return matmul(x, x); /* [B, D] x [B, D]: inner dims differ */
}

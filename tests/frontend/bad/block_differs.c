// The instances of a repeated block must build the same thing.
#include <colossal/model.h>

static tensor layer(tensor x, int l) {
    tensor h = linear(x, 16, "fc");
    if (l == 2) h = gelu(h);
    else h = relu(h);
    return linear(h, 8, "out");
}

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    for (int l = 0; l < 4; l++)
        x = scope("layers", l, layer(x, l));
    return x;
}

// expect: bad/block_differs.c:6:21: error: instance 2 of block 'layers' differs from instance 0: its node 3 is gelu where instance 0 has relu
// expect: hint: every instance of a repeated block must build the same ops with the same shapes; move what differs out of scope(), or give it its own block name

// Same ops, other shapes: still not one block.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    for (int l = 0; l < 3; l++)
        x = scope("layers", l, linear(x, 8 + 8 * l, "fc"));
    return x;
}

// expect: bad/block_shape.c:7:32: error: instance 1 of block 'layers' differs from instance 0: its node 1 (dense) has other shapes or attributes
// expect: hint: every instance of a repeated block must build the same ops with the same shapes; move what differs out of scope(), or give it its own block name

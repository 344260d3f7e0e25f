// Instances count from 0 with none left out.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    for (int l = 0; l < 3; l += 2)
        x = scope("layers", l, relu(x));
    return x;
}

// expect: bad/block_missing.c:7:32: error: block 'layers' has no instance 1
// expect: hint: instances count 0, 1, 2, ... with none left out

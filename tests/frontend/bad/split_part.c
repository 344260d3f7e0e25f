// split() of a part that does not exist.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 6);
    return split(x, 1, 3, 3);
}

// expect: bad/split_part.c:6:27: error: part 3 of 3 does not exist
// expect: hint: parts count from 0

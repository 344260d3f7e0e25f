// split() into parts that do not divide the axis (the message's buffer is freed on this path:
// the fuzzer found it leaked, stop 31).
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 6);
    return split(x, 1, 4, 0);
}

// expect: bad/split_divide.c:7:12: error: split into 4 parts: need 2..
// expect: hint: split() was given

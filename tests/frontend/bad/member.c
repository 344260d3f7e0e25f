// A tensor's inside is not for models.
#include <colossal/model.h>

MODEL(m) {
    tensor x = input("x", F32, 4, 8);
    int id = x.id_;
    return input("y", F32, 4, id + 1);
}

// expect: bad/member.c:6:16: error: struct members are not part of the model language
// expect: hint: the model language has no structs: pass the fields as separate parameters

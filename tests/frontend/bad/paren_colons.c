// '(' followed by '::': libclang 19 never returns from it, so the front end
// refuses it before the parse, at its place (the fuzzer found the hang).
#include <colossal/model.h>

MODEL(m) {
    long long n = ( /* a comment between */ ::long long)1;
    return input("x", F32, 4, n);
}

// expect: bad/paren_colons.c:6:45: error: '::' after '(' is not C (libclang does not return from it)
// expect: hint: the model language is C17, where '::' means nothing; remove it

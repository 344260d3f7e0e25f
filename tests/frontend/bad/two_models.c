// Two models and no --model.
#include <colossal/model.h>

MODEL(small) { return input("x", F32, 4, 8); }
MODEL(large) { return input("x", F32, 4, 16); }

// expect: bad/two_models.c' defines 2 models
// expect: hint: choose one with --model NAME (small, large)

// No MODEL in the file.
#include <colossal/model.h>

static tensor helper(tensor x) { return relu(x); }

// expect: bad/no_model.c' defines no model
// expect: hint: define one with MODEL(name) { ...; return loss; } after #include <colossal/model.h>

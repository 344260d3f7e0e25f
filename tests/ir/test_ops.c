#include "check.h"
#include "ir.h"
int main(void) { CHECK(1); return check_done("ir_ops"); }

/*
 * deadline.c — the planner's clock and its one deadline. --time-limit bounds
 * the whole planning (plan.c sets the deadline): problem construction stops
 * there (IlpProblem.timed_out) and every GLPK solve's time limit ends there
 * (ilp.c). Takes CLOCK_MONOTONIC seconds; 0 means no deadline.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "solver.h"

static double deadline_s;

double ilp_clock_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void ilp_set_deadline(double s) { deadline_s = s; }

double ilp_deadline(void) { return deadline_s; }

bool ilp_deadline_passed(void) { return deadline_s > 0 && ilp_clock_s() >= deadline_s; }

/*
 * simulate.h — colossal-compile simulate (simulate.c): argv from the word
 * "simulate" on; returns the exit code.
 */
#ifndef COLOSSAL_SIMULATE_H
#define COLOSSAL_SIMULATE_H

int run_simulate(int argc, char **argv);

#endif

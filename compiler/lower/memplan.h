/*
 * memplan.h — the static memory plan: every buffer of a schedule gets a fixed
 * offset in one arena.
 *
 * Takes buffers with a size and a live interval [first, last] over schedule
 * steps (inclusive: written at `first`, last read at `last`), and optionally a
 * buffer each may reuse in place (an element-wise op writing over an operand
 * that dies there). Gives each buffer an offset such that buffers live at the
 * same step never overlap, placing them by decreasing size with best fit, as
 * XLA's heap simulator does. Reports the arena size and the lower bound: the
 * most bytes live at any one step.
 *
 * Pipelines: a buffer may name the stages whose ranks hold it (a mask; 0:
 * every rank). Buffers of disjoint stages never meet on one rank, so they
 * may share memory whatever their intervals; each stage's arena is the top of
 * its own buffers, and its lower bound counts its own.
 */
#ifndef COLOSSAL_MEMPLAN_H
#define COLOSSAL_MEMPLAN_H

#include <stdbool.h>
#include <stdint.h>

/* A set of pipeline stages (bit s: stage s), as wide as the planner's PlaceMask. */
typedef unsigned __int128 MemStages;

typedef struct MemBuffer {
    int64_t size;      /* bytes, > 0 */
    int first, last;   /* live steps, first <= last */
    int reuse;         /* index of a buffer whose memory this one may take over in place, or -1 */
    MemStages stages;  /* pipelines: bit s, stage s's ranks hold it; 0: every rank */
    /* results */
    int64_t offset;    /* byte offset in the arena (aligned) */
    int alias;         /* the buffer it shares memory with in place, or -1 */
} MemBuffer;

enum { MEMPLAN_MAX_STAGES = 128 };

typedef struct MemPlanStats {
    int64_t arena_bytes;        /* the arena's size (the largest stage's) */
    int64_t lower_bound_bytes;  /* most bytes live at one step (aligned sizes; on one stage) */
    int n_stages;               /* 1 + the highest stage a buffer names (0: no masks) */
    int64_t stage_arena_bytes[MEMPLAN_MAX_STAGES];       /* per stage: the top of its buffers */
    int64_t stage_lower_bound_bytes[MEMPLAN_MAX_STAGES]; /* per stage: its most bytes live at one step */
    int peak_step;              /* a step where the lower bound is reached */
    int n_in_place;             /* buffers placed in place over another */
} MemPlanStats;

/* Places every buffer; alignment is a power of two (the runtime's arena
 * alignment). Returns the stats. Buffers' offset and alias are written. */
MemPlanStats mem_plan(MemBuffer *bufs, int n, int64_t alignment);

/* Checks a plan: no two buffers live at the same step on one rank overlap in memory, every
 * buffer lies inside the arena and is aligned. Returns false and describes the
 * first violation in why (may be NULL). */
bool mem_plan_check(const MemBuffer *bufs, int n, int64_t arena_bytes, int64_t alignment,
                    char *why, int why_len);

#endif

/*
 * test_chunk_pack.c — placement_chunk_pack, the one ZeRO chunk packing rule
 * the planner prices (solver/chunks.c) and the lowering builds
 * (compiler/lower/chunk.c): greedy runs of one dtype up to the cap, a run of
 * one alone; for reduce-scatters, a gradient read where it is scattered stays
 * alone without ending the run, and a run ends before a member scattered at
 * or after the first read of a slice in it.
 */
#include "check.h"
#include "placement.h"

int main(void) {
    int ck[8];
    /* gathers: 3+3 fit in 8, the third does not; a slice over the cap alone; a dtype change ends a run */
    int64_t b1[] = {3, 3, 3, 3, 9, 2, 2};
    DType d1[] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_BF16};
    CHECK_INT(placement_chunk_pack(b1, d1, NULL, NULL, 7, 8, ck), 2);
    int w1[] = {0, 0, 1, 1, -1, -1, -1};
    for (int i = 0; i < 7; i++) CHECK_INT(ck[i], w1[i]);
    /* cap 0: one collective per tensor */
    CHECK_INT(placement_chunk_pack(b1, d1, NULL, NULL, 7, 0, ck), 0);
    for (int i = 0; i < 7; i++) CHECK_INT(ck[i], -1);
    /* reduce-scatters: member 1 is read at its own node (alone, the run goes on past it);
     * member 3's slice is first read at node 14, so member 4 (scattered at 14) starts a new run */
    int64_t b2[] = {2, 2, 2, 2, 2, 2};
    DType d2[] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32};
    int at[] = {10, 11, 12, 13, 14, 15}, rd[] = {50, 11, 50, 14, 50, 50}; /* member 3 read at 14 */
    CHECK_INT(placement_chunk_pack(b2, d2, at, rd, 6, 100, ck), 2);
    int w2[] = {0, -1, 0, 0, 1, 1};
    for (int i = 0; i < 6; i++) CHECK_INT(ck[i], w2[i]);
    return check_done("test_chunk_pack");
}

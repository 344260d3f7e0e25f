/*
 * test_chunk_pack.c — placement_chunk_pack, the one ZeRO chunk packing rule
 * the planner prices (solver/chunks.c) and the lowering builds
 * (compiler/lower/chunk.c): greedy runs of one dtype up to the cap, a run of
 * one alone; for reduce-scatters, a gradient read where it is scattered stays
 * alone without ending the run, and a run ends before a member scattered at
 * or after the first read of a slice in it (in any order: the run's latest
 * reduce-scatter before its first read). placement_chunk_layout, the one
 * layout: a parameter chunk's gradients one chunk in its member order and
 * 64-byte slots; under pipelines each stage's members packed apart.
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
    /* the symmetric rule: members not in the backward's order (a chunk's gradients in its
     * parameters' order): member 1's slice is read at 21, where member 0 is scattered */
    int at3[] = {21, 20, 19}, rd3[] = {50, 21, 50};
    CHECK_INT(placement_chunk_pack(b2, d2, at3, rd3, 3, 100, ck), 1);
    int w3[] = {-1, 0, 0}; /* {0, 1} would reduce-scatter at 21: member 1 starts a run, 2 joins */
    for (int i = 0; i < 3; i++) CHECK_INT(ck[i], w3[i]);

    /* placement_chunk_layout: gathered members A B C D (first-gather order, 100-byte
     * slices: 128-byte slots) with their gradients scattered in reverse (D first), a
     * ZeRO-2 pair E F, gathered G H I whose H is read where it is scattered, gathered J K
     * whose J's slice is read at K's reduce-scatter, and gathered L whose reduce-scatter
     * is its own (the embedding's, at the step's first node) between M and N */
    PlaceChunkMember m[] = {
        {100, DT_F32, true, 13, 60, 0, false}, {100, DT_F32, true, 12, 60, 0, false},  /* A B */
        {100, DT_F32, true, 11, 60, 0, false}, {100, DT_F32, true, 10, 60, 0, false},  /* C D */
        {100, DT_F32, false, 14, 60, 0, false}, {100, DT_F32, false, 15, 60, 0, false}, /* E F */
        {60, DT_BF16, true, 9, 60, 0, false}, {60, DT_BF16, true, 8, 8, 0, false},      /* G H */
        {60, DT_BF16, true, 7, 60, 0, false},                                 /* I */
        {40, DT_F16, true, 5, 6, 0, false}, {40, DT_F16, true, 6, 60, 0, false},        /* J K */
        {40, DT_F16, true, 4, 60, 0, false}, {40, DT_F16, true, -1, 0, 0, false}, {40, DT_F16, true, 3, 60, 0, false}, /* M L N */
    };
    int bwd[] = {13, 11, 9, 10, 8, 7, 6, 3, 2, 1, 0, 4, 5};
    PlaceChunks pc;
    placement_chunk_layout(m, 14, bwd, 13, 300, &pc);
    CHECK_INT(pc.n_chunks, 4); /* {A B} {C D} {G I} {K M N}: the runs go on past H and L */
    int wc[] = {0, 0, 1, 1, -1, -1, 2, -1, 2, -1, 3, 3, -1, 3};
    int64_t wo[] = {0, 128, 0, 128, 0, 0, 0, 0, 64, 0, 0, 64, 0, 128};
    for (int i = 0; i < 14; i++) {
        CHECK_INT(pc.chunk[i], wc[i]);
        CHECK_INT(pc.off[i], wo[i]);
    }
    /* each parameter chunk's gradients one chunk at the same offsets (the backward's
     * order would lay out B before A), then E F; H, J and L alone */
    CHECK_INT(pc.n_grad, 5);
    int wg[] = {0, 0, 1, 1, 4, 4, 2, -1, 2, -1, 3, 3, -1, 3};
    int64_t wgo[] = {0, 128, 0, 128, 0, 128, 0, 0, 64, 0, 0, 64, 0, 128};
    for (int i = 0; i < 14; i++) {
        CHECK_INT(pc.grad[i], wg[i]);
        CHECK_INT(pc.grad_off[i], wgo[i]);
    }
    placement_chunks_free(&pc);

    /* pipeline stages (PlaceChunkMember.stage): each stage's members packed apart, in the
     * order of its first member, though they interleave in m's order (P Q on stage 1, R S T
     * on stage 0, U on stage 1); W on several stages (a tied parameter) alone, its gradient
     * too; the ZeRO-2 gradients X Y Z of stages 0, 1, 0: X and Z one chunk, Y alone */
    PlaceChunkMember ms[] = {
        {100, DT_F32, true, 30, 90, 1, false}, {100, DT_F32, true, 29, 90, 1, false},  /* P Q */
        {100, DT_F32, true, 40, 90, 0, false}, {100, DT_F32, true, 39, 90, 0, false},  /* R S */
        {100, DT_F32, true, 38, 90, 0, false}, {100, DT_F32, true, 28, 90, 1, false},  /* T U */
        {100, DT_F32, true, 50, 90, -1, false},                                 /* W */
        {100, DT_F32, false, 41, 90, 0, false}, {100, DT_F32, false, 31, 90, 1, false}, /* X Y */
        {100, DT_F32, false, 42, 90, 0, false},                                 /* Z */
    };
    int bwds[] = {5, 1, 0, 8, 4, 3, 2, 7, 9, 6};
    placement_chunk_layout(ms, 10, bwds, 10, 1000, &pc);
    CHECK_INT(pc.n_chunks, 2); /* {P Q U} (stage 1's first member comes first) {R S T} */
    int wsc[] = {0, 0, 1, 1, 1, 0, -1, -1, -1, -1};
    int64_t wso[] = {0, 128, 0, 128, 256, 256, 0, 0, 0, 0};
    for (int i = 0; i < 10; i++) {
        CHECK_INT(pc.chunk[i], wsc[i]);
        CHECK_INT(pc.off[i], wso[i]);
    }
    CHECK_INT(pc.n_grad, 3); /* and {X Z}, stage 0's in the backward's order */
    int wsg[] = {0, 0, 1, 1, 1, 0, -1, 2, -1, 2};
    int64_t wsgo[] = {0, 128, 0, 128, 256, 256, 0, 0, 0, 128};
    for (int i = 0; i < 10; i++) {
        CHECK_INT(pc.grad[i], wsg[i]);
        CHECK_INT(pc.grad_off[i], wsgo[i]);
    }
    placement_chunks_free(&pc);

    /* tensor parallelism: gathered members whose gradients are only sliced (grad_local: V W)
     * pack with such members only, their chunk's gradient chunk left empty; X Y, gathered
     * with their gradients reduce-scattered, pack apart, their gradients in their layout */
    PlaceChunkMember ml[] = {
        {100, DT_F32, true, -1, 0, 0, true}, {100, DT_F32, true, 20, 90, 0, false}, /* V X */
        {100, DT_F32, true, -1, 0, 0, true}, {100, DT_F32, true, 19, 90, 0, false}, /* W Y */
    };
    int bwdl[] = {3, 1};
    placement_chunk_layout(ml, 4, bwdl, 2, 1000, &pc);
    CHECK_INT(pc.n_chunks, 2); /* {V W} (the first member's group first) {X Y} */
    CHECK_INT(pc.n_grad, 2);   /* gradient chunk 0 empty */
    int wlc[] = {0, 1, 0, 1}, wlg[] = {-1, 1, -1, 1};
    int64_t wlo[] = {0, 0, 128, 128}, wlgo[] = {0, 0, 0, 128};
    for (int i = 0; i < 4; i++) {
        CHECK_INT(pc.chunk[i], wlc[i]);
        CHECK_INT(pc.off[i], wlo[i]);
        CHECK_INT(pc.grad[i], wlg[i]);
        CHECK_INT(pc.grad_off[i], wlgo[i]);
    }
    placement_chunks_free(&pc);
    return check_done("test_chunk_pack");
}

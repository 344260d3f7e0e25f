/*
 * test_memplan.c — the static memory plan: placements never overlap in time
 * and space, the arena meets the lower bound where it can, in-place reuse
 * shares memory, and the plan is deterministic.
 */
#include <stdlib.h>

#include "check.h"
#include "memplan.h"

static MemBuffer buf(int64_t size, int first, int last) {
    return (MemBuffer){.size = size, .first = first, .last = last, .reuse = -1};
}

static void check_valid(MemBuffer *b, int n, MemPlanStats st) {
    char why[256] = "";
    bool ok = mem_plan_check(b, n, st.arena_bytes, 64, why, sizeof why);
    if (!ok) fprintf(stderr, "invalid plan: %s\n", why);
    CHECK(ok);
    CHECK(st.arena_bytes >= st.lower_bound_bytes);
}

int main(void) {
    /* sequential buffers all reuse the same memory */
    MemBuffer seq[3] = {buf(1000, 0, 1), buf(3000, 2, 3), buf(2000, 4, 5)};
    MemPlanStats st = mem_plan(seq, 3, 64);
    check_valid(seq, 3, st);
    CHECK_INT(st.arena_bytes, 3008); /* 3000 rounded up to 64 */
    CHECK_INT(st.lower_bound_bytes, 3008);
    CHECK_INT(seq[0].offset, 0);
    CHECK_INT(seq[2].offset, 0);

    /* overlapping buffers stack; the hole left by a dead one is reused by best fit */
    MemBuffer ov[4] = {buf(4096, 0, 4), buf(1024, 0, 1), buf(2048, 1, 4), buf(1024, 2, 3)};
    st = mem_plan(ov, 4, 64);
    check_valid(ov, 4, st);
    CHECK_INT(st.lower_bound_bytes, 4096 + 1024 + 2048);
    CHECK_INT(st.arena_bytes, st.lower_bound_bytes);
    CHECK_INT(ov[3].offset, ov[1].offset); /* takes the dead buffer's slot */

    /* in place: an element-wise chain writes over its operand */
    MemBuffer ip[4] = {buf(512, 0, 1), buf(512, 1, 2), buf(512, 2, 3), buf(256, 0, 3)};
    ip[1].reuse = 0;
    ip[2].reuse = 1;
    st = mem_plan(ip, 4, 64);
    check_valid(ip, 4, st);
    CHECK_INT(st.n_in_place, 2);
    CHECK_INT(ip[1].offset, ip[0].offset);
    CHECK_INT(ip[2].offset, ip[0].offset);
    CHECK_INT(ip[2].alias, 0);
    CHECK_INT(st.arena_bytes, 512 + 256);
    /* a reuse that is not possible (the donor lives on) is ignored */
    MemBuffer no[2] = {buf(512, 0, 5), buf(512, 1, 2)};
    no[1].reuse = 0;
    st = mem_plan(no, 2, 64);
    check_valid(no, 2, st);
    CHECK_INT(st.n_in_place, 0);
    CHECK_INT(no[1].alias, -1);

    /* an order that matters: best fit by size (ties to the earlier) puts the second 128-byte
     * buffer above the long-lived 64-byte one, 256 bytes; by lifetime the arena meets the
     * lower bound, 192: the packer tries several orders and keeps the smallest (memplan.c) */
    MemBuffer ord[4] = {buf(128, 0, 0), buf(64, 0, 1), buf(128, 2, 4), buf(64, 1, 3)};
    st = mem_plan(ord, 4, 64);
    check_valid(ord, 4, st);
    CHECK_INT(st.lower_bound_bytes, 192);
    CHECK_INT(st.arena_bytes, 192);

    /* random schedules: always valid, deterministic, close to the bound.
     * Best-fit by decreasing size is a heuristic (the problem is NP-hard);
     * on these inputs it stays within 25% of the lower bound. */
    srand(12345);
    for (int trial = 0; trial < 20; trial++) {
        enum { N = 400 };
        MemBuffer r[N], r2[N];
        for (int i = 0; i < N; i++) {
            int first = rand() % 1000, len = 1 + rand() % 60;
            r[i] = buf(64 + (rand() % 100000), first, first + len);
            if (i > 0 && rand() % 4 == 0) r[i].reuse = rand() % i;
        }
        memcpy(r2, r, sizeof r);
        MemPlanStats s1 = mem_plan(r, N, 256);
        MemPlanStats s2 = mem_plan(r2, N, 256);
        char why[256] = "";
        CHECK(mem_plan_check(r, N, s1.arena_bytes, 256, why, sizeof why));
        CHECK_INT(s1.arena_bytes, s2.arena_bytes);
        for (int i = 0; i < N; i++) CHECK_INT(r[i].offset, r2[i].offset);
        CHECK(s1.arena_bytes >= s1.lower_bound_bytes);
        CHECK((double)s1.arena_bytes <= 1.25 * (double)s1.lower_bound_bytes);
    }

    /* pipelines: buffers of disjoint stages share memory whatever their
     * intervals; a buffer two stages hold (a boundary value) is below each
     * one's own, and each stage's arena is the top of its own buffers */
    MemBuffer pp[5] = {buf(4096, 0, 9), buf(1024, 0, 9), buf(512, 3, 4), buf(2048, 0, 9), buf(64, 0, 9)};
    pp[0].stages = 1u; /* stage 0's */
    pp[1].stages = 2u; /* stage 1's */
    pp[2].stages = 3u; /* sent from 0 to 1 */
    pp[3].stages = 2u;
    pp[4].stages = 0u; /* every stage's (an input) */
    st = mem_plan(pp, 5, 64);
    check_valid(pp, 5, st);
    CHECK_INT(st.n_stages, 2);
    CHECK_INT(pp[4].offset, 0);   /* every stage's first */
    CHECK_INT(pp[2].offset, 64);  /* then the shared one */
    CHECK_INT(pp[0].offset, 576); /* stage 0 and 1 stack from there, side by side */
    CHECK_INT(pp[3].offset, 576);
    CHECK_INT(pp[1].offset, 576 + 2048);
    CHECK_INT(st.stage_arena_bytes[0], 576 + 4096);
    CHECK_INT(st.stage_arena_bytes[1], 576 + 2048 + 1024);
    CHECK_INT(st.arena_bytes, 576 + 4096);
    CHECK_INT(st.stage_lower_bound_bytes[1], 64 + 512 + 2048 + 1024);
    CHECK_INT(st.lower_bound_bytes, 64 + 512 + 4096);
    /* the checker: stage 0's and stage 1's buffers may overlap, two of one stage's may not */
    MemBuffer sh[2] = {buf(128, 0, 2), buf(128, 1, 3)};
    sh[0].offset = sh[1].offset = 0, sh[0].alias = sh[1].alias = -1;
    sh[0].stages = 1u, sh[1].stages = 2u;
    CHECK(mem_plan_check(sh, 2, 128, 64, NULL, 0));
    sh[1].stages = 3u;
    CHECK(!mem_plan_check(sh, 2, 128, 64, NULL, 0));
    /* stages past bit 31 and 63 (a pipeline of up to 128 devices): stage 40's and stage 100's
     * buffers share memory, a buffer of stages 40 and 100 sits below both */
    MemBuffer hi[3] = {buf(1024, 0, 9), buf(2048, 0, 9), buf(256, 0, 9)};
    hi[0].stages = (MemStages)1 << 40;
    hi[1].stages = (MemStages)1 << 100;
    hi[2].stages = hi[0].stages | hi[1].stages;
    st = mem_plan(hi, 3, 64);
    check_valid(hi, 3, st);
    CHECK_INT(st.n_stages, 101);
    CHECK_INT(hi[2].offset, 0);
    CHECK_INT(hi[0].offset, 256);
    CHECK_INT(hi[1].offset, 256);
    CHECK_INT(st.stage_arena_bytes[40], 256 + 1024);
    CHECK_INT(st.stage_arena_bytes[100], 256 + 2048);
    CHECK_INT(st.stage_arena_bytes[0], 0);
    CHECK_INT(st.arena_bytes, 256 + 2048);

    /* the checker catches an overlap */
    MemBuffer bad[2] = {buf(128, 0, 2), buf(128, 1, 3)};
    bad[0].offset = 0, bad[1].offset = 64, bad[0].alias = bad[1].alias = -1;
    char why[256];
    CHECK(!mem_plan_check(bad, 2, 256, 64, why, sizeof why));
    CHECK_CONTAINS(why, "overlap in memory");
    return check_done("memplan");
}

/*
 * test_profile.c — the profile's collective tables are bounded (16 kinds,
 * 128 (kind, size) rows, runtime/common/profile.c): calls past them are left
 * out, and the report at exit says so on stderr instead of dropping them
 * silently. Run with COLRT_PROFILE=1; ctest matches the two warnings.
 */
#include <stdio.h>

#include "colossal/colrt.h"

/* the collectives' hook the CPU backend calls (runtime/common/internal.h) */
void colrt__profile_coll(const char *kind, double bytes, double seconds);

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    static colrt_prof_entry e[1] = {{.node = "x", .op = "add", .cls = "elementwise", .flops = 1, .bytes = 4}};
    colrt_profile_register("test_profile", "test", e, 1);
    colrt_profile_mark(&e[0]);
    colrt_profile_mark(NULL);
    /* 4 kinds x 33 sizes (powers of 4 of bytes: one row each) = 132 rows, 4 past the 128 */
    static const char *kind[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
    double b = 1;
    for (int s = 0; s < 33; s++, b *= 4)
        for (int k = 0; k < 4; k++) colrt__profile_coll(kind[k], b, 1e-6);
    /* 18 kinds: 2 past the 16 (string literals: the hook keeps the pointer) */
    static const char *more[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12", "k13"};
    for (int k = 0; k < 14; k++) colrt__profile_coll(more[k], 64, 1e-6);
    printf("test_profile: %d rows and 18 kinds sent; the report follows at exit\n", 4 * 33 + 14);
    colrt_finalize();
    return 0;
}

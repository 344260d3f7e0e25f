/*
 * compare_dumps REF GOT — compares two kernel_dump files record by record
 * and prints a table; exits non-zero if a record differs beyond tolerance
 * or the files do not line up.
 *
 * Tolerance |got - ref| <= atol + rtol*|ref| per element, by storage dtype
 * of the record: f32 1e-4 / 1e-3 (different summation orders: cuBLASLt vs
 * OpenBLAS, atomics); f16 and bf16: two units in the last place of the
 * output (4e-3 / 3e-2), since either side may round a value the other way.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int next(FILE *f, char *name, int64_t *n, float **v) {
    if (fread(name, 1, 64, f) != 64 || fread(n, sizeof *n, 1, f) != 1) return 0;
    *v = malloc(sizeof(float) * (size_t)*n + 4);
    return fread(*v, sizeof(float), (size_t)*n, f) == (size_t)*n;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: compare_dumps REF GOT\n");
        return 2;
    }
    FILE *a = fopen(argv[1], "rb"), *b = fopen(argv[2], "rb");
    if (!a || !b) {
        fprintf(stderr, "compare_dumps: cannot open %s\n", !a ? argv[1] : argv[2]);
        return 2;
    }
    char na[64], nb[64];
    int64_t ca, cb;
    float *va, *vb;
    int bad = 0, records = 0;
    printf("%-40s %10s %12s %12s  %s\n", "kernel [dtype]", "elements", "max abs err", "worst/tol", "result");
    while (next(a, na, &ca, &va)) {
        if (!next(b, nb, &cb, &vb) || strcmp(na, nb) || ca != cb) {
            fprintf(stderr, "compare_dumps: record %d: %s does not match %s\n", records, na, nb);
            return 1;
        }
        double atol = 1e-4, rtol = 1e-3;
        if (strstr(na, "[BF16]")) atol = rtol = 3e-2;
        if (strstr(na, "[F16]")) atol = rtol = 4e-3;
        if (strstr(na, "cast [F32]")) atol = rtol = 3e-2; /* F32 records cast to BF16 */
        double maxabs = 0, worst = 0;
        for (int64_t i = 0; i < ca; i++) {
            double e = fabs((double)va[i] - vb[i]), lim = atol + rtol * fabs(va[i]);
            if (!(e <= lim)) e = isnan(e) ? INFINITY : e;
            if (e > maxabs) maxabs = e;
            if (e / lim > worst) worst = e / lim;
        }
        int ok = worst <= 1;
        bad += !ok;
        printf("%-40s %10lld %12.3g %12.3g  %s\n", na, (long long)ca, maxabs, worst, ok ? "ok" : "FAIL");
        free(va), free(vb), records++;
    }
    printf("compare_dumps: %d records, %d failed\n", records, bad);
    return bad || records == 0;
}

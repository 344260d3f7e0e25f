/*
 * train.c — a small training main for a generated GPT-style program (inputs
 * `idx` and `targets`, i32 [batch, seq]): character-level language modelling
 * on a fixed text, each rank feeding its rows of every global batch. Prints
 * the loss of every step (rank 0) and the step time. Used by the main job
 * (scripts/demo.sh) and by bench/codegen_cpu (run.sh).
 *
 * Build with the generated files: -DCG_MODEL=gpt2 -DCG_HEADER=gpt2.h.
 * Usage: train [STEPS [LR [WARMUP]]]   (WARMUP steps are not timed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CG_CAT2(a, b) a##b
#define CG_CAT(a, b) CG_CAT2(a, b)
#define CG_FN(x) CG_CAT(CG_MODEL, CG_CAT(_, x))
#define CG_STR2(x) #x
#define CG_STR(x) CG_STR2(x)
#include CG_STR(CG_HEADER)

/* bench/codegen_cpu/optimizer_share.sh defines them in the generated program:
 * the seconds spent in the update part (optimizer) so far, wall and the
 * process's CPU time. */
extern double CG_FN(bench_update_s) __attribute__((weak));
extern double CG_FN(bench_update_cpu_s) __attribute__((weak));

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char TEXT[] =
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. "
    "First Citizen: You are all resolved rather to die than to famish? All: Resolved. resolved. "
    "First Citizen: First, you know Caius Marcius is chief enemy to the people. All: We know't, we know't. "
    "First Citizen: Let us kill him, and we'll have corn at our own price. Is't a verdict? "
    "All: No more talking on't; let it be done: away, away! ";

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int steps = argc > 1 ? atoi(argv[1]) : 5;
    float lr = argc > 2 ? (float)atof(argv[2]) : 1e-3f;
    int warmup = argc > 3 ? atoi(argv[3]) : 0;
    CG_MODEL *m;
    CG_FN(config) cfg = {.mesh = NULL, .seed = 42};
    if (CG_FN(create)(&cfg, &m) != 0) colrt_die("cannot create the model");
    int64_t first, rows;
    CG_FN(input_rows)(m, &first, &rows);
    rows *= CG_CAT(CG_MODEL, _MICRO_BATCHES); /* the inputs hold every micro-batch's rows, one block each */
    /* the sequence length: the local input's size over its rows */
    int64_t seq = CG_CAT(CG_MODEL, _idx_ELEMS) / CG_CAT(CG_MODEL, _idx_ROWS);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(rows * seq));
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)(rows * seq));
    const int64_t n_text = (int64_t)sizeof TEXT - 1;
    double timed = 0, update = 0, cpu = 0, update_cpu = 0;
    double *each = malloc(sizeof(double) * (size_t)(steps > 0 ? steps : 1)); /* the timed steps, for their median */
    if (!idx || !tgt || !each) colrt_die("out of memory");
    const int bench = &CG_FN(bench_update_s) && &CG_FN(bench_update_cpu_s);
    for (int s = 0; s < steps + warmup; s++) {
        double u0 = bench ? CG_FN(bench_update_s) : 0, uc0 = bench ? CG_FN(bench_update_cpu_s) : 0, c0 = cpu_now();
        /* a sequence longer than the text (GPT-2 124M's 1024) wraps around it */
        const int64_t span = n_text - seq - 1 > 0 ? n_text - seq - 1 : n_text;
        for (int64_t r = 0; r < rows; r++) { /* global row first + r of step s */
            int64_t start = ((s * 7919 + (first + r) * 104729) % span);
            for (int64_t t = 0; t < seq; t++) {
                idx[r * seq + t] = (unsigned char)TEXT[(start + t) % n_text];
                tgt[r * seq + t] = (unsigned char)TEXT[(start + t + 1) % n_text];
            }
        }
        CG_FN(inputs) in = {.idx = idx, .targets = tgt};
        float loss = CG_FN(train_step)(m, &in, lr);
        double cs = cpu_now() - c0;
        CG_FN(statistics) st = CG_FN(stats)(m);
        double us = bench ? CG_FN(bench_update_s) - u0 : 0, ucs = bench ? CG_FN(bench_update_cpu_s) - uc0 : 0;
        if (s >= warmup) timed += st.last_step_s, update += us, cpu += cs, update_cpu += ucs, each[s - warmup] = st.last_step_s;
        if (colrt_rank() == 0 && bench)
            printf("step %3d: loss %.4f  (%.3f s, update %.4f s; CPU %.3f s, update %.4f s%s)\n", s + 1, loss,
                   st.last_step_s, us, cs, ucs, s < warmup ? ", warm-up" : "");
        else if (colrt_rank() == 0)
            printf("step %3d: loss %.4f  (%.3f s%s)\n", s + 1, loss, st.last_step_s, s < warmup ? ", warm-up" : "");
    }
    CG_FN(statistics) st = CG_FN(stats)(m);
    if (colrt_rank() == 0)
        printf("%d rank%s, arena %.1f MB per rank (lower bound %.1f MB), %.6f s per step (mean of %d)\n",
               colrt_world(), colrt_world() == 1 ? "" : "s", st.arena_bytes / 1e6, st.lower_bound_bytes / 1e6, steps ? timed / steps : 0.0,
               steps);
    /* the median step stands above a few steps a busy scheduler stretched
     * (bench/validate/run.sh measures with it; the mean above counts them) */
    if (colrt_rank() == 0 && steps > 0) {
        qsort(each, (size_t)steps, sizeof(double), cmp_double);
        double med = steps % 2 ? each[steps / 2] : 0.5 * (each[steps / 2 - 1] + each[steps / 2]);
        printf("%.6f s per step (median of %d)\n", med, steps);
    }
    if (colrt_rank() == 0 && bench && steps)
        printf("update (optimizer) %.4f s per step, %.2f%% of the step; CPU time %.4f of %.3f s per step, %.2f%%\n",
               update / steps, 100 * update / timed, update_cpu / steps, cpu / steps, 100 * update_cpu / cpu);
    CG_FN(destroy)(m);
    free(idx);
    free(tgt);
    free(each);
    colrt_finalize();
    return 0;
}

/*
 * cg_readout.c — what a driver reads back from a generated program besides
 * the loss (docs/generated-api.md, "Read-outs"):
 *   m_logits     a forward pass, then the next-token scores at one sequence
 *                position of every row of the global batch, on every rank,
 *                whatever the plan (the scores a sampler needs);
 *   m_last_step  the last training step's gradient norm, loss scale and
 *                whether its update was skipped;
 *   m_STEP_FLOPS, m_PEAK_FLOPS  what MFU needs.
 * Host code over buffers the schedule leaves intact after its forward pass,
 * and over a few scratch bytes the gradient-coefficient node fills
 * (CG_SCRATCH_NORM, cg_kernels.c). Takes the lowered program; writes into
 * the header and the schedule file being built (cg_emit.c calls it last).
 */
#include <math.h>
#include <string.h>

#include "cg_internal.h"

/* The forward cross-entropy whose logits m_logits reads (the first), or IR_NONE. */
static NodeId find_cross_entropy(const Graph *g) {
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->op == OP_CROSS_ENTROPY) return id;
    return IR_NONE;
}

/* m_logits's body for the logits `lg` as the cross-entropy node `ce` reads
 * them: each rank places its block of position `pos` into a zeroed copy of
 * the global [rows, classes] matrix (only the ranks at coordinate 0 of the
 * axes holding copies of it, so that a sum over the world counts each
 * element once), then the copies are all-reduced over every mesh axis. */
static void logits_body(CgCtx *c, StrBuf *m, const CgOptions *o, NodeId ce, int micro) {
    const Graph *g = c->g;
    const LowerProgram *lp = c->lp;
    const char *px = c->prefix;
    const Node *n = ir_node(g, ce);
    c->cur_node = ce; /* the values as the cross-entropy reads them (a resharded copy, if any) */
    ValueId lg = cg_read(c, n->in[0]), tg = cg_read(c, n->in[1]);
    const Value *x = ir_val(g, n->in[0]);
    Shape gs = x->shape, ls = lp->v[lg].local;
    bool seq = gs.rank == 3;
    int dv = gs.rank - 1, dt = seq ? 1 : -1;
    StrBuf r0, t0, v0;
    sb_init(&r0), sb_init(&t0), sb_init(&v0);
    bool split_rows = cg_shard_start(c, n->in[0], 0, &r0);
    if (dt >= 0) cg_shard_start(c, n->in[0], dt, &t0);
    cg_shard_start(c, n->in[0], dv, &v0);
    if (!lp->sharded && ls.d[0] != gs.d[0]) { /* data parallel: the rows of the inputs */
        split_rows = true;
        sb_puts(&r0, "first");
    }
    unsigned rep = 0; /* the mesh axes holding copies */
    for (int a = 0; a < o->mesh_axes; a++) {
        if (o->mesh[a] <= 1) continue;
        bool copies = lp->sharded ? shard_spec_axis_dim(&lp->v[lg].spec, a, NULL) < 0 &&
                                        !((lp->v[lg].spec.partial >> a) & 1u)
                                  : !split_rows || (lp->opt.dp_axes && !((lp->opt.dp_axes >> a) & 1u));
        if (copies) rep |= 1u << a;
    }
    /* 32-bit logits may hold, after the forward, what the cross-entropy wrote
     * over them in place: (softmax - onehot(target)) * scale (lower.c) */
    bool fused = lp->n[ce].ce_grad != IR_NONE && !cg_is_half(x->dtype);
    int64_t R = ls.d[0], T = seq ? ls.d[1] : 1, V = ls.d[dv], GR = gs.d[0], GV = gs.d[dv];
    int64_t ng = ir_shape_numel(gs) / GV;
    c->cur_node = -1;
    size_t esz = cg_is_half(x->dtype) ? 2 : 4;
    sb_printf(m, "    const int64_t R = %lld, T = %lld, V = %lld, GR = %lld, GV = %lld;\n", (long long)R,
              (long long)T, (long long)V, (long long)GR, (long long)GV);
    sb_printf(m, "    int64_t first = 0, count = 0;\n    %s_input_rows(M, &first, &count);\n    (void)count;\n", px);
    sb_printf(m, "    const int64_t r0 = %s, t0 = %s, v0 = %s;\n", split_rows ? sb_cstr(&r0) : "0",
              t0.len ? sb_cstr(&t0) : "0", v0.len ? sb_cstr(&v0) : "0");
    sb_printf(m, "    int writer = 1;\n    for (int a = 0; a < %s_mesh_axes; a++)\n"
                 "        if (((%uu >> a) & 1u) && colrt_mesh_coord(M->mesh, a) != 0) writer = 0;\n", px, rep);
    if (cg_pipelined(c)) /* the last stage computes the logits; the sum over the mesh adds nothing else */
        sb_printf(m, "    if (M->stage != %d) writer = 0;\n", cg_pipe_devices(c) - 1);
    sb_printf(m, "    if (pos < 0 || pos >= %lld) colrt_die(\"%s_logits: position %%lld outside 0..%lld\", (long long)pos);\n",
              (long long)(seq ? gs.d[1] : 1), px, (long long)(seq ? gs.d[1] - 1 : 0));
    sb_printf(m, "    const size_t total = (size_t)%d * (size_t)GR * (size_t)GV;\n", micro);
    sb_puts(m, "    float *host = calloc(total, sizeof(float));\n"
               "    unsigned char *row = malloc((size_t)V * 4);\n"
               "    if (!host || !row) colrt_die(\"out of host memory\");\n"
               "    double l = 0;\n");
    sb_printf(m, "    for (int j = 0; j < %d; j++) {\n"
                 "        %s_feed(M, in, j, 0.0f);\n%s"
                 "        %s_forward_nodes(M);\n"
                 "        l += %s_loss(M);\n"
                 "        if (!writer || pos < t0 || pos >= t0 + T) continue;\n"
                 "        for (int64_t r = 0; r < R; r++) {\n"
                 "            const size_t at = (size_t)((r * T + (pos - t0)) * V);\n"
                 "            colrt_memcpy(row, M->arena.base + %lld + at * %zu, (size_t)V * %zu, COLRT_D2H, NULL);\n",
              micro, px, cg_offloads(c) ? "        colrt_stream_wait(NULL, M->off_up); /* host offload: the parameters back up */\n" : "",
              px, px, (long long)lp->v[lg].offset, esz, esz);
    if (fused)
        sb_printf(m, "            int32_t tgt = 0;\n"
                     "            colrt_memcpy(&tgt, M->arena.base + %lld + (size_t)(r * T + (pos - t0)) * 4, 4, COLRT_D2H, NULL);\n",
                  (long long)lp->v[tg].offset);
    sb_printf(m, "            colrt_device_sync();\n"
                 "            float *dst = host + ((size_t)j * (size_t)GR + (size_t)(r0 + r)) * (size_t)GV + (size_t)v0;\n"
                 "            for (int64_t v = 0; v < V; v++) {\n");
    if (x->dtype == DT_BF16) sb_puts(m, "                float s = cg_bf16_f32(((const uint16_t *)row)[v]);\n");
    else if (x->dtype == DT_F16) sb_puts(m, "                float s = cg_f16_f32(((const uint16_t *)row)[v]);\n");
    else sb_puts(m, "                float s = ((const float *)row)[v];\n");
    if (fused) /* back to probabilities; their log is the logits less the row's log-sum-exp */
        sb_printf(m, "                const float scale = 1.0f / %lld;\n"
                     "                s = logf(fmaxf((s + (v == tgt ? scale : 0.0f)) / scale, 1e-38f));\n",
                  (long long)ng);
    sb_puts(m, "                dst[v] = s;\n            }\n        }\n    }\n");
    sb_puts(m, "    colrt_arena sum = colrt_arena_create(total * sizeof(float));\n"
               "    colrt_memcpy(sum.base, host, total * sizeof(float), COLRT_H2D, NULL);\n");
    sb_printf(m, "    for (int a = 0; a < %s_mesh_axes; a++)\n"
                 "        if (%s_mesh[a] > 1) colrt_all_reduce(M->mesh, a, sum.base, sum.base, total, COLRT_F32, COLRT_SUM, NULL);\n"
                 "    colrt_memcpy(out, sum.base, total * sizeof(float), COLRT_D2H, NULL);\n"
                 "    colrt_device_sync();\n"
                 "    colrt_arena_destroy(&sum);\n"
                 "    free(host);\n"
                 "    free(row);\n"
                 "    return (float)(l / %d);\n",
              px, px, micro);
    sb_free(&r0), sb_free(&t0), sb_free(&v0);
}

void cg_emit_readout(CgCtx *c, StrBuf *h, StrBuf *m, const CgOptions *o, int micro) {
    const Graph *g = c->g;
    const char *px = c->prefix;
    GraphStats st = ir_stats(g);
    NodeId ce = find_cross_entropy(g);
    Shape gs = ce != IR_NONE ? ir_val(g, ir_node(g, ce)->in[0])->shape : (Shape){0};
    bool logits = ce != IR_NONE && (gs.rank == 2 || gs.rank == 3);

    sb_printf(h,
              "/* Read-outs (docs/generated-api.md). MFU = %s_STEP_FLOPS / (step seconds *\n"
              " * ranks * %s_PEAK_FLOPS). */\n"
              "#define %s_STEP_FLOPS ((double)%.17g) /* one training step, all ranks: forward, backward, update, every micro-batch */\n"
              "#define %s_PEAK_FLOPS ((double)%.17g) /* per device, the compute dtype, of the cluster planned for */\n",
              px, px, px, micro * st.total_flops, px, o->peak_flops);
    if (logits)
        sb_printf(h, "#define %s_LOGITS_ROWS %lld /* the global batch, every micro-batch */\n"
                     "#define %s_LOGITS_POSITIONS %lld\n#define %s_LOGITS_CLASSES %lld\n",
                  px, (long long)(micro * gs.d[0]), px, (long long)(gs.rank == 3 ? gs.d[1] : 1), px,
                  (long long)gs.d[gs.rank - 1]);
    sb_printf(h,
              "\ntypedef struct %s_step_info {\n"
              "    float grad_norm;   /* the global gradient norm, before clipping */\n"
              "    float loss_scale;  /* the loss scale the step ran with (1 without dynamic scaling) */\n"
              "    int skipped;       /* the gradients overflowed: the update was skipped */\n"
              "} %s_step_info;\n"
              "/* The last %s_train_step's metrics (zeros before the first). */\n"
              "%s_step_info %s_last_step(const %s *m);\n",
              px, px, px, px, px, px);
    if (logits)
        sb_printf(h,
                  "/* A forward pass on in (collective), then the scores of the next token at\n"
                  " * sequence index pos of every row of the global batch into out\n"
                  " * ([%s_LOGITS_ROWS][%s_LOGITS_CLASSES] floats, the same on every rank): the\n"
                  " * logits, or their log-softmax (the logits less a constant per row) where the\n"
                  " * plan reuses their memory; softmax sampling gives the same either way.\n"
                  " * Returns the loss on in. */\n"
                  "float %s_logits(%s *m, const %s_inputs *in, int64_t pos, float *out);\n",
                  px, px, px, px, px);
    sb_puts(h, "\n");

    sb_printf(m,
              "%s_step_info %s_last_step(const %s *M) {\n"
              "    %s_step_info s = {0, 1, 0};\n"
              "    if (!M->stats.steps) return s;\n"
              "    float v[2] = {0, 1};\n"
              "    colrt_memcpy(v, M->arena.base + %s, sizeof v, COLRT_D2H, NULL);\n"
              "    colrt_device_sync();\n"
              "    if (!(v[1] > 0)) v[1] = 1; /* no optimizer: nothing written */\n"
              "    s.loss_scale = v[1];\n"
              "    s.skipped = !isfinite(v[0]);\n"
              "    s.grad_norm = s.skipped ? NAN : sqrtf(v[0]) / v[1];\n"
              "    return s;\n}\n\n",
              px, px, px, px, cg_scratch(c, CG_SCRATCH_NORM).s);
    if (logits) {
        sb_printf(m, "float %s_logits(%s *M, const %s_inputs *in, int64_t pos, float *out) {\n", px, px, px);
        logits_body(c, m, o, ce, micro);
        sb_puts(m, "}\n\n");
    }
}

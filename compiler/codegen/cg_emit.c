/*
 * cg_emit.c — writes the generated files (see cg.h): the API header, the
 * schedule with its constants (arena offsets, parameter table), and the
 * kernel files, from the emitters of cg_kernels.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autodiff.h"
#include "cg_internal.h"
#include "version.h"

/* ---- kernels: one body, two forms -------------------------------------------- */

static void kernel_params(CgCtx *c, StrBuf *b, int nargs, const KArg *args, bool with_stream, bool off) {
    if (with_stream) sb_puts(b, "colrt_stream *cg_s");
    for (int i = 0; i < nargs; i++) {
        const Value *v = ir_val(c->g, args[i].v);
        const char *t = cg_ctype(v->dtype);
        sb_printf(b, "%s%s%s *a%d", i || with_stream ? ", " : "", args[i].out ? "" : "const ", t, i);
    }
    if (off) sb_puts(b, ", int64_t o0");
}

void cg_kernel(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue,
               const char *body) {
    cg_kernel_off(c, id, nargs, args, n, prologue, body, NULL);
}

void cg_kernel_off(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue,
                   const char *body, const char *off) {
    int k = c->n_kernels++;
    const char *px = c->prefix;
    StrBuf sig;
    sb_init(&sig);
    kernel_params(c, &sig, nargs, args, true, off != NULL);
    const char *what = ir_op(ir_node(c->g, id)->op)->name;
    const char *res = ir_val(c->g, ir_node(c->g, id)->out[0])->name;
    StrBuf bb; /* the body with its operands' types ($T0, $L0(...), $W0(...)) resolved */
    sb_init(&bb);
    cg_body(c, &bb, nargs, args, body);
    body = sb_cstr(&bb);
    sb_printf(&c->proto, "void %s_k%d(%s);\n", px, k, sb_cstr(&sig));

    /* C */
    sb_printf(&c->kc, "/* %s -> %%%s */\nvoid %s_k%d(%s) {\n    (void)cg_s;\n", what, res, px, k, sb_cstr(&sig));
    for (int i = 0; i < nargs; i++) sb_printf(&c->kc, "    (void)a%d;\n", i);
    if (off) sb_puts(&c->kc, "    (void)o0;\n");
    if (*prologue) sb_printf(&c->kc, "    %s", prologue);
    if (n > 4096) sb_puts(&c->kc, "#ifdef _OPENMP\n#pragma omp parallel for schedule(static)\n#endif\n");
    sb_printf(&c->kc, "    for (int64_t i = 0; i < %lld; i++) {\n        %s\n    }\n}\n\n", (long long)n, body);

    /* CUDA: one thread per point, a host launcher with the same signature */
    StrBuf dsig;
    sb_init(&dsig);
    kernel_params(c, &dsig, nargs, args, false, off != NULL);
    sb_printf(&c->kcu, "/* %s -> %%%s */\n__global__ static void %s_k%d_dev(%s) {\n", what, res, px, k,
              sb_cstr(&dsig));
    sb_printf(&c->kcu, "    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "    if (i >= %lld) return;\n",
              (long long)n);
    for (int i = 0; i < nargs; i++) sb_printf(&c->kcu, "    (void)a%d;\n", i);
    if (off) sb_puts(&c->kcu, "    (void)o0;\n");
    if (*prologue) sb_printf(&c->kcu, "    %s", prologue);
    sb_printf(&c->kcu, "    {\n        %s\n    }\n}\nextern \"C\" void %s_k%d(%s) {\n", body, px, k, sb_cstr(&sig));
    sb_printf(&c->kcu, "    %s_k%d_dev<<<%lld, 256, 0, cg_stream(cg_s)>>>(", px, k, (long long)((n + 255) / 256));
    for (int i = 0; i < nargs; i++) sb_printf(&c->kcu, "%sa%d", i ? ", " : "", i);
    if (off) sb_puts(&c->kcu, ", o0");
    sb_puts(&c->kcu, ");\n}\n\n");

    /* the launch */
    sb_printf(c->sched, "    %s_k%d(NULL", px, k);
    for (int i = 0; i < nargs; i++) {
        sb_puts(c->sched, ", ");
        cg_ptr(c, c->sched, args[i].v);
        if (args[i].zshift) sb_printf(c->sched, " + M->zrank * %lld", (long long)args[i].zshift);
    }
    if (off) sb_printf(c->sched, ", (int64_t)(%s)", off);
    sb_puts(c->sched, ");\n");
    sb_free(&sig);
    sb_free(&dsig);
    sb_free(&bb);
}

bool cg_shard_start(CgCtx *c, ValueId v, int d, StrBuf *out) {
    const LowerProgram *lp = c->lp;
    if (!lp->sharded) return false;
    const ShardSpec *s = &lp->v[cg_read(c, v)].spec;
    if (d >= s->rank || !s->n[d]) return false;
    int64_t piece = ir_val(c->g, v)->shape.d[d];
    sb_puts(out, "0");
    for (int k = 0; k < s->n[d]; k++) {
        piece /= lp->opt.mesh->size[s->ax[d][k]];
        sb_printf(out, " + (int64_t)colrt_mesh_coord(M->mesh, %d) * %lld", s->ax[d][k], (long long)piece);
    }
    return true;
}

void cg_ptr(CgCtx *c, StrBuf *b, ValueId v) {
    DType t = v < c->g->n_values ? ir_val(c->g, v)->dtype : DT_F32;
    v = cg_read(c, v);
    sb_printf(b, "%s(%lld)", t == DT_I32 ? "CG_I" : cg_is_half(t) ? "CG_H" : "CG_F", (long long)c->lp->v[v].offset);
}

ValueId cg_read(CgCtx *c, ValueId v) {
    if (c->cur_node >= 0 && c->cur_node < c->g->n_nodes) { /* a ZeRO-3 parameter gathered here */
        const LowerNode *ln = &c->lp->n[c->cur_node];
        const LowerNode *xn = &c->lp->n[c->rc_node >= 0 ? c->rc_node : c->cur_node];
        for (int k = 0; k < xn->n_xin; k++) /* sharded: the copy resharded for this node */
            if (xn->xin_from[k] == v) {
                v = xn->xin_to[k];
                break;
            }
        for (int k = 0; k < ln->n_gather; k++)
            if (ln->gather[k] == v) return ln->gather_to[k];
    }
    const LowerValue *lv = &c->lp->v[v];
    return lv->redirect != IR_NONE && c->cur_node >= lv->redirect_from ? lv->redirect : v;
}

/* ---- helpers ------------------------------------------------------------------ */

static void c_ident(StrBuf *b, const char *name) {
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_'))
        sb_putc(b, '_');
    for (const char *p = name; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        sb_putc(b, ok ? ch : '_');
    }
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static bool write_file(const char *dir, const char *name, const StrBuf *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ir_write_file_atomic(path, b->data, b->len) != 0) {
        diag_plain("check that the output directory exists and is writable", "cannot write '%s': %s",
                   path, strerror(errno));
        return false;
    }
    return true;
}

static void header_comment(StrBuf *b, const char *file, const char *what, const CgOptions *o,
                           const char *px) {
    sb_printf(b,
              "/*\n * %s — %s\n *\n * Generated by colossal-compile " COLOSSAL_VERSION " from %s\n"
              " * (model %s; plan: %s). Do not edit: regenerate instead.\n */\n",
              file, what, o->source ? o->source : "(unknown)", px, o->plan_desc ? o->plan_desc : "single device");
}

/* ---- the files -------------------------------------------------------------------- */

/* Micro-batches per step: from the gradient accumulation's weight. */
static int micro_batches(const Graph *g) {
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->op == OP_GRAD_ACCUM && ir_node(g, id)->attr[0].f > 0)
            return (int)(1 / ir_node(g, id)->attr[0].f + 0.5);
    return 1;
}

static void emit_header(StrBuf *h, const Graph *g, const LowerProgram *lp, const CgOptions *o,
                        const char *px) {
    char fname[256];
    snprintf(fname, sizeof fname, "%s.h", px);
    header_comment(h, fname, "the API of the generated training program (docs/generated-api.md).", o, px);
    sb_printf(h, "#ifndef %s_GENERATED_H\n#define %s_GENERATED_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
                 "#include \"colossal/colrt.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
              px, px);
    sb_printf(h, "typedef struct %s %s;\n\n", px, px);
    sb_printf(h, "/* mesh: NULL to let %s_create make the planned mesh (", px);
    int world = 1;
    for (int a = 0; a < o->mesh_axes; a++) sb_printf(h, "%s%d", a ? "x" : "", o->mesh[a]), world *= o->mesh[a];
    sb_printf(h, ", %d rank%s).\n * seed: parameters are a function of (seed, parameter name, global element index). */\n"
                 "typedef struct %s_config {\n    colrt_mesh *mesh;\n    uint64_t seed;\n} %s_config;\n\n",
              world, world == 1 ? "" : "s", px, px);
    int micro = micro_batches(g);
    sb_printf(h, "/* Micro-batches per step (gradient accumulation). */\n#define %s_MICRO_BATCHES %d\n\n", px, micro);
    sb_printf(h, "/* One step's inputs: for each micro-batch in turn, this rank's rows of it\n"
                 " * (%s_input_rows); the shapes below are one micro-batch's. */\n"
                 "typedef struct %s_inputs {\n", px, px);
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if (x->role != ROLE_INPUT) continue;
        sb_printf(h, "    const %s *", x->dtype == DT_I32 ? "int32_t" : "float");
        c_ident(h, x->name);
        sb_puts(h, "; /* local ");
        ir_shape_print(h, lp->v[v].local);
        sb_puts(h, " of ");
        ir_shape_print(h, x->shape);
        sb_puts(h, " */\n");
    }
    sb_printf(h, "} %s_inputs;\n\n", px);
    sb_puts(h, "/* Each input's local size: rows of the leading dim, elements. */\n");
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if (x->role != ROLE_INPUT) continue;
        Shape ls = lp->v[v].local;
        sb_printf(h, "#define %s_", px);
        c_ident(h, x->name);
        sb_printf(h, "_ROWS %lld\n#define %s_", (long long)(ls.rank ? ls.d[0] : 1), px);
        c_ident(h, x->name);
        sb_printf(h, "_ELEMS %lld\n", (long long)ir_shape_numel(ls));
    }
    sb_puts(h, "\n");
    sb_printf(h,
              "typedef struct %s_statistics {\n"
              "    size_t arena_bytes;        /* the static memory plan's arena */\n"
              "    size_t lower_bound_bytes;  /* most bytes live at one point of the schedule */\n"
              "    int64_t steps;             /* training steps run */\n"
              "    double last_step_s, total_step_s;\n"
              "} %s_statistics;\n\n",
              px, px);
    sb_printf(h,
              "/* Allocates the arena and initializes the parameters; collective. 0 on success. */\n"
              "int %s_create(const %s_config *cfg, %s **out);\n"
              "/* One training step (forward, backward, gradient sync, update) on this rank's\n"
              " * inputs; lr: the learning rate. Returns the global batch's mean loss. */\n"
              "float %s_train_step(%s *m, const %s_inputs *in, float lr);\n"
              "/* The forward pass only: returns the loss. */\n"
              "float %s_forward(%s *m, const %s_inputs *in);\n"
              "/* Sharded safetensors checkpoints of the parameters and optimizer state\n"
              " * (colrt); collective. load returns 0 or -1 (colrt_checkpoint_error()). */\n"
              "void %s_save(%s *m, const char *dir);\n"
              "int %s_load(%s *m, const char *dir);\n"
              "%s_statistics %s_stats(const %s *m);\n"
              "void %s_destroy(%s *m);\n\n"
              "/* This rank's rows of the leading (batch) dim of every input: [first, first+count). */\n"
              "void %s_input_rows(const %s *m, int64_t *first, int64_t *count);\n"
              "/* The parameters as this rank holds them (name, shapes, offset, data); returns\n"
              " * the count, fills at most cap. */\n"
              "int %s_params(%s *m, colrt_tensor *out, int cap);\n\n",
              px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px);
}

typedef struct Leaf {
    ValueId v;
} Leaf;

/* ZeRO collectives over the world's slices in rank order: over the one busy
 * mesh axis, or over two (rank = c0 * s1 + c1) in two steps through tmp:
 * reduce-scatter outer then inner, all-gather inner then outer. */
static void zero_axes(const CgOptions *o, int *outer, int *inner) {
    *outer = *inner = -1;
    for (int a = 0; a < o->mesh_axes; a++)
        if (o->mesh[a] > 1) {
            if (*inner >= 0) *outer = *inner;
            *inner = a;
        }
}

/* One ZeRO collective (all-gather when gather, else reduce-scatter) of
 * chunk-element slices, over the one busy axis or in two steps through tmp. */
static void emit_zero_coll(CgCtx *c, const CgOptions *o, bool gather, ValueId src, ValueId dst, ValueId tmp,
                           int64_t chunk, const char *what) {
    int outer, inner;
    zero_axes(o, &outer, &inner);
    const LowerProgram *lp = c->lp;
    const char *dt = cg_colrt_dtype(ir_val(c->g, src)->dtype);
    const char *fn = gather ? "all_gather" : "reduce_scatter", *op = gather ? "" : ", COLRT_SUM";
    if (outer < 0 || tmp == IR_NONE) {
        sb_printf(c->sched, "    colrt_%s(M->mesh, %d, CG_F(%lld), CG_F(%lld), %lld, %s%s, NULL); /* %s */\n", fn,
                  inner < 0 ? 0 : inner, (long long)lp->v[src].offset, (long long)lp->v[dst].offset, (long long)chunk,
                  dt, op, what);
        return;
    }
    /* reduce-scatter: outer axis, then inner; all-gather: inner, then outer */
    int first = gather ? inner : outer, second = gather ? outer : inner;
    int64_t n1 = gather ? chunk : chunk * o->mesh[inner], n2 = gather ? chunk * o->mesh[inner] : chunk;
    sb_printf(c->sched, "    colrt_%s(M->mesh, %d, CG_F(%lld), CG_F(%lld), %lld, %s%s, NULL); /* %s, %s axis */\n", fn,
              first, (long long)lp->v[src].offset, (long long)lp->v[tmp].offset, (long long)n1, dt, op, what,
              gather ? "inner" : "outer");
    sb_printf(c->sched, "    colrt_%s(M->mesh, %d, CG_F(%lld), CG_F(%lld), %lld, %s%s, NULL); /* %s axis */\n", fn,
              second, (long long)lp->v[tmp].offset, (long long)lp->v[dst].offset, (long long)n2, dt, op,
              gather ? "outer" : "inner");
}

/* Whether the batch's partial sums are all-reduced over mesh axis a: every
 * non-trivial axis, or the plan's data-parallel axes only (lower.h dp_axes). */
static bool reduces_over(const LowerProgram *lp, const CgOptions *o, int a) {
    if (lp->sharded) return (lp->out_axes >> a) & 1u; /* the loss's pending axes */
    return o->mesh[a] > 1 && (!lp->opt.dp_axes || (lp->opt.dp_axes & (1u << a)));
}

/* Gradient bucket k (lower.h): its gradients packed into its buffer on
 * the compute stream, then all-reduced on the communication stream once the
 * packing is done; the update waits for `done` (emit_schedule). The previous
 * step's (or micro-batch's) all-reduce of the same buffer is waited for
 * first. */
static void emit_bucket(CgCtx *c, const CgOptions *o, int k) {
    const LowerProgram *lp = c->lp;
    const LowerBucket *bk = &lp->buckets[k];
    DType dt = ir_val(c->g, bk->grad[0])->dtype;
    bool accum = ir_node(c->g, bk->launch)->op == OP_GRAD_ACCUM; /* after the last micro-batch only */
    sb_printf(c->sched, "    /* gradient bucket %d: %d gradients, %lld bytes%s */\n", k, bk->n,
              (long long)lp->v[bk->buf].bytes, accum ? ", once the last micro-batch is accumulated" : "");
    if (accum) sb_puts(c->sched, "    if (M->last_micro) {\n");
    sb_printf(c->sched, "    colrt_stream_wait(NULL, M->bucket_done[%d]);\n", k);
    for (int q = 0; q < bk->n; q++)
        sb_printf(c->sched, "    colrt_memcpy(M->arena.base + %lld, M->arena.base + %lld, %lld, COLRT_D2D, NULL); /* %%%s */\n",
                  (long long)lp->v[bk->view[q]].offset, (long long)lp->v[bk->grad[q]].offset,
                  (long long)lp->v[bk->grad[q]].bytes, ir_val(c->g, bk->grad[q])->name);
    sb_printf(c->sched, "    colrt_event_record(M->bucket_ready[%d], NULL);\n    colrt_stream_wait(M->comm, M->bucket_ready[%d]);\n", k, k);
    for (int a = 0; a < o->mesh_axes; a++)
        if (reduces_over(lp, o, a))
            sb_printf(c->sched, "    colrt_all_reduce(M->mesh, %d, M->arena.base + %lld, M->arena.base + %lld, %lld, %s, COLRT_SUM, M->comm);\n",
                      a, (long long)lp->v[bk->buf].offset, (long long)lp->v[bk->buf].offset, (long long)bk->elems,
                      cg_colrt_dtype(dt));
    sb_printf(c->sched, "    colrt_event_record(M->bucket_done[%d], M->comm);\n", k);
    if (accum) sb_puts(c->sched, "    }\n");
}

/* Copies into the leaves they update, for results of nodes [first, last)
 * not already written in place. */
static void emit_commits(CgCtx *c, StrBuf *m, int first, int last) {
    const Graph *g = c->g;
    const LowerProgram *lp = c->lp;
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if (x->updates == IR_NONE || x->def < first || x->def >= last) continue;
        ValueId src = lp->v[v].commit_from > 0 && lp->v[v].commit_from != IR_NONE ? lp->v[v].commit_from : v;
        if (lp->v[src].offset == lp->v[x->updates].offset) continue;
        if (lp->n[x->def].zero && x->def_out == 0) continue; /* all-gathered above */
        sb_printf(m, "    colrt_memcpy(");
        cg_ptr(c, m, x->updates);
        sb_puts(m, ", ");
        cg_ptr(c, m, src);
        sb_printf(m, ", %lld, COLRT_D2D, NULL); /* %%%s <- %%%s */\n", (long long)lp->v[src].bytes,
                  ir_val(g, x->updates)->name, x->name);
    }
}

/* The schedule in three functions: forward [0, fwd_end), backward (and
 * gradient accumulation) [fwd_end, step_begin), once per micro-batch, and
 * the norm and update [step_begin, n) once per step. */
static bool emit_schedule(CgCtx *c, StrBuf *m, const CgOptions *o, int *fwd_end, int *step_begin) {
    const Graph *g = c->g;
    const LowerProgram *lp = c->lp;
    const char *px = c->prefix;
    int nn = g->n_nodes;
    *fwd_end = nn;
    for (NodeId id = 0; id < nn; id++)
        if (ir_val(g, ir_node(g, id)->out[0])->role != ROLE_ACT) { *fwd_end = id; break; }
    *step_begin = ad_step_begin(g);
    if (*step_begin < *fwd_end) *step_begin = *fwd_end;
    StrBuf parts[3];
    for (int p = 0; p < 3; p++) sb_init(&parts[p]); /* all three: an error frees them all */
    for (int p = 0; p < 3; p++) {
        c->sched = &parts[p];
        int first = p == 0 ? 0 : p == 1 ? *fwd_end : *step_begin;
        int last = p == 0 ? *fwd_end : p == 1 ? *step_begin : nn;
        if (p == 2 && lp->n_buckets) { /* the update reads the buckets */
            sb_puts(c->sched, "    /* the gradient buckets' all-reduces */\n");
            for (int k = 0; k < lp->n_buckets; k++)
                sb_printf(c->sched, "    colrt_stream_wait(NULL, M->bucket_done[%d]);\n", k);
        }
        for (NodeId id = first; id < last; id++) {
            const Node *n = ir_node(g, id);
            const LowerNode *ln = &lp->n[id];
            for (int k = 0; k < ln->n_reduce; k++) {
                ValueId v = ln->reduce[k];
                for (int a = 0; a < o->mesh_axes; a++) {
                    if (!reduces_over(lp, o, a)) continue;
                    sb_printf(c->sched, "    colrt_all_reduce(M->mesh, %d, ", a);
                    cg_ptr(c, c->sched, v);
                    sb_puts(c->sched, ", ");
                    cg_ptr(c, c->sched, v);
                    sb_printf(c->sched, ", %lld, %s, COLRT_SUM, NULL); /* %%%s */\n",
                              (long long)ir_shape_numel(lp->v[v].local), cg_colrt_dtype(ir_val(g, v)->dtype), ir_val(g, v)->name);
                }
            }
            c->cur_node = id;
            for (int k = 0; k < ln->n_rs; k++) { /* ZeRO-2: each rank gets its slice's sum */
                char what[300];
                snprintf(what, sizeof what, "%%%s -> %s", ir_val(g, ln->rs[k])->name, lp->v[ln->rs_to[k]].name);
                emit_zero_coll(c, o, false, ln->rs[k], ln->rs_to[k], ln->rs_tmp[k], lp->v[ln->rs_to[k]].zchunk, what);
            }
            for (int k = 0; k < ln->n_gather; k++) { /* ZeRO-3: the whole parameter, for this node */
                char what[300];
                snprintf(what, sizeof what, "%%%s -> %s", ir_val(g, ln->gather[k])->name, lp->v[ln->gather_to[k]].name);
                emit_zero_coll(c, o, true, ln->gather[k], ln->gather_to[k], ln->gather_tmp[k], lp->v[ln->gather[k]].zchunk, what);
            }
            if (ln->n_recompute)
                sb_printf(c->sched, "    /* recompute: block %s[%d]'s forward again, into fresh buffers */\n",
                          g->blocks[n->block].name, n->instance);
            for (int k = 0; k < ln->n_recompute; k++) {
                const Node *f = ir_node(g, ln->recompute[k]);
                c->rc_node = ln->recompute[k];
                cg_emit_reshards(c, o, ln->recompute[k], false);
                sb_printf(c->sched, "    /* %%%s = %s (recomputed) */\n", ir_val(g, f->out[0])->name, ir_op(f->op)->name);
                bool ok_rc = cg_emit_node(c, ln->recompute[k]);
                c->rc_node = -1;
                if (!ok_rc) {
                    for (int q = 0; q < 3; q++) sb_free(&parts[q]);
                    return false;
                }
            }
            cg_emit_reshards(c, o, id, false); /* after the recomputes: it may read recomputed values */
            sb_printf(c->sched, "    /* %%%s = %s */\n", ir_val(g, n->out[0])->name, ir_op(n->op)->name);
            if (!cg_emit_node(c, id)) {
                for (int q = 0; q < 3; q++) sb_free(&parts[q]);
                return false;
            }
            if (ln->zero && !lp->v[n->in[0]].zchunk) { /* the updated slices make the whole parameter again */
                char what[300];
                snprintf(what, sizeof what, "%%%s <- %%%s", ir_val(g, n->in[0])->name, ir_val(g, n->out[0])->name);
                emit_zero_coll(c, o, true, n->out[0], n->in[0], ln->ag_tmp, ln->zchunk, what);
            }
            cg_emit_reshards(c, o, id, true);
            for (int k = 0; k < lp->n_buckets; k++)
                if (lp->buckets[k].launch == id) emit_bucket(c, o, k);
            for (int k = 0; k < lp->n_out_reduce; k++) { /* a partial loss: sum it now */
                ValueId v = lp->out_reduce[k];
                if (ir_val(g, v)->def != id) continue;
                for (int a = 0; a < o->mesh_axes; a++) {
                    if (!reduces_over(lp, o, a)) continue;
                    sb_printf(c->sched, "    colrt_all_reduce(M->mesh, %d, ", a);
                    cg_ptr(c, c->sched, v);
                    sb_puts(c->sched, ", ");
                    cg_ptr(c, c->sched, v);
                    sb_printf(c->sched, ", %lld, %s, COLRT_SUM, NULL); /* %%%s */\n",
                              (long long)ir_shape_numel(lp->v[v].local), cg_colrt_dtype(ir_val(g, v)->dtype), ir_val(g, v)->name);
                }
            }
        }
    }
    c->cur_node = -1; /* outside the schedule: values as stored */
    sb_printf(m, "static void %s_forward_nodes(%s *M) {\n%s}\n\n", px, px, sb_cstr(&parts[0]));
    sb_printf(m, "static void %s_backward_nodes(%s *M) {\n%s", px, px, sb_cstr(&parts[1]));
    emit_commits(c, m, 0, *step_begin);
    sb_puts(m, "}\n\n");
    sb_printf(m, "static void %s_update_nodes(%s *M) {\n%s", px, px, sb_cstr(&parts[2]));
    emit_commits(c, m, *step_begin, nn);
    sb_puts(m, "}\n\n");
    for (int q = 0; q < 3; q++) sb_free(&parts[q]);
    return true;
}

static void emit_main(CgCtx *c, StrBuf *m, const CgOptions *o, const char *schedule, int64_t arena) {
    const Graph *g = c->g;
    const LowerProgram *lp = c->lp;
    const char *px = c->prefix;
    char fname[256];
    snprintf(fname, sizeof fname, "%s.c", px);
    header_comment(m, fname, "the schedule: kernels and collectives in order, arena offsets as constants.",
                   o, px);
    sb_printf(m, "#define _POSIX_C_SOURCE 200809L\n#include \"%s.h\"\n\n#include <math.h>\n#include <stdio.h>\n"
                 "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n", px);
    sb_printf(m, "#define CG_F(off) ((float *)(M->arena.base + (size_t)(off)))\n"
                 "#define CG_I(off) ((int32_t *)(M->arena.base + (size_t)(off)))\n"
                 "#define CG_H(off) ((uint16_t *)(M->arena.base + (size_t)(off))) /* bf16, f16 */\n"
                 "#define %s_ARENA_BYTES ((size_t)%lld)\n#define %s_LOWER_BOUND_BYTES ((size_t)%lld)\n"
                 "#define %s_STEP_OFF ((size_t)%lld) /* scratch: the step count for checkpoints */\n\n",
              px, (long long)arena, px, (long long)lp->lower_bound_bytes, px, (long long)(c->scratch_off + 128));
    bool half = cg_graph_has_half(g); /* mixed precision: leaves and inputs are converted on the host */
    if (half) cg_half_helpers(m, NULL, false); /* C: unused static inline is fine */
    sb_printf(m, "/* kernels (%s_kernels.c / %s_kernels.cu) */\n%s\n", px, px, sb_cstr(&c->proto));
    sb_printf(m, "struct %s {\n    colrt_arena arena;\n    colrt_mesh *mesh;\n    int own_mesh;\n"
                 "    uint64_t seed;\n    int64_t step;\n    int64_t zrank; /* this rank's slice index (ZeRO) */\n    %s_statistics stats;\n"
                 "    colrt_stream *comm; /* gradient buckets: their all-reduces */\n"
                 "    int last_micro; /* the step's last micro-batch is running */\n"
                 "    colrt_event *bucket_ready[%d], *bucket_done[%d];\n};\n\n",
              px, px, lp->n_buckets ? lp->n_buckets : 1, lp->n_buckets ? lp->n_buckets : 1);
    sb_printf(m, "static const int %s_mesh_axes = %d;\nstatic const int %s_mesh[%d] = {", px, o->mesh_axes,
              px, o->mesh_axes);
    for (int a = 0; a < o->mesh_axes; a++) sb_printf(m, "%s%d", a ? ", " : "", o->mesh[a]);
    sb_puts(m, "};\n\n");

    /* the leaves: parameters and optimizer state */
    sb_printf(m, "typedef struct %s_leaf {\n    const char *name;\n    int param;\n    size_t off;\n    int ndim;\n"
                 "    int64_t global[8], local[8];\n    int sliced; /* ZeRO: a 1/ranks slice of the flattened tensor, at rank * local[0] */\n"
                 "    int nax[8], ax[8][3]; /* tensor parallel: the mesh axes splitting each dim, outermost first */\n"
                 "    unsigned rep; /* the mesh axes holding copies: saved where their coordinates are 0 */\n"
                 "    int init; /* 0 zeros, 1 ones, 2 normal(a), 3 uniform[a,b) */\n"
                 "    double a, b;\n    uint64_t key;\n    colrt_dtype dtype;\n} %s_leaf;\n\n", px, px);
    sb_printf(m, "static const %s_leaf %s_leaves[] = {\n", px, px);
    int n_leaves = 0;
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        /* a hyper-parameter the graph updates (the dynamic loss scale) is state too */
        bool updated = false;
        for (ValueId w = 0; w < g->n_values && x->role == ROLE_HYPER; w++) updated |= ir_val(g, w)->updates == v;
        if (x->role != ROLE_PARAM && x->role != ROLE_STATE && !updated) continue;
        n_leaves++;
        /* an f32 master starts as its parameter's values (the parameter is the master rounded) */
        ValueId of = x->role == ROLE_STATE ? cg_master_of(g, v) : IR_NONE;
        Init in = updated ? (Init){INIT_UNIFORM, CG_INITIAL_LOSS_SCALE, CG_INITIAL_LOSS_SCALE} : x->init;
        Shape gs = x->shape, ls = lp->v[v].local;
        bool sliced = lp->v[v].zchunk > 0;
        if (sliced) {
            int64_t ne = ir_shape_numel(gs);
            gs = ir_shape(1, &ne);
        }
        int init = in.kind == INIT_ONES ? 1 : in.kind == INIT_NORMAL ? 2 : in.kind == INIT_UNIFORM ? 3 : 0;
        sb_printf(m, "    {\"%s\", %d, %lld, %d, {", x->name, x->role == ROLE_PARAM || of != IR_NONE, (long long)lp->v[v].offset,
                  gs.rank);
        for (int d = 0; d < gs.rank; d++) sb_printf(m, "%s%lld", d ? ", " : "", (long long)gs.d[d]);
        sb_puts(m, "}, {");
        for (int d = 0; d < ls.rank; d++) sb_printf(m, "%s%lld", d ? ", " : "", (long long)ls.d[d]);
        sb_printf(m, "}, %d, {", sliced);
        const ShardSpec *sp = &lp->v[v].spec;
        bool tp = lp->sharded;
        for (int d = 0; d < gs.rank; d++) sb_printf(m, "%s%d", d ? ", " : "", tp ? sp->n[d] : 0);
        sb_puts(m, "}, {");
        for (int d = 0; d < gs.rank; d++) {
            sb_printf(m, "%s{", d ? ", " : "");
            for (int k = 0; tp && k < sp->n[d]; k++) sb_printf(m, "%s%d", k ? ", " : "", sp->ax[d][k]);
            sb_puts(m, tp && sp->n[d] ? "}" : "0}");
        }
        unsigned rep = 0; /* ZeRO slices: every rank holds its own */
        for (int a = 0; !sliced && a < o->mesh_axes; a++)
            if (!tp || shard_spec_axis_dim(sp, a, NULL) < 0) rep |= 1u << a;
        sb_printf(m, "}, %uu, %d, %.17g, %.17g, 0x%016llxull, %s},\n", rep, init, in.a, in.b,
                  (unsigned long long)fnv1a(ir_val(g, of != IR_NONE ? of : v)->name), cg_colrt_dtype(x->dtype));
    }
    if (!n_leaves) sb_puts(m, "    {0},\n");
    sb_printf(m, "};\nstatic const int %s_n_leaves = %d;\n\n", px, n_leaves);

    sb_printf(m,
              "/* Counter-based generator: a value per (seed, tensor, element, k), so every\n"
              " * rank's shard holds the single-device values whatever the plan. */\n"
              "static uint64_t %s_mix(uint64_t z) {\n"
              "    z += 0x9e3779b97f4a7c15ull;\n"
              "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
              "    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
              "    return z ^ (z >> 31);\n}\n"
              "static double %s_unit(uint64_t seed, uint64_t key, uint64_t idx, uint64_t k) {\n"
              "    uint64_t h = %s_mix(seed ^ %s_mix(key ^ %s_mix(2 * idx + k)));\n"
              "    return ((double)(h >> 11) + 0.5) / 9007199254740992.0;\n}\n\n",
              px, px, px, px, px);
    sb_printf(m,
              "/* Where this rank's shard starts in each dim of the global tensor. */\n"
              "static void %s_leaf_start(const %s *M, const %s_leaf *l, int64_t *start) {\n"
              "    for (int d = 0; d < l->ndim; d++) {\n"
              "        int64_t piece = l->global[d], s = 0;\n"
              "        for (int k = 0; k < l->nax[d]; k++) {\n"
              "            piece /= colrt_mesh_size(M->mesh, l->ax[d][k]);\n"
              "            s += colrt_mesh_coord(M->mesh, l->ax[d][k]) * piece;\n"
              "        }\n"
              "        start[d] = s;\n"
              "    }\n"
              "    if (l->sliced) start[0] = M->zrank * l->local[0];\n"
              "}\n\n"
              "/* Whether this rank writes the leaf to checkpoints (one copy of each shard). */\n"
              "static int %s_leaf_writer(const %s *M, const %s_leaf *l) {\n"
              "    for (int a = 0; a < colrt_mesh_naxes(M->mesh); a++)\n"
              "        if (((l->rep >> a) & 1u) && colrt_mesh_coord(M->mesh, a) != 0) return 0;\n"
              "    return 1;\n"
              "}\n\n"
              "static void %s_init_leaf(%s *M, const %s_leaf *l) {\n"
              "    int64_t start[8] = {0};\n"
              "    %s_leaf_start(M, l, start);\n"
              "    int64_t n = 1;\n"
              "    for (int d = 0; d < l->ndim; d++) n *= l->local[d];\n"
              "    float *host = malloc(sizeof(float) * (size_t)(n ? n : 1));\n"
              "    if (!host) colrt_die(\"out of host memory initializing %%s\", l->name);\n"
              "    for (int64_t i = 0; i < n; i++) {\n"
              "        int64_t r = i, gi = 0, gs = 1;\n"
              "        for (int d = l->ndim - 1; d >= 0; d--) {\n"
              "            gi += (start[d] + r %% l->local[d]) * gs;\n"
              "            r /= l->local[d];\n"
              "            gs *= l->global[d];\n"
              "        }\n"
              "        double x = 0;\n"
              "        if (l->init == 1) x = 1;\n"
              "        else if (l->init == 2) {\n"
              "            double u1 = %s_unit(M->seed, l->key, (uint64_t)gi, 0), u2 = %s_unit(M->seed, l->key, (uint64_t)gi, 1);\n"
              "            x = l->a * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);\n"
              "        } else if (l->init == 3) {\n"
              "            x = l->a + (l->b - l->a) * %s_unit(M->seed, l->key, (uint64_t)gi, 0);\n"
              "        }\n"
              "        host[i] = (float)x;\n"
              "    }\n%s"
              "    colrt_memcpy(M->arena.base + l->off, host, colrt_dtype_size(l->dtype) * (size_t)n, COLRT_H2D, NULL);\n"
              "    free(host);\n}\n\n",
              px, px, px, px, px, px, px, px, px, px, px, px, px,
              !half ? ""
                    : "    uint16_t *h16 = (uint16_t *)host; /* bf16, f16: narrowed in place, front to back */\n"
                      "    if (l->dtype == COLRT_BF16) for (int64_t i = 0; i < n; i++) h16[i] = cg_f32_bf16(host[i]);\n"
                      "    if (l->dtype == COLRT_F16) for (int64_t i = 0; i < n; i++) h16[i] = cg_f32_f16(host[i]);\n");
    sb_puts(m, schedule);

    /* inputs, hypers */
    /* micro-batch j's inputs: the j-th block of this rank's inputs */
    sb_printf(m, "static void %s_feed(%s *M, const %s_inputs *in, int j, float lr) {\n    (void)j;\n", px, px, px);
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if (x->role == ROLE_INPUT && cg_is_half(x->dtype)) { /* the API's floats, rounded to the compute dtype */
            sb_printf(m, "    {\n        const float *src = in->");
            c_ident(m, x->name);
            sb_printf(m, " + (size_t)j * %lld;\n"
                         "        uint16_t *h = malloc(2 * (size_t)%lld + 2);\n"
                         "        if (!h) colrt_die(\"out of host memory feeding %s\");\n"
                         "        for (int64_t e = 0; e < %lld; e++) h[e] = %s(src[e]);\n"
                         "        colrt_memcpy(",
                      (long long)ir_shape_numel(lp->v[v].local), (long long)ir_shape_numel(lp->v[v].local), x->name,
                      (long long)ir_shape_numel(lp->v[v].local), x->dtype == DT_BF16 ? "cg_f32_bf16" : "cg_f32_f16");
            cg_ptr(c, m, v);
            sb_printf(m, ", h, %lld, COLRT_H2D, NULL);\n        colrt_device_sync();\n        free(h);\n    }\n",
                      (long long)lp->v[v].bytes);
        } else if (x->role == ROLE_INPUT) {
            sb_puts(m, "    colrt_memcpy(");
            cg_ptr(c, m, v);
            sb_puts(m, ", in->");
            c_ident(m, x->name);
            sb_printf(m, " + (size_t)j * %lld, %lld, COLRT_H2D, NULL);\n", (long long)ir_shape_numel(lp->v[v].local),
                      (long long)lp->v[v].bytes);
        } else if (x->role == ROLE_HYPER) {
            const char *val = !strcmp(x->name, "lr") ? "lr" : !strcmp(x->name, "step") ? "(float)M->step" : NULL;
            if (!val && !strcmp(x->name, "loss_scale")) {
                /* fed 1 unless the graph updates it (dynamic loss scaling) */
                bool updated = false;
                for (ValueId w = 0; w < g->n_values; w++) updated |= ir_val(g, w)->updates == v;
                if (updated) continue;
                val = "1.0f";
            }
            if (!val) val = "0.0f";
            sb_printf(m, "    { float h = %s; colrt_memcpy(", val);
            cg_ptr(c, m, v);
            sb_printf(m, ", &h, 4, COLRT_H2D, NULL); } /* %%%s */\n", x->name);
        }
    }
    sb_puts(m, "    (void)lr;\n}\n\n");
    ValueId loss = g->n_outputs ? g->outputs[0] : IR_NONE;
    sb_printf(m, "static float %s_loss(%s *M) {\n    float l = 0;\n", px, px);
    if (loss != IR_NONE) {
        sb_puts(m, "    colrt_memcpy(&l, ");
        cg_ptr(c, m, loss);
        sb_puts(m, ", 4, COLRT_D2H, NULL);\n");
    }
    sb_puts(m, "    colrt_device_sync();\n    return l;\n}\n\n");

    sb_printf(m,
              "static double %s_now(void) {\n    struct timespec t;\n    clock_gettime(CLOCK_MONOTONIC, &t);\n"
              "    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;\n}\n\n",
              px);
    sb_printf(m,
              "int %s_create(const %s_config *cfg, %s **out) {\n"
              "    %s *M = calloc(1, sizeof *M);\n"
              "    if (!M) return -1;\n"
              "    M->seed = cfg ? cfg->seed : 0;\n"
              "    M->mesh = cfg ? cfg->mesh : NULL;\n"
              "    if (!M->mesh) {\n"
              "        int world = 1;\n"
              "        for (int a = 0; a < %s_mesh_axes; a++) world *= %s_mesh[a];\n"
              "        if (colrt_world() != world)\n"
              "            colrt_die(\"%s was planned for %%d ranks; this job has %%d\", world, colrt_world());\n"
              "        M->mesh = colrt_mesh_create(%s_mesh_axes, %s_mesh);\n"
              "        M->own_mesh = 1;\n"
              "    }\n"
              "    M->zrank = colrt_rank();\n"
              "    if (%d) M->comm = colrt_stream_create();\n"
              "    for (int k = 0; k < %d; k++) { /* recorded once: complete before the first launch */\n"
              "        M->bucket_ready[k] = colrt_event_create();\n"
              "        M->bucket_done[k] = colrt_event_create();\n"
              "        colrt_event_record(M->bucket_done[k], NULL);\n"
              "    }\n"
              "    M->arena = colrt_arena_create(%s_ARENA_BYTES);\n"
              "    for (int i = 0; i < %s_n_leaves; i++) %s_init_leaf(M, &%s_leaves[i]);\n"
              "    M->stats.arena_bytes = %s_ARENA_BYTES;\n"
              "    M->stats.lower_bound_bytes = %s_LOWER_BOUND_BYTES;\n"
              "    colrt_device_sync();\n"
              "    *out = M;\n"
              "    return 0;\n}\n\n",
              px, px, px, px, px, px, px, px, px, lp->n_buckets, lp->n_buckets, px, px, px, px, px, px);
    /* gradient accumulators, cleared after each step's update */
    sb_printf(m, "static void %s_clear_accumulators(%s *M) {\n    (void)M;\n", px, px);
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_GRAD_ACCUM) continue;
        sb_puts(m, "    colrt_memset0(");
        cg_ptr(c, m, n->in[0]);
        sb_printf(m, ", %lld, NULL); /* %%%s */\n", (long long)lp->v[n->in[0]].bytes, ir_val(g, n->in[0])->name);
    }
    sb_puts(m, "}\n\n");
    sb_printf(m,
              "float %s_train_step(%s *M, const %s_inputs *in, float lr) {\n"
              "    double t0 = %s_now(), l = 0;\n"
              "    M->step++;\n"
              "    for (int j = 0; j < %s_MICRO_BATCHES; j++) {\n"
              "        M->last_micro = j == %s_MICRO_BATCHES - 1;\n"
              "        %s_feed(M, in, j, lr);\n"
              "        %s_forward_nodes(M);\n"
              "        l += %s_loss(M);\n"
              "        %s_backward_nodes(M);\n"
              "    }\n"
              "    %s_update_nodes(M);\n"
              "    if (%s_MICRO_BATCHES > 1) %s_clear_accumulators(M);\n"
              "    colrt_device_sync();\n"
              "    M->stats.last_step_s = %s_now() - t0;\n"
              "    M->stats.total_step_s += M->stats.last_step_s;\n"
              "    M->stats.steps++;\n"
              "    return (float)(l / %s_MICRO_BATCHES);\n}\n\n",
              px, px, px, px, px, px, px, px, px, px, px, px, px, px, px);
    sb_printf(m,
              "float %s_forward(%s *M, const %s_inputs *in) {\n"
              "    double l = 0;\n"
              "    for (int j = 0; j < %s_MICRO_BATCHES; j++) {\n"
              "        %s_feed(M, in, j, 0.0f);\n"
              "        %s_forward_nodes(M);\n"
              "        l += %s_loss(M);\n"
              "    }\n"
              "    return (float)(l / %s_MICRO_BATCHES);\n}\n\n",
              px, px, px, px, px, px, px, px);
    sb_printf(m,
              "static int %s_tensors(%s *M, colrt_tensor *t, int params_only, int writers_only) {\n"
              "    int n = 0;\n"
              "    for (int i = 0; i < %s_n_leaves; i++) {\n"
              "        const %s_leaf *l = &%s_leaves[i];\n"
              "        if ((params_only && !l->param) || (writers_only && !%s_leaf_writer(M, l))) continue;\n"
              "        int64_t start[8] = {0};\n"
              "        %s_leaf_start(M, l, start);\n"
              "        colrt_tensor x = {0};\n"
              "        x.name = l->name;\n"
              "        x.dtype = l->dtype;\n"
              "        x.ndim = l->ndim;\n"
              "        for (int d = 0; d < l->ndim; d++) {\n"
              "            x.global_shape[d] = l->global[d];\n"
              "            x.shape[d] = l->local[d];\n"
              "            x.offset[d] = start[d];\n"
              "        }\n"
              "        x.data = M->arena.base + l->off;\n"
              "        if (t) t[n] = x;\n"
              "        n++;\n"
              "    }\n"
              "    return n;\n}\n\n",
              px, px, px, px, px, px, px);
    sb_printf(m,
              "int %s_params(%s *M, colrt_tensor *out, int cap) {\n"
              "    int n = %s_tensors(M, NULL, 1, 0);\n"
              "    colrt_tensor *t = calloc((size_t)n + 1, sizeof *t);\n"
              "    if (!t) colrt_die(\"out of host memory\");\n"
              "    %s_tensors(M, t, 1, 0);\n"
              "    for (int i = 0; i < n && i < cap; i++) out[i] = t[i];\n"
              "    free(t);\n"
              "    return n;\n}\n\n",
              px, px, px, px);
    sb_printf(m,
              "/* The step count travels as a one-element tensor in the arena's scratch. */\n"
              "static colrt_tensor %s_step_tensor(%s *M) {\n"
              "    colrt_tensor x = {0};\n"
              "    x.name = \"colossal.step\";\n"
              "    x.dtype = COLRT_I32;\n"
              "    x.ndim = 1;\n"
              "    x.global_shape[0] = x.shape[0] = 1;\n"
              "    x.data = M->arena.base + %s_STEP_OFF;\n"
              "    return x;\n}\n\n"
              "/* Each shard is written once: by the rank whose coordinates on the axes\n"
              " * holding copies of it are 0 (replicated tensors: rank 0; ZeRO slices and\n"
              " * tensor-parallel shards: every rank owning one). */\n"
              "void %s_save(%s *M, const char *dir) {\n"
              "    int n = %s_tensors(M, NULL, 0, 1);\n"
              "    colrt_tensor *t = calloc((size_t)n + 1, sizeof *t);\n"
              "    if (!t) colrt_die(\"out of host memory\");\n"
              "    %s_tensors(M, t, 0, 1);\n"
              "    int32_t step = (int32_t)M->step;\n"
              "    colrt_memcpy(M->arena.base + %s_STEP_OFF, &step, 4, COLRT_H2D, NULL);\n"
              "    if (colrt_rank() == 0) t[n++] = %s_step_tensor(M);\n"
              "    colrt_device_sync();\n"
              "    colrt_checkpoint_save(dir, M->mesh, \"{\\\"model\\\": \\\"%s\\\"}\", n, t);\n"
              "    free(t);\n}\n\n"
              "int %s_load(%s *M, const char *dir) {\n"
              "    int n = %s_tensors(M, NULL, 0, 0);\n"
              "    colrt_tensor *t = calloc((size_t)n + 1, sizeof *t);\n"
              "    if (!t) colrt_die(\"out of host memory\");\n"
              "    %s_tensors(M, t, 0, 0);\n"
              "    t[n++] = %s_step_tensor(M);\n"
              "    int rc = colrt_checkpoint_load(dir, n, t);\n"
              "    if (rc == 0) {\n"
              "        int32_t step = 0;\n"
              "        colrt_memcpy(&step, M->arena.base + %s_STEP_OFF, 4, COLRT_D2H, NULL);\n"
              "        colrt_device_sync();\n"
              "        M->step = step;\n"
              "    }\n"
              "    free(t);\n"
              "    return rc;\n}\n\n",
              px, px, px, px, px, px, px, px, px, px, px, px, px, px, px, px);
    sb_printf(m,
              "%s_statistics %s_stats(const %s *M) { return M->stats; }\n\n"
              "void %s_input_rows(const %s *M, int64_t *first, int64_t *count) {\n"
              "    (void)M;\n",
              px, px, px, px, px);
    /* the rows of the leading dim of the inputs this rank feeds */
    int64_t rows = 0, local_rows = 0;
    for (ValueId v = 0; v < g->n_values; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && ir_val(g, v)->shape.rank > 0) {
            rows = ir_val(g, v)->shape.d[0];
            local_rows = lp->v[v].local.d[0];
            break;
        }
    /* this rank's index among the data-parallel ranks: its coordinates on
     * the split axes (row-major mesh, the last axis fastest) */
    StrBuf dpi;
    sb_init(&dpi);
    if (lp->sharded) { /* the axes splitting the rows, outermost first */
        sb_puts(&dpi, "(int64_t)0");
        for (int k = 0; k < lp->in_nax; k++)
            sb_printf(&dpi, " * %d + colrt_mesh_coord(M->mesh, %d)", o->mesh[lp->in_ax[k]], lp->in_ax[k]);
    } else if (!lp->opt.dp_axes) sb_puts(&dpi, "(int64_t)colrt_rank()");
    else {
        sb_puts(&dpi, "(int64_t)0");
        int64_t stride = 1;
        for (int a = o->mesh_axes - 1; a >= 0; a--) {
            if (lp->opt.dp_axes & (1u << a)) {
                int64_t below = 1;
                for (int q = a + 1; q < o->mesh_axes; q++)
                    if (lp->opt.dp_axes & (1u << q)) below *= o->mesh[q];
                sb_printf(&dpi, " + ((int64_t)colrt_rank() / %lld %% %d) * %lld", (long long)stride, o->mesh[a],
                          (long long)below);
            }
            stride *= o->mesh[a];
        }
    }
    sb_printf(m, "    *count = %lld;\n    *first = %s ? (%s) * %lld : 0;\n}\n\n",
              (long long)local_rows, local_rows != rows ? "1" : "0", sb_cstr(&dpi), (long long)local_rows);
    sb_free(&dpi);
    sb_printf(m,
              "void %s_destroy(%s *M) {\n"
              "    if (!M) return;\n"
              "    if (M->comm) colrt_stream_destroy(M->comm); /* drains it */\n"
              "    for (int k = 0; k < %d; k++) {\n"
              "        colrt_event_destroy(M->bucket_ready[k]);\n"
              "        colrt_event_destroy(M->bucket_done[k]);\n"
              "    }\n"
              "    colrt_arena_destroy(&M->arena);\n"
              "    if (M->own_mesh) colrt_mesh_destroy(M->mesh);\n"
              "    free(M);\n}\n",
              px, px, lp->n_buckets);
}

bool cg_emit(const Graph *g, const LowerProgram *lp, const CgOptions *o, const char *plan_json,
             const char *dir) {
    StrBuf err, pxb;
    sb_init(&err);
    sb_init(&pxb);
    c_ident(&pxb, g->name);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        diag_plain("check that the parent directory exists and is writable", "cannot create '%s': %s",
                   dir, strerror(errno));
        sb_free(&err);
        sb_free(&pxb);
        return false;
    }
    CgCtx c = {.g = g, .lp = lp, .prefix = sb_cstr(&pxb), .err = &err, .cur_node = -1, .rc_node = -1};
    sb_init(&c.kc);
    sb_init(&c.kcu);
    sb_init(&c.proto);
    c.scratch_off = lp->arena_bytes; /* one COLRT_ALIGN block past the plan */
    StrBuf sched, h, m, kc, kcu;
    sb_init(&sched);
    sb_init(&h);
    sb_init(&m);
    sb_init(&kc);
    sb_init(&kcu);
    int fwd_end, step_begin;
    bool ok = emit_schedule(&c, &sched, o, &fwd_end, &step_begin);
    if (!ok) {
        diag_plain("see docs/generated-api.md for what the generator supports",
                   "cannot generate code: %s", sb_cstr(&err));
    } else {
        const char *px = c.prefix;
        emit_header(&h, g, lp, o, px);
        emit_main(&c, &m, o, sb_cstr(&sched), lp->arena_bytes + 256);
        cg_emit_readout(&c, &h, &m, o, micro_batches(g));
        sb_puts(&h, "#ifdef __cplusplus\n}\n#endif\n#endif\n");
        char fname[256];
        snprintf(fname, sizeof fname, "%s_kernels.c", px);
        header_comment(&kc, fname, "kernels specialized to their shapes (C, target cpu).", o, px);
        sb_puts(&kc, "#include <math.h>\n#include <stdint.h>\n\n#include \"colossal/colrt.h\"\n\n");
        if (cg_graph_has_half(g)) cg_half_helpers(&kc, g, false);
        sb_printf(&kc, "%s\n%s", sb_cstr(&c.proto), sb_cstr(&c.kc));
        snprintf(fname, sizeof fname, "%s_kernels.cu", px);
        header_comment(&kcu, fname, "the same kernel bodies as CUDA kernels (target cuda).", o, px);
        sb_printf(&kcu,
                  "#include <math.h>\n#include <stdint.h>\n#include <cuda_runtime.h>\n\n#include \"colossal/colrt.h\"\n\n"
                  "/* colrt streams are opaque here: kernels run on the default stream, which\n"
                  " * the runtime's calls on the NULL stream also use. */\n"
                  "static inline cudaStream_t cg_stream(colrt_stream *s) { (void)s; return 0; }\n\n");
        if (cg_graph_has_half(g)) cg_half_helpers(&kcu, g, true);
        sb_puts(&kcu, sb_cstr(&c.kcu));
        char hn[256], mn[256], kn[256], kun[256], pn[256];
        snprintf(hn, sizeof hn, "%s.h", px);
        snprintf(mn, sizeof mn, "%s.c", px);
        snprintf(kn, sizeof kn, "%s_kernels.c", px);
        snprintf(kun, sizeof kun, "%s_kernels.cu", px);
        snprintf(pn, sizeof pn, "%s.plan.json", px);
        ok = write_file(dir, hn, &h) && write_file(dir, mn, &m);
        if (ok && o->cpu) ok = write_file(dir, kn, &kc);
        if (ok && o->cuda) ok = write_file(dir, kun, &kcu);
        if (ok && plan_json) {
            StrBuf pj;
            sb_init(&pj);
            sb_puts(&pj, plan_json);
            ok = write_file(dir, pn, &pj);
            sb_free(&pj);
        }
    }
    sb_free(&sched);
    sb_free(&h);
    sb_free(&m);
    sb_free(&kc);
    sb_free(&kcu);
    sb_free(&c.kc);
    sb_free(&c.kcu);
    sb_free(&c.proto);
    sb_free(&err);
    sb_free(&pxb);
    return ok;
}

/*
 * test_lower.c — the per-rank program (compiler/lower/lower.h) on the MLP's
 * training graph: the batch split follows the iteration spaces, partial sums
 * are reduced once where a non-linear op first reads them, ZeRO-2 scatters
 * each gradient where it is final and ZeRO-3 gathers parameters before each
 * use, the batch may be split over some mesh axes only (megatron with whole
 * parameters), recompute re-runs a block's forward before its backward, LAMB's
 * trust-ratio norms meet in one fused collective, the arena
 * holds every buffer, and bad requests are refused with the reason.
 */
#include <stdio.h>
#include <string.h>

#include "autodiff.h"
#include "check.h"
#include "lower.h"
#include "ops.h"
#include "text.h"

static Graph *training_dt(const char *file, int micro, AdOptimizer opt, DType compute) {
    char path[512];
    snprintf(path, sizeof path, "%s/examples/ir/%s", COLOSSAL_SOURCE_DIR, file);
    size_t len;
    char *text = ir_read_file(path, &len);
    Graph *f = text ? ir_parse(path, text, len) : NULL;
    ir_free(text);
    CHECK(f != NULL);
    if (!f) return NULL;
    AdOptions o;
    ad_options_default(&o);
    ad_options_optimizer(&o, opt);
    o.micro_batches = micro;
    o.compute = compute;
    StrBuf err;
    sb_init(&err);
    Graph *g = ad_build(f, &o, &err);
    sb_free(&err);
    ir_graph_free(f);
    return g;
}

static Graph *training_with(const char *file, int micro, AdOptimizer opt) {
    return training_dt(file, micro, opt, DT_F32);
}
static Graph *training(const char *file, int micro) { return training_with(file, micro, AD_OPT_ADAMW); }

/* The arena bytes live at the first backward node (every forward value the
 * backward needs is held then) with both instances of gpt2-tiny's block h
 * under one recompute policy: 0 none, 1 selective, 2 full. */
static int64_t live_at_backward(const Graph *g, int policy) {
    int full[4] = {policy == 2 ? 2 : 0}, sel[4] = {policy == 1 ? 2 : 0};
    LowerOptions o = {.dp = 1, .alignment = 1, .recompute = full, .recompute_sel = sel};
    StrBuf err;
    sb_init(&err);
    LowerProgram *p = lower_build(g, &o, &err);
    sb_free(&err);
    CHECK(p != NULL);
    if (!p) return 0;
    int64_t live = -1;
    for (NodeId id = 0; id < g->n_nodes && live < 0; id++)
        if (ir_val(g, ir_node(g, id)->out[0])->role == ROLE_GRAD) live = p->live_bytes[id];
    lower_free(p);
    return live;
}

/* Selective recompute keeps the matrix products' results and re-runs the
 * rest; its saved activations lie strictly between none and full. Counted
 * by hand for gpt2-tiny (B=2, T=8, D=16, H=2, Dh=8, FFN 64, f32): a [B,T,D]
 * tensor is 2*8*16*4 = 1024 bytes ("u").
 *   full: the block's input only: 1 u.
 *   selective: the input + the dense results: qkv0 (3 u), fc0 (4 u), and the
 *     residual sum x1 (1 u), which proj0's GEMM writes (its bias and residual
 *     adds kept with it: placement_selective_table); mp0's GEMM writes the block's
 *     output, which full keeps too = 9 u (10 u when the adds re-ran: proj0 and
 *     mp0 held as products).
 *   none: what the backward reads: the input (ln_1's backward), ln1 (c_attn's
 *     weight gradient), q, k, v (3 u), att (1 u: c_proj's weight gradient),
 *     x1 (ln_2's), ln2 (c_fc's weight gradient), fc (4 u: gelu's), act (4 u:
 *     c_proj's weight gradient) = 16 u.
 * The per-layer bytes come from the live bytes at the first backward node:
 * two layers, so (live(policy) - live(full)) / 2 + 1 u. */
static void test_recompute_policies(void) {
    Graph *g = training("gpt2-tiny.cir", 1);
    const int64_t u = 2 * 8 * 16 * 4;
    int64_t live[3];
    for (int pol = 0; pol < 3; pol++) live[pol] = live_at_backward(g, pol);
    int64_t per_layer[3];
    for (int pol = 0; pol < 3; pol++) per_layer[pol] = (live[pol] - live[2]) / 2 + u;
    CHECK_INT(per_layer[2], 1 * u);
    CHECK_INT(per_layer[1], 9 * u);
    CHECK_INT(per_layer[0], 16 * u);
    CHECK(per_layer[0] > per_layer[1] && per_layer[1] > per_layer[2]);
    ir_graph_free(g);
}

static const LowerValue *lv(const LowerProgram *p, const char *name) {
    ValueId v = ir_find(p->g, name);
    CHECK(v != IR_NONE);
    return &p->v[v == IR_NONE ? 0 : v];
}

/* The node defining `name`. */
static const LowerNode *ln_of(const LowerProgram *p, const char *name) {
    ValueId v = ir_find(p->g, name);
    CHECK(v != IR_NONE && ir_val(p->g, v)->def != IR_NONE);
    return &p->n[v == IR_NONE || ir_val(p->g, v)->def == IR_NONE ? 0 : ir_val(p->g, v)->def];
}

static bool reduces(const LowerProgram *p, const char *value) {
    ValueId v = ir_find(p->g, value);
    for (NodeId id = 0; id < p->g->n_nodes; id++)
        for (int k = 0; k < p->n[id].n_reduce; k++)
            if (p->n[id].reduce[k] == v) return true;
    for (int k = 0; k < p->n_out_reduce; k++)
        if (p->out_reduce[k] == v) return true;
    return false;
}

static int count_reduces(const LowerProgram *p) {
    int n = p->n_out_reduce;
    for (NodeId id = 0; id < p->g->n_nodes; id++) n += p->n[id].n_reduce;
    return n;
}

/* The fusion pass takes what the graph allows (ir_fuse_add, the one
 * definition the planner prices: solver/cost.c): on one device, gpt2-tiny's
 * training graph has bias and residual-onto-bias adds in f32, bias and norm
 * adds in bf16 (a 16-bit residual is no GEMM's: the norm after it writes it),
 * and every add the pass fuses is the kind ir_fuse_add names, with the
 * operand it names, and every add ir_fuse_add names is fused. */
/* lower.fuse's gradient accumulation (ir_fuse_grad_table, the rule the
 * planner prices by, solver/problem.c): the number of weight gradients whose
 * GEMM does its accumulation in gpt2-tiny's program, after checking each:
 * the GEMM's accumulation is the grad_accum adding the gradient the table
 * names, its cast (mixed precision) and add are fused, and the GEMM's result
 * has the accumulator's storage (never written in its dtype); and every
 * GEMM the table names is fused when its dtype is f32 or bf16, below ZeRO-2
 * and with micro-batches. */
static ValueId root_of(const LowerProgram *p, ValueId v) {
    while (p->v[v].storage != v) v = p->v[v].storage;
    return v;
}

static int grad_acc_fused(DType dt, int micro, int dp, int zero) {
    Graph *g = training_dt("gpt2-tiny.cir", micro, AD_OPT_ADAMW, dt);
    if (!g) return -1;
    StrBuf err;
    sb_init(&err);
    LowerOptions o = {.dp = dp, .zero = zero, .alignment = 256};
    LowerProgram *p = lower_build(g, &o, &err);
    CHECK(p != NULL);
    ValueId *inc = ir_fuse_grad_table(g);
    int n = 0, named = 0;
    for (NodeId d = 0; p && d < g->n_nodes; d++) {
        named += inc[d] != IR_NONE;
        NodeId a = p->n[d].grad_acc;
        if (inc[d] != IR_NONE && micro > 1 && zero < 2 && (dt == DT_F32 || (dt == DT_BF16 && dp == 1)))
            CHECK(a != IR_NONE);
        if (a == IR_NONE) continue;
        n++;
        const Node *an = ir_node(g, a);
        CHECK(ir_node(g, d)->op == OP_DENSE_DW && inc[d] != IR_NONE);
        CHECK(an->op == OP_GRAD_ACCUM && an->in[1] == inc[d] && p->n[a].fused);
        CHECK_INT(root_of(p, ir_node(g, d)->out[0]), root_of(p, an->in[0]));
        const Node *c = ir_node(g, ir_val(g, inc[d])->def);
        CHECK(dt == DT_F32 ? c == ir_node(g, d) : c->op == OP_CAST && p->n[ir_val(g, inc[d])->def].fused);
    }
    if (p) CHECK_INT(named, 8); /* the rule names the same GEMMs with and without micro-batches */
    ir_free(inc);
    lower_free(p);
    ir_graph_free(g);
    sb_free(&err);
    return n;
}

static void test_grad_acc_fusion(void) {
    /* qkv, the attention projection and both MLP linears in 2 layers; the tied
     * wte's gradient is the head's and the embedding's parts summed: not one GEMM's */
    CHECK_INT(grad_acc_fused(DT_F32, 4, 1, 0), 8);
    CHECK_INT(grad_acc_fused(DT_BF16, 4, 1, 0), 8);
    CHECK_INT(grad_acc_fused(DT_F32, 4, 2, 0), 8); /* data parallel: the partial sums accumulate */
    CHECK_INT(grad_acc_fused(DT_F32, 4, 2, 1), 8); /* ZeRO-1: the accumulator whole */
    /* a bf16 gradient pending over the ranks stays pending through its cast into the f32
     * accumulator (split.c casts_into_accum) and is summed once a step, so its GEMM
     * accumulates fused (the planner's rule excludes only the tensor-parallel lowering) */
    CHECK_INT(grad_acc_fused(DT_BF16, 4, 2, 0), 8);
    CHECK_INT(grad_acc_fused(DT_BF16, 4, 2, 2), 0); /* ZeRO-2: each gradient reduce-scattered first */
    CHECK_INT(grad_acc_fused(DT_F16, 4, 1, 0), 0);  /* f16: the loss scale must see an overflow */
    CHECK_INT(grad_acc_fused(DT_BF16, 1, 1, 0), 0); /* nothing to accumulate */
}

static void test_fusion_agrees(DType dt) {
    Graph *g = training_dt("gpt2-tiny.cir", 1, AD_OPT_ADAMW, dt);
    if (!g) return;
    StrBuf err;
    sb_init(&err);
    LowerOptions o = {.dp = 1, .alignment = 256};
    LowerProgram *p = lower_build(g, &o, &err);
    CHECK(p != NULL);
    int *readers = ir_value_readers(g);
    int count[IR_FUSE_NORM + 1] = {0};
    for (NodeId id = 0; p && id < g->n_nodes; id++) {
        const LowerNode *ln = &p->n[id];
        int operand;
        IrFuse f = ir_fuse_add(g, id, readers, &operand);
        count[f]++;
        if (f == IR_FUSE_NONE) continue;
        CHECK(ln->fused);
        const Node *n = ir_node(g, id);
        if (f == IR_FUSE_BIAS) { /* the dense whose product the add reads took it */
            NodeId d = ir_val(g, n->in[1 - operand])->def;
            CHECK_INT(p->n[d].bias_add, id);
        } else if (f == IR_FUSE_RESIDUAL || f == IR_FUSE_RESIDUAL_BIAS) {
            CHECK(ln->res_of != IR_NONE);
            NodeId s = ir_val(g, n->in[1 - operand])->def; /* the product, or the bias sum onto it */
            CHECK(f == IR_FUSE_RESIDUAL ? s == ln->res_of : p->n[ln->res_of].bias_add == s);
        } else {
            CHECK_INT(ln->add_norm, id + 1);
        }
    }
    for (NodeId id = 0; p && id < g->n_nodes; id++) { /* and nothing fused the graph does not allow */
        int operand;
        if (p->n[id].bias_add != IR_NONE) CHECK_INT(ir_fuse_add(g, p->n[id].bias_add, readers, &operand), IR_FUSE_BIAS);
        if (p->n[id].add_norm != IR_NONE) CHECK_INT(ir_fuse_add(g, id, readers, &operand), IR_FUSE_NORM);
    }
    CHECK_INT(count[IR_FUSE_BIAS], 8); /* qkv, proj, fc, mlp proj in 2 layers */
    /* the residuals before ln_2 of each layer, ln_1 of the second and ln_f */
    CHECK_INT(count[IR_FUSE_RESIDUAL_BIAS], dt == DT_F32 ? 4 : 0);
    CHECK_INT(count[IR_FUSE_NORM], dt == DT_F32 ? 0 : 4);
    ir_free(readers);
    lower_free(p);
    ir_graph_free(g);
    sb_free(&err);
}

/* ZeRO-3 chunks (chunk.c, placement_chunk_layout): each parameter chunk's
 * gradients are one reduce-scatter chunk with the same members in the same
 * order at the same offsets (the layout a flat update over the chunk needs);
 * the embedding, whose gradient the backward finishes last and the step reads
 * where it is scattered, is gathered alone. */
/* Chunks under ZeRO over two mesh axes (2x2: zinner 2): each round and each
 * gradient chunk has a temporary of its part times the inner axis (the
 * collective's first step), and the members packed in them keep none of
 * their own (views of the chunk's: no memory). */
/* GPT-2 tiny's training graph in dt (one micro-batch, AdamW) lowered with o: the
 * program and *g, or NULL (a failed check, the lowering's message printed). */
static LowerProgram *lowered_tiny(DType dt, const LowerOptions *o, Graph **g) {
    *g = training_dt("gpt2-tiny.cir", 1, AD_OPT_ADAMW, dt);
    if (!*g) return NULL;
    StrBuf err;
    sb_init(&err);
    LowerProgram *p = lower_build(*g, o, &err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "%s\n", sb_cstr(&err));
        ir_graph_free(*g);
    }
    sb_free(&err);
    return p;
}

static void test_chunk_two_axes(void) {
    Graph *g;
    LowerProgram *p = lowered_tiny(DT_F32, &(LowerOptions){.dp = 2, .zranks = 4, .zero = 3, .zinner = 2, .alignment = 256,
                                                          .chunk_bytes = 2000}, &g);
    if (!p) return;
    CHECK(p->n_chunks >= 2 && p->n_chunk_gathers >= p->n_chunks && p->n_chunk_scatters >= 1);
    for (int r = 0; r < p->n_chunk_gathers; r++) {
        const LowerChunkGather *cg = &p->chunk_gathers[r];
        CHECK(cg->tmp != IR_NONE && p->v[cg->tmp].bytes == 2 * p->v[cg->send].bytes);
        CHECK(p->v[cg->tmp].storage == cg->tmp); /* a buffer of its own */
    }
    for (int r = 0; r < p->n_chunk_scatters; r++) {
        const LowerChunkScatter *cs = &p->chunk_scatters[r];
        CHECK(cs->tmp != IR_NONE && p->v[cs->tmp].bytes == 2 * p->v[cs->part].bytes);
    }
    int alone = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const LowerNode *ln = &p->n[id];
        for (int k = 0; k < ln->n_gather; k++) {
            CHECK((ln->gather_round[k] >= 0) == (ln->gather_tmp[k] == IR_NONE));
            alone += ln->gather_round[k] < 0;
        }
        for (int k = 0; k < ln->n_rs; k++) CHECK((ln->rs_round[k] >= 0) == (ln->rs_tmp[k] == IR_NONE));
    }
    CHECK(alone > 0); /* the tied embedding: gathered alone, in two steps of its own */
    lower_free(p);
    ir_graph_free(g);
}

/* A gradient's reduce-scatter goes before the next node of its own pipeline
 * stage (placement_scatter_node): the graph's next node may be another's. */
static void test_scatter_node(void) {
    Graph *g = training("mlp.cir", 1);
    if (!g) return;
    CHECK_INT(placement_scatter_node(g, NULL, 3), 4);
    CHECK_INT(placement_scatter_node(g, NULL, g->n_nodes - 1), g->n_nodes);
    PlaceMask *mask = ir_alloc(sizeof(PlaceMask) * (size_t)g->n_nodes);
    for (NodeId id = 0; id < g->n_nodes; id++) mask[id] = PLACE_BIT(id % 3 == 1 ? 1 : 0);
    mask[6] = PLACE_BIT(0) | PLACE_BIT(1); /* on both stages */
    PlacePipeline pp = {.stages = 2, .chunks = 1, .stage_mask = mask};
    CHECK_INT(placement_scatter_node(g, &pp, 3), 5);  /* 4 is stage 1's */
    CHECK_INT(placement_scatter_node(g, &pp, 4), 7);  /* 5, 6 are not (only) stage 1's */
    CHECK_INT(placement_scatter_node(g, &pp, 2), 3);
    mask[9] = mask[6];
    CHECK_INT(placement_scatter_node(g, &pp, 6), 9);  /* both stages: a node on both */
    mask[9] = PLACE_BIT(0);
    CHECK_INT(placement_scatter_node(g, &pp, 6), g->n_nodes); /* none after it */
    pp.stages = 1;
    CHECK_INT(placement_scatter_node(g, &pp, 4), 5);
    ir_free(mask);
    ir_graph_free(g);
}

/* Under tensor parallelism a ZeRO-2 gradient's resharding packs into a chunk
 * when its one collective is a sum's reduce-scatter over one axis, after
 * slices, before nothing or one slice of the same dim
 * (placement_chunk_sharded_member: the lowering's and the planner's rule);
 * two collectives, or none, keep their own. */
static void test_chunk_sharded_member(void) {
    ShardCluster cl;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_load("h100:1x4", &cl, &e, NULL));
    CHECK(shard_mesh_parse(&cl, "2x2", &m, &e));
    static const struct {
        const char *from, *to;
        int axis; /* -1: not a member */
        int shape0;
    } cases[] = {
        {"[R]P1", "[S01]", 1, 16},     /* slice over axis 0, reduce-scatter over axis 1 */
        {"[S1]P0", "[S10]", 0, 16},    /* one reduce-scatter over axis 0 */
        {"[R]P01", "[S01]", -1, 16},   /* two reduce-scatters */
        {"[R]", "[S01]", -1, 16},      /* slices only */
        {"[R]P1", "[R]", -1, 16},      /* an all-reduce */
        {"[R]P0", "[S01]", 0, 16},     /* reduce-scatter over axis 0, then a slice of the dim over axis 1
                                        * (folded into the member's copy in) */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ShardSpec a, b;
        CHECK(shard_spec_parse(cases[k].from, &a, &e) && shard_spec_parse(cases[k].to, &b, &e));
        int64_t d = cases[k].shape0;
        ShardReshard r;
        CHECK(shard_reshard(&m, ir_shape(1, &d), DT_F32, &a, &b, &r, &e));
        int axis = -1;
        bool member = placement_chunk_sharded_member(&r, &a, &axis, NULL);
        CHECK_INT(member ? axis : -1, cases[k].axis);
    }
    sb_free(&e);
}

static void test_chunk_layout(DType dt, int64_t cap) {
    Graph *g;
    LowerProgram *p = lowered_tiny(dt, &(LowerOptions){.dp = 2, .zero = 3, .alignment = 256, .chunk_bytes = cap}, &g);
    if (!p) return;
    CHECK(p->n_chunks >= 2);
    for (int k = 0; k < p->n_chunks; k++) {
        const LowerChunk *ch = &p->chunks[k];
        int found = 0;
        for (int r = 0; r < p->n_chunk_scatters; r++) {
            const LowerChunkScatter *cs = &p->chunk_scatters[r];
            bool has = false;
            for (int m = 0; m < cs->n; m++) has |= cs->grad[m] == ad_grad_of(g, ir_val(g, ch->member[0])->name);
            if (!has) continue;
            found++;
            CHECK_INT(cs->chunk, k);
            CHECK_INT(cs->n, ch->n);
            CHECK_INT(cs->elems, ch->elems);
            for (int m = 0; m < cs->n && m < ch->n; m++) {
                CHECK_INT(cs->grad[m], ad_grad_of(g, ir_val(g, ch->member[m])->name));
                CHECK_INT(cs->off[m], ch->off[m]);
                CHECK_INT(ch->off[m] * ir_dtype_size(ch->dt) % 64, 0); /* 64-byte slots */
            }
        }
        CHECK_INT(found, 1);
        for (int m = 0; m < ch->n; m++) CHECK(strcmp(ir_val(g, ch->member[m])->name, "wte.weight") != 0);
    }
    lower_free(p);
    ir_graph_free(g);
}

int main(void) {
    Graph *g = training("mlp.cir", 1);
    if (!g) return check_done("lower");
    StrBuf err;
    sb_init(&err);

    /* one device: whole shapes, nothing to reduce, arena >= lower bound */
    LowerOptions o1 = {.dp = 1, .alignment = 256};
    LowerProgram *p = lower_build(g, &o1, &err);
    CHECK(p != NULL);
    CHECK_INT(lv(p, "h0")->local.d[0], 32);
    CHECK_INT(count_reduces(p), 0);
    CHECK(p->arena_bytes >= p->lower_bound_bytes);
    CHECK(p->arena_bytes <= p->lower_bound_bytes * 105 / 100);
    /* AdamW writes its results over the leaves they update */
    CHECK_INT(lv(p, "fc1.weight.next")->offset, lv(p, "fc1.weight")->offset);
    lower_free(p);

    /* data parallel over 4: the batch is split, activations follow */
    LowerOptions o4 = {.dp = 4, .alignment = 256};
    p = lower_build(g, &o4, &err);
    CHECK(p != NULL);
    CHECK_INT(lv(p, "x")->local.d[0], 8);
    CHECK_INT(lv(p, "h2")->local.d[0], 8);
    CHECK(lv(p, "h2")->split && !lv(p, "h2")->partial);
    /* parameter gradients sum over the batch: partial, reduced once each, in
     * one gradient bucket launched right after the last of them is computed
     * (the update reads them in the bucket); the loss is reduced where it is */
    CHECK(lv(p, "fc1.weight.grad")->partial);
    CHECK(lv(p, "loss")->partial);
    CHECK_INT(count_reduces(p), 1);
    CHECK(reduces(p, "loss"));
    CHECK_INT(p->n_buckets, 1);
    CHECK_INT(p->buckets[0].n, 4);
    NodeId last = -1;
    for (int k = 0; k < p->buckets[0].n; k++)
        if (ir_val(g, p->buckets[0].grad[k])->def > last) last = ir_val(g, p->buckets[0].grad[k])->def;
    CHECK_INT(p->buckets[0].launch, last);
    CHECK(last < ad_step_begin(g)); /* in the backward, before the update */
    ValueId wv = lv(p, "fc1.weight.grad")->redirect;
    CHECK(wv != IR_NONE && p->v[wv].storage == p->buckets[0].buf); /* read in the bucket */
    CHECK(p->v[wv].offset >= p->v[p->buckets[0].buf].offset &&
          p->v[wv].offset + p->v[wv].bytes <= p->v[p->buckets[0].buf].offset + p->v[p->buckets[0].buf].bytes);
    CHECK_INT(ln_of(p, "fc1.weight.grad_sq")->n_reduce, 0);
    CHECK_INT(lv(p, "fc1.weight")->local.d[0], 64); /* parameters stay whole */
    lower_free(p);

    /* without buckets: each gradient all-reduced right before the norm reads it */
    LowerOptions o4n = {.dp = 4, .alignment = 256, .bucket_bytes = -1};
    p = lower_build(g, &o4n, &err);
    CHECK(p != NULL);
    CHECK_INT(p->n_buckets, 0);
    CHECK_INT(count_reduces(p), 5);
    CHECK(reduces(p, "fc1.weight.grad") && reduces(p, "loss"));
    CHECK_INT(ln_of(p, "fc1.weight.grad_sq")->n_reduce, 1);
    lower_free(p);

    /* ZeRO-2: a reduce-scatter right after each gradient is final, slices of
     * the optimizer state, the norm's partial sum reduced (one scalar); fc2.bias
     * (10 elements, which 4 ranks do not divide) stays whole and all-reduced,
     * so the partial sum of the others is reduced where it meets its square */
    LowerOptions oz2 = {.dp = 4, .zero = 2, .alignment = 256};
    p = lower_build(g, &oz2, &err);
    CHECK(p != NULL);
    CHECK_INT(count_reduces(p), 2); /* fc2.bias.grad goes in a bucket */
    CHECK(reduces(p, "loss") && reduces(p, "t26"));
    CHECK(p->n_buckets == 1 && p->buckets[0].n == 1 && p->buckets[0].grad[0] == ir_find(g, "fc2.bias.grad"));
    NodeId wdef = ir_val(g, ir_find(g, "fc1.weight.grad"))->def;
    CHECK_INT(p->n[wdef + 1].n_rs, 1); /* scattered right after it is final */
    CHECK_INT(p->n[wdef + 1].rs[0], ir_find(g, "fc1.weight.grad"));
    CHECK_INT(lv(p, "fc1.weight.adam_m")->zchunk, 64 * 256 / 4);
    CHECK_INT(lv(p, "fc1.weight.adam_m")->local.d[0], 64 * 256 / 4);
    CHECK(lv(p, "fc1.weight.grad")->redirect != IR_NONE);
    CHECK_INT(lv(p, "fc2.bias")->zchunk, 0); /* 10 elements: 4 ranks do not divide them */
    lower_free(p);

    /* ZeRO-3: parameters are slices, gathered before every node that reads them */
    LowerOptions oz3 = {.dp = 4, .zero = 3, .alignment = 256};
    p = lower_build(g, &oz3, &err);
    CHECK(p != NULL);
    CHECK_INT(lv(p, "fc1.weight")->local.d[0], 64 * 256 / 4);
    CHECK_INT(ln_of(p, "h0")->n_gather, 1);
    CHECK_INT(ln_of(p, "h2.grad")->n_gather, 1); /* the backward reads fc2.weight again */
    lower_free(p);

    /* a megatron plan whose tensor-parallel axis keeps the parameters whole
     * (mesh 2x2, the batch over axis 0 only): two data-parallel ranks, the
     * same reductions as dp over 2; the program names the split axes */
    LowerOptions omt = {.dp = 2, .dp_axes = 1u << 0, .alignment = 256};
    p = lower_build(g, &omt, &err);
    CHECK(p != NULL);
    CHECK_INT(lv(p, "x")->local.d[0], 16);
    CHECK_INT(lv(p, "fc1.weight")->local.d[1], 256);
    CHECK_INT(count_reduces(p), 1); /* the loss; the gradients in a bucket */
    CHECK(p->n_buckets == 1 && p->buckets[0].n == 4);
    StrBuf mdump;
    sb_init(&mdump);
    lower_print(p, &mdump);
    CHECK_CONTAINS(sb_cstr(&mdump), "2 data-parallel ranks (over mesh axes 0, replicas over the others)");
    sb_free(&mdump);
    lower_free(p);

    /* a batch the ranks do not divide: refused with the reason */
    LowerOptions o3 = {.dp = 3, .alignment = 256};
    sb_free(&err);
    sb_init(&err);
    p = lower_build(g, &o3, &err);
    CHECK(p == NULL);
    CHECK_CONTAINS(sb_cstr(&err), "not divisible by 3 ranks");
    ir_graph_free(g);

    /* recompute: block h[0]'s forward re-runs before its first backward node
     * into copies; the backward reads the copies */
    g = training("gpt2-tiny.cir", 1);
    int rc[4] = {1, 0, 0, 0};
    LowerOptions orc = {.dp = 1, .alignment = 256, .recompute = rc};
    p = lower_build(g, &orc, &err);
    CHECK(p != NULL);
    int reruns = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        reruns += p->n[id].n_recompute;
        if (p->n[id].n_recompute) CHECK(ir_val(g, ir_node(g, id)->out[0])->role == ROLE_GRAD);
    }
    CHECK(reruns > 10);
    CHECK(lv(p, "h.0.act")->redirect != IR_NONE);
    CHECK(lv(p, "h.1.act")->redirect == IR_NONE);
    StrBuf dump;
    sb_init(&dump);
    lower_print(p, &dump);
    CHECK_CONTAINS(sb_cstr(&dump), "recompute %h.0.ln1");
    sb_free(&dump);
    lower_free(p);
    ir_graph_free(g);

    /* LAMB under ZeRO-1: each parameter's norms are summed over its slice (a
     * partial pair), all pairs in one buffer reduced once, before the first
     * update; fc2.bias (whole: 4 ranks do not divide 10) needs no sum; without
     * ZeRO every rank holds whole parameters and there is no collective */
    g = training_with("mlp.cir", 1, AD_OPT_LAMB);
    LowerOptions oz1 = {.dp = 4, .zero = 1, .alignment = 256};
    p = lower_build(g, &oz1, &err);
    CHECK(p != NULL);
    if (p) {
        CHECK_INT(p->norms.n, 3);
        CHECK(!reduces(p, "fc1.weight.trust_sq") && !reduces(p, "fc2.bias.trust_sq"));
        CHECK(lv(p, "fc1.weight.trust_sq")->storage == p->norms.buf && lv(p, "fc2.bias.trust_sq")->storage != p->norms.buf);
        CHECK_INT(ir_node(g, p->norms.launch)->op, OP_LAMB);
        for (NodeId id = 0; id < p->norms.launch; id++) CHECK(!ir_op_is_update(ir_node(g, id)->op));
        CHECK_INT(ln_of(p, "fc1.weight.trust_sq")->zchunk, 64 * 256 / 4); /* on the update's slice */
        sb_init(&dump);
        lower_print(p, &dump);
        CHECK_CONTAINS(sb_cstr(&dump), "the trust-ratio norms of 3 parameters, fused");
        CHECK_CONTAINS(sb_cstr(&dump), "(also writes %fc1.weight.next's moments, and its direction over the gradient)");
        sb_free(&dump);
        /* each norms sweep also writes its update's moments and direction */
        for (int k = 0; k < 4; k++) {
            static const char *const pn[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
            char a[64], b[64];
            snprintf(a, sizeof a, "%s.trust_sq", pn[k]);
            snprintf(b, sizeof b, "%s.next", pn[k]);
            CHECK_INT(ln_of(p, a)->dir_for, ir_val(g, ir_find(g, b))->def);
        }
    }
    lower_free(p);
    LowerOptions odp = {.dp = 4, .alignment = 256};
    p = lower_build(g, &odp, &err);
    CHECK(p != NULL && p->norms.n == 0 && !reduces(p, "fc1.weight.trust_sq"));
    if (p) CHECK_INT(ln_of(p, "fc1.weight.trust_sq")->dir_for, ir_val(g, ir_find(g, "fc1.weight.next"))->def);
    lower_free(p);
    ir_graph_free(g);
    /* ZeRO per parameter (the Placement's stage per group, zero_of): ZeRO-1 on
     * fc1.weight alone slices its update and moments and nothing else; the
     * moments, live the whole step, take exactly their sliced bytes off the
     * lower bound against data parallel without ZeRO */
    g = training_with("mlp.cir", 1, AD_OPT_ADAMW);
    int8_t *zof = ir_alloc(sizeof(int8_t) * (size_t)g->n_values);
    for (ValueId v = 0; v < g->n_values; v++) zof[v] = ir_val(g, v)->role == ROLE_PARAM ? 0 : -1;
    zof[ir_find(g, "fc1.weight")] = 1;
    LowerOptions omix = {.dp = 4, .zero = 1, .zero_of = zof, .alignment = 256};
    LowerProgram *q = lower_build(g, &odp, &err);
    p = lower_build(g, &omix, &err);
    CHECK(p != NULL && q != NULL);
    if (p && q) {
        int64_t whole = lv(q, "fc1.weight.adam_m")->bytes, slice = lv(p, "fc1.weight.adam_m")->bytes;
        CHECK_INT(slice * 4, whole);
        CHECK_INT(ln_of(p, "fc1.weight.next")->zero, 1);
        CHECK_INT(ln_of(p, "fc2.weight.next")->zero, 0);
        CHECK_INT(lv(p, "fc2.weight.adam_m")->bytes, lv(q, "fc2.weight.adam_m")->bytes);
        CHECK_INT(q->lower_bound_bytes - p->lower_bound_bytes, 2 * (whole - slice)); /* m and v */
    }
    lower_free(p);
    lower_free(q);
    ir_free(zof);
    ir_graph_free(g);
    /* ... but not into a micro-batch accumulator (a leaf the next step adds
     * into; one rank reads it in place): there the update computes its
     * direction itself; on 4 ranks the sweep reads the all-reduced bucket */
    g = training_with("mlp.cir", 2, AD_OPT_LAMB);
    LowerOptions one = {.dp = 1, .alignment = 256};
    p = lower_build(g, &one, &err);
    CHECK(p != NULL);
    if (p) CHECK_INT(ln_of(p, "fc1.weight.trust_sq")->dir_for, IR_NONE);
    lower_free(p);
    p = lower_build(g, &odp, &err);
    CHECK(p != NULL);
    if (p) CHECK_INT(ln_of(p, "fc1.weight.trust_sq")->dir_for, ir_val(g, ir_find(g, "fc1.weight.next"))->def);
    lower_free(p);
    ir_graph_free(g);
    sb_free(&err);
    test_recompute_policies();
    test_fusion_agrees(DT_F32);
    test_fusion_agrees(DT_BF16);
    test_grad_acc_fusion();
    test_chunk_layout(DT_F32, 8000);
    test_chunk_two_axes();
    test_scatter_node();
    test_chunk_sharded_member();
    test_chunk_layout(DT_BF16, 3000);
    return check_done("lower");
}

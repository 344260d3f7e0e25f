/*
 * cg_reshard.c — writes the sharded lowering's reshardings (lower.h,
 * LowerReshard) into the schedule: each step of shard_reshard()'s sequence
 * as colrt calls over one mesh axis. A step that moves a dim which is not
 * the outermost one of the local tensor goes through a staging buffer and
 * strided copies (colrt_memcpy_2d): an all-gather lands its blocks in axis
 * order, then each block moves to its place in the dim; a reduce-scatter
 * packs the blocks first; an all-to-all packs, exchanges and unpacks. A
 * slice copies this rank's block of the dim; a mask keeps the value on the
 * axis's first rank and zeroes it elsewhere (a replicated value made a
 * pending sum).
 */
#include "cg_internal.h"

static int64_t outer_of(Shape s, int d) {
    int64_t o = 1;
    for (int k = 0; k < d; k++) o *= s.d[k];
    return o;
}

static int64_t inner_of(Shape s, int d) {
    int64_t o = 1;
    for (int k = d + 1; k < s.rank; k++) o *= s.d[k];
    return o;
}

/* The arena address of value v's buffer plus `bytes`, as a char pointer: at
 * a recompute, the recomputed copy of v. */
static void addr(StrBuf *b, const CgCtx *c, ValueId v, int64_t bytes) {
    const LowerProgram *lp = c->lp;
    if (lp->v[v].redirect != IR_NONE && c->cur_node >= lp->v[v].redirect_from) v = lp->v[v].redirect;
    cg_stage_check(c, v);
    sb_printf(b, "(M->arena.base + %lld)", (long long)(lp->v[v].offset + bytes));
}

/* Block j (j < n) of rows of `width` bytes: dst block j <- src block j, as
 * colrt_memcpy_2d calls in a loop over j. */
static void blocks_2d(StrBuf *s, const CgCtx *c, int n, ValueId dst, int64_t dst_step, int64_t dpitch,
                      ValueId src, int64_t src_step, int64_t spitch, int64_t width, int64_t height) {
    sb_printf(s, "    for (int j = 0; j < %d; j++)\n        colrt_memcpy_2d(", n);
    addr(s, c, dst, 0);
    sb_printf(s, " + (size_t)j * %lld, %lld, ", (long long)dst_step, (long long)dpitch);
    addr(s, c, src, 0);
    sb_printf(s, " + (size_t)j * %lld, %lld, %lld, %lld, NULL);\n", (long long)src_step, (long long)spitch,
              (long long)width, (long long)height);
}

/* colrt_<fn>(mesh, axis, src, dst, count, dtype[, op], NULL) */
static void coll(StrBuf *s, const CgCtx *c, const char *fn, int axis, ValueId src, ValueId dst, int64_t count,
                 const char *dt, const char *op) {
    sb_printf(s, "    colrt_%s(M->mesh, %d, ", fn, axis);
    addr(s, c, src, 0);
    sb_puts(s, ", ");
    addr(s, c, dst, 0);
    sb_printf(s, ", %lld, %s%s%s, NULL);\n", (long long)count, dt, op ? ", " : "", op ? op : "");
}

/* A chunk member's reduce-scatter (step k, over one axis, chunk.c
 * chunk_sharded): its input's blocks of the scattered dim copied into chunk
 * scatter r->scatter's buffer, rank j's block at rank j's part plus the
 * member's place, rows packed (one copy where the dim is the local tensor's
 * outermost); the chunk's reduce-scatter is emit_chunk_scatter's. A slice of
 * the same dim after it (over axis b, placement_chunk_sharded_member) is
 * folded in: the dim is then in n x n_b blocks, and rank j's part gets block
 * j x n_b + this rank's coordinate on b, what the slice would keep of the
 * reduce-scattered block j. */
static void emit_copy_in(CgCtx *c, const LowerReshard *r, int k) {
    const LowerProgram *lp = c->lp;
    const LowerChunkScatter *cs = &lp->chunk_scatters[r->scatter];
    StrBuf *s = c->sched;
    const Value *x = ir_val(c->g, r->from);
    const ShardMesh *m = lp->opt.mesh;
    const ShardStep *st = &r->plan.step[k];
    const ShardSpec *before = k ? &r->plan.step[k - 1].after : &r->spec_from;
    ValueId src = k ? r->buf[k - 1] : r->from, res = r->buf[r->plan.n - 1];
    int last = r->plan.n - 1, b = last > k ? r->plan.step[last].axis : -1;
    Shape lb = shard_spec_local(before, m, x->shape), la = shard_spec_local(&r->plan.step[last].after, m, x->shape);
    int n = m->size[st->axis], nb = b >= 0 ? m->size[b] : 1, d = st->dim;
    int64_t es = ir_dtype_size(x->dtype), outer = outer_of(lb, d), row = la.d[d] * inner_of(la, d) * es;
    int64_t off = -1;
    for (int q = 0; q < cs->n; q++)
        if (cs->shard[q] == res) off = cs->off[q] * es;
    if (off < 0) ir_panic(__FILE__, __LINE__, "chunk scatter %d has no member %%%s", r->scatter, x->name);
    cg_trace_copy(c, (double)(n * row * outer), x->name);
    sb_printf(s, "    /* %%%s into its chunk (reduce-scattered over axis %d with the chunk's last member", x->name, st->axis);
    if (b >= 0) sb_printf(s, "; the slice over axis %d folded in", b);
    sb_puts(s, ") */\n");
    char at_b[64] = ""; /* the first block this rank copies: its coordinate on b */
    if (b >= 0) snprintf(at_b, sizeof at_b, " + (size_t)colrt_mesh_coord(M->mesh, %d) * %lld", b, (long long)row);
    if (outer == 1) { /* the blocks are evenly spaced: one strided copy */
        sb_puts(s, "    colrt_memcpy_2d(");
        addr(s, c, cs->buf, off);
        sb_printf(s, ", %lld, ", (long long)(cs->elems * es));
        addr(s, c, src, 0);
        sb_printf(s, "%s, %lld, %lld, %d, NULL);\n", at_b, (long long)(nb * row), (long long)row, n);
        return;
    }
    sb_printf(s, "    for (int j = 0; j < %d; j++)\n        colrt_memcpy_2d(", n);
    addr(s, c, cs->buf, off);
    sb_printf(s, " + (size_t)j * %lld, %lld, ", (long long)(cs->elems * es), (long long)row);
    addr(s, c, src, 0);
    sb_printf(s, "%s + (size_t)j * %lld, %lld, %lld, %lld, NULL);\n", at_b, (long long)(nb * row),
              (long long)(n * nb * row), (long long)row, (long long)outer);
}

/* A ZeRO-3 parameter's resharding whose all-gather is its chunk's (chunk.c
 * chunk_sharded: round r->round, gathered over the same axis before the
 * round's first reader): its whole copied out of the gathered chunk, rank j's
 * slice at rank j's part plus the member's place landing as dim d's block j
 * (one strided copy where the dim is the local tensor's outermost). */
static void emit_copy_out(CgCtx *c, const LowerReshard *r) {
    const LowerProgram *lp = c->lp;
    const LowerChunkGather *cg = &lp->chunk_gathers[r->round];
    const LowerChunk *ch = &lp->chunks[cg->chunk];
    StrBuf *s = c->sched;
    const Value *x = ir_val(c->g, r->from);
    const ShardMesh *m = lp->opt.mesh;
    const ShardStep *st = &r->plan.step[0];
    Shape lb = shard_spec_local(&r->spec_from, m, x->shape);
    int n = m->size[st->axis], d = st->dim;
    int64_t es = ir_dtype_size(x->dtype), outer = outer_of(lb, d), row = lb.d[d] * inner_of(lb, d) * es, off = -1;
    for (int q = 0; q < ch->n; q++)
        if (ch->member[q] == r->from) off = ch->off[q] * es;
    if (off < 0 || c->rc_node >= 0) /* chunk.c takes no resharding a recompute re-runs */
        ir_panic(__FILE__, __LINE__, "chunk %d cannot give %%%s here", cg->chunk, x->name);
    cg_trace_copy(c, (double)(ir_shape_numel(lb) * n * es), x->name);
    sb_printf(s, "    /* %%%s out of chunk %d (round %d, all-gathered over axis %d) */\n", x->name, cg->chunk, r->round,
              st->axis);
    int64_t part = ch->elems * es;
    if (outer == 1) { /* the blocks land end to end: one strided copy */
        sb_puts(s, "    colrt_memcpy_2d(");
        addr(s, c, r->buf[0], 0);
        sb_printf(s, ", %lld, ", (long long)row);
        addr(s, c, cg->buf, off);
        sb_printf(s, ", %lld, %lld, %d, NULL);\n", (long long)part, (long long)row, n);
        return;
    }
    sb_printf(s, "    for (int j = 0; j < %d; j++)\n        colrt_memcpy_2d(", n);
    addr(s, c, r->buf[0], 0);
    sb_printf(s, " + (size_t)j * %lld, %lld, ", (long long)row, (long long)(n * row));
    addr(s, c, cg->buf, off);
    sb_printf(s, " + (size_t)j * %lld, %lld, %lld, %lld, NULL);\n", (long long)part, (long long)row, (long long)row,
              (long long)outer);
}

/* Chunk scatter q of a tensor-parallel plan (axis >= 0), its members all
 * copied in: one reduce-scatter of the buffer over the axis into the part. */
static void emit_chunk_scatter(CgCtx *c, int q) {
    const LowerProgram *lp = c->lp;
    const LowerChunkScatter *cs = &lp->chunk_scatters[q];
    int n = lp->opt.mesh->size[cs->axis];
    char what[200];
    snprintf(what, sizeof what, "chunk of %d gradients -> %s", cs->n, lp->v[cs->part].name);
    cg_trace_coll(c, COLL_REDUCE_SCATTER, cs->axis, (double)(cs->elems * n * ir_dtype_size(cs->dt)), SIM_COMPUTE, what);
    sb_printf(c->sched, "    /* %s: one reduce-scatter over axis %d */\n", what, cs->axis);
    coll(c->sched, c, "reduce_scatter", cs->axis, cs->buf, cs->part, cs->elems, cg_colrt_dtype(cs->dt), "COLRT_SUM");
}

static void emit_step(CgCtx *c, const CgOptions *o, const LowerReshard *r, int k) {
    const LowerProgram *lp = c->lp;
    StrBuf *s = c->sched;
    const Value *x = ir_val(c->g, r->from);
    const ShardMesh *m = lp->opt.mesh;
    const ShardStep *st = &r->plan.step[k];
    const ShardSpec *before = k ? &r->plan.step[k - 1].after : &r->spec_from;
    ValueId src = k ? r->buf[k - 1] : r->from, dst = r->buf[k];
    Shape lb = shard_spec_local(before, m, x->shape), la = shard_spec_local(&st->after, m, x->shape);
    int a = st->axis, n = m->size[a], d = st->dim;
    int64_t es = ir_dtype_size(x->dtype);
    const char *dt = cg_colrt_dtype(x->dtype);
    const char *op = (before->pmax >> a) & 1u ? "COLRT_MAX" : "COLRT_SUM";
    (void)o;
    /* the simulator's record of this step (cg_trace.c): the collective with
     * each rank's bytes going in, and the strided copies around it */
    double bin = (double)(ir_shape_numel(lb) * es), bout = (double)(ir_shape_numel(la) * es);
    const char *nm = x->name;
    switch (st->kind) {
    case COLL_ALL_REDUCE: cg_trace_coll(c, COLL_ALL_REDUCE, a, bin, SIM_COMPUTE, nm); break;
    case COLL_ALL_GATHER:
        cg_trace_coll(c, COLL_ALL_GATHER, a, bin, SIM_COMPUTE, nm);
        if (outer_of(lb, d) > 1) cg_trace_copy(c, bout, nm);
        break;
    case COLL_REDUCE_SCATTER:
        if (outer_of(lb, d) > 1) cg_trace_copy(c, bin, nm);
        cg_trace_coll(c, COLL_REDUCE_SCATTER, a, bin, SIM_COMPUTE, nm);
        break;
    case COLL_ALL_TO_ALL:
        cg_trace_copy(c, bin, nm);
        cg_trace_coll(c, COLL_ALL_TO_ALL, a, bin, SIM_COMPUTE, nm);
        cg_trace_copy(c, bin, nm);
        break;
    case COLL_SLICE: cg_trace_copy(c, bout, nm); break;
    case COLL_ZERO: cg_trace_copy(c, bin, nm); break;
    default: break;
    }
    switch (st->kind) {
    case COLL_ALL_REDUCE:
        coll(s, c, "all_reduce", a, src, dst, ir_shape_numel(lb), dt, op);
        break;
    case COLL_ALL_GATHER: {
        int64_t outer = outer_of(lb, d), row = lb.d[d] * inner_of(lb, d) * es;
        ValueId land = outer > 1 ? r->tmp[k] : dst;
        coll(s, c, "all_gather", a, src, land, ir_shape_numel(lb), dt, NULL);
        if (outer > 1) /* block j of the gathered buffer is dim d's block j */
            blocks_2d(s, c, n, dst, row, n * row, land, ir_shape_numel(lb) * es, row, row, outer);
        break;
    }
    case COLL_REDUCE_SCATTER: {
        int64_t outer = outer_of(lb, d), row = la.d[d] * inner_of(la, d) * es;
        ValueId send = outer > 1 ? r->tmp[k] : src;
        if (outer > 1) /* dim d's block j becomes the j-th contiguous block */
            blocks_2d(s, c, n, send, ir_shape_numel(la) * es, row, src, row, n * row, row, outer);
        coll(s, c, "reduce_scatter", a, send, dst, ir_shape_numel(la), dt, op);
        break;
    }
    case COLL_SLICE: {
        int64_t row = la.d[d] * inner_of(la, d) * es;
        sb_puts(s, "    colrt_memcpy_2d(");
        addr(s, c, dst, 0);
        sb_printf(s, ", %lld, ", (long long)row);
        addr(s, c, src, 0);
        sb_printf(s, " + (size_t)colrt_mesh_coord(M->mesh, %d) * %lld, %lld, %lld, %lld, NULL);\n", a,
                  (long long)row, (long long)(n * row), (long long)row, (long long)outer_of(la, d));
        break;
    }
    case COLL_ALL_TO_ALL: {
        int d2 = st->dim2;
        Shape cb = lb; /* one block: dim2 cut in n */
        cb.d[d2] /= n;
        int64_t blk = ir_shape_numel(cb) * es;
        int64_t row2 = cb.d[d2] * inner_of(cb, d2) * es;
        blocks_2d(s, c, n, r->tmp[k], blk, row2, src, row2, n * row2, row2, outer_of(cb, d2));
        coll(s, c, "all_to_all", a, r->tmp[k], r->tmp2[k], ir_shape_numel(cb), dt, NULL);
        int64_t row = cb.d[d] * inner_of(cb, d) * es; /* peer j's block is dim d's block j */
        blocks_2d(s, c, n, dst, row, n * row, r->tmp2[k], blk, row, row, outer_of(cb, d));
        break;
    }
    case COLL_ZERO:
        if ((st->after.partial >> a) & 1u) {
            sb_printf(s, "    if (colrt_mesh_coord(M->mesh, %d) == 0) colrt_memcpy(", a);
            addr(s, c, dst, 0);
            sb_puts(s, ", ");
            addr(s, c, src, 0);
            sb_printf(s, ", %lld, COLRT_D2D, NULL);\n    else colrt_memset0(", (long long)(ir_shape_numel(lb) * es));
            addr(s, c, dst, 0);
            sb_printf(s, ", %lld, NULL);\n", (long long)(ir_shape_numel(lb) * es));
        } else { /* a pending max of copies is the value itself */
            sb_puts(s, "    colrt_memcpy(");
            addr(s, c, dst, 0);
            sb_puts(s, ", ");
            addr(s, c, src, 0);
            sb_printf(s, ", %lld, COLRT_D2D, NULL);\n", (long long)(ir_shape_numel(lb) * es));
        }
        break;
    default:
        break;
    }
}

void cg_emit_reshards(CgCtx *c, const CgOptions *o, NodeId id, bool post) {
    const LowerNode *ln = &c->lp->n[id];
    for (int k = 0; k < (post ? ln->n_post : ln->n_rsh); k++) {
        const LowerReshard *r = post ? &ln->post[k] : &ln->rsh[k];
        StrBuf sp;
        sb_init(&sp);
        shard_spec_print(&sp, &r->spec_from);
        for (int q = 0; q < r->plan.n; q++) {
            sb_printf(&sp, " -%s-> ", shard_coll_name(r->plan.step[q].kind));
            shard_spec_print(&sp, &r->plan.step[q].after);
        }
        sb_printf(c->sched, "    /* reshard %%%s: %s */\n", ir_val(c->g, r->from)->name, sb_cstr(&sp));
        sb_free(&sp);
        for (int q = 0; q < r->plan.n; q++) {
            if (r->scatter >= 0 && q == r->scatter_step) emit_copy_in(c, r, q);
            else if (r->scatter >= 0 && q > r->scatter_step) continue; /* folded into the copy in */
            else if (r->round >= 0 && q == 0) emit_copy_out(c, r);
            else emit_step(c, o, r, q);
        }
    }
    for (int q = 0; !post && q < c->lp->n_chunk_scatters; q++) /* a tensor-parallel plan's gradient chunks */
        if (c->lp->chunk_scatters[q].axis >= 0 && c->lp->chunk_scatters[q].node == id) emit_chunk_scatter(c, q);
}

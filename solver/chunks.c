/*
 * chunks.c — the planner's price of ZeRO chunks (docs/sharding.md "Chunks
 * (ZeRO-3)"; the lowering builds them, compiler/lower/chunk.c). Takes a plan
 * with its Placement; prices a small set of chunk sizes (none, 1, 4, 16 and
 * 64 MB a rank, and the size --chunk-bytes gives) by the collectives they run
 * (the α–β time of each, shard_coll_time) and the chunks' copies in and out
 * (over the memory bandwidth) against the memory a chunk holds (a gathered
 * chunk and a gradient chunk, both at once: a bound, added to the predicted
 * peak); with --chunk-bytes auto it chooses the fastest that fits, so one
 * tensor per chunk (none) wins where the latency saved is less than the
 * copies, or where nothing else fits. The ILP does not see chunks: this runs
 * after it, on the groups' ZeRO stages it chose.
 *
 * The model, per step with M micro-batches: a ZeRO-3 parameter is gathered
 * twice a micro-batch (forward, backward: as the ILP prices ZeRO-3), a chunk
 * of them twice too; a ZeRO-2/3 gradient is reduce-scattered once a
 * micro-batch, a chunk of them once. Not priced: recompute's extra rounds, a
 * parameter read more than twice (a tied embedding), the backward's rounds
 * gathering members it does not read (bytes, not count).
 */
#include "plan.h"

#include <string.h>

/* Decimal sizes, as --chunk-bytes reads "4MB" */
static const int64_t sizes[] = {0, 1000000, 4000000, 16000000, 64000000};

typedef struct Member {
    int64_t slice;  /* a rank's bytes */
    DType dt;
    bool gathered;  /* ZeRO-3 */
} Member;

/* Greedy packing in order (the lowering's rule, chunk.c): runs of one dtype
 * of at most cap bytes a rank; a run of one stays alone. Of the ZeRO-3
 * members (gathers) or of every member (reduce-scatters): the chunks, the
 * members alone, the largest part, the parts' bytes and the collectives' time
 * (one each). The gradients' 64-byte slots are not counted (under 0.1 %). */
static void pack(const Member *m, int n, bool gathers, int64_t cap, int *n_chunks, int *n_alone, int64_t *largest,
                 double *chunked_bytes, const ShardMesh *mesh, int axis, double *coll_s) {
    *n_chunks = *n_alone = 0;
    *largest = 0;
    *chunked_bytes = 0;
    *coll_s = 0;
    int ranks = mesh->size[axis];
    ShardColl k = gathers ? COLL_ALL_GATHER : COLL_REDUCE_SCATTER;
    for (int i = 0; i < n;) {
        if (gathers && !m[i].gathered) {
            i++;
            continue;
        }
        int64_t part = m[i].slice;
        int j = i + 1, cnt = 1;
        while (cap > 0 && j < n) {
            if (gathers && !m[j].gathered) { /* a ZeRO-2 parameter is not gathered: it breaks no run */
                j++;
                continue;
            }
            if (m[j].dt != m[i].dt || part + m[j].slice > cap) break;
            part += m[j++].slice, cnt++;
        }
        if (cnt >= 2) {
            (*n_chunks)++;
            if (part > *largest) *largest = part;
            *chunked_bytes += (double)part;
            *coll_s += shard_coll_time(mesh, k, axis, gathers ? (double)part : (double)part * ranks);
        } else {
            (*n_alone)++;
            *coll_s += shard_coll_time(mesh, k, axis, gathers ? (double)m[i].slice : (double)m[i].slice * ranks);
        }
        i = cnt >= 2 ? j : i + 1;
    }
}

static void price(const Member *m, int n, int64_t cap, int mb, const PlanResult *r, int axis, PlanChunkPrice *out) {
    int ag_c, ag_a, rs_c, rs_a;
    int64_t ag_l, rs_l;
    double ag_b, rs_b, ag_s, rs_s;
    pack(m, n, true, cap, &ag_c, &ag_a, &ag_l, &ag_b, &r->mesh, axis, &ag_s);
    pack(m, n, false, cap, &rs_c, &rs_a, &rs_l, &rs_b, &r->mesh, axis, &rs_s);
    int ranks = r->mesh.size[axis];
    *out = (PlanChunkPrice){.bytes = cap, .chunks = ag_c, .grad_chunks = rs_c};
    out->collectives = 2 * mb * (ag_c + ag_a) + mb * (rs_c + rs_a);
    out->coll_s = 2 * mb * ag_s + mb * rs_s;
    /* copy-in of the slices and copy-out of the wholes a round; a gradient's whole copied in */
    out->copy_s = (2.0 * mb * ag_b * (1 + ranks) + mb * rs_b * ranks) / r->mesh.mem_bw;
    out->extra_bytes = (double)ranks * (double)(ag_l + rs_l);
    out->fits = r->price.peak_bytes + out->extra_bytes <= r->mem_limit;
}

void plan_price_chunks(const Graph *g, PlanResult *r, int64_t asked) {
    r->n_chunk_prices = 0;
    r->chunk_chosen = 0;
    r->chunk_auto = asked == PLAN_CHUNK_AUTO;
    int axis = -1, busy = 0;
    for (int a = 0; a < r->mesh.n_axes; a++)
        if (r->mesh.size[a] > 1) axis = a, busy++;
    const Placement *pl = r->pl;
    if (!asked || busy != 1 || !pl || pl->layout == PL_SHARDED || pl->pipe.stages > 1) {
        r->chunk_bytes = asked > 0 ? asked : 0; /* the lowering refuses what it does not build */
        if (pl) r->pl->chunk_bytes = r->chunk_bytes;
        return;
    }
    int ranks = r->mesh.size[axis];
    Member *m = ir_alloc(sizeof(Member) * (size_t)(g->n_values + 1));
    bool *seen = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    memset(seen, 0, sizeof(bool) * (size_t)(g->n_values + 1));
    int n = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) { /* the ZeRO-2/3 parameters, in the order of their first reader */
        const Node *nd = ir_node(g, id);
        if (ir_op_is_update(nd->op)) continue;
        for (int i = 0; i < nd->n_in; i++) {
            ValueId v = nd->in[i];
            const Value *x = ir_val(g, v);
            if (seen[v] || x->role != ROLE_PARAM || pl->zero[v] < 2 || ir_shape_numel(x->shape) % ranks) continue;
            seen[v] = true;
            m[n++] = (Member){.slice = ir_shape_numel(x->shape) / ranks * ir_dtype_size(x->dtype), .dt = x->dtype,
                              .gathered = pl->zero[v] >= 3};
        }
    }
    int mb = pl->micro_batches > 0 ? pl->micro_batches : 1;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        price(m, n, sizes[k], mb, r, axis, &r->chunk_price[r->n_chunk_prices++]);
    bool listed = asked == PLAN_CHUNK_AUTO;
    for (int k = 0; k < r->n_chunk_prices; k++) listed |= r->chunk_price[k].bytes == asked;
    if (!listed) price(m, n, asked, mb, r, axis, &r->chunk_price[r->n_chunk_prices++]);
    int best = 0; /* auto: the fastest that fits (none always does: it adds nothing) */
    for (int k = 0; k < r->n_chunk_prices; k++) {
        const PlanChunkPrice *c = &r->chunk_price[k], *b = &r->chunk_price[best];
        if (asked != PLAN_CHUNK_AUTO) {
            if (c->bytes == asked) best = k;
        } else if (c->fits && c->coll_s + c->copy_s < b->coll_s + b->copy_s)
            best = k;
    }
    r->chunk_chosen = best;
    r->chunk_bytes = r->chunk_price[best].bytes;
    r->pl->chunk_bytes = r->chunk_bytes;
    ir_free(seen);
    ir_free(m);
}

/*
 * test_sim.c — the simulator (solver/sim.h) on programs written by hand:
 *   - one stream: the step is the sum of each op priced by the planner's own
 *     functions (cost_roofline, shard_coll_time);
 *   - two streams: a collective on the communication stream overlaps the
 *     kernels after its record and delays only the op waiting for it; with a
 *     measured table and a hand-off, it is priced as queued (the table), one
 *     on the compute stream as on the caller's thread (less the hand-off);
 *   - contention: a kernel beside the communication stream's collective runs at
 *     1 / (1 + overlap_slowdown) of its speed, exposed, not kernel time;
 *   - micro-batches repeat forward and backward, the update runs once, a
 *     last-micro-batch op once;
 *   - host offload: a gradient copied down on its stream after the backward,
 *     the host waiting for it and running AdamW, the parameter copied up, the
 *     next kernel issued by the host after its AdamW: the step is the chain,
 *     offload_exposed_s what it adds over the replay without host work;
 *   - the plan's "program" object round-trips, and bad ones are refused
 *     naming the field;
 *   - a pipelined program of 2 stages and 2 micro-batches (1F1B, its action
 *     tables from pipeline_1f1b): each stage on its own clock, a transfer
 *     ending pipeline_p2p_time after both ends have posted it, stage 0's
 *     backward running its forward again (or, kept, its copies back), the
 *     update's collective over the pipeline axis waiting for both stages;
 *     the step against one computed by hand; its JSON round-trips, and bad
 *     schedules and transfers are refused;
 *   - an interleaved program of 2 devices x 2 model chunks (pipeline_interleaved's
 *     tables; 2 micro-batches, where the last virtual stage runs its forward again,
 *     and 4): the step is the planner's replay of the same tables with the same
 *     durations (pipeline_replay_v) plus the update; its JSON (version 3, chunks)
 *     round-trips and replays the same, a bad message is refused.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "sim.h"

static SimOp *kernel(SimProgram *p, int part, OpClass c, double flops, double bytes) {
    SimOp *o = sim_add(p, SIM_KERNEL, SIM_COMPUTE, part, "k");
    o->cls = c;
    o->flops = flops;
    o->bytes = bytes;
    return o;
}

static SimOp *coll(SimProgram *p, int stream, int part, double bytes) {
    SimOp *o = sim_add(p, SIM_COLL, stream, part, "ar");
    o->coll = COLL_ALL_REDUCE;
    o->axis = 0;
    o->bytes = bytes;
    return o;
}

static void event(SimProgram *p, SimKind k, int stream, int part, int e) {
    sim_add(p, k, stream, part, NULL)->event = e;
    if (e + 1 > p->n_events) p->n_events = e + 1;
}

/* A 2-stage program: per stage a forward and a backward kernel, its transfers (one
 * colrt_sendrecv with the neighbour of x bytes each way), an update kernel and the update's
 * all-reduce over the pipeline axis (mesh axis 1); stage 0 keeping its activations when
 * kept (its copies into the slot after the forward and back before the backward). */
static void pipe_program(SimProgram *p, const ShardCluster *whole, bool kept, double x) {
    sim_program_init(p);
    p->micro_batches = 2;
    p->stages = 2;
    p->pipe_cl = *whole;
    p->kept[0] = kept;
    for (int s = 0; s < 2; s++) {
        p->acts[s] = ir_alloc(sizeof(PipeAction) * (6 * 2 + 6));
        p->n_acts[s] = pipeline_1f1b(2, 2, s, p->acts[s]);
        SimOp *o = kernel(p, SIM_FORWARD, OPC_MATMUL, s ? 2e12 : 1e12, 1e8);
        o->stage = s;
        o = kernel(p, SIM_BACKWARD, OPC_MATMUL, s ? 4e12 : 2e12, 1e8);
        o->stage = s;
        o = sim_add(p, SIM_P2P, SIM_COMPUTE, SIM_FORWARD, "h");
        o->stage = s, o->seg = s ? SIM_SEG_PREV : SIM_SEG_NEXT, o->bytes = o->rbytes = x;
        o = kernel(p, SIM_UPDATE, OPC_ELEMWISE, 0, 4e8);
        o->stage = s;
        o = coll(p, SIM_COMPUTE, SIM_UPDATE, 4);
        o->stage = s, o->axis = 1, o->peer = -1;
    }
    if (kept) {
        SimOp *o = sim_add(p, SIM_COPY, SIM_COMPUTE, SIM_FORWARD, "stash out");
        o->seg = SIM_SEG_STASH_OUT, o->bytes = 1e8;
        o = sim_add(p, SIM_COPY, SIM_COMPUTE, SIM_BACKWARD, "stash in");
        o->seg = SIM_SEG_STASH_IN, o->bytes = 1e8;
    }
}

/* The 2-stage, 2-micro-batch 1F1B step by hand: stage 0's forward and backward actions
 * take f0, b0, stage 1's f1, b1, a transfer x after both ends post it, the update u and
 * the pipeline axis's all-reduce c after both stages reach it. */
static double pipe_step(double f0, double b0, double f1, double b1, double x, double u, double c) {
    double t0 = f0 + x;                  /* stage 0: F0, sends mb 0; stage 1 receives it then */
    double s0 = t0 + f0;                 /* stage 0: F1, posts (send mb 1, receive grad 0) */
    double s1 = t0 + f1 + b1;            /* stage 1: F0, B0, posts (send grad 0, receive mb 1) */
    double t2 = fmax(s0, s1) + x;        /* both halves at once */
    double s3 = t2 + b0;                 /* stage 0: B0, posts (receive grad 1) */
    double s4 = t2 + f1 + b1;            /* stage 1: F1, B1, posts (send grad 1) */
    double t5 = fmax(s3, s4) + x;
    return fmax(t5 + b0 + u, t5 + u) + c; /* stage 0: B1; both: update, the all-reduce together */
}

/* An interleaved program: 2 devices x 2 chunks (virtual stage q = chunk x 2 + device), m
 * micro-batches; per virtual stage a forward kernel of (q + 1) TFLOP and a backward of twice
 * that, a message of x bytes to each neighbour; per device an update kernel. */
static void ileave_program(SimProgram *p, const ShardCluster *whole, int m, double x) {
    sim_program_init(p);
    p->micro_batches = m;
    p->stages = 2;
    p->chunks = 2;
    p->pipe_cl = *whole;
    for (int d = 0; d < 2; d++) {
        p->acts[d] = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(2, m));
        p->n_acts[d] = pipeline_interleaved(2, 2, m, d, p->acts[d]);
        kernel(p, SIM_UPDATE, OPC_ELEMWISE, 0, 4e8)->stage = d;
    }
    for (int q = 0; q < 4; q++) {
        kernel(p, SIM_FORWARD, OPC_MATMUL, (q + 1) * 1e12, 1e8)->stage = q;
        kernel(p, SIM_BACKWARD, OPC_MATMUL, (q + 1) * 2e12, 1e8)->stage = q;
        for (int g = 0; g < 2; g++) {
            if (g ? q == 0 : q == 3) continue;
            SimOp *o = sim_add(p, SIM_P2P, SIM_COMPUTE, SIM_FORWARD, "h");
            o->stage = q, o->seg = g ? SIM_SEG_PREV : SIM_SEG_NEXT, o->bytes = o->rbytes = x;
        }
    }
}

static bool from_text(const char *json, SimProgram *p, ShardCluster *cl, StrBuf *err) {
    cJSON *j = cJSON_Parse(json);
    bool ok = j && sim_program_from_json(j, "t.json", p, cl, err);
    cJSON_Delete(j);
    return ok;
}

/* text with its first `from` replaced by `to`, into *out (initialized here); false
 * (nothing written) where text lacks `from` */
static bool replaced(const char *text, const char *from, const char *to, StrBuf *out) {
    const char *at = strstr(text, from);
    if (!at) return false;
    sb_init(out);
    sb_printf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return true;
}

int main(void) {
    ShardCluster cl;
    ShardMesh m;
    StrBuf err;
    sb_init(&err);
    CHECK(shard_cluster_load("h100:1x8", &cl, &err, NULL));
    CHECK(cl.overlap_slowdown > 0); /* the GPU presets' (Lee et al.) */
    double preset_slow = cl.overlap_slowdown;
    cl.overlap_slowdown = 0; /* contention: its own case below */
    int sizes[1] = {8};
    CHECK(shard_mesh_make(&cl, 1, sizes, &m, &err));
    CostModel cm = {.cl = &cl, .mesh = &m, .dtype = DT_BF16};
    double tk = cost_roofline(&cm, OPC_MATMUL, 1e12, 1e8), te = cost_roofline(&cm, OPC_ELEMWISE, 0, 4e8);
    double tc = shard_coll_time(&m, COLL_ALL_REDUCE, 0, 2e8);
    CHECK(tk > 0 && te > 0 && tc > 0);

    /* one stream: the sum */
    SimProgram p;
    sim_program_init(&p);
    kernel(&p, SIM_FORWARD, OPC_MATMUL, 1e12, 1e8);
    coll(&p, SIM_COMPUTE, SIM_BACKWARD, 2e8);
    kernel(&p, SIM_UPDATE, OPC_ELEMWISE, 0, 4e8);
    SimResult r;
    CHECK(sim_run(&p, &cm, &r, &err));
    CHECK_NEAR(r.step_s, tk + tc + te, 1e-12);
    CHECK_NEAR(r.exposed_comm_s, tc, 1e-9);
    CHECK_NEAR(r.busy_s[SIM_COMPUTE], tk + tc + te, 1e-12);
    CHECK_INT(r.n_spans, 3);
    sim_result_free(&r);
    sim_program_free(&p);

    /* two streams: the all-reduce (record after the first kernel) overlaps the
     * second kernel; the update waits for it */
    sim_program_init(&p);
    kernel(&p, SIM_BACKWARD, OPC_MATMUL, 1e12, 1e8);
    event(&p, SIM_RECORD, SIM_COMPUTE, SIM_BACKWARD, 0);
    event(&p, SIM_WAIT, SIM_COMM, SIM_BACKWARD, 0);
    coll(&p, SIM_COMM, SIM_BACKWARD, 2e8);
    event(&p, SIM_RECORD, SIM_COMM, SIM_BACKWARD, 1);
    kernel(&p, SIM_BACKWARD, OPC_ELEMWISE, 0, 4e8);
    event(&p, SIM_WAIT, SIM_COMPUTE, SIM_UPDATE, 1);
    kernel(&p, SIM_UPDATE, OPC_ELEMWISE, 0, 4e8);
    CHECK(sim_run(&p, &cm, &r, &err));
    CHECK_NEAR(r.step_s, tk + fmax(tc, te) + te, 1e-12);
    CHECK_NEAR(r.busy_s[SIM_COMM], tc, 1e-12);
    CHECK_NEAR(r.exposed_comm_s, fmax(tc - te, 0), 1e-6);
    sim_result_free(&r);

    /* contention: beside the all-reduce the second kernel runs at 1 / (1 + s) of its
     * speed; the first (before the record) and the update (after the wait) do not */
    for (int k = 0; k < 3; k++) {
        double s = k == 0 ? preset_slow : k == 1 ? 0.5 : 4.0;
        cl.overlap_slowdown = s;
        CHECK(sim_run(&p, &cm, &r, &err));
        double e2 = tc >= te * (1 + s) ? te * (1 + s) : tc + te - tc / (1 + s);
        CHECK(e2 > te);
        CHECK_NEAR(r.step_s, tk + fmax(tc, e2) + te, 1e-12);
        CHECK_NEAR(r.contention_s, e2 - te, 1e-12);
        CHECK_NEAR(r.kernel_s, tk + 2 * te, 1e-12);                 /* kernels at their own time */
        CHECK_NEAR(r.exposed_comm_s, fmax(tc, e2) - te, 1e-9);       /* the contention is exposed */
        CHECK_NEAR(r.busy_s[SIM_COMPUTE], tk + e2 + te, 1e-12);
        CHECK_NEAR(r.spans[2].contention, e2 - te, 1e-12);
        sim_result_free(&r);
    }
    cl.overlap_slowdown = 0;

    /* micro-batches: forward and backward three times, the update once */
    p.micro_batches = 3;
    CHECK(sim_run(&p, &cm, &r, &err));
    CHECK_INT(r.n_spans, 3 * 3 + 1);
    CHECK_NEAR(r.part_s[SIM_BACKWARD], 3 * (tk + te), 1e-12);
    sim_result_free(&r);
    p.op[3].last_micro = true; /* the all-reduce after the last micro-batch only */
    CHECK(sim_run(&p, &cm, &r, &err));
    CHECK_INT(r.n_colls, 1);
    sim_result_free(&r);

    /* host offload: kernel, gradient down (waits for it), host AdamW (waits for the copy),
     * a device kernel the host issues after its AdamW, the parameter up */
    {
        SimProgram h;
        sim_program_init(&h);
        kernel(&h, SIM_BACKWARD, OPC_MATMUL, 1e12, 1e8);
        event(&h, SIM_RECORD, SIM_COMPUTE, SIM_UPDATE, 0);
        event(&h, SIM_WAIT, SIM_D2H, SIM_UPDATE, 0);
        sim_add(&h, SIM_HCOPY, SIM_D2H, SIM_UPDATE, "g")->bytes = 4e8;
        event(&h, SIM_RECORD, SIM_D2H, SIM_UPDATE, 1);
        event(&h, SIM_HSYNC, SIM_COMPUTE, SIM_UPDATE, 1);
        sim_add(&h, SIM_HOST, SIM_COMPUTE, SIM_UPDATE, "w")->flops = 1e8;
        kernel(&h, SIM_UPDATE, OPC_ELEMWISE, 0, 4e8);
        sim_add(&h, SIM_HCOPY, SIM_H2D, SIM_UPDATE, "w")->bytes = 2e8;
        /* each copy and host call its latency too (cost_host_copies, cost_host_updates) */
        CHECK(cl.host_copy_lat > 0 && cl.host_call_lat > 0);
        double down = cl.host_copy_lat + 4e8 / cl.pcie_bw, host = cl.host_call_lat + 1e8 / cl.host_adamw_rate,
               up = cl.host_copy_lat + 2e8 / cl.pcie_bw;
        CHECK(down > 0 && host > 0 && up > 0);
        CHECK(sim_run(&h, &cm, &r, &err));
        CHECK_NEAR(r.step_s, tk + down + host + fmax(te, up), 1e-12);
        CHECK_NEAR(r.host_s, host, 1e-15);
        CHECK_NEAR(r.hcopy_s, down + up, 1e-15);
        CHECK_INT(r.n_hcopies, 2);
        CHECK_INT(r.n_host, 1);
        CHECK_NEAR(r.busy_s[SIM_D2H], down, 1e-15);
        CHECK_NEAR(r.busy_s[SIM_H2D], up, 1e-15);
        CHECK_NEAR(r.offload_exposed_s, r.step_s - (tk + te), 1e-12); /* without them: the two kernels */
        CHECK_NEAR(r.part_s[SIM_UPDATE], te, 1e-15);                    /* kernels only */
        sim_result_free(&r);
        /* through JSON: the same */
        cJSON *hj = sim_program_to_json(&h, &cl);
        char *ht = cJSON_PrintUnformatted(hj);
        cJSON_Delete(hj);
        SimProgram hq;
        ShardCluster hc;
        CHECK(from_text(ht, &hq, &hc, &err));
        CHECK(hc.pcie_bw == cl.pcie_bw && hc.host_adamw_rate == cl.host_adamw_rate);
        CHECK_NEAR(hc.host_copy_lat, cl.host_copy_lat, 1e-18);
        CHECK_NEAR(hc.host_call_lat, cl.host_call_lat, 1e-18);
        CostModel hcm = {.cl = &hc, .mesh = &m, .dtype = DT_BF16};
        CHECK(sim_run(&hq, &hcm, &r, &err));
        CHECK_NEAR(r.step_s, tk + down + host + fmax(te, up), 1e-12);
        sim_result_free(&r);
        sim_program_free(&hq);
        cJSON_free(ht);
        /* a stream out of range is refused by name */
        h.op[3].stream = 4;
        StrBuf he;
        sb_init(&he);
        CHECK(!sim_run(&h, &cm, &r, &he));
        CHECK_CONTAINS(sb_cstr(&he), "runs on stream 4");
        sb_free(&he);
        sim_program_free(&h);
    }

    /* the JSON round trip gives the same replay */
    cJSON *j = sim_program_to_json(&p, &cl);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    SimProgram q;
    ShardCluster cl2;
    CHECK(from_text(txt, &q, &cl2, &err));
    CHECK_INT(q.n, p.n);
    CHECK_INT(q.micro_batches, 3);
    CHECK_STR(cl2.device, cl.device);
    SimResult r2;
    CHECK(sim_run(&p, &cm, &r, &err));
    CHECK(sim_run(&q, &cm, &r2, &err));
    CHECK_NEAR(r2.step_s, r.step_s, 1e-12);
    sim_result_free(&r);
    sim_result_free(&r2);
    sim_program_free(&q);

    /* bad programs: each refused naming the field */
    struct { const char *from, *to, *msg; } bad[] = {
        {"\"k\":\"coll\"", "\"k\":\"teleport\"", "field 'k' must be one of"},
        {"\"version\":3", "\"version\":7", "program version 7"},
        {"\"b\":200000000", "\"b\":-1", "program.ops[3]: field 'b'"},
        {"\"e\":1", "\"e\":9", "field 'e' must be a number in [0, 1]"},
        {"\"micro_batches\":3", "\"micro_batches\":0", "field 'micro_batches'"},
        {"\"c\":\"matmul\"", "\"c\":\"magic\"", "field 'c' must name an op class"},
        {"\"x\":\"all-reduce\"", "\"x\":\"all-sum\"", "field 'x' must name a collective"},
        {"\"a\":0", "\"a\":5", "field 'a' must be a number in [0, 2]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        StrBuf t;
        bool found = replaced(txt, bad[k].from, bad[k].to, &t);
        CHECK(found);
        if (!found) continue;
        StrBuf e;
        sb_init(&e);
        CHECK(!from_text(sb_cstr(&t), &q, &cl2, &e));
        CHECK_CONTAINS(sb_cstr(&e), bad[k].msg);
        CHECK_CONTAINS(sb_cstr(&e), "t.json");
        sb_free(&e);
        sb_free(&t);
    }
    cJSON_free(txt);

    /* an axis the mesh lacks, an event out of range: refused by the replay */
    p.op[3].axis = 2;
    StrBuf e2;
    sb_init(&e2);
    CHECK(!sim_run(&p, &cm, &r, &e2));
    CHECK_CONTAINS(sb_cstr(&e2), "mesh axis 2");
    sb_free(&e2);
    sim_program_free(&p);

    /* a measured table with a hand-off: an all-reduce on the communication stream
     * (queued between events) is priced at the table's 50 us; the same call on the
     * compute stream (the caller's thread) at 50 - 30 = 20 us where nothing is queued,
     * and at the stream's 50 us in a program that queues a collective (the hand-off
     * conflict, shard_mesh_queueing: every caller-thread collective, ZeRO's or not) */
    ShardCluster ch = cl;
    ch.coll[0].ranks = 8;
    for (int k = 0; k < SHARD_COLL_KINDS; k++)
        ch.coll[0].kind[k] = (ShardCollTable){.n = 2, .bytes = {64, 1024}, .seconds = {50e-6, 50e-6}};
    ch.coll[0].handoff = 30e-6;
    ShardMesh mh;
    CHECK(shard_mesh_make(&ch, 1, sizes, &mh, &err));
    CostModel cmh = {.cl = &ch, .mesh = &mh, .dtype = DT_BF16};
    sim_program_init(&p);
    coll(&p, SIM_COMPUTE, SIM_BACKWARD, 256);
    CHECK(sim_run(&p, &cmh, &r, &err));
    CHECK_NEAR(r.busy_s[SIM_COMPUTE], 20e-6, 1e-9);
    sim_result_free(&r);
    event(&p, SIM_RECORD, SIM_COMPUTE, SIM_BACKWARD, 0);
    event(&p, SIM_WAIT, SIM_COMM, SIM_BACKWARD, 0);
    coll(&p, SIM_COMM, SIM_BACKWARD, 256);
    event(&p, SIM_RECORD, SIM_COMM, SIM_BACKWARD, 1);
    event(&p, SIM_WAIT, SIM_COMPUTE, SIM_UPDATE, 1);
    CHECK(sim_run(&p, &cmh, &r, &err));
    CHECK_NEAR(r.busy_s[SIM_COMPUTE], 50e-6, 1e-9);
    CHECK_NEAR(r.busy_s[SIM_COMM], 50e-6, 1e-9);
    CHECK_NEAR(r.step_s, 100e-6, 1e-9);
    sim_result_free(&r);

    /* a reduce-scatter on the caller's thread there: the stream's 50 us too, ZeRO's
     * (marked z) or not; in a program that queues nothing, the caller's 20 us */
    SimOp *rs = coll(&p, SIM_COMPUTE, SIM_BACKWARD, 256);
    rs->coll = COLL_REDUCE_SCATTER;
    rs->zero = true;
    CHECK(sim_run(&p, &cmh, &r, &err));
    CHECK_NEAR(r.busy_s[SIM_COMPUTE], 50e-6 + 50e-6, 1e-9);
    CHECK_NEAR(r.coll_s[COLL_REDUCE_SCATTER][SIM_COMPUTE], 50e-6, 1e-9);
    sim_result_free(&r);
    rs->zero = false;
    CHECK(sim_run(&p, &cmh, &r, &err));
    CHECK_NEAR(r.coll_s[COLL_REDUCE_SCATTER][SIM_COMPUTE], 50e-6, 1e-9);
    sim_result_free(&r);
    sim_program_free(&p);
    sim_program_init(&p);
    rs = coll(&p, SIM_COMPUTE, SIM_BACKWARD, 256);
    rs->coll = COLL_REDUCE_SCATTER;
    rs->zero = true;
    CHECK(sim_run(&p, &cmh, &r, &err));
    CHECK_NEAR(r.step_s, 20e-6, 1e-9);
    sim_result_free(&r);
    /* "z" goes through the plan JSON */
    cJSON *pj = sim_program_to_json(&p, &ch);
    char *ptxt = cJSON_PrintUnformatted(pj);
    CHECK_CONTAINS(ptxt, "\"z\":1");
    SimProgram back;
    ShardCluster bc;
    CHECK(from_text(ptxt, &back, &bc, &err));
    CHECK(back.n == 1 && back.op[0].zero);
    sim_program_free(&back);
    cJSON_free(ptxt);
    cJSON_Delete(pj);
    sim_program_free(&p);

    /* a pipelined program: 2 stages of 4 devices of h100:1x8 (a stage's mesh [4]) */
    {
        ShardCluster whole = cl, sc = cl;
        CHECK(pipeline_submesh_cluster(&sc, 2, &err, &err));
        ShardMesh sm, pm;
        int four[1] = {4};
        CHECK(shard_mesh_make(&sc, 1, four, &sm, &err));
        CHECK(pipeline_link_mesh(&whole, 2, 4, &pm, &err));
        CostModel cp = {.cl = &sc, .mesh = &sm, .dtype = DT_BF16};
        double x = pipeline_p2p_time(&pm, 1e6), c = pipeline_coll_time(&pm, COLL_ALL_REDUCE, 2, 4);
        double f0 = cost_roofline(&cp, OPC_MATMUL, 1e12, 1e8), b0 = cost_roofline(&cp, OPC_MATMUL, 2e12, 1e8);
        double f1 = cost_roofline(&cp, OPC_MATMUL, 2e12, 1e8), b1 = cost_roofline(&cp, OPC_MATMUL, 4e12, 1e8);
        double u = cost_roofline(&cp, OPC_ELEMWISE, 0, 4e8), cpy = cost_copy(&cp, 1e8);
        CHECK(x > 0 && c > 0 && cpy > 0);
        SimProgram pp;
        SimResult rp;
        pipe_program(&pp, &whole, false, 1e6);
        CHECK(sim_run(&pp, &cp, &rp, &err));
        /* stage 0's backward runs its forward again (not kept, not the last stage) */
        double want = pipe_step(f0, f0 + b0, f1, b1, x, u, c);
        CHECK_NEAR(rp.step_s, want, 1e-12);
        CHECK_INT(rp.stages, 2);
        CHECK_INT(rp.st[0].n_p2p, 3);
        CHECK_INT(rp.st[1].n_p2p, 3);
        CHECK_NEAR(rp.st[0].busy_s, 2 * (f0 + f0 + b0), 1e-12);
        CHECK_NEAR(rp.st[0].again_s, 2 * f0, 1e-12);
        CHECK_NEAR(rp.st[1].busy_s, 2 * (f1 + b1), 1e-12);
        CHECK_NEAR(rp.st[0].end_s, want, 1e-12);
        CHECK_NEAR(rp.st[1].end_s, want, 1e-12); /* the all-reduce ends both */
        CHECK(rp.st[1].update_s > u + c);           /* stage 1 waited for stage 0 there */
        CHECK_NEAR(rp.bubble_fraction, 1 - (rp.st[0].busy_s + rp.st[1].busy_s) / (2 * want), 1e-12);
        sim_result_free(&rp);
        /* its JSON round-trips (version 3, the pipeline object) and replays the same */
        cJSON *pj2 = sim_program_to_json(&pp, &sc);
        char *ptx = cJSON_PrintUnformatted(pj2);
        CHECK_CONTAINS(ptx, "\"version\":3");
        CHECK_CONTAINS(ptx, "\"k\":\"p2p\"");
        SimProgram pb;
        ShardCluster pbc;
        CHECK(from_text(ptx, &pb, &pbc, &err));
        CHECK_INT(pb.stages, 2);
        CHECK(sim_run(&pb, &cp, &rp, &err));
        CHECK_NEAR(rp.step_s, want, 1e-12);
        sim_result_free(&rp);
        sim_program_free(&pb);
        /* pbad: a transfer outside the schedule's stages, a schedule kind, kept on the last stage */
        static const char *const pbad[][2] = {
            {"\"pa\":5", "\"pa\":2"}, {"[[0,0,0,0]", "[[7,0,0,0]"}, {"\"kept\":[0,0]", "\"kept\":[0,1]"},
            {"\"version\":3", "\"version\":4"}, {"\"k\":\"p2p\"", "\"k\":\"copy\""}};
        for (size_t bq = 0; bq < sizeof pbad / sizeof pbad[0]; bq++) {
            StrBuf t;
            bool found = replaced(ptx, pbad[bq][0], pbad[bq][1], &t);
            CHECK(found);
            if (!found) continue;
            StrBuf pe;
            sb_init(&pe);
            bool ok = from_text(sb_cstr(&t), &pb, &pbc, &pe);
            if (ok) { /* read: the replay refuses it */
                ok = sim_run(&pb, &cp, &rp, &pe);
                if (ok) sim_result_free(&rp);
                sim_program_free(&pb);
            }
            CHECK(!ok && pe.len > 0);
            sb_free(&pe);
            sb_free(&t);
        }
        cJSON_free(ptx);
        cJSON_Delete(pj2);
        sim_program_free(&pp);
        /* kept: stage 0 copies its activations out after the forward and back before the
         * backward, no forward again */
        pipe_program(&pp, &whole, true, 1e6);
        CHECK(sim_run(&pp, &cp, &rp, &err));
        CHECK_NEAR(rp.step_s, pipe_step(f0 + cpy, cpy + b0, f1, b1, x, u, c), 1e-12);
        CHECK_NEAR(rp.st[0].again_s, 0, 1e-15);
        sim_result_free(&rp);
        sim_program_free(&pp);

        /* interleaved: 2 devices x 2 chunks, as the planner replays the same tables */
        for (int mb = 2; mb <= 4; mb += 2) {
            ileave_program(&pp, &whole, mb, 1e6);
            CHECK(sim_run(&pp, &cp, &rp, &err));
            double fv[4], bv[4], xv[4] = {x, x, x, x}, end[2];
            bool rerun = pipeline_last_reruns(2, 2, mb);
            CHECK(rerun == (mb == 2));
            for (int v = 0; v < 4; v++) {
                fv[v] = cost_roofline(&cp, OPC_MATMUL, (v + 1) * 1e12, 1e8);
                /* the backward after the forward again (the last virtual stage only where it reruns) */
                bv[v] = cost_roofline(&cp, OPC_MATMUL, (v + 1) * 2e12, 1e8) + (v < 3 || rerun ? fv[v] : 0);
            }
            double t = pipeline_replay_v(2, 2, mb, fv, bv, xv, end, NULL, NULL);
            CHECK_NEAR(rp.step_s, t + u, 1e-12);
            CHECK_INT(rp.stages, 2);
            CHECK_INT(rp.chunks, 2);
            CHECK_NEAR(rp.st[0].end_s, end[0] + u, 1e-12);
            CHECK_NEAR(rp.st[1].end_s, end[1] + u, 1e-12);
            CHECK(rp.st[0].n_p2p > 0 && rp.st[1].n_p2p > 0);
            sim_result_free(&rp);
            cJSON *ij = sim_program_to_json(&pp, &sc);
            char *itx = cJSON_PrintUnformatted(ij);
            CHECK_CONTAINS(itx, "\"version\":3");
            CHECK_CONTAINS(itx, "\"chunks\":2");
            SimProgram ib;
            ShardCluster ibc;
            CHECK(from_text(itx, &ib, &ibc, &err));
            CHECK(sim_run(&ib, &cp, &rp, &err));
            CHECK_NEAR(rp.step_s, t + u, 1e-12);
            sim_result_free(&rp);
            sim_program_free(&ib);
            /* a message of a virtual stage the pipeline lacks, and a forward of a chunk it lacks */
            static const char *const ibad[][2] = {{"[4,0,0,1,0,0,0,0]", "[4,0,0,1,0,0,7,0]"}, {"[[0,0,0]", "[[0,5,0]"}};
            for (size_t bq = 0; bq < sizeof ibad / sizeof ibad[0]; bq++) {
                StrBuf t2, pe;
                bool found = replaced(itx, ibad[bq][0], ibad[bq][1], &t2);
                CHECK(found);
                if (!found) continue;
                sb_init(&pe);
                CHECK(!from_text(sb_cstr(&t2), &ib, &ibc, &pe));
                CHECK_CONTAINS(sb_cstr(&pe), "program.pipeline.schedule[");
                sb_free(&t2), sb_free(&pe);
            }
            cJSON_free(itx);
            cJSON_Delete(ij);
            sim_program_free(&pp);
        }
    }
    sb_free(&err);
    return check_done("test_sim");
}

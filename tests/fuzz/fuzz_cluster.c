/*
 * fuzz_cluster.c — libFuzzer target for cluster JSON (--cluster FILE.json,
 * shard/cluster.c): any input is rejected with a message, or gives
 * a cluster whose sizes are positive, finite and within SHARD_MAX_DEVICES
 * (and a host, when it has one, with its three figures positive and finite
 * and its transfers in flight from 1 to SHARD_INFLIGHT_MAX, none without;
 * every rate table, the kernel classes' and the attention kernels', of 0 to
 * SHARD_RATE_POINTS points with sizes strictly increasing from 1 and rates
 * positive and finite; the measured collective tables' times positive, finite
 * and monotone, their hand-off finite and at least 0), which is written back as
 * JSON the loader reads again.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rates(const ShardRateTable *t) {
    if (t->n < 0 || t->n > SHARD_RATE_POINTS) abort();
    for (int i = 0; i < t->n; i++)
        if (!(t->size[i] >= 1) || !isfinite(t->size[i]) || (i && !(t->size[i] > t->size[i - 1])) ||
            !(t->rate[i] > 0) || !isfinite(t->rate[i]))
            abort();
    if (t->n > 0 && !(shard_rate_at(t, 1e4) > 0)) abort();
}

/* a link's measured collective tables: none (ranks 0, no points), or ranks
 * from 2 and every kind 2 to SHARD_COLL_POINTS points, bytes strictly
 * increasing from 1, times positive, finite and non-decreasing, so every
 * price is positive and finite; its hand-off finite and at least 0 */
static void check_colls(const ShardCollLink *l) {
    if (!(l->handoff >= 0) || !isfinite(l->handoff)) abort();
    if (l->ranks == 0) {
        for (int k = 0; k < SHARD_COLL_KINDS; k++)
            if (l->kind[k].n) abort();
        return;
    }
    if (l->ranks < 2 || l->ranks > SHARD_MAX_DEVICES) abort();
    for (int k = 0; k < SHARD_COLL_KINDS; k++) {
        const ShardCollTable *t = &l->kind[k];
        if (t->n < 2 || t->n > SHARD_COLL_POINTS) abort();
        for (int i = 0; i < t->n; i++)
            if (!(t->bytes[i] >= 1) || !isfinite(t->bytes[i]) || (i && !(t->bytes[i] > t->bytes[i - 1])) ||
                !(t->seconds[i] > 0) || !isfinite(t->seconds[i]) || (i && t->seconds[i] < t->seconds[i - 1]))
                abort();
        double at[3] = {1, 1e6, 1e12};
        for (int i = 0; i < 3; i++) {
            double s = shard_coll_table_at(t, at[i]);
            if (!(s > 0) || !isfinite(s)) abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    ShardCluster c;
    StrBuf err;
    sb_init(&err);
    if (shard_cluster_from_json(text, "fuzz.json", &c, &err)) {
        if (c.nodes < 1 || c.per_node < 1 || (int64_t)c.nodes * c.per_node > SHARD_MAX_DEVICES) abort();
        if (!(c.mem_bytes > 0) || !isfinite(c.mem_bytes) || !isfinite(c.intra_bw) || !isfinite(c.inter_bw)) abort();
        if (shard_cluster_devices(&c) < 1) abort();
        /* the host (offload): absent, or all three positive and finite */
        bool host = c.host_mem_bytes != 0 || c.pcie_bw != 0 || c.host_adamw_rate != 0;
        if (host && (!(c.host_mem_bytes > 0) || !isfinite(c.host_mem_bytes) || !(c.pcie_bw > 0) ||
                     !isfinite(c.pcie_bw) || !(c.host_adamw_rate > 0) || !isfinite(c.host_adamw_rate)))
            abort();
        if (host ? c.host_inflight < 1 || c.host_inflight > SHARD_INFLIGHT_MAX : c.host_inflight != 0) abort();
        /* its per-call costs: finite, >= 0, at most SHARD_HOST_LAT_US_MAX */
        if (!(c.host_copy_lat >= 0) || !(c.host_call_lat >= 0) || c.host_copy_lat > SHARD_HOST_LAT_US_MAX * 1e-6 ||
            c.host_call_lat > SHARD_HOST_LAT_US_MAX * 1e-6)
            abort();
        for (int k = 0; k < SHARD_K__COUNT; k++) check_rates(&c.kernel[k]);
        for (int k = 0; k < SHARD_ATT__COUNT; k++) check_rates(&c.attention[k]);
        for (int l = 0; l < 2; l++) check_colls(&c.coll[l]);
        /* written back, it loads again */
        cJSON *j = shard_cluster_to_json(&c);
        char *back = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        ShardCluster c2;
        StrBuf e2;
        sb_init(&e2);
        if (!shard_cluster_from_json(back, "back.json", &c2, &e2)) abort();
        sb_free(&e2);
        cJSON_free(back);
    } else if (!err.len) {
        abort(); /* a refusal says why */
    }
    sb_free(&err);
    free(text);
    return 0;
}

/*
 * fuzz_cluster.c — libFuzzer target for cluster JSON (--cluster FILE.json,
 * shard/cluster.c): any input is rejected with a message, or gives
 * a cluster whose sizes are positive, finite and within SHARD_MAX_DEVICES
 * (and a host, when it has one, with its three figures positive and finite
 * and its transfers in flight from 1 to SHARD_INFLIGHT_MAX; none without).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    } else if (!err.len) {
        abort(); /* a refusal says why */
    }
    sb_free(&err);
    free(text);
    return 0;
}

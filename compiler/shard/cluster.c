/*
 * cluster.c — what the devices are: built-in presets (vendor figures, cited
 * in docs/sharding.md), `preset:NODESxPER_NODE` shorthands, and JSON cluster
 * files read with cJSON. Gives a ShardCluster; every figure is checked
 * positive, and a bad one is reported by its field name.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "shard.h"

#define TERA 1e12
#define GIGA 1e9

/* name, device, memory GB, f32 / bf16 / f16 dense TFLOP/s, memory GB/s,
 * NVLink GB/s per direction, InfiniBand Gb/s per GPU, devices per node,
 * intra- and inter-node latency (us). Sources: NVIDIA A100 datasheet
 * (2021), H100 datasheet (2023), H200 product brief (2024), DGX A100 / DGX
 * H100 user guides (one HDR / NDR port per GPU). The GPU latencies are
 * assumptions (typical NCCL per-step latency), not vendor figures: a
 * calibration run on real hardware replaces them.
 *
 * `cpu`: one colrt CPU rank (one core, OMP_NUM_THREADS=1, `mpirun -np N` on
 * one machine), a PROVISIONAL calibration measured on this project's 2-core
 * development machine (issue 15 replaces it with colossal-calibrate's
 * tables), best of repeated runs while other jobs shared the machine:
 *   compute:  OMP_NUM_THREADS=1 build/bench/runtime/bench_kernels --tokens 256 --reps 3
 *             (the best GEMM at GPT-2 shapes: f32 ~0.10 TFLOP/s, bf16 ~0.09; f16 takes bf16's: not measured)
 *   memory:   the same run's memory-bound kernels (layer_norm, gelu, adamw): ~3 GB/s effective
 *   network:  mpirun -np 2 build/bench/runtime/bench_collectives --min-kb 1 --max-mb 16 --reps 20
 *             (shared memory: all-reduce 1 KB 1 us, 16 KB 17 us, 256 KB 147 us, 4 MB 1.42 ms: ~3 GB/s
 *             and ~10 us, the alpha-beta line through the middle sizes)
 *   inter:    no second node here: 10 Gb/s Ethernet and 50 us, an assumption
 *   memory:   8 GB per rank (this machine's 23 GB, two ranks, room for the system) */
#define PRESETS(X)                                                                    \
    X("a100-40gb", "A100-SXM4-40GB", 40, 19.5, 312, 312, 1555, 300, 200, 8, 2, 5)     \
    X("a100-80gb", "A100-SXM4-80GB", 80, 19.5, 312, 312, 2039, 300, 200, 8, 2, 5)     \
    X("h100", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)        \
    X("h100-sxm", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)    \
    X("h100-80gb", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)   \
    X("h200", "H200-SXM-141GB", 141, 67, 989.5, 989.5, 4800, 450, 400, 8, 2, 5)       \
    X("cpu", "CPU-rank", 8, 0.10, 0.09, 0.09, 3, 3, 10, 1, 10, 50)

int shard_cluster_devices(const ShardCluster *c) { return c->nodes * c->per_node; }

bool shard_cluster_preset(const char *name, ShardCluster *c, StrBuf *err) {
    memset(c, 0, sizeof *c);
#define X(nm, dev, gb, f32, bf16, f16, bw, nvl, ib, per, lat_in, lat_out) \
    if (!strcmp(name, nm)) {                                         \
        snprintf(c->device, sizeof c->device, "%s", dev);            \
        c->nodes = 1;                                                \
        c->per_node = per;                                           \
        c->mem_bytes = (gb) * GIGA;                                  \
        c->peak_flops[DT_F32] = (f32) * TERA;                        \
        c->peak_flops[DT_BF16] = (bf16) * TERA;                      \
        c->peak_flops[DT_F16] = (f16) * TERA;                        \
        c->peak_flops[DT_I32] = (f32) * TERA;                        \
        c->mem_bw = (bw) * GIGA;                                     \
        c->intra_lat = (lat_in) * 1e-6;                              \
        c->intra_bw = (nvl) * GIGA;                                  \
        c->inter_lat = (lat_out) * 1e-6;                             \
        c->inter_bw = (ib) * GIGA / 8;                               \
        return true;                                                 \
    }
    PRESETS(X)
#undef X
    sb_printf(err, "unknown cluster preset '%s'", name);
    return false;
}

/* ---- JSON ------------------------------------------------------------------ */

static bool num_field(const cJSON *obj, const char *path, const char *key, double scale,
                      double *out, StrBuf *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        sb_printf(err, "missing field '%s%s'", path, key);
        return false;
    }
    if (!cJSON_IsNumber(v)) {
        sb_printf(err, "field '%s%s' must be a number", path, key);
        return false;
    }
    if (!(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
        sb_printf(err, "field '%s%s' must be positive, got %g", path, key, v->valuedouble);
        return false;
    }
    if (v->valuedouble * scale > 1e30) {
        sb_printf(err, "field '%s%s' is %g, more than any device has", path, key, v->valuedouble);
        return false;
    }
    *out = v->valuedouble * scale;
    return true;
}

static bool int_field(const cJSON *obj, const char *key, int *out, StrBuf *err) {
    double d;
    if (!num_field(obj, "", key, 1, &d, err)) return false;
    if (d != floor(d) || d > 1e6) {
        sb_printf(err, "field '%s' must be a whole number, got %g", key, d);
        return false;
    }
    *out = (int)d;
    return true;
}

static bool link_field(const cJSON *root, const char *key, double *lat, double *bw, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsObject(o)) {
        sb_printf(err, o ? "field '%s' must be an object" : "missing field '%s'", key);
        return false;
    }
    char path[32];
    snprintf(path, sizeof path, "%s.", key);
    return num_field(o, path, "latency_us", 1e-6, lat, err) &&
           num_field(o, path, "bandwidth_gbs", GIGA, bw, err);
}

bool shard_cluster_from_json(const char *text, const char *where, ShardCluster *c, StrBuf *err) {
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && *p; p++) line += *p == '\n';
        sb_printf(err, "%s: malformed JSON near line %d", where, line);
        return false;
    }
    bool ok = cJSON_IsObject(root);
    if (!ok) sb_printf(err, "%s: the cluster must be a JSON object", where);
    const cJSON *dev = ok ? cJSON_GetObjectItemCaseSensitive(root, "device") : NULL;
    if (ok && !cJSON_IsString(dev)) {
        sb_printf(err, "%s: %s field 'device' (a name string)", where, dev ? "bad" : "missing");
        ok = false;
    }
    StrBuf e;
    sb_init(&e);
    if (ok) {
        snprintf(c->device, sizeof c->device, "%s", dev->valuestring);
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(root, "peak_tflops");
        ok = int_field(root, "nodes", &c->nodes, &e) &&
             int_field(root, "per_node", &c->per_node, &e) &&
             num_field(root, "", "memory_gb", GIGA, &c->mem_bytes, &e) &&
             num_field(root, "", "mem_bw_gbs", GIGA, &c->mem_bw, &e) &&
             link_field(root, "intra", &c->intra_lat, &c->intra_bw, &e) &&
             link_field(root, "inter", &c->inter_lat, &c->inter_bw, &e);
        if (ok && !cJSON_IsObject(pk)) {
            sb_printf(&e, pk ? "field 'peak_tflops' must be an object"
                             : "missing field 'peak_tflops'");
            ok = false;
        }
        ok = ok && num_field(pk, "peak_tflops.", "f32", TERA, &c->peak_flops[DT_F32], &e) &&
             num_field(pk, "peak_tflops.", "bf16", TERA, &c->peak_flops[DT_BF16], &e) &&
             num_field(pk, "peak_tflops.", "f16", TERA, &c->peak_flops[DT_F16], &e);
        c->peak_flops[DT_I32] = c->peak_flops[DT_F32];
        if (ok && (int64_t)c->nodes * c->per_node > SHARD_MAX_DEVICES) {
            sb_printf(&e, "%d nodes x %d per node is more than %d devices", c->nodes, c->per_node, SHARD_MAX_DEVICES);
            ok = false;
        }
        if (!ok) sb_printf(err, "%s: %s", where, sb_cstr(&e));
    }
    sb_free(&e);
    cJSON_Delete(root);
    return ok;
}

/* ---- the --cluster argument ------------------------------------------------ */

static bool parse_shape(const char *s, int *nodes, int *per) {
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10);
    if (errno || end == s || *end != 'x' || a <= 0 || a > 1000000) return false;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (errno || end == p || *end || b <= 0 || b > 1024) return false;
    if (a * b > SHARD_MAX_DEVICES) return false;
    *nodes = (int)a;
    *per = (int)b;
    return true;
}

bool shard_cluster_load(const char *arg, ShardCluster *c, StrBuf *err, StrBuf *hint) {
    size_t n = strlen(arg);
    if (n > 5 && !strcmp(arg + n - 5, ".json")) {
        size_t len;
        char *text = ir_read_file(arg, &len);
        if (!text) {
            sb_printf(err, "cannot read cluster file '%s': %s", arg, ir_strerror(errno));
            if (hint) sb_puts(hint, "check the path");
            return false;
        }
        bool ok = shard_cluster_from_json(text, arg, c, err);
        ir_free(text);
        if (!ok && hint)
            sb_puts(hint, "see docs/sharding.md for the cluster file's fields");
        return ok;
    }
    char name[64];
    const char *colon = strchr(arg, ':');
    size_t nl = colon ? (size_t)(colon - arg) : n;
    if (nl >= sizeof name) nl = sizeof name - 1;
    for (size_t i = 0; i < nl; i++) name[i] = (char)tolower((unsigned char)arg[i]);
    name[nl] = 0;
    if (!shard_cluster_preset(name, c, err)) {
        if (hint)
            sb_puts(hint, "presets: a100-40gb, a100-80gb, h100 (h100-sxm), h200, cpu (CPU ranks), optionally "
                          "with :NODESxGPUS (h100:8x8, cpu:1x2), or a FILE.json");
        return false;
    }
    if (colon && !parse_shape(colon + 1, &c->nodes, &c->per_node)) {
        sb_printf(err, "invalid cluster shape '%s' in '%s'", colon + 1, arg);
        if (hint) sb_puts(hint, "write NODESxGPUS_PER_NODE with positive numbers (at most 1048576 devices), e.g. h100:8x8");
        return false;
    }
    return true;
}

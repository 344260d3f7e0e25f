/*
 * cluster.c — what the devices are: built-in presets (the GPUs' vendor
 * figures and the `cpu` preset's calibration file, cited in
 * docs/sharding.md), `preset:NODESxPER_NODE` shorthands, and JSON cluster
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
 * calibration run on real hardware replaces them. The `cpu` preset is not a
 * row: it is a calibration file (cpu_preset below). */
#define PRESETS(X)                                                                    \
    X("a100-40gb", "A100-SXM4-40GB", 40, 19.5, 312, 312, 1555, 300, 200, 8, 2, 5)     \
    X("a100-80gb", "A100-SXM4-80GB", 80, 19.5, 312, 312, 2039, 300, 200, 8, 2, 5)     \
    X("h100", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)        \
    X("h100-sxm", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)    \
    X("h100-80gb", "H100-SXM5-80GB", 80, 67, 989.5, 989.5, 3350, 450, 400, 8, 2, 5)   \
    X("h200", "H200-SXM-141GB", 141, 67, 989.5, 989.5, 4800, 450, 400, 8, 2, 5)

/* `cpu`: one colrt CPU rank (one core, OMP_NUM_THREADS=1, `mpirun -np N` on
 * one machine): our calibration of this project's 2-core development machine
 * (host "AMD EPYC", idle), committed as
 * bench/validate/testdata/cpu-idle-1x2-2030.json (OMP_NUM_THREADS=1 mpirun
 * --oversubscribe --bind-to none -np 2 colossal-calibrate,
 * 2026-12-05T20:32Z; bench/validate/README.md's 20:30 table, 11 of 12
 * programs predicted within 15 % with it). The file's bytes are built into the
 * library (shard/CMakeLists.txt: cpu_preset.inc) and read by
 * shard_cluster_from_json, as `--cluster FILE.json` would read it, so every
 * measured figure is the file's: peaks, memory rate, the link between ranks
 * and its collective tables by bytes with the stream hand-off (handoff_us
 * 17.0), overlap_slowdown (0.169), the GEMM, kernel and attention tables, the
 * per-process reserve, the host's copy rate and AdamW rate. The preset then
 * sets what the file does not measure or measures for another purpose:
 *   shape:    one rank a node (`cpu:1x2` for two; the file ran 1x2)
 *   memory:   8 GB per rank (this machine's 23 GB, two ranks, room for the system; the file's
 *             12.6 GB is the host's memory over the ranks, with nothing left for the system)
 *   host:     6 GB (the 23 GB less two 8 GB ranks and 1 GB for the system; the file's 25.3 GB
 *             is the whole host's)
 *   inter:    no second node here (the file's `inter` repeats `intra`): 10 Gb/s Ethernet and
 *             50 us, an assumption
 *   host per-call costs: the file predates them (it would get the GPU defaults);
 *             colossal-calibrate --quick on this machine, 2026-12-06 04:43 UTC, load 3.9-4.8,
 *             the same command as the file's (OMP_NUM_THREADS=1 and unset, 2 ranks, four
 *             runs): a copy 0.28-0.43 us in three runs (13.9 us in a fifth, loaded, and 3.3
 *             in one), a host AdamW call 0.73-0.80 us in all: 0.4 and 0.75 */
#define CPU_MEMORY_GB 8
#define CPU_HOST_GB 6
#define CPU_HOST_COPY_US 0.4
#define CPU_HOST_CALL_US 0.75
#define CPU_INTER_GBITS 10
#define CPU_INTER_LAT_US 50
static const char cpu_preset_json[] = {
#include "cpu_preset.inc"
    0};

static bool cpu_preset(ShardCluster *c, StrBuf *err) {
    if (!shard_cluster_from_json(cpu_preset_json, "the cpu preset (" COLOSSAL_CPU_PRESET_NAME ")", c, err))
        return false;
    c->nodes = 1;
    c->per_node = 1;
    c->mem_bytes = CPU_MEMORY_GB * GIGA;
    c->host_mem_bytes = CPU_HOST_GB * GIGA;
    c->host_copy_lat = CPU_HOST_COPY_US * 1e-6;
    c->host_call_lat = CPU_HOST_CALL_US * 1e-6;
    c->inter_lat = CPU_INTER_LAT_US * 1e-6;
    c->inter_bw = CPU_INTER_GBITS * GIGA / 8;
    return true;
}

/* Per-device reserve of the GPU presets, MiB (docs/sharding.md, "Memory
 * reserve"): the CUDA context (an assumption until calibrated: 512 MiB) plus
 * the kernel stack colrt reserves (cudaLimitStackSize 1 KiB x 2048 resident
 * threads per SM x the SMs, NVIDIA's data sheets: 108 on A100 = 216 MiB, 132
 * on H100/H200 = 264 MiB),
 * NCCL's buffers (NCCL_BUFFSIZE, 4 MiB by default, send and receive, per
 * channel: 2 x 4 MiB x 16-32 channels x the runtime's 2-4 communicators,
 * estimated at 256 MiB on A100 and 512 MiB on Hopper), and the cuBLAS(Lt)
 * workspace (the cuBLAS guide's cublasSetWorkspace: 4 MiB, 32 MiB on Hopper).
 * Matched by the start of the preset's name; other presets reserve nothing. */
#define RESERVES(X)       \
    X("a100", 512 + 216, 256, 4) \
    X("h100", 512 + 264, 512, 32) \
    X("h200", 512 + 264, 512, 32)
#define MIB 1048576.0

/* The host beside the GPUs (host offload), matched by the start of the
 * preset's name: host memory per node GB, PCIe GB/s per direction per
 * device, host AdamW 1e9 elements/s per device (the `cpu` preset's host is
 * its file's, cpu_preset above).
 *   memory: NVIDIA DGX A100 datasheet (320 GB system: 1 TB, 640 GB: 2 TB),
 *           DGX H100 and DGX H200 user guides (2 TB).
 *   PCIe:   the PCI Express 4.0 / 5.0 x16 link rate, per direction (16 and
 *           32 GT/s x 16 lanes, 128b/130b: 31.5 and 63 GB/s; A100: Gen4,
 *           H100/H200: Gen5 per their datasheets).
 *   AdamW:  the host AdamW is bound by host memory bandwidth (bench/offload:
 *           28 bytes per element; it moves 20 GB/s on one core here, the
 *           machine's copy rate), so a node's rate is its memory bandwidth
 *           / 28 B, shared by its GPUs: DGX A100, 2 AMD EPYC 7742 x 8
 *           channels DDR4-3200 (204.8 GB/s per socket, AMD's specification):
 *           409.6 / 28 / 8 = 1.8e9; DGX H100/H200, 2 Intel Xeon 8480C x 8
 *           channels DDR5-4800 (307.2 GB/s per socket, Intel's
 *           specification): 614.4 / 28 / 8 = 2.7e9. Peak bandwidths: an
 *           assumption until calibrated. */
#define HOSTS(X)                  \
    X("a100-40gb", 1000, 31.5, 1.8) \
    X("a100-80gb", 2000, 31.5, 1.8) \
    X("h100", 2000, 63, 2.7)        \
    X("h200", 2000, 63, 2.7)

/* GPU presets' GEMM tables: one GEMM of F FLOPs takes a fixed GEMM_T0_S
 * (launch and tail, an assumption until calibrated) plus F at GEMM_EFF of
 * peak, so eff(F) = GEMM_EFF * F / (F + GEMM_T0_S * GEMM_EFF * peak); tabled
 * at every decade from 1e6 to 1e13 FLOPs. */
#define GEMM_EFF 0.70
#define GEMM_T0_S 5e-6

/* Contention on the GPU presets (ShardCluster.overlap_slowdown): compute
 * kernels ran 18.9 % slower on average while NCCL collectives overlapped them
 * (Lee et al., "Characterizing Compute-Communication Overlap in GPU-Accelerated
 * Distributed Deep Learning", arXiv:2507.03114, 2025: GPT and LLaMA training on
 * 4 A100, H100, MI250 and MI210; the mean over their runs, the largest 40 %). An
 * assumption per device until calibrated (colossal-calibrate measures it). */
#define GPU_OVERLAP_SLOWDOWN 0.189
/* overlap_slowdown's limit in a cluster file: 10 (a kernel 11x slower beside a
 * collective is a measurement gone wrong) */
#define OVERLAP_SLOWDOWN_MAX 10

/* A GPU preset's host, reserve, contention and GEMM tables. */
static void preset_extras(const char *name, ShardCluster *c) {
    bool gpu = false, host = false;
#define X(pre, gb, pcie, rate)                                      \
    if (!host && !strncmp(name, pre, strlen(pre))) {                \
        c->host_mem_bytes = (gb) * GIGA;                            \
        c->pcie_bw = (pcie) * GIGA;                                 \
        c->host_adamw_rate = (rate) * 1e9;                          \
        c->host_inflight = SHARD_INFLIGHT_DEFAULT;                  \
        c->host_copy_lat = SHARD_HOST_COPY_US_DEFAULT * 1e-6;       \
        c->host_call_lat = SHARD_HOST_CALL_US_DEFAULT * 1e-6;       \
        host = true;                                                \
    }
    HOSTS(X)
#undef X
#define X(pre, ctx, comm, ws)                          \
    if (!gpu && !strncmp(name, pre, strlen(pre))) {    \
        c->reserve_context = (ctx) * MIB;              \
        c->reserve_comm = (comm) * MIB;                \
        c->reserve_workspace = (ws) * MIB;             \
        c->overlap_slowdown = GPU_OVERLAP_SLOWDOWN;    \
        gpu = true;                                    \
    }
    RESERVES(X)
#undef X
    IR_ASSERT(gpu && host); /* every PRESETS row has its RESERVES and HOSTS rows */
    for (int d = 0; d < DT__COUNT; d++) {
        ShardEffTable *t = &c->gemm[d];
        double knee = GEMM_T0_S * GEMM_EFF * c->peak_flops[d];
        t->n = 8;
        for (int i = 0; i < t->n; i++) {
            t->flops[i] = pow(10, 6 + i);
            t->eff[i] = GEMM_EFF * t->flops[i] / (t->flops[i] + knee);
        }
    }
}

int shard_cluster_devices(const ShardCluster *c) { return c->nodes * c->per_node; }

double shard_overlap_paid(const ShardCluster *c) {
    double s = c->overlap_slowdown;
    return s > 0 ? s / (1 + s) : 0;
}

double shard_cluster_reserve(const ShardCluster *c) {
    return c->reserve_context + c->reserve_comm + c->reserve_workspace;
}

double shard_gemm_eff(const ShardCluster *c, DType dt, double flops) {
    const ShardEffTable *t = &c->gemm[dt < DT__COUNT ? dt : DT_F32];
    if (t->n <= 0) return GEMM_EFF;
    if (!(flops > t->flops[0])) return t->eff[0];
    if (flops >= t->flops[t->n - 1]) return t->eff[t->n - 1];
    int i = 1;
    while (t->flops[i] < flops) i++;
    double u = log(flops / t->flops[i - 1]) / log(t->flops[i] / t->flops[i - 1]);
    return t->eff[i - 1] + u * (t->eff[i] - t->eff[i - 1]);
}

bool shard_eff_check(const ShardEffTable *t, const char *field, StrBuf *err) {
    if (t->n < 1 || t->n > SHARD_EFF_POINTS) {
        sb_printf(err, "field '%s' must have 1 to %d points, got %d", field, SHARD_EFF_POINTS, t->n);
        return false;
    }
    for (int i = 0; i < t->n; i++) {
        if (!isfinite(t->flops[i]) || !(t->flops[i] > 0)) {
            sb_printf(err, "field '%s.flops[%d]' must be a positive finite number, got %g", field, i,
                      t->flops[i]);
            return false;
        }
        if (!isfinite(t->eff[i]) || !(t->eff[i] > 0) || t->eff[i] > 1) {
            sb_printf(err, "field '%s.efficiency[%d]' must be in (0, 1], got %g", field, i, t->eff[i]);
            return false;
        }
        if (i && !(t->flops[i] > t->flops[i - 1])) {
            sb_printf(err, "field '%s.flops[%d]' must be larger than the entry before (%g after %g)",
                      field, i, t->flops[i], t->flops[i - 1]);
            return false;
        }
        if (i && t->eff[i] < t->eff[i - 1]) {
            sb_printf(err, "field '%s.efficiency[%d]' must not decrease (%g after %g): the table "
                           "must be monotone",
                      field, i, t->eff[i], t->eff[i - 1]);
            return false;
        }
    }
    return true;
}

bool shard_cluster_preset(const char *name, ShardCluster *c, StrBuf *err) {
    if (!strcmp(name, "cpu")) return cpu_preset(c, err);
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
        preset_extras(name, c);                                      \
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
    /* sizes and rates (scale >= 1: bytes, bytes/s, FLOP/s, counts) below one
     * unit make times of 1e300 s and more: a rate of 5e-324 GB/s gave the ILP
     * infinite coefficients and GLPK aborted */
    if (scale >= 1 && v->valuedouble * scale < 1) {
        sb_printf(err, "field '%s%s' is %g, less than any device has", path, key, v->valuedouble);
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

/* A reserve entry: a finite number >= 0, in MiB. */
static bool reserve_field(const cJSON *o, const char *key, double *out, StrBuf *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > 1e9) {
        sb_printf(err, v ? "field 'reserve_mb.%s' must be a finite number of MiB >= 0"
                         : "missing field 'reserve_mb.%s'",
                  key);
        return false;
    }
    *out = v->valuedouble * MIB;
    return true;
}

static bool reserve_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "reserve_mb");
    if (!cJSON_IsObject(o)) {
        sb_printf(err, o ? "field 'reserve_mb' must be an object"
                         : "missing field 'reserve_mb' (context, communicator, workspace in MiB)");
        return false;
    }
    if (!reserve_field(o, "context", &c->reserve_context, err) ||
        !reserve_field(o, "communicator", &c->reserve_comm, err) ||
        !reserve_field(o, "workspace", &c->reserve_workspace, err))
        return false;
    if (shard_cluster_reserve(c) >= c->mem_bytes) {
        sb_printf(err, "field 'reserve_mb' leaves no memory: %.0f MiB reserved of %.0f MiB",
                  shard_cluster_reserve(c) / MIB, c->mem_bytes / MIB);
        return false;
    }
    return true;
}

/* An optional per-call cost of the host object, in microseconds: finite, >= 0, at
 * most SHARD_HOST_LAT_US_MAX; absent: def. */
static bool lat_field(const cJSON *o, const char *key, double def, double *out, StrBuf *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def * 1e-6;
    if (!v) return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > SHARD_HOST_LAT_US_MAX) {
        if (cJSON_IsNumber(v))
            sb_printf(err, "field 'host.%s' must be a finite number of microseconds from 0 to %g, got %g", key,
                      SHARD_HOST_LAT_US_MAX, v->valuedouble);
        else
            sb_printf(err, "field 'host.%s' must be a number of microseconds", key);
        return false;
    }
    *out = v->valuedouble * 1e-6;
    return true;
}

/* The optional host: {"memory_gb", "pcie_gbs", "adamw_gelems"}, all three
 * positive, and optionally "transfers_in_flight", a whole number from 1 to
 * SHARD_INFLIGHT_MAX (SHARD_INFLIGHT_DEFAULT when absent), "copy_latency_us" and
 * "call_latency_us" (SHARD_HOST_COPY_US_DEFAULT, SHARD_HOST_CALL_US_DEFAULT when
 * absent); absent: no host offload on this cluster. */
static bool host_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "host");
    if (!o) return true;
    if (!cJSON_IsObject(o)) {
        sb_printf(err, "field 'host' must be an object {\"memory_gb\", \"pcie_gbs\", \"adamw_gelems\"}");
        return false;
    }
    if (!num_field(o, "host.", "memory_gb", GIGA, &c->host_mem_bytes, err) ||
        !num_field(o, "host.", "pcie_gbs", GIGA, &c->pcie_bw, err) ||
        !num_field(o, "host.", "adamw_gelems", 1e9, &c->host_adamw_rate, err) ||
        !lat_field(o, "copy_latency_us", SHARD_HOST_COPY_US_DEFAULT, &c->host_copy_lat, err) ||
        !lat_field(o, "call_latency_us", SHARD_HOST_CALL_US_DEFAULT, &c->host_call_lat, err))
        return false;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "transfers_in_flight");
    c->host_inflight = SHARD_INFLIGHT_DEFAULT;
    if (!k) return true;
    if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble) || k->valuedouble != floor(k->valuedouble) ||
        k->valuedouble < 1 || k->valuedouble > SHARD_INFLIGHT_MAX) {
        if (cJSON_IsNumber(k))
            sb_printf(err, "field 'host.transfers_in_flight' must be a whole number from 1 to %d, got %g",
                      SHARD_INFLIGHT_MAX, k->valuedouble);
        else
            sb_printf(err, "field 'host.transfers_in_flight' must be a whole number from 1 to %d", SHARD_INFLIGHT_MAX);
        return false;
    }
    c->host_inflight = (int)k->valuedouble;
    return true;
}

int shard_cluster_inflight(const ShardCluster *c, int flag) {
    return flag > 0 ? flag : c->host_inflight > 0 ? c->host_inflight : SHARD_INFLIGHT_DEFAULT;
}

const char *shard_kernel_name(ShardKernel k) {
    static const char *const names[] = {
#define X(id, name) name,
        SHARD_KERNELS(X)
#undef X
    };
    return (int)k >= 0 && k < SHARD_K__COUNT ? names[k] : "?";
}

int shard_kernel_fallback(ShardKernel k) {
    if (k == SHARD_K_RMSNORM) return SHARD_K_NORM;
    return k == SHARD_K_ROPE || k == SHARD_K_SILU ? SHARD_K_TRANSCENDENTAL : -1;
}

const char *shard_attention_name(ShardAttention k) {
    static const char *const names[] = {
#define X(id, name) name,
        SHARD_ATTENTIONS(X)
#undef X
    };
    return (int)k >= 0 && k < SHARD_ATT__COUNT ? names[k] : "?";
}

double shard_rate_at(const ShardRateTable *t, double size) {
    if (t->n < 1) return 0;
    if (t->n == 1 || size <= t->size[0]) return t->rate[0];
    if (size >= t->size[t->n - 1]) return t->rate[t->n - 1];
    int i = 1;
    while (size > t->size[i]) i++;
    double f = log(size / t->size[i - 1]) / log(t->size[i] / t->size[i - 1]);
    return t->rate[i - 1] + f * (t->rate[i] - t->rate[i - 1]);
}

/* What a rate table's file form counts: its sizes' key, its rates' key and
 * the rates' unit (kernel_gbs: bytes and GB/s; attention_tflops: FLOPs and
 * TFLOP/s). */
typedef struct RateUnits {
    const char *size_key, *rate_key, *rate_name;
    double scale;
} RateUnits;
static const RateUnits GBS = {"bytes", "gbs", "GB/s", GIGA}, TFLOPS = {"flops", "tflops", "TFLOP/s", TERA};

/* One rate: a finite positive number of the unit, at most 1e30 and at least 1
 * per second. */
static bool rate_value(const cJSON *v, const char *field, const RateUnits *u, double *out, StrBuf *err) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 0)) {
        sb_printf(err, "field '%s' must be a positive number of %s", field, u->rate_name);
        return false;
    }
    if (v->valuedouble * u->scale > 1e30 || v->valuedouble * u->scale < 1) {
        sb_printf(err, "field '%s' is %g %s, outside what any device has", field, v->valuedouble, u->rate_name);
        return false;
    }
    *out = v->valuedouble * u->scale;
    return true;
}

/* One rate table: a number (the rate at every size) or {"SIZES": [...],
 * "RATES": [...]}, 1..SHARD_RATE_POINTS points, sizes strictly increasing. */
static bool rate_table(const cJSON *o, const char *field, const RateUnits *u, ShardRateTable *t, StrBuf *err) {
    memset(t, 0, sizeof *t);
    if (!o) {
        sb_printf(err, "missing field '%s' (%s, or {\"%s\": [...], \"%s\": [...]})", field, u->rate_name,
                  u->size_key, u->rate_key);
        return false;
    }
    if (cJSON_IsNumber(o)) {
        t->n = 1, t->size[0] = 1;
        return rate_value(o, field, u, &t->rate[0], err);
    }
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, u->size_key);
    const cJSON *gb = cJSON_GetObjectItemCaseSensitive(o, u->rate_key);
    if (!cJSON_IsObject(o) || !cJSON_IsArray(by) || !cJSON_IsArray(gb)) {
        sb_printf(err, "field '%s' must be %s or {\"%s\": [...], \"%s\": [...]}", field, u->rate_name, u->size_key,
                  u->rate_key);
        return false;
    }
    int n = cJSON_GetArraySize(by);
    if (n < 1 || n > SHARD_RATE_POINTS || n != cJSON_GetArraySize(gb)) {
        sb_printf(err, "field '%s': '%s' and '%s' must have the same 1 to %d entries (%d and %d)", field, u->size_key,
                  u->rate_key, SHARD_RATE_POINTS, n, cJSON_GetArraySize(gb));
        return false;
    }
    t->n = n;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(by, i);
        char f[96];
        snprintf(f, sizeof f, "%s.%s[%d]", field, u->rate_key, i);
        if (!rate_value(cJSON_GetArrayItem(gb, i), f, u, &t->rate[i], err)) return false;
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 1 || x->valuedouble > 1e30 ||
            (i && !(x->valuedouble > t->size[i - 1]))) {
            sb_printf(err, "field '%s.%s[%d]' must be a number of %s in [1, 1e30], larger than the entry before",
                      field, u->size_key, i, u->size_key);
            return false;
        }
        t->size[i] = x->valuedouble;
    }
    return true;
}

/* The optional measured kernel rates: {"elementwise": GB/s or a table, ...},
 * every class given but `rope`, `silu` and `rmsnorm`, which files written
 * before them lack: then RoPE and SiLU are priced at the transcendental rate
 * and RMS norm at the norm rate (shard_kernel_fallback), as they were when
 * those were written; absent:
 * priced from mem_bw_gbs (cost.c). */
static bool kernel_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "kernel_gbs");
    if (!o) return true;
    if (!cJSON_IsObject(o)) {
        sb_printf(err, "field 'kernel_gbs' must be an object of GB/s per kernel class "
                       "(elementwise, transcendental, norm, softmax, loss, reduce, optimizer, rope, silu, rmsnorm)");
        return false;
    }
    for (int k = 0; k < SHARD_K__COUNT; k++) {
        char field[64];
        int fb = shard_kernel_fallback((ShardKernel)k);
        if (fb >= 0 && !cJSON_GetObjectItemCaseSensitive(o, shard_kernel_name((ShardKernel)k))) {
            c->kernel[k] = c->kernel[fb]; /* before k (fallbacks come earlier in SHARD_KERNELS) */
            continue;
        }
        snprintf(field, sizeof field, "kernel_gbs.%s", shard_kernel_name((ShardKernel)k));
        if (!rate_table(cJSON_GetObjectItemCaseSensitive(o, shard_kernel_name((ShardKernel)k)), field, &GBS,
                        &c->kernel[k], err))
            return false;
    }
    return true;
}

/* The optional measured attention rates: a number (TFLOP/s of every attention
 * kernel at every size: the files before the tables) or {"forward": TFLOP/s
 * or a table by call FLOPs, "dq": ..., "dkv": ...}, every kernel given;
 * absent: peak x the class factor (cost.c). */
static bool attention_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "attention_tflops");
    if (!o) return true;
    if (cJSON_IsNumber(o)) {
        if (!rate_table(o, "attention_tflops", &TFLOPS, &c->attention[0], err)) return false;
        for (int k = 1; k < SHARD_ATT__COUNT; k++) c->attention[k] = c->attention[0];
        return true;
    }
    if (!cJSON_IsObject(o)) {
        sb_printf(err, "field 'attention_tflops' must be TFLOP/s or an object of tables by call FLOPs per "
                       "attention kernel (forward, dq, dkv)");
        return false;
    }
    for (int k = 0; k < SHARD_ATT__COUNT; k++) {
        char field[64];
        snprintf(field, sizeof field, "attention_tflops.%s", shard_attention_name((ShardAttention)k));
        if (!rate_table(cJSON_GetObjectItemCaseSensitive(o, shard_attention_name((ShardAttention)k)), field, &TFLOPS,
                        &c->attention[k], err))
            return false;
    }
    return true;
}

/* One table: {"flops": [...], "efficiency": [...]}, same lengths. */
/* One measured collective table: {"bytes": [...], "us": [...]}, 2 to
 * SHARD_COLL_POINTS points (one point would price every size at one time),
 * bytes strictly increasing in [1, 1e15], times positive, finite, at most an
 * hour and non-decreasing (a larger message never takes less time: the
 * calibration makes its points monotone). */
static bool coll_table(const cJSON *o, const char *field, ShardCollTable *t, StrBuf *err) {
    memset(t, 0, sizeof *t);
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "bytes");
    const cJSON *us = cJSON_GetObjectItemCaseSensitive(o, "us");
    if (!cJSON_IsObject(o) || !cJSON_IsArray(by) || !cJSON_IsArray(us)) {
        sb_printf(err, o ? "field '%s' must be {\"bytes\": [...], \"us\": [...]}"
                         : "missing field '%s' ({\"bytes\": [...], \"us\": [...]})",
                  field);
        return false;
    }
    int n = cJSON_GetArraySize(by);
    if (n < 2 || n > SHARD_COLL_POINTS || n != cJSON_GetArraySize(us)) {
        sb_printf(err, "field '%s': 'bytes' and 'us' must have the same 2 to %d entries (%d and %d)", field,
                  SHARD_COLL_POINTS, n, cJSON_GetArraySize(us));
        return false;
    }
    t->n = n;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(by, i), *y = cJSON_GetArrayItem(us, i);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 1 || x->valuedouble > 1e15 ||
            (i && !(x->valuedouble > t->bytes[i - 1]))) {
            sb_printf(err, "field '%s.bytes[%d]' must be a number of bytes in [1, 1e15], larger than the entry before",
                      field, i);
            return false;
        }
        if (!cJSON_IsNumber(y) || !isfinite(y->valuedouble) || !(y->valuedouble >= 1e-6) || y->valuedouble > 3.6e9) {
            sb_printf(err, "field '%s.us[%d]' must be a number of microseconds in [1e-6, 3.6e9]", field, i);
            return false;
        }
        t->bytes[i] = x->valuedouble;
        t->seconds[i] = y->valuedouble * 1e-6;
        if (i && t->seconds[i] < t->seconds[i - 1]) {
            sb_printf(err, "field '%s.us[%d]' must not decrease (%g after %g): the table must be monotone", field, i,
                      y->valuedouble, t->seconds[i - 1] * 1e6);
            return false;
        }
    }
    return true;
}

/* The optional measured collectives: {"intra": LINK, "inter": LINK}, each
 * link optional, a LINK {"ranks": N, a table per kind: all-gather,
 * reduce-scatter, all-reduce, all-to-all, and optionally "handoff_us"};
 * absent: the α–β model alone. */
static bool coll_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "collective_us");
    if (!o) return true;
    if (!cJSON_IsObject(o)) {
        sb_printf(err, "field 'collective_us' must be an object {\"intra\": ..., \"inter\": ...}");
        return false;
    }
    static const char *const link[2] = {"intra", "inter"};
    for (int l = 0; l < 2; l++) {
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(o, link[l]);
        if (!lo) continue;
        char field[64];
        snprintf(field, sizeof field, "collective_us.%s.", link[l]);
        double r;
        if (!cJSON_IsObject(lo)) {
            sb_printf(err, "field 'collective_us.%s' must be an object with 'ranks' and a table per collective",
                      link[l]);
            return false;
        }
        if (!num_field(lo, field, "ranks", 1, &r, err)) return false;
        if (r != floor(r) || r < 2 || r > SHARD_MAX_DEVICES) {
            sb_printf(err, "field 'collective_us.%s.ranks' must be a whole number from 2 to %d, got %g", link[l],
                      SHARD_MAX_DEVICES, r);
            return false;
        }
        c->coll[l].ranks = (int)r;
        for (int k = 0; k < SHARD_COLL_KINDS; k++) {
            snprintf(field, sizeof field, "collective_us.%s.%s", link[l], shard_coll_name((ShardColl)k));
            if (!coll_table(cJSON_GetObjectItemCaseSensitive(lo, shard_coll_name((ShardColl)k)), field,
                            &c->coll[l].kind[k], err))
                return false;
        }
        /* optional: what queuing a call on a stream adds to it (0 when absent) */
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(lo, "handoff_us");
        if (h && (!cJSON_IsNumber(h) || !isfinite(h->valuedouble) || h->valuedouble < 0 || h->valuedouble > 3.6e9)) {
            sb_printf(err, "field 'collective_us.%s.handoff_us' must be a number of microseconds in [0, 3.6e9]",
                      link[l]);
            return false;
        }
        c->coll[l].handoff = h ? h->valuedouble * 1e-6 : 0;
    }
    return true;
}

static bool eff_table(const cJSON *o, const char *field, ShardEffTable *t, StrBuf *err) {
    if (!cJSON_IsObject(o)) {
        sb_printf(err, o ? "field '%s' must be an object {\"flops\": [...], \"efficiency\": [...]}"
                         : "missing field '%s'",
                  field);
        return false;
    }
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(o, "flops");
    const cJSON *ef = cJSON_GetObjectItemCaseSensitive(o, "efficiency");
    const char *bad = !cJSON_IsArray(fl) ? "flops" : !cJSON_IsArray(ef) ? "efficiency" : NULL;
    if (bad) {
        sb_printf(err, "%s field '%s.%s' (an array of numbers)", (bad[0] == 'f' ? fl : ef) ? "bad" : "missing",
                  field, bad);
        return false;
    }
    int n = cJSON_GetArraySize(fl);
    if (n != cJSON_GetArraySize(ef)) {
        sb_printf(err, "field '%s': 'flops' has %d entries, 'efficiency' %d", field, n,
                  cJSON_GetArraySize(ef));
        return false;
    }
    t->n = n;
    if (n < 1 || n > SHARD_EFF_POINTS) return shard_eff_check(t, field, err);
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(fl, i), *b = cJSON_GetArrayItem(ef, i);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b)) {
            sb_printf(err, "field '%s.%s[%d]' must be a number", field,
                      cJSON_IsNumber(a) ? "efficiency" : "flops", i);
            return false;
        }
        t->flops[i] = a->valuedouble;
        t->eff[i] = b->valuedouble;
    }
    return shard_eff_check(t, field, err);
}

static bool gemm_obj(const cJSON *root, ShardCluster *c, StrBuf *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "gemm_efficiency");
    if (!cJSON_IsObject(o)) {
        sb_printf(err, o ? "field 'gemm_efficiency' must be an object"
                         : "missing field 'gemm_efficiency' (per dtype: flops and efficiency)");
        return false;
    }
    static const DType dts[] = {DT_F32, DT_BF16, DT_F16};
    for (int i = 0; i < 3; i++) {
        char field[48];
        snprintf(field, sizeof field, "gemm_efficiency.%s", ir_dtype_name(dts[i]));
        if (!eff_table(cJSON_GetObjectItemCaseSensitive(o, ir_dtype_name(dts[i])), field,
                       &c->gemm[dts[i]], err))
            return false;
    }
    c->gemm[DT_I32] = c->gemm[DT_F32];
    return true;
}

static cJSON *num_array(const double *v, int n, double scale);

/* A rate table as rate_table reads it: {"SIZES": [...], "RATES": [...]}. */
static void rate_json(cJSON *parent, const char *name, const ShardRateTable *t, const RateUnits *u) {
    cJSON *e = cJSON_AddObjectToObject(parent, name);
    cJSON_AddItemToObject(e, u->size_key, num_array(t->size, t->n, 1));
    cJSON_AddItemToObject(e, u->rate_key, num_array(t->rate, t->n, u->scale));
}

static cJSON *num_array(const double *v, int n, double scale) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i] / scale));
    return a;
}

cJSON *shard_cluster_to_json(const ShardCluster *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "device", c->device);
    cJSON_AddNumberToObject(o, "nodes", c->nodes);
    cJSON_AddNumberToObject(o, "per_node", c->per_node);
    cJSON_AddNumberToObject(o, "memory_gb", c->mem_bytes / GIGA);
    cJSON *pk = cJSON_AddObjectToObject(o, "peak_tflops");
    cJSON_AddNumberToObject(pk, "f32", c->peak_flops[DT_F32] / TERA);
    cJSON_AddNumberToObject(pk, "bf16", c->peak_flops[DT_BF16] / TERA);
    cJSON_AddNumberToObject(pk, "f16", c->peak_flops[DT_F16] / TERA);
    cJSON_AddNumberToObject(o, "mem_bw_gbs", c->mem_bw / GIGA);
    cJSON *in = cJSON_AddObjectToObject(o, "intra");
    cJSON_AddNumberToObject(in, "latency_us", c->intra_lat * 1e6);
    cJSON_AddNumberToObject(in, "bandwidth_gbs", c->intra_bw / GIGA);
    cJSON *ex = cJSON_AddObjectToObject(o, "inter");
    cJSON_AddNumberToObject(ex, "latency_us", c->inter_lat * 1e6);
    cJSON_AddNumberToObject(ex, "bandwidth_gbs", c->inter_bw / GIGA);
    if (c->overlap_slowdown > 0) cJSON_AddNumberToObject(o, "overlap_slowdown", c->overlap_slowdown);
    cJSON *rs = cJSON_AddObjectToObject(o, "reserve_mb");
    cJSON_AddNumberToObject(rs, "context", c->reserve_context / MIB);
    cJSON_AddNumberToObject(rs, "communicator", c->reserve_comm / MIB);
    cJSON_AddNumberToObject(rs, "workspace", c->reserve_workspace / MIB);
    if (c->host_mem_bytes > 0) {
        cJSON *h = cJSON_AddObjectToObject(o, "host");
        cJSON_AddNumberToObject(h, "memory_gb", c->host_mem_bytes / GIGA);
        cJSON_AddNumberToObject(h, "pcie_gbs", c->pcie_bw / GIGA);
        cJSON_AddNumberToObject(h, "adamw_gelems", c->host_adamw_rate / 1e9);
        if (c->host_inflight > 0) cJSON_AddNumberToObject(h, "transfers_in_flight", c->host_inflight);
        cJSON_AddNumberToObject(h, "copy_latency_us", c->host_copy_lat * 1e6);
        cJSON_AddNumberToObject(h, "call_latency_us", c->host_call_lat * 1e6);
    }
    if (c->kernel[0].n > 0) {
        cJSON *k = cJSON_AddObjectToObject(o, "kernel_gbs");
        for (int i = 0; i < SHARD_K__COUNT; i++) rate_json(k, shard_kernel_name((ShardKernel)i), &c->kernel[i], &GBS);
    }
    if (c->attention[0].n > 0) {
        cJSON *k = cJSON_AddObjectToObject(o, "attention_tflops");
        for (int i = 0; i < SHARD_ATT__COUNT; i++)
            rate_json(k, shard_attention_name((ShardAttention)i), &c->attention[i], &TFLOPS);
    }
    if (c->coll[0].ranks || c->coll[1].ranks) {
        cJSON *cu = cJSON_AddObjectToObject(o, "collective_us");
        static const char *const link[2] = {"intra", "inter"};
        for (int l = 0; l < 2; l++) {
            if (!c->coll[l].ranks) continue;
            cJSON *lo = cJSON_AddObjectToObject(cu, link[l]);
            cJSON_AddNumberToObject(lo, "ranks", c->coll[l].ranks);
            if (c->coll[l].handoff > 0) cJSON_AddNumberToObject(lo, "handoff_us", c->coll[l].handoff * 1e6);
            for (int k = 0; k < SHARD_COLL_KINDS; k++) {
                const ShardCollTable *t = &c->coll[l].kind[k];
                cJSON *e = cJSON_AddObjectToObject(lo, shard_coll_name((ShardColl)k));
                cJSON_AddItemToObject(e, "bytes", num_array(t->bytes, t->n, 1));
                cJSON_AddItemToObject(e, "us", num_array(t->seconds, t->n, 1e-6));
            }
        }
    }
    cJSON *ge = cJSON_AddObjectToObject(o, "gemm_efficiency");
    static const DType dts[] = {DT_F32, DT_BF16, DT_F16};
    for (int i = 0; i < 3; i++) {
        const ShardEffTable *t = &c->gemm[dts[i]];
        cJSON *tt = cJSON_AddObjectToObject(ge, ir_dtype_name(dts[i]));
        cJSON_AddItemToObject(tt, "flops", num_array(t->flops, t->n, 1));
        cJSON_AddItemToObject(tt, "efficiency", num_array(t->eff, t->n, 1));
    }
    return o;
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
        ok = ok && reserve_obj(root, c, &e) && gemm_obj(root, c, &e) && host_obj(root, c, &e) &&
             kernel_obj(root, c, &e) && attention_obj(root, c, &e) && coll_obj(root, c, &e);
        const cJSON *ov = ok ? cJSON_GetObjectItemCaseSensitive(root, "overlap_slowdown") : NULL;
        if (ov && (!cJSON_IsNumber(ov) || !isfinite(ov->valuedouble) || ov->valuedouble < 0 ||
                   ov->valuedouble > OVERLAP_SLOWDOWN_MAX)) {
            sb_printf(&e, "field 'overlap_slowdown' must be a number in [0, %d] (a compute kernel's slowdown "
                          "beside a collective: 0.2 = 20 %% slower)",
                      OVERLAP_SLOWDOWN_MAX);
            ok = false;
        } else if (ov) c->overlap_slowdown = ov->valuedouble;
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

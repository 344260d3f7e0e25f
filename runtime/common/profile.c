/*
 * profile.c — the per-kernel profile of a generated program (COLRT_PROFILE=1).
 *
 * Takes: the program's table of schedule entries (colrt_prof_entry: a node's
 * result, op, op class, FLOPs and bytes per call on this rank), registered
 * at create; the generated schedule brackets each entry with
 * colrt_profile_mark(&entry) and colrt_profile_mark(NULL) when
 * colrt_profile_enabled().
 * Gives, at exit: a table on stderr (time, calls, share, GFLOP/s and GB/s per
 * op class, per op, and the slowest nodes) and the whole table as JSON,
 * written atomically to COLRT_PROFILE_OUT (default colrt_profile.json;
 * rank r > 0 writes PATH.rank<r>). docs/generated-api.md gives the format.
 * The clock waits for the compute stream first (CUDA: the kernels have run).
 * Collectives (CPU backend): the wall time of each colrt collective and
 * point-to-point call where it runs (the caller's thread, or the
 * communication stream's worker, where it overlaps the entries), by kind
 * (colrt__profile_coll): the table's "collective" rows and the JSON's
 * `collectives`, per rank, and by kind and size (powers of 4 of the larger
 * buffer's bytes) the JSON's `collectives_by_size`.
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define MAX_TABLES 8
#define MAX_GROUPS 128

static struct {
    const char *program, *kernels;
    colrt_prof_entry *e;
    int n;
} tables[MAX_TABLES];
static int n_tables, rank_at_register, enabled = -1;

int colrt_profile_enabled(void) {
    if (enabled < 0) {
        const char *s = getenv("COLRT_PROFILE");
        enabled = s && *s && strcmp(s, "0") != 0;
    }
    return enabled;
}

/* the collectives' wall time by kind (colrt__profile_coll) */
#define MAX_COLL_KINDS 16
static pthread_mutex_t coll_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const char *kind;
    long long calls;
    double seconds, bytes;
} colls[MAX_COLL_KINDS];
static int n_colls;
/* and by kind and size: the calls of one kind whose larger buffer has
 * [4^b, 4^(b+1)) bytes (b = 0 below 4 bytes), as the cost model's tables go */
#define MAX_COLL_SIZES 128
typedef struct CollSize {
    const char *kind;
    int bin;
    long long calls;
    double seconds, bytes_min, bytes_max;
} CollSize;
static CollSize coll_sizes[MAX_COLL_SIZES];
static int n_coll_sizes;
/* calls left out of the tables: a kind past MAX_COLL_KINDS, a (kind, size)
 * past MAX_COLL_SIZES; said once, at exit with the table */
static long long dropped_kinds, dropped_sizes;

static int size_bin(double bytes) {
    int b = 0;
    for (double x = 4; x <= bytes && b < 40; x *= 4) b++;
    return b;
}

double colrt__profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void colrt__profile_coll(const char *kind, double bytes, double seconds) {
    pthread_mutex_lock(&coll_mu);
    int k = 0;
    while (k < n_colls && strcmp(colls[k].kind, kind)) k++;
    if (k == n_colls && n_colls < MAX_COLL_KINDS) colls[n_colls++].kind = kind;
    if (k < n_colls) {
        colls[k].calls++;
        colls[k].seconds += seconds;
        colls[k].bytes += bytes;
    } else {
        dropped_kinds++;
    }
    int bin = size_bin(bytes), s = 0;
    while (s < n_coll_sizes && (coll_sizes[s].bin != bin || strcmp(coll_sizes[s].kind, kind))) s++;
    if (s == n_coll_sizes && n_coll_sizes < MAX_COLL_SIZES)
        coll_sizes[n_coll_sizes++] = (CollSize){.kind = kind, .bin = bin, .bytes_min = bytes, .bytes_max = bytes};
    if (s < n_coll_sizes) {
        coll_sizes[s].calls++;
        coll_sizes[s].seconds += seconds;
        if (bytes < coll_sizes[s].bytes_min) coll_sizes[s].bytes_min = bytes;
        if (bytes > coll_sizes[s].bytes_max) coll_sizes[s].bytes_max = bytes;
    } else {
        dropped_sizes++;
    }
    pthread_mutex_unlock(&coll_mu);
}

static colrt_prof_entry *open_entry;
static double open_since;

void colrt_profile_mark(colrt_prof_entry *e) {
    colrt_stream_sync(NULL);
    double now = colrt__profile_now();
    if (open_entry) {
        open_entry->seconds += now - open_since;
        open_entry->calls++;
    }
    open_entry = e;
    open_since = now;
}

/* A row of the summary: entries grouped by class or by op. */
typedef struct Group {
    const char *key;
    double seconds, flops, bytes;
    long long calls;
} Group;

static int by_time(const void *a, const void *b) {
    double x = ((const Group *)a)->seconds, y = ((const Group *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int group(Group *g, int n, const char *key, const colrt_prof_entry *e) {
    int k = 0;
    while (k < n && strcmp(g[k].key, key)) k++;
    if (k == n) {
        if (n == MAX_GROUPS) return n; /* more distinct keys than rows: the rest are left out */
        g[n++] = (Group){.key = key};
    }
    g[k].seconds += e->seconds;
    g[k].calls += e->calls;
    g[k].flops += e->flops * (double)e->calls;
    g[k].bytes += e->bytes * (double)e->calls;
    return n;
}

static void print_groups(const char *what, Group *g, int n, double all, int max_rows) {
    qsort(g, (size_t)n, sizeof *g, by_time);
    fprintf(stderr, "%-40s %8s %10s %7s %9s %9s\n", what, "calls", "seconds", "share", "GFLOP/s", "GB/s");
    for (int k = 0; k < n && k < max_rows; k++)
        fprintf(stderr, "%-40.40s %8lld %10.4f %6.1f%% %9.2f %9.2f\n", g[k].key, g[k].calls, g[k].seconds,
                all > 0 ? 100 * g[k].seconds / all : 0.0, g[k].seconds > 0 ? 1e-9 * g[k].flops / g[k].seconds : 0.0,
                g[k].seconds > 0 ? 1e-9 * g[k].bytes / g[k].seconds : 0.0);
}

static cJSON *group_json(const Group *g, int n, const char *keyname) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < n; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, keyname, g[k].key);
        cJSON_AddNumberToObject(o, "calls", (double)g[k].calls);
        cJSON_AddNumberToObject(o, "seconds", g[k].seconds);
        cJSON_AddNumberToObject(o, "flops", g[k].flops);
        cJSON_AddNumberToObject(o, "bytes", g[k].bytes);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static void report(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "colrt-profile-1");
    cJSON_AddNumberToObject(root, "rank", rank_at_register);
    cJSON *progs = cJSON_AddArrayToObject(root, "programs");
    for (int t = 0; t < n_tables; t++) {
        const colrt_prof_entry *e = tables[t].e;
        int n = tables[t].n;
        static Group cls[MAX_GROUPS], ops[MAX_GROUPS], nodes[MAX_GROUPS];
        int ncls = 0, nops = 0;
        double all = 0, flops = 0;
        for (int i = 0; i < n; i++) {
            all += e[i].seconds;
            flops += e[i].flops * (double)e[i].calls;
            ncls = group(cls, ncls, e[i].cls, &e[i]);
            nops = group(ops, nops, e[i].op, &e[i]);
        }
        if (rank_at_register == 0) {
            fprintf(stderr, "\ncolrt profile of %s (rank 0): %.4f s in %d schedule entries, %.2f GFLOP/s overall\n"
                            "kernels: %s\nruntime kernels: %s\n",
                    tables[t].program, all, n, all > 0 ? 1e-9 * flops / all : 0.0, tables[t].kernels,
                    colrt_runtime_kernels());
            print_groups("op class", cls, ncls, all, MAX_GROUPS);
            fputc('\n', stderr);
            print_groups("op", ops, nops, all, MAX_GROUPS);
            fputc('\n', stderr);
            /* the slowest nodes: a selection of the entries, as groups of one */
            int nn = 0;
            char(*lab)[96] = malloc(sizeof *lab * (size_t)(n ? n : 1)); /* "node (op)" */
            for (int i = 0; i < n && lab; i++) {
                snprintf(lab[i], sizeof lab[i], "%s (%s)", e[i].node, e[i].op);
                Group r = {.key = lab[i], .seconds = e[i].seconds, .calls = e[i].calls,
                           .flops = e[i].flops * (double)e[i].calls, .bytes = e[i].bytes * (double)e[i].calls};
                if (nn < MAX_GROUPS) {
                    nodes[nn++] = r;
                } else if (r.seconds > nodes[MAX_GROUPS - 1].seconds) {
                    nodes[MAX_GROUPS - 1] = r;
                } else {
                    continue;
                }
                qsort(nodes, (size_t)nn, sizeof *nodes, by_time);
            }
            print_groups("node (op), the slowest 20", nodes, nn, all, 20);
            free(lab);
        }
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "program", tables[t].program);
        cJSON_AddStringToObject(p, "kernels", tables[t].kernels);
        cJSON_AddStringToObject(p, "runtime_kernels", colrt_runtime_kernels());
        cJSON_AddNumberToObject(p, "seconds", all);
        cJSON_AddNumberToObject(p, "flops", flops);
        qsort(cls, (size_t)ncls, sizeof *cls, by_time);
        qsort(ops, (size_t)nops, sizeof *ops, by_time);
        cJSON_AddItemToObject(p, "classes", group_json(cls, ncls, "class"));
        cJSON_AddItemToObject(p, "ops", group_json(ops, nops, "op"));
        cJSON *a = cJSON_AddArrayToObject(p, "nodes");
        for (int i = 0; i < n; i++) { /* schedule order; flops and bytes per call */
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "node", e[i].node);
            cJSON_AddStringToObject(o, "op", e[i].op);
            cJSON_AddStringToObject(o, "class", e[i].cls);
            cJSON_AddNumberToObject(o, "calls", (double)e[i].calls);
            cJSON_AddNumberToObject(o, "seconds", e[i].seconds);
            cJSON_AddNumberToObject(o, "flops_per_call", e[i].flops);
            cJSON_AddNumberToObject(o, "bytes_per_call", e[i].bytes);
            cJSON_AddItemToArray(a, o);
        }
        cJSON_AddItemToArray(progs, p);
    }
    /* the collectives, beside the entries (those on the communication
     * stream's worker overlap them) */
    pthread_mutex_lock(&coll_mu);
    static Group cg[MAX_COLL_KINDS];
    int ncg = n_colls;
    for (int k = 0; k < ncg; k++)
        cg[k] = (Group){.key = colls[k].kind, .seconds = colls[k].seconds, .calls = colls[k].calls,
                        .bytes = colls[k].bytes};
    pthread_mutex_unlock(&coll_mu);
    if (ncg && rank_at_register == 0) {
        fputc('\n', stderr);
        print_groups("collective (wall time a call, rank 0)", cg, ncg, 0, MAX_COLL_KINDS);
    }
    cJSON_AddItemToObject(root, "collectives", group_json(cg, ncg, "kind"));
    cJSON *bs = cJSON_AddArrayToObject(root, "collectives_by_size");
    pthread_mutex_lock(&coll_mu);
    for (int s = 0; s < n_coll_sizes; s++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", coll_sizes[s].kind);
        cJSON_AddNumberToObject(o, "bytes_min", coll_sizes[s].bytes_min);
        cJSON_AddNumberToObject(o, "bytes_max", coll_sizes[s].bytes_max);
        cJSON_AddNumberToObject(o, "calls", (double)coll_sizes[s].calls);
        cJSON_AddNumberToObject(o, "seconds", coll_sizes[s].seconds);
        cJSON_AddItemToArray(bs, o);
    }
    long long lost_kinds = dropped_kinds, lost_sizes = dropped_sizes;
    pthread_mutex_unlock(&coll_mu);
    if (lost_kinds)
        fprintf(stderr, "colrt profile (rank %d): %lld collective calls of kinds past the first %d left out of "
                "'collectives'\n", rank_at_register, lost_kinds, MAX_COLL_KINDS);
    if (lost_sizes)
        fprintf(stderr, "colrt profile (rank %d): %lld collective calls left out of 'collectives_by_size': "
                "more than %d (kind, size) rows\n", rank_at_register, lost_sizes, MAX_COLL_SIZES);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const char *path = getenv("COLRT_PROFILE_OUT");
    char buf[4096];
    if (!path || !*path) path = "colrt_profile.json";
    if (rank_at_register > 0) {
        snprintf(buf, sizeof buf, "%s.rank%d", path, rank_at_register);
        path = buf;
    }
    if (!text || colrt_write_file_atomic(path, text, strlen(text)) != 0)
        fprintf(stderr, "colrt: cannot write the profile to %s (COLRT_PROFILE_OUT names the file)\n", path);
    else if (rank_at_register == 0)
        fprintf(stderr, "colrt profile written to %s\n", path);
    free(text);
}

void colrt_profile_register(const char *program, const char *kernels, colrt_prof_entry *table, int n) {
    if (n_tables == MAX_TABLES) {
        fprintf(stderr, "colrt: COLRT_PROFILE: more than %d programs in one process; %s is not profiled\n",
                MAX_TABLES, program);
        return;
    }
    if (!n_tables) {
        rank_at_register = colrt_rank();
        atexit(report);
    }
    tables[n_tables].program = program;
    tables[n_tables].kernels = kernels ? kernels : "";
    tables[n_tables].e = table;
    tables[n_tables].n = n;
    n_tables++;
}

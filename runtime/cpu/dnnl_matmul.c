/*
 * dnnl_matmul.c — GEMM through oneDNN's matmul primitive (Debian's libdnnl2,
 * oneDNN 2.x, dlopen'ed by blas.c): C = alpha op(A) op(B) + beta C with A, B
 * and C in one dtype as stored (bf16 or f32; row-major, any leading
 * dimensions), accumulated in f32 and rounded once into C.
 *
 * Why a primitive and not dnnl_gemm_bf16bf16f32: the matmul primitive picks
 * oneDNN's brgemm kernels (AVX512_BF16 dot products, "brg_matmul:
 * avx512_core_bf16" in DNNL_VERBOSE), the one PyTorch's autocast runs, and
 * writes bf16 C itself (alpha as the output scale, beta as a sum post-op), so
 * no f32 copy of C is made or rounded; measured at GPT-2 124M's shapes in
 * bench/codegen_cpu/README.md. C may also be f32 beside bf16 A and B
 * (colrt__dnnl_matmul_c): a weight gradient accumulated into its f32
 * gradient (colrt_gemm_f32c, issue 16).
 *
 * oneDNN's C API is used without its headers (no build dependency, as for
 * dnnl_sgemm): the descriptors are opaque buffers larger than oneDNN 2.6's
 * structs (dnnl_memory_desc_t 696 bytes, dnnl_matmul_desc_t 2800), only ever
 * passed by pointer; the enum values are oneDNN 2.x's (dnnl_types.h).
 * Primitives are created once per shape (a JIT compile, about a millisecond)
 * and kept in a small table; a shape whose primitive cannot be made is
 * reported to the caller, which falls back. f32 (issue 21): the primitive's
 * brgemm kernels ("brg:avx512_core") beside dnnl_sgemm's, chosen in blas.c
 * by measurement (bench/codegen_cpu/README.md). Not thread-safe: colrt runs
 * kernels on the calling thread (docs/runtime.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"

typedef void *dnnl_handle; /* engine, stream, primitive, primitive_desc, memory, attr, post_ops */
typedef struct { _Alignas(64) unsigned char b[2048]; } OpaqueMd;     /* >= dnnl_memory_desc_t */
typedef struct { _Alignas(64) unsigned char b[8192]; } OpaqueMatmul; /* >= dnnl_matmul_desc_t */
typedef struct { int arg; dnnl_handle mem; } ExecArg;              /* dnnl_exec_arg_t */

enum { DNNL_CPU = 1, DNNL_IN_ORDER = 1, ARG_SRC = 1, ARG_DST = 17, ARG_WEIGHTS = 33 };

static struct {
    int (*engine_create)(dnnl_handle *, int, size_t);
    int (*stream_create)(dnnl_handle *, dnnl_handle, unsigned);
    int (*stream_wait)(dnnl_handle);
    int (*md_init)(OpaqueMd *, int, const int64_t *, int, const int64_t *);
    int (*matmul_init)(OpaqueMatmul *, const OpaqueMd *, const OpaqueMd *, const OpaqueMd *, const OpaqueMd *);
    int (*attr_create)(dnnl_handle *);
    int (*attr_destroy)(dnnl_handle);
    int (*attr_scales)(dnnl_handle, int64_t, int, const float *);
    int (*attr_post_ops)(dnnl_handle, dnnl_handle);
    int (*po_create)(dnnl_handle *);
    int (*po_destroy)(dnnl_handle);
    int (*po_sum)(dnnl_handle, float);
    int (*pd_create)(dnnl_handle *, const void *, dnnl_handle, dnnl_handle, dnnl_handle);
    int (*pd_destroy)(dnnl_handle);
    int (*prim_create)(dnnl_handle *, dnnl_handle);
    int (*prim_destroy)(dnnl_handle);
    int (*execute)(dnnl_handle, dnnl_handle, int, const ExecArg *);
    int (*mem_create)(dnnl_handle *, const OpaqueMd *, dnnl_handle, void *);
    int (*mem_destroy)(dnnl_handle);
    int (*mem_set)(dnnl_handle, void *);
    dnnl_handle engine, stream;
} mm;

/* One shape's primitive and its three memory objects (data handles set per call). */
typedef struct {
    int64_t key[12];
    dnnl_handle prim, a, b, c;
} Entry;
enum { CACHE = 96 };
static Entry cache[CACHE];
static int n_cache, next_evict;

#define SYM(f, name) (*(void **)&mm.f = dlsym(h, name))

int colrt__dnnl_matmul_load(void *h) {
    if (!SYM(engine_create, "dnnl_engine_create") || !SYM(stream_create, "dnnl_stream_create") ||
        !SYM(stream_wait, "dnnl_stream_wait") || !SYM(md_init, "dnnl_memory_desc_init_by_strides") ||
        !SYM(matmul_init, "dnnl_matmul_desc_init") || !SYM(attr_create, "dnnl_primitive_attr_create") ||
        !SYM(attr_destroy, "dnnl_primitive_attr_destroy") ||
        !SYM(attr_scales, "dnnl_primitive_attr_set_output_scales") ||
        !SYM(attr_post_ops, "dnnl_primitive_attr_set_post_ops") || !SYM(po_create, "dnnl_post_ops_create") ||
        !SYM(po_destroy, "dnnl_post_ops_destroy") || !SYM(po_sum, "dnnl_post_ops_append_sum") ||
        !SYM(pd_create, "dnnl_primitive_desc_create") || !SYM(pd_destroy, "dnnl_primitive_desc_destroy") ||
        !SYM(prim_create, "dnnl_primitive_create") || !SYM(prim_destroy, "dnnl_primitive_destroy") ||
        !SYM(execute, "dnnl_primitive_execute") || !SYM(mem_create, "dnnl_memory_create") ||
        !SYM(mem_destroy, "dnnl_memory_destroy") || !SYM(mem_set, "dnnl_memory_set_data_handle"))
        return 0;
    if (mm.engine_create(&mm.engine, DNNL_CPU, 0) != 0) return 0;
    if (mm.stream_create(&mm.stream, mm.engine, DNNL_IN_ORDER) != 0) return 0;
    return 1;
}

static void entry_free(Entry *e) {
    if (e->a) mm.mem_destroy(e->a);
    if (e->b) mm.mem_destroy(e->b);
    if (e->c) mm.mem_destroy(e->c);
    if (e->prim) mm.prim_destroy(e->prim);
    memset(e, 0, sizeof *e);
}

/* The primitive for one shape, made now; 0 on success. */
static int entry_make(Entry *e, const int64_t *key) {
    int ta = (int)key[0], tb = (int)key[1], dt = (int)key[10], cdt = (int)key[11];
    int64_t M = key[2], N = key[3], K = key[4], lda = key[5], ldb = key[6], ldc = key[7];
    float alpha, beta;
    memcpy(&alpha, &key[8], sizeof alpha);
    memcpy(&beta, &key[9], sizeof beta);
    static OpaqueMd ma, mb, mc;
    static OpaqueMatmul d;
    const int64_t da[2] = {M, K}, sa[2] = {ta ? 1 : lda, ta ? lda : 1};
    const int64_t db[2] = {K, N}, sb[2] = {tb ? 1 : ldb, tb ? ldb : 1};
    const int64_t dc[2] = {M, N}, sc[2] = {ldc, 1};
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof e->key);
    if (mm.md_init(&ma, 2, da, dt, sa) || mm.md_init(&mb, 2, db, dt, sb) || mm.md_init(&mc, 2, dc, cdt, sc) ||
        mm.matmul_init(&d, &ma, &mb, NULL, &mc))
        return 1;
    dnnl_handle attr = NULL, po = NULL, pd = NULL;
    int st = mm.attr_create(&attr);
    if (!st && alpha != 1.f) st = mm.attr_scales(attr, 1, 0, &alpha);
    if (!st && beta != 0.f) {
        st = mm.po_create(&po);
        if (!st) st = mm.po_sum(po, beta);
        if (!st) st = mm.attr_post_ops(attr, po);
    }
    if (!st) st = mm.pd_create(&pd, &d, attr, mm.engine, NULL);
    if (!st) st = mm.prim_create(&e->prim, pd);
    if (pd) mm.pd_destroy(pd);
    if (po) mm.po_destroy(po);
    if (attr) mm.attr_destroy(attr);
    if (!st) st = mm.mem_create(&e->a, &ma, mm.engine, NULL);
    if (!st) st = mm.mem_create(&e->b, &mb, mm.engine, NULL);
    if (!st) st = mm.mem_create(&e->c, &mc, mm.engine, NULL);
    if (st) entry_free(e);
    return st ? st : 0;
}

int colrt__dnnl_matmul(int dt, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                       int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc) {
    return colrt__dnnl_matmul_c(dt, dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int colrt__dnnl_matmul_c(int dt, int cdt, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const void *A, int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc) {
    int64_t key[12] = {ta, tb, M, N, K, lda, ldb, ldc, 0, 0, dt, cdt};
    memcpy(&key[8], &alpha, sizeof alpha);
    memcpy(&key[9], &beta, sizeof beta);
    Entry *e = NULL;
    for (int i = 0; i < n_cache && !e; i++)
        if (!memcmp(cache[i].key, key, sizeof key)) e = &cache[i];
    if (!e) {
        if (n_cache < CACHE) {
            e = &cache[n_cache++];
        } else { /* full: replace in turn */
            e = &cache[next_evict];
            next_evict = (next_evict + 1) % CACHE;
            entry_free(e);
        }
        int st = entry_make(e, key); /* failed: the slot is left zeroed (M 0: never found) */
        if (st) return st;
    }
    int st = mm.mem_set(e->a, (void *)A);
    if (!st) st = mm.mem_set(e->b, (void *)B);
    if (!st) st = mm.mem_set(e->c, C);
    if (st) return st;
    const ExecArg args[3] = {{ARG_SRC, e->a}, {ARG_WEIGHTS, e->b}, {ARG_DST, e->c}};
    st = mm.execute(e->prim, mm.stream, 3, args);
    if (!st) st = mm.stream_wait(mm.stream);
    return st;
}

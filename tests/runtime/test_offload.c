/*
 * test_offload — the runtime half of host offload on the CPU backend, one
 * rank, used as a generated program would use it:
 *  - the host arena is zeroed, apart from the device arena, and addressed by
 *    colrt_arena_at like it;
 *  - a step of an offloaded AdamW: the gradient copied to the host on a D2H
 *    stream after the "compute" (an event), colrt_host_adamw on host state,
 *    the new parameters copied back on an H2D stream ordered after the
 *    update; 20 steps give the same bits as colrt_adamw on device-resident
 *    state (the same arithmetic: tolerance zero);
 *  - colrt_host_adamw equals colrt_adamw bit for bit (n = 1, 1001, 100003);
 *  - copies queued on one stream run in order (D2H then H2D of the same
 *    host buffer);
 *  - the copy is asynchronous: held behind an event, colrt_memcpy_async
 *    returns with the destination untouched, and the copy lands once the
 *    event completes (deterministic: no timing);
 *  - misuse (a device-to-device kind) ends the process with a message.
 * `test_colrt_offload stuck` is the watchdog's case: a copy stream waiting
 * on an event that never completes ends the job within the timeout, naming
 * the wait and the stream (run by ctest with PASS_REGULAR_EXPRESSION).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colossal/colrt.h"
#include "expect_death.h"
#include "../../runtime/cpu/cpu.h" /* colrt__cpu_streams_async, colrt__event_stick */

static float val(size_t i, int k) { return (float)((int)((i * 7 + (size_t)k * 13) % 23) - 11) * 0.125f; }

static void arenas(void) {
    colrt_arena d = colrt_arena_create(1 << 16), h = colrt_host_arena_create(3 << 12);
    CHECK(h.base != NULL && h.size == (3 << 12));
    int nz = 0;
    for (size_t i = 0; i < h.size; i++) nz += h.base[i] != 0;
    CHECK_INT(nz, 0);
    CHECK(h.base + h.size <= d.base || d.base + d.size <= h.base); /* apart */
    CHECK(colrt_arena_at(&h, 256, 512) == h.base + 256);
    colrt_host_arena_destroy(&h);
    CHECK(h.base == NULL && h.size == 0);
    colrt_arena_destroy(&d);
}

/* Bits of colrt_host_adamw against the device kernel on f32. */
static void same_bits(int64_t n) {
    size_t b = (size_t)n * 4;
    float *p1 = malloc(b), *m1 = malloc(b), *v1 = malloc(b), *g = malloc(b);
    float *p2 = malloc(b), *m2 = malloc(b), *v2 = malloc(b);
    for (int64_t i = 0; i < n; i++) p1[i] = p2[i] = val((size_t)i, 1), m1[i] = m2[i] = 0, v1[i] = v2[i] = 0;
    for (int step = 1; step <= 3; step++) {
        for (int64_t i = 0; i < n; i++) g[i] = val((size_t)i, step + 2);
        colrt_adamw(NULL, COLRT_F32, p1, g, m1, v1, NULL, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
        colrt_host_adamw(p2, g, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
    }
    CHECK(!memcmp(p1, p2, b) && !memcmp(m1, m2, b) && !memcmp(v1, v2, b));
    free(p1), free(m1), free(v1), free(g), free(p2), free(m2), free(v2);
}

/* 20 steps with the state on the host (the offloaded schedule) against the
 * state in the device arena. Device arena: p, g; host arena: p32, m, v, g. */
static void offloaded_steps(void) {
    const int64_t n = 4099;
    const size_t b = (size_t)n * 4, slot = (b + COLRT_ALIGN - 1) / COLRT_ALIGN * COLRT_ALIGN;
    colrt_arena dev = colrt_arena_create(2 * slot), host = colrt_host_arena_create(4 * slot);
    float *dp = colrt_arena_at(&dev, 0, b), *dg = colrt_arena_at(&dev, slot, b);
    float *hp = colrt_arena_at(&host, 0, b), *hm = colrt_arena_at(&host, slot, b);
    float *hv = colrt_arena_at(&host, 2 * slot, b), *hg = colrt_arena_at(&host, 3 * slot, b);
    float *rp = malloc(b), *rm = calloc((size_t)n, 4), *rv = calloc((size_t)n, 4), *rg = malloc(b);
    colrt_stream *d2h = colrt_stream_create(), *h2d = colrt_stream_create();
    colrt_event *grad_ready = colrt_event_create(), *grad_home = colrt_event_create();
    colrt_event *updated = colrt_event_create(), *params_back = colrt_event_create();
    for (int64_t i = 0; i < n; i++) dp[i] = hp[i] = rp[i] = val((size_t)i, 0);
    for (int step = 1; step <= 20; step++) {
        /* "backward": the gradient is written in the device arena */
        for (int64_t i = 0; i < n; i++) dg[i] = rg[i] = val((size_t)i, step) * (1.f + dp[i]);
        colrt_event_record(grad_ready, NULL);
        colrt_stream_wait(d2h, grad_ready);
        colrt_memcpy_async(hg, dg, b, COLRT_D2H, d2h);
        colrt_event_record(grad_home, d2h);
        colrt_event_sync(grad_home); /* the host reads hg next */
        colrt_host_adamw(hp, hg, hm, hv, n, 3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 1.f);
        colrt_event_record(updated, NULL);
        colrt_stream_wait(h2d, updated);
        colrt_memcpy_async(dp, hp, b, COLRT_H2D, h2d);
        colrt_event_record(params_back, h2d);
        colrt_stream_wait(NULL, params_back); /* the next forward reads dp */
        colrt_adamw(NULL, COLRT_F32, rp, rg, rm, rv, NULL, n, 3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 1.f);
    }
    CHECK(!memcmp(dp, rp, b));
    CHECK(!memcmp(hp, rp, b) && !memcmp(hm, rm, b) && !memcmp(hv, rv, b));
    CHECK(dp[0] != val(0, 0)); /* it moved */
    colrt_event_destroy(grad_ready), colrt_event_destroy(grad_home);
    colrt_event_destroy(updated), colrt_event_destroy(params_back);
    colrt_stream_destroy(d2h), colrt_stream_destroy(h2d);
    colrt_host_arena_destroy(&host), colrt_arena_destroy(&dev);
    free(rp), free(rm), free(rv), free(rg);
}

/* D2H then H2D through the same host buffer on one stream: in order. */
static void in_order(void) {
    const size_t n = 1 << 18;
    colrt_arena host = colrt_host_arena_create(n * 4);
    float *x = malloc(n * 4), *y = calloc(n, 4), *h = colrt_arena_at(&host, 0, n * 4);
    for (size_t i = 0; i < n; i++) x[i] = val(i, 5);
    colrt_stream *s = colrt_stream_create();
    for (int k = 0; k < 4; k++) {
        colrt_memcpy_async(h, x, n * 4, COLRT_D2H, s);
        colrt_memcpy_async(y, h, n * 4, COLRT_H2D, s);
    }
    colrt_stream_sync(s);
    CHECK(!memcmp(x, y, n * 4));
    colrt_stream_destroy(s);
    colrt_host_arena_destroy(&host);
    free(x), free(y);
}

/* Held behind an event, the copy has not run when the call returns. */
static void asynchronous(void) {
    float src[300], dst[300];
    for (int i = 0; i < 300; i++) src[i] = (float)i, dst[i] = -1.f;
    colrt_stream *s = colrt_stream_create();
    colrt_event *hold = colrt_event_create(), *done = colrt_event_create();
    colrt__event_stick(hold);
    colrt_stream_wait(s, hold);
    colrt_memcpy_async(dst, src, sizeof src, COLRT_D2H, s);
    colrt_event_record(done, s);
    CHECK(!colrt_event_done(done));
    CHECK(dst[0] == -1.f && dst[299] == -1.f);
    colrt_event_record(hold, NULL); /* releases the stream */
    colrt_stream_wait(NULL, done);
    CHECK(!memcmp(dst, src, sizeof src));
    colrt_event_destroy(hold), colrt_event_destroy(done);
    colrt_stream_destroy(s);
}

static void d2d_kind(void) {
    float a[4] = {0}, b[4] = {0};
    colrt_memcpy_async(a, b, sizeof a, COLRT_D2D, NULL);
}

/* The watchdog's case: exits through colrt_die, never returns normally. */
static int stuck(void) {
    if (!colrt__cpu_streams_async()) {
        printf("streams run in the caller: nothing to watch\n");
        return 77;
    }
    colrt_set_timeout(0.5);
    static float src[64], dst[64];
    colrt_stream *s = colrt_stream_create();
    colrt_event *never = colrt_event_create();
    colrt__event_stick(never);
    colrt_stream_wait(s, never);
    colrt_memcpy_async(dst, src, sizeof src, COLRT_H2D, s);
    colrt_stream_sync(s);
    printf("the stuck copy stream returned\n");
    return 1;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    if (argc > 1 && !strcmp(argv[1], "stuck")) return stuck();
    colrt_set_timeout(20);
    int async = colrt__cpu_streams_async();
    printf("offload runtime: streams %s\n", async ? "on worker threads" : "in the caller");
    arenas();
    same_bits(1), same_bits(1001), same_bits(100003);
    offloaded_steps();
    in_order();
    if (async) asynchronous();
    expect_death("a device-to-device kind", d2d_kind, "colrt_memcpy_async: kind 2 is not COLRT_D2H or COLRT_H2D");
    int rc = check_done("test_colrt_offload");
    colrt_finalize();
    return rc;
}

/*
 * test_p2p — colrt's point-to-point transfers (colrt_send, colrt_recv,
 * colrt_sendrecv) on the CPU backend: along every axis of a 1-D and a 2-D
 * mesh, in f32, bf16 and i32; a pipeline's chain (each stage receives from
 * the one before, adds, sends on; then the same backwards); a ring of
 * sendrecvs; the first and last coordinates summing a buffer
 * (colrt_pair_all_reduce); two neighbours exchanging 8 MB each way at once (which a send
 * before a receive would deadlock on: MPI's rendezvous), and two messages each way in one
 * colrt_sendrecv_batch, received in the order sent; a send given a
 * stream waits for that stream's queued copy. Values are small integers:
 * exact in every dtype, tolerance zero.
 * Run under mpirun -np 1 (misuse only: a peer that is this rank or off the
 * axis ends the process with a message), 2 and 4. With argument "hang"
 * (p2p_hang.sh) rank 0 waits for a second message rank 1 never sends:
 * the watchdog must end the job naming the receive.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "colossal/colrt.h"
#include "../../runtime/common/half.h"
#include "expect_death.h"

static int W, R;

static float val(int coord, int i) { return (float)(coord + 1 + i % 7); }

/* A chain along axis a: coordinate 0 starts with val(0, i); each next
 * coordinate receives, adds val(own, i) and sends on; then back down. */
static void chain(colrt_mesh *m, int a, colrt_dtype t) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    const size_t count = 1001;
    void *x = calloc(count, 4);
    if (me == 0)
        for (size_t i = 0; i < count; i++) colrt_st(x, t, (int64_t)i, val(0, (int)i));
    else
        colrt_recv(m, a, me - 1, x, count, t, NULL);
    for (size_t i = 0; i < count; i++) {
        float e = 0;
        for (int c = 0; c < me; c++) e += val(c, (int)i);
        if (me) CHECK_NEAR(colrt_ld(x, t, (int64_t)i), e, 0.f);
        colrt_st(x, t, (int64_t)i, e + val(me, (int)i));
    }
    if (me + 1 < n) colrt_send(m, a, me + 1, x, count, t, NULL);
    /* backwards: the last coordinate sends its sum down, each subtracts nothing, just passes */
    void *y = calloc(count, 4);
    if (me == n - 1) memcpy(y, x, count * 4);
    else colrt_recv(m, a, me + 1, y, count, t, NULL);
    for (size_t i = 0; i < count; i++) {
        float e = 0;
        for (int c = 0; c < n; c++) e += val(c, (int)i);
        CHECK_NEAR(colrt_ld(y, t, (int64_t)i), e, 0.f);
    }
    if (me > 0) colrt_send(m, a, me - 1, y, count, t, NULL);
    free(x), free(y);
}

/* A ring: send to the next coordinate, receive from the one before, at once. */
static void ring(colrt_mesh *m, int a, colrt_dtype t) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    if (n < 2) return;
    const size_t count = 37;
    void *x = calloc(count, 4), *y = calloc(count, 4);
    for (size_t i = 0; i < count; i++) colrt_st(x, t, (int64_t)i, val(me, (int)i));
    colrt_sendrecv(m, a, (me + 1) % n, x, count, (me + n - 1) % n, y, count, t, NULL);
    for (size_t i = 0; i < count; i++) CHECK_NEAR(colrt_ld(y, t, (int64_t)i), val((me + n - 1) % n, (int)i), 0.f);
    free(x), free(y);
}

/* Neighbours 2k and 2k+1 exchange 8 MB each way with one sendrecv each:
 * a blocking send first would wait for a receive that never comes. */
static void exchange_large(colrt_mesh *m, int a) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    int other = me ^ 1;
    if (other >= n) return;
    const size_t count = 2u << 20;
    float *x = malloc(count * 4), *y = malloc(count * 4);
    for (size_t i = 0; i < count; i++) x[i] = (float)(me * 1000 + (int)(i % 999));
    colrt_sendrecv(m, a, other, x, count, other, y, count, COLRT_F32, NULL);
    int bad = 0;
    for (size_t i = 0; i < count; i++) bad += y[i] != (float)(other * 1000 + (int)(i % 999));
    CHECK_INT(bad, 0);
    free(x), free(y);
}

/* colrt_sendrecv_batch: neighbours 2k and 2k+1 each send two 8 MB messages to the other
 * and receive two from it in one batch (an interleaved pipeline on 2 stages: forward values
 * and gradients on the same pair both ways); each receive gets the message of its place in
 * the sender's list, and all four complete (posted one at a time, rendezvous would hang). */
static void exchange_batch(colrt_mesh *m, int a) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    int other = me ^ 1;
    if (other >= n) return;
    const size_t count = 2u << 20;
    float *x0 = malloc(count * 4), *x1 = malloc(count * 4), *y0 = malloc(count * 4), *y1 = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        x0[i] = (float)(me * 1000 + (int)(i % 999)), x1[i] = (float)(me * 1000 + 500 + (int)(i % 333));
    colrt_p2p_op ops[4] = {{1, other, x0, count}, {0, other, y0, count}, {1, other, x1, count}, {0, other, y1, count}};
    colrt_sendrecv_batch(m, a, ops, 4, COLRT_F32, NULL);
    int bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += y0[i] != (float)(other * 1000 + (int)(i % 999)) || y1[i] != (float)(other * 1000 + 500 + (int)(i % 333));
    CHECK_INT(bad, 0);
    free(x0), free(x1), free(y0), free(y1);
}

/* The first and the last coordinate sum a buffer (a tied parameter's
 * gradient on the first and last pipeline stage): both hold the sum. */
static void pair_sum(colrt_mesh *m, int a, colrt_dtype t) {
    int n = colrt_mesh_size(m, a), me = colrt_mesh_coord(m, a);
    if (n < 2 || (me != 0 && me != n - 1)) return;
    const size_t count = 53;
    void *x = calloc(count, 4);
    for (size_t i = 0; i < count; i++) colrt_st(x, t, (int64_t)i, val(me, (int)i));
    colrt_pair_all_reduce(m, a, me ? 0 : n - 1, x, count, t, NULL);
    for (size_t i = 0; i < count; i++) CHECK_NEAR(colrt_ld(x, t, (int64_t)i), val(0, (int)i) + val(n - 1, (int)i), 0.f);
    free(x);
}

/* A send on a stream follows that stream's queued copy into its buffer. */
static void stream_order(colrt_mesh *m) {
    int me = colrt_mesh_coord(m, 0), n = colrt_mesh_size(m, 0);
    if (n < 2 || me > 1) return;
    const size_t count = 1u << 18;
    float *src = malloc(count * 4), *x = calloc(count, 4);
    for (size_t i = 0; i < count; i++) src[i] = (float)(i % 1000) + 0.5f;
    colrt_stream *s = colrt_stream_create();
    if (me == 0) {
        colrt_memcpy(x, src, count * 4, COLRT_D2D, s); /* queued on s's worker */
        colrt_send(m, 0, 1, x, count, COLRT_F32, s);
    } else {
        colrt_recv(m, 0, 0, x, count, COLRT_F32, s);
        CHECK(!memcmp(x, src, count * 4));
    }
    colrt_stream_destroy(s);
    free(src), free(x);
}

static void test_mesh(int naxes, const int *sizes) {
    colrt_mesh *m = colrt_mesh_create(naxes, sizes);
    const colrt_dtype ts[] = {COLRT_F32, COLRT_BF16, COLRT_I32};
    for (int a = 0; a < naxes; a++)
        for (int k = 0; k < 3; k++) {
            chain(m, a, ts[k]);
            ring(m, a, ts[k]);
            pair_sum(m, a, ts[k]);
        }
    for (int a = 0; a < naxes; a++) exchange_large(m, a), exchange_batch(m, a);
    colrt_mesh_destroy(m);
}

/* ---- misuse ends the process with a message (1 rank, in a child) -------------------------------- */

static void send_to_self(void) {
    colrt_mesh *m = colrt_mesh_create(1, (int[]){1});
    float x = 0;
    colrt_send(m, 0, 0, &x, 1, COLRT_F32, NULL);
}
static void peer_off_axis(void) {
    colrt_mesh *m = colrt_mesh_create(1, (int[]){1});
    float x = 0;
    colrt_recv(m, 0, 3, &x, 1, COLRT_F32, NULL);
}
static void bad_axis(void) {
    colrt_mesh *m = colrt_mesh_create(1, (int[]){1});
    float x = 0;
    colrt_sendrecv(m, 2, 0, &x, 1, 0, &x, 1, COLRT_F32, NULL);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    W = colrt_world();
    R = colrt_rank();
    if (argc > 1 && !strcmp(argv[1], "hang")) { /* p2p_hang.sh */
        colrt_set_timeout(2);
        colrt_mesh *m = colrt_mesh_create(1, (int[]){W});
        float x[4] = {0};
        if (R == 0) colrt_recv(m, 0, 1, x, 4, COLRT_F32, NULL); /* the pair's communicator, one message */
        else if (R == 1) colrt_send(m, 0, 0, x, 4, COLRT_F32, NULL);
        if (R == 0) colrt_recv(m, 0, 1, x, 4, COLRT_F32, NULL); /* never sent */
        else sleep(40);
        printf("rank %d: finished\n", R);
        colrt_finalize();
        return 0;
    }
    colrt_set_timeout(20); /* a hang here is a failure, not a wait */
    if (W == 1) {
        expect_death("send to this rank", send_to_self, "send: peer coordinate 0 on mesh axis 0 (size 1) is not another rank's");
        expect_death("receive from off the axis", peer_off_axis, "recv: peer coordinate 3 on mesh axis 0 (size 1)");
        expect_death("a mesh axis out of range", bad_axis, "sendrecv: mesh axis 2 out of range (mesh has 1 axes)");
    } else {
        test_mesh(1, (int[]){W});
        for (int a = 2; a < W; a++)
            if (W % a == 0) test_mesh(2, (int[]){a, W / a});
        test_mesh(2, (int[]){1, W});
        colrt_mesh *m = colrt_mesh_create(1, (int[]){W});
        stream_order(m);
        colrt_mesh_destroy(m);
    }
    int fails = check_failures, all = 0;
    colrt_mesh *m = colrt_mesh_create(1, (int[]){W});
    colrt_all_reduce(m, 0, &fails, &all, 1, COLRT_I32, COLRT_SUM, NULL);
    colrt_mesh_destroy(m);
    if (R == 0) printf("point-to-point on %d ranks: %d failures over all ranks\n", W, all);
    int rc = check_done("test_colrt_p2p");
    colrt_finalize();
    return rc || all;
}

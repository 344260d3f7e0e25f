/*
 * test_fault [exit|hang][-stream] — worker for fault.sh: four ranks
 * all-reduce in a loop (-stream: on a stream's worker thread, the caller
 * waiting on an event, as generated programs overlap gradient all-reduces);
 * the last rank exits (status 3), or hangs (sleeps, still alive), in the
 * middle of the job, while its peers are inside a collective. The peers must not hang: either the launcher tears
 * the job down, or colrt's collective timeout (2 s here) aborts it with a
 * message naming the collective. fault.sh checks the job ends non-zero,
 * well within 30 s, with a message naming the failure.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "colossal/colrt.h"

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    colrt_set_timeout(2);
    int W = colrt_world(), R = colrt_rank();
    colrt_mesh *m = colrt_mesh_create(2, (int[]){W / 2 > 0 ? W / 2 : 1, W >= 2 ? 2 : 1});
    int on_stream = argc > 1 && strstr(argv[1], "-stream") != NULL;
    colrt_stream *s = on_stream ? colrt_stream_create() : NULL;
    colrt_event *done = colrt_event_create();
    float x[1024];
    for (int i = 0; i < 1024; i++) x[i] = (float)R;
    for (int it = 0; it < 100; it++) {
        if (it == 5 && R == W - 1) {
            int hang = argc > 1 && !strncmp(argv[1], "hang", 4);
            fprintf(stderr, "test_fault: rank %d %s on purpose at iteration %d\n", R, hang ? "hangs" : "exits", it);
            fflush(stderr);
            if (hang) sleep(60); /* alive but silent: only colrt's timeout can end this */
            _exit(3);
        }
        colrt_all_reduce(m, it % 2, x, x, 1024, COLRT_F32, COLRT_SUM, s);
        colrt_event_record(done, s);
        colrt_stream_wait(NULL, done);
    }
    printf("test_fault: rank %d finished all iterations (a peer was expected to die)\n", R);
    colrt_event_destroy(done);
    colrt_stream_destroy(s);
    colrt_finalize();
    return 0;
}

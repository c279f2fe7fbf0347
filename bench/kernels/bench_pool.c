/* Cost of one tern_pool_run with empty tasks: the fixed price every
 * parallel kernel call pays (decode makes several hundred per token).
 *
 *   bench_pool [threads]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/threadpool.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nop_task(void *arg, int task)
{
    (void)arg;
    (void)task;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    tern_pool *pool = NULL;
    if (tern_pool_create(threads, &pool) != TERN_OK) {
        fprintf(stderr, "%s\n", tern_last_error());
        return 1;
    }
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int n = 20000;
        double t0 = now_s();
        for (int i = 0; i < n; i++) tern_pool_run(pool, nop_task, NULL, 8);
        double us = (now_s() - t0) / n * 1e6;
        if (us < best) best = us;
    }
    printf("tern_pool_run, %d threads, 8 empty tasks: %.2f us per run (best of 5)\n", threads, best);
    tern_pool_free(pool);
    return 0;
}

/* The thread pool: every task of every job runs exactly once and the job
 * returns only after all of them, for jobs of many sizes back to back (so
 * late workers meet jobs that have moved on), with 2 to 4 threads, and with
 * a worker kept busy by a slow task while the caller finishes the rest. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/threadpool.h"

enum { MAXT = 97 };

typedef struct {
    atomic_int hits[MAXT];
    int slow;           /* task index that sleeps (-1 none) */
} job;

static void task(void *arg, int i)
{
    job *j = arg;
    if (i == j->slow) usleep(2000);
    atomic_fetch_add(&j->hits[i], 1);
}

int main(void)
{
    for (int threads = 2; threads <= 4; threads++) {
        tern_pool *p = NULL;
        CHECK(tern_pool_create(threads, &p) == TERN_OK);
        if (!p) continue;
        unsigned s = 7;
        int bad = 0;
        for (int r = 0; r < 20000; r++) {
            job j;
            int n = 1 + (int)(rand_r(&s) % MAXT);
            for (int i = 0; i < MAXT; i++) atomic_init(&j.hits[i], 0);
            j.slow = r % 997 == 0 ? (int)(rand_r(&s) % (unsigned)n) : -1;
            tern_pool_run(p, task, &j, n);
            for (int i = 0; i < MAXT; i++) bad += atomic_load(&j.hits[i]) != (i < n);
            /* Now and then the workers go to sleep between jobs. */
            if (r % 5000 == 4999) usleep(1000);
        }
        CHECK_MSG(bad == 0, "%d threads: %d tasks ran other than once", threads, bad);
        tern_pool_free(p);
    }
    return check_summary("threadpool");
}

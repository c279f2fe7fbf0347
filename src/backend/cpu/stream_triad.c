#include "backend/cpu/stream_triad.h"
#include "core/clock.h"

#include <stdlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Each task owns one contiguous slice so every thread streams sequentially,
 * the same access pattern decode uses for weight rows. */
typedef struct {
    double *a, *b, *c;
    size_t n;
    int n_tasks;
    int init;
} triad_job;

enum { TRIAD_REPS = 8 };

static void triad_task(void *arg, int task)
{
    const triad_job *j = arg;
    size_t lo = j->n * (size_t)task / (size_t)j->n_tasks;
    size_t hi = j->n * (size_t)(task + 1) / (size_t)j->n_tasks;
    double *restrict a = j->a;
    const double *restrict b = j->b, *restrict c = j->c;
    if (j->init) {
        for (size_t i = lo; i < hi; i++) { a[i] = 0.0; j->b[i] = 1.0; j->c[i] = 2.0; }
        return;
    }
    const double s = 3.0;
    size_t i = lo;
#if defined(__SSE2__)
    /* two lanes at a time, as a vectorising STREAM build does */
    const __m128d sv = _mm_set1_pd(s);
    for (; i + 2 <= hi; i += 2)
        _mm_storeu_pd(a + i, _mm_add_pd(_mm_loadu_pd(b + i), _mm_mul_pd(sv, _mm_loadu_pd(c + i))));
#endif
    for (; i < hi; i++)
        a[i] = b[i] + s * c[i];
}

double tern_cpu_stream_triad_gbps(tern_pool *pool, size_t bytes_per_array)
{
    size_t n = bytes_per_array / sizeof(double);
    if (n == 0) return 0.0;
    triad_job j = {0};
    j.n = n;
    j.a = malloc(n * sizeof(double));
    j.b = malloc(n * sizeof(double));
    j.c = malloc(n * sizeof(double));
    double best = 0.0;
    if (j.a && j.b && j.c) {
        j.n_tasks = tern_pool_threads(pool);
        j.init = 1;   /* first touch by the thread that later streams the slice */
        tern_pool_run(pool, triad_task, &j, j.n_tasks);
        j.init = 0;
        for (int r = 0; r < TRIAD_REPS; r++) {
            double t0 = tern_now();
            tern_pool_run(pool, triad_task, &j, j.n_tasks);
            double dt = tern_now() - t0;
            double gbps = dt > 0 ? 3.0 * (double)(n * sizeof(double)) / dt * 1e-9 : 0.0;
            if (gbps > best) best = gbps;
        }
    }
    free(j.a);
    free(j.b);
    free(j.c);
    return best;
}

#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Workers sleep on a condition variable between jobs; within a job, tasks
 * are claimed with an atomic counter so uneven tasks balance themselves. */
struct tern_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation;   /* bumped per job, under mu */
    int quit;
    int active;                 /* workers still inside the current job */
    tern_pool_fn fn;
    void *arg;
    int n_tasks;
    atomic_int next;
};

static void run_tasks(tern_pool *p)
{
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n_tasks) break;
        p->fn(p->arg, i);
    }
}

static void *worker(void *vp)
{
    tern_pool *p = vp;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

tern_status tern_pool_create(int n_threads, tern_pool **out)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return tern_error(TERN_E_RANGE, "thread count %d out of range 1..1024", n_threads);
    tern_pool *p = calloc(1, sizeof *p);
    if (!p) return tern_error(TERN_E_NOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) { tern_pool_free(p); return tern_error(TERN_E_NOMEM, "thread pool: out of memory"); }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
                p->n_threads = i + 1;
                tern_pool_free(p);
                return tern_error(TERN_E_INTERNAL, "thread pool: cannot start thread %d", i);
            }
        }
    }
    *out = p;
    return TERN_OK;
}

void tern_pool_free(tern_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; p->threads && i < p->n_threads - 1; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int tern_pool_threads(const tern_pool *p)
{
    return p ? p->n_threads : 1;
}

void tern_pool_run(tern_pool *p, tern_pool_fn fn, void *arg, int n_tasks)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int i = 0; i < n_tasks; i++) fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->active = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Jobs are published by bumping an atomic generation counter. Workers spin
 * on it for a short while after each job (a decode step issues hundreds of
 * small jobs, and a condition-variable wake-up costs ~10 us each) and only
 * then sleep on the condition variable. Within a job, tasks are claimed from
 * one atomic word holding the job's generation and its next task index, so
 * uneven tasks balance themselves.
 *
 * A job is complete when its tasks are, not when every worker has looked at
 * it: a worker that another process keeps off its core holds nothing up
 * (it finds the job taken when it runs, and the claim word's generation
 * tells it so). The job's fields live in one of two slots by generation;
 * the next job but one reuses a slot only after this one completed, and a
 * claim succeeds only while its generation is current, so a late worker
 * never runs a task from stale fields. */
typedef struct {
    tern_pool_fn fn;
    void *arg;
    atomic_int n_tasks;
    atomic_int done;            /* tasks finished */
} job_slot;

struct tern_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_ulong generation;    /* bumped per job */
    atomic_int quit;
    atomic_int sleepers;        /* workers blocked (or about to block) on wake */
    atomic_int caller_waits;    /* the caller sleeps on done */
    atomic_ullong claim;        /* generation << 32 | next task index */
    job_slot slots[2];
};

/* Spin budget before sleeping, in nanoseconds. */
enum { SPIN_NS = 200000 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Runs tasks of job gen while any are left unclaimed. */
static void run_tasks(tern_pool *p, unsigned long gen)
{
    job_slot *j = &p->slots[gen & 1];
    unsigned long long c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if ((c >> 32) != (gen & 0xffffffffu)) return;
        unsigned i = (unsigned)(c & 0xffffffffu);
        if (i >= (unsigned)atomic_load_explicit(&j->n_tasks, memory_order_relaxed)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        j->fn(j->arg, (int)i);
        int n = atomic_load_explicit(&j->n_tasks, memory_order_relaxed);
        if (atomic_fetch_add(&j->done, 1) + 1 == n && atomic_load(&p->caller_waits)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

/* Waits until generation moves past seen (or quit); returns the new value. */
static unsigned long wait_job(tern_pool *p, unsigned long seen)
{
    long long deadline = 0;
    for (unsigned spins = 0;; spins++) {
        unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load(&p->quit)) return g;
        if ((spins & 255) == 255) {
            long long t = now_ns();
            if (!deadline) deadline = t + SPIN_NS;
            else if (t > deadline) break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned long g;
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker(void *vp)
{
    tern_pool *p = vp;
    unsigned long seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load(&p->quit)) break;
        run_tasks(p, seen);
    }
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
    atomic_store(&p->quit, 1);
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
    /* The slot of this generation was last used two jobs ago, which
     * completed; claims for it stopped when the previous job's began. */
    unsigned long gen = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    job_slot *j = &p->slots[gen & 1];
    j->fn = fn;
    j->arg = arg;
    atomic_store_explicit(&j->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&j->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (unsigned long long)(gen & 0xffffffffu) << 32, memory_order_release);
    atomic_store(&p->generation, gen); /* seq_cst: ordered before the sleepers check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_tasks(p, gen);
    long long deadline = 0;
    for (unsigned spins = 0; atomic_load_explicit(&j->done, memory_order_acquire) < n_tasks; spins++) {
        if ((spins & 255) == 255) {
            long long t = now_ns();
            if (!deadline) deadline = t + SPIN_NS;
            else if (t > deadline) break;
        }
        cpu_relax();
    }
    if (atomic_load_explicit(&j->done, memory_order_acquire) < n_tasks) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_waits, 1);
        while (atomic_load(&j->done) < n_tasks) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_waits, 0);
        pthread_mutex_unlock(&p->mu);
    }
}

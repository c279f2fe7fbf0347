/* A fixed pool of worker threads that runs one parallel-for at a time.
 *
 * tern_pool_run(pool, fn, arg, n_tasks) calls fn(arg, i) for every task index
 * 0 <= i < n_tasks across the workers and the calling thread, and returns when
 * all have finished. Calls from one thread at a time per pool. */
#ifndef TERN_CORE_THREADPOOL_H
#define TERN_CORE_THREADPOOL_H

#include "tern/status.h"

typedef struct tern_pool tern_pool;
typedef void (*tern_pool_fn)(void *arg, int task);

/* n_threads counts the caller: 1 means no worker threads. Returns owned pool. */
tern_status tern_pool_create(int n_threads, tern_pool **out);
void tern_pool_free(tern_pool *pool);
int tern_pool_threads(const tern_pool *pool);
/* pool may be NULL: runs every task on the caller. */
void tern_pool_run(tern_pool *pool, tern_pool_fn fn, void *arg, int n_tasks);

#endif

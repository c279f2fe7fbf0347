/* The execution context's inside (tern/exec.h): the backend code and the
 * model reach the thread pool and the workspace through it. */
#ifndef TERN_CORE_EXEC_H
#define TERN_CORE_EXEC_H

#include <pthread.h>
#include <stddef.h>

#include "core/threadpool.h"
#include "tern/exec.h"

typedef struct tern_cuda tern_cuda;

struct tern_exec {
    tern_pool *pool;          /* owned */
    pthread_mutex_t lock;     /* one pass (or parallel-for) at a time */
    void *scratch;            /* owned workspace, scratch_bytes long, 64-byte aligned */
    size_t scratch_bytes;
    /* A GPU context (tern_exec_create_device): NULL = the CPU. The device
     * workspace holds the activations of the passes that run there. */
    int device;               /* CUDA device index, -1 for the CPU */
    tern_cuda *cuda;          /* owned with device_free */
    void *d_scratch;          /* owned device workspace, d_scratch_bytes long */
    size_t d_scratch_bytes;
    void (*device_free)(tern_exec *x);   /* releases cuda and d_scratch */
};

void tern_exec_lock(tern_exec *x);
void tern_exec_unlock(tern_exec *x);
/* The workspace grown to at least bytes (caller holds the lock). What it held
 * is not kept across a growth: passes lay it out afresh each time. On failure
 * the old workspace stays. *out borrowed until the next call. */
tern_status tern_exec_scratch(tern_exec *x, size_t bytes, void **out);
/* "cpu" (or NULL / "") -> -1, "cuda" -> 0, "cuda:N" -> N; -2 for anything else. */
int tern_exec_parse_device(const char *device);
/* Runs fn(arg, i) for 0 <= i < n on the threads, under the lock. */
void tern_exec_parallel(tern_exec *x, tern_pool_fn fn, void *arg, int n);

#endif

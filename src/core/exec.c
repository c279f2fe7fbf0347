/* Execution context (tern/exec.h, core/exec.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec.h"
#include "core/failpoint.h"

tern_status tern_exec_create(int n_threads, tern_exec **out)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    tern_exec *x = calloc(1, sizeof *x);
    if (!x) return tern_error(TERN_E_NOMEM, "execution context: out of memory");
    tern_status st = tern_pool_create(n_threads, &x->pool);
    if (st) {
        free(x);
        return st;
    }
    pthread_mutex_init(&x->lock, NULL);
    x->device = -1;
    *out = x;
    return TERN_OK;
}

void tern_exec_free(tern_exec *x)
{
    if (!x) return;
    if (x->device_free) x->device_free(x);
    tern_pool_free(x->pool);
    pthread_mutex_destroy(&x->lock);
    free(x->scratch);
    free(x);
}

int tern_exec_threads(const tern_exec *x) { return tern_pool_threads(x->pool); }

void tern_exec_lock(tern_exec *x) { pthread_mutex_lock(&x->lock); }
void tern_exec_unlock(tern_exec *x) { pthread_mutex_unlock(&x->lock); }

tern_status tern_exec_scratch(tern_exec *x, size_t bytes, void **out)
{
    if (bytes > x->scratch_bytes) {
        size_t cap = x->scratch_bytes * 2 > bytes ? x->scratch_bytes * 2 : bytes;
        cap = (cap + 63) & ~(size_t)63;
        void *p = tern_fp_aligned_alloc(TERN_FAILPOINT_WORKSPACE, 64, cap);
        if (!p) return tern_error(TERN_E_NOMEM, "forward: out of memory for a %zu-byte workspace", bytes);
        free(x->scratch);
        x->scratch = p;
        x->scratch_bytes = cap;
    }
    *out = x->scratch;
    return TERN_OK;
}

void tern_exec_parallel(tern_exec *x, tern_pool_fn fn, void *arg, int n)
{
    pthread_mutex_lock(&x->lock);
    tern_pool_run(x->pool, fn, arg, n);
    pthread_mutex_unlock(&x->lock);
}

int tern_exec_parse_device(const char *d)
{
    if (!d || !*d || !strcmp(d, "cpu")) return -1;
    if (!strcmp(d, "cuda")) return 0;
    if (strncmp(d, "cuda:", 5) || !d[5]) return -2;
    long n = 0;
    for (const char *p = d + 5; *p; p++) {
        if (*p < '0' || *p > '9' || n > 1000) return -2;
        n = n * 10 + (*p - '0');
    }
    return n > 1000 ? -2 : (int)n;
}

const char *tern_exec_device_name(const tern_exec *x) { return x->device < 0 ? "cpu" : "cuda"; }

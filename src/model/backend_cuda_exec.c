/* The CUDA side of the execution context (tern_exec_create_device: a
 * device opened beside the thread pool, freed with it) and the device's
 * read bandwidth that tern bench takes as its ceiling. */
#include <stddef.h>

#include "backend/cuda/cuda.h"
#include "core/exec.h"
#include "model/backend.h"

/* ---- execution context on a device ----------------------------------- */

static void exec_device_free(tern_exec *x)
{
    tern_cuda_free(x->cuda, x->d_scratch);
    tern_cuda_close(x->cuda);
    x->cuda = NULL;
    x->d_scratch = NULL;
}

tern_status tern_exec_create_device(int n_threads, const char *device, tern_exec **out)
{
    *out = NULL;
    int idx = tern_exec_parse_device(device);
    if (idx == -2) return tern_error(TERN_E_INVALID, "device must be cpu or cuda[:N], not '%s'", device);
    tern_exec *x;
    tern_status st = tern_exec_create(n_threads, &x);
    if (st || idx < 0) {
        *out = st ? NULL : x;
        return st;
    }
    if ((st = tern_cuda_open(idx, &x->cuda))) {
        tern_exec_free(x);
        return st;
    }
    x->device = idx;
    x->device_free = exec_device_free;
    *out = x;
    return TERN_OK;
}

/* ---- the device's bandwidth (tern bench's ceiling) -------------------- */

double tern_model_device_bandwidth(tern_model *m, double *copy_gbps)
{
    if (copy_gbps) *copy_gbps = 0.0;
    if (!m->dev) return 0.0;
    tern_cuda *c = m->exec->cuda;
    size_t bytes = (size_t)2 << 30;
    void *src = NULL, *dst = NULL;
    float *sink = NULL, ms = 0.0f;
    double gbps = 0.0;
    tern_exec_lock(m->exec);
    if (!tern_cuda_alloc(c, bytes, &src) && !tern_cuda_alloc(c, 4096 * sizeof(float), (void **)&sink) &&
        !tern_cuda_memset(c, src, 1, bytes)) {
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) ok = !tern_cuda_read_bw(c, src, bytes, sink);
        ok = ok && !tern_cuda_timer_mark(c);
        for (int i = 0; i < 10 && ok; i++) ok = !tern_cuda_read_bw(c, src, bytes, sink);
        if (ok && !tern_cuda_timer_elapsed(c, &ms) && ms > 0) gbps = (double)bytes * 10 / (ms / 1e3) / 1e9;
        /* The copy: a device-to-device copy of 1 GiB, its read and its
         * write both counted. A failure here leaves *copy_gbps at 0. */
        size_t half = bytes / 2;
        if (copy_gbps && ok && !tern_cuda_alloc(c, half, &dst)) {
            for (int i = 0; i < 3 && ok; i++) ok = !tern_cuda_copy(c, dst, src, half);
            ok = ok && !tern_cuda_timer_mark(c);
            for (int i = 0; i < 10 && ok; i++) ok = !tern_cuda_copy(c, dst, src, half);
            if (ok && !tern_cuda_timer_elapsed(c, &ms) && ms > 0) *copy_gbps = 2.0 * half * 10 / (ms / 1e3) / 1e9;
        }
    }
    tern_cuda_free(c, src);
    tern_cuda_free(c, dst);
    tern_cuda_free(c, sink);
    tern_exec_unlock(m->exec);
    return gbps;
}

/* The CUDA backend's model entry points in a build without CUDA (no nvcc at
 * build time): a CUDA device is refused with the reason tern_cuda_open gives. */
#include "backend/cuda/cuda.h"
#include "core/exec.h"
#include "model/backend.h"

tern_status tern_exec_create_device(int n_threads, const char *device, tern_exec **out)
{
    *out = NULL;
    int idx = tern_exec_parse_device(device);
    if (idx == -2) return tern_error(TERN_E_INVALID, "device must be cpu or cuda[:N], not '%s'", device);
    if (idx < 0) return tern_exec_create(n_threads, out);
    tern_cuda *c;
    return tern_cuda_open(idx, &c);
}

tern_status tern_backend_cuda_load(tern_model *m)
{
    (void)m;
    return tern_error(TERN_E_UNSUPPORTED, "this build of tern has no CUDA backend");
}

void tern_backend_cuda_unload(tern_model *m) { (void)m; }

tern_status tern_backend_cuda_kv_create(const tern_model *m, const tern_kv_shape *s, tern_kv **out)
{
    (void)m;
    (void)s;
    *out = NULL;
    return tern_error(TERN_E_UNSUPPORTED, "this build of tern has no CUDA backend");
}

double tern_model_device_bandwidth(tern_model *m, double *copy_gbps)
{
    (void)m;
    if (copy_gbps) *copy_gbps = 0.0;
    return 0.0;
}

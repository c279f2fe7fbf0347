/* The CUDA backend's entry points in a build without CUDA (no nvcc at build
 * time): opening a device reports that, so --device cuda fails clearly. */
#include "backend/cuda/cuda.h"

int tern_cuda_built(void) { return 0; }

tern_status tern_cuda_open(int device, tern_cuda **out)
{
    (void)device;
    *out = NULL;
    return tern_error(TERN_E_UNSUPPORTED,
                      "no usable CUDA device: this build of tern has no CUDA backend (nvcc was not found when it was built)");
}

void tern_cuda_close(tern_cuda *c) { (void)c; }

const char *tern_cuda_describe(const tern_cuda *c)
{
    (void)c;
    return "none";
}

/* Tiled copies of bf16 weights (TERN_CUDA_TILED=1, off by default): each tile of
 * 8 rows of a [N, K] matrix stored 32-element block by block, so that a
 * warp's 16-byte loads of one block of a tile (lane (g, t): row g,
 * elements 8t .. 8t + 7) are 512 contiguous bytes and a warp's part of K
 * in a tile one contiguous run, instead of 8 rows x 64 bytes 2 K bytes
 * apart. Element (n, k) of the matrix lies at
 *   (n / 8) 8 K + (k / 32) 256 + (n % 8) 32 + k % 32.
 * The one-row kernel reads such a copy with the same loads into the same
 * registers in the same order (mma_skinny.cu, TILED), so its bits are the
 * row-major kernel's. The copy doubles the matrix's device memory (the
 * prefill GEMMs still read the row-major matrix); on an H100 it took a
 * one-row product over 4.3 GB from 97-98% to 101% of the read kernel's
 * rate and Qwen3-8B decode from 5.96-6.01 to 5.76 ms a token
 * (docs/BENCHMARKS.md). */
#include <stdlib.h>

#include "backend/cuda/mma.cuh"

struct tern_cuda_tiled {
    const void *w;
    void *t;
};

__global__ void tile_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, long N, int K)
{
    long units = N * (K / 8), kb8 = K / 8;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < units; i += (long)gridDim.x * blockDim.x) {
        long n = i / kb8;
        int j = (int)(i % kb8); /* 8-element unit j of row n: block j / 4, lane t = j % 4 */
        long at = (n >> 3) * kb8 * 8 + (long)(j >> 2) * 32 + (n & 7) * 4 + (j & 3);
        dst[at] = src[i];
    }
}

extern "C" tern_status tern_cuda_tile_weight(tern_cuda *c, const void *d_w, long N, int K)
{
    if (N <= 0 || N % 8 || K <= 0 || K % MMA_KB)
        return tern_error(TERN_E_INVALID, "cuda tiled weights: [%ld, %d] (N a multiple of 8, K of %d)", N, K,
                          (int)MMA_KB);
    if (tiled_copy(c, d_w)) return TERN_OK;
    if (c->n_tiled == c->cap_tiled) {
        int cap = c->cap_tiled ? 2 * c->cap_tiled : 64;
        struct tern_cuda_tiled *t = (struct tern_cuda_tiled *)realloc(c->tiled, (size_t)cap * sizeof *t);
        if (!t) return tern_error(TERN_E_NOMEM, "cuda tiled weights: table of %d", cap);
        c->tiled = t, c->cap_tiled = cap;
    }
    size_t bytes = (size_t)N * K * 2, free_b = 0, total_b = 0;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b), "tiled weights: free memory");
    if (bytes + ((size_t)256 << 20) > free_b)
        return tern_error(TERN_E_NOMEM, "cuda tiled weights: a [%ld, %d] copy needs %.1f MB, %.1f MB free", N, K,
                          bytes / 1e6, free_b / 1e6);
    void *d = NULL;
    tern_status st = tern_cuda_alloc(c, bytes, &d);
    if (st) return st;
    tile_kernel<<<c->sms * 8, 256, 0, c->stream>>>((const uint4 *)d_w, (uint4 *)d, N, K);
    if ((st = launched("tiled weights: copy"))) {
        cudaFree(d);
        return st;
    }
    c->tiled[c->n_tiled++] = (struct tern_cuda_tiled){d_w, d};
    return TERN_OK;
}

const void *tiled_copy(const tern_cuda *c, const void *w)
{
    for (int i = 0; i < c->n_tiled; i++)
        if (c->tiled[i].w == w) return c->tiled[i].t;
    return NULL;
}

extern "C" void tern_cuda_untile_weight(tern_cuda *c, const void *w)
{
    for (int i = 0; i < c->n_tiled; i++)
        if (c->tiled[i].w == w) {
            cudaFree(c->tiled[i].t);
            c->tiled[i] = c->tiled[--c->n_tiled];
            return;
        }
}

void tiled_free(tern_cuda *c)
{
    for (int i = 0; i < c->n_tiled; i++) cudaFree(c->tiled[i].t);
    free(c->tiled);
    c->tiled = NULL, c->n_tiled = c->cap_tiled = 0;
}

/* tern_cuda_matmul: bf16 weights with K a multiple of 32 on the tensor
 * cores for every M (mma.cuh: one order, whichever kernel runs); other
 * weights on the own matrix-vector kernel over 16-row tiles (gemv.cu); both
 * batch-invariant. cuBLAS for prefill-sized M when the caller asks for it. */
#include "backend/cuda/common.cuh"

tern_status tern_cuda_gemv_tile(tern_cuda *c, tern_cuda_act act, const float *x, int m, int K, const void *w,
                                tern_dtype wdt, int N, float *y, int ldy, int accumulate, const float *nw, float eps,
                                float *tmp);

static bool use_cublas(tern_cuda_mm_path path, int M, tern_dtype wdt)
{
    return path == TERN_CUDA_MM_CUBLAS && M > TERN_CUDA_GEMV_MAX_M && wdt == TERN_DT_BF16;
}

extern "C" size_t tern_cuda_matmul_tmp_bytes(tern_cuda_mm_path path, int M, int K, int N)
{
    return use_cublas(path, M, TERN_DT_BF16) ? (size_t)M * K * sizeof(__nv_bfloat16) : 0;
}

static void blas_destroy(cublasHandle_t h) { cublasDestroy(h); }

static tern_status blas_handle(tern_cuda *c)
{
    if (c->blas) return TERN_OK;
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        return tern_error(TERN_E_INTERNAL, "cuda: cublasCreate failed");
    }
    c->blas_destroy = blas_destroy;
    if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS)
        return tern_error(TERN_E_INTERNAL, "cuda: cublasSetStream failed");
    return TERN_OK;
}

__global__ void to_bf16_kernel(const float *__restrict__ x, __nv_bfloat16 *__restrict__ y, long n)
{
    wait_prior_grid();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

extern "C" tern_status tern_cuda_matmul(tern_cuda *c, tern_cuda_act act, tern_cuda_mm_path path, const float *d_x,
                                        int M, int K, const void *d_w, tern_dtype wdt, int N, float *d_y, int ldy,
                                        int accumulate, void *d_tmp)
{
    if (K % 8 || M < 0 || N <= 0 || ldy < N)
        return tern_error(TERN_E_INVALID, "cuda matmul: bad shape M=%d K=%d N=%d ldy=%d (K must be a multiple of 8)",
                          M, K, N, ldy);
    if (M == 0) return TERN_OK;
    /* cuBLAS reads rows: a tiled matrix (tiled.cu) stays on the tensor-core kernels */
    if (use_cublas(path, M, wdt) && !tern_cuda_is_tiled(c, d_w)) {
        if (!d_tmp) return tern_error(TERN_E_INVALID, "cuda matmul: cuBLAS path needs its workspace");
        tern_status hs = blas_handle(c);
        if (hs) return hs;
        long n = (long)M * K;
        int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
        tern_status st = launch(c, "to_bf16", to_bf16_kernel, dim3(blocks), dim3(256), 0, d_x,
                                (__nv_bfloat16 *)d_tmp, n);
        if (st) return st;
        float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
        cublasStatus_t bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, d_w, CUDA_R_16BF, K,
                                         d_tmp, CUDA_R_16BF, K, &beta, d_y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return tern_error(TERN_E_INTERNAL, "cuda matmul: cublasGemmEx failed (status %d)", (int)bs);
        return TERN_OK;
    }
    if (tern_cuda_mma_takes(c, wdt, K)) return tern_cuda_mma(c, act, d_x, M, K, d_w, NULL, N, d_y, ldy, accumulate, NULL, 0.0f);
    for (int m0 = 0; m0 < M; m0 += TERN_CUDA_GEMV_MAX_M) {
        int m = M - m0 < TERN_CUDA_GEMV_MAX_M ? M - m0 : TERN_CUDA_GEMV_MAX_M;
        tern_status st = tern_cuda_gemv_tile(c, act, d_x + (long)m0 * K, m, K, d_w, wdt, N, d_y + (long)m0 * ldy, ldy,
                                             accumulate, NULL, 0.0f, NULL);
        if (st) return st;
    }
    return TERN_OK;
}

extern "C" tern_status tern_cuda_matmul_norm(tern_cuda *c, const float *d_x, int M, int K, const float *d_nw, float eps,
                                             const void *d_w, tern_dtype wdt, int N, float *d_y, int ldy, float *d_tmp)
{
    if (K % 8 || M < 0 || N <= 0 || ldy < N || !d_nw)
        return tern_error(TERN_E_INVALID, "cuda matmul_norm: bad shape M=%d K=%d N=%d ldy=%d (K must be a multiple of 8)",
                          M, K, N, ldy);
    if (tern_cuda_mma_takes(c, wdt, K))
        return tern_cuda_mma(c, TERN_CUDA_ACT_F32, d_x, M, K, d_w, NULL, N, d_y, ldy, 0, d_nw, eps);
    for (int m0 = 0; m0 < M; m0 += TERN_CUDA_GEMV_MAX_M) {
        int m = M - m0 < TERN_CUDA_GEMV_MAX_M ? M - m0 : TERN_CUDA_GEMV_MAX_M;
        tern_status st = tern_cuda_gemv_tile(c, TERN_CUDA_ACT_F32, d_x + (long)m0 * K, m, K, d_w, wdt, N,
                                             d_y + (long)m0 * ldy, ldy, 0, d_nw, eps, d_tmp);
        if (st) return st;
    }
    return TERN_OK;
}

/* The split attention's shared parts (internal): the block shape and the
 * fold of a query's splits, one definition for the per-query kernel
 * (attention.cu) and the tiled prefill kernel (attention_tiled.cu), so that
 * both write the same bits for a query. */
#ifndef TERN_BACKEND_CUDA_ATTENTION_CUH
#define TERN_BACKEND_CUDA_ATTENTION_CUH

#include "backend/cuda/norm.cuh"

enum { ATT_THREADS = 128, ATT_MAX_GROUP = 8, ATT_MAX_HD = 256, ATT_S = TERN_CUDA_ATTN_SPLIT };

/* Folds the ns splits of (query t, kv head kvh) into out: with M the
 * largest split max (exact in any order), weights b_s = exp(m_s - M),
 * out = (sum_s b_s o_s) / (sum_s b_s l_s), both sums in split order. part
 * holds per (query, head, split) o[hd], m, l. mx: G floats of shared
 * memory. Called by the whole block (contains __syncthreads), after a
 * __threadfence that orders the other blocks' partials. */
template <int hd>
__device__ __forceinline__ void attn_fold(const float *__restrict__ part, int t, int kvh, int G, int n_heads,
                                          int max_splits, int ns, float *mx, float *__restrict__ out)
{
    int tid = threadIdx.x, lane = tid & 31;
    long gstride = (long)max_splits * (hd + 2);
    for (int g = tid >> 5; g < G; g += ATT_THREADS / 32) {
        const float *pg = part + ((long)t * n_heads + kvh * G + g) * gstride;
        float m = -INFINITY;
        for (int sp = lane; sp < ns; sp += 32) m = fmaxf(m, __ldcg(pg + (long)sp * (hd + 2) + hd));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        __syncwarp();
        if (lane == 0) mx[g] = m;
    }
    __syncthreads();
    for (int i = tid; i < G * hd; i += ATT_THREADS) {
        int g = i / hd, d = i % hd;
        const float *pg = part + ((long)t * n_heads + kvh * G + g) * gstride;
        float M = mx[g], l = 0.0f, o = 0.0f;
#pragma unroll 8
        for (int sp = 0; sp < ns; sp++) {
            const float *p = pg + (long)sp * (hd + 2);
            float b = expf(__ldcg(p + hd) - M);
            l = fmaf(b, __ldcg(p + hd + 1), l);
            o = fmaf(b, __ldcg(p + d), o);
        }
        out[((long)t * n_heads + kvh * G + g) * hd + d] = o / l;
    }
}

#endif

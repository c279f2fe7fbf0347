/* The split attention's shared parts (internal): the block shape and the
 * fold of a query's splits, one definition for the per-query kernel
 * (attention.cu) and the tiled prefill kernel (attention_tiled.cu), so that
 * both write the same bits for a query. */
#ifndef TERN_BACKEND_CUDA_ATTENTION_CUH
#define TERN_BACKEND_CUDA_ATTENTION_CUH

#include "backend/cuda/norm.cuh"

enum { ATT_THREADS = 128, ATT_MAX_GROUP = 8, ATT_MAX_HD = 256, ATT_S = TERN_CUDA_ATTN_SPLIT };

/* The shapes both attention kernels take (TERN_OK), or the error. */
static inline tern_status attn_shape_check(int max_len, int n_heads, int n_kv_heads, int head_dim)
{
    if (n_kv_heads <= 0 || n_heads % n_kv_heads || n_heads / n_kv_heads > ATT_MAX_GROUP ||
        (head_dim != 16 && head_dim != 32 && head_dim != 64 && head_dim != 128 && head_dim != 256))
        return tern_error(TERN_E_UNSUPPORTED,
                          "cuda attention: %d heads over %d kv heads, head_dim %d (at most %d heads per kv head; "
                          "head_dim 16, 32, 64, 128 or 256)",
                          n_heads, n_kv_heads, head_dim, (int)ATT_MAX_GROUP);
    if (max_len <= 0) return tern_error(TERN_E_INVALID, "cuda attention: max_len %d", max_len);
    return TERN_OK;
}

/* One warp's softmax over a split of S = 32 keys, lane j holding key j's
 * score sc (-inf past the nk visible keys): m = the split's max (fixed
 * butterfly), l = warp_sum(p); returns p = exp(sc - m), 0 past nk. */
__device__ __forceinline__ float split_softmax(float sc, int j, int nk, float *m, float *l)
{
    float mx = sc;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float p = j < nk ? expf(sc - mx) : 0.0f;
    *m = mx;
    *l = warp_sum(p);
    return p;
}

/* Folds the ns splits of (query t, kv head kvh) into out: with M the
 * largest split max (exact in any order), weights b_s = exp(m_s - M),
 * out = (sum_s b_s o_s) / (sum_s b_s l_s), both sums in split order. part
 * holds per (query, head, split) o[hd], m, l. mx: G floats of shared
 * memory; bs: cap floats of shared memory (cap >= G) for the weights, formed
 * once per (head, split) in chunks of cap / G splits. Called by the whole
 * block (contains __syncthreads), after a __threadfence that orders the
 * other blocks' partials. */
template <int hd>
__device__ __forceinline__ void attn_fold(const float *__restrict__ part, int t, int kvh, int G, int n_heads,
                                          int max_splits, int ns, float *mx, float *bs, int cap,
                                          float *__restrict__ out)
{
    int tid = threadIdx.x, lane = tid & 31;
    long gstride = (long)max_splits * (hd + 2);
    const float *p0 = part + ((long)t * n_heads + kvh * G) * gstride;
    for (int g = tid >> 5; g < G; g += ATT_THREADS / 32) {
        const float *pg = p0 + g * gstride;
        float m = -INFINITY;
        for (int sp = lane; sp < ns; sp += 32) m = fmaxf(m, __ldcg(pg + (long)sp * (hd + 2) + hd));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        __syncwarp();
        if (lane == 0) mx[g] = m;
    }
    /* Thread i keeps outputs i, i + ATT_THREADS, ... (at most ATT_MAX_GROUP
     * * ATT_MAX_HD / ATT_THREADS of them) across the chunks. */
    constexpr int PER = ATT_MAX_GROUP * hd / ATT_THREADS > 0 ? ATT_MAX_GROUP * hd / ATT_THREADS : 1;
    float l[PER], o[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) l[k] = o[k] = 0.0f;
    int chunk = cap / G;
    for (int s0 = 0; s0 < ns; s0 += chunk) {
        int n = ns - s0 < chunk ? ns - s0 : chunk;
        __syncthreads();
        for (int i = tid; i < G * n; i += ATT_THREADS) {
            int g = i / n, sp = s0 + i % n;
            bs[g * chunk + (sp - s0)] = expf(__ldcg(p0 + g * gstride + (long)sp * (hd + 2) + hd) - mx[g]);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = tid + k * ATT_THREADS;
            if (i >= G * hd) break;
            int g = i / hd, d = i % hd;
            const float *pg = p0 + g * gstride, *bg = bs + g * chunk;
            float lk = l[k], ok = o[k];
#pragma unroll 8
            for (int sp = s0; sp < s0 + n; sp++) {
                const float *p = pg + (long)sp * (hd + 2);
                float b = bg[sp - s0];
                lk = fmaf(b, __ldcg(p + hd + 1), lk);
                ok = fmaf(b, __ldcg(p + d), ok);
            }
            l[k] = lk;
            o[k] = ok;
        }
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = tid + k * ATT_THREADS;
        if (i >= G * hd) break;
        int g = i / hd, d = i % hd;
        out[((long)t * n_heads + kvh * G + g) * hd + d] = o[k] / l[k];
    }
}

#endif

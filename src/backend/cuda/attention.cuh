/* The split attention's shared parts (internal): the block shape and the
 * fold of a query's splits, one definition for the per-query kernel
 * (attention.cu) and the tiled prefill kernel (attention_tiled.cu), so that
 * both write the same bits for a query. */
#ifndef TERN_BACKEND_CUDA_ATTENTION_CUH
#define TERN_BACKEND_CUDA_ATTENTION_CUH

#include "backend/cuda/mma.cuh"

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

/* A split's arithmetic on the tensor cores, one definition for both
 * kernels. A warp takes 16 (query, head) rows against the split's 32 keys,
 * in m16n8k8 TF32 products with float32 accumulation. Each float32 operand
 * x is cut into hi = tf32(x) and lo = tf32(x - hi) (round to nearest), and
 * a product a . b is lo_a hi_b + hi_a lo_b + hi_a hi_b, added in that
 * order: 22 of float32's 24 mantissa bits of each operand take part.
 *   - Scores: lane (g = lane / 4, t = lane % 4) holds rows g and g + 8; for
 *     each 16 dimensions 16D.. in order, step A puts dimensions 16D + 4t
 *     and 16D + 4t + 1 in k slots t and t + 4, step B 16D + 4t + 2 and
 *     + 3; key tile n (keys 8n .. 8n + 7) accumulates over the steps in
 *     that order from +0. s = scale * acc (rounded product).
 *   - Softmax of a row: m = the max of its visible scores (exact in any
 *     order), p = exp(s - m) (0 for keys it does not see), l = the lane's
 *     8 weights added in key-tile order (key 8n + 2t, then + 1), then the
 *     four lanes by the butterfly (xor 1, then xor 2).
 *   - Values: k step n (keys 8n .. 8n + 7) puts key 8n + 2t in slot t and
 *     8n + 2t + 1 in slot t + 4 (the scores' accumulator layout); an output
 *     tile of 8 dimensions accumulates steps n = 0..3 in order from +0.
 * Nothing in it depends on the other rows, so a (query, head)'s split
 * gives the same bits in the per-query and the tiled kernel. */

/* Row stride (floats or tf32 words) of q and k in shared memory: 16-byte
 * reads of lanes (g, 4t) at rows g hit distinct banks when it is 16 mod 32. */
__host__ __device__ constexpr int att_qk_stride(int hd) { return hd % 32 == 0 ? hd + 16 : hd; }

__device__ __forceinline__ uint32_t att_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

/* x into its tf32 hi and lo parts. */
__device__ __forceinline__ void att_split(float x, uint32_t &h, uint32_t &l)
{
    h = att_tf32(x);
    l = att_tf32(__fsub_rn(x, __uint_as_float(h)));
}

__device__ __forceinline__ void att_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* d += a . b for split operands (a: A fragments hi / lo, b: B fragment
 * pairs hi / lo), in the fixed order lo hi, hi lo, hi hi. */
__device__ __forceinline__ void att_mma3(float d[4], const uint32_t ah[4], const uint32_t al[4], uint32_t bh0,
                                         uint32_t bh1, uint32_t bl0, uint32_t bl1)
{
    att_mma(d, al, bh0, bh1);
    att_mma(d, ah, bl0, bl1);
    att_mma(d, ah, bh0, bh1);
}

/* The A fragments of q rows g (q0) and g + 8 (q1) for one 16-dimension
 * group: their float4s at 16D + 4t; step A (.x, .y) into ah[0] / al[0],
 * step B (.z, .w) into ah[1] / al[1]. */
__device__ __forceinline__ void att_qfrag(float4 q0, float4 q1, uint32_t ah[2][4], uint32_t al[2][4])
{
    att_split(q0.x, ah[0][0], al[0][0]);
    att_split(q1.x, ah[0][1], al[0][1]);
    att_split(q0.y, ah[0][2], al[0][2]);
    att_split(q1.y, ah[0][3], al[0][3]);
    att_split(q0.z, ah[1][0], al[1][0]);
    att_split(q1.z, ah[1][1], al[1][1]);
    att_split(q0.w, ah[1][2], al[1][2]);
    att_split(q1.w, ah[1][3], al[1][3]);
}

/* Raw scores acc[i] (key tile n0 + i, the accumulator layout) of the
 * warp's 16 rows, for key tiles n0 .. n0 + NN - 1 of the split's four (the
 * kernels share a split's tiles among warps; a tile's products and their
 * order do not depend on NN). qf(D, ah, al): the rows' A fragments of
 * group D (att_qfrag); kf(n, D, kh, kl): key 8n + g's hi and lo words at
 * dimensions 16D + 4t .. + 3. */
template <int hd, int NN, class QF, class KF>
__device__ __forceinline__ void att_scores_tiles(float acc[NN][4], int n0, QF qf, KF kf)
{
#pragma unroll
    for (int i = 0; i < NN; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
#pragma unroll 2
    for (int D = 0; D < hd / 16; D++) {
        uint32_t ah[2][4], al[2][4];
        qf(D, ah, al);
#pragma unroll
        for (int i = 0; i < NN; i++) {
            uint4 kh, kl;
            kf(n0 + i, D, kh, kl);
            att_mma3(acc[i], ah[0], al[0], kh.x, kh.y, kl.x, kl.y);
            att_mma3(acc[i], ah[1], al[1], kh.z, kh.w, kl.z, kl.w);
        }
    }
}

/* The softmax of rows g (nk0 visible keys of the split) and g + 8 (nk1):
 * acc (raw scores) becomes p, m[r] / l[r] the rows' max and weight sum
 * (m = -inf, l = 0 for a row that sees none). Every lane of the warp calls
 * it (shuffles). */
__device__ __forceinline__ void att_softmax(float acc[4][4], float scale, int nk0, int nk1, float m[2], float l[2])
{
    int t = threadIdx.x & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int nk = r ? nk1 : nk0;
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float sc = __fmul_rn(acc[n][2 * r + e], scale);
                acc[n][2 * r + e] = sc;
                if (8 * n + 2 * t + e < nk) mx = fmaxf(mx, sc);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float p = 8 * n + 2 * t + e < nk ? expf(acc[n][2 * r + e] - mx) : 0.0f;
                acc[n][2 * r + e] = p;
                sum = n || e ? __fadd_rn(sum, p) : p;
            }
        m[r] = mx;
        l[r] = mma_sum4(sum);
    }
}

/* The weights p (att_softmax's acc) as the values' A fragments, hi / lo
 * per key step n. */
__device__ __forceinline__ void att_pfrag(const float p[4][4], uint32_t ph[4][4], uint32_t pl[4][4])
{
#pragma unroll
    for (int n = 0; n < 4; n++) {
        att_split(p[n][0], ph[n][0], pl[n][0]);
        att_split(p[n][2], ph[n][1], pl[n][1]);
        att_split(p[n][1], ph[n][2], pl[n][2]);
        att_split(p[n][3], ph[n][3], pl[n][3]);
    }
}

/* One output tile o (dimensions n0 .. n0 + 7, the accumulator layout) of
 * the warp's rows: vf(n, vh, vl) gives keys 8n + 2t and 8n + 2t + 1 of
 * dimension n0 + g, hi / lo (x: the first key, y: the second). */
template <class VF>
__device__ __forceinline__ void att_pv(float o[4], const uint32_t ph[4][4], const uint32_t pl[4][4], VF vf)
{
    o[0] = o[1] = o[2] = o[3] = 0.0f;
#pragma unroll
    for (int n = 0; n < 4; n++) {
        uint2 vh, vl;
        vf(n, vh, vl);
        att_mma3(o, ph[n], pl[n], vh.x, vh.y, vl.x, vl.y);
    }
}

/* The fold of a (query, head)'s splits, in split order, from M = -inf,
 * L = 0, O = 0: with M' = max(M, m_s), a = exp(M - M'), b = exp(m_s - M'):
 *   L = fmaf(b, l_s, L a), O = fmaf(b, o_s, O a), M = M';
 * out = O / L. One definition of a step for both kernels (the per-query
 * kernel's fold reads the splits' records, the tiled kernel folds as it
 * goes). */
__device__ __forceinline__ float attn_fold_step(float acc, float a, float b, float v)
{
    return fmaf(b, v, __fmul_rn(acc, a));
}

/* Folds the ns splits of the G heads kvh G .. kvh G + G - 1 of query t
 * into out by attn_fold_step (G <= GMAX; FU: splits whose values a thread
 * reads ahead of their steps). part holds per (query, head, split) o[hd],
 * m, l. mrun: G floats of shared memory; ab: cap floats of shared memory
 * (cap >= 4 G) for the splits' m and l and the steps' a and b, formed once
 * per (head, split) in chunks of cap / (4 G) splits: the running max M' of
 * split s is the max of m_0 .. m_s (exact in any order: a warp's scan), so
 * the bits do not depend on G, GMAX, FU or the chunks. Called by the whole
 * block (contains __syncthreads), after a __threadfence that orders the
 * other blocks' partials. */
template <int hd, int GMAX = ATT_MAX_GROUP, int FU = 4>
__device__ __forceinline__ void attn_fold(const float *__restrict__ part, int t, int kvh, int G, int n_heads,
                                          int max_splits, int ns, float *mrun, float *ab, int cap,
                                          float *__restrict__ out)
{
    int tid = threadIdx.x, lane = tid & 31;
    long gstride = (long)max_splits * (hd + 2);
    const float *p0 = part + ((long)t * n_heads + kvh * G) * gstride;
    for (int g = tid; g < G; g += ATT_THREADS) mrun[g] = -INFINITY;
    /* Thread i keeps outputs i, i + ATT_THREADS, ... (at most GMAX hd /
     * ATT_THREADS of them) across the chunks. */
    constexpr int PER = GMAX * hd / ATT_THREADS > 0 ? GMAX * hd / ATT_THREADS : 1;
    float l[PER], o[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) l[k] = o[k] = 0.0f;
    int chunk = cap / (4 * G);
    float *as = ab, *bs = ab + G * chunk, *ms = bs + G * chunk, *ls = ms + G * chunk;
    for (int s0 = 0; s0 < ns; s0 += chunk) {
        int n = ns - s0 < chunk ? ns - s0 : chunk;
        __syncthreads();
        /* the chunk's split maxima and sums, all loads in flight together */
        for (int i = tid; i < G * n; i += ATT_THREADS) {
            int g = i / n, j = i % n;
            const float *p = p0 + g * gstride + (long)(s0 + j) * (hd + 2) + hd;
            ms[g * chunk + j] = __ldcg(p);
            ls[g * chunk + j] = __ldcg(p + 1);
        }
        __syncthreads();
        for (int g = tid >> 5; g < G; g += ATT_THREADS / 32) {
            float carry = mrun[g];
            for (int i0 = 0; i0 < n; i0 += 32) {
                int i = i0 + lane;
                float m = i < n ? ms[g * chunk + i] : -INFINITY, run = m;
#pragma unroll
                for (int off = 1; off < 32; off <<= 1) {
                    float v = __shfl_up_sync(0xffffffffu, run, off);
                    if (lane >= off) run = fmaxf(run, v);
                }
                run = fmaxf(run, carry);
                float prev = __shfl_up_sync(0xffffffffu, run, 1);
                if (lane == 0) prev = carry;
                if (i < n) {
                    as[g * chunk + i] = expf(prev - run);
                    bs[g * chunk + i] = expf(m - run);
                }
                carry = __shfl_sync(0xffffffffu, run, 31);
            }
            __syncwarp();
            if (lane == 0) mrun[g] = carry;
        }
        __syncthreads();
        /* FU splits at a time: all of the thread's outputs' values read
         * first (their loads in flight together), then each output's steps
         * in split order */
        for (int u0 = 0; u0 < n; u0 += FU) {
            float v[PER][FU];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * ATT_THREADS, g = i / hd, d = i % hd;
#pragma unroll
                for (int u = 0; u < FU; u++)
                    v[k][u] = i < G * hd && u0 + u < n ? __ldcg(p0 + g * gstride + (long)(s0 + u0 + u) * (hd + 2) + d)
                                                       : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * ATT_THREADS, g = i / hd;
                if (i >= G * hd) continue;
#pragma unroll
                for (int u = 0; u < FU; u++) {
                    if (u0 + u >= n) break;
                    int c = g * chunk + u0 + u;
                    l[k] = attn_fold_step(l[k], as[c], bs[c], ls[c]);
                    o[k] = attn_fold_step(o[k], as[c], bs[c], v[k][u]);
                }
            }
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

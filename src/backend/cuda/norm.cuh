/* The RMSNorm and rotary arithmetic shared by the per-row kernels
 * (rowops.cu) and the matrix-vector kernels that fuse them (gemv.cu):
 * one definition of each reduction order and rounding, so that a fused
 * kernel writes exactly the bits of the separate ones (internal). */
#ifndef TERN_BACKEND_CUDA_NORM_CUH
#define TERN_BACKEND_CUDA_NORM_CUH

#include "backend/cuda/common.cuh"

/* Rows up to RMS_WARP_MAX wide are reduced by one warp, wider ones in the
 * order of RMS_VT virtual threads (tern_cuda_rmsnorm's two kernels). */
enum { RMS_VT = 1024, RMS_WARP_MAX = 1024, NORM_HEAD_MAX = 256 };

__device__ __forceinline__ float rms_inv(float ss, int d, float eps)
{
    return 1.0f / sqrtf(__fadd_rn(__fdiv_rn(ss, (float)d), eps));
}

/* Loads of rows that other blocks of the same kernel may have written go
 * through L2 (__ldcg); SH: x is in shared memory (plain loads). */
template <bool SH>
__device__ __forceinline__ float ld_row(const float *p)
{
    if (SH) return *p;
    return __ldcg(p);
}

/* Sum of squares of x[0..d) by one warp: lane l adds x[l], x[l+32], ... in
 * order, then the fixed butterfly. */
template <bool SH = false>
__device__ __forceinline__ float warp_sumsq(const float *x, int d, int lane)
{
    float s = 0.0f;
    for (int i = lane; i < d; i += 32) {
        float v = ld_row<SH>(x + i);
        s = fmaf(v, v, s);
    }
    return warp_sum(s);
}

/* 1 / rms of the row x[0..d) computed by the whole block (blockDim.x a
 * multiple of 32 dividing RMS_VT), in the order of tern_cuda_rmsnorm for
 * that width: d <= RMS_WARP_MAX, warp_sumsq; wider, virtual thread v of
 * RMS_VT adds x[v], x[v + RMS_VT], ... in order, each virtual warp's 32 sums
 * by the butterfly, and the 32 warp sums in order. Every thread returns it.
 * red: 33 floats of shared memory. Contains __syncthreads. */
template <bool SH>
__device__ __forceinline__ float block_rms_inv(const float *x, int d, float eps, float *red)
{
    int tid = threadIdx.x, lane = tid & 31;
    if (d <= RMS_WARP_MAX) {
        if (tid < 32) {
            float s = warp_sumsq<SH>(x, d, lane);
            if (lane == 0) red[32] = rms_inv(s, d, eps);
        }
    } else {
        for (int v0 = 0; v0 < RMS_VT; v0 += blockDim.x) {
            int v = v0 + tid;
            float s = 0.0f;
            for (int i = v; i < d; i += RMS_VT) {
                float t = ld_row<SH>(x + i);
                s = fmaf(t, t, s);
            }
            s = warp_sum(s);
            if (lane == 0) red[v >> 5] = s;
        }
        __syncthreads();
        if (tid == 0) {
            float t = 0.0f;
            for (int i = 0; i < RMS_VT / 32; i++) t = __fadd_rn(t, red[i]);
            red[32] = rms_inv(t, d, eps);
        }
    }
    __syncthreads();
    return red[32];
}

/* One normalised element: x * inv * w, rounded as the CPU's rmsnorm (w
 * the weight as float32). */
__device__ __forceinline__ float rms_scale(float x, float inv, float w) { return __fmul_rn(__fmul_rn(x, inv), w); }

__device__ __forceinline__ float rms_apply(float x, float inv, const void *w, tern_dtype wdt, int i)
{
    return rms_scale(x, inv, weight_at(w, wdt, i));
}

/* Rotates v[0..half) against v[half..2*half) with the row cs of the table. */
__device__ __forceinline__ void rope_pair(float *v, int i, int half, const float *cs)
{
    float a = v[i], b = v[i + half], co = cs[i], si = cs[half + i];
    v[i] = __fsub_rn(__fmul_rn(a, co), __fmul_rn(b, si));
    v[i + half] = __fadd_rn(__fmul_rn(b, co), __fmul_rn(a, si));
}

/* One head of one token by one warp into shared memory b (head_dim
 * floats): optional RMSNorm, then rope with table row csrow (NULL: none). v
 * is read through L2 (other blocks may have written it in the same kernel). */
__device__ __forceinline__ void norm_rope_into(const float *v, float *b, int head_dim, int rope_dim, const void *w,
                                               tern_dtype wdt, float eps, const float *csrow, int lane)
{
    if (w) {
        float inv = rms_inv(warp_sumsq(v, head_dim, lane), head_dim, eps);
        for (int i = lane; i < head_dim; i += 32) b[i] = rms_apply(__ldcg(v + i), inv, w, wdt, i);
    } else {
        for (int i = lane; i < head_dim; i += 32) b[i] = __ldcg(v + i);
    }
    __syncwarp();
    if (csrow) {
        int half = rope_dim / 2;
        for (int i = lane; i < half; i += 32) rope_pair(b, i, half, csrow);
        __syncwarp();
    }
}

/* norm_rope_into's arithmetic on a head already in shared memory b, in
 * place: w the norm weight as float32 (weight_at's values; NULL: no norm),
 * cs the table row (rope_dim / 2 cosines, then the sines), both in shared
 * memory; the same bits. */
__device__ __forceinline__ void norm_rope_smem(float *b, int head_dim, int rope_dim, const float *w, float eps,
                                               const float *cs, int lane)
{
    if (w) {
        float inv = rms_inv(warp_sumsq<true>(b, head_dim, lane), head_dim, eps);
        for (int i = lane; i < head_dim; i += 32) b[i] = rms_scale(b[i], inv, w[i]);
    }
    __syncwarp();
    int half = rope_dim / 2;
    for (int i = lane; i < half; i += 32) rope_pair(b, i, half, cs);
    __syncwarp();
}

/* norm_rope_into, then the write back to v and, when dst is set, to dst as
 * well. */
__device__ __forceinline__ void norm_rope_head(float *v, float *b, float *dst, int head_dim, int rope_dim,
                                               const void *w, tern_dtype wdt, float eps, const float *csrow, int lane)
{
    norm_rope_into(v, b, head_dim, rope_dim, w, wdt, eps, csrow, lane);
    for (int i = lane; i < head_dim; i += 32) {
        v[i] = b[i];
        if (dst) dst[i] = b[i];
    }
    __syncwarp();
}

/* The attention prologue of one head h of token t of a fused qkv row (H
 * query heads, then HK keys, then HK values): query heads get their norm and
 * rope in place; key heads the same and are stored in the row's cache; value
 * heads are stored. b: head_dim floats of shared memory for this warp. */
__device__ __forceinline__ void qkv_head(float *qkv, long ld, int t, int h, int H, int HK, int head_dim, int rope_dim,
                                         const void *qw, const void *kw, tern_dtype wdt, float eps, const float *cs,
                                         const tern_cuda_attn_row *rows, const int *tok_row, float *b, int lane)
{
    tern_cuda_attn_row r = rows[tok_row[t]];
    long p = query_pos(r, t);
    float *v = qkv + (long)t * ld + (long)h * head_dim;
    const float *csrow = cs + p * rope_dim;
    if (h < H) {
        norm_rope_head(v, b, NULL, head_dim, rope_dim, qw, wdt, eps, csrow, lane);
    } else if (h < H + HK) {
        float *dst = kv_at(r.k, r, h - H, p, head_dim);
        norm_rope_head(v, b, dst, head_dim, rope_dim, kw, wdt, eps, csrow, lane);
    } else {
        float *dst = kv_at(r.v, r, h - H - HK, p, head_dim);
        for (int i = lane; i < head_dim; i += 32) dst[i] = __ldcg(v + i);
    }
}

#endif

/* The tensor-core products' arithmetic (bf16 weights, internal): one
 * definition of the per-element order, shared by the small-batch kernel
 * (mma_skinny.cu, one weight pass for up to 64 rows) and the tiled GEMM
 * (mma_gemm.cu, prefill), so that an output's bits depend on K, its row of
 * x and its weight row only, never on M or on which kernel ran.
 *
 * y[m, n] = x[m, :] . w[n, :] for x float32 and w bf16:
 *   - x is split into hi = bf16(x) and lo = bf16(x - hi) (round to nearest
 *     even), so that hi + lo keeps 16 of float32's 24 mantissa bits and
 *     products with hi and lo are exact in float32; with bf16 activations
 *     (TERN_CUDA_ACT_BF16) x is rounded to bf16 and lo is zero (not run).
 *     The folded RMSNorm multiplies x by its weight (float32) before the
 *     split and scales the output by 1 / rms(x).
 *   - K is cut into blocks of 32; the blocks into MMA_PARTS = 8 ranges
 *     [q nb / 8, (q + 1) nb / 8) of nb = K / 32 blocks.
 *   - Part q's partial p_q starts at +0 and takes, for each of its
 *     blocks in order, two m16n8k16 steps, each as mma(hi) then mma(lo).
 *     Lane (g = lane / 4, t = lane % 4) holds elements 8t .. 8t+7 of a
 *     block as four bf16 pairs r0..r3; step 0 puts r0 in the k slots
 *     (2t, 2t+1) and r1 in (2t+8, 2t+9), step 1 r2 and r3. A and B use the
 *     same slots, so the sum is x . w in an order fixed by the hardware.
 *   - y = (..((p_0 + p_1) + p_2) ..) + p_7 in float32, then the epilogue
 *     (norm scale, residual add, SwiGLU).
 * The sum of squares of the folded norm follows the same cut: per part and
 * lane t, x[8t + e]^2 added by fmaf over the part's blocks in order and
 * e = 0..7; the four lanes by the butterfly (xor 1, then xor 2); the parts
 * in order. */
#ifndef TERN_BACKEND_CUDA_MMA_CUH
#define TERN_BACKEND_CUDA_MMA_CUH

#include "backend/cuda/norm.cuh"

/* MMA_SKINNY_MAX: the most rows of the small-batch kernel; more take the GEMM. */
enum { MMA_PARTS = 8, MMA_KB = 32, MMA_SKINNY_MAX = 64 };

/* First 32-element block of part q of nb blocks (q = MMA_PARTS: nb). */
__host__ __device__ __forceinline__ int mma_part(int nb, int q) { return (int)((long)nb * q / MMA_PARTS); }

/* (..((v_0 + v_1) + v_2) ..) + v_7 of v[i * stride]. */
__device__ __forceinline__ float mma_fold(const float *v, int stride)
{
    float s = v[0];
#pragma unroll
    for (int i = 1; i < MMA_PARTS; i++) s = __fadd_rn(s, v[i * stride]);
    return s;
}

__device__ __forceinline__ uint32_t mma_pack(float a, float b)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b); /* a in the low half: the lower k index */
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ float2 mma_unpack(uint32_t u)
{
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

/* Eight consecutive floats at p (16-byte aligned), through the read-only
 * path. */
__device__ __forceinline__ void mma_load8(const float *__restrict__ p, float v[8])
{
    const float4 *q = reinterpret_cast<const float4 *>(p);
    float4 a = __ldg(q), b = __ldg(q + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* Eight consecutive floats of x into hi (and lo when LO) bf16 pairs. */
template <bool LO>
__device__ __forceinline__ void mma_split8(const float v[8], uint32_t hi[4], uint32_t lo[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        hi[i] = mma_pack(v[2 * i], v[2 * i + 1]);
        if (LO) {
            float2 h = mma_unpack(hi[i]);
            lo[i] = mma_pack(__fsub_rn(v[2 * i], h.x), __fsub_rn(v[2 * i + 1], h.y));
        } else {
            lo[i] = 0u;
        }
    }
}

/* Eight elements of x (v) times the folded norm's weight at nw + k (NORM),
 * split into hi / lo pairs: the one-row kernels' preparation of x. */
template <bool LO, bool NORM>
__device__ __forceinline__ void mma_prep8(float v[8], const float *__restrict__ nw, int k, uint32_t hi[4],
                                          uint32_t lo[4])
{
    if (NORM) {
        float nv[8];
        mma_load8(nw + k, nv);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], nv[e]);
    }
    mma_split8<LO>(v, hi, lo);
}

__device__ __forceinline__ void mma16816(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One 32-element block into acc (a 16 x 8 tile: rows g and g + 8, columns
 * 2t and 2t + 1): ah / al are the hi / lo pairs of rows g (index 0) and
 * g + 8 (index 1), b the weight column's pairs. */
template <bool LO>
__device__ __forceinline__ void mma_block(float acc[4], const uint32_t ah[2][4], const uint32_t al[2][4],
                                          const uint32_t b[4])
{
    mma16816(acc, ah[0][0], ah[1][0], ah[0][1], ah[1][1], b[0], b[1]);
    if (LO) mma16816(acc, al[0][0], al[1][0], al[0][1], al[1][1], b[0], b[1]);
    mma16816(acc, ah[0][2], ah[1][2], ah[0][3], ah[1][3], b[2], b[3]);
    if (LO) mma16816(acc, al[0][2], al[1][2], al[0][3], al[1][3], b[2], b[3]);
}

/* The four lanes t of a lane group summed by the fixed butterfly (every
 * lane of the group gets the same bits: float addition commutes). */
__device__ __forceinline__ float mma_sum4(float v)
{
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/* 16-byte copy from global into shared memory (cp.async, through L2
 * only); fill false zeroes the 16 bytes instead. */
__device__ __forceinline__ void cp16(void *dst, const void *src, bool fill)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    int n = fill ? 16 : 0; /* 0: the 16 bytes are zeroed */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(n) : "memory");
}
/* 8-byte copy (cp.async through L1: the cg form takes 16 bytes only). */
__device__ __forceinline__ void cp8(void *dst, const void *src)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* A GEMM call: y[M, N] (+)= (hi + lo)[M, K] . w[N, K]^T (times inv[m]). */
struct gm_args {
    const uint16_t *hi, *lo; /* [M, K] bf16 (lo unused without LO) */
    int M, K;
    const uint16_t *w;       /* [N, K] bf16 */
    int N;
    float *y;
    int ldy, accumulate;
    const float *inv;        /* NORM: [M] */
    const uint16_t *wu;      /* [N, K] bf16: with it, y = silu(x . w^T) * (x . wu^T) (the warpgroup GEMM only) */
    int tiled;               /* w (and wu) in the tiled layout (tiled.cu) */
};

/* The GEMMs' epilogue for an output whose parts sum to v: the folded
 * norm's scale sc (NORM), then the residual add to old (its value in y,
 * read when a.accumulate); one definition so that both GEMMs write the
 * same bits. */
template <bool NORM>
__device__ __forceinline__ float gm_value(const gm_args &a, float old, float v, float sc)
{
    if (NORM) v = __fmul_rn(v, sc);
    return a.accumulate ? __fadd_rn(old, v) : v;
}

/* gm_value into y at (r, n). */
template <bool NORM>
__device__ __forceinline__ void gm_put(const gm_args &a, int r, int n, float v, float sc)
{
    float *yp = a.y + (size_t)r * a.ldy + n;
    *yp = gm_value<NORM>(a, a.accumulate ? *yp : 0.0f, v, sc);
}

/* The warpgroup-MMA GEMM (mma_wgmma.cu): a's arrays borrowed for the
 * call, hi and lo in the prep's PERM layout (each 32-element block's step
 * s at bytes 32 s .. 32 s + 31, slot 2t + d holding element 8t + 4s + d
 * and slot 2t + 8 + d element 8t + 4s + 2 + d); it takes a when _takes
 * says so. */
int tern_cuda_wgmma_takes(const gm_args &a);
tern_status tern_cuda_wgmma_gemm(tern_cuda *c, bool lo, bool norm, const gm_args &a);

/* Scratch of the GEMM path (mma_gemm.cu), grown on demand outside graph
 * capture; owned by the context: *out is borrowed until the next call. */
tern_status tern_cuda_mma_scratch(tern_cuda *c, size_t bytes, void **out);

#endif

/* Tensor-core products for decode and small batches (up to 64 rows): one
 * pass over the bf16 weights for all rows, in the order of mma.cuh.
 *
 * A block of four warps owns a tile of 8 NT output columns at a time (of
 * NMAT matrices: 2 for a SwiGLU gate and up); warp q streams quarter q of K
 * of those weight rows. Each lane copies its own 16-byte pieces of the
 * weights into a private ring of S stages in shared memory (cp.async: the
 * bytes in flight cost no registers) and reads them back as mma operands;
 * it splits the x elements it needs into bf16 hi / lo in registers and runs
 * the m16n8k16 steps for each 16-row tile of x. The ring runs across tile
 * boundaries, so the next tile's weights stream while a tile's epilogue
 * runs. The quarters' partials meet in shared memory and are summed in
 * quarter order, then the epilogue (norm scale, residual add, SwiGLU)
 * writes the tile. The grid is one wave with the same number of tiles per
 * block; the first weights are requested before the wait for the previous
 * kernel (weights are never written by a kernel). */
#include "backend/cuda/mma.cuh"

enum { SK_THREADS = 32 * MMA_QUARTERS };

struct sk_args {
    const float *x;     /* [M, K] float32 */
    int M, K;
    const uint16_t *w0; /* [N, K] bf16: the product's weight, or the gate */
    const uint16_t *w1; /* [N, K] bf16: the up weight (NMAT = 2), else NULL */
    int N;
    float *y;           /* [M, ldy]: y = x . w0^T (+= with accumulate), or silu(gate) * up */
    int ldy, accumulate;
    const float *nw;    /* NORM: the RMSNorm weight [K] as float32 */
    float eps;
};

/* Eight floats of row r of x at column k (zeros past the last row). */
__device__ __forceinline__ void sk_x8(const float *__restrict__ x, int r, int M, int K, int k, float v[8])
{
    if (r < M) {
        const float4 *p = reinterpret_cast<const float4 *>(x + (size_t)r * K + k);
        float4 a = __ldg(p), b = __ldg(p + 1);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = 0.0f;
    }
}

/* Rows of x per 16-row tile that can be non-zero: 8 when M <= 8 (R8: the
 * tile's rows g + 8 are zeros, not loaded or split). */
template <int MT, bool R8, bool LO, int W, bool NORM, int U>
__device__ __forceinline__ void sk_compute(const sk_args &a, const uint4 *stage, int kb, int kb_end, int g, int t,
                                           float (&acc)[MT][W][4], float (&ss)[MT][2])
{
    constexpr int H = R8 ? 1 : 2;
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (kb + u >= kb_end) break;
        int k = (kb + u) * MMA_KB + 8 * t;
        float nv[8];
        if (NORM) {
            const float4 *p = reinterpret_cast<const float4 *>(a.nw + k);
            float4 n0 = __ldg(p), n1 = __ldg(p + 1);
            nv[0] = n0.x, nv[1] = n0.y, nv[2] = n0.z, nv[3] = n0.w, nv[4] = n1.x, nv[5] = n1.y, nv[6] = n1.z, nv[7] = n1.w;
        }
#pragma unroll
        for (int i = 0; i < MT; i++) {
            uint32_t ah[2][4], al[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (h >= H) {
#pragma unroll
                    for (int e = 0; e < 4; e++) ah[h][e] = al[h][e] = 0u;
                    continue;
                }
                float v[8];
                sk_x8(a.x, 16 * i + g + 8 * h, a.M, a.K, k, v);
                if (NORM) {
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        ss[i][h] = fmaf(v[e], v[e], ss[i][h]);
                        v[e] = __fmul_rn(v[e], nv[e]);
                    }
                }
                mma_split8<LO>(v, ah[h], al[h]);
            }
#pragma unroll
            for (int j = 0; j < W; j++) {
                uint4 bv = stage[(u * W + j) * 32];
                const uint32_t b[4] = {bv.x, bv.y, bv.z, bv.w};
                mma_block<LO>(acc[i][j], ah, al, b);
            }
        }
    }
}

__device__ __forceinline__ void sk_cp16(uint4 *dst, const void *src, bool on)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (on) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

/* W = NMAT * NT weight streams per warp: NT tiles of 8 columns of each of
 * NMAT matrices (NMAT = 2: gate and up), sharing every split of x. Batch f
 * of a warp is U blocks of 32 elements of tile blockIdx.x + (f / nbat)
 * gridDim.x; the ring holds S batches: [warp][stage][u][w][lane] pieces. */
template <int MT, bool R8, bool LO, int NMAT, int NT, bool NORM, int U, int S>
__global__ void __launch_bounds__(SK_THREADS) mma_skinny_kernel(sk_args a)
{
    constexpr int W = NMAT * NT, ROWS = R8 ? 8 : MT * 16, COLS = 8 * NT, PIECES = U * W * 32;
    extern __shared__ uint4 sk_ring[];
    __shared__ float part[NMAT][MMA_QUARTERS][ROWS][COLS];
    __shared__ float ssq[MMA_QUARTERS][NORM ? ROWS : 1];
    int lane = threadIdx.x & 31, q = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int nb = a.K / MMA_KB, kb0 = mma_quarter(nb, q), kb1 = mma_quarter(nb, q + 1);
    int qmax = 0;
#pragma unroll
    for (int i = 0; i < MMA_QUARTERS; i++) {
        int l = mma_quarter(nb, i + 1) - mma_quarter(nb, i);
        qmax = l > qmax ? l : qmax;
    }
    int nbat = (qmax + U - 1) / U; /* the same for every warp: the block's barriers line up */
    int ntiles = (a.N + COLS - 1) / COLS;
    int my_tiles = blockIdx.x < ntiles ? (ntiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    int total = my_tiles * nbat;
    uint4 *ring = sk_ring + (size_t)q * S * PIECES + lane;
    auto issue = [&](int f) {
        if (f >= total) return;
        int tl = blockIdx.x + (f / nbat) * gridDim.x, kb = kb0 + (f % nbat) * U;
        uint4 *st = ring + (f % S) * PIECES;
#pragma unroll
        for (int j = 0; j < W; j++) {
            int n = tl * COLS + (j % NT) * 8 + g;
            n = n < a.N ? n : a.N - 1; /* a row past N is read, never written */
            const uint16_t *wr = (j / NT ? a.w1 : a.w0) + (size_t)n * a.K + 8 * t;
#pragma unroll
            for (int u = 0; u < U; u++) sk_cp16(st + (u * W + j) * 32, wr + (size_t)(kb + u) * MMA_KB, kb + u < kb1);
        }
    };
#pragma unroll
    for (int f = 0; f < S - 1; f++) {
        issue(f);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    wait_prior_grid();
    float acc[MT][W][4], ss[MT][2];
    auto zero = [&]() {
#pragma unroll
        for (int i = 0; i < MT; i++) {
            ss[i][0] = ss[i][1] = 0.0f;
#pragma unroll
            for (int j = 0; j < W; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
        }
    };
    zero();
    for (int f = 0; f < total; f++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        issue(f + S - 1);
        asm volatile("cp.async.commit_group;" ::: "memory");
        sk_compute<MT, R8, LO, W, NORM, U>(a, ring + (f % S) * PIECES, kb0 + (f % nbat) * U, kb1, g, t, acc, ss);
        if (f % nbat != nbat - 1) continue;
        int tile = blockIdx.x + (f / nbat) * gridDim.x;
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < W; j++) {
                float(*pj)[COLS] = part[j / NT][q];
                int c0 = (j % NT) * 8 + 2 * t;
                pj[16 * i + g][c0] = acc[i][j][0];
                pj[16 * i + g][c0 + 1] = acc[i][j][1];
                if (!R8) {
                    pj[(16 * i + g + 8) % ROWS][c0] = acc[i][j][2];
                    pj[(16 * i + g + 8) % ROWS][c0 + 1] = acc[i][j][3];
                }
            }
        if (NORM) {
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int h = 0; h < (R8 ? 1 : 2); h++) {
                    float s = mma_sum4(ss[i][h]);
                    if (t == 0) ssq[q][NORM ? (16 * i + g + 8 * h) % ROWS : 0] = s;
                }
        }
        zero();
        __syncthreads();
        int rows = a.M < ROWS ? a.M : ROWS;
        for (int idx = threadIdx.x; idx < rows * COLS; idx += SK_THREADS) {
            int r = idx / COLS, cidx = idx % COLS, n = tile * COLS + cidx;
            if (n >= a.N) continue;
            float v[NMAT];
#pragma unroll
            for (int j = 0; j < NMAT; j++)
                v[j] = __fadd_rn(__fadd_rn(__fadd_rn(part[j][0][r][cidx], part[j][1][r][cidx]), part[j][2][r][cidx]),
                                 part[j][3][r][cidx]);
            if (NORM) {
                int rr = NORM ? r : 0;
                float s = __fadd_rn(__fadd_rn(__fadd_rn(ssq[0][rr], ssq[1][rr]), ssq[2][rr]), ssq[3][rr]);
                float inv = rms_inv(s, a.K, a.eps);
#pragma unroll
                for (int j = 0; j < NMAT; j++) v[j] = __fmul_rn(v[j], inv);
            }
            float *yp = a.y + (size_t)r * a.ldy + n;
            if (NMAT == 2) *yp = mma_silu_mul(v[0], v[NMAT - 1]);
            else *yp = a.accumulate ? __fadd_rn(*yp, v[0]) : v[0];
        }
        __syncthreads();
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

/* One wave of the kernel's blocks, each with the same number of tiles. */
template <int MT, bool R8, bool LO, int NMAT, int NT, bool NORM, int U, int S = 4>
static tern_status sk_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = mma_skinny_kernel<MT, R8, LO, NMAT, NT, NORM, U, S>;
    size_t smem = (size_t)MMA_QUARTERS * S * U * NMAT * NT * 32 * sizeof(uint4);
    static int per_sm; /* one value per instance; a race only asks twice */
    if (!per_sm) {
        CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "mma_skinny smem");
        int b = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kern, SK_THREADS, smem) != cudaSuccess || b < 1) {
            cudaGetLastError();
            b = 1;
        }
        per_sm = b;
    }
    long ntiles = (a.N + 8 * NT - 1) / (8 * NT), wave = (long)per_sm * c->sms;
    long per = (ntiles + wave - 1) / wave, blocks = (ntiles + per - 1) / per;
    return launch(c, "mma_skinny", kern, dim3((unsigned)blocks), dim3(SK_THREADS), smem, a);
}

/* Up to 8 rows: each tile's second half of rows is skipped, and a single
 * matrix takes two column tiles per warp (one split of x for both). */
template <bool LO, int NMAT, bool NORM>
static tern_status sk_rows(tern_cuda *c, const sk_args &a)
{
    if (a.M <= 8) {
        if constexpr (NMAT == 1) return sk_launch<1, true, LO, 1, 2, NORM, 4>(c, a);
        else return sk_launch<1, true, LO, NMAT, 1, NORM, 4>(c, a);
    }
    if (a.M <= 16) return sk_launch<1, false, LO, NMAT, 1, NORM, 4>(c, a);
    if (a.M <= 32) return sk_launch<2, false, LO, NMAT, 1, NORM, 4>(c, a);
    return sk_launch<4, false, LO, NMAT, 1, NORM, 4>(c, a);
}

/* y = x . w^T for M <= 64 rows (internal: mma_gemm.cu's dispatch). nw:
 * the folded RMSNorm's weight or NULL; wu: the up weight of a SwiGLU
 * gate/up pair (w the gate), or NULL. */
tern_status tern_cuda_mma_skinny(tern_cuda *c, bool lo, const float *x, int M, int K, const void *w, const void *wu,
                                 int N, float *y, int ldy, int accumulate, const float *nw, float eps)
{
    if (M < 1 || M > 64) return tern_error(TERN_E_INTERNAL, "cuda mma: the small-batch kernel takes 1..64 rows, not %d", M);
    sk_args a = {x, M, K, (const uint16_t *)w, (const uint16_t *)wu, N, y, ldy, accumulate, nw, eps};
    if (wu) {
        if (nw) return lo ? sk_rows<true, 2, true>(c, a) : sk_rows<false, 2, true>(c, a);
        return lo ? sk_rows<true, 2, false>(c, a) : sk_rows<false, 2, false>(c, a);
    }
    if (nw) return lo ? sk_rows<true, 1, true>(c, a) : sk_rows<false, 1, true>(c, a);
    return lo ? sk_rows<true, 1, false>(c, a) : sk_rows<false, 1, false>(c, a);
}

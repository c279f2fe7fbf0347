/* Tensor-core products for decode and small batches (up to 64 rows): one
 * pass over the bf16 weights for all rows, in the order of mma.cuh.
 *
 * A block of eight warps owns a tile of 8 output columns at a time (of
 * NMAT matrices: 2 for a SwiGLU gate and up); warp q streams part q of K of
 * those weight rows in 16-byte loads, U blocks of 32 elements per buffer and
 * two buffers in flight, splits the x elements it needs into bf16 hi / lo in
 * registers and runs the m16n8k16 steps for each 16-row tile of x. The
 * parts' partials meet in shared memory and are summed in part order, then
 * the epilogue (norm scale, residual add, SwiGLU) writes the tile. The grid
 * is one wave with the same number of tiles per block; the first weights
 * are loaded before the wait for the previous kernel (weights are never
 * written by a kernel), and each tile's last loads are followed by the next
 * tile's first. */
#include "backend/cuda/mma.cuh"

enum { SK_THREADS = 32 * MMA_PARTS };

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
    /* The one-row kernel over a SwiGLU pair as one matrix (NMAT = 1, N =
     * 2F, F a multiple of 4; zero elsewhere): tile t's rows are gate rows
     * 4t..4t+3 (lanes g < 4) and the same up rows (g >= 4), and it writes
     * y[4t + c] = silu(gate) * up for c < 4. */
    int ilv;
    int trig; /* the one-row kernel: launch the next kernel at the start (1) or at the block's last tile (2) */
    int early; /* the one-row kernel: the first tile's second weight batch loaded right after the wait, before (1) or after the first (2) or the last (3) x loads */
#ifdef TERN_CUDA_TIMELINE
    unsigned long long *tl; /* this launch's stamps (tern_cuda_set_timeline), or NULL */
#endif
};

#define SK_STAMP(slot) TL_STAMP(a.tl, blockIdx.x, slot)

/* Elements between a lane's 16 bytes of consecutive 32-element blocks:
 * MMA_KB in a row-major matrix, 8 rows' worth in a tiled one (TILED:
 * tiled.cu's layout, each tile of 8 rows stored block by block). */
template <bool TILED> __device__ __forceinline__ constexpr int sk_kstride() { return TILED ? 8 * MMA_KB : MMA_KB; }

/* n loads of 16 bytes per weight stream, blocks kb .. kb + n - 1. */
template <int NMAT, int U, bool TILED = false>
__device__ __forceinline__ void sk_load(uint4 (&buf)[U][NMAT], const uint16_t *const (&wr)[NMAT], int kb, int n)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < n) {
#pragma unroll
            for (int j = 0; j < NMAT; j++) buf[u][j] = ld_stream16(wr[j] + (size_t)(kb + u) * sk_kstride<TILED>());
        }
}

/* Lane (g, t)'s weight rows of tile tl: row 8 tl + g of each matrix (the
 * last row for rows past N: read, never written), at elements 8t of its
 * blocks. */
template <bool TILED>
__device__ __forceinline__ size_t sk_row_at(int n, int K)
{
    return TILED ? (size_t)(n >> 3) * 8 * K + (n & 7) * MMA_KB : (size_t)n * K;
}

template <int NMAT, bool TILED = false>
__device__ __forceinline__ void sk_rows_of(const sk_args &a, int tl, int g, int t, const uint16_t *(&wr)[NMAT])
{
    if (NMAT == 1 && a.ilv) {
        wr[0] = (g < 4 ? a.w0 : a.w1) + sk_row_at<TILED>(4 * tl + (g & 3), a.K) + 8 * t;
        return;
    }
    int n = tl * 8 + g < a.N ? tl * 8 + g : a.N - 1;
#pragma unroll
    for (int j = 0; j < NMAT; j++) wr[j] = (j ? a.w1 : a.w0) + sk_row_at<TILED>(n, a.K) + 8 * t;
}

/* The start of a warp of the one-row and small-batch kernels: its lane
 * (g, t) and part q of K's blocks (kb0, len: nfull whole batches of U),
 * the block's first tile and the tile count, that tile's weight rows, and
 * their first batch loaded into buf (the weights: before the wait for the
 * previous kernel). */
struct sk_warp {
    int g, t, q, kb0, len, nfull, ntiles, tile;
};

template <int NMAT, int U, bool TILED = false>
__device__ __forceinline__ sk_warp sk_start(const sk_args &a, const uint16_t *(&wr)[NMAT], uint4 (&buf)[U][NMAT])
{
    sk_warp w;
    int lane = threadIdx.x & 31;
    w.q = threadIdx.x >> 5;
    w.g = lane >> 2, w.t = lane & 3;
    int nb = a.K / MMA_KB;
    w.kb0 = mma_part(nb, w.q), w.len = mma_part(nb, w.q + 1) - w.kb0;
    w.nfull = w.len / U, w.ntiles = (a.N + 7) / 8;
    w.tile = blockIdx.x;
    if (w.tile < w.ntiles) {
        sk_rows_of<NMAT, TILED>(a, w.tile, w.g, w.t, wr);
        if (w.nfull) sk_load<NMAT, U, TILED>(buf, wr, w.kb0, U);
    }
    return w;
}

/* A tile's part of K through step(buf, kb, n) (n <= U blocks from kb):
 * whole batches of U blocks, two buffers in flight (bA holds the first,
 * loaded before), then the rest one block at a time, the same products in
 * the same order; then the block's next tile's rows and first batch into
 * bA. Returns that tile (ntiles or past: none). One loop for both
 * kernels. */
template <int NMAT, int U, class STEP, bool TILED = false>
__device__ __forceinline__ int sk_stream(const sk_args &a, const sk_warp &w, const uint16_t *(&wr)[NMAT],
                                         uint4 (&bA)[U][NMAT], uint4 (&bB)[U][NMAT], STEP step, bool b_in = false)
{
    const int kb0 = w.kb0, len = w.len, nfull = w.nfull;
    int kb = kb0;
    for (int b = 0; b < nfull; b += 2, kb += 2 * U) {
        if (b + 1 < nfull && !(b_in && b == 0)) sk_load<NMAT, U, TILED>(bB, wr, kb + U, U);
        step(bA, kb, U);
        if (b + 2 < nfull) sk_load<NMAT, U, TILED>(bA, wr, kb + 2 * U, U);
        if (b + 1 < nfull) step(bB, kb + U, U);
    }
    kb = kb0 + nfull * U;
    if (kb < kb0 + len) {
        int rest = kb0 + len - kb;
        sk_load<NMAT, U, TILED>(bB, wr, kb, rest);
        step(bB, kb, rest);
    }
    int next = w.tile + gridDim.x;
    if (next < w.ntiles) {
        sk_rows_of<NMAT, TILED>(a, next, w.g, w.t, wr);
        if (nfull) sk_load<NMAT, U, TILED>(bA, wr, kb0, U);
    }
    return next;
}

/* Eight floats of row r of x at column k (zeros past the last row). */
__device__ __forceinline__ void sk_x8(const float *__restrict__ x, int r, int M, int K, int k, float v[8])
{
    if (r < M) {
        mma_load8(x + (size_t)r * K + k, v);
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = 0.0f;
    }
}

/* Blocks kb .. kb + n - 1 (n <= U) into acc. R8 (M <= 8): the rows g + 8
 * of the 16-row tile are zeros, not loaded or split, and the x (and norm
 * weight) loads of all n blocks are issued before the first product. */
template <int MT, bool R8, bool LO, int NMAT, bool NORM, int U>
__device__ __forceinline__ void sk_compute(const sk_args &a, const uint4 (&buf)[U][NMAT], int kb, int n, int g, int t,
                                           float (&acc)[MT][NMAT][4], float (&ss)[MT][2])
{
    if constexpr (R8) {
        float xv[U][8], nv[NORM ? U : 1][8];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n) {
                int k = (kb + u) * MMA_KB + 8 * t;
                sk_x8(a.x, g, a.M, a.K, k, xv[u]);
                if (NORM) mma_load8(a.nw + k, nv[NORM ? u : 0]);
            }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < n) {
                if (NORM) {
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        ss[0][0] = fmaf(xv[u][e], xv[u][e], ss[0][0]);
                        xv[u][e] = __fmul_rn(xv[u][e], nv[NORM ? u : 0][e]);
                    }
                }
                uint32_t ah[2][4], al[2][4];
                mma_split8<LO>(xv[u], ah[0], al[0]);
#pragma unroll
                for (int e = 0; e < 4; e++) ah[1][e] = al[1][e] = 0u;
#pragma unroll
                for (int j = 0; j < NMAT; j++) {
                    const uint32_t b[4] = {buf[u][j].x, buf[u][j].y, buf[u][j].z, buf[u][j].w};
                    mma_block<LO>(acc[0][j], ah, al, b);
                }
            }
    } else {
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (u >= n) break;
            int k = (kb + u) * MMA_KB + 8 * t;
            float nv[8];
            if (NORM) mma_load8(a.nw + k, nv);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                uint32_t ah[2][4], al[2][4];
#pragma unroll
                for (int h = 0; h < 2; h++) {
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
                for (int j = 0; j < NMAT; j++) {
                    const uint32_t b[4] = {buf[u][j].x, buf[u][j].y, buf[u][j].z, buf[u][j].w};
                    mma_block<LO>(acc[i][j], ah, al, b);
                }
            }
        }
    }
}

template <int MT, bool R8, bool LO, int NMAT, bool NORM, int U, int MINB, bool TILED>
__global__ void __launch_bounds__(SK_THREADS, MINB) mma_skinny_kernel(sk_args a)
{
    constexpr int ROWS = R8 ? 8 : MT * 16;
    __shared__ float part[NMAT][MMA_PARTS][ROWS][8];
    __shared__ float ssq[MMA_PARTS][NORM ? ROWS : 1];
    const uint16_t *wr[NMAT];
    uint4 bA[U][NMAT], bB[U][NMAT];
    sk_warp w = sk_start<NMAT, U, TILED>(a, wr, bA); /* w.tile: the tile in hand */
    const int g = w.g, t = w.t, q = w.q, ntiles = w.ntiles;
    wait_prior_grid();
    while (w.tile < ntiles) {
        float acc[MT][NMAT][4], ss[MT][2];
#pragma unroll
        for (int i = 0; i < MT; i++) {
            ss[i][0] = ss[i][1] = 0.0f;
#pragma unroll
            for (int j = 0; j < NMAT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
        }
        auto step = [&](const uint4(&buf)[U][NMAT], int kb, int n) {
            sk_compute<MT, R8, LO, NMAT, NORM, U>(a, buf, kb, n, g, t, acc, ss);
        };
        int next = sk_stream<NMAT, U, decltype(step), TILED>(a, w, wr, bA, bB, step);
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NMAT; j++) {
                float(*pj)[8] = part[j][q];
                pj[16 * i + g][2 * t] = acc[i][j][0];
                pj[16 * i + g][2 * t + 1] = acc[i][j][1];
                if (!R8) {
                    pj[(16 * i + g + 8) % ROWS][2 * t] = acc[i][j][2];
                    pj[(16 * i + g + 8) % ROWS][2 * t + 1] = acc[i][j][3];
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
        __syncthreads();
        int rows = a.M < ROWS ? a.M : ROWS;
        for (int idx = threadIdx.x; idx < rows * 8; idx += SK_THREADS) {
            int r = idx >> 3, cidx = idx & 7, n = w.tile * 8 + cidx;
            if (n >= a.N) continue;
            float v[NMAT];
#pragma unroll
            for (int j = 0; j < NMAT; j++) v[j] = mma_fold(&part[j][0][r][cidx], ROWS * 8);
            if (NORM) {
                float inv = rms_inv(mma_fold(&ssq[0][NORM ? r : 0], NORM ? ROWS : 1), a.K, a.eps);
#pragma unroll
                for (int j = 0; j < NMAT; j++) v[j] = __fmul_rn(v[j], inv);
            }
            float *yp = a.y + (size_t)r * a.ldy + n;
            if (NMAT == 2) *yp = silu_mul(v[0], v[NMAT - 1]);
            else *yp = a.accumulate ? __fadd_rn(*yp, v[0]) : v[0];
        }
        __syncthreads();
        w.tile = next;
    }
}

/* The one-row kernel (M = 1) with x prepared once per block
 * (TERN_CUDA_SKX = 2, 3 or 4: the blocks a multiprocessor must hold; 5
 * below; H200, Qwen3-8B shape, decode 4.87 ms a token at 3 against
 * 4.95 at 2, 5.70 at 4 and 4.98 for the register-buffered kernel): the tiles, parts and products of mma_skinny_kernel<1,
 * true, ...>, but each warp splits its part of x (times the norm weight)
 * into hi / lo once, into shared memory, instead of once per tile, and
 * forms the norm's sum of squares once, so that the main loop holds only
 * the weight buffers and the accumulators (fewer registers: more warps,
 * more weight bytes in flight). Lanes of rows 1..7 (zero rows of x) hold
 * zero fragments, as the other kernel's split of zeros gives. */
enum { SX_MAX_SMEM = 96 * 1024 };

static size_t sx_smem(int K) { return (size_t)(K / MMA_KB) * 4 * 2 * sizeof(uint4); }

template <bool LO, int NMAT, bool NORM, int U, int MINB, bool TILED = false>
__global__ void __launch_bounds__(SK_THREADS, MINB) sk_one_kernel(sk_args a)
{
    __shared__ float part[NMAT][MMA_PARTS][8];
    __shared__ float ssq[MMA_PARTS];
    extern __shared__ uint4 sx4[]; /* block kb, lane t: sx4[2 (4 kb + t)] hi pairs, + 1 lo pairs */
    const uint16_t *wr[NMAT];
    uint4 bA[U][NMAT], bB[U][NMAT];
    SK_STAMP(0);
    sk_warp w = sk_start<NMAT, U, TILED>(a, wr, bA); /* w.tile: the tile in hand */
    const int g = w.g, t = w.t, q = w.q, kb0 = w.kb0, len = w.len, ntiles = w.ntiles;
#if __CUDA_ARCH__ >= 900
    if (a.trig == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    wait_prior_grid();
    SK_STAMP(1);
#ifdef TERN_CUDA_TIMELINE
    int ndone = 0;
#endif
    /* early: the first tile's second batch (what sk_stream's first step
     * would load) in flight while x is read and split */
    bool b_in = a.early && w.tile < ntiles && w.nfull >= 2 && (a.early == 1 || len > g);
    if (b_in && a.early == 1) sk_load<NMAT, U, TILED>(bB, wr, kb0 + U, U);
    /* The warp's part of x: lane (g, t) splits blocks kb0 + g, + 8, ... */
    for (int kb = kb0 + g; kb < kb0 + len; kb += 8) {
        int k = kb * MMA_KB + 8 * t;
        float v[8];
        mma_load8(a.x + k, v);
        if (b_in && ((a.early == 2 && kb == kb0 + g) || (a.early == 3 && kb + 8 >= kb0 + len)))
            sk_load<NMAT, U, TILED>(bB, wr, kb0 + U, U);
        uint32_t h[4], l[4];
        mma_prep8<LO, NORM>(v, a.nw, k, h, l);
        sx4[2 * (4 * kb + t)] = make_uint4(h[0], h[1], h[2], h[3]);
        if (LO) sx4[2 * (4 * kb + t) + 1] = make_uint4(l[0], l[1], l[2], l[3]);
    }
    /* the norm's sum of squares: lane t of row 0 over the part's blocks in
     * order, e = 0..7 (the other kernel's order; zero rows give 0) */
    float ss = 0.0f;
    if (NORM && g == 0) {
        for (int kb = kb0; kb < kb0 + len; kb++) {
            float v[8];
            mma_load8(a.x + kb * MMA_KB + 8 * t, v);
#pragma unroll
            for (int e = 0; e < 8; e++) ss = fmaf(v[e], v[e], ss);
        }
    }
    __syncwarp();
    SK_STAMP(2);
    while (w.tile < ntiles) {
#if __CUDA_ARCH__ >= 900
        if (a.trig == 2 && w.tile + (int)gridDim.x >= ntiles) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
        float acc[NMAT][4];
#pragma unroll
        for (int j = 0; j < NMAT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        auto step = [&](const uint4(&buf)[U][NMAT], int kb, int n) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (u < n) {
                    uint32_t ah[2][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}},
                             al[2][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
                    if (g == 0) {
                        uint4 hv = sx4[2 * (4 * (kb + u) + t)];
                        ah[0][0] = hv.x, ah[0][1] = hv.y, ah[0][2] = hv.z, ah[0][3] = hv.w;
                        if (LO) {
                            uint4 lv = sx4[2 * (4 * (kb + u) + t) + 1];
                            al[0][0] = lv.x, al[0][1] = lv.y, al[0][2] = lv.z, al[0][3] = lv.w;
                        }
                    }
#pragma unroll
                    for (int j = 0; j < NMAT; j++) {
                        const uint32_t b[4] = {buf[u][j].x, buf[u][j].y, buf[u][j].z, buf[u][j].w};
                        mma_block<LO>(acc[j], ah, al, b);
                    }
                }
        };
        int next = sk_stream<NMAT, U, decltype(step), TILED>(a, w, wr, bA, bB, step, b_in);
        b_in = false;
        if (g == 0) {
#pragma unroll
            for (int j = 0; j < NMAT; j++) {
                part[j][q][2 * t] = acc[j][0];
                part[j][q][2 * t + 1] = acc[j][1];
            }
        }
        if (NORM) {
            float sq = mma_sum4(ss);
            if (g == 0 && t == 0) ssq[q] = sq;
        }
        __syncthreads();
        if (NMAT == 1 && a.ilv) {
            /* the pair kernel's epilogue for the tile's 4 columns: each
             * column's fold (and norm scale) as there */
            if (threadIdx.x < 4) {
                int cidx = threadIdx.x;
                float vg = mma_fold(&part[0][0][cidx], 8), vu = mma_fold(&part[0][0][cidx + 4], 8);
                if (NORM) {
                    float inv = rms_inv(mma_fold(ssq, 1), a.K, a.eps);
                    vg = __fmul_rn(vg, inv), vu = __fmul_rn(vu, inv);
                }
                a.y[w.tile * 4 + cidx] = silu_mul(vg, vu);
            }
        } else if (threadIdx.x < 8) {
            int cidx = threadIdx.x, n = w.tile * 8 + cidx;
            if (n < a.N) {
                float v[NMAT];
#pragma unroll
                for (int j = 0; j < NMAT; j++) v[j] = mma_fold(&part[j][0][cidx], 8);
                if (NORM) {
                    float inv = rms_inv(mma_fold(ssq, 1), a.K, a.eps);
#pragma unroll
                    for (int j = 0; j < NMAT; j++) v[j] = __fmul_rn(v[j], inv);
                }
                float *yp = a.y + n;
                if (NMAT == 2) *yp = silu_mul(v[0], v[NMAT - 1]);
                else *yp = a.accumulate ? __fadd_rn(*yp, v[0]) : v[0];
            }
        }
        __syncthreads();
        w.tile = next;
#ifdef TERN_CUDA_TIMELINE
        ndone++;
        if (ndone <= 3) SK_STAMP(2 + ndone);
#endif
    }
    SK_STAMP(6);
    TL_INFO(a.tl, blockIdx.x, dev_smid() | (unsigned long long)ndone << 16 | (unsigned long long)gridDim.x << 32);
}

template <bool LO, int NMAT, bool NORM, bool TILED, int MINB, int U = NMAT == 1 ? 4 : 2>
static tern_status sx_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = sk_one_kernel<LO, NMAT, NORM, U, MINB, TILED>;
    static int ready;
    tern_status st = smem_limit_once((const void *)kern, SX_MAX_SMEM, &ready, "one-row product smem");
    if (st) return st;
    size_t smem = sx_smem(a.K);
    sk_args b = a;
    b.trig = c->sk_trig;
    b.early = c->sk_early;
#ifdef TERN_CUDA_TIMELINE
    b.tl = NULL;
    if (c->tl && c->tl_seq < c->tl_cap)
        b.tl = c->tl + (size_t)c->tl_seq++ * TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS;
#endif
    return launch(c, "mma_skinny_one", kern, one_wave((const void *)kern, c->sms, SK_THREADS, smem, (a.N + 7) / 8, 1),
                  dim3(SK_THREADS), smem, b);
}

/* One wave of the kernel's blocks, each with the same number of tiles. */
template <int MT, bool R8, bool LO, int NMAT, bool NORM, bool TILED, int U, int MINB = 2>
static tern_status sk_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = mma_skinny_kernel<MT, R8, LO, NMAT, NORM, U, MINB, TILED>;
    return launch(c, "mma_skinny", kern, one_wave((const void *)kern, c->sms, SK_THREADS, 0, (a.N + 7) / 8, 1),
                  dim3(SK_THREADS), 0, a);
}

/* TILED: the weights in the tiled layout (tiled.cu), read by the same
 * kernels into the same registers in the same order. */
template <bool LO, int NMAT, bool NORM, bool TILED>
static tern_status sk_rows(tern_cuda *c, const sk_args &a)
{
    if (a.M == 1 && c->sk_x >= 2 && sx_smem(a.K) <= SX_MAX_SMEM) {
        /* 5 (the default): the one-matrix products (o, down: 512 tiles at
         * the Qwen3-8B shape, 256 blocks of 2; q/k/v with its norm folded;
         * the head) load batches of 8 blocks at 2 blocks a multiprocessor
         * (twice the bytes in flight a warp), gate/up at 3 (H200, Qwen3-8B
         * shape: decode 4.699-4.723 against 4.785-4.822 ms a token with all
         * at 3; the head with the norm folded 285.8 against 315.1 us; the
         * folded q/k/v 16.4-16.6 against 17.2-17.3 us at 3, decode
         * 4.683-4.697 against 4.704-4.725 ms; gate/up too, in batches of
         * 4: 4.776-4.798 ms). */
        if (c->sk_x == 5) {
            /* TERN_CUDA_GU_ILV (default 1): the pair as one matrix of
             * interleaved rows on the one-matrix kernel (2 blocks, batches
             * of 8): H200, Qwen3-8B shape, 50.8-51.0 against 51.9-52.0 us a
             * pair in the same run (decode 4.666-4.677 against 4.720 ms a
             * token in one call, within the spread between calls); the
             * pair kernel at 2 blocks in batches of 4 was slower, 53.2-53.5
             * us */
            if (NMAT == 2 && !(c->gu_ilv && a.N % 4 == 0)) return sx_launch<LO, NMAT, NORM, TILED, 3>(c, a);
            sk_args b = a;
            if (NMAT == 2) b.N = 2 * a.N, b.ilv = 1;
            return sx_launch<LO, 1, NORM, TILED, 2, 8>(c, b);
        }
        if (c->sk_x == 4) return sx_launch<LO, NMAT, NORM, TILED, 4>(c, a);
        if (c->sk_x == 3) return sx_launch<LO, NMAT, NORM, TILED, 3>(c, a);
        return sx_launch<LO, NMAT, NORM, TILED, 2>(c, a);
    }
    if (a.M <= 8) {
        /* Load batches of 4 blocks (2 for gate/up): against 2 and 8 for one
         * matrix, and the gate and up on separate warps, measured fastest
         * (H200, Qwen3-8B shape: decode step 5.03 against 5.26 / 5.81 /
         * 5.74 ms). */
        return sk_launch<1, true, LO, NMAT, NORM, TILED, NMAT == 1 ? 4 : 2>(c, a);
    }
    if (a.M <= 16) return sk_launch<1, false, LO, NMAT, NORM, TILED, 4>(c, a);
    if (a.M <= 32) return sk_launch<2, false, LO, NMAT, NORM, TILED, 4>(c, a);
    return sk_launch<4, false, LO, NMAT, NORM, TILED, NMAT == 1 ? 4 : 2>(c, a);
}

template <bool TILED>
static tern_status sk_pick(tern_cuda *c, bool lo, const sk_args &a)
{
    if (a.w1) {
        if (a.nw) return lo ? sk_rows<true, 2, true, TILED>(c, a) : sk_rows<false, 2, true, TILED>(c, a);
        return lo ? sk_rows<true, 2, false, TILED>(c, a) : sk_rows<false, 2, false, TILED>(c, a);
    }
    if (a.nw) return lo ? sk_rows<true, 1, true, TILED>(c, a) : sk_rows<false, 1, true, TILED>(c, a);
    return lo ? sk_rows<true, 1, false, TILED>(c, a) : sk_rows<false, 1, false, TILED>(c, a);
}

/* y = x . w^T for M <= 64 rows (internal: mma_gemm.cu's dispatch). nw:
 * the folded RMSNorm's weight or NULL; wu: the up weight of a SwiGLU
 * gate/up pair (w the gate), or NULL; tiled: w (and wu) in the tiled
 * layout. */
tern_status tern_cuda_mma_skinny(tern_cuda *c, bool lo, const float *x, int M, int K, const void *w, const void *wu,
                                 int N, float *y, int ldy, int accumulate, const float *nw, float eps, bool tiled)
{
    if (M < 1 || M > MMA_SKINNY_MAX)
        return tern_error(TERN_E_INTERNAL, "cuda mma: the small-batch kernel takes 1..%d rows, not %d",
                          (int)MMA_SKINNY_MAX, M);
    sk_args a = {x, M, K, (const uint16_t *)w, (const uint16_t *)wu, N, y, ldy, accumulate, nw, eps};
    return tiled ? sk_pick<true>(c, lo, a) : sk_pick<false>(c, lo, a);
}

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
#include "backend/cuda/async.cuh"
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
    int nst;  /* the staged form's tiles a block staged (sk_one_kernel) */
    int pair; /* and its first two tiles interleaved */
#ifdef TERN_CUDA_TIMELINE
    unsigned long long *tl; /* this launch's stamps (tern_cuda_set_timeline), or NULL */
#endif
};

#define SK_STAMP(slot) TL_STAMP(a.tl, blockIdx.x, slot)

/* n loads of 16 bytes per weight stream, blocks kb .. kb + n - 1. */
template <int NMAT, int U>
__device__ __forceinline__ void sk_load(uint4 (&buf)[U][NMAT], const uint16_t *const (&wr)[NMAT], int kb, int n)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < n) {
#pragma unroll
            for (int j = 0; j < NMAT; j++) buf[u][j] = ld_stream16(wr[j] + (size_t)(kb + u) * MMA_KB);
        }
}

/* Lane (g, t)'s weight rows of tile tl: row 8 tl + g of each matrix (the
 * last row for rows past N: read, never written), at elements 8t of its
 * blocks. */
template <int NMAT>
__device__ __forceinline__ void sk_rows_of(const sk_args &a, int tl, int g, int t, const uint16_t *(&wr)[NMAT])
{
    if (NMAT == 1 && a.ilv) {
        wr[0] = (g < 4 ? a.w0 : a.w1) + (size_t)(4 * tl + (g & 3)) * a.K + 8 * t;
        return;
    }
    int n = tl * 8 + g < a.N ? tl * 8 + g : a.N - 1;
#pragma unroll
    for (int j = 0; j < NMAT; j++) wr[j] = (j ? a.w1 : a.w0) + (size_t)n * a.K + 8 * t;
}

/* The start of a warp of the one-row and small-batch kernels: its lane
 * (g, t) and part q of K's blocks (kb0, len: nfull whole batches of U),
 * the block's first tile and the tile count, that tile's weight rows, and
 * their first batch loaded into buf (the weights: before the wait for the
 * previous kernel). */
struct sk_warp {
    int g, t, q, kb0, len, nfull, ntiles, tile;
};

template <int NMAT, int U>
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
        sk_rows_of<NMAT>(a, w.tile, w.g, w.t, wr);
        if (w.nfull) sk_load<NMAT, U>(buf, wr, w.kb0, U);
    }
    return w;
}

/* A tile's part of K through step(buf, kb, n) (n <= U blocks from kb):
 * whole batches of U blocks, two buffers in flight (bA holds the first,
 * loaded before), then the rest one block at a time, the same products in
 * the same order, each batch brought in by load(buf, kb, n); then the
 * block's next tile's rows and first batch into bA (next_first(buf, tile):
 * sk_rows_of and the global loads for sk_stream). Returns that tile
 * (ntiles or past: none). One loop for both kernels. */
template <int NMAT, int U, class LOAD, class FIRST, class STEP>
__device__ __forceinline__ int sk_stream_by(const sk_warp &w, uint4 (&bA)[U][NMAT], uint4 (&bB)[U][NMAT], LOAD load,
                                            FIRST next_first, STEP step)
{
    const int kb0 = w.kb0, len = w.len, nfull = w.nfull;
    int kb = kb0;
    for (int b = 0; b < nfull; b += 2, kb += 2 * U) {
        if (b + 1 < nfull) load(bB, kb + U, U);
        step(bA, kb, U);
        if (b + 2 < nfull) load(bA, kb + 2 * U, U);
        if (b + 1 < nfull) step(bB, kb + U, U);
    }
    kb = kb0 + nfull * U;
    if (kb < kb0 + len) {
        int rest = kb0 + len - kb;
        load(bB, kb, rest);
        step(bB, kb, rest);
    }
    int next = w.tile + gridDim.x;
    if (next < w.ntiles) next_first(bA, next);
    return next;
}

template <int NMAT, int U, class STEP>
__device__ __forceinline__ int sk_stream(const sk_args &a, const sk_warp &w, const uint16_t *(&wr)[NMAT],
                                         uint4 (&bA)[U][NMAT], uint4 (&bB)[U][NMAT], STEP step)
{
    return sk_stream_by<NMAT, U>(
        w, bA, bB, [&](uint4(&buf)[U][NMAT], int kb, int n) { sk_load<NMAT, U>(buf, wr, kb, n); },
        [&](uint4(&buf)[U][NMAT], int tile) {
            sk_rows_of<NMAT>(a, tile, w.g, w.t, wr);
            if (w.nfull) sk_load<NMAT, U>(buf, wr, w.kb0, U);
        },
        step);
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

template <int MT, bool R8, bool LO, int NMAT, bool NORM, int U, int MINB>
__global__ void __launch_bounds__(SK_THREADS, MINB) mma_skinny_kernel(sk_args a)
{
    constexpr int ROWS = R8 ? 8 : MT * 16;
    __shared__ float part[NMAT][MMA_PARTS][ROWS][8];
    __shared__ float ssq[MMA_PARTS][NORM ? ROWS : 1];
    const uint16_t *wr[NMAT];
    uint4 bA[U][NMAT], bB[U][NMAT];
    sk_warp w = sk_start<NMAT, U>(a, wr, bA); /* w.tile: the tile in hand */
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
        int next = sk_stream<NMAT, U>(a, w, wr, bA, bB, [&](const uint4(&buf)[U][NMAT], int kb, int n) {
            sk_compute<MT, R8, LO, NMAT, NORM, U>(a, buf, kb, n, g, t, acc, ss);
        });
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
enum { SX_MAX_SMEM = 96 * 1024, ST_MAX_SMEM = 200 * 1024 };

static size_t sx_smem(int K) { return (size_t)(K / MMA_KB) * 4 * 2 * sizeof(uint4); }

/* The staged form (ST, TERN_CUDA_OSTAGE): before its wait, each warp of a
 * block has the copy engine bring the 8 weight rows of the block's tiles 1
 * .. a.nst (its second tile on) over the warp's part of K into shared
 * memory (one bulk copy a row, counted on an mbarrier per warp and tile),
 * so that a product launched while the kernel before it still runs (the o
 * product during the attention) streams those tiles then instead of after
 * the wait; they are then read from shared memory in the same blocks and
 * order (the same bits). Row g of a warp's area starts at st_row(g): rows
 * of one part (st_len bytes) with 64 bytes after every second row when
 * st_len is a multiple of 128, so that rows 2p and 2p + 1 (one quarter of
 * the warp's 16-byte reads) fall on distinct banks. Layout after x's
 * split: the areas [tile][warp], the barriers [warp][tile], the paired
 * tile's partials [warp][8]. a.pair (TERN_CUDA_OSTAGE_PAIR): the block's
 * first tile runs with its second interleaved, two independent chains of
 * tensor-core steps instead of one after the other. */
__host__ __device__ __forceinline__ int st_len(int K) { return (K / MMA_KB + MMA_PARTS - 1) / MMA_PARTS * MMA_KB * 2; }
__host__ __device__ __forceinline__ int st_row(int K, int g)
{
    int r = st_len(K);
    return g * r + ((g + 1) >> 1) * (r % 128 ? 0 : 64);
}
static size_t st_smem(int K, int nst)
{
    return (size_t)nst * MMA_PARTS * (st_row(K, 8) + sizeof(uint64_t)) + MMA_PARTS * 8 * sizeof(float);
}

template <bool LO, int NMAT, bool NORM, int U, int MINB, bool ST = false>
__global__ void __launch_bounds__(SK_THREADS, MINB) sk_one_kernel(sk_args a)
{
    static_assert(!ST || NMAT == 1, "the staged form is for one matrix");
    __shared__ float part[NMAT][MMA_PARTS][8];
    __shared__ float ssq[MMA_PARTS];
    extern __shared__ uint4 sx4[]; /* block kb, lane t: sx4[2 (4 kb + t)] hi pairs, + 1 lo pairs */
    const uint16_t *wr[NMAT];
    uint4 bA[U][NMAT], bB[U][NMAT];
    SK_STAMP(0);
    sk_warp w = sk_start<NMAT, U>(a, wr, bA); /* w.tile: the tile in hand */
    const int g = w.g, t = w.t, q = w.q, kb0 = w.kb0, len = w.len, ntiles = w.ntiles;
    /* ST: the warp's first area and barrier, lane (g, t)'s first 16 bytes
     * of its first staged tile; tile j of the block (j = 1 .. a.nst) at
     * + (j - 1) areas / barriers */
    uint64_t *bar = NULL;
    const unsigned char *srow = NULL;
    const int area_step = MMA_PARTS * st_row(a.K, 8);
    if (ST) {
        unsigned char *base = (unsigned char *)(sx4 + (size_t)(a.K / MMA_KB) * 8);
        unsigned char *area = base + (size_t)q * st_row(a.K, 8);
        bar = (uint64_t *)(base + (size_t)a.nst * area_step) + q * a.nst;
        srow = area + st_row(a.K, g) + 16 * t;
        if ((threadIdx.x & 31) == 0) {
            unsigned bytes = (unsigned)len * MMA_KB * 2;
            for (int j = 1; j <= a.nst; j++) mb_init(bar + j - 1, 1);
            mb_init_fence();
            for (int j = 1; j <= a.nst; j++) {
                int tile = blockIdx.x + j * gridDim.x;
                if (tile >= ntiles) break;
                mb_expect(bar + j - 1, 8 * bytes);
                for (int r = 0; r < 8; r++) {
                    int n = tile * 8 + r < a.N ? tile * 8 + r : a.N - 1;
                    bulk_load(area + (size_t)(j - 1) * area_step + st_row(a.K, r),
                              a.w0 + (size_t)n * a.K + (size_t)kb0 * MMA_KB, bytes, bar + j - 1);
                }
            }
        }
        __syncwarp();
    }
    wait_prior_grid();
    SK_STAMP(1);
#ifdef TERN_CUDA_TIMELINE
    int ndone = 0;
#endif
    /* The warp's part of x: lane (g, t) splits blocks kb0 + g, + 8, ... */
    for (int kb = kb0 + g; kb < kb0 + len; kb += 8) {
        int k = kb * MMA_KB + 8 * t;
        float v[8];
        mma_load8(a.x + k, v);
        if (NORM) {
            float nv[8];
            mma_load8(a.nw + k, nv);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], nv[e]);
        }
        uint32_t h[4], l[4];
        mma_split8<LO>(v, h, l);
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
        float acc[NMAT][4];
#pragma unroll
        for (int j = 0; j < NMAT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        /* ST: the tile's index among the block's (staged at 1 .. a.nst);
         * paired (a.pair, the block's first tile): its staged second tile's
         * products interleaved with its own, into acc2 (each tile's in its
         * own order) */
        const int jt = ST ? (w.tile - (int)blockIdx.x) / (int)gridDim.x : 0;
        const bool paired = ST && a.pair && jt == 0 && w.tile + (int)gridDim.x < ntiles;
        float acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (paired) mb_wait(bar, 0);
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
                    if (ST && paired) {
                        uint4 v = *(const uint4 *)(srow + (size_t)(kb + u - kb0) * (MMA_KB * 2));
                        const uint32_t b[4] = {v.x, v.y, v.z, v.w};
                        mma_block<LO>(acc2, ah, al, b);
                    }
                }
        };
        int next;
        if (ST) {
            auto lds = [&](uint4(&buf)[U][NMAT], int j, int kb, int n) {
                const unsigned char *p = srow + (size_t)(j - 1) * area_step + (size_t)(kb - kb0) * (MMA_KB * 2);
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (u < n) buf[u][0] = *(const uint4 *)(p + u * (MMA_KB * 2));
            };
            next = sk_stream_by<NMAT, U>(
                w, bA, bB,
                [&](uint4(&buf)[U][NMAT], int kb, int n) {
                    if (jt >= 1 && jt <= a.nst) lds(buf, jt, kb, n);
                    else sk_load<NMAT, U>(buf, wr, kb, n);
                },
                [&](uint4(&buf)[U][NMAT], int tile) {
                    int jn = paired ? jt + 2 : jt + 1;
                    if (paired) tile += gridDim.x;
                    if (tile >= ntiles) return;
                    if (jn <= a.nst) {
                        mb_wait(bar + jn - 1, 0);
                        if (w.nfull) lds(buf, jn, kb0, U);
                    } else {
                        sk_rows_of<NMAT>(a, tile, g, t, wr);
                        if (w.nfull) sk_load<NMAT, U>(buf, wr, kb0, U);
                    }
                },
                step);
            if (paired) next += gridDim.x;
        } else {
            next = sk_stream<NMAT, U>(a, w, wr, bA, bB, step);
        }
        /* ST: the paired tile's partials after the barriers */
        float(*part2)[8] = ST ? (float(*)[8])(bar - q * a.nst + MMA_PARTS * a.nst) : NULL;
        if (g == 0) {
#pragma unroll
            for (int j = 0; j < NMAT; j++) {
                part[j][q][2 * t] = acc[j][0];
                part[j][q][2 * t + 1] = acc[j][1];
            }
            if (ST && paired) part2[q][2 * t] = acc2[0], part2[q][2 * t + 1] = acc2[1];
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
        } else if (ST && paired && threadIdx.x < 16) {
            int cidx = threadIdx.x - 8, n = (w.tile + gridDim.x) * 8 + cidx;
            if (n < a.N) {
                float v = mma_fold(&part2[0][cidx], 8);
                if (NORM) v = __fmul_rn(v, rms_inv(mma_fold(ssq, 1), a.K, a.eps));
                float *yp = a.y + n;
                *yp = a.accumulate ? __fadd_rn(*yp, v) : v;
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

template <bool LO, int NMAT, bool NORM, int MINB, int U = NMAT == 1 ? 4 : 2, bool ST = false>
static tern_status sx_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = sk_one_kernel<LO, NMAT, NORM, U, MINB, ST>;
    static int ready;
    tern_status st =
        smem_limit_once((const void *)kern, ST ? ST_MAX_SMEM : SX_MAX_SMEM, &ready, "one-row product smem");
    if (st) return st;
    size_t smem = sx_smem(a.K) + (ST ? st_smem(a.K, a.nst) : 0);
    sk_args b = a;
#ifdef TERN_CUDA_TIMELINE
    b.tl = NULL;
    if (c->tl && c->tl_seq < c->tl_cap)
        b.tl = c->tl + (size_t)c->tl_seq++ * TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS;
#endif
    return launch(c, "mma_skinny_one", kern, one_wave((const void *)kern, c->sms, SK_THREADS, smem, (a.N + 7) / 8, 1),
                  dim3(SK_THREADS), smem, b);
}

/* One wave of the kernel's blocks, each with the same number of tiles. */
template <int MT, bool R8, bool LO, int NMAT, bool NORM, int U, int MINB = 2>
static tern_status sk_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = mma_skinny_kernel<MT, R8, LO, NMAT, NORM, U, MINB>;
    return launch(c, "mma_skinny", kern, one_wave((const void *)kern, c->sms, SK_THREADS, 0, (a.N + 7) / 8, 1),
                  dim3(SK_THREADS), 0, a);
}

template <bool LO, int NMAT, bool NORM>
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
            /* TERN_CUDA_OSTAGE = n: a product launched after a kernel
             * that lets it launch early (the o product after the
             * attention) stages its blocks' tiles 1 .. n (n >= 2: at one
             * block a multiprocessor, as the room sets); tern_cuda_set_ostage's
             * `always`: every one-matrix product (K a multiple of 256:
             * every part holds a block) */
            if constexpr (NMAT == 1) {
                sk_args b = a;
                b.nst = c->ostage, b.pair = c->ostage_pair;
                if (b.nst > 0 && (c->ostage_all || c->early_prev) && a.K % (MMA_KB * MMA_PARTS) == 0 &&
                    sx_smem(a.K) + st_smem(a.K, b.nst) <= ST_MAX_SMEM)
                    return sx_launch<LO, NMAT, NORM, 2, 8, true>(c, b);
            }
            if (NMAT == 1) return sx_launch<LO, NMAT, NORM, 2, 8>(c, a);
            if (c->gu_ilv && a.N % 4 == 0) {
                /* TERN_CUDA_GU_ILV (default 1): the pair as one matrix of
                 * interleaved rows on the one-matrix kernel (2 blocks,
                 * batches of 8): H200, Qwen3-8B shape, 50.8-51.0 against
                 * 51.9-52.0 us a pair in the same run (decode 4.666-4.677
                 * against 4.720 ms a token in one call, within the spread
                 * between calls); the pair kernel at 2 blocks in batches
                 * of 4 was slower, 53.2-53.5 us */
                sk_args b = a;
                b.N = 2 * a.N, b.ilv = 1;
                return sx_launch<LO, 1, NORM, 2, 8>(c, b);
            }
            return sx_launch<LO, NMAT, NORM, 3>(c, a);
        }
        if (c->sk_x == 4) return sx_launch<LO, NMAT, NORM, 4>(c, a);
        if (c->sk_x == 3) return sx_launch<LO, NMAT, NORM, 3>(c, a);
        return sx_launch<LO, NMAT, NORM, 2>(c, a);
    }
    if (a.M <= 8) {
        /* Load batches of 4 blocks (2 for gate/up): against 2 and 8 for one
         * matrix, and the gate and up on separate warps, measured fastest
         * (H200, Qwen3-8B shape: decode step 5.03 against 5.26 / 5.81 /
         * 5.74 ms). */
        return sk_launch<1, true, LO, NMAT, NORM, NMAT == 1 ? 4 : 2>(c, a);
    }
    if (a.M <= 16) return sk_launch<1, false, LO, NMAT, NORM, 4>(c, a);
    if (a.M <= 32) return sk_launch<2, false, LO, NMAT, NORM, 4>(c, a);
    return sk_launch<4, false, LO, NMAT, NORM, NMAT == 1 ? 4 : 2>(c, a);
}

/* y = x . w^T for M <= 64 rows (internal: mma_gemm.cu's dispatch). nw:
 * the folded RMSNorm's weight or NULL; wu: the up weight of a SwiGLU
 * gate/up pair (w the gate), or NULL. */
tern_status tern_cuda_mma_skinny(tern_cuda *c, bool lo, const float *x, int M, int K, const void *w, const void *wu,
                                 int N, float *y, int ldy, int accumulate, const float *nw, float eps)
{
    if (M < 1 || M > MMA_SKINNY_MAX)
        return tern_error(TERN_E_INTERNAL, "cuda mma: the small-batch kernel takes 1..%d rows, not %d",
                          (int)MMA_SKINNY_MAX, M);
    sk_args a = {x, M, K, (const uint16_t *)w, (const uint16_t *)wu, N, y, ldy, accumulate, nw, eps};
    if (wu) {
        if (nw) return lo ? sk_rows<true, 2, true>(c, a) : sk_rows<false, 2, true>(c, a);
        return lo ? sk_rows<true, 2, false>(c, a) : sk_rows<false, 2, false>(c, a);
    }
    if (nw) return lo ? sk_rows<true, 1, true>(c, a) : sk_rows<false, 1, true>(c, a);
    return lo ? sk_rows<true, 1, false>(c, a) : sk_rows<false, 1, false>(c, a);
}

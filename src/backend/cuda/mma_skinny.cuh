/* The one-row and small-batch products' shared parts (internal): their
 * arguments, a warp's place in K and its tiles, and the weight stream's
 * loop, for mma_skinny.cu's kernels and mma_flags.cu's free-running one.
 * The order of the loads and products is described in mma_skinny.cu. */
#ifndef TERN_BACKEND_CUDA_MMA_SKINNY_CUH
#define TERN_BACKEND_CUDA_MMA_SKINNY_CUH

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
    /* Part flags (mma_flags.cu's kernel; NULL: none). fl_out: MMA_PARTS
     * counters, one a part of K of the next product (x = this y), that a
     * tile's count is added to once its columns are written. fl_in: the
     * previous product's, which warp q waits on for its part of x (fl_cpt
     * columns a tile there) instead of waiting for that whole kernel.
     * fl_err: set when a wait gives up after 2 s. */
    unsigned *fl_out;
    const unsigned *fl_in;
    unsigned *fl_err;
    int fl_cpt;
#ifdef TERN_CUDA_TIMELINE
    unsigned long long *tl; /* this launch's stamps (tern_cuda_set_timeline), or NULL */
#endif
};

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
                                         uint4 (&bA)[U][NMAT], uint4 (&bB)[U][NMAT], STEP step)
{
    const int kb0 = w.kb0, len = w.len, nfull = w.nfull;
    int kb = kb0;
    for (int b = 0; b < nfull; b += 2, kb += 2 * U) {
        if (b + 1 < nfull) sk_load<NMAT, U, TILED>(bB, wr, kb + U, U);
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

/* The one-row kernel's shared memory for x prepared once per block: per
 * 32-element block and lane t, a hi and a lo uint4. */
enum { SX_MAX_SMEM = 96 * 1024 };

static inline size_t sx_smem(int K) { return (size_t)(K / MMA_KB) * 4 * 2 * sizeof(uint4); }

/* mma_flags.cu: whether its free-running one-row kernel takes a product
 * of K columns (TERN_CUDA_PFLAG on and x fits its shared memory), and the
 * product on it (a: NMAT = 1, a SwiGLU pair interleaved). */
bool sf_takes(const tern_cuda *c, int K, bool norm);
tern_status sf_run(tern_cuda *c, bool lo, bool norm, bool tiled, const sk_args &a);

#endif

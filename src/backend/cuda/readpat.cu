/* Read-pattern probes (ops_test --readpat): the one-row products' weight
 * loads with no arithmetic, to tell how much of a product's stream rate
 * the order of its loads costs against the read kernel's linear sweep.
 *
 * The grid is one wave of two blocks of eight warps a multiprocessor, each
 * block taking tiles of 8 rows of a [N, K] bf16 matrix in turn (tile b,
 * b + grid, ...), warp q part q of K's 32-element blocks (mma.cuh's cut),
 * lane (g, t) 16 bytes of each block: batches of 8 blocks, two batches in
 * flight, the next tile's first batch before the last one is consumed (the
 * one-row kernel's loop). Where lane (g, t)'s 16 bytes of block kb lie:
 *   layout 0: row 8 tile + g of the row-major matrix, element 32 kb + 8 t
 *             (as the matrices are stored: 8 rows x 64 bytes a warp load);
 *   layout 1: the tile's 8 rows stored block by block (tile base +
 *             512 kb + 64 g + 16 t: 512 contiguous bytes a warp load, a
 *             warp's part of a tile contiguous). */
#include "backend/cuda/common.cuh"

enum { RP_U = 8, RP_WARPS = 8 };

template <int LAYOUT>
__device__ __forceinline__ const char *rp_addr(const char *w, int K, long tile, int g, int t, int kb)
{
    const char *base = w + (size_t)tile * 8 * K * 2;
    return LAYOUT == 0 ? base + (size_t)g * K * 2 + (size_t)kb * 64 + t * 16 : base + (size_t)kb * 512 + g * 64 + t * 16;
}

template <int LAYOUT>
__global__ void __launch_bounds__(32 * RP_WARPS, 2) readpat_kernel(const char *w, long N, int K, float *sink)
{
    int lane = threadIdx.x & 31, q = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int nb = K / 32, kb0 = (int)((long)nb * q / RP_WARPS), len = (int)((long)nb * (q + 1) / RP_WARPS) - kb0;
    int nbat = len / RP_U;
    long ntiles = N / 8, mine = ntiles > blockIdx.x ? (ntiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    long total = mine * nbat;
    uint4 bA[RP_U], bB[RP_U];
    uint32_t acc = 0;
    /* batch s: tile blockIdx.x + (s / nbat) grid, blocks kb0 + (s % nbat) U .. */
    auto load = [&](uint4(&b)[RP_U], long s) {
        long tile = blockIdx.x + (s / nbat) * gridDim.x;
        int kb = kb0 + (int)(s % nbat) * RP_U;
#pragma unroll
        for (int u = 0; u < RP_U; u++) b[u] = ld_stream16(rp_addr<LAYOUT>(w, K, tile, g, t, kb + u));
    };
    auto use = [&](const uint4(&b)[RP_U]) {
#pragma unroll
        for (int u = 0; u < RP_U; u++) acc ^= b[u].x ^ b[u].y ^ b[u].z ^ b[u].w;
    };
    if (total) load(bA, 0);
    for (long s = 0; s < total; s += 2) {
        if (s + 1 < total) load(bB, s + 1);
        use(bA);
        if (s + 2 < total) load(bA, s + 2);
        if (s + 1 < total) use(bB);
    }
    acc = __reduce_xor_sync(0xffffffffu, acc);
    if (lane == 0) sink[blockIdx.x * RP_WARPS + q] = __uint_as_float(acc);
}

extern "C" size_t tern_cuda_readpat_sink_floats(tern_cuda *c) { return (size_t)c->sms * 2 * RP_WARPS; }

extern "C" tern_status tern_cuda_readpat(tern_cuda *c, const void *d_w, long N, int K, int layout, float *d_sink)
{
    if (N % 8 || K % (32 * RP_WARPS * RP_U) || (layout != 0 && layout != 1))
        return tern_error(TERN_E_INVALID, "cuda readpat: N %ld (a multiple of 8), K %d (of %d), layout %d (0 or 1)", N, K,
                          32 * RP_WARPS * RP_U, layout);
    dim3 grid((unsigned)(c->sms * 2)), block(32 * RP_WARPS);
    if (layout == 0) readpat_kernel<0><<<grid, block, 0, c->stream>>>((const char *)d_w, N, K, d_sink);
    else readpat_kernel<1><<<grid, block, 0, c->stream>>>((const char *)d_w, N, K, d_sink);
    return launched("readpat");
}

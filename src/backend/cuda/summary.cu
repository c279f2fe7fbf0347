/* What a greedy sampler needs of a row of logits, computed where the logits
 * are: the log-sum-exp, and the first index of the largest log-probability
 * (logits - lse), so that only a few bytes a row cross the bus.
 *
 * A row is cut into fixed chunks of SUM_CHUNK logits (counted from index 0).
 * Pass 1, one block per (row, chunk): the chunk's max m_c (NaN wins, as in
 * the CPU's max) and s_c = sum exp(x - m_c), each thread over its own
 * elements in index order, warps by the fixed butterfly, warps in order;
 * the last block of the row (an atomic count) folds the chunks in chunk
 * order: M = max m_c, S = sum s_c exp(m_c - M), lse = log(S) + M (M when M
 * is infinite). Pass 2, one block per (row, chunk): the first index of the
 * chunk's largest lp = x - lse by tern_argmax's rule (a NaN is never
 * larger; a NaN at index 0 keeps index 0), and the last block folds the
 * chunks in order. Nothing depends on the other rows or the number of rows,
 * so a row's summary is the same in every batch. */
#include "backend/cuda/common.cuh"

enum { SUM_CHUNK = 4096, SUM_THREADS = 256, SUM_MAX_CHUNKS = 1024 };

static int chunks_of(int V) { return (V + SUM_CHUNK - 1) / SUM_CHUNK; }

extern "C" size_t tern_cuda_summary_tmp_bytes(int n, int V)
{
    return (size_t)n * chunks_of(V) * 2 * sizeof(float2) + (size_t)n * sizeof(float) + 64;
}

extern "C" size_t tern_cuda_summary_count_bytes(int n) { return (size_t)n * 2 * sizeof(unsigned); }

__device__ __forceinline__ float max_nan(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

/* (value, index) candidates of the argmax: idx < 0 is none (all NaN). */
__device__ __forceinline__ void arg_merge(float &v, int &i, float v2, int i2)
{
    if (i2 < 0) return;
    if (i < 0 || v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

/* Block-wide fold of per-thread values in thread order (warps by butterfly
 * first): sum or max. */
template <bool MAX>
__device__ __forceinline__ float block_fold(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = MAX ? max_nan(v, o) : v + o;
    }
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = sh[0];
        for (int i = 1; i < SUM_THREADS / 32; i++) t = MAX ? max_nan(t, sh[i]) : t + sh[i];
        sh[SUM_THREADS / 32] = t;
    }
    __syncthreads();
    return sh[SUM_THREADS / 32];
}

/* Called by every thread of a block once its thread 0 has stored the
 * block's partial at part[r * nc + c]: true in the last block of row r to
 * arrive (an atomic count, reset there for the next launch), which then
 * holds all nc partials of the row in pk, in chunk order, for one thread to
 * fold; false in the others. */
__device__ __forceinline__ bool gather_row(const float2 *part, unsigned *count, int r, int nc, float2 *pk)
{
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned done = atomicAdd(count + r, 1u);
        is_last = done == (unsigned)nc - 1;
        if (is_last) count[r] = 0;
    }
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
    for (int k = threadIdx.x; k < nc; k += SUM_THREADS) pk[k] = __ldcg(&part[(long)r * nc + k]);
    __syncthreads();
    return true;
}

__global__ void __launch_bounds__(SUM_THREADS) lse_kernel(const float *__restrict__ logits, long ld, int V,
                                                          float2 *part, float *lse, unsigned *count)
{
    __shared__ float sh[SUM_THREADS / 32 + 1];
    wait_prior_grid();
    int c = blockIdx.x, r = blockIdx.y, nc = gridDim.x;
    const float *x = logits + (long)r * ld;
    int i0 = c * SUM_CHUNK, i1 = i0 + SUM_CHUNK < V ? i0 + SUM_CHUNK : V;
    /* The thread's elements, loaded once (all before the first use), in
     * index order. */
    enum { PER = SUM_CHUNK / SUM_THREADS };
    float v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int i = i0 + threadIdx.x + j * SUM_THREADS;
        v[j] = i < i1 ? x[i] : -INFINITY;
    }
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (i0 + (int)threadIdx.x + j * SUM_THREADS < i1) m = max_nan(m, v[j]);
    m = block_fold<true>(m, sh);
    float s = 0.0f;
    if (m == -INFINITY || m != m) {
        s = m == -INFINITY ? 0.0f : m;
    } else {
#pragma unroll
        for (int j = 0; j < PER; j++)
            if (i0 + (int)threadIdx.x + j * SUM_THREADS < i1) s += expf(v[j] - m);
        s = block_fold<false>(s, sh);
    }
    if (threadIdx.x == 0) part[(long)r * nc + c] = make_float2(m, s);
    __shared__ float2 pk[SUM_MAX_CHUNKS];
    if (!gather_row(part, count, r, nc, pk) || threadIdx.x) return;
    float M = -INFINITY;
    for (int k = 0; k < nc; k++) M = max_nan(M, pk[k].x);
    float out;
    if (M != M || M == INFINITY || M == -INFINITY) {
        out = M;
    } else {
        float S = 0.0f;
        for (int k = 0; k < nc; k++)
            if (pk[k].x != -INFINITY) S = fmaf(pk[k].y, expf(pk[k].x - M), S);
        out = logf(S) + M;
    }
    lse[r] = out;
}

__global__ void __launch_bounds__(SUM_THREADS) argmax_kernel(const float *__restrict__ logits, long ld, int V,
                                                             const float *__restrict__ lse, float2 *part,
                                                             unsigned *count, tern_cuda_lsum *out)
{
    __shared__ float shv[SUM_THREADS / 32];
    __shared__ int shi[SUM_THREADS / 32];
    wait_prior_grid();
    int c = blockIdx.x, r = blockIdx.y, nc = gridDim.x;
    const float *x = logits + (long)r * ld;
    float L = lse[r];
    int i0 = c * SUM_CHUNK, i1 = i0 + SUM_CHUNK < V ? i0 + SUM_CHUNK : V;
    float v = 0.0f;
    int idx = -1;
    for (int i = i0 + threadIdx.x; i < i1; i += SUM_THREADS) {
        float lp = __fsub_rn(x[i], L);
        if (lp == lp && (idx < 0 || lp > v)) {
            v = lp;
            idx = i;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float v2 = __shfl_xor_sync(0xffffffffu, v, off);
        int i2 = __shfl_xor_sync(0xffffffffu, idx, off);
        arg_merge(v, idx, v2, i2);
    }
    if (lane == 0) {
        shv[warp] = v;
        shi[warp] = idx;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < SUM_THREADS / 32; w++) arg_merge(v, idx, shv[w], shi[w]);
        part[(long)r * nc + c] = make_float2(v, __int_as_float(idx));
    }
    __shared__ float2 pk[SUM_MAX_CHUNKS];
    if (!gather_row(part, count, r, nc, pk) || threadIdx.x) return;
    float bv = 0.0f;
    int bi = -1;
    for (int k = 0; k < nc; k++) arg_merge(bv, bi, pk[k].x, __float_as_int(pk[k].y));
    float lp0 = __fsub_rn(x[0], L);
    /* tern_argmax: a NaN at index 0 is never replaced; none at all -> 0. */
    if (lp0 != lp0 || bi < 0) {
        bi = 0;
        bv = lp0;
    }
    out[r].lse = L;
    out[r].argmax = bi;
    out[r].lp = bv;
}

extern "C" tern_status tern_cuda_summary(tern_cuda *c, const float *d_logits, long ld, int n, int V, void *d_tmp,
                                         unsigned *d_count, tern_cuda_lsum *d_out)
{
    if (n <= 0) return TERN_OK;
    if (V <= 0 || V > SUM_MAX_CHUNKS * SUM_CHUNK) return tern_error(TERN_E_INVALID, "cuda summary: vocabulary %d", V);
    int nc = chunks_of(V);
    float2 *part1 = (float2 *)d_tmp, *part2 = part1 + (size_t)n * nc;
    float *lse = (float *)(part2 + (size_t)n * nc);
    tern_status st = launch(c, "lse", lse_kernel, dim3(nc, n), dim3(SUM_THREADS), 0, d_logits, ld, V, part1, lse,
                            d_count);
    if (st) return st;
    return launch(c, "argmax", argmax_kernel, dim3(nc, n), dim3(SUM_THREADS), 0, d_logits, ld, V, (const float *)lse,
                  part2, d_count + n, d_out);
}

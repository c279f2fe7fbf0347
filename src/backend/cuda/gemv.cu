/* Matrix-vector products for decode and small batches (M <= 16 rows):
 * y[M, N] = x[M, K] . w[N, K]^T with f32 accumulation.
 *
 * One warp per output column n: its 32 lanes stream the weight row w[n] in
 * 16-byte loads, UNROLL of them in flight per lane before the first use, and
 * every loaded weight is used for all M rows before the next is fetched, so
 * each weight byte crosses HBM once per call whatever M. Lane l owns the
 * 16-byte chunks l, l+32, l+64, ... of the row and accumulates them in that
 * order, element by element with fmaf; the 32 lane sums are then combined by
 * a fixed butterfly. The operations behind y[m, n] therefore depend only on
 * K, row m of x and w[n], never on M or the other rows (batch invariance). */
#include "backend/cuda/common.cuh"

enum { GEMV_WARPS = 4, GEMV_UNROLL = 8 };

/* acc[m] += x[m, k0..k0+P) . wf[0..P) */
template <int M, int P, bool RND>
__device__ __forceinline__ void chunk_fma(const float *__restrict__ x, long ldx, int k0, const float *wf,
                                          float *acc, int m_count)
{
#pragma unroll
    for (int m = 0; m < M; m++) {
        if (m < m_count) {
            const float4 *xp = reinterpret_cast<const float4 *>(x + m * ldx + k0);
            float xv[P];
#pragma unroll
            for (int q = 0; q < P / 4; q++) {
                float4 t = __ldg(xp + q);
                xv[4 * q] = t.x;
                xv[4 * q + 1] = t.y;
                xv[4 * q + 2] = t.z;
                xv[4 * q + 3] = t.w;
            }
#pragma unroll
            for (int e = 0; e < P; e++) acc[m] = fmaf(RND ? round_bf16(xv[e]) : xv[e], wf[e], acc[m]);
        }
    }
}

/* Dot products of one weight row with M rows of x; returns in acc (lane 0
 * holds the final sums, as do all lanes). */
template <typename WT, int M, bool RND>
__device__ __forceinline__ void row_dots(const float *__restrict__ x, int K, const void *__restrict__ wrow,
                                         int lane, int m_count, float *acc)
{
    constexpr int P = WT::PER16;
    const int nchunks = K / P;
    const uint4 *wp = reinterpret_cast<const uint4 *>(wrow);
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.0f;
    for (int base = lane; base < nchunks; base += 32 * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int ch = base + 32 * u;
            if (ch < nchunks) wv[u] = ld_stream16(wp + ch);
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int ch = base + 32 * u;
            if (ch < nchunks) {
                float wf[P];
                WT::unpack(wv[u], wf);
                chunk_fma<M, P, RND>(x, K, ch * P, wf, acc, m_count);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = warp_sum(acc[m]);
}

template <typename WT, int M, bool RND>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(const float *__restrict__ x, int m_count, int K,
                                                               const void *__restrict__ w, int N,
                                                               float *__restrict__ y, int ldy, int accumulate)
{
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    /* Weights depend on no earlier kernel: warm the first chunks of this
     * row into L2 before waiting for x. */
    if (n < N) {
        const char *wr = (const char *)w + (size_t)n * K * (16 / WT::PER16);
        size_t row_bytes = (size_t)K * (16 / WT::PER16);
        for (size_t off = (size_t)lane * 128; off < row_bytes && off < 32 * 128; off += 32 * 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(wr + off));
    }
    wait_prior_grid();
    if (n >= N) return;
    float acc[M];
    row_dots<WT, M, RND>(x, K, (const char *)w + (size_t)n * K * (16 / WT::PER16), lane, m_count, acc);
    if (lane == 0) {
#pragma unroll
        for (int m = 0; m < M; m++)
            if (m < m_count) {
                float *yp = y + (long)m * ldy + n;
                *yp = accumulate ? *yp + acc[m] : acc[m];
            }
    }
}

/* silu(g) * u, written as the CPU's scalar path does. */
__device__ __forceinline__ float silu_mul_1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

template <typename WT, int M, bool RND>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gate_up_kernel(const float *__restrict__ x, int m_count, int K,
                                                                  const void *__restrict__ wg,
                                                                  const void *__restrict__ wu, int F,
                                                                  float *__restrict__ h)
{
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    wait_prior_grid();
    if (n >= F) return;
    size_t row = (size_t)n * K * (16 / WT::PER16);
    float g[M], u[M];
    row_dots<WT, M, RND>(x, K, (const char *)wg + row, lane, m_count, g);
    row_dots<WT, M, RND>(x, K, (const char *)wu + row, lane, m_count, u);
    if (lane == 0) {
#pragma unroll
        for (int m = 0; m < M; m++)
            if (m < m_count) h[(long)m * F + n] = silu_mul_1(g[m], u[m]);
    }
}

/* Kernels are instantiated for M in {1, 2, 4, 8, 16}: a call with m rows runs
 * the smallest M >= m, and m_count masks the rest. The per-row arithmetic is
 * the same in every instance. */
template <typename WT, bool RND>
static tern_status gemv_typed(tern_cuda *c, const float *x, int m, int K, const void *w, int N, float *y,
                              int ldy, int acc)
{
    dim3 grid((N + GEMV_WARPS - 1) / GEMV_WARPS), block(GEMV_WARPS * 32);
    if (m <= 1) return launch(c, "gemv", gemv_kernel<WT, 1, RND>, grid, block, 0, x, m, K, w, N, y, ldy, acc);
    if (m <= 2) return launch(c, "gemv", gemv_kernel<WT, 2, RND>, grid, block, 0, x, m, K, w, N, y, ldy, acc);
    if (m <= 4) return launch(c, "gemv", gemv_kernel<WT, 4, RND>, grid, block, 0, x, m, K, w, N, y, ldy, acc);
    if (m <= 8) return launch(c, "gemv", gemv_kernel<WT, 8, RND>, grid, block, 0, x, m, K, w, N, y, ldy, acc);
    return launch(c, "gemv", gemv_kernel<WT, 16, RND>, grid, block, 0, x, m, K, w, N, y, ldy, acc);
}

template <typename WT, bool RND>
static tern_status gate_up_typed(tern_cuda *c, const float *x, int m, int K, const void *wg, const void *wu,
                                 int F, float *h)
{
    dim3 grid((F + GEMV_WARPS - 1) / GEMV_WARPS), block(GEMV_WARPS * 32);
    if (m <= 1) return launch(c, "gate_up", gate_up_kernel<WT, 1, RND>, grid, block, 0, x, m, K, wg, wu, F, h);
    if (m <= 2) return launch(c, "gate_up", gate_up_kernel<WT, 2, RND>, grid, block, 0, x, m, K, wg, wu, F, h);
    if (m <= 4) return launch(c, "gate_up", gate_up_kernel<WT, 4, RND>, grid, block, 0, x, m, K, wg, wu, F, h);
    if (m <= 8) return launch(c, "gate_up", gate_up_kernel<WT, 8, RND>, grid, block, 0, x, m, K, wg, wu, F, h);
    return launch(c, "gate_up", gate_up_kernel<WT, 16, RND>, grid, block, 0, x, m, K, wg, wu, F, h);
}

/* One launch over at most 16 rows (internal; matmul.cu tiles larger M). */
tern_status tern_cuda_gemv_tile(tern_cuda *c, tern_cuda_act act, const float *x, int m, int K, const void *w,
                                tern_dtype wdt, int N, float *y, int ldy, int accumulate)
{
    bool rnd = act == TERN_CUDA_ACT_BF16;
    switch (wdt) {
    case TERN_DT_BF16:
        return rnd ? gemv_typed<w_bf16, true>(c, x, m, K, w, N, y, ldy, accumulate)
                   : gemv_typed<w_bf16, false>(c, x, m, K, w, N, y, ldy, accumulate);
    case TERN_DT_F16: return gemv_typed<w_f16, false>(c, x, m, K, w, N, y, ldy, accumulate);
    case TERN_DT_F32: return gemv_typed<w_f32, false>(c, x, m, K, w, N, y, ldy, accumulate);
    default: return tern_error(TERN_E_UNSUPPORTED, "cuda matmul: weight dtype %s", tern_dtype_name(wdt));
    }
}

extern "C" tern_status tern_cuda_gate_up(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K,
                                         const void *d_wg, const void *d_wu, tern_dtype wdt, int F, float *d_h)
{
    if (K % 8 || M < 0) return tern_error(TERN_E_INVALID, "cuda gate_up: K=%d must be a multiple of 8", K);
    bool rnd = act == TERN_CUDA_ACT_BF16;
    for (int m0 = 0; m0 < M; m0 += TERN_CUDA_GEMV_MAX_M) {
        int m = M - m0 < TERN_CUDA_GEMV_MAX_M ? M - m0 : TERN_CUDA_GEMV_MAX_M;
        const float *x = d_x + (long)m0 * K;
        float *h = d_h + (long)m0 * F;
        tern_status st;
        switch (wdt) {
        case TERN_DT_BF16:
            st = rnd ? gate_up_typed<w_bf16, true>(c, x, m, K, d_wg, d_wu, F, h)
                     : gate_up_typed<w_bf16, false>(c, x, m, K, d_wg, d_wu, F, h);
            break;
        case TERN_DT_F16: st = gate_up_typed<w_f16, false>(c, x, m, K, d_wg, d_wu, F, h); break;
        case TERN_DT_F32: st = gate_up_typed<w_f32, false>(c, x, m, K, d_wg, d_wu, F, h); break;
        default: return tern_error(TERN_E_UNSUPPORTED, "cuda gate_up: weight dtype %s", tern_dtype_name(wdt));
        }
        if (st) return st;
    }
    return TERN_OK;
}

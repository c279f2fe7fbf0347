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
 * K, row m of x and w[n], never on M or the other rows (batch invariance).
 *
 * The grid is at most one wave (as many blocks as fit on the device at once)
 * and warps stride over the rows. Which warp computes a row never changes
 * its arithmetic. */
#include "backend/cuda/common.cuh"

#ifndef TERN_GEMV_WARPS
#define TERN_GEMV_WARPS 4
#endif
#ifndef TERN_GEMV_UNROLL
#define TERN_GEMV_UNROLL 4
#endif
/* Weight rows per warp when x has several rows (one row: 1). */
#ifndef TERN_GEMV_R
#define TERN_GEMV_R 4
#endif
enum { GEMV_WARPS = TERN_GEMV_WARPS, GEMV_UNROLL = TERN_GEMV_UNROLL, GEMV_R = TERN_GEMV_R };

/* acc[r * M + m] += x[m, k0..k0+P) . wf[r][0..P) for the R weight rows: each
 * x chunk is loaded once for all R rows. Every accumulator takes its P
 * products in e order, as with one row at a time. */
template <int M, int P, int R, bool RND>
__device__ __forceinline__ void chunk_fma(const float *__restrict__ x, long ldx, int k0, const float (*wf)[P],
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
                xv[4 * q] = RND ? round_bf16(t.x) : t.x;
                xv[4 * q + 1] = RND ? round_bf16(t.y) : t.y;
                xv[4 * q + 2] = RND ? round_bf16(t.z) : t.z;
                xv[4 * q + 3] = RND ? round_bf16(t.w) : t.w;
            }
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int e = 0; e < P; e++) acc[r * M + m] = fmaf(xv[e], wf[r][e], acc[r * M + m]);
        }
    }
}

/* Dot products of R weight rows with M rows of x: acc[r*M + m]. All lanes
 * end with the final sums. The R rows' loads are interleaved so that R*U
 * 16-byte loads per lane are in flight; each row's sums are formed in the
 * same order whatever R and U. */
template <typename WT, int M, bool RND, int R, int U>
__device__ __forceinline__ void row_dots(const float *__restrict__ x, int K, const void *const *wrows, int lane,
                                         int m_count, float *acc)
{
    constexpr int P = WT::PER16;
    const int nchunks = K / P;
#pragma unroll
    for (int i = 0; i < R * M; i++) acc[i] = 0.0f;
    for (int base = lane; base < nchunks; base += 32 * U) {
        uint4 wv[R][U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int ch = base + 32 * u;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (ch < nchunks) wv[r][u] = ld_stream16(reinterpret_cast<const uint4 *>(wrows[r]) + ch);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int ch = base + 32 * u;
            if (ch < nchunks) {
                float wf[R][P];
#pragma unroll
                for (int r = 0; r < R; r++) WT::unpack(wv[r][u], wf[r]);
                chunk_fma<M, P, R, RND>(x, K, ch * P, wf, acc, m_count);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R * M; i++) acc[i] = warp_sum(acc[i]);
}

/* One warp per group of R consecutive output rows (R > 1 for several rows
 * of x: each x load then serves R weight rows). */
template <typename WT, int M, bool RND, int R>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(const float *__restrict__ x, int m_count, int K,
                                                               const void *__restrict__ w, int N,
                                                               float *__restrict__ y, int ldy, int accumulate)
{
    int lane = threadIdx.x & 31;
    int g0 = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5), stride = gridDim.x * GEMV_WARPS;
    int groups = (N + R - 1) / R;
    size_t row_bytes = (size_t)K * (16 / WT::PER16);
    wait_prior_grid();
    for (int g = g0; g < groups; g += stride) {
        float acc[R * M];
        const void *wr[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            int n = g * R + r < N ? g * R + r : N - 1;   /* a row past N is read, never written */
            wr[r] = (const char *)w + (size_t)n * row_bytes;
        }
        row_dots<WT, M, RND, R, (GEMV_UNROLL / R > 0 ? GEMV_UNROLL / R : 1)>(x, K, wr, lane, m_count, acc);
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                int n = g * R + r;
                if (n >= N) break;
#pragma unroll
                for (int m = 0; m < M; m++)
                    if (m < m_count) {
                        float *yp = y + (long)m * ldy + n;
                        *yp = accumulate ? *yp + acc[r * M + m] : acc[r * M + m];
                    }
            }
        }
    }
}

/* silu(g) * u, written as the CPU's scalar path does. */
__device__ __forceinline__ float silu_mul_1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* One warp per C consecutive outputs (C > 1 for several rows of x): the
 * gate and up rows of each, 2C weight rows sharing every x load. */
template <typename WT, int M, bool RND, int C>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gate_up_kernel(const float *__restrict__ x, int m_count, int K,
                                                                  const void *__restrict__ wg,
                                                                  const void *__restrict__ wu, int F,
                                                                  float *__restrict__ h)
{
    int lane = threadIdx.x & 31;
    int g0 = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5), stride = gridDim.x * GEMV_WARPS;
    int groups = (F + C - 1) / C;
    size_t row_bytes = (size_t)K * (16 / WT::PER16);
    constexpr int U = GEMV_UNROLL / (2 * C) > 0 ? GEMV_UNROLL / (2 * C) : 1;
    wait_prior_grid();
    for (int g = g0; g < groups; g += stride) {
        float gu[2 * C * M];
        const void *wr[2 * C];
#pragma unroll
        for (int j = 0; j < C; j++) {
            int n = g * C + j < F ? g * C + j : F - 1;   /* an output past F is read, never written */
            wr[2 * j] = (const char *)wg + (size_t)n * row_bytes;
            wr[2 * j + 1] = (const char *)wu + (size_t)n * row_bytes;
        }
        row_dots<WT, M, RND, 2 * C, U>(x, K, wr, lane, m_count, gu);
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < C; j++) {
                int n = g * C + j;
                if (n >= F) break;
#pragma unroll
                for (int m = 0; m < M; m++)
                    if (m < m_count) h[(long)m * F + n] = silu_mul_1(gu[2 * j * M + m], gu[(2 * j + 1) * M + m]);
            }
        }
    }
}

/* Resident blocks per multiprocessor of each kernel, asked once (a race
 * between threads only asks twice; a half-written slot reads as 0, which
 * the caller takes as 1). */
static int blocks_per_sm(const void *kernel)
{
    enum { SLOTS = 64 };
    static const void *fn[SLOTS];
    static int n[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        if (fn[i] == kernel) return n[i];
        if (!fn[i]) {
            int b = 0;
            if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, GEMV_WARPS * 32, 0) != cudaSuccess || b < 1) {
                cudaGetLastError();
                b = 1;
            }
            n[i] = b;
            fn[i] = kernel;
            return b;
        }
    }
    return 1;
}

/* At most one wave of kernel's blocks on c's device; when N exceeds a
 * wave's warps, just enough warps to give every warp the same number of
 * rows (ceil(N / wave)), so that no warp runs a last row alone (gate_up at
 * Qwen3-8B shape: 51.9 against 53.2 us). */
template <typename Kern>
static dim3 one_wave(tern_cuda *c, Kern kernel, int N)
{
    int per_sm = blocks_per_sm((const void *)kernel);
    long wave_warps = (long)(per_sm > 0 ? per_sm : 1) * c->sms * GEMV_WARPS;
    long per_warp = (N + wave_warps - 1) / wave_warps;
    long warps = (N + per_warp - 1) / per_warp;
    return dim3((unsigned)((warps + GEMV_WARPS - 1) / GEMV_WARPS));
}

template <typename... KArgs, typename... Args>
static tern_status launch_wave(tern_cuda *c, const char *what, void (*kernel)(KArgs...), int N, Args... args)
{
    return launch(c, what, kernel, one_wave(c, kernel, N), dim3(GEMV_WARPS * 32), 0, args...);
}

/* Kernels are instantiated for M in {1, 2, 4, 8, 16}: a call with m rows runs
 * the smallest M >= m, and m_count masks the rest. The per-row arithmetic is
 * the same in every instance. */
template <typename WT, bool RND>
static tern_status gemv_typed(tern_cuda *c, const float *x, int m, int K, const void *w, int N, float *y,
                              int ldy, int acc)
{
    if (m <= 1) return launch_wave(c, "gemv", gemv_kernel<WT, 1, RND, 1>, N, x, m, K, w, N, y, ldy, acc);
    if (m <= 2) return launch_wave(c, "gemv", gemv_kernel<WT, 2, RND, GEMV_R>, (N + GEMV_R - 1) / GEMV_R, x, m, K, w, N, y, ldy, acc);
    if (m <= 4) return launch_wave(c, "gemv", gemv_kernel<WT, 4, RND, GEMV_R>, (N + GEMV_R - 1) / GEMV_R, x, m, K, w, N, y, ldy, acc);
    if (m <= 8) return launch_wave(c, "gemv", gemv_kernel<WT, 8, RND, GEMV_R>, (N + GEMV_R - 1) / GEMV_R, x, m, K, w, N, y, ldy, acc);
    return launch_wave(c, "gemv", gemv_kernel<WT, 16, RND, GEMV_R>, (N + GEMV_R - 1) / GEMV_R, x, m, K, w, N, y, ldy, acc);
}

template <typename WT, bool RND>
static tern_status gate_up_typed(tern_cuda *c, const float *x, int m, int K, const void *wg, const void *wu,
                                 int F, float *h)
{
    int N = F;
    constexpr int C = GEMV_R / 2 > 0 ? GEMV_R / 2 : 1;
    int G = (N + C - 1) / C;
    if (m <= 1) return launch_wave(c, "gate_up", gate_up_kernel<WT, 1, RND, 1>, N, x, m, K, wg, wu, F, h);
    if (m <= 2) return launch_wave(c, "gate_up", gate_up_kernel<WT, 2, RND, C>, G, x, m, K, wg, wu, F, h);
    if (m <= 4) return launch_wave(c, "gate_up", gate_up_kernel<WT, 4, RND, C>, G, x, m, K, wg, wu, F, h);
    if (m <= 8) return launch_wave(c, "gate_up", gate_up_kernel<WT, 8, RND, C>, G, x, m, K, wg, wu, F, h);
    return launch_wave(c, "gate_up", gate_up_kernel<WT, 16, RND, C>, G, x, m, K, wg, wu, F, h);
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

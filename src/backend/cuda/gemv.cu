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
#include "backend/cuda/norm.cuh"

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
 * products in e order, as with one row at a time. NORM (the RMSNorm folded
 * in, see gemv_kernel): the x element is first multiplied by the norm
 * weight nw[k], and ss[m] (when SS) adds x^2 in the same order. */
template <int M, int P, int R, bool RND, bool NORM = false>
__device__ __forceinline__ void chunk_fma(const float *__restrict__ x, long ldx, int k0, const float (*wf)[P],
                                          float *acc, int m_count, const float *__restrict__ nw = nullptr,
                                          float *ss = nullptr, bool SS = false)
{
    float nv[NORM ? P : 1];
    if (NORM) {
#pragma unroll
        for (int q = 0; q < P / 4; q++) {
            float4 t = __ldg(reinterpret_cast<const float4 *>(nw + k0) + q);
            nv[4 * q] = t.x;
            nv[4 * q + 1] = t.y;
            nv[4 * q + 2] = t.z;
            nv[4 * q + 3] = t.w;
        }
    }
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
            if (NORM) {
                if (SS) {
#pragma unroll
                    for (int e = 0; e < P; e++) ss[m] = fmaf(xv[e], xv[e], ss[m]);
                }
#pragma unroll
                for (int e = 0; e < P; e++) xv[e] = __fmul_rn(xv[e], nv[NORM ? e : 0]);
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
 * same order whatever R and U. NORM: x times nw, and with SS the sums of
 * squares of the x rows in ss[m] (same lane order, same butterfly). */
template <typename WT, int M, bool RND, int R, int U, bool NORM = false>
__device__ __forceinline__ void row_dots(const float *__restrict__ x, int K, const void *const *wrows, int lane,
                                         int m_count, float *acc, const float *__restrict__ nw = nullptr,
                                         float *ss = nullptr, bool SS = false)
{
    constexpr int P = WT::PER16;
    const int nchunks = K / P;
#pragma unroll
    for (int i = 0; i < R * M; i++) acc[i] = 0.0f;
    if (NORM && SS) {
#pragma unroll
        for (int m = 0; m < M; m++) ss[m] = 0.0f;
    }
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
                chunk_fma<M, P, R, RND, NORM>(x, K, ch * P, wf, acc, m_count, nw, ss, SS);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R * M; i++) acc[i] = warp_sum(acc[i]);
    if (NORM && SS) {
#pragma unroll
        for (int m = 0; m < M; m++) ss[m] = warp_sum(ss[m]);
    }
}

/* Issues an L2 prefetch of the first bytes of the weight rows a warp reads
 * first (before it waits for the previous kernel: weights are never written
 * by one), so that a kernel launched early streams from its first
 * instruction (TERN_CUDA_PREFETCH bytes; 0, the default: none. Measured
 * slower at every size tried: the whole first rows thrash the L2, 1-2 KB
 * gain nothing). */
__device__ __forceinline__ void prefetch_row(const void *row, size_t bytes, int lane)
{
#if __CUDA_ARCH__ >= 900
    if (lane == 0 && bytes >= 16 && bytes % 16 == 0 && ((uintptr_t)row & 15) == 0 && bytes < (1u << 30))
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"((unsigned)bytes) : "memory");
#endif
}

/* Lets the next kernel launch now (its blocks take the room this one
 * leaves, prefetch and wait); TERN_CUDA_TRIGGER bit 1. Measured slower on
 * the products (a product launched while the previous one still fills the
 * device is spread unevenly over it): off by default. */
__device__ __forceinline__ void trigger_next(int on)
{
#if __CUDA_ARCH__ >= 900
    if (on) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The RMSNorm of the input folded into the product (NORM): for
 * y = rmsnorm(x) . w^T the kernel forms acc = sum_k (x_k nw_k) w_k and
 * ss = sum_k x_k^2 in the same lane order (the first row group of each warp;
 * later groups reuse it), and writes acc * (1 / sqrt(ss / K + eps)). The
 * order of every operation depends on K alone, so a row's bits are the same
 * for any M, and no separate norm kernel runs. nw is the norm weight as
 * float32. */
struct norm_arg {
    const float *nw;   /* [K] float32, or NULL: no norm */
    float eps;
    const float *rs;   /* without NORM: per-row scale of the outputs (norm_prep's inv), or NULL */
    int pf;            /* bytes of each warp's first weight rows to prefetch into L2 (TERN_CUDA_PREFETCH) */
};

/* One warp per group of R consecutive output rows (R > 1 for several rows
 * of x: each x load then serves R weight rows). */
template <typename WT, int M, bool RND, int R, bool NORM>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(const float *__restrict__ x, int m_count, int K,
                                                               const void *__restrict__ w, int N,
                                                               float *__restrict__ y, int ldy, int accumulate,
                                                               norm_arg na, int trig)
{
    int lane = threadIdx.x & 31;
    int g0 = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5), stride = gridDim.x * GEMV_WARPS;
    int groups = (N + R - 1) / R;
    size_t row_bytes = (size_t)K * (16 / WT::PER16);
    if (na.pf && g0 < groups) {
        size_t nb = (g0 * R + R <= N ? R : N - g0 * R) * row_bytes;
        prefetch_row((const char *)w + (size_t)g0 * R * row_bytes, nb < (size_t)na.pf ? nb : (size_t)na.pf, lane);
    }
    wait_prior_grid();
    trigger_next(trig);
    float inv[NORM ? M : 1];
    for (int g = g0; g < groups; g += stride) {
        float acc[R * M], ss[NORM ? M : 1];
        const void *wr[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            int n = g * R + r < N ? g * R + r : N - 1;   /* a row past N is read, never written */
            wr[r] = (const char *)w + (size_t)n * row_bytes;
        }
        bool first = g == g0;
        row_dots<WT, M, RND, R, (GEMV_UNROLL / R > 0 ? GEMV_UNROLL / R : 1), NORM>(x, K, wr, lane, m_count, acc, na.nw,
                                                                                 ss, first);
        if (NORM && first) {
#pragma unroll
            for (int m = 0; m < M; m++) inv[m] = rms_inv(ss[m], K, na.eps);
        }
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                int n = g * R + r;
                if (n >= N) break;
#pragma unroll
                for (int m = 0; m < M; m++)
                    if (m < m_count) {
                        float *yp = y + (long)m * ldy + n;
                        float v = NORM      ? __fmul_rn(acc[r * M + m], inv[NORM ? m : 0])
                                  : na.rs ? __fmul_rn(acc[r * M + m], na.rs[m])
                                          : acc[r * M + m];
                        *yp = accumulate ? *yp + v : v;
                    }
            }
        }
    }
}

/* One warp per C consecutive outputs (C > 1 for several rows of x): the
 * gate and up rows of each, 2C weight rows sharing every x load. NORM as in
 * gemv_kernel (both products scaled before silu * up). */
template <typename WT, int M, bool RND, int C, bool NORM>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gate_up_kernel(const float *__restrict__ x, int m_count, int K,
                                                                  const void *__restrict__ wg,
                                                                  const void *__restrict__ wu, int F,
                                                                  float *__restrict__ h, norm_arg na, int trig)
{
    int lane = threadIdx.x & 31;
    int g0 = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5), stride = gridDim.x * GEMV_WARPS;
    int groups = (F + C - 1) / C;
    size_t row_bytes = (size_t)K * (16 / WT::PER16);
    constexpr int U = GEMV_UNROLL / (2 * C) > 0 ? GEMV_UNROLL / (2 * C) : 1;
    if (na.pf && g0 < groups) {
        size_t nb = (g0 * C + C <= F ? C : F - g0 * C) * row_bytes;
        nb = nb < (size_t)na.pf ? nb : (size_t)na.pf;
        prefetch_row((const char *)wg + (size_t)g0 * C * row_bytes, nb, lane);
        prefetch_row((const char *)wu + (size_t)g0 * C * row_bytes, nb, lane);
    }
    wait_prior_grid();
    trigger_next(trig);
    float inv[NORM ? M : 1];
    for (int g = g0; g < groups; g += stride) {
        float gu[2 * C * M], ss[NORM ? M : 1];
        const void *wr[2 * C];
#pragma unroll
        for (int j = 0; j < C; j++) {
            int n = g * C + j < F ? g * C + j : F - 1;   /* an output past F is read, never written */
            wr[2 * j] = (const char *)wg + (size_t)n * row_bytes;
            wr[2 * j + 1] = (const char *)wu + (size_t)n * row_bytes;
        }
        bool first = g == g0;
        row_dots<WT, M, RND, 2 * C, U, NORM>(x, K, wr, lane, m_count, gu, na.nw, ss, first);
        if (NORM && first) {
#pragma unroll
            for (int m = 0; m < M; m++) inv[m] = rms_inv(ss[m], K, na.eps);
        }
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < C; j++) {
                int n = g * C + j;
                if (n >= F) break;
#pragma unroll
                for (int m = 0; m < M; m++)
                    if (m < m_count) {
                        float a = gu[2 * j * M + m], b = gu[(2 * j + 1) * M + m];
                        if (NORM) {
                            a = __fmul_rn(a, inv[NORM ? m : 0]);
                            b = __fmul_rn(b, inv[NORM ? m : 0]);
                        } else if (na.rs) {
                            a = __fmul_rn(a, na.rs[m]);
                            b = __fmul_rn(b, na.rs[m]);
                        }
                        h[(long)m * F + n] = silu_mul(a, b);
                    }
            }
        }
    }
}

template <typename... KArgs, typename... Args>
static tern_status launch_wave(tern_cuda *c, const char *what, void (*kernel)(KArgs...), int N, Args... args)
{
    /* Every warp the same number of rows, so that no warp runs a last row
     * alone (gate_up at Qwen3-8B shape: 51.9 against 53.2 us). */
    return launch(c, what, kernel, one_wave((const void *)kernel, c->sms, GEMV_WARPS * 32, 0, N, GEMV_WARPS),
                  dim3(GEMV_WARPS * 32), 0, args...);
}

/* Kernels are instantiated for M in {1, 2, 4, 8, 16}: a call with m rows runs
 * the smallest M >= m, and m_count masks the rest. The per-row arithmetic is
 * the same in every instance. */
template <typename WT, bool RND, bool NORM>
static tern_status gemv_typed(tern_cuda *c, const float *x, int m, int K, const void *w, int N, float *y,
                              int ldy, int acc, norm_arg na)
{
    int G = (N + GEMV_R - 1) / GEMV_R, tg = c->trigger & 1;
    na.pf = c->prefetch;
    if (m <= 1) return launch_wave(c, "gemv", gemv_kernel<WT, 1, RND, 1, NORM>, N, x, m, K, w, N, y, ldy, acc, na, tg);
    if (m <= 2) return launch_wave(c, "gemv", gemv_kernel<WT, 2, RND, GEMV_R, NORM>, G, x, m, K, w, N, y, ldy, acc, na, tg);
    if (m <= 4) return launch_wave(c, "gemv", gemv_kernel<WT, 4, RND, GEMV_R, NORM>, G, x, m, K, w, N, y, ldy, acc, na, tg);
    if (NORM) return tern_error(TERN_E_INTERNAL, "cuda gemv: the in-kernel norm takes at most 4 rows");
    if (m <= 8) return launch_wave(c, "gemv", gemv_kernel<WT, 8, RND, GEMV_R, false>, G, x, m, K, w, N, y, ldy, acc, na, tg);
    return launch_wave(c, "gemv", gemv_kernel<WT, 16, RND, GEMV_R, false>, G, x, m, K, w, N, y, ldy, acc, na, tg);
}

template <typename WT, bool RND, bool NORM>
static tern_status gate_up_typed(tern_cuda *c, const float *x, int m, int K, const void *wg, const void *wu,
                                 int F, float *h, norm_arg na)
{
    int N = F, tg = c->trigger & 1;
    na.pf = c->prefetch;
    constexpr int C = GEMV_R / 2 > 0 ? GEMV_R / 2 : 1;
    int G = (N + C - 1) / C;
    if (m <= 1) return launch_wave(c, "gate_up", gate_up_kernel<WT, 1, RND, 1, NORM>, N, x, m, K, wg, wu, F, h, na, tg);
    if (m <= 2) return launch_wave(c, "gate_up", gate_up_kernel<WT, 2, RND, C, NORM>, G, x, m, K, wg, wu, F, h, na, tg);
    if (m <= 4) return launch_wave(c, "gate_up", gate_up_kernel<WT, 4, RND, C, NORM>, G, x, m, K, wg, wu, F, h, na, tg);
    if (NORM) return tern_error(TERN_E_INTERNAL, "cuda gate_up: the in-kernel norm takes at most 4 rows");
    if (m <= 8) return launch_wave(c, "gate_up", gate_up_kernel<WT, 8, RND, C, false>, G, x, m, K, wg, wu, F, h, na, tg);
    return launch_wave(c, "gate_up", gate_up_kernel<WT, 16, RND, C, false>, G, x, m, K, wg, wu, F, h, na, tg);
}

/* The folded norm's inputs for a tile of more than NORM_IN_KERNEL rows,
 * by one warp per row: hx = x * nw and inv = 1 / rms(x) with exactly the
 * per-lane order and rounding the NORM kernels use for weights of P
 * elements per 16 bytes (so the tile's products give the same bits). */
enum { NORM_IN_KERNEL = 4 };
template <int P>
__global__ void norm_prep_kernel(const float *__restrict__ x, int M, int K, const float *__restrict__ nw, float eps,
                                 float *__restrict__ hx, float *__restrict__ inv)
{
    wait_prior_grid();
    int m = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (m >= M) return;
    const float *xr = x + (long)m * K;
    float *hr = hx + (long)m * K;
    float ss = 0.0f;
    for (int ch = lane; ch < K / P; ch += 32) {
#pragma unroll
        for (int e = 0; e < P; e++) {
            float v = xr[ch * P + e];
            ss = fmaf(v, v, ss);
            hr[ch * P + e] = __fmul_rn(v, nw[ch * P + e]);
        }
    }
    ss = warp_sum(ss);
    if (lane == 0) inv[m] = rms_inv(ss, K, eps);
}

static tern_status norm_prep(tern_cuda *c, tern_dtype wdt, const float *x, int m, int K, const float *nw, float eps,
                             float *hx, float *inv)
{
    dim3 grid((m + 3) / 4), block(128);
    if (wdt == TERN_DT_F32) return launch(c, "norm_prep", norm_prep_kernel<4>, grid, block, 0, x, m, K, nw, eps, hx, inv);
    return launch(c, "norm_prep", norm_prep_kernel<8>, grid, block, 0, x, m, K, nw, eps, hx, inv);
}

extern "C" size_t tern_cuda_norm_tmp_bytes(int K)
{
    return ((size_t)TERN_CUDA_GEMV_MAX_M * K + TERN_CUDA_GEMV_MAX_M) * sizeof(float);
}

/* One launch over at most 16 rows (internal; matmul.cu tiles larger M).
 * nw: the input's RMSNorm weight (float32) folded in, or NULL; tmp:
 * tern_cuda_norm_tmp_bytes of scratch for tiles of more than 4 rows. */
tern_status tern_cuda_gemv_tile(tern_cuda *c, tern_cuda_act act, const float *x, int m, int K, const void *w,
                                tern_dtype wdt, int N, float *y, int ldy, int accumulate, const float *nw, float eps,
                                float *tmp)
{
    if (tern_cuda_is_tiled(c, w))
        return tern_error(TERN_E_UNSUPPORTED, "cuda matmul: the matrix-vector kernel reads row-major weights, not tiled");
    bool rnd = act == TERN_CUDA_ACT_BF16;
    norm_arg na = {nw, eps, NULL, 0};
    if (nw && m > NORM_IN_KERNEL) {
        if (!tmp) return tern_error(TERN_E_INVALID, "cuda matmul_norm: no scratch");
        float *hx = tmp, *inv = tmp + (size_t)TERN_CUDA_GEMV_MAX_M * K;
        tern_status st = norm_prep(c, wdt, x, m, K, nw, eps, hx, inv);
        if (st) return st;
        x = hx;
        nw = NULL;
        na = (norm_arg){NULL, eps, inv, 0};
    }
    if (nw && rnd) return tern_error(TERN_E_UNSUPPORTED, "cuda matmul: the folded norm takes float32 activations");
    switch (wdt) {
    case TERN_DT_BF16:
        if (nw) return gemv_typed<w_bf16, false, true>(c, x, m, K, w, N, y, ldy, accumulate, na);
        return rnd ? gemv_typed<w_bf16, true, false>(c, x, m, K, w, N, y, ldy, accumulate, na)
                   : gemv_typed<w_bf16, false, false>(c, x, m, K, w, N, y, ldy, accumulate, na);
    case TERN_DT_F16:
        return nw ? gemv_typed<w_f16, false, true>(c, x, m, K, w, N, y, ldy, accumulate, na)
                  : gemv_typed<w_f16, false, false>(c, x, m, K, w, N, y, ldy, accumulate, na);
    case TERN_DT_F32:
        return nw ? gemv_typed<w_f32, false, true>(c, x, m, K, w, N, y, ldy, accumulate, na)
                  : gemv_typed<w_f32, false, false>(c, x, m, K, w, N, y, ldy, accumulate, na);
    default: return tern_error(TERN_E_UNSUPPORTED, "cuda matmul: weight dtype %s", tern_dtype_name(wdt));
    }
}

static tern_status gate_up_any(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K, const void *d_wg,
                               const void *d_wu, tern_dtype wdt, int F, float *d_h, const float *d_nw, float eps,
                               float *tmp)
{
    if (K % 8 || M < 0) return tern_error(TERN_E_INVALID, "cuda gate_up: K=%d must be a multiple of 8", K);
    bool rnd = act == TERN_CUDA_ACT_BF16;
    if (d_nw && rnd) return tern_error(TERN_E_UNSUPPORTED, "cuda gate_up: the folded norm takes float32 activations");
    if (tern_cuda_mma_takes(c, wdt, K)) return tern_cuda_mma(c, act, d_x, M, K, d_wg, d_wu, F, d_h, F, 0, d_nw, eps);
    if (tern_cuda_is_tiled(c, d_wg) || tern_cuda_is_tiled(c, d_wu))
        return tern_error(TERN_E_UNSUPPORTED, "cuda gate_up: the matrix-vector kernel reads row-major weights, not tiled");
    for (int m0 = 0; m0 < M; m0 += TERN_CUDA_GEMV_MAX_M) {
        int m = M - m0 < TERN_CUDA_GEMV_MAX_M ? M - m0 : TERN_CUDA_GEMV_MAX_M;
        const float *x = d_x + (long)m0 * K, *nw = d_nw;
        float *h = d_h + (long)m0 * F;
        norm_arg na = {nw, eps, NULL, 0};
        tern_status st;
        if (nw && m > NORM_IN_KERNEL) {
            if (!tmp) return tern_error(TERN_E_INVALID, "cuda gate_up_norm: no scratch");
            float *hx = tmp, *inv = tmp + (size_t)TERN_CUDA_GEMV_MAX_M * K;
            if ((st = norm_prep(c, wdt, x, m, K, nw, eps, hx, inv))) return st;
            x = hx;
            nw = NULL;
            na = (norm_arg){NULL, eps, inv, 0};
        }
        switch (wdt) {
        case TERN_DT_BF16:
            st = nw ? gate_up_typed<w_bf16, false, true>(c, x, m, K, d_wg, d_wu, F, h, na)
                 : rnd ? gate_up_typed<w_bf16, true, false>(c, x, m, K, d_wg, d_wu, F, h, na)
                       : gate_up_typed<w_bf16, false, false>(c, x, m, K, d_wg, d_wu, F, h, na);
            break;
        case TERN_DT_F16:
            st = nw ? gate_up_typed<w_f16, false, true>(c, x, m, K, d_wg, d_wu, F, h, na)
                    : gate_up_typed<w_f16, false, false>(c, x, m, K, d_wg, d_wu, F, h, na);
            break;
        case TERN_DT_F32:
            st = nw ? gate_up_typed<w_f32, false, true>(c, x, m, K, d_wg, d_wu, F, h, na)
                    : gate_up_typed<w_f32, false, false>(c, x, m, K, d_wg, d_wu, F, h, na);
            break;
        default: return tern_error(TERN_E_UNSUPPORTED, "cuda gate_up: weight dtype %s", tern_dtype_name(wdt));
        }
        if (st) return st;
    }
    return TERN_OK;
}

extern "C" tern_status tern_cuda_gate_up(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K,
                                         const void *d_wg, const void *d_wu, tern_dtype wdt, int F, float *d_h)
{
    return gate_up_any(c, act, d_x, M, K, d_wg, d_wu, wdt, F, d_h, NULL, 0.0f, NULL);
}

extern "C" tern_status tern_cuda_gate_up_norm(tern_cuda *c, const float *d_x, int M, int K, const float *d_nw,
                                              float eps, const void *d_wg, const void *d_wu, tern_dtype wdt, int F,
                                              float *d_h, float *d_tmp)
{
    if (!d_nw) return tern_error(TERN_E_INVALID, "cuda gate_up_norm: no norm weight");
    return gate_up_any(c, TERN_CUDA_ACT_F32, d_x, M, K, d_wg, d_wu, wdt, F, d_h, d_nw, eps, d_tmp);
}

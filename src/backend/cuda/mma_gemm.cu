/* Tensor-core GEMM for prefill-sized products (more than 64 rows) in the
 * order of mma.cuh on mma.sync (TERN_CUDA_WGMMA=0, and K the warpgroup
 * GEMM of mma_wgmma.cu, the default, does not take), its prep, and the
 * dispatch between them and the small-batch kernel (mma_skinny.cu).
 *
 * A prep kernel splits x (times the norm weight, when folded) into bf16 hi
 * and lo arrays and forms 1 / rms per row in mma.cuh's order. The GEMM
 * tiles y by 64 x 128 (eight warps of 32 x 32), streams 32-element k
 * blocks of hi, lo and w through a cp.async pipeline in shared memory
 * (GM_STAGES stages of GM_KS blocks), and keeps two accumulator sets per
 * output: the running part's partial and the sum of the finished parts.
 * Every output therefore takes the same steps as in the small-batch
 * kernel. */
#include "backend/cuda/mma.cuh"

tern_status tern_cuda_mma_skinny(tern_cuda *c, bool lo, const float *x, int M, int K, const void *w, const void *wu,
                                 int N, float *y, int ldy, int accumulate, const float *nw, float eps, bool tiled);

/* Block tile GM_BM x GM_BN, eight warps of GM_WM x 32 (2 x 4), GM_STAGES
 * stages of GM_KS 32-element blocks in flight. */
enum { GM_BM = 64, GM_BN = 128, GM_WM = GM_BM / 2, GM_MI = GM_WM / 16, GM_STAGES = 3, GM_KS = 2, GM_THREADS = 256,
       GM_ATILE = GM_BM * MMA_KB, GM_BTILE = GM_BN * MMA_KB /* bf16 per 32-element block and matrix */ };

/* A stage holds GM_KS blocks of 32: per block hi, (lo,) w. */
static size_t gm_stage(bool lo) { return (size_t)GM_KS * ((lo ? 2 : 1) * GM_ATILE + GM_BTILE); }
static size_t gm_smem(bool lo) { return (size_t)GM_STAGES * gm_stage(lo) * sizeof(uint16_t); }

/* ---- prep: hi / lo of x, 1 / rms ----------------------------------------- */

/* Lane t's hi / lo pairs of 32-element block kb of row row: PERM in the
 * warpgroup GEMM's layout (mma.cuh: lane t's pairs r0..r3 at elements 2t,
 * 2t + 8, 16 + 2t, 24 + 2t of the block), else in natural order (elements
 * 8t .. 8t + 7). */
template <bool LO, bool PERM>
__device__ __forceinline__ void prep_store(uint16_t *__restrict__ hi, uint16_t *__restrict__ lo, long row, int K, int kb,
                                           int t, const uint32_t (&h)[4], const uint32_t (&l)[4])
{
    if constexpr (PERM) {
        uint32_t *hb = reinterpret_cast<uint32_t *>(hi + row * K + (long)kb * MMA_KB);
        uint32_t *lb = reinterpret_cast<uint32_t *>(lo + row * K + (long)kb * MMA_KB);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int w = (r >> 1) * 8 + (r & 1) * 4 + t; /* the pair's 4-byte word: element 2 w */
            hb[w] = h[r];
            if (LO) lb[w] = l[r];
        }
    } else {
        int k = kb * MMA_KB + 8 * t; /* added after the row's offset: the form that keeps the 16-byte stores */
        *reinterpret_cast<uint4 *>(hi + row * K + k) = make_uint4(h[0], h[1], h[2], h[3]);
        if (LO) *reinterpret_cast<uint4 *>(lo + row * K + k) = make_uint4(l[0], l[1], l[2], l[3]);
    }
}

/* The prep with the RMSNorm folded in: x times the norm weight split, and
 * 1 / rms per row. One warp per row, lane 4q + t as (part q, lane t) of the
 * small-batch kernel, so that the sum of squares takes mma.cuh's order. */
template <bool LO, bool PERM>
__global__ void mma_prep_norm_kernel(const float *__restrict__ x, int M, int K, const float *__restrict__ nw,
                                     float eps, uint16_t *__restrict__ hi, uint16_t *__restrict__ lo,
                                     float *__restrict__ inv)
{
    wait_prior_grid();
    int row = blockIdx.x * 4 + (threadIdx.x >> 5), sub = threadIdx.x & 31, q = sub >> 2, t = sub & 3;
    int nb = K / MMA_KB, kb0 = mma_part(nb, q), kb1 = mma_part(nb, q + 1);
    float ss = 0.0f;
    if (row < M) {
        const float *xr = x + (size_t)row * K;
        for (int kb = kb0; kb < kb1; kb++) {
            int k = kb * MMA_KB + 8 * t;
            float v[8], nv[8];
            mma_load8(xr + k, v);
            mma_load8(nw + k, nv);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                ss = fmaf(v[e], v[e], ss);
                v[e] = __fmul_rn(v[e], nv[e]);
            }
            uint32_t h[4], l[4];
            mma_split8<LO>(v, h, l);
            prep_store<LO, PERM>(hi, lo, row, K, kb, t, h, l);
        }
    }
    float s = mma_sum4(ss), p[MMA_PARTS];
#pragma unroll
    for (int i = 0; i < MMA_PARTS; i++) p[i] = __shfl_sync(0xffffffffu, s, 4 * i);
    if (sub == 0 && row < M) inv[row] = rms_inv(mma_fold(p, 1), K, eps);
}

/* The prep without a norm: one thread per 8 elements (lane t's of a block;
 * each element's split alone, so any order gives the same words). */
template <bool LO, bool PERM>
__global__ void mma_prep_kernel(const float *__restrict__ x, int M, int K, uint16_t *__restrict__ hi,
                                uint16_t *__restrict__ lo)
{
    wait_prior_grid();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x, per = K / 8;
    if (i >= (long)M * per) return;
    long row = i / per;
    int c = (int)(i % per), kb = c >> 2, t = c & 3, k = kb * MMA_KB + 8 * t;
    float v[8];
    mma_load8(x + row * K + k, v);
    uint32_t h[4], l[4];
    mma_split8<LO>(v, h, l);
    prep_store<LO, PERM>(hi, lo, row, K, kb, t, h, l);
}

/* ---- the GEMM ------------------------------------------------------------ */

template <bool LO, bool NORM, bool TILED>
__global__ void __launch_bounds__(GM_THREADS, 2) mma_gemm_kernel(gm_args a)
{
    extern __shared__ uint4 gm_smem4[];
    uint16_t *sm = reinterpret_cast<uint16_t *>(gm_smem4);
    constexpr int SUB = (LO ? 2 : 1) * GM_ATILE + GM_BTILE, STAGE = GM_KS * SUB; /* per block: hi, (lo,) w */
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int wm = warp >> 2, wn = warp & 3;
    int m0 = blockIdx.y * GM_BM, n0 = blockIdx.x * GM_BN, nb = a.K / MMA_KB;
    /* Thread tid copies 16-byte piece c % 4 of row c / 4 for chunks c = tid
     * (+ 256 ...) of each tile: one of x's 64 x 32, two of w's 128 x 32. */
    auto issue_block = [&](int kb, uint16_t *base) {
        {
            int r = tid >> 2, p = tid & 3;
            int ar = m0 + r < a.M ? m0 + r : 0;
            size_t ak = (size_t)ar * a.K + (size_t)kb * MMA_KB + 8 * p;
            cp16(base + r * MMA_KB + 8 * p, a.hi + ak, m0 + r < a.M);
            if (LO) cp16(base + GM_ATILE + r * MMA_KB + 8 * p, a.lo + ak, m0 + r < a.M);
        }
        uint16_t *bs = base + (LO ? 2 : 1) * GM_ATILE;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int c = tid + h * GM_THREADS, r = c >> 2, p = c & 3;
            int wrow = n0 + r < a.N ? n0 + r : a.N - 1;
            size_t at = TILED ? (size_t)(wrow >> 3) * 8 * a.K + (size_t)kb * 8 * MMA_KB + (wrow & 7) * MMA_KB
                              : (size_t)wrow * a.K + (size_t)kb * MMA_KB;
            cp16(bs + r * MMA_KB + 8 * p, a.w + at + 8 * p, true);
        }
    };
    int nst = (nb + GM_KS - 1) / GM_KS;
    auto issue = [&](int ks, int st) {
#pragma unroll
        for (int sb = 0; sb < GM_KS; sb++)
            if (ks * GM_KS + sb < nb) issue_block(ks * GM_KS + sb, sm + (size_t)st * STAGE + sb * SUB);
    };
    wait_prior_grid();
#pragma unroll
    for (int s = 0; s < GM_STAGES - 1; s++) {
        if (s < nst) issue(s, s);
        cp_commit();
    }
    float P[GM_MI][4][4], T[GM_MI][4][4];
#pragma unroll
    for (int i = 0; i < GM_MI; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) P[i][j][e] = T[i][j][e] = 0.0f;
    int q = 0;
    auto close_parts = [&](int done) { /* the parts whose blocks are all in (done blocks) */
        while (q < MMA_PARTS && mma_part(nb, q + 1) <= done) {
#pragma unroll
            for (int i = 0; i < GM_MI; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        T[i][j][e] = q ? __fadd_rn(T[i][j][e], P[i][j][e]) : P[i][j][e];
                        P[i][j][e] = 0.0f;
                    }
            q++;
        }
    };
    close_parts(0);
    for (int ks = 0; ks < nst; ks++) {
        cp_wait<GM_STAGES - 2>();
        __syncthreads();
        int nk = ks + GM_STAGES - 1;
        if (nk < nst) issue(nk, nk % GM_STAGES);
        cp_commit();
#pragma unroll
      for (int sb = 0; sb < GM_KS; sb++) {
        int kb = ks * GM_KS + sb;
        if (kb >= nb) break;
        const uint16_t *base = sm + (size_t)(ks % GM_STAGES) * STAGE + sb * SUB;
        const uint16_t *Ah = base, *Al = base + GM_ATILE, *Bs = base + (LO ? 2 : 1) * GM_ATILE;
        uint32_t b[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint4 v = *reinterpret_cast<const uint4 *>(Bs + (wn * 32 + 8 * j + g) * MMA_KB + 8 * t);
            b[j][0] = v.x, b[j][1] = v.y, b[j][2] = v.z, b[j][3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < GM_MI; i++) {
            uint32_t ah[2][4], al[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int r = wm * GM_WM + 16 * i + g + 8 * h;
                uint4 v = *reinterpret_cast<const uint4 *>(Ah + r * MMA_KB + 8 * t);
                ah[h][0] = v.x, ah[h][1] = v.y, ah[h][2] = v.z, ah[h][3] = v.w;
                if (LO) {
                    uint4 w = *reinterpret_cast<const uint4 *>(Al + r * MMA_KB + 8 * t);
                    al[h][0] = w.x, al[h][1] = w.y, al[h][2] = w.z, al[h][3] = w.w;
                } else {
                    al[h][0] = al[h][1] = al[h][2] = al[h][3] = 0u;
                }
            }
#pragma unroll
            for (int j = 0; j < 4; j++) mma_block<LO>(P[i][j], ah, al, b[j]);
        }
        close_parts(kb + 1);
      }
    }
    cp_wait<0>();
#pragma unroll
    for (int i = 0; i < GM_MI; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = m0 + wm * GM_WM + 16 * i + g + 8 * h;
            if (r >= a.M) continue;
            float sc = NORM ? a.inv[r] : 1.0f;
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int n = n0 + wn * 32 + 8 * j + 2 * t + e;
                    if (n >= a.N) continue;
                    gm_put<NORM>(a, r, n, T[i][j][2 * h + e], sc);
                }
        }
}

template <bool LO, bool NORM, bool TILED>
static tern_status gm_launch(tern_cuda *c, const gm_args &a)
{
    auto kern = mma_gemm_kernel<LO, NORM, TILED>;
    static int ready;
    size_t smem = gm_smem(LO);
    tern_status st = smem_limit_once((const void *)kern, smem, &ready, "mma_gemm smem");
    if (st) return st;
    dim3 grid((unsigned)((a.N + GM_BN - 1) / GM_BN), (unsigned)((a.M + GM_BM - 1) / GM_BM));
    return launch(c, "mma_gemm", kern, grid, dim3(GM_THREADS), smem, a);
}

template <bool TILED>
static tern_status gm_pick(tern_cuda *c, bool lo, bool norm, const gm_args &a)
{
    if (norm) return lo ? gm_launch<true, true, TILED>(c, a) : gm_launch<false, true, TILED>(c, a);
    return lo ? gm_launch<true, false, TILED>(c, a) : gm_launch<false, false, TILED>(c, a);
}

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

/* hi, lo and inv of x in the context's scratch, then the GEMM into y
 * (or into u, extra bytes past them, for the gate/up's second product). */
static tern_status gemm_path(tern_cuda *c, bool lo, const float *x, int M, int K, const void *w, const void *wu, int N,
                             float *y, int ldy, int accumulate, const float *nw, float eps, bool tiled)
{
    size_t xs = up256((size_t)M * K * sizeof(uint16_t)), is = up256((size_t)M * sizeof(float));
    size_t us = wu ? up256((size_t)M * N * sizeof(float)) : 0;
    void *s = NULL;
    tern_status st = tern_cuda_mma_scratch(c, 2 * xs + is + us, &s);
    if (st) return st;
    uint16_t *hi = (uint16_t *)s, *lo16 = (uint16_t *)((char *)s + xs);
    float *inv = (float *)((char *)s + 2 * xs), *u = wu ? (float *)((char *)s + 2 * xs + is) : NULL;
    /* the prep writes the warpgroup GEMM's layout only when that GEMM
     * takes every product of the call (the other kernel reads the natural
     * order) */
    gm_args wa = {hi, lo16, M, K, (const uint16_t *)w, N, y, N, 0, inv, (const uint16_t *)wu, tiled};
    bool wgmma = c->wgmma && tern_cuda_wgmma_takes(wa);
    if (nw) {
        void (*prep)(const float *, int, int, const float *, float, uint16_t *, uint16_t *, float *) =
            wgmma ? (lo ? mma_prep_norm_kernel<true, true> : mma_prep_norm_kernel<false, true>)
                  : (lo ? mma_prep_norm_kernel<true, false> : mma_prep_norm_kernel<false, false>);
        if ((st = launch(c, "mma_prep", prep, dim3((unsigned)((M + 3) / 4)), dim3(128), 0, x, M, K, nw, eps, hi, lo16,
                         inv)))
            return st;
    } else {
        /* one thread per 8 elements (one warp a row, as the norm's prep, left
         * most of the GPU idle: docs/BENCHMARKS.md) */
        void (*prep)(const float *, int, int, uint16_t *, uint16_t *) =
            wgmma ? (lo ? mma_prep_kernel<true, true> : mma_prep_kernel<false, true>)
                  : (lo ? mma_prep_kernel<true, false> : mma_prep_kernel<false, false>);
        long n8 = (long)M * (K / 8);
        if ((st = launch(c, "mma_prep", prep, dim3((unsigned)((n8 + 255) / 256)), dim3(256), 0, x, M, K, hi, lo16)))
            return st;
    }
    /* the warpgroup GEMM takes the gate and up together, silu(g) * u in its epilogue */
    if (wgmma && wu) return tern_cuda_wgmma_gemm(c, lo, nw != NULL, wa);
    for (int pass = 0; pass < (wu ? 2 : 1); pass++) {
        gm_args a = {hi, lo16, M, K, (const uint16_t *)(pass ? wu : w), N, pass ? u : y, wu ? N : ldy,
                     wu ? 0 : accumulate, inv, NULL, tiled};
        if (wgmma) st = tern_cuda_wgmma_gemm(c, lo, nw != NULL, a);
        else st = tiled ? gm_pick<true>(c, lo, nw != NULL, a) : gm_pick<false>(c, lo, nw != NULL, a);
        if (st) return st;
    }
    return wu ? tern_cuda_silu_mul(c, y, u, (long)M * N) : TERN_OK;
}

extern "C" int tern_cuda_mma_takes(const tern_cuda *c, tern_dtype wdt, int K)
{
    return c->mma && wdt == TERN_DT_BF16 && K >= MMA_KB && K % MMA_KB == 0;
}

/* The product for any M (the path depends on M, the bits do not). */
extern "C" tern_status tern_cuda_mma(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K, const void *d_w,
                                     const void *d_wu, int N, float *d_y, int ldy, int accumulate, const float *d_nw,
                                     float eps)
{
    if (!tern_cuda_mma_takes(c, TERN_DT_BF16, K) || N <= 0 || M < 0 || ldy < N)
        return tern_error(TERN_E_INVALID, "cuda mma: bad shape M=%d K=%d N=%d ldy=%d", M, K, N, ldy);
    if (M == 0) return TERN_OK;
    bool lo = act == TERN_CUDA_ACT_F32, tiled = false, tu = false;
    tern_status st = tiled_of(c, d_w, K, &tiled);
    if (!st && d_wu) st = tiled_of(c, d_wu, K, &tu);
    if (st) return st;
    if (d_wu && tu != tiled)
        return tern_error(TERN_E_INVALID, "cuda mma: a gate/up pair with one matrix tiled and one not");
    if (M <= MMA_SKINNY_MAX)
        return tern_cuda_mma_skinny(c, lo, d_x, M, K, d_w, d_wu, N, d_y, ldy, accumulate, d_nw, eps, tiled);
    return gemm_path(c, lo, d_x, M, K, d_w, d_wu, N, d_y, ldy, accumulate, d_nw, eps, tiled);
}

tern_status tern_cuda_mma_scratch(tern_cuda *c, size_t bytes, void **out)
{
    if (bytes > c->mma_tmp_bytes) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        CUDA_TRY(cudaStreamIsCapturing(c->stream, &cs), "mma scratch");
        if (cs != cudaStreamCaptureStatusNone)
            return tern_error(TERN_E_INTERNAL, "cuda mma: scratch of %zu bytes needed inside a graph capture", bytes);
        CUDA_TRY(cudaStreamSynchronize(c->stream), "mma scratch");
        if (c->mma_tmp) cudaFree(c->mma_tmp);
        c->mma_tmp = NULL;
        c->mma_tmp_bytes = 0;
        cudaError_t e = cudaMalloc(&c->mma_tmp, bytes);
        if (e != cudaSuccess) {
            c->mma_tmp = NULL;
            cudaGetLastError();
            return tern_error(TERN_E_NOMEM, "cuda mma: cannot allocate %zu bytes of scratch: %s", bytes,
                              cudaGetErrorString(e));
        }
        c->mma_tmp_bytes = bytes;
    }
    *out = c->mma_tmp;
    return TERN_OK;
}

/* A chain of one-row products in one persistent kernel: the decode
 * layer's o, gate/up, down and the next layer's q/k/v, each reading the
 * previous one's output, with a grid-wide barrier between them instead of
 * a kernel boundary. A block that has finished its tiles of one product
 * loads its first weights of the next before it waits at the barrier, so
 * the weight stream goes on through the product's tail and the next one's
 * start (with one kernel a product, the next kernel's blocks start only
 * once every block of the previous one has left).
 *
 * Each product is computed as the one-row kernel of mma_skinny.cu computes
 * it (mma.cuh's order: the same tiles, parts, steps and fold), so every
 * output has the same bits as there. Activations written inside the
 * kernel are read through L2 (__ldcg), never the non-coherent path. The
 * grid is every block the device holds at once (launched cooperatively,
 * so that the barrier cannot wait for a block that is not resident). */
#include "backend/cuda/mma.cuh"

enum { CH_THREADS = 32 * MMA_PARTS, CH_MINB = 2, CH_BUF = 8 };

struct ch_stage {
    const float *x;     /* [K] float32, written earlier in the chain or before it */
    int K, N;
    const uint16_t *w0; /* [N, K] bf16: the weight, or the gate */
    const uint16_t *w1; /* the up weight (SwiGLU), else NULL */
    float *y;           /* [N]: x . w0^T (+= with accumulate), or silu(gate) * up */
    int accumulate;
    const float *nw;    /* the folded RMSNorm's weight [K] (float32), or NULL */
};

struct ch_args {
    ch_stage s[TERN_CUDA_CHAIN_MAX];
    int n;
    float eps;
    unsigned *bar; /* [0] blocks arrived, [1] barriers passed (the context's, zero between launches) */
};

/* A warp's share of a stage: lane (g, t), part q of K (kb0, len blocks,
 * nfull whole batches of U), the tile count. */
struct ch_warp {
    int g, t, q, kb0, len, nfull, ntiles;
};

template <int U>
__device__ __forceinline__ ch_warp ch_warp_of(const ch_stage &s)
{
    ch_warp w;
    int lane = threadIdx.x & 31;
    w.q = threadIdx.x >> 5, w.g = lane >> 2, w.t = lane & 3;
    int nb = s.K / MMA_KB;
    w.kb0 = mma_part(nb, w.q), w.len = mma_part(nb, w.q + 1) - w.kb0;
    w.nfull = w.len / U, w.ntiles = (s.N + 7) / 8;
    return w;
}

/* Lane (g, t)'s weight rows of tile tl (the last row past N: read, never
 * written), at elements 8t of its blocks. */
template <int NMAT>
__device__ __forceinline__ void ch_rows(const ch_stage &s, int tl, int g, int t, const uint16_t *(&wr)[NMAT])
{
    int n = tl * 8 + g < s.N ? tl * 8 + g : s.N - 1;
#pragma unroll
    for (int j = 0; j < NMAT; j++) wr[j] = (j ? s.w1 : s.w0) + (size_t)n * s.K + 8 * t;
}

/* n <= U blocks from kb of each weight stream into buf[u NMAT + j]. */
template <int NMAT, int U>
__device__ __forceinline__ void ch_load(uint4 (&buf)[CH_BUF], const uint16_t *const (&wr)[NMAT], int kb, int n)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < n) {
#pragma unroll
            for (int j = 0; j < NMAT; j++) buf[u * NMAT + j] = ld_stream16(wr[j] + (size_t)(kb + u) * MMA_KB);
        }
}

/* The block's first tile's first batch of stage s into buf (weights only:
 * safe before any wait). */
template <int NMAT, int U, bool PRE2>
__device__ __forceinline__ void ch_first(const ch_stage &s, uint4 (&buf)[CH_BUF], uint4 (&buf2)[CH_BUF])
{
    ch_warp w = ch_warp_of<U>(s);
    if ((int)blockIdx.x < w.ntiles && w.nfull) {
        const uint16_t *wr[NMAT];
        ch_rows<NMAT>(s, blockIdx.x, w.g, w.t, wr);
        ch_load<NMAT, U>(buf, wr, w.kb0, U);
        if (PRE2 && w.nfull > 1) ch_load<NMAT, U>(buf2, wr, w.kb0 + U, U);
    }
}

/* PRE2: the second batch too (into buf2). */
template <bool PRE2>
__device__ __forceinline__ void ch_first_any(const ch_stage &s, uint4 (&buf)[CH_BUF], uint4 (&buf2)[CH_BUF])
{
    if (s.w1) ch_first<2, CH_BUF / 2, PRE2>(s, buf, buf2);
    else ch_first<1, CH_BUF, PRE2>(s, buf, buf2);
}

/* Eight floats of x at p through L2 (x may have been written by another
 * block of this kernel). */
__device__ __forceinline__ void ch_x8(const float *p, float v[8])
{
    const float4 *q = reinterpret_cast<const float4 *>(p);
    float4 a = __ldcg(q), b = __ldcg(q + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* One stage: the block's tiles blockIdx.x, + gridDim.x, ... of s; bA holds
 * the first tile's first batch (ch_first). */
template <bool LO, int NMAT, bool NORM, int U, bool PRE2>
__device__ __forceinline__ void ch_run(const ch_stage &s, float eps, uint4 (&bA)[CH_BUF], uint4 (&bB)[CH_BUF],
                                       uint4 *sx4, float (*part)[MMA_PARTS][8], float *ssq)
{
    const ch_warp w = ch_warp_of<U>(s);
    const int g = w.g, t = w.t, q = w.q, kb0 = w.kb0, len = w.len, nfull = w.nfull;
    /* the warp's part of x, split (times the norm weight) into shared memory */
    for (int kb = kb0 + g; kb < kb0 + len; kb += 8) {
        int k = kb * MMA_KB + 8 * t;
        float v[8];
        ch_x8(s.x + k, v);
        if (NORM) {
            float nv[8];
            mma_load8(s.nw + k, nv);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], nv[e]);
        }
        uint32_t h[4], l[4];
        mma_split8<LO>(v, h, l);
        sx4[2 * (4 * kb + t)] = make_uint4(h[0], h[1], h[2], h[3]);
        if (LO) sx4[2 * (4 * kb + t) + 1] = make_uint4(l[0], l[1], l[2], l[3]);
    }
    float ss = 0.0f;
    if (NORM && g == 0) {
        for (int kb = kb0; kb < kb0 + len; kb++) {
            float v[8];
            ch_x8(s.x + kb * MMA_KB + 8 * t, v);
#pragma unroll
            for (int e = 0; e < 8; e++) ss = fmaf(v[e], v[e], ss);
        }
    }
    __syncwarp();
    const uint16_t *wr[NMAT];
    bool have_b = PRE2; /* the first tile's second batch is in bB (ch_first) */
    for (int tile = blockIdx.x; tile < w.ntiles; tile += gridDim.x) {
        ch_rows<NMAT>(s, tile, g, t, wr);
        float acc[NMAT][4];
#pragma unroll
        for (int j = 0; j < NMAT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        auto step = [&](const uint4(&buf)[CH_BUF], int kb, int n) {
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
                        const uint4 bv = buf[u * NMAT + j];
                        const uint32_t b[4] = {bv.x, bv.y, bv.z, bv.w};
                        mma_block<LO>(acc[j], ah, al, b);
                    }
                }
        };
        /* whole batches, two buffers in flight (bA loaded before), then
         * the rest one block at a time; then the next tile's first batch */
        int kb = kb0;
        for (int b = 0; b < nfull; b += 2, kb += 2 * U) {
            if (b + 1 < nfull && !(b == 0 && have_b)) ch_load<NMAT, U>(bB, wr, kb + U, U);
            step(bA, kb, U);
            if (b + 2 < nfull) ch_load<NMAT, U>(bA, wr, kb + 2 * U, U);
            if (b + 1 < nfull) step(bB, kb + U, U);
        }
        kb = kb0 + nfull * U;
        if (kb < kb0 + len) {
            int rest = kb0 + len - kb;
            ch_load<NMAT, U>(bB, wr, kb, rest);
            step(bB, kb, rest);
        }
        have_b = false;
        int next = tile + gridDim.x;
        if (next < w.ntiles && nfull) {
            const uint16_t *nr[NMAT];
            ch_rows<NMAT>(s, next, g, t, nr);
            ch_load<NMAT, U>(bA, nr, kb0, U);
        }
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
        if (threadIdx.x < 8) {
            int cidx = threadIdx.x, n = tile * 8 + cidx;
            if (n < s.N) {
                float v[NMAT];
#pragma unroll
                for (int j = 0; j < NMAT; j++) v[j] = mma_fold(&part[j][0][cidx], 8);
                if (NORM) {
                    float inv = rms_inv(mma_fold(ssq, 1), s.K, eps);
#pragma unroll
                    for (int j = 0; j < NMAT; j++) v[j] = __fmul_rn(v[j], inv);
                }
                float *yp = s.y + n;
                if (NMAT == 2) __stcg(yp, silu_mul(v[0], v[NMAT - 1]));
                else __stcg(yp, s.accumulate ? __fadd_rn(__ldcg(yp), v[0]) : v[0]);
            }
        }
        __syncthreads();
    }
}

template <bool LO, bool PRE2>
__device__ __forceinline__ void ch_run_any(const ch_stage &s, float eps, uint4 (&bA)[CH_BUF], uint4 (&bB)[CH_BUF],
                                           uint4 *sx4, float (*part)[MMA_PARTS][8], float *ssq)
{
    if (s.w1) {
        if (s.nw) ch_run<LO, 2, true, CH_BUF / 2, PRE2>(s, eps, bA, bB, sx4, part, ssq);
        else ch_run<LO, 2, false, CH_BUF / 2, PRE2>(s, eps, bA, bB, sx4, part, ssq);
    } else {
        if (s.nw) ch_run<LO, 1, true, CH_BUF, PRE2>(s, eps, bA, bB, sx4, part, ssq);
        else ch_run<LO, 1, false, CH_BUF, PRE2>(s, eps, bA, bB, sx4, part, ssq);
    }
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Every block's writes before it visible to every block after it. Thread
 * 0 counts the block in; the last one resets the count and opens the
 * barrier (gen: the barriers passed so far, as thread 0 read it). */
__device__ __forceinline__ void ch_barrier(unsigned *bar, unsigned &gen)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&bar[0], 1u) == gridDim.x - 1) {
            atomicExch(&bar[0], 0u);
            __threadfence();
            atomicAdd(&bar[1], 1u);
        } else {
            while (ld_acquire(&bar[1]) == gen) __nanosleep(32);
        }
        __threadfence();
        gen++;
    }
    __syncthreads();
}

template <bool LO, bool PRE2>
__global__ void __launch_bounds__(CH_THREADS, CH_MINB) ch_kernel(ch_args a)
{
    __shared__ float part[2][MMA_PARTS][8];
    __shared__ float ssq[MMA_PARTS];
    extern __shared__ uint4 sx4[]; /* as mma_skinny.cu's one-row kernel */
    uint4 bA[CH_BUF], bB[CH_BUF];
    ch_first_any<PRE2>(a.s[0], bA, bB);
    wait_prior_grid();
    unsigned gen = 0;
    if (threadIdx.x == 0) gen = ld_acquire(&a.bar[1]);
    for (int i = 0; i < a.n; i++) {
        ch_run_any<LO, PRE2>(a.s[i], a.eps, bA, bB, sx4, part, ssq);
        if (i + 1 < a.n) {
            ch_first_any<PRE2>(a.s[i + 1], bA, bB);
            ch_barrier(a.bar, gen);
        }
    }
}

static size_t ch_smem(int K) { return (size_t)(K / MMA_KB) * 4 * 2 * sizeof(uint4); }

enum { CH_MAX_SMEM = 96 * 1024 };

extern "C" int tern_cuda_chain_takes(const tern_cuda *c, tern_dtype wdt, int K)
{
    return c->chain && c->chain_bar && tern_cuda_mma_takes(c, wdt, K) && ch_smem(K) <= CH_MAX_SMEM;
}

template <bool LO, bool PRE2>
static tern_status ch_launch(tern_cuda *c, const ch_args &a, size_t smem)
{
    auto kern = ch_kernel<LO, PRE2>;
    static int ready;
    tern_status st = smem_limit_once((const void *)kern, CH_MAX_SMEM, &ready, "chain smem");
    if (st) return st;
    int per = blocks_per_sm((const void *)kern, CH_THREADS, CH_MAX_SMEM);
    if (per > CH_MINB) per = CH_MINB;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(per * c->sms));
    cfg.blockDim = dim3(CH_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cudaLaunchAttribute attr[2];
    int na = 0;
    if (c->chain != 2) {
        attr[na].id = cudaLaunchAttributeCooperative;
        attr[na++].val.cooperative = 1;
    }
    if (c->pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = na;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, a);
    if (e != cudaSuccess) return cuda_fail(e, "chain");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_chain(tern_cuda *c, tern_cuda_act act, const tern_cuda_chain_stage *st, int n,
                                       float eps)
{
    if (n < 1 || n > TERN_CUDA_CHAIN_MAX)
        return tern_error(TERN_E_INVALID, "cuda chain: %d products (1..%d)", n, (int)TERN_CUDA_CHAIN_MAX);
    if (!c->chain_bar) return tern_error(TERN_E_UNSUPPORTED, "cuda chain: no barrier memory");
    ch_args a = {};
    a.n = n, a.eps = eps, a.bar = c->chain_bar;
    size_t smem = 0;
    for (int i = 0; i < n; i++) {
        const tern_cuda_chain_stage *s = &st[i];
        if (!tern_cuda_chain_takes(c, s->wdt, s->K) || s->N <= 0 || !s->x || !s->w || !s->y)
            return tern_error(TERN_E_INVALID, "cuda chain: product %d (K=%d N=%d, %s) is not for the chain kernel", i,
                              s->K, s->N, tern_dtype_name(s->wdt));
        a.s[i] = (ch_stage){s->x, s->K, s->N, (const uint16_t *)s->w, (const uint16_t *)s->wu, s->y,
                            s->wu ? 0 : s->accumulate, s->nw};
        if (ch_smem(s->K) > smem) smem = ch_smem(s->K);
    }
    if (c->chain == 3) return act == TERN_CUDA_ACT_F32 ? ch_launch<true, true>(c, a, smem) : ch_launch<false, true>(c, a, smem);
    return act == TERN_CUDA_ACT_F32 ? ch_launch<true, false>(c, a, smem) : ch_launch<false, false>(c, a, smem);
}

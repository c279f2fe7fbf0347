/* One-row products that wait for their part of x, not for the whole
 * previous kernel (TERN_CUDA_PFLAG).
 *
 * In a decode pass the one-row products follow each other: o, gate/up,
 * down, the next q/k/v. Warp q of a product reads only part q of x (its
 * 32-element blocks of K, mma.cuh), and x is the previous product's
 * output, written a tile of 4 or 8 columns at a time. So each product
 * counts its written tiles by the next product's part (MMA_PARTS counters,
 * a slot of the context's flag array), and warp q of the next one waits
 * for its own part's count instead of for the whole previous kernel
 * (griddepcontrol.wait): the parts written in the previous product's
 * first rounds let their warps stream while its last tiles are still
 * running.
 *
 * For that the warps of a block run free: a warp keeps its partial of a
 * tile in a ring of SKF_RING slots of shared memory and goes on to its
 * next tile; the warp that brings a tile's eighth partial folds them and
 * writes the tile (the same fold in part order and the same epilogue as
 * mma_skinny.cu's sk_one_kernel, whose tiles, parts, loads and products
 * this kernel also keeps), so the bits are those of that kernel. The
 * norm's sum of squares is formed from x kept in shared memory in the same
 * order.
 *
 * Memory order: a tile's writer lanes fence (gpu scope) before its count
 * is added; a waiting warp reads the count relaxed, then fences, then
 * reads x through L2 (ld.global.cg: x is written while this kernel runs,
 * so the read-only path may not take it). The counters are zeroed before
 * each pass (tern_cuda_pflag_begin); a wait that lasts 2 s sets the error
 * word and gives up (tern_cuda_pflag_check reports it). */
#include "backend/cuda/mma_skinny.cuh"

enum { SKF_RING = 16, PF_SLOTS = 2048, PF_HEAD = 32 /* words before the first slot: the error word */ };

__device__ __forceinline__ unsigned pf_load(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Until *f reaches target (or the error word is set, or 2 s pass: then
 * it is set), then the acquiring fence. Every lane of the warp calls it. */
__device__ __forceinline__ void pf_wait(const unsigned *f, unsigned target, unsigned *err)
{
    if (pf_load(f) < target) {
        unsigned long long t0 = dev_clock_ns();
        while (pf_load(f) < target) {
            if (pf_load(err)) break;
            if (dev_clock_ns() - t0 > 2000000000ull) {
                atomicExch(err, 1u);
                break;
            }
            __nanosleep(64);
        }
    }
    __threadfence();
}

/* Tiles of cpt columns in part q of K (K a multiple of 32, cpt 4 or 8). */
__device__ __forceinline__ unsigned pf_target(int K, int q, int cpt)
{
    int nb = K / MMA_KB;
    return (unsigned)((mma_part(nb, q + 1) - mma_part(nb, q)) * MMA_KB / cpt);
}

/* The part of the next product's K (nout columns) that column col lies in. */
__device__ __forceinline__ int pf_part_of(int col, int nout)
{
    int nb = nout / MMA_KB, kb = col / MMA_KB, q = MMA_PARTS - 1;
    while (q > 0 && mma_part(nb, q) > kb) q--;
    return q;
}

/* Shared memory past sx_smem: x as read (NORM: the sum of squares). */
static size_t sf_smem(int K, bool norm) { return sx_smem(K) + (norm ? (size_t)K * sizeof(float) : 0); }

template <bool LO, bool NORM, int U, int MINB, bool TILED>
__global__ void __launch_bounds__(SK_THREADS, MINB) sk_free_kernel(sk_args a)
{
    constexpr int R = SKF_RING;
    __shared__ float part[R][MMA_PARTS][8];
    __shared__ float ssq[MMA_PARTS];
    __shared__ unsigned arrived[R], folded[R];
    extern __shared__ uint4 sx4[]; /* as sk_one_kernel's, then x as read [K] */
    float *xraw = reinterpret_cast<float *>(sx4 + (size_t)(a.K / MMA_KB) * 8);
    const uint16_t *wr[1];
    uint4 bA[U][1], bB[U][1];
    const int tid = threadIdx.x, lane = tid & 31;
    if (tid < R) arrived[tid] = 0u, folded[tid] = 0u;
    sk_warp w = sk_start<1, U, TILED>(a, wr, bA);
    const int g = w.g, t = w.t, q = w.q, kb0 = w.kb0, len = w.len, ntiles = w.ntiles;
#if __CUDA_ARCH__ >= 900
    if (a.trig == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    __syncthreads();
    if (a.fl_in) pf_wait(a.fl_in + q, pf_target(a.K, q, a.fl_cpt), a.fl_err);
    else wait_prior_grid();
    /* The warp's part of x, as sk_one_kernel prepares it. */
    for (int kb = kb0 + g; kb < kb0 + len; kb += 8) {
        int k = kb * MMA_KB + 8 * t;
        float v[8];
        const float4 *xp = reinterpret_cast<const float4 *>(a.x + k);
        float4 x0 = __ldcg(xp), x1 = __ldcg(xp + 1);
        v[0] = x0.x, v[1] = x0.y, v[2] = x0.z, v[3] = x0.w, v[4] = x1.x, v[5] = x1.y, v[6] = x1.z, v[7] = x1.w;
        if (NORM) {
            reinterpret_cast<float4 *>(xraw + k)[0] = x0;
            reinterpret_cast<float4 *>(xraw + k)[1] = x1;
        }
        uint32_t h[4], l[4];
        mma_prep8<LO, NORM>(v, a.nw, k, h, l);
        sx4[2 * (4 * kb + t)] = make_uint4(h[0], h[1], h[2], h[3]);
        if (LO) sx4[2 * (4 * kb + t) + 1] = make_uint4(l[0], l[1], l[2], l[3]);
    }
    __syncwarp();
    if (NORM) {
        /* lane t of row 0 over the part's blocks in order, e = 0..7 */
        float ss = 0.0f;
        if (g == 0) {
            for (int kb = kb0; kb < kb0 + len; kb++) {
                const float4 *xp = reinterpret_cast<const float4 *>(xraw + kb * MMA_KB + 8 * t);
                float4 x0 = xp[0], x1 = xp[1];
                const float v[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                for (int e = 0; e < 8; e++) ss = fmaf(v[e], v[e], ss);
            }
        }
        float sq = mma_sum4(ss);
        if (g == 0 && t == 0) ssq[q] = sq;
    }
    const int cpt = a.ilv ? 4 : 8, nout = a.ilv ? a.N / 2 : a.N;
    for (int i = 0; w.tile < ntiles; i++) {
#if __CUDA_ARCH__ >= 900
        if (a.trig == 2 && w.tile + (int)gridDim.x >= ntiles) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        auto step = [&](const uint4(&buf)[U][1], int kb, int n) {
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
                    const uint32_t b[4] = {buf[u][0].x, buf[u][0].y, buf[u][0].z, buf[u][0].w};
                    mma_block<LO>(acc, ah, al, b);
                }
        };
        int next = sk_stream<1, U, decltype(step), TILED>(a, w, wr, bA, bB, step);
        /* the tile's partial into its ring slot, once the slot's previous
         * tile has been folded */
        const int s = i % R;
        const unsigned gen = (unsigned)(i / R);
        if (*(volatile unsigned *)&folded[s] < gen) {
            /* (bounded as pf_wait is: a fault here must not hang the device) */
            unsigned long long t0 = dev_clock_ns();
            while (*(volatile unsigned *)&folded[s] < gen && dev_clock_ns() - t0 < 2000000000ull) __nanosleep(32);
            if (*(volatile unsigned *)&folded[s] < gen && a.fl_err) atomicExch(a.fl_err, 2u);
        }
        if (g == 0) part[s][q][2 * t] = acc[0], part[s][q][2 * t + 1] = acc[1];
        __threadfence_block();
        __syncwarp();
        unsigned before = 0;
        if (lane == 0) before = atomicAdd(&arrived[s], 1u);
        before = __shfl_sync(0xffffffffu, before, 0);
        if (before == MMA_PARTS * gen + MMA_PARTS - 1) {
            /* the last of the tile's warps: the fold and the epilogue */
            __threadfence_block();
            if (a.ilv) {
                if (lane < 4) {
                    float vg = mma_fold(&part[s][0][lane], 8), vu = mma_fold(&part[s][0][lane + 4], 8);
                    if (NORM) {
                        float inv = rms_inv(mma_fold(ssq, 1), a.K, a.eps);
                        vg = __fmul_rn(vg, inv), vu = __fmul_rn(vu, inv);
                    }
                    a.y[w.tile * 4 + lane] = silu_mul(vg, vu);
                }
            } else if (lane < 8) {
                int n = w.tile * 8 + lane;
                if (n < a.N) {
                    float v = mma_fold(&part[s][0][lane], 8);
                    if (NORM) v = __fmul_rn(v, rms_inv(mma_fold(ssq, 1), a.K, a.eps));
                    float *yp = a.y + n;
                    *yp = a.accumulate ? __fadd_rn(__ldcg(yp), v) : v;
                }
            }
            if (a.fl_out) {
                __threadfence();
                __syncwarp();
                if (lane == 0) atomicAdd(a.fl_out + pf_part_of(w.tile * cpt, nout), 1u);
            }
            __syncwarp();
            if (lane == 0) {
                __threadfence_block();
                *(volatile unsigned *)&folded[s] = gen + 1;
            }
        }
        w.tile = next;
    }
}

/* The launch: a one-row product with NMAT = 1 (a SwiGLU pair interleaved,
 * a.ilv) in batches of 8 blocks at 2 blocks a multiprocessor, as
 * sk_rows's default; with c->pflag 1 it takes the next flag slot and waits
 * on the previous product's when that product wrote this x and nothing
 * was queued in between. */
template <bool LO, bool NORM, bool TILED>
static tern_status sf_launch(tern_cuda *c, const sk_args &a)
{
    auto kern = sk_free_kernel<LO, NORM, 8, 2, TILED>;
    static int ready;
    tern_status st = smem_limit_once((const void *)kern, SX_MAX_SMEM, &ready, "one-row product smem");
    if (st) return st;
    sk_args b = a;
    b.trig = c->sk_trig;
    const int cpt = a.ilv ? 4 : 8, nout = a.ilv ? a.N / 2 : a.N;
    b.fl_err = c->fl_d;
    if (c->pflag == 1 && c->fl_d) {
        if (c->fl_prev_out && c->fl_prev_ops == c->ops && c->fl_prev_y == a.x && c->fl_prev_n == a.K) {
            b.fl_in = c->fl_prev_out;
            b.fl_cpt = c->fl_prev_cpt;
        }
        if (nout % MMA_KB == 0 && c->fl_seq < PF_SLOTS) b.fl_out = c->fl_d + PF_HEAD + (size_t)MMA_PARTS * c->fl_seq++;
        if (c->fl_seq > c->fl_hi) c->fl_hi = c->fl_seq;
    }
    size_t smem = sf_smem(a.K, NORM);
    st = launch(c, "mma_skinny_free", kern, one_wave((const void *)kern, c->sms, SK_THREADS, smem, (a.N + 7) / 8, 1),
                dim3(SK_THREADS), smem, b);
    c->fl_prev_out = st ? NULL : b.fl_out;
    c->fl_prev_ops = c->ops;
    c->fl_prev_y = a.y;
    c->fl_prev_n = nout;
    c->fl_prev_cpt = cpt;
    return st;
}

/* mma_skinny.cu's one-row dispatch: whether this kernel takes the product
 * (c->pflag on, x fits its shared memory), and its launch. */
bool sf_takes(const tern_cuda *c, int K, bool norm)
{
    return c->pflag && sf_smem(K, norm) <= SX_MAX_SMEM;
}

tern_status sf_run(tern_cuda *c, bool lo, bool norm, bool tiled, const sk_args &a)
{
    if (lo) {
        if (norm) return tiled ? sf_launch<true, true, true>(c, a) : sf_launch<true, true, false>(c, a);
        return tiled ? sf_launch<true, false, true>(c, a) : sf_launch<true, false, false>(c, a);
    }
    if (norm) return tiled ? sf_launch<false, true, true>(c, a) : sf_launch<false, true, false>(c, a);
    return tiled ? sf_launch<false, false, true>(c, a) : sf_launch<false, false, false>(c, a);
}

extern "C" tern_status tern_cuda_pflag_begin(tern_cuda *c)
{
    c->fl_seq = 0;
    c->fl_prev_out = NULL;
    if (c->pflag != 1) return TERN_OK;
    if (!c->fl_d) {
        size_t bytes = (PF_HEAD + (size_t)MMA_PARTS * PF_SLOTS) * sizeof(unsigned);
        CUDA_TRY(cudaMalloc((void **)&c->fl_d, bytes), "part flags");
        CUDA_TRY(cudaMemset(c->fl_d, 0, bytes), "part flags");
        cudaError_t e = cudaMallocHost((void **)&c->fl_h, sizeof(unsigned));
        if (e != cudaSuccess) return tern_error(TERN_E_NOMEM, "cuda: cannot allocate the part flags' error word");
        *c->fl_h = 0;
    }
    c->ops++;
    CUDA_TRY(cudaMemsetAsync(c->fl_d, 0, (PF_HEAD + (size_t)MMA_PARTS * c->fl_hi) * sizeof(unsigned), c->stream),
             "part flags");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_pflag_end(tern_cuda *c)
{
    if (c->pflag != 1 || !c->fl_d) return TERN_OK;
    c->ops++;
    CUDA_TRY(cudaMemcpyAsync(c->fl_h, c->fl_d, sizeof(unsigned), cudaMemcpyDeviceToHost, c->stream), "part flags");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_pflag_check(tern_cuda *c)
{
    if (!c->fl_h || !*c->fl_h) return TERN_OK;
    *c->fl_h = 0;
    return tern_error(TERN_E_INTERNAL, "cuda: a one-row product waited 2 s for its part of x (TERN_CUDA_PFLAG); "
                                       "this pass's outputs are wrong");
}

extern "C" int tern_cuda_set_pflag(tern_cuda *c, int mode)
{
    int was = c->pflag;
    c->pflag = mode;
    c->fl_prev_out = NULL;
    return was;
}

void pflag_free(tern_cuda *c)
{
    if (c->fl_d) cudaFree(c->fl_d);
    if (c->fl_h) cudaFreeHost(c->fl_h);
    c->fl_d = NULL;
    c->fl_h = NULL;
}

/* The one-row product chain (tern_cuda_chain): the products a decode step
 * at batch 1 runs between two attentions (o + residual, gate/up with the
 * norm folded, down + residual, the next layer's q/k/v with its norm
 * folded) in one persistent kernel, each output bit for bit as the one-row
 * kernel (mma_skinny.cu) writes it.
 *
 * Why: one kernel a product stops the weight stream at every product's
 * start (the wait, x, the first bytes in flight: about 3 us) and at its
 * end (the tail), 144 times a token at the Qwen3-8B shape. Here each
 * multiprocessor holds one block. Its producer warp streams the block's
 * share of every product's weights, product after product, into a ring of
 * shared-memory slots by the copy engine (cp.async.bulk: a chunk of 16
 * blocks of 32 elements of each of a tile's 8 weight rows a slot), waiting
 * for nothing but a free slot. Its consumer warps take the slots in the
 * same order. A product's x is the previous product's output (every
 * block's tiles): a block counts each finished product in global memory
 * and waits for every block's count before it reads the next product's x,
 * while its producer keeps filling the ring, so the stream runs on through
 * the dependency for as long as the ring has room.
 *
 * Arithmetic (mma.cuh): tile i of a product (8 output rows) belongs to
 * block (tile0 + i) mod G; a group of eight consumer warps takes it, warp
 * q part q of K's blocks, in order, two m16n8k16 steps a block (hi, then
 * lo), with x (times the folded norm's weight) split into hi / lo once per
 * product into shared memory and the norm's sum of squares formed in the
 * one-row kernel's order; the parts' partials meet in shared memory and
 * are folded in part order; then sk_one_kernel's epilogue (norm scale,
 * residual add, SwiGLU over interleaved gate / up rows). Which slot, block
 * or warp group holds a chunk changes no operand of any step, so every
 * output has the bits of tern_cuda_matmul / _matmul_norm / _gate_up_norm
 * for its row at any M.
 *
 * All G blocks must be resident at once (a block waits for the others'
 * counts): G is the multiprocessor count and a block takes most of one's
 * shared memory. A wait that lasts 2 s sets *err and gives up (the outputs
 * are then wrong, and the caller reports the error) rather than hang. */
#include "backend/cuda/async.cuh"
#include "backend/cuda/mma.cuh"

enum {
    CH_CHUNK = 16,                  /* 32-element blocks of a chunk */
    CH_ROWB = CH_CHUNK * 64 + 64,   /* bytes of a slot's row (padded: the rows of a quarter warp's reads in distinct banks) */
    CH_SLOT = 8 * CH_ROWB,
    CH_GROUP = 32 * MMA_PARTS,      /* threads of a consumer group */
    CH_FIN = TERN_CUDA_CHAIN_MAX,   /* the sync words: a count per product, then the finished blocks */
    CH_BAR_ALL = 1,                 /* named barriers: every consumer; group g: CH_BAR_GROUP + g */
    CH_BAR_GROUP = 2,
};

struct ch_prod {
    const float *x, *nw;      /* x [K] (written by an earlier product or kernel); nw: the folded norm's weight or NULL */
    const uint16_t *w0, *w1;  /* [N, K] bf16; SwiGLU: gate and up [F, K] */
    float *y;
    float eps;
    int K, N, mode, tiles, tile0;
};

struct ch_args {
    ch_prod p[TERN_CUDA_CHAIN_MAX];
    int n, ring, pmax, trig;
    int nowait;               /* timing only: no product waits for the previous one (wrong values) */
    int l2ahead;              /* chunks the producer may prefetch into the L2 past the next to fill */
    unsigned *sync, *err;
};

static __device__ __forceinline__ void ch_bar(int id, int n)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

static __device__ __forceinline__ unsigned ch_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* bytes of global memory at src into shared dst by the copy engine, counted on bar. */
static __device__ __forceinline__ void ch_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}

/* bytes of global memory at src into the L2 (no completion to wait for). */
static __device__ __forceinline__ void ch_prefetch_l2(const void *src, unsigned bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

/* Eight floats of x that other blocks of this kernel wrote (through L2). */
static __device__ __forceinline__ void ch_x8(const float *p, float v[8])
{
    float4 a = __ldcg(reinterpret_cast<const float4 *>(p)), b = __ldcg(reinterpret_cast<const float4 *>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}


/* For a wait that has not yet succeeded: 1 when it should give up, that is
 * when another wait already gave up (*err set: checked at its first miss)
 * or 2 s have passed since that first miss (*t0, 0 before it; then *err
 * is set). No wait of the chain can hang the device. */
static __device__ __forceinline__ int ch_stuck(unsigned long long *t0, unsigned *err)
{
    unsigned long long now = dev_clock_ns();
    if (!*t0) {
        *t0 = now;
        return *(volatile unsigned *)err != 0;
    }
    if (now - *t0 <= 2000000000ull) return 0;
    atomicExch(err, 1u);
    return 1;
}

/* Until the barrier's phase of this parity has completed (or ch_stuck). */
static __device__ __forceinline__ void ch_mb_wait(uint64_t *bar, unsigned parity, unsigned *err)
{
    uint32_t a = smem_u32(bar);
    unsigned long long t0 = 0;
    while (!mb_try(a, parity))
        if (ch_stuck(&t0, err)) return;
}

/* Until *c counts every block (or ch_stuck). */
static __device__ void ch_wait_count(const unsigned *c, unsigned target, unsigned *err)
{
    unsigned long long t0 = 0;
    while (ch_ld_acquire(c) < target)
        if (ch_stuck(&t0, err)) return;
}

/* The order of a tile's chunks, the producer's and the consumers' alike:
 * for j = 0, 1, ..., part q's chunk j for q = 0..7 (parts whose j-th
 * chunk exists), so that the eight warps' data arrive together. Moves
 * (j, q) to the chunk after it (from j = 0, q = -1); 0 past the tile's
 * last. */
static __device__ __forceinline__ int ch_chunk_next(int nb, int &j, int &q)
{
    const int maxlen = (nb + MMA_PARTS - 1) / MMA_PARTS;
    for (;;) {
        if (++q == MMA_PARTS) {
            q = 0;
            if (++j * CH_CHUNK >= maxlen) return 0;
        }
        if (j * CH_CHUNK < mma_part(nb, q + 1) - mma_part(nb, q)) return 1;
    }
}

/* Chunk j of part q of nb blocks: its blocks (returned), counted from the
 * part's start at *kr. */
static __device__ __forceinline__ int ch_span(int nb, int q, int j, int *kr)
{
    int len = mma_part(nb, q + 1) - mma_part(nb, q);
    *kr = j * CH_CHUNK;
    return len - *kr < CH_CHUNK ? len - *kr : CH_CHUNK;
}

/* fn(q, kr, nblk) for each chunk of a tile, in order: part q's blocks kr
 * .. kr + nblk - 1, counted from the part's start. */
template <class FN>
static __device__ __forceinline__ void ch_chunks(int nb, FN fn)
{
    int j = 0, q = -1, kr;
    while (ch_chunk_next(nb, j, q)) {
        int nblk = ch_span(nb, q, j, &kr);
        fn(q, kr, nblk);
    }
}

static __device__ __forceinline__ int ch_first_tile(const ch_prod &p, int b, int G) { return (b - p.tile0 % G + G) % G; }

/* A place in block b's sequence of chunks (its products in order, its
 * tiles of each in order, each tile's chunks in ch_chunk_next's order):
 * product pi, its tile i, chunk j of part q. The consumers' loops take the
 * same sequence. */
struct ch_cur {
    int pi, i, j, q;
};

/* Moves c to the block's next chunk (the first when c.pi < 0); 0 past
 * the last. */
static __device__ int ch_next(const ch_args &a, int b, int G, ch_cur &c)
{
    if (c.pi < 0) c = ch_cur{0, ch_first_tile(a.p[0], b, G), 0, -1};
    while (c.pi < a.n) {
        const ch_prod &p = a.p[c.pi];
        for (; c.i < p.tiles; c.i += G, c.j = 0, c.q = -1)
            if (ch_chunk_next(p.K / MMA_KB, c.j, c.q)) return 1;
        if (++c.pi < a.n) c = ch_cur{c.pi, ch_first_tile(a.p[c.pi], b, G), 0, -1};
    }
    return 0;
}

/* Weight row r (0..7) of tile i: rows past N read the last one (never
 * written); SwiGLU: gate rows 4i..4i+3, then the same up rows. */
static __device__ __forceinline__ const uint16_t *ch_row(const ch_prod &p, int i, int r)
{
    if (p.mode == TERN_CUDA_CH_SWIGLU) return (r < 4 ? p.w0 : p.w1) + (size_t)(4 * i + (r & 3)) * p.K;
    int n = 8 * i + r < p.N ? 8 * i + r : p.N - 1;
    return p.w0 + (size_t)n * p.K;
}

/* Row r (0..7) of c's chunk at the chunk's first element; *nblk its blocks. */
static __device__ __forceinline__ const uint16_t *ch_src(const ch_args &a, const ch_cur &c, int r, int *nblk)
{
    const ch_prod &p = a.p[c.pi];
    int nb = p.K / MMA_KB, kr;
    *nblk = ch_span(nb, c.q, c.j, &kr);
    return ch_row(p, c.i, r) + (size_t)(mma_part(nb, c.q) + kr) * MMA_KB;
}

template <int NG>
__global__ void __launch_bounds__(CH_GROUP *NG + 32, 1) chain_kernel(const __grid_constant__ ch_args a)
{
    extern __shared__ __align__(128) unsigned char ch_buf[];
    const int R = a.ring, G = gridDim.x, b = blockIdx.x;
    unsigned char *ring = ch_buf;
    uint4 *sx = reinterpret_cast<uint4 *>(ring + (size_t)R * CH_SLOT); /* [part][block][lane t][hi, lo] */
    uint64_t *full = reinterpret_cast<uint64_t *>(sx + (size_t)a.pmax * MMA_PARTS * 8);
    uint64_t *empty = full + R;
    float *part = reinterpret_cast<float *>(empty + R); /* [group][2][part][8] */
    float *ssq = part + NG * 2 * MMA_PARTS * 8;          /* [part] */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    if (a.trig) {
#if __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    }
    if (tid == 0) {
        for (int s = 0; s < R; s++) {
            mb_init(&full[s], 1);
            mb_init(&empty[s], 1);
        }
        mb_init_fence();
    }
    __syncthreads();
    if (warp == NG * MMA_PARTS) {
        /* The producer: every chunk of every tile of this block, in order
         * (f, the nf-th), each into the next slot once the consumers have
         * freed it. Weights are never written by a kernel, so this runs from
         * the start, before the previous kernel has finished. With a.l2ahead
         * = D > 0, while the next slot is not free it prefetches the chunks
         * that come next into the L2 (pf, the np-th), up to D chunks past
         * the next to fill, so that the memory keeps streaming while the
         * consumers wait for a product's input or the ring is full. */
        int slot = 0, nblk;
        unsigned phase = 0;
        long nf = 0, np = 0;
        ch_cur f = {-1, 0, 0, 0}, pf = {-1, 0, 0, 0};
        int fok = ch_next(a, b, G, f), pok = a.l2ahead > 0 && ch_next(a, b, G, pf);
        unsigned long long t0 = 0;
        while (fok) {
            /* with a prefetch to issue, only a look at the slot (try_wait
             * may suspend the thread a while) */
            const int canpf = pok && np < nf + a.l2ahead;
            uint32_t es = smem_u32(&empty[slot]);
            int freed = lane == 0 ? (int)(canpf ? mb_test(es, phase ^ 1) : mb_try(es, phase ^ 1)) : 0;
            if (__shfl_sync(0xffffffffu, freed, 0)) {
                const uint16_t *src = ch_src(a, f, lane & 7, &nblk);
                if (lane == 0) mb_expect(&full[slot], 8u * nblk * 64);
                __syncwarp();
                if (lane < 8) ch_bulk(ring + (size_t)slot * CH_SLOT + lane * CH_ROWB, src, nblk * 64u, &full[slot]);
                if (++slot == R) slot = 0, phase ^= 1;
                nf++;
                fok = ch_next(a, b, G, f);
                t0 = 0;
            } else if (canpf) {
                if (np >= nf) {
                    const uint16_t *src = ch_src(a, pf, lane & 7, &nblk);
                    if (lane < 8) ch_prefetch_l2(src, nblk * 64u);
                }
                np++;
                pok = ch_next(a, b, G, pf);
            } else if (ch_stuck(&t0, a.err)) {
                break;
            }
        }
        return;
    }
    /* A consumer: group grp, warp q (the part of K), lane (g, t). */
    const int grp = warp / MMA_PARTS, q = warp % MMA_PARTS, g = lane >> 2, t = lane & 3;
    const int NC = CH_GROUP * NG;
    int slot = 0, mine = 0; /* mine: the block's tiles so far (group mine % NG takes a tile) */
    unsigned phase = 0;
    for (int pi = 0; pi < a.n; pi++) {
        const ch_prod &p = a.p[pi];
        const int nb = p.K / MMA_KB, first = ch_first_tile(p, b, G);
        const bool has = first < p.tiles;
        /* The product's x: the previous product's output (every block's
         * count), or the previous kernel's (its completion). */
        ch_bar(CH_BAR_ALL, NC);
        if (tid == 0 && pi > 0) {
            __threadfence();
            atomicAdd(&a.sync[pi - 1], 1u);
            if (has && !a.nowait) ch_wait_count(&a.sync[pi - 1], (unsigned)G, a.err);
            __threadfence();
        }
        if (pi == 0) wait_prior_grid();
        ch_bar(CH_BAR_ALL, NC);
        if (has && grp == 0) {
            /* Part q of x (times the norm weight) into hi / lo, lane (g, t)
             * blocks g, g + 8, ... of the part; the norm's sum of squares by
             * lane t of row 0 over the part's blocks in order (the one-row
             * kernel's order). */
            const int kb0 = mma_part(nb, q), len = mma_part(nb, q + 1) - kb0;
            for (int kr = g; kr < len; kr += 8) {
                int k = (kb0 + kr) * MMA_KB + 8 * t;
                float v[8];
                ch_x8(p.x + k, v);
                uint32_t h[4], l[4];
                if (p.nw) mma_prep8<true, true>(v, p.nw, k, h, l);
                else mma_prep8<true, false>(v, NULL, k, h, l);
                uint4 *d = sx + (((size_t)q * a.pmax + kr) * 4 + t) * 2;
                d[0] = make_uint4(h[0], h[1], h[2], h[3]);
                d[1] = make_uint4(l[0], l[1], l[2], l[3]);
            }
            float ss = 0.0f;
            if (p.nw && g == 0) {
                for (int kr = 0; kr < len; kr++) {
                    float v[8];
                    ch_x8(p.x + (kb0 + kr) * MMA_KB + 8 * t, v);
#pragma unroll
                    for (int e = 0; e < 8; e++) ss = fmaf(v[e], v[e], ss);
                }
            }
            float sq = mma_sum4(ss);
            if (lane == 0) ssq[q] = sq;
        }
        ch_bar(CH_BAR_ALL, NC);
        for (int i = first; i < p.tiles; i += G, mine++) {
            const bool ours = mine % NG == grp;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            ch_chunks(nb, [&](int cq, int kr, int nblk) {
                if (ours && cq == q) {
                    ch_mb_wait(&full[slot], phase, a.err);
                    const unsigned char *w = ring + (size_t)slot * CH_SLOT + g * CH_ROWB + 16 * t;
                    const uint4 *xs = sx + (((size_t)q * a.pmax + kr) * 4 + t) * 2;
#pragma unroll 4
                    for (int u = 0; u < nblk; u++) {
                        uint4 bv = *reinterpret_cast<const uint4 *>(w + u * 64);
                        uint32_t ah[2][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}},
                                 al[2][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
                        if (g == 0) {
                            uint4 hv = xs[u * 8], lv = xs[u * 8 + 1];
                            ah[0][0] = hv.x, ah[0][1] = hv.y, ah[0][2] = hv.z, ah[0][3] = hv.w;
                            al[0][0] = lv.x, al[0][1] = lv.y, al[0][2] = lv.z, al[0][3] = lv.w;
                        }
                        const uint32_t bw[4] = {bv.x, bv.y, bv.z, bv.w};
                        mma_block<true>(acc, ah, al, bw);
                    }
                    __syncwarp();
                    if (lane == 0) mb_arrive(&empty[slot]);
                }
                if (++slot == R) slot = 0, phase ^= 1;
            });
            if (!ours) continue;
            float *pp = part + (grp * 2 + ((mine / NG) & 1)) * MMA_PARTS * 8;
            if (g == 0) {
                pp[q * 8 + 2 * t] = acc[0];
                pp[q * 8 + 2 * t + 1] = acc[1];
            }
            ch_bar(CH_BAR_GROUP + grp, CH_GROUP);
            if (q == 0) {
                /* sk_one_kernel's epilogue for the tile's columns */
                float inv = p.nw ? rms_inv(mma_fold(ssq, 1), p.K, p.eps) : 1.0f;
                if (p.mode == TERN_CUDA_CH_SWIGLU) {
                    if (lane < 4) {
                        float vg = mma_fold(pp + lane, 8), vu = mma_fold(pp + lane + 4, 8);
                        if (p.nw) vg = __fmul_rn(vg, inv), vu = __fmul_rn(vu, inv);
                        p.y[4 * i + lane] = silu_mul(vg, vu);
                    }
                } else if (lane < 8 && 8 * i + lane < p.N) {
                    int n = 8 * i + lane;
                    float v = mma_fold(pp + lane, 8);
                    if (p.nw) v = __fmul_rn(v, inv);
                    p.y[n] = p.mode == TERN_CUDA_CH_ADD ? __fadd_rn(__ldcg(p.y + n), v) : v;
                }
            }
        }
    }
    /* The last block to finish resets the counts for the next launch (every
     * block has passed its waits by then). */
    ch_bar(CH_BAR_ALL, NC);
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(&a.sync[CH_FIN], 1u) == (unsigned)G - 1) {
            for (int k = 0; k < CH_FIN; k++) a.sync[k] = 0;
            a.sync[CH_FIN] = 0;
            __threadfence();
        }
    }
}

/* Shared memory of a launch with R slots and parts of up to pmax blocks. */
static size_t ch_smem(int ng, int R, int pmax)
{
    return (size_t)R * CH_SLOT + (size_t)pmax * MMA_PARTS * 8 * sizeof(uint4) + 2 * (size_t)R * sizeof(uint64_t) +
           (size_t)ng * 2 * MMA_PARTS * 8 * sizeof(float) + MMA_PARTS * sizeof(float);
}

static int ch_pmax(int K) { return (K / MMA_KB + MMA_PARTS - 1) / MMA_PARTS; }

extern "C" size_t tern_cuda_chain_sync_bytes(void) { return 128; }

extern "C" int tern_cuda_chain_takes(const tern_cuda *c, int K)
{
    return c->chain_ring >= 2 && K >= MMA_KB && K % MMA_KB == 0 && ch_smem(c->chain_groups, 2, ch_pmax(K)) <= 200 * 1024;
}

template <int NG>
static tern_status ch_launch(tern_cuda *c, const ch_args &a, size_t smem)
{
    static int ready;
    auto kern = chain_kernel<NG>;
    tern_status st = smem_limit_once((const void *)kern, 227 * 1024, &ready, "chain smem");
    if (st) return st;
    return launch(c, "chain", kern, dim3(c->sms), dim3(CH_GROUP * NG + 32), smem, a);
}

extern "C" tern_status tern_cuda_chain(tern_cuda *c, const tern_cuda_chain_prod *ps, int n, unsigned *d_sync,
                                       unsigned *d_err)
{
    if (n < 1 || n > TERN_CUDA_CHAIN_MAX || !d_sync || !d_err)
        return tern_error(TERN_E_INVALID, "cuda chain: %d products (1..%d), sync %p, err %p", n,
                          (int)TERN_CUDA_CHAIN_MAX, (void *)d_sync, (void *)d_err);
    ch_args a = {};
    int pmax = 1;
    long tiles = 0;
    for (int i = 0; i < n; i++) {
        const tern_cuda_chain_prod *s = &ps[i];
        bool sw = s->mode == TERN_CUDA_CH_SWIGLU;
        if (!tern_cuda_chain_takes(c, s->K) || s->N <= 0 || !s->d_x || !s->d_w || !s->d_y ||
            (s->mode != TERN_CUDA_CH_STORE && s->mode != TERN_CUDA_CH_ADD && !sw) || (sw && (!s->d_wu || s->N % 4)))
            return tern_error(TERN_E_INVALID, "cuda chain: product %d (K %d, N %d, mode %d) is not one it takes", i,
                              s->K, s->N, s->mode);
        ch_prod &p = a.p[i];
        p.x = s->d_x, p.nw = s->d_nw, p.eps = s->eps;
        p.w0 = (const uint16_t *)s->d_w, p.w1 = (const uint16_t *)s->d_wu;
        p.y = s->d_y, p.K = s->K, p.N = s->N, p.mode = s->mode;
        p.tiles = sw ? s->N / 4 : (s->N + 7) / 8;
        /* the tiles of the products dealt on from block to block, so that
         * every block streams about the same bytes over the chain */
        p.tile0 = (int)(tiles % c->sms);
        tiles += p.tiles;
        if (ch_pmax(s->K) > pmax) pmax = ch_pmax(s->K);
    }
    int ng = c->chain_groups;
    size_t fixed = ch_smem(ng, 0, pmax);
    int R = c->chain_ring;
    while (R > 2 && fixed + (size_t)R * (CH_SLOT + 16) > (size_t)c->chain_smem) R--;
    a.n = n, a.ring = R, a.pmax = pmax, a.trig = c->chain_trig, a.nowait = c->chain_nowait;
    a.l2ahead = c->chain_l2ahead;
    a.sync = d_sync, a.err = d_err;
    size_t smem = ch_smem(ng, R, pmax);
    return ng == 2 ? ch_launch<2>(c, a, smem) : ch_launch<1>(c, a, smem);
}

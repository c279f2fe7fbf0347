/* The one-row product chain (tern_cuda_chain): the products a decode step
 * at batch 1 runs between two attentions (o + residual, gate/up with the
 * norm folded, down + residual, the next layer's q/k/v with its norm
 * folded) in one persistent kernel, each output bit for bit as the one-row
 * kernel (mma_skinny.cu) writes it.
 *
 * Why: one kernel a product stops the weight stream at every product's
 * start (the wait, x, the first bytes in flight: about 3 us) and at its
 * end (the tail), 144 times a token at the Qwen3-8B shape. Here each
 * multiprocessor holds one block of eight warps a group (one or two
 * groups). Warp q of a group owns part q of K of every tile the group
 * takes, and streams its own chunks (8 weight rows by 8 blocks of 32
 * elements) product after product into a private ring of shared-memory
 * slots with cp.async, RW - 1 chunks ahead of the one it multiplies. The
 * weights depend on nothing, so the stream runs on through the wait for a
 * product's input for as long as those chunks last. A product's x is the
 * previous product's output (every block's tiles): a block counts each
 * finished product in global memory and waits for every block's count
 * before it reads the next product's x.
 *
 * (A first form streamed every tile through one producer warp with the
 * copy engine, cp.async.bulk of 1 KiB a row, and mbarriers: on an H100 a
 * layer took 273 us against 137 us as four kernels, the same with the
 * waits skipped, so the one warp's 8 small bulk copies a chunk bound the
 * stream; and a consumer more than one phase ahead of a slot could pass
 * its parity wait early. Private rings have neither.)
 *
 * Arithmetic (mma.cuh): tile i of a product (8 output rows) belongs to
 * block (tile0 + i) mod G; a group of eight warps takes it, warp q part q
 * of K's blocks, in order, two m16n8k16 steps a block (hi, then lo), with
 * x (times the folded norm's weight) split into hi / lo once per product
 * into shared memory and the norm's sum of squares formed in the one-row
 * kernel's order; the parts' partials meet in shared memory and are
 * folded in part order; then sk_one_kernel's epilogue (norm scale,
 * residual add, SwiGLU over interleaved gate / up rows). Which slot, chunk
 * or group holds a block changes no operand of any step, so every output
 * has the bits of tern_cuda_matmul / _matmul_norm / _gate_up_norm for its
 * row at any M.
 *
 * All G blocks must be resident at once (a block waits for the others'
 * counts): G is the multiprocessor count and a block takes most of one's
 * shared memory. A wait that lasts 2 s sets *err and gives up (the outputs
 * are then wrong, and the caller reports the error) rather than hang. */
#include "backend/cuda/mma.cuh"

enum {
    CH_CHUNK = 8,                   /* 32-element blocks of a chunk */
    CH_ROWB = CH_CHUNK * 64 + 64,   /* bytes of a slot's row (padded: the rows of a quarter warp's reads in distinct banks) */
    CH_SLOT = 8 * CH_ROWB,
    CH_GROUP = 32 * MMA_PARTS,      /* threads of a group */
    CH_FIN = TERN_CUDA_CHAIN_MAX,   /* the sync words: a count per product, then the finished blocks */
    CH_BAR_ALL = 1,                 /* named barriers: every warp; group g: CH_BAR_GROUP + g */
    CH_BAR_GROUP = 2,
    CH_RW_MAX = 6,                  /* most slots a warp */
};

struct ch_prod {
    const float *x, *nw;      /* x [K] (written by an earlier product or kernel); nw: the folded norm's weight or NULL */
    const uint16_t *w0, *w1;  /* [N, K] bf16; SwiGLU: gate and up [F, K] */
    float *y;
    float eps;
    int K, N, mode, tiles, tile0;
    int tiled;                /* w0 (and w1) in the tiled layout (tiled.cu) */
};

struct ch_args {
    ch_prod p[TERN_CUDA_CHAIN_MAX];
    int n, pmax, trig;
    int timing;               /* timing only (WRONG values): 1, no product waits for the previous one; 2, no arithmetic */
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

/* Until *c counts every block (or ch_stuck). */
static __device__ void ch_wait_count(const unsigned *c, unsigned target, unsigned *err)
{
    unsigned long long t0 = 0;
    while (ch_ld_acquire(c) < target)
        if (ch_stuck(&t0, err)) return;
}

static __device__ __forceinline__ int ch_first_tile(const ch_prod &p, int b, int G) { return (b - p.tile0 % G + G) % G; }

/* A place in the sequence of one warp's chunks: product pi, its tile i
 * (the block's mine-th tile over the chain), chunk j of the warp's part. */
struct ch_wc {
    int pi, i, mine, j;
};

/* Moves c to the first tile at or after it that group grp takes and whose
 * part q is not empty (chunk 0); 0 past the chain's last. */
template <int NG>
static __device__ int ch_seek(const ch_args &a, int b, int G, int grp, int q, ch_wc &c)
{
    while (c.pi < a.n) {
        const ch_prod &p = a.p[c.pi];
        if (c.i >= p.tiles) {
            if (++c.pi < a.n) c.i = ch_first_tile(a.p[c.pi], b, G);
            continue;
        }
        const int nb = p.K / MMA_KB;
        if (c.mine % NG == grp && mma_part(nb, q + 1) > mma_part(nb, q)) {
            c.j = 0;
            return 1;
        }
        c.i += G, c.mine++;
    }
    return 0;
}

/* Moves c to the warp's next chunk; 0 past its last. */
template <int NG>
static __device__ int ch_step(const ch_args &a, int b, int G, int grp, int q, ch_wc &c)
{
    const int nb = a.p[c.pi].K / MMA_KB;
    if ((c.j + 1) * CH_CHUNK < mma_part(nb, q + 1) - mma_part(nb, q)) {
        c.j++;
        return 1;
    }
    c.i += G, c.mine++;
    return ch_seek<NG>(a, b, G, grp, q, c);
}

/* Weight row r (0..7) of tile i of a row-major product: rows past N read
 * the last one (never written); SwiGLU: gate rows 4i..4i+3, then the same
 * up rows. */
static __device__ __forceinline__ const uint16_t *ch_row(const ch_prod &p, int i, int r)
{
    if (p.mode == TERN_CUDA_CH_SWIGLU) return (r < 4 ? p.w0 : p.w1) + (size_t)(4 * i + (r & 3)) * p.K;
    int n = 8 * i + r < p.N ? 8 * i + r : p.N - 1;
    return p.w0 + (size_t)n * p.K;
}

/* The warp's chunk c of part q into slot dst by cp.async: row r of the
 * slot (CH_ROWB bytes apart) holds the chunk's blocks of weight row r, 64
 * bytes a block. Row-major: a load a row, lane `lane` its 16-byte piece.
 * Tiled (N a multiple of 8, so no row past N): a load a block, the block's
 * 8 rows x 64 bytes contiguous (SwiGLU: gate rows 4i..4i+3 and the same up
 * rows, 256 bytes each), lane l row l / 4, piece l % 4: the same bytes in
 * the same places, each load 512 contiguous bytes of the weights. */
static __device__ __forceinline__ void ch_issue(const ch_args &a, const ch_wc &c, int q, int lane, unsigned char *dst)
{
    const ch_prod &p = a.p[c.pi];
    const int nb = p.K / MMA_KB, kb = mma_part(nb, q) + c.j * CH_CHUNK, left = mma_part(nb, q + 1) - kb;
    const int nblk = left < CH_CHUNK ? left : CH_CHUNK;
    if (p.tiled) {
        const uint16_t *src;
        if (p.mode == TERN_CUDA_CH_SWIGLU)
            src = (lane < 16 ? p.w0 : p.w1) + (size_t)(c.i >> 1) * 8 * p.K + (c.i & 1) * 4 * MMA_KB + 8 * (lane & 15);
        else
            src = p.w0 + (size_t)c.i * 8 * p.K + 8 * lane;
        unsigned char *d = dst + (lane >> 2) * CH_ROWB + 16 * (lane & 3);
#pragma unroll
        for (int u = 0; u < CH_CHUNK; u++)
            if (u < nblk) cp16(d + 64 * u, src + (size_t)(kb + u) * 8 * MMA_KB, true);
        return;
    }
    if (lane >= 4 * nblk) return;
#pragma unroll
    for (int r = 0; r < 8; r++) cp16(dst + r * CH_ROWB + 16 * lane, ch_row(p, c.i, r) + (size_t)kb * MMA_KB + 8 * lane, true);
}

template <int NG, int RW>
__global__ void __launch_bounds__(CH_GROUP *NG, 1) chain_kernel(const __grid_constant__ ch_args a)
{
    extern __shared__ __align__(128) unsigned char ch_buf[];
    const int G = gridDim.x, b = blockIdx.x;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int grp = warp / MMA_PARTS, q = warp % MMA_PARTS, g = lane >> 2, t = lane & 3;
    unsigned char *ring = ch_buf + (size_t)warp * RW * CH_SLOT; /* this warp's slots */
    uint4 *sx = reinterpret_cast<uint4 *>(ch_buf + (size_t)NG * MMA_PARTS * RW * CH_SLOT); /* [part][block][t][hi, lo] */
    float *part = reinterpret_cast<float *>(sx + (size_t)a.pmax * MMA_PARTS * 8); /* [group][2][part][8] */
    float *ssq = part + NG * 2 * MMA_PARTS * 8;                                   /* [part] */
    if (a.trig) {
#if __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    }
    /* The stream: this warp's chunks in order, RW - 1 ahead of the one it
     * multiplies (one cp.async group a chunk, empty past the last).
     * Weights are never written by a kernel, so it starts before the
     * previous kernel has finished. */
    ch_wc ic = {0, ch_first_tile(a.p[0], b, G), 0, 0};
    int iok = ch_seek<NG>(a, b, G, grp, q, ic), islot = 0;
#pragma unroll
    for (int s = 0; s < RW - 1; s++) {
        if (iok) {
            ch_issue(a, ic, q, lane, ring + (size_t)islot * CH_SLOT);
            iok = ch_step<NG>(a, b, G, grp, q, ic);
        }
        cp_commit();
        islot++;
    }
    int slot = 0, mine = 0; /* mine: the block's tiles so far (group mine % NG takes a tile) */
    for (int pi = 0; pi < a.n; pi++) {
        const ch_prod &p = a.p[pi];
        const int nb = p.K / MMA_KB, first = ch_first_tile(p, b, G);
        const int kb0 = mma_part(nb, q), len = mma_part(nb, q + 1) - kb0;
        const bool has = first < p.tiles;
        /* The product's x: the previous product's output (every block's
         * count), or the previous kernel's (its completion). */
        ch_bar(CH_BAR_ALL, CH_GROUP * NG);
        if (tid == 0 && pi > 0) {
            __threadfence();
            atomicAdd(&a.sync[pi - 1], 1u);
            if (has && !(a.timing & 1)) ch_wait_count(&a.sync[pi - 1], (unsigned)G, a.err);
            __threadfence();
        }
        if (pi == 0) wait_prior_grid();
        ch_bar(CH_BAR_ALL, CH_GROUP * NG);
        if (has && grp == 0) {
            /* Part q of x (times the norm weight) into hi / lo, lane (g, t)
             * blocks g, g + 8, ... of the part; the norm's sum of squares by
             * lane t of row 0 over the part's blocks in order (the one-row
             * kernel's order). */
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
        ch_bar(CH_BAR_ALL, CH_GROUP * NG);
        for (int i = first; i < p.tiles; i += G, mine++) {
            if (mine % NG != grp) continue;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int kr = 0; kr < len; kr += CH_CHUNK) {
                /* the chunk RW - 1 ahead into the slot the last one freed */
                if (iok) {
                    ch_issue(a, ic, q, lane, ring + (size_t)islot * CH_SLOT);
                    iok = ch_step<NG>(a, b, G, grp, q, ic);
                }
                cp_commit();
                if (++islot == RW) islot = 0;
                cp_wait<RW - 1>();
                __syncwarp();
                const int nblk = len - kr < CH_CHUNK ? len - kr : CH_CHUNK;
                if (!(a.timing & 2)) {
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
                }
                /* every lane done with the slot before a later chunk lands in it */
                __syncwarp();
                if (++slot == RW) slot = 0;
            }
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
    cp_wait<0>();
    /* The last block to finish resets the counts for the next launch (every
     * block has passed its waits by then). */
    ch_bar(CH_BAR_ALL, CH_GROUP * NG);
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(&a.sync[CH_FIN], 1u) == (unsigned)G - 1) {
            for (int k = 0; k < CH_FIN; k++) a.sync[k] = 0;
            a.sync[CH_FIN] = 0;
            __threadfence();
        }
    }
}

/* Shared memory of a launch with RW slots a warp and parts of up to pmax
 * blocks. */
static size_t ch_smem(int ng, int rw, int pmax)
{
    return (size_t)ng * MMA_PARTS * rw * CH_SLOT + (size_t)pmax * MMA_PARTS * 8 * sizeof(uint4) +
           (size_t)ng * 2 * MMA_PARTS * 8 * sizeof(float) + MMA_PARTS * sizeof(float);
}

static int ch_pmax(int K) { return (K / MMA_KB + MMA_PARTS - 1) / MMA_PARTS; }

extern "C" size_t tern_cuda_chain_sync_bytes(void) { return 128; }

extern "C" int tern_cuda_chain_takes(const tern_cuda *c, int K)
{
    /* the products it stands in for run on the tensor cores (its bits are theirs) */
    return c->chain_ring >= 2 && tern_cuda_mma_takes(c, TERN_DT_BF16, K) &&
           ch_smem(c->chain_groups, 2, ch_pmax(K)) <= 227 * 1024;
}

template <int NG, int RW>
static tern_status ch_launch(tern_cuda *c, const ch_args &a, size_t smem)
{
    static int ready;
    auto kern = chain_kernel<NG, RW>;
    tern_status st = smem_limit_once((const void *)kern, 227 * 1024, &ready, "chain smem");
    if (st) return st;
    return launch(c, "chain", kern, dim3(c->sms), dim3(CH_GROUP * NG), smem, a);
}

template <int NG>
static tern_status ch_launch_rw(tern_cuda *c, const ch_args &a, int rw, size_t smem)
{
    switch (rw) {
    case 2: return ch_launch<NG, 2>(c, a, smem);
    case 3: return ch_launch<NG, 3>(c, a, smem);
    case 4: return ch_launch<NG, 4>(c, a, smem);
    case 5: return ch_launch<NG, 5>(c, a, smem);
    default: return ch_launch<NG, 6>(c, a, smem);
    }
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
        bool tiled = false, tu = false;
        tern_status st = tiled_of(c, s->d_w, s->K, &tiled);
        if (!st && sw) st = tiled_of(c, s->d_wu, s->K, &tu);
        if (st) return st;
        if (sw && tu != tiled)
            return tern_error(TERN_E_INVALID, "cuda chain: product %d, a gate/up pair with one matrix tiled and one not",
                              i);
        /* a tiled product reads whole tiles: no row past N to stand in for */
        if (tiled && s->N % 8)
            return tern_error(TERN_E_INVALID, "cuda chain: product %d reads a tiled matrix of %d rows", i, s->N);
        ch_prod &p = a.p[i];
        p.tiled = tiled;
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
    const int ng = c->chain_groups;
    /* slots a warp: the most of chain_ring (and CH_RW_MAX) that fit in
     * chain_smem, at least 2 */
    int rw = c->chain_ring < CH_RW_MAX ? c->chain_ring : CH_RW_MAX;
    while (rw > 2 && ch_smem(ng, rw, pmax) > (size_t)c->chain_smem) rw--;
    a.n = n, a.pmax = pmax, a.trig = c->chain_trig, a.timing = c->chain_timing;
    a.sync = d_sync, a.err = d_err;
    size_t smem = ch_smem(ng, rw, pmax);
    return ng == 2 ? ch_launch_rw<2>(c, a, rw, smem) : ch_launch_rw<1>(c, a, rw, smem);
}

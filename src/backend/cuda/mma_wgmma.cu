/* The GEMM for prefill-sized products (more than 64 rows) on Hopper's
 * warpgroup MMA (wgmma) fed by the tensor copy engine (TMA), in the
 * per-element order of mma.cuh (the default; TERN_CUDA_WGMMA=0: mma.sync).
 *
 * Why it keeps the order: one wgmma m64nNk16 step computes, per output,
 * the same fused dot-add of 16 products and the accumulator as one
 * mma.sync m16n8k16 step, whatever k slots hold the 16 elements, only
 * which 16 form the step matters. Here the weights are the MMA's A operand
 * (64 weight rows a warpgroup), from registers: each thread reads its 16
 * bytes of a block, elements 8t .. 8t+7, as the small-batch kernel does,
 * so a step holds mma.cuh's elements in the same slots. x is the B operand
 * (128 rows a tile), from shared memory, and the prep stores each block of
 * hi / lo so that a step's 32 bytes hold those elements in those slots
 * (the prep's PERM layout). Each step runs as wgmma(hi) then wgmma(lo); a
 * part's partial starts at +0 and the parts are summed in order, as in the
 * other two kernels; ops_test checks every row of a GEMM against the same
 * row alone (the small-batch kernel) bit for bit.
 *
 * A block owns 128 x rows x 128 weight rows of y (64 weight rows and the
 * same 64 of the up with a SwiGLU pair): two consumer warpgroups keep the
 * running part's partial and the sum of the finished parts in registers;
 * one thread of a third warpgroup issues the copies. Stages of 64 k elements (two blocks: one
 * 128-byte row per operand row, stored in the 128-byte swizzle the copy
 * engine writes) rotate through the slots of tw_cfg, each with a "full"
 * barrier (the copies' bytes landed) and an "empty" one (the MMAs that
 * read it are done). */
#include "backend/cuda/async.cuh"
#include "backend/cuda/mma.cuh"

/* A block: TW_CONSUMERS MMA warpgroups and one copy warpgroup (a whole
 * one, so that the register split below applies: the copy warpgroup gives
 * back all but TW_REGS_COPY registers a thread, the MMA warpgroups take
 * TW_REGS_MMA, room for two sets of weight registers). */
enum { TW_BM = 128, TW_BN = 128, TW_BK = 2 * MMA_KB, TW_CONSUMERS = 2, TW_THREADS = 128 * (TW_CONSUMERS + 1),
       TW_REGS_COPY = 40, TW_REGS_MMA = 232,
       TW_TILE = 128 * TW_BK * 2 /* bytes of one 128-row operand's stage */ };

template <bool LO> struct tw_cfg {
    enum { NA = LO ? 2 : 1, STAGE = (NA + 1) * TW_TILE, STAGES = LO ? 4 : 6,
           SMEM = STAGES * STAGE + 1024 /* alignment of the swizzle atoms */ };
};

/* ---- PTX: MMAs ------------------------------------------------------------ */

/* Descriptor of a K-major operand in the 128-byte swizzle: 8-row groups
 * 1024 bytes apart (stride), the leading offset unused (1); the k16 step
 * at byte 32 s of the rows starts 32 s bytes in. */
__device__ __forceinline__ uint64_t wg_desc(const void *smem)
{
    uint32_t a = smem_u32(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
/* Keeps a register set of MMA operands live (unmoved, unreused) up to this
 * point: after the wait for the MMAs that read it. */
__device__ __forceinline__ void wg_keep(const uint4 (&w)[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" ::"r"(w[i].x), "r"(w[i].y), "r"(w[i].z), "r"(w[i].w) : "memory");
}

/* Keeps the compiler from moving reads or writes of the accumulators
 * across the asynchronous MMAs. */
__device__ __forceinline__ void wg_hold(float d[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* d (64 x 128, this warpgroup's fragment) += A (64 x 16, registers: a0 a1
 * a2 a3 as mma.sync's m16n8k16 A fragment of the warp's 16 rows) . B (128
 * x 16, shared memory)^T. */
__device__ __forceinline__ void wgmma128r(float d[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint64_t db)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db));
#else
    __trap(); /* built without sm_90a: tern_cuda_wgmma_gemm is not called */
#endif
}

/* Row r's 16-byte chunk j (0..7) of a 128-byte-swizzled tile at base
 * (1024-byte aligned): stored at chunk j ^ (r % 8). */
__device__ __forceinline__ uint4 tw_chunk(const uint8_t *base, int r, int j)
{
    return *reinterpret_cast<const uint4 *>(base + r * 128 + ((j ^ (r & 7)) << 4));
}

/* The same chunk of a weight stage copied from a tiled matrix (tiled.cu,
 * tw_map_tiled: unswizzled, each tile of 8 rows its 2 blocks of 8 x 32
 * elements in a row): row r's block j / 4 at byte 1024 (r / 8) + 512 (j /
 * 4) + 64 (r % 8), its piece j % 4 16 bytes a step on; a warp's reads of
 * one block of its 8 rows are 512 contiguous bytes, free of bank
 * conflicts. */
__device__ __forceinline__ uint4 tw_tchunk(const uint8_t *base, int r, int j)
{
    return *reinterpret_cast<const uint4 *>(base + (r >> 3) * 1024 + (j >> 2) * 512 + (r & 7) * 64 + ((j & 3) << 4));
}

/* ---- the kernel ----------------------------------------------------------- */

/* A consumer warp is done with a slot: one arrival on its "empty" barrier. */
__device__ __forceinline__ void tw_release(uint64_t *bar, int lane)
{
    __syncwarp();
    if (lane == 0) mb_arrive(bar);
}

/* mh / ml: hi / lo [M, K] and mw: w [N, K] (mu: wu with GU), boxes of 64
 * k x 128 rows of x and 128 rows of w (64 with GU) in the 128-byte
 * swizzle (ml unread without LO, mu without GU). GU: a SwiGLU gate / up pair, a
 * tile's 128 weight rows 64 of the gate then the same 64 of the up, so
 * that each thread's accumulators hold both for its 64-column outputs. */
template <bool LO, bool NORM, bool GU, bool TILED>
__global__ void __launch_bounds__(TW_THREADS, 1)
    tw_kernel(const __grid_constant__ CUtensorMap mh, const __grid_constant__ CUtensorMap ml,
              const __grid_constant__ CUtensorMap mw, const __grid_constant__ CUtensorMap mu, gm_args a)
{
    constexpr int BNO = GU ? TW_BN / 2 : TW_BN; /* output columns of a tile */
    using C = tw_cfg<LO>;
    extern __shared__ uint4 tw_sm4[];
    __shared__ uint64_t full[C::STAGES], empty[C::STAGES];
    uint8_t *sm = reinterpret_cast<uint8_t *>(tw_sm4);
    sm += (1024u - (smem_u32(sm) & 1023u)) & 1023u;
    int tid = threadIdx.x, wg = tid >> 7;
    int m0 = blockIdx.x * TW_BM, n0 = blockIdx.y * BNO, nb = a.K / MMA_KB, nst = (nb + 1) / 2;
    if (tid == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mb_init(&full[s], 1);
            mb_init(&empty[s], 4 * TW_CONSUMERS); /* one arrival per consumer warp */
        }
        mb_init_fence();
    }
    __syncthreads();
    wait_prior_grid();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (wg == TW_CONSUMERS) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"((int)TW_REGS_COPY));
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"((int)TW_REGS_MMA));
#endif
    if (wg == TW_CONSUMERS) {
        /* The copy warp: one thread issues a stage's boxes once its slot is
         * empty. */
        if (tid == 128 * TW_CONSUMERS) {
            for (int ks = 0; ks < nst; ks++) {
                int s = ks % C::STAGES;
                mb_wait(&empty[s], ((ks / C::STAGES) & 1) ^ 1);
                uint8_t *st = sm + (size_t)s * C::STAGE;
                mb_expect(&full[s], C::STAGE);
                tma_load(st, &mh, ks * TW_BK, m0, &full[s]);
                if (LO) tma_load(st + TW_TILE, &ml, ks * TW_BK, m0, &full[s]);
                uint8_t *bs = st + C::NA * TW_TILE;
                if (TILED) {
                    tma_load3(bs, &mw, 0, 2 * ks, n0 / 8, &full[s]);
                    if (GU) tma_load3(bs + BNO * 128, &mu, 0, 2 * ks, n0 / 8, &full[s]);
                } else {
                    tma_load(bs, &mw, ks * TW_BK, n0, &full[s]);
                    if (GU) tma_load(bs + BNO * 128, &mu, ks * TW_BK, n0, &full[s]);
                }
            }
        }
        return;
    }
    int warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    /* The warpgroup's A rows 16 warp + g and + 8 are weight tile rows wr0 /
     * wr1: 64 wg + 16 warp + g and + 8; with GU the gate row 32 wg + 8 warp
     * + g and the same row of the up (64 on), so that one thread holds both
     * for its output column. */
    int wr0 = GU ? 32 * wg + 8 * warp + g : 64 * wg + 16 * warp + g, wr1 = GU ? 64 + wr0 : wr0 + 8;
    float P[64], T[64];
#pragma unroll
    for (int i = 0; i < 64; i++) P[i] = T[i] = 0.0f;
    /* Part by part (every part a whole number of stages, see _takes): its
     * stages' MMAs, then the partial into the sum. A stage's MMAs read this
     * thread's weight registers until they are done, so the weights come in
     * two register sets: while one stage's MMAs run, the next stage's
     * weights load into the other set and its MMAs queue behind them (the
     * same products in the same order); a stage's slot goes back, and its
     * set is reloaded, once its MMAs are done (wait for all but the newest
     * group). wg_keep pins a set's registers until then. */
    uint4 wa[4], wb[4]; /* rows wr0 / wr1, blocks 0 / 1 of a stage */
    auto load_w = [&](uint4 (&w)[4], int s) {
        const uint8_t *W = sm + (size_t)s * C::STAGE + C::NA * TW_TILE;
#pragma unroll
        for (int sb = 0; sb < 2; sb++) {
            w[sb] = TILED ? tw_tchunk(W, wr0, 4 * sb + t) : tw_chunk(W, wr0, 4 * sb + t);
            w[2 + sb] = TILED ? tw_tchunk(W, wr1, 4 * sb + t) : tw_chunk(W, wr1, 4 * sb + t);
        }
    };
    auto issue = [&](const uint4 (&w)[4], int s) {
        const uint8_t *st = sm + (size_t)s * C::STAGE;
        const uint8_t *Xh = st, *Xl = st + TW_TILE;
        wg_hold(P);
        wg_fence();
#pragma unroll
        for (int k16 = 0; k16 < 4; k16++) {
            int sb = k16 >> 1, off = 32 * k16; /* step k16 % 2 of block sb: bytes off .. off + 31 of x's rows */
            uint32_t a0 = k16 & 1 ? w[sb].z : w[sb].x, a2 = k16 & 1 ? w[sb].w : w[sb].y;
            uint32_t a1 = k16 & 1 ? w[2 + sb].z : w[2 + sb].x, a3 = k16 & 1 ? w[2 + sb].w : w[2 + sb].y;
            wgmma128r(P, a0, a1, a2, a3, wg_desc(Xh + off));
            if (LO) wgmma128r(P, a0, a1, a2, a3, wg_desc(Xl + off));
        }
        wg_commit();
    };
    auto ready = [&](int k) { mb_wait(&full[k % C::STAGES], (k / C::STAGES) & 1); };
    int ks = 0;
    for (int q = 0; q < MMA_PARTS; q++) {
        int ns = (mma_part(nb, q + 1) - mma_part(nb, q)) / 2, k0 = ks;
        ready(k0);
        load_w(wa, k0 % C::STAGES);
        for (int j = 0; j < ns; j += 2) {
            issue(wa, (k0 + j) % C::STAGES);
            if (j > 0) {
                wg_wait<1>();
                wg_hold(P);
                wg_keep(wb);
                tw_release(&empty[(k0 + j - 1) % C::STAGES], lane);
            }
            if (j + 1 >= ns) break;
            ready(k0 + j + 1);
            load_w(wb, (k0 + j + 1) % C::STAGES);
            issue(wb, (k0 + j + 1) % C::STAGES);
            wg_wait<1>();
            wg_hold(P);
            wg_keep(wa);
            tw_release(&empty[(k0 + j) % C::STAGES], lane);
            if (j + 2 < ns) {
                ready(k0 + j + 2);
                load_w(wa, (k0 + j + 2) % C::STAGES);
            }
        }
        wg_wait<0>();
        wg_hold(P);
        wg_keep(wa);
        wg_keep(wb);
        tw_release(&empty[(k0 + ns - 1) % C::STAGES], lane);
        ks = k0 + ns;
#pragma unroll
        for (int i = 0; i < 64; i++) {
            T[i] = q ? __fadd_rn(T[i], P[i]) : P[i];
            P[i] = 0.0f;
        }
    }
    /* d[4 i + 2 h + e]: fragment row 16 warp + g + 8 h (weight row), column
     * 8 i + 2 t + e (x row m0 + ...) */
    if constexpr (GU) {
#pragma unroll
        for (int i = 0; i < 16; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int r = m0 + 8 * i + 2 * t + e, n = n0 + wr0;
                if (r >= a.M || n >= a.N) continue;
                float gv = T[4 * i + e], uv = T[4 * i + 2 + e];
                if (NORM) {
                    float sc = a.inv[r];
                    gv = __fmul_rn(gv, sc), uv = __fmul_rn(uv, sc);
                }
                a.y[(size_t)r * a.ldy + n] = silu_mul(gv, uv);
            }
    } else {
        /* gm_value, sixteen residual values read before their writes
         * (gm_put's read-add-write one output after another waited for
         * each read behind the previous write: 60-80 us of a 512-row
         * product on the H200) */
#pragma unroll
        for (int i0 = 0; i0 < 16; i0 += 4) {
            float old[16];
#pragma unroll
            for (int i = 0; i < 16; i++) old[i] = 0.0f;
            if (a.accumulate) {
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            int r = m0 + 8 * (i0 + i) + 2 * t + e, n = n0 + (h ? wr1 : wr0);
                            if (r < a.M && n < a.N) old[4 * i + 2 * h + e] = a.y[(size_t)r * a.ldy + n];
                        }
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int r = m0 + 8 * (i0 + i) + 2 * t + e;
                    if (r >= a.M) continue;
                    float sc = NORM ? a.inv[r] : 1.0f;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        int n = n0 + (h ? wr1 : wr0);
                        if (n < a.N)
                            a.y[(size_t)r * a.ldy + n] =
                                gm_value<NORM>(a, old[4 * i + 2 * h + e], T[4 * (i0 + i) + 2 * h + e], sc);
                    }
                }
        }
    }
}

/* ---- host: tensor maps and launch ---------------------------------------- */

typedef CUresult (*tw_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                 const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled, looked up once (a race looks it up
 * twice). */
static tern_status tw_encoder(tw_encode_fn *out)
{
    static tw_encode_fn fn;
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        CUDA_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q),
                 "wgmma: driver entry point");
        if (q != cudaDriverEntryPointSuccess || !p)
            return tern_error(TERN_E_INTERNAL, "cuda wgmma: the driver has no cuTensorMapEncodeTiled");
        fn = (tw_encode_fn)p;
    }
    *out = fn;
    return TERN_OK;
}

/* A map of the bf16 matrix [rows, K] at p (borrowed), boxes of 64 k x
 * box_rows rows, swizzled 128 bytes; rows past the end read as zeros. */
static tern_status tw_map(CUtensorMap *m, const uint16_t *p, int rows, int K, int box_rows)
{
    tw_encode_fn enc = NULL;
    tern_status st = tw_encoder(&enc);
    if (st) return st;
    cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)K * 2};
    cuuint32_t box[2] = {TW_BK, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dim, stride, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return tern_error(TERN_E_INTERNAL, "cuda wgmma: cannot describe a %d x %d bf16 matrix (error %d)", rows, K,
                          (int)r);
    return TERN_OK;
}

/* A map of the tiled bf16 matrix [rows, K] at p (borrowed; tiled.cu) as
 * [rows / 8][K / 32][256]: a tile of 8 rows' block of 32 elements is 512
 * contiguous bytes, a stage's two blocks of it 1024; boxes of 2 blocks x
 * box_rows / 8 tiles, unswizzled (tw_tchunk); tiles past the end read as
 * zeros. */
static tern_status tw_map_tiled(CUtensorMap *m, const uint16_t *p, int rows, int K, int box_rows)
{
    tw_encode_fn enc = NULL;
    tern_status st = tw_encoder(&enc);
    if (st) return st;
    cuuint64_t dim[3] = {(cuuint64_t)8 * MMA_KB, (cuuint64_t)(K / MMA_KB), (cuuint64_t)(rows / 8)};
    cuuint64_t stride[2] = {(cuuint64_t)8 * MMA_KB * 2, (cuuint64_t)K * 16};
    cuuint32_t box[3] = {(cuuint32_t)8 * MMA_KB, TW_BK / MMA_KB, (cuuint32_t)(box_rows / 8)}, estr[3] = {1, 1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)p, dim, stride, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return tern_error(TERN_E_INTERNAL, "cuda wgmma: cannot describe a tiled %d x %d bf16 matrix (error %d)", rows,
                          K, (int)r);
    return TERN_OK;
}

template <bool LO, bool NORM, bool GU, bool TILED>
static tern_status tw_launch(tern_cuda *c, const gm_args &a)
{
    auto kern = tw_kernel<LO, NORM, GU, TILED>;
    static int ready;
    tern_status st = smem_limit_once((const void *)kern, tw_cfg<LO>::SMEM, &ready, "wgmma smem");
    if (st) return st;
    /* only the maps the kernel reads are encoded (ml without LO and mu
     * without GU are copies, never read) */
    CUtensorMap mh, ml, mw, mu;
    int bno = GU ? TW_BN / 2 : TW_BN;
    auto wmap = TILED ? tw_map_tiled : tw_map;
    if ((st = tw_map(&mh, a.hi, a.M, a.K, TW_BM)) || (st = wmap(&mw, a.w, a.N, a.K, bno))) return st;
    ml = mh;
    mu = mw;
    if ((LO && (st = tw_map(&ml, a.lo, a.M, a.K, TW_BM))) || (GU && (st = wmap(&mu, a.wu, a.N, a.K, bno)))) return st;
    dim3 grid((unsigned)((a.M + TW_BM - 1) / TW_BM), (unsigned)((a.N + bno - 1) / bno));
    return launch(c, "wgmma_gemm", kern, grid, dim3(TW_THREADS), (size_t)tw_cfg<LO>::SMEM, mh, ml, mw, mu, a);
}

int tern_cuda_wgmma_takes(const gm_args &a)
{
    /* the copy engine takes 16-byte-aligned bases and row strides; every
     * part must start on a stage (an even block) */
    int nb = a.K / MMA_KB;
    for (int q = 1; q <= MMA_PARTS; q++)
        if (mma_part(nb, q) % 2) return 0;
    return ((uintptr_t)a.hi | (uintptr_t)a.lo | (uintptr_t)a.w | (uintptr_t)a.wu) % 16 == 0 && a.K % MMA_KB == 0;
}

template <bool TILED>
static tern_status tw_pick(tern_cuda *c, bool lo, bool norm, const gm_args &a)
{
    if (a.wu) {
        if (norm) return lo ? tw_launch<true, true, true, TILED>(c, a) : tw_launch<false, true, true, TILED>(c, a);
        return lo ? tw_launch<true, false, true, TILED>(c, a) : tw_launch<false, false, true, TILED>(c, a);
    }
    if (norm) return lo ? tw_launch<true, true, false, TILED>(c, a) : tw_launch<false, true, false, TILED>(c, a);
    return lo ? tw_launch<true, false, false, TILED>(c, a) : tw_launch<false, false, false, TILED>(c, a);
}

tern_status tern_cuda_wgmma_gemm(tern_cuda *c, bool lo, bool norm, const gm_args &a)
{
    return a.tiled ? tw_pick<true>(c, lo, norm, a) : tw_pick<false>(c, lo, norm, a);
}

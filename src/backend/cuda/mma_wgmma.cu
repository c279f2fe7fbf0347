/* The GEMM for prefill-sized products (more than 64 rows) on Hopper's
 * warpgroup MMA (wgmma), in the per-element order of mma.cuh.
 *
 * Why it keeps the order: on sm_90 one wgmma m64nNk16 step and one
 * mma.sync m16n8k16 step compute the same fused dot-add of their 16
 * products and the accumulator (products exact, aligned to the largest
 * exponent, one rounding), which does not depend on the order of the 16
 * k slots, only on which 16 elements form the step. mma.cuh's step 0 of a
 * 32-element block takes its 4-element chunks c0, c2, c4, c6 and step 1
 * c1, c3, c5, c7 (lane t holds c_2t and c_2t+1), so the shared-memory
 * operands hold each block as c0 c2 c4 c6 | c1 c3 c5 c7: the prep writes
 * hi / lo in that order (tern_cuda_mma's perm layout), the weights are
 * copied into it 8 bytes at a time. Each step runs as wgmma(hi) then
 * wgmma(lo); a part's partial starts at +0 and the parts are summed in
 * order, as in the other two kernels; ops_test checks every row of a GEMM
 * against the same row alone (the small-batch kernel) bit for bit.
 *
 * Tiles of 128 rows x 128 columns, two warpgroups of 64 rows; operands in
 * shared memory without swizzle (8-row x 16-byte core matrices), fed by
 * cp.async through WG_STAGES stages of WG_KS blocks, up to WG_STAGES - 1
 * of them in flight while one is multiplied. */
#include "backend/cuda/mma.cuh"

enum { WG_BM = 128, WG_BN = 128, WG_THREADS = 256, WG_KS = 2, WG_STAGES = 4,
       WG_TILE = 128 * MMA_KB * 2 /* bytes of one 128-row operand's 32-element block */ };

static size_t wg_smem(bool lo) { return (size_t)WG_STAGES * WG_KS * ((lo ? 2 : 1) + 1) * WG_TILE; }

/* Byte offset of (row r, 8-element k group kg) in an operand block: core
 * matrix (r / 8, kg) at (r / 8) * 512 + kg * 128. */
__device__ __forceinline__ int wg_off(int r, int kg) { return (r >> 3) * 512 + kg * 128 + (r & 7) * 16; }

/* Descriptor of a K-major operand without swizzle: k-adjacent core
 * matrices 128 bytes apart (leading offset), row groups 512 (stride). */
__device__ __forceinline__ uint64_t wg_desc(const void *smem)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(512 >> 4) << 32);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
/* Keeps the compiler from moving reads or writes of the accumulators
 * across the asynchronous MMAs. */
__device__ __forceinline__ void wg_hold(float d[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* d (64 x 128, this warpgroup's fragment) += A (64 x 16) . B (128 x 16)^T. */
__device__ __forceinline__ void wgmma128(float d[64], uint64_t da, uint64_t db)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, 0, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
#else
    __trap(); /* built without sm_90a: tern_cuda_wgmma_gemm is not called */
#endif
}

template <bool LO, bool NORM>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm_kernel(gm_args a)
{
    extern __shared__ uint4 wg_sm4[];
    uint8_t *sm = reinterpret_cast<uint8_t *>(wg_sm4);
    constexpr int NA = LO ? 2 : 1, SUB = (NA + 1) * WG_TILE, STAGE = WG_KS * SUB;
    int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    /* The row tiles of a column tile are neighbours in the launch, so that
     * its weights are read from DRAM about once. */
    int m0 = blockIdx.x * WG_BM, n0 = blockIdx.y * WG_BN, nb = a.K / MMA_KB, nst = (nb + WG_KS - 1) / WG_KS;
    /* hi / lo: 16-byte pieces p = k group p (already in step order); w:
     * natural 8-byte chunk ch to its slot (even ch: ch / 2, odd: 4 + ch / 2),
     * k group slot / 2, half slot % 2. Each thread's sources and targets are
     * fixed but for the block's k offset. */
    const uint16_t *asrc[2], *bsrc[4];
    int aoff[2], boff[4];
    bool ain[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int c = tid + h * WG_THREADS, r = c >> 2, p = c & 3;
        ain[h] = m0 + r < a.M;
        asrc[h] = a.hi + (size_t)(ain[h] ? m0 + r : 0) * a.K + 8 * p;
        aoff[h] = wg_off(r, p);
    }
#pragma unroll
    for (int h = 0; h < 4; h++) {
        int c = tid + h * WG_THREADS, r = c >> 3, ch = c & 7;
        int wrow = n0 + r < a.N ? n0 + r : a.N - 1;
        int slot = (ch & 1) ? 4 + (ch >> 1) : (ch >> 1);
        bsrc[h] = a.w + (size_t)wrow * a.K + 4 * ch;
        boff[h] = NA * WG_TILE + wg_off(r, slot >> 1) + (slot & 1) * 8;
    }
    const ptrdiff_t lo_delta = LO ? a.lo - a.hi : 0;
    auto issue_block = [&](int kb, uint8_t *base) {
        int k = kb * MMA_KB;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            cp16(base + aoff[h], asrc[h] + k, ain[h]);
            if (LO) cp16(base + WG_TILE + aoff[h], asrc[h] + lo_delta + k, ain[h]);
        }
#pragma unroll
        for (int h = 0; h < 4; h++) cp8(base + boff[h], bsrc[h] + k);
    };
    auto issue = [&](int ks, int st) {
#pragma unroll
        for (int sb = 0; sb < WG_KS; sb++)
            if (ks * WG_KS + sb < nb) issue_block(ks * WG_KS + sb, sm + (size_t)st * STAGE + sb * SUB);
    };
    float P[64], T[64];
#pragma unroll
    for (int i = 0; i < 64; i++) P[i] = T[i] = 0.0f;
    int q = 0;
    auto close_parts = [&](int done) { /* the parts whose blocks are all in (done blocks) */
        while (q < MMA_PARTS && mma_part(nb, q + 1) <= done) {
#pragma unroll
            for (int i = 0; i < 64; i++) {
                T[i] = q ? __fadd_rn(T[i], P[i]) : P[i];
                P[i] = 0.0f;
            }
            q++;
        }
    };
    wait_prior_grid();
#pragma unroll
    for (int s = 0; s < WG_STAGES - 1; s++) {
        if (s < nst) issue(s, s);
        cp_commit();
    }
    close_parts(0);
    for (int ks = 0; ks < nst; ks++) {
        /* Stage ks has landed (WG_STAGES - 2 newer ones may be in flight). */
        cp_wait<WG_STAGES - 2>();
        fence_proxy_async();
        __syncthreads();
        const uint8_t *stage = sm + (size_t)(ks % WG_STAGES) * STAGE;
        wg_hold(P);
        wg_fence();
#pragma unroll
        for (int sb = 0; sb < WG_KS; sb++) {
            int kb = ks * WG_KS + sb;
            if (kb >= nb) break;
            const uint8_t *base = stage + sb * SUB, *Ah = base + wg * 4096, *Al = base + WG_TILE + wg * 4096,
                          *Bs = base + NA * WG_TILE;
#pragma unroll
            for (int st = 0; st < 2; st++) {
                wgmma128(P, wg_desc(Ah + st * 256), wg_desc(Bs + st * 256));
                if (LO) wgmma128(P, wg_desc(Al + st * 256), wg_desc(Bs + st * 256));
            }
            if (q < MMA_PARTS && mma_part(nb, q + 1) <= kb + 1) {
                /* a part ends here: its partial is complete once the MMAs are */
                wg_commit();
                wg_wait<0>();
                wg_hold(P);
                close_parts(kb + 1);
                wg_hold(P);
                wg_fence();
            }
        }
        wg_commit();
        /* Stage ks - 1's MMAs are done in both warpgroups once each has
         * waited for them and passed the barrier: its slot takes stage
         * ks + WG_STAGES - 1. */
        wg_wait<1>();
        wg_hold(P);
        __syncthreads();
        int nk = ks + WG_STAGES - 1;
        if (nk < nst) issue(nk, nk % WG_STAGES);
        cp_commit();
    }
    wg_wait<0>();
    wg_hold(P);
    close_parts(nb);
    cp_wait<0>();
    int rb = m0 + wg * 64 + warp * 16 + g;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = rb + 8 * h;
        if (r >= a.M) continue;
        float sc = NORM ? a.inv[r] : 1.0f;
#pragma unroll
        for (int i = 0; i < 16; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int n = n0 + 8 * i + 2 * t + e;
                if (n >= a.N) continue;
                gm_put<NORM>(a, r, n, T[4 * i + 2 * h + e], sc);
            }
    }
}

template <bool LO, bool NORM>
static tern_status wg_launch(tern_cuda *c, const gm_args &a)
{
    static int ready;
    dim3 grid((unsigned)((a.M + WG_BM - 1) / WG_BM), (unsigned)((a.N + WG_BN - 1) / WG_BN));
    return gm_start(c, "wgmma_gemm", wgmma_gemm_kernel<LO, NORM>, &ready, wg_smem(LO), grid, WG_THREADS, a);
}

tern_status tern_cuda_wgmma_gemm(tern_cuda *c, bool lo, bool norm, const gm_args &a)
{
    if (norm) return lo ? wg_launch<true, true>(c, a) : wg_launch<false, true>(c, a);
    return lo ? wg_launch<true, false>(c, a) : wg_launch<false, false>(c, a);
}

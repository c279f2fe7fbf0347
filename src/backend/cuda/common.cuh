/* Device helpers shared by the CUDA backend's kernels (internal). */
#ifndef TERN_BACKEND_CUDA_COMMON_CUH
#define TERN_BACKEND_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>

#include "backend/cuda/cuda.h"

struct tern_cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;     /* made on first use (matmul.cu), so that a program
                                that never multiplies on cuBLAS need not load it */
    void (*blas_destroy)(cublasHandle_t);
    cudaEvent_t mark, stop;
    cudaEvent_t *prof;       /* TERN_CUDA_PROF events, made on first use */
    int n_prof;
    int pdl;                 /* launch with programmatic dependent launch */
    int trigger;             /* TERN_CUDA_TRIGGER bits: matrix kernels (1), the qkv prologue (2) and attention
                                (4) let the next kernel launch as soon as they run */
    int prefetch;            /* TERN_CUDA_PREFETCH: bytes of its first weight rows each matrix warp prefetches
                                into L2 before it waits for the previous kernel */
    int sms;                 /* multiprocessors */
    int mma;                 /* TERN_CUDA_MMA (default 1): bf16 products on the tensor cores (mma.cuh) */
    int fold_splits;         /* TERN_CUDA_FOLD_SPLITS (default 32): past that many splits the decode attention's fold is a launch of its own; 0 never */
    int sk_trig;             /* TERN_CUDA_SKTRIG: one-row products let the next kernel launch at their start (1), at each block's last tile (2, the default) or when they end (0) */
    int sk_early;            /* TERN_CUDA_SKEARLY: one-row products load their first tile's second weight batch right after the wait, before (1) or after the first (2) or the last (3) x loads (the default); 0 in the tile loop */
    int sk_x;                /* TERN_CUDA_SKX (default 5): 2-5 runs one-row products with x prepared once per block, 0 the register-buffered kernel */
    int gu_ilv;              /* TERN_CUDA_GU_ILV (default 1): one-row SwiGLU pairs as one matrix of interleaved gate / up rows (mma_skinny.cu) */
    int pro_reg;             /* TERN_CUDA_PRO_REG (default 1): the attention prologue kernel with a head in registers (rowops.cu) */
    int chain_ring;          /* TERN_CUDA_CHAIN_RING (default 4): the chain's most ring slots a warp, 0 no chain (chain.cu) */
    int chain_groups;        /* TERN_CUDA_CHAIN_GROUPS (default 2): its groups of eight warps a block, 1 or 2 */
    int chain_smem;          /* TERN_CUDA_CHAIN_SMEM (default 200 KiB): its most shared memory a block */
    int chain_trig;          /* TERN_CUDA_CHAIN_TRIG (default 1): the chain lets the next kernel launch at its start */
    int chain_timing;        /* tern_cuda_set_chain_timing: timing only (wrong values), 1 no waits, 2 no arithmetic */
    int wgmma;               /* TERN_CUDA_WGMMA (default 1): their GEMM on warpgroup MMA (mma_wgmma.cu), 0 mma.sync */
    struct tern_cuda_tiled *tiled; /* the matrices in the tiled layout (tern_cuda_tile_weight; the table owned), n_tiled of cap_tiled */
    int n_tiled, cap_tiled;
    unsigned long long *tl;  /* tern_cuda_set_timeline: per-block time stamps of one-row products (borrowed) */
    int tl_seq, tl_cap;
    void *mma_tmp;           /* the GEMM path's scratch (owned), mma_tmp_bytes long */
    size_t mma_tmp_bytes;
    char desc[320];
};

/* *tiled: whether a product of K columns over the bf16 matrix at w reads
 * the tiled layout (w inside a matrix tern_cuda_tile_weight rewrote);
 * TERN_E_INVALID when w lies inside one but not on a tile boundary, or it
 * has other K (tiled.cu). tiled_free frees the table (tern_cuda_close). */
tern_status tiled_of(const tern_cuda *c, const void *w, int K, bool *tiled);
void tiled_free(tern_cuda *c);

/* Records a CUDA error as a tern_status with the op's name. */
static inline tern_status cuda_fail(cudaError_t e, const char *what)
{
    return tern_error(TERN_E_INTERNAL, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CUDA_TRY(expr, what)                                   \
    do {                                                       \
        cudaError_t e_ = (expr);                               \
        if (e_ != cudaSuccess) return cuda_fail(e_, what);     \
    } while (0)

/* After a kernel launch: reports launch errors (bad configuration). */
static inline tern_status launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TERN_OK : cuda_fail(e, what);
}

/* Waits for the grid this one depends on (programmatic dependent launch:
 * the kernel is launched as soon as the previous one's blocks exit, before
 * its memory is flushed, and waits here); a no-op for kernels launched
 * without that attribute. Everything before the call may only touch memory
 * no earlier kernel writes (weights). Which kernels trigger the next
 * launch before they end (griddepcontrol.launch_dependents): device.cu's
 * c->trigger and c->sk_trig. */
__device__ __forceinline__ void wait_prior_grid(void)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* The global nanosecond clock (the same on every multiprocessor). */
__device__ __forceinline__ unsigned long long dev_clock_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned dev_smid(void)
{
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

/* The timelines of a build with -DTERN_CUDA_TIMELINE (tern_cuda_set_timeline,
 * tern_cuda_set_attn_timeline): thread 0 of block `block` writes the global
 * clock (TL_STAMP) or a word of its own (TL_INFO, the last slot) into its
 * TERN_CUDA_TL_SLOTS of ptr (NULL: none). Other builds compile them out,
 * arguments and all. */
#ifdef TERN_CUDA_TIMELINE
#define TL_SET(ptr, block, slot, value)                                              \
    do {                                                                             \
        if ((ptr) && threadIdx.x == 0 && (block) < TERN_CUDA_TL_BLOCKS)              \
            (ptr)[(size_t)(block) * TERN_CUDA_TL_SLOTS + (slot)] = (value);          \
    } while (0)
#define TL_STAMP(ptr, block, slot) TL_SET(ptr, block, slot, dev_clock_ns())
#define TL_INFO(ptr, block, value) TL_SET(ptr, block, TERN_CUDA_TL_SLOTS - 1, value)
#else
#define TL_STAMP(ptr, block, slot) ((void)0)
#define TL_INFO(ptr, block, value) ((void)0)
#endif
/* The attention prologue kernel's stamps into d_buf (NULL: none; rowops.cu,
 * for tern_cuda_set_attn_timeline in attention.cu). */
tern_status tern_cuda_pro_timeline(unsigned long long *d_buf);

/* Launches kernel<<<grid, block, smem>>> on c's stream, with programmatic
 * dependent launch when c->pdl is set, so that its blocks start (and fetch
 * their weights) while the previous kernel drains. */
template <typename... KArgs, typename... Args>
static tern_status launch(tern_cuda *c, const char *what, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                          size_t smem, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = c->pdl ? 1 : 0;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
    if (e != cudaSuccess) return cuda_fail(e, what);
    return TERN_OK;
}

/* Raises kernel's dynamic shared-memory limit to smem the first time
 * (*done: the caller's static flag; a race only sets it twice), so that a
 * graph capture of a later call queues the launch alone. */
static inline tern_status smem_limit_once(const void *kernel, size_t smem, int *done, const char *what)
{
    if (*done) return TERN_OK;
    CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), what);
    *done = 1;
    return TERN_OK;
}

/* Resident blocks per multiprocessor of a kernel at a block size and
 * dynamic shared memory, asked once per kernel and translation unit (a race
 * between threads only asks twice; a half-written slot reads as 0, taken
 * as 1). */
static inline int blocks_per_sm(const void *kernel, int threads, size_t smem)
{
    enum { SLOTS = 64 };
    static const void *fn[SLOTS];
    static int n[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        if (fn[i] == kernel) return n[i] > 0 ? n[i] : 1;
        if (!fn[i]) {
            int b = 0;
            if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, threads, smem) != cudaSuccess || b < 1) {
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

/* Grid of at most one wave of kernel's blocks (per block units_per_block
 * slots, units of work in all): when the work exceeds a wave, just enough
 * blocks that every slot takes the same number of units. */
static inline dim3 one_wave(const void *kernel, int sms, int threads, size_t smem, long units, int units_per_block)
{
    long slots = (long)blocks_per_sm(kernel, threads, smem) * sms * units_per_block;
    long per = (units + slots - 1) / slots, used = (units + per - 1) / per;
    return dim3((unsigned)((used + units_per_block - 1) / units_per_block));
}

/* 16-byte streaming load that does not allocate in L1 (weights are read
 * once per pass). */
__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ float bf16_bits_to_f32(uint32_t h16)
{
    return __uint_as_float(h16 << 16);
}

/* Round to nearest even to bf16 and back (the CPU's tern_f32_to_bf16). */
__device__ __forceinline__ float round_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

/* Weight element types: unpack 16 bytes into floats. */
struct w_bf16 {
    enum { PER16 = 8 };
    static __device__ __forceinline__ void unpack(uint4 v, float *f)
    {
        uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = __uint_as_float(a[i] << 16);
            f[2 * i + 1] = __uint_as_float(a[i] & 0xffff0000u);
        }
    }
    static __device__ __forceinline__ float at(const void *w, long i)
    {
        return bf16_bits_to_f32(((const uint16_t *)w)[i]);
    }
};
struct w_f16 {
    enum { PER16 = 8 };
    static __device__ __forceinline__ void unpack(uint4 v, float *f)
    {
        uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            __half2 h = *reinterpret_cast<__half2 *>(&a[i]);
            float2 t = __half22float2(h);
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    static __device__ __forceinline__ float at(const void *w, long i)
    {
        return __half2float(((const __half *)w)[i]);
    }
};
struct w_f32 {
    enum { PER16 = 4 };
    static __device__ __forceinline__ void unpack(uint4 v, float *f)
    {
        f[0] = __uint_as_float(v.x);
        f[1] = __uint_as_float(v.y);
        f[2] = __uint_as_float(v.z);
        f[3] = __uint_as_float(v.w);
    }
    static __device__ __forceinline__ float at(const void *w, long i) { return ((const float *)w)[i]; }
};


/* Loads weight element i of a [*, d] weight vector in dtype dt. */
__device__ __forceinline__ float weight_at(const void *w, tern_dtype dt, long i)
{
    if (dt == TERN_DT_BF16) return w_bf16::at(w, i);
    if (dt == TERN_DT_F16) return w_f16::at(w, i);
    return w_f32::at(w, i);
}

/* Position of query token t of row r (tern_cuda_attn_row). */
static __device__ __forceinline__ int query_pos(const tern_cuda_attn_row &r, int t) { return r.len - r.n_q + (t - r.q0); }

/* Address of position p of KV head h in base (r.k or r.v), see cuda.h. */
static __device__ __forceinline__ float *kv_at(float *base, const tern_cuda_attn_row &r, int h, long p, int head_dim)
{
    if (!r.table) return base + (long)h * r.head_stride + p * head_dim;
    return base + (long)r.table[p / r.block_tokens] * r.block_stride + (long)h * r.head_stride +
           (p % r.block_tokens) * head_dim;
}

/* silu(g) * u, written as the CPU's scalar path does: the one definition
 * the fused gate/up kernels and tern_cuda_silu_mul share (their bits must
 * agree). */
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* The tensor-core path (mma_gemm.cu): taken by bf16 weights with K a
 * multiple of 32 (a rule on K alone, so a row's bits never depend on M).
 * tern_cuda_mma: y[M, ldy] = x[M, K] . w[N, K]^T (+= y with accumulate);
 * with d_wu, y = silu(x . w^T) * (x . wu^T); with d_nw (float32 [K]), x is
 * RMSNorm'd first (weight d_nw, eps). Every pointer is a borrowed device
 * pointer; prefill-sized M uses the context's scratch. */
extern "C" int tern_cuda_mma_takes(const tern_cuda *c, tern_dtype wdt, int K);
extern "C" tern_status tern_cuda_mma(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K, const void *d_w,
                                     const void *d_wu, int N, float *d_y, int ldy, int accumulate, const float *d_nw,
                                     float eps);

#endif

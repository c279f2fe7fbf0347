/* Per-row ops: RMSNorm, rotary embedding (also fused with the per-head
 * q/k norm), SwiGLU's silu * up, residual add, embedding gather.
 *
 * Products and sums that the CPU reference writes as separate operations use
 * the non-contracting intrinsics (__fmul_rn, __fadd_rn, ...) so that they
 * round the same way as there. Reductions (the RMS) have an order fixed by
 * the row width alone. */
#include "backend/cuda/norm.cuh"

enum { ROW_BLOCK = RMS_VT, WARP_ROW_MAX = RMS_WARP_MAX, HEAD_MAX = NORM_HEAD_MAX };

/* Wide rows: one block of ROW_BLOCK threads per row; thread t adds the
 * elements t, t+1024, ... in order, warps combine by butterfly, and thread 0
 * adds the 32 warp sums in order. */
__global__ void rmsnorm_block_kernel(const float *x, float *y, int d, const void *__restrict__ w,
                                     tern_dtype wdt, float eps, int trig)
{
    __shared__ float part[ROW_BLOCK / 32];
    __shared__ float inv_s;
    wait_prior_grid();
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const float *xr = x + (long)blockIdx.x * d;
    float *yr = y + (long)blockIdx.x * d;
    float s = 0.0f;
    for (int i = threadIdx.x; i < d; i += ROW_BLOCK) s = fmaf(xr[i], xr[i], s);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < ROW_BLOCK / 32; i++) t = __fadd_rn(t, part[i]);
        inv_s = rms_inv(t, d, eps);
    }
    __syncthreads();
    float inv = inv_s;
    for (int i = threadIdx.x; i < d; i += ROW_BLOCK) yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), weight_at(w, wdt, i));
}

/* Narrow rows: one warp per row, four rows per block. */
__global__ void rmsnorm_warp_kernel(const float *x, float *y, int n, int d, const void *__restrict__ w,
                                    tern_dtype wdt, float eps, int trig)
{
    wait_prior_grid();
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    int r = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= n) return;
    const float *xr = x + (long)r * d;
    float *yr = y + (long)r * d;
    float inv = rms_inv(warp_sumsq(xr, d, lane), d, eps);
    for (int i = lane; i < d; i += 32) yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), weight_at(w, wdt, i));
}

extern "C" tern_status tern_cuda_rmsnorm(tern_cuda *c, const float *d_x, float *d_y, int n, int d, const void *d_w,
                                         tern_dtype wdt, float eps)
{
    if (n <= 0) return TERN_OK;
    if (d > WARP_ROW_MAX)
        return launch(c, "rmsnorm", rmsnorm_block_kernel, dim3(n), dim3(ROW_BLOCK), 0, d_x, d_y, d, d_w, wdt, eps,
                      (c->trigger & 8) != 0);
    return launch(c, "rmsnorm", rmsnorm_warp_kernel, dim3((n + 3) / 4), dim3(128), 0, d_x, d_y, n, d, d_w, wdt, eps,
                  (c->trigger & 8) != 0);
}

/* One warp per (token, head), four per block. */
__global__ void head_norm_rope_kernel(float *x, long ldx, int n, int n_heads, int head_dim, int rope_dim,
                                      const void *__restrict__ w, tern_dtype wdt, float eps,
                                      const float *__restrict__ cs, const int *__restrict__ pos)
{
    __shared__ float buf[4][HEAD_MAX];
    wait_prior_grid();
    int item = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (item >= n * n_heads) return;
    int t = item / n_heads;
    float *v = x + (long)t * ldx + (long)(item % n_heads) * head_dim;
    norm_rope_head(v, buf[threadIdx.x >> 5], NULL, head_dim, rope_dim, w, wdt, eps,
                   cs ? cs + (long)pos[t] * rope_dim : NULL, lane);
}

#ifdef TERN_CUDA_TIMELINE
__device__ unsigned long long *g_pro_tl;
#endif

tern_status tern_cuda_pro_timeline(unsigned long long *d_buf)
{
#ifdef TERN_CUDA_TIMELINE
    CUDA_TRY(cudaMemcpyToSymbol(g_pro_tl, &d_buf, sizeof d_buf), "prologue timeline");
#else
    (void)d_buf;
#endif
    return TERN_OK;
}

/* The fused attention prologue: per token, its H query heads (q norm,
 * rope), HK key heads (k norm, rope, stored in the cache) and HK value heads
 * (stored) of the fused qkv row, one warp per head. */
__global__ void qkv_rope_store_kernel(float *qkv, long ld, int n, int H, int HK, int head_dim, int rope_dim,
                                      const void *__restrict__ qw, const void *__restrict__ kw, tern_dtype wdt,
                                      float eps, const float *__restrict__ cs,
                                      const tern_cuda_attn_row *__restrict__ rows, const int *__restrict__ tok_row,
                                      int trig)
{
    __shared__ float buf[4][HEAD_MAX];
    TL_STAMP(g_pro_tl, blockIdx.x, 0);
    wait_prior_grid();
    TL_STAMP(g_pro_tl, blockIdx.x, 1);
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    int per = H + 2 * HK;
    int item = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (item < n * per)
        qkv_head(qkv, ld, item / per, item % per, H, HK, head_dim, rope_dim, qw, kw, wdt, eps, cs, rows, tok_row,
                 buf[threadIdx.x >> 5], lane);
#ifdef TERN_CUDA_TIMELINE
    __syncthreads();
#endif
    TL_STAMP(g_pro_tl, blockIdx.x, 6);
    TL_INFO(g_pro_tl, blockIdx.x, (unsigned long long)gridDim.x << 32);
}

/* qkv_rope_store_kernel's work and bits with a head in registers (E =
 * head_dim / 32 elements a lane, elements lane + 32 k, rope over the whole
 * head: the pairs (i, i + head_dim / 2) in one lane): the row, the table
 * row and the norm weight are read before the wait (the rows are uploaded
 * before the pass; the table and weights are never written by a kernel),
 * so that after it a warp reads its head once, norms it (warp_sumsq's
 * order: lane l adds its elements in order, then the butterfly), ropes and
 * stores it; no shared memory. */
template <int E>
__global__ void qkv_rope_reg_kernel(float *qkv, long ld, int n, int H, int HK, const void *__restrict__ qw,
                                    const void *__restrict__ kw, tern_dtype wdt, float eps,
                                    const float *__restrict__ cs, const tern_cuda_attn_row *__restrict__ rows,
                                    const int *__restrict__ tok_row, int trig)
{
    constexpr int hd = 32 * E, HE = E / 2;
    TL_STAMP(g_pro_tl, blockIdx.x, 0);
    int per = H + 2 * HK;
    int item = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    const bool live = item < n * per;
    const int t = live ? item / per : 0, h = live ? item % per : 0;
    const bool isq = h < H, isk = !isq && h < H + HK;
    const void *w = isq ? qw : isk ? kw : NULL;
    tern_cuda_attn_row r = {};
    long p = 0;
    float wv[E], c[E];
    if (live) {
        r = rows[tok_row[t]];
        p = query_pos(r, t);
#pragma unroll
        for (int k = 0; k < E; k++) {
            wv[k] = w ? weight_at(w, wdt, lane + 32 * k) : 0.0f;
            c[k] = isq || isk ? cs[p * hd + lane + 32 * k] : 0.0f;
        }
    }
    wait_prior_grid();
    TL_STAMP(g_pro_tl, blockIdx.x, 1);
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (live) {
        float *v = qkv + (long)t * ld + (long)h * hd;
        float x[E];
#pragma unroll
        for (int k = 0; k < E; k++) x[k] = __ldcg(v + lane + 32 * k);
        if (!isq && !isk) {
            float *dst = kv_at(r.v, r, h - H - HK, p, hd);
#pragma unroll
            for (int k = 0; k < E; k++) dst[lane + 32 * k] = x[k];
        } else {
            if (w) {
                float ss = 0.0f;
#pragma unroll
                for (int k = 0; k < E; k++) ss = fmaf(x[k], x[k], ss);
                float inv = rms_inv(warp_sum(ss), hd, eps);
#pragma unroll
                for (int k = 0; k < E; k++) x[k] = rms_scale(x[k], inv, wv[k]);
            }
            float o[E];
#pragma unroll
            for (int k = 0; k < HE; k++) {
                float a = x[k], b = x[k + HE], co = c[k], si = c[k + HE];
                o[k] = __fsub_rn(__fmul_rn(a, co), __fmul_rn(b, si));
                o[k + HE] = __fadd_rn(__fmul_rn(b, co), __fmul_rn(a, si));
            }
            float *dst = isk ? kv_at(r.k, r, h - H, p, hd) : NULL;
#pragma unroll
            for (int k = 0; k < E; k++) {
                v[lane + 32 * k] = o[k];
                if (isk) dst[lane + 32 * k] = o[k];
            }
        }
    }
#ifdef TERN_CUDA_TIMELINE
    __syncthreads();
#endif
    TL_STAMP(g_pro_tl, blockIdx.x, 6);
    TL_INFO(g_pro_tl, blockIdx.x, (unsigned long long)gridDim.x << 32);
}

extern "C" tern_status tern_cuda_qkv_rope_store(tern_cuda *c, float *d_qkv, long ld, int n, int n_heads,
                                                int n_kv_heads, int head_dim, int rope_dim, const void *d_qnorm,
                                                const void *d_knorm, tern_dtype wdt, float eps, const float *d_cs,
                                                const tern_cuda_attn_row *d_rows, const int *d_tok_row)
{
    if (head_dim > HEAD_MAX || rope_dim > head_dim || rope_dim % 2 || !d_cs)
        return tern_error(TERN_E_UNSUPPORTED, "cuda rope: head_dim %d / rope_dim %d (head_dim at most %d)", head_dim,
                          rope_dim, HEAD_MAX);
    if (n <= 0) return TERN_OK;
    long items = (long)n * (n_heads + 2 * n_kv_heads);
    if (c->pro_reg && rope_dim == head_dim && (head_dim == 64 || head_dim == 128 || head_dim == 256)) {
        /* TERN_CUDA_PRO_REG: the head in registers (the same bits) */
        auto kern = head_dim == 64 ? qkv_rope_reg_kernel<2> : head_dim == 128 ? qkv_rope_reg_kernel<4>
                                                                              : qkv_rope_reg_kernel<8>;
        return launch(c, "qkv_rope_store", kern, dim3((unsigned)((items + 3) / 4)), dim3(128), 0, d_qkv, ld, n,
                      n_heads, n_kv_heads, d_qnorm, d_knorm, wdt, eps, d_cs, d_rows, d_tok_row, (c->trigger & 2) != 0);
    }
    return launch(c, "qkv_rope_store", qkv_rope_store_kernel, dim3((unsigned)((items + 3) / 4)), dim3(128), 0, d_qkv,
                  ld, n, n_heads, n_kv_heads, head_dim, rope_dim, d_qnorm, d_knorm, wdt, eps, d_cs, d_rows, d_tok_row,
                  (c->trigger & 2) != 0);
}

extern "C" tern_status tern_cuda_head_norm_rope(tern_cuda *c, float *d_x, long ldx, int n, int n_heads, int head_dim,
                                                int rope_dim, const void *d_w, tern_dtype wdt, float eps,
                                                const float *d_cs, const int *d_pos)
{
    if (head_dim > HEAD_MAX || rope_dim > head_dim || rope_dim % 2)
        return tern_error(TERN_E_UNSUPPORTED, "cuda rope: head_dim %d / rope_dim %d (head_dim at most %d)", head_dim,
                          rope_dim, HEAD_MAX);
    if (n <= 0) return TERN_OK;
    long items = (long)n * n_heads;
    return launch(c, "head_norm_rope", head_norm_rope_kernel, dim3((unsigned)((items + 3) / 4)), dim3(128), 0, d_x, ldx, n,
                  n_heads, head_dim, rope_dim, d_w, wdt, eps, d_cs, d_pos);
}

extern "C" tern_status tern_cuda_rope(tern_cuda *c, float *d_x, long ldx, int n, int n_heads, int head_dim, int rope_dim,
                                      const float *d_cs, const int *d_pos)
{
    return tern_cuda_head_norm_rope(c, d_x, ldx, n, n_heads, head_dim, rope_dim, NULL, TERN_DT_F32, 0.0f, d_cs, d_pos);
}

__global__ void silu_mul_kernel(float *g, const float *__restrict__ u, long count)
{
    wait_prior_grid();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long)gridDim.x * blockDim.x) {
        g[i] = silu_mul(g[i], u[i]);
    }
}

__global__ void add_kernel(float *y, const float *__restrict__ x, long count)
{
    wait_prior_grid();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], x[i]);
}

static unsigned elt_blocks(long count)
{
    long b = (count + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

extern "C" tern_status tern_cuda_silu_mul(tern_cuda *c, float *d_g, const float *d_u, long count)
{
    if (count <= 0) return TERN_OK;
    return launch(c, "silu_mul", silu_mul_kernel, dim3(elt_blocks(count)), dim3(256), 0, d_g, d_u, count);
}

extern "C" tern_status tern_cuda_add(tern_cuda *c, float *d_y, const float *d_x, long count)
{
    if (count <= 0) return TERN_OK;
    return launch(c, "add", add_kernel, dim3(elt_blocks(count)), dim3(256), 0, d_y, d_x, count);
}

/* One block per (id, 1024 elements): each thread loads its 8 elements
 * before it stores any (one round trip, not one per element). */
enum { EMB_THREADS = 128, EMB_PER = 8 };

template <int DT>
__global__ void __launch_bounds__(EMB_THREADS) embed_kernel(const int32_t *__restrict__ ids,
                                                            const void *__restrict__ table, int d,
                                                            float *__restrict__ out)
{
    wait_prior_grid();
    long row = ids[blockIdx.x];
    int i0 = (blockIdx.y * EMB_THREADS + threadIdx.x) * EMB_PER;
    float v[EMB_PER];
#pragma unroll
    for (int e = 0; e < EMB_PER; e++) v[e] = i0 + e < d ? weight_at(table, (tern_dtype)DT, row * d + i0 + e) : 0.0f;
#pragma unroll
    for (int e = 0; e < EMB_PER; e++)
        if (i0 + e < d) out[(long)blockIdx.x * d + i0 + e] = v[e];
}

extern "C" tern_status tern_cuda_embed(tern_cuda *c, const int32_t *d_ids, int n, const void *d_table, tern_dtype dt,
                                       int d, float *d_out)
{
    if (n <= 0) return TERN_OK;
    dim3 grid(n, (d + EMB_THREADS * EMB_PER - 1) / (EMB_THREADS * EMB_PER));
    if (dt == TERN_DT_BF16)
        return launch(c, "embed", embed_kernel<TERN_DT_BF16>, grid, dim3(EMB_THREADS), 0, d_ids, d_table, d, d_out);
    if (dt == TERN_DT_F16)
        return launch(c, "embed", embed_kernel<TERN_DT_F16>, grid, dim3(EMB_THREADS), 0, d_ids, d_table, d, d_out);
    return launch(c, "embed", embed_kernel<TERN_DT_F32>, grid, dim3(EMB_THREADS), 0, d_ids, d_table, d, d_out);
}

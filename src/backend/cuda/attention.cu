/* Causal grouped-query attention over float32 head-major KV (flash-decoding).
 *
 * A query's keys are cut into fixed splits of TERN_CUDA_ATTN_SPLIT positions
 * counted from position 0. One block computes one (query, kv head, split)
 * for the query heads sharing that kv head: scores s = scale * (q . k)
 * (lanes add head-dim elements lane, lane+32, ... in order, then the fixed
 * butterfly), the split's max m, p = exp(s - m), l = sum p in key order, and
 * o = sum p v in key order. A second kernel folds the splits of each query in
 * split order: m' = max(m, m_s), o = o e^(m-m') + o_s e^(m_s-m'),
 * l likewise, out = o / l. Nothing depends on other queries, other rows or
 * the launch size, so prefill and decode of the same position agree bit for
 * bit. */
#include "backend/cuda/common.cuh"

enum { ATT_THREADS = 128, ATT_MAX_GROUP = 8, ATT_MAX_HD = 256, S = TERN_CUDA_ATTN_SPLIT };

static __device__ __forceinline__ int query_pos(const tern_cuda_attn_row &r, int t) { return r.len - r.n_q + (t - r.q0); }

__global__ void __launch_bounds__(ATT_THREADS) attn_split_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                 const int *__restrict__ tok_row, int max_splits,
                                                                 int n_heads, int n_kv_heads, int hd, float scale,
                                                                 const float *__restrict__ q, long ldq,
                                                                 float *__restrict__ part)
{
    __shared__ float qs[ATT_MAX_GROUP][ATT_MAX_HD];
    __shared__ float sc[ATT_MAX_GROUP][S];
    wait_prior_grid();
    int s = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    tern_cuda_attn_row r = rows[tok_row[t]];
    int vis = query_pos(r, t) + 1, j0 = s * S;
    if (j0 >= vis) return;
    int nk = vis - j0 < S ? vis - j0 : S;
    int G = n_heads / n_kv_heads, lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < G * hd; i += ATT_THREADS) {
        int g = i / hd, d = i % hd;
        qs[g][d] = q[(long)t * ldq + (long)(kvh * G + g) * hd + d];
    }
    __syncthreads();
    const float *K = r.k + (long)kvh * r.head_stride, *V = r.v + (long)kvh * r.head_stride;
    for (int jj = wid; jj < nk; jj += ATT_THREADS / 32) {
        const float *kr = K + (long)(j0 + jj) * hd;
        float kv[ATT_MAX_HD / 32];
#pragma unroll
        for (int i = 0; i < ATT_MAX_HD / 32; i++) kv[i] = lane + 32 * i < hd ? kr[lane + 32 * i] : 0.0f;
        for (int g = 0; g < G; g++) {
            float a = 0.0f;
#pragma unroll
            for (int i = 0; i < ATT_MAX_HD / 32; i++)
                if (lane + 32 * i < hd) a = fmaf(qs[g][lane + 32 * i], kv[i], a);
            a = warp_sum(a);
            if (lane == 0) sc[g][jj] = __fmul_rn(a, scale);
        }
    }
    __syncthreads();
    float *base = part + (((long)t * n_heads + kvh * G) * max_splits + s) * (hd + 2);
    long gstride = (long)max_splits * (hd + 2);
    if (threadIdx.x < G) {
        int g = threadIdx.x;
        float m = -INFINITY;
        for (int jj = 0; jj < nk; jj++) m = fmaxf(m, sc[g][jj]);
        float l = 0.0f;
        for (int jj = 0; jj < nk; jj++) {
            float p = expf(sc[g][jj] - m);
            sc[g][jj] = p;
            l = __fadd_rn(l, p);
        }
        base[g * gstride + hd] = m;
        base[g * gstride + hd + 1] = l;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += ATT_THREADS) {
        float acc[ATT_MAX_GROUP];
#pragma unroll
        for (int g = 0; g < ATT_MAX_GROUP; g++) acc[g] = 0.0f;
        for (int jj = 0; jj < nk; jj++) {
            float vv = V[(long)(j0 + jj) * hd + d];
#pragma unroll
            for (int g = 0; g < ATT_MAX_GROUP; g++)
                if (g < G) acc[g] = fmaf(sc[g][jj], vv, acc[g]);
        }
        for (int g = 0; g < G; g++) base[g * gstride + d] = acc[g];
    }
}

__global__ void attn_combine_kernel(const tern_cuda_attn_row *__restrict__ rows, const int *__restrict__ tok_row,
                                    int max_splits, int n_heads, int hd, const float *__restrict__ part,
                                    float *__restrict__ out)
{
    wait_prior_grid();
    int h = blockIdx.x, t = blockIdx.y;
    tern_cuda_attn_row r = rows[tok_row[t]];
    int vis = query_pos(r, t) + 1, ns = (vis + S - 1) / S;
    const float *p = part + ((long)t * n_heads + h) * max_splits * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float m = -INFINITY, l = 0.0f, o = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float *ps = p + (long)s * (hd + 2);
            float ms = ps[hd], mn = fmaxf(m, ms);
            float a = expf(m - mn), b = expf(ms - mn);
            l = __fadd_rn(__fmul_rn(l, a), __fmul_rn(ps[hd + 1], b));
            o = __fadd_rn(__fmul_rn(o, a), __fmul_rn(ps[d], b));
            m = mn;
        }
        out[((long)t * n_heads + h) * hd + d] = o / l;
    }
}

static int splits_for(int max_len) { return (max_len + S - 1) / S; }

extern "C" size_t tern_cuda_attention_tmp_bytes(int total_q, int max_len, int n_heads, int head_dim)
{
    return (size_t)total_q * n_heads * splits_for(max_len) * (head_dim + 2) * sizeof(float);
}

extern "C" tern_status tern_cuda_attention(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                           int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                           float scale, const float *d_q, long ldq, float *d_out, void *d_part)
{
    if (n_kv_heads <= 0 || n_heads % n_kv_heads || n_heads / n_kv_heads > ATT_MAX_GROUP || head_dim > ATT_MAX_HD)
        return tern_error(TERN_E_UNSUPPORTED,
                          "cuda attention: %d heads over %d kv heads, head_dim %d (at most %d heads per kv head and "
                          "head_dim %d)",
                          n_heads, n_kv_heads, head_dim, (int)ATT_MAX_GROUP, (int)ATT_MAX_HD);
    if (total_q <= 0) return TERN_OK;
    if (max_len <= 0) return tern_error(TERN_E_INVALID, "cuda attention: max_len %d", max_len);
    int ns = splits_for(max_len);
    tern_status st = launch(c, "attention", attn_split_kernel, dim3(ns, n_kv_heads, total_q), dim3(ATT_THREADS), 0,
                            d_rows, d_tok_row, ns, n_heads, n_kv_heads, head_dim, scale, d_q, ldq, (float *)d_part);
    if (st) return st;
    return launch(c, "attention combine", attn_combine_kernel, dim3(n_heads, total_q), dim3(head_dim < 128 ? head_dim : 128),
                  0, d_rows, d_tok_row, ns, n_heads, head_dim, (const float *)d_part, d_out);
}

__global__ void kv_write_kernel(const tern_cuda_attn_row *__restrict__ rows, const int *__restrict__ tok_row,
                                int n_kv_heads, int hd, const float *__restrict__ k, const float *__restrict__ v,
                                long ld)
{
    wait_prior_grid();
    int t = blockIdx.x;
    tern_cuda_attn_row r = rows[tok_row[t]];
    long pos = query_pos(r, t);
    int w = n_kv_heads * hd;
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        int h = i / hd, d = i % hd;
        long dst = (long)h * r.head_stride + pos * hd + d;
        r.k[dst] = k[(long)t * ld + i];
        r.v[dst] = v[(long)t * ld + i];
    }
}

extern "C" tern_status tern_cuda_kv_write(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                          int total_q, int n_kv_heads, int head_dim, const float *d_k, const float *d_v,
                                          long ld)
{
    if (total_q <= 0) return TERN_OK;
    return launch(c, "kv_write", kv_write_kernel, dim3(total_q), dim3(256), 0, d_rows, d_tok_row, n_kv_heads, head_dim,
                  d_k, d_v, ld);
}

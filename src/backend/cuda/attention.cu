/* Causal grouped-query attention over float32 head-major KV (flash-decoding).
 *
 * A query's keys are cut into fixed splits of TERN_CUDA_ATTN_SPLIT positions
 * counted from position 0 (each inside one block of a paged KV). One block computes one (query, kv head, split)
 * for the query heads sharing that kv head: it stages the split's keys and
 * values in shared memory with coalesced 16-byte loads, then one thread per
 * (head, key) forms s = scale * (q . k) over head_dim in order, the head's
 * warp takes the split's max m, p = exp(s - m) and l = sum p (fixed
 * butterfly), and one thread per dimension forms o = sum p v in key order.
 * The last block of a (query, kv head) to finish (an atomic count) folds the
 * splits in split order: m' = max(m, m_s), o = o e^(m-m') + o_s e^(m_s-m'),
 * l likewise, out = o / l. Nothing depends on other queries, other rows or
 * the launch size, so prefill and decode of the same position agree bit for
 * bit. */
#include "backend/cuda/attention.cuh"

enum { S = ATT_S };


/* Shared memory of one block: q [G][hd], k [S][hd+4] (padded so that the
 * 16-byte reads of 8 lanes at rows j..j+7 hit distinct banks), v [S][hd],
 * p [G][S]. */
static size_t att_smem(int G, int hd) { return sizeof(float) * ((size_t)G * hd + (size_t)S * (hd + 4) + (size_t)S * hd + (size_t)G * S); }

/* Instantiated for head_dim 16, 32, 64, 128 and 256 (a multiple of 4: the
 * 16-byte loads). */
template <int hd>
__global__ void __launch_bounds__(ATT_THREADS) attn_split_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                 const int *__restrict__ tok_row, int max_splits,
                                                                 int n_heads, int n_kv_heads, float scale,
                                                                 const float *__restrict__ q, long ldq,
                                                                 float *__restrict__ part, unsigned *counters,
                                                                 float *__restrict__ out, int trig,
                                                                 tern_cuda_attn_prologue pro, int fuse)
{
    extern __shared__ float smem[];
    __shared__ int is_last;
    /* The rows (uploaded before the pass) and the keys and values of the
     * positions before this pass (written by earlier passes) are read
     * before waiting for the previous kernel; the new ones after. */
    int s = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    tern_cuda_attn_row r = rows[tok_row[t]];
    int vis = query_pos(r, t) + 1, j0 = s * S, old = r.len - r.n_q;
    if (j0 >= vis) {
        wait_prior_grid();
        return;
    }
    int nk = vis - j0 < S ? vis - j0 : S;
    int G = n_heads / n_kv_heads, tid = threadIdx.x, lane = tid & 31;
    constexpr int KS = hd + 4;
    float *qs = smem, *ks = qs + G * hd, *vs = ks + S * KS, *ps = vs + S * hd;
    /* A split lies inside one KV block (block_tokens is a multiple of S). */
    const float *K = kv_at(r.k, r, kvh, j0, hd), *Vp = kv_at(r.v, r, kvh, j0, hd);
    int n4 = nk * hd / 4, n_old = old - j0 < 0 ? 0 : old - j0 < nk ? old - j0 : nk, o4 = n_old * hd / 4;
#pragma unroll 4
    for (int i = tid; i < o4; i += ATT_THREADS) {
        float4 kk = __ldcg(reinterpret_cast<const float4 *>(K) + i);
        float4 vv = __ldcg(reinterpret_cast<const float4 *>(Vp) + i);
        int j = i / (hd / 4), d = 4 * (i % (hd / 4));
        *reinterpret_cast<float4 *>(ks + j * KS + d) = kk;
        reinterpret_cast<float4 *>(vs)[i] = vv;
    }
    wait_prior_grid();
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (fuse) {
        /* Decode: this token's q heads normed and roped into qs; the split
         * holding its position forms the new key and value (stored in the
         * cache, and in ks / vs). */
        const float *qkv = q + (long)t * ldq, *csrow = pro.d_cs + (long)(vis - 1) * pro.rope_dim;
        int w = tid >> 5;
        for (int g = w; g < G; g += ATT_THREADS / 32)
            norm_rope_into(qkv + (long)(kvh * G + g) * hd, qs + g * hd, hd, pro.rope_dim, pro.d_qnorm, pro.wdt, pro.eps,
                           csrow, lane);
        if (n_old < nk) {
            int j = nk - 1;
            if (w == 0) {
                norm_rope_into(qkv + (long)(n_heads + kvh) * hd, ks + j * KS, hd, pro.rope_dim, pro.d_knorm, pro.wdt,
                               pro.eps, csrow, lane);
                float *dst = kv_at(r.k, r, kvh, vis - 1, hd);
                for (int i = lane; i < hd; i += 32) dst[i] = ks[j * KS + i];
            } else if (w == 1) {
                const float *vr = qkv + (long)(n_heads + n_kv_heads + kvh) * hd;
                float *dst = kv_at(r.v, r, kvh, vis - 1, hd);
                for (int i = lane; i < hd; i += 32) {
                    float v = __ldcg(vr + i);
                    vs[j * hd + i] = v;
                    dst[i] = v;
                }
            }
        }
    } else {
        for (int i = o4 + tid; i < n4; i += ATT_THREADS) {
            float4 kk = __ldcg(reinterpret_cast<const float4 *>(K) + i);
            float4 vv = __ldcg(reinterpret_cast<const float4 *>(Vp) + i);
            int j = i / (hd / 4), d = 4 * (i % (hd / 4));
            *reinterpret_cast<float4 *>(ks + j * KS + d) = kk;
            reinterpret_cast<float4 *>(vs)[i] = vv;
        }
        for (int i = tid; i < G * hd; i += ATT_THREADS) qs[i] = q[(long)t * ldq + (long)kvh * G * hd + i];
    }
    __syncthreads();
    float *base = part + (((long)t * n_heads + kvh * G) * max_splits + s) * (hd + 2);
    long gstride = (long)max_splits * (hd + 2);
    /* One warp per head (S = 32 keys = its lanes). */
    for (int g = tid >> 5; g < G; g += ATT_THREADS / 32) {
        int j = lane;
        float sc = -INFINITY;
        if (j < nk) {
            const float4 *qg = reinterpret_cast<const float4 *>(qs + g * hd);
            const float4 *kj = reinterpret_cast<const float4 *>(ks + j * KS);
            float a = 0.0f;
#pragma unroll
            for (int d = 0; d < hd / 4; d++) {
                float4 qa = qg[d], ka = kj[d];
                a = fmaf(qa.x, ka.x, a);
                a = fmaf(qa.y, ka.y, a);
                a = fmaf(qa.z, ka.z, a);
                a = fmaf(qa.w, ka.w, a);
            }
            sc = __fmul_rn(a, scale);
        }
        float m, l;
        ps[g * S + j] = split_softmax(sc, j, nk, &m, &l);
        if (lane == 0) {
            base[g * gstride + hd] = m;
            base[g * gstride + hd + 1] = l;
        }
    }
    __syncthreads();
    for (int d = tid; d < hd; d += ATT_THREADS) {
        float acc[ATT_MAX_GROUP];
#pragma unroll
        for (int g = 0; g < ATT_MAX_GROUP; g++) acc[g] = 0.0f;
#pragma unroll 8
        for (int j = 0; j < nk; j++) {
            float vv = vs[j * hd + d];
#pragma unroll
            for (int g = 0; g < ATT_MAX_GROUP; g++)
                if (g < G) acc[g] = fmaf(ps[g * S + j], vv, acc[g]);
        }
        for (int g = 0; g < G; g++) base[g * gstride + d] = acc[g];
    }
    /* The last split block of this (query, kv head) folds all splits
     * (attn_fold). */
    int ns = (vis + S - 1) / S;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        unsigned *cnt = counters + (long)t * n_kv_heads + kvh;
        unsigned done = atomicAdd(cnt, 1u);
        is_last = done == (unsigned)ns - 1;
        if (is_last) *cnt = 0;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    /* The fold's scratch: mx in the p buffer, the weights in the key and
     * value buffers (this split is done with them). */
    attn_fold<hd>(part, t, kvh, G, n_heads, max_splits, ns, ps, ks, S * KS + S * hd, out);
}

static int splits_for(int max_len) { return (max_len + S - 1) / S; }

static size_t part_bytes(int total_q, int max_len, int n_heads, int head_dim)
{
    return (size_t)total_q * n_heads * splits_for(max_len) * (head_dim + 2) * sizeof(float);
}

extern "C" size_t tern_cuda_attention_tmp_bytes(int total_q, int max_len, int n_heads, int head_dim)
{
    return part_bytes(total_q, max_len, n_heads, head_dim);
}

extern "C" size_t tern_cuda_attention_count_bytes(int total_q, int n_kv_heads)
{
    return (size_t)total_q * n_kv_heads * sizeof(unsigned);
}

extern "C" tern_status tern_cuda_attention(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                           int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                           float scale, const float *d_q, long ldq, float *d_out, void *d_part,
                                           unsigned *d_count, const tern_cuda_attn_prologue *pro)
{
    if (pro && (pro->rope_dim > head_dim || pro->rope_dim % 2 || !pro->d_cs))
        return tern_error(TERN_E_UNSUPPORTED, "cuda attention: rope_dim %d over head_dim %d", pro->rope_dim, head_dim);
    tern_cuda_attn_prologue none = {};
    tern_status sc = attn_shape_check(total_q > 0 ? max_len : 1, n_heads, n_kv_heads, head_dim);
    if (sc || total_q <= 0) return sc;
    int ns = splits_for(max_len);
    size_t smem = att_smem(n_heads / n_kv_heads, head_dim);
    void (*kern)(const tern_cuda_attn_row *, const int *, int, int, int, float, const float *, long, float *,
                 unsigned *, float *, int, tern_cuda_attn_prologue, int) = head_dim == 16    ? attn_split_kernel<16>
                                        : head_dim == 32  ? attn_split_kernel<32>
                                        : head_dim == 64  ? attn_split_kernel<64>
                                        : head_dim == 128 ? attn_split_kernel<128>
                                                          : attn_split_kernel<256>;
    /* Raised once per instance (to the largest asked), so that a graph
     * capture of the call queues the launch alone. */
    static size_t smem_set[5];
    int ki = head_dim == 16 ? 0 : head_dim == 32 ? 1 : head_dim == 64 ? 2 : head_dim == 128 ? 3 : 4;
    if (smem > smem_set[ki]) {
        CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                 "attention shared memory");
        smem_set[ki] = smem;
    }
    return launch(c, "attention", kern, dim3(ns, n_kv_heads, total_q), dim3(ATT_THREADS), smem, d_rows, d_tok_row, ns,
                  n_heads, n_kv_heads, scale, d_q, ldq, (float *)d_part, d_count, d_out, (c->trigger & 4) != 0,
                  pro ? *pro : none, pro != NULL);
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
        kv_at(r.k, r, h, pos, hd)[d] = k[(long)t * ld + i];
        kv_at(r.v, r, h, pos, hd)[d] = v[(long)t * ld + i];
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

/* Causal grouped-query attention over float32 head-major KV (flash-decoding).
 *
 * A query's keys are cut into fixed splits of TERN_CUDA_ATTN_SPLIT positions
 * counted from position 0 (each inside one block of a paged KV). One block
 * computes one (query, kv head, split) for the query heads sharing that kv
 * head: it stages the split's keys and values in shared memory with
 * coalesced 16-byte loads, then forms the heads' scores, softmax (m, l) and
 * o = sum p v on the tensor cores by attention.cuh's split arithmetic (the
 * heads are rows 0 .. G-1 of the 16; warp w forms key tile w's scores, each
 * takes a quarter of the output tiles). The last block of a (query, kv
 * head) to finish (an atomic count) folds the splits in split order
 * (attn_fold). Nothing depends on other queries, other rows or the launch
 * size, so prefill and decode of the same position agree bit for bit, and
 * the tiled prefill kernel (attention_tiled.cu) gives the same bits. */
#include "backend/cuda/attention.cuh"

enum { S = ATT_S };

#ifdef TERN_CUDA_TIMELINE
__device__ unsigned long long *g_att_tl;
#endif
/* the block's index in x, y, z order and the blocks (its timeline's) */
#define ATT_BLOCK ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x)
#define ATT_GRID ((unsigned long long)gridDim.x * gridDim.y * gridDim.z << 32)

/* The attention chain's stamps (cuda.h): the prologue kernel's into d_pro,
 * the split kernel's into d_att (NULL: none). */
extern "C" tern_status tern_cuda_set_attn_timeline(tern_cuda *c, unsigned long long *d_pro, unsigned long long *d_att)
{
    (void)c;
#ifdef TERN_CUDA_TIMELINE
    CUDA_TRY(cudaMemcpyToSymbol(g_att_tl, &d_att, sizeof d_att), "attention timeline");
#else
    (void)d_att;
#endif
    return tern_cuda_pro_timeline(d_pro);
}

/* Shared memory of one block: q [G][QKS], k [S][QKS] (att_qk_stride), v
 * [S][hd + 4] (the values' reads of keys 2t, 2t + 1 at dimension g hit
 * distinct banks). */
static size_t att_smem(int G, int hd)
{
    return sizeof(float) * ((size_t)G * att_qk_stride(hd) + (size_t)S * att_qk_stride(hd) + (size_t)S * (hd + 4));
}

/* Instantiated for head_dim 16, 32, 64, 128 and 256 (a multiple of 4: the
 * 16-byte loads) and two forms (FV): 1 with the last block's fold, 0
 * without (a launch of its own folds: the registers of the split's work
 * alone). */
template <int hd, int FV>
__global__ void __launch_bounds__(ATT_THREADS) attn_split_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                 const int *__restrict__ tok_row, int max_splits,
                                                                 int n_heads, int n_kv_heads, float scale,
                                                                 const float *__restrict__ q, long ldq,
                                                                 float *__restrict__ part, unsigned *counters,
                                                                 float *__restrict__ out, int trig,
                                                                 tern_cuda_attn_prologue pro, int fuse,
                                                                 int fold)
{
    extern __shared__ float smem[];
    __shared__ int is_last;
    /* The rows (uploaded before the pass) and the keys and values of the
     * positions before this pass (written by earlier passes) are read
     * before waiting for the previous kernel; the new ones after. */
    int s = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    TL_STAMP(g_att_tl, ATT_BLOCK, 0);
    tern_cuda_attn_row r = rows[tok_row[t]];
    int vis = query_pos(r, t) + 1, j0 = s * S, old = r.len - r.n_q;
    if (j0 >= vis) {
        wait_prior_grid();
        TL_INFO(g_att_tl, ATT_BLOCK, ATT_GRID);
        return;
    }
    int nk = vis - j0 < S ? vis - j0 : S;
    int G = n_heads / n_kv_heads, tid = threadIdx.x, lane = tid & 31;
    constexpr int KS = att_qk_stride(hd), VS = hd + 4;
    __shared__ float mx[ATT_MAX_GROUP], scs[ATT_MAX_GROUP][S];
    float *qs = smem, *ks = qs + G * KS, *vs = ks + S * KS;
    /* A split lies inside one KV block (block_tokens is a multiple of S). */
    const float *K = kv_at(r.k, r, kvh, j0, hd), *Vp = kv_at(r.v, r, kvh, j0, hd);
    int n4 = nk * hd / 4, n_old = old - j0 < 0 ? 0 : old - j0 < nk ? old - j0 : nk, o4 = n_old * hd / 4;
#pragma unroll 8
    for (int i = tid; i < o4; i += ATT_THREADS) {
        float4 kk = __ldcg(reinterpret_cast<const float4 *>(K) + i);
        float4 vv = __ldcg(reinterpret_cast<const float4 *>(Vp) + i);
        int j = i / (hd / 4), d = 4 * (i % (hd / 4));
        *reinterpret_cast<float4 *>(ks + j * KS + d) = kk;
        *reinterpret_cast<float4 *>(vs + j * VS + d) = vv;
    }
    /* Keys past the split's visible ones: zeros (their weights are 0, and
     * 0 times a stale value could be NaN). */
    for (int i = nk * hd / 4 + tid; i < S * hd / 4; i += ATT_THREADS) {
        int j = i / (hd / 4), d = 4 * (i % (hd / 4));
        *reinterpret_cast<float4 *>(ks + j * KS + d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4 *>(vs + j * VS + d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    /* The prologue's table row and norm weights (never written by a
     * kernel) as float32, so that after the wait only the new q, k and v are
     * read. */
    __shared__ float pcs[ATT_MAX_HD], pnw[2][ATT_MAX_HD];
    if (fuse) {
        const float *csrow = pro.d_cs + (long)(vis - 1) * pro.rope_dim;
        for (int i = tid; i < pro.rope_dim; i += ATT_THREADS) pcs[i] = csrow[i];
        for (int i = tid; i < hd; i += ATT_THREADS) {
            if (pro.d_qnorm) pnw[0][i] = weight_at(pro.d_qnorm, pro.wdt, i);
            if (pro.d_knorm) pnw[1][i] = weight_at(pro.d_knorm, pro.wdt, i);
        }
    }
    TL_STAMP(g_att_tl, ATT_BLOCK, 1);
    wait_prior_grid();
    TL_STAMP(g_att_tl, ATT_BLOCK, 2);
#if __CUDA_ARCH__ >= 900
    if (trig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (fuse) {
        /* Decode: this token's q heads (and, in the split holding its
         * position, its key and value) read in one round of 16-byte loads
         * into qs (ks / vs), the value stored in the cache; then a warp a
         * head normed and roped in place (qkv_rope_store's bits), the key
         * stored. */
        const float *qkv = q + (long)t * ldq;
        const bool mine = n_old < nk;
        const int j = nk - 1, w = tid >> 5;
        for (int i = tid; i < G * hd / 4; i += ATT_THREADS) {
            float4 v4 = __ldcg(reinterpret_cast<const float4 *>(qkv + (long)kvh * G * hd) + i);
            int e = 4 * i;
            *reinterpret_cast<float4 *>(qs + (e / hd) * KS + e % hd) = v4;
        }
        if (mine && tid < hd / 2) {
            bool isv = tid >= hd / 4;
            int d = 4 * (isv ? tid - hd / 4 : tid);
            float4 v4 = __ldcg(reinterpret_cast<const float4 *>(qkv + (long)(n_heads + (isv ? n_kv_heads : 0) + kvh) * hd + d));
            *reinterpret_cast<float4 *>((isv ? vs + j * VS : ks + j * KS) + d) = v4;
            if (isv) *reinterpret_cast<float4 *>(kv_at(r.v, r, kvh, vis - 1, hd) + d) = v4;
        }
        __syncthreads();
        for (int hh = w; hh < G + (mine ? 1 : 0); hh += ATT_THREADS / 32) {
            bool isk = hh == G;
            float *row = isk ? ks + j * KS : qs + hh * KS;
            norm_rope_smem(row, hd, pro.rope_dim, (isk ? pro.d_knorm : pro.d_qnorm) ? pnw[isk ? 1 : 0] : NULL, pro.eps,
                           pcs, lane);
            if (isk) {
                float *dst = kv_at(r.k, r, kvh, vis - 1, hd);
                for (int i = lane; i < hd; i += 32) dst[i] = row[i];
            }
        }
    } else {
        for (int i = o4 + tid; i < n4; i += ATT_THREADS) {
            float4 kk = __ldcg(reinterpret_cast<const float4 *>(K) + i);
            float4 vv = __ldcg(reinterpret_cast<const float4 *>(Vp) + i);
            int j = i / (hd / 4), d = 4 * (i % (hd / 4));
            *reinterpret_cast<float4 *>(ks + j * KS + d) = kk;
            *reinterpret_cast<float4 *>(vs + j * VS + d) = vv;
        }
        for (int i = tid; i < G * hd; i += ATT_THREADS) qs[(i / hd) * KS + i % hd] = q[(long)t * ldq + (long)kvh * G * hd + i];
    }
    __syncthreads();
    TL_STAMP(g_att_tl, ATT_BLOCK, 3);
    float *base = part + (((long)t * n_heads + kvh * G) * max_splits + s) * (hd + 2);
    long gstride = (long)max_splits * (hd + 2);
    {
        /* Rows g < G are the heads; every warp takes the split's scores
         * and weights, warp w the output tiles w, w + 4, ... */
        int g = lane >> 2, tq = lane & 3, w = tid >> 5;
        const float *q0 = qs + (g < G ? g : 0) * KS;
        /* warp w forms key tile w's scores (rows g < G: the heads; the
         * rows past them are zeros and see no key) and every warp takes
         * all four from shared memory */
        float acc[4][4], mine[1][4];
        att_scores_tiles<hd, 1>(
            mine, w,
            [&](int D, uint32_t(&ah)[2][4], uint32_t(&al)[2][4]) {
                float4 a0 = g < G ? *reinterpret_cast<const float4 *>(q0 + 16 * D + 4 * tq)
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                att_qfrag(a0, make_float4(0.0f, 0.0f, 0.0f, 0.0f), ah, al);
            },
            [&](int n, int D, uint4 &kh, uint4 &kl) {
                float4 k4 = *reinterpret_cast<const float4 *>(ks + (8 * n + g) * KS + 16 * D + 4 * tq);
                att_split(k4.x, kh.x, kl.x);
                att_split(k4.y, kh.y, kl.y);
                att_split(k4.z, kh.z, kl.z);
                att_split(k4.w, kh.w, kl.w);
            });
        if (g < G) {
            scs[g][8 * w + 2 * tq] = mine[0][0];
            scs[g][8 * w + 2 * tq + 1] = mine[0][1];
        }
        __syncthreads();
#pragma unroll
        for (int n = 0; n < 4; n++) {
            acc[n][0] = g < G ? scs[g][8 * n + 2 * tq] : 0.0f;
            acc[n][1] = g < G ? scs[g][8 * n + 2 * tq + 1] : 0.0f;
            acc[n][2] = acc[n][3] = 0.0f;
        }
        float m[2], l[2];
        att_softmax(acc, scale, g < G ? nk : 0, 0, m, l);
        if (w == 0 && tq == 0 && g < G) {
            base[g * gstride + hd] = m[0];
            base[g * gstride + hd + 1] = l[0];
        }
        uint32_t ph[4][4], pl[4][4];
        att_pfrag(acc, ph, pl);
#pragma unroll
        for (int nt = w; nt < hd / 8; nt += ATT_THREADS / 32) {
            float o[4];
            att_pv(o, ph, pl, [&](int n, uint2 &vh, uint2 &vl) {
                const float *vp = vs + (8 * n + 2 * tq) * VS + 8 * nt + g;
                att_split(vp[0], vh.x, vl.x);
                att_split(vp[VS], vh.y, vl.y);
            });
            if (g < G) {
                base[g * gstride + 8 * nt + 2 * tq] = o[0];
                base[g * gstride + 8 * nt + 2 * tq + 1] = o[1];
            }
        }
    }
    /* The last split block of this (query, kv head) folds all splits
     * (attn_fold), unless a separate launch folds them (fold 0). */
    TL_STAMP(g_att_tl, ATT_BLOCK, 4);
    TL_INFO(g_att_tl, ATT_BLOCK, 1ull | ATT_GRID);
    if (FV == 0 || !fold) return;
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
    TL_STAMP(g_att_tl, ATT_BLOCK, 5);
    if (!is_last) return;
    __threadfence();
    /* The fold's scratch: the weights in the key and value buffers (this
     * split is done with them). */
    attn_fold<hd>(part, t, kvh, G, n_heads, max_splits, ns, mx, ks, S * KS + S * VS, out);
#ifdef TERN_CUDA_TIMELINE
    __syncthreads();
#endif
    TL_STAMP(g_att_tl, ATT_BLOCK, 6);
    TL_INFO(g_att_tl, ATT_BLOCK, 3ull | ATT_GRID);
}

/* The fold of calls with many splits, one block per (query, head): the
 * same steps in the same order as the split kernel's last block (attn_fold
 * with one head), each thread one or two outputs with 16 splits' values
 * read ahead of their steps, and four times the blocks. */
template <int hd>
__global__ void __launch_bounds__(ATT_THREADS) attn_fold_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                const int *__restrict__ tok_row, int max_splits,
                                                                int n_heads, const float *__restrict__ part,
                                                                float *__restrict__ out)
{
    enum { CAP = 4096 };
    __shared__ float mrun[1], ab[CAP];
    wait_prior_grid();
    int t = blockIdx.x, h = blockIdx.y;
    tern_cuda_attn_row r = rows[tok_row[t]];
    int ns = (query_pos(r, t) + 1 + S - 1) / S;
    attn_fold<hd, 1, 16>(part, t, h, 1, n_heads, max_splits, ns, mrun, ab, CAP, out);
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
    /* Past c->fold_splits splits (TERN_CUDA_FOLD_SPLITS) a separate launch
     * folds them, with four times the blocks of the split kernel's last
     * ones (the same bits). */
    bool apart = c->fold_splits > 0 && ns > c->fold_splits;
    int fv = apart ? 0 : 1;
    typedef void (*split_fn)(const tern_cuda_attn_row *, const int *, int, int, int, float, const float *, long,
                             float *, unsigned *, float *, int, tern_cuda_attn_prologue, int, int);
#define ATT_FORMS(h) {attn_split_kernel<h, 0>, attn_split_kernel<h, 1>}
    static const split_fn forms[5][2] = {ATT_FORMS(16), ATT_FORMS(32), ATT_FORMS(64), ATT_FORMS(128), ATT_FORMS(256)};
#undef ATT_FORMS
    int ki = head_dim == 16 ? 0 : head_dim == 32 ? 1 : head_dim == 64 ? 2 : head_dim == 128 ? 3 : 4;
    split_fn kern = forms[ki][fv];
    /* Raised once per instance (to the largest asked), so that a graph
     * capture of the call queues the launch alone. */
    static size_t smem_set[5][2];
    if (smem > smem_set[ki][fv]) {
        CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                 "attention shared memory");
        smem_set[ki][fv] = smem;
    }
    tern_status st = launch(c, "attention", kern, dim3(ns, n_kv_heads, total_q), dim3(ATT_THREADS), smem, d_rows,
                            d_tok_row, ns, n_heads, n_kv_heads, scale, d_q, ldq, (float *)d_part, d_count, d_out,
                            (c->trigger & 4) != 0, pro ? *pro : none, pro != NULL, apart ? 0 : 1);
    if (st || !apart) return st;
    void (*fold)(const tern_cuda_attn_row *, const int *, int, int, const float *, float *) =
        head_dim == 16    ? attn_fold_kernel<16>
        : head_dim == 32  ? attn_fold_kernel<32>
        : head_dim == 64  ? attn_fold_kernel<64>
        : head_dim == 128 ? attn_fold_kernel<128>
                          : attn_fold_kernel<256>;
    return launch(c, "attention_fold", fold, dim3(total_q, n_heads), dim3(ATT_THREADS), 0, d_rows, d_tok_row, ns,
                  n_heads, (const float *)d_part, d_out);
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

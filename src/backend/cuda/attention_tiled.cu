/* The split attention for calls where rows have many queries (prefill):
 * the arithmetic of attention.cu for every (query, head, split), with a
 * block taking the splits of a tile of queries instead of one.
 *
 * A block computes one (tile, kv head, split): the tile is AT_QH / G
 * consecutive queries of the call (cut where the row changes, each piece
 * staging its row's keys), so up to AT_QH (query, head) pairs share the
 * split's keys and values in shared memory. Each thread forms AT_QH / 16
 * x 4 scores, every one as in attention.cu: s = scale * (q . k) by fmaf over
 * head_dim in order; one warp per (query, head) then takes m (butterfly
 * max), p = exp(s - m) and l = warp_sum(p) over the split's 32 keys; each
 * output o = sum p v adds the keys in order. A second kernel folds each
 * (query, kv head)'s splits by attn_fold, one block each. The
 * bits of a query are therefore those of attention.cu (ops_test checks
 * it), whatever the tile and the launch. */
#include "backend/cuda/attention.cuh"

/* (query, head) pairs per tile: 32 measured faster than 64 (prefill 512 of
 * the Qwen3-8B shape on the H200: the kernel 232 against 267 us a layer). */
enum { S = ATT_S, AT_QH = 32 };

/* Shared memory: q [AT_QH][hd]; k [S][hd + 4] (rows 4 banks apart: the
 * 16-byte reads of keys j, j + 1, ... hit distinct banks), then in the
 * same place v [S][hd] once the scores are formed (a smaller block: more
 * of them share a multiprocessor; prefill 512 of the Qwen3-8B shape 36.9
 * against 37.6 ms); p [AT_QH][S]. */
static size_t at_smem(int hd) { return sizeof(float) * ((size_t)AT_QH * hd + (size_t)S * (hd + 4) + (size_t)AT_QH * S); }

template <int hd>
__global__ void __launch_bounds__(ATT_THREADS) attn_tiled_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                 const int *__restrict__ tok_row, int total_q,
                                                                 int max_splits, int n_heads, int n_kv_heads,
                                                                 float scale, const float *__restrict__ q, long ldq,
                                                                 float *__restrict__ part)
{
    extern __shared__ float smem[];
    __shared__ int nk_q[AT_QH];
    constexpr int KS = hd + 4, NDG = hd / 4, QSTEP = ATT_THREADS / NDG;
    float *qs = smem, *ks = qs + AT_QH * hd, *vs = ks, *ps = ks + S * KS;
    int s = blockIdx.x, kvh = blockIdx.y, G = n_heads / n_kv_heads, QT = AT_QH / G;
    int tid = threadIdx.x, lane = tid & 31, j0 = s * S;
    int ta = blockIdx.z * QT, tb = ta + QT < total_q ? ta + QT : total_q;
    wait_prior_grid();
    for (int t0 = ta; t0 < tb;) {
        tern_cuda_attn_row r = rows[tok_row[t0]];
        int t1 = r.q0 + r.n_q < tb ? r.q0 + r.n_q : tb, nq = t1 - t0, nqh = nq * G;
        /* The piece's queries see keys 0 .. pos; the split is needed up to
         * the last query's position. */
        int vis_max = query_pos(r, t1 - 1) + 1;
        if (j0 >= vis_max) {
            t0 = t1;
            continue;
        }
        int nk_max = vis_max - j0 < S ? vis_max - j0 : S;
        const float *K = kv_at(r.k, r, kvh, j0, hd), *Vp = kv_at(r.v, r, kvh, j0, hd);
#pragma unroll 4
        for (int i = tid; i < nk_max * hd / 4; i += ATT_THREADS) {
            float4 kk = __ldcg(reinterpret_cast<const float4 *>(K) + i);
            int j = i / (hd / 4), d = 4 * (i % (hd / 4));
            *reinterpret_cast<float4 *>(ks + j * KS + d) = kk;
        }
        for (int i = tid; i < nqh * hd / 4; i += ATT_THREADS) {
            int qh = i / (hd / 4), d = 4 * (i % (hd / 4)), iq = qh / G, g = qh % G;
            reinterpret_cast<float4 *>(qs)[i] =
                *reinterpret_cast<const float4 *>(q + (long)(t0 + iq) * ldq + (long)(kvh * G + g) * hd + d);
        }
        if (tid < nq) {
            int vis = query_pos(r, t0 + tid) + 1;
            nk_q[tid] = vis - j0 <= 0 ? 0 : vis - j0 < S ? vis - j0 : S;
        }
        __syncthreads();
        /* Scores: thread (qg, kg) takes pairs qh = QPT qg + i and keys
         * j = kg + 8 u. */
        {
            constexpr int QPT = AT_QH / 16;
            int qg = tid >> 3, kg = tid & 7;
            float a[QPT][4];
#pragma unroll
            for (int i = 0; i < QPT; i++)
#pragma unroll
                for (int u = 0; u < 4; u++) a[i][u] = 0.0f;
            if (QPT * qg < nqh) {
#pragma unroll 4
                for (int d = 0; d < hd; d += 4) {
                    float4 qa[QPT], ka[4];
#pragma unroll
                    for (int i = 0; i < QPT; i++) qa[i] = *reinterpret_cast<const float4 *>(qs + (QPT * qg + i) * hd + d);
#pragma unroll
                    for (int u = 0; u < 4; u++) ka[u] = *reinterpret_cast<const float4 *>(ks + (kg + 8 * u) * KS + d);
#pragma unroll
                    for (int i = 0; i < QPT; i++)
#pragma unroll
                        for (int u = 0; u < 4; u++) {
                            a[i][u] = fmaf(qa[i].x, ka[u].x, a[i][u]);
                            a[i][u] = fmaf(qa[i].y, ka[u].y, a[i][u]);
                            a[i][u] = fmaf(qa[i].z, ka[u].z, a[i][u]);
                            a[i][u] = fmaf(qa[i].w, ka[u].w, a[i][u]);
                        }
                }
#pragma unroll
                for (int i = 0; i < QPT; i++) {
                    int qh = QPT * qg + i;
                    if (qh >= nqh) continue;
                    int nk = nk_q[qh / G];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        int j = kg + 8 * u;
                        ps[qh * S + j] = j < nk ? __fmul_rn(a[i][u], scale) : -INFINITY;
                    }
                }
            }
        }
        __syncthreads();
        /* The values over the keys (their scores are formed), then the
         * softmax of each (query, head) over the split: one warp, lane = key. */
#pragma unroll 4
        for (int i = tid; i < nk_max * hd / 4; i += ATT_THREADS)
            reinterpret_cast<float4 *>(vs)[i] = __ldcg(reinterpret_cast<const float4 *>(Vp) + i);
        for (int qh = tid >> 5; qh < nqh; qh += ATT_THREADS / 32) {
            int iq = qh / G, g = qh % G, nk = nk_q[iq];
            if (nk <= 0) continue;
            int j = lane;
            float m, l;
            ps[qh * S + j] = split_softmax(ps[qh * S + j], j, nk, &m, &l);
            if (lane == 0) {
                float *base = part + (((long)(t0 + iq) * n_heads + kvh * G + g) * max_splits + s) * (hd + 2);
                base[hd] = m;
                base[hd + 1] = l;
            }
        }
        __syncthreads();
        /* o = sum_j p v in key order: thread (dg, qh0) takes 4 dimensions
         * of the pairs qh0, qh0 + QSTEP, ..., eight at a time. */
        {
            int dg = tid % NDG, qh0 = tid / NDG, d = 4 * dg;
            for (int c0 = qh0; c0 < nqh; c0 += 8 * QSTEP) {
                float4 acc[8];
                int nk[8];
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    acc[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    int qh = c0 + c * QSTEP;
                    nk[c] = qh < nqh ? nk_q[qh / G] : 0;
                }
                for (int j = 0; j < nk_max; j++) {
                    float4 vv = *reinterpret_cast<const float4 *>(vs + j * hd + d);
#pragma unroll
                    for (int c = 0; c < 8; c++)
                        if (j < nk[c]) {
                            float p = ps[(c0 + c * QSTEP) * S + j];
                            acc[c].x = fmaf(p, vv.x, acc[c].x);
                            acc[c].y = fmaf(p, vv.y, acc[c].y);
                            acc[c].z = fmaf(p, vv.z, acc[c].z);
                            acc[c].w = fmaf(p, vv.w, acc[c].w);
                        }
                }
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    int qh = c0 + c * QSTEP;
                    if (qh >= nqh || nk[c] <= 0) continue;
                    int iq = qh / G, g = qh % G;
                    float *base = part + (((long)(t0 + iq) * n_heads + kvh * G + g) * max_splits + s) * (hd + 2);
                    base[d] = acc[c].x; /* split records are hd + 2 floats: not 16-byte aligned */
                    base[d + 1] = acc[c].y;
                    base[d + 2] = acc[c].z;
                    base[d + 3] = acc[c].w;
                }
            }
        }
        t0 = t1;
        __syncthreads();
    }
}

/* One block per (query, kv head): the fold of its splits (attn_fold). */
template <int hd>
__global__ void __launch_bounds__(ATT_THREADS) attn_fold_kernel(const tern_cuda_attn_row *__restrict__ rows,
                                                                const int *__restrict__ tok_row, int max_splits,
                                                                int n_heads, int n_kv_heads,
                                                                const float *__restrict__ part, float *__restrict__ out)
{
    enum { CAP = 2048 };
    __shared__ float mx[ATT_MAX_GROUP], bs[CAP];
    wait_prior_grid();
    int t = blockIdx.x, kvh = blockIdx.y;
    tern_cuda_attn_row r = rows[tok_row[t]];
    int ns = (query_pos(r, t) + 1 + S - 1) / S;
    attn_fold<hd>(part, t, kvh, n_heads / n_kv_heads, n_heads, max_splits, ns, mx, bs, CAP, out);
}

template <int hd>
static tern_status tiled_launch(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row, int total_q,
                                int ns, int n_heads, int n_kv_heads, float scale, const float *d_q, long ldq,
                                float *d_out, float *d_part)
{
    auto kern = attn_tiled_kernel<hd>;
    static int ready;
    size_t smem = at_smem(hd);
    tern_status ss = smem_limit_once((const void *)kern, smem, &ready, "attention shared memory");
    if (ss) return ss;
    int QT = AT_QH / (n_heads / n_kv_heads);
    tern_status st = launch(c, "attention_tiled", kern, dim3(ns, n_kv_heads, (total_q + QT - 1) / QT),
                            dim3(ATT_THREADS), smem, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q,
                            ldq, d_part);
    if (st) return st;
    return launch(c, "attention_fold", attn_fold_kernel<hd>, dim3(total_q, n_kv_heads), dim3(ATT_THREADS), 0, d_rows,
                  d_tok_row, ns, n_heads, n_kv_heads, (const float *)d_part, d_out);
}

extern "C" tern_status tern_cuda_attention_tiled(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                                 int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                                 float scale, const float *d_q, long ldq, float *d_out, void *d_part)
{
    tern_status sc = attn_shape_check(total_q > 0 ? max_len : 1, n_heads, n_kv_heads, head_dim);
    if (sc || total_q <= 0) return sc;
    int ns = (max_len + S - 1) / S;
    float *part = (float *)d_part;
    switch (head_dim) {
    case 16: return tiled_launch<16>(c, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q, ldq, d_out, part);
    case 32: return tiled_launch<32>(c, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q, ldq, d_out, part);
    case 64: return tiled_launch<64>(c, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q, ldq, d_out, part);
    case 128:
        return tiled_launch<128>(c, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q, ldq, d_out, part);
    default:
        return tiled_launch<256>(c, d_rows, d_tok_row, total_q, ns, n_heads, n_kv_heads, scale, d_q, ldq, d_out, part);
    }
}

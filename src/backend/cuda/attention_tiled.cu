/* The split attention for calls where rows have many queries (prefill):
 * the arithmetic of attention.cu for every (query, head, split), with a
 * block taking all the splits of a tile of queries and folding them itself.
 *
 * A block computes one (tile, kv head): the tile is QH / G consecutive
 * queries of the call (cut where the row changes, each piece staging its
 * row's keys), up to QH (at_qh) (query, head) pairs, 16 per row group as
 * the rows of attention.cuh's split arithmetic, two warps a row group. For
 * each split in order a row group's warps form two key tiles' scores each
 * and share them through shared memory, both take the softmax (m, l) of
 * all four, and each forms half of o = sum p v: the same bits as the
 * per-query kernel's. They fold them into the rows' sums by the step the
 * per-query kernel's fold takes over its records (attn_fold_step, from the
 * running max). So a query's bits are those of attention.cu (ops_test
 * checks it), whatever the tile and the launch, and no split record leaves
 * the block. */
#include "backend/cuda/attention.cuh"

enum { S = ATT_S, AT_VS = S + 4, AT_SS = S + 8 };

/* (query, head) pairs of a block: 64 (eight warps, one block a
 * multiprocessor by shared memory), 16 for head_dim 256 (the most that
 * fits). */
__host__ __device__ constexpr int at_qh(int hd) { return hd <= 128 ? 64 : 16; }

/* q as split words, hi and lo [QH][QKS] (for head_dim up to 128: split
 * once a piece, not once a split; float32 [QH][QKS] for 256, the most that
 * fits). */
__host__ __device__ constexpr bool at_qsplit(int hd) { return hd <= 128; }

/* Shared memory: q (at_qsplit); the split's keys hi / lo [S][QKS]
 * (tf32 words); its values hi / lo transposed, [hd][AT_VS], key 8n + 2t + e
 * at column 8t + 2n + e, so that a lane's eight words of a dimension are two
 * 16-byte reads (rows 36 words apart: distinct banks); the next split's keys
 * and values as read, keys [S][hd], values [S][hd + 4] (copied while this
 * split computes; a warp turns 32 keys' values at one dimension into split
 * words, reads and stores on distinct banks); the split's raw scores
 * [QH][AT_SS] (a half warp's 8-byte stores and loads on distinct banks). */
static size_t at_smem(int hd, int qh)
{
    size_t qk = att_qk_stride(hd);
    return sizeof(float) * ((at_qsplit(hd) ? 2 : 1) * (size_t)qh * qk + 2 * (size_t)S * qk + 2 * (size_t)hd * AT_VS +
                            (size_t)S * hd + (size_t)S * (hd + 4) + (size_t)qh * AT_SS);
}

/* Column of key j in the transposed values. */
__device__ __forceinline__ int at_vcol(int j) { return 8 * ((j & 7) >> 1) + 2 * (j >> 3) + (j & 1); }

template <int hd, int QH>
__global__ void __launch_bounds__(4 * QH, 1)
    attn_tiled_kernel(const tern_cuda_attn_row *__restrict__ rows, const int *__restrict__ tok_row, int total_q,
                      int n_heads, int n_kv_heads, float scale, const float *__restrict__ q, long ldq,
                      float *__restrict__ out)
{
    extern __shared__ float smem[];
    constexpr int KS = att_qk_stride(hd), NT = hd / 8, NH = NT / 2, NTH = 4 * QH;
    constexpr bool QP = at_qsplit(hd);
    float *qs = smem;
    uint32_t *qhs = reinterpret_cast<uint32_t *>(smem), *qls = qhs + QH * KS;
    uint32_t *kh = qhs + (QP ? 2 : 1) * QH * KS, *kl = kh + S * KS, *vh = kl + S * KS,
             *vl = vh + hd * AT_VS;
    float *rk = reinterpret_cast<float *>(vl + hd * AT_VS), *rv = rk + S * hd, *scs = rv + S * (hd + 4);
    int kvh = blockIdx.y, G = n_heads / n_kv_heads, QT = QH / G;
    /* warps 2 rg and 2 rg + 1 take row group rg; half hf: key tiles 2 hf,
     * 2 hf + 1 and output tiles hf NH .. hf NH + NH - 1 */
    int tid = threadIdx.x, lane = tid & 31, rg = tid >> 6, hf = (tid >> 5) & 1, g = lane >> 2, tq = lane & 3;
    /* the tiles in reverse: the longest (last) queries start first */
    int ta = (gridDim.z - 1 - blockIdx.z) * QT, tb = ta + QT < total_q ? ta + QT : total_q;
    wait_prior_grid();
    for (int t0 = ta; t0 < tb;) {
        tern_cuda_attn_row r = rows[tok_row[t0]];
        int t1 = r.q0 + r.n_q < tb ? r.q0 + r.n_q : tb, nq = t1 - t0, nqh = nq * G;
        int vis = query_pos(r, t1 - 1) + 1, ns = (vis + S - 1) / S;
        /* Copies split sp's keys and values as read into rk / rv (cp.async;
         * keys past the piece's last position are zeros). */
        auto fetch = [&](int sp) {
            int j0 = sp * S, nk = vis - j0 < S ? vis - j0 : S;
            const float *K = kv_at(r.k, r, kvh, j0, hd), *V = kv_at(r.v, r, kvh, j0, hd);
#pragma unroll 4
            for (int i = tid; i < S * hd / 4; i += NTH) {
                bool in = i / (hd / 4) < nk;
                cp16(rk + 4 * i, reinterpret_cast<const float4 *>(K) + (in ? i : 0), in);
                cp16(rv + 4 * i + 4 * (i / (hd / 4)), reinterpret_cast<const float4 *>(V) + (in ? i : 0), in);
            }
            cp_commit();
        };
        /* The piece's pairs (query t0 + p / G, head p % G), zero past nqh,
         * once every warp is done with the last piece's. */
        __syncthreads();
        fetch(0);
        for (int i = tid; i < QH * hd / 4; i += NTH) {
            int p = i / (hd / 4), d = 4 * (i % (hd / 4));
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (p < nqh)
                v = *reinterpret_cast<const float4 *>(q + (long)(t0 + p / G) * ldq + (long)(kvh * G + p % G) * hd + d);
            if constexpr (QP) {
                uint4 h, l;
                att_split(v.x, h.x, l.x);
                att_split(v.y, h.y, l.y);
                att_split(v.z, h.z, l.z);
                att_split(v.w, h.w, l.w);
                *reinterpret_cast<uint4 *>(qhs + p * KS + d) = h;
                *reinterpret_cast<uint4 *>(qls + p * KS + d) = l;
            } else {
                *reinterpret_cast<float4 *>(qs + p * KS + d) = v;
            }
        }
        /* This lane's rows g and g + 8 of the warp: their positions (-1:
         * no pair). */
        int pos[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int p = 16 * rg + g + 8 * h;
            pos[h] = p < nqh ? query_pos(r, t0 + p / G) : -1;
        }
        int qo = (16 * rg + g) * KS + 4 * tq;
        float *sc0 = scs + (16 * rg + g) * AT_SS + 2 * tq, *sc1 = sc0 + 8 * AT_SS;
        /* rows g and g + 8's A fragments of group D (att_qfrag's words) */
        auto qf = [&](int D, uint32_t(&ah)[2][4], uint32_t(&al)[2][4]) {
            int o = qo + 16 * D;
            if constexpr (QP) {
                const uint4 *hp = reinterpret_cast<const uint4 *>(qhs + o);
                const uint4 *lp = reinterpret_cast<const uint4 *>(qls + o);
                uint4 h0 = hp[0], h1 = hp[2 * KS], l0 = lp[0], l1 = lp[2 * KS];
                ah[0][0] = h0.x, ah[0][1] = h1.x, ah[0][2] = h0.y, ah[0][3] = h1.y;
                ah[1][0] = h0.z, ah[1][1] = h1.z, ah[1][2] = h0.w, ah[1][3] = h1.w;
                al[0][0] = l0.x, al[0][1] = l1.x, al[0][2] = l0.y, al[0][3] = l1.y;
                al[1][0] = l0.z, al[1][1] = l1.z, al[1][2] = l0.w, al[1][3] = l1.w;
            } else {
                const float4 *qp = reinterpret_cast<const float4 *>(qs + o);
                att_qfrag(qp[0], qp[2 * KS], ah, al);
            }
        };
        auto kf = [&](int n, int D, uint4 &h, uint4 &l) {
            int o = (8 * n + g) * KS + 16 * D + 4 * tq;
            h = *reinterpret_cast<const uint4 *>(kh + o);
            l = *reinterpret_cast<const uint4 *>(kl + o);
        };
        auto nk_of = [&](int h, int sp) {
            int v = pos[h] + 1 - sp * S;
            return v <= 0 ? 0 : v < S ? v : S;
        };
        /* Each split's (m, l, o), folded in split order (attn_fold_step). */
        float Mrun[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.0f, 0.0f}, osum[NH][4];
#pragma unroll
        for (int nt = 0; nt < NH; nt++) osum[nt][0] = osum[nt][1] = osum[nt][2] = osum[nt][3] = 0.0f;
        for (int sp = 0; sp < ns; sp++) {
            /* split sp as split words (every warp done with sp - 1's), then
             * sp + 1's copies while sp computes */
            cp_wait<0>();
            __syncthreads();
#pragma unroll 4
            for (int i = tid; i < S * hd / 4; i += NTH) {
                /* keys: a warp's lanes at consecutive dimensions of a key */
                int j = i / (hd / 4), d = 4 * (i % (hd / 4));
                float4 k4 = reinterpret_cast<const float4 *>(rk)[i];
                uint4 h, l;
                att_split(k4.x, h.x, l.x);
                att_split(k4.y, h.y, l.y);
                att_split(k4.z, h.z, l.z);
                att_split(k4.w, h.w, l.w);
                *reinterpret_cast<uint4 *>(kh + j * KS + d) = h;
                *reinterpret_cast<uint4 *>(kl + j * KS + d) = l;
                /* values: a warp's lanes at the 32 keys of four dimensions
                 * (rows hd + 4 apart, columns a permutation of 0 .. 31) */
                int jv = i % S, dv = 4 * (i / S), c = at_vcol(jv);
                float4 v4 = *reinterpret_cast<const float4 *>(rv + jv * (hd + 4) + dv);
                const float vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
                for (int e = 0; e < 4; e++) att_split(vv[e], vh[(dv + e) * AT_VS + c], vl[(dv + e) * AT_VS + c]);
            }
            __syncthreads();
            if (sp + 1 < ns) fetch(sp + 1);
            /* this warp's two key tiles, then the row group's four */
            float acc[4][4], m[2], l[2], b[2], mine[2][4];
            att_scores_tiles<hd, 2>(mine, 2 * hf, qf, kf);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                *reinterpret_cast<float2 *>(sc0 + 8 * (2 * hf + i)) = make_float2(mine[i][0], mine[i][1]);
                *reinterpret_cast<float2 *>(sc1 + 8 * (2 * hf + i)) = make_float2(mine[i][2], mine[i][3]);
            }
            asm volatile("bar.sync %0, 64;" ::"r"(1 + rg) : "memory");
#pragma unroll
            for (int n = 0; n < 4; n++) {
                float2 a0 = *reinterpret_cast<const float2 *>(sc0 + 8 * n),
                       a1 = *reinterpret_cast<const float2 *>(sc1 + 8 * n);
                acc[n][0] = a0.x;
                acc[n][1] = a0.y;
                acc[n][2] = a1.x;
                acc[n][3] = a1.y;
            }
            int nk0 = nk_of(0, sp), nk1 = nk_of(1, sp);
            att_softmax(acc, scale, nk0, nk1, m, l);
            float a[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float run = fmaxf(Mrun[h], m[h]);
                a[h] = expf(Mrun[h] - run);
                b[h] = expf(m[h] - run);
                if (h ? nk1 : nk0) {
                    lsum[h] = attn_fold_step(lsum[h], a[h], b[h], l[h]);
                    Mrun[h] = run;
                }
            }
            uint32_t ph[4][4], pl[4][4];
            att_pfrag(acc, ph, pl);
#pragma unroll
            for (int nt = 0; nt < NH; nt++) {
                float o[4];
                att_pv(o, ph, pl, [&](int n, uint2 &h2, uint2 &l2) {
                    int o2 = (8 * (hf * NH + nt) + g) * AT_VS + 8 * tq + 2 * n;
                    h2 = *reinterpret_cast<const uint2 *>(vh + o2);
                    l2 = *reinterpret_cast<const uint2 *>(vl + o2);
                });
                if (nk0) {
                    osum[nt][0] = attn_fold_step(osum[nt][0], a[0], b[0], o[0]);
                    osum[nt][1] = attn_fold_step(osum[nt][1], a[0], b[0], o[1]);
                }
                if (nk1) {
                    osum[nt][2] = attn_fold_step(osum[nt][2], a[1], b[1], o[2]);
                    osum[nt][3] = attn_fold_step(osum[nt][3], a[1], b[1], o[3]);
                }
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int p = 16 * rg + g + 8 * h;
            if (pos[h] < 0) continue;
            float *op = out + ((long)(t0 + p / G) * n_heads + kvh * G + p % G) * hd + 8 * hf * NH + 2 * tq;
#pragma unroll
            for (int nt = 0; nt < NH; nt++) {
                op[8 * nt] = osum[nt][2 * h] / lsum[h];
                op[8 * nt + 1] = osum[nt][2 * h + 1] / lsum[h];
            }
        }
        t0 = t1;
    }
}

template <int hd>
static tern_status tiled_launch(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row, int total_q,
                                int n_heads, int n_kv_heads, float scale, const float *d_q, long ldq, float *d_out)
{
    constexpr int QH = at_qh(hd);
    auto kern = attn_tiled_kernel<hd, QH>;
    static int ready;
    size_t smem = at_smem(hd, QH);
    tern_status ss = smem_limit_once((const void *)kern, smem, &ready, "attention shared memory");
    if (ss) return ss;
    int QT = QH / (n_heads / n_kv_heads);
    return launch(c, "attention_tiled", kern, dim3(1, n_kv_heads, (total_q + QT - 1) / QT), dim3(4 * QH), smem, d_rows,
                  d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
}

extern "C" tern_status tern_cuda_attention_tiled(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                                 int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                                 float scale, const float *d_q, long ldq, float *d_out)
{
    tern_status sc = attn_shape_check(total_q > 0 ? max_len : 1, n_heads, n_kv_heads, head_dim);
    if (sc || total_q <= 0) return sc;
    switch (head_dim) {
    case 16: return tiled_launch<16>(c, d_rows, d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
    case 32: return tiled_launch<32>(c, d_rows, d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
    case 64: return tiled_launch<64>(c, d_rows, d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
    case 128: return tiled_launch<128>(c, d_rows, d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
    default: return tiled_launch<256>(c, d_rows, d_tok_row, total_q, n_heads, n_kv_heads, scale, d_q, ldq, d_out);
    }
}

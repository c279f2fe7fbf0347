/* AVX-512 p.V: tiles of 4 queries x 64 dims held in 16 accumulators; each
 * key's 64 values are loaded once per tile and fused-multiply-added into
 * every query of the tile that can see that key. */
#include <immintrin.h>

#include "backend/cpu/attn_pv.h"

enum { QT = 4, DT = 64 };

static void tile(const float *p, long ldp, const int *len, int nq, const float *V, int hd, int d0, float *out,
                 long ldo, int accumulate)
{
    int dn = hd - d0 < DT ? hd - d0 : DT, nv = (dn + 15) / 16;
    __mmask16 last = (__mmask16)((1u << (dn - (nv - 1) * 16)) - 1);
    __m512 acc[QT][4];
    for (int q = 0; q < QT; q++)
        for (int c = 0; c < 4; c++)
            acc[q][c] = accumulate && q < nq && c < nv
                            ? _mm512_maskz_loadu_ps(c == nv - 1 ? last : (__mmask16)0xffff, out + q * ldo + d0 + 16 * c)
                            : _mm512_setzero_ps();
    int jmin = len[0], jmax = len[0];
    for (int q = 1; q < nq; q++) {
        jmin = len[q] < jmin ? len[q] : jmin;
        jmax = len[q] > jmax ? len[q] : jmax;
    }
    for (int j = 0; j < jmax; j++) {
        const float *v = V + (long)j * hd + d0;
        __m512 vv[4];
        for (int c = 0; c < nv; c++)
            vv[c] = c == nv - 1 ? _mm512_maskz_loadu_ps(last, v + 16 * c) : _mm512_loadu_ps(v + 16 * c);
        for (int q = 0; q < nq; q++) {
            if (j >= jmin && j >= len[q]) continue;
            __m512 w = _mm512_set1_ps(p[q * ldp + j]);
            for (int c = 0; c < nv; c++) acc[q][c] = _mm512_fmadd_ps(w, vv[c], acc[q][c]);
        }
    }
    for (int q = 0; q < nq; q++)
        for (int c = 0; c < nv; c++) {
            float *o = out + q * ldo + d0 + 16 * c;
            if (c == nv - 1) _mm512_mask_storeu_ps(o, last, acc[q][c]);
            else _mm512_storeu_ps(o, acc[q][c]);
        }
}

void tern_attn_pv_avx512(const float *p, long ldp, const int *len, int M, const float *V, int hd, float *out,
                         long ldo, int accumulate)
{
    for (int q0 = 0; q0 < M; q0 += QT) {
        int nq = M - q0 < QT ? M - q0 : QT;
        for (int d0 = 0; d0 < hd; d0 += DT)
            tile(p + q0 * ldp, ldp, len + q0, nq, V, hd, d0, out + q0 * ldo, ldo, accumulate);
    }
}

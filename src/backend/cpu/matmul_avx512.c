/* AVX-512 matmul kernels (built with -mavx512f/bw/vl/dq/bf16, reached only
 * after the cpuid check in isa.c).
 *
 * Per output element the arithmetic is fixed:
 *   float32 activations: one 16-lane accumulator, fma over k in steps of 16,
 *     the last partial step with masked (zero) lanes;
 *   bf16 activations x bf16 weights: one 16-lane accumulator, vdpbf16ps over
 *     k in steps of 32, activations zero-padded to a multiple of 32 and the
 *     weight tail masked to zero;
 * then the 16 lanes are summed by the tree in hsum16 (or hsum16_x16, the
 * same additions for 16 accumulators at once). Register tiles (MR rows of
 * x by NR rows of w for batches, 1 by NRD for a single decode row) and the
 * weight layout (row-major or panels) only decide which elements run side
 * by side and where their weights are read, never the arithmetic of one
 * element.
 *
 * Addressing: a tile starts at the weight of its row 0, k 0; weight (j, k)
 * of the tile is at element j*rs + (k / 32)*cs + k % 32 from there, with
 * rs = K, cs = 32 row-major (= j*K + k) and rs = 32, cs = 384 in panels.
 * Tiles never straddle a panel: they start at multiples of NR and NR
 * divides TERN_PANEL_ROWS. */
#include "backend/cpu/matmul_kern.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/panel.h"

#include <immintrin.h>

#include "tern/dtype.h"

#define KERN_INLINE static inline __attribute__((always_inline))

enum { MR = 4, NR = 6 };

/* Few rows of x (decode) make the product a stream over w. Row-major
 * weights: software prefetch into L2 this far ahead of each of the rows
 * being read keeps enough misses in flight for one core to approach DRAM
 * bandwidth (measured on Zen 4: ~1.6x over the hardware prefetcher alone).
 * Panels are one sequential stream: in huge pages the hardware prefetcher
 * alone streams fastest; in 4 KB pages it stops at every page boundary, and
 * a shorter software lead covers that. Prefill blocks sit in L2 already and
 * skip it. */
enum { PF_ROWS_BYTES = 24576, PF_PANEL_BYTES = 6144, PF_MAX_ROWS = 16 };

_Static_assert((int)TERN_PANEL_ROWS % (int)NR == 0 && (int)TERN_PANEL_K == 32,
               "tiles must not straddle panels");

KERN_INLINE long k_off(int panels, long k)
{
    return panels ? (k >> 5) * (TERN_PANEL_ROWS * TERN_PANEL_K) + (k & 31) : k;
}

/* Element offset of the tile starting at weight row n. */
KERN_INLINE long tile_off(int panels, int K, int n)
{
    return panels ? tern_panel_offset(K, n, 0) : (long)n * K;
}

/* ((l0+l8) + (l4+l12)) + ((l2+l10) + (l6+l14)) ... : halves, quarters, pairs. */
KERN_INLINE float hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* hsum16 of 16 accumulators at once: every lane pair is added exactly as
 * hsum16 adds it (IEEE addition is commutative), so out[e] is bit-identical
 * to hsum16(a[e]) at about a third of the instructions. */
KERN_INLINE void hsum16_x16(const __m512 *a, float *out)
{
    __m512 t[8], u[4], v[2];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++)     /* halves: q0,q1 of a[2p]; q2,q3 of a[2p+1] */
        t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xee));
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++)     /* quarters: one 128-bit lane per accumulator */
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0xdd));
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++)     /* pairs */
        v[p] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0xee));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], 0x88), _mm512_shuffle_ps(v[0], v[1], 0xdd));
    /* lane 4L+c now holds a[4c+L]: transpose back to natural order */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, r));
}

/* Reduces a tile's accumulators into y: full MR x NR tiles batched, the
 * others lane by lane (loops over constants so the accumulators stay in
 * registers). */
KERN_INLINE void store_tile(int mr, int nr, __m512 acc[MR][NR], float *y, long ldy)
{
    if (mr == MR && nr == NR) {
        __m512 a[32];
        float r[32];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
            for (int j = 0; j < NR; j++) a[i * NR + j] = acc[i][j];
#pragma GCC unroll 8
        for (int e = MR * NR; e < 32; e++) a[e] = _mm512_setzero_ps();
        hsum16_x16(a, r);
        hsum16_x16(a + 16, r + 16);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
            for (int j = 0; j < NR; j++) y[i * ldy + j] = r[i * NR + j];
        return;
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++)
            if (i < mr && j < nr) y[i * ldy + j] = hsum16(acc[i][j]);
}

KERN_INLINE size_t wsize(tern_dtype wdt)
{
    return wdt == TERN_DT_F32 ? 4 : 2;
}

KERN_INLINE __m512 bf16x16_to_f32(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 weights starting at element i, widened to float32. */
KERN_INLINE __m512 load_w16(tern_dtype wdt, const void *w, long i)
{
    if (wdt == TERN_DT_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (wdt == TERN_DT_BF16) return bf16x16_to_f32(h);
    return _mm512_cvtph_ps(h);
}

KERN_INLINE __m512 load_w16_tail(tern_dtype wdt, const void *w, long i, __mmask16 m)
{
    if (wdt == TERN_DT_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (wdt == TERN_DT_BF16) return bf16x16_to_f32(h);
    return _mm512_cvtph_ps(h);
}

/* y[i][j] for i < mr, j < nr; with constant mr/nr/panels (always_inline)
 * the guards fold away and the accumulators live in registers. pf: prefetch
 * the weights pfd bytes ahead. */
KERN_INLINE void tile_f32act(tern_dtype wdt, int panels, int pf, int pfd, int mr, int nr,
                             const float *x, long ldx, int K, const void *w, float *y, long ldy)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 acc[MR][NR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 xv[MR];
        long ko = k_off(panels, k);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = i < mr ? _mm512_loadu_ps(x + i * ldx + k) : _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m512 wv = load_w16(wdt, w, j * rs + ko);
            if (pf) _mm_prefetch((const char *)w + (size_t)(j * rs + ko) * wsize(wdt) + pfd, _MM_HINT_T1);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        long ko = k_off(panels, k);
        __m512 xv[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = i < mr ? _mm512_maskz_loadu_ps(m, x + i * ldx + k) : _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m512 wv = load_w16_tail(wdt, w, j * rs + ko, m);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    store_tile(mr, nr, acc, y, ldy);
}

/* x is bf16, rows padded with zeros to a multiple of 32 elements. */
KERN_INLINE void tile_bf16act(int panels, int pf, int pfd, int mr, int nr, const uint16_t *x,
                              long ldx, int K, const uint16_t *w, float *y, long ldy)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 acc[MR][NR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512bh xv[MR];
        long ko = k_off(panels, k);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = (__m512bh)(i < mr ? _mm512_loadu_si512(x + i * ldx + k) : _mm512_setzero_si512());
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m512bh wv = (__m512bh)_mm512_loadu_si512(w + j * rs + ko);
            if (pf) _mm_prefetch((const char *)(w + j * rs + ko) + pfd, _MM_HINT_T1);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
        }
    }
    if (k < K) {
        __mmask32 m = (__mmask32)((1ull << (K - k)) - 1u);
        long ko = k_off(panels, k);
        __m512bh xv[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = (__m512bh)(i < mr ? _mm512_loadu_si512(x + i * ldx + k) : _mm512_setzero_si512());
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + j * rs + ko);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
        }
    }
    store_tile(mr, nr, acc, y, ldy);
}

/* Decode (one row of x): NRD rows of w side by side, one whole panel in
 * the panel layout. Twice the streams of a 4 x 6 tile in flight and half
 * the tile overheads: ~20% more bandwidth per core on Zen 4 with
 * row-major weights. Same per-element arithmetic as the tiles above. */
enum { NRD = 12 };
_Static_assert((int)NRD == (int)TERN_PANEL_ROWS, "a decode tile is one panel");

KERN_INLINE void row_f32act(tern_dtype wdt, int panels, int pf, int pfd, const float *x, int K,
                            const void *w, float *y)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 acc[NRD];
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) acc[j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 xv = _mm512_loadu_ps(x + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            acc[j] = _mm512_fmadd_ps(xv, load_w16(wdt, w, j * rs + ko), acc[j]);
            if (pf) _mm_prefetch((const char *)w + (size_t)(j * rs + ko) * wsize(wdt) + pfd, _MM_HINT_T1);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++)
            acc[j] = _mm512_fmadd_ps(xv, load_w16_tail(wdt, w, j * rs + ko, m), acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) y[j] = hsum16(acc[j]);
}

KERN_INLINE void row_bf16act(int panels, int pf, int pfd, const uint16_t *x, int K, const uint16_t *w,
                             float *y)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 acc[NRD];
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) acc[j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512bh xv = (__m512bh)_mm512_loadu_si512(x + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512bh wv = (__m512bh)_mm512_loadu_si512(w + j * rs + ko);
            if (pf) _mm_prefetch((const char *)(w + j * rs + ko) + pfd, _MM_HINT_T1);
            acc[j] = _mm512_dpbf16_ps(acc[j], xv, wv);
        }
    }
    if (k < K) {
        __mmask32 m = (__mmask32)((1ull << (K - k)) - 1u);
        __m512bh xv = (__m512bh)_mm512_loadu_si512(x + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + j * rs + ko);
            acc[j] = _mm512_dpbf16_ps(acc[j], xv, wv);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) y[j] = hsum16(acc[j]);
}

/* Reduces the two rows of NRD accumulators of a pair kernel into y (row 0)
 * and y + ldy (row 1), with the batched hsum16_x16. */
KERN_INLINE void store_pair(const __m512 *a0, const __m512 *a1, float *y, long ldy)
{
    __m512 a[32];
    float r[32];
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) {
        a[j] = a0[j];
        a[16 + j] = a1[j];
    }
#pragma GCC unroll 4
    for (int j = NRD; j < 16; j++) a[j] = a[16 + j] = _mm512_setzero_ps();
    hsum16_x16(a, r);
    hsum16_x16(a + 16, r + 16);
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) {
        y[j] = r[j];
        y[ldy + j] = r[16 + j];
    }
}

/* Small batches over panels (2 <= M <= PF_MAX_ROWS): two rows of x
 * against NRD rows of w, 24 accumulators. Each panel (or group of NRD rows) is streamed once
 * per pair of x rows and stays in L1/L2 for the next pair, so a batch of
 * decode rows reads the weights from memory in the same sequential stream
 * as a single row. Same per-element arithmetic as the tiles. */
KERN_INLINE void pair_f32act(tern_dtype wdt, int panels, int pf, int pfd, const float *x, long ldx, int K,
                             const void *w, float *y, long ldy)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 a0[NRD], a1[NRD];
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + ldx + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512 wv = load_w16(wdt, w, j * rs + ko);
            if (pf) _mm_prefetch((const char *)w + (size_t)(j * rs + ko) * wsize(wdt) + pfd, _MM_HINT_T1);
            a0[j] = _mm512_fmadd_ps(x0, wv, a0[j]);
            a1[j] = _mm512_fmadd_ps(x1, wv, a1[j]);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 x0 = _mm512_maskz_loadu_ps(m, x + k), x1 = _mm512_maskz_loadu_ps(m, x + ldx + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512 wv = load_w16_tail(wdt, w, j * rs + ko, m);
            a0[j] = _mm512_fmadd_ps(x0, wv, a0[j]);
            a1[j] = _mm512_fmadd_ps(x1, wv, a1[j]);
        }
    }
    store_pair(a0, a1, y, ldy);
}

KERN_INLINE void pair_bf16act(int panels, int pf, int pfd, const uint16_t *x, long ldx, int K,
                              const uint16_t *w, float *y, long ldy)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m512 a0[NRD], a1[NRD];
#pragma GCC unroll 16
    for (int j = 0; j < NRD; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    long k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512bh x0 = (__m512bh)_mm512_loadu_si512(x + k), x1 = (__m512bh)_mm512_loadu_si512(x + ldx + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512bh wv = (__m512bh)_mm512_loadu_si512(w + j * rs + ko);
            if (pf) _mm_prefetch((const char *)(w + j * rs + ko) + pfd, _MM_HINT_T1);
            a0[j] = _mm512_dpbf16_ps(a0[j], x0, wv);
            a1[j] = _mm512_dpbf16_ps(a1[j], x1, wv);
        }
    }
    if (k < K) {
        __mmask32 m = (__mmask32)((1ull << (K - k)) - 1u);
        __m512bh x0 = (__m512bh)_mm512_loadu_si512(x + k), x1 = (__m512bh)_mm512_loadu_si512(x + ldx + k);
        long ko = k_off(panels, k);
#pragma GCC unroll 16
        for (int j = 0; j < NRD; j++) {
            __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + j * rs + ko);
            a0[j] = _mm512_dpbf16_ps(a0[j], x0, wv);
            a1[j] = _mm512_dpbf16_ps(a1[j], x1, wv);
        }
    }
    store_pair(a0, a1, y, ldy);
}

/* Prefetch distance in a small batch over panels. With more than one pass
 * over a panel (M > 2), the later passes read it from cache and memory
 * would idle meanwhile: every pass prefetches one whole panel ahead instead
 * (measured on Zen 4, lm_head shape, M = 3..8: ~1.3x over prefetching only
 * in the first pass, which in turn beats none). Row-major weights keep the
 * register tiles with their per-row lead: the pair kernels were slower on
 * them for the small cache-resident products of attention (a few percent
 * of decode). */
KERN_INLINE int batch_pfd(int panels, int pfd, int M, int K, int wsz)
{
    if (!panels || M <= 2) return pfd;
    return (int)(TERN_PANEL_ROWS * tern_panel_kp(K) * wsz);
}

/* Small batches: every group of NRD weight rows from *n0 on, the x rows in
 * pairs (and a single last row); *n0 is left at the first row not done. */
KERN_INLINE void batch_f32act(tern_dtype wdt, int panels, int pf, int pfd, const float *x, long ldx,
                              int M, int K, const void *w, int *n0, int n1, float *y, long ldy)
{
    size_t wsz = wsize(wdt);
    for (; *n0 + NRD <= n1; *n0 += NRD) {
        const void *wn = (const char *)w + (size_t)tile_off(panels, K, *n0) * wsz;
        int m = 0;
        for (; m + 2 <= M; m += 2)
            pair_f32act(wdt, panels, pf, pfd, x + m * ldx, ldx, K, wn, y + m * ldy + *n0, ldy);
        if (m < M) row_f32act(wdt, panels, pf, pfd, x + m * ldx, K, wn, y + m * ldy + *n0);
    }
}

KERN_INLINE void batch_bf16act(int panels, int pf, int pfd, const uint16_t *x, long ldx, int M,
                               int K, const uint16_t *w, int *n0, int n1, float *y, long ldy)
{
    for (; *n0 + NRD <= n1; *n0 += NRD) {
        const uint16_t *wn = w + tile_off(panels, K, *n0);
        int m = 0;
        for (; m + 2 <= M; m += 2)
            pair_bf16act(panels, pf, pfd, x + m * ldx, ldx, K, wn, y + m * ldy + *n0, ldy);
        if (m < M) row_bf16act(panels, pf, pfd, x + m * ldx, K, wn, y + m * ldy + *n0);
    }
}

/* Walks the block in MR x NR tiles; full tiles (in both prefetch flavours)
 * and the single-row tiles of decode get specialised code, the ragged
 * corners the guarded one. */
KERN_INLINE void full_f32act(tern_dtype wdt, int panels, int pf, int pfd, int mr, const float *xm,
                             long ldx, int K, const void *wn, float *yn, long ldy)
{
    switch (mr * 2 + pf) {
    case 9: tile_f32act(wdt, panels, 1, pfd, 4, NR, xm, ldx, K, wn, yn, ldy); break;
    case 8: tile_f32act(wdt, panels, 0, 0, 4, NR, xm, ldx, K, wn, yn, ldy); break;
    case 7: tile_f32act(wdt, panels, 1, pfd, 3, NR, xm, ldx, K, wn, yn, ldy); break;
    case 6: tile_f32act(wdt, panels, 0, 0, 3, NR, xm, ldx, K, wn, yn, ldy); break;
    case 5: tile_f32act(wdt, panels, 1, pfd, 2, NR, xm, ldx, K, wn, yn, ldy); break;
    case 4: tile_f32act(wdt, panels, 0, 0, 2, NR, xm, ldx, K, wn, yn, ldy); break;
    case 3: tile_f32act(wdt, panels, 1, pfd, 1, NR, xm, ldx, K, wn, yn, ldy); break;
    default: tile_f32act(wdt, panels, 0, 0, 1, NR, xm, ldx, K, wn, yn, ldy); break;
    }
}

KERN_INLINE void block_f32act(tern_dtype wdt, int panels, int pfd, const float *x, long ldx,
                              int M, int K, const void *w, int n0, int n1, float *y, long ldy)
{
    size_t wsz = wsize(wdt);
    int pf = M <= PF_MAX_ROWS && pfd;
    if (M == 1)
        for (; n0 + NRD <= n1; n0 += NRD)
            row_f32act(wdt, panels, pfd != 0, pfd, x, K,
                       (const char *)w + (size_t)tile_off(panels, K, n0) * wsz, y + n0);
    else if (M <= PF_MAX_ROWS && panels) {
        int d = batch_pfd(panels, pfd, M, K, (int)wsz);
        if (d) batch_f32act(wdt, panels, 1, d, x, ldx, M, K, w, &n0, n1, y, ldy);
        else batch_f32act(wdt, panels, 0, 0, x, ldx, M, K, w, &n0, n1, y, ldy);
    }
    for (int m = 0; m < M; m += MR) {
        int mr = M - m < MR ? M - m : MR;
        const float *xm = x + m * ldx;
        float *ym = y + m * ldy;
        int n = n0;
        for (; n + NR <= n1; n += NR)
            full_f32act(wdt, panels, pf, pfd, mr, xm, ldx, K,
                        (const char *)w + (size_t)tile_off(panels, K, n) * wsz, ym + n, ldy);
        if (n < n1)
            tile_f32act(wdt, panels, 0, 0, mr, n1 - n, xm, ldx, K,
                        (const char *)w + (size_t)tile_off(panels, K, n) * wsz, ym + n, ldy);
    }
}

KERN_INLINE void layouts_f32act(tern_dtype wdt, const float *x, long ldx, int M, int K,
                                const void *w, int layout, int n0, int n1, float *y, long ldy)
{
    if (layout == TERN_WL_ROWS)
        block_f32act(wdt, 0, PF_ROWS_BYTES, x, ldx, M, K, w, n0, n1, y, ldy);
    else if (layout == TERN_WL_PANELS)
        block_f32act(wdt, 1, PF_PANEL_BYTES, x, ldx, M, K, w, n0, n1, y, ldy);
    else
        block_f32act(wdt, 1, 0, x, ldx, M, K, w, n0, n1, y, ldy);
}

static void mm_f32_f32(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                       int n1, float *y, long ldy)
{
    layouts_f32act(TERN_DT_F32, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void mm_f32_f16(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                       int n1, float *y, long ldy)
{
    layouts_f32act(TERN_DT_F16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void mm_f32_bf16(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                        int n1, float *y, long ldy)
{
    layouts_f32act(TERN_DT_BF16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

KERN_INLINE void full_bf16act(int panels, int pf, int pfd, int mr, const uint16_t *xm, long ldx,
                              int K, const uint16_t *wn, float *yn, long ldy)
{
    switch (mr * 2 + pf) {
    case 9: tile_bf16act(panels, 1, pfd, 4, NR, xm, ldx, K, wn, yn, ldy); break;
    case 8: tile_bf16act(panels, 0, 0, 4, NR, xm, ldx, K, wn, yn, ldy); break;
    case 7: tile_bf16act(panels, 1, pfd, 3, NR, xm, ldx, K, wn, yn, ldy); break;
    case 6: tile_bf16act(panels, 0, 0, 3, NR, xm, ldx, K, wn, yn, ldy); break;
    case 5: tile_bf16act(panels, 1, pfd, 2, NR, xm, ldx, K, wn, yn, ldy); break;
    case 4: tile_bf16act(panels, 0, 0, 2, NR, xm, ldx, K, wn, yn, ldy); break;
    case 3: tile_bf16act(panels, 1, pfd, 1, NR, xm, ldx, K, wn, yn, ldy); break;
    default: tile_bf16act(panels, 0, 0, 1, NR, xm, ldx, K, wn, yn, ldy); break;
    }
}

KERN_INLINE void block_bf16act(int panels, int pfd, const uint16_t *x, long ldx, int M, int K,
                               const uint16_t *w, int n0, int n1, float *y, long ldy)
{
    int pf = M <= PF_MAX_ROWS && pfd;
    if (M == 1)
        for (; n0 + NRD <= n1; n0 += NRD)
            row_bf16act(panels, pfd != 0, pfd, x, K, w + tile_off(panels, K, n0), y + n0);
    else if (M <= PF_MAX_ROWS && panels) {
        int d = batch_pfd(panels, pfd, M, K, 2);
        if (d) batch_bf16act(panels, 1, d, x, ldx, M, K, w, &n0, n1, y, ldy);
        else batch_bf16act(panels, 0, 0, x, ldx, M, K, w, &n0, n1, y, ldy);
    }
    for (int m = 0; m < M; m += MR) {
        int mr = M - m < MR ? M - m : MR;
        const uint16_t *xm = x + m * ldx;
        float *ym = y + m * ldy;
        int n = n0;
        for (; n + NR <= n1; n += NR)
            full_bf16act(panels, pf, pfd, mr, xm, ldx, K, w + tile_off(panels, K, n), ym + n, ldy);
        if (n < n1)
            tile_bf16act(panels, 0, 0, mr, n1 - n, xm, ldx, K, w + tile_off(panels, K, n), ym + n,
                         ldy);
    }
}

static void mm_bf16_bf16(const void *xv, long ldx, int M, int K, const void *wv, int layout,
                         int n0, int n1, float *y, long ldy)
{
    if (layout == TERN_WL_ROWS)
        block_bf16act(0, PF_ROWS_BYTES, xv, ldx, M, K, wv, n0, n1, y, ldy);
    else if (layout == TERN_WL_PANELS)
        block_bf16act(1, PF_PANEL_BYTES, xv, ldx, M, K, wv, n0, n1, y, ldy);
    else
        block_bf16act(1, 0, xv, ldx, M, K, wv, n0, n1, y, ldy);
}

/* Elementwise RNE exactly as tern_f32_to_bf16 (NaN kept quiet), so the
 * rounded activations do not depend on the ISA; rows zero-padded to 32. */
static void round_bf16(const float *x, int M, int K, void *outv, long ldo)
{
    uint16_t *out = outv;
    const __m512i lsb = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int m = 0; m < M; m++) {
        const float *xr = x + (long)m * K;
        uint16_t *o = out + (long)m * ldo;
        long k = 0;
        for (; k < K; k += 16) {
            __mmask16 msk = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
            __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(msk, xr + k));
            __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias,
                            _mm512_and_si512(_mm512_srli_epi32(u, 16), lsb)));
            __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absmask), inf);
            r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
            _mm256_storeu_si256((__m256i *)(o + k), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        }
        for (; k < ldo; k++) o[k] = 0;
    }
}

void tern_mm_table_avx512(tern_mm_table *t)
{
    t->f32act[0] = mm_f32_f32;
    t->f32act[1] = mm_f32_f16;
    t->f32act[2] = mm_f32_bf16;
    t->bf16act = mm_bf16_bf16;
    t->round_act = round_bf16;
    t->act_elem_bytes = 2;
    t->act_k_align = 32;
}

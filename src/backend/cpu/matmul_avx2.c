/* AVX2 + FMA + F16C matmul kernels (reached only after the cpuid check).
 *
 * Per output element the arithmetic is fixed: one 8-lane float32
 * accumulator, fma over k in steps of 8, the last partial step with
 * zeroed lanes, then the 8 lanes summed by the tree in hsum8. In
 * TERN_ACT_BF16 mode the dispatcher hands this file activations already
 * rounded to bf16 values (held as float32), so the bf16 x bf16 product is
 * the float32-activation kernel on those values. Register tiles of MR rows
 * of x by NR rows of w and the weight layout never change the arithmetic of
 * one element: weight (j, k) of a tile is read at element
 * j*rs + (k / 32)*cs + k % 32 from the tile's start (rs = K, cs = 32
 * row-major; rs = 32, cs = 384 in panels, which tiles never straddle). */
#include "backend/cpu/matmul_kern.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/panel.h"

#include <immintrin.h>

#include "tern/dtype.h"

#define KERN_INLINE static inline __attribute__((always_inline))

enum { MR = 3, NR = 4 };

_Static_assert((int)TERN_PANEL_ROWS % (int)NR == 0 && (int)TERN_PANEL_K % 8 == 0,
               "tiles must not straddle panels");

KERN_INLINE long k_off(int panels, long k)
{
    return panels ? (k / TERN_PANEL_K) * (TERN_PANEL_ROWS * TERN_PANEL_K) + k % TERN_PANEL_K : k;
}

KERN_INLINE float hsum8(__m256 v)
{
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

KERN_INLINE __m256 widen8(tern_dtype wdt, __m128i h)
{
    if (wdt == TERN_DT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

KERN_INLINE __m256 load_w8(tern_dtype wdt, const void *w, long i)
{
    if (wdt == TERN_DT_F32) return _mm256_loadu_ps((const float *)w + i);
    return widen8(wdt, _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
}

/* The tail (n < 8 elements) goes through a zeroed stack copy: AVX2 has no
 * masked 16-bit loads, and a copy never reads past the row. */
KERN_INLINE __m256 load_w8_tail(tern_dtype wdt, const void *w, long i, int n)
{
    if (wdt == TERN_DT_F32) {
        float t[8] = {0};
        for (int e = 0; e < n; e++) t[e] = ((const float *)w)[i + e];
        return _mm256_loadu_ps(t);
    }
    uint16_t t[8] = {0};
    for (int e = 0; e < n; e++) t[e] = ((const uint16_t *)w)[i + e];
    return widen8(wdt, _mm_loadu_si128((const __m128i *)t));
}

KERN_INLINE __m256 load_x8_tail(const float *x, int n)
{
    float t[8] = {0};
    for (int e = 0; e < n; e++) t[e] = x[e];
    return _mm256_loadu_ps(t);
}

KERN_INLINE void tile(tern_dtype wdt, int panels, int mr, int nr, const float *x, long ldx, int K,
                      const void *w, float *y, long ldy)
{
    const long rs = panels ? TERN_PANEL_K : K;
    __m256 acc[MR][NR];
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_ps();
    long k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 xv[MR];
#pragma GCC unroll 3
        for (int i = 0; i < MR; i++)
            xv[i] = i < mr ? _mm256_loadu_ps(x + i * ldx + k) : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m256 wv = load_w8(wdt, w, j * rs + k_off(panels, k));
#pragma GCC unroll 3
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    if (k < K) {
        int rem = (int)(K - k);
        __m256 xv[MR];
#pragma GCC unroll 3
        for (int i = 0; i < MR; i++)
            xv[i] = i < mr ? load_x8_tail(x + i * ldx + k, rem) : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            if (j >= nr) continue;
            __m256 wv = load_w8_tail(wdt, w, j * rs + k_off(panels, k), rem);
#pragma GCC unroll 3
            for (int i = 0; i < MR; i++)
                if (i < mr) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            if (i < mr && j < nr) y[i * ldy + j] = hsum8(acc[i][j]);
}

/* Decode (one row of x): NRD rows of w side by side (one whole panel in
 * the panel layout), 12 accumulators + x + w in the 16 ymm registers, with
 * (pf, a constant) software prefetch pfd bytes ahead of every weight line.
 * Same per-element arithmetic as tile(). */
enum { NRD = 12 };
_Static_assert((int)NRD == (int)TERN_PANEL_ROWS, "a decode tile is one panel");

KERN_INLINE void row(tern_dtype wdt, int panels, int pf, int pfd, const float *x, int K,
                     const void *w, float *y)
{
    const long rs = panels ? TERN_PANEL_K : K;
    const long wsz = wdt == TERN_DT_F32 ? 4 : 2;
    __m256 acc[NRD];
#pragma GCC unroll 12
    for (int j = 0; j < NRD; j++) acc[j] = _mm256_setzero_ps();
    long k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 xv = _mm256_loadu_ps(x + k);
        long ko = k_off(panels, k);
        int line = pf && ((ko * wsz) & 63) == 0;
#pragma GCC unroll 12
        for (int j = 0; j < NRD; j++) {
            acc[j] = _mm256_fmadd_ps(xv, load_w8(wdt, w, j * rs + ko), acc[j]);
            if (line) _mm_prefetch((const char *)w + (j * rs + ko) * wsz + pfd, _MM_HINT_T1);
        }
    }
    if (k < K) {
        int rem = (int)(K - k);
        __m256 xv = load_x8_tail(x + k, rem);
        long ko = k_off(panels, k);
#pragma GCC unroll 12
        for (int j = 0; j < NRD; j++)
            acc[j] = _mm256_fmadd_ps(xv, load_w8_tail(wdt, w, j * rs + ko, rem), acc[j]);
    }
#pragma GCC unroll 12
    for (int j = 0; j < NRD; j++) y[j] = hsum8(acc[j]);
}

/* Prefetch distances of decode streams: row-major weights are NRD
 * separate streams, panels one (shorter lead; none in huge pages, where
 * the hardware prefetcher follows the stream across the whole page). */
enum { PF_ROWS_BYTES = 24576, PF_PANEL_BYTES = 6144 };

/* Batches up to this many rows over panels run as single-row passes over
 * each panel (it stays in cache between passes); larger ones, and batches
 * over row-major weights (mostly attention's small cache-resident
 * products), use the MR x NR register tiles. */
enum { ROW_MAX_M = 16 };

KERN_INLINE void block(tern_dtype wdt, int panels, int pfd, const float *x, long ldx, int M, int K,
                       const void *w, int n0, int n1, float *y, long ldy)
{
    size_t wsz = wdt == TERN_DT_F32 ? 4 : 2;
    if (M == 1 || (M <= ROW_MAX_M && panels)) {
        /* several passes over a panel: each prefetches one panel ahead so
         * memory keeps streaming while the later passes hit the cache */
        int d = panels && M > 1 ? (int)(TERN_PANEL_ROWS * tern_panel_kp(K) * (long)wsz) : pfd;
        for (; n0 + NRD <= n1; n0 += NRD) {
            long off = panels ? tern_panel_offset(K, n0, 0) : (long)n0 * K;
            const void *wn = (const char *)w + (size_t)off * wsz;
            for (int m = 0; m < M; m++) {
                if (d) row(wdt, panels, 1, d, x + m * ldx, K, wn, y + m * ldy + n0);
                else row(wdt, panels, 0, 0, x + m * ldx, K, wn, y + m * ldy + n0);
            }
        }
    }
    for (int m = 0; m < M; m += MR) {
        int mr = M - m < MR ? M - m : MR;
        const float *xm = x + m * ldx;
        float *ym = y + m * ldy;
        int n = n0;
        for (; n + NR <= n1; n += NR) {
            long off = panels ? tern_panel_offset(K, n, 0) : (long)n * K;
            const void *wn = (const char *)w + (size_t)off * wsz;
            switch (mr) {
            case 3: tile(wdt, panels, 3, NR, xm, ldx, K, wn, ym + n, ldy); break;
            case 2: tile(wdt, panels, 2, NR, xm, ldx, K, wn, ym + n, ldy); break;
            default: tile(wdt, panels, 1, NR, xm, ldx, K, wn, ym + n, ldy); break;
            }
        }
        if (n < n1) {
            long off = panels ? tern_panel_offset(K, n, 0) : (long)n * K;
            tile(wdt, panels, mr, n1 - n, xm, ldx, K, (const char *)w + (size_t)off * wsz, ym + n,
                 ldy);
        }
    }
}

KERN_INLINE void layouts(tern_dtype wdt, const float *x, long ldx, int M, int K, const void *w,
                         int layout, int n0, int n1, float *y, long ldy)
{
    if (layout == TERN_WL_ROWS) block(wdt, 0, PF_ROWS_BYTES, x, ldx, M, K, w, n0, n1, y, ldy);
    else if (layout == TERN_WL_PANELS) block(wdt, 1, PF_PANEL_BYTES, x, ldx, M, K, w, n0, n1, y, ldy);
    else block(wdt, 1, 0, x, ldx, M, K, w, n0, n1, y, ldy);
}

static void mm_f32_f32(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                       int n1, float *y, long ldy)
{
    layouts(TERN_DT_F32, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void mm_f32_f16(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                       int n1, float *y, long ldy)
{
    layouts(TERN_DT_F16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void mm_f32_bf16(const void *x, long ldx, int M, int K, const void *w, int layout, int n0,
                        int n1, float *y, long ldy)
{
    layouts(TERN_DT_BF16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

void tern_mm_table_avx2(tern_mm_table *t)
{
    t->f32act[0] = mm_f32_f32;
    t->f32act[1] = mm_f32_f16;
    t->f32act[2] = mm_f32_bf16;
    t->bf16act = mm_f32_bf16;
    t->round_act = 0;       /* the dispatcher's portable rounding to float32 */
    t->act_elem_bytes = 4;
    t->act_k_align = 1;
}

/* AVX2 kernels over quantized panels (qpanel.h), built with -mavx2 -mfma
 * -mf16c; reached only after the cpuid check in isa.c.
 *
 * Same scheme as matmul_q_avx512.c with 8 lanes: each panel is two halves of
 * 8 rows (bytes 0..31 and 32..63 of every unit). Without VNNI the integer
 * dot products of 4 codes by 4 activations go through vpmaddubsw (unsigned
 * x signed bytes, pairs summed to 16 bits with saturation) and vpmaddwd:
 * 4-bit codes times |x| <= 127 cannot saturate (2 * 15 * 127), and 8-bit
 * codes are split into their two nibbles for the same reason, so every sum
 * is exact and each y[m, n] is bit-identical to the scalar kernel's. */
#include "backend/cpu/matmul_q.h"
#include "backend/cpu/qpanel.h"

#include <immintrin.h>
#include <string.h>

#define KERN_INLINE static inline __attribute__((always_inline))

enum { MR = 4, PF_BYTES = 2048 };

KERN_INLINE __m256 load_s8(const uint8_t *p, tern_dtype sdt)
{
    if (sdt == TERN_DT_F32) return _mm256_loadu_ps((const float *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (sdt == TERN_DT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

KERN_INLINE __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Per 32-bit lane: sum of the 4 byte products w (unsigned, < 16) * x (signed). */
KERN_INLINE __m256i dot4(__m256i w, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

KERN_INLINE void tile_i8(int bits, int mr, int pf, const tern_qact *a, int m0, const uint8_t *panel,
                         int h, size_t rec, size_t cb, tern_dtype sdt, float *y, long ldy, int nv)
{
    const int K = a->K, G = a->G, gs = a->group, units = gs * bits / 32;
    const size_t ss = tern_dtype_size(sdt);
    const __m256i low = _mm256_set1_epi8(0x0f);
    const int8_t *xq[MR];
    __m256 acc[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        xq[i] = i < mr ? a->xq + (size_t)(m0 + i) * K : a->xq;
        acc[i] = _mm256_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec;
        const int k0 = g * gs;
        __m256i is[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) is[i] = _mm256_setzero_si256();
        for (int u = 0; u < units; u++) {
            const uint8_t *up = r + (size_t)u * TERN_QP_UNIT + 32 * h;
            if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
            __m256i v = _mm256_load_si256((const __m256i *)up);
            __m256i lo = _mm256_and_si256(v, low);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            if (bits == 4) {
                int kb = k0 + u * 8;
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++) {
                    if (i >= mr) continue;
                    is[i] = _mm256_add_epi32(is[i], dot4(lo, bcast4(xq[i] + kb)));
                    is[i] = _mm256_add_epi32(is[i], dot4(hi, bcast4(xq[i] + kb + 4)));
                }
            } else {
                int kb = k0 + u * 4;
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++) {
                    if (i >= mr) continue;
                    __m256i xb = bcast4(xq[i] + kb);
                    is[i] = _mm256_add_epi32(is[i], dot4(lo, xb));
                    is[i] = _mm256_add_epi32(is[i], _mm256_slli_epi32(dot4(hi, xb), 4));
                }
            }
        }
        __m256 sc = load_s8(r + cb + 8 * h * ss, sdt), bi = load_s8(r + cb + (TERN_QP_ROWS + 8 * h) * ss, sdt);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            if (i >= mr) continue;
            size_t gi = (size_t)(m0 + i) * G + g;
            __m256 c = _mm256_mul_ps(sc, _mm256_set1_ps(a->dx[gi]));
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[i]), c, acc[i]);
            acc[i] = _mm256_fmadd_ps(bi, _mm256_set1_ps(a->sx[gi]), acc[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        if (i >= mr) continue;
        if (nv == 8) {
            _mm256_storeu_ps(y + i * ldy, acc[i]);
        } else {
            float t[8];
            _mm256_storeu_ps(t, acc[i]);
            memcpy(y + i * ldy, t, (size_t)nv * sizeof(float));
        }
    }
}

KERN_INLINE void tile_f32(int bits, int mr, int pf, const tern_qact *a, int m0, const uint8_t *panel,
                          int h, size_t rec, size_t cb, tern_dtype sdt, float *y, long ldy, int nv)
{
    const int K = a->K, G = a->G, gs = a->group, units = gs * bits / 32, per = 32 / bits;
    const size_t ss = tern_dtype_size(sdt);
    const __m256i cmask = _mm256_set1_epi32(bits == 8 ? 0xff : 0x0f);
    const float *x[MR];
    __m256 acc[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        x[i] = i < mr ? a->xf + (size_t)(m0 + i) * K : a->xf;
        acc[i] = _mm256_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec;
        __m256 aq[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) aq[i] = _mm256_setzero_ps();
        for (int u = 0; u < units; u++) {
            const uint8_t *up = r + (size_t)u * TERN_QP_UNIT + 32 * h;
            if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
            __m256i v = _mm256_load_si256((const __m256i *)up);
            int kb = g * gs + u * per;
#pragma GCC unroll 8
            for (int e = 0; e < per; e++) {
                int shift = bits == 8 ? 8 * e : (e < 4 ? 8 * e : 8 * (e - 4) + 4);
                __m256 q = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, shift), cmask));
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++)
                    if (i < mr) aq[i] = _mm256_fmadd_ps(q, _mm256_set1_ps(x[i][kb + e]), aq[i]);
            }
        }
        __m256 sc = load_s8(r + cb + 8 * h * ss, sdt), bi = load_s8(r + cb + (TERN_QP_ROWS + 8 * h) * ss, sdt);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            if (i >= mr) continue;
            acc[i] = _mm256_fmadd_ps(aq[i], sc, acc[i]);
            acc[i] = _mm256_fmadd_ps(bi, _mm256_set1_ps(a->sx[(size_t)(m0 + i) * G + g]), acc[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        if (i >= mr) continue;
        if (nv == 8) {
            _mm256_storeu_ps(y + i * ldy, acc[i]);
        } else {
            float t[8];
            _mm256_storeu_ps(t, acc[i]);
            memcpy(y + i * ldy, t, (size_t)nv * sizeof(float));
        }
    }
}

KERN_INLINE void drive(int bits, int fast, const tern_qact *a, int m0, int m1, const tern_mm_out *o,
                       int n0, int n1)
{
    const tern_qmat *q = o->w;
    const tern_dtype sdt = q->sdt;
    const size_t rec = tern_qp_record_bytes(bits, a->group, sdt), cb = tern_qp_codes_bytes(bits, a->group);
    const long ldy = o->n;
    const int pf = o->layout == TERN_WL_PANELS;
    for (int n = n0; n < n1; n += 8) {
        const uint8_t *panel = (const uint8_t *)q->codes + (size_t)(n / TERN_QP_ROWS) * (size_t)a->G * rec;
        int h = (n / 8) % 2, nv = n1 - n >= 8 ? 8 : n1 - n;
        for (int m = m0; m < m1;) {
            int mr = m1 - m >= MR ? MR : m1 - m;
            float *y = o->y + (size_t)m * ldy + n;
            if (fast) {
                switch (mr) {
                case 4: tile_i8(bits, 4, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                case 3: tile_i8(bits, 3, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                case 2: tile_i8(bits, 2, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                default: tile_i8(bits, 1, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                }
            } else {
                switch (mr) {
                case 4: tile_f32(bits, 4, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                case 3: tile_f32(bits, 3, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                case 2: tile_f32(bits, 2, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                default: tile_f32(bits, 1, pf, a, m, panel, h, rec, cb, sdt, y, ldy, nv); break;
                }
            }
            m += mr;
        }
    }
}

static void q4_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(4, 1, a, m0, m1, o, n0, n1);
}

static void q8_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(8, 1, a, m0, m1, o, n0, n1);
}

static void q4_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(4, 0, a, m0, m1, o, n0, n1);
}

static void q8_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(8, 0, a, m0, m1, o, n0, n1);
}

void tern_qmm_table_avx2(tern_qmm_table *t)
{
    t->panels[TERN_ACT_F32][0] = q4_f32;
    t->panels[TERN_ACT_F32][1] = q8_f32;
    t->panels[TERN_ACT_BF16][0] = q4_i8;
    t->panels[TERN_ACT_BF16][1] = q8_i8;
}

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

/* A panel's geometry (as in matmul_q_avx512.c). */
typedef struct {
    size_t rec, cb, ss;     /* code record stride; affine: codes bytes, scale size */
    size_t panel;           /* bytes per panel */
    tern_dtype sdt;
} geom;

/* s and b of group g for rows 8h .. 8h+7 as qpanel.h defines them for
 * form (r: the group's record in the affine form, its superblock's scales
 * in a compact one). */
KERN_INLINE void scales(int form, const geom *q, const uint8_t *r, int g, int h, __m256 *s,
                        __m256 *b)
{
    if (form == TERN_QF_AFFINE) {
        *s = load_s8(r + q->cb + 8 * h * q->ss, q->sdt);
        *b = load_s8(r + q->cb + (TERN_QP_ROWS + 8 * h) * q->ss, q->sdt);
        return;
    }
    const tern_qform_info f = tern_qform_get((tern_qform)form);
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 16 * h)));
    if (f.sub == 0) {
        *s = d;
    } else if (f.sub == 1) {
        __m128i sc = _mm_loadl_epi64((const __m128i *)(r + 32 + (size_t)(g % f.sbg) * TERN_QP_ROWS + 8 * h));
        *s = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
    } else {
        const uint8_t *o = r + 64 + (size_t)(g % f.sbg) * 2 * TERN_QP_ROWS + 8 * h;
        __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)o)));
        __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(o + 16))));
        __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 32 + 16 * h)));
        *s = _mm256_mul_ps(d, sc);
        *b = _mm256_xor_ps(_mm256_mul_ps(dm, mn), _mm256_set1_ps(-0.0f));
        return;
    }
    *b = _mm256_mul_ps(*s, _mm256_set1_ps((float)f.bias_k));
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

KERN_INLINE void tile_i8(int form, int bits, int mr, int pf, const tern_qact *a, int m0, const uint8_t *panel,
                         int h, const geom *q, float *y, long ldy, int nv)
{
    /* a compact form's group is a constant: its loops unroll with immediate shifts */
    const int gs = form ? tern_qform_get((tern_qform)form).group : a->group;
    const int K = a->K, G = a->G, units = gs * bits / 32;
    const size_t rec = q->rec;
    const int hb = form == TERN_QF_AFFINE ? 0 : tern_qform_get((tern_qform)form).hb;
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i hmask = _mm256_set1_epi8((char)(((1 << hb) - 1) << 4));
    const int8_t *xq[MR];
    __m256 acc[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        xq[i] = i < mr ? a->xq + (size_t)(m0 + i) * K : a->xq;
        acc[i] = _mm256_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec, *sp = r;
        if (form) tern_qf_locate(tern_qform_get((tern_qform)form), panel, G, g, &r, &sp);
        const int k0 = g * gs;
        __m256i is[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) is[i] = _mm256_setzero_si256();
        __m256i hv = _mm256_setzero_si256();
        if (hb) {
            const uint8_t *hp = r + (size_t)units * TERN_QP_UNIT + 32 * h;
            if (pf) _mm_prefetch((const char *)hp + PF_BYTES, _MM_HINT_T0);
            hv = _mm256_load_si256((const __m256i *)hp);
        }
        for (int u = 0; u < units; u++) {
            const uint8_t *up = r + (size_t)u * TERN_QP_UNIT + 32 * h;
            if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
            __m256i v = _mm256_load_si256((const __m256i *)up);
            __m256i lo = _mm256_and_si256(v, low);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            if (hb) {
                /* codes with high bits: the nibbles of step t = 2u + e with the
                 * high bits of that step above them (byte values < 64: at most
                 * 2 * 63 * 127 per pair, no saturation) */
                __m256i nib[2] = {lo, hi};
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    int t = 2 * u + e, sh = hb * t;
                    __m256i hs = sh <= 4 ? _mm256_slli_epi32(hv, 4 - sh) : _mm256_srli_epi32(hv, sh - 4);
                    __m256i c = _mm256_or_si256(nib[e], _mm256_and_si256(hs, hmask));
#pragma GCC unroll 4
                    for (int i = 0; i < MR; i++)
                        if (i < mr) is[i] = _mm256_add_epi32(is[i], dot4(c, bcast4(xq[i] + k0 + 4 * t)));
                }
            } else if (bits == 4) {
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
        __m256 sc, bi;
        scales(form, q, sp, g, h, &sc, &bi);
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

KERN_INLINE void tile_f32(int form, int bits, int mr, int pf, const tern_qact *a, int m0, const uint8_t *panel,
                          int h, const geom *g_, float *y, long ldy, int nv)
{
    const int K = a->K, G = a->G, gs = a->group, units = gs * bits / 32, per = 32 / bits;
    const size_t rec = g_->rec;
    const int hb = form == TERN_QF_AFFINE ? 0 : tern_qform_get((tern_qform)form).hb;
    const __m256i hmask = _mm256_set1_epi32((1 << hb) - 1);
    const __m256i cmask = _mm256_set1_epi32(bits == 8 ? 0xff : 0x0f);
    const float *x[MR];
    __m256 acc[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        x[i] = i < mr ? a->xf + (size_t)(m0 + i) * K : a->xf;
        acc[i] = _mm256_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec, *sp = r;
        if (form) tern_qf_locate(tern_qform_get((tern_qform)form), panel, G, g, &r, &sp);
        __m256 aq[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) aq[i] = _mm256_setzero_ps();
        __m256i hv = _mm256_setzero_si256();
        if (hb) hv = _mm256_load_si256((const __m256i *)(r + (size_t)units * TERN_QP_UNIT + 32 * h));
        for (int u = 0; u < units; u++) {
            const uint8_t *up = r + (size_t)u * TERN_QP_UNIT + 32 * h;
            if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
            __m256i v = _mm256_load_si256((const __m256i *)up);
            int kb = g * gs + u * per;
#pragma GCC unroll 8
            for (int e = 0; e < per; e++) {
                int shift = bits == 8 ? 8 * e : (e < 4 ? 8 * e : 8 * (e - 4) + 4);
                __m256i c = _mm256_and_si256(_mm256_srli_epi32(v, shift), cmask);
                if (hb) {
                    int kk = u * per + e;
                    __m256i hq = _mm256_srl_epi32(hv, _mm_cvtsi32_si128(8 * (kk & 3) + hb * (kk >> 2)));
                    c = _mm256_or_si256(c, _mm256_slli_epi32(_mm256_and_si256(hq, hmask), 4));
                }
                __m256 q = _mm256_cvtepi32_ps(c);
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++)
                    if (i < mr) aq[i] = _mm256_fmadd_ps(q, _mm256_set1_ps(x[i][kb + e]), aq[i]);
            }
        }
        __m256 sc, bi;
        scales(form, g_, sp, g, h, &sc, &bi);
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

/* The geometry of output o's panels (form: its tern_qform, constant per kernel). */
KERN_INLINE geom geom_of(int form, int bits, const tern_qact *a, const tern_mm_out *o)
{
    const tern_qmat *q = o->w;
    geom g = {0, 0, 0, 0, q->sdt};
    if (form == TERN_QF_AFFINE) {
        g.rec = tern_qp_record_bytes(bits, a->group, q->sdt);
        g.cb = tern_qp_codes_bytes(bits, a->group);
        g.ss = tern_dtype_size(q->sdt);
        g.panel = (size_t)a->G * g.rec;
    } else {
        tern_qform_info f = tern_qform_get((tern_qform)form);
        g.panel = tern_qf_panel_bytes(f, a->K);
    }
    return g;
}

KERN_INLINE void drive(int form, int bits, int fast, const tern_qact *a, int m0, int m1, const tern_mm_out *o,
                       int n0, int n1)
{
    const tern_qmat *q = o->w;
    const geom gm = geom_of(form, bits, a, o);
    const long ldy = o->n;
    const int pf = o->layout == TERN_WL_PANELS;
    for (int n = n0; n < n1; n += 8) {
        const uint8_t *panel = (const uint8_t *)q->codes + (size_t)(n / TERN_QP_ROWS) * gm.panel;
        int h = (n / 8) % 2, nv = n1 - n >= 8 ? 8 : n1 - n;
        for (int m = m0; m < m1;) {
            int mr = m1 - m >= MR ? MR : m1 - m;
            float *y = o->y + (size_t)m * ldy + n;
            if (fast) {
                switch (mr) {
                case 4: tile_i8(form, bits, 4, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                case 3: tile_i8(form, bits, 3, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                case 2: tile_i8(form, bits, 2, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                default: tile_i8(form, bits, 1, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                }
            } else {
                switch (mr) {
                case 4: tile_f32(form, bits, 4, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                case 3: tile_f32(form, bits, 3, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                case 2: tile_f32(form, bits, 2, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                default: tile_f32(form, bits, 1, pf, a, m, panel, h, &gm, y, ldy, nv); break;
                }
            }
            m += mr;
        }
    }
}

/* One kernel per (form, code bits, activation mode). */
static void q4_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_AFFINE, 4, 1, a, m0, m1, o, n0, n1);
}

static void q8_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_AFFINE, 8, 1, a, m0, m1, o, n0, n1);
}

static void q4_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_AFFINE, 4, 0, a, m0, m1, o, n0, n1);
}

static void q8_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_AFFINE, 8, 0, a, m0, m1, o, n0, n1);
}

static void g80_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q8_0, 8, 1, a, m0, m1, o, n0, n1);
}

static void g80_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q8_0, 8, 0, a, m0, m1, o, n0, n1);
}

static void g40_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q4_0, 4, 1, a, m0, m1, o, n0, n1);
}

static void g40_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q4_0, 4, 0, a, m0, m1, o, n0, n1);
}

static void g4k_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q4_K, 4, 1, a, m0, m1, o, n0, n1);
}

static void g4k_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q4_K, 4, 0, a, m0, m1, o, n0, n1);
}

static void g5k_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q5_K, 4, 1, a, m0, m1, o, n0, n1);
}

static void g5k_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q5_K, 4, 0, a, m0, m1, o, n0, n1);
}

static void g6k_i8(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q6_K, 4, 1, a, m0, m1, o, n0, n1);
}

static void g6k_f32(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    drive(TERN_QF_Q6_K, 4, 0, a, m0, m1, o, n0, n1);
}

void tern_qmm_table_avx2(tern_qmm_table *t)
{
    static const tern_qmm_kernel f32k[TERN_QK_COUNT] = {q4_f32, q8_f32, g80_f32, g40_f32, g4k_f32, g5k_f32, g6k_f32};
    static const tern_qmm_kernel i8k[TERN_QK_COUNT] = {q4_i8, q8_i8, g80_i8, g40_i8, g4k_i8, g5k_i8, g6k_i8};
    for (int k = 0; k < TERN_QK_COUNT; k++) {
        t->panels[TERN_ACT_F32][k] = f32k[k];
        t->panels[TERN_ACT_BF16][k] = i8k[k];
    }
}

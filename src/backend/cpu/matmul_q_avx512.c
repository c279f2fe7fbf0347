/* AVX-512 kernels over quantized panels (qpanel.h), built with
 * -mavx512f/bw/vl/dq/bf16 (VNNI by the pragma below); reached only after the
 * cpuid checks in isa.c (the int8 kernels also need VNNI, checked at table
 * fill; every CPU with AVX512_BF16 has it).
 *
 * One 32-bit lane per weight row: a 64-byte unit of a panel holds 4 codes
 * (8 bits) or 8 codes (4 bits) of each of the 16 rows, and the matching 4
 * activations of an x row are one 32-bit broadcast. Per lane the kernels
 * run exactly the chain of matmul_q.h (the integer group sums may be split
 * over several accumulators: integer addition is exact in any order), so
 * each y[m, n] is bit-identical to the scalar kernel's. A tile is MR x rows
 * by one panel; the panel stays in L1 for the next tile of rows. */
#pragma GCC target("avx512vnni")

#include "backend/cpu/matmul_q.h"
#include "backend/cpu/qpanel.h"

#include <immintrin.h>
#include <string.h>

#define KERN_INLINE static inline __attribute__((always_inline))

enum { MR = 8 };

/* Panels in 4 KB pages: prefetch this far ahead (huge pages: the hardware
 * prefetcher follows the stream alone). */
enum { PF_BYTES = 2048 };

KERN_INLINE __m512 load_s16(const uint8_t *p, tern_dtype sdt)
{
    if (sdt == TERN_DT_F32) return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (sdt == TERN_DT_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* A panel's geometry: the affine form's records (scales at cb into each
 * record of rec bytes), or a compact form's (qpanel.h tern_qf_locate). */
typedef struct {
    size_t rec, cb, ss;     /* code record stride; affine: codes bytes, scale size */
    size_t panel;           /* bytes per panel */
    tern_dtype sdt;
} geom;

/* s and b of group g as qpanel.h defines them for form (r: the group's
 * record in the affine form, its superblock's scales in a compact one). */
KERN_INLINE void scales(int form, const geom *q, const uint8_t *r, int g, __m512 *s,
                        __m512 *b)
{
    if (form == TERN_QF_AFFINE) {
        *s = load_s16(r + q->cb, q->sdt);
        *b = load_s16(r + q->cb + TERN_QP_ROWS * q->ss, q->sdt);
        return;
    }
    const tern_qform_info f = tern_qform_get((tern_qform)form);
    __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r));
    if (f.sub == 0) {
        *s = d;
    } else if (f.sub == 1) {
        __m128i sc = _mm_loadu_si128((const __m128i *)(r + 32 + (size_t)(g % f.sbg) * TERN_QP_ROWS));
        *s = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
    } else {
        const uint8_t *o = r + 64 + (size_t)(g % f.sbg) * 2 * TERN_QP_ROWS;
        __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)o)));
        __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 16))));
        __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 32)));
        *s = _mm512_mul_ps(d, sc);
        *b = _mm512_xor_ps(_mm512_mul_ps(dm, mn), _mm512_set1_ps(-0.0f));
        return;
    }
    *b = _mm512_mul_ps(*s, _mm512_set1_ps((float)f.bias_k));
}

KERN_INLINE __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* int8 activations: rows m0 .. m0+mr of x, one panel, P partial integer
 * sums per row (more independent chains for few rows). */
KERN_INLINE void tile_i8(int form, int bits, int mr, int P, int pf, const tern_qact *a, int m0,
                         const uint8_t *panel, const geom *q, float *y, long ldy, __mmask16 nmask)
{
    /* a compact form's group is a constant: its loops unroll with immediate shifts */
    const int gs = form ? tern_qform_get((tern_qform)form).group : a->group;
    const int K = a->K, G = a->G, units = gs * bits / 32;
    const size_t rec = q->rec;
    const int hb = form == TERN_QF_AFFINE ? 0 : tern_qform_get((tern_qform)form).hb;
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i hmask = _mm512_set1_epi8((char)(((1 << hb) - 1) << 4));
    const int8_t *xq[MR];
    __m512 acc[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        xq[i] = i < mr ? a->xq + (size_t)(m0 + i) * K : a->xq;
        acc[i] = _mm512_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec, *sp = r;
        if (form) tern_qf_locate(tern_qform_get((tern_qform)form), panel, G, g, &r, &sp);
        const int k0 = g * gs;
        __m512i is[MR][4];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) is[i][p] = _mm512_setzero_si512();
        if (hb) {
            /* codes with high bits: the 4 codes of elements 4t .. 4t+3 of each
             * lane are a nibble of low unit t / 2 with the high bits of step
             * t put above it (byte values < 64), one dot product per step */
            const uint8_t *hp = r + (size_t)units * TERN_QP_UNIT;
            if (pf) _mm_prefetch((const char *)hp + PF_BYTES, _MM_HINT_T0);
            const __m512i hv = _mm512_load_si512(hp);
            for (int u = 0; u < units; u++) {
                const uint8_t *up = r + (size_t)u * TERN_QP_UNIT;
                if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
                __m512i v = _mm512_load_si512(up);
                __m512i nib[2] = {_mm512_and_si512(v, low), _mm512_and_si512(_mm512_srli_epi16(v, 4), low)};
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    int t = 2 * u + e, sh = hb * t;
                    __m512i h = sh <= 4 ? _mm512_slli_epi32(hv, 4 - sh) : _mm512_srli_epi32(hv, sh - 4);
                    __m512i c = _mm512_or_si512(nib[e], _mm512_and_si512(h, hmask));
                    int pt = P > 1 ? t % P : 0;
#pragma GCC unroll 8
                    for (int i = 0; i < MR; i++)
                        if (i < mr) is[i][pt] = _mm512_dpbusd_epi32(is[i][pt], c, bcast4(xq[i] + k0 + 4 * t));
                }
            }
        } else if (bits == 4) {
            const int su = P > 1 ? P / 2 : 1;  /* units per step: lo, hi of each */
            for (int u = 0; u < units; u += su) {
#pragma GCC unroll 2
                for (int s = 0; s < su; s++) {
                    const uint8_t *up = r + (size_t)(u + s) * TERN_QP_UNIT;
                    if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
                    __m512i v = _mm512_load_si512(up);
                    __m512i lo = _mm512_and_si512(v, low);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
                    int kb = k0 + (u + s) * 8;
                    int pl = P > 1 ? (2 * s) % P : 0, ph = P > 1 ? (2 * s + 1) % P : 0;
#pragma GCC unroll 8
                    for (int i = 0; i < MR; i++) {
                        if (i >= mr) continue;
                        is[i][pl] = _mm512_dpbusd_epi32(is[i][pl], lo, bcast4(xq[i] + kb));
                        is[i][ph] = _mm512_dpbusd_epi32(is[i][ph], hi, bcast4(xq[i] + kb + 4));
                    }
                }
            }
        } else {
            for (int u = 0; u < units; u += P) {
#pragma GCC unroll 4
                for (int s = 0; s < P; s++) {
                    const uint8_t *up = r + (size_t)(u + s) * TERN_QP_UNIT;
                    if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
                    __m512i v = _mm512_load_si512(up);
                    int kb = k0 + (u + s) * 4;
#pragma GCC unroll 8
                    for (int i = 0; i < MR; i++)
                        if (i < mr) is[i][s] = _mm512_dpbusd_epi32(is[i][s], v, bcast4(xq[i] + kb));
                }
            }
        }
        __m512 sc, bi;
        scales(form, q, sp, g, &sc, &bi);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i >= mr) continue;
            __m512i t = is[i][0];
#pragma GCC unroll 3
            for (int p = 1; p < P; p++) t = _mm512_add_epi32(t, is[i][p]);
            size_t gi = (size_t)(m0 + i) * G + g;
            __m512 c = _mm512_mul_ps(sc, _mm512_set1_ps(a->dx[gi]));
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), c, acc[i]);
            acc[i] = _mm512_fmadd_ps(bi, _mm512_set1_ps(a->sx[gi]), acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        if (i < mr) _mm512_mask_storeu_ps(y + i * ldy, nmask, acc[i]);
}

/* float32 activations: codes widened to float, k in order per lane. */
KERN_INLINE void tile_f32(int form, int bits, int mr, int pf, const tern_qact *a, int m0,
                          const uint8_t *panel, const geom *g_, float *y, long ldy, __mmask16 nmask)
{
    const int K = a->K, G = a->G, gs = a->group, units = gs * bits / 32, per = 32 / bits;
    const size_t rec = g_->rec;
    const int hb = form == TERN_QF_AFFINE ? 0 : tern_qform_get((tern_qform)form).hb;
    const __m512i hmask = _mm512_set1_epi32((1 << hb) - 1);
    const __m512i cmask = _mm512_set1_epi32(bits == 8 ? 0xff : 0x0f);
    const float *x[MR];
    __m512 acc[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        x[i] = i < mr ? a->xf + (size_t)(m0 + i) * K : a->xf;
        acc[i] = _mm512_setzero_ps();
    }
    for (int g = 0; g < G; g++) {
        const uint8_t *r = panel + (size_t)g * rec, *sp = r;
        if (form) tern_qf_locate(tern_qform_get((tern_qform)form), panel, G, g, &r, &sp);
        __m512 aq[MR];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) aq[i] = _mm512_setzero_ps();
        __m512i hv = _mm512_setzero_si512();
        if (hb) hv = _mm512_load_si512(r + (size_t)units * TERN_QP_UNIT);
        for (int u = 0; u < units; u++) {
            const uint8_t *up = r + (size_t)u * TERN_QP_UNIT;
            if (pf) _mm_prefetch((const char *)up + PF_BYTES, _MM_HINT_T0);
            __m512i v = _mm512_load_si512(up);
            int kb = g * gs + u * per;
#pragma GCC unroll 8
            for (int e = 0; e < per; e++) {
                /* element e of the unit: byte e (8 bits); low nibble of byte
                 * e, then high nibble of byte e-4 (4 bits) */
                int shift = bits == 8 ? 8 * e : (e < 4 ? 8 * e : 8 * (e - 4) + 4);
                __m512i c = _mm512_and_si512(_mm512_srli_epi32(v, shift), cmask);
                if (hb) {
                    /* element kk of the group: bits hb*(kk/4) of byte kk%4 of the high unit */
                    int kk = u * per + e;
                    __m512i h = _mm512_srl_epi32(hv, _mm_cvtsi32_si128(8 * (kk & 3) + hb * (kk >> 2)));
                    c = _mm512_or_si512(c, _mm512_slli_epi32(_mm512_and_si512(h, hmask), 4));
                }
                __m512 q = _mm512_cvtepi32_ps(c);
#pragma GCC unroll 8
                for (int i = 0; i < MR; i++)
                    if (i < mr) aq[i] = _mm512_fmadd_ps(q, _mm512_set1_ps(x[i][kb + e]), aq[i]);
            }
        }
        __m512 sc, bi;
        scales(form, g_, sp, g, &sc, &bi);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i >= mr) continue;
            acc[i] = _mm512_fmadd_ps(aq[i], sc, acc[i]);
            acc[i] = _mm512_fmadd_ps(bi, _mm512_set1_ps(a->sx[(size_t)(m0 + i) * G + g]), acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        if (i < mr) _mm512_mask_storeu_ps(y + i * ldy, nmask, acc[i]);
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

/* Rows of x in tiles of MR (the last one narrower; one or two rows keep
 * several integer chains in flight), panel by panel. */
KERN_INLINE void drive(int form, int bits, int fast, const tern_qact *a, int m0, int m1, const tern_mm_out *o,
                       int n0, int n1)
{
    const tern_qmat *q = o->w;
    const geom gm = geom_of(form, bits, a, o);
    const long ldy = o->n;
    const int pf = o->layout == TERN_WL_PANELS;
    for (int n = n0; n < n1; n += TERN_QP_ROWS) {
        const uint8_t *panel = (const uint8_t *)q->codes + (size_t)(n / TERN_QP_ROWS) * gm.panel;
        __mmask16 nm = n1 - n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n1 - n)) - 1u);
        for (int m = m0; m < m1;) {
            int mr = m1 - m >= MR ? MR : m1 - m;
            float *y = o->y + (size_t)m * ldy + n;
            if (fast) {
                switch (mr) {
                case 8: tile_i8(form, bits, 8, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 7: tile_i8(form, bits, 7, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 6: tile_i8(form, bits, 6, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 5: tile_i8(form, bits, 5, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 4: tile_i8(form, bits, 4, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 3: tile_i8(form, bits, 3, 2, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 2: tile_i8(form, bits, 2, 2, pf, a, m, panel, &gm, y, ldy, nm); break;
                default: tile_i8(form, bits, 1, 4, pf, a, m, panel, &gm, y, ldy, nm); break;
                }
            } else {
                switch (mr) {
                case 8: tile_f32(form, bits, 8, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 7: tile_f32(form, bits, 7, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 6: tile_f32(form, bits, 6, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 5: tile_f32(form, bits, 5, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 4: tile_f32(form, bits, 4, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 3: tile_f32(form, bits, 3, pf, a, m, panel, &gm, y, ldy, nm); break;
                case 2: tile_f32(form, bits, 2, pf, a, m, panel, &gm, y, ldy, nm); break;
                default: tile_f32(form, bits, 1, pf, a, m, panel, &gm, y, ldy, nm); break;
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


/* tern_qact_prepare's preparation, 16 elements at a time: the same partial
 * sums in double (lane l of the two 8-lane halves is partial l), the same
 * maximum, product and rounding (cvtps rounds to nearest even, as lrintf in
 * the default rounding mode): identical bytes. */
static void prep(tern_act_mode mode, const float *x, int M, int K, int group, float *sx, float *dx,
                 int8_t *xq)
{
    const int G = K / group;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int m = 0; m < M; m++)
        for (int g = 0; g < G; g++) {
            const float *xg = x + (size_t)m * K + (size_t)g * group;
            __m512d p = _mm512_setzero_pd();
            __m512 mx = _mm512_setzero_ps();
            for (int i = 0; i < group; i += 16) {
                __m512 v = _mm512_loadu_ps(xg + i);
                p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
                mx = _mm512_max_ps(mx, _mm512_and_ps(v, absmask));
            }
            double l[8];
            _mm512_storeu_pd(l, p);
            sx[(size_t)m * G + g] = (float)(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
            if (mode != TERN_ACT_BF16) continue;
            float amax = _mm512_reduce_max_ps(mx);
            int8_t *q = xq + (size_t)m * K + (size_t)g * group;
            /* NaN lanes: max_ps keeps the second operand, so recheck in scalar */
            int bad = !(amax > 0.0f) || !(amax <= 3.4028235e38f);
            for (int i = 0; i < group && !bad; i++) bad = xg[i] != xg[i];
            if (bad) {
                tern_qact_group(mode, xg, group, sx + (size_t)m * G + g, dx + (size_t)m * G + g, q);
                continue;
            }
            float id = 127.0f / amax;
            dx[(size_t)m * G + g] = amax / 127.0f;
            const __m512 vid = _mm512_set1_ps(id);
            const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
            for (int i = 0; i < group; i += 16) {
                __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + i), vid));
                r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
                _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(r));
            }
        }
}

void tern_qmm_table_avx512(tern_qmm_table *t)
{
    static const tern_qmm_kernel f32k[TERN_QK_COUNT] = {q4_f32, q8_f32, g80_f32, g40_f32, g4k_f32, g5k_f32, g6k_f32};
    static const tern_qmm_kernel i8k[TERN_QK_COUNT] = {q4_i8, q8_i8, g80_i8, g40_i8, g4k_i8, g5k_i8, g6k_i8};
    t->prep = prep;
    __builtin_cpu_init();
    int vnni = __builtin_cpu_supports("avx512vnni");
    for (int k = 0; k < TERN_QK_COUNT; k++) {
        t->panels[TERN_ACT_F32][k] = f32k[k];
        if (vnni) t->panels[TERN_ACT_BF16][k] = i8k[k];
    }
}

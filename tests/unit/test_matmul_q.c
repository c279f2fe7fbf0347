/* Quantized matmul (MLX_Q4 / MLX_Q8, group 32/64/128, scales in F32/F16/BF16):
 * the scalar kernel against the dequantised product in double; every ISA's
 * kernel, in row-major and panel layouts, with 1 and 2 threads, bit-identical
 * to the scalar kernel; each row alone, in a batch, and in a reversed batch
 * bit-identical (batch invariance); mixed float/quantized outputs in one
 * call; malformed descriptions refused. */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/qpanel.h"
#include "tern/status.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float frand(void)
{
    return (float)((rnd() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

typedef struct {
    int N, K, bits, group;
    tern_dtype sdt;
    uint32_t *codes;
    void *scales, *biases;
    void *panels;
    tern_qmat rows_q, panel_q;
} qw;

static void put_scale(void *p, tern_dtype dt, size_t i, float v)
{
    if (dt == TERN_DT_F32) ((float *)p)[i] = v;
    else if (dt == TERN_DT_F16) ((uint16_t *)p)[i] = tern_f32_to_f16(v);
    else ((uint16_t *)p)[i] = tern_f32_to_bf16(v);
}

static float get_scale(const void *p, tern_dtype dt, size_t i)
{
    if (dt == TERN_DT_F32) return ((const float *)p)[i];
    if (dt == TERN_DT_F16) return tern_f16_to_f32(((const uint16_t *)p)[i]);
    return tern_bf16_to_f32(((const uint16_t *)p)[i]);
}

static unsigned code_of(const qw *w, int n, int k)
{
    const uint8_t *r = (const uint8_t *)w->codes + (size_t)n * w->K * w->bits / 8;
    return w->bits == 8 ? r[k] : (r[k / 2] >> ((k & 1) * 4)) & 15u;
}

static void qw_make(qw *w, int N, int K, int bits, int group, tern_dtype sdt)
{
    *w = (qw){N, K, bits, group, sdt, NULL, NULL, NULL, NULL, {0}, {0}};
    size_t words = (size_t)N * K * bits / 32, G = (size_t)K / group, ss = tern_dtype_size(sdt);
    w->codes = malloc(words * 4);
    for (size_t i = 0; i < words; i++) w->codes[i] = (uint32_t)rnd();
    w->scales = malloc((size_t)N * G * ss);
    w->biases = malloc((size_t)N * G * ss);
    float smax = bits == 8 ? 2.0f / 255 : 2.0f / 15;
    for (size_t i = 0; i < (size_t)N * G; i++) {
        put_scale(w->scales, sdt, i, smax * (0.25f + 0.75f * fabsf(frand())));
        put_scale(w->biases, sdt, i, -1.0f + 0.2f * frand());
    }
    w->rows_q = (tern_qmat){w->codes, w->scales, w->biases, sdt, group, TERN_DT_U32, TERN_QF_AFFINE};
    size_t pb = tern_cpu_qpanel_bytes(bits, group, sdt, N, K);
    w->panels = aligned_alloc(64, (pb + 63) / 64 * 64);
    tern_cpu_qpanel_pack(w->codes, w->scales, w->biases, sdt, bits, group, N, K, w->panels, 0,
                         tern_qp_count(N));
    w->panel_q = (tern_qmat){w->panels, NULL, NULL, sdt, group, TERN_DT_U32, TERN_QF_AFFINE};
}

static void qw_free(qw *w)
{
    free(w->codes);
    free(w->scales);
    free(w->biases);
    free(w->panels);
}

static tern_dtype wdt_of(const qw *w)
{
    return w->bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4;
}

static tern_status run(tern_pool *p, tern_act_mode mode, const float *x, int M, const qw *w,
                       int panels, float *y)
{
    tern_mm_out o = {panels ? (const void *)&w->panel_q : (const void *)&w->rows_q, wdt_of(w), w->N,
                     y, panels ? TERN_WL_PANELS_HUGE : TERN_WL_ROWS};
    return tern_cpu_matmul_multi(p, mode, x, M, w->K, &o, 1);
}

/* The dequantised product in double, and sum |x| |w| per element (the scale
 * of rounding and activation quantisation errors). */
static void truth(const float *x, int M, const qw *w, double *y, double *mag)
{
    int G = w->K / w->group;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < w->N; n++) {
            double acc = 0, a = 0;
            for (int k = 0; k < w->K; k++) {
                size_t gi = (size_t)n * G + k / w->group;
                double wv = (double)get_scale(w->scales, w->sdt, gi) * code_of(w, n, k) +
                            get_scale(w->biases, w->sdt, gi);
                acc += (double)x[(size_t)m * w->K + k] * wv;
                a += fabs((double)x[(size_t)m * w->K + k] * wv);
            }
            y[(size_t)m * w->N + n] = acc;
            mag[(size_t)m * w->N + n] = a;
        }
}

static void check_case(tern_pool *p1, tern_pool *p2, int M, int K, int N, int bits, int group,
                       tern_dtype sdt)
{
    qw w;
    qw_make(&w, N, K, bits, group, sdt);
    size_t ny = (size_t)M * N;
    float *x = malloc(sizeof(float) * (size_t)M * K);
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
    double *tr = malloc(sizeof(double) * ny), *mag = malloc(sizeof(double) * ny);
    truth(x, M, &w, tr, mag);
    float *ref = malloc(sizeof(float) * ny), *y = malloc(sizeof(float) * ny);
    float *row = malloc(sizeof(float) * (size_t)N);
    tern_cpu_isa saved = tern_cpu_isa_active();
    for (int mode = 0; mode < 2; mode++) {
        /* the scalar kernel on the row-major matrix is the baseline */
        tern_cpu_isa_select(TERN_CPU_ISA_SCALAR);
        CHECK(run(p1, (tern_act_mode)mode, x, M, &w, 0, ref) == TERN_OK);
        double tol = mode == TERN_ACT_F32 ? 1e-5 : 1.5e-2;
        int ok = 1;
        for (size_t i = 0; i < ny && ok; i++)
            if (!(fabs(ref[i] - tr[i]) <= tol * mag[i] + 1e-5)) {
                fprintf(stderr, "  i=%zu got %.9g want %.9g (mag %.3g)\n", i, ref[i], tr[i], mag[i]);
                ok = 0;
            }
        CHECK_MSG(ok, "scalar vs dequantised: mode=%d bits=%d group=%d %s M=%d K=%d N=%d", mode,
                  bits, group, tern_dtype_name(sdt), M, K, N);
        for (int isa = 0; isa < TERN_CPU_ISA_COUNT; isa++) {
            if (tern_cpu_isa_select((tern_cpu_isa)isa) != TERN_OK) continue;
            for (int panels = 0; panels < 2; panels++)
                for (int t = 0; t < 2; t++) {
                    memset(y, 0, sizeof(float) * ny);
                    CHECK(run(t ? p2 : p1, (tern_act_mode)mode, x, M, &w, panels, y) == TERN_OK);
                    CHECK_MSG(memcmp(y, ref, sizeof(float) * ny) == 0,
                              "%s panels=%d threads=%d differs from scalar: mode=%d bits=%d "
                              "group=%d %s M=%d K=%d N=%d", tern_cpu_isa_name((tern_cpu_isa)isa),
                              panels, t + 1, mode, bits, group, tern_dtype_name(sdt), M, K, N);
                }
            /* each row alone, and the batch reversed */
            int alone = 1, rev = 1;
            for (int m = 0; m < M; m++) {
                run(p2, (tern_act_mode)mode, x + (size_t)m * K, 1, &w, 1, row);
                alone &= memcmp(row, ref + (size_t)m * N, sizeof(float) * (size_t)N) == 0;
            }
            if (M > 1) {
                float *xr = malloc(sizeof(float) * (size_t)M * K);
                for (int m = 0; m < M; m++)
                    memcpy(xr + (size_t)m * K, x + (size_t)(M - 1 - m) * K, sizeof(float) * (size_t)K);
                run(p2, (tern_act_mode)mode, xr, M, &w, 1, y);
                for (int m = 0; m < M; m++)
                    rev &= memcmp(y + (size_t)m * N, ref + (size_t)(M - 1 - m) * N,
                                  sizeof(float) * (size_t)N) == 0;
                free(xr);
            }
            CHECK_MSG(alone && rev, "%s batch invariance (alone %d, reversed %d): mode=%d bits=%d "
                      "group=%d M=%d K=%d N=%d", tern_cpu_isa_name((tern_cpu_isa)isa), alone, rev,
                      mode, bits, group, M, K, N);
        }
    }
    tern_cpu_isa_select(saved);
    qw_free(&w);
    free(x);
    free(tr);
    free(mag);
    free(ref);
    free(y);
    free(row);
}

/* Float and quantized outputs of one call equal separate calls. */
static void check_mixed(tern_pool *p)
{
    int M = 5, K = 128;
    qw a, b;
    qw_make(&a, 37, K, 4, 64, TERN_DT_BF16);
    qw_make(&b, 20, K, 8, 32, TERN_DT_F16);
    float *x = malloc(sizeof(float) * (size_t)M * K), *wf = malloc(sizeof(float) * 9 * (size_t)K);
    for (int i = 0; i < M * K; i++) x[i] = frand();
    for (int i = 0; i < 9 * K; i++) wf[i] = frand();
    for (int mode = 0; mode < 2; mode++) {
        float ya[5 * 37], yb[5 * 20], yf[5 * 9], sa[5 * 37], sb[5 * 20], sf[5 * 9];
        tern_mm_out outs[3] = {{&a.panel_q, TERN_DT_MLX_Q4, 37, ya, TERN_WL_PANELS},
                               {wf, TERN_DT_F32, 9, yf, TERN_WL_ROWS},
                               {&b.rows_q, TERN_DT_MLX_Q8, 20, yb, TERN_WL_ROWS}};
        CHECK(tern_cpu_matmul_multi(p, (tern_act_mode)mode, x, M, K, outs, 3) == TERN_OK);
        CHECK(run(p, (tern_act_mode)mode, x, M, &a, 1, sa) == TERN_OK);
        CHECK(run(p, (tern_act_mode)mode, x, M, &b, 0, sb) == TERN_OK);
        CHECK(tern_cpu_matmul(p, (tern_act_mode)mode, x, M, K, wf, TERN_DT_F32, 9, sf) == TERN_OK);
        CHECK(!memcmp(ya, sa, sizeof ya) && !memcmp(yb, sb, sizeof yb) && !memcmp(yf, sf, sizeof yf));
    }
    /* malformed descriptions */
    float y[64 * 5];
    tern_qmat bad = a.rows_q;
    tern_mm_out o = {&bad, TERN_DT_MLX_Q4, 37, y, TERN_WL_ROWS};
    bad.group = 8;
    CHECK(tern_cpu_matmul_multi(p, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_UNSUPPORTED);
    bad.group = 64;
    CHECK(tern_cpu_matmul_multi(p, TERN_ACT_F32, x, M, 96, &o, 1) == TERN_E_INVALID);
    bad.scales = NULL;
    CHECK(tern_cpu_matmul_multi(p, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_INVALID);
    bad = a.rows_q;
    bad.sdt = TERN_DT_I32;
    CHECK(tern_cpu_matmul_multi(p, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_UNSUPPORTED);
    o.w = NULL;
    CHECK(tern_cpu_matmul_multi(p, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_INVALID);
    qw_free(&a);
    qw_free(&b);
    free(x);
    free(wf);
}

/* Zero and huge activations: a zero group quantizes to zero, inf/NaN give NaN, no crash. */
static void check_special(tern_pool *p)
{
    qw w;
    qw_make(&w, 16, 64, 4, 32, TERN_DT_BF16);
    float x[64] = {0}, y[16];
    CHECK(run(p, TERN_ACT_BF16, x, 1, &w, 1, y) == TERN_OK);
    int zero = 1;
    for (int n = 0; n < 16; n++) zero &= y[n] == 0.0f;
    CHECK(zero);
    x[3] = INFINITY;
    CHECK(run(p, TERN_ACT_BF16, x, 1, &w, 1, y) == TERN_OK);
    CHECK(isnan(y[0]) || isinf(y[0]));
    qw_free(&w);
}

int main(void)
{
    tern_pool *p1 = NULL, *p2 = NULL;
    CHECK(tern_pool_create(1, &p1) == TERN_OK);
    CHECK(tern_pool_create(2, &p2) == TERN_OK);
    static const int Ms[] = {1, 2, 3, 4, 7, 8, 9, 16, 17, 33};
    static const int Ns[] = {1, 7, 16, 17, 40};
    static const int groups[] = {32, 64, 128};
    static const tern_dtype sdts[] = {TERN_DT_BF16, TERN_DT_F16, TERN_DT_F32};
    int cases = 0;
    for (int b = 4; b <= 8; b += 4)
        for (int gi = 0; gi < 3; gi++)
            for (int si = 0; si < 3; si++)
                for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                    if ((mi + (size_t)si + (size_t)gi) % 3) continue;   /* a spread, not the product */
                    int N = Ns[(mi + (size_t)gi) % 5], K = groups[gi] * (1 + (int)(mi % 3));
                    check_case(p1, p2, Ms[mi], K, N, b, groups[gi], sdts[si]);
                    cases++;
                }
    /* several panels, row blocks and tasks */
    check_case(p1, p2, 70, 256, 100, 4, 64, TERN_DT_BF16);
    check_case(p1, p2, 5, 384, 130, 8, 128, TERN_DT_BF16);
    check_mixed(p2);
    check_special(p2);
    fprintf(stderr, "matmul_q: %d cases\n", cases + 2);
    tern_pool_free(p1);
    tern_pool_free(p2);
    return check_summary("matmul_q");
}

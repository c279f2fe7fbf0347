/* The compact panel forms of the GGUF block formats (qpanel.h) against
 * their affine form: random blocks of every format packed both ways give
 * bit-identical products through the scalar kernel and every ISA's kernel,
 * in both activation modes, with 1 and 2 threads, for each row alone and in
 * batches of several sizes (batch invariance); the compact panel is the
 * size of the file's blocks (Q4_K / Q5_K: 4 more bytes per 256 weights for
 * the unpacked six-bit scales); mismatched descriptions are refused. */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gguf_blocks.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/qpanel.h"
#include "tern/status.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

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

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = tern_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* A random row of K elements in format dt: random codes and sub-scales,
 * block scales of mixed magnitude and sign (dmin >= 0, as llama-quantize writes). */
static void random_row(tern_dtype dt, uint8_t *row, int K)
{
    int be, bb;
    tern_dtype_block(dt, &be, &bb);
    for (int blk = 0; blk < K / be; blk++) {
        uint8_t *b = row + (size_t)blk * bb;
        for (int i = 0; i < bb; i++) b[i] = (uint8_t)rnd();
        float d = frand() * (rnd() % 4 == 0 ? 0.5f : 0.01f);
        if (rnd() % 16 == 0) d = 0.0f;
        switch (dt) {
        case TERN_DT_Q8_0:
        case TERN_DT_Q4_0: put_f16(b, d); break;
        case TERN_DT_Q4_K:
        case TERN_DT_Q5_K:
            put_f16(b, fabsf(d));
            put_f16(b + 2, fabsf(frand()) * 0.01f);
            break;
        case TERN_DT_Q6_K: put_f16(b + 208, d); break;
        default: break;
        }
    }
}

typedef struct {
    tern_dtype dt;
    int N, K;
    uint8_t *rows;          /* the GGUF rows */
    void *affine, *compact; /* the two panel copies */
    tern_qmat qa, qc;
    tern_dtype wa, wc;      /* their weight dtypes (code bits) */
    size_t compact_bytes;
} gw;

static void gw_make(gw *w, tern_dtype dt, int N, int K)
{
    int be, bb;
    tern_dtype_block(dt, &be, &bb);
    size_t row = (size_t)(K / be) * (size_t)bb;
    *w = (gw){dt, N, K, malloc(row * (size_t)N), NULL, NULL, {0}, {0}, TERN_DT_MLX_Q4, TERN_DT_MLX_Q4, 0};
    for (int n = 0; n < N; n++) random_row(dt, w->rows + (size_t)n * row, K);

    tern_gguf_affine a;
    CHECK(tern_gguf_affine_of(dt, &a));
    int G = K / a.group;
    size_t ss = tern_dtype_size(a.sdt);
    uint8_t *codes = malloc((size_t)N * K), *sc = malloc((size_t)N * G * ss), *bi = malloc((size_t)N * G * ss);
    for (int n = 0; n < N; n++)
        CHECK(tern_gguf_affine_row(dt, w->rows + (size_t)n * row, K, codes + (size_t)n * K, sc + (size_t)n * G * ss,
                                   bi + (size_t)n * G * ss) == 0);
    size_t pa = tern_cpu_qpanel_bytes(a.bits, a.group, a.sdt, N, K);
    w->affine = aligned_alloc(64, (pa + 63) / 64 * 64);
    for (int p = 0; p < tern_qp_count(N); p++) {
        int n0 = p * TERN_QP_ROWS, nr = N - n0 < TERN_QP_ROWS ? N - n0 : TERN_QP_ROWS;
        tern_cpu_qpanel_pack_rows(codes + (size_t)n0 * K, sc + (size_t)n0 * G * ss, bi + (size_t)n0 * G * ss, a.sdt,
                                  a.bits, a.group, nr, K,
                                  (uint8_t *)w->affine + (size_t)p * tern_qp_panel_bytes(a.bits, a.group, a.sdt, K));
    }
    w->qa = (tern_qmat){w->affine, NULL, NULL, a.sdt, a.group, dt, TERN_QF_AFFINE};
    w->wa = a.bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4;

    tern_qform form = tern_gguf_qform(dt);
    tern_qform_info f = tern_qform_get(form);
    int Gc = K / f.group, S = Gc / f.sbg;
    uint8_t *cc = malloc((size_t)TERN_QP_ROWS * K), *csc = malloc((size_t)TERN_QP_ROWS * Gc);
    uint8_t *cm = malloc((size_t)TERN_QP_ROWS * Gc);
    uint16_t *d = malloc((size_t)TERN_QP_ROWS * S * 2), *dm = malloc((size_t)TERN_QP_ROWS * S * 2);
    size_t pb = tern_qf_panel_bytes(f, K);
    w->compact_bytes = pb * (size_t)tern_qp_count(N);
    w->compact = aligned_alloc(64, w->compact_bytes);
    for (int p = 0; p < tern_qp_count(N); p++) {
        int n0 = p * TERN_QP_ROWS, nr = N - n0 < TERN_QP_ROWS ? N - n0 : TERN_QP_ROWS;
        for (int r = 0; r < nr; r++)
            tern_gguf_compact_row(dt, w->rows + (size_t)(n0 + r) * row, K, cc + (size_t)r * K, d + (size_t)r * S,
                                  dm + (size_t)r * S, csc + (size_t)r * Gc, cm + (size_t)r * Gc);
        tern_cpu_qpanel_pack_compact(form, cc, d, dm, csc, cm, nr, K, (uint8_t *)w->compact + (size_t)p * pb);
    }
    w->qc = (tern_qmat){w->compact, NULL, NULL, TERN_DT_F16, f.group, dt, form};
    w->wc = f.bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4;
    free(codes);
    free(sc);
    free(bi);
    free(cc);
    free(csc);
    free(cm);
    free(d);
    free(dm);
}

static void gw_free(gw *w)
{
    free(w->rows);
    free(w->affine);
    free(w->compact);
}

static tern_status run(tern_pool *p, tern_act_mode mode, const float *x, int M, const gw *w, int compact,
                       tern_wlayout layout, float *y)
{
    tern_mm_out o = {compact ? &w->qc : &w->qa, compact ? w->wc : w->wa, w->N, y, layout};
    return tern_cpu_matmul_multi(p, mode, x, M, w->K, &o, 1);
}

static void check_case(tern_pool *p1, tern_pool *p2, tern_dtype dt, int M, int K, int N)
{
    gw w;
    gw_make(&w, dt, N, K);
    /* the panel is the size of the file's blocks (K-quants: + 4 bytes per 256 for the six-bit
     * scales; each record padded to 64 bytes) */
    int be, bb;
    tern_dtype_block(dt, &be, &bb);
    size_t file = (size_t)tern_qp_count(N) * TERN_QP_ROWS * (size_t)(K / be) * (size_t)bb;
    size_t extra = dt == TERN_DT_Q4_K || dt == TERN_DT_Q5_K ? (size_t)tern_qp_count(N) * TERN_QP_ROWS * (size_t)K / 256 * 4 : 0;
    tern_qform_info f = tern_qform_get(tern_gguf_qform(dt));
    size_t records = (size_t)tern_qp_count(N) * (size_t)((K / f.group + f.rg - 1) / f.rg);
    CHECK_MSG(w.compact_bytes <= file + extra + 63 * records,
              "%s compact panels %zu bytes, file blocks %zu", tern_dtype_name(dt), w.compact_bytes, file);

    size_t ny = (size_t)M * N;
    float *x = malloc(sizeof(float) * (size_t)M * K), *ref = malloc(sizeof(float) * ny), *y = malloc(sizeof(float) * ny);
    float *row = malloc(sizeof(float) * (size_t)N);
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
    tern_cpu_isa saved = tern_cpu_isa_active();
    for (int mode = 0; mode < 2; mode++) {
        /* the baseline: the scalar kernel on the affine form */
        tern_cpu_isa_select(TERN_CPU_ISA_SCALAR);
        CHECK(run(p1, (tern_act_mode)mode, x, M, &w, 0, TERN_WL_PANELS, ref) == TERN_OK);
        for (int isa = 0; isa < TERN_CPU_ISA_COUNT; isa++) {
            if (tern_cpu_isa_select((tern_cpu_isa)isa) != TERN_OK) continue;
            for (int compact = 0; compact < 2; compact++)
                for (int t = 0; t < 2; t++) {
                    memset(y, 0, sizeof(float) * ny);
                    CHECK(run(t ? p2 : p1, (tern_act_mode)mode, x, M, &w, compact,
                              t ? TERN_WL_PANELS_HUGE : TERN_WL_PANELS, y) == TERN_OK);
                    CHECK_MSG(memcmp(y, ref, sizeof(float) * ny) == 0,
                              "%s %s compact=%d threads=%d mode=%d M=%d K=%d N=%d differs from the scalar affine",
                              tern_dtype_name(dt), tern_cpu_isa_name((tern_cpu_isa)isa), compact, t + 1, mode, M, K, N);
                }
            int alone = 1;
            for (int m = 0; m < M; m++) {
                CHECK(run(p2, (tern_act_mode)mode, x + (size_t)m * K, 1, &w, 1, TERN_WL_PANELS_HUGE, row) == TERN_OK);
                alone &= memcmp(row, ref + (size_t)m * N, sizeof(float) * (size_t)N) == 0;
            }
            CHECK_MSG(alone, "%s %s compact rows alone differ from the batch: mode=%d M=%d", tern_dtype_name(dt),
                      tern_cpu_isa_name((tern_cpu_isa)isa), mode, M);
        }
    }
    tern_cpu_isa_select(saved);
    /* descriptions that do not match the form are refused */
    tern_qmat bad = w.qc;
    tern_mm_out o = {&bad, w.wc, N, y, TERN_WL_PANELS};
    bad.group = w.qc.group == 32 ? 64 : 32;
    CHECK(tern_cpu_matmul_multi(p1, TERN_ACT_F32, x, M, K, &o, 1) != TERN_OK);
    bad = w.qc;
    bad.form = TERN_QF_COUNT;
    CHECK(tern_cpu_matmul_multi(p1, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_INVALID);
    bad = w.qc;
    o.wdt = w.wc == TERN_DT_MLX_Q8 ? TERN_DT_MLX_Q4 : TERN_DT_MLX_Q8;
    CHECK(tern_cpu_matmul_multi(p1, TERN_ACT_F32, x, M, K, &o, 1) == TERN_E_INVALID);
    o.wdt = w.wc;
    o.layout = TERN_WL_ROWS;
    CHECK(tern_cpu_matmul_multi(p1, TERN_ACT_F32, x, M, K, &o, 1) != TERN_OK);
    gw_free(&w);
    free(x);
    free(ref);
    free(y);
    free(row);
}

int main(void)
{
    tern_pool *p1 = NULL, *p2 = NULL;
    CHECK(tern_pool_create(1, &p1) == TERN_OK);
    CHECK(tern_pool_create(2, &p2) == TERN_OK);
    static const tern_dtype dts[] = {TERN_DT_Q8_0, TERN_DT_Q4_0, TERN_DT_Q4_K, TERN_DT_Q5_K, TERN_DT_Q6_K};
    static const int Ms[] = {1, 2, 3, 5, 8, 9, 17};
    static const int Ns[] = {1, 16, 23, 40};
    int cases = 0;
    for (int i = 0; i < 5; i++)
        for (int mi = 0; mi < 7; mi++) {
            if ((mi + i) % 2) continue;
            int K = 256 * (1 + (mi + i) % 3), N = Ns[(mi + 3 * i) % 4];
            check_case(p1, p2, dts[i], Ms[mi], K, N);
            cases++;
        }
    fprintf(stderr, "matmul_q_gguf: %d cases\n", cases);
    tern_pool_free(p1);
    tern_pool_free(p2);
    return check_summary("matmul_q_gguf");
}

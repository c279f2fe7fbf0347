/* tern_cpu_matmul against the scalar reference, for every ISA this CPU has,
 * every weight dtype and activation mode, on awkward shapes; batch
 * invariance: each row computed inside a batch, alone, and with 1 or 2
 * threads must be bit-identical; and the panel layout of the weights must
 * give results bit-identical to the row-major weights. */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/panel.h"
#include "tern/status.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void *make_weights(tern_dtype dt, int N, int K)
{
    size_t n = (size_t)N * (size_t)K;
    void *w = malloc(n * tern_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        float v = frand();
        if (dt == TERN_DT_F32) ((float *)w)[i] = v;
        else if (dt == TERN_DT_F16) ((uint16_t *)w)[i] = tern_f32_to_f16(v);
        else ((uint16_t *)w)[i] = tern_f32_to_bf16(v);
    }
    return w;
}

/* |y - ref| within a relative bound of sum |x*w| (accumulation order differs). */
static int close_to_ref(const float *y, const float *ref, const float *x, int M, int K, int N)
{
    for (int m = 0; m < M; m++) {
        double xa = 0;
        for (int k = 0; k < K; k++) xa += fabs(x[(long)m * K + k]);
        for (int n = 0; n < N; n++) {
            double d = fabs((double)y[(long)m * N + n] - ref[(long)m * N + n]);
            if (!(d <= 2e-6 * xa + 1e-6)) {
                fprintf(stderr, "  m=%d n=%d got %.9g want %.9g\n", m, n, y[(long)m * N + n],
                        ref[(long)m * N + n]);
                return 0;
            }
        }
    }
    return 1;
}

/* The panel copy of w, with its padding poisoned: a kernel that read the
 * padding of a partial panel or chunk would change results. */
static void *make_panels(const void *w, tern_dtype dt, int N, int K)
{
    size_t bytes = tern_cpu_panel_bytes(dt, N, K);
    unsigned char *p = malloc(bytes);
    tern_cpu_panel_pack(w, dt, N, K, p, 0, tern_panel_count(N));
    size_t es = tern_dtype_size(dt);
    unsigned char *real = calloc(bytes, 1);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            size_t o = (size_t)tern_panel_offset(K, n, k) * es;
            if (memcmp(p + o, (const char *)w + ((size_t)n * K + (size_t)k) * es, es)) {
                CHECK_MSG(0, "panel element (%d,%d) misplaced", n, k);
                free(real);
                return p;
            }
            memset(real + o, 1, es);
        }
    int pad_zero = 1;
    for (size_t i = 0; i < bytes; i++)
        if (!real[i]) {
            pad_zero &= p[i] == 0;
            p[i] = 0x7f;    /* NaN/Inf-ish in every dtype */
        }
    CHECK_MSG(pad_zero, "panel padding not zero (N=%d K=%d)", N, K);
    free(real);
    return p;
}

/* The product through the panel layouts equals the row-major one bit for bit. */
static void check_panels(tern_pool *pool, tern_act_mode mode, tern_dtype dt, const float *x,
                         int M, int K, int N, const void *w, const float *want)
{
    void *p = make_panels(w, dt, N, K);
    float *y = malloc(sizeof(float) * (size_t)M * N);
    for (int l = TERN_WL_PANELS; l <= TERN_WL_PANELS_HUGE; l++) {
        tern_mm_out o = {p, dt, N, y, (tern_wlayout)l};
        memset(y, 0, sizeof(float) * (size_t)M * N);
        CHECK(tern_cpu_matmul_multi(pool, mode, x, M, K, &o, 1) == TERN_OK);
        CHECK_MSG(memcmp(y, want, sizeof(float) * (size_t)M * N) == 0,
                  "panels (layout %d) != rows: %s mode=%d %s M=%d K=%d N=%d", l,
                  tern_cpu_isa_name(tern_cpu_isa_active()), mode, tern_dtype_name(dt), M, K, N);
    }
    free(y);
    free(p);
}

static void check_shape(tern_pool *p1, tern_pool *p2, tern_act_mode mode, tern_dtype dt,
                        int M, int K, int N)
{
    float *x = malloc(sizeof(float) * (size_t)M * K);
    for (long i = 0; i < (long)M * K; i++) x[i] = frand();
    void *w = make_weights(dt, N, K);
    size_t ybytes = sizeof(float) * (size_t)M * N;
    float *ref = malloc(ybytes), *y1 = malloc(ybytes), *y2 = malloc(ybytes);
    float *row = malloc(sizeof(float) * (size_t)N);
    const char *isa = tern_cpu_isa_name(tern_cpu_isa_active());

    tern_cpu_matmul_ref(mode, x, M, K, w, dt, N, ref);
    CHECK(tern_cpu_matmul(p1, mode, x, M, K, w, dt, N, y1) == TERN_OK);
    CHECK(tern_cpu_matmul(p2, mode, x, M, K, w, dt, N, y2) == TERN_OK);
    CHECK_MSG(close_to_ref(y2, ref, x, M, K, N), "%s mode=%d %s M=%d K=%d N=%d", isa, mode,
              tern_dtype_name(dt), M, K, N);
    CHECK_MSG(memcmp(y1, y2, ybytes) == 0, "threads differ: %s mode=%d %s M=%d K=%d N=%d",
              isa, mode, tern_dtype_name(dt), M, K, N);
    int alone_ok = 1;
    for (int m = 0; m < M; m++) {
        tern_pool *p = m % 2 ? p1 : p2;
        if (tern_cpu_matmul(p, mode, x + (long)m * K, 1, K, w, dt, N, row) != TERN_OK ||
            memcmp(row, y2 + (long)m * N, sizeof(float) * (size_t)N) != 0)
            alone_ok = 0;
    }
    CHECK_MSG(alone_ok, "row alone differs from batch: %s mode=%d %s M=%d K=%d N=%d", isa, mode,
              tern_dtype_name(dt), M, K, N);
    check_panels(p2, mode, dt, x, M, K, N, w, y2);
    check_panels(p1, mode, dt, x, 1, K, N, w, y2);
    /* the same rows in reverse order, as a batch of other neighbours */
    if (M > 1) {
        float *xr = malloc(sizeof(float) * (size_t)M * K), *yr = malloc(ybytes);
        for (int m = 0; m < M; m++)
            memcpy(xr + (long)m * K, x + (long)(M - 1 - m) * K, sizeof(float) * (size_t)K);
        CHECK(tern_cpu_matmul(p2, mode, xr, M, K, w, dt, N, yr) == TERN_OK);
        int rev_ok = 1;
        for (int m = 0; m < M; m++)
            if (memcmp(yr + (long)m * N, y2 + (long)(M - 1 - m) * N, sizeof(float) * (size_t)N))
                rev_ok = 0;
        CHECK_MSG(rev_ok, "reordered batch differs: %s mode=%d %s M=%d K=%d N=%d", isa, mode,
                  tern_dtype_name(dt), M, K, N);
        free(xr);
        free(yr);
    }
    free(x);
    free(w);
    free(ref);
    free(y1);
    free(y2);
    free(row);
}

/* bf16 activation rounding is elementwise round-to-nearest-even. */
static void check_rounding(tern_pool *pool)
{
    float x[] = {1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, -3.14159f, 65504.0f, 1e-3f,
                 1.0f + 0x1p-8f + 0x1p-20f, -0.0f, 3.0e38f};
    int K = 1, M = (int)(sizeof x / sizeof x[0]);
    uint16_t one = tern_f32_to_bf16(1.0f);
    float y[8];
    CHECK(tern_cpu_matmul(pool, TERN_ACT_BF16, x, M, K, &one, TERN_DT_BF16, 1, y) == TERN_OK);
    for (int m = 0; m < M; m++)
        CHECK_MSG(y[m] == tern_bf16_to_f32(tern_f32_to_bf16(x[m])), "x=%.9g y=%.9g", x[m], y[m]);
}

/* tern_cpu_matmul_multi equals separate calls bit for bit, mixed dtypes. */
static void check_multi(tern_pool *pool, tern_act_mode mode, int M, int K)
{
    static const tern_dtype dts[] = {TERN_DT_BF16, TERN_DT_F16, TERN_DT_BF16, TERN_DT_F32};
    static const int ns[] = {40, 7, 30, 13};
    float *x = malloc(sizeof(float) * (size_t)M * K);
    for (long i = 0; i < (long)M * K; i++) x[i] = frand();
    tern_mm_out outs[4];
    float *sep[4];
    for (int i = 0; i < 4; i++) {
        outs[i] = (tern_mm_out){make_weights(dts[i], ns[i], K), dts[i], ns[i],
                                malloc(sizeof(float) * (size_t)M * ns[i]), TERN_WL_ROWS};
        sep[i] = malloc(sizeof(float) * (size_t)M * ns[i]);
        CHECK(tern_cpu_matmul(pool, mode, x, M, K, outs[i].w, dts[i], ns[i], sep[i]) == TERN_OK);
    }
    CHECK(tern_cpu_matmul_multi(pool, mode, x, M, K, outs, 4) == TERN_OK);
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(memcmp(outs[i].y, sep[i], sizeof(float) * (size_t)M * ns[i]) == 0,
                  "multi output %d differs (mode=%d M=%d K=%d)", i, mode, M, K);
        free((void *)outs[i].w);
        free(outs[i].y);
        free(sep[i]);
    }
    outs[0].layout = (tern_wlayout)7;
    CHECK(tern_cpu_matmul_multi(pool, mode, x, M, K, outs, 1) == TERN_E_INVALID);
    CHECK(tern_cpu_matmul_multi(pool, mode, x, M, K, outs, 0) == TERN_E_RANGE);
    CHECK(tern_cpu_matmul_multi(pool, mode, x, M, K, outs, TERN_MM_MAX_OUTS + 1) == TERN_E_RANGE);
    free(x);
}

int main(void)
{
    tern_pool *p1 = NULL, *p2 = NULL;
    CHECK(tern_pool_create(1, &p1) == TERN_OK);
    CHECK(tern_pool_create(2, &p2) == TERN_OK);

    float x1[4] = {1, 2, 3, 4}, y1[2];
    uint16_t w8[8] = {0};
    CHECK(tern_cpu_matmul(p2, TERN_ACT_F32, x1, 1, 0, w8, TERN_DT_F32, 2, y1) == TERN_E_INVALID);
    CHECK(tern_cpu_matmul(p2, TERN_ACT_F32, x1, -1, 4, w8, TERN_DT_F32, 2, y1) == TERN_E_INVALID);
    CHECK(tern_cpu_matmul(p2, TERN_ACT_F32, x1, 1, 4, w8, TERN_DT_I32, 2, y1) == TERN_E_UNSUPPORTED);
    CHECK(tern_cpu_matmul(p2, TERN_ACT_F32, x1, 0, 4, w8, TERN_DT_F32, 2, y1) == TERN_OK);

    static const int Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 33, 61};
    static const int KNs[][2] = {{1, 1}, {7, 5}, {16, 13}, {31, 24}, {32, 7}, {33, 50},
                                 {100, 26}, {257, 70}, {64, 200}};
    static const tern_dtype dts[] = {TERN_DT_F32, TERN_DT_F16, TERN_DT_BF16};
    int n_isa = 0;
    for (int isa = 0; isa < TERN_CPU_ISA_COUNT; isa++) {
        if (tern_cpu_isa_select((tern_cpu_isa)isa) != TERN_OK) continue;
        n_isa++;
        check_rounding(p2);
        for (int mode = 0; mode < 2; mode++)
            for (size_t d = 0; d < 3; d++)
                for (size_t s = 0; s < sizeof KNs / sizeof KNs[0]; s++)
                    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                        /* the largest shapes once per dtype and mode is enough */
                        if (Ms[mi] > 9 && KNs[s][0] * KNs[s][1] > 20000 && mi % 2) continue;
                        check_shape(p1, p2, (tern_act_mode)mode, dts[d], Ms[mi], KNs[s][0],
                                    KNs[s][1]);
                    }
        /* a few random shapes per dtype and mode */
        for (int mode = 0; mode < 2; mode++)
            for (size_t d = 0; d < 3; d++)
                for (int r = 0; r < 3; r++) {
                    int M = 1 + (int)((frand() + 1.0f) * 20.0f);
                    int K = 1 + (int)((frand() + 1.0f) * 150.0f);
                    int N = 1 + (int)((frand() + 1.0f) * 50.0f);
                    check_shape(p1, p2, (tern_act_mode)mode, dts[d], M, K, N);
                }
        /* large enough for several row blocks and parallel activation rounding */
        check_shape(p1, p2, TERN_ACT_BF16, TERN_DT_BF16, 300, 1000, 30);
        check_shape(p1, p2, TERN_ACT_F32, TERN_DT_F16, 100, 260, 50);
        for (int mode = 0; mode < 2; mode++) {
            check_multi(p2, (tern_act_mode)mode, 1, 100);
            check_multi(p2, (tern_act_mode)mode, 11, 67);
            check_multi(p1, (tern_act_mode)mode, 3, 5000);   /* heap scratch */
        }
    }
    CHECK(n_isa >= 1);
    CHECK(tern_cpu_isa_select(TERN_CPU_ISA_COUNT) == TERN_E_UNSUPPORTED);
    fprintf(stderr, "matmul: %d instruction set(s) tested\n", n_isa);
    tern_pool_free(p1);
    tern_pool_free(p2);
    return check_summary("matmul");
}

/* Matrix products and the fused gate/up SwiGLU against the CPU reference
 * (tern_cpu_matmul_ref, double accumulation), and their batch invariance.
 *
 * Tolerance: |got - want| <= 1e-5 * sum_k |x_k w_k| per element (float32
 * accumulation over K terms in a different order than the reference). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "ops_harness.h"

static const double MM_RTOL = 1e-5;

static const char *dt_name(tern_dtype dt) { return tern_dtype_name(dt); }

/* want = x . w^T (+ y0), scale = |x| . |w|^T, from the dtype-rounded w. */
static void reference(tern_act_mode mode, const float *x, int M, int K, const void *w, tern_dtype wdt, int N,
                      const float *y0, float *want, double *scale)
{
    tern_cpu_matmul_ref(mode, x, M, K, w, wdt, N, want);
    float *wf = malloc((size_t)N * K * sizeof *wf);
    tern_cpu_to_f32(w, wdt, (long)N * K, wf);
    int rnd = mode == TERN_ACT_BF16 && wdt == TERN_DT_BF16;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float a = x[(long)m * K + k];
                if (rnd) a = tern_bf16_to_f32(tern_f32_to_bf16(a));
                s += fabs((double)a * wf[(long)n * K + k]);
            }
            long i = (long)m * N + n;
            if (y0) {
                want[i] += y0[i];
                s += fabs((double)y0[i]);
            }
            scale[i] = s;
        }
    free(wf);
}

static void matmul_case(tern_dtype wdt, tern_cuda_act act, tern_cuda_mm_path path, int M, int K, int N, int acc)
{
    char name[160];
    snprintf(name, sizeof name, "matmul %s act=%s %s M=%d K=%d N=%d%s", dt_name(wdt), act ? "bf16" : "f32",
             path ? "cublas" : "own", M, K, N, acc ? " +=" : "");
    float *x = malloc((size_t)M * K * sizeof *x), *wf = malloc((size_t)N * K * sizeof *wf);
    float *y0 = malloc((size_t)M * N * sizeof *y0), *want = malloc((size_t)M * N * sizeof *want);
    float *got = malloc((size_t)M * N * sizeof *got);
    double *scale = malloc((size_t)M * N * sizeof *scale);
    ops_fill(x, (long)M * K, (unsigned)(M * 7 + K), 1.0f);
    ops_fill(wf, (long)N * K, (unsigned)(N * 13 + K), 0.05f);
    ops_fill(y0, (long)M * N, (unsigned)(M + N), 1.0f);
    void *w = ops_to_dtype(wf, (long)N * K, wdt);
    int cublas = path == TERN_CUDA_MM_CUBLAS && M > TERN_CUDA_GEMV_MAX_M && wdt == TERN_DT_BF16;
    tern_act_mode mode = (act == TERN_CUDA_ACT_BF16 || cublas) ? TERN_ACT_BF16 : TERN_ACT_F32;
    reference(mode, x, M, K, w, wdt, N, acc ? y0 : NULL, want, scale);
    float *dx = ops_dev(x, (size_t)M * K * 4), *dy = ops_dev(y0, (size_t)M * N * 4);
    void *dw = ops_dev(w, (size_t)N * K * tern_dtype_size(wdt));
    size_t tb = tern_cuda_matmul_tmp_bytes(path, M, K, N);
    void *dt = tb ? ops_dev_zero(tb) : NULL;
    if (ops_ok(tern_cuda_matmul(ops_cuda, act, path, dx, M, K, dw, wdt, N, dy, N, acc, dt), name)) {
        ops_get(got, dy, (size_t)M * N * 4);
        ops_compare(name, got, want, scale, (long)M * N, 0, MM_RTOL);
        /* Batch invariance: each row alone gives the same bits. */
        if (!cublas && M > 1) {
            float *one = malloc((size_t)N * sizeof *one), *row = malloc((size_t)M * N * sizeof *row);
            for (int m = 0; m < M; m++) {
                ops_ok(tern_cuda_upload(ops_cuda, dy, y0 + (long)m * N, (size_t)N * 4), "upload");
                ops_ok(tern_cuda_matmul(ops_cuda, act, path, dx + (long)m * K, 1, K, dw, wdt, N, dy, N, acc, dt),
                       name);
                ops_get(one, dy, (size_t)N * 4);
                memcpy(row + (long)m * N, one, (size_t)N * 4);
            }
            char n2[200];
            snprintf(n2, sizeof n2, "  rows alone == in batch of %d", M);
            ops_same(n2, row, got, (long)M * N);
            free(one);
            free(row);
        }
    }
    tern_cuda_free(ops_cuda, dx);
    tern_cuda_free(ops_cuda, dy);
    tern_cuda_free(ops_cuda, dw);
    tern_cuda_free(ops_cuda, dt);
    free(x); free(wf); free(y0); free(want); free(got); free(scale); free(w);
}

static void gate_up_case(tern_dtype wdt, tern_cuda_act act, int M, int K, int F)
{
    char name[160];
    snprintf(name, sizeof name, "gate_up %s act=%s M=%d K=%d F=%d", dt_name(wdt), act ? "bf16" : "f32", M, K, F);
    float *x = malloc((size_t)M * K * 4), *wg = malloc((size_t)F * K * 4), *wu = malloc((size_t)F * K * 4);
    float *g = malloc((size_t)M * F * 4), *u = malloc((size_t)M * F * 4), *got = malloc((size_t)M * F * 4);
    double *sg = malloc((size_t)M * F * 8), *su = malloc((size_t)M * F * 8);
    ops_fill(x, (long)M * K, 11u + (unsigned)M, 1.0f);
    ops_fill(wg, (long)F * K, 12u, 0.05f);
    ops_fill(wu, (long)F * K, 13u, 0.05f);
    void *hg = ops_to_dtype(wg, (long)F * K, wdt), *hu = ops_to_dtype(wu, (long)F * K, wdt);
    tern_act_mode mode = act == TERN_CUDA_ACT_BF16 ? TERN_ACT_BF16 : TERN_ACT_F32;
    reference(mode, x, M, K, hg, wdt, F, NULL, g, sg);
    reference(mode, x, M, K, hu, wdt, F, NULL, u, su);
    /* The error of silu(g)*u: |u| err(g) |silu'| + |silu(g)| err(u), silu' <= 1.1. */
    for (long i = 0; i < (long)M * F; i++) {
        float sil = g[i] / (1.0f + expf(-g[i]));
        sg[i] = 1.1 * fabs(u[i]) * sg[i] + fabs(sil) * su[i] + fabs(sil * u[i]) * 0.1;
    }
    tern_cpu_silu_mul(g, u, (long)M * F);
    size_t wb = (size_t)F * K * tern_dtype_size(wdt);
    float *dx = ops_dev(x, (size_t)M * K * 4), *dh = ops_dev_zero((size_t)M * F * 4);
    float *dg = ops_dev_zero((size_t)M * F * 4), *du = ops_dev_zero((size_t)M * F * 4);
    void *dwg = ops_dev(hg, wb), *dwu = ops_dev(hu, wb);
    if (ops_ok(tern_cuda_gate_up(ops_cuda, act, dx, M, K, dwg, dwu, wdt, F, dh), name)) {
        ops_get(got, dh, (size_t)M * F * 4);
        ops_compare(name, got, g, sg, (long)M * F, 0, MM_RTOL);
        float *sep = malloc((size_t)M * F * 4);
        ops_ok(tern_cuda_matmul(ops_cuda, act, TERN_CUDA_MM_OWN, dx, M, K, dwg, wdt, F, dg, F, 0, NULL), name);
        ops_ok(tern_cuda_matmul(ops_cuda, act, TERN_CUDA_MM_OWN, dx, M, K, dwu, wdt, F, du, F, 0, NULL), name);
        ops_ok(tern_cuda_silu_mul(ops_cuda, dg, du, (long)M * F), name);
        ops_get(sep, dg, (size_t)M * F * 4);
        ops_same("  fused == matmul, matmul, silu_mul", got, sep, (long)M * F);
        if (M > 1) {
            for (int m = 0; m < M; m++)
                ops_ok(tern_cuda_gate_up(ops_cuda, act, dx + (long)m * K, 1, K, dwg, dwu, wdt, F, dh + (long)m * F),
                       name);
            ops_get(sep, dh, (size_t)M * F * 4);
            char n2[200];
            snprintf(n2, sizeof n2, "  rows alone == in batch of %d", M);
            ops_same(n2, sep, got, (long)M * F);
        }
        free(sep);
    }
    tern_cuda_free(ops_cuda, dx); tern_cuda_free(ops_cuda, dh); tern_cuda_free(ops_cuda, dg);
    tern_cuda_free(ops_cuda, du); tern_cuda_free(ops_cuda, dwg); tern_cuda_free(ops_cuda, dwu);
    free(x); free(wg); free(wu); free(g); free(u); free(got); free(sg); free(su); free(hg); free(hu);
}

/* A one-row kernel case: a product (gate_up 0: N outputs, acc its
 * residual add) or a SwiGLU pair (gate_up 1: N = F). */
struct one_row_case {
    int gate_up;
    tern_cuda_act act;
    int M, K, N, acc;
};

/* Each case under each of n modes of a one-row kernel setting (set:
 * tern_cuda_set_sk_x or tern_cuda_set_sk_early, restored after), rows
 * alone against the batched kernels, bit for bit. */
static void one_row_modes(int (*set)(tern_cuda *, int), const char *what, const int *modes, int n,
                          const struct one_row_case *cs, int nc)
{
    for (int i = 0; i < n; i++) {
        int was = set(ops_cuda, modes[i]);
        printf("(one-row kernel, %s %d)\n", what, modes[i]);
        for (int j = 0; j < nc; j++) {
            const struct one_row_case *c = &cs[j];
            if (c->gate_up) gate_up_case(TERN_DT_BF16, c->act, c->M, c->K, c->N);
            else matmul_case(TERN_DT_BF16, c->act, TERN_CUDA_MM_OWN, c->M, c->K, c->N, c->acc);
        }
        set(ops_cuda, was);
    }
}

void ops_linear(void)
{
    static const tern_dtype dts[] = {TERN_DT_BF16, TERN_DT_F16, TERN_DT_F32};
    static const int shapes[][2] = {{256, 64}, {4096, 1030}, {1032, 77}, {8, 3}};
    static const int Ms[] = {1, 2, 5, 16, 17, 40};
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 4; s++)
            for (int mi = 0; mi < 6; mi++) {
                int M = Ms[mi], K = shapes[s][0], N = shapes[s][1];
                matmul_case(dts[d], TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, M, K, N, mi == 2);
                if (dts[d] == TERN_DT_BF16) matmul_case(dts[d], TERN_CUDA_ACT_BF16, TERN_CUDA_MM_OWN, M, K, N, 0);
            }
    /* bf16 weights past the small-batch kernel (the tensor-core GEMM for
     * M > 64: its rows alone run the small-batch kernel, so the check of
     * rows alone is the check that both kernels agree bit for bit), and K
     * whose 32-element blocks split into uneven or empty quarters. */
    /* The warpgroup GEMM takes K whose parts start on even blocks (4096,
     * 512, 1536, 1024 here: several stages a part, more stages than slots,
     * partial row and column tiles); the others fall back to mma.sync. */
    static const int big[][3] = {{65, 256, 64}, {130, 4096, 1030}, {300, 512, 136}, {97, 96, 40}, {70, 32, 9},
                                 {129, 4128, 200}, {64, 160, 72}, {33, 96, 40}, {200, 1536, 256}, {257, 1024, 130}};
    enum { NBIG = sizeof big / sizeof big[0] };
    /* Both GEMMs: mma.sync and warpgroup MMA (the default). */
    int wg_was = tern_cuda_set_wgmma(ops_cuda, 0);
    for (int wg = 0; wg <= 1; wg++) {
        tern_cuda_set_wgmma(ops_cuda, wg);
        printf("(%s GEMM)\n", wg ? "warpgroup-MMA" : "mma.sync");
        for (int i = 0; i < NBIG; i++) {
            matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, big[i][0], big[i][1], big[i][2], i & 1);
            matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, TERN_CUDA_MM_OWN, big[i][0], big[i][1], big[i][2], 0);
        }
        gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, 100, 512, 96);
        gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, 70, 256, 40);
        gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, 200, 1024, 200); /* the warpgroup GEMM's fused gate / up */
        gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, 129, 1536, 64);
    }
    tern_cuda_set_wgmma(ops_cuda, wg_was);
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, TERN_CUDA_MM_CUBLAS, 40, 4096, 1030, 0);
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, TERN_CUDA_MM_CUBLAS, 64, 1032, 77, 1);
    for (int d = 0; d < 3; d++) {
        gate_up_case(dts[d], TERN_CUDA_ACT_F32, 1, 1024, 300);
        gate_up_case(dts[d], TERN_CUDA_ACT_F32, 7, 256, 64);
    }
    gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, 3, 4096, 130);
    gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, 20, 512, 96);
    /* The one-row kernel's other modes (the default, 5: x prepared once per
     * block, o, down and the head at 2 blocks a multiprocessor with twice
     * the loads in flight, ran above): 2, 3 and 4 blocks, and 0 the
     * register-buffered kernel (K up to 12288: 48 KB of x). */
    static const int x_modes[] = {0, 2, 3, 4};
    static const struct one_row_case x_cases[] = {
        {0, TERN_CUDA_ACT_F32, 5, 4096, 1030, 1}, {0, TERN_CUDA_ACT_BF16, 16, 256, 64, 0},
        {0, TERN_CUDA_ACT_F32, 2, 12288, 40, 0},  {0, TERN_CUDA_ACT_F32, 3, 96, 9, 0}, /* empty parts */
        {1, TERN_CUDA_ACT_F32, 7, 256, 64, 0},    {1, TERN_CUDA_ACT_BF16, 3, 4096, 130, 0},
    };
    one_row_modes(tern_cuda_set_sk_x, "mode", x_modes, 4, x_cases, 6);
    /* When the one-row kernel loads its first tile's second weight batch
     * (the default, 3, ran above): in the tile loop, before x, after a
     * warp's first x loads; at widths of one and several tiles a block. */
    static const int early_modes[] = {0, 1, 2};
    static const struct one_row_case early_cases[] = {
        {0, TERN_CUDA_ACT_F32, 5, 4096, 1030, 1}, {0, TERN_CUDA_ACT_F32, 2, 12288, 4096, 1},
        {0, TERN_CUDA_ACT_F32, 3, 96, 9, 0}, /* empty parts */
        {1, TERN_CUDA_ACT_F32, 3, 4096, 130, 0},  {1, TERN_CUDA_ACT_BF16, 2, 4096, 12288, 0},
    };
    one_row_modes(tern_cuda_set_sk_early, "second batch mode", early_modes, 3, early_cases, 5);
    /* K = 16384: 64 KiB of x in the one-row kernel's shared memory */
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, 2, 16384, 24, 0);
    /* The decode shapes' widths: several tiles a block (a wave is 2 blocks
     * a multiprocessor), rows alone against the batched kernels, bit for
     * bit. */
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, 2, 4096, 12288, 0);
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, 2, 12288, 4096, 1);
    matmul_case(TERN_DT_BF16, TERN_CUDA_ACT_BF16, TERN_CUDA_MM_OWN, 3, 1024, 5000, 0);
    gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, 2, 4096, 12288);
    gate_up_case(TERN_DT_BF16, TERN_CUDA_ACT_F32, 3, 1024, 3000);
}

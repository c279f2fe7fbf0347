/* One-row products over tiled copies of their weights (TERN_CUDA_TILED,
 * tiled.cu) give the row-major kernel's bits: every one-row form (plain,
 * the residual add, the folded norm, the SwiGLU pair with and without it),
 * and a matrix the copy refuses (N not a multiple of 8) stays on the
 * row-major kernel. */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

enum { T_PLAIN, T_ACC, T_NORM, T_PAIR, T_PAIR_NORM };

static tern_status tiled_run(int form, const float *x, int K, const float *nw, const void *w, const void *wu, int N,
                             float *y, float *tmp)
{
    switch (form) {
    case T_PLAIN:
    case T_ACC:
        return tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K, w, TERN_DT_BF16, N, y, N,
                                form == T_ACC, NULL);
    case T_NORM: return tern_cuda_matmul_norm(ops_cuda, x, 1, K, nw, 1e-6f, w, TERN_DT_BF16, N, y, N, tmp);
    case T_PAIR: return tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, x, 1, K, w, wu, TERN_DT_BF16, N, y);
    default: return tern_cuda_gate_up_norm(ops_cuda, x, 1, K, nw, 1e-6f, w, wu, TERN_DT_BF16, N, y, tmp);
    }
}

static void tiled_case(int form, int N, int K, int expect_copy)
{
    static const char *const names[] = {"matmul", "matmul +=", "matmul_norm", "gate_up", "gate_up_norm"};
    int pair = form == T_PAIR || form == T_PAIR_NORM;
    float *x = ops_dev_random(K, TERN_DT_F32, (unsigned)(N + K + form), 2.0f);
    float *nw = ops_dev_random(K, TERN_DT_F32, 11u, 1.5f);
    void *w = ops_dev_random((long)N * K, TERN_DT_BF16, (unsigned)N, 0.05f);
    void *wu = pair ? ops_dev_random((long)N * K, TERN_DT_BF16, (unsigned)N + 1, 0.05f) : NULL;
    float *y0 = ops_dev_random(N, TERN_DT_F32, 13u, 1.0f), *y = ops_dev_zero((size_t)N * 4);
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(K));
    float *want = malloc((size_t)N * 4), *got = malloc((size_t)N * 4);
    char name[128];
    snprintf(name, sizeof name, "tiled %s M=1 N=%d K=%d%s", names[form], N, K,
             expect_copy ? "" : " (no copy: row-major)");
    tern_status ts = tern_cuda_tile_weight(ops_cuda, w, N, K);
    if (!ts && wu) ts = tern_cuda_tile_weight(ops_cuda, wu, N, K);
    int ok = expect_copy ? ops_ok(ts, "tile the weights") : (ts == TERN_E_INVALID);
    if (!expect_copy) {
        printf("%s %-58s\n", ok ? "PASS" : "FAIL", "  tiled copy refused for N not a multiple of 8");
        ok ? ops_pass++ : ops_fail++;
    }
    for (int on = 0; on < 2 && ok; on++) {
        int was = tern_cuda_set_tiled(ops_cuda, on);
        ok = ops_ok(tern_cuda_copy(ops_cuda, y, y0, (size_t)N * 4), "residual") &&
             ops_ok(tiled_run(form, x, K, nw, w, wu, N, y, tmp), name);
        tern_cuda_set_tiled(ops_cuda, was);
        if (ok) ops_get(on ? got : want, y, (size_t)N * 4);
    }
    if (ok) ops_same(name, got, want, N);
    free(want);
    free(got);
    void *p[] = {x, nw, w, wu, y0, y, tmp};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        if (p[i]) tern_cuda_free(ops_cuda, p[i]);
}

void ops_tiled(void)
{
    tiled_case(T_PLAIN, 4096, 4096, 1);       /* o */
    tiled_case(T_ACC, 4096, 12288, 1);        /* down + residual */
    tiled_case(T_NORM, 6144, 4096, 1);        /* q/k/v with the norm folded */
    tiled_case(T_PAIR_NORM, 12288, 4096, 1);  /* gate/up with the norm: interleaved rows */
    tiled_case(T_PAIR, 96, 2048, 1);
    tiled_case(T_PAIR, 100, 512, 0);          /* F not a multiple of 8: refused, the pair kernel */
    tiled_case(T_NORM, 1000, 1024, 1);
    tiled_case(T_PLAIN, 1004, 1024, 0);
}

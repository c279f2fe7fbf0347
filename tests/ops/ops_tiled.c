/* Products over weights in the tiled layout (tiled.cu, the loader's
 * default) give the bits of the same products over the row-major matrix:
 * every form (plain, the residual add, the folded norm, the SwiGLU pair
 * with and without it) at every row count's kernel (one row, the
 * small-batch kernel's 8 / 16 / 32 / 64-row tiles, the prefill GEMM on
 * warpgroup MMA and on mma.sync), a block of rows from a tile boundary on,
 * and the refusals: a matrix the layout does not take, an overlapping
 * one (alone or within one call, which then tiles nothing), rows off a
 * tile boundary, other K, a pair with one matrix tiled. */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

enum { T_PLAIN, T_ACC, T_NORM, T_PAIR, T_PAIR_NORM };

static tern_status tiled_run(int form, const float *x, int M, int K, const float *nw, const void *w, const void *wu,
                             int N, float *y, float *tmp)
{
    switch (form) {
    case T_PLAIN:
    case T_ACC:
        return tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, M, K, w, TERN_DT_BF16, N, y, N,
                                form == T_ACC, NULL);
    case T_NORM: return tern_cuda_matmul_norm(ops_cuda, x, M, K, nw, 1e-6f, w, TERN_DT_BF16, N, y, N, tmp);
    case T_PAIR: return tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, x, M, K, w, wu, TERN_DT_BF16, N, y);
    default: return tern_cuda_gate_up_norm(ops_cuda, x, M, K, nw, 1e-6f, w, wu, TERN_DT_BF16, N, y, tmp);
    }
}

/* form over [N, K] weights at each of the rows in ms (0 ends), row-major
 * against tiled (the same values), bit for bit. */
static void tiled_case(int form, int N, int K, const int *ms)
{
    static const char *const names[] = {"matmul", "matmul +=", "matmul_norm", "gate_up", "gate_up_norm"};
    int pair = form == T_PAIR || form == T_PAIR_NORM, mmax = 0;
    for (const int *m = ms; *m; m++) mmax = *m > mmax ? *m : mmax;
    unsigned seed = (unsigned)(N * 7 + K + form);
    void *w = ops_dev_random((long)N * K, TERN_DT_BF16, seed, 0.05f);
    void *wt = ops_dev_random((long)N * K, TERN_DT_BF16, seed, 0.05f);
    void *wu = pair ? ops_dev_random((long)N * K, TERN_DT_BF16, seed + 1, 0.05f) : NULL;
    void *wut = pair ? ops_dev_random((long)N * K, TERN_DT_BF16, seed + 1, 0.05f) : NULL;
    float *x = ops_dev_random((long)mmax * K, TERN_DT_F32, seed + 2, 2.0f);
    float *nw = ops_dev_random(K, TERN_DT_F32, 11u, 1.5f);
    float *y0 = ops_dev_random((long)mmax * N, TERN_DT_F32, 13u, 1.0f), *y = ops_dev_zero((size_t)mmax * N * 4);
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(K));
    float *want = malloc((size_t)mmax * N * 4), *got = malloc((size_t)mmax * N * 4);
    tern_cuda_tile_req rq[2] = {{wt, N, K}, {wut, N, K}};
    int ok = ops_ok(tern_cuda_tile_weights(ops_cuda, rq, wut ? 2 : 1), "tile the weights");
    for (const int *m = ms; *m && ok; m++) {
        char name[128];
        snprintf(name, sizeof name, "tiled %s M=%d N=%d K=%d", names[form], *m, N, K);
        size_t yb = (size_t)*m * N * 4;
        for (int t = 0; t < 2 && ok; t++) {
            ok = ops_ok(tern_cuda_copy(ops_cuda, y, y0, yb), "residual") &&
                 ops_ok(tiled_run(form, x, *m, K, nw, t ? wt : w, t ? wut : wu, N, y, tmp), name);
            if (ok) ops_get(t ? got : want, y, yb);
        }
        if (ok) ops_same(name, got, want, (long)*m * N);
    }
    free(want);
    free(got);
    void *p[] = {x, nw, w, wt, wu, wut, y0, y, tmp};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        if (p[i]) tern_cuda_free(ops_cuda, p[i]);
}

static void expect(int ok, const char *what)
{
    printf("%s   %s\n", ok ? "PASS" : "FAIL", what);
    ok ? ops_pass++ : ops_fail++;
}

/* Rows from a tile boundary on read as a tiled matrix of their own; the
 * refusals leave everything as it was. */
static void tiled_edges(void)
{
    enum { N = 1000, K = 1024, M = 70 };
    void *w = ops_dev_random((long)N * K, TERN_DT_BF16, 77u, 0.05f), *wt = ops_dev_random((long)N * K, TERN_DT_BF16, 77u, 0.05f);
    float *x = ops_dev_random((long)M * K, TERN_DT_F32, 78u, 2.0f), *y = ops_dev_zero((size_t)M * N * 4);
    float *want = malloc((size_t)M * N * 4), *got = malloc((size_t)M * N * 4);
    expect(tern_cuda_tile_weight(ops_cuda, wt, 1004, K) == TERN_E_INVALID, "tiled layout refused for N not a multiple of 8");
    expect(tern_cuda_tile_weight(ops_cuda, wt, N, 1000) == TERN_E_INVALID, "tiled layout refused for K not a multiple of 32");
    /* a call with one request refused writes nothing: the other stays row-major */
    tern_cuda_tile_req bad[2] = {{wt, N, K}, {(uint16_t *)wt + 8 * K, 16, K}};
    expect(tern_cuda_tile_weights(ops_cuda, bad, 2) == TERN_E_INVALID && !tern_cuda_is_tiled(ops_cuda, wt),
           "a call with overlapping requests refused, nothing tiled");
    for (int t = 0; t < 2; t++)
        if (ops_ok(tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K, t ? wt : w, TERN_DT_BF16, N,
                                    y, N, 0, NULL),
                   "row-major product after the refused call"))
            ops_get(t ? got : want, y, (size_t)N * 4);
    ops_same("the refused call left the matrix as it was", got, want, N);
    if (ops_ok(tern_cuda_tile_weight(ops_cuda, wt, N, K), "tile the weights")) {
        expect(tern_cuda_tile_weight(ops_cuda, wt, N, K) == TERN_OK, "tiling a tiled matrix again does nothing");
        expect(tern_cuda_tile_weight(ops_cuda, (uint16_t *)wt + 8 * K, 16, K) == TERN_E_INVALID,
               "tiling inside a tiled matrix refused");
        expect(tern_cuda_is_tiled(ops_cuda, (uint16_t *)wt + 5 * K) && !tern_cuda_is_tiled(ops_cuda, w),
               "tern_cuda_is_tiled");
        /* rows 16 .. 16 + 504: a tiled matrix of their own */
        int rows = 504, ms[] = {1, 9, M};
        for (int i = 0; i < 3; i++) {
            char name[96];
            snprintf(name, sizeof name, "tiled rows 16..%d of %d, M=%d", 16 + rows, N, ms[i]);
            int ok = 1;
            for (int t = 0; t < 2 && ok; t++) {
                const uint16_t *b = (const uint16_t *)(t ? wt : w) + (size_t)16 * K;
                ok = ops_ok(tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, ms[i], K, b, TERN_DT_BF16,
                                             rows, y, rows, 0, NULL),
                            name);
                if (ok) ops_get(t ? got : want, y, (size_t)ms[i] * rows * 4);
            }
            if (ok) ops_same(name, got, want, (long)ms[i] * rows);
        }
        tern_status s1 = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K,
                                          (const uint16_t *)wt + (size_t)4 * K, TERN_DT_BF16, 8, y, 8, 0, NULL);
        expect(s1 == TERN_E_INVALID, "a product from row 4 of a tiled matrix refused");
        tern_status s2 = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K / 2, wt, TERN_DT_BF16,
                                          8, y, 8, 0, NULL);
        expect(s2 == TERN_E_INVALID, "a product of other K over a tiled matrix refused");
        tern_status s3 = tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, x, 1, K, wt, w, TERN_DT_BF16, 16, y);
        expect(s3 == TERN_E_INVALID, "a gate/up pair with one matrix tiled refused");
        tern_cuda_tiled_forget(ops_cuda, wt, 0);
        expect(!tern_cuda_is_tiled(ops_cuda, wt), "tern_cuda_tiled_forget");
    }
    free(want);
    free(got);
    void *p[] = {w, wt, x, y};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) tern_cuda_free(ops_cuda, p[i]);
}

void ops_tiled(void)
{
    static const int o_ms[] = {1, 5, 16, 40, 64, 100, 300, 0}, down_ms[] = {1, 9, 64, 130, 0},
                     qkv_ms[] = {1, 12, 33, 200, 0}, gu_ms[] = {1, 8, 17, 64, 129, 0}, small_ms[] = {1, 2, 70, 0},
                     odd_ms[] = {1, 65, 0}, gemm_ms[] = {100, 0}, gemm_gu_ms[] = {129, 0}, gemm_acc_ms[] = {130, 0};
    tiled_case(T_PLAIN, 4096, 4096, o_ms);          /* o */
    tiled_case(T_ACC, 4096, 12288, down_ms);        /* down + residual */
    tiled_case(T_NORM, 6144, 4096, qkv_ms);         /* q/k/v with the norm folded */
    tiled_case(T_PAIR_NORM, 12288, 4096, gu_ms);    /* gate/up with the norm */
    tiled_case(T_PAIR, 96, 2048, small_ms);
    tiled_case(T_ACC, 8, 256, small_ms);            /* one tile */
    tiled_case(T_NORM, 1000, 1024, odd_ms);
    /* the prefill GEMM on mma.sync */
    int was = tern_cuda_set_wgmma(ops_cuda, 0);
    tiled_case(T_PLAIN, 4096, 4096, gemm_ms);
    tiled_case(T_PAIR_NORM, 12288, 4096, gemm_gu_ms);
    tiled_case(T_ACC, 4096, 12288, gemm_acc_ms);
    tern_cuda_set_wgmma(ops_cuda, was);
    /* the one-row kernel's other times for its first tile's second batch
     * (the default, 3, ran above) over the decode shapes, one row */
    static const int one_ms[] = {1, 0};
    for (int mode = 0; mode < 3; mode++) {
        was = tern_cuda_set_sk_early(ops_cuda, mode);
        tiled_case(T_PLAIN, 4096, 4096, one_ms);
        tiled_case(T_ACC, 4096, 12288, one_ms);
        tiled_case(T_NORM, 6144, 4096, one_ms);
        tiled_case(T_PAIR_NORM, 12288, 4096, one_ms);
        tern_cuda_set_sk_early(ops_cuda, was);
    }
    tiled_edges();
}

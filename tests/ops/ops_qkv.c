/* tern_cuda_qkv_norm_prologue: the q/k/v product of one token with the
 * attention prologue folded into the one-row kernel (tern_cuda_set_qkv_fold
 * 1 and 2) against the two ops it replaces (mode 0: tern_cuda_matmul_norm,
 * then tern_cuda_qkv_rope_store): the fused row and the caches bit for bit,
 * twice in a row (the head counters left at zero for the next call). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/ops.h"
#include "ops_harness.h"

enum { CAP = 64, POS = 41 };

/* One call of each mode over its own copy of the cache; the row and the
 * cache of modes 1 and 2 against mode 0's. */
static void qkv_case(int K, int H, int HK, int hd, int rope_dim, int qk_norm)
{
    char name[160];
    snprintf(name, sizeof name, "qkv+prologue folded K=%d H=%d HK=%d hd=%d rope=%d%s", K, H, HK, hd, rope_dim,
             qk_norm ? " qk-norm" : "");
    int N = (H + 2 * HK) * hd;
    long hs = (long)CAP * hd, cache = 2L * HK * hs;
    float *kv = malloc((size_t)cache * 4), *cs = malloc((size_t)CAP * rope_dim * 4), *inv = malloc((size_t)rope_dim * 2);
    int *all = malloc(CAP * sizeof *all), zero = 0;
    ops_fill(kv, cache, 411u, 1.0f);
    for (int i = 0; i < rope_dim / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / rope_dim);
    for (int p = 0; p < CAP; p++) all[p] = p;
    tern_cpu_rope_table(CAP, rope_dim, all, inv, 1.0f, cs);
    float *dcs = ops_dev(cs, (size_t)CAP * rope_dim * 4);
    void *dqn = ops_dev_random(hd, TERN_DT_BF16, 412u, 1.5f), *dkn = ops_dev_random(hd, TERN_DT_BF16, 413u, 1.5f);
    void *w = ops_dev_random((long)N * K, TERN_DT_BF16, 414u, 0.05f);
    float *x = ops_dev_random(K, TERN_DT_F32, 415u, 2.0f), *nw = ops_dev_random(K, TERN_DT_F32, 416u, 1.0f);
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(N > K ? N : K));
    unsigned *cnt = ops_dev_zero(tern_cuda_qkv_count_bytes(H, HK));
    int *dtok = ops_dev(&zero, sizeof zero);
    long n = N + cache;
    float *got[3], *dq[3], *dc[3];
    tern_cuda_attn_row *drow[3];
    for (int v = 0; v < 3; v++) {
        dq[v] = ops_dev_zero((size_t)N * 4);
        dc[v] = ops_dev(kv, (size_t)cache * 4);
        tern_cuda_attn_row row = {dc[v], dc[v] + HK * hs, NULL, 0, hs, 0, POS + 1, 1, 0};
        drow[v] = ops_dev(&row, sizeof row);
        got[v] = malloc((size_t)n * 4);
    }
    float *first = malloc((size_t)N * 4);
    int ok = 1;
    for (int v = 0; v < 3 && ok; v++) {
        tern_cuda_qkv_fold f = {H, HK, hd, rope_dim, qk_norm ? dqn : NULL, qk_norm ? dkn : NULL, TERN_DT_BF16, 1e-6f,
                                dcs, drow[v], dtok, cnt};
        int was = tern_cuda_set_qkv_fold(ops_cuda, v);
        /* twice: the second call redoes the first call's row (the product
         * rewrites it) and leaves the cache as the first did */
        ok = ops_ok(tern_cuda_qkv_norm_prologue(ops_cuda, x, K, nw, 1e-6f, w, TERN_DT_BF16, dq[v], tmp, &f), name);
        if (ok) ops_get(first, dq[v], (size_t)N * 4);
        ok = ok && ops_ok(tern_cuda_qkv_norm_prologue(ops_cuda, x, K, nw, 1e-6f, w, TERN_DT_BF16, dq[v], tmp, &f), name);
        tern_cuda_set_qkv_fold(ops_cuda, was);
        if (!ok) break;
        ops_get(got[v], dq[v], (size_t)N * 4);
        ops_get(got[v] + N, dc[v], (size_t)cache * 4);
        char n2[220];
        snprintf(n2, sizeof n2, "%s mode %d: a second call == the first", name, v);
        ops_same(n2, got[v], first, N);
    }
    if (ok) {
        for (int v = 1; v < 3; v++) {
            char n2[220];
            snprintf(n2, sizeof n2, "%s mode %d == product, prologue", name, v);
            ops_same(n2, got[v], got[0], n);
        }
        unsigned *hc = malloc(tern_cuda_qkv_count_bytes(H, HK));
        ops_get(hc, cnt, tern_cuda_qkv_count_bytes(H, HK));
        int left = 0;
        for (int h = 0; h < H + 2 * HK; h++) left |= hc[h] != 0;
        printf("%s %-58s\n", left ? "FAIL" : "PASS", "  its head counters left at zero");
        left ? ops_fail++ : ops_pass++;
        free(hc);
    }
    for (int v = 0; v < 3; v++) {
        tern_cuda_free(ops_cuda, dq[v]); tern_cuda_free(ops_cuda, dc[v]); tern_cuda_free(ops_cuda, drow[v]);
        free(got[v]);
    }
    free(first);
    tern_cuda_free(ops_cuda, dcs); tern_cuda_free(ops_cuda, dqn); tern_cuda_free(ops_cuda, dkn);
    tern_cuda_free(ops_cuda, w); tern_cuda_free(ops_cuda, x); tern_cuda_free(ops_cuda, nw);
    tern_cuda_free(ops_cuda, tmp); tern_cuda_free(ops_cuda, cnt); tern_cuda_free(ops_cuda, dtok);
    free(kv); free(cs); free(inv); free(all);
}

void ops_qkv(void)
{
    qkv_case(4096, 32, 8, 128, 128, 1); /* Qwen3-8B: 768 tiles, three a block */
    qkv_case(256, 4, 2, 64, 64, 1);
    qkv_case(512, 8, 4, 16, 16, 0);
    qkv_case(1024, 4, 1, 256, 256, 1);
    qkv_case(2048, 16, 4, 128, 64, 1); /* rope over part of the head */
    qkv_case(96, 2, 1, 32, 32, 1);     /* K whose parts are uneven */
}

/* ops_test --time: kernel timings at Qwen3-8B shapes (hidden 4096, 32/8
 * heads of 128, FFN 12288, vocab 151936), weights made on the device. Each
 * figure is the mean of 50 launches after 5 warm-ups, timed with events;
 * GB/s counts the weight bytes (matmuls) or K/V bytes (attention) read. */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

static void *dev_random(long n, tern_dtype dt, unsigned seed) { return ops_dev_random(n, dt, seed, 0.05f); }

/* expr may name i_ (the launch count), e.g. to rotate weight copies. */
#define TIME_IT(ms, expr)                                              \
    do {                                                               \
        for (int i_ = 0; i_ < 5; i_++) ops_ok((expr), #expr);          \
        ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");               \
        for (int i_ = 0; i_ < 50; i_++) (expr);                        \
        ops_ok(tern_cuda_timer_elapsed(ops_cuda, &(ms)), "timer");     \
        (ms) /= 50;                                                    \
    } while (0)

/* Copies of a weight so that the copies together exceed the L2 several
 * times: timings then stream from HBM as in a model's pass. */
enum { MAXC = 16 };
static int copies_for(double bytes)
{
    int n = (int)(256e6 / bytes) + 1;
    return n < 2 ? 2 : n > MAXC ? MAXC : n;
}

/* A decode layer's four one-row products each alone and back to back,
 * over layer copies larger than the L2: their time in sequence against
 * the sum of their times alone shows what the kernel boundaries cost. */
static void ops_time_chain(void)
{
    enum { L = OPS_LAYERS };
    ops_layers ly;
    ops_layers_make(&ly, 300);
    double mb = ((double)OPS_QKV * OPS_D + (double)OPS_D * OPS_D + 3.0 * OPS_F * OPS_D) * 2 / 1e6;
    float ms[5];
    static const char *const what[4] = {"q/k/v + norm", "o + residual", "gate/up + norm", "down + residual"};
    for (int k = 0; k < 5; k++) /* each alone, then the four in sequence */
        TIME_IT(ms[k], ops_layer_run(&ly, i_ % L, k < 4 ? 1u << k : 15u));
    float sum = ms[0] + ms[1] + ms[2] + ms[3];
    printf("decode products (M = 1, %.1f MB a layer):", mb);
    for (int k = 0; k < 4; k++) printf(" %s %.1f", what[k], ms[k] * 1e3);
    printf(" us alone, sum %.1f us (%.0f GB/s)\n", sum * 1e3, mb / 1e3 / (sum / 1e3));
    printf("decode products in sequence: %.1f us a layer (%.0f GB/s), %.1f us less than alone\n", ms[4] * 1e3,
           mb / 1e3 / (ms[4] / 1e3), (sum - ms[4]) * 1e3);
    ops_layers_free(&ly);
}

/* ops_test --chain: the decode layer's products in sequence under the
 * one-row kernel's modes in turn (TERN_CUDA_SKX 5, the default, then 3 and
 * 2), twice over. */
void ops_time_chains(void)
{
    static const int modes[] = {5, 3, 2};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) {
            int was = tern_cuda_set_sk_x(ops_cuda, modes[i]);
            printf("-- TERN_CUDA_SKX=%d\n", modes[i]);
            ops_time_chain();
            tern_cuda_set_sk_x(ops_cuda, was);
        }
}

void ops_time(void)
{
    static const struct { const char *what; int K, N; } mm[] = {
        {"qkv (fused)", 4096, 6144}, {"o", 4096, 4096}, {"down", 12288, 4096}, {"lm_head", 4096, 151936}};
    static const int Ms[] = {1, 4, 16, 32, 64, 65, 512};
    enum { NM = sizeof Ms / sizeof *Ms };
    float *x = dev_random(512L * 12288, TERN_DT_F32, 1), *y = ops_dev_zero(64L * 151936 * 4);
    float *nwf = dev_random(4096, TERN_DT_F32, 40), *ntmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(12288));
    float ms;
    int wg_was = tern_cuda_set_wgmma(ops_cuda, 0); /* rows past 64 on the mma.sync GEMM, then each on the warpgroup GEMM */
    printf("%-22s %3s %10s %9s %8s   (weights rotated over copies > L2)\n", "matmul bf16", "M", "us", "GB/s",
           "TFLOP/s");
    for (int i = 0; i < 4; i++) {
        double gb = (double)mm[i].K * mm[i].N * 2 / 1e9;
        int nc = copies_for(gb * 1e9);
        void *w[MAXC];
        for (int k = 0; k < nc; k++) w[k] = dev_random((long)mm[i].K * mm[i].N, TERN_DT_BF16, 2 + i + 100 * k);
        for (int m = 0; m < NM; m++) {
            if (mm[i].N > 100000 && Ms[m] > 64) continue;
            for (int bf = 0; bf < (Ms[m] > 64 ? 2 : 1); bf++) {
                tern_cuda_act act = bf ? TERN_CUDA_ACT_BF16 : TERN_CUDA_ACT_F32;
                TIME_IT(ms, tern_cuda_matmul(ops_cuda, act, TERN_CUDA_MM_OWN, x, Ms[m], mm[i].K, w[i_ % nc],
                                                  TERN_DT_BF16, mm[i].N, y, mm[i].N, 0, NULL));
                printf("%-22s %3d %10.1f %9.0f %8.1f%s\n", mm[i].what, Ms[m], ms * 1e3, gb / (ms / 1e3),
                       2.0 * Ms[m] * mm[i].K * mm[i].N / (ms / 1e3) / 1e12, bf ? "  (bf16 activations)" : "");
            }
            if (Ms[m] == 512) /* the warpgroup GEMM */
                for (int bf = 0; bf < 2; bf++) {
                    tern_cuda_set_wgmma(ops_cuda, 1);
                    TIME_IT(ms, tern_cuda_matmul(ops_cuda, bf ? TERN_CUDA_ACT_BF16 : TERN_CUDA_ACT_F32,
                                                      TERN_CUDA_MM_OWN, x, 512, mm[i].K, w[i_ % nc], TERN_DT_BF16,
                                                      mm[i].N, y, mm[i].N, 0, NULL));
                    tern_cuda_set_wgmma(ops_cuda, 0);
                    printf("%-22s %3d %10.1f %9.0f %8.1f  (warpgroup GEMM%s)\n", mm[i].what, 512, ms * 1e3,
                           gb / (ms / 1e3), 2.0 * 512 * mm[i].K * mm[i].N / (ms / 1e3) / 1e12,
                           bf ? ", bf16 activations" : "");
                }
            if (Ms[m] == 512) {
                void *bt = ops_dev_zero(tern_cuda_matmul_tmp_bytes(TERN_CUDA_MM_CUBLAS, 512, mm[i].K, mm[i].N));
                TIME_IT(ms, tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_BF16, TERN_CUDA_MM_CUBLAS, x, 512, mm[i].K,
                                                  w[i_ % nc], TERN_DT_BF16, mm[i].N, y, mm[i].N, 0, bt));
                printf("%-22s %3d %10.1f %9.0f %8.1f  (cuBLAS, bf16 activations)\n", mm[i].what, 512, ms * 1e3,
                       gb / (ms / 1e3), 2.0 * 512 * mm[i].K * mm[i].N / (ms / 1e3) / 1e12);
                tern_cuda_free(ops_cuda, bt);
            }
        }
        if (mm[i].K == 4096) {
            TIME_IT(ms, tern_cuda_matmul_norm(ops_cuda, x, 1, 4096, nwf, 1e-6f, w[i_ % nc], TERN_DT_BF16, mm[i].N,
                                                   y, mm[i].N, ntmp));
            printf("%-22s %3d %10.1f %9.0f\n", "  norm folded", 1, ms * 1e3, gb / (ms / 1e3));
        }
        for (int k = 0; k < nc; k++) tern_cuda_free(ops_cuda, w[k]);
    }
    {
        double gb = 2.0 * 4096 * 12288 * 2 / 1e9;
        int nc = copies_for(gb * 1e9);
        void *wg[MAXC], *wu[MAXC];
        for (int k = 0; k < nc; k++) {
            wg[k] = dev_random(4096L * 12288, TERN_DT_BF16, 7 + 100 * k);
            wu[k] = dev_random(4096L * 12288, TERN_DT_BF16, 8 + 100 * k);
        }
        float *h = ops_dev_zero(512L * 12288 * 4);
        for (int m = 0; m < NM; m++) {
            TIME_IT(ms, tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, x, Ms[m], 4096, wg[i_ % nc], wu[i_ % nc],
                                               TERN_DT_BF16, 12288, h));
            printf("%-22s %3d %10.1f %9.0f %8.1f\n", "gate_up", Ms[m], ms * 1e3, gb / (ms / 1e3),
                   2.0 * 2 * Ms[m] * 4096 * 12288 / (ms / 1e3) / 1e12);
            if (Ms[m] == 512)
                for (int bf = 0; bf < 2; bf++) {
                    tern_cuda_set_wgmma(ops_cuda, 1);
                    TIME_IT(ms, tern_cuda_gate_up(ops_cuda, bf ? TERN_CUDA_ACT_BF16 : TERN_CUDA_ACT_F32, x, 512, 4096,
                                                       wg[i_ % nc], wu[i_ % nc], TERN_DT_BF16, 12288, h));
                    tern_cuda_set_wgmma(ops_cuda, 0);
                    printf("%-22s %3d %10.1f %9.0f %8.1f  (warpgroup GEMM%s)\n", "gate_up", 512, ms * 1e3,
                           gb / (ms / 1e3), 2.0 * 2 * 512 * 4096 * 12288 / (ms / 1e3) / 1e12,
                           bf ? ", bf16 activations" : "");
                }
        }
        tern_cuda_free(ops_cuda, h);
        TIME_IT(ms, tern_cuda_gate_up_norm(ops_cuda, x, 1, 4096, nwf, 1e-6f, wg[i_ % nc], wu[i_ % nc],
                                                TERN_DT_BF16, 12288, y, ntmp));
        printf("%-22s %3d %10.1f %9.0f\n", "  norm folded", 1, ms * 1e3, gb / (ms / 1e3));
        for (int k = 0; k < nc; k++) {
            tern_cuda_free(ops_cuda, wg[k]);
            tern_cuda_free(ops_cuda, wu[k]);
        }
    }
    {
        void *tmp = ops_dev_zero(tern_cuda_summary_tmp_bytes(1, 151936));
        unsigned *cnt = ops_dev_zero(tern_cuda_summary_count_bytes(1));
        void *out = ops_dev_zero(64);
        TIME_IT(ms, tern_cuda_summary(ops_cuda, y, 151936, 1, 151936, tmp, cnt, out));
        printf("%-22s %10.1f us (lse + argmax, one row of 151936)\n", "summary", ms * 1e3);
        tern_cuda_free(ops_cuda, tmp); tern_cuda_free(ops_cuda, cnt); tern_cuda_free(ops_cuda, out);
    }
    tern_cuda_set_wgmma(ops_cuda, wg_was);
    tern_cuda_free(ops_cuda, nwf);
    tern_cuda_free(ops_cuda, ntmp);
    /* Decode attention: one row, 32 query heads over 8 kv heads of 128. */
    static const int lens[] = {512, 4096, 32768};
    printf("%-14s %6s %7s %9s\n", "attention", "len", "us", "GB/s");
    for (int i = 0; i < 3; i++) {
        int len = lens[i];
        long hs = (long)len * 128;
        float *k = dev_random(8 * hs, TERN_DT_F32, 20), *v = dev_random(8 * hs, TERN_DT_F32, 21);
        float *q = dev_random(32 * 128, TERN_DT_F32, 22), *out = ops_dev_zero(32 * 128 * 4);
        tern_cuda_attn_row row = {k, v, NULL, 0, hs, 0, len, 1, 0};
        int zero = 0;
        tern_cuda_attn_row *drow = ops_dev(&row, sizeof row);
        int *dtok = ops_dev(&zero, sizeof zero);
        void *part = ops_dev_zero(tern_cuda_attention_tmp_bytes(1, len, 32, 128));
        unsigned *count = ops_dev_zero(tern_cuda_attention_count_bytes(1, 8));
        TIME_IT(ms, tern_cuda_attention(ops_cuda, drow, dtok, 1, len, 32, 8, 128, 0.088f, q, 32 * 128, out, part, count, NULL));
        tern_cuda_free(ops_cuda, count);
        printf("%-14s %6d %7.1f %9.0f\n", "decode", len, ms * 1e3, 2.0 * 8 * hs * 4 / 1e9 / (ms / 1e3));
        tern_cuda_free(ops_cuda, k); tern_cuda_free(ops_cuda, v); tern_cuda_free(ops_cuda, q);
        tern_cuda_free(ops_cuda, out); tern_cuda_free(ops_cuda, drow); tern_cuda_free(ops_cuda, dtok);
        tern_cuda_free(ops_cuda, part);
    }
    /* Prefill attention: one row of 512 new tokens, causal, both kernels. */
    {
        int len = 512;
        long hs = (long)len * 128;
        float *k = dev_random(8 * hs, TERN_DT_F32, 23), *v = dev_random(8 * hs, TERN_DT_F32, 24);
        float *q = dev_random((long)len * 32 * 128, TERN_DT_F32, 25), *out = ops_dev_zero((size_t)len * 32 * 128 * 4);
        tern_cuda_attn_row row = {k, v, NULL, 0, hs, 0, len, len, 0};
        int *tok = calloc((size_t)len, sizeof *tok);
        tern_cuda_attn_row *drow = ops_dev(&row, sizeof row);
        int *dtok = ops_dev(tok, (size_t)len * sizeof *tok);
        void *part = ops_dev_zero(tern_cuda_attention_tmp_bytes(len, len, 32, 128));
        unsigned *count = ops_dev_zero(tern_cuda_attention_count_bytes(len, 8));
        TIME_IT(ms, tern_cuda_attention(ops_cuda, drow, dtok, len, len, 32, 8, 128, 0.088f, q, 32 * 128, out, part, count,
                                        NULL));
        printf("%-14s %6d %7.1f\n", "prefill", len, ms * 1e3);
        TIME_IT(ms, tern_cuda_attention_tiled(ops_cuda, drow, dtok, len, len, 32, 8, 128, 0.088f, q, 32 * 128, out));
        printf("%-14s %6d %7.1f\n", "prefill tiled", len, ms * 1e3);
        tern_cuda_free(ops_cuda, k); tern_cuda_free(ops_cuda, v); tern_cuda_free(ops_cuda, q);
        tern_cuda_free(ops_cuda, out); tern_cuda_free(ops_cuda, drow); tern_cuda_free(ops_cuda, dtok);
        tern_cuda_free(ops_cuda, part); tern_cuda_free(ops_cuda, count);
        free(tok);
    }
    ops_time_chain();
    {
        void *w = dev_random(4096, TERN_DT_BF16, 30);
        TIME_IT(ms, tern_cuda_rmsnorm(ops_cuda, x, y, 1, 4096, w, TERN_DT_BF16, 1e-6f));
        printf("%-14s %10.1f us\n", "rmsnorm 4096", ms * 1e3);
        tern_cuda_free(ops_cuda, w);
    }
    {
        size_t bytes = 4ull << 30;
        void *src = ops_dev_zero(bytes);
        float *sink = ops_dev_zero(4096 * 4);
        TIME_IT(ms, tern_cuda_read_bw(ops_cuda, src, bytes, sink));
        printf("%-14s %10.0f GB/s (4 GiB, 16-byte loads)\n", "read bandwidth", bytes / 1e9 / (ms / 1e3));
        tern_cuda_free(ops_cuda, src);
        tern_cuda_free(ops_cuda, sink);
    }
    tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, y);
}

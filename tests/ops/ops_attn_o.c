/* tern_cuda_attention_o_begin / _end (the o product folding the decode
 * attention's splits itself) against tern_cuda_attention then
 * tern_cuda_matmul: the o product's output bit for bit, at cache lengths
 * whose splits the o product folds (at most TERN_CUDA_ATTN_O_SPLITS) and
 * lengths whose splits the attention still folds; and twice in a row (its
 * counters left as they were). */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

enum { CAP = 256, MAXLEN = 256 };

static void attn_o_case(int H, int HK, int hd, int N)
{
    static const int lens[] = {1, 32, 33, 100, 128, 129, 200, 256};
    enum { NL = sizeof lens / sizeof *lens };
    int K = H * hd, ld = (H + 2 * HK) * hd;
    long hs = (long)CAP * hd;
    float *cache = ops_dev_random(2L * HK * hs, TERN_DT_F32, 700u + hd, 1.0f);
    float *q = ops_dev_random(ld, TERN_DT_F32, 701u + hd, 1.0f);
    void *wo = ops_dev_random((long)N * K, TERN_DT_BF16, 702u + hd, 0.05f);
    float *y0 = malloc((size_t)N * 4), *a = malloc((size_t)N * 4), *b = malloc((size_t)N * 4);
    ops_fill(y0, N, 703u + hd, 1.0f);
    float *out = ops_dev_zero((size_t)K * 4), *y = ops_dev_zero((size_t)N * 4);
    void *part = ops_dev_zero(tern_cuda_attention_tmp_bytes(1, MAXLEN, H, hd));
    unsigned *cnt = ops_dev_zero(tern_cuda_attention_count_bytes(1, HK));
    int zero = 0, *dtok = ops_dev(&zero, sizeof zero);
    float scale = 0.088f;
    int was = tern_cuda_set_attn_o(ops_cuda, 1);
    if (!tern_cuda_attention_o_takes(ops_cuda, TERN_CUDA_ACT_F32, 1, H, hd, TERN_DT_BF16)) {
        printf("FAIL attention+o H=%d hd=%d: not taken\n", H, hd);
        ops_fail++;
    } else {
        for (int i = 0; i < NL; i++) {
            char name[160];
            snprintf(name, sizeof name, "attention+o folded H=%d HK=%d hd=%d N=%d len=%d", H, HK, hd, N, lens[i]);
            tern_cuda_attn_row row = {cache, cache + HK * hs, NULL, 0, hs, 0, lens[i], 1, 0};
            tern_cuda_attn_row *drow = ops_dev(&row, sizeof row);
            tern_cuda_upload(ops_cuda, y, y0, (size_t)N * 4);
            int ok = ops_ok(tern_cuda_attention(ops_cuda, drow, dtok, 1, MAXLEN, H, HK, hd, scale, q, ld, out, part, cnt,
                                                NULL), name) &&
                     ops_ok(tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, out, 1, K, wo, TERN_DT_BF16,
                                             N, y, N, 1, NULL), name);
            if (ok) ops_get(a, y, (size_t)N * 4);
            for (int r = 0; r < 2 && ok; r++) {
                /* the output buffer poisoned: the o product must not read it
                 * for a token it folds */
                ok = ops_ok(tern_cuda_memset(ops_cuda, out, 0xff, (size_t)K * 4), name) &&
                     ops_ok(tern_cuda_upload(ops_cuda, y, y0, (size_t)N * 4), name) &&
                     ops_ok(tern_cuda_attention_o_begin(ops_cuda, drow, dtok, MAXLEN, H, HK, hd, scale, q, ld, out,
                                                        part, cnt), name) &&
                     ops_ok(tern_cuda_attention_o_end(ops_cuda, drow, dtok, MAXLEN, H, hd, part, out, wo, N, y, 1),
                            name);
                if (!ok) break;
                ops_get(b, y, (size_t)N * 4);
                char n2[200];
                snprintf(n2, sizeof n2, "%s%s == attention, o", name, r ? " (again)" : "");
                ops_same(n2, b, a, N);
            }
            tern_cuda_free(ops_cuda, drow);
        }
    }
    tern_cuda_set_attn_o(ops_cuda, was);
    tern_cuda_free(ops_cuda, cache); tern_cuda_free(ops_cuda, q); tern_cuda_free(ops_cuda, wo);
    tern_cuda_free(ops_cuda, out); tern_cuda_free(ops_cuda, y); tern_cuda_free(ops_cuda, part);
    tern_cuda_free(ops_cuda, cnt); tern_cuda_free(ops_cuda, dtok);
    free(y0); free(a); free(b);
}

void ops_attn_o(void)
{
    attn_o_case(32, 8, 128, 4096); /* Qwen3-8B */
    attn_o_case(8, 2, 64, 300);
    attn_o_case(16, 4, 16, 96);
    attn_o_case(4, 1, 256, 1024);
}

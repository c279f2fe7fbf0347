/* ops_test --attn-timeline: where the attention's chain of a decode layer
 * spends its time, block by block (a build with -DTERN_CUDA_TIMELINE; other
 * builds print that nothing was recorded). One token of the Qwen3-8B shape
 * (32 query / 8 KV heads of 128) at a few cache lengths: the q/k/v product
 * with its norm folded, the prologue (q/k norm, rope, KV store), the decode
 * attention and the o product, captured in a graph as a decode pass queues
 * them and replayed; the stamps of the last replay, in microseconds after
 * the q/k/v product's last block ended. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/ops.h"
#include "ops_harness.h"

enum { H = 32, HK = 8, HD = 128, LD = (H + 2 * HK) * HD, CAP = 1024, MAXLEN = 768 };

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* Slot s of the blocks of st (n of them) that pass keep(b), sorted, in us
 * after t0; returns how many. */
static int slot_of(const unsigned long long *st, int n, int s, unsigned long long t0, int want, double *out)
{
    unsigned long long v[TERN_CUDA_TL_BLOCKS];
    int k = 0;
    for (int b = 0; b < n; b++) {
        const unsigned long long *B = st + (size_t)b * TERN_CUDA_TL_SLOTS;
        if (want >= 0 && (int)(B[7] & 3) < want) continue;
        if (B[s]) v[k++] = B[s];
    }
    qsort(v, k, sizeof *v, cmp_u64);
    for (int i = 0; i < k; i++) out[i] = ((double)v[i] - (double)t0) / 1e3;
    return k;
}

static void show(const char *what, const unsigned long long *st, int n, unsigned long long t0, int want,
                 const int *slots, const char *const *names, int ns)
{
    double d[TERN_CUDA_TL_BLOCKS];
    printf("  %-22s", what);
    for (int i = 0; i < ns; i++) {
        int k = slot_of(st, n, slots[i], t0, want, d);
        if (k) printf(" %s %.2f/%.2f/%.2f", names[i], d[0], d[k / 2], d[k - 1]);
    }
    printf("\n");
}

static void chain_at(int len)
{
    size_t per = (size_t)TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS * 8;
    unsigned long long *sk = ops_dev_zero(2 * per), *pro = ops_dev_zero(per), *att = ops_dev_zero(per);
    unsigned long long *h_sk = calloc(2, per), *h_pro = calloc(1, per), *h_att = calloc(1, per);
    long hs = (long)CAP * HD;
    float *cache = ops_dev_random(2L * HK * hs, TERN_DT_F32, 600u, 1.0f);
    float *cs = malloc((size_t)CAP * HD * 4), *inv = malloc(HD / 2 * 4);
    int *all = malloc(CAP * sizeof *all), zero = 0;
    for (int i = 0; i < HD / 2; i++) inv[i] = 1.0f / (float)(1 + i);
    for (int p = 0; p < CAP; p++) all[p] = p;
    tern_cpu_rope_table(CAP, HD, all, inv, 1.0f, cs);
    float *dcs = ops_dev(cs, (size_t)CAP * HD * 4);
    tern_cuda_attn_row row = {cache, cache + HK * hs, NULL, 0, hs, 0, len, 1, 0};
    tern_cuda_attn_row *drow = ops_dev(&row, sizeof row);
    int *dtok = ops_dev(&zero, sizeof zero);
    void *qn = ops_dev_random(HD, TERN_DT_BF16, 601u, 1.0f), *kn = ops_dev_random(HD, TERN_DT_BF16, 602u, 1.0f);
    void *wqkv = ops_dev_random((long)LD * 4096, TERN_DT_BF16, 603u, 0.05f);
    void *wo = ops_dev_random(4096L * 4096, TERN_DT_BF16, 604u, 0.05f);
    float *x = ops_dev_random(4096, TERN_DT_F32, 605u, 1.0f), *nw = ops_dev_random(4096, TERN_DT_F32, 606u, 1.0f);
    float *q = ops_dev_zero(LD * 4), *out = ops_dev_zero(H * HD * 4), *ntmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(LD));
    void *part = ops_dev_zero(tern_cuda_attention_tmp_bytes(1, MAXLEN, H, HD));
    unsigned *cnt = ops_dev_zero(tern_cuda_attention_count_bytes(1, HK));
    float scale = 0.088f;
    int maxlen = (len + 255) & ~255; /* the grid as the backend sizes a pass's */
    tern_cuda_set_timeline(ops_cuda, sk, 2);
    tern_cuda_graph *g = NULL;
    tern_status s = tern_cuda_graph_begin(ops_cuda);
    if (!s) s = tern_cuda_matmul_norm(ops_cuda, x, 1, 4096, nw, 1e-6f, wqkv, TERN_DT_BF16, LD, q, LD, ntmp);
    if (!s)
        s = tern_cuda_qkv_rope_store(ops_cuda, q, LD, 1, H, HK, HD, HD, qn, kn, TERN_DT_BF16, 1e-6f, dcs, drow, dtok);
    if (!s) s = tern_cuda_attention(ops_cuda, drow, dtok, 1, maxlen, H, HK, HD, scale, q, LD, out, part, cnt, NULL);
    if (!s)
        s = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, out, 1, 4096, wo, TERN_DT_BF16, 4096, x,
                             4096, 1, NULL);
    tern_status s2 = tern_cuda_graph_end(ops_cuda, &g);
    int recorded = tern_cuda_set_timeline(ops_cuda, NULL, 0);
    if (ops_ok(s ? s : s2, "attention timeline: capture")) {
        ops_ok(tern_cuda_set_attn_timeline(ops_cuda, pro, att), "attention timeline");
        for (int k = 0; k < 4; k++) ops_ok(tern_cuda_graph_launch(ops_cuda, g), "replay");
        ops_ok(tern_cuda_sync(ops_cuda), "sync");
        ops_ok(tern_cuda_set_attn_timeline(ops_cuda, NULL, NULL), "attention timeline");
        ops_get(h_sk, sk, 2 * per);
        ops_get(h_pro, pro, per);
        ops_get(h_att, att, per);
    }
    if (g) tern_cuda_graph_free(g);
    const unsigned long long *Q = h_sk, *O = h_sk + per / 8;
    int nq = (int)(Q[7] >> 32), no = (int)(O[7] >> 32), np = (int)(h_pro[7] >> 32), na = (int)(h_att[7] >> 32);
    if (recorded != 2 || !nq || !np || !na || !no) {
        printf("attention timeline: nothing recorded (a build with -DTERN_CUDA_TIMELINE records it)\n");
    } else {
        if (na > TERN_CUDA_TL_BLOCKS) na = TERN_CUDA_TL_BLOCKS;
        unsigned long long t0 = 0;
        for (int b = 0; b < nq && b < TERN_CUDA_TL_BLOCKS; b++)
            if (Q[(size_t)b * TERN_CUDA_TL_SLOTS + 6] > t0) t0 = Q[(size_t)b * TERN_CUDA_TL_SLOTS + 6];
        int work = 0, folds = 0;
        for (int b = 0; b < na; b++) {
            unsigned long long f = h_att[(size_t)b * TERN_CUDA_TL_SLOTS + 7];
            work += (f & 1) != 0, folds += (f & 2) != 0;
        }
        printf("attention chain, len %d (grid of %d splits x %d KV heads: %d working, %d folding); min/median/max us "
               "after the q/k/v product's last block\n", len, na / HK, HK, work, folds);
        static const int ps[] = {0, 1, 6};
        static const char *const pn[] = {"entry", "wait", "end"};
        show("prologue", h_pro, np, t0, -1, ps, pn, 3);
        static const int as[] = {0, 1, 2, 3, 4, 5};
        static const char *const an[] = {"entry", "staged", "wait", "qkv in", "record", "counted"};
        show("attention (working)", h_att, na, t0, 1, as, an, 6);
        static const int fs[] = {5, 6};
        static const char *const fn[] = {"counted", "fold end"};
        show("attention (folding)", h_att, na, t0, 2, fs, fn, 2);
        static const int os[] = {0, 1, 2, 3, 6};
        static const char *const on[] = {"entry", "wait", "x ready", "tile 1", "end"};
        show("o product", O, no < TERN_CUDA_TL_BLOCKS ? no : TERN_CUDA_TL_BLOCKS, t0, -1, os, on, 5);
    }
    tern_cuda_free(ops_cuda, sk); tern_cuda_free(ops_cuda, pro); tern_cuda_free(ops_cuda, att);
    tern_cuda_free(ops_cuda, cache); tern_cuda_free(ops_cuda, dcs); tern_cuda_free(ops_cuda, drow);
    tern_cuda_free(ops_cuda, dtok); tern_cuda_free(ops_cuda, qn); tern_cuda_free(ops_cuda, kn);
    tern_cuda_free(ops_cuda, wqkv); tern_cuda_free(ops_cuda, wo); tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, nw); tern_cuda_free(ops_cuda, q); tern_cuda_free(ops_cuda, out);
    tern_cuda_free(ops_cuda, ntmp); tern_cuda_free(ops_cuda, part); tern_cuda_free(ops_cuda, cnt);
    free(h_sk); free(h_pro); free(h_att); free(cs); free(inv); free(all);
}

void ops_attn_timeline(void)
{
    static const int lens[] = {2, 33, 65, 129, 513, 640};
    for (int i = 0; i < 6; i++) chain_at(lens[i]);
}

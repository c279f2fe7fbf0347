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

static void show(const char *what, const unsigned long long *st, int n, unsigned long long t0, int want,
                 const int *slots, const char *const *names, int ns)
{
    double d[TERN_CUDA_TL_BLOCKS];
    printf("  %-22s", what);
    for (int i = 0; i < ns; i++) {
        int k = ops_tl_slot(st, n, slots[i], t0, want, d);
        if (k) printf(" %s %.2f/%.2f/%.2f", names[i], d[0], d[k / 2], d[k - 1]);
    }
    printf("\n");
}

/* One token's q/k/v product, prologue, attention and o product. */
typedef struct {
    const float *nw, *dcs, *x;
    float *q, *out, *xo, *ntmp, *part;
    const void *wqkv, *wo, *qn, *kn;
    const tern_cuda_attn_row *drow;
    const int *dtok;
    unsigned *cnt;
    int maxlen;
} attn_chain;

static tern_status chain_queue(void *ctx)
{
    const attn_chain *a = ctx;
    tern_status s = tern_cuda_matmul_norm(ops_cuda, a->x, 1, 4096, a->nw, 1e-6f, a->wqkv, TERN_DT_BF16, LD, a->q, LD,
                                          a->ntmp);
    if (!s)
        s = tern_cuda_qkv_rope_store(ops_cuda, a->q, LD, 1, H, HK, HD, HD, a->qn, a->kn, TERN_DT_BF16, 1e-6f, a->dcs,
                                     a->drow, a->dtok);
    if (!s)
        s = tern_cuda_attention(ops_cuda, a->drow, a->dtok, 1, a->maxlen, H, HK, HD, 0.088f, a->q, LD, a->out, a->part,
                                a->cnt, NULL);
    if (!s)
        s = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, a->out, 1, 4096, a->wo, TERN_DT_BF16, 4096,
                             a->xo, 4096, 1, NULL);
    return s;
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
    /* the grid as the backend sizes a pass's: the length rounded up to 256 */
    attn_chain a = {nw, dcs, x, q, out, x, ntmp, part, wqkv, wo, qn, kn, drow, dtok, cnt, (len + 255) & ~255};
    int ok = h_sk && h_pro && h_att;
    if (!ok) ops_ok(TERN_E_NOMEM, "attention timeline: host buffers");
    tern_cuda_set_timeline(ops_cuda, sk, 2);
    ok = ok && ops_ok(tern_cuda_set_attn_timeline(ops_cuda, pro, att), "attention timeline") &&
         ops_graph(chain_queue, &a, 4, 0, NULL);
    int recorded = tern_cuda_set_timeline(ops_cuda, NULL, 0);
    ops_ok(tern_cuda_set_attn_timeline(ops_cuda, NULL, NULL), "attention timeline");
    if (ok) {
        ops_get(h_sk, sk, 2 * per);
        ops_get(h_pro, pro, per);
        ops_get(h_att, att, per);
    }
    const unsigned long long *Q = h_sk, *O = ok ? h_sk + per / 8 : NULL;
    int nq = ok ? (int)(Q[7] >> 32) : 0, no = ok ? (int)(O[7] >> 32) : 0;
    int np = ok ? (int)(h_pro[7] >> 32) : 0, na = ok ? (int)(h_att[7] >> 32) : 0;
    if (!ok || recorded != 2 || !nq || !np || !na || !no) {
        printf("attention timeline: nothing recorded (a build with -DTERN_CUDA_TIMELINE records it)\n");
    } else {
        if (na > TERN_CUDA_TL_BLOCKS) na = TERN_CUDA_TL_BLOCKS;
        unsigned long long t0 = ops_tl_last(Q, nq, 6);
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
        show("o product", O, no, t0, -1, os, on, 5);
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

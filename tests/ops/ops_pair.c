/* One-row SwiGLU pairs on the one-matrix kernel over interleaved gate / up
 * rows (TERN_CUDA_GU_ILV): the same bits as the pair kernel, with the norm
 * folded and without; and (ops_test --chain) both timed at the Qwen3-8B
 * shape. */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

/* h = silu(x . wg^T) * (x . wu^T) for one row, the norm folded when norm. */
static tern_status pair(int norm, const float *x, int H, const float *nw, const void *wg, const void *wu, int F,
                        float *h, float *tmp)
{
    if (norm) return tern_cuda_gate_up_norm(ops_cuda, x, 1, H, nw, 1e-6f, wg, wu, TERN_DT_BF16, F, h, tmp);
    return tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, x, 1, H, wg, wu, TERN_DT_BF16, F, h);
}

static void pair_case(int H, int F)
{
    float *x = ops_dev_random(H, TERN_DT_F32, (unsigned)(H + F), 2.0f), *nw = ops_dev_random(H, TERN_DT_F32, 7, 1.5f);
    void *wg = ops_dev_random((long)F * H, TERN_DT_BF16, (unsigned)F, 0.05f);
    void *wu = ops_dev_random((long)F * H, TERN_DT_BF16, (unsigned)F + 1, 0.05f);
    float *h = ops_dev_zero((size_t)F * 4), *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(H));
    float *want = malloc((size_t)F * 4), *got = malloc((size_t)F * 4);
    for (int norm = 0; norm < 2; norm++) {
        int was = tern_cuda_set_gu_ilv(ops_cuda, 0);
        int ok = ops_ok(pair(norm, x, H, nw, wg, wu, F, h, tmp), "pair kernel");
        if (ok) ops_get(want, h, (size_t)F * 4);
        tern_cuda_set_gu_ilv(ops_cuda, 1);
        ops_ok(tern_cuda_memset(ops_cuda, h, 0, (size_t)F * 4), "clear");
        if (ok && ops_ok(pair(norm, x, H, nw, wg, wu, F, h, tmp), "interleaved")) {
            ops_get(got, h, (size_t)F * 4);
            char name[120];
            snprintf(name, sizeof name, "gate_up%s M=1 H=%d F=%d interleaved rows", norm ? "_norm" : "", H, F);
            ops_same(name, got, want, F);
        }
        tern_cuda_set_gu_ilv(ops_cuda, was);
    }
    free(want); free(got);
    void *p[] = {x, nw, wg, wu, h, tmp};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) tern_cuda_free(ops_cuda, p[i]);
}

void ops_pair(void)
{
    pair_case(4096, 12288); /* the Qwen3-8B shape */
    pair_case(256, 740);    /* F not a multiple of 8: a part-filled last tile in the pair kernel */
    pair_case(2048, 96);
    pair_case(512, 102);    /* F not a multiple of 4: the pair kernel either way */
}

/* ops_test --chain: 8 layers' gate/up pairs (more than the L2) in a graph,
 * microseconds a pair, the pair kernel against interleaved rows. */
enum { TP_L = 8, TP_H = 4096, TP_F = 12288 };
typedef struct {
    void *wg[TP_L], *wu[TP_L];
    float *x, *nw, *h, *tmp;
} pair_run;

static tern_status pair_queue(void *ctx)
{
    const pair_run *p = ctx;
    tern_status st = TERN_OK;
    for (int l = 0; l < TP_L && !st; l++) st = pair(1, p->x, TP_H, p->nw, p->wg[l], p->wu[l], TP_F, p->h, p->tmp);
    return st;
}

void ops_time_pair(void)
{
    pair_run p;
    for (int l = 0; l < TP_L; l++) {
        p.wg[l] = ops_dev_random((long)TP_F * TP_H, TERN_DT_BF16, 800 + l, 0.05f);
        p.wu[l] = ops_dev_random((long)TP_F * TP_H, TERN_DT_BF16, 820 + l, 0.05f);
    }
    p.x = ops_dev_random(TP_H, TERN_DT_F32, 3, 2.0f), p.nw = ops_dev_random(TP_H, TERN_DT_F32, 4, 1.5f);
    p.h = ops_dev_zero((size_t)TP_F * 4), p.tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(TP_H));
    for (int r = 0; r < 4; r++) {
        int was = tern_cuda_set_gu_ilv(ops_cuda, r & 1);
        float ms = 0;
        if (ops_graph(pair_queue, &p, 3, 5, &ms)) /* best of 5 x 4 replays */
            printf("gate/up + norm M=1 (graph of %d) %-22s %6.1f us\n", TP_L, r & 1 ? "interleaved rows" : "pair kernel",
                   ms * 1e3 / TP_L);
        tern_cuda_set_gu_ilv(ops_cuda, was);
    }
    for (int l = 0; l < TP_L; l++) tern_cuda_free(ops_cuda, p.wg[l]), tern_cuda_free(ops_cuda, p.wu[l]);
    void *q[] = {p.x, p.nw, p.h, p.tmp};
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) tern_cuda_free(ops_cuda, q[i]);
}

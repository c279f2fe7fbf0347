/* ops_test --readpat: the weight stream's rate by the order of its loads.
 * Over one 4 GiB bf16 matrix [524288, 4096] (far larger than the L2), best
 * of 8 x 4 graph replays each, interleaved three times: the read kernel's
 * linear sweep (tern_cuda_read_bw), the one-row products' loads with no
 * arithmetic over the row-major matrix and over tiles stored block by block
 * (tern_cuda_readpat layouts 0 and 1), and the one-row product itself over
 * the matrix and over a copy of it in the tiled layout (tern_cuda_tile_weight),
 * and the one-row SwiGLU pair over the tiled copy's halves as gate and up
 * (tern_cuda_gate_up: its interleaved rows unless TERN_CUDA_GU_ILV=0). */
#include <stdio.h>

#include "ops_harness.h"

enum { K = 4096 };
static const long N = 524288;

typedef struct {
    int what; /* 0 read kernel, 1 / 2 pattern layout 0 / 1, 3 / 4 the product, row-major / tiled, 5 the pair, tiled */
    void *w, *wt; /* the matrix, and the same values tiled */
    float *sink, *x, *y;
} rp_run;

static tern_status rp_queue(void *ctx)
{
    const rp_run *r = ctx;
    switch (r->what) {
    case 0: return tern_cuda_read_bw(ops_cuda, r->w, (size_t)N * K * 2, r->sink);
    case 1:
    case 2: return tern_cuda_readpat(ops_cuda, r->w, N, K, r->what - 1, r->sink);
    case 5:
        return tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, r->x, 1, K, r->wt, (const uint16_t *)r->wt + N / 2 * K,
                                 TERN_DT_BF16, (int)(N / 2), r->y);
    default:
        return tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, r->x, 1, K, r->what == 4 ? r->wt : r->w,
                                TERN_DT_BF16, (int)N, r->y, (int)N, 0, NULL);
    }
}

void ops_readpat(void)
{
    static const char *const what[] = {"read kernel (linear)", "product loads, row-major", "product loads, tile blocks",
                                       "one-row product", "one-row product, tiled",
                                       "one-row SwiGLU pair, tiled"};
    void *w = ops_dev_random(N * K, TERN_DT_BF16, 900u, 0.05f), *wt = ops_dev_random(N * K, TERN_DT_BF16, 900u, 0.05f);
    size_t ns = tern_cuda_readpat_sink_floats(ops_cuda);
    float *sink = ops_dev_zero((ns > 4096 ? ns : 4096) * sizeof(float));
    float *x = ops_dev_random(K, TERN_DT_F32, 901u, 1.0f), *y = ops_dev_zero((size_t)N * sizeof(float));
    int nw = wt && ops_ok(tern_cuda_tile_weight(ops_cuda, wt, N, K), "readpat: tile the copy") ? 6 : 4;
    double gb = (double)N * K * 2 / 1e9;
    printf("readpat: %.2f GB bf16 [%ld, %d], us a pass (GB/s), best of 8 x 4 replays\n", gb, N, K);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < nw; i++) {
            rp_run r = {i, w, wt, sink, x, y};
            float ms = 0;
            if (ops_graph(rp_queue, &r, 1, 8, &ms))
                printf("readpat: %-30s %9.1f us (%6.0f GB/s)\n", what[i], ms * 1e3, gb / (ms / 1e3));
        }
    tern_cuda_free(ops_cuda, w);
    tern_cuda_free(ops_cuda, wt);
    tern_cuda_free(ops_cuda, sink);
    tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, y);
}

/* ops_test --floor: what a one-row product costs apart from its bytes.
 * Products of K = 4096 captured in a graph 64 in a row (each waits for the
 * one before it, as a decode pass's do), at 8 rows (one tile: no stream,
 * only the kernel boundary, x and one tile's latency) up to 4096 rows
 * (the o product), each over copies of its weight larger than the L2 and
 * over one copy (the L2 warm from the launch before, where it fits); and
 * a one-element add 64 in a row (a kernel boundary with no work). */
#include <stdio.h>

#include "ops_harness.h"

enum { RUN = 64, COPIES = 8, K = 4096 };

/* us a product of RUN products of N rows queued in one graph, over nc
 * copies of the weight in turn. */
static float run_us(void *const *w, int nc, int N, const float *x, float *y)
{
    tern_cuda_graph *g = NULL;
    tern_status s = tern_cuda_graph_begin(ops_cuda);
    for (int i = 0; i < RUN && !s; i++)
        s = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K, w[i % nc], TERN_DT_BF16, N, y, N, 0,
                             NULL);
    tern_status s2 = tern_cuda_graph_end(ops_cuda, &g);
    float ms = 0, best = 1e9f;
    if (ops_ok(s ? s : s2, "floor: capture")) {
        for (int r = 0; r < 8; r++) {
            ops_ok(tern_cuda_graph_launch(ops_cuda, g), "floor: replay");
            ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");
            for (int k = 0; k < 4; k++) ops_ok(tern_cuda_graph_launch(ops_cuda, g), "floor: replay");
            ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer");
            if (ms < best) best = ms;
        }
    }
    if (g) tern_cuda_graph_free(g);
    return best * 1e3f / (4 * RUN);
}

/* us a kernel of RUN one-element adds queued in one graph: a dependent
 * step with no work. */
static float adds_us(float *y, const float *x)
{
    tern_cuda_graph *g = NULL;
    tern_status s = tern_cuda_graph_begin(ops_cuda);
    for (int i = 0; i < RUN && !s; i++) s = tern_cuda_add(ops_cuda, y, x, 1);
    tern_status s2 = tern_cuda_graph_end(ops_cuda, &g);
    float ms = 0, best = 1e9f;
    if (ops_ok(s ? s : s2, "floor: capture")) {
        for (int r = 0; r < 8; r++) {
            ops_ok(tern_cuda_graph_launch(ops_cuda, g), "floor: replay");
            ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");
            for (int k = 0; k < 4; k++) ops_ok(tern_cuda_graph_launch(ops_cuda, g), "floor: replay");
            ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer");
            if (ms < best) best = ms;
        }
    }
    if (g) tern_cuda_graph_free(g);
    return best * 1e3f / (4 * RUN);
}

void ops_floor(void)
{
    static const int rows[] = {8, 256, 1024, 2048, 4096};
    void *w[COPIES];
    for (int c = 0; c < COPIES; c++) w[c] = ops_dev_random((long)4096 * K, TERN_DT_BF16, 500u + c, 0.05f);
    float *x = ops_dev_random(K, TERN_DT_F32, 520u, 1.0f), *y = ops_dev_zero(4096 * 4);
    printf("floor: a one-element add, %d in a row in a graph: %.2f us a kernel\n", RUN, adds_us(y, x));
    printf("floor: one-row products, K = %d, %d in a row in a graph (best of 8 x 4 replays)\n", K, RUN);
    for (int i = 0; i < 5; i++) {
        double mb = (double)rows[i] * K * 2 / 1e6;
        float cold = run_us(w, COPIES, rows[i], x, y), warm = run_us(w, 1, rows[i], x, y);
        printf("floor: N = %4d (%5.1f MB): %6.2f us over %d copies (%5.0f GB/s), %6.2f us over one (%5.0f GB/s)\n",
               rows[i], mb, cold, COPIES, mb / 1e3 / (cold / 1e6), warm, mb / 1e3 / (warm / 1e6));
    }
    for (int c = 0; c < COPIES; c++) tern_cuda_free(ops_cuda, w[c]);
    tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, y);
}

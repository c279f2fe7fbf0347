/* ops_test --floor: what a one-row product costs apart from its bytes.
 * Products of K = 4096 captured in a graph 64 in a row (each waits for the
 * one before it, as a decode pass's do), at 8 rows (one tile: no stream,
 * only the kernel boundary, x and one tile's latency) up to 4096 rows
 * (the o product), each over copies of its weight larger than the L2 and
 * over one copy (the L2 warm from the launch before, where it fits); and
 * a one-element add 64 in a row (a kernel boundary with no work). A build
 * with -DTERN_CUDA_TIMELINE also prints where a product's time goes. */
#include <stdio.h>
#include <stdlib.h>

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

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* A build with -DTERN_CUDA_TIMELINE: TL products of N rows in a graph with
 * the one-row kernel's stamps, replayed; for the middle one, the median
 * over blocks of each stamp (entry, past the wait, x prepared, first tile's
 * end, end) in us after the previous product's last block ended. */
enum { TL = 8 };
static void floor_timeline(void *const *w, int N, const float *x, float *y)
{
    size_t per = (size_t)TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS, bytes = TL * per * 8;
    unsigned long long *tl = ops_dev_zero(bytes), *st = calloc(1, bytes);
    if (!st) {
        ops_ok(TERN_E_NOMEM, "floor: timeline buffer");
        tern_cuda_free(ops_cuda, tl);
        return;
    }
    tern_cuda_set_timeline(ops_cuda, tl, TL);
    tern_cuda_graph *g = NULL;
    tern_status s = tern_cuda_graph_begin(ops_cuda);
    for (int i = 0; i < TL && !s; i++)
        s = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, x, 1, K, w[i % COPIES], TERN_DT_BF16, N, y,
                             N, 0, NULL);
    tern_status s2 = tern_cuda_graph_end(ops_cuda, &g);
    int recorded = tern_cuda_set_timeline(ops_cuda, NULL, 0);
    if (ops_ok(s ? s : s2, "floor: capture")) {
        for (int k = 0; k < 4; k++) ops_ok(tern_cuda_graph_launch(ops_cuda, g), "floor: replay");
        ops_get(st, tl, bytes);
    }
    if (g) tern_cuda_graph_free(g);
    const unsigned long long *P = st + (TL / 2 - 1) * per, *L = st + (TL / 2) * per;
    int np = (int)(P[7] >> 32), n = (int)(L[7] >> 32);
    if (recorded == TL && n > 0 && np > 0 && n <= TERN_CUDA_TL_BLOCKS && np <= TERN_CUDA_TL_BLOCKS) {
        unsigned long long t0 = 0, v[TERN_CUDA_TL_BLOCKS];
        for (int b = 0; b < np; b++)
            if (P[(size_t)b * TERN_CUDA_TL_SLOTS + 6] > t0) t0 = P[(size_t)b * TERN_CUDA_TL_SLOTS + 6];
        printf("floor: N = %4d, %d blocks, median us after the previous product's end:", N, n);
        static const int slots[] = {0, 1, 2, 3, 6};
        static const char *const what[] = {"entry", "wait", "x ready", "tile 1 end", "end"};
        for (int i = 0; i < 5; i++) {
            for (int b = 0; b < n; b++) v[b] = L[(size_t)b * TERN_CUDA_TL_SLOTS + slots[i]];
            qsort(v, n, sizeof *v, cmp_ull);
            printf(" %s %.2f", what[i], ((double)v[n / 2] - (double)t0) / 1e3);
        }
        printf(" (last end %.2f)\n", ((double)v[n - 1] - (double)t0) / 1e3);
    }
    free(st);
    tern_cuda_free(ops_cuda, tl);
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
    for (int i = 0; i < 5; i++) floor_timeline(w, rows[i], x, y);
    for (int c = 0; c < COPIES; c++) tern_cuda_free(ops_cuda, w[c]);
    tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, y);
}

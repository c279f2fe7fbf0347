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

/* Products of N rows of K over nc copies of the weight in turn, `run` of
 * them, or one-element adds when w is NULL. */
typedef struct {
    void *const *w;
    int nc, N, run;
    const float *x;
    float *y;
} floor_run;

static tern_status floor_queue(void *ctx)
{
    const floor_run *f = ctx;
    tern_status s = TERN_OK;
    for (int i = 0; i < f->run && !s; i++)
        s = f->w ? tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, f->x, 1, K, f->w[i % f->nc],
                                    TERN_DT_BF16, f->N, f->y, f->N, 0, NULL)
                 : tern_cuda_add(ops_cuda, f->y, f->x, 1);
    return s;
}

/* us a kernel of f.run of them in one graph, best of 8 x 4 replays. */
static float floor_us(floor_run f)
{
    float ms = 0;
    ops_graph(floor_queue, &f, 0, 8, &ms);
    return ms * 1e3f / f.run;
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
    floor_run f = {w, COPIES, N, TL, x, y};
    tern_cuda_set_timeline(ops_cuda, tl, TL);
    int ok = ops_graph(floor_queue, &f, 4, 0, NULL);
    int recorded = tern_cuda_set_timeline(ops_cuda, NULL, 0);
    if (ok) ops_get(st, tl, bytes);
    const unsigned long long *P = st + (TL / 2 - 1) * per, *L = st + (TL / 2) * per;
    int np = (int)(P[7] >> 32), n = (int)(L[7] >> 32);
    if (ok && recorded == TL && n > 0 && np > 0) {
        unsigned long long t0 = ops_tl_last(P, np, 6);
        double v[TERN_CUDA_TL_BLOCKS];
        printf("floor: N = %4d, %d blocks, median us after the previous product's end:", N, n);
        static const int slots[] = {0, 1, 2, 3, 6};
        static const char *const what[] = {"entry", "wait", "x ready", "tile 1 end", "end"};
        int k = 0;
        for (int i = 0; i < 5; i++) {
            k = ops_tl_slot(L, n, slots[i], t0, 0, v);
            if (k) printf(" %s %.2f", what[i], v[k / 2]);
        }
        if (k) printf(" (last end %.2f)", v[k - 1]);
        printf("\n");
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
    printf("floor: a one-element add, %d in a row in a graph: %.2f us a kernel\n", RUN,
           floor_us((floor_run){NULL, 1, 1, RUN, x, y}));
    printf("floor: one-row products, K = %d, %d in a row in a graph (best of 8 x 4 replays)\n", K, RUN);
    for (int i = 0; i < 5; i++) {
        double mb = (double)rows[i] * K * 2 / 1e6;
        float cold = floor_us((floor_run){w, COPIES, rows[i], RUN, x, y});
        float warm = floor_us((floor_run){w, 1, rows[i], RUN, x, y});
        printf("floor: N = %4d (%5.1f MB): %6.2f us over %d copies (%5.0f GB/s), %6.2f us over one (%5.0f GB/s)\n",
               rows[i], mb, cold, COPIES, mb / 1e3 / (cold / 1e6), warm, mb / 1e3 / (warm / 1e6));
    }
    for (int i = 0; i < 5; i++) floor_timeline(w, rows[i], x, y);
    for (int c = 0; c < COPIES; c++) tern_cuda_free(ops_cuda, w[c]);
    tern_cuda_free(ops_cuda, x);
    tern_cuda_free(ops_cuda, y);
}

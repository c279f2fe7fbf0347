/* ops_test --timeline: where a decode layer's one-row products spend their
 * time, block by block. Six layers of the Qwen3-8B shape's four products
 * (q/k/v + norm, o + residual, gate/up + norm, down + residual) are
 * captured in a graph with the one-row kernel's stamps on (a build with
 * -DTERN_CUDA_TIMELINE; other builds print that nothing was recorded) and
 * replayed; for each product of the last replay it prints, in
 * microseconds after the previous product's last block ended, when its
 * blocks entered, passed the wait, had x prepared, ended their first tile
 * and ended, and the weight bytes over the time from the previous
 * product's end to its own. */
#include <stdio.h>
#include <stdlib.h>

#include "ops_harness.h"

enum { TL_N = 4 * OPS_LAYERS };

/* The six layers' products, as a pass queues them. */
static tern_status timeline_queue(void *ctx)
{
    const ops_layers *ly = ctx;
    tern_status s = TERN_OK;
    for (int l = 0; l < OPS_LAYERS && !s; l++) s = ops_layer_run(ly, l, 15u);
    return s;
}

void ops_timeline(void)
{
    ops_layers ly;
    ops_layers_make(&ly, 900);
    size_t tl_bytes = (size_t)TL_N * TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS * 8;
    unsigned long long *tl = ops_dev_zero(tl_bytes), *st = calloc(1, tl_bytes); /* zeros: nothing recorded */
    if (!st) {
        ops_ok(TERN_E_NOMEM, "timeline: host buffer");
        tern_cuda_free(ops_cuda, tl);
        ops_layers_free(&ly);
        return;
    }
    tern_cuda_set_timeline(ops_cuda, tl, TL_N);
    int ok = ops_graph(timeline_queue, &ly, 5, 0, NULL);
    int recorded = tern_cuda_set_timeline(ops_cuda, NULL, 0);
    if (ok) ops_get(st, tl, tl_bytes);
    if (!ok || recorded != TL_N || !st[7]) {
        printf("timeline: nothing recorded (%d launches; a build with -DTERN_CUDA_TIMELINE records them)\n",
               recorded);
    } else {
        static const char *const what[4] = {"qkv+norm", "o+res", "gate/up", "down+res"};
        static const double mb[4] = {OPS_QKV * (double)OPS_D * 2 / 1e6, (double)OPS_D * OPS_D * 2 / 1e6,
                                     2.0 * OPS_F * OPS_D * 2 / 1e6, (double)OPS_D * OPS_F * 2 / 1e6};
        printf("timeline (us after the previous product's last block ended; min / median / max over blocks)\n");
        printf("%-9s %4s %-20s %-14s %-14s %-14s %-27s %7s %7s\n", "product", "blks", "entry", "wait", "x ready",
               "tile 1 end", "end (min/med/p90/max)", "span", "GB/s");
        unsigned long long prev_end = 0;
        double d[TERN_CUDA_TL_BLOCKS], e[TERN_CUDA_TL_BLOCKS];
        for (int i = 0; i < TL_N; i++) {
            const unsigned long long *L = st + (size_t)i * TERN_CUDA_TL_BLOCKS * TERN_CUDA_TL_SLOTS;
            int n = (int)(L[7] >> 32);
            if (n > TERN_CUDA_TL_BLOCKS) n = TERN_CUDA_TL_BLOCKS;
            unsigned long long t0 = prev_end, last = ops_tl_last(L, n, 6);
            for (int b = 0; b < n && !prev_end; b++) /* the first product: from its first block's entry */
                if (!t0 || L[(size_t)b * TERN_CUDA_TL_SLOTS] < t0) t0 = L[(size_t)b * TERN_CUDA_TL_SLOTS];
            printf("%-9s %4d", what[i % 4], n);
            /* every block stamps these slots (each has a tile at least) */
            ops_tl_slot(L, n, 0, t0, 0, d);
            printf(" %6.2f %6.2f %6.2f", d[0], d[n / 2], d[n - 1]);
            ops_tl_slot(L, n, 1, t0, 0, d);
            printf(" %6.2f %6.2f", d[0], d[n - 1]);
            ops_tl_slot(L, n, 2, t0, 0, d);
            printf(" %6.2f %6.2f", d[n / 2], d[n - 1]);
            ops_tl_slot(L, n, 3, t0, 0, d);
            printf(" %6.2f %6.2f", d[0], d[n / 2]);
            ops_tl_slot(L, n, 6, t0, 0, e);
            printf(" %6.2f %6.2f %6.2f %6.2f", e[0], e[n / 2], e[n * 9 / 10], e[n - 1]);
            double span = ((double)last - (double)t0) / 1e3;
            printf(" %7.2f %7.0f\n", span, mb[i % 4] * 1e3 / span);
            /* the blocks' end against their multiprocessor's load: blocks alone on theirs */
            int per[256] = {0};
            for (int b = 0; b < n; b++) per[L[(size_t)b * TERN_CUDA_TL_SLOTS + 7] & 0xff]++;
            double alone = 0, shared = 0;
            int na = 0, ns = 0;
            for (int b = 0; b < n; b++) {
                const unsigned long long *B = L + (size_t)b * TERN_CUDA_TL_SLOTS;
                double v = ((double)B[6] - (double)t0) / 1e3;
                if (per[B[7] & 0xff] == 1) alone += v, na++;
                else shared += v, ns++;
            }
            if (i >= 4 && i < 8)
                printf("          blocks alone on a multiprocessor: %d (mean end %.2f), sharing: %d (mean end %.2f)\n",
                       na, na ? alone / na : 0, ns, ns ? shared / ns : 0);
            prev_end = last;
        }
    }
    free(st);
    tern_cuda_free(ops_cuda, tl);
    ops_layers_free(&ly);
}

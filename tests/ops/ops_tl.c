/* Shared pieces of the timing harnesses (ops_floor.c, ops_timeline.c,
 * ops_attn_timeline.c): a graph captured from a queue of launches and
 * replayed (or timed), and the block stamps of a timeline build read back
 * as sorted microseconds. */
#include <stdlib.h>

#include "ops_harness.h"

int ops_graph(ops_queue_fn queue, void *ctx, int replays, int rounds, float *best_ms)
{
    tern_cuda_graph *g = NULL;
    tern_status s = tern_cuda_graph_begin(ops_cuda);
    if (!s) s = queue(ctx);
    tern_status s2 = tern_cuda_graph_end(ops_cuda, &g);
    int ok = ops_ok(s ? s : s2, "graph: capture");
    float ms = 0, best = 1e9f;
    for (int r = 0; ok && r < replays; r++) ok = ops_ok(tern_cuda_graph_launch(ops_cuda, g), "graph: replay");
    /* each round: one replay untimed, then four timed */
    for (int r = 0; ok && r < rounds; r++) {
        ok = ops_ok(tern_cuda_graph_launch(ops_cuda, g), "graph: replay") &&
             ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");
        for (int k = 0; ok && k < 4; k++) ok = ops_ok(tern_cuda_graph_launch(ops_cuda, g), "graph: replay");
        ok = ok && ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer");
        if (ok && ms / 4 < best) best = ms / 4;
    }
    if (ok) ok = ops_ok(tern_cuda_sync(ops_cuda), "graph: sync");
    if (g) tern_cuda_graph_free(g);
    if (best_ms) *best_ms = rounds > 0 ? best : 0.0f;
    return ok;
}

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

int ops_tl_slot(const unsigned long long *st, int n, int slot, unsigned long long t0, int flags, double *out)
{
    unsigned long long v[TERN_CUDA_TL_BLOCKS];
    int k = 0;
    if (n > TERN_CUDA_TL_BLOCKS) n = TERN_CUDA_TL_BLOCKS;
    for (int b = 0; b < n; b++) {
        const unsigned long long *B = st + (size_t)b * TERN_CUDA_TL_SLOTS;
        if ((int)(B[7] & 3) < flags || !B[slot]) continue;
        v[k++] = B[slot];
    }
    qsort(v, k, sizeof *v, cmp_u64);
    for (int i = 0; i < k; i++) out[i] = ((double)v[i] - (double)t0) / 1e3;
    return k;
}

unsigned long long ops_tl_last(const unsigned long long *st, int n, int slot)
{
    unsigned long long last = 0;
    if (n > TERN_CUDA_TL_BLOCKS) n = TERN_CUDA_TL_BLOCKS;
    for (int b = 0; b < n; b++)
        if (st[(size_t)b * TERN_CUDA_TL_SLOTS + slot] > last) last = st[(size_t)b * TERN_CUDA_TL_SLOTS + slot];
    return last;
}

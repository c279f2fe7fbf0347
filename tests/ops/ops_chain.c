/* The one-row product chain (tern_cuda_chain): a decode layer's o, gate/up
 * (norm folded), down and the next layer's q/k/v (norm folded) in one
 * kernel give the bits of the four separate products, alone and replayed
 * in a graph; and (ops_test --chain) its time against the separate
 * kernels at the Qwen3-8B shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_harness.h"

/* One layer's device buffers: weights (bf16), norm weights, the attention
 * output a, the residual x, the SwiGLU activations h and q/k/v. */
typedef struct {
    int D, F, Q;
    void *wo, *wg, *wu, *wd, *wq;
    float *nw1, *nw2, *a, *x, *h, *qkv;
} layer;

static void *dev_random(long n, tern_dtype dt, unsigned seed, float scale)
{
    void *d = ops_dev_zero((size_t)n * tern_dtype_size(dt));
    ops_ok(tern_cuda_fill_random(ops_cuda, d, n, dt, seed, scale), "fill");
    return d;
}

static void layer_make(layer *L, int D, int F, int Q, unsigned seed)
{
    L->D = D, L->F = F, L->Q = Q;
    L->wo = dev_random((long)D * D, TERN_DT_BF16, seed + 1, 0.05f);
    L->wg = dev_random((long)F * D, TERN_DT_BF16, seed + 2, 0.05f);
    L->wu = dev_random((long)F * D, TERN_DT_BF16, seed + 3, 0.05f);
    L->wd = dev_random((long)D * F, TERN_DT_BF16, seed + 4, 0.05f);
    L->wq = dev_random((long)Q * D, TERN_DT_BF16, seed + 5, 0.05f);
    L->nw1 = dev_random(D, TERN_DT_F32, seed + 6, 1.5f);
    L->nw2 = dev_random(D, TERN_DT_F32, seed + 7, 1.5f);
    L->a = dev_random(D, TERN_DT_F32, seed + 8, 1.0f);
    L->x = dev_random(D, TERN_DT_F32, seed + 9, 2.0f);
    L->h = ops_dev_zero((size_t)F * 4);
    L->qkv = ops_dev_zero((size_t)Q * 4);
}

static void layer_free(layer *L)
{
    void *p[] = {L->wo, L->wg, L->wu, L->wd, L->wq, L->nw1, L->nw2, L->a, L->x, L->h, L->qkv};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) tern_cuda_free(ops_cuda, p[i]);
}

/* The four products as separate calls (the decode pass's order). */
static tern_status layer_apart(const layer *L, float *tmp)
{
    tern_status st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, L->a, 1, L->D, L->wo,
                                      TERN_DT_BF16, L->D, L->x, L->D, 1, NULL);
    if (!st) st = tern_cuda_gate_up_norm(ops_cuda, L->x, 1, L->D, L->nw2, 1e-6f, L->wg, L->wu, TERN_DT_BF16, L->F, L->h, tmp);
    if (!st)
        st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, L->h, 1, L->F, L->wd, TERN_DT_BF16, L->D,
                              L->x, L->D, 1, NULL);
    if (!st)
        st = tern_cuda_matmul_norm(ops_cuda, L->x, 1, L->D, L->nw1, 1e-6f, L->wq, TERN_DT_BF16, L->Q, L->qkv, L->Q, tmp);
    return st;
}

/* The same four in one chain. */
static tern_status layer_chain(const layer *L)
{
    const tern_cuda_chain_stage st[4] = {
        {L->a, L->D, L->D, L->wo, NULL, TERN_DT_BF16, L->x, 1, NULL},
        {L->x, L->D, L->F, L->wg, L->wu, TERN_DT_BF16, L->h, 0, L->nw2},
        {L->h, L->F, L->D, L->wd, NULL, TERN_DT_BF16, L->x, 1, NULL},
        {L->x, L->D, L->Q, L->wq, NULL, TERN_DT_BF16, L->qkv, 0, L->nw1},
    };
    return tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, 4, 1e-6f);
}

typedef struct {
    float *x, *h, *qkv;
} outs;

static outs outs_get(const layer *L)
{
    outs o = {malloc((size_t)L->D * 4), malloc((size_t)L->F * 4), malloc((size_t)L->Q * 4)};
    ops_get(o.x, L->x, (size_t)L->D * 4);
    ops_get(o.h, L->h, (size_t)L->F * 4);
    ops_get(o.qkv, L->qkv, (size_t)L->Q * 4);
    return o;
}

static void outs_same(const char *what, const layer *L, outs a, outs b)
{
    char name[160];
    snprintf(name, sizeof name, "chain D=%d F=%d Q=%d %s: residual", L->D, L->F, L->Q, what);
    ops_same(name, a.x, b.x, L->D);
    snprintf(name, sizeof name, "chain D=%d F=%d Q=%d %s: gate/up", L->D, L->F, L->Q, what);
    ops_same(name, a.h, b.h, L->F);
    snprintf(name, sizeof name, "chain D=%d F=%d Q=%d %s: q/k/v", L->D, L->F, L->Q, what);
    ops_same(name, a.qkv, b.qkv, L->Q);
}

static void outs_free(outs o) { free(o.x); free(o.h); free(o.qkv); }

/* Separate products from a saved residual, then the chain from the same
 * residual (directly, then three times over through a graph replay, which
 * the separate products also run three times), compared bit for bit. */
static void chain_case(int D, int F, int Q, int mode)
{
    if (!tern_cuda_chain_takes(ops_cuda, TERN_DT_BF16, F)) {
        printf("skip chain D=%d F=%d: not taken by this device\n", D, F);
        return;
    }
    int was = tern_cuda_set_chain(ops_cuda, mode);
    layer L;
    layer_make(&L, D, F, Q, (unsigned)(D + F + Q));
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(F));
    float *x0 = ops_dev_zero((size_t)D * 4);
    char what[64];
    if (ops_ok(tern_cuda_copy(ops_cuda, x0, L.x, (size_t)D * 4), "save x") && ops_ok(layer_apart(&L, tmp), "apart")) {
        outs want = outs_get(&L);
        ops_ok(tern_cuda_copy(ops_cuda, L.x, x0, (size_t)D * 4), "restore x");
        ops_ok(tern_cuda_memset(ops_cuda, L.h, 0, (size_t)F * 4), "clear");
        ops_ok(tern_cuda_memset(ops_cuda, L.qkv, 0, (size_t)Q * 4), "clear");
        if (ops_ok(layer_chain(&L), "chain")) {
            outs got = outs_get(&L);
            snprintf(what, sizeof what, "mode %d", mode);
            outs_same(what, &L, got, want);
            outs_free(got);
        }
        /* three layers' worth in sequence: each reads the last one's residual */
        for (int r = 0; r < 2; r++) ops_ok(layer_apart(&L, tmp), "apart");
        outs want3 = outs_get(&L);
        ops_ok(tern_cuda_copy(ops_cuda, L.x, x0, (size_t)D * 4), "restore x");
        tern_cuda_graph *g = NULL;
        tern_status st = tern_cuda_graph_begin(ops_cuda);
        for (int r = 0; r < 3 && !st; r++) st = layer_chain(&L);
        tern_status st2 = tern_cuda_graph_end(ops_cuda, &g);
        if (ops_ok(st ? st : st2, "chain capture") && ops_ok(tern_cuda_graph_launch(ops_cuda, g), "replay") &&
            ops_ok(tern_cuda_sync(ops_cuda), "sync")) {
            outs got = outs_get(&L);
            snprintf(what, sizeof what, "mode %d, 3 in a graph", mode);
            outs_same(what, &L, got, want3);
            outs_free(got);
        }
        if (g) tern_cuda_graph_free(g);
        outs_free(want);
        outs_free(want3);
    }
    tern_cuda_free(ops_cuda, tmp);
    tern_cuda_free(ops_cuda, x0);
    layer_free(&L);
    tern_cuda_set_chain(ops_cuda, was);
}

static void refuse(const char *what, tern_status got)
{
    int ok = got == TERN_E_INVALID;
    printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", what, ok ? tern_last_error() : "accepted");
    ok ? ops_pass++ : ops_fail++;
}

void ops_chain(void)
{
    chain_case(4096, 12288, 6144, 1); /* the Qwen3-8B shape */
    chain_case(4096, 12288, 6144, 2);
    chain_case(256, 736, 388, 1);     /* N not a multiple of 8, K of parts unequal */
    chain_case(256, 736, 388, 2);
    chain_case(4096, 12288, 6144, 3);
    chain_case(256, 736, 388, 3);
    float *d = ops_dev_zero(64 * 4);
    tern_cuda_chain_stage st[5];
    for (int i = 0; i < 5; i++) st[i] = (tern_cuda_chain_stage){d, 32, 8, d, NULL, TERN_DT_BF16, d, 0, NULL};
    refuse("chain refuses 5 products", tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, 5, 1e-6f));
    refuse("chain refuses 0 products", tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, 0, 1e-6f));
    st[1].K = 40;
    refuse("chain refuses K=40", tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, 2, 1e-6f));
    st[1].K = 32, st[1].wdt = TERN_DT_F16;
    refuse("chain refuses f16 weights", tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, 2, 1e-6f));
    tern_cuda_free(ops_cuda, d);
}

/* One product of the layer (k = 0 o, 1 gate/up, 2 down, 3 q/k/v) alone,
 * as its own kernel or as a chain of one. */
static tern_status layer_one(const layer *L, int k, int chain, float *tmp)
{
    const tern_cuda_chain_stage st[4] = {
        {L->a, L->D, L->D, L->wo, NULL, TERN_DT_BF16, L->x, 1, NULL},
        {L->x, L->D, L->F, L->wg, L->wu, TERN_DT_BF16, L->h, 0, L->nw2},
        {L->h, L->F, L->D, L->wd, NULL, TERN_DT_BF16, L->x, 1, NULL},
        {L->x, L->D, L->Q, L->wq, NULL, TERN_DT_BF16, L->qkv, 0, L->nw1},
    };
    if (chain) return tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, &st[k], 1, 1e-6f);
    const tern_cuda_chain_stage *s = &st[k];
    if (s->wu) return tern_cuda_gate_up_norm(ops_cuda, s->x, 1, s->K, s->nw, 1e-6f, s->w, s->wu, TERN_DT_BF16, s->N, s->y, tmp);
    if (s->nw) return tern_cuda_matmul_norm(ops_cuda, s->x, 1, s->K, s->nw, 1e-6f, s->w, TERN_DT_BF16, s->N, s->y, s->N, tmp);
    return tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, s->x, 1, s->K, s->w, TERN_DT_BF16, s->N, s->y,
                            s->N, 1, NULL);
}

/* A chain of n products of one tile of 32 columns each: the barriers' and
 * the launch's cost with (almost) no weights. */
static tern_status tiny_chain(const layer *L, int n)
{
    tern_cuda_chain_stage st[4];
    for (int i = 0; i < n; i++) st[i] = (tern_cuda_chain_stage){L->a, 32, 8, L->wo, NULL, TERN_DT_BF16, L->x, 1, NULL};
    return tern_cuda_chain(ops_cuda, TERN_CUDA_ACT_F32, st, n, 1e-6f);
}

enum { TL = 8, TREPS = 20 };

/* Microseconds a layer of a graph of TL layers of what v selects: 0 the
 * four products apart, 1 their chain, 2 + 2k + c product k alone (c: as a
 * chain of one), 10 + n a tiny chain of n. */
static double time_graph(const layer *ls, int v, float *tmp)
{
    tern_cuda_graph *g = NULL;
    tern_status st = tern_cuda_graph_begin(ops_cuda);
    for (int l = 0; l < TL && !st; l++)
        st = v == 0 ? layer_apart(&ls[l], tmp) : v == 1 ? layer_chain(&ls[l])
             : v < 10 ? layer_one(&ls[l], (v - 2) / 2, (v - 2) % 2, tmp) : tiny_chain(&ls[l], v - 10);
    tern_status st2 = tern_cuda_graph_end(ops_cuda, &g);
    float ms = 0;
    double us = -1;
    if (ops_ok(st ? st : st2, "capture")) {
        for (int r = 0; r < 3; r++) ops_ok(tern_cuda_graph_launch(ops_cuda, g), "replay");
        ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");
        for (int r = 0; r < TREPS; r++) tern_cuda_graph_launch(ops_cuda, g);
        ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer");
        us = ms * 1e3 / TREPS / TL;
    }
    if (g) tern_cuda_graph_free(g);
    return us;
}

/* ops_test --chain: TL layers of the Qwen3-8B shape (more than the L2)
 * captured in one graph as separate products and as chains (modes 1 and
 * 2), each product alone both ways, and tiny chains; microseconds a layer. */
void ops_time_chain_kernel(void)
{
    layer ls[TL];
    for (int l = 0; l < TL; l++) layer_make(&ls[l], 4096, 12288, 6144, 500 + 20 * l);
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(12288));
    double mb = ((double)6144 * 4096 + 4096.0 * 4096 + 3.0 * 12288 * 4096) * 2 / 1e6;
    static const char *const what[4] = {"o", "gate/up", "down", "q/k/v"};
    for (int round = 0; round < 2; round++) {
        for (int v = 0; v < 4; v++) {
            int was = tern_cuda_set_chain(ops_cuda, v ? v : 1);
            double us = time_graph(ls, v ? 1 : 0, tmp);
            printf("decode layer (graph of %d, %.1f MB a layer) %-22s %7.1f us (%.0f GB/s)\n", TL, mb,
                   v == 0 ? "separate products" : v == 1 ? "chain, cooperative" : v == 2 ? "chain, plain launch" : "chain, 2 batches ahead", us,
                   mb / 1e3 / (us / 1e6));
            tern_cuda_set_chain(ops_cuda, was);
        }
        printf("decode products alone (graph of %d), own kernel / chain of one:", TL);
        for (int k = 0; k < 4; k++)
            printf(" %s %.1f / %.1f", what[k], time_graph(ls, 2 + 2 * k, tmp), time_graph(ls, 3 + 2 * k, tmp));
        printf(" us\n");
        printf("tiny chains (one 8 x 32 tile a product): 1 %.2f, 2 %.2f, 4 %.2f us\n", time_graph(ls, 11, tmp),
               time_graph(ls, 12, tmp), time_graph(ls, 14, tmp));
    }
    /* gate and up as one matrix of 2F rows (one-matrix kernel, norm folded) */
    for (int r = 0; r < 2; r++) {
        void *wc[TL];
        for (int l = 0; l < TL; l++) wc[l] = dev_random(2L * 12288 * 4096, TERN_DT_BF16, 900 + l, 0.05f);
        float *y2 = ops_dev_zero(2L * 12288 * 4);
        tern_cuda_graph *g = NULL;
        tern_status st = tern_cuda_graph_begin(ops_cuda);
        for (int l = 0; l < TL && !st; l++)
            st = tern_cuda_matmul_norm(ops_cuda, ls[l].x, 1, 4096, ls[l].nw2, 1e-6f, wc[l], TERN_DT_BF16, 2 * 12288, y2,
                                       2 * 12288, tmp);
        tern_status st2 = tern_cuda_graph_end(ops_cuda, &g);
        float ms = 0;
        if (ops_ok(st ? st : st2, "capture")) {
            for (int k = 0; k < 3; k++) tern_cuda_graph_launch(ops_cuda, g);
            ops_ok(tern_cuda_timer_mark(ops_cuda), "timer");
            for (int k = 0; k < TREPS; k++) tern_cuda_graph_launch(ops_cuda, g);
            ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer");
            printf("gate/up as one matrix of 24576 rows (norm folded): %.1f us, gate/up pair: %.1f us\n",
                   ms * 1e3 / TREPS / TL, time_graph(ls, 4, tmp));
        }
        if (g) tern_cuda_graph_free(g);
        for (int l = 0; l < TL; l++) tern_cuda_free(ops_cuda, wc[l]);
        tern_cuda_free(ops_cuda, y2);
    }
    tern_cuda_free(ops_cuda, tmp);
    for (int l = 0; l < TL; l++) layer_free(&ls[l]);
}

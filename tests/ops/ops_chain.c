/* The one-row product chain (tern_cuda_chain) against the one-product
 * kernels, bit for bit: a decode layer's o + residual, gate/up with the
 * norm folded, down + residual and the next q/k/v with its norm folded, at
 * the Qwen3-8B shape and at shapes whose parts of K are uneven or empty,
 * whose widths are no multiple of 8, and chains of fewer products, over
 * row-major weights and over the tiled layout (every matrix of 8k rows
 * tiled, the rest left in rows: against the products over rows); run
 * eagerly, twice in a row and as a captured graph replayed (the sync words
 * left at zero by each launch). `ops_test --chain` also times it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_harness.h"

typedef struct {
    int D, F, Q; /* hidden, FFN, q/k/v width; o takes K = D */
    void *wo, *wg, *wu, *wd, *wqkv;
    float *nw1, *nw2;
    float *att, *h, *g, *qkv; /* the chain's buffers */
    float *h0;                /* the residual's starting value */
    unsigned *sync, *err;
} ch_case;

static void case_make(ch_case *c, int D, int F, int Q, unsigned seed)
{
    memset(c, 0, sizeof *c);
    c->D = D, c->F = F, c->Q = Q;
    c->wo = ops_dev_random((long)D * D, TERN_DT_BF16, seed + 1, 0.05f);
    c->wg = ops_dev_random((long)F * D, TERN_DT_BF16, seed + 2, 0.05f);
    c->wu = ops_dev_random((long)F * D, TERN_DT_BF16, seed + 3, 0.05f);
    c->wd = ops_dev_random((long)D * F, TERN_DT_BF16, seed + 4, 0.05f);
    c->wqkv = ops_dev_random((long)Q * D, TERN_DT_BF16, seed + 5, 0.05f);
    c->nw1 = ops_dev_random(D, TERN_DT_F32, seed + 6, 1.0f);
    c->nw2 = ops_dev_random(D, TERN_DT_F32, seed + 7, 1.0f);
    c->att = ops_dev_random(D, TERN_DT_F32, seed + 8, 1.0f);
    c->h0 = ops_dev_random(D, TERN_DT_F32, seed + 9, 1.0f);
    c->h = ops_dev_zero((size_t)D * 4);
    c->g = ops_dev_zero((size_t)F * 4);
    c->qkv = ops_dev_zero((size_t)Q * 4);
    c->sync = ops_dev_zero(tern_cuda_chain_sync_bytes());
    c->err = ops_dev_zero(4);
}

static void case_free(ch_case *c)
{
    void *p[] = {c->wo, c->wg, c->wu, c->wd, c->wqkv, c->nw1, c->nw2, c->att, c->h, c->g, c->qkv, c->h0, c->sync, c->err};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) tern_cuda_free(ops_cuda, p[i]);
}

/* The chain's products (first n of o, gate/up, down, q/k/v; nonorm: the
 * gate/up and q/k/v without their folded norms). */
static int case_prods(const ch_case *c, int nonorm, tern_cuda_chain_prod *p)
{
    p[0] = (tern_cuda_chain_prod){c->att, NULL, 0, c->wo, NULL, c->D, c->D, c->h, TERN_CUDA_CH_ADD};
    p[1] = (tern_cuda_chain_prod){c->h, nonorm ? NULL : c->nw1, 1e-6f, c->wg, c->wu, c->D, c->F, c->g,
                                  TERN_CUDA_CH_SWIGLU};
    p[2] = (tern_cuda_chain_prod){c->g, NULL, 0, c->wd, NULL, c->F, c->D, c->h, TERN_CUDA_CH_ADD};
    p[3] = (tern_cuda_chain_prod){c->h, nonorm ? NULL : c->nw2, 1e-6f, c->wqkv, NULL, c->D, c->Q, c->qkv,
                                  TERN_CUDA_CH_STORE};
    return 4;
}

/* The same products one kernel each (the one-row path). */
static tern_status case_ref(const ch_case *c, int n, int nonorm, float *ntmp)
{
    tern_status st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, c->att, 1, c->D, c->wo,
                                      TERN_DT_BF16, c->D, c->h, c->D, 1, NULL);
    if (!st && n > 1)
        st = nonorm ? tern_cuda_gate_up(ops_cuda, TERN_CUDA_ACT_F32, c->h, 1, c->D, c->wg, c->wu, TERN_DT_BF16, c->F, c->g)
                    : tern_cuda_gate_up_norm(ops_cuda, c->h, 1, c->D, c->nw1, 1e-6f, c->wg, c->wu, TERN_DT_BF16, c->F,
                                             c->g, ntmp);
    if (!st && n > 2)
        st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, c->g, 1, c->F, c->wd, TERN_DT_BF16, c->D,
                              c->h, c->D, 1, NULL);
    if (!st && n > 3)
        st = nonorm ? tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, c->h, 1, c->D, c->wqkv,
                                       TERN_DT_BF16, c->Q, c->qkv, c->Q, 0, NULL)
                    : tern_cuda_matmul_norm(ops_cuda, c->h, 1, c->D, c->nw2, 1e-6f, c->wqkv, TERN_DT_BF16, c->Q,
                                            c->qkv, c->Q, ntmp);
    return st;
}

/* Resets the buffers to the case's starting values. */
static int case_reset(const ch_case *c)
{
    return ops_ok(tern_cuda_copy(ops_cuda, c->h, c->h0, (size_t)c->D * 4), "chain: reset h") &&
           ops_ok(tern_cuda_memset(ops_cuda, c->g, 0, (size_t)c->F * 4), "chain: reset g") &&
           ops_ok(tern_cuda_memset(ops_cuda, c->qkv, 0, (size_t)c->Q * 4), "chain: reset qkv");
}

typedef struct {
    float *h, *g, *qkv;
} ch_out;

static void out_get(const ch_case *c, ch_out *o)
{
    o->h = malloc((size_t)c->D * 4), o->g = malloc((size_t)c->F * 4), o->qkv = malloc((size_t)c->Q * 4);
    ops_ok(tern_cuda_sync(ops_cuda), "chain: sync");
    ops_get(o->h, c->h, (size_t)c->D * 4);
    ops_get(o->g, c->g, (size_t)c->F * 4);
    ops_get(o->qkv, c->qkv, (size_t)c->Q * 4);
}

static void out_free(ch_out *o)
{
    free(o->h), free(o->g), free(o->qkv);
}

typedef struct {
    const ch_case *c;
    tern_cuda_chain_prod *p;
    int n;
} ch_queue;

static tern_status queue_chain(void *ctx)
{
    ch_queue *q = ctx;
    tern_status st = TERN_OK;
    /* the reset inside the graph too, so that every replay starts alike */
    if (!st) st = tern_cuda_copy(ops_cuda, q->c->h, q->c->h0, (size_t)q->c->D * 4);
    if (!st) st = tern_cuda_chain(ops_cuda, q->p, q->n, q->c->sync, q->c->err);
    return st;
}

/* Tiles each of the case's matrices whose rows are a multiple of 8. */
static void case_tile(ch_case *c, const char *name)
{
    tern_cuda_tile_req rq[5];
    int n = 0;
    if (c->D % 8 == 0) rq[n++] = (tern_cuda_tile_req){c->wo, c->D, c->D}, rq[n++] = (tern_cuda_tile_req){c->wd, c->D, c->F};
    if (c->F % 8 == 0) rq[n++] = (tern_cuda_tile_req){c->wg, c->F, c->D}, rq[n++] = (tern_cuda_tile_req){c->wu, c->F, c->D};
    if (c->Q % 8 == 0) rq[n++] = (tern_cuda_tile_req){c->wqkv, c->Q, c->D};
    ops_ok(tern_cuda_tile_weights(ops_cuda, rq, n), name);
}

static void check_case_as(int D, int F, int Q, int n, int nonorm, unsigned seed, int tiled)
{
    ch_case c;
    case_make(&c, D, F, Q, seed);
    float *ntmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(F > D ? F : D));
    char name[160];
    snprintf(name, sizeof name, "chain D=%d F=%d Q=%d, %d products%s%s", D, F, Q, n, nonorm ? ", no norms" : "",
             tiled ? ", tiled" : "");
    tern_cuda_chain_prod p[4];
    case_prods(&c, nonorm, p);
    ch_out ref, got;
    case_reset(&c);
    ops_ok(case_ref(&c, n, nonorm, ntmp), name);
    out_get(&c, &ref);
    if (tiled) case_tile(&c, name);
    char what[200];
    for (int run = 0; run < 3; run++) {
        /* 0: one launch; 1: a second launch right after the first (the
         * counts left at zero), on buffers reset in between; 2: a graph of
         * the reset and the chain replayed three times */
        case_reset(&c);
        if (run < 2) {
            if (run == 1) {
                ops_ok(tern_cuda_chain(ops_cuda, p, n, c.sync, c.err), name);
                case_reset(&c);
            }
            ops_ok(tern_cuda_chain(ops_cuda, p, n, c.sync, c.err), name);
        } else {
            ch_queue qu = {&c, p, n};
            ops_graph(queue_chain, &qu, 3, 0, NULL);
        }
        out_get(&c, &got);
        static const char *const how[3] = {"", ", twice", ", graph x3"};
        snprintf(what, sizeof what, "%s%s: residual", name, how[run]);
        ops_same(what, got.h, ref.h, D);
        if (n > 1) {
            snprintf(what, sizeof what, "%s%s: gate/up", name, how[run]);
            ops_same(what, got.g, ref.g, F);
        }
        if (n > 3) {
            snprintf(what, sizeof what, "%s%s: q/k/v", name, how[run]);
            ops_same(what, got.qkv, ref.qkv, Q);
        }
        out_free(&got);
    }
    unsigned sync[32], err = 0;
    ops_get(sync, c.sync, sizeof sync);
    ops_get(&err, c.err, 4);
    int zero = 1;
    for (int i = 0; i < 32; i++) zero &= sync[i] == 0;
    snprintf(what, sizeof what, "%s: sync words left at zero, no error", name);
    if (zero && !err) {
        ops_pass++;
        printf("PASS %s\n", what);
    } else {
        ops_fail++;
        printf("FAIL %s (err %u, sync %u %u %u %u %u)\n", what, err, sync[0], sync[1], sync[2], sync[3], sync[4]);
    }
    out_free(&ref);
    tern_cuda_free(ops_cuda, ntmp);
    case_free(&c); /* tern_cuda_free forgets the tiled records */
}

static void check_case(int D, int F, int Q, int n, int nonorm, unsigned seed)
{
    check_case_as(D, F, Q, n, nonorm, seed, 0);
}

/* A chain the kernel does not take is refused with a message. */
static void refused(const char *what, const tern_cuda_chain_prod *p, int n, unsigned *sync, unsigned *err)
{
    int ok = tern_cuda_chain(ops_cuda, p, n, sync, err) == TERN_E_INVALID && tern_last_error()[0];
    printf("%s chain refuses %-45s %s\n", ok ? "PASS" : "FAIL", what, ok ? tern_last_error() : "not refused");
    ok ? ops_pass++ : ops_fail++;
}

static void chain_refusals(void)
{
    ch_case c;
    case_make(&c, 64, 128, 192, 800);
    tern_cuda_chain_prod p[5];
    case_prods(&c, 0, p);
    p[4] = p[0];
    refused("no products", p, 0, c.sync, c.err);
    refused("five products", p, 5, c.sync, c.err);
    refused("no sync words", p, 4, NULL, c.err);
    tern_cuda_chain_prod b = p[0];
    b.K = 48;
    refused("K % 32 != 0", &b, 1, c.sync, c.err);
    b = p[1];
    b.N = 126;
    refused("a SwiGLU pair of N % 4 != 0", &b, 1, c.sync, c.err);
    b = p[1];
    b.d_wu = NULL;
    refused("a SwiGLU pair without its up weight", &b, 1, c.sync, c.err);
    b = p[0];
    b.mode = 7;
    refused("an unknown mode", &b, 1, c.sync, c.err);
    /* over the tiled layout: a gate tiled and its up not; a tiled matrix
     * read as fewer rows than whole tiles; from a row off a tile's start */
    ops_ok(tern_cuda_tile_weight(ops_cuda, c.wg, c.F, c.D), "chain refusals: tile the gate");
    ops_ok(tern_cuda_tile_weight(ops_cuda, c.wo, c.D, c.D), "chain refusals: tile o");
    refused("a gate/up pair, one tiled", &p[1], 1, c.sync, c.err);
    b = p[0];
    b.N = 60;
    refused("a tiled matrix as 60 rows", &b, 1, c.sync, c.err);
    b = p[0];
    b.d_w = (const char *)c.wo + 4 * c.D * 2;
    b.N = 56;
    refused("a tiled matrix from row 4", &b, 1, c.sync, c.err);
    case_free(&c);
}

void ops_chain(void)
{
    if (!tern_cuda_chain_takes(ops_cuda, 64)) {
        printf("chain: off (TERN_CUDA_CHAIN_RING=0 or TERN_CUDA_MMA=0)\n");
        return;
    }
    chain_refusals();
    /* one group a block, then the smallest rings, then two groups (the
     * default) */
    int g1 = tern_cuda_set_chain_groups(ops_cuda, 1);
    check_case(4096, 12288, 6144, 4, 0, 700); /* the Qwen3-8B decode layer */
    check_case(64, 128, 192, 4, 0, 710);      /* K of 2 blocks: six of eight parts empty */
    check_case(288, 2080, 100, 4, 0, 720);    /* 9 and 65 blocks: uneven parts; q/k/v's last tile past N */
    check_case(96, 4128, 36, 4, 1, 730);      /* no norms; 3 blocks (five parts empty); N = 36 */
    check_case(2048, 8192, 2560, 1, 0, 740);  /* one product */
    check_case(2048, 8192, 2560, 2, 0, 750);  /* two */
    check_case(2560, 9728, 4096, 4, 0, 760);  /* parts of 10 blocks (o), 38 (down): partial chunks */
    /* the smallest ring and one a slot smaller than the default, then two
     * groups a block (two slots a warp) */
    int was = tern_cuda_set_chain_ring(ops_cuda, 2);
    check_case(288, 2080, 100, 4, 0, 770);
    check_case(4096, 12288, 6144, 4, 0, 775);
    tern_cuda_set_chain_ring(ops_cuda, 3);
    check_case(2560, 9728, 4096, 4, 0, 778);
    tern_cuda_set_chain_ring(ops_cuda, was);
    tern_cuda_set_chain_groups(ops_cuda, 2);
    check_case(4096, 12288, 6144, 4, 0, 780);
    check_case(96, 4128, 36, 4, 1, 790);
    check_case(288, 2080, 100, 4, 0, 795);
    /* over tiled weights: the Qwen3-8B layer in both forms, uneven parts and
     * q/k/v left in rows (N = 100), partial chunks, empty parts, no norms
     * with q/k/v in rows (N = 36); one group, q/k/v tiled at N = 104; the
     * smallest ring */
    check_case_as(4096, 12288, 6144, 4, 0, 800, 1);
    check_case_as(288, 2080, 100, 4, 0, 805, 1);
    check_case_as(2560, 9728, 4096, 4, 0, 810, 1);
    check_case_as(64, 128, 192, 4, 0, 815, 1);
    check_case_as(96, 4128, 36, 4, 1, 820, 1);
    tern_cuda_set_chain_groups(ops_cuda, 1);
    check_case_as(4096, 12288, 6144, 4, 0, 825, 1);
    check_case_as(288, 2080, 104, 4, 0, 830, 1);
    was = tern_cuda_set_chain_ring(ops_cuda, 2);
    check_case_as(2560, 9728, 4096, 4, 0, 835, 1);
    tern_cuda_set_chain_ring(ops_cuda, was);
    tern_cuda_set_chain_groups(ops_cuda, g1);
}

/* ops_test --chain: the decode layer's four products as one chain against
 * the four kernels, over layer copies larger than the L2, each in a graph
 * of six layers (o, gate/up, down, then the next layer's q/k/v). */
typedef struct {
    ops_layers *ly;
    int chain;
    unsigned *sync, *err;
} lay_queue;

static tern_status queue_layers(void *ctx)
{
    lay_queue *q = ctx;
    ops_layers *s = q->ly;
    tern_status st = TERN_OK;
    for (int l = 0; l < OPS_LAYERS && !st; l++) {
        int nl = (l + 1) % OPS_LAYERS;
        if (!q->chain) {
            st = ops_layer_run(s, l, 2 | 4 | 8);
            if (!st) st = ops_layer_run(s, nl, 1);
            continue;
        }
        tern_cuda_chain_prod p[4] = {
            {s->qkv, NULL, 0, s->wo[l], NULL, OPS_D, OPS_D, s->x, TERN_CUDA_CH_ADD},
            {s->x, s->nw, 1e-6f, s->wg[l], s->wu[l], OPS_D, OPS_F, s->h, TERN_CUDA_CH_SWIGLU},
            {s->h, NULL, 0, s->wd[l], NULL, OPS_F, OPS_D, s->x, TERN_CUDA_CH_ADD},
            {s->x, s->nw, 1e-6f, s->wqkv[nl], NULL, OPS_D, OPS_QKV, s->qkv, TERN_CUDA_CH_STORE}};
        st = tern_cuda_chain(ops_cuda, p, 4, q->sync + 32 * l, q->err);
    }
    return st;
}

void ops_time_chain_kernel(void)
{
    ops_layers ly;
    ops_layers_make(&ly, 900);
    double mb = ((double)OPS_QKV * OPS_D + (double)OPS_D * OPS_D + 3.0 * OPS_F * OPS_D) * 2 / 1e6;
    unsigned *sync = ops_dev_zero(32 * 4 * OPS_LAYERS), *err = ops_dev_zero(4);
    /* the device's read bandwidth (the matrix kernels' 16-byte loads over
     * 2 GiB) in the same run: the floor of a layer is its bytes at that */
    size_t bytes = (size_t)2 << 30;
    void *src = ops_dev_random((long)(bytes / 2), TERN_DT_BF16, 950, 1.0f);
    float *sink = ops_dev_zero(4096 * 4);
    float rms = 1e9f;
    for (int r = 0; r < 5; r++) {
        float ms = 0;
        if (ops_ok(tern_cuda_timer_mark(ops_cuda), "timer") && ops_ok(tern_cuda_read_bw(ops_cuda, src, bytes, sink), "read") &&
            ops_ok(tern_cuda_timer_elapsed(ops_cuda, &ms), "timer") && ms < rms)
            rms = ms;
    }
    double gbs = bytes / 1e6 / rms;
    printf("read bandwidth %.0f GB/s: a layer's %.1f MB in %.1f us\n", gbs, mb, mb / gbs * 1e3);
    tern_cuda_free(ops_cuda, src);
    tern_cuda_free(ops_cuda, sink);
    /* over rows (two rounds), then over the tiled layout (two rounds) */
    static const struct {
        const char *what;
        int chain, groups, ring, timing, tiled;
    } v[] = {{"four kernels", 0, 1, 0, 0, 0},
             {"one chain kernel", 1, 1, 0, 0, 0},
             {"one chain kernel, 3 slots a warp", 1, 1, 3, 0, 0},
             {"one chain kernel, 2 slots a warp", 1, 1, 2, 0, 0},
             {"one chain kernel, two groups", 1, 2, 0, 0, 0},
             {"one chain kernel, no waits (values wrong)", 1, 1, 0, 1, 0},
             {"one chain kernel, stream and waits alone (values wrong)", 1, 1, 0, 2, 0},
             {"one chain kernel, stream alone (values wrong)", 1, 1, 0, 3, 0},
             {"tiled: four kernels", 0, 1, 0, 0, 1},
             {"tiled: one chain kernel", 1, 1, 0, 0, 1},
             {"tiled: one chain kernel, two groups", 1, 2, 0, 0, 1},
             {"tiled: one chain kernel, two groups, stream alone (values wrong)", 1, 2, 0, 3, 1},
             {"tiled: one chain kernel, stream alone (values wrong)", 1, 1, 0, 3, 1}};
    for (int r = 0; r < 4; r++)
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            if (r == 2 && k == 0) ops_layers_tile(&ly);
            if (v[k].tiled != (r >= 2)) continue;
            lay_queue q = {&ly, v[k].chain, sync, err};
            int gw = tern_cuda_set_chain_groups(ops_cuda, v[k].groups);
            int tw = tern_cuda_set_chain_timing(ops_cuda, v[k].timing);
            int rw = v[k].ring ? tern_cuda_set_chain_ring(ops_cuda, v[k].ring) : -1;
            float ms = 0;
            if (ops_graph(queue_layers, &q, 2, 5, &ms))
                printf("decode layer products, %s: %.1f us a layer (%.0f GB/s)\n", v[k].what, ms * 1e3 / OPS_LAYERS,
                       mb / 1e3 / (ms / 1e3 / OPS_LAYERS));
            tern_cuda_set_chain_groups(ops_cuda, gw);
            tern_cuda_set_chain_timing(ops_cuda, tw);
            if (rw >= 0) tern_cuda_set_chain_ring(ops_cuda, rw);
        }
    unsigned e = 0;
    ops_get(&e, err, 4);
    if (e) printf("chain: error word set (a block waited 2 s)\n");
    tern_cuda_free(ops_cuda, sync);
    tern_cuda_free(ops_cuda, err);
    ops_layers_free(&ly);
}

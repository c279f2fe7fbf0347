/* bench_cuda: a random-weight Qwen3-8B-shaped decoder (bf16 weights) run
 * layer by layer through the CUDA backend's ops: prefill of a prompt, then
 * batch-1 decode steps captured as one CUDA graph, against the memory
 * bandwidth measured in the same process (a device-to-device copy and a
 * 16-byte read kernel). Weights are made on the device.
 *
 *   bench_cuda [--layers N] [--prompt N] [--steps N] [--no-pdl]
 *
 * Also checks exactness on the full model: the logits of a prompt's last
 * token are bit-identical whether it is prefilled with the prompt or decoded
 * after it, and graph replays reproduce the eagerly queued step bit for
 * bit. Prints a table; exit status 1 when a check fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cuda/cuda.h"

enum { D = 4096, H = 32, HK = 8, HD = 128, F = 12288, V = 151936, QKV = (H + 2 * HK) * HD, CAP = 2048, BT = 32 };

typedef struct {
    void *attn_norm, *wqkv, *q_norm, *k_norm, *wo, *ffn_norm, *wg, *wu, *wd;
    float *k, *v;
} layer;

typedef struct {
    tern_cuda *c;
    int n_layers, max_t;
    layer *l;
    void *embed, *norm, *lm_head;
    float *cs;                          /* rope table [CAP, HD] */
    float *x, *xn, *qkv, *att, *h, *logits;
    int32_t *ids;
    int *tok_row;                       /* [max_t] */
    int *table;                         /* KV block table of the row, [CAP / BT] */
    tern_cuda_attn_row *rows;           /* [n_layers]: one row per layer */
    void *part, *tmp;
    unsigned *count;
    tern_cuda_mm_path path;
} model;

static int fail(const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, tern_last_error());
    return 1;
}

#define TRY(expr)                                          \
    do {                                                   \
        if ((expr) != TERN_OK) return fail(#expr);         \
    } while (0)

static int alloc_rand(model *m, void **d, long n, tern_dtype dt, uint64_t seed, float scale)
{
    TRY(tern_cuda_alloc(m->c, (size_t)n * tern_dtype_size(dt), d));
    TRY(tern_cuda_fill_random(m->c, *d, n, dt, seed, scale));
    return 0;
}

static double weight_bytes_per_token(int n_layers)
{
    double per_layer = 2.0 * ((double)QKV * D + (double)D * H * HD + 3.0 * F * D) + 2.0 * (2 * D + 2 * HD);
    return n_layers * per_layer + 2.0 * ((double)V * D + D) + 2.0 * D;
}

static int build(model *m)
{
    tern_cuda *c = m->c;
    uint64_t seed = 1;
    float ws = 0.03f, ns = 1.0f;
    m->l = calloc((size_t)m->n_layers, sizeof *m->l);
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = &m->l[i];
        /* Norm weights near 1 (uniform in [0, 2)) keep activations O(1). */
        if (alloc_rand(m, &l->attn_norm, D, TERN_DT_BF16, seed++, ns) || alloc_rand(m, &l->wqkv, (long)QKV * D, TERN_DT_BF16, seed++, ws) ||
            alloc_rand(m, &l->q_norm, HD, TERN_DT_BF16, seed++, ns) || alloc_rand(m, &l->k_norm, HD, TERN_DT_BF16, seed++, ns) ||
            alloc_rand(m, &l->wo, (long)D * H * HD, TERN_DT_BF16, seed++, ws) ||
            alloc_rand(m, &l->ffn_norm, D, TERN_DT_BF16, seed++, ns) || alloc_rand(m, &l->wg, (long)F * D, TERN_DT_BF16, seed++, ws) ||
            alloc_rand(m, &l->wu, (long)F * D, TERN_DT_BF16, seed++, ws) || alloc_rand(m, &l->wd, (long)D * F, TERN_DT_BF16, seed++, ws))
            return 1;
        TRY(tern_cuda_alloc(c, (size_t)HK * CAP * HD * 4, (void **)&l->k));
        TRY(tern_cuda_alloc(c, (size_t)HK * CAP * HD * 4, (void **)&l->v));
    }
    if (alloc_rand(m, &m->embed, (long)V * D, TERN_DT_BF16, seed++, 1.0f) || alloc_rand(m, &m->norm, D, TERN_DT_BF16, seed++, ns) ||
        alloc_rand(m, &m->lm_head, (long)V * D, TERN_DT_BF16, seed++, ws))
        return 1;
    /* The rope table of the CPU backend (theta 1e6), uploaded once. */
    float inv[HD / 2], *cs = malloc((size_t)CAP * HD * 4);
    int *all = malloc(CAP * sizeof *all);
    for (int i = 0; i < HD / 2; i++) inv[i] = 1.0f / powf(1000000.0f, (float)(2 * i) / HD);
    for (int p = 0; p < CAP; p++) all[p] = p;
    tern_cpu_rope_table(CAP, HD, all, inv, 1.0f, cs);
    TRY(tern_cuda_alloc(c, (size_t)CAP * HD * 4, (void **)&m->cs));
    TRY(tern_cuda_upload(c, m->cs, cs, (size_t)CAP * HD * 4));
    free(cs);
    free(all);
    int T = m->max_t;
    TRY(tern_cuda_alloc(c, (size_t)T * D * 4, (void **)&m->x));
    TRY(tern_cuda_alloc(c, (size_t)T * D * 4, (void **)&m->xn));
    TRY(tern_cuda_alloc(c, (size_t)T * QKV * 4, (void **)&m->qkv));
    TRY(tern_cuda_alloc(c, (size_t)T * H * HD * 4, (void **)&m->att));
    TRY(tern_cuda_alloc(c, (size_t)T * 2 * F * 4, (void **)&m->h));
    TRY(tern_cuda_alloc(c, (size_t)V * 4, (void **)&m->logits));
    TRY(tern_cuda_alloc(c, (size_t)T * 4, (void **)&m->ids));
    TRY(tern_cuda_alloc(c, (size_t)T * 4, (void **)&m->tok_row));
    TRY(tern_cuda_memset(c, m->tok_row, 0, (size_t)T * 4));
    /* KV as the CPU pool lays it out: blocks of BT positions, the row's
     * blocks scattered (a fixed permutation of the pool). */
    int tab[CAP / BT];
    for (int b = 0; b < CAP / BT; b++) tab[b] = (b * 37 + 11) % (CAP / BT);
    TRY(tern_cuda_alloc(c, sizeof tab, (void **)&m->table));
    TRY(tern_cuda_upload(c, m->table, tab, sizeof tab));
    TRY(tern_cuda_alloc(c, (size_t)m->n_layers * sizeof *m->rows, (void **)&m->rows));
    TRY(tern_cuda_alloc(c, tern_cuda_attention_tmp_bytes(T, CAP, H, HD), &m->part));
    TRY(tern_cuda_alloc(c, tern_cuda_attention_count_bytes(T, HK), (void **)&m->count));
    TRY(tern_cuda_memset(c, m->count, 0, tern_cuda_attention_count_bytes(T, HK)));
    TRY(tern_cuda_alloc(c, tern_cuda_matmul_tmp_bytes(TERN_CUDA_MM_CUBLAS, T, F, D) + 16, &m->tmp));
    return tern_cuda_sync(c) ? fail("building the model") : 0;
}

/* Host-side state of one step: the token ids and the row of every layer
 * (positions follow from the row's len and n_q). */
typedef struct {
    int32_t ids[1024];
    tern_cuda_attn_row rows[64];
} step_args;

static void fill_args(const model *m, step_args *a, int len, int n_q)
{
    for (int i = 0; i < n_q; i++) a->ids[i] = (int32_t)((len - n_q + i) * 7919 % V);
    for (int l = 0; l < m->n_layers; l++)
        a->rows[l] = (tern_cuda_attn_row){m->l[l].k, m->l[l].v, m->table, (long)HK * BT * HD, (long)BT * HD, BT, len, n_q, 0};
}

static int upload_args(model *m, const step_args *a, int n_q)
{
    TRY(tern_cuda_upload_async(m->c, m->ids, a->ids, (size_t)n_q * 4));
    TRY(tern_cuda_upload_async(m->c, m->rows, a->rows, (size_t)m->n_layers * sizeof *m->rows));
    return 0;
}

/* Queues one forward of T tokens of the single row; logits of the last. */
static int forward(model *m, int T)
{
    tern_cuda *c = m->c;
    tern_cuda_act act = TERN_CUDA_ACT_F32;
    TRY(tern_cuda_embed(c, m->ids, T, m->embed, TERN_DT_BF16, D, m->x));
    for (int i = 0; i < m->n_layers; i++) {
        layer *l = &m->l[i];
        TRY(tern_cuda_rmsnorm(c, m->x, m->xn, T, D, l->attn_norm, TERN_DT_BF16, 1e-6f));
        TRY(tern_cuda_matmul(c, act, m->path, m->xn, T, D, l->wqkv, TERN_DT_BF16, QKV, m->qkv, QKV, 0, m->tmp));
        TRY(tern_cuda_qkv_rope_store(c, m->qkv, QKV, T, H, HK, HD, HD, l->q_norm, l->k_norm, TERN_DT_BF16, 1e-6f, m->cs,
                                     m->rows + i, m->tok_row));
        TRY(tern_cuda_attention(c, m->rows + i, m->tok_row, T, CAP, H, HK, HD, 1.0f / sqrtf((float)HD), m->qkv, QKV,
                                m->att, m->part, m->count, NULL));
        TRY(tern_cuda_matmul(c, act, m->path, m->att, T, H * HD, l->wo, TERN_DT_BF16, D, m->x, D, 1, m->tmp));
        TRY(tern_cuda_rmsnorm(c, m->x, m->xn, T, D, l->ffn_norm, TERN_DT_BF16, 1e-6f));
        if (m->path == TERN_CUDA_MM_CUBLAS && T > TERN_CUDA_GEMV_MAX_M) {
            TRY(tern_cuda_matmul(c, act, m->path, m->xn, T, D, l->wg, TERN_DT_BF16, F, m->h, F, 0, m->tmp));
            TRY(tern_cuda_matmul(c, act, m->path, m->xn, T, D, l->wu, TERN_DT_BF16, F, m->h + (long)T * F, F, 0, m->tmp));
            TRY(tern_cuda_silu_mul(c, m->h, m->h + (long)T * F, (long)T * F));
        } else {
            TRY(tern_cuda_gate_up(c, act, m->xn, T, D, l->wg, l->wu, TERN_DT_BF16, F, m->h));
        }
        TRY(tern_cuda_matmul(c, act, m->path, m->h, T, F, l->wd, TERN_DT_BF16, D, m->x, D, 1, m->tmp));
    }
    float *last = m->x + (long)(T - 1) * D;
    TRY(tern_cuda_rmsnorm(c, last, m->xn, 1, D, m->norm, TERN_DT_BF16, 1e-6f));
    TRY(tern_cuda_matmul(c, act, TERN_CUDA_MM_OWN, m->xn, 1, D, m->lm_head, TERN_DT_BF16, V, m->logits, V, 0, NULL));
    return 0;
}

static int prefill(model *m, step_args *a, int T, float *ms)
{
    fill_args(m, a, T, T);
    if (upload_args(m, a, T)) return 1;
    TRY(tern_cuda_timer_mark(m->c));
    if (forward(m, T)) return 1;
    TRY(tern_cuda_timer_elapsed(m->c, ms));
    return 0;
}

static int all_finite(const float *x, long n)
{
    for (long i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int same(const float *a, const float *b, long n) { return !memcmp(a, b, (size_t)n * sizeof *a); }

int main(int argc, char **argv)
{
    model m = {0};
    int prompt = 512, steps = 64, pdl = 1;
    m.n_layers = 36;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) m.n_layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-pdl")) pdl = 0;
        else {
            fprintf(stderr, "usage: bench_cuda [--layers N] [--prompt N] [--steps N] [--no-pdl]\n");
            return 2;
        }
    }
    if (m.n_layers < 1 || m.n_layers > 64 || prompt < 2 || prompt > 1024 || steps < 1 || prompt + steps + 1 > CAP) {
        fprintf(stderr, "bench_cuda: layers 1..64, prompt 2..1024, prompt + steps < %d\n", CAP);
        return 2;
    }
    if (tern_cuda_open(0, &m.c) != TERN_OK) {
        printf("skipped: %s\n", tern_last_error());
        return 0;
    }
    tern_cuda_set_pdl(m.c, pdl);
    m.max_t = prompt;
    printf("device: %s; programmatic dependent launch %s\n", tern_cuda_describe(m.c), pdl ? "on" : "off");
    printf("model: Qwen3-8B shape, %d layers, hidden %d, heads %d/%d x %d, ffn %d, vocab %d, bf16 weights, f32 "
           "activations, f32 KV in blocks of %d positions\n",
           m.n_layers, D, H, HK, HD, F, V, BT);
    if (build(&m)) return 1;

    /* Bandwidth, measured now, in this process. */
    size_t bw_bytes = 4ull << 30;
    void *src, *dst;
    float *sink, ms;
    TRY(tern_cuda_alloc(m.c, bw_bytes, &src));
    TRY(tern_cuda_alloc(m.c, bw_bytes, &dst));
    TRY(tern_cuda_alloc(m.c, 4096 * 4, (void **)&sink));
    TRY(tern_cuda_memset(m.c, src, 1, bw_bytes));
    for (int i = 0; i < 3; i++) TRY(tern_cuda_copy(m.c, dst, src, bw_bytes));
    TRY(tern_cuda_timer_mark(m.c));
    for (int i = 0; i < 10; i++) TRY(tern_cuda_copy(m.c, dst, src, bw_bytes));
    TRY(tern_cuda_timer_elapsed(m.c, &ms));
    double copy_bw = 2.0 * bw_bytes * 10 / (ms / 1e3);
    for (int i = 0; i < 3; i++) TRY(tern_cuda_read_bw(m.c, src, bw_bytes, sink));
    TRY(tern_cuda_timer_mark(m.c));
    for (int i = 0; i < 10; i++) TRY(tern_cuda_read_bw(m.c, src, bw_bytes, sink));
    TRY(tern_cuda_timer_elapsed(m.c, &ms));
    double read_bw = (double)bw_bytes * 10 / (ms / 1e3);
    tern_cuda_free(m.c, src);
    tern_cuda_free(m.c, dst);
    double bw = copy_bw > read_bw ? copy_bw : read_bw;
    printf("bandwidth: copy %.0f GB/s (read + write), read kernel %.0f GB/s; reference = %.0f GB/s\n", copy_bw / 1e9,
           read_bw / 1e9, bw / 1e9);

    step_args *args = calloc(1, sizeof *args);
    float *lg_a = malloc((size_t)V * 4), *lg_b = malloc((size_t)V * 4);
    int bad = 0;
    /* Prefill timings (own kernels: batch-invariant; cuBLAS: faster). */
    float t_own = 0, t_blas = 0;
    m.path = TERN_CUDA_MM_OWN;
    if (prefill(&m, args, prompt, &ms) || prefill(&m, args, prompt, &t_own)) return 1;
    TRY(tern_cuda_download(m.c, lg_b, m.logits, (size_t)V * 4));
    m.path = TERN_CUDA_MM_CUBLAS;
    if (prefill(&m, args, prompt, &ms)) return 1;
    t_blas = 1e30f;
    for (int r = 0; r < 3; r++) {
        if (prefill(&m, args, prompt, &ms)) return 1;
        if (ms < t_blas) t_blas = ms;
    }
    m.path = TERN_CUDA_MM_OWN;

    /* Exactness: the prompt's last token decoded after a prefill of the
     * rest gives the logits of the full prefill (own kernels), bit for bit. */
    if (prefill(&m, args, prompt - 1, &ms)) return 1;
    fill_args(&m, args, prompt, 1);
    if (upload_args(&m, args, 1) || forward(&m, 1)) return 1;
    TRY(tern_cuda_download(m.c, lg_a, m.logits, (size_t)V * 4));
    int ok1 = all_finite(lg_b, V) && same(lg_a, lg_b, V);
    printf("check: last prompt token decoded == prefilled (logits, bitwise): %s\n", ok1 ? "yes" : "NO");
    bad |= !ok1;

    /* Decode: one eager step, then the same step as a graph replay. */
    fill_args(&m, args, prompt + 1, 1);
    if (upload_args(&m, args, 1) || forward(&m, 1)) return 1;
    TRY(tern_cuda_download(m.c, lg_a, m.logits, (size_t)V * 4));
    tern_cuda_graph *g = NULL;
    TRY(tern_cuda_graph_begin(m.c));
    if (forward(&m, 1)) return 1;
    TRY(tern_cuda_graph_end(m.c, &g));
    TRY(tern_cuda_graph_launch(m.c, g));
    TRY(tern_cuda_download(m.c, lg_b, m.logits, (size_t)V * 4));
    int ok2 = all_finite(lg_a, V) && same(lg_a, lg_b, V);
    printf("check: graph replay == eager step (logits, bitwise): %s\n", ok2 ? "yes" : "NO");
    bad |= !ok2;

    /* Timed decode: positions prompt+1 .. prompt+steps, each step's
     * arguments from its own pinned slot, logits copied back every step. */
    step_args *slots;
    float *host_logits;
    TRY(tern_cuda_host_alloc(m.c, sizeof *slots * (size_t)steps, (void **)&slots));
    TRY(tern_cuda_host_alloc(m.c, (size_t)V * 4, (void **)&host_logits));
    for (int s = 0; s < steps; s++) fill_args(&m, &slots[s], prompt + 1 + s, 1);
    for (int s = 0; s < 3; s++) {   /* warm-up replays at the first position */
        if (upload_args(&m, &slots[0], 1)) return 1;
        TRY(tern_cuda_graph_launch(m.c, g));
    }
    TRY(tern_cuda_timer_mark(m.c));
    for (int s = 0; s < steps; s++) {
        if (upload_args(&m, &slots[s], 1)) return 1;
        TRY(tern_cuda_graph_launch(m.c, g));
        TRY(tern_cuda_download_async(m.c, host_logits, m.logits, (size_t)V * 4));
    }
    TRY(tern_cuda_timer_elapsed(m.c, &ms));
    double step_ms = ms / steps;
    double kv_bytes = 2.0 * m.n_layers * HK * HD * 4 * (prompt + 1 + steps / 2.0);
    double bytes = weight_bytes_per_token(m.n_layers) + kv_bytes;
    double achieved = bytes / (step_ms / 1e3);
    printf("\n| what | result |\n|---|---|\n");
    printf("| decode, batch 1, CUDA graph (KV %d..%d) | %.3f ms/token = %.1f tok/s |\n", prompt + 1, prompt + steps,
           step_ms, 1e3 / step_ms);
    printf("| bytes read per token (weights + KV) | %.2f GB |\n", bytes / 1e9);
    printf("| achieved bandwidth | %.0f GB/s = %.1f%% of %.0f GB/s |\n", achieved / 1e9, 100.0 * achieved / bw, bw / 1e9);
    printf("| bandwidth-bound ceiling | %.1f tok/s |\n", bw / bytes);
    printf("| prefill %d tokens, own kernels (batch-invariant) | %.1f ms = %.0f tok/s |\n", prompt, t_own,
           prompt / (t_own / 1e3));
    printf("| prefill %d tokens, cuBLAS GEMM (bf16 activations) | %.1f ms = %.0f tok/s |\n", prompt, t_blas,
           prompt / (t_blas / 1e3));
    tern_cuda_graph_free(g);
    tern_cuda_host_free(m.c, slots);
    tern_cuda_host_free(m.c, host_logits);
    free(args); free(lg_a); free(lg_b);
    tern_cuda_close(m.c);
    return bad;
}

/* The CUDA backend of the family forward (backend.h), over the ops of
 * src/backend/cuda/cuda.h: the per-pass ops, the decode passes' graphs and
 * the profile (the load and unload: backend_cuda_load.c).
 *
 * At load every weight is uploaded once (q, k and v of a layer as one
 * [q + 2 kv, H] matrix, so the prologue is one product) and the rope table
 * of every position the model takes is computed on the host by the CPU's
 * tern_cpu_rope_table and uploaded, so rope's angles are the CPU's bit for
 * bit. KV pools made for the model keep their blocks in device memory
 * (kv_cuda.c); the host pool keeps the tables, counts and transactions and
 * each pass uploads the rows' tables with its token ids in one copy. Only the
 * wanted positions' hidden states and logits come back.
 *
 * What the ops lack is refused at load with a message: MoE layers,
 * quantized weights, head_dim other than 16 / 32 / 64 / 128 / 256, more than
 * 8 query heads per KV head, widths that are not multiples of 8. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "core/clock.h"
#include "core/exec.h"
#include "model/backend_cuda_model.h"

void cuda_graph_abandon(cuda_model *d)
{
    if (d->gmode == G_CAPTURE) {
        tern_cuda_graph *g = NULL;
        if (!tern_cuda_graph_end(d->c, &g)) tern_cuda_graph_free(g);
    }
    d->gmode = G_EAGER;
}

/* After begin's upload: replay, capture or run eagerly (see graph_on). */
static tern_status graph_start(tern_model *m, const tern_pass *p)
{
    cuda_model *d = cm(m);
    d->gmode = G_EAGER;
    if (!d->graph_on || d->prof || p->T != d->nr || p->T > TERN_CUDA_GEMV_MAX_M) return TERN_OK;
    const void *sig[GRAPH_SIG] = {m->exec->d_scratch, d->stage.d, d->part.d, d->count.d, d->bias.d, d->norm_tmp.d};
    graph_slot *s = NULL;
    for (int i = 0; i < GRAPH_SLOTS && !s; i++) {
        graph_slot *g = &d->gs[i];
        if (g->used && g->T == p->T && g->nr == d->nr && g->n_out == p->n_out && g->max_len == d->max_len) s = g;
    }
    if (!s) {
        s = &d->gs[0];
        for (int i = 1; i < GRAPH_SLOTS; i++)
            if (d->gs[i].used < s->used) s = &d->gs[i];
        tern_cuda_graph_free(s->g);
        *s = (graph_slot){p->T, d->nr, p->n_out, d->max_len, {0}, 0, 0, NULL};
        memcpy(s->sig, sig, sizeof sig);
    }
    if (memcmp(s->sig, sig, sizeof sig)) {
        tern_cuda_graph_free(s->g);
        s->g = NULL;
        s->seen = 0;
        memcpy(s->sig, sig, sizeof sig);
    }
    s->used = ++d->gclock;
    if (s->g) {
        d->gmode = G_REPLAY;
        return tern_cuda_graph_launch(d->c, s->g);
    }
    if (s->seen++ < 1) return TERN_OK;
    tern_status st = tern_cuda_graph_begin(d->c);
    if (st) {
        d->graph_on = 0;
        return st;
    }
    d->gmode = G_CAPTURE;
    d->gslot = (int)(s - d->gs);
    return TERN_OK;
}

/* At head: a capture ends and runs; a replay already runs. */
static tern_status graph_finish(cuda_model *d)
{
    if (d->gmode != G_CAPTURE) {
        d->gmode = G_EAGER;
        return TERN_OK;
    }
    tern_cuda_graph *g = NULL;
    d->gmode = G_EAGER;
    tern_status st = tern_cuda_graph_end(d->c, &g);
    if (st) {
        /* The pass's work was captured, not run: it fails, and later
         * passes run eagerly. */
        d->graph_on = 0;
        return st;
    }
    d->gs[d->gslot].g = g;
    return tern_cuda_graph_launch(d->c, g);
}

#define REPLAYING(m) (cm(m)->gmode == G_REPLAY)

/* Marks the end of an op of class cls (TERN_CUDA_PROF). */
static tern_status prof(cuda_model *d, int cls, tern_status st)
{
    if (st || !d->prof || d->prof_n >= 4095) return st;
    d->prof_cls[d->prof_n] = cls;
    return tern_cuda_prof_record(d->c, d->prof_n++);
}

/* Activations stay float32 on the GPU in both precision modes: rounding
 * them to bf16 inside the products buys the GPU nothing (it makes a decode
 * step 24% slower on the H200: 5.91 against 4.75 ms for the Qwen3-8B shape)
 * and costs accuracy. TERN_CUDA_ACT=bf16 asks for the rounding (the CPU's
 * bf16 mode) to compare. */
static tern_cuda_act act(const tern_model *m)
{
    return m->act_mode == TERN_ACT_BF16 && cm(m)->act_bf16 ? TERN_CUDA_ACT_BF16 : TERN_CUDA_ACT_F32;
}

tern_status cuda_dbuf_reserve(tern_cuda *c, dbuf *b, size_t bytes, int zero)
{
    if (bytes <= b->bytes) return TERN_OK;
    size_t cap = b->bytes * 2 > bytes ? b->bytes * 2 : bytes;
    void *d;
    tern_status st = tern_cuda_alloc(c, cap, &d);
    if (st) return st;
    if (zero && (st = tern_cuda_memset(c, d, 0, cap))) {
        tern_cuda_free(c, d);
        return st;
    }
    tern_cuda_free(c, b->d);
    b->d = d;
    b->bytes = cap;
    return TERN_OK;
}

/* ---- per-pass ops ------------------------------------------------------ */

static size_t cuda_pass_bytes(const tern_model *m, int T)
{
    (void)m;
    (void)T;
    return 0;
}

static tern_status cuda_workspace(tern_model *m, size_t bytes, void **out)
{
    tern_exec *x = m->exec;
    if (bytes > x->d_scratch_bytes) {
        size_t cap = x->d_scratch_bytes * 2 > bytes ? x->d_scratch_bytes * 2 : bytes;
        void *d;
        tern_status st = tern_cuda_alloc(x->cuda, cap, &d);
        if (st) return st;
        tern_cuda_free(x->cuda, x->d_scratch);
        x->d_scratch = d;
        x->d_scratch_bytes = cap;
    }
    *out = x->d_scratch;
    return TERN_OK;
}

/* TERN_CUDA_ATTN_FUSE=1: passes of one new token per row (decode) run the
 * attention prologue inside the attention kernel (the same arithmetic, one
 * kernel less a layer). Off by default: the separate prologue lets the
 * attention's blocks launch early and stage the older keys while it runs,
 * which measured faster (decode step 4.57 against 4.64 ms, Qwen3-8B shape). */
static int attn_fused(const tern_model *m, const tern_pass *p)
{
    return cm(m)->attn_fuse && p->T == cm(m)->nr;
}

/* Rows of two or more queries on average (prefill, unless the prologue is
 * fused) take the tiled attention kernel, which stages a split's keys and
 * values once for up to 64 / G of a row's queries and folds their splits in
 * the block; the others the per-query kernel, whose split records and
 * counters are the pass's scratch. The bits are the same either way. */
static int attn_tiled(const tern_model *m, const tern_pass *p)
{
    return !attn_fused(m, p) && cm(m)->tiled_attn && p->T >= 2 * cm(m)->nr;
}

/* One upload per pass: ids [T], token -> row [T], wanted positions [n_out],
 * the rows' block tables, then the attention rows of every layer. */
static tern_status cuda_begin(tern_model *m, tern_pass *p)
{
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    const tern_batch *b = p->b;
    int T = p->T, L = c->n_layers, nr = 0, ntab = 0, max_len = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int n = b->n_tokens[r], len = tern_kv_offset(p->kv, b->rows[r]) + n;
        if (!n) continue;
        if (len > d->n_rope)
            return tern_error(TERN_E_RANGE, "cuda: position %d is past the model's %d positions", len - 1, d->n_rope);
        nr++;
        ntab += (int)tern_kv_blocks_for(p->kv, len);
        if (len > max_len) max_len = len;
    }
    size_t o_ids = 0, o_tok = align256((size_t)T * 4), o_zero = o_tok + align256((size_t)T * 4);
    size_t o_want = o_zero + align256((size_t)T * 4);
    /* Every address a kernel takes depends on T, n_out and nr only (a
     * graph of the pass replays them); the tables go last. */
    size_t o_rows = o_want + align256((size_t)(p->n_out > 0 ? p->n_out : 1) * 4);
    size_t o_tab = o_rows + align256((size_t)L * nr * sizeof(tern_cuda_attn_row));
    size_t total = o_tab + (size_t)ntab * 4;
    /* The last pass's upload has been read before its staging is rewritten. */
    cuda_graph_abandon(d);
    tern_status st = tern_cuda_sync(d->c);
    if (st) return st;
    d->decode = T == b->n_rows;
    d->prof_n = 0;
    if (d->stats) {
        d->t_begin = tern_now();
        /* A gap over a millisecond is the caller's own work between
         * runs (counted apart, not in the mean). */
        double gap = d->t_end > 0 ? d->t_begin - d->t_end : -1.0;
        if (gap > 1e-3) d->long_gaps[d->decode]++;
        else if (gap >= 0) {
            d->gap_s[d->decode] += gap;
            d->gaps[d->decode]++;
        }
        if ((st = tern_cuda_timer_mark(d->c))) return st;
    }
    if (total > d->stage_cap) {
        void *h;
        if ((st = tern_cuda_host_alloc(d->c, total * 2, &h))) return st;
        tern_cuda_host_free(d->c, d->h_stage);
        d->h_stage = h;
        d->stage_cap = total * 2;
    }
    if ((st = cuda_dbuf_reserve(d->c, &d->stage, total, 0))) return st;
    char *h = d->h_stage, *dv = d->stage.d;
    int32_t *ids = (int32_t *)(h + o_ids), *tok = (int32_t *)(h + o_tok), *want = (int32_t *)(h + o_want);
    int32_t *tab = (int32_t *)(h + o_tab);
    tern_cuda_attn_row *rows = (tern_cuda_attn_row *)(h + o_rows);
    memcpy(ids, b->tokens, (size_t)T * sizeof *ids);
    memset(h + o_zero, 0, (size_t)T * 4);
    int t0 = 0, ri = 0, nt = 0, nw = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int n = b->n_tokens[r], off = tern_kv_offset(p->kv, b->rows[r]);
        for (int i = 0; i < n; i++) {
            int t = t0 + i;
            tok[t] = ri;
            if (b->want ? b->want[t] != 0 : i == n - 1) want[nw++] = t;
        }
        if (n) {
            const int *table = tern_kv_table(p->kv, b->rows[r]);
            int nb = (int)tern_kv_blocks_for(p->kv, off + n);
            memcpy(tab + nt, table, (size_t)nb * sizeof *tab);
            for (int l = 0; l < L; l++) {
                tern_kv_layer *kl = tern_kv_layer_at(p->kv, l);
                tern_kv_view v;
                kl->vt->view(kl, table, off + n, &v);
                rows[(size_t)l * nr + ri] = (tern_cuda_attn_row){(float *)v.k, (float *)v.v,
                                                                 (const int *)(dv + o_tab) + nt, v.block_stride,
                                                                 v.head_stride, v.block_tokens, off + n, n, t0};
            }
            nt += nb;
            ri++;
        }
        t0 += n;
    }
    d->d_ids = (int32_t *)(dv + o_ids);
    d->d_tok_row = (int32_t *)(dv + o_tok);
    d->d_want = (int32_t *)(dv + o_want);
    d->d_zero = (int32_t *)(dv + o_zero);
    d->d_rows = (tern_cuda_attn_row *)(dv + o_rows);
    d->nr = nr;
    /* The attention grid covers max_len rounded up (its blocks past a row's
     * length return at once), so that decode steps share a graph. */
    d->max_len = (max_len + 255) & ~255;
    max_len = d->max_len;
    int hd = c->head_dim;
    /* the per-query attention's split records (T x heads x splits x (hd +
     * 2) floats: gigabytes for a prefill chunk at a long context, which the
     * tiled kernel does not need) */
    if (!attn_tiled(m, p) &&
        ((st = cuda_dbuf_reserve(d->c, &d->part, tern_cuda_attention_tmp_bytes(T, max_len, c->n_heads, hd), 0)) ||
         (st = cuda_dbuf_reserve(d->c, &d->count, tern_cuda_attention_count_bytes(T, c->n_kv_heads), 1))))
        return st;
    if ((st = cuda_dbuf_reserve(d->c, &d->logits, (size_t)(p->n_out > 0 ? p->n_out : 1) * c->vocab * sizeof(float), 0)))
        return st;
    int no = p->n_out > 0 ? p->n_out : 1;
    if (p->sum && (no > d->sum_cap)) {
        void *hs;
        if ((st = tern_cuda_host_alloc(d->c, (size_t)no * 2 * sizeof *d->h_sum, &hs))) return st;
        tern_cuda_host_free(d->c, d->h_sum);
        d->h_sum = hs;
        d->sum_cap = no * 2;
    }
    if (p->sum && ((st = cuda_dbuf_reserve(d->c, &d->sum_tmp, tern_cuda_summary_tmp_bytes(no, c->vocab), 0)) ||
                   (st = cuda_dbuf_reserve(d->c, &d->sum_count, tern_cuda_summary_count_bytes(no), 1)) ||
                   (st = cuda_dbuf_reserve(d->c, &d->sum_out, (size_t)no * sizeof(tern_cuda_lsum), 0))))
        return st;
    if (d->layers[0].bias &&
        (st = cuda_dbuf_reserve(d->c, &d->bias, (size_t)T * (c->n_heads + 2 * c->n_kv_heads) * hd * sizeof(float), 0)))
        return st;
    if ((st = prof(d, PROF_COPY, tern_cuda_upload_async(d->c, dv, h, total)))) return st;
    cuda_chain_begin(m, p);
    st = graph_start(m, p);
    if (d->stats) d->queue_s[d->decode] += tern_now() - d->t_begin;
    return st;
}

static tern_status cuda_embed(tern_model *m, tern_pass *p, float *x)
{
    if (REPLAYING(m)) return TERN_OK;
    return prof(cm(m), PROF_EMBED, tern_cuda_embed(cm(m)->c, cm(m)->d_ids, p->T, m->embed.dev, m->embed.dt, m->cfg.hidden, x));
}

static tern_status cuda_rmsnorm(tern_model *m, const float *x, float *y, int n, int d, const tern_weight *w)
{
    if (REPLAYING(m)) return TERN_OK;
    tern_status st = cuda_chain_flush(m);
    if (st) return st;
    return tern_cuda_rmsnorm(cm(m)->c, x, y, n, d, w->dev, w->dt, m->cfg.rms_eps);
}

static tern_status mm(tern_model *m, const float *x, int M, const tern_weight *w, float *y, int acc)
{
    return tern_cuda_matmul(cm(m)->c, act(m), TERN_CUDA_MM_OWN, x, M, w->cols, w->dev, w->dt, w->rows, y, w->rows,
                            acc, NULL);
}

static tern_status cuda_matmul(tern_model *m, const float *x, int M, const tern_weight *w, float *y)
{
    if (REPLAYING(m)) return TERN_OK;
    tern_status st = cuda_chain_flush(m);
    return st ? st : mm(m, x, M, w, y, 0);
}

/* A one-token pass's product into its chain (backend_cuda_chain.c). */
static tern_status chain_rec(tern_model *m, const float *x, const float *nw, const void *w, const void *wu, int K,
                             int N, float *y, int mode)
{
    tern_cuda_chain_prod pr = {x, nw, m->cfg.rms_eps, w, wu, K, N, y, mode};
    return cuda_chain_add(m, &pr);
}

static tern_status cuda_matmul_add(tern_model *m, const float *x, int M, const tern_weight *w, float *y, float *tmp)
{
    if (REPLAYING(m)) return TERN_OK;
    (void)tmp;
    if (cm(m)->chain_pass && w->dt == TERN_DT_BF16 && tern_cuda_chain_takes(cm(m)->c, w->cols))
        return chain_rec(m, x, NULL, w->dev, NULL, w->cols, w->rows, y, TERN_CUDA_CH_ADD);
    tern_status st = cuda_chain_flush(m);
    if (st) return st;
    return prof(cm(m), w->cols == m->cfg.ffn ? PROF_DOWN : PROF_O, mm(m, x, M, w, y, 1));
}

static tern_status cuda_gate_up(tern_model *m, const tern_mlp *w, const float *x, int M, float *g, float *u)
{
    if (REPLAYING(m)) return TERN_OK;
    (void)u;
    tern_status st = cuda_chain_flush(m);
    if (st) return st;
    return tern_cuda_gate_up(cm(m)->c, act(m), x, M, w->gate.cols, w->gate.dev, w->up.dev, w->gate.dt, w->gate.rows,
                             g);
}

/* The RMSNorms before the q/k/v and gate/up products are folded into them
 * (tern_cuda_matmul_norm) in every pass, so a row's bits never depend on
 * the pass's shape; float32 activations only (TERN_CUDA_ACT=bf16 and
 * TERN_CUDA_FUSE=0 run the norm kernels). The final norm stays a kernel:
 * folded into the head's 151936-row product it cost more than it saved. */
static int folded(const tern_model *m, int which)
{
    return (cm(m)->fuse & which) && act(m) == TERN_CUDA_ACT_F32;
}

static tern_status cuda_norm_gate_up(tern_model *m, int l, const float *x, int M, float *h, float *g, float *u)
{
    if (REPLAYING(m)) return TERN_OK;
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    const tern_mlp *w = &L->mlp;
    if (cm(m)->chain_pass)
        return chain_rec(m, x, cm(m)->layers[l].ffn_nw, w->gate.dev, w->up.dev, c->hidden, w->gate.rows, g,
                         TERN_CUDA_CH_SWIGLU);
    tern_status fs = cuda_chain_flush(m);
    if (fs) return fs;
    if (folded(m, FOLD_GATE_UP))
        return prof(cm(m), PROF_GATE_UP,
                    tern_cuda_gate_up_norm(cm(m)->c, x, M, c->hidden, cm(m)->layers[l].ffn_nw, c->rms_eps, w->gate.dev,
                                           w->up.dev, w->gate.dt, w->gate.rows, g, cm(m)->norm_tmp.d));
    tern_status st = tern_cuda_rmsnorm(cm(m)->c, x, h, M, c->hidden, L->ffn_norm.dev, L->ffn_norm.dt, c->rms_eps);
    return prof(cm(m), PROF_GATE_UP, st ? st : cuda_gate_up(m, w, h, M, g, u));
}

/* qkv is token-major: per token its q heads, k heads, v heads. */
static tern_status cuda_qkv(tern_model *m, tern_pass *p, int l, const float *x, float *h, float *qkv)
{
    if (REPLAYING(m)) return TERN_OK;
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    cuda_model *d = cm(m);
    int ld = (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
    const void *qn = c->qk_norm ? L->q_norm.dev : NULL, *kn = c->qk_norm ? L->k_norm.dev : NULL;
    tern_dtype qkdt = c->qk_norm ? L->q_norm.dt : TERN_DT_F32;
    tern_status st;
    if (d->chain_pass) {
        /* the product into the chain; its prologue when the attention
         * flushes the chain (or inside the attention) */
        d->pend_pro = l + 1;
        return chain_rec(m, x, d->layers[l].attn_nw, d->layers[l].qkv, NULL, c->hidden, ld, qkv, TERN_CUDA_CH_STORE);
    }
    if ((st = cuda_chain_flush(m))) return st;
    if (folded(m, FOLD_QKV)) {
        st = tern_cuda_matmul_norm(d->c, x, p->T, c->hidden, d->layers[l].attn_nw, c->rms_eps, d->layers[l].qkv,
                                   L->wq.dt, ld, qkv, ld, d->norm_tmp.d);
    } else {
        st = tern_cuda_rmsnorm(d->c, x, h, p->T, c->hidden, L->attn_norm.dev, L->attn_norm.dt, c->rms_eps);
        if (!st)
            st = tern_cuda_matmul(d->c, act(m), TERN_CUDA_MM_OWN, h, p->T, c->hidden, d->layers[l].qkv, L->wq.dt, ld,
                                  qkv, ld, 0, NULL);
    }
    if (st) return st;
    if (d->layers[l].bias) {
        /* The bias in every row (a lookup of row 0 of a one-row table, as
         * float32), then added: the CPU's add_bias arithmetic. */
        if ((st = tern_cuda_embed(d->c, d->d_zero, p->T, d->layers[l].bias, L->bq.dt, ld, d->bias.d)) ||
            (st = tern_cuda_add(d->c, qkv, d->bias.d, (long)p->T * ld)))
            return st;
    }
    /* Decode passes leave the norms, rope and KV store to the attention
     * kernel (attn_fused). */
    if (attn_fused(m, p)) return prof(d, PROF_QKV, TERN_OK);
    return prof(d, PROF_QKV,
                tern_cuda_qkv_rope_store(d->c, qkv, ld, p->T, c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, qn,
                                         kn, qkdt, c->rms_eps, d->d_rope, d->d_rows + (size_t)l * d->nr, d->d_tok_row));
}

static tern_status cuda_attention(tern_model *m, tern_pass *p, int l, float *qkv, float *out)
{
    if (REPLAYING(m)) return TERN_OK;
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    const tern_layer *L = &m->layers[l];
    int hd = c->head_dim, ld = (c->n_heads + 2 * c->n_kv_heads) * hd;
    tern_cuda_attn_prologue pro = {c->qk_norm ? L->q_norm.dev : NULL, c->qk_norm ? L->k_norm.dev : NULL,
                                   c->qk_norm ? L->q_norm.dt : TERN_DT_F32, c->rms_eps, c->rope_dim, d->d_rope};
    const tern_cuda_attn_row *rows = d->d_rows + (size_t)l * d->nr;
    float scale = 1.0f / sqrtf((float)hd);
    tern_status st = cuda_chain_flush(m);
    if (st) return st;
    if (d->pend_pro == l + 1 && !attn_fused(m, p) &&
        (st = tern_cuda_qkv_rope_store(d->c, qkv, ld, p->T, c->n_heads, c->n_kv_heads, hd, c->rope_dim, pro.d_qnorm,
                                       pro.d_knorm, pro.wdt, c->rms_eps, d->d_rope, rows, d->d_tok_row)))
        return st;
    d->pend_pro = 0;
    if (attn_tiled(m, p))
        return prof(d, PROF_ATTN,
                    tern_cuda_attention_tiled(d->c, rows, d->d_tok_row, p->T, d->max_len, c->n_heads, c->n_kv_heads, hd,
                                              scale, qkv, ld, out));
    return prof(d, PROF_ATTN,
                tern_cuda_attention(d->c, rows, d->d_tok_row, p->T, d->max_len, c->n_heads, c->n_kv_heads, hd, scale,
                                    qkv, ld, out, d->part.d, d->count.d, attn_fused(m, p) ? &pro : NULL));
}

/* Copies back the logits rows that need says (all when need is NULL), in
 * runs of consecutive rows. */
static tern_status download_rows(cuda_model *d, float *logits, const float *d_logits, int n, int V, const uint8_t *need)
{
    size_t row = (size_t)V * sizeof(float);
    for (int i = 0; i < n;) {
        if (need && !need[i]) {
            i++;
            continue;
        }
        int j = i + 1;
        while (j < n && (!need || need[j])) j++;
        tern_status st = tern_cuda_download_async(d->c, logits + (size_t)i * V, d_logits + (size_t)i * V, (size_t)(j - i) * row);
        if (st) return st;
        i = j;
    }
    return TERN_OK;
}

static tern_status cuda_head(tern_model *m, tern_pass *p, const float *x, float *h, float *logits, float *hidden)
{
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    int n = p->n_out, H = c->hidden, V = c->vocab;
    tern_status st = d->gmode == G_REPLAY ? TERN_OK : cuda_chain_flush(m);
    if (!st) st = graph_finish(d);
    else cuda_graph_abandon(d);
    int want_lm = logits || p->sum;
    if (st) {
        /* nothing more is queued */
    } else if (n == 1 && p->T == 1) {
        /* One token, one output: x itself is the wanted row (the same bits
         * as its gathered copy). */
        st = tern_cuda_rmsnorm(d->c, x, h, 1, H, m->final_norm.dev, m->final_norm.dt, c->rms_eps);
        if (!st && hidden) st = tern_cuda_download_async(d->c, hidden, h, (size_t)H * sizeof(float));
        if (!st && want_lm) st = mm(m, h, 1, &m->lm_head, d->logits.d, 0);
    } else {
        /* The gather of the wanted rows is an embedding lookup in x. */
        st = tern_cuda_embed(d->c, d->d_want, n, x, TERN_DT_F32, H, h);
        if (!st) st = tern_cuda_rmsnorm(d->c, h, h, n, H, m->final_norm.dev, m->final_norm.dt, c->rms_eps);
        if (!st && hidden) st = tern_cuda_download_async(d->c, hidden, h, (size_t)n * H * sizeof(float));
        if (!st && want_lm) st = mm(m, h, n, &m->lm_head, d->logits.d, 0);
    }
    st = prof(d, PROF_HEAD, st);
    if (!st && p->sum) {
        st = prof(d, PROF_SUMMARY, tern_cuda_summary(d->c, d->logits.d, V, n, V, d->sum_tmp.d, d->sum_count.d, d->sum_out.d));
        if (!st) st = tern_cuda_download_async(d->c, d->h_sum, d->sum_out.d, (size_t)n * sizeof *d->h_sum);
    }
    if (!st && logits) st = download_rows(d, logits, d->logits.d, n, V, p->need);
    if (!st) st = cuda_chain_queue_check(m);
    st = prof(d, PROF_COPY, st);
    tern_status ss = tern_cuda_sync(d->c);
    if (!st && !ss) st = cuda_chain_result(m);
    if (!st && !ss && d->prof && d->prof_n > 1) {
        for (int k = 1; k < d->prof_n; k++) {
            float ms = 0.0f;
            if (!tern_cuda_prof_elapsed(d->c, k - 1, k, &ms)) d->prof_ms[d->decode][d->prof_cls[k]] += ms;
        }
        d->prof_passes[d->decode]++;
    }
    if (!st && !ss && p->sum)
        for (int i = 0; i < n; i++) p->sum[i] = (tern_logit_summary){d->h_sum[i].lse, d->h_sum[i].argmax, d->h_sum[i].lp};
    if (!st && !ss && d->stats) {
        float ms = 0.0f;
        tern_cuda_timer_elapsed(d->c, &ms);
        d->passes[d->decode]++;
        d->chain_passes[d->decode] += d->chain_pass;
        d->t_end = tern_now();
        d->host_s[d->decode] += d->t_end - d->t_begin;
        d->dev_s[d->decode] += ms / 1e3;
    }
    return st ? st : ss;
}

#define CUDA_VT(sum)                                                                                        \
    {.name = "cuda", .summarizes = sum, .pass_bytes = cuda_pass_bytes, .workspace = cuda_workspace,                  \
     .begin = cuda_begin, .embed = cuda_embed, .rmsnorm = cuda_rmsnorm, .matmul = cuda_matmul,                        \
     .matmul_add = cuda_matmul_add, .gate_up = cuda_gate_up, .norm_gate_up = cuda_norm_gate_up, .qkv = cuda_qkv,     \
     .attention = cuda_attention, .head = cuda_head}
const tern_backend_vt tern_backend_cuda = CUDA_VT(1);
const tern_backend_vt tern_backend_cuda_no_summary = CUDA_VT(0);

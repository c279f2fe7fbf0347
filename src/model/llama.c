/* Forward pass of the llama family (llama, qwen2, qwen3, qwen3_moe) over a
 * batch of rows. Per layer, for all new tokens of all rows at once:
 *
 *   h = rmsnorm(x) ; q,k,v = h·Wq, h·Wk, h·Wv (+ biases)
 *   q,k = rmsnorm_per_head(q,k) (qwen3) ; q,k = rope(q,k, position)
 *   append k,v to each row's KV ; a = softmax(q·K^T / sqrt(hd)) · V (causal)
 *   x += a·Wo
 *   h = rmsnorm(x) ; x += down(silu(gate(h)) * up(h))     (dense)
 *               or x += sum_top-k p_e · expert_e(h)        (moe)
 *
 * Matrix products are row-independent (see matmul.h) and attention is per
 * row, so a sequence's logits do not depend on what else is in the batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "core/exec.h"
#include "core/failpoint.h"
#include "model/forward.h"
#include "model/model_internal.h"

/* Activation buffers of one pass, laid out in the execution context's
 * workspace (shared with any other model on the same context). */
typedef struct {
    int T;                 /* new tokens in the current batch */
    int *pos;              /* [T] absolute position of each token */
    float *rope;           /* [T, rope_dim] cos and sin per token, shared by all layers */
    float *x, *h;          /* [T, H] residual stream, normed copy */
    float *q, *k, *v, *att;/* [T, qd], [T, kvd], [T, kvd], [T, qd] */
    float *g, *u;          /* [T, max(ffn, moe_ffn)] */
    float *moe_y;          /* moe: [T, top_k, H] */
    float *router;         /* moe: [T, n_experts] */
    int *sel;              /* moe: [T, top_k] expert ids */
    float *sel_w;          /* moe: [T, top_k] weights */
    int *gather;           /* moe: [T] slots routed to one expert */
    float *gx;             /* moe: [T, H] gathered inputs */
} scratch;

/* Places a buffer of n elements of size es at *off in base (NULL base: only
 * counts); every buffer starts on a 64-byte boundary. */
static void *carve(char *base, size_t *off, size_t n, size_t es)
{
    void *p = base ? base + *off : NULL;
    *off += (n * es + 63) & ~(size_t)63;
    return p;
}

/* Lays the buffers for T tokens out from base; returns the bytes they take. */
static size_t ws_layout(const tern_model_config *c, int T, char *base, scratch *s)
{
    size_t t = (size_t)T, H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t f = (size_t)c->ffn > (size_t)c->moe_ffn ? (size_t)c->ffn : (size_t)c->moe_ffn;
    size_t off = 0;
    memset(s, 0, sizeof *s);
    s->T = T;
    s->pos = carve(base, &off, t, sizeof(int));
    s->rope = carve(base, &off, t * (size_t)c->rope_dim, sizeof(float));
    s->x = carve(base, &off, t * H, sizeof(float));
    s->h = carve(base, &off, t * H, sizeof(float));
    s->q = carve(base, &off, t * qd, sizeof(float));
    s->k = carve(base, &off, t * kvd, sizeof(float));
    s->v = carve(base, &off, t * kvd, sizeof(float));
    s->att = carve(base, &off, t * qd, sizeof(float));
    s->g = carve(base, &off, t * f, sizeof(float));
    s->u = carve(base, &off, t * f, sizeof(float));
    if (c->arch == TERN_ARCH_QWEN3_MOE) {
        /* A token picks distinct experts, so one expert gets at most T rows. */
        size_t k = (size_t)c->n_experts_per_tok;
        s->moe_y = carve(base, &off, t * k * H, sizeof(float));
        s->router = carve(base, &off, t * (size_t)c->n_experts, sizeof(float));
        s->sel = carve(base, &off, t * k, sizeof(int));
        s->sel_w = carve(base, &off, t * k, sizeof(float));
        s->gather = carve(base, &off, t, sizeof(int));
        s->gx = carve(base, &off, t * H, sizeof(float));
    }
    return off;
}

/* The pass's buffers for T tokens in the context's workspace (caller holds
 * the context's lock). */
static tern_status ws_get(tern_model *m, int T, scratch *s)
{
    void *base;
    tern_status st = tern_exec_scratch(m->exec, ws_layout(&m->cfg, T, NULL, s), &base);
    if (st) return st;
    ws_layout(&m->cfg, T, base, s);
    return TERN_OK;
}

static tern_status matmul(tern_model *m, const float *x, int M, const tern_weight *w, float *y)
{
    tern_mm_out out = {w->data, w->dt, w->rows, y, w->layout};
    return tern_cpu_matmul_multi(m->exec->pool, m->act_mode, x, M, w->cols, &out, 1);
}

static tern_status add_bias(float *y, int M, const tern_weight *b)
{
    if (!b->data) return TERN_OK;
    float *bias = tern_fp_malloc(TERN_FAILPOINT_WORKSPACE, (size_t)b->cols * sizeof *bias);
    if (!bias) return tern_error(TERN_E_NOMEM, "forward: out of memory");
    tern_cpu_to_f32(b->data, b->dt, b->cols, bias);
    for (int r = 0; r < M; r++) tern_cpu_add(y + (long)r * b->cols, bias, b->cols);
    free(bias);
    return TERN_OK;
}

static tern_status mlp(tern_model *m, const tern_mlp *w, const float *h, int M, float *g, float *u, float *out)
{
    tern_mm_out gu[2] = {{w->gate.data, w->gate.dt, w->gate.rows, g, w->gate.layout},
                         {w->up.data, w->up.dt, w->up.rows, u, w->up.layout}};
    tern_status st = tern_cpu_matmul_multi(m->exec->pool, m->act_mode, h, M, w->gate.cols, gu, 2);
    if (st) return st;
    tern_cpu_silu_mul(g, u, (long)M * w->gate.rows);
    return matmul(m, g, M, &w->down, out);
}

/* Top-k routing: softmax over experts in float32, keep the k largest (ties
 * to the lower id), optionally renormalise, then run each expert once over
 * the tokens routed to it and add the k outputs per token in rank order. */
static tern_status moe(tern_model *m, const tern_layer *L, scratch *s)
{
    const tern_model_config *c = &m->cfg;
    int T = s->T, E = c->n_experts, K = c->n_experts_per_tok, H = c->hidden;
    tern_status st = matmul(m, s->h, T, &L->router, s->router);
    if (st) return st;
    for (int t = 0; t < T; t++) {
        float *p = s->router + (long)t * E;
        tern_cpu_softmax(p, E);
        int *sel = s->sel + (long)t * K;
        float *w = s->sel_w + (long)t * K, sum = 0.0f;
        for (int r = 0; r < K; r++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < r; q++) taken |= sel[q] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[r] = best;
            w[r] = p[best];
            sum += p[best];
        }
        if (c->norm_topk_prob)
            for (int r = 0; r < K; r++) w[r] /= sum;
    }
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < K; r++)
                if (s->sel[(long)t * K + r] == e) {
                    s->gather[n] = t * K + r;
                    memcpy(s->gx + (long)n * H, s->h + (long)t * H, (size_t)H * sizeof(float));
                    n++;
                }
        if (!n) continue;
        /* The expert's outputs land in gx's rows, then move to their slot. */
        if ((st = mlp(m, &L->experts[e], s->gx, n, s->g, s->u, s->gx))) return st;
        for (int i = 0; i < n; i++)
            memcpy(s->moe_y + (long)s->gather[i] * H, s->gx + (long)i * H, (size_t)H * sizeof(float));
    }
    for (int t = 0; t < T; t++)
        for (int r = 0; r < K; r++) {
            const float *y = s->moe_y + ((long)t * K + r) * H;
            float w = s->sel_w[(long)t * K + r];
            float *x = s->x + (long)t * H;
            for (int i = 0; i < H; i++) x[i] += w * y[i];
        }
    return TERN_OK;
}

int tern_batch_n_out(const tern_batch *b)
{
    int n = 0, t = 0;
    for (int r = 0; r < b->n_rows; r++) {
        if (b->want) {
            for (int i = 0; i < b->n_tokens[r]; i++) n += b->want[t + i] != 0;
        } else {
            n += b->n_tokens[r] > 0;
        }
        t += b->n_tokens[r];
    }
    return n;
}

static tern_status check_batch(const tern_model *m, tern_kv *kv, const tern_batch *b, int *T)
{
    *T = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int row = b->rows[r], n = b->n_tokens[r];
        if (!tern_kv_row_valid(kv, row)) return tern_error(TERN_E_INVALID, "forward: KV row %d is not in use", row);
        for (int q = 0; q < r; q++)
            if (b->rows[q] == row) return tern_error(TERN_E_INVALID, "forward: KV row %d appears twice", row);
        if (n < 0) return tern_error(TERN_E_INVALID, "forward: negative token count");
        for (int i = 0; i < n; i++) {
            int32_t id = b->tokens[*T + i];
            if (id < 0 || id >= m->cfg.vocab)
                return tern_error(TERN_E_RANGE, "forward: token id %d outside the vocabulary (%d)", id, m->cfg.vocab);
        }
        *T += n;
    }
    return TERN_OK;
}


static tern_status attention_block(tern_model *m, tern_kv *kv, const tern_batch *b, int l, scratch *s)
{
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    int T = s->T, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    tern_status st;
    tern_cpu_rmsnorm(s->x, s->h, T, c->hidden, L->attn_norm.data, L->attn_norm.dt, c->rms_eps);
    tern_mm_out qkv[3] = {{L->wq.data, L->wq.dt, L->wq.rows, s->q, L->wq.layout},
                          {L->wk.data, L->wk.dt, L->wk.rows, s->k, L->wk.layout},
                          {L->wv.data, L->wv.dt, L->wv.rows, s->v, L->wv.layout}};
    if ((st = tern_cpu_matmul_multi(m->exec->pool, m->act_mode, s->h, T, c->hidden, qkv, 3))) return st;
    if ((st = add_bias(s->q, T, &L->bq)) || (st = add_bias(s->k, T, &L->bk)) || (st = add_bias(s->v, T, &L->bv)))
        return st;
    if (c->qk_norm) {
        tern_cpu_rmsnorm(s->q, s->q, T * c->n_heads, hd, L->q_norm.data, L->q_norm.dt, c->rms_eps);
        tern_cpu_rmsnorm(s->k, s->k, T * c->n_kv_heads, hd, L->k_norm.data, L->k_norm.dt, c->rms_eps);
    }
    tern_cpu_rope(s->q, T, c->n_heads, hd, c->rope_dim, s->rope);
    tern_cpu_rope(s->k, T, c->n_kv_heads, hd, c->rope_dim, s->rope);

    /* The new keys and values go into the rows' blocks past their current
     * length (made room for by tern_kv_grow, this row's alone), so nothing
     * any reader sees changes until the pass commits the lengths. */
    tern_kv_layer *kl = tern_kv_layer_at(kv, l);
    tern_attn_row rows[b->n_rows > 0 ? b->n_rows : 1];
    int t0 = 0, nr = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int n = b->n_tokens[r], off = tern_kv_offset(kv, b->rows[r]);
        if (n) {
            const int *table = tern_kv_table(kv, b->rows[r]);
            kl->vt->write(kl, table, off, n, s->k + (long)t0 * kvd, s->v + (long)t0 * kvd);
            rows[nr].q = s->q + (long)t0 * qd;
            rows[nr].out = s->att + (long)t0 * qd;
            rows[nr].n_q = n;
            kl->vt->view(kl, table, off + n, &rows[nr].kv);
            nr++;
        }
        t0 += n;
    }
    st = tern_cpu_attention(m->exec->pool, rows, nr, c->n_heads, c->n_kv_heads, hd, 1.0f / sqrtf((float)hd));
    if (!st) st = matmul(m, s->att, T, &L->wo, s->h);
    if (st) return st;
    tern_cpu_add(s->x, s->h, (long)T * c->hidden);
    return TERN_OK;
}

static tern_status ffn_block(tern_model *m, int l, scratch *s)
{
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    tern_cpu_rmsnorm(s->x, s->h, s->T, c->hidden, L->ffn_norm.data, L->ffn_norm.dt, c->rms_eps);
    if (L->is_moe) return moe(m, L, s);
    tern_status st = mlp(m, &L->mlp, s->h, s->T, s->g, s->u, s->h);
    if (st) return st;
    tern_cpu_add(s->x, s->h, (long)s->T * c->hidden);
    return TERN_OK;
}

static tern_status head(tern_model *m, const tern_batch *b, scratch *s, float *logits, float *hidden)
{
    const tern_model_config *c = &m->cfg;
    int H = c->hidden, n = 0, t = 0;
    /* Gather the wanted positions into h, then norm and project them. */
    for (int r = 0; r < b->n_rows; r++) {
        for (int i = 0; i < b->n_tokens[r]; i++, t++) {
            int want = b->want ? b->want[t] != 0 : i == b->n_tokens[r] - 1;
            if (want) memcpy(s->h + (long)n++ * H, s->x + (long)t * H, (size_t)H * sizeof(float));
        }
    }
    tern_cpu_rmsnorm(s->h, s->h, n, H, m->final_norm.data, m->final_norm.dt, c->rms_eps);
    if (hidden) memcpy(hidden, s->h, (size_t)n * H * sizeof(float));
    if (logits) return matmul(m, s->h, n, &m->lm_head, logits);
    return TERN_OK;
}

tern_status tern_forward(tern_model *m, tern_kv *kv, const tern_batch *b, float *logits, float *hidden)
{
    const tern_model_config *c = &m->cfg;
    int T;
    tern_status st = check_batch(m, kv, b, &T);
    if (st || T == 0) return st;
    /* Room for the new tokens first: fallible, but changes nothing visible. */
    if ((st = tern_kv_grow(kv, b->rows, b->n_tokens, b->n_rows))) return st;
    tern_exec_lock(m->exec);
    scratch ws, *s = &ws;
    if ((st = ws_get(m, T, s))) {
        tern_exec_unlock(m->exec);
        return st;
    }
    int t = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int off = tern_kv_offset(kv, b->rows[r]);
        for (int i = 0; i < b->n_tokens[r]; i++, t++) {
            s->pos[t] = off + i;
            tern_weight_row_f32(&m->embed, b->tokens[t], s->x + (long)t * c->hidden);
        }
    }
    tern_cpu_rope_table(T, c->rope_dim, s->pos, c->inv_freq, c->rope_attn_factor, s->rope);
    for (int l = 0; l < c->n_layers && !st; l++) {
        if (!(st = attention_block(m, kv, b, l, s))) st = ffn_block(m, l, s);
    }
    if (!st) st = head(m, b, s, logits, hidden);
    /* Lengths move only when the whole pass succeeded: a failed pass leaves
     * every row as it was (what it wrote lies past the lengths). */
    if (!st)
        for (int r = 0; r < b->n_rows; r++) tern_kv_advance(kv, b->rows[r], b->n_tokens[r]);
    tern_exec_unlock(m->exec);
    return st;
}

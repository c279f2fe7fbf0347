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
 * Every op goes through the model's backend (backend.h: CPU or CUDA), whose
 * matrix products are row-independent and whose attention is per row, so a
 * sequence's logits do not depend on what else is in the batch. */
#include <string.h>

#include "backend/cpu/ops.h"
#include "core/exec.h"
#include "model/backend.h"

/* Activation buffers of one pass, laid out in the backend's workspace
 * (shared with any other model on the same execution context): host memory
 * on the CPU, device memory on a GPU. */
typedef struct {
    int T;                 /* new tokens in the current batch */
    void *pass;            /* the backend's per-pass area */
    float *x, *h;          /* [T, H] residual stream, normed copy */
    float *qkv, *att;      /* [T, qd + 2 kvd] (the backend's layout), [T, qd] */
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
static size_t ws_layout(const tern_model *m, int T, char *base, scratch *s)
{
    const tern_model_config *c = &m->cfg;
    size_t t = (size_t)T, H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t f = (size_t)c->ffn > (size_t)c->moe_ffn ? (size_t)c->ffn : (size_t)c->moe_ffn;
    size_t off = 0;
    memset(s, 0, sizeof *s);
    s->T = T;
    s->pass = carve(base, &off, m->bk->pass_bytes(m, T), 1);
    s->x = carve(base, &off, t * H, sizeof(float));
    s->h = carve(base, &off, t * H, sizeof(float));
    s->qkv = carve(base, &off, t * (qd + 2 * kvd), sizeof(float));
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

/* The pass's buffers for T tokens in the backend's workspace (caller holds
 * the context's lock). */
static tern_status ws_get(tern_model *m, int T, scratch *s)
{
    void *base;
    tern_status st = m->bk->workspace(m, ws_layout(m, T, NULL, s), &base);
    if (st) return st;
    ws_layout(m, T, base, s);
    return TERN_OK;
}

static tern_status mlp(tern_model *m, const tern_mlp *w, const float *h, int M, float *g, float *u, float *out)
{
    tern_status st = m->bk->gate_up(m, w, h, M, g, u);
    return st ? st : m->bk->matmul(m, g, M, &w->down, out);
}

/* Top-k routing: softmax over experts in float32, keep the k largest (ties
 * to the lower id), optionally renormalise, then run each expert once over
 * the tokens routed to it and add the k outputs per token in rank order.
 * The routing reads the activations on the host: only host backends run
 * it (the CUDA backend refuses MoE checkpoints at load). */
static tern_status moe(tern_model *m, const tern_layer *L, scratch *s)
{
    const tern_model_config *c = &m->cfg;
    int T = s->T, E = c->n_experts, K = c->n_experts_per_tok, H = c->hidden;
    tern_status st = m->bk->matmul(m, s->h, T, &L->router, s->router);
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


static tern_status attention_block(tern_model *m, tern_pass *p, int l, scratch *s)
{
    const tern_backend_vt *bk = m->bk;
    const tern_layer *L = &m->layers[l];
    tern_status st = bk->qkv(m, p, l, s->x, s->h, s->qkv);
    if (!st) st = bk->attention(m, p, l, s->qkv, s->att);
    if (!st) st = bk->matmul_add(m, s->att, s->T, &L->wo, s->x, s->h);
    return st;
}

static tern_status ffn_block(tern_model *m, int l, scratch *s)
{
    const tern_backend_vt *bk = m->bk;
    const tern_layer *L = &m->layers[l];
    tern_status st;
    if (L->is_moe) {
        if ((st = bk->rmsnorm(m, s->x, s->h, s->T, m->cfg.hidden, &L->ffn_norm))) return st;
        return moe(m, L, s);
    }
    if ((st = bk->norm_gate_up(m, l, s->x, s->T, s->h, s->g, s->u))) return st;
    return bk->matmul_add(m, s->g, s->T, &L->mlp.down, s->x, s->h);
}

int tern_model_summarizes(const tern_model *m) { return m->bk->summarizes; }

tern_status tern_forward(tern_model *m, tern_kv *kv, const tern_batch *b, float *logits, float *hidden)
{
    return tern_forward_ex(m, kv, b, logits, hidden, NULL, NULL);
}

tern_status tern_forward_ex(tern_model *m, tern_kv *kv, const tern_batch *b, float *logits, float *hidden,
                            const uint8_t *need, tern_logit_summary *summary)
{
    const tern_model_config *c = &m->cfg;
    int T;
    if ((need || summary) && !m->bk->summarizes)
        return tern_error(TERN_E_UNSUPPORTED, "forward: the %s backend computes no sampling summaries", m->bk->name);
    if (need && !summary) return tern_error(TERN_E_INVALID, "forward: need without summary");
    tern_status st = check_batch(m, kv, b, &T);
    if (st || T == 0) return st;
    /* Room for the new tokens first: fallible, but changes nothing visible. */
    if ((st = tern_kv_grow(kv, b->rows, b->n_tokens, b->n_rows))) return st;
    tern_exec_lock(m->exec);
    scratch ws, *s = &ws;
    tern_pass p = {kv, b, T, tern_batch_n_out(b), NULL, need, summary};
    if (!(st = ws_get(m, T, s))) {
        p.host = s->pass;
        st = m->bk->begin(m, &p);
    }
    if (!st) st = m->bk->embed(m, &p, s->x);
    for (int l = 0; l < c->n_layers && !st; l++) {
        if (!(st = attention_block(m, &p, l, s))) st = ffn_block(m, l, s);
    }
    if (!st) st = m->bk->head(m, &p, s->x, s->h, logits, hidden);
    /* Lengths move only when the whole pass succeeded: a failed pass leaves
     * every row as it was (what it wrote lies past the lengths). */
    if (!st)
        for (int r = 0; r < b->n_rows; r++) tern_kv_advance(kv, b->rows[r], b->n_tokens[r]);
    tern_exec_unlock(m->exec);
    return st;
}

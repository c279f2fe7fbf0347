/* The CPU backend of the family forward (backend.h): the kernels of
 * src/backend/cpu on host memory, run on the execution context's threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "core/exec.h"
#include "core/failpoint.h"
#include "model/backend.h"

/* The per-pass area: positions and the rope table, shared by all layers. */
typedef struct {
    int *pos;       /* [T] absolute position of each token */
    float *rope;    /* [T, rope_dim] cos and sin per token */
} cpu_pass;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t cpu_pass_bytes(const tern_model *m, int T)
{
    return align64((size_t)T * sizeof(int)) + align64((size_t)T * (size_t)m->cfg.rope_dim * sizeof(float));
}

static cpu_pass cpu_pass_at(const tern_model *m, const tern_pass *p)
{
    cpu_pass c;
    c.pos = p->host;
    c.rope = (float *)((char *)p->host + align64((size_t)p->T * sizeof(int)));
    (void)m;
    return c;
}

static tern_status cpu_workspace(tern_model *m, size_t bytes, void **out)
{
    return tern_exec_scratch(m->exec, bytes, out);
}

static tern_status cpu_begin(tern_model *m, tern_pass *p)
{
    const tern_model_config *c = &m->cfg;
    cpu_pass cp = cpu_pass_at(m, p);
    int t = 0;
    for (int r = 0; r < p->b->n_rows; r++) {
        int off = tern_kv_offset(p->kv, p->b->rows[r]);
        for (int i = 0; i < p->b->n_tokens[r]; i++, t++) cp.pos[t] = off + i;
    }
    tern_cpu_rope_table(p->T, c->rope_dim, cp.pos, c->inv_freq, c->rope_attn_factor, cp.rope);
    return TERN_OK;
}

static tern_status cpu_embed(tern_model *m, tern_pass *p, float *x)
{
    for (int t = 0; t < p->T; t++) tern_weight_row_f32(&m->embed, p->b->tokens[t], x + (long)t * m->cfg.hidden);
    return TERN_OK;
}

static tern_status cpu_rmsnorm(tern_model *m, const float *x, float *y, int n, int d, const tern_weight *w)
{
    tern_cpu_rmsnorm(x, y, n, d, w->data, w->dt, m->cfg.rms_eps);
    return TERN_OK;
}

static tern_status cpu_matmul(tern_model *m, const float *x, int M, const tern_weight *w, float *y)
{
    tern_mm_out out = {w->data, w->dt, w->rows, y, w->layout};
    return tern_cpu_matmul_multi(m->exec->pool, m->act_mode, x, M, w->cols, &out, 1);
}

static tern_status cpu_matmul_add(tern_model *m, const float *x, int M, const tern_weight *w, float *y, float *tmp)
{
    tern_status st = cpu_matmul(m, x, M, w, tmp);
    if (st) return st;
    tern_cpu_add(y, tmp, (long)M * w->rows);
    return TERN_OK;
}

static tern_status cpu_gate_up(tern_model *m, const tern_mlp *w, const float *x, int M, float *g, float *u)
{
    tern_mm_out gu[2] = {{w->gate.data, w->gate.dt, w->gate.rows, g, w->gate.layout},
                         {w->up.data, w->up.dt, w->up.rows, u, w->up.layout}};
    tern_status st = tern_cpu_matmul_multi(m->exec->pool, m->act_mode, x, M, w->gate.cols, gu, 2);
    if (st) return st;
    tern_cpu_silu_mul(g, u, (long)M * w->gate.rows);
    return TERN_OK;
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

static tern_status cpu_norm_gate_up(tern_model *m, int l, const float *x, int M, float *h, float *g, float *u)
{
    const tern_layer *L = &m->layers[l];
    tern_cpu_rmsnorm(x, h, M, m->cfg.hidden, L->ffn_norm.data, L->ffn_norm.dt, m->cfg.rms_eps);
    return cpu_gate_up(m, &L->mlp, h, M, g, u);
}

/* qkv holds q [T, qd], then k [T, kvd], then v [T, kvd]. */
static tern_status cpu_qkv(tern_model *m, tern_pass *p, int l, const float *x, float *h, float *qkv)
{
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    tern_cpu_rmsnorm(x, h, p->T, c->hidden, L->attn_norm.data, L->attn_norm.dt, c->rms_eps);
    int T = p->T, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    float *q = qkv, *k = qkv + (long)T * qd, *v = k + (long)T * kvd;
    cpu_pass cp = cpu_pass_at(m, p);
    tern_mm_out outs[3] = {{L->wq.data, L->wq.dt, L->wq.rows, q, L->wq.layout},
                           {L->wk.data, L->wk.dt, L->wk.rows, k, L->wk.layout},
                           {L->wv.data, L->wv.dt, L->wv.rows, v, L->wv.layout}};
    tern_status st = tern_cpu_matmul_multi(m->exec->pool, m->act_mode, h, T, c->hidden, outs, 3);
    if (st) return st;
    if ((st = add_bias(q, T, &L->bq)) || (st = add_bias(k, T, &L->bk)) || (st = add_bias(v, T, &L->bv))) return st;
    if (c->qk_norm) {
        tern_cpu_rmsnorm(q, q, T * c->n_heads, hd, L->q_norm.data, L->q_norm.dt, c->rms_eps);
        tern_cpu_rmsnorm(k, k, T * c->n_kv_heads, hd, L->k_norm.data, L->k_norm.dt, c->rms_eps);
    }
    tern_cpu_rope(q, T, c->n_heads, hd, c->rope_dim, cp.rope);
    tern_cpu_rope(k, T, c->n_kv_heads, hd, c->rope_dim, cp.rope);
    /* The new keys and values go into the rows' blocks past their current
     * length (made room for by tern_kv_grow, this row's alone), so nothing
     * any reader sees changes until the pass commits the lengths. */
    tern_kv_layer *kl = tern_kv_layer_at(p->kv, l);
    int t0 = 0;
    for (int r = 0; r < p->b->n_rows; r++) {
        int n = p->b->n_tokens[r];
        if (n) {
            const int *table = tern_kv_table(p->kv, p->b->rows[r]);
            kl->vt->write(kl, table, tern_kv_offset(p->kv, p->b->rows[r]), n, k + (long)t0 * kvd,
                          v + (long)t0 * kvd);
        }
        t0 += n;
    }
    return TERN_OK;
}

static tern_status cpu_attention(tern_model *m, tern_pass *p, int l, float *qkv, float *out)
{
    const tern_model_config *c = &m->cfg;
    int hd = c->head_dim, qd = c->n_heads * hd;
    tern_kv_layer *kl = tern_kv_layer_at(p->kv, l);
    const tern_batch *b = p->b;
    tern_attn_row rows[b->n_rows > 0 ? b->n_rows : 1];
    int t0 = 0, nr = 0;
    for (int r = 0; r < b->n_rows; r++) {
        int n = b->n_tokens[r];
        if (n) {
            rows[nr].q = qkv + (long)t0 * qd;
            rows[nr].out = out + (long)t0 * qd;
            rows[nr].n_q = n;
            kl->vt->view(kl, tern_kv_table(p->kv, b->rows[r]), tern_kv_offset(p->kv, b->rows[r]) + n, &rows[nr].kv);
            nr++;
        }
        t0 += n;
    }
    return tern_cpu_attention(m->exec->pool, rows, nr, c->n_heads, c->n_kv_heads, hd, 1.0f / sqrtf((float)hd));
}

static tern_status cpu_head(tern_model *m, tern_pass *p, const float *x, float *h, float *logits, float *hidden)
{
    const tern_model_config *c = &m->cfg;
    const tern_batch *b = p->b;
    int H = c->hidden, n = 0, t = 0;
    for (int r = 0; r < b->n_rows; r++) {
        for (int i = 0; i < b->n_tokens[r]; i++, t++) {
            int want = b->want ? b->want[t] != 0 : i == b->n_tokens[r] - 1;
            if (want) memcpy(h + (long)n++ * H, x + (long)t * H, (size_t)H * sizeof(float));
        }
    }
    tern_cpu_rmsnorm(h, h, n, H, m->final_norm.data, m->final_norm.dt, c->rms_eps);
    if (hidden) memcpy(hidden, h, (size_t)n * H * sizeof(float));
    if (logits) return cpu_matmul(m, h, n, &m->lm_head, logits);
    return TERN_OK;
}

const tern_backend_vt tern_backend_cpu = {
    .name = "cpu",
    .summarizes = 0,
    .pass_bytes = cpu_pass_bytes,
    .workspace = cpu_workspace,
    .begin = cpu_begin,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .matmul_add = cpu_matmul_add,
    .gate_up = cpu_gate_up,
    .norm_gate_up = cpu_norm_gate_up,
    .qkv = cpu_qkv,
    .attention = cpu_attention,
    .head = cpu_head,
};

/* Tensor names of the llama / qwen2 / qwen3 / qwen3_moe checkpoints and the
 * shapes the config implies for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

static tern_status bind(tern_model *m, tern_weight *w, const char *name, int rows, int cols, int optional)
{
    const tern_tensor *t;
    /* "<module>.weight" with "<module>.scales" beside it: MLX quantized */
    size_t nl = strlen(name);
    if (rows > 1 && nl > 7 && !strcmp(name + nl - 7, ".weight")) {
        char module[512], sc[520];
        snprintf(module, sizeof module, "%.*s", (int)(nl - 7), name);
        snprintf(sc, sizeof sc, "%s.scales", module);
        if (tern_tensors_find(m->tensors, sc)) return tern_weight_bind_quant(m, w, module, rows, cols);
    }
    int64_t dims[2] = {rows, cols};
    int ndim = rows == 1 ? 1 : 2;
    if (rows == 1) dims[0] = cols;
    if (optional && !tern_tensors_find(m->tensors, name)) {
        *w = (tern_weight){NULL, TERN_DT_F32, 0, 0, TERN_WL_ROWS, NULL};
        return TERN_OK;
    }
    tern_status st = tern_tensors_expect(m->tensors, name, ndim, dims, &t);
    if (st) return tern_error_wrap(st, "%s", m->dir);
    *w = (tern_weight){t->data, t->dtype, rows, cols, TERN_WL_ROWS, NULL};
    m->weight_bytes += t->nbytes;
    return TERN_OK;
}

static tern_status bind_mlp(tern_model *m, tern_mlp *mlp, const char *prefix, int ffn)
{
    char n[512];
    int H = m->cfg.hidden;
    tern_status st;
    snprintf(n, sizeof n, "%s.gate_proj.weight", prefix);
    if ((st = bind(m, &mlp->gate, n, ffn, H, 0))) return st;
    snprintf(n, sizeof n, "%s.up_proj.weight", prefix);
    if ((st = bind(m, &mlp->up, n, ffn, H, 0))) return st;
    snprintf(n, sizeof n, "%s.down_proj.weight", prefix);
    return bind(m, &mlp->down, n, H, ffn, 0);
}

/* mlx-lm's stacked experts: model.layers.N.mlp.switch_mlp.{gate,up,down}_proj
 * of shape [experts, rows, cols] (float or quantized), one slice per expert. */
static tern_status bind_switch(tern_model *m, tern_layer *L, const char *p)
{
    const tern_model_config *c = &m->cfg;
    static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int i = 0; i < 3; i++) {
        char module[512], sc[560], wn[560];
        snprintf(module, sizeof module, "%s.mlp.switch_mlp.%s", p, proj[i]);
        snprintf(sc, sizeof sc, "%s.scales", module);
        snprintf(wn, sizeof wn, "%s.weight", module);
        int rows = i < 2 ? c->moe_ffn : c->hidden, cols = i < 2 ? c->hidden : c->moe_ffn;
        int quant = tern_tensors_find(m->tensors, sc) != NULL;
        const tern_tensor *t = NULL;
        if (!quant) {
            int64_t dims[3] = {c->n_experts, rows, cols};
            tern_status st = tern_tensors_expect(m->tensors, wn, 3, dims, &t);
            if (st) return tern_error_wrap(st, "%s", m->dir);
            m->weight_bytes += t->nbytes;
        }
        for (int e = 0; e < c->n_experts; e++) {
            tern_mlp *x = &L->experts[e];
            tern_weight *w = i == 0 ? &x->gate : i == 1 ? &x->up : &x->down;
            if (quant) {
                tern_status st = tern_weight_bind_quant_slice(m, w, module, rows, cols, e, c->n_experts);
                if (st) return st;
            } else {
                size_t mat = (size_t)rows * (size_t)cols * tern_dtype_size(t->dtype);
                *w = (tern_weight){(const uint8_t *)t->data + (size_t)e * mat, t->dtype, rows, cols, TERN_WL_ROWS, NULL};
            }
        }
    }
    return TERN_OK;
}

static tern_status bind_layer(tern_model *m, int l)
{
    const tern_model_config *c = &m->cfg;
    tern_layer *L = &m->layers[l];
    int H = c->hidden, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    char p[256], n[512];
    tern_status st;
    snprintf(p, sizeof p, "model.layers.%d", l);
#define B(field, suffix, r, cl, opt) \
    do { snprintf(n, sizeof n, "%s.%s", p, suffix); if ((st = bind(m, &L->field, n, r, cl, opt))) return st; } while (0)
    B(attn_norm, "input_layernorm.weight", 1, H, 0);
    B(ffn_norm, "post_attention_layernorm.weight", 1, H, 0);
    B(wq, "self_attn.q_proj.weight", qd, H, 0);
    B(wk, "self_attn.k_proj.weight", kvd, H, 0);
    B(wv, "self_attn.v_proj.weight", kvd, H, 0);
    B(wo, "self_attn.o_proj.weight", H, qd, 0);
    if (c->attention_bias) {
        B(bq, "self_attn.q_proj.bias", 1, qd, 0);
        B(bk, "self_attn.k_proj.bias", 1, kvd, 0);
        B(bv, "self_attn.v_proj.bias", 1, kvd, 0);
    }
    if (c->qk_norm) {
        B(q_norm, "self_attn.q_norm.weight", 1, c->head_dim, 0);
        B(k_norm, "self_attn.k_norm.weight", 1, c->head_dim, 0);
    }
    L->is_moe = c->arch == TERN_ARCH_QWEN3_MOE && c->layer_is_moe[l];
    if (!L->is_moe) {
        snprintf(n, sizeof n, "%s.mlp", p);
        return bind_mlp(m, &L->mlp, n, c->ffn);
    }
    B(router, "mlp.gate.weight", c->n_experts, H, 0);
#undef B
    L->experts = calloc((size_t)c->n_experts, sizeof *L->experts);
    if (!L->experts) return tern_error(TERN_E_NOMEM, "out of memory");
    snprintf(n, sizeof n, "%s.mlp.switch_mlp.gate_proj.weight", p);
    if (tern_tensors_find(m->tensors, n)) return bind_switch(m, L, p);
    for (int e = 0; e < c->n_experts; e++) {
        snprintf(n, sizeof n, "%s.mlp.experts.%d", p, e);
        if ((st = bind_mlp(m, &L->experts[e], n, c->moe_ffn))) return st;
    }
    return TERN_OK;
}

tern_status tern_llama_bind_weights(tern_model *m)
{
    const tern_model_config *c = &m->cfg;
    tern_status st;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return tern_error(TERN_E_NOMEM, "out of memory");
    if ((st = bind(m, &m->embed, "model.embed_tokens.weight", c->vocab, c->hidden, 0))) return st;
    if ((st = bind(m, &m->final_norm, "model.norm.weight", 1, c->hidden, 0))) return st;
    if (c->tie_embeddings && !tern_tensors_find(m->tensors, "lm_head.weight")) {
        m->lm_head = m->embed;
        m->head_is_embed = 1;
        if (tern_dtype_is_quant(m->embed.dt)) {
            /* the head gets its own descriptor: packing it must not move the
             * embedding's rows, which the gather reads in place */
            tern_qmat *q = tern_model_new_qmat(m);
            if (!q) return tern_error(TERN_E_NOMEM, "out of memory");
            *q = *(const tern_qmat *)m->embed.data;
            m->lm_head.data = q;
        }
    } else if ((st = bind(m, &m->lm_head, "lm_head.weight", c->vocab, c->hidden, 0))) {
        return st;
    }
    for (int l = 0; l < c->n_layers; l++)
        if ((st = bind_layer(m, l))) return st;
    return TERN_OK;
}

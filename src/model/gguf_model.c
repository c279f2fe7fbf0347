/* A GGUF file as a model: hyperparameters from the "<arch>.*" metadata,
 * tensors by llama.cpp's names, quantized blocks bound for their panel copy.
 *
 * Architectures: llama, qwen2, qwen3, qwen3moe. llama.cpp's converter stores
 * the q/k rows of qwen models as transformers does (rotate-half rope) but
 * permutes those of llama for llama.cpp's interleaved rope: within each head
 * of hd rows, file row 2j + i holds transformers' row i * hd/2 + j. Those two
 * matrices are copied at load with the rows put back (whole rows of blocks:
 * the codes are not touched).
 * Tensor names: token_embd, output_norm, output (absent: tied), and per
 * block blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q.bias
 * ..., attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down;
 * ffn_gate_inp and ffn_{gate,up,down}_exps for experts stacked in one 3-D
 * tensor}. A tensor of shape ne = [K, N] is a row-major [N, K] matrix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gguf_blocks.h"
#include "model/gguf_tok.h"
#include "model/model_internal.h"

static tern_status meta_int(const tern_gguf *g, const char *arch, const char *key, int required, int dflt, int *out)
{
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t v;
    if (!tern_gguf_find_kv(g, k)) {
        if (required) return tern_error(TERN_E_FORMAT, "%s: metadata '%s' is missing", tern_gguf_path(g), k);
        *out = dflt;
        return TERN_OK;
    }
    tern_status st = tern_gguf_get_int(g, k, &v);
    if (st) return st;
    if (v < 0 || v > (1 << 30))
        return tern_error(TERN_E_FORMAT, "%s: metadata '%s' = %lld is out of range", tern_gguf_path(g), k,
                          (long long)v);
    *out = (int)v;
    return TERN_OK;
}

static tern_status meta_num(const tern_gguf *g, const char *arch, const char *key, double dflt, double *out)
{
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (!tern_gguf_find_kv(g, k)) {
        *out = dflt;
        return TERN_OK;
    }
    return tern_gguf_get_float(g, k, out);
}

static tern_status read_config(tern_model *m, const tern_gguf *g)
{
    tern_model_config *c = &m->cfg;
    const char *path = tern_gguf_path(g), *a;
    uint64_t al;
    tern_status st = tern_gguf_get_str(g, "general.architecture", &a, &al);
    if (st) return st;
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)(al < 31 ? al : 31), a);
    if (!strcmp(arch, "qwen2") || !strcmp(arch, "qwen3")) {
        c->arch = TERN_ARCH_LLAMA;
        snprintf(c->model_type, sizeof c->model_type, "%s", arch);
    } else if (!strcmp(arch, "qwen3moe")) {
        c->arch = TERN_ARCH_QWEN3_MOE;
        snprintf(c->model_type, sizeof c->model_type, "qwen3_moe");
    } else if (!strcmp(arch, "llama")) {
        c->arch = TERN_ARCH_LLAMA;
        snprintf(c->model_type, sizeof c->model_type, "llama");
    } else {
        return tern_error(TERN_E_UNSUPPORTED, "%s: GGUF architecture '%s' is not supported (llama, qwen2, qwen3, "
                          "qwen3moe)", path, arch);
    }
    if (!strcmp(arch, "llama")) {
        /* llama.cpp files of llama models with rope scaling store it as rope_freqs (a
         * per-dimension divisor), which is not read here */
        if (tern_gguf_find_tensor(g, "rope_freqs.weight"))
            return tern_error(TERN_E_UNSUPPORTED, "%s: rope_freqs.weight (llama3 rope scaling) is not supported", path);
    }
    if ((st = meta_int(g, arch, "block_count", 1, 0, &c->n_layers)) ||
        (st = meta_int(g, arch, "embedding_length", 1, 0, &c->hidden)) ||
        (st = meta_int(g, arch, "attention.head_count", 1, 0, &c->n_heads)) ||
        (st = meta_int(g, arch, "attention.head_count_kv", 0, c->n_heads, &c->n_kv_heads)) ||
        (st = meta_int(g, arch, "feed_forward_length", c->arch == TERN_ARCH_LLAMA, 0, &c->ffn)) ||
        (st = meta_int(g, arch, "context_length", 0, 4096, &c->max_pos)))
        return st;
    if (c->hidden <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->max_pos <= 0 ||
        c->n_layers > 4096 || c->hidden > (1 << 20) || c->n_heads % c->n_kv_heads)
        return tern_error(TERN_E_FORMAT, "%s: inconsistent hyperparameters (layers %d, hidden %d, heads %d/%d)",
                          path, c->n_layers, c->hidden, c->n_heads, c->n_kv_heads);
    if ((st = meta_int(g, arch, "attention.key_length", 0, c->hidden / c->n_heads, &c->head_dim))) return st;
    if (c->head_dim <= 0 || c->head_dim % 2)
        return tern_error(TERN_E_FORMAT, "%s: head dimension %d must be positive and even", path, c->head_dim);
    double eps, theta;
    if ((st = meta_num(g, arch, "attention.layer_norm_rms_epsilon", 1e-6, &eps)) ||
        (st = meta_num(g, arch, "rope.freq_base", 10000.0, &theta)))
        return st;
    c->rms_eps = (float)eps;
    const tern_gguf_tensor *emb = tern_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != c->hidden)
        return tern_error(TERN_E_FORMAT, "%s: token_embd.weight missing or not [vocab, %d]", path, c->hidden);
    c->vocab = (int)emb->ne[1];
    c->tie_embeddings = !tern_gguf_find_tensor(g, "output.weight");
    c->attention_bias = tern_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->qk_norm = c->arch == TERN_ARCH_QWEN3_MOE || !strcmp(arch, "qwen3");
    int64_t v;
    c->bos = tern_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v) == TERN_OK ? (int32_t)v : -1;
    if (tern_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v) == TERN_OK) c->eos[c->n_eos++] = (int32_t)v;
    c->layer_is_moe = calloc((size_t)c->n_layers, 1);
    if (!c->layer_is_moe) return tern_error(TERN_E_NOMEM, "out of memory");
    if (c->arch == TERN_ARCH_QWEN3_MOE) {
        if ((st = meta_int(g, arch, "expert_count", 1, 0, &c->n_experts)) ||
            (st = meta_int(g, arch, "expert_used_count", 1, 0, &c->n_experts_per_tok)) ||
            (st = meta_int(g, arch, "expert_feed_forward_length", 1, 0, &c->moe_ffn)))
            return st;
        if (c->n_experts <= 0 || c->n_experts > 4096 || c->n_experts_per_tok < 1 ||
            c->n_experts_per_tok > c->n_experts || c->moe_ffn <= 0)
            return tern_error(TERN_E_FORMAT, "%s: inconsistent expert counts", path);
        int norm = 1;
        if ((st = meta_int(g, arch, "expert_weights_norm", 0, 1, &norm))) return st;
        c->norm_topk_prob = norm != 0;
        c->decoder_sparse_step = 1;
        for (int l = 0; l < c->n_layers; l++) {
            char n[128];
            snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
            c->layer_is_moe[l] = tern_gguf_find_tensor(g, n) != NULL;
        }
    }
    tern_rope_config *r = &c->rope;
    memset(r, 0, sizeof *r);
    r->theta = theta;
    r->factor = 1.0;
    r->attention_factor = -1.0;
    r->truncate = 1;
    r->partial_rotary_factor = 1.0;
    r->beta_fast = 32.0;
    r->beta_slow = 1.0;
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    const char *rt;
    uint64_t rl;
    if (tern_gguf_get_str(g, k, &rt, &rl) == TERN_OK && !(rl == 4 && !memcmp(rt, "none", 4))) {
        double f, orig;
        if ((st = meta_num(g, arch, "rope.scaling.factor", 1.0, &f)) ||
            (st = meta_num(g, arch, "rope.scaling.original_context_length", c->max_pos, &orig)))
            return st;
        r->factor = f;
        r->original_max_pos = (int)orig;
        if (rl == 6 && !memcmp(rt, "linear", 6)) r->type = TERN_ROPE_LINEAR;
        else if (rl == 4 && !memcmp(rt, "yarn", 4)) r->type = TERN_ROPE_YARN;
        else return tern_error(TERN_E_UNSUPPORTED, "%s: rope scaling '%.*s' is not supported", path, (int)rl, rt);
    }
    return tern_rope_init(c);
}

/* Binds tensor name as [rows, cols] (rows 1: a vector); slice e of a 3-D
 * stacked tensor when e >= 0. */
static tern_status bind(tern_model *m, tern_weight *w, const char *name, int rows, int cols, int e, int optional)
{
    const tern_gguf_tensor *t = tern_gguf_find_tensor(m->gguf, name);
    const char *path = tern_gguf_path(m->gguf);
    if (!t) {
        if (optional) {
            *w = (tern_weight){NULL, TERN_DT_F32, 0, 0, TERN_WL_ROWS, NULL};
            return TERN_OK;
        }
        return tern_error(TERN_E_FORMAT, "%s: tensor '%s' not found", path, name);
    }
    int nd = rows == 1 ? 1 : e >= 0 ? 3 : 2;
    int64_t want[3] = {cols, rows == 1 ? 1 : rows, m->cfg.n_experts};
    int ok = t->n_dims == nd;
    for (int d = 0; ok && d < nd; d++) ok = t->ne[d] == want[d];
    if (!ok)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' has shape [%lld, %lld, %lld] (ne), expected "
                          "%d dims [%d, %d%s]", path, (unsigned long long)t->info_offset, name, (long long)t->ne[0],
                          (long long)t->ne[1], (long long)t->ne[2], nd, cols, rows, e >= 0 ? ", experts" : "");
    int be, bb;
    tern_dtype_block(t->dtype, &be, &bb);
    size_t mat = (size_t)rows * (size_t)(cols / be) * (size_t)bb;
    const uint8_t *data = (const uint8_t *)t->data + (e > 0 ? (size_t)e * mat : 0);
    if (rows == 1 || !tern_dtype_is_quant(t->dtype)) {
        if (tern_dtype_is_quant(t->dtype))
            return tern_error(TERN_E_UNSUPPORTED, "%s: tensor '%s': a quantized vector is not supported", path, name);
        *w = (tern_weight){data, t->dtype, rows, cols, TERN_WL_ROWS, NULL};
    } else {
        /* bound for the compact panel form of its blocks (qpanel.h) */
        tern_qform form = tern_gguf_qform(t->dtype);
        tern_qform_info f = tern_qform_get(form);
        tern_qmat *q = tern_model_new_qmat(m);
        if (!q) return tern_error(TERN_E_NOMEM, "out of memory");
        *q = (tern_qmat){data, NULL, NULL, TERN_DT_F16, f.group, t->dtype, form};
        *w = (tern_weight){q, f.bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4, rows, cols, TERN_WL_ROWS, NULL};
    }
    m->weight_bytes += mat;
    return TERN_OK;
}

/* Puts the q/k rows of a llama GGUF back in transformers' order (see the
 * header) in a copy owned by m; w is bound to the file's rows on entry. */
static tern_status unpermute(tern_model *m, tern_weight *w, int hd)
{
    int quant = tern_dtype_is_quant(w->dt);
    const tern_qmat *q = quant ? w->data : NULL;
    tern_dtype st = quant ? q->src : w->dt;
    int be, bb;
    tern_dtype_block(st, &be, &bb);
    size_t row = (size_t)(w->cols / be) * (size_t)bb;
    const uint8_t *src = quant ? q->codes : w->data;
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? m->cap_bufs * 2 : 64;
        void **nb = realloc(m->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return tern_error(TERN_E_NOMEM, "out of memory");
        m->bufs = nb;
        m->cap_bufs = cap;
    }
    uint8_t *dst = malloc((size_t)w->rows * row);
    if (!dst) return tern_error(TERN_E_NOMEM, "out of memory");
    m->bufs[m->n_bufs++] = dst;
    int half = hd / 2;
    for (int r = 0; r < w->rows; r++) {
        int h = r / hd, i = (r % hd) / half, j = r % half;
        memcpy(dst + (size_t)r * row, src + (size_t)(h * hd + 2 * j + i) * row, row);
    }
    if (quant) ((tern_qmat *)w->data)->codes = dst;
    else w->data = dst;
    return TERN_OK;
}

static tern_status bind_layer(tern_model *m, int l)
{
    const tern_model_config *c = &m->cfg;
    tern_layer *L = &m->layers[l];
    int H = c->hidden, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    char n[128];
    tern_status st;
#define B(field, suffix, r, cl, opt) \
    do { snprintf(n, sizeof n, "blk.%d.%s", l, suffix); if ((st = bind(m, &L->field, n, r, cl, -1, opt))) return st; } while (0)
    B(attn_norm, "attn_norm.weight", 1, H, 0);
    B(ffn_norm, "ffn_norm.weight", 1, H, 0);
    B(wq, "attn_q.weight", qd, H, 0);
    B(wk, "attn_k.weight", kvd, H, 0);
    B(wv, "attn_v.weight", kvd, H, 0);
    B(wo, "attn_output.weight", H, qd, 0);
    if (!strcmp(c->model_type, "llama")) {
        if ((st = unpermute(m, &L->wq, c->head_dim)) || (st = unpermute(m, &L->wk, c->head_dim))) return st;
    }
    if (c->attention_bias) {
        B(bq, "attn_q.bias", 1, qd, 0);
        B(bk, "attn_k.bias", 1, kvd, 0);
        B(bv, "attn_v.bias", 1, kvd, 0);
    }
    if (c->qk_norm) {
        B(q_norm, "attn_q_norm.weight", 1, c->head_dim, 0);
        B(k_norm, "attn_k_norm.weight", 1, c->head_dim, 0);
    }
    L->is_moe = c->arch == TERN_ARCH_QWEN3_MOE && c->layer_is_moe[l];
    if (!L->is_moe) {
        B(mlp.gate, "ffn_gate.weight", c->ffn, H, 0);
        B(mlp.up, "ffn_up.weight", c->ffn, H, 0);
        B(mlp.down, "ffn_down.weight", H, c->ffn, 0);
        return TERN_OK;
    }
    B(router, "ffn_gate_inp.weight", c->n_experts, H, 0);
#undef B
    L->experts = calloc((size_t)c->n_experts, sizeof *L->experts);
    if (!L->experts) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t before = m->weight_bytes;
    for (int e = 0; e < c->n_experts; e++) {
        tern_mlp *x = &L->experts[e];
        snprintf(n, sizeof n, "blk.%d.ffn_gate_exps.weight", l);
        if ((st = bind(m, &x->gate, n, c->moe_ffn, H, e, 0))) return st;
        snprintf(n, sizeof n, "blk.%d.ffn_up_exps.weight", l);
        if ((st = bind(m, &x->up, n, c->moe_ffn, H, e, 0))) return st;
        snprintf(n, sizeof n, "blk.%d.ffn_down_exps.weight", l);
        if ((st = bind(m, &x->down, n, H, c->moe_ffn, e, 0))) return st;
    }
    (void)before;
    return TERN_OK;
}

tern_status tern_gguf_model_bind(tern_model *m, const char *path)
{
    tern_status st = tern_gguf_open(path, &m->gguf);
    if (st) return st;
    if ((st = read_config(m, m->gguf))) return st;
    const tern_model_config *c = &m->cfg;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return tern_error(TERN_E_NOMEM, "out of memory");
    if ((st = bind(m, &m->embed, "token_embd.weight", c->vocab, c->hidden, -1, 0))) return st;
    if ((st = bind(m, &m->final_norm, "output_norm.weight", 1, c->hidden, -1, 0))) return st;
    if (c->tie_embeddings) {
        m->lm_head = m->embed;
        m->head_is_embed = 1;
        if (tern_dtype_is_quant(m->embed.dt)) {
            tern_qmat *q = tern_model_new_qmat(m);
            if (!q) return tern_error(TERN_E_NOMEM, "out of memory");
            *q = *(const tern_qmat *)m->embed.data;
            m->lm_head.data = q;
        }
    } else if ((st = bind(m, &m->lm_head, "output.weight", c->vocab, c->hidden, -1, 0))) {
        return st;
    }
    for (int l = 0; l < c->n_layers; l++)
        if ((st = bind_layer(m, l))) return st;
    return tern_gguf_write_text_files(m->gguf, m->dir, sizeof m->dir);
}

#include "io/config.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path;
    json_t *root;   /* where LM fields live (top level or text_config) */
} cfg_src;

static tern_status get_int(const cfg_src *c, const char *key, int required, int dflt, int *out)
{
    json_t *v = json_object_get(c->root, key);
    if (!v || json_is_null(v)) {
        if (required) return tern_error(TERN_E_FORMAT, "%s: missing field \"%s\"", c->path, key);
        *out = dflt;
        return TERN_OK;
    }
    if (!json_is_integer(v)) return tern_error(TERN_E_FORMAT, "%s: field \"%s\" must be an integer", c->path, key);
    json_int_t x = json_integer_value(v);
    if (x < -2147483647 || x > 2147483647)
        return tern_error(TERN_E_FORMAT, "%s: field \"%s\" is out of range", c->path, key);
    *out = (int)x;
    return TERN_OK;
}

static tern_status get_num(const char *path, json_t *obj, const char *key, double dflt, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) { *out = dflt; return TERN_OK; }
    if (!json_is_number(v)) return tern_error(TERN_E_FORMAT, "%s: field \"%s\" must be a number", path, key);
    *out = json_number_value(v);
    return TERN_OK;
}

static int get_bool(json_t *obj, const char *key, int dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static tern_status parse_rope(const cfg_src *c, tern_model_config *cfg)
{
    tern_rope_config *r = &cfg->rope;
    memset(r, 0, sizeof *r);
    r->factor = 1.0;
    r->attention_factor = -1.0;
    r->truncate = 1;
    r->partial_rotary_factor = 1.0;
    /* transformers 5: rope_parameters holds theta and the scaling type; older
     * checkpoints: rope_theta at top level and an optional rope_scaling dict. */
    json_t *rp = json_object_get(c->root, "rope_parameters");
    json_t *rs = json_object_get(c->root, "rope_scaling");
    json_t *src = NULL;
    if (json_is_object(rp)) {
        if (json_object_get(rp, "full_attention") || json_object_get(rp, "sliding_attention"))
            return tern_error(TERN_E_UNSUPPORTED, "%s: per-attention-type rope_parameters are not supported for %s",
                              c->path, cfg->model_type);
        src = rp;
    } else if (json_is_object(rs)) {
        src = rs;
    }
    tern_status st = get_num(c->path, src && json_object_get(src, "rope_theta") ? src : c->root, "rope_theta",
                             10000.0, &r->theta);
    if (st) return st;
    if (r->theta <= 0) return tern_error(TERN_E_FORMAT, "%s: rope_theta must be positive", c->path);
    if ((st = get_num(c->path, c->root, "partial_rotary_factor", 1.0, &r->partial_rotary_factor))) return st;
    if (src && json_object_get(src, "partial_rotary_factor"))
        if ((st = get_num(c->path, src, "partial_rotary_factor", 1.0, &r->partial_rotary_factor))) return st;
    if (!(r->partial_rotary_factor > 0 && r->partial_rotary_factor <= 1))
        return tern_error(TERN_E_FORMAT, "%s: partial_rotary_factor must be in (0, 1]", c->path);
    const char *type = "default";
    if (src) {
        json_t *t = json_object_get(src, "rope_type");
        if (!t) t = json_object_get(src, "type");
        if (t && !json_is_string(t)) return tern_error(TERN_E_FORMAT, "%s: rope_type must be a string", c->path);
        if (t) type = json_string_value(t);
    }
    if (!strcmp(type, "default")) r->type = TERN_ROPE_DEFAULT;
    else if (!strcmp(type, "linear")) r->type = TERN_ROPE_LINEAR;
    else if (!strcmp(type, "llama3")) r->type = TERN_ROPE_LLAMA3;
    else if (!strcmp(type, "yarn")) r->type = TERN_ROPE_YARN;
    else return tern_error(TERN_E_UNSUPPORTED, "%s: rope type '%s' is not supported", c->path, type);
    /* transformers keeps the rotary inverse frequencies as a module buffer,
     * so loading a bfloat16 checkpoint rounds them to bfloat16 (float16 likewise); the
     * reference logits of such checkpoints carry that rounding. */
    json_t *dt = json_object_get(c->root, "dtype");
    if (!json_is_string(dt)) dt = json_object_get(c->root, "torch_dtype");
    if (json_is_string(dt))
        r->freq_round = !strcmp(json_string_value(dt), "bfloat16") ? 1 : !strcmp(json_string_value(dt), "float16") ? 2 : 0;
    /* An MLX-quantized checkpoint is mlx-lm's: it keeps the frequencies in
     * float32 whatever the storage dtype. */
    if (cfg->quant.present) r->freq_round = 0;
    if (r->type == TERN_ROPE_DEFAULT) return TERN_OK;
    if ((st = get_num(c->path, src, "factor", 1.0, &r->factor))) return st;
    if (r->factor <= 0) return tern_error(TERN_E_FORMAT, "%s: rope factor must be positive", c->path);
    double omp;
    if ((st = get_num(c->path, src, "original_max_position_embeddings", cfg->max_pos, &omp))) return st;
    if (json_object_get(src, "original_max_position_embeddings") && !(omp >= 1 && omp <= INT_MAX))
        return tern_error(TERN_E_FORMAT, "%s: original_max_position_embeddings must be a positive integer",
                          c->path);
    r->original_max_pos = (int)omp;
    if (r->type == TERN_ROPE_LLAMA3) {
        if ((st = get_num(c->path, src, "low_freq_factor", 1.0, &r->low_freq_factor))) return st;
        if ((st = get_num(c->path, src, "high_freq_factor", 4.0, &r->high_freq_factor))) return st;
        if (!json_object_get(src, "original_max_position_embeddings"))
            return tern_error(TERN_E_FORMAT, "%s: llama3 rope needs original_max_position_embeddings", c->path);
    }
    if (r->type == TERN_ROPE_YARN) {
        if ((st = get_num(c->path, src, "beta_fast", 32.0, &r->beta_fast))) return st;
        if ((st = get_num(c->path, src, "beta_slow", 1.0, &r->beta_slow))) return st;
        if ((st = get_num(c->path, src, "mscale", 0.0, &r->mscale))) return st;
        if ((st = get_num(c->path, src, "mscale_all_dim", 0.0, &r->mscale_all_dim))) return st;
        if ((st = get_num(c->path, src, "attention_factor", -1.0, &r->attention_factor))) return st;
        r->truncate = get_bool(src, "truncate", 1);
    }
    return TERN_OK;
}

static tern_status parse_eos(const cfg_src *c, json_t *top, tern_model_config *cfg)
{
    json_t *v = json_object_get(c->root, "eos_token_id");
    if (!v) v = json_object_get(top, "eos_token_id");
    cfg->n_eos = 0;
    if (!v || json_is_null(v)) return TERN_OK;
    if (json_is_integer(v)) {
        cfg->eos[cfg->n_eos++] = (int32_t)json_integer_value(v);
        return TERN_OK;
    }
    if (!json_is_array(v)) return tern_error(TERN_E_FORMAT, "%s: eos_token_id must be an integer or a list", c->path);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_integer(e))
            return tern_error(TERN_E_FORMAT, "%s: eos_token_id[%zu] is not an integer", c->path, i);
        if (cfg->n_eos == TERN_MAX_EOS)
            return tern_error(TERN_E_RANGE, "%s: more than %d eos ids", c->path, TERN_MAX_EOS);
        cfg->eos[cfg->n_eos++] = (int32_t)json_integer_value(e);
    }
    return TERN_OK;
}

static tern_status parse_moe(const cfg_src *c, tern_model_config *cfg)
{
    tern_status st;
    int ne = 0;
    if ((st = get_int(c, "num_experts", 0, 0, &ne))) return st;
    if (!ne && (st = get_int(c, "num_local_experts", 0, 0, &ne))) return st;
    cfg->n_experts = ne;
    if (ne <= 0) return tern_error(TERN_E_FORMAT, "%s: qwen3_moe needs num_experts > 0", c->path);
    if ((st = get_int(c, "num_experts_per_tok", 1, 0, &cfg->n_experts_per_tok))) return st;
    if ((st = get_int(c, "moe_intermediate_size", 1, 0, &cfg->moe_ffn))) return st;
    if ((st = get_int(c, "decoder_sparse_step", 0, 1, &cfg->decoder_sparse_step))) return st;
    cfg->norm_topk_prob = get_bool(c->root, "norm_topk_prob", 0);
    if (cfg->n_experts_per_tok < 1 || cfg->n_experts_per_tok > ne)
        return tern_error(TERN_E_FORMAT, "%s: num_experts_per_tok %d out of range 1..%d", c->path,
                          cfg->n_experts_per_tok, ne);
    if (cfg->moe_ffn <= 0 || cfg->decoder_sparse_step < 0)
        return tern_error(TERN_E_FORMAT, "%s: bad moe_intermediate_size or decoder_sparse_step", c->path);
    json_t *mlp_only = json_object_get(c->root, "mlp_only_layers");
    for (int l = 0; l < cfg->n_layers; l++)
        cfg->layer_is_moe[l] = cfg->decoder_sparse_step > 0 && (l + 1) % cfg->decoder_sparse_step == 0;
    if (mlp_only && !json_is_null(mlp_only)) {
        if (!json_is_array(mlp_only)) return tern_error(TERN_E_FORMAT, "%s: mlp_only_layers must be a list", c->path);
        size_t i;
        json_t *e;
        json_array_foreach(mlp_only, i, e) {
            json_int_t l = json_is_integer(e) ? json_integer_value(e) : -1;
            if (l < 0 || l >= cfg->n_layers)
                return tern_error(TERN_E_FORMAT, "%s: mlp_only_layers[%zu] is not a layer index", c->path, i);
            cfg->layer_is_moe[l] = 0;
        }
    }
    return TERN_OK;
}

static tern_status parse(const cfg_src *c, json_t *top, tern_model_config *cfg)
{
    json_t *mt = json_object_get(top, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(c->root, "model_type");
    if (!json_is_string(mt)) return tern_error(TERN_E_FORMAT, "%s: missing field \"model_type\"", c->path);
    const char *type = json_string_value(mt);
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", type);
    if (!strcmp(type, "llama") || !strcmp(type, "qwen2") || !strcmp(type, "qwen3")) cfg->arch = TERN_ARCH_LLAMA;
    else if (!strcmp(type, "qwen3_moe")) cfg->arch = TERN_ARCH_QWEN3_MOE;
    else return tern_error(TERN_E_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: llama, qwen2, qwen3, qwen3_moe)",
                           c->path, type);
    tern_status st;
    if ((st = get_int(c, "hidden_size", 1, 0, &cfg->hidden))) return st;
    if ((st = get_int(c, "num_hidden_layers", 1, 0, &cfg->n_layers))) return st;
    if ((st = get_int(c, "num_attention_heads", 1, 0, &cfg->n_heads))) return st;
    if ((st = get_int(c, "num_key_value_heads", 0, cfg->n_heads, &cfg->n_kv_heads))) return st;
    if ((st = get_int(c, "intermediate_size", cfg->arch == TERN_ARCH_LLAMA, 0, &cfg->ffn))) return st;
    if ((st = get_int(c, "vocab_size", 1, 0, &cfg->vocab))) return st;
    if ((st = get_int(c, "max_position_embeddings", 0, 4096, &cfg->max_pos))) return st;
    if (cfg->hidden <= 0 || cfg->n_layers <= 0 || cfg->n_heads <= 0 || cfg->n_kv_heads <= 0 || cfg->vocab <= 0 ||
        cfg->ffn < 0 || cfg->max_pos <= 0)
        return tern_error(TERN_E_FORMAT, "%s: sizes must be positive", c->path);
    if (cfg->n_layers > 4096 || cfg->hidden > (1 << 20) || cfg->vocab > (1 << 24))
        return tern_error(TERN_E_RANGE, "%s: implausibly large config", c->path);
    if (cfg->n_heads % cfg->n_kv_heads)
        return tern_error(TERN_E_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                          c->path, cfg->n_heads, cfg->n_kv_heads);
    if ((st = get_int(c, "head_dim", 0, cfg->hidden / cfg->n_heads, &cfg->head_dim))) return st;
    if (cfg->head_dim <= 0 || cfg->head_dim % 2)
        return tern_error(TERN_E_FORMAT, "%s: head_dim %d must be positive and even", c->path, cfg->head_dim);
    /* Bounded so that the rope tables and per-head buffers stay small. */
    if (cfg->head_dim > 4096 || cfg->n_heads > 65536 || cfg->ffn > (1 << 24))
        return tern_error(TERN_E_RANGE, "%s: implausibly large config (head_dim %d, %d heads, intermediate_size %d)",
                          c->path, cfg->head_dim, cfg->n_heads, cfg->ffn);
    double eps;
    if ((st = get_num(c->path, c->root, "rms_norm_eps", 1e-6, &eps))) return st;
    cfg->rms_eps = (float)eps;
    cfg->tie_embeddings = get_bool(c->root, "tie_word_embeddings", get_bool(top, "tie_word_embeddings", 0));
    cfg->attention_bias = get_bool(c->root, "attention_bias", !strcmp(type, "qwen2"));
    cfg->qk_norm = !strcmp(type, "qwen3") || !strcmp(type, "qwen3_moe");
    json_t *bos = json_object_get(c->root, "bos_token_id");
    cfg->bos = json_is_integer(bos) ? (int32_t)json_integer_value(bos) : -1;
    if ((st = parse_eos(c, top, cfg))) return st;
    cfg->layer_is_moe = calloc((size_t)cfg->n_layers, 1);
    if (!cfg->layer_is_moe) return tern_error(TERN_E_NOMEM, "out of memory");
    if (cfg->arch == TERN_ARCH_QWEN3_MOE && (st = parse_moe(c, cfg))) return st;
    if ((st = parse_rope(c, cfg))) return st;
    return tern_rope_init(cfg);
}

static tern_status parse_top(json_t *top, const char *path, tern_model_config *cfg)
{
    if (!json_is_object(top)) {
        json_decref(top);
        return tern_error(TERN_E_FORMAT, "%s: not a JSON object", path);
    }
    json_t *tc = json_object_get(top, "text_config");
    cfg_src c = {path, json_is_object(tc) ? tc : top};
    tern_status st = tern_quant_config_parse(path, top, &cfg->quant);
    if (!st) st = parse(&c, top, cfg);
    json_decref(top);
    if (st) tern_config_clear(cfg);
    return st;
}

tern_status tern_config_load(const char *dir, tern_model_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t jerr;
    json_t *top = json_load_file(path, 0, &jerr);
    if (!top) {
        if (jerr.line <= 0 && strstr(jerr.text, "unable to open"))
            return tern_error(TERN_E_IO, "%s: cannot open", path);
        return tern_error(TERN_E_FORMAT, "%s: not valid JSON (%s, line %d)", path, jerr.text, jerr.line);
    }
    return parse_top(top, path, cfg);
}

tern_status tern_config_parse(const char *json, size_t len, const char *name, tern_model_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (!name) name = "config.json";
    json_error_t jerr;
    json_t *top = json_loadb(json, len, 0, &jerr);
    if (!top) return tern_error(TERN_E_FORMAT, "%s: not valid JSON (%s, line %d)", name, jerr.text, jerr.line);
    return parse_top(top, name, cfg);
}

void tern_config_clear(tern_model_config *cfg)
{
    free(cfg->layer_is_moe);
    free(cfg->inv_freq);
    cfg->layer_is_moe = NULL;
    cfg->inv_freq = NULL;
    tern_quant_config_clear(&cfg->quant);
}

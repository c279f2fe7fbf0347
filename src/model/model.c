/* Model loading: resolve the directory, read config.json, map the weights,
 * bind them to the family's layers, take or make the execution context. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/model_dir.h"
#include "model/gguf_tok.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/model_internal.h"

static tern_act_mode default_act_mode(void)
{
    const char *p = getenv("TERN_PRECISION");
    return p && !strcmp(p, "f32") ? TERN_ACT_F32 : TERN_ACT_BF16;
}

static int want_panels(const tern_model_opts *opts)
{
    if (opts && opts->weights) return opts->weights == TERN_WEIGHTS_PANELS;
    const char *p = getenv("TERN_WEIGHTS");
    return !(p && !strcmp(p, "mapped"));
}

tern_status tern_model_load(const char *path, const tern_model_opts *opts, tern_model **out)
{
    *out = NULL;
    tern_model *m = calloc(1, sizeof *m);
    if (!m) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t pl = strlen(path);
    tern_status st;
    if (pl > 5 && !strcmp(path + pl - 5, ".gguf")) {
        st = tern_gguf_model_bind(m, path);
    } else {
        st = tern_model_dir_resolve(path, m->dir, sizeof m->dir);
        if (!st) st = tern_config_load(m->dir, &m->cfg);
        if (!st) st = tern_tensors_open_dir(m->dir, &m->tensors);
        if (!st) st = tern_llama_bind_weights(m);
    }
    if (!st && opts && opts->exec) {
        m->exec = opts->exec;
    } else if (!st) {
        const char *dev = opts && opts->device ? opts->device : getenv("TERN_DEVICE");
        st = tern_exec_create_device(opts ? opts->n_threads : 0, dev, &m->exec);
        m->own_exec = !st;
    }
    m->bk = &tern_backend_cpu;
    m->act_mode = opts && opts->precision ? (opts->precision == TERN_PRECISION_F32 ? TERN_ACT_F32 : TERN_ACT_BF16)
                                          : default_act_mode();
    /* On a GPU the weights are read from the mapping once, to be uploaded:
     * no host panels. */
    if (!st && m->exec->cuda) st = tern_backend_cuda_load(m);
    else if (!st) st = tern_model_pack_weights(m, !want_panels(opts));
    if (st) {
        tern_model_free(m);
        return st;
    }
    *out = m;
    return TERN_OK;
}

void tern_model_free(tern_model *m)
{
    if (!m) return;
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++) free(m->layers[l].experts);
    if (m->dev) tern_backend_cuda_unload(m);
    free(m->layers);
    if (m->own_exec) tern_exec_free(m->exec);
    if (m->arena) munmap(m->arena, m->arena_bytes);
    tern_tensors_close(m->tensors);
    if (m->gguf) {
        if (m->dir[0]) tern_gguf_remove_text_files(m->dir);
        tern_gguf_close(m->gguf);
    }
    tern_config_clear(&m->cfg);
    for (int i = 0; i < m->n_qmats; i++) free(m->qmats[i]);
    free(m->qmats);
    for (int i = 0; i < m->n_bufs; i++) free(m->bufs[i]);
    free(m->bufs);
    free(m);
}

int tern_model_vocab_size(const tern_model *m) { return m->cfg.vocab; }
int tern_model_max_context(const tern_model *m) { return m->cfg.max_pos; }
int tern_model_hidden_size(const tern_model *m) { return m->cfg.hidden; }
tern_exec *tern_model_exec(const tern_model *m) { return m->exec; }
const char *tern_model_dir(const tern_model *m) { return m->dir; }
const char *tern_model_type(const tern_model *m) { return m->cfg.model_type; }
size_t tern_model_weight_bytes(const tern_model *m) { return m->weight_bytes; }

const int32_t *tern_model_eos_ids(const tern_model *m, int *n)
{
    *n = m->cfg.n_eos;
    return m->cfg.eos;
}

size_t tern_model_decode_bytes(const tern_model *m)
{
    size_t b = m->weight_bytes;
    size_t emb = tern_weight_bytes(&m->embed);
    /* The embedding table is gathered one row per token, except when tied,
     * where the head reads it whole. */
    if (!m->head_is_embed) b -= emb;
    return b;
}

const char *tern_model_weights_desc(const tern_model *m)
{
    if (m->dev) return "uploaded to the GPU";
    if (!m->arena) return "mapped";
    if (!m->arena_floats) return "mapped, quantized in panels";
    return m->lm_head.layout == TERN_WL_PANELS_HUGE ? "panels-huge" : "panels";
}

tern_status tern_model_kv_create(const tern_model *m, int max_rows, int max_len, int block_tokens, long n_blocks,
                                 tern_kv **out)
{
    tern_kv_shape s = {m->cfg.n_layers, m->cfg.n_kv_heads, m->cfg.head_dim, max_rows, max_len, block_tokens, n_blocks};
    if (m->dev) return tern_backend_cuda_kv_create(m, &s, out);
    return tern_kv_create(&s, out);
}

size_t tern_model_kv_bytes_per_token(const tern_model *m)
{
    return 2 * sizeof(float) * (size_t)m->cfg.n_layers * (size_t)m->cfg.n_kv_heads * (size_t)m->cfg.head_dim;
}

void tern_model_parallel(tern_model *m, void (*fn)(void *arg, int i), void *arg, int n)
{
    tern_exec_parallel(m->exec, fn, arg, n);
}

tern_status tern_model_logits(tern_model *m, const int32_t *ids, int n, int all, float *out)
{
    if (n <= 0) return tern_error(TERN_E_INVALID, "logits: no tokens");
    tern_kv *kv = NULL;
    int row;
    uint8_t *want = calloc((size_t)n, 1);
    if (!want) return tern_error(TERN_E_NOMEM, "logits: out of memory");
    for (int i = 0; i < n; i++) want[i] = all || i == n - 1;
    tern_status st = tern_model_kv_create(m, 1, n, 0, 0, &kv);
    if (!st) st = tern_kv_row_add(kv, n, &row);
    if (!st) {
        tern_batch b = {1, &row, &n, ids, want};
        st = tern_forward(m, kv, &b, out, NULL);
    }
    free(want);
    tern_kv_free(kv);
    return st;
}

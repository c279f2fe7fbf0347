/* The CUDA backend of the family forward (backend.h), over the ops of
 * src/backend/cuda/cuda.h.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cuda/cuda.h"
#include "core/clock.h"
#include "core/exec.h"
#include "model/backend.h"

typedef struct {
    void *qkv;              /* [qd + 2 kvd, H] */
    void *bias;             /* qwen2: [qd + 2 kvd] (q, k, v biases), or NULL */
} dev_layer;

/* A growable device buffer. */
typedef struct {
    void *d;
    size_t bytes;
} dbuf;

typedef struct {
    tern_cuda *c;           /* borrowed from the exec */
    void *arena;            /* owned: every weight */
    size_t arena_bytes;
    dev_layer *layers;      /* owned, n_layers */
    float *d_rope;          /* in arena: [n_rope, rope_dim] */
    int n_rope;             /* positions the table covers */
    /* per pass */
    void *h_stage;          /* owned pinned host staging, stage_cap bytes */
    size_t stage_cap;
    dbuf stage;             /* the staging blob on the device */
    dbuf part, count, logits, bias;
    int32_t *d_ids, *d_tok_row, *d_want, *d_zero;
    tern_cuda_attn_row *d_rows;   /* [n_layers][nr] */
    int nr, max_len;
    /* TERN_CUDA_STATS: passes, host and device seconds (from begin to the
     * copy-out), printed at unload, for decode passes (one token a row) and
     * the others. */
    int act_bf16;           /* TERN_CUDA_ACT=bf16 */
    int stats;
    double t_begin, host_s[2], dev_s[2];
    long passes[2];
    int decode;
} cuda_model;

static cuda_model *cm(const tern_model *m) { return m->dev; }

/* Activations stay float32 on the GPU in both precision modes: rounding
 * them to bf16 inside the products buys the GPU nothing (it makes a decode
 * step 24% slower on the H200: 5.91 against 4.75 ms for the Qwen3-8B shape)
 * and costs accuracy. TERN_CUDA_ACT=bf16 asks for the rounding (the CPU's
 * bf16 mode) to compare. */
static tern_cuda_act act(const tern_model *m)
{
    return m->act_mode == TERN_ACT_BF16 && cm(m)->act_bf16 ? TERN_CUDA_ACT_BF16 : TERN_CUDA_ACT_F32;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static tern_status dbuf_reserve(tern_cuda *c, dbuf *b, size_t bytes, int zero)
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

/* ---- execution context on a device ----------------------------------- */

static void exec_device_free(tern_exec *x)
{
    tern_cuda_free(x->cuda, x->d_scratch);
    tern_cuda_close(x->cuda);
    x->cuda = NULL;
    x->d_scratch = NULL;
}

tern_status tern_exec_create_device(int n_threads, const char *device, tern_exec **out)
{
    *out = NULL;
    int idx = tern_exec_parse_device(device);
    if (idx == -2) return tern_error(TERN_E_INVALID, "device must be cpu or cuda[:N], not '%s'", device);
    tern_exec *x;
    tern_status st = tern_exec_create(n_threads, &x);
    if (st || idx < 0) {
        *out = st ? NULL : x;
        return st;
    }
    if ((st = tern_cuda_open(idx, &x->cuda))) {
        tern_exec_free(x);
        return st;
    }
    x->device = idx;
    x->device_free = exec_device_free;
    *out = x;
    return TERN_OK;
}

/* ---- load: checks and upload ----------------------------------------- */

static int float_dt(tern_dtype dt) { return dt == TERN_DT_F32 || dt == TERN_DT_F16 || dt == TERN_DT_BF16; }

/* l < 0: a weight outside the layers. */
static tern_status check_weight(const tern_weight *w, const char *what, int l)
{
    if (!w->data) return TERN_OK;
    char where[48] = "";
    if (l >= 0) snprintf(where, sizeof where, "layer %d ", l);
    if (!float_dt(w->dt))
        return tern_error(TERN_E_UNSUPPORTED,
                          "cuda: %s%s is %s; the CUDA backend runs F32 / F16 / BF16 weights only (use --device cpu "
                          "for quantized checkpoints)",
                          where, what, tern_dtype_name(w->dt));
    if (w->layout != TERN_WL_ROWS) return tern_error(TERN_E_INTERNAL, "cuda: %s%s is not in rows", where, what);
    return TERN_OK;
}

static tern_status check_model(const tern_model *m)
{
    const tern_model_config *c = &m->cfg;
    int hd = c->head_dim;
    if (c->arch == TERN_ARCH_QWEN3_MOE)
        return tern_error(TERN_E_UNSUPPORTED, "cuda: %s (mixture of experts) does not run on the CUDA backend yet; use "
                                              "--device cpu", c->model_type);
    if (hd != 16 && hd != 32 && hd != 64 && hd != 128 && hd != 256)
        return tern_error(TERN_E_UNSUPPORTED, "cuda: head_dim %d (the CUDA attention takes 16, 32, 64, 128 or 256)", hd);
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads || c->n_heads / c->n_kv_heads > 8)
        return tern_error(TERN_E_UNSUPPORTED, "cuda: %d query heads over %d KV heads (at most 8 per KV head)",
                          c->n_heads, c->n_kv_heads);
    if (c->hidden % 8 || c->ffn % 8 || (c->n_heads * hd) % 8)
        return tern_error(TERN_E_UNSUPPORTED, "cuda: hidden %d / ffn %d / q width %d must be multiples of 8", c->hidden,
                          c->ffn, c->n_heads * hd);
    for (int l = 0; l < c->n_layers; l++) {
        const tern_layer *L = &m->layers[l];
        tern_status st;
        if ((L->bq.data || L->bk.data || L->bv.data) &&
            (!L->bq.data || !L->bk.data || !L->bv.data || L->bq.dt != L->bk.dt || L->bq.dt != L->bv.dt))
            return tern_error(TERN_E_UNSUPPORTED, "cuda: layer %d has biases on some of q/k/v only, or of mixed dtypes", l);
        if ((st = check_weight(&L->wq, "q_proj", l)) || (st = check_weight(&L->wk, "k_proj", l)) ||
            (st = check_weight(&L->wv, "v_proj", l)) || (st = check_weight(&L->wo, "o_proj", l)) ||
            (st = check_weight(&L->mlp.gate, "gate_proj", l)) || (st = check_weight(&L->mlp.up, "up_proj", l)) ||
            (st = check_weight(&L->mlp.down, "down_proj", l)) || (st = check_weight(&L->attn_norm, "input norm", l)) ||
            (st = check_weight(&L->ffn_norm, "post-attention norm", l)) ||
            (st = check_weight(&L->q_norm, "q_norm", l)) || (st = check_weight(&L->k_norm, "k_norm", l)) ||
            (st = check_weight(&L->bq, "q bias", l)))
            return st;
        if (L->wq.dt != L->wk.dt || L->wq.dt != L->wv.dt || L->mlp.gate.dt != L->mlp.up.dt ||
            (c->qk_norm && L->q_norm.dt != L->k_norm.dt))
            return tern_error(TERN_E_UNSUPPORTED, "cuda: layer %d mixes weight dtypes within q/k/v or gate/up", l);
    }
    tern_status st = check_weight(&m->embed, "embed_tokens", -1);
    if (!st) st = check_weight(&m->lm_head, "lm_head", -1);
    if (!st) st = check_weight(&m->final_norm, "final norm", -1);
    return st;
}

static size_t wbytes(const tern_weight *w)
{
    return w->data ? (size_t)w->rows * (size_t)w->cols * tern_dtype_size(w->dt) : 0;
}

/* Places w (or the concatenation of ws) at *off in the arena and uploads it. */
static tern_status put(cuda_model *d, size_t *off, const tern_weight *w, const void **dev)
{
    size_t n = wbytes(w);
    *dev = NULL;
    if (!n) return TERN_OK;
    char *at = (char *)d->arena + *off;
    *off += align256(n);
    *dev = at;
    return tern_cuda_upload(d->c, at, w->data, n);
}

static size_t arena_need(const tern_model *m, int n_rope)
{
    const tern_model_config *c = &m->cfg;
    size_t n = align256((size_t)n_rope * (size_t)c->rope_dim * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        const tern_layer *L = &m->layers[l];
        const tern_weight *ws[] = {&L->attn_norm, &L->q_norm, &L->k_norm, &L->wo, &L->ffn_norm,
                                   &L->mlp.gate,  &L->mlp.up, &L->mlp.down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) n += align256(wbytes(ws[i]));
        n += align256(wbytes(&L->wq) + wbytes(&L->wk) + wbytes(&L->wv));
        n += align256(wbytes(&L->bq) + wbytes(&L->bk) + wbytes(&L->bv));
    }
    n += align256(wbytes(&m->embed)) + align256(wbytes(&m->final_norm));
    if (!m->head_is_embed || m->lm_head.data != m->embed.data) n += align256(wbytes(&m->lm_head));
    return n;
}

static tern_status upload_rope(const tern_model *m, cuda_model *d, size_t *off)
{
    const tern_model_config *c = &m->cfg;
    size_t row = (size_t)c->rope_dim;
    d->d_rope = (float *)((char *)d->arena + *off);
    *off += align256((size_t)d->n_rope * row * sizeof(float));
    enum { CHUNK = 4096 };
    float *cs = malloc(CHUNK * row * sizeof *cs);
    int *pos = malloc(CHUNK * sizeof *pos);
    tern_status st = cs && pos ? TERN_OK : tern_error(TERN_E_NOMEM, "cuda: out of memory");
    for (int p0 = 0; !st && p0 < d->n_rope; p0 += CHUNK) {
        int n = d->n_rope - p0 < CHUNK ? d->n_rope - p0 : CHUNK;
        for (int i = 0; i < n; i++) pos[i] = p0 + i;
        tern_cpu_rope_table(n, c->rope_dim, pos, c->inv_freq, c->rope_attn_factor, cs);
        st = tern_cuda_upload(d->c, d->d_rope + (size_t)p0 * row, cs, (size_t)n * row * sizeof *cs);
    }
    free(cs);
    free(pos);
    return st;
}

void tern_backend_cuda_unload(tern_model *m)
{
    cuda_model *d = cm(m);
    if (!d) return;
    for (int k = 0; d->stats && k < 2; k++)
        if (d->passes[k])
            fprintf(stderr, "cuda stats: %ld %s passes, %.3f ms host / %.3f ms device each\n", d->passes[k],
                    k ? "decode" : "other", 1e3 * d->host_s[k] / d->passes[k], 1e3 * d->dev_s[k] / d->passes[k]);
    tern_cuda_free(d->c, d->arena);
    tern_cuda_free(d->c, d->stage.d);
    tern_cuda_free(d->c, d->part.d);
    tern_cuda_free(d->c, d->count.d);
    tern_cuda_free(d->c, d->logits.d);
    tern_cuda_free(d->c, d->bias.d);
    tern_cuda_host_free(d->c, d->h_stage);
    free(d->layers);
    free(d);
    m->dev = NULL;
}

tern_status tern_backend_cuda_load(tern_model *m)
{
    const tern_model_config *c = &m->cfg;
    tern_status st = check_model(m);
    if (st) return st;
    cuda_model *d = calloc(1, sizeof *d);
    if (!d || !(d->layers = calloc((size_t)c->n_layers, sizeof *d->layers))) {
        free(d);
        return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    }
    d->c = m->exec->cuda;
    d->stats = getenv("TERN_CUDA_STATS") != NULL;
    const char *a = getenv("TERN_CUDA_ACT");
    d->act_bf16 = a && !strcmp(a, "bf16");
    m->dev = d;
    /* Every position the model takes; a longer context is refused per pass. */
    d->n_rope = c->max_pos > 0 && c->max_pos < (1 << 20) ? c->max_pos : (1 << 20);
    d->arena_bytes = arena_need(m, d->n_rope);
    if ((st = tern_cuda_alloc(d->c, d->arena_bytes, &d->arena))) goto fail;
    size_t off = 0;
    if ((st = upload_rope(m, d, &off))) goto fail;
    for (int l = 0; l < c->n_layers; l++) {
        tern_layer *L = &m->layers[l];
        tern_weight *ws[] = {&L->attn_norm, &L->q_norm, &L->k_norm, &L->wo, &L->ffn_norm,
                             &L->mlp.gate,  &L->mlp.up, &L->mlp.down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if ((st = put(d, &off, ws[i], &ws[i]->dev))) goto fail;
        /* q, k, v rows one after the other: one [qd + 2 kvd, H] matrix. */
        char *at = (char *)d->arena + off;
        size_t nq = wbytes(&L->wq), nk = wbytes(&L->wk), nv = wbytes(&L->wv);
        off += align256(nq + nk + nv);
        d->layers[l].qkv = at;
        if ((st = tern_cuda_upload(d->c, at, L->wq.data, nq)) || (st = tern_cuda_upload(d->c, at + nq, L->wk.data, nk)) ||
            (st = tern_cuda_upload(d->c, at + nq + nk, L->wv.data, nv)))
            goto fail;
        if (L->bq.data) {
            at = (char *)d->arena + off;
            nq = wbytes(&L->bq), nk = wbytes(&L->bk), nv = wbytes(&L->bv);
            off += align256(nq + nk + nv);
            d->layers[l].bias = at;
            if ((st = tern_cuda_upload(d->c, at, L->bq.data, nq)) ||
                (st = tern_cuda_upload(d->c, at + nq, L->bk.data, nk)) ||
                (st = tern_cuda_upload(d->c, at + nq + nk, L->bv.data, nv)))
                goto fail;
        }
    }
    if ((st = put(d, &off, &m->embed, &m->embed.dev)) || (st = put(d, &off, &m->final_norm, &m->final_norm.dev)))
        goto fail;
    if (m->head_is_embed && m->lm_head.data == m->embed.data) m->lm_head.dev = m->embed.dev;
    else if ((st = put(d, &off, &m->lm_head, &m->lm_head.dev))) goto fail;
    m->bk = &tern_backend_cuda;
    return tern_cuda_sync(d->c);
fail:
    tern_backend_cuda_unload(m);
    return st;
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
    size_t o_tab = o_want + align256((size_t)(p->n_out > 0 ? p->n_out : 1) * 4);
    size_t o_rows = o_tab + align256((size_t)ntab * 4);
    size_t total = o_rows + (size_t)L * nr * sizeof(tern_cuda_attn_row);
    /* The last pass's upload has been read before its staging is rewritten. */
    tern_status st = tern_cuda_sync(d->c);
    if (st) return st;
    if (d->stats) {
        d->t_begin = tern_now();
        d->decode = T == b->n_rows;
        if ((st = tern_cuda_timer_mark(d->c))) return st;
    }
    if (total > d->stage_cap) {
        void *h;
        if ((st = tern_cuda_host_alloc(d->c, total * 2, &h))) return st;
        tern_cuda_host_free(d->c, d->h_stage);
        d->h_stage = h;
        d->stage_cap = total * 2;
    }
    if ((st = dbuf_reserve(d->c, &d->stage, total, 0))) return st;
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
    d->max_len = max_len;
    int hd = c->head_dim;
    if ((st = dbuf_reserve(d->c, &d->part, tern_cuda_attention_tmp_bytes(T, max_len, c->n_heads, hd), 0)) ||
        (st = dbuf_reserve(d->c, &d->count, tern_cuda_attention_count_bytes(T, c->n_kv_heads), 1)) ||
        (st = dbuf_reserve(d->c, &d->logits, (size_t)(p->n_out > 0 ? p->n_out : 1) * c->vocab * sizeof(float), 0)))
        return st;
    if (d->layers[0].bias &&
        (st = dbuf_reserve(d->c, &d->bias, (size_t)T * (c->n_heads + 2 * c->n_kv_heads) * hd * sizeof(float), 0)))
        return st;
    return tern_cuda_upload_async(d->c, dv, h, total);
}

static tern_status cuda_embed(tern_model *m, tern_pass *p, float *x)
{
    return tern_cuda_embed(cm(m)->c, cm(m)->d_ids, p->T, m->embed.dev, m->embed.dt, m->cfg.hidden, x);
}

static tern_status cuda_rmsnorm(tern_model *m, const float *x, float *y, int n, int d, const tern_weight *w)
{
    return tern_cuda_rmsnorm(cm(m)->c, x, y, n, d, w->dev, w->dt, m->cfg.rms_eps);
}

static tern_status mm(tern_model *m, const float *x, int M, const tern_weight *w, float *y, int acc)
{
    return tern_cuda_matmul(cm(m)->c, act(m), TERN_CUDA_MM_OWN, x, M, w->cols, w->dev, w->dt, w->rows, y, w->rows,
                            acc, NULL);
}

static tern_status cuda_matmul(tern_model *m, const float *x, int M, const tern_weight *w, float *y)
{
    return mm(m, x, M, w, y, 0);
}

static tern_status cuda_matmul_add(tern_model *m, const float *x, int M, const tern_weight *w, float *y, float *tmp)
{
    (void)tmp;
    return mm(m, x, M, w, y, 1);
}

static tern_status cuda_gate_up(tern_model *m, const tern_mlp *w, const float *x, int M, float *g, float *u)
{
    (void)u;
    return tern_cuda_gate_up(cm(m)->c, act(m), x, M, w->gate.cols, w->gate.dev, w->up.dev, w->gate.dt, w->gate.rows,
                             g);
}

/* qkv is token-major: per token its q heads, k heads, v heads. */
static tern_status cuda_qkv(tern_model *m, tern_pass *p, int l, const float *h, float *qkv)
{
    const tern_model_config *c = &m->cfg;
    const tern_layer *L = &m->layers[l];
    cuda_model *d = cm(m);
    int ld = (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
    tern_status st = tern_cuda_matmul(d->c, act(m), TERN_CUDA_MM_OWN, h, p->T, c->hidden, d->layers[l].qkv, L->wq.dt,
                                      ld, qkv, ld, 0, NULL);
    if (st) return st;
    if (d->layers[l].bias) {
        /* The bias in every row (a lookup of row 0 of a one-row table, as
         * float32), then added: the CPU's add_bias arithmetic. */
        if ((st = tern_cuda_embed(d->c, d->d_zero, p->T, d->layers[l].bias, L->bq.dt, ld, d->bias.d)) ||
            (st = tern_cuda_add(d->c, qkv, d->bias.d, (long)p->T * ld)))
            return st;
    }
    const void *qn = c->qk_norm ? L->q_norm.dev : NULL, *kn = c->qk_norm ? L->k_norm.dev : NULL;
    return tern_cuda_qkv_rope_store(d->c, qkv, ld, p->T, c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, qn, kn,
                                    c->qk_norm ? L->q_norm.dt : TERN_DT_F32, c->rms_eps, d->d_rope,
                                    d->d_rows + (size_t)l * d->nr, d->d_tok_row);
}

static tern_status cuda_attention(tern_model *m, tern_pass *p, int l, float *qkv, float *out)
{
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    int hd = c->head_dim, ld = (c->n_heads + 2 * c->n_kv_heads) * hd;
    return tern_cuda_attention(d->c, d->d_rows + (size_t)l * d->nr, d->d_tok_row, p->T, d->max_len, c->n_heads,
                               c->n_kv_heads, hd, 1.0f / sqrtf((float)hd), qkv, ld, out, d->part.d, d->count.d);
}

static tern_status cuda_head(tern_model *m, tern_pass *p, const float *x, float *h, float *logits, float *hidden)
{
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    int n = p->n_out, H = c->hidden;
    /* The gather of the wanted rows is an embedding lookup in x. */
    tern_status st = tern_cuda_embed(d->c, d->d_want, n, x, TERN_DT_F32, H, h);
    if (!st) st = tern_cuda_rmsnorm(d->c, h, h, n, H, m->final_norm.dev, m->final_norm.dt, c->rms_eps);
    if (!st && hidden) st = tern_cuda_download_async(d->c, hidden, h, (size_t)n * H * sizeof(float));
    if (!st && logits) {
        st = mm(m, h, n, &m->lm_head, d->logits.d, 0);
        if (!st) st = tern_cuda_download_async(d->c, logits, d->logits.d, (size_t)n * c->vocab * sizeof(float));
    }
    tern_status ss = tern_cuda_sync(d->c);
    if (!st && !ss && d->stats) {
        float ms = 0.0f;
        tern_cuda_timer_elapsed(d->c, &ms);
        d->passes[d->decode]++;
        d->host_s[d->decode] += tern_now() - d->t_begin;
        d->dev_s[d->decode] += ms / 1e3;
    }
    return st ? st : ss;
}

const tern_backend_vt tern_backend_cuda = {
    "cuda",      cuda_pass_bytes, cuda_workspace, cuda_begin, cuda_embed,     cuda_rmsnorm,
    cuda_matmul, cuda_matmul_add, cuda_gate_up,   cuda_qkv,   cuda_attention, cuda_head,
};

/* ---- the device's read bandwidth (tern bench's ceiling) ---------------- */

double tern_model_device_bandwidth(tern_model *m)
{
    if (!m->dev) return 0.0;
    tern_cuda *c = cm(m)->c;
    size_t bytes = (size_t)2 << 30;
    void *src = NULL;
    float *sink = NULL, ms = 0.0f;
    double gbps = 0.0;
    tern_exec_lock(m->exec);
    if (!tern_cuda_alloc(c, bytes, &src) && !tern_cuda_alloc(c, 4096 * sizeof(float), (void **)&sink) &&
        !tern_cuda_memset(c, src, 1, bytes)) {
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) ok = !tern_cuda_read_bw(c, src, bytes, sink);
        ok = ok && !tern_cuda_timer_mark(c);
        for (int i = 0; i < 10 && ok; i++) ok = !tern_cuda_read_bw(c, src, bytes, sink);
        if (ok && !tern_cuda_timer_elapsed(c, &ms) && ms > 0) gbps = (double)bytes * 10 / (ms / 1e3) / 1e9;
    }
    tern_cuda_free(c, src);
    tern_cuda_free(c, sink);
    tern_exec_unlock(m->exec);
    return gbps;
}

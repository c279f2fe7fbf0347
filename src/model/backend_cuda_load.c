/* The CUDA backend's load and unload (backend.h): the checks of what the
 * ops take, then every weight uploaded once into one device arena (q, k
 * and v of a layer as one [q + 2 kv, H] matrix), the rope table of every
 * position the model takes computed by the CPU's tern_cpu_rope_table, and
 * the knobs of the per-pass ops (backend_cuda.c) read from the
 * environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "core/exec.h"
#include "model/backend_cuda_model.h"

static const char *const prof_names[PROF_CLASSES] = {"embed", "qkv+norm+rope+store", "attention", "o (+residual)",
                                                     "gate_up+norm", "down (+residual)", "final norm+lm_head",
                                                     "summary", "copy-out"};

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

/* The tiled layout (tiled.cu: the same bits, decode 1.6-3.5% faster on an
 * H100, no extra memory): every bf16 matrix of the products whose shape
 * the layout takes is rewritten in place, in one call, the rest stay
 * row-major; a head that is the embedding table stays row-major (the
 * gather reads rows). Off with TERN_CUDA_TILED=0. A refusal leaves every
 * matrix row-major (a note on stderr); a CUDA error fails the load.
 * d->tiled counts the matrices. */
static void tile_req(tern_cuda_tile_req *rq, int *n, const void *dev, tern_dtype dt, long rows, int cols)
{
    if (dev && dt == TERN_DT_BF16 && rows % 8 == 0 && cols % 32 == 0)
        rq[(*n)++] = (tern_cuda_tile_req){(void *)dev, rows, cols};
}

static tern_status tile_weights(tern_model *m, cuda_model *d)
{
    const char *tw = getenv("TERN_CUDA_TILED");
    if (tw && !strcmp(tw, "0")) return TERN_OK;
    tern_cuda_tile_req *rq = malloc((size_t)(5 * m->cfg.n_layers + 1) * sizeof *rq);
    if (!rq) return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    int n = 0;
    const tern_weight *h = &m->lm_head;
    if (h->dev != m->embed.dev) tile_req(rq, &n, h->dev, h->dt, h->rows, h->cols);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const tern_layer *L = &m->layers[l];
        tile_req(rq, &n, d->layers[l].qkv, L->wq.dt, (long)L->wq.rows + L->wk.rows + L->wv.rows, L->wq.cols);
        const tern_weight *ws[] = {&L->wo, &L->mlp.gate, &L->mlp.up, &L->mlp.down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) tile_req(rq, &n, ws[i]->dev, ws[i]->dt, ws[i]->rows, ws[i]->cols);
    }
    tern_status st = tern_cuda_tile_weights(d->c, rq, n);
    free(rq);
    if (st == TERN_E_INTERNAL) return st;
    if (st) fprintf(stderr, "tern: the weights stay row-major: %s\n", tern_last_error());
    else d->tiled = n;
    return TERN_OK;
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
    n += (size_t)(2 * c->n_layers) * align256((size_t)c->hidden * sizeof(float));
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

/* A norm weight (F32 / F16 / BF16, [n]) uploaded as float32. */
static tern_status upload_f32(cuda_model *d, float *at, const tern_weight *w, int n)
{
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    tern_cpu_to_f32(w->data, w->dt, n, f);
    tern_status st = tern_cuda_upload(d->c, at, f, (size_t)n * sizeof *f);
    free(f);
    return st;
}

void tern_backend_cuda_unload(tern_model *m)
{
    cuda_model *d = cm(m);
    if (!d) return;
    for (int j = 0; d->prof && j < 2; j++) {
        if (!d->prof_passes[j]) continue;
        double tot = 0;
        for (int k = 0; k < PROF_CLASSES; k++) tot += d->prof_ms[j][k];
        fprintf(stderr, "cuda profile: %ld %s passes, %.1f us each between the first and last event:\n",
                d->prof_passes[j], j ? "decode" : "other", 1e3 * tot / d->prof_passes[j]);
        for (int k = 0; k < PROF_CLASSES; k++)
            fprintf(stderr, "  %-22s %9.1f us\n", prof_names[k], 1e3 * d->prof_ms[j][k] / d->prof_passes[j]);
    }
    for (int k = 0; d->stats && k < 2; k++)
        if (d->passes[k])
            fprintf(stderr,
                    "cuda stats: %ld %s passes, %.3f ms host / %.3f ms device each, %ld with product chains; "
                    "host %.1f us from a pass's start to its work queued, %.1f us since the pass before (%ld more over 1 ms)\n",
                    d->passes[k], k ? "decode" : "other", 1e3 * d->host_s[k] / d->passes[k],
                    1e3 * d->dev_s[k] / d->passes[k], d->chain_passes[k], 1e6 * d->queue_s[k] / d->passes[k],
                    d->gaps[k] ? 1e6 * d->gap_s[k] / d->gaps[k] : 0.0, d->long_gaps[k]);
    cuda_graph_abandon(d);
    for (int i = 0; i < GRAPH_SLOTS; i++) tern_cuda_graph_free(d->gs[i].g);
    cuda_chain_free(d);
    if (d->arena) tern_cuda_tiled_forget(d->c, d->arena, d->arena_bytes);
    tern_cuda_free(d->c, d->arena);
    tern_cuda_free(d->c, d->stage.d);
    tern_cuda_free(d->c, d->part.d);
    tern_cuda_free(d->c, d->count.d);
    tern_cuda_free(d->c, d->logits.d);
    tern_cuda_free(d->c, d->bias.d);
    tern_cuda_free(d->c, d->sum_tmp.d);
    tern_cuda_free(d->c, d->norm_tmp.d);
    tern_cuda_free(d->c, d->sum_count.d);
    tern_cuda_free(d->c, d->sum_out.d);
    tern_cuda_host_free(d->c, d->h_sum);
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
    const char *fz = getenv("TERN_CUDA_FUSE");
    /* Bits: 1 the gate/up products (each warp's x loads serve two weight
     * rows: folded, 50 us against 55 + 4 for the norm kernel at the
     * Qwen3-8B shape), 2 the q/k/v product (with x prepared once per block
     * and the product at 2 blocks a multiprocessor, mma_skinny.cu: decode
     * 4.683-4.697 against 4.717-4.720 ms a token unfolded, prefill 512
     * 27.43-27.51 against 27.25-27.30 ms; with the earlier one-row kernel,
     * one weight row per warp, it cost more than it saved, 19 against
     * 14 + 4 us). */
    d->fuse = fz ? atoi(fz) : FOLD_GATE_UP | FOLD_QKV;
    const char *af = getenv("TERN_CUDA_ATTN_FUSE");
    d->attn_fuse = af && !strcmp(af, "1");
    const char *at = getenv("TERN_CUDA_ATTN_TILED");
    d->tiled_attn = !at || strcmp(at, "0");
    d->prof = getenv("TERN_CUDA_PROF") != NULL;
    const char *gr = getenv("TERN_CUDA_GRAPH");
    d->graph_on = !gr || strcmp(gr, "0");
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
    for (int l = 0; l < c->n_layers && !st; l++) {
        const tern_weight *ws[2] = {&m->layers[l].attn_norm, &m->layers[l].ffn_norm};
        for (int k = 0; k < 2 && !st; k++) {
            float *at = (float *)((char *)d->arena + off);
            off += align256((size_t)c->hidden * sizeof(float));
            *(k ? &d->layers[l].ffn_nw : &d->layers[l].attn_nw) = at;
            st = upload_f32(d, at, ws[k], c->hidden);
        }
    }
    if (st || (st = cuda_dbuf_reserve(d->c, &d->norm_tmp, tern_cuda_norm_tmp_bytes(c->hidden), 0)) ||
        (st = cuda_chain_setup(m)) || (st = tile_weights(m, d)))
        goto fail;
    const char *sm = getenv("TERN_CUDA_SUMMARY");
    m->bk = sm && !strcmp(sm, "0") ? &tern_backend_cuda_no_summary : &tern_backend_cuda;
    return tern_cuda_sync(d->c);
fail:
    tern_backend_cuda_unload(m);
    return st;
}

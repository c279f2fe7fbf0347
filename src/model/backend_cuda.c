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

enum { FOLD_GATE_UP = 1, FOLD_QKV = 2 };
enum { PROF_EMBED, PROF_QKV, PROF_ATTN, PROF_O, PROF_GATE_UP, PROF_DOWN, PROF_HEAD, PROF_SUMMARY, PROF_COPY,
       PROF_CLASSES };
static const char *const prof_names[PROF_CLASSES] = {"embed", "qkv+norm+rope+store", "attention", "o (+residual)",
                                                     "gate_up+norm", "down (+residual)", "final norm+lm_head",
                                                     "summary", "copy-out"};

enum { G_EAGER, G_CAPTURE, G_REPLAY, GRAPH_SLOTS = 8, GRAPH_SIG = 6 };
typedef struct {
    int T, nr, n_out, max_len;      /* the key */
    const void *sig[GRAPH_SIG];     /* buffers the capture's kernels address */
    int seen;
    unsigned long used;
    tern_cuda_graph *g;             /* owned */
} graph_slot;

typedef struct {
    void *qkv;              /* [qd + 2 kvd, H] */
    void *bias;             /* qwen2: [qd + 2 kvd] (q, k, v biases), or NULL */
    float *attn_nw, *ffn_nw;   /* the norm weights as float32 [H] (folded into the products) */
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
    dbuf norm_tmp;          /* tern_cuda_norm_tmp_bytes(H) */
    int n_rope;             /* positions the table covers */
    /* per pass */
    void *h_stage;          /* owned pinned host staging, stage_cap bytes */
    size_t stage_cap;
    dbuf stage;             /* the staging blob on the device */
    dbuf part, count, logits, bias;
    dbuf sum_tmp, sum_count, sum_out;   /* sampling summaries: scratch, counters (zeroed), results */
    tern_cuda_lsum *h_sum;  /* owned pinned host copy of the results, sum_cap entries */
    int sum_cap;
    int32_t *d_ids, *d_tok_row, *d_want, *d_zero;
    tern_cuda_attn_row *d_rows;   /* [n_layers][nr] */
    int nr, max_len;
    /* TERN_CUDA_STATS: passes, host and device seconds (from begin to the
     * copy-out), printed at unload, for decode passes (one token a row) and
     * the others. */
    int act_bf16;           /* TERN_CUDA_ACT=bf16 */
    int attn_fuse;          /* TERN_CUDA_ATTN_FUSE (default 0), see attn_fused */
    int tiled_attn;         /* TERN_CUDA_ATTN_TILED (default 1), see cuda_attention */
    int fuse;               /* which norms are folded into the products (TERN_CUDA_FUSE bits, see load) */
    /* TERN_CUDA_PROF=1: an event after each op of a pass, the time between
     * events summed per class of op, printed at unload for decode passes and
     * the others. */
    /* Decode passes (one token a row) as CUDA graphs keyed by shape: the
     * second pass of a shape is captured, later ones replay it (begin
     * launches it; the layer ops return at once; head runs eagerly after
     * it). TERN_CUDA_GRAPH=0: off. */
    int graph_on, gmode, gslot;
    unsigned long gclock;
    graph_slot gs[GRAPH_SLOTS];
    int prof, prof_n, prof_cls[4096];
    double prof_ms[2][PROF_CLASSES]; /* [0] other passes, [1] decode passes */
    long prof_passes[2];
    int stats;
    double t_begin, host_s[2], dev_s[2];
    long passes[2];
    int decode;
} cuda_model;

static cuda_model *cm(const tern_model *m) { return m->dev; }
static const tern_backend_vt cuda_no_summary;

/* Ends a capture an earlier pass left open (an op failed in it). */
static void graph_abandon(cuda_model *d)
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
            fprintf(stderr, "cuda stats: %ld %s passes, %.3f ms host / %.3f ms device each\n", d->passes[k],
                    k ? "decode" : "other", 1e3 * d->host_s[k] / d->passes[k], 1e3 * d->dev_s[k] / d->passes[k]);
    graph_abandon(d);
    for (int i = 0; i < GRAPH_SLOTS; i++) tern_cuda_graph_free(d->gs[i].g);
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
    if (st || (st = dbuf_reserve(d->c, &d->norm_tmp, tern_cuda_norm_tmp_bytes(c->hidden), 0))) goto fail;
    const char *sm = getenv("TERN_CUDA_SUMMARY");
    m->bk = sm && !strcmp(sm, "0") ? &cuda_no_summary : &tern_backend_cuda;
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
    graph_abandon(d);
    tern_status st = tern_cuda_sync(d->c);
    if (st) return st;
    d->decode = T == b->n_rows;
    d->prof_n = 0;
    if (d->stats) {
        d->t_begin = tern_now();
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
    /* The attention grid covers max_len rounded up (its blocks past a row's
     * length return at once), so that decode steps share a graph. */
    d->max_len = (max_len + 255) & ~255;
    max_len = d->max_len;
    int hd = c->head_dim;
    /* the per-query attention's split records (T x heads x splits x (hd +
     * 2) floats: gigabytes for a prefill chunk at a long context, which the
     * tiled kernel does not need) */
    if (!attn_tiled(m, p) &&
        ((st = dbuf_reserve(d->c, &d->part, tern_cuda_attention_tmp_bytes(T, max_len, c->n_heads, hd), 0)) ||
         (st = dbuf_reserve(d->c, &d->count, tern_cuda_attention_count_bytes(T, c->n_kv_heads), 1))))
        return st;
    if ((st = dbuf_reserve(d->c, &d->logits, (size_t)(p->n_out > 0 ? p->n_out : 1) * c->vocab * sizeof(float), 0)))
        return st;
    int no = p->n_out > 0 ? p->n_out : 1;
    if (p->sum && (no > d->sum_cap)) {
        void *hs;
        if ((st = tern_cuda_host_alloc(d->c, (size_t)no * 2 * sizeof *d->h_sum, &hs))) return st;
        tern_cuda_host_free(d->c, d->h_sum);
        d->h_sum = hs;
        d->sum_cap = no * 2;
    }
    if (p->sum && ((st = dbuf_reserve(d->c, &d->sum_tmp, tern_cuda_summary_tmp_bytes(no, c->vocab), 0)) ||
                   (st = dbuf_reserve(d->c, &d->sum_count, tern_cuda_summary_count_bytes(no), 1)) ||
                   (st = dbuf_reserve(d->c, &d->sum_out, (size_t)no * sizeof(tern_cuda_lsum), 0))))
        return st;
    if (d->layers[0].bias &&
        (st = dbuf_reserve(d->c, &d->bias, (size_t)T * (c->n_heads + 2 * c->n_kv_heads) * hd * sizeof(float), 0)))
        return st;
    if ((st = prof(d, PROF_COPY, tern_cuda_upload_async(d->c, dv, h, total)))) return st;
    return graph_start(m, p);
}

static tern_status cuda_embed(tern_model *m, tern_pass *p, float *x)
{
    if (REPLAYING(m)) return TERN_OK;
    return prof(cm(m), PROF_EMBED, tern_cuda_embed(cm(m)->c, cm(m)->d_ids, p->T, m->embed.dev, m->embed.dt, m->cfg.hidden, x));
}

static tern_status cuda_rmsnorm(tern_model *m, const float *x, float *y, int n, int d, const tern_weight *w)
{
    if (REPLAYING(m)) return TERN_OK;
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
    return mm(m, x, M, w, y, 0);
}

static tern_status cuda_matmul_add(tern_model *m, const float *x, int M, const tern_weight *w, float *y, float *tmp)
{
    if (REPLAYING(m)) return TERN_OK;
    (void)tmp;
    return prof(cm(m), w->cols == m->cfg.ffn ? PROF_DOWN : PROF_O, mm(m, x, M, w, y, 1));
}

static tern_status cuda_gate_up(tern_model *m, const tern_mlp *w, const float *x, int M, float *g, float *u)
{
    if (REPLAYING(m)) return TERN_OK;
    (void)u;
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
    tern_status st = graph_finish(d);
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
    st = prof(d, PROF_COPY, st);
    tern_status ss = tern_cuda_sync(d->c);
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
        d->host_s[d->decode] += tern_now() - d->t_begin;
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
/* TERN_CUDA_SUMMARY=0: the same without sampling summaries (every logit
 * comes back and the host samples), to compare. */
static const tern_backend_vt cuda_no_summary = CUDA_VT(0);

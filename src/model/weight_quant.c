/* Quantized weights of MLX checkpoints: binding "<module>.weight" (uint32
 * words of packed codes), "<module>.scales" and "<module>.biases" into one
 * tern_weight, gathering a dequantised row (the embedding), and the bytes a
 * weight occupies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gguf_blocks.h"
#include "backend/cpu/ops.h"
#include "model/model_internal.h"

tern_qmat *tern_model_new_qmat(tern_model *m)
{
    if (m->n_qmats == m->cap_qmats) {
        int cap = m->cap_qmats ? m->cap_qmats * 2 : 64;
        tern_qmat **n = realloc(m->qmats, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        m->qmats = n;
        m->cap_qmats = cap;
    }
    tern_qmat *q = calloc(1, sizeof *q);
    if (q) m->qmats[m->n_qmats++] = q;
    return q;
}

static tern_status shape_error(const tern_model *m, const tern_tensor *t, const char *what)
{
    char dims[128] = "";
    size_t o = 0;
    for (int d = 0; d < t->ndim && o < sizeof dims - 24; d++)
        o += (size_t)snprintf(dims + o, sizeof dims - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    return tern_error(TERN_E_FORMAT, "%s: tensor '%s' (%s [%s] in %s): expected %s", m->dir, t->name,
                      tern_dtype_name(t->dtype), dims, t->file, what);
}

tern_status tern_weight_bind_quant(tern_model *m, tern_weight *w, const char *module, int rows, int cols)
{
    return tern_weight_bind_quant_slice(m, w, module, rows, cols, -1, 0);
}

tern_status tern_weight_bind_quant_slice(tern_model *m, tern_weight *w, const char *module, int rows, int cols,
                                         int e, int n_e)
{
    char n[512];
    snprintf(n, sizeof n, "%s.weight", module);
    const tern_tensor *tw = tern_tensors_find(m->tensors, n);
    snprintf(n, sizeof n, "%s.scales", module);
    const tern_tensor *ts = tern_tensors_find(m->tensors, n);
    snprintf(n, sizeof n, "%s.biases", module);
    const tern_tensor *tb = tern_tensors_find(m->tensors, n);
    if (!tw) return tern_error(TERN_E_FORMAT, "%s: tensor '%s.weight' not found", m->dir, module);
    if (!tb)
        return tern_error(TERN_E_UNSUPPORTED, "%s: '%s' has scales but no biases: only MLX affine "
                          "quantization is supported", m->dir, module);
    if (!m->cfg.quant.present)
        return tern_error(TERN_E_FORMAT, "%s: '%s' is quantized but config.json has no "
                          "\"quantization\" section", m->dir, module);
    int bits, group;
    tern_quant_config_lookup(&m->cfg.quant, module, &bits, &group);
    if (!bits)
        return tern_error(TERN_E_FORMAT, "%s: '%s' is quantized but config.json maps it to false",
                          m->dir, module);
    char want[160];
    if (cols % group) {
        snprintf(want, sizeof want, "%d inputs, a multiple of the group size %d", cols, group);
        return shape_error(m, tw, want);
    }
    int G = cols / group, nd = e >= 0 ? 3 : 2, o = e >= 0;
    if (tw->dtype != TERN_DT_U32 || tw->ndim != nd || (e >= 0 && tw->shape[0] != n_e) || tw->shape[o] != rows ||
        tw->shape[o + 1] != (int64_t)cols * bits / 32) {
        snprintf(want, sizeof want, "U32 [%s%d, %d] (%d-bit codes of [%d, %d])", e >= 0 ? "experts, " : "", rows,
                 cols * bits / 32, bits, rows, cols);
        return shape_error(m, tw, want);
    }
    if (ts->dtype != TERN_DT_F32 && ts->dtype != TERN_DT_F16 && ts->dtype != TERN_DT_BF16)
        return shape_error(m, ts, "F32, F16 or BF16 scales");
    const tern_tensor *sb[2] = {ts, tb};
    for (int i = 0; i < 2; i++)
        if (sb[i]->dtype != ts->dtype || sb[i]->ndim != nd || (e >= 0 && sb[i]->shape[0] != n_e) ||
            sb[i]->shape[o] != rows || sb[i]->shape[o + 1] != G) {
            snprintf(want, sizeof want, "%s [%s%d, %d] (group size %d)", tern_dtype_name(ts->dtype),
                     e >= 0 ? "experts, " : "", rows, G, group);
            return shape_error(m, sb[i], want);
        }
    tern_qmat *q = tern_model_new_qmat(m);
    if (!q) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t ei = e > 0 ? (size_t)e : 0, ss = tern_dtype_size(ts->dtype);
    size_t cbytes = (size_t)rows * (size_t)cols * (size_t)bits / 8, sbytes = (size_t)rows * (size_t)G * ss;
    *q = (tern_qmat){(const uint8_t *)tw->data + ei * cbytes, (const uint8_t *)ts->data + ei * sbytes,
                     (const uint8_t *)tb->data + ei * sbytes, ts->dtype, group, TERN_DT_U32, TERN_QF_AFFINE};
    *w = (tern_weight){q, bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4, rows, cols, TERN_WL_ROWS, NULL};
    m->weight_bytes += e > 0 ? 0 : tw->nbytes + ts->nbytes + tb->nbytes;
    return TERN_OK;
}

/* Scales and biases may sit at any byte offset (mlx-lm does not align its
 * tensors), so they are read with memcpy. */
static float sval(const void *p, tern_dtype dt, size_t i)
{
    if (dt == TERN_DT_F32) {
        float f;
        memcpy(&f, (const uint8_t *)p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    return dt == TERN_DT_F16 ? tern_f16_to_f32(h) : tern_bf16_to_f32(h);
}

void tern_weight_row_f32(const tern_weight *w, int r, float *out)
{
    if (!tern_dtype_is_quant(w->dt)) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * (size_t)w->cols * tern_dtype_size(w->dt);
        tern_cpu_to_f32(row, w->dt, w->cols, out);
        return;
    }
    const tern_qmat *q = w->data;
    if (q->src != TERN_DT_U32) {    /* GGUF blocks, read in place */
        int be, bb;
        tern_dtype_block(q->src, &be, &bb);
        tern_gguf_dequant(q->src, (const uint8_t *)q->codes + (size_t)r * (size_t)(w->cols / be) * (size_t)bb,
                          w->cols, out);
        return;
    }
    int bits = tern_dtype_bits(w->dt), G = w->cols / q->group;
    const uint8_t *c = (const uint8_t *)q->codes + (size_t)r * (size_t)w->cols * (size_t)bits / 8;
    for (int g = 0; g < G; g++) {
        float s = sval(q->scales, q->sdt, (size_t)r * G + g), b = sval(q->biases, q->sdt, (size_t)r * G + g);
        for (int k = g * q->group; k < (g + 1) * q->group; k++) {
            unsigned v = bits == 8 ? c[k] : (c[k >> 1] >> ((k & 1) * 4)) & 15u;
            out[k] = s * (float)v + b;
        }
    }
}

size_t tern_weight_bytes(const tern_weight *w)
{
    if (!w->data) return 0;
    if (!tern_dtype_is_quant(w->dt)) return (size_t)w->rows * (size_t)w->cols * tern_dtype_size(w->dt);
    const tern_qmat *q = w->data;
    if (q->src != TERN_DT_U32) {
        int be, bb;
        tern_dtype_block(q->src, &be, &bb);
        return (size_t)w->rows * (size_t)(w->cols / be) * (size_t)bb;
    }
    size_t codes = (size_t)w->rows * (size_t)w->cols * (size_t)tern_dtype_bits(w->dt) / 8;
    return codes + 2 * (size_t)w->rows * (size_t)(w->cols / q->group) * tern_dtype_size(q->sdt);
}

#include "kv/kv.h"

#include <stdlib.h>

struct tern_kv {
    tern_kv_shape shape;
    tern_kv_layer **layers;
    int *offset;      /* per row; -1 = row free */
};

tern_status tern_kv_create_plain(const tern_kv_shape *shape, tern_kv **out)
{
    *out = NULL;
    if (shape->n_layers <= 0 || shape->max_rows <= 0 || shape->max_len <= 0)
        return tern_error(TERN_E_INVALID, "kv: bad shape");
    tern_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tern_error(TERN_E_NOMEM, "kv: out of memory");
    kv->shape = *shape;
    kv->layers = calloc((size_t)shape->n_layers, sizeof *kv->layers);
    kv->offset = malloc((size_t)shape->max_rows * sizeof *kv->offset);
    if (!kv->layers || !kv->offset) { tern_kv_free(kv); return tern_error(TERN_E_NOMEM, "kv: out of memory"); }
    for (int r = 0; r < shape->max_rows; r++) kv->offset[r] = -1;
    for (int l = 0; l < shape->n_layers; l++) {
        tern_status st = tern_kv_plain_layer_create(shape->n_kv_heads, shape->head_dim, shape->max_rows,
                                                    shape->max_len, &kv->layers[l]);
        if (st) { tern_kv_free(kv); return st; }
    }
    *out = kv;
    return TERN_OK;
}

void tern_kv_free(tern_kv *kv)
{
    if (!kv) return;
    for (int l = 0; kv->layers && l < kv->shape.n_layers; l++)
        if (kv->layers[l]) kv->layers[l]->vt->destroy(kv->layers[l]);
    free(kv->layers);
    free(kv->offset);
    free(kv);
}

tern_status tern_kv_row_add(tern_kv *kv, int *row)
{
    for (int r = 0; r < kv->shape.max_rows; r++) {
        if (kv->offset[r] >= 0) continue;
        for (int l = 0; l < kv->shape.n_layers; l++) {
            tern_status st = kv->layers[l]->vt->row_add(kv->layers[l], r);
            if (st) {
                while (l-- > 0) kv->layers[l]->vt->row_remove(kv->layers[l], r);
                return st;
            }
        }
        kv->offset[r] = 0;
        *row = r;
        return TERN_OK;
    }
    return tern_error(TERN_E_RANGE, "kv: all %d rows are in use", kv->shape.max_rows);
}

void tern_kv_row_remove(tern_kv *kv, int row)
{
    if (!tern_kv_row_valid(kv, row)) return;
    for (int l = 0; l < kv->shape.n_layers; l++) kv->layers[l]->vt->row_remove(kv->layers[l], row);
    kv->offset[row] = -1;
}

int tern_kv_row_valid(const tern_kv *kv, int row)
{
    return row >= 0 && row < kv->shape.max_rows && kv->offset[row] >= 0;
}

int tern_kv_offset(const tern_kv *kv, int row)
{
    return tern_kv_row_valid(kv, row) ? kv->offset[row] : -1;
}

int tern_kv_max_len(const tern_kv *kv) { return kv->shape.max_len; }

tern_status tern_kv_trim(tern_kv *kv, int row, int n)
{
    if (!tern_kv_row_valid(kv, row)) return tern_error(TERN_E_INVALID, "kv: row %d is not in use", row);
    if (n < 0 || n > kv->offset[row])
        return tern_error(TERN_E_RANGE, "kv: cannot trim %d of %d tokens", n, kv->offset[row]);
    for (int l = 0; l < kv->shape.n_layers; l++) {
        tern_status st = kv->layers[l]->vt->trim(kv->layers[l], row, n);
        if (st) return st;
    }
    kv->offset[row] -= n;
    return TERN_OK;
}

void tern_kv_advance(tern_kv *kv, int row, int n)
{
    if (tern_kv_row_valid(kv, row)) kv->offset[row] += n;
}

tern_kv_layer *tern_kv_layer_at(tern_kv *kv, int layer) { return kv->layers[layer]; }

size_t tern_kv_bytes_per_token(const tern_kv *kv)
{
    size_t b = 0;
    for (int l = 0; l < kv->shape.n_layers; l++) b += kv->layers[l]->vt->bytes_per_token(kv->layers[l]);
    return b;
}

const char *tern_kv_signature(const tern_kv *kv)
{
    return kv->layers[0]->vt->signature(kv->layers[0]);
}

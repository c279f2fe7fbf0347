/* KV state: one layout object per attention layer, each holding rows
 * (independent sequences) that grow by appending keys and values.
 *
 * A layout is reached only through its vtable, so the forward pass works the
 * same over every layout (plain now; quantized, rotating, ... later). Rows are
 * identified by small integers handed out by tern_kv_row_add; the same row id
 * addresses that sequence in every layer.
 *
 * Ownership: tern_kv_create returns an owned object; views returned by
 * layer->vt->view are borrowed and valid until the next append/trim/row op. */
#ifndef TERN_KV_KV_H
#define TERN_KV_KV_H

#include <stddef.h>

#include "tern/status.h"

typedef struct tern_kv_layer tern_kv_layer;

/* Keys and values of one row in one layer, float32, head-major so that one
 * head's keys form a contiguous [len, head_dim] matrix:
 * k[head * head_stride + pos * head_dim + d]. */
typedef struct {
    const float *k, *v;
    int len;
    long head_stride;  /* floats between heads (>= len * head_dim) */
} tern_kv_view;

typedef struct {
    const char *(*signature)(const tern_kv_layer *l);
    size_t (*bytes_per_token)(const tern_kv_layer *l);
    /* Makes room for row id (new, empty). */
    tern_status (*row_add)(tern_kv_layer *l, int row);
    void (*row_remove)(tern_kv_layer *l, int row);
    /* Appends n positions; k and v are [n, n_kv_heads*head_dim] (borrowed). */
    tern_status (*append)(tern_kv_layer *l, int row, int n, const float *k, const float *v);
    tern_status (*view)(const tern_kv_layer *l, int row, tern_kv_view *out);
    /* Drops the last n positions, or TERN_E_UNSUPPORTED for layouts that
     * cannot rewind. */
    tern_status (*trim)(tern_kv_layer *l, int row, int n);
    void (*destroy)(tern_kv_layer *l);
} tern_kv_vtable;

struct tern_kv_layer {
    const tern_kv_vtable *vt;
};

typedef struct tern_kv tern_kv;

typedef struct {
    int n_layers, n_kv_heads, head_dim;
    int max_rows;      /* row ids are 0..max_rows-1 */
    int max_len;       /* positions per row */
} tern_kv_shape;

/* Creates plain float32 layouts for every layer. */
tern_status tern_kv_create_plain(const tern_kv_shape *shape, tern_kv **out);
void tern_kv_free(tern_kv *kv);

/* Hands out a free row id (empty, offset 0). */
tern_status tern_kv_row_add(tern_kv *kv, int *row);
void tern_kv_row_remove(tern_kv *kv, int row);
int tern_kv_row_valid(const tern_kv *kv, int row);
/* Tokens already stored for row (= position of the next token). */
int tern_kv_offset(const tern_kv *kv, int row);
int tern_kv_max_len(const tern_kv *kv);
/* Drops the last n tokens of row in every layer. */
tern_status tern_kv_trim(tern_kv *kv, int row, int n);
/* Records that n tokens were appended to row in every layer (the forward pass
 * appends per layer, then advances the row once). */
void tern_kv_advance(tern_kv *kv, int row, int n);
tern_kv_layer *tern_kv_layer_at(tern_kv *kv, int layer);
size_t tern_kv_bytes_per_token(const tern_kv *kv);
const char *tern_kv_signature(const tern_kv *kv);

/* Plain layout constructor (kv_plain.c). */
tern_status tern_kv_plain_layer_create(int n_kv_heads, int head_dim, int max_rows, int max_len,
                                       tern_kv_layer **out);

#endif

/* Plain layout: float32 keys and values, one growable buffer per row, laid
 * out head-major ([n_kv_heads][cap][head_dim]). Buffers grow geometrically up
 * to max_len so short requests stay small. */
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"

typedef struct {
    float *k, *v;
    int len, cap;   /* positions stored / allocated; cap < 0 = row free */
} plain_row;

typedef struct {
    tern_kv_layer base;
    int n_kv_heads, head_dim, max_rows, max_len;
    plain_row *rows;
} plain_layer;

static int width(const plain_layer *p) { return p->n_kv_heads * p->head_dim; }

static const char *plain_signature(const tern_kv_layer *l) { (void)l; return "kv:plain"; }

static size_t plain_bytes_per_token(const tern_kv_layer *l)
{
    return 2 * sizeof(float) * (size_t)width((const plain_layer *)l);
}

static tern_status plain_row_add(tern_kv_layer *l, int row)
{
    plain_layer *p = (plain_layer *)l;
    if (row < 0 || row >= p->max_rows) return tern_error(TERN_E_RANGE, "kv: row %d out of range", row);
    p->rows[row] = (plain_row){NULL, NULL, 0, 0};
    return TERN_OK;
}

static void plain_row_remove(tern_kv_layer *l, int row)
{
    plain_layer *p = (plain_layer *)l;
    free(p->rows[row].k);
    free(p->rows[row].v);
    p->rows[row] = (plain_row){NULL, NULL, 0, -1};
}

static tern_status plain_append(tern_kv_layer *l, int row, int n, const float *k, const float *v)
{
    plain_layer *p = (plain_layer *)l;
    plain_row *r = &p->rows[row];
    if (r->cap < 0) return tern_error(TERN_E_STATE, "kv: row %d is not in use", row);
    if (n > p->max_len - r->len)
        return tern_error(TERN_E_RANGE, "kv: row %d would exceed the context of %d tokens", row, p->max_len);
    size_t hd = (size_t)p->head_dim, H = (size_t)p->n_kv_heads;
    if (r->len + n > r->cap) {
        int cap = r->cap ? r->cap : 256;
        while (cap < r->len + n) cap *= 2;
        if (cap > p->max_len) cap = p->max_len;
        float *nk = malloc((size_t)cap * H * hd * sizeof *nk);
        float *nv = malloc((size_t)cap * H * hd * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return tern_error(TERN_E_NOMEM, "kv: out of memory");
        }
        for (size_t h = 0; h < H && r->len; h++) {
            memcpy(nk + h * cap * hd, r->k + h * r->cap * hd, (size_t)r->len * hd * sizeof *nk);
            memcpy(nv + h * cap * hd, r->v + h * r->cap * hd, (size_t)r->len * hd * sizeof *nv);
        }
        free(r->k);
        free(r->v);
        r->k = nk;
        r->v = nv;
        r->cap = cap;
    }
    /* k and v arrive token-major [n][H][hd]; scatter them per head. */
    for (int t = 0; t < n; t++)
        for (size_t h = 0; h < H; h++) {
            size_t dst = (h * r->cap + (size_t)(r->len + t)) * hd, src = ((size_t)t * H + h) * hd;
            memcpy(r->k + dst, k + src, hd * sizeof *k);
            memcpy(r->v + dst, v + src, hd * sizeof *v);
        }
    r->len += n;
    return TERN_OK;
}

static tern_status plain_view(const tern_kv_layer *l, int row, tern_kv_view *out)
{
    const plain_layer *p = (const plain_layer *)l;
    const plain_row *r = &p->rows[row];
    if (r->cap < 0) return tern_error(TERN_E_STATE, "kv: row %d is not in use", row);
    *out = (tern_kv_view){r->k, r->v, r->len, (long)r->cap * p->head_dim};
    return TERN_OK;
}

static tern_status plain_trim(tern_kv_layer *l, int row, int n)
{
    plain_layer *p = (plain_layer *)l;
    plain_row *r = &p->rows[row];
    if (n < 0 || n > r->len) return tern_error(TERN_E_RANGE, "kv: cannot trim %d of %d", n, r->len);
    r->len -= n;
    return TERN_OK;
}

static void plain_destroy(tern_kv_layer *l)
{
    plain_layer *p = (plain_layer *)l;
    for (int i = 0; i < p->max_rows; i++) {
        free(p->rows[i].k);
        free(p->rows[i].v);
    }
    free(p->rows);
    free(p);
}

static const tern_kv_vtable plain_vt = {
    plain_signature, plain_bytes_per_token, plain_row_add, plain_row_remove,
    plain_append,    plain_view,            plain_trim,    plain_destroy,
};

tern_status tern_kv_plain_layer_create(int n_kv_heads, int head_dim, int max_rows, int max_len,
                                       tern_kv_layer **out)
{
    *out = NULL;
    plain_layer *p = calloc(1, sizeof *p);
    if (!p) return tern_error(TERN_E_NOMEM, "kv: out of memory");
    p->rows = malloc((size_t)max_rows * sizeof *p->rows);
    if (!p->rows) { free(p); return tern_error(TERN_E_NOMEM, "kv: out of memory"); }
    for (int i = 0; i < max_rows; i++) p->rows[i] = (plain_row){NULL, NULL, 0, -1};
    p->base.vt = &plain_vt;
    p->n_kv_heads = n_kv_heads;
    p->head_dim = head_dim;
    p->max_rows = max_rows;
    p->max_len = max_len;
    *out = &p->base;
    return TERN_OK;
}

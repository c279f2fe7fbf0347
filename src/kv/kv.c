/* The block pool and its rows (see kv.h). Block ids index the same slot in
 * every layer; refs[b] counts the rows (and later cache entries) holding b.
 * Reservations: every row promises itself the blocks it may still take, so
 * growth never runs the pool dry. Invariant: n_free >= n_reserved. */
#include "kv/kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failpoint.h"

typedef struct {
    int *table;        /* owned; NULL when the row is free */
    int cap, n_blk;    /* table capacity / blocks attached */
    int len;           /* positions stored; -1 = row free */
    long reserve;      /* blocks this row may still take */
    int round_len;     /* length at round_begin, or -1 */
} kv_row;

struct tern_kv {
    tern_kv_shape shape;
    tern_kv_layer **layers;
    kv_row *rows;
    int *refs;         /* per block */
    int *free_stack;   /* free block ids; the top is reused first (warm) */
    long n_free, n_reserved;
    int rows_used;
};

tern_status tern_kv_create(const tern_kv_shape *shape, tern_kv **out)
{
    return tern_kv_create_layers(shape, NULL, NULL, out);
}

tern_status tern_kv_create_layers(const tern_kv_shape *shape, tern_kv_layer_ctor layer_create, void *arg,
                                  tern_kv **out)
{
    *out = NULL;
    tern_kv_shape s = *shape;
    if (s.n_layers <= 0 || s.max_rows <= 0 || s.max_len <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0)
        return tern_error(TERN_E_INVALID, "kv: bad shape");
    if (!s.block_tokens) s.block_tokens = TERN_KV_BLOCK_TOKENS;
    if (s.block_tokens < 1 || s.block_tokens > 4096) return tern_error(TERN_E_INVALID, "kv: bad block size");
    if (!s.n_blocks) s.n_blocks = (long)s.max_rows * ((s.max_len + s.block_tokens - 1) / s.block_tokens);
    if (s.n_blocks < 1 || s.n_blocks > (1L << 30)) return tern_error(TERN_E_RANGE, "kv: %ld blocks", s.n_blocks);
    tern_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tern_error(TERN_E_NOMEM, "kv: out of memory");
    kv->shape = s;
    kv->layers = calloc((size_t)s.n_layers, sizeof *kv->layers);
    kv->rows = calloc((size_t)s.max_rows, sizeof *kv->rows);
    kv->refs = calloc((size_t)s.n_blocks, sizeof *kv->refs);
    kv->free_stack = malloc((size_t)s.n_blocks * sizeof *kv->free_stack);
    if (!kv->layers || !kv->rows || !kv->refs || !kv->free_stack) {
        tern_kv_free(kv);
        return tern_error(TERN_E_NOMEM, "kv: out of memory");
    }
    for (int r = 0; r < s.max_rows; r++) kv->rows[r].len = -1;
    /* Block 0 on top: low ids are handed out first. */
    for (long b = 0; b < s.n_blocks; b++) kv->free_stack[b] = (int)(s.n_blocks - 1 - b);
    kv->n_free = s.n_blocks;
    for (int l = 0; l < s.n_layers; l++) {
        tern_status st = layer_create ? layer_create(arg, l, &s, &kv->layers[l])
                                      : tern_kv_plain_layer_create(s.n_kv_heads, s.head_dim, s.block_tokens,
                                                                   s.n_blocks, &kv->layers[l]);
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
    for (int r = 0; kv->rows && r < kv->shape.max_rows; r++) free(kv->rows[r].table);
    free(kv->layers);
    free(kv->rows);
    free(kv->refs);
    free(kv->free_stack);
    free(kv);
}

long tern_kv_blocks_for(const tern_kv *kv, long n)
{
    return (n + kv->shape.block_tokens - 1) / kv->shape.block_tokens;
}

static int free_row_slot(const tern_kv *kv)
{
    for (int r = 0; r < kv->shape.max_rows; r++)
        if (kv->rows[r].len < 0) return r;
    return -1;
}

static tern_status check_room(const tern_kv *kv, long need)
{
    if (free_row_slot(kv) < 0) return tern_error(TERN_E_RANGE, "kv: all %d rows are in use", kv->shape.max_rows);
    if (need > kv->n_free - kv->n_reserved)
        return tern_error(TERN_E_RANGE, "kv: %ld blocks needed, %ld available of %ld", need,
                          kv->n_free - kv->n_reserved, kv->shape.n_blocks);
    return TERN_OK;
}

tern_status tern_kv_row_prepare(tern_kv *kv, long reserve_tokens, long extra_blocks, long table_tokens,
                                tern_kv_prep *p)
{
    memset(p, 0, sizeof *p);
    if (reserve_tokens < 0 || reserve_tokens > kv->shape.max_len)
        return tern_error(TERN_E_RANGE, "kv: %ld tokens exceed the context of %d", reserve_tokens, kv->shape.max_len);
    long need = tern_kv_blocks_for(kv, reserve_tokens) + extra_blocks;
    if (need < 0) return tern_error(TERN_E_INVALID, "kv: a reservation of %ld blocks", need);
    tern_status st = check_room(kv, need);
    if (st) return st;
    long cap = tern_kv_blocks_for(kv, table_tokens < reserve_tokens ? table_tokens : reserve_tokens);
    p->cap = cap > 0 ? (int)cap : 1;
    p->table = tern_fp_malloc(TERN_FAILPOINT_PREPARE, (size_t)p->cap * sizeof *p->table);
    if (!p->table) return tern_error(TERN_E_NOMEM, "kv: out of memory preparing a row");
    p->reserve = need;
    return TERN_OK;
}

int tern_kv_row_commit(tern_kv *kv, tern_kv_prep *p)
{
    int r = free_row_slot(kv);   /* exists: checked by prepare, nothing ran between */
    kv_row *row = &kv->rows[r];
    row->table = p->table;
    row->cap = p->cap;
    row->n_blk = 0;
    row->len = 0;
    row->reserve = p->reserve;
    row->round_len = -1;
    kv->n_reserved += p->reserve;
    kv->rows_used++;
    p->table = NULL;
    return r;
}

void tern_kv_row_discard(tern_kv_prep *p)
{
    free(p->table);
    p->table = NULL;
}

tern_status tern_kv_row_add(tern_kv *kv, long reserve_tokens, int *row)
{
    tern_kv_prep p;
    tern_status st = tern_kv_row_prepare(kv, reserve_tokens, 0, 0, &p);
    if (st) return st;
    *row = tern_kv_row_commit(kv, &p);
    return TERN_OK;
}

tern_status tern_kv_row_adopt(tern_kv *kv, int dst, int src)
{
    if (!tern_kv_row_valid(kv, dst) || !tern_kv_row_valid(kv, src) || dst == src)
        return tern_error(TERN_E_INVALID, "kv: bad fork %d <- %d", dst, src);
    kv_row *d = &kv->rows[dst], *s = &kv->rows[src];
    int bt = kv->shape.block_tokens, shared = (int)tern_kv_blocks_for(kv, s->len);
    long saved = s->len / bt;   /* full blocks dst will never take */
    int partial = s->len % bt != 0;
    if (d->len || d->n_blk) return tern_error(TERN_E_STATE, "kv: fork into row %d, which is not empty", dst);
    if (d->cap < shared || d->reserve < saved + partial)
        return tern_error(TERN_E_STATE, "kv: row %d was not prepared for a fork of %d tokens", dst, s->len);
    memcpy(d->table, s->table, (size_t)shared * sizeof *d->table);
    for (int b = 0; b < shared; b++) kv->refs[d->table[b]]++;
    d->n_blk = shared;
    d->len = s->len;
    d->reserve -= saved;
    kv->n_reserved -= saved;
    if (partial) {
        d->reserve--;
        s->reserve++;
    }
    return TERN_OK;
}

static void block_release(tern_kv *kv, int b)
{
    if (--kv->refs[b] == 0) kv->free_stack[kv->n_free++] = b;
}

static int block_take(tern_kv *kv, kv_row *r)
{
    int b = kv->free_stack[--kv->n_free];
    kv->refs[b] = 1;
    r->reserve--;
    kv->n_reserved--;
    return b;
}

void tern_kv_row_remove(tern_kv *kv, int row)
{
    if (!tern_kv_row_valid(kv, row)) return;
    kv_row *r = &kv->rows[row];
    for (int b = 0; b < r->n_blk; b++) block_release(kv, r->table[b]);
    kv->n_reserved -= r->reserve;
    free(r->table);
    memset(r, 0, sizeof *r);
    r->len = -1;
    kv->rows_used--;
}

int tern_kv_row_valid(const tern_kv *kv, int row)
{
    return row >= 0 && row < kv->shape.max_rows && kv->rows[row].len >= 0;
}

int tern_kv_offset(const tern_kv *kv, int row)
{
    return tern_kv_row_valid(kv, row) ? kv->rows[row].len : -1;
}

int tern_kv_max_len(const tern_kv *kv) { return kv->shape.max_len; }

tern_status tern_kv_trim(tern_kv *kv, int row, int n)
{
    if (!tern_kv_row_valid(kv, row)) return tern_error(TERN_E_INVALID, "kv: row %d is not in use", row);
    kv_row *r = &kv->rows[row];
    if (n < 0 || n > r->len) return tern_error(TERN_E_RANGE, "kv: cannot trim %d of %d tokens", n, r->len);
    r->len -= n;
    return TERN_OK;
}

/* Blocks row r must take to hold n more tokens (copy on write included). */
static long grow_need(const tern_kv *kv, const kv_row *r, int n, int *cow)
{
    int bt = kv->shape.block_tokens;
    long want = tern_kv_blocks_for(kv, (long)r->len + n);
    *cow = n > 0 && r->len % bt != 0 && kv->refs[r->table[r->len / bt]] > 1;
    return (want > r->n_blk ? want - r->n_blk : 0) + *cow;
}

tern_status tern_kv_grow(tern_kv *kv, const int *rows, const int *n_new, int n_rows)
{
    /* Fallible part first: checks and table capacity (a larger table changes
     * nothing visible). */
    for (int i = 0; i < n_rows; i++) {
        if (!tern_kv_row_valid(kv, rows[i])) return tern_error(TERN_E_INVALID, "kv: row %d is not in use", rows[i]);
        kv_row *r = &kv->rows[rows[i]];
        int cow;
        if (n_new[i] < 0 || n_new[i] > kv->shape.max_len - r->len)
            return tern_error(TERN_E_RANGE, "kv: row %d would hold %ld tokens; the context is %d", rows[i],
                              (long)r->len + n_new[i], kv->shape.max_len);
        long need = grow_need(kv, r, n_new[i], &cow);
        if (need > r->reserve)
            return tern_error(TERN_E_RANGE, "kv: row %d needs %ld blocks beyond its reservation of %ld", rows[i],
                              need, r->reserve);
        long want = tern_kv_blocks_for(kv, (long)r->len + n_new[i]);
        if (want > r->cap) {
            long cap = (long)r->cap * 2 > want ? (long)r->cap * 2 : want;
            int *t = tern_fp_realloc(TERN_FAILPOINT_GROW, r->table, (size_t)cap * sizeof *t);
            if (!t) return tern_error(TERN_E_NOMEM, "kv: out of memory growing row %d", rows[i]);
            r->table = t;
            r->cap = (int)cap;
        }
    }
    /* Cannot fail from here: every block comes out of a reservation. */
    int bt = kv->shape.block_tokens;
    for (int i = 0; i < n_rows; i++) {
        kv_row *r = &kv->rows[rows[i]];
        int cow;
        grow_need(kv, r, n_new[i], &cow);
        if (cow) {
            int at = r->len / bt, old = r->table[at], nb = block_take(kv, r);
            for (int l = 0; l < kv->shape.n_layers; l++)
                kv->layers[l]->vt->copy_block(kv->layers[l], nb, old, r->len % bt);
            block_release(kv, old);
            r->table[at] = nb;
        }
        long want = tern_kv_blocks_for(kv, (long)r->len + n_new[i]);
        while (r->n_blk < want) r->table[r->n_blk++] = block_take(kv, r);
    }
    return TERN_OK;
}

void tern_kv_advance(tern_kv *kv, int row, int n)
{
    if (tern_kv_row_valid(kv, row)) kv->rows[row].len += n;
}

const int *tern_kv_table(const tern_kv *kv, int row) { return kv->rows[row].table; }

/* Opens a round on every layer of row; undoes the layers already opened
 * when one cannot. */
static tern_status layers_begin(tern_kv *kv, int row)
{
    for (int l = 0; l < kv->shape.n_layers; l++) {
        const tern_kv_vtable *vt = kv->layers[l]->vt;
        tern_status st = vt->round_begin ? vt->round_begin(kv->layers[l], row, kv->rows[row].len) : TERN_OK;
        if (st) {
            while (l-- > 0)
                if (kv->layers[l]->vt->round_rollback) kv->layers[l]->vt->round_rollback(kv->layers[l], row, 0);
            return st;
        }
    }
    return TERN_OK;
}

static void layers_end(tern_kv *kv, int row, int keep /* < 0: commit */)
{
    for (int l = 0; l < kv->shape.n_layers; l++) {
        const tern_kv_vtable *vt = kv->layers[l]->vt;
        if (keep < 0 && vt->round_commit) vt->round_commit(kv->layers[l], row);
        else if (keep >= 0 && vt->round_rollback) vt->round_rollback(kv->layers[l], row, keep);
    }
}

tern_status tern_kv_round_begin(tern_kv *kv, int row)
{
    return tern_kv_round_begin_rows(kv, &row, 1);
}

tern_status tern_kv_round_commit(tern_kv *kv, int row)
{
    return tern_kv_round_end_rows(kv, &row, NULL, 1);
}

tern_status tern_kv_round_rollback(tern_kv *kv, int row, int keep)
{
    return tern_kv_round_end_rows(kv, &row, &keep, 1);
}

tern_status tern_kv_round_begin_rows(tern_kv *kv, const int *rows, int n)
{
    for (int i = 0; i < n; i++) {
        if (!tern_kv_row_valid(kv, rows[i]) || kv->rows[rows[i]].round_len >= 0)
            return tern_error(TERN_E_STATE, "kv: row %d cannot begin a round", rows[i]);
        for (int j = 0; j < i; j++)
            if (rows[j] == rows[i]) return tern_error(TERN_E_INVALID, "kv: row %d appears twice", rows[i]);
    }
    for (int i = 0; i < n; i++) {
        tern_status st = layers_begin(kv, rows[i]);
        if (st) {
            /* All or nothing: the rows already opened are closed again. */
            while (i-- > 0) {
                layers_end(kv, rows[i], 0);
                kv->rows[rows[i]].round_len = -1;
            }
            return st;
        }
        kv->rows[rows[i]].round_len = kv->rows[rows[i]].len;
    }
    return TERN_OK;
}

tern_status tern_kv_round_end_rows(tern_kv *kv, const int *rows, const int *keep, int n)
{
    for (int i = 0; i < n; i++) {
        if (!tern_kv_row_valid(kv, rows[i]) || kv->rows[rows[i]].round_len < 0)
            return tern_error(TERN_E_STATE, "kv: row %d has no open round", rows[i]);
        const kv_row *r = &kv->rows[rows[i]];
        if (keep && (keep[i] < 0 || keep[i] > r->len - r->round_len))
            return tern_error(TERN_E_RANGE, "kv: rollback keeps %d of %d round tokens", keep[i], r->len - r->round_len);
    }
    /* A rollback is a length cut: the blocks past it stay attached (they are
     * this row's alone) and are written again by the next tokens. */
    for (int i = 0; i < n; i++) {
        kv_row *r = &kv->rows[rows[i]];
        layers_end(kv, rows[i], keep ? keep[i] : -1);
        if (keep) r->len = r->round_len + keep[i];
        r->round_len = -1;
    }
    return TERN_OK;
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

void tern_kv_get_stats(const tern_kv *kv, tern_kv_stats *out)
{
    out->blocks_total = kv->shape.n_blocks;
    out->blocks_free = kv->n_free;
    out->blocks_reserved = kv->n_reserved;
    out->block_tokens = kv->shape.block_tokens;
    out->rows_used = kv->rows_used;
}

void tern_kv_block_hold(tern_kv *kv, int b) { kv->refs[b]++; }

void tern_kv_block_release(tern_kv *kv, int b) { block_release(kv, b); }

tern_status tern_kv_row_attach(tern_kv *kv, int row, const int *blocks, int n)
{
    if (!tern_kv_row_valid(kv, row)) return tern_error(TERN_E_INVALID, "kv: row %d is not in use", row);
    kv_row *r = &kv->rows[row];
    if (r->len || r->n_blk || n > r->cap)
        return tern_error(TERN_E_STATE, "kv: row %d cannot take %d shared blocks", row, n);
    for (int i = 0; i < n; i++) {
        r->table[i] = blocks[i];
        kv->refs[blocks[i]]++;
    }
    r->n_blk = n;
    r->len = n * kv->shape.block_tokens;
    return TERN_OK;
}

int tern_kv_block_refs(const tern_kv *kv, int b)
{
    return b >= 0 && b < kv->shape.n_blocks ? kv->refs[b] : -1;
}

tern_status tern_kv_block_alloc(tern_kv *kv, int *b)
{
    if (kv->n_free - kv->n_reserved < 1) return tern_error(TERN_E_RANGE, "kv: no free block");
    *b = kv->free_stack[--kv->n_free];
    kv->refs[*b] = 1;
    return TERN_OK;
}

size_t tern_kv_block_bytes(const tern_kv *kv)
{
    size_t n = 0;
    for (int l = 0; l < kv->shape.n_layers; l++) n += kv->layers[l]->vt->block_bytes(kv->layers[l]);
    return n;
}

void tern_kv_block_save(const tern_kv *kv, int b, void *dst)
{
    char *d = dst;
    for (int l = 0; l < kv->shape.n_layers; l++) {
        kv->layers[l]->vt->block_save(kv->layers[l], b, d);
        d += kv->layers[l]->vt->block_bytes(kv->layers[l]);
    }
}

void tern_kv_block_load(tern_kv *kv, int b, const void *src)
{
    const char *s = src;
    for (int l = 0; l < kv->shape.n_layers; l++) {
        kv->layers[l]->vt->block_load(kv->layers[l], b, s);
        s += kv->layers[l]->vt->block_bytes(kv->layers[l]);
    }
}

void tern_kv_geometry(const tern_kv *kv, char *out, size_t cap)
{
    snprintf(out, cap, "%s f32 L%d H%d D%d B%d", tern_kv_signature(kv), kv->shape.n_layers, kv->shape.n_kv_heads,
             kv->shape.head_dim, kv->shape.block_tokens);
}

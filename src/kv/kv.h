/* KV state: a pool of fixed-size, reference-counted blocks shared by rows.
 *
 * The pool is allocated once (n_blocks blocks of block_tokens positions) and
 * every layer keeps its keys and values for a block in the same block id, so
 * a row is one block table plus a length, valid in every layer. Attention
 * reads a row's blocks in table order. A forked row shares its source's
 * blocks (reference counts); the partial last block is copied on the first
 * write by either side. Joining or leaving the batch copies nothing.
 *
 * What a block holds and how attention reads it is the layer layout's
 * business (tern_kv_vtable: plain float32 now; quantized, sliding window or
 * per-row recurrent state later), so the scheduler never sees a layout.
 *
 * Transactions:
 *  - admission: tern_kv_row_prepare reserves every block the row
 *    may take and build its table without touching live rows (may fail);
 *    tern_kv_row_commit links the row in and cannot fail; tern_kv_row_discard
 *    returns everything. At most one prepared row is outstanding at a time.
 *  - growth: tern_kv_grow makes room for the next tokens of a set of rows; its
 *    fallible part runs before any live state changes, and blocks come from
 *    the rows' reservations, so a failure leaves every row as it was.
 *  - speculation: tern_kv_round_begin / _commit / _rollback(keep) per row, or
 *    the row-wise forms over several rows at once.
 *
 * Ownership: tern_kv_create returns an owned object; views are borrowed and
 * valid until the next grow / row operation. Not thread-safe: one owner (the
 * scheduler, or a single generate loop) drives it. */
#ifndef TERN_KV_KV_H
#define TERN_KV_KV_H

#include <stddef.h>

#include "tern/status.h"

enum { TERN_KV_BLOCK_TOKENS = 32 };

typedef struct tern_kv_layer tern_kv_layer;

/* Keys and values of one row in one layer, as attention reads them: block b
 * of the row (positions [b*block_tokens, (b+1)*block_tokens)) holds, for KV
 * head h, the contiguous matrix [block_tokens, head_dim] at
 * k + table[b] * block_stride + h * head_stride (likewise v). */
typedef struct {
    const float *k, *v;
    const int *table;       /* borrowed */
    int len;                /* positions visible */
    int block_tokens;
    long block_stride;      /* floats per block (all heads) */
    long head_stride;       /* floats per head within a block */
} tern_kv_view;

typedef struct {
    const char *(*signature)(const tern_kv_layer *l);
    size_t (*bytes_per_token)(const tern_kv_layer *l);
    /* Stores n positions starting at pos of the row whose blocks are table;
     * k and v are [n, n_kv_heads*head_dim] (borrowed). Cannot fail: the
     * blocks exist (tern_kv_grow) and belong to that row alone. */
    void (*write)(tern_kv_layer *l, const int *table, int pos, int n, const float *k, const float *v);
    /* Copies the first n positions of block src into block dst. */
    void (*copy_block)(tern_kv_layer *l, int dst, int src, int n);
    void (*view)(const tern_kv_layer *l, const int *table, int len, tern_kv_view *out);
    /* Speculation rounds for what a layer keeps besides per-position blocks
     * (a recurrent state snapshot, a quantization residue): begin at the
     * row's current length len, then commit or roll back to len + keep.
     * Per-position layouts (plain) keep nothing: the pool's length cut is the
     * whole rollback, and they leave all three NULL. begin may fail
     * (TERN_E_NOMEM, TERN_E_UNSUPPORTED); the other two cannot. */
    tern_status (*round_begin)(tern_kv_layer *l, int row, int len);
    void (*round_commit)(tern_kv_layer *l, int row);
    void (*round_rollback)(tern_kv_layer *l, int row, int keep);
    /* Serialization of one block (the prompt cache on disk): its bytes in
     * this layer, and copies out of and into block b. */
    size_t (*block_bytes)(const tern_kv_layer *l);
    void (*block_save)(const tern_kv_layer *l, int b, void *dst);
    void (*block_load)(tern_kv_layer *l, int b, const void *src);
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
    int block_tokens;  /* 0 = TERN_KV_BLOCK_TOKENS */
    long n_blocks;     /* 0 = enough for max_rows rows of max_len */
} tern_kv_shape;

/* A prepared row (admission), filled by tern_kv_row_prepare: owned by the
 * caller until commit or discard. */
typedef struct {
    int *table;        /* owned */
    int cap;           /* table capacity */
    long reserve;      /* blocks the row may take */
} tern_kv_prep;

/* Creates a pool of plain float32 layouts for every layer; the block
 * storage is mapped lazily, so unused blocks cost address space only. */
tern_status tern_kv_create(const tern_kv_shape *shape, tern_kv **out);
/* The same pool with each layer's layout made by layer_create(arg, layer,
 * the completed shape, out) (a layout in device memory). arg borrowed. */
typedef tern_status (*tern_kv_layer_ctor)(void *arg, int layer, const tern_kv_shape *s, tern_kv_layer **out);
tern_status tern_kv_create_layers(const tern_kv_shape *shape, tern_kv_layer_ctor layer_create, void *arg,
                                  tern_kv **out);
void tern_kv_free(tern_kv *kv);

/* Blocks needed to hold n positions. */
long tern_kv_blocks_for(const tern_kv *kv, long n);
/* Prepares a new empty row that may grow to reserve_tokens positions, plus
 * extra_blocks more in its reservation (see tern_kv_row_adopt; negative:
 * that many fewer, see tern_kv_row_attach). Its block
 * table starts with room for table_tokens positions (at least one block)
 * and grows with the row (tern_kv_grow). */
tern_status tern_kv_row_prepare(tern_kv *kv, long reserve_tokens, long extra_blocks, long table_tokens,
                                tern_kv_prep *p);
/* Links a prepared row in; returns its id. Cannot fail. */
int tern_kv_row_commit(tern_kv *kv, tern_kv_prep *p);
void tern_kv_row_discard(tern_kv_prep *p);
/* prepare + commit. */
tern_status tern_kv_row_add(tern_kv *kv, long reserve_tokens, int *row);
/* Fork: the empty row dst takes row src's positions by sharing its blocks
 * (no copy). dst was prepared for its final length plus one extra block;
 * the blocks it no longer needs leave its reservation, and the extra one
 * moves to src, which may have to copy the shared partial block on its next
 * write. TERN_E_STATE when dst is not empty or its reservation is short. */
tern_status tern_kv_row_adopt(tern_kv *kv, int dst, int src);
/* Releases the row's blocks and the rest of its reservation. */
void tern_kv_row_remove(tern_kv *kv, int row);
int tern_kv_row_valid(const tern_kv *kv, int row);
/* Tokens already stored for row (= position of the next token); -1 if free. */
int tern_kv_offset(const tern_kv *kv, int row);
int tern_kv_max_len(const tern_kv *kv);
/* Drops the last n tokens of row (a length cut). */
tern_status tern_kv_trim(tern_kv *kv, int row, int n);

/* Makes room for n_new[i] more tokens of rows[i]: copies a shared partial
 * block on write and attaches blocks from each row's reservation. On failure
 * nothing visible has changed. */
tern_status tern_kv_grow(tern_kv *kv, const int *rows, const int *n_new, int n_rows);
/* Records that n tokens were stored for row (after a successful forward). */
void tern_kv_advance(tern_kv *kv, int row, int n);
/* The row's blocks, for the forward's writes (borrowed). */
const int *tern_kv_table(const tern_kv *kv, int row);

/* Speculation rounds: begin marks the row's length; commit keeps everything
 * appended since; rollback(keep) keeps only the first keep of those tokens. */
tern_status tern_kv_round_begin(tern_kv *kv, int row);
tern_status tern_kv_round_commit(tern_kv *kv, int row);
tern_status tern_kv_round_rollback(tern_kv *kv, int row, int keep);
/* Row-wise forms: keep NULL = commit every row; else rollback rows[i] to keep[i]. */
tern_status tern_kv_round_begin_rows(tern_kv *kv, const int *rows, int n);
tern_status tern_kv_round_end_rows(tern_kv *kv, const int *rows, const int *keep, int n);

tern_kv_layer *tern_kv_layer_at(tern_kv *kv, int layer);
size_t tern_kv_bytes_per_token(const tern_kv *kv);
const char *tern_kv_signature(const tern_kv *kv);

typedef struct {
    long blocks_total, blocks_free, blocks_reserved;   /* reserved: promised, not yet taken */
    int block_tokens;
    int rows_used;
} tern_kv_stats;
void tern_kv_get_stats(const tern_kv *kv, tern_kv_stats *out);
/* Reference count of block b (tests). */
int tern_kv_block_refs(const tern_kv *kv, int b);

/* Holding blocks outside rows (the prompt cache): a held block keeps its
 * contents until released. */
void tern_kv_block_hold(tern_kv *kv, int b);
void tern_kv_block_release(tern_kv *kv, int b);
/* The empty row takes n full blocks (held by their owner, shared from now
 * on) as its first n * block_tokens positions; it was prepared with
 * extra_blocks = -n, the blocks it will not take. TERN_E_STATE when the row
 * is not empty or its table is too small. */
tern_status tern_kv_row_attach(tern_kv *kv, int row, const int *blocks, int n);
/* A free block nobody reserved, held once by the caller (release it with
 * tern_kv_block_release); TERN_E_RANGE when there is none. */
tern_status tern_kv_block_alloc(tern_kv *kv, int *b);
/* One block's bytes over every layer, and copies out of / into block b. */
size_t tern_kv_block_bytes(const tern_kv *kv);
void tern_kv_block_save(const tern_kv *kv, int b, void *dst);
void tern_kv_block_load(tern_kv *kv, int b, const void *src);
/* What a block holds, for files that must only be read back by the same
 * layout: "kv:plain f32 L<layers> H<kv heads> D<head dim> B<block tokens>". */
void tern_kv_geometry(const tern_kv *kv, char *out, size_t cap);

/* Plain layout constructor (kv_plain.c). */
tern_status tern_kv_plain_layer_create(int n_kv_heads, int head_dim, int block_tokens, long n_blocks,
                                       tern_kv_layer **out);

#endif

/* Plain layout: float32 keys and values. One layer keeps two arrays of
 * [n_blocks][n_kv_heads][block_tokens][head_dim], mapped lazily (pages are
 * committed when a block is first written), so that one head's keys within a
 * block are a contiguous [block_tokens, head_dim] matrix for attention. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kv/kv.h"

typedef struct {
    tern_kv_layer base;
    int n_kv_heads, head_dim, bt;
    long n_blocks;
    float *k, *v;
    size_t bytes;       /* of each mapping */
} plain_layer;

static const char *plain_signature(const tern_kv_layer *l) { (void)l; return "kv:plain"; }

static size_t plain_bytes_per_token(const tern_kv_layer *l)
{
    const plain_layer *p = (const plain_layer *)l;
    return 2 * sizeof(float) * (size_t)p->n_kv_heads * (size_t)p->head_dim;
}

static long block_stride(const plain_layer *p) { return (long)p->n_kv_heads * p->bt * p->head_dim; }

static void plain_write(tern_kv_layer *l, const int *table, int pos, int n, const float *k, const float *v)
{
    plain_layer *p = (plain_layer *)l;
    size_t hd = (size_t)p->head_dim, H = (size_t)p->n_kv_heads;
    /* k and v arrive token-major [n][H][hd]; scatter them per block and head. */
    for (int t = 0; t < n; t++) {
        int at = pos + t;
        long base = (long)table[at / p->bt] * block_stride(p) + (long)(at % p->bt) * (long)hd;
        for (size_t h = 0; h < H; h++) {
            long dst = base + (long)(h * (size_t)p->bt * hd);
            memcpy(p->k + dst, k + ((size_t)t * H + h) * hd, hd * sizeof *k);
            memcpy(p->v + dst, v + ((size_t)t * H + h) * hd, hd * sizeof *v);
        }
    }
}

static void plain_copy_block(tern_kv_layer *l, int dst, int src, int n)
{
    plain_layer *p = (plain_layer *)l;
    size_t hd = (size_t)p->head_dim;
    for (int h = 0; h < p->n_kv_heads; h++) {
        long d = (long)dst * block_stride(p) + (long)h * p->bt * (long)hd;
        long s = (long)src * block_stride(p) + (long)h * p->bt * (long)hd;
        memcpy(p->k + d, p->k + s, (size_t)n * hd * sizeof(float));
        memcpy(p->v + d, p->v + s, (size_t)n * hd * sizeof(float));
    }
}

static void plain_view(const tern_kv_layer *l, const int *table, int len, tern_kv_view *out)
{
    const plain_layer *p = (const plain_layer *)l;
    *out = (tern_kv_view){p->k, p->v, table, len, p->bt, block_stride(p), (long)p->bt * p->head_dim};
}

static size_t plain_block_bytes(const tern_kv_layer *l)
{
    return 2 * (size_t)block_stride((const plain_layer *)l) * sizeof(float);
}

static void plain_block_save(const tern_kv_layer *l, int b, void *dst)
{
    const plain_layer *p = (const plain_layer *)l;
    size_t n = (size_t)block_stride(p);
    memcpy(dst, p->k + (size_t)b * n, n * sizeof(float));
    memcpy((float *)dst + n, p->v + (size_t)b * n, n * sizeof(float));
}

static void plain_block_load(tern_kv_layer *l, int b, const void *src)
{
    plain_layer *p = (plain_layer *)l;
    size_t n = (size_t)block_stride(p);
    memcpy(p->k + (size_t)b * n, src, n * sizeof(float));
    memcpy(p->v + (size_t)b * n, (const float *)src + n, n * sizeof(float));
}

static void plain_destroy(tern_kv_layer *l)
{
    plain_layer *p = (plain_layer *)l;
    if (p->k) munmap(p->k, p->bytes);
    if (p->v) munmap(p->v, p->bytes);
    memset(p, 0, sizeof *p);
    free(p);
}

static const tern_kv_vtable plain_vt = {
    /* No rounds of their own: a round is the pool's length cut. */
    .signature = plain_signature,
    .bytes_per_token = plain_bytes_per_token,
    .write = plain_write,
    .copy_block = plain_copy_block,
    .view = plain_view,
    .block_bytes = plain_block_bytes,
    .block_save = plain_block_save,
    .block_load = plain_block_load,
    .destroy = plain_destroy,
};

static float *map_floats(size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

tern_status tern_kv_plain_layer_create(int n_kv_heads, int head_dim, int block_tokens, long n_blocks,
                                       tern_kv_layer **out)
{
    *out = NULL;
    plain_layer *p = calloc(1, sizeof *p);
    if (!p) return tern_error(TERN_E_NOMEM, "kv: out of memory");
    p->base.vt = &plain_vt;
    p->n_kv_heads = n_kv_heads;
    p->head_dim = head_dim;
    p->bt = block_tokens;
    p->n_blocks = n_blocks;
    p->bytes = (size_t)n_blocks * (size_t)block_stride(p) * sizeof(float);
    p->k = map_floats(p->bytes);
    p->v = p->k ? map_floats(p->bytes) : NULL;
    if (!p->k || !p->v) {
        size_t mb = p->bytes >> 20;
        plain_destroy(&p->base);
        return tern_error(TERN_E_NOMEM, "kv: cannot map %zu MB of KV blocks", 2 * mb);
    }
    *out = &p->base;
    return TERN_OK;
}

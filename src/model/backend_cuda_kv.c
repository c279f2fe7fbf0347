/* The plain KV layout in device memory: the second implementation of the
 * layer vtable (kv/kv.h), for models on the CUDA backend. One layer keeps
 * two device arrays [n_blocks][n_kv_heads][block_tokens][head_dim] float32,
 * the host layout's, indexed by the host pool's block ids, so a row's table
 * is valid on both sides and saved blocks (the prompt cache on disk) have
 * the host layout's bytes. The forward's prologue stores keys and values
 * straight from the GPU; write is the host-side path (tests, tools). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "core/exec.h"
#include "model/backend.h"

typedef struct {
    tern_kv_layer base;
    tern_cuda *c;            /* borrowed */
    int n_kv_heads, head_dim, bt;
    long n_blocks;
    float *k, *v;            /* owned device memory */
} cuda_layer;

static long bstride(const cuda_layer *p) { return (long)p->n_kv_heads * p->bt * p->head_dim; }

static const char *cl_signature(const tern_kv_layer *l) { (void)l; return "kv:plain"; }

static size_t cl_bytes_per_token(const tern_kv_layer *l)
{
    const cuda_layer *p = (const cuda_layer *)l;
    return 2 * sizeof(float) * (size_t)p->n_kv_heads * (size_t)p->head_dim;
}

/* The vtable's hooks cannot fail; a device error here is reported by the
 * next op on the stream (every op of the pass checks it). */
static void cl_write(tern_kv_layer *l, const int *table, int pos, int n, const float *k, const float *v)
{
    cuda_layer *p = (cuda_layer *)l;
    size_t hd = (size_t)p->head_dim, H = (size_t)p->n_kv_heads;
    for (int t = 0; t < n; t++) {
        int at = pos + t;
        long base = (long)table[at / p->bt] * bstride(p) + (long)(at % p->bt) * (long)hd;
        for (size_t h = 0; h < H; h++) {
            long dst = base + (long)(h * (size_t)p->bt * hd);
            tern_cuda_upload(p->c, p->k + dst, k + ((size_t)t * H + h) * hd, hd * sizeof *k);
            tern_cuda_upload(p->c, p->v + dst, v + ((size_t)t * H + h) * hd, hd * sizeof *v);
        }
    }
}

static void cl_copy_block(tern_kv_layer *l, int dst, int src, int n)
{
    cuda_layer *p = (cuda_layer *)l;
    size_t hd = (size_t)p->head_dim;
    for (int h = 0; h < p->n_kv_heads; h++) {
        long d = (long)dst * bstride(p) + (long)h * p->bt * (long)hd;
        long s = (long)src * bstride(p) + (long)h * p->bt * (long)hd;
        tern_cuda_copy(p->c, p->k + d, p->k + s, (size_t)n * hd * sizeof(float));
        tern_cuda_copy(p->c, p->v + d, p->v + s, (size_t)n * hd * sizeof(float));
    }
}

static void cl_view(const tern_kv_layer *l, const int *table, int len, tern_kv_view *out)
{
    const cuda_layer *p = (const cuda_layer *)l;
    *out = (tern_kv_view){p->k, p->v, table, len, p->bt, bstride(p), (long)p->bt * p->head_dim};
}

static size_t cl_block_bytes(const tern_kv_layer *l)
{
    return 2 * (size_t)bstride((const cuda_layer *)l) * sizeof(float);
}

static void cl_block_save(const tern_kv_layer *l, int b, void *dst)
{
    const cuda_layer *p = (const cuda_layer *)l;
    size_t n = (size_t)bstride(p);
    tern_cuda_download(p->c, dst, p->k + (size_t)b * n, n * sizeof(float));
    tern_cuda_download(p->c, (float *)dst + n, p->v + (size_t)b * n, n * sizeof(float));
}

static void cl_block_load(tern_kv_layer *l, int b, const void *src)
{
    cuda_layer *p = (cuda_layer *)l;
    size_t n = (size_t)bstride(p);
    tern_cuda_upload(p->c, p->k + (size_t)b * n, src, n * sizeof(float));
    tern_cuda_upload(p->c, p->v + (size_t)b * n, (const float *)src + n, n * sizeof(float));
}

static void cl_destroy(tern_kv_layer *l)
{
    cuda_layer *p = (cuda_layer *)l;
    tern_cuda_free(p->c, p->k);
    tern_cuda_free(p->c, p->v);
    free(p);
}

static const tern_kv_vtable cuda_vt = {
    /* No rounds of their own: a round is the pool's length cut. */
    .signature = cl_signature,
    .bytes_per_token = cl_bytes_per_token,
    .write = cl_write,
    .copy_block = cl_copy_block,
    .view = cl_view,
    .block_bytes = cl_block_bytes,
    .block_save = cl_block_save,
    .block_load = cl_block_load,
    .destroy = cl_destroy,
};

static tern_status layer_create(void *arg, int layer, const tern_kv_shape *s, tern_kv_layer **out)
{
    (void)layer;
    *out = NULL;
    cuda_layer *p = calloc(1, sizeof *p);
    if (!p) return tern_error(TERN_E_NOMEM, "kv: out of memory");
    p->base.vt = &cuda_vt;
    p->c = arg;
    p->n_kv_heads = s->n_kv_heads;
    p->head_dim = s->head_dim;
    p->bt = s->block_tokens;
    p->n_blocks = s->n_blocks;
    size_t bytes = (size_t)s->n_blocks * (size_t)bstride(p) * sizeof(float);
    tern_status st = tern_cuda_alloc(p->c, bytes, (void **)&p->k);
    if (!st) st = tern_cuda_alloc(p->c, bytes, (void **)&p->v);
    if (st) {
        cl_destroy(&p->base);
        return tern_error(TERN_E_NOMEM, "kv: cannot allocate %zu MB of KV blocks on the GPU", 2 * bytes >> 20);
    }
    *out = &p->base;
    return TERN_OK;
}

tern_status tern_backend_cuda_kv_create(const tern_model *m, const tern_kv_shape *s, tern_kv **out)
{
    tern_kv_shape d = *s;
    int bt = d.block_tokens ? d.block_tokens : TERN_KV_BLOCK_TOKENS;
    if (bt % TERN_CUDA_ATTN_SPLIT)
        return tern_error(TERN_E_UNSUPPORTED, "kv: blocks of %d positions on the GPU (a multiple of %d is needed)", bt,
                          (int)TERN_CUDA_ATTN_SPLIT);
    return tern_kv_create_layers(&d, layer_create, m->exec->cuda, out);
}

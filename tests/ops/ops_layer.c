/* The decode layers of the timing harnesses (ops_time.c, ops_timeline.c):
 * the Qwen3-8B shape's four one-row products over copies of a layer's
 * weights made on the device. */
#include "ops_harness.h"

void ops_layers_make(ops_layers *s, unsigned seed)
{
    for (int l = 0; l < OPS_LAYERS; l++) {
        s->wqkv[l] = ops_dev_random((long)OPS_QKV * OPS_D, TERN_DT_BF16, seed + l, 0.05f);
        s->wo[l] = ops_dev_random((long)OPS_D * OPS_D, TERN_DT_BF16, seed + 10 + l, 0.05f);
        s->wg[l] = ops_dev_random((long)OPS_F * OPS_D, TERN_DT_BF16, seed + 20 + l, 0.05f);
        s->wu[l] = ops_dev_random((long)OPS_F * OPS_D, TERN_DT_BF16, seed + 30 + l, 0.05f);
        s->wd[l] = ops_dev_random((long)OPS_D * OPS_F, TERN_DT_BF16, seed + 40 + l, 0.05f);
    }
    s->x = ops_dev_random(OPS_D, TERN_DT_F32, seed + 50, 0.05f);
    s->nw = ops_dev_random(OPS_D, TERN_DT_F32, seed + 51, 0.05f);
    s->qkv = ops_dev_zero(OPS_QKV * 4);
    s->h = ops_dev_zero(OPS_F * 4);
    s->ntmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(OPS_F));
}

/* Rewrites every weight in place into the tiled layout (1 when done). */
int ops_layers_tile(ops_layers *s)
{
    static const long rows[5] = {OPS_QKV, OPS_D, OPS_F, OPS_F, OPS_D};
    static const int cols[5] = {OPS_D, OPS_D, OPS_D, OPS_D, OPS_F};
    tern_cuda_tile_req rq[5 * OPS_LAYERS];
    int n = 0;
    for (int l = 0; l < OPS_LAYERS; l++) {
        void *w[5] = {s->wqkv[l], s->wo[l], s->wg[l], s->wu[l], s->wd[l]};
        for (int i = 0; i < 5; i++) rq[n++] = (tern_cuda_tile_req){w[i], rows[i], cols[i]};
    }
    return ops_ok(tern_cuda_tile_weights(ops_cuda, rq, n), "tile the layers' weights");
}

void ops_layers_free(ops_layers *s)
{
    for (int l = 0; l < OPS_LAYERS; l++) {
        tern_cuda_free(ops_cuda, s->wqkv[l]); tern_cuda_free(ops_cuda, s->wo[l]); tern_cuda_free(ops_cuda, s->wg[l]);
        tern_cuda_free(ops_cuda, s->wu[l]); tern_cuda_free(ops_cuda, s->wd[l]);
    }
    tern_cuda_free(ops_cuda, s->x); tern_cuda_free(ops_cuda, s->nw); tern_cuda_free(ops_cuda, s->qkv);
    tern_cuda_free(ops_cuda, s->h); tern_cuda_free(ops_cuda, s->ntmp);
}

tern_status ops_layer_run(const ops_layers *s, int l, unsigned mask)
{
    tern_status st = TERN_OK;
    if (!st && mask & 1)
        st = tern_cuda_matmul_norm(ops_cuda, s->x, 1, OPS_D, s->nw, 1e-6f, s->wqkv[l], TERN_DT_BF16, OPS_QKV, s->qkv,
                                   OPS_QKV, s->ntmp);
    if (!st && mask & 2)
        st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, s->qkv, 1, OPS_D, s->wo[l], TERN_DT_BF16,
                              OPS_D, s->x, OPS_D, 1, NULL);
    if (!st && mask & 4)
        st = tern_cuda_gate_up_norm(ops_cuda, s->x, 1, OPS_D, s->nw, 1e-6f, s->wg[l], s->wu[l], TERN_DT_BF16, OPS_F,
                                    s->h, s->ntmp);
    if (!st && mask & 8)
        st = tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, s->h, 1, OPS_F, s->wd[l], TERN_DT_BF16,
                              OPS_D, s->x, OPS_D, 1, NULL);
    return st;
}

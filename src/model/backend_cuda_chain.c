/* The CUDA backend's product chains (tern_cuda_chain) for decode passes of
 * one token: the products the forward asks for between two attentions are
 * recorded, not launched, and launched as one chain kernel when the
 * attention (or the head, or any other op) comes. Every output keeps the
 * bits of the one-product path, so a pass may take either way. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "model/backend_cuda_model.h"

/* Sync words for as many launches as a pass of one-product chains could
 * make. */
static int chain_slots(const tern_model *m) { return 4 * m->cfg.n_layers + 8; }

tern_status cuda_chain_setup(tern_model *m)
{
    const tern_model_config *c = &m->cfg;
    cuda_model *d = cm(m);
    d->chain_ok = 0;
    /* Off unless asked for (TERN_CUDA_CHAIN=1): measured slower than the
     * one-product kernels on an H100 (docs/BENCHMARKS.md). */
    const char *e = getenv("TERN_CUDA_CHAIN");
    if (!e || strcmp(e, "1")) return TERN_OK;
    /* The one-row path the chain stands in for: float32 activations, both
     * norms folded, BF16 weights on the tensor cores, no q/k/v bias. */
    if (d->act_bf16 || d->fuse != (FOLD_GATE_UP | FOLD_QKV) || c->ffn % 4 ||
        !tern_cuda_chain_takes(d->c, c->hidden) || !tern_cuda_chain_takes(d->c, c->ffn))
        return TERN_OK;
    for (int l = 0; l < c->n_layers; l++) {
        const tern_layer *L = &m->layers[l];
        if (d->layers[l].bias || L->wq.dt != TERN_DT_BF16 || L->wo.dt != TERN_DT_BF16 ||
            L->mlp.gate.dt != TERN_DT_BF16 || L->mlp.down.dt != TERN_DT_BF16 || L->wo.cols != c->n_heads * c->head_dim ||
            !tern_cuda_chain_takes(d->c, L->wo.cols))
            return TERN_OK;
    }
    size_t bytes = (size_t)chain_slots(m) * tern_cuda_chain_sync_bytes() + 256;
    tern_status st = cuda_dbuf_reserve(d->c, &d->chain_sync, bytes, 1);
    if (!st) st = tern_cuda_host_alloc(d->c, 64, (void **)&d->h_chain_err);
    if (st) return st;
    d->chain_ok = 1;
    return TERN_OK;
}

void cuda_chain_free(cuda_model *d)
{
    tern_cuda_free(d->c, d->chain_sync.d);
    tern_cuda_host_free(d->c, d->h_chain_err);
    d->chain_sync = (dbuf){0};
    d->h_chain_err = NULL;
}

static unsigned *err_word(cuda_model *d)
{
    return (unsigned *)((char *)d->chain_sync.d + d->chain_sync.bytes - 256);
}

void cuda_chain_begin(tern_model *m, const tern_pass *p)
{
    cuda_model *d = cm(m);
    d->chain_pass = d->chain_ok && !d->prof && p->T == 1;
    d->n_pend = 0;
    d->n_chains = 0;
    d->pend_pro = 0;
}

tern_status cuda_chain_flush(tern_model *m)
{
    cuda_model *d = cm(m);
    if (!d->n_pend) return TERN_OK;
    if (d->n_chains >= chain_slots(m))
        return tern_error(TERN_E_INTERNAL, "cuda: more than %d product chains in a pass", chain_slots(m));
    unsigned *sync = (unsigned *)((char *)d->chain_sync.d + (size_t)d->n_chains * tern_cuda_chain_sync_bytes());
    tern_status st = tern_cuda_chain(d->c, d->pend, d->n_pend, sync, err_word(d));
    d->n_chains++;
    d->n_pend = 0;
    return st;
}

tern_status cuda_chain_add(tern_model *m, const tern_cuda_chain_prod *pr)
{
    cuda_model *d = cm(m);
    if (d->n_pend == TERN_CUDA_CHAIN_MAX) {
        tern_status st = cuda_chain_flush(m);
        if (st) return st;
    }
    d->pend[d->n_pend++] = *pr;
    return TERN_OK;
}

tern_status cuda_chain_queue_check(tern_model *m)
{
    cuda_model *d = cm(m);
    if (!d->chain_pass) return TERN_OK;
    return tern_cuda_download_async(d->c, d->h_chain_err, err_word(d), sizeof(unsigned));
}

tern_status cuda_chain_result(tern_model *m)
{
    cuda_model *d = cm(m);
    if (!d->chain_pass || !*d->h_chain_err) return TERN_OK;
    /* The kernel's blocks were not all resident at once (another process
     * on the device, say): later passes take the one-product path, and
     * graphs holding the chain are dropped. */
    d->chain_ok = 0;
    for (int i = 0; i < GRAPH_SLOTS; i++) {
        tern_cuda_graph_free(d->gs[i].g);
        d->gs[i] = (graph_slot){0};
    }
    return tern_error(TERN_E_INTERNAL,
                      "cuda: a decode step's product chain waited 2 s for blocks that never ran (is the GPU shared?); "
                      "later steps run without it");
}

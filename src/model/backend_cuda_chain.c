/* The decode pass's one-row products in chains (tern_cuda_chain): in a
 * pass of one token (M = 1), the o product, gate/up, down and the next
 * layer's q/k/v are queued here instead of launched, and go out as one
 * persistent kernel when an op that is not one of them comes (the
 * attention, the head, any other op) or the chain is full. Each product
 * has the bits of its own kernel, so a row's tokens are the same with the
 * chain, without it, and in passes of other shapes. Off under
 * TERN_CUDA_PROF (which times each op) and TERN_CUDA_CHAIN=0. */
#include "model/backend_cuda_model.h"

int cuda_chain_defer(tern_model *m, int M, const tern_cuda_chain_stage *s)
{
    cuda_model *d = cm(m);
    if (M != 1 || d->prof || !tern_cuda_chain_takes(d->c, s->wdt, s->K)) return 0;
    return 1;
}

tern_status cuda_chain_push(cuda_model *d, const tern_cuda_chain_stage *s)
{
    if (d->npend == TERN_CUDA_CHAIN_MAX) {
        tern_status st = cuda_chain_flush(d);
        if (st) return st;
    }
    d->pend[d->npend++] = *s;
    return TERN_OK;
}

tern_status cuda_chain_flush(cuda_model *d)
{
    int n = d->npend;
    d->npend = 0;
    if (!n) return TERN_OK;
    return tern_cuda_chain(d->c, TERN_CUDA_ACT_F32, d->pend, n, d->chain_eps);
}

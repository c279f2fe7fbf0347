/* The backend boundary of the family forward (llama.c): every op of a pass
 * goes through one table of functions, so the forward reads the same on the
 * CPU and on the GPU and never knows which device runs it.
 *
 * Activation buffers (x, h, qkv, att, g, u) are carved by the forward from
 * the backend's workspace: host memory for the CPU backend, device memory
 * for the CUDA one; the forward only passes them between ops. Weights are
 * the model's tern_weight handles; a backend finds its own copy of them
 * (the CUDA backend uploads them once at load). Host inputs (token ids,
 * positions, block tables) enter at begin; host outputs (logits, hidden
 * states of the wanted positions) leave at head.
 *
 * The CPU backend is the reference: its ops are the calls the forward made
 * before the boundary existed, in the same order, so its results are
 * bit-identical to them. */
#ifndef TERN_MODEL_BACKEND_H
#define TERN_MODEL_BACKEND_H

#include "kv/kv.h"
#include "model/forward.h"
#include "model/model_internal.h"

/* One forward pass as the ops see it (filled by the forward, then begin). */
typedef struct {
    tern_kv *kv;              /* borrowed */
    const tern_batch *b;      /* borrowed */
    int T;                    /* new tokens */
    int n_out;                /* positions asked for */
    void *host;               /* the backend's per-pass host area (pass_bytes) in the workspace */
    /* Sampling summaries (tern_forward_ex; backends with summarizes set):
     * need[i] = 0 leaves output i's logits row unwritten, and sum[i] is
     * filled for every output. Both NULL: logits of every output. */
    const uint8_t *need;      /* borrowed, [n_out] or NULL */
    tern_logit_summary *sum;  /* borrowed, [n_out] or NULL */
} tern_pass;

struct tern_backend_vt {
    const char *name;
    /* head computes tern_logit_summary on the device (p->sum). */
    int summarizes;
    /* Bytes of the per-pass area the backend wants in the workspace for T
     * tokens (laid out first, host memory for the CPU backend). */
    size_t (*pass_bytes)(const tern_model *m, int T);
    /* The activation workspace grown to bytes (caller holds the exec lock);
     * *out borrowed until the next call. */
    tern_status (*workspace)(tern_model *m, size_t bytes, void **out);
    /* Takes the pass's host inputs (ids, positions, tables); host is the
     * per-pass area's address on the host (CPU) or NULL. */
    tern_status (*begin)(tern_model *m, tern_pass *p);
    /* x[T, H] = embedding rows of the pass's tokens. */
    tern_status (*embed)(tern_model *m, tern_pass *p, float *x);
    /* y[n, d] = rmsnorm(x) * w (y may alias x). */
    tern_status (*rmsnorm)(tern_model *m, const float *x, float *y, int n, int d, const tern_weight *w);
    /* y[M, w->rows] = x[M, w->cols] . w^T. */
    tern_status (*matmul)(tern_model *m, const float *x, int M, const tern_weight *w, float *y);
    /* y[M, w->rows] += x . w^T (the residual add); tmp [M, w->rows] scratch. */
    tern_status (*matmul_add)(tern_model *m, const float *x, int M, const tern_weight *w, float *y, float *tmp);
    /* g[M, F] = silu(x . gate^T) * (x . up^T); u [M, F] scratch. */
    tern_status (*gate_up)(tern_model *m, const tern_mlp *w, const float *x, int M, float *g, float *u);
    /* The dense MLP's first half of layer l: h = rmsnorm(x) by the layer's
     * post-attention norm (h scratch, as in qkv), then gate_up of h. */
    tern_status (*norm_gate_up)(tern_model *m, int l, const float *x, int M, float *h, float *g, float *u);
    /* Attention prologue of layer l: h = rmsnorm(x) by the layer's input
     * norm (h [T, H] scratch: a backend that fuses the norm into the
     * products may leave it unwritten), q, k, v products of h into qkv
     * (T * (q + 2 kv widths) floats, laid out as the backend likes), bias,
     * q/k norm, rope at each token's position, new keys and values stored
     * in the rows' KV blocks past their lengths. */
    tern_status (*qkv)(tern_model *m, tern_pass *p, int l, const float *x, float *h, float *qkv);
    /* out[T, q width] = causal attention of qkv's queries over each row's KV
     * (the keys stored by qkv included). */
    tern_status (*attention)(tern_model *m, tern_pass *p, int l, float *qkv, float *out);
    /* The wanted positions of x gathered into h, final norm, then hidden
     * [n_out, H] and logits [n_out, vocab] (host memory, either NULL). */
    tern_status (*head)(tern_model *m, tern_pass *p, const float *x, float *h, float *logits, float *hidden);
};

extern const tern_backend_vt tern_backend_cpu;
extern const tern_backend_vt tern_backend_cuda;

/* The CUDA backend's model state (backend_cuda.c): checks that the model's
 * shapes and dtypes run on it (a clear TERN_E_UNSUPPORTED otherwise) and
 * uploads every weight once, into m->dev (owned; tern_backend_cuda_unload
 * frees it). */
tern_status tern_backend_cuda_load(tern_model *m);
void tern_backend_cuda_unload(tern_model *m);
/* A KV pool whose layers live in device memory (same block ids and tables
 * as the host pool; the host keeps tables, counts and transactions). */
tern_status tern_backend_cuda_kv_create(const tern_model *m, const tern_kv_shape *s, tern_kv **out);

#endif

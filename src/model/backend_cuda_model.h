/* The CUDA backend's model state (internal to src/model/backend_cuda*.c):
 * what tern_backend_cuda_load builds into m->dev (backend_cuda_load.c: the
 * checks, the upload of every weight, the unload) and the per-pass ops
 * read and grow (backend_cuda.c). */
#ifndef TERN_MODEL_BACKEND_CUDA_MODEL_H
#define TERN_MODEL_BACKEND_CUDA_MODEL_H

#include <stddef.h>

#include "backend/cuda/cuda.h"
#include "model/backend.h"

enum { FOLD_GATE_UP = 1, FOLD_QKV = 2 };
enum { PROF_EMBED, PROF_QKV, PROF_ATTN, PROF_O, PROF_GATE_UP, PROF_DOWN, PROF_HEAD, PROF_SUMMARY, PROF_COPY,
       PROF_CLASSES };

enum { G_EAGER, G_CAPTURE, G_REPLAY, GRAPH_SLOTS = 8, GRAPH_SIG = 6 };
typedef struct {
    int T, nr, n_out, max_len;      /* the key */
    const void *sig[GRAPH_SIG];     /* buffers the capture's kernels address */
    int seen;
    unsigned long used;
    tern_cuda_graph *g;             /* owned */
} graph_slot;

typedef struct {
    void *qkv;              /* [qd + 2 kvd, H] */
    void *bias;             /* qwen2: [qd + 2 kvd] (q, k, v biases), or NULL */
    float *attn_nw, *ffn_nw;   /* the norm weights as float32 [H] (folded into the products) */
} dev_layer;

/* A growable device buffer. */
typedef struct {
    void *d;
    size_t bytes;
} dbuf;

typedef struct {
    tern_cuda *c;           /* borrowed from the exec */
    void *arena;            /* owned: every weight */
    size_t arena_bytes;
    dev_layer *layers;      /* owned, n_layers */
    float *d_rope;          /* in arena: [n_rope, rope_dim] */
    dbuf norm_tmp;          /* tern_cuda_norm_tmp_bytes(H) */
    int n_rope;             /* positions the table covers */
    /* per pass */
    void *h_stage;          /* owned pinned host staging, stage_cap bytes */
    size_t stage_cap;
    dbuf stage;             /* the staging blob on the device */
    dbuf part, count, logits, bias;
    dbuf sum_tmp, sum_count, sum_out;   /* sampling summaries: scratch, counters (zeroed), results */
    tern_cuda_lsum *h_sum;  /* owned pinned host copy of the results, sum_cap entries */
    int sum_cap;
    int32_t *d_ids, *d_tok_row, *d_want, *d_zero;
    tern_cuda_attn_row *d_rows;   /* [n_layers][nr] */
    int nr, max_len;
    /* TERN_CUDA_STATS: passes, host and device seconds (from begin to the
     * copy-out), printed at unload, for decode passes (one token a row) and
     * the others. */
    int act_bf16;           /* TERN_CUDA_ACT=bf16 */
    int attn_fuse;          /* TERN_CUDA_ATTN_FUSE (default 0), see attn_fused */
    int tiled_attn;         /* TERN_CUDA_ATTN_TILED (default 1), see cuda_attention */
    int fuse;               /* which norms are folded into the products (TERN_CUDA_FUSE bits, see load) */
    /* TERN_CUDA_PROF=1: an event after each op of a pass, the time between
     * events summed per class of op, printed at unload for decode passes and
     * the others. */
    /* Decode passes (one token a row) as CUDA graphs keyed by shape: the
     * second pass of a shape is captured, later ones replay it (begin
     * launches it; the layer ops return at once; head runs eagerly after
     * it). TERN_CUDA_GRAPH=0: off. */
    int graph_on, gmode, gslot;
    unsigned long gclock;
    graph_slot gs[GRAPH_SLOTS];
    int prof, prof_n, prof_cls[4096];
    double prof_ms[2][PROF_CLASSES]; /* [0] other passes, [1] decode passes */
    long prof_passes[2];
    /* Product chains (backend_cuda_chain.c): chain_ok when the model's
     * one-token passes may take them (checked at load), chain_pass for the
     * pass at hand; the products recorded since the last launch (pend), the
     * chains launched in the pass (each its own sync words in chain_sync,
     * whose last 256 bytes hold the error word), the layer + 1 whose
     * attention prologue waits for the chain (0: none). */
    int chain_ok, chain_pass, n_pend, n_chains, pend_pro;
    tern_cuda_chain_prod pend[TERN_CUDA_CHAIN_MAX];
    dbuf chain_sync;
    unsigned *h_chain_err;  /* owned pinned word */
    int stats;
    /* TERN_CUDA_STATS: host clock at the pass's start and at its end, and
     * sums by kind (other, decode): the pass's host and device time, the
     * host time from its start until its work is queued (a graph replay
     * launched), and the host time since the previous pass ended (the GPU
     * idles through both; gaps over 1 ms counted apart). */
    double t_begin, t_end, host_s[2], dev_s[2], queue_s[2], gap_s[2];
    long passes[2], chain_passes[2], gaps[2], long_gaps[2];
    int decode;
    int tiled;   /* matrices in the tiled layout (backend_cuda_load.c; TERN_CUDA_TILED=0: none) */
} cuda_model;

static inline cuda_model *cm(const tern_model *m) { return m->dev; }

static inline size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Grows b to at least bytes (doubling; zeroed when zero is set); b keeps
 * its old buffer on failure. */
tern_status cuda_dbuf_reserve(tern_cuda *c, dbuf *b, size_t bytes, int zero);
/* Ends a capture an earlier pass left open (an op failed in it). */
void cuda_graph_abandon(cuda_model *d);
/* Product chains (backend_cuda_chain.c): setup at load (chain_ok and its
 * buffers), free at unload; begin at each pass; add records a product
 * (launching the pending chain first when it is full); flush launches
 * what is pending; queue_check queues the copy of the error word after a
 * pass's kernels and result reads it after the sync. */
tern_status cuda_chain_setup(tern_model *m);
void cuda_chain_free(cuda_model *d);
void cuda_chain_begin(tern_model *m, const tern_pass *p);
tern_status cuda_chain_add(tern_model *m, const tern_cuda_chain_prod *pr);
tern_status cuda_chain_flush(tern_model *m);
tern_status cuda_chain_queue_check(tern_model *m);
tern_status cuda_chain_result(tern_model *m);
/* tern_backend_cuda without sampling summaries (TERN_CUDA_SUMMARY=0):
 * every logit comes back and the host samples, to compare. */
extern const tern_backend_vt tern_backend_cuda_no_summary;

#endif

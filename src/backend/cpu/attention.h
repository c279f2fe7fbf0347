/* Causal grouped-query attention of new query tokens against a KV view. */
#ifndef TERN_CPU_ATTENTION_H
#define TERN_CPU_ATTENTION_H

#include "core/threadpool.h"
#include "kv/kv.h"
#include "tern/status.h"

typedef struct {
    const float *q;        /* [n_q, n_heads*head_dim], borrowed */
    float *out;            /* [n_q, n_heads*head_dim], borrowed */
    int n_q;               /* new tokens; query t sits at position kv.len - n_q + t */
    tern_kv_view kv;       /* keys/values including the new tokens */
} tern_attn_row;

/* Runs attention for every row (one sequence each) over the pool; each
 * (row, head, query) is computed the same way whatever the batch.
 * TERN_E_NOMEM when scratch memory cannot be had. */
tern_status tern_cpu_attention(tern_pool *pool, const tern_attn_row *rows, int n_rows, int n_heads,
                        int n_kv_heads, int head_dim, float scale);

#endif

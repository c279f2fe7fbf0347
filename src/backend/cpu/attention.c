/* Causal GQA attention over head-major KV views.
 *
 * One task = one row, one block of up to Q_BLOCK queries, one KV head (with
 * the query heads that share it). The block's scores come from matrix
 * products Q[group*nq, hd] . K_b[bt, hd]^T over the row's KV blocks in order,
 * then a softmax per query over its causal prefix, then out = sum_j p_j v_j
 * accumulated in key order across the blocks. The products are row- and
 * column-independent (matmul.h) and the rest is per query, so a query's
 * output depends neither on how many queries share its block nor on where
 * the row's KV blocks live. */
#include "backend/cpu/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attn_pv.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "core/failpoint.h"

enum { Q_BLOCK = 16 };

typedef struct {
    const tern_attn_row *rows;
    int n_heads, n_kv_heads, head_dim;
    float scale;
    int *task_row, *task_q0;   /* per (row, query block) */
    int n_blocks;
    int failed;                /* set when a task could not allocate */
} attn_job;

/* Scores of the nq*group queries in qb against keys [0, klen) of one KV
 * head, block after block: s[m, j] for m < M = group*nq. The product is
 * row- and column-independent (matmul.h), so a score is the same whatever
 * block it falls in. */
static void scores(const tern_kv_view *kv, int kvh, const float *qb, int M, int hd, int klen, float *s)
{
    int bt = kv->block_tokens;
    for (int b0 = 0; b0 < klen; b0 += bt) {
        int n = klen - b0 < bt ? klen - b0 : bt;
        const float *K = kv->k + kv->table[b0 / bt] * kv->block_stride + kvh * kv->head_stride;
        tern_cpu_matmul_f32_rows(qb, M, hd, K, n, s + b0, klen);
    }
}

static void attn_task(void *arg, int task)
{
    attn_job *j = arg;
    int kvh = task % j->n_kv_heads, blk = task / j->n_kv_heads;
    const tern_attn_row *r = &j->rows[j->task_row[blk]];
    int hd = j->head_dim, group = j->n_heads / j->n_kv_heads, bt = r->kv.block_tokens;
    int q0 = j->task_q0[blk], q1 = q0 + Q_BLOCK < r->n_q ? q0 + Q_BLOCK : r->n_q, nq = q1 - q0;
    int base = r->kv.len - r->n_q;          /* position of query 0 */
    int klen = base + q1;                   /* keys visible to the block's last query */
    int M = group * nq;
    float *qb = tern_fp_calloc(TERN_FAILPOINT_WORKSPACE, (size_t)M * hd, sizeof *qb);
    float *s = tern_fp_malloc(TERN_FAILPOINT_WORKSPACE, (size_t)M * klen * sizeof *s);
    if (!qb || !s) {
        free(qb);
        free(s);
        j->failed = 1;
        return;
    }
    /* Rows of qb: for each head of the group, its nq queries. */
    for (int g = 0; g < group; g++)
        for (int t = 0; t < nq; t++)
            memcpy(qb + ((long)g * nq + t) * hd, r->q + ((long)(q0 + t) * j->n_heads + kvh * group + g) * hd,
                   (size_t)hd * sizeof *qb);
    scores(&r->kv, kvh, qb, M, hd, klen, s);
    int lens[Q_BLOCK], rel[Q_BLOCK];
    for (int t = 0; t < nq; t++) lens[t] = base + q0 + t + 1;
    for (int g = 0; g < group; g++) {
        for (int t = 0; t < nq; t++) {
            float *p = s + ((long)g * nq + t) * klen;
            for (int i = 0; i < lens[t]; i++) p[i] *= j->scale;
            tern_cpu_softmax(p, lens[t]);
        }
        /* The group's heads are interleaved in out: head g of query t
         * sits at out[(q0+t)*n_heads + kvh*group + g]. The values are
         * summed block after block in key order. */
        float *o = r->out + ((long)q0 * j->n_heads + kvh * group + g) * hd;
        for (int b0 = 0; b0 < klen; b0 += bt) {
            for (int t = 0; t < nq; t++) {
                int v = lens[t] - b0;
                rel[t] = v < 0 ? 0 : v > bt ? bt : v;
            }
            const float *V = r->kv.v + r->kv.table[b0 / bt] * r->kv.block_stride + kvh * r->kv.head_stride;
            tern_attn_pv(s + (long)g * nq * klen + b0, klen, rel, nq, V, hd, o, (long)j->n_heads * hd, b0 > 0);
        }
    }
    free(qb);
    free(s);
}

tern_status tern_cpu_attention(tern_pool *pool, const tern_attn_row *rows, int n_rows, int n_heads,
                               int n_kv_heads, int head_dim, float scale)
{
    attn_job j = {rows, n_heads, n_kv_heads, head_dim, scale, NULL, NULL, 0, 0};
    int blocks = 0;
    for (int i = 0; i < n_rows; i++) blocks += (rows[i].n_q + Q_BLOCK - 1) / Q_BLOCK;
    if (!blocks) return TERN_OK;
    j.task_row = tern_fp_malloc(TERN_FAILPOINT_WORKSPACE, (size_t)blocks * sizeof *j.task_row);
    j.task_q0 = tern_fp_malloc(TERN_FAILPOINT_WORKSPACE, (size_t)blocks * sizeof *j.task_q0);
    if (!j.task_row || !j.task_q0) {
        free(j.task_row);
        free(j.task_q0);
        return tern_error(TERN_E_NOMEM, "attention: out of memory");
    }
    for (int i = 0; i < n_rows; i++)
        for (int q0 = 0; q0 < rows[i].n_q; q0 += Q_BLOCK) {
            j.task_row[j.n_blocks] = i;
            j.task_q0[j.n_blocks++] = q0;
        }
    tern_pool_run(pool, attn_task, &j, j.n_blocks * n_kv_heads);
    free(j.task_row);
    free(j.task_q0);
    return j.failed ? tern_error(TERN_E_NOMEM, "attention: out of memory") : TERN_OK;
}

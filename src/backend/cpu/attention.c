#include "backend/cpu/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"

typedef struct {
    const tern_attn_row *rows;
    int n_rows, n_heads, n_kv_heads, head_dim;
    float scale;
    int q_block;          /* queries per task */
    int *task_row, *task_q0;
    int n_tasks;
} attn_job;

/* Scores for one query use a stack buffer when short, heap otherwise. */
enum { STACK_SCORES = 4096 };

static void attend_one(const attn_job *j, const tern_attn_row *r, int t, int h, float *scores)
{
    int hd = j->head_dim, group = j->n_heads / j->n_kv_heads, kvh = h / group;
    int len = r->kv.len - r->n_q + t + 1;          /* causal: keys 0..pos */
    const float *q = r->q + ((long)t * j->n_heads + h) * hd;
    float *o = r->out + ((long)t * j->n_heads + h) * hd;
    for (int p = 0; p < len; p++)
        scores[p] = tern_cpu_dot(q, r->kv.k + (long)p * r->kv.row_stride + kvh * hd, hd) * j->scale;
    tern_cpu_softmax(scores, len);
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int p = 0; p < len; p++) {
        const float *v = r->kv.v + (long)p * r->kv.row_stride + kvh * hd;
        float w = scores[p];
        for (int d = 0; d < hd; d++) o[d] += w * v[d];
    }
}

static void attn_task(void *arg, int task)
{
    const attn_job *j = arg;
    int h = task % j->n_heads;
    task /= j->n_heads;
    const tern_attn_row *r = &j->rows[j->task_row[task]];
    int q0 = j->task_q0[task], q1 = q0 + j->q_block;
    if (q1 > r->n_q) q1 = r->n_q;
    float stack[STACK_SCORES];
    float *scores = r->kv.len <= STACK_SCORES ? stack : malloc((size_t)r->kv.len * sizeof *scores);
    if (!scores) return; /* cannot happen for sane lengths; output stays as is */
    for (int t = q0; t < q1; t++) attend_one(j, r, t, h, scores);
    if (scores != stack) free(scores);
}

void tern_cpu_attention(tern_pool *pool, const tern_attn_row *rows, int n_rows, int n_heads,
                        int n_kv_heads, int head_dim, float scale)
{
    attn_job j = {rows, n_rows, n_heads, n_kv_heads, head_dim, scale, 4, NULL, NULL, 0};
    int total = 0;
    for (int i = 0; i < n_rows; i++) total += (rows[i].n_q + j.q_block - 1) / j.q_block;
    if (!total) return;
    j.task_row = malloc((size_t)total * sizeof *j.task_row);
    j.task_q0 = malloc((size_t)total * sizeof *j.task_q0);
    if (!j.task_row || !j.task_q0) {
        /* Fall back to one task per row on the caller's thread. */
        free(j.task_row); free(j.task_q0);
        float *scores = NULL;
        for (int i = 0; i < n_rows; i++) {
            scores = realloc(scores, (size_t)(rows[i].kv.len ? rows[i].kv.len : 1) * sizeof *scores);
            if (!scores) return;
            for (int t = 0; t < rows[i].n_q; t++)
                for (int h = 0; h < n_heads; h++) attend_one(&j, &rows[i], t, h, scores);
        }
        free(scores);
        return;
    }
    for (int i = 0; i < n_rows; i++)
        for (int q0 = 0; q0 < rows[i].n_q; q0 += j.q_block) {
            j.task_row[j.n_tasks] = i;
            j.task_q0[j.n_tasks++] = q0;
        }
    tern_pool_run(pool, attn_task, &j, j.n_tasks * n_heads);
    free(j.task_row);
    free(j.task_q0);
}

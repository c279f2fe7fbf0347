/* Drafting with a separate, smaller model (drafter.h).
 *
 * Each target row has a draft KV row in the drafter's own pool. The draft
 * KV holds a prefix of the row's history; before drafting, the part of it
 * that no longer matches the history (drafts the target rejected) is cut,
 * and the missing history tokens (the accepted ones, the correction or
 * bonus, and at first the prompt) are fed. So the drafter needs no report
 * of what was accepted: it re-synchronises on the history itself, which only
 * ever grows. Then every speculating row drafts together: depth step s is
 * one forward of the draft model over all rows still drafting, each row's
 * next token drawn with its request's sampler (pick).
 *
 * A failed draft forward changes no draft row (the forward's contract), so
 * the rows keep the drafts made so far (possibly none). */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "engine/drafter.h"
#include "model/forward.h"

/* History tokens fed per row and iteration (a joining row's prompt is fed
 * over several iterations; the row drafts once it has caught up). */
enum { CATCHUP_MAX = 512 };

typedef struct {
    tern_model *m;          /* borrowed */
    tern_kv *kv;            /* owned */
    int vocab, max_rows;
    int *rows, *ntok;                /* [max_rows] */
    int *job;                        /* [2 * max_rows]: batch row -> job */
    int32_t *toks;                   /* [max_rows * CATCHUP_MAX] */
    uint8_t *want;                   /* [max_rows * CATCHUP_MAX] */
    float *logits;                   /* [max_rows, vocab] */
    float *work, *lp;                /* [vocab] each: sampling scratch */
} dm_ctx;

typedef struct {
    int row;                /* draft KV row */
    int32_t *fed;           /* owned: the tokens the draft KV holds, [reserve] */
    long reserve;
    int valid;              /* fed[0, valid) is known to match the history */
} dm_row;

static void dm_destroy(tern_drafter *d)
{
    dm_ctx *c = d->impl;
    if (!c) return;
    tern_kv_free(c->kv);
    free(c->rows);
    free(c->ntok);
    free(c->job);
    free(c->toks);
    free(c->want);
    free(c->logits);
    free(c->work);
    free(c->lp);
    free(c);
    d->impl = NULL;
}

tern_status tern_drafter_model_init(tern_drafter *d, tern_model *model, int max_rows, int max_len, long n_blocks)
{
    dm_ctx *c = calloc(1, sizeof *c);
    if (!c) return tern_error(TERN_E_NOMEM, "draft model: out of memory");
    d->vt = &tern_drafter_model;
    d->impl = c;
    c->m = model;
    c->vocab = tern_model_vocab_size(model);
    c->max_rows = max_rows;
    tern_status st = tern_model_kv_create(model, max_rows, max_len, 0, n_blocks, &c->kv);
    size_t R = (size_t)max_rows;
    c->rows = calloc(R, sizeof *c->rows);
    c->ntok = calloc(R, sizeof *c->ntok);
    c->job = calloc(2 * R, sizeof *c->job);
    c->toks = calloc(R * CATCHUP_MAX, sizeof *c->toks);
    c->want = calloc(R * CATCHUP_MAX, 1);
    c->logits = malloc(R * (size_t)c->vocab * sizeof *c->logits);
    c->work = malloc((size_t)c->vocab * sizeof *c->work);
    c->lp = malloc((size_t)c->vocab * sizeof *c->lp);
    if (!st && !(c->rows && c->ntok && c->job && c->toks && c->want && c->logits && c->work && c->lp))
        st = tern_error(TERN_E_NOMEM, "draft model: out of memory");
    if (st) dm_destroy(d);
    return st;
}

static tern_status dm_open(tern_drafter *d, long reserve_tokens, void **state)
{
    dm_ctx *c = d->impl;
    *state = NULL;
    dm_row *r = calloc(1, sizeof *r);
    if (!r) return tern_error(TERN_E_NOMEM, "draft model: out of memory");
    if (reserve_tokens > tern_kv_max_len(c->kv)) reserve_tokens = tern_kv_max_len(c->kv);
    r->reserve = reserve_tokens;
    r->fed = malloc((size_t)(reserve_tokens > 0 ? reserve_tokens : 1) * sizeof *r->fed);
    tern_status st = r->fed ? tern_kv_row_add(c->kv, reserve_tokens, &r->row)
                            : tern_error(TERN_E_NOMEM, "draft model: out of memory");
    if (st) {
        free(r->fed);
        free(r);
        return st;
    }
    *state = r;
    return TERN_OK;
}

static void dm_close(tern_drafter *d, void *state)
{
    dm_ctx *c = d->impl;
    dm_row *r = state;
    if (!r) return;
    tern_kv_row_remove(c->kv, r->row);
    free(r->fed);
    free(r);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Draft token k of job J from the draft's logits: the argmax when the
 * request is greedy, else a draw from the request's sampler (processors over
 * the history and the drafts before it, which the row's fed array holds) at
 * the step the target's sample for that position uses. */
static int32_t pick(dm_ctx *c, const tern_draft_job *J, const float *logits, int k)
{
    if (!J->sp || J->sp->temperature <= 0) return argmax(logits, c->vocab);
    const dm_row *r = J->state;
    memcpy(c->work, logits, (size_t)c->vocab * sizeof *c->work);
    int32_t tok;
    if (tern_logits_process(J->sp, c->work, c->vocab, r->fed, J->n_hist + k)) return argmax(logits, c->vocab);
    tern_log_softmax(c->work, c->lp, c->vocab);
    if (tern_sample_logprobs(J->sp, c->lp, c->vocab, (uint64_t)J->step + (uint64_t)k, &tok))
        return argmax(logits, c->vocab);
    return tok;
}

/* Cuts the draft KV back to the longest prefix that matches hist[0, n). */
static void resync(dm_ctx *c, dm_row *r, const int32_t *hist, int n)
{
    int off = tern_kv_offset(c->kv, r->row), v = r->valid;
    if (v > off) v = off;
    while (v < off && v < n && r->fed[v] == hist[v]) v++;
    if (off > v) tern_kv_trim(c->kv, r->row, off - v);
    r->valid = v;
}

static void dm_draft_rows(tern_drafter *d, tern_draft_job *jobs, int n)
{
    dm_ctx *c = d->impl;
    int nb = 0, T = 0, most = 0;
    /* Step 0: each row's missing history, its pending token last. */
    for (int j = 0; j < n && nb < c->max_rows; j++) {
        tern_draft_job *J = &jobs[j];
        dm_row *r = J->state;
        J->n_out = 0;
        if (!r || J->max <= 0 || J->n_hist < 1) continue;
        resync(c, r, J->hist, J->n_hist - 1);
        int off = tern_kv_offset(c->kv, r->row), need = J->n_hist - off;
        /* Room for the history and the drafts fed after it. */
        if (off + need + J->max > r->reserve) continue;
        if (need > CATCHUP_MAX) need = CATCHUP_MAX;
        int caught = off + need == J->n_hist;
        memcpy(c->toks + T, J->hist + off, (size_t)need * sizeof *c->toks);
        memcpy(r->fed + off, J->hist + off, (size_t)need * sizeof *r->fed);
        memset(c->want + T, 0, (size_t)need);
        c->want[T + need - 1] = (uint8_t)caught;
        c->rows[nb] = r->row;
        c->ntok[nb] = need;
        c->job[nb++] = caught ? j : -1;
        T += need;
        if (caught && J->max > most) most = J->max;
    }
    if (!nb) return;
    tern_batch b = {nb, c->rows, c->ntok, c->toks, c->want};
    if (tern_forward(c->m, c->kv, &b, c->logits, NULL)) return;
    int n_out = 0;
    for (int i = 0; i < nb; i++) {
        if (c->job[i] < 0) continue;
        tern_draft_job *J = &jobs[c->job[i]];
        J->out[J->n_out] = pick(c, J, c->logits + (size_t)n_out++ * c->vocab, J->n_out);
        J->n_out++;
    }
    /* The price of a depth step is measured on the one-token steps: step 0
     * also feeds whatever history a row had to catch up on (a whole prompt
     * after a join), which is no cost of drafting deeper. */
    double t1 = tern_now();
    /* Steps 1..: every row still drafting feeds its last draft. */
    for (int s = 1; s < most; s++) {
        int k = 0;
        for (int i = 0; i < nb; i++) {
            if (c->job[i] < 0) continue;
            tern_draft_job *J = &jobs[c->job[i]];
            if (J->n_out <= s - 1 || J->max <= s) continue;
            dm_row *r = J->state;
            int off = tern_kv_offset(c->kv, r->row);
            r->fed[off] = J->out[s - 1];
            c->rows[k] = r->row;
            c->ntok[k] = 1;
            c->toks[k] = J->out[s - 1];
            c->job[nb + k] = c->job[i];   /* scratch past the step-0 entries */
            k++;
        }
        if (!k) break;
        /* Rows are in job order; remember which job each batch row is. */
        int order[k];
        for (int i = 0; i < k; i++) order[i] = c->job[nb + i];
        tern_batch bs = {k, c->rows, c->ntok, c->toks, NULL};
        if (tern_forward(c->m, c->kv, &bs, c->logits, NULL)) break;
        for (int i = 0; i < k; i++) {
            tern_draft_job *J = &jobs[order[i]];
            J->out[J->n_out] = pick(c, J, c->logits + (size_t)i * c->vocab, J->n_out);
            J->n_out++;
        }
    }
    double t2 = tern_now();
    if (most > 1) {
        double per = (t2 - t1) / (most - 1);
        d->step_seconds = d->step_seconds > 0 ? 0.8 * d->step_seconds + 0.2 * per : per;
    }
}

static int dm_draft(tern_drafter *d, void *state, const int32_t *hist, int n, int max, int32_t *out)
{
    tern_draft_job j = {state, hist, n, max, out, 0, NULL, 0};
    dm_draft_rows(d, &j, 1);
    return j.n_out;
}

const tern_drafter_vtable tern_drafter_model = {
    .name = "draft-model",
    .ports = TERN_PORT_TOKENS,
    .open = dm_open,
    .draft = dm_draft,
    .draft_rows = dm_draft_rows,
    .close = dm_close,
    .destroy = dm_destroy,
};

/* Per-row sampling of one iteration, rows in parallel on the model's pool:
 * processors, log-softmax, top logprobs and the sampler chain keyed by the
 * row's (seed, step). Each row has its own scratch, so a row's token depends
 * only on its logits, history and parameters. */
#include <string.h>

#include "engine/engine_internal.h"
#include "model/forward.h"

static void sample_task(void *arg, int i)
{
    tern_engine *e = arg;
    tern_engine_sample_one(e, e->s_rows[i]);
}

int tern_engine_row_greedy_plain(const eng_row *w)
{
    const tern_sampling_params *p = &w->sp;
    const tern_request *r = w->req;
    return p->temperature == 0.0f && p->n_bias == 0 && p->repetition_penalty == 0.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f && r->o.top_logprobs == 0 && !r->o.want_logprob;
}

void tern_engine_sample_one(tern_engine *e, eng_row *w)
{
    int V = e->vocab;
    const tern_request *r = w->req;
    if (w->sum) {
        /* Greedy without processors: the argmax of logits - lse, which the
         * backend computed with the logits. */
        w->n_top = 0;
        w->tok = w->sum->argmax;
        w->tok_lp = w->sum->lp;
        w->sample_st = TERN_OK;
        return;
    }
    memcpy(w->work, w->logits, (size_t)V * sizeof *w->work);
    w->sample_st = tern_logits_process(&w->sp, w->work, V, w->hist, w->n_hist);
    if (w->sample_st) return;
    tern_log_softmax(w->work, w->lp, V);
    w->n_top = 0;
    if (r->o.top_logprobs > 0) {
        w->n_top = tern_top_logprobs(w->lp, V, r->o.top_logprobs, w->top_ids, w->top_lp);
        if (w->n_top < 0) {
            w->sample_st = tern_error(TERN_E_NOMEM, "out of memory for top_logprobs");
            return;
        }
    }
    /* The sampler scribbles on its input; lp keeps the chosen logprob. */
    memcpy(w->work, w->lp, (size_t)V * sizeof *w->work);
    w->sample_st = tern_sample_logprobs(&w->sp, w->work, V, (uint64_t)w->step, &w->tok);
    if (!w->sample_st) w->tok_lp = w->lp[w->tok];
}

void tern_engine_sample_rows(tern_engine *e)
{
    if (e->n_s == 1) tern_engine_sample_one(e, e->s_rows[0]);
    else if (e->n_s > 1) tern_model_parallel(e->m, sample_task, e, e->n_s);
}

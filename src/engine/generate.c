/* tern_generate: one request through an engine of batch 1 (generate.h). */
#include "tern/generate.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

void tern_generate_opts_default(tern_generate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->prefill_chunk = 2048;
    tern_sampling_params_default(&o->sampling);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    tern_token_cb cb;
    void *user;
    tern_generate_stats *stats;
    tern_status st;
    char msg[512];
} waiter;

static int on_token(void *user, const tern_token_event *ev)
{
    waiter *w = user;
    return w->cb ? w->cb(w->user, ev) : 0;
}

static void on_done(void *user, const tern_request_result *res)
{
    waiter *w = user;
    tern_generate_stats *s = w->stats;
    s->prompt_tokens = res->prompt_tokens;
    s->cached_tokens = res->cached_tokens;
    s->generated_tokens = res->generated[0];
    s->prefill_seconds = res->prefill_seconds;
    s->decode_seconds = res->decode_seconds;
    s->finish = res->finish[0];
    s->drafted = res->drafted;
    s->accepted = res->accepted;
    s->target_calls = res->target_calls;
    w->st = res->status;
    if (res->status) snprintf(w->msg, sizeof w->msg, "%s", res->error);
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

tern_status tern_generate(tern_model *m, const int32_t *prompt, int n_prompt, const tern_generate_opts *o,
                          tern_token_cb cb, void *user, tern_generate_stats *stats)
{
    tern_generate_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    stats->prompt_tokens = n_prompt;
    if (n_prompt <= 0) return tern_error(TERN_E_INVALID, "generate: the prompt is empty");
    if (o->max_tokens <= 0) return tern_error(TERN_E_INVALID, "generate: max_tokens must be positive");
    long total = (long)n_prompt + o->max_tokens;
    if (total > (1L << 30)) return tern_error(TERN_E_RANGE, "generate: prompt + max_tokens is too long");
    int ctx = tern_model_max_context(m);
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.max_batch = 1;
    eo.prefill_step = o->prefill_chunk > 0 ? o->prefill_chunk : 2048;
    eo.kv_tokens = total;
    eo.queue_size = 1;
    eo.no_prompt_cache = 1;   /* one request: nothing to share */
    eo.draft_kind = o->draft_kind;
    eo.draft_model = o->draft_model;
    eo.num_draft_tokens = o->num_draft_tokens;
    eo.ngram_min = o->ngram_min;
    eo.ngram_max = o->ngram_max;
    eo.spec_fixed = o->spec_fixed;
    /* A generation may run past the model's declared context when asked to
     * (as the serial loop always allowed); the pool is sized for it. */
    eo.max_context = total + 1 > ctx ? (int)(total + 1) : ctx;
    tern_engine *e;
    tern_status st = tern_engine_create(m, &eo, &e);
    if (st) return st;
    tern_request_opts ro;
    tern_request_opts_default(&ro);
    ro.max_tokens = o->max_tokens;
    ro.top_logprobs = o->top_logprobs;
    ro.want_logprob = o->want_logprob;
    ro.sampling = o->sampling;
    ro.extra_eos = o->extra_eos;
    ro.n_extra_eos = o->n_extra_eos;
    ro.ignore_eos = o->ignore_eos;
    waiter w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.cb = cb;
    w.user = user;
    w.stats = stats;
    tern_request_cb rcb = {on_token, NULL, on_done, &w};
    st = tern_engine_submit(e, prompt, n_prompt, &ro, &rcb, NULL);
    if (!st) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        st = w.st;
        if (st) tern_error(st, "%s", w.msg);
    }
    tern_engine_free(e);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return st;
}

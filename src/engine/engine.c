/* Engine lifecycle, the waiting line and the iteration thread (engine.h). */
#include "tern/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/engine_internal.h"
#include "model/forward.h"

const double tern_engine_hist_bounds[14] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05,
                                            0.1,   0.2,   0.5,   1.0,  2.0,  5.0,  1e300};


void tern_engine_opts_default(tern_engine_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_batch = 16;
    o->prefill_step = 2048;
    o->prefill_interleave = 256;
    o->queue_size = 64;
    o->num_draft_tokens = 4;
    o->ngram_min = 1;
    o->ngram_max = 4;
    o->spec_budget = 0;   /* 4 x max_batch */
}

void tern_request_opts_default(tern_request_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->n = 1;
    o->num_draft_tokens = -1;
    tern_sampling_params_default(&o->sampling);
}

size_t tern_engine_kv_bytes_per_token(const tern_model *m) { return tern_model_kv_bytes_per_token(m); }

/* Memory the system could still give (MemAvailable), or 0 when unknown. */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024u;
}

static void *engine_main(void *arg);

tern_status tern_engine_create(tern_model *m, const tern_engine_opts *opts, tern_engine **out)
{
    *out = NULL;
    /* The caller's options, with every field it left 0 at its default. */
    tern_engine_opts o, d;
    tern_engine_opts_default(&d);
    o = opts ? *opts : d;
    if (!o.max_batch) o.max_batch = d.max_batch;
    if (!o.prefill_step) o.prefill_step = d.prefill_step;
    if (!o.prefill_interleave) o.prefill_interleave = d.prefill_interleave;
    if (!o.queue_size) o.queue_size = d.queue_size;
    if (!o.num_draft_tokens) o.num_draft_tokens = d.num_draft_tokens;
    if (!o.ngram_min) o.ngram_min = d.ngram_min;
    if (!o.ngram_max) o.ngram_max = d.ngram_max;
    if (o.spec_budget <= 0) o.spec_budget = 4 * (o.max_batch > 0 ? o.max_batch : 16);
    if (o.max_batch < 1 || o.max_batch > 1024) return tern_error(TERN_E_RANGE, "engine: max_batch %d out of [1, 1024]", o.max_batch);
    if (o.prefill_step < 1 || o.prefill_interleave < 1) return tern_error(TERN_E_RANGE, "engine: bad prefill step");
    /* A slice beside decoding rows is never more than a whole step. */
    if (o.prefill_interleave > o.prefill_step) o.prefill_interleave = o.prefill_step;
    if (o.queue_size < 1) return tern_error(TERN_E_RANGE, "engine: bad queue size");
    if (o.draft_kind != TERN_DRAFT_NONE && o.draft_kind != TERN_DRAFT_NGRAM && o.draft_kind != TERN_DRAFT_MODEL)
        return tern_error(TERN_E_UNSUPPORTED, "engine: unknown draft kind %d", o.draft_kind);
    if (o.draft_kind == TERN_DRAFT_MODEL) {
        if (!o.draft_model) return tern_error(TERN_E_INVALID, "engine: draft kind model without a draft model");
        if (tern_model_exec(o.draft_model) != tern_model_exec(m))
            return tern_error(TERN_E_INVALID,
                              "engine: the draft model must run on the target's execution context (load it with "
                              "tern_model_opts.exec = the target's)");
        if (tern_model_vocab_size(o.draft_model) > tern_model_vocab_size(m))
            return tern_error(TERN_E_INVALID, "engine: the draft model's vocabulary (%d) is larger than the target's (%d)",
                              tern_model_vocab_size(o.draft_model), tern_model_vocab_size(m));
    } else {
        o.draft_model = NULL;
    }
    if (o.num_draft_tokens < 1 || o.num_draft_tokens > TERN_SPEC_POSITIONS - 1)
        return tern_error(TERN_E_RANGE, "engine: num_draft_tokens must be in [1, %d]", TERN_SPEC_POSITIONS - 1);
    if (o.ngram_min < 1 || o.ngram_max < o.ngram_min || o.ngram_max > 64)
        return tern_error(TERN_E_RANGE, "engine: ngram lengths must satisfy 1 <= min <= max <= 64");
    int ctx = tern_model_max_context(m);
    if (o.max_context <= 0) o.max_context = ctx;
    size_t per_tok = tern_model_kv_bytes_per_token(m);
    /* A draft model keeps a row per target row: its blocks come from the
     * same budget, block for block. */
    size_t per_tok_all = per_tok + (o.draft_model ? tern_model_kv_bytes_per_token(o.draft_model) : 0);
    long bt = TERN_KV_BLOCK_TOKENS, n_blocks;
    if (o.kv_tokens > 0) {
        n_blocks = (o.kv_tokens + bt - 1) / bt;
    } else {
        size_t budget = o.memory_budget;
        if (!budget) {
            size_t avail = mem_available();
            budget = avail ? avail / 2 : (size_t)1 << 30;
        }
        n_blocks = (long)(budget / (per_tok_all * (size_t)bt));
        /* More than every row at full context is never needed. */
        long most = (long)o.max_batch * ((o.max_context + bt - 1) / bt);
        if (n_blocks > most) n_blocks = most;
    }
    if (n_blocks < 1)
        return tern_error(TERN_E_RANGE, "engine: a KV budget of %zu bytes holds no block of %ld tokens (%zu bytes each)",
                          o.memory_budget, bt, per_tok * (size_t)bt);
    tern_engine *e = calloc(1, sizeof *e);
    if (!e) return tern_error(TERN_E_NOMEM, "engine: out of memory");
    e->m = m;
    e->o = o;
    e->vocab = tern_model_vocab_size(m);
    e->eos = tern_model_eos_ids(m, &e->n_eos);
    e->drafter.vt = &tern_drafter_ngram;
    e->drafter.ngram_min = o.ngram_min;
    e->drafter.ngram_max = o.ngram_max;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    tern_status st = tern_model_kv_create(m, o.max_batch, o.max_context, 0, n_blocks, &e->kv);
    if (!st && o.draft_kind == TERN_DRAFT_MODEL)
        st = tern_drafter_model_init(&e->drafter, o.draft_model, o.max_batch, o.max_context, n_blocks);
    /* The target gives its token history and nothing else yet. */
    if (!st && o.draft_kind != TERN_DRAFT_NONE) st = tern_drafter_check(&e->drafter, TERN_PORT_TOKENS);
    /* An iteration feeds each row's pending token, at most spec_budget
     * drafted ones, and prompt chunks of at most prefill_step tokens; it
     * asks for at most one output per row plus one per draft. */
    size_t B = (size_t)o.max_batch, T = (size_t)o.prefill_step + B + (size_t)o.spec_budget;
    if (!st) {
        e->active = calloc(B, sizeof *e->active);
        e->b_rows = calloc(B, sizeof *e->b_rows);
        e->b_ntok = calloc(B, sizeof *e->b_ntok);
        e->spec_rows = calloc(B, sizeof *e->spec_rows);
        e->jobs = calloc(B, sizeof *e->jobs);
        e->s_rows = calloc(B, sizeof *e->s_rows);
        e->b_tokens = calloc(T, sizeof *e->b_tokens);
        e->b_want = calloc(T, 1);
        e->logits = malloc((B + (size_t)o.spec_budget) * (size_t)e->vocab * sizeof *e->logits);
        e->summarize = tern_model_summarizes(m);
        e->b_need = calloc(B + (size_t)o.spec_budget, 1);
        e->summ = calloc(B + (size_t)o.spec_budget, sizeof *e->summ);
        e->pc_blocks = calloc((size_t)(o.max_context / TERN_KV_BLOCK_TOKENS + 1), sizeof *e->pc_blocks);
        if (!e->active || !e->b_rows || !e->b_ntok || !e->spec_rows || !e->jobs || !e->s_rows || !e->b_tokens || !e->b_want ||
            !e->logits || !e->pc_blocks || !e->b_need || !e->summ)
            st = tern_error(TERN_E_NOMEM, "engine: out of memory");
    }
    if (!st && !o.no_prompt_cache) {
        long cap = o.prompt_cache_bytes ? (long)(o.prompt_cache_bytes / (per_tok * (size_t)bt)) : n_blocks;
        if (cap > 0) st = tern_pcache_create(e->kv, cap, &e->pc);
        if (!st && e->pc && o.prompt_cache_dir && o.prompt_cache_dir[0]) {
            uint64_t key = tern_model_fingerprint(m) ^ (o.prompt_cache_namespace * 0x9e3779b97f4a7c15ull);
            size_t dcap = o.prompt_cache_disk_bytes ? o.prompt_cache_disk_bytes : (size_t)4000000000u;
            st = tern_pdisk_open(o.prompt_cache_dir, dcap, key, e->kv, &e->disk);
            if (!st) {
                tern_pcache_set_disk(e->pc, e->disk);
                tern_pdisk_stats ds;
                tern_pdisk_get_stats(e->disk, &ds);
                e->stats.disk_files = ds.files;
                e->stats.disk_bytes = ds.bytes;
                e->stats.disk_skipped = ds.skipped;
            }
        }
        e->o.prompt_cache_dir = NULL;   /* borrowed for create only */
    }
    if (!st) {
        tern_kv_stats ks;
        tern_kv_get_stats(e->kv, &ks);
        e->stats.blocks_total = ks.blocks_total;
        e->stats.blocks_free = ks.blocks_free;
        e->stats.block_tokens = ks.block_tokens;
        e->stats.kv_bytes_per_token = per_tok;
        e->stats.kv_capacity_tokens = ks.blocks_total * ks.block_tokens;
        if (pthread_create(&e->thread, NULL, engine_main, e)) st = tern_error(TERN_E_INTERNAL, "engine: cannot start its thread");
        else e->thread_started = 1;
    }
    if (st) {
        tern_engine_free(e);
        return st;
    }
    *out = e;
    return TERN_OK;
}

static void request_unref(tern_request *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    free(r->prompt);
    free(r->bias_ids);
    free(r->bias_values);
    free(r->xtc_special);
    free(r->extra_eos);
    free(r->rows);
    free(r->finish);
    free(r->generated);
    free(r);
}

void tern_request_free_rows(tern_engine *e, tern_request *r)
{
    for (int c = 0; r->rows && c < r->n; c++) {
        eng_row *w = &r->rows[c];
        if (w->kv_row >= 0) {
            tern_kv_row_remove(e->kv, w->kv_row);
            e->rows_used--;
            w->kv_row = -1;
        }
        if (w->drafting) e->drafter.vt->close(&e->drafter, w->dstate);
        w->drafting = 0;
        w->dstate = NULL;
        free(w->hist);
        free(w->work);
        free(w->lp);
        w->hist = NULL;
        w->work = w->lp = NULL;
    }
}

void tern_engine_finish_request(tern_engine *e, tern_request *r)
{
    tern_request_free_rows(e, r);
    r->state = REQ_DONE;
    double now = tern_now();
    tern_request_result res = {
        .status = r->fail_st,
        .error = r->fail_st ? r->fail_msg : "",
        .prompt_tokens = r->n_prompt,
        .cached_tokens = r->cached,
        .max_tokens = r->max_tokens,
        .n = r->n,
        .finish = r->finish,
        .generated = r->generated,
        .queue_seconds = r->t_admit > 0 ? r->t_admit - r->t_submit : now - r->t_submit,
        .prefill_seconds = r->t_first > 0 ? r->t_first - r->t_admit : (r->t_admit > 0 ? now - r->t_admit : 0),
        .decode_seconds = r->t_first > 0 ? now - r->t_first : 0,
        .drafted = r->drafted,
        .accepted = r->accepted,
        .target_calls = r->target_calls,
    };
    if (r->cb.on_done) r->cb.on_done(r->cb.user, &res);
    request_unref(r);
}

static void drop_waiting(tern_engine *e, const char *why)
{
    pthread_mutex_lock(&e->mu);
    tern_request *r = e->wait_head;
    e->wait_head = e->wait_tail = NULL;
    e->n_waiting = 0;
    e->stats.waiting = 0;
    pthread_mutex_unlock(&e->mu);
    while (r) {
        tern_request *next = r->next;
        r->fail_st = TERN_E_CANCELLED;
        snprintf(r->fail_msg, sizeof r->fail_msg, "%s", why);
        tern_engine_finish_request(e, r);
        r = next;
    }
}

static void *engine_main(void *arg)
{
    tern_engine *e = arg;
    for (;;) {
        tern_engine_admit(e);
        if (tern_engine_iterate(e)) continue;
        pthread_mutex_lock(&e->mu);
        int quit = e->stopping && e->n_active == 0;
        if (!quit && !e->wait_head && e->n_active == 0) pthread_cond_wait(&e->cv, &e->mu);
        else if (!quit && e->n_active == 0 && e->wait_head) {
            /* Waiting requests that do not fit yet: wake on a change. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        }
        pthread_mutex_unlock(&e->mu);
        if (quit) break;
    }
    return NULL;
}

void tern_engine_stop(tern_engine *e)
{
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    int was = e->stopping;
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (was) return;
    /* The thread finishes the admitted requests; nothing new is admitted
     * once stopping is set (tern_engine_admit), and the waiting ones are
     * answered here. */
    drop_waiting(e, "the engine is stopping");
    if (e->thread_started) pthread_join(e->thread, NULL);
    e->thread_started = 0;
    drop_waiting(e, "the engine is stopping");
}

void tern_engine_free(tern_engine *e)
{
    if (!e) return;
    tern_engine_stop(e);
    for (int i = 0; i < e->n_active; i++) tern_engine_finish_request(e, e->active[i]);
    tern_pcache_free(e->pc);
    tern_pdisk_close(e->disk);
    if (e->drafter.vt && e->drafter.vt->destroy) e->drafter.vt->destroy(&e->drafter);
    tern_kv_free(e->kv);
    free(e->pc_blocks);
    free(e->active);
    free(e->b_rows);
    free(e->b_ntok);
    free(e->spec_rows);
    free(e->jobs);
    free(e->s_rows);
    free(e->b_tokens);
    free(e->b_want);
    free(e->logits);
    free(e->b_need);
    free(e->summ);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static int dup_i32(int32_t **dst, const int32_t *src, int n)
{
    *dst = NULL;
    if (n <= 0 || !src) return 0;
    *dst = malloc((size_t)n * sizeof **dst);
    if (!*dst) return -1;
    memcpy(*dst, src, (size_t)n * sizeof **dst);
    return 0;
}

/* The largest max_tokens that fits the pool for a request of n choices:
 * n rows of blocks(P + max) plus one spare block per fork. */
static long pool_room(const tern_engine *e, int P, int n)
{
    long bt = TERN_KV_BLOCK_TOKENS, total = e->stats.blocks_total;
    long per_row = (total - (n - 1)) / n;
    return per_row * bt - P;
}

tern_status tern_engine_submit(tern_engine *e, const int32_t *prompt, int n_prompt, const tern_request_opts *opts,
                               const tern_request_cb *cb, tern_request **out)
{
    if (out) *out = NULL;
    tern_request_opts o;
    if (opts) o = *opts; else tern_request_opts_default(&o);
    if (o.n <= 0) o.n = 1;
    if (n_prompt <= 0 || !prompt) return tern_error(TERN_E_INVALID, "the prompt is empty");
    if (o.max_tokens <= 0) return tern_error(TERN_E_INVALID, "max_tokens must be positive");
    if (o.top_logprobs < 0 || o.top_logprobs > ENG_MAX_TOP)
        return tern_error(TERN_E_RANGE, "top_logprobs must be in [0, %d]", ENG_MAX_TOP);
    if (o.n > e->o.max_batch)
        return tern_error(TERN_E_RANGE, "n = %d choices exceed the batch of %d rows (--max-batch)", o.n, e->o.max_batch);
    tern_status st = tern_sampling_params_validate(&o.sampling);
    if (st) return st;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->vocab)
            return tern_error(TERN_E_RANGE, "token id %d outside the vocabulary (%d)", prompt[i], e->vocab);
    if (n_prompt >= e->o.max_context)
        return tern_error(TERN_E_RANGE, "the prompt has %d tokens; the context holds %d, leaving no room to generate",
                          n_prompt, e->o.max_context);
    long room = pool_room(e, n_prompt, o.n);
    if (room < 1) {
        size_t per = e->stats.kv_bytes_per_token;
        return tern_error(TERN_E_RANGE,
                          "the prompt has %d tokens (x%d choices): its KV (%.1f MB) does not fit the KV pool of %ld "
                          "tokens (%.1f MB; raise --memory-budget)",
                          n_prompt, o.n, (double)per * (n_prompt + 1) * o.n / 1e6, e->stats.kv_capacity_tokens,
                          (double)per * e->stats.kv_capacity_tokens / 1e6);
    }
    int max_tokens = o.max_tokens;
    if (max_tokens > e->o.max_context - n_prompt) max_tokens = e->o.max_context - n_prompt;
    if (max_tokens > room) max_tokens = (int)room;

    tern_request *r = calloc(1, sizeof *r);
    if (!r) return tern_error(TERN_E_NOMEM, "out of memory");
    atomic_init(&r->refs, out ? 2 : 1);
    atomic_init(&r->cancel, 0);
    r->e = e;
    r->o = o;
    r->n = o.n;
    r->max_tokens = max_tokens;
    r->spec = e->o.draft_kind == TERN_DRAFT_NONE ? 0 : o.num_draft_tokens < 0 ? e->o.num_draft_tokens : o.num_draft_tokens;
    if (r->spec > TERN_SPEC_POSITIONS - 1) r->spec = TERN_SPEC_POSITIONS - 1;
    r->n_prompt = n_prompt;
    if (cb) r->cb = *cb;
    const tern_sampling_params *sp = &o.sampling;
    int bad = dup_i32(&r->prompt, prompt, n_prompt) || dup_i32(&r->bias_ids, sp->bias_ids, sp->n_bias) ||
              dup_i32(&r->xtc_special, sp->xtc_special, sp->n_xtc_special) ||
              dup_i32(&r->extra_eos, o.extra_eos, o.n_extra_eos);
    if (!bad && sp->n_bias > 0) {
        r->bias_values = malloc((size_t)sp->n_bias * sizeof *r->bias_values);
        if (r->bias_values) memcpy(r->bias_values, sp->bias_values, (size_t)sp->n_bias * sizeof *r->bias_values);
        else bad = 1;
    }
    r->rows = calloc((size_t)r->n, sizeof *r->rows);
    r->finish = calloc((size_t)r->n, sizeof *r->finish);
    r->generated = calloc((size_t)r->n, sizeof *r->generated);
    if (bad || !r->rows || !r->finish || !r->generated) {
        atomic_store(&r->refs, 1);
        request_unref(r);
        return tern_error(TERN_E_NOMEM, "out of memory");
    }
    r->o.sampling.bias_ids = r->bias_ids;
    r->o.sampling.bias_values = r->bias_values;
    r->o.sampling.xtc_special = r->xtc_special;
    r->o.extra_eos = r->extra_eos;
    for (int c = 0; c < r->n; c++) r->rows[c].kv_row = -1;
    r->t_submit = tern_now();
    pthread_mutex_lock(&e->mu);
    if (e->stopping) st = tern_error(TERN_E_STATE, "the engine is stopping");
    else if (e->n_waiting >= e->o.queue_size)
        st = tern_error(TERN_E_BUSY, "%d requests are already waiting (--queue-size)", e->n_waiting);
    if (!st) {
        if (e->wait_tail) e->wait_tail->next = r; else e->wait_head = r;
        e->wait_tail = r;
        e->n_waiting++;
        e->stats.waiting = e->n_waiting;
        pthread_cond_signal(&e->cv);
    } else {
        e->stats.refused++;
    }
    pthread_mutex_unlock(&e->mu);
    if (st) {
        atomic_store(&r->refs, 1);
        request_unref(r);
        return st;
    }
    if (out) *out = r;
    return TERN_OK;
}

void tern_request_cancel(tern_request *r)
{
    /* A flag only: the engine looks at it every iteration, and it never
     * sleeps while a request is waiting or running, so no wake-up is needed
     * (and the handle may outlive the engine). */
    if (r) atomic_store(&r->cancel, 1);
}

void tern_request_release(tern_request *r)
{
    if (r) request_unref(r);
}

void tern_engine_get_stats(tern_engine *e, tern_engine_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}

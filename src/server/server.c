/* Server start-up and shutdown (see server.h). */
#include "tern/server.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/ctx.h"
#include "server/http.h"
#include "server/routes.h"
#include "tern/engine.h"

void tern_server_opts_default(tern_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->temperature = 0.0f;
    o->top_p = 1.0f;
    o->min_p = 0.0f;
    o->max_tokens = 512;
    o->prefill_step = 2048;
    o->log_level = 1;
    o->max_body = 8u << 20;
    o->queue_size = 64;
    o->max_batch = 16;
}

static int has_id(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++) if (ids[i] == id) return 1;
    return 0;
}

/* EOS ids the tokenizer knows but config.json does not, and XTC's exempt ids. */
static tern_status special_ids(srv_ctx *c)
{
    int n_eos;
    const int32_t *eos = tern_model_eos_ids(c->model, &n_eos);
    int32_t teos = tern_tokenizer_eos_id(c->tok);
    c->eos_extra = calloc(1, sizeof *c->eos_extra);
    if (!c->eos_extra) return tern_error(TERN_E_NOMEM, "out of memory");
    if (teos >= 0 && !has_id(eos, n_eos, teos)) c->eos_extra[c->n_eos_extra++] = teos;
    int32_t *nl = NULL;
    int n_nl = 0;
    tern_status st = tern_tokenizer_encode(c->tok, "\n", 1, 0, &nl, &n_nl);
    if (st != TERN_OK) return st;
    c->xtc_special = calloc((size_t)(n_eos + c->n_eos_extra + n_nl) + 1, sizeof *c->xtc_special);
    if (!c->xtc_special) { free(nl); return tern_error(TERN_E_NOMEM, "out of memory"); }
    for (int i = 0; i < n_eos; i++) c->xtc_special[c->n_xtc_special++] = eos[i];
    for (int i = 0; i < c->n_eos_extra; i++) c->xtc_special[c->n_xtc_special++] = c->eos_extra[i];
    for (int i = 0; i < n_nl; i++) c->xtc_special[c->n_xtc_special++] = nl[i];
    free(nl);
    return TERN_OK;
}

static tern_status load(srv_ctx *c, const tern_server_opts *o)
{
    tern_model_opts mo = {0};
    mo.n_threads = o->n_threads;
    mo.precision = (tern_precision)o->precision;
    mo.weights = (tern_weights_mode)o->weights;
    tern_status st = tern_model_load(o->model_dir, &mo, &c->model);
    if (st != TERN_OK) return st;
    if (o->draft_kind == TERN_DRAFT_MODEL &&
        (st = tern_draft_model_load(o->draft_model_dir, c->model, &mo, &c->draft)) != TERN_OK)
        return st;
    const char *dir = tern_model_dir(c->model);
    if ((st = tern_tokenizer_load(dir, &c->tok)) != TERN_OK) return st;
    if (tern_chat_template_load(dir, &c->tmpl) != TERN_OK) {
        fprintf(stderr, "WARNING:tern.serve:no usable chat template (%s); chat requests use the plain role mapping\n",
                tern_last_error());
        c->tmpl = NULL;
    }
    c->has_thinking = c->tmpl && tern_chat_template_has_thinking(c->tmpl);
    c->max_context = tern_model_max_context(c->model);
    if (c->max_context <= 0) c->max_context = INT_MAX;
    char resolved[PATH_MAX];
    c->model_id = strdup(realpath(o->model_dir, resolved) ? resolved : o->model_dir);
    if (!c->model_id) return tern_error(TERN_E_NOMEM, "out of memory");
    return special_ids(c);
}

/* What besides the model decides a prompt's tokens: the tokenizer and the
 * chat template files (a cache on disk is only reused when they match). */
static uint64_t text_namespace(const char *dir)
{
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                                        "chat_template.json"};
    uint64_t h = 1469598103934665603ull;
    char path[4200];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        int ch;
        while ((ch = fgetc(f)) != EOF) h = (h ^ (unsigned char)ch) * 1099511628211ull;
        fclose(f);
        h = (h ^ i) * 1099511628211ull;
    }
    return h;
}

static tern_status setup(srv_ctx *c, const tern_server_opts *o)
{
    if (o->chat_template_args && o->chat_template_args[0]) {
        c->template_args = json_loads(o->chat_template_args, 0, NULL);
        if (!json_is_object(c->template_args))
            return tern_error(TERN_E_INVALID, "--chat-template-args must be a JSON object");
    }
    if (o->prefill_step <= 0) return tern_error(TERN_E_INVALID, "--prefill-step-size must be positive");
    if (o->max_tokens < 0) return tern_error(TERN_E_INVALID, "--max-tokens must be non-negative");
    c->prefill_step = o->prefill_step;
    c->max_body = o->max_body;
    c->log_level = o->log_level;
    tern_status st = load(c, o);
    if (st != TERN_OK) return st;
    srv_defaults_init(&c->defaults);
    c->defaults.temperature = o->temperature;
    c->defaults.top_p = o->top_p;
    c->defaults.top_k = o->top_k;
    c->defaults.min_p = o->min_p;
    c->defaults.max_tokens = o->max_tokens;
    c->defaults.template_args = c->template_args;
    c->defaults.vocab_size = tern_model_vocab_size(c->model);
    if (!(c->metrics = srv_metrics_create())) return tern_error(TERN_E_NOMEM, "out of memory");
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    if (o->max_batch) eo.max_batch = o->max_batch;
    eo.prefill_step = o->prefill_step;
    if (o->prefill_interleave) eo.prefill_interleave = o->prefill_interleave;
    eo.memory_budget = o->memory_budget;
    eo.queue_size = o->queue_size;
    eo.prompt_cache_bytes = o->prompt_cache_bytes;
    eo.no_prompt_cache = o->no_prompt_cache;
    eo.prompt_cache_dir = o->prompt_cache_dir;
    eo.prompt_cache_disk_bytes = o->prompt_cache_disk_bytes;
    eo.prompt_cache_namespace = text_namespace(tern_model_dir(c->model));
    eo.draft_kind = o->draft_kind;
    eo.draft_model = c->draft;
    eo.num_draft_tokens = o->num_draft_tokens;
    eo.ngram_min = o->ngram_min;
    eo.ngram_max = o->ngram_max;
    eo.spec_fixed = o->spec_fixed;
    c->speculation = o->draft_kind != TERN_DRAFT_NONE;
    return tern_engine_create(c->model, &eo, &c->engine);
}

static void teardown(srv_ctx *c)
{
    tern_engine_free(c->engine);
    srv_metrics_free(c->metrics);
    json_decref(c->template_args);
    free(c->model_id);
    free(c->eos_extra);
    free(c->xtc_special);
    tern_chat_template_free(c->tmpl);
    tern_tokenizer_free(c->tok);
    tern_model_free(c->draft);
    tern_model_free(c->model);
}

tern_status tern_server_run(const tern_server_opts *o)
{
    /* Threads created from here on inherit the mask; only sigwait sees these. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv_ctx *c = calloc(1, sizeof *c);
    if (!c) return tern_error(TERN_E_NOMEM, "out of memory");
    tern_status st = setup(c, o);
    srv_http *h = NULL;
    if (st == TERN_OK) st = srv_http_start(o->host, o->port, o->max_body, o->log_level == 0, srv_route, c, &h);
    if (st != TERN_OK) {
        teardown(c);
        free(c);
        return st;
    }
    if (c->log_level <= 1) {
        tern_engine_stats es;
        tern_engine_get_stats(c->engine, &es);
        fprintf(stderr,
                "INFO:tern.serve:serving %s on http://%s:%d (context %d, batch %d, KV pool %ld tokens = %.0f MB, "
                "queue %d)\n",
                c->model_id, o->host, o->port, c->max_context, o->max_batch ? o->max_batch : 16,
                es.kv_capacity_tokens, (double)es.kv_capacity_tokens * (double)es.kv_bytes_per_token / 1e6,
                o->queue_size);
    }
    int sig = 0;
    sigwait(&set, &sig);
    if (c->log_level <= 1)
        fprintf(stderr, "INFO:tern.serve:%s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_http_quiesce(h);
    atomic_store(&c->stopping, 1);
    /* Ends the running generations (their replies complete), answers waiting
     * ones with 503, then closes every connection. */
    tern_engine_stop(c->engine);
    srv_http_stop(h);
    teardown(c);
    free(c);
    return TERN_OK;
}

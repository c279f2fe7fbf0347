/* The generation job (see job.h): tern_generate with a per-token callback
 * that detokenizes, runs the stop / think / tool pipeline, and streams or
 * accumulates the reply. The callback returns non-zero as soon as the client
 * is gone or the server stops, so generation ends before the next decode step. */
#include "server/job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/pipe.h"
#include "server/reply.h"
#include "tern/generate.h"

typedef struct {
    srv_job     base;       /* first: the queue sees this */
    srv_ctx    *ctx;        /* borrowed */
    srv_request req;        /* owned */
    int32_t    *ids;        /* owned prompt */
    int         n_ids;
    int         think_inside;
    srv_chan   *chan;       /* one reference */
} gen_job;

typedef struct {
    gen_job   *job;
    srv_reply  reply;
    srv_pipe   pipe;
    tern_detok *detok;
    srv_buf    content, reasoning;      /* whole reply (non-stream) */
    srv_buf    dc, dr;                  /* this token's deltas */
    srv_buf    wire;
    json_t    *lp;                      /* logprobs content array or NULL */
    int        stop_hit;
    int        cancelled;
    int        failed;                  /* out of memory in the callback */
} gen_run;

static void job_free(gen_job *j)
{
    srv_request_free(&j->req);
    free(j->ids);
    srv_chan_release(j->chan);
    free(j);
}

static void job_drop(srv_job *base)
{
    gen_job *j = (gen_job *)base;
    char *body = srv_error_body(j->req.api, 503, "the server is shutting down");
    if (body) srv_chan_write(j->chan, body, strlen(body));
    free(body);
    srv_chan_close(j->chan, 503);
    job_free(j);
}

static uint64_t fresh_seed(void)
{
    static _Atomic uint64_t weyl;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    return (ms & 0xffffffffu) ^ (weyl += 0x9e3779b9u);
}

static int flush_wire(gen_run *g)
{
    if (!g->wire.len) return 0;
    int rc = srv_chan_write(g->job->chan, srv_buf_str(&g->wire), g->wire.len);
    srv_buf_clear(&g->wire);
    return rc;
}

/* Sends (stream) or keeps (non-stream) this token's deltas. */
static int emit(gen_run *g)
{
    int rc = 0;
    if (g->job->req.stream) {
        rc = srv_reply_delta(&g->reply, srv_buf_str(&g->dc), srv_buf_str(&g->dr), &g->wire);
        if (!rc) rc = flush_wire(g);
    } else {
        rc = srv_buf_append(&g->content, srv_buf_str(&g->dc), g->dc.len) ||
             srv_buf_append(&g->reasoning, srv_buf_str(&g->dr), g->dr.len) ? -1 : 0;
    }
    srv_buf_clear(&g->dc);
    srv_buf_clear(&g->dr);
    return rc;
}

static json_t *lp_entry(const tern_tokenizer *tok, int32_t id, float lp)
{
    const char *piece = tern_tokenizer_id_to_piece(tok, id);
    if (!isfinite(lp)) lp = -1e30f;  /* JSON has no infinities */
    return json_pack("{s:i,s:s,s:f}", "id", (int)id, "token", piece ? piece : "", "logprob", (double)lp);
}

static void record_logprobs(gen_run *g, const tern_token_event *ev)
{
    const srv_request *r = &g->job->req;
    if (!g->lp) return;
    json_t *e = NULL;
    if (r->top_logprobs > 0 && ev->n_top > 0) {
        /* mlx_lm.server: the entry is the best alternative merged with the list. */
        json_t *list = json_array();
        for (int i = 0; i < ev->n_top; i++)
            json_array_append_new(list, lp_entry(g->job->ctx->tok, ev->top_ids[i], ev->top_logprobs[i]));
        e = lp_entry(g->job->ctx->tok, ev->top_ids[0], ev->top_logprobs[0]);
        if (e) json_object_set_new(e, "top_logprobs", list); else json_decref(list);
    } else if (r->logprobs) {
        e = json_pack("{s:i,s:f}", "id", (int)ev->token, "logprob",
                      isfinite(ev->logprob) ? (double)ev->logprob : -1e30);
    }
    if (e) json_array_append_new(g->lp, e);
}

static int on_token(void *user, const tern_token_event *ev)
{
    gen_run *g = user;
    gen_job *j = g->job;
    if (ev->step == 0) srv_chan_set_decoding(j->chan);
    record_logprobs(g, ev);
    char *delta = NULL;
    if (tern_detok_push(g->detok, ev->token, &delta) != TERN_OK) { g->failed = 1; return 1; }
    int hit = srv_pipe_push(&g->pipe, delta, strlen(delta), &g->dc, &g->dr);
    free(delta);
    if (hit < 0 || emit(g)) {
        if (srv_chan_cancelled(j->chan)) g->cancelled = 1; else g->failed = 1;
        return 1;
    }
    if (hit) { g->stop_hit = 1; return 1; }
    if (srv_chan_peer_gone(j->chan)) srv_chan_cancel(j->chan);
    if (srv_chan_cancelled(j->chan) || atomic_load(&j->ctx->stopping)) { g->cancelled = 1; return 1; }
    return 0;
}

static const char *finish_reason(const gen_run *g, const json_t *calls, const tern_generate_stats *st)
{
    if (calls) return "tool_calls";
    if (g->stop_hit) return "stop";
    if (st->finish == TERN_FINISH_LENGTH) return "length";
    return "stop";
}

/* Reports a failure: an error body (not yet streaming) or an in-stream error. */
static void fail(gen_run *g, int status, const char *msg)
{
    gen_job *j = g->job;
    if (j->req.stream) {
        srv_reply_stream_error(&g->reply, msg, &g->wire);
        if (j->req.api != SRV_API_ANTHROPIC) srv_buf_puts(&g->wire, "data: [DONE]\n\n");
        flush_wire(g);
        srv_chan_close(j->chan, 200);
        return;
    }
    char *body = srv_error_body(j->req.api, status, msg);
    if (body) srv_chan_write(j->chan, body, strlen(body));
    free(body);
    srv_chan_close(j->chan, status);
}

static void job_run(srv_job *base)
{
    gen_job *j = (gen_job *)base;
    srv_ctx *c = j->ctx;
    if (srv_chan_cancelled(j->chan) || srv_chan_peer_gone(j->chan)) {
        srv_metrics_disconnect(c->metrics);
        srv_chan_close(j->chan, 499);
        job_free(j);
        return;
    }
    gen_run g;
    memset(&g, 0, sizeof g);
    g.job = j;
    srv_buf_init(&g.content); srv_buf_init(&g.reasoning); srv_buf_init(&g.dc); srv_buf_init(&g.dr); srv_buf_init(&g.wire);
    srv_request *r = &j->req;
    int ok = srv_reply_init(&g.reply, r->api, r->stream, r->include_usage, r->model) == 0 &&
             srv_pipe_init(&g.pipe, (const char *const *)r->stop, r->n_stop, c->has_thinking, j->think_inside,
                           r->tools != NULL, r->prefill) == TERN_OK &&
             tern_detok_create(c->tok, 0, &g.detok) == TERN_OK;
    if (ok && (r->logprobs || r->top_logprobs > 0)) ok = (g.lp = json_array()) != NULL;
    tern_generate_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.prompt_tokens = j->n_ids;
    stats.finish = TERN_FINISH_LENGTH;
    tern_status st = ok ? TERN_OK : TERN_E_NOMEM;
    if (ok && r->stream) {
        srv_reply_begin(&g.reply, j->n_ids, &g.wire);
        flush_wire(&g);
    }
    int max_tokens = r->max_tokens;
    if (max_tokens > c->max_context - j->n_ids) max_tokens = c->max_context - j->n_ids;
    if (ok && max_tokens > 0) {
        tern_generate_opts o;
        tern_generate_opts_default(&o);
        o.max_tokens = max_tokens;
        o.prefill_chunk = c->prefill_step;
        o.top_logprobs = r->top_logprobs > 0 ? r->top_logprobs : 0;
        o.want_logprob = r->logprobs;
        o.sampling = r->sampling;
        o.sampling.xtc_special = c->xtc_special;
        o.sampling.n_xtc_special = c->n_xtc_special;
        if (!r->has_seed) o.sampling.seed = fresh_seed();
        o.extra_eos = c->eos_extra;
        o.n_extra_eos = c->n_eos_extra;
        st = tern_generate(c->model, j->ids, j->n_ids, &o, on_token, &g, &stats);
    }
    srv_metrics_generation(c->metrics, j->n_ids, stats.generated_tokens, stats.prefill_seconds, stats.decode_seconds);
    if (srv_chan_cancelled(j->chan)) {
        /* The client is gone: nobody reads the rest. (A server stop instead
         * falls through and finishes the reply.) */
        srv_metrics_disconnect(c->metrics);
        srv_chan_close(j->chan, 499);
        goto done;
    }
    if (st != TERN_OK || g.failed) {
        fail(&g, 500, st != TERN_OK ? tern_last_error() : "generation failed");
        goto done;
    }
    char *rest = NULL;
    if (!g.stop_hit && tern_detok_flush(g.detok, &rest) == TERN_OK && rest[0])
        g.stop_hit = srv_pipe_push(&g.pipe, rest, strlen(rest), &g.dc, &g.dr) == 1;
    free(rest);
    json_t *calls = NULL;
    srv_pipe_finish(&g.pipe, r->tools, &g.dc, &g.dr, &calls);
    if (!r->stream) emit(&g);
    srv_reply_end e = {
        .content = r->stream ? srv_buf_str(&g.dc) : srv_buf_str(&g.content),
        .reasoning = r->stream ? srv_buf_str(&g.dr) : srv_buf_str(&g.reasoning),
        .tool_calls = calls,
        .logprobs = g.lp && json_array_size(g.lp) ? json_pack("{s:O}", "content", g.lp) : NULL,
        .finish = finish_reason(&g, calls, &stats),
        .prompt_tokens = j->n_ids,
        /* mlx_lm.server counts the end-of-sequence token it stopped on. */
        .completion_tokens = stats.generated_tokens + (stats.finish == TERN_FINISH_EOS),
        .cached_tokens = stats.cached_tokens,
    };
    /* Anthropic reports which stop sequence ended the reply. */
    e.stop_sequence = srv_stop_which(g.pipe.stop);
    srv_reply_finish(&g.reply, &e, &g.wire);
    json_decref(e.logprobs);
    json_decref(calls);
    flush_wire(&g);
    srv_chan_close(j->chan, 200);
done:
    srv_reply_free(&g.reply);
    srv_pipe_free(&g.pipe);
    tern_detok_free(g.detok);
    json_decref(g.lp);
    srv_buf_free(&g.content); srv_buf_free(&g.reasoning); srv_buf_free(&g.dc); srv_buf_free(&g.dr); srv_buf_free(&g.wire);
    job_free(j);
}

int srv_job_submit(srv_ctx *c, srv_request *req, int32_t *ids, int n_ids, int think_inside, srv_chan *chan)
{
    gen_job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_request_free(req);
        free(ids);
        srv_chan_release(chan);
        return -3;
    }
    j->base.run = job_run;
    j->base.drop = job_drop;
    j->ctx = c;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->ids = ids;
    j->n_ids = n_ids;
    j->think_inside = think_inside;
    j->chan = chan;
    int rc = atomic_load(&c->stopping) ? -2 : srv_queue_push(c->queue, &j->base);
    if (rc) job_free(j);
    return rc;
}

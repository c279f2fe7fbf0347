/* A generation job (see job.h): one request submitted to the engine, with
 * callbacks that detokenize each choice, run its stop / think / tool
 * pipeline, and stream or accumulate the reply. Callbacks run on the
 * engine's thread; should_cancel tells the engine when the client is gone or
 * the server stops, so the row and its blocks are freed within an iteration. */
#include "server/job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/pipe.h"
#include "server/reply.h"
#include "tern/engine.h"

/* The text side of one choice. */
typedef struct {
    srv_pipe   pipe;
    int        pipe_ok;
    tern_detok *detok;
    srv_buf    content, reasoning;      /* whole reply (non-stream) */
    srv_buf    dc, dr;                  /* this token's deltas */
    json_t    *lp;                      /* logprobs content array or NULL */
    int        stop_hit;
} gen_choice;

typedef struct {
    srv_ctx    *ctx;        /* borrowed */
    srv_request req;        /* owned */
    int32_t    *ids;        /* owned prompt */
    int         n_ids;
    int         think_inside;
    srv_chan   *chan;       /* one reference */
    srv_reply   reply;
    srv_buf     wire;
    int         n;
    gen_choice *ch;         /* owned, [n] */
    int         cancelled;
    int         failed;     /* out of memory in a callback */
    int         begun;      /* the stream's first bytes are out */
} gen_job;

static void job_free(gen_job *j)
{
    for (int c = 0; j->ch && c < j->n; c++) {
        gen_choice *g = &j->ch[c];
        if (g->pipe_ok) srv_pipe_free(&g->pipe);
        tern_detok_free(g->detok);
        json_decref(g->lp);
        srv_buf_free(&g->content); srv_buf_free(&g->reasoning); srv_buf_free(&g->dc); srv_buf_free(&g->dr);
    }
    free(j->ch);
    srv_reply_free(&j->reply);
    srv_buf_free(&j->wire);
    srv_request_free(&j->req);
    free(j->ids);
    srv_chan_release(j->chan);
    free(j);
}

static uint64_t fresh_seed(void)
{
    static _Atomic uint64_t weyl;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    return (ms & 0xffffffffu) ^ (weyl += 0x9e3779b9u);
}

static int flush_wire(gen_job *j);

/* A stream starts (role chunk / message_start) when its generation does:
 * until then a waiting client gets keepalive comments only. */
static void begin(gen_job *j)
{
    if (j->begun || !j->req.stream) return;
    j->begun = 1;
    srv_reply_begin(&j->reply, j->n_ids, &j->wire);
}

static int flush_wire(gen_job *j)
{
    if (!j->wire.len) return 0;
    int rc = srv_chan_write(j->chan, srv_buf_str(&j->wire), j->wire.len);
    srv_buf_clear(&j->wire);
    return rc;
}

/* Sends (stream) or keeps (non-stream) this token's deltas. */
static int emit(gen_job *j, gen_choice *g)
{
    int rc = 0;
    if (j->req.stream) {
        rc = srv_reply_delta(&j->reply, srv_buf_str(&g->dc), srv_buf_str(&g->dr), &j->wire);
        if (!rc) rc = flush_wire(j);
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

static void record_logprobs(gen_job *j, gen_choice *g, const tern_token_event *ev)
{
    const srv_request *r = &j->req;
    if (!g->lp) return;
    json_t *e = NULL;
    if (r->top_logprobs > 0 && ev->n_top > 0) {
        /* mlx_lm.server: the entry is the best alternative merged with the list. */
        json_t *list = json_array();
        for (int i = 0; i < ev->n_top; i++)
            json_array_append_new(list, lp_entry(j->ctx->tok, ev->top_ids[i], ev->top_logprobs[i]));
        e = lp_entry(j->ctx->tok, ev->top_ids[0], ev->top_logprobs[0]);
        if (e) json_object_set_new(e, "top_logprobs", list); else json_decref(list);
    } else if (r->logprobs) {
        e = json_pack("{s:i,s:f}", "id", (int)ev->token, "logprob",
                      isfinite(ev->logprob) ? (double)ev->logprob : -1e30);
    }
    if (e) json_array_append_new(g->lp, e);
}

static int gone(gen_job *j)
{
    if (srv_chan_peer_gone(j->chan)) srv_chan_cancel(j->chan);
    return srv_chan_cancelled(j->chan) || atomic_load(&j->ctx->stopping);
}

static int on_token(void *user, const tern_token_event *ev)
{
    gen_job *j = user;
    gen_choice *g = &j->ch[ev->choice];
    if (ev->step == 0 && ev->choice == 0) {
        begin(j);
        srv_chan_set_decoding(j->chan);
    }
    record_logprobs(j, g, ev);
    char *delta = NULL;
    if (tern_detok_push(g->detok, ev->token, &delta) != TERN_OK) { j->failed = 1; return 1; }
    int hit = srv_pipe_push(&g->pipe, delta, strlen(delta), &g->dc, &g->dr);
    free(delta);
    if (hit < 0 || emit(j, g)) {
        if (srv_chan_cancelled(j->chan)) j->cancelled = 1; else j->failed = 1;
        return 1;
    }
    if (hit) { g->stop_hit = 1; return 1; }
    if (gone(j)) { j->cancelled = 1; return 1; }
    return 0;
}

static int should_cancel(void *user)
{
    gen_job *j = user;
    if (gone(j)) { j->cancelled = 1; return 1; }
    return 0;
}

static const char *finish_reason(const gen_choice *g, const json_t *calls, tern_finish f)
{
    if (calls) return "tool_calls";
    if (g->stop_hit) return "stop";
    if (f == TERN_FINISH_LENGTH) return "length";
    return "stop";
}

/* Reports a failure: an error body (not yet streaming) or an in-stream error. */
static void fail(gen_job *j, int status, const char *msg)
{
    if (j->req.stream) {
        srv_reply_stream_error(&j->reply, msg, &j->wire);
        if (j->req.api != SRV_API_ANTHROPIC) srv_buf_puts(&j->wire, "data: [DONE]\n\n");
        flush_wire(j);
        srv_chan_close(j->chan, 200);
        return;
    }
    char *body = srv_error_body(j->req.api, status, msg);
    if (body) srv_chan_write(j->chan, body, strlen(body));
    free(body);
    srv_chan_close(j->chan, status);
}

/* The end of one choice: flushes its text and renders its finish (the
 * whole body when not streaming) into out. *calls gets its tool calls. */
static int finish_choice(gen_job *j, int c, const tern_request_result *res, srv_buf *out)
{
    gen_choice *g = &j->ch[c];
    const srv_request *r = &j->req;
    char *rest = NULL;
    if (!g->stop_hit && tern_detok_flush(g->detok, &rest) == TERN_OK && rest[0])
        g->stop_hit = srv_pipe_push(&g->pipe, rest, strlen(rest), &g->dc, &g->dr) == 1;
    free(rest);
    json_t *calls = NULL;
    srv_pipe_finish(&g->pipe, r->tools, &g->dc, &g->dr, &calls);
    if (!r->stream) emit(j, g);
    srv_reply_end e = {
        .content = r->stream ? srv_buf_str(&g->dc) : srv_buf_str(&g->content),
        .reasoning = r->stream ? srv_buf_str(&g->dr) : srv_buf_str(&g->reasoning),
        .tool_calls = calls,
        .logprobs = g->lp && json_array_size(g->lp) ? json_pack("{s:O}", "content", g->lp) : NULL,
        .finish = finish_reason(g, calls, res->finish[c]),
        .prompt_tokens = j->n_ids,
        /* mlx_lm.server counts the end-of-sequence token it stopped on. */
        .completion_tokens = res->generated[c] + (res->finish[c] == TERN_FINISH_EOS),
        .cached_tokens = res->cached_tokens,
        .speculation = j->ctx->speculation,
        .drafted = res->drafted,
        .accepted = res->accepted,
        .target_calls = res->target_calls,
    };
    /* Anthropic reports which stop sequence ended the reply. */
    e.stop_sequence = srv_stop_which(g->pipe.stop);
    int rc = srv_reply_finish(&j->reply, &e, out);
    json_decref(e.logprobs);
    json_decref(calls);
    return rc;
}

/* n > 1 (non-streamed): every choice's body, merged into one with the
 * choices in order and the usage of all of them. */
static int finish_many(gen_job *j, const tern_request_result *res)
{
    json_t *body = NULL, *choices = json_array();
    int rc = choices ? 0 : -1, completion = 0;
    for (int c = 0; c < j->n && !rc; c++) {
        srv_buf one;
        srv_buf_init(&one);
        rc = finish_choice(j, c, res, &one);
        json_t *b = rc ? NULL : json_loadb(srv_buf_str(&one), one.len, JSON_PRESERVE_ORDER, NULL);
        srv_buf_free(&one);
        json_t *ch = b ? json_array_get(json_object_get(b, "choices"), 0) : NULL;
        if (!ch) { json_decref(b); rc = -1; break; }
        json_object_set_new(ch, "index", json_integer(c));
        json_array_append(choices, ch);
        json_t *u = json_object_get(json_object_get(b, "usage"), "completion_tokens");
        completion += u ? (int)json_integer_value(u) : 0;
        if (!body) body = b; else json_decref(b);
    }
    if (!rc) {
        json_object_set(body, "choices", choices);
        json_t *u = json_object_get(body, "usage");
        if (u) {
            json_object_set_new(u, "completion_tokens", json_integer(completion));
            json_object_set_new(u, "total_tokens", json_integer(completion + j->n_ids));
        }
        rc = srv_json_append(&j->wire, body);
    }
    json_decref(choices);
    json_decref(body);
    return rc;
}

static void on_done(void *user, const tern_request_result *res)
{
    gen_job *j = user;
    srv_ctx *c = j->ctx;
    int total = 0;
    for (int i = 0; i < res->n; i++) total += res->generated[i];
    srv_metrics_generation(c->metrics, j->n_ids, total, res->prefill_seconds, res->decode_seconds);
    if (!srv_chan_cancelled(j->chan)) begin(j);
    if (res->status == TERN_E_CANCELLED && !j->req.stream) {
        /* Dropped while waiting: the server is stopping. */
        fail(j, 503, "the server is shutting down");
    } else if (srv_chan_cancelled(j->chan)) {
        /* The client is gone: nobody reads the rest. (A server stop instead
         * finishes the reply.) */
        srv_metrics_disconnect(c->metrics);
        srv_chan_close(j->chan, 499);
    } else if (res->status != TERN_OK || j->failed) {
        fail(j, 500, res->status != TERN_OK ? res->error : "generation failed");
    } else {
        int rc = j->n > 1 ? finish_many(j, res) : finish_choice(j, 0, res, &j->wire);
        if (rc) fail(j, 500, "out of memory");
        else {
            flush_wire(j);
            srv_chan_close(j->chan, 200);
        }
    }
    job_free(j);
}

static int setup_choices(gen_job *j)
{
    srv_request *r = &j->req;
    srv_ctx *c = j->ctx;
    j->ch = calloc((size_t)j->n, sizeof *j->ch);
    if (!j->ch || srv_reply_init(&j->reply, r->api, r->stream, r->include_usage, r->model)) return -1;
    srv_buf_init(&j->wire);
    for (int i = 0; i < j->n; i++) {
        gen_choice *g = &j->ch[i];
        srv_buf_init(&g->content); srv_buf_init(&g->reasoning); srv_buf_init(&g->dc); srv_buf_init(&g->dr);
        if (srv_pipe_init(&g->pipe, (const char *const *)r->stop, r->n_stop, c->has_thinking, j->think_inside,
                          r->tools != NULL, r->prefill) != TERN_OK)
            return -1;
        g->pipe_ok = 1;
        if (tern_detok_create(c->tok, 0, &g->detok) != TERN_OK) return -1;
        if ((r->logprobs || r->top_logprobs > 0) && !(g->lp = json_array())) return -1;
    }
    return 0;
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
    j->ctx = c;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->ids = ids;
    j->n_ids = n_ids;
    j->think_inside = think_inside;
    j->chan = chan;
    j->n = j->req.n > 1 && j->req.api != SRV_API_ANTHROPIC ? j->req.n : 1;
    if (setup_choices(j)) {
        job_free(j);
        return -3;
    }
    srv_request *r = &j->req;
    tern_request_opts o;
    tern_request_opts_default(&o);
    o.max_tokens = r->max_tokens;
    o.n = j->n;
    o.top_logprobs = r->top_logprobs > 0 ? r->top_logprobs : 0;
    o.want_logprob = r->logprobs;
    o.sampling = r->sampling;
    o.sampling.xtc_special = c->xtc_special;
    o.sampling.n_xtc_special = c->n_xtc_special;
    if (!r->has_seed) o.sampling.seed = fresh_seed();
    o.extra_eos = c->eos_extra;
    o.n_extra_eos = c->n_eos_extra;
    o.num_draft_tokens = r->num_draft_tokens;
    if (atomic_load(&c->stopping)) {
        job_free(j);
        return -2;
    }
    tern_request_cb cb = {on_token, should_cancel, on_done, j};
    tern_status st = tern_engine_submit(c->engine, ids, n_ids, &o, &cb, NULL);
    if (st) {
        int rc = st == TERN_E_BUSY ? -1 : st == TERN_E_STATE ? -2 : st == TERN_E_RANGE || st == TERN_E_INVALID ? -4 : -3;
        job_free(j);
        return rc;
    }
    return 0;
}

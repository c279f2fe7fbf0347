/* Route dispatch and the generation endpoints (see routes.h). */
#include "server/routes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/ctx.h"
#include "server/job.h"
#include "server/prompt.h"
#include "server/reply.h"
#include "server/web.h"

static void log_line(const srv_ctx *c, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_line(const srv_ctx *c, int level, const char *fmt, ...)
{
    if (level < c->log_level) return;
    static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:tern.serve:%s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
}

static void reply_text(srv_http_reply *out, int status, const char *body, const char *type)
{
    out->status = status;
    out->body = strdup(body);
    out->len = out->body ? strlen(out->body) : 0;
    out->content_type = type;
    if (!out->body) out->status = 0;
}

static void reply_error(srv_http_reply *out, srv_api api, int status, const char *msg)
{
    out->status = status;
    out->body = srv_error_body(api, status, msg);
    out->len = out->body ? strlen(out->body) : 0;
    out->content_type = "application/json";
    if (!out->body) out->status = 0;
}

static void reply_json(srv_http_reply *out, json_t *j /* stolen */)
{
    srv_buf b;
    srv_buf_init(&b);
    if (!j || srv_json_append(&b, j)) { json_decref(j); srv_buf_free(&b); out->status = 0; return; }
    json_decref(j);
    out->status = 200;
    out->len = b.len;
    out->body = srv_buf_take(&b);
    out->content_type = "application/json";
}

static void page(const unsigned char *bytes, size_t len, srv_http_reply *out)
{
    out->body = malloc(len + 1);
    if (!out->body) { out->status = 0; return; }
    memcpy(out->body, bytes, len + 1);
    out->status = 200;
    out->len = len;
    out->content_type = "text/html; charset=utf-8";
}

static void models(srv_ctx *c, const char *filter, srv_http_reply *out)
{
    json_t *data = json_array();
    if (!filter || !strcmp(filter, c->model_id))
        json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s}", "id", c->model_id, "object", "model", "created",
                                              (json_int_t)time(NULL), "owned_by", "tern"));
    reply_json(out, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

static void metrics(srv_ctx *c, srv_http_reply *out)
{
    srv_buf b;
    srv_buf_init(&b);
    tern_engine_stats es;
    tern_engine_get_stats(c->engine, &es);
    if (srv_metrics_render(c->metrics, &es, &b)) {
        srv_buf_free(&b);
        out->status = 0;
        return;
    }
    out->status = 200;
    out->len = b.len;
    out->body = srv_buf_take(&b);
    out->content_type = "text/plain; version=0.0.4";
}

/* Waits for a non-streamed reply; gives up (closing) when the client leaves. */
static void wait_reply(srv_ctx *c, srv_chan *ch, srv_conn *conn, srv_http_reply *out)
{
    while (!srv_chan_wait_closed(ch, 50)) {
        if (srv_conn_gone(conn)) {
            srv_chan_cancel(ch);
            srv_chan_release(ch);
            out->status = 0;
            log_line(c, 1, "client disconnected before its reply");
            return;
        }
    }
    int status;
    out->body = srv_chan_take(ch, &out->len, &status);
    out->status = out->body ? status : 0;
    out->content_type = "application/json";
    srv_chan_release(ch);
}

static void generate(srv_ctx *c, srv_api api, const srv_http_request *hr, srv_http_reply *out)
{
    srv_request req;
    tern_status st = srv_request_parse(api, hr->body, hr->len, &c->defaults, &req);
    if (st != TERN_OK) {
        reply_error(out, api, st == TERN_E_NOMEM ? 500 : 400, tern_last_error());
        return;
    }
    int32_t *ids = NULL;
    int n = 0, think_inside = 0;
    st = srv_prompt_build(c, &req, &ids, &n, &think_inside);
    if (st != TERN_OK) {
        reply_error(out, api, st == TERN_E_INVALID ? 400 : 500, tern_last_error());
        srv_request_free(&req);
        return;
    }
    if (n >= c->max_context) {
        char msg[160];
        snprintf(msg, sizeof msg, "Prompt is too long: %d tokens, the model's context is %d tokens", n, c->max_context);
        reply_error(out, api, 400, msg);
        free(ids);
        srv_request_free(&req);
        return;
    }
    int stream = req.stream;
    srv_chan *ch = srv_chan_create();
    if (!ch) {
        free(ids);
        srv_request_free(&req);
        reply_error(out, api, 500, "out of memory");
        return;
    }
    srv_chan_set_fd(ch, srv_conn_fd(hr->conn));
    int rc = srv_job_submit(c, &req, ids, n, think_inside, ch);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rc == -4 ? tern_last_error() : "");
        srv_chan_release(ch);
        reply_error(out, api, rc == -3 ? 500 : rc == -4 ? 400 : 503,
                    rc == -1 ? "The server is busy: the request queue is full, retry later"
                    : rc == -2 ? "The server is shutting down" : rc == -4 ? msg : "out of memory");
        if (rc == -1) out->retry_after = 1;
        return;
    }
    log_line(c, 0, "queued a %s request: %d prompt tokens", stream ? "streaming" : "non-streaming", n);
    if (stream) {
        out->status = 200;
        out->stream = ch;
        return;
    }
    wait_reply(c, ch, hr->conn, out);
}

/* Anthropic's token counting: the prompt /v1/messages would run, counted. */
static void count_tokens(srv_ctx *c, const srv_http_request *hr, srv_http_reply *out)
{
    srv_request req;
    tern_status st = srv_request_parse_count(hr->body, hr->len, &c->defaults, &req);
    if (st != TERN_OK) {
        reply_error(out, SRV_API_ANTHROPIC, st == TERN_E_NOMEM ? 500 : 400, tern_last_error());
        return;
    }
    int32_t *ids = NULL;
    int n = 0, think_inside = 0;
    st = srv_prompt_build(c, &req, &ids, &n, &think_inside);
    srv_request_free(&req);
    free(ids);
    if (st != TERN_OK) {
        reply_error(out, SRV_API_ANTHROPIC, st == TERN_E_INVALID ? 400 : 500, tern_last_error());
        return;
    }
    reply_json(out, json_pack("{s:i}", "input_tokens", n));
}

static srv_api api_of(const char *url)
{
    if (!strcmp(url, "/v1/messages") || !strcmp(url, "/v1/messages/count_tokens")) return SRV_API_ANTHROPIC;
    if (!strcmp(url, "/v1/completions")) return SRV_API_TEXT;
    return SRV_API_CHAT;
}

static srv_endpoint endpoint_of(const char *url)
{
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) return SRV_EP_CHAT;
    if (!strcmp(url, "/v1/completions")) return SRV_EP_TEXT;
    if (!strcmp(url, "/v1/messages")) return SRV_EP_MESSAGES;
    if (!strcmp(url, "/v1/messages/count_tokens")) return SRV_EP_COUNT_TOKENS;
    if (!strncmp(url, "/v1/models", 10)) return SRV_EP_MODELS;
    if (!strcmp(url, "/health")) return SRV_EP_HEALTH;
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return SRV_EP_PAGE;
    if (!strcmp(url, "/metrics")) return SRV_EP_METRICS;
    return SRV_EP_OTHER;
}

static void dispatch(srv_ctx *c, const srv_http_request *r, srv_http_reply *out)
{
    const char *m = r->method, *u = r->url;
    srv_endpoint ep = endpoint_of(u);
    int post = !strcmp(m, "POST"), get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    if (!strcmp(m, "OPTIONS")) { reply_text(out, 204, "", "text/plain"); return; }
    if (r->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "Request body is larger than the limit of %zu bytes", c->max_body);
        reply_error(out, api_of(u), 413, msg);
        return;
    }
    if (post && (ep == SRV_EP_CHAT || ep == SRV_EP_TEXT || ep == SRV_EP_MESSAGES)) { generate(c, api_of(u), r, out); return; }
    if (post && ep == SRV_EP_COUNT_TOKENS) { count_tokens(c, r, out); return; }
    if (get && ep == SRV_EP_PAGE) { page(srv_web_chat_html, srv_web_chat_html_len, out); return; }
    if (get && ep == SRV_EP_HEALTH) { reply_text(out, 200, "{\"status\": \"ok\"}", "application/json"); return; }
    if (get && ep == SRV_EP_METRICS) { metrics(c, out); return; }
    if (get && !strcmp(u, "/v1/models")) { models(c, NULL, out); return; }
    if (get && !strncmp(u, "/v1/models/", 11)) { models(c, u + 11, out); return; }
    reply_error(out, SRV_API_CHAT, 404, "Not Found");
}

void srv_route(void *user, const srv_http_request *r, srv_http_reply *out)
{
    srv_ctx *c = user;
    dispatch(c, r, out);
    srv_metrics_request(c->metrics, endpoint_of(r->url), out->status ? out->status : 499);
    log_line(c, out->status >= 500 ? 3 : 1, "%s %s %d", r->method, r->url, out->status);
}

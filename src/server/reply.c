/* OpenAI-style response objects and SSE framing, as mlx_lm.server writes them
 * (see reply.h). */
#include "server/reply.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/anthropic.h"
#include "server/json_out.h"
#include "text/toolcall.h"

static int sse(srv_buf *out, json_t *j /* stolen */)
{
    if (!j) return -1;
    int rc = srv_buf_puts(out, "data: ") || srv_json_append(out, j) || srv_buf_puts(out, "\n\n") ? -1 : 0;
    json_decref(j);
    return rc;
}

int srv_reply_init(srv_reply *r, srv_api api, int stream, int include_usage, const char *model)
{
    memset(r, 0, sizeof *r);
    r->api = api;
    r->stream = stream;
    r->include_usage = include_usage;
    r->created = (long long)time(NULL);
    r->model = strdup(model ? model : "default_model");
    char hex[40];
    tern_random_id(hex, "", 32);
    /* uuid4-shaped, as Python's str(uuid.uuid4()). */
    hex[12] = '4';
    snprintf(r->id, sizeof r->id, "%s%.8s-%.4s-%.4s-%.4s-%.12s",
             api == SRV_API_TEXT ? "cmpl-" : api == SRV_API_ANTHROPIC ? "msg_" : "chatcmpl-",
             hex, hex + 8, hex + 12, hex + 16, hex + 20);
    if (api == SRV_API_ANTHROPIC) snprintf(r->id, sizeof r->id, "msg_%.24s", hex);
    return r->model ? 0 : -1;
}

void srv_reply_free(srv_reply *r)
{
    free(r->model);
    r->model = NULL;
    for (int k = 0; k < 2; k++) {
        free(r->delta_head[k]);
        free(r->delta_tail[k]);
        r->delta_head[k] = r->delta_tail[k] = NULL;
    }
}

static const char *object_type(const srv_reply *r)
{
    if (r->api == SRV_API_TEXT) return "text_completion";
    return r->stream ? "chat.completion.chunk" : "chat.completion";
}

static json_t *usage(const srv_reply_end *e)
{
    json_t *u = json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", e->prompt_tokens,
                          "completion_tokens", e->completion_tokens,
                          "total_tokens", e->prompt_tokens + e->completion_tokens,
                          "prompt_tokens_details", "cached_tokens", e->cached_tokens);
    if (u && e->speculation)
        json_object_set_new(u, "speculation", json_pack("{s:I,s:I,s:I}", "drafted", (json_int_t)e->drafted,
                                                        "accepted", (json_int_t)e->accepted, "target_calls",
                                                        (json_int_t)e->target_calls));
    return u;
}

/* The envelope mlx_lm.server puts around every choice. */
static json_t *envelope(const srv_reply *r, json_t *choice /* stolen */)
{
    if (!choice) return NULL;
    return json_pack("{s:s,s:s,s:s,s:s,s:I,s:[o]}", "id", r->id, "system_fingerprint", "tern",
                     "object", object_type(r), "model", r->model, "created", (json_int_t)r->created,
                     "choices", choice);
}

/* mlx_lm.server's message / delta: role always; content always in a message
 * (null when empty) and only when non-empty in a delta; reasoning and
 * tool_calls only when present. */
static json_t *chat_choice(const srv_reply *r, const char *content, const char *reasoning,
                           json_t *tool_calls, const char *finish, json_t *logprobs)
{
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    json_t *choice = json_pack("{s:i,s:o}", "index", 0, "finish_reason", finish ? json_string(finish) : json_null());
    if (!choice || !msg) { json_decref(choice); json_decref(msg); return NULL; }
    if (!r->stream) json_object_set_new(msg, "content", content && content[0] ? json_string(content) : json_null());
    else if (content && content[0]) json_object_set_new(msg, "content", json_string(content));
    if (reasoning && reasoning[0]) json_object_set_new(msg, "reasoning", json_string(reasoning));
    if (tool_calls && json_array_size(tool_calls)) {
        json_t *calls = json_deep_copy(tool_calls);
        size_t i;
        json_t *c;
        if (r->stream) json_array_foreach(calls, i, c) json_object_set_new(c, "index", json_integer((json_int_t)i));
        json_object_set_new(msg, "tool_calls", calls);
    }
    if (logprobs) json_object_set(choice, "logprobs", logprobs);
    json_object_set_new(choice, r->stream ? "delta" : "message", msg);
    return choice;
}

static json_t *text_choice(const char *text, const char *finish, json_t *logprobs)
{
    json_t *choice = json_pack("{s:i,s:o,s:s}", "index", 0, "finish_reason",
                               finish ? json_string(finish) : json_null(), "text", text ? text : "");
    if (choice && logprobs) json_object_set(choice, "logprobs", logprobs);
    return choice;
}

int srv_reply_begin(srv_reply *r, int prompt_tokens, srv_buf *out)
{
    if (!r->stream) return 0;
    if (r->api == SRV_API_ANTHROPIC) return srv_anth_begin(r, prompt_tokens, out);
    if (r->api == SRV_API_TEXT) return 0;
    /* Role first, with empty content (as OpenAI does; later deltas follow mlx_lm.server). */
    json_t *c = chat_choice(r, "", NULL, NULL, NULL, NULL);
    if (c) json_object_set_new(json_object_get(c, "delta"), "content", json_string(""));
    return sse(out, envelope(r, c));
}

/* Renders the delta event once with a marker string and keeps what comes
 * before and after it. The marker is looked up from the end: the text field is
 * the last string of the event, after the client-chosen model name. */
static int delta_template(srv_reply *r, int kind)
{
    static const char MARK[] = "\x01tern-delta\x01";
    json_t *choice = r->api == SRV_API_TEXT ? text_choice(MARK, NULL, NULL)
                   : chat_choice(r, kind ? "" : MARK, kind ? MARK : "", NULL, NULL, NULL);
    srv_buf b;
    srv_buf_init(&b);
    json_t *env = envelope(r, choice);
    int rc = -1;
    if (env && !srv_buf_puts(&b, "data: ") && !srv_json_append(&b, env)) {
        srv_buf m;
        srv_buf_init(&m);
        srv_json_append_string(&m, MARK, sizeof MARK - 1);
        const char *hit = NULL, *p = srv_buf_str(&b);
        while ((p = strstr(p, srv_buf_str(&m)))) hit = p++;
        if (hit) {
            r->delta_head[kind] = strndup(srv_buf_str(&b), (size_t)(hit - srv_buf_str(&b)));
            size_t tail = strlen(hit + m.len);
            r->delta_tail[kind] = malloc(tail + 3);
            if (r->delta_tail[kind]) { memcpy(r->delta_tail[kind], hit + m.len, tail); memcpy(r->delta_tail[kind] + tail, "\n\n", 3); }
            rc = r->delta_head[kind] && r->delta_tail[kind] ? 0 : -1;
        }
        srv_buf_free(&m);
    }
    json_decref(env);
    srv_buf_free(&b);
    return rc;
}

static int fast_delta(srv_reply *r, int kind, const char *text, srv_buf *out)
{
    if (!r->delta_head[kind] && delta_template(r, kind)) return -1;
    return srv_buf_puts(out, r->delta_head[kind]) || srv_json_append_string(out, text, strlen(text)) ||
           srv_buf_puts(out, r->delta_tail[kind]) ? -1 : 0;
}

int srv_reply_delta(srv_reply *r, const char *content, const char *reasoning, srv_buf *out)
{
    if (!r->stream) return 0;
    if (!content) content = "";
    if (!reasoning) reasoning = "";
    if (!content[0] && !reasoning[0]) return 0;
    if (r->api == SRV_API_ANTHROPIC) return srv_anth_delta(r, content, reasoning, out);
    if (r->api == SRV_API_TEXT) return content[0] ? fast_delta(r, 0, content, out) : 0;
    if (!reasoning[0]) return fast_delta(r, 0, content, out);
    if (!content[0]) return fast_delta(r, 1, reasoning, out);
    return sse(out, envelope(r, chat_choice(r, content, reasoning, NULL, NULL, NULL)));
}

int srv_reply_finish(srv_reply *r, const srv_reply_end *e, srv_buf *out)
{
    if (r->api == SRV_API_ANTHROPIC) return srv_anth_finish(r, e, out);
    json_t *choice = r->api == SRV_API_TEXT
                         ? text_choice(e->content, e->finish, r->stream ? NULL : e->logprobs)
                         : chat_choice(r, e->content, e->reasoning, e->tool_calls, e->finish,
                                       r->stream ? NULL : e->logprobs);
    json_t *env = envelope(r, choice);
    if (!env) return -1;
    json_object_set_new(env, "usage", usage(e));
    if (!r->stream) {
        int rc = srv_json_append(out, env);
        json_decref(env);
        return rc;
    }
    if (sse(out, env)) return -1;
    if (r->include_usage) {
        json_t *u = json_pack("{s:s,s:s,s:s,s:s,s:I,s:[],s:o}", "id", r->id, "system_fingerprint", "tern",
                              "object", "chat.completion", "model", r->model, "created", (json_int_t)r->created,
                              "choices", "usage", usage(e));
        if (sse(out, u)) return -1;
    }
    return srv_buf_puts(out, "data: [DONE]\n\n");
}

static const char *openai_type(int status)
{
    switch (status) {
    case 400: case 413: return "invalid_request_error";
    case 404: return "not_found_error";
    case 429: case 503: return "server_busy";
    default: return "server_error";
    }
}

static const char *anthropic_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
    }
}

char *srv_error_body(srv_api api, int status, const char *message)
{
    json_t *j = api == SRV_API_ANTHROPIC
        ? json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", anthropic_type(status), "message", message)
        : json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", message, "type", openai_type(status), "param", "code");
    if (!j) j = json_pack("{s:{s:s,s:s}}", "error", "message", "request failed", "type", openai_type(status));
    char *s = j ? json_dumps(j, JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    return s;
}

int srv_reply_stream_error(srv_reply *r, const char *message, srv_buf *out)
{
    if (r->api == SRV_API_ANTHROPIC) {
        char *body = srv_error_body(r->api, 500, message);
        int rc = !body || srv_buf_printf(out, "event: error\ndata: %s\n\n", body) ? -1 : 0;
        free(body);
        return rc;
    }
    json_t *j = json_pack("{s:{s:s,s:s}}", "error", "message", message, "type", "server_error");
    return sse(out, j);
}

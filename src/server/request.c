/* Request parsing and validation (see request.h). Messages follow
 * mlx_lm.server's wording so that clients see the same errors. */
#include "server/request.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/anthropic.h"

/* Bounds on what a client may send, whatever the body cap. */
#define MAX_STOP_SEQS    64
#define MAX_STOP_BYTES   1024   /* per stop string: the matcher's hold-back work grows with it */
#define MAX_BIAS_ENTRIES 4096
#define MAX_MESSAGES     100000

void srv_defaults_init(srv_defaults *d)
{
    memset(d, 0, sizeof *d);
    d->temperature = 0.0f;
    d->top_p = 1.0f;
    d->top_k = 0;
    d->min_p = 0.0f;
    d->max_tokens = 512;
}

void srv_request_free(srv_request *r)
{
    free(r->model);
    json_decref(r->messages);
    free(r->prefill);
    json_decref(r->tools);
    json_decref(r->template_kwargs);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->bias_ids);
    free(r->bias_values);
    memset(r, 0, sizeof *r);
}

static tern_status bad(const char *msg) { return tern_error(TERN_E_INVALID, "%s", msg); }

/* mlx_lm.server's _validate: "<name> must be of type <t>", "... at least <min>",
 * "... at most <max>". Booleans are not numbers here. */
static tern_status check_int(const json_t *b, const char *key, const char *name, long long dflt, long long lo,
                             long long hi, int allow_minus_one, long long *out)
{
    const json_t *v = json_object_get(b, key);
    if (!v || json_is_null(v)) { *out = dflt; return TERN_OK; }
    if (!json_is_integer(v)) return tern_error(TERN_E_INVALID, "%s must be of type int", name);
    *out = json_integer_value(v);
    if (allow_minus_one && *out == -1) return TERN_OK;
    if (*out < lo) return tern_error(TERN_E_INVALID, "%s must be at least %lld", name, lo);
    if (*out > hi) return tern_error(TERN_E_INVALID, "%s must be at most %lld", name, hi);
    return TERN_OK;
}

static tern_status check_num(const json_t *b, const char *key, double dflt, double lo, double hi, float *out)
{
    const json_t *v = json_object_get(b, key);
    double x = dflt;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v)) return tern_error(TERN_E_INVALID, "%s must be of type ('float', 'int')", key);
        x = json_number_value(v);
    }
    if (x < lo) return tern_error(TERN_E_INVALID, "%s must be at least %g", key, lo);
    if (x > hi) return tern_error(TERN_E_INVALID, "%s must be at most %g", key, hi);
    *out = (float)x;
    return TERN_OK;
}

static tern_status parse_sampling(const json_t *b, const srv_defaults *d, srv_request *r)
{
    tern_sampling_params *s = &r->sampling;
    tern_sampling_params_default(s);
    long long n;
    tern_status st;

    const json_t *v = json_object_get(b, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) return bad("stream must be of type bool");
    r->stream = json_is_true(v);
    const json_t *so = json_object_get(b, "stream_options");
    r->include_usage = json_is_object(so) && json_is_true(json_object_get(so, "include_usage"));

    const char *mt = json_object_get(b, "max_completion_tokens") &&
                     !json_is_null(json_object_get(b, "max_completion_tokens"))
                         ? "max_completion_tokens" : "max_tokens";
    if ((st = check_int(b, mt, "max_tokens", d->max_tokens, 1, INT_MAX, 0, &n))) return st;
    r->max_tokens = (int)n;
    /* OpenAI's n: choices sampled from one prompt (forked KV rows). */
    if ((st = check_int(b, "n", "n", 1, 1, SRV_MAX_CHOICES, 0, &n))) return st;
    r->n = (int)n;
    if (r->n > 1 && r->stream) return bad("n > 1 is served without streaming only; set stream to false");
    if ((st = check_num(b, "temperature", d->temperature, 0, HUGE_VAL, &s->temperature))) return st;
    if ((st = check_num(b, "top_p", d->top_p, 0, 1, &s->top_p))) return st;
    if ((st = check_int(b, "top_k", "top_k", d->top_k, 0, INT_MAX, 0, &n))) return st;
    s->top_k = (int)n;
    if ((st = check_num(b, "min_p", d->min_p, 0, 1, &s->min_p))) return st;
    if ((st = check_int(b, "num_draft_tokens", "num_draft_tokens", -1, 0, 15, 0, &n))) return st;
    r->num_draft_tokens = (int)n;
    if ((st = check_num(b, "repetition_penalty", 0, 0, HUGE_VAL, &s->repetition_penalty))) return st;
    if ((st = check_int(b, "repetition_context_size", "repetition_context_size", 20, 0, INT_MAX, 0, &n))) return st;
    s->repetition_context_size = (int)n;
    if ((st = check_num(b, "presence_penalty", 0, -HUGE_VAL, HUGE_VAL, &s->presence_penalty))) return st;
    if ((st = check_int(b, "presence_context_size", "presence_context_size", 20, 0, INT_MAX, 0, &n))) return st;
    s->presence_context_size = (int)n;
    if ((st = check_num(b, "frequency_penalty", 0, -HUGE_VAL, HUGE_VAL, &s->frequency_penalty))) return st;
    if ((st = check_int(b, "frequency_context_size", "frequency_context_size", 20, 0, INT_MAX, 0, &n))) return st;
    s->frequency_context_size = (int)n;

    v = json_object_get(b, "logprobs");
    if (v && !json_is_null(v) && !json_is_boolean(v)) return bad("logprobs must be of type bool");
    r->logprobs = json_is_true(v);
    if ((st = check_int(b, "top_logprobs", "top_logprobs", -1, 0, 11, 1, &n))) return st;
    r->top_logprobs = (int)n;

    /* mlx_lm.server wants floats here; integers are accepted as well. */
    v = json_object_get(b, "xtc_probability");
    if (v && !json_is_null(v) && !json_is_number(v)) return bad("xtc_probability must be of type float");
    if ((st = check_num(b, "xtc_probability", 0, 0, 1, &s->xtc_probability))) return st;
    v = json_object_get(b, "xtc_threshold");
    if (v && !json_is_null(v) && !json_is_number(v)) return bad("xtc_threshold must be of type float");
    /* mlx_lm.server allows up to 1; the sampler's range is [0, 0.5]. */
    if ((st = check_num(b, "xtc_threshold", 0.1, 0, 1, &s->xtc_threshold))) return st;

    v = json_object_get(b, "model");
    if (v && !json_is_string(v)) return bad("requested_model must be of type str");
    r->model = strdup(v ? json_string_value(v) : "default_model");
    if (!r->model) return tern_error(TERN_E_NOMEM, "out of memory");
    v = json_object_get(b, "adapters");
    if (v && !json_is_null(v) && !json_is_string(v)) return bad("adapter must be of type str");
    if (json_is_string(v) && json_string_length(v)) return tern_error(TERN_E_INVALID, "adapters are not supported by this server");
    v = json_object_get(b, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return bad("seed must be of type int");
        r->has_seed = 1;
        s->seed = (uint64_t)json_integer_value(v);
    }

    v = json_object_get(b, "logit_bias");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return bad("logit_bias must be of type dict");
        if (json_object_size(v) > MAX_BIAS_ENTRIES) return bad("logit_bias has too many entries");
        size_t cnt = json_object_size(v);
        r->bias_ids = calloc(cnt ? cnt : 1, sizeof *r->bias_ids);
        r->bias_values = calloc(cnt ? cnt : 1, sizeof *r->bias_values);
        if (!r->bias_ids || !r->bias_values) return tern_error(TERN_E_NOMEM, "out of memory");
        const char *key;
        const json_t *val;
        int i = 0;
        json_object_foreach((json_t *)v, key, val) {
            char *end;
            errno = 0;
            long id = strtol(key, &end, 10);
            while (*end == ' ') end++;
            if (end == key || *end || errno || !json_is_number(val)) return bad("logit_bias must be a dict of int to float");
            if (id < 0 || (d->vocab_size > 0 && id >= d->vocab_size))
                return tern_error(TERN_E_INVALID, "logit_bias token id %ld is out of range [0, %d)", id, d->vocab_size);
            r->bias_ids[i] = (int32_t)id;
            r->bias_values[i] = (float)json_number_value(val);
            i++;
        }
        s->bias_ids = r->bias_ids;
        s->bias_values = r->bias_values;
        s->n_bias = i;
    }

    if (tern_sampling_params_validate(s) != TERN_OK) return TERN_E_INVALID;
    return TERN_OK;
}

static tern_status parse_stop(const json_t *b, srv_request *r)
{
    const json_t *v = json_object_get(b, "stop");
    if (!v || json_is_null(v)) return TERN_OK;
    if (json_is_string(v)) {
        if (!json_string_length(v)) return TERN_OK;
        if (json_string_length(v) > MAX_STOP_BYTES) return bad("stop strings must be at most 1024 bytes long");
        r->stop = calloc(1, sizeof *r->stop);
        if (!r->stop || !(r->stop[0] = strdup(json_string_value(v)))) return tern_error(TERN_E_NOMEM, "out of memory");
        r->n_stop = 1;
        return TERN_OK;
    }
    if (!json_is_array(v) || json_array_size(v) > MAX_STOP_SEQS) return bad("stop must be a string or a list of at most 64 strings");
    r->stop = calloc(json_array_size(v) + 1, sizeof *r->stop);
    if (!r->stop) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t i;
    const json_t *e;
    json_array_foreach((json_t *)v, i, e) {
        if (!json_is_string(e)) return bad("stop must be a string or a list of at most 64 strings");
        if (!json_string_length(e)) continue;
        if (json_string_length(e) > MAX_STOP_BYTES) return bad("stop strings must be at most 1024 bytes long");
        if (!(r->stop[r->n_stop] = strdup(json_string_value(e)))) return tern_error(TERN_E_NOMEM, "out of memory");
        r->n_stop++;
    }
    return TERN_OK;
}

/* Content string / null / list of text parts -> a string (mlx_lm's process_message_content). */
static tern_status normalize_content(json_t *m)
{
    json_t *c = json_object_get(m, "content");
    if (!c || json_is_null(c)) return json_object_set_new(m, "content", json_string("")) ? tern_error(TERN_E_NOMEM, "out of memory") : TERN_OK;
    if (json_is_string(c)) return TERN_OK;
    if (!json_is_array(c)) return bad("message content must be a string or a list of text parts");
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") || !json_is_string(text)) return bad("Only 'text' content type is supported.");
        total += json_string_length(text);
    }
    char *joined = malloc(total + 1);
    if (!joined) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t off = 0;
    json_array_foreach(c, i, part) {
        const json_t *text = json_object_get(part, "text");
        memcpy(joined + off, json_string_value(text), json_string_length(text));
        off += json_string_length(text);
    }
    joined[off] = '\0';
    json_t *s = json_stringn(joined, off);
    free(joined);
    if (!s) return bad("message content must be valid UTF-8 text");
    return json_object_set_new(m, "content", s) ? tern_error(TERN_E_NOMEM, "out of memory") : TERN_OK;
}

/* Assistant tool_calls with JSON-string arguments -> objects (what templates expect). */
static tern_status normalize_tool_calls(json_t *m)
{
    json_t *calls = json_object_get(m, "tool_calls");
    if (!calls || json_is_null(calls)) return TERN_OK;
    if (!json_is_array(calls)) return bad("tool_calls must be a list");
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        if (!json_is_object(fn)) return bad("each tool call needs a function object");
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args) && json_string_length(args)) {
            json_t *obj = json_loads(json_string_value(args), 0, NULL);
            if (!obj) return bad("tool call arguments must be a JSON string");
            json_object_set_new(fn, "arguments", obj);
        }
    }
    return TERN_OK;
}

static tern_status parse_messages(const json_t *b, srv_request *r)
{
    const json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return bad("Request did not contain messages");
    if (!json_is_array(msgs)) return bad("messages must be a list");
    if (json_array_size(msgs) == 0) return bad("messages must be a non-empty list");
    if (json_array_size(msgs) > MAX_MESSAGES) return bad("too many messages");
    r->messages = json_deep_copy(msgs);
    if (!r->messages) return tern_error(TERN_E_NOMEM, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(r->messages, i, m) {
        if (!json_is_object(m)) return bad("each message must be an object");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role) return bad("each message needs a string role");
        if (!strcmp(role, "developer")) json_object_set_new(m, "role", json_string("system"));
        tern_status st = normalize_content(m);
        if (st == TERN_OK) st = normalize_tool_calls(m);
        if (st != TERN_OK) return st;
    }
    /* A trailing assistant message is a prefill: the reply continues its text. */
    size_t last = json_array_size(r->messages) - 1;
    json_t *lm = json_array_get(r->messages, last);
    if (last > 0 && !strcmp(json_string_value(json_object_get(lm, "role")), "assistant") &&
        !json_object_get(lm, "tool_calls")) {
        r->prefill = strdup(json_string_value(json_object_get(lm, "content")));
        if (!r->prefill) return tern_error(TERN_E_NOMEM, "out of memory");
        json_array_remove(r->messages, last);
    }

    const json_t *tools = json_object_get(b, "tools");
    const json_t *choice = json_object_get(b, "tool_choice");
    int none = json_is_string(choice) && !strcmp(json_string_value(choice), "none");
    if (tools && !json_is_null(tools) && !json_is_array(tools)) return bad("tools must be a list");
    if (json_array_size(tools) > 0 && !none) r->tools = json_deep_copy(tools);
    return TERN_OK;
}

static tern_status parse_kwargs(const json_t *b, const srv_defaults *d, srv_request *r)
{
    r->template_kwargs = d->template_args ? json_deep_copy(d->template_args) : json_object();
    if (!r->template_kwargs) return tern_error(TERN_E_NOMEM, "out of memory");
    const json_t *k = json_object_get(b, "chat_template_kwargs");
    if (k && !json_is_null(k)) {
        if (!json_is_object(k)) return bad("chat_template_kwargs must be an object");
        json_object_update(r->template_kwargs, (json_t *)k);
    }
    const json_t *effort = json_object_get(b, "reasoning_effort");
    if (json_is_string(effort) && !json_object_get(k, "enable_thinking"))
        json_object_set_new(r->template_kwargs, "enable_thinking",
                            json_boolean(strcmp(json_string_value(effort), "none") != 0));
    return TERN_OK;
}

static tern_status parse_body(srv_api api, const json_t *b, const srv_defaults *d, srv_request *r)
{
    tern_status st = parse_sampling(b, d, r);
    if (st == TERN_OK) st = parse_stop(b, r);
    if (st != TERN_OK) return st;
    if (api == SRV_API_TEXT) {
        const json_t *p = json_object_get(b, "prompt");
        if (!p) return bad("Request did not contain a prompt");
        if (!json_is_string(p) || !json_string_length(p)) return bad("prompt must be a non-empty string");
        r->prompt = strdup(json_string_value(p));
        return r->prompt ? TERN_OK : tern_error(TERN_E_NOMEM, "out of memory");
    }
    st = parse_messages(b, r);
    if (st == TERN_OK) st = parse_kwargs(b, d, r);
    return st;
}

static tern_status parse_request(srv_api api, const char *body, size_t len, const srv_defaults *d,
                                 int count_only, srv_request *out)
{
    memset(out, 0, sizeof *out);
    out->api = api;
    out->top_logprobs = -1;
    json_error_t err;
    json_t *b = json_loadb(body, len, 0, &err);
    if (!b) return tern_error(TERN_E_INVALID, "Invalid JSON in request body: %s (line %d column %d)",
                              err.text, err.line, err.column);
    if (!json_is_object(b)) {
        json_decref(b);
        return bad("Request should be a JSON dictionary");
    }
    if (api == SRV_API_ANTHROPIC) {
        json_t *chat = NULL;
        tern_status st = srv_anthropic_translate(b, !count_only, &chat);
        json_decref(b);
        if (st != TERN_OK) return st;
        b = chat;
    }
    tern_status st = parse_body(api, b, d, out);
    json_decref(b);
    if (st != TERN_OK) {
        /* Keep the message: freeing does not touch it. */
        srv_request_free(out);
        out->api = api;
    }
    return st;
}

tern_status srv_request_parse(srv_api api, const char *body, size_t len,
                              const srv_defaults *d, srv_request *out)
{
    return parse_request(api, body, len, d, 0, out);
}

tern_status srv_request_parse_count(const char *body, size_t len, const srv_defaults *d, srv_request *out)
{
    return parse_request(SRV_API_ANTHROPIC, body, len, d, 1, out);
}

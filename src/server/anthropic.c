/* Anthropic Messages API: request translation onto the chat fields and the
 * Messages response / event-stream shapes (see anthropic.h). */
#include "server/anthropic.h"

#include <stdlib.h>
#include <string.h>

#include "server/json_out.h"

static tern_status bad(const char *msg) { return tern_error(TERN_E_INVALID, "%s", msg); }

/* Joins the text blocks of a tool_result's content (string or blocks). */
static json_t *result_text(const json_t *c)
{
    if (!c || json_is_null(c)) return json_string("");
    if (json_is_string(c)) return json_incref((json_t *)c);
    if (!json_is_array(c)) return NULL;
    srv_buf b;
    srv_buf_init(&b);
    size_t i;
    const json_t *blk;
    json_array_foreach((json_t *)c, i, blk) {
        const char *t = json_string_value(json_object_get(blk, "text"));
        if (t && srv_buf_puts(&b, t)) { srv_buf_free(&b); return NULL; }
    }
    json_t *s = json_stringn(srv_buf_str(&b), b.len);
    srv_buf_free(&b);
    return s;
}

/* One Anthropic message -> one or more chat messages appended to out. */
static tern_status translate_message(const json_t *m, json_t *out)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return bad("messages: role must be \"user\" or \"assistant\"");
    const json_t *content = json_object_get(m, "content");
    if (json_is_string(content)) {
        json_array_append_new(out, json_pack("{s:s,s:O}", "role", role, "content", content));
        return TERN_OK;
    }
    if (!json_is_array(content)) return bad("messages: content must be a string or a list of content blocks");
    srv_buf text;
    srv_buf_init(&text);
    json_t *calls = json_array();
    tern_status st = TERN_OK;
    size_t i;
    const json_t *blk;
    json_array_foreach((json_t *)content, i, blk) {
        const char *type = json_string_value(json_object_get(blk, "type"));
        if (!type) { st = bad("messages: every content block needs a type"); break; }
        if (!strcmp(type, "text")) {
            const char *t = json_string_value(json_object_get(blk, "text"));
            if (!t) { st = bad("messages: text block without text"); break; }
            srv_buf_puts(&text, t);
        } else if (!strcmp(type, "tool_use")) {
            const json_t *input = json_object_get(blk, "input");
            json_t *call = json_pack("{s:s?,s:s,s:{s:s?,s:O?}}", "id", json_string_value(json_object_get(blk, "id")),
                                     "type", "function", "function", "name",
                                     json_string_value(json_object_get(blk, "name")), "arguments",
                                     input ? input : NULL);
            if (!call) { st = bad("messages: malformed tool_use block"); break; }
            json_array_append_new(calls, call);
        } else if (!strcmp(type, "tool_result")) {
            json_t *rt = result_text(json_object_get(blk, "content"));
            if (!rt) { st = bad("messages: malformed tool_result block"); break; }
            json_array_append_new(out, json_pack("{s:s,s:s?,s:o}", "role", "tool", "tool_call_id",
                                                 json_string_value(json_object_get(blk, "tool_use_id")), "content", rt));
        } else if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) {
            continue;
        } else {
            st = tern_error(TERN_E_INVALID, "messages: content block type \"%s\" is not supported", type);
            break;
        }
    }
    if (st == TERN_OK && (text.len || json_array_size(calls) || !json_array_size(content))) {
        json_t *msg = json_pack("{s:s,s:s}", "role", role, "content", srv_buf_str(&text));
        if (msg && json_array_size(calls)) json_object_set(msg, "tool_calls", calls);
        json_array_append_new(out, msg);
    }
    json_decref(calls);
    srv_buf_free(&text);
    return st;
}

static tern_status translate_system(const json_t *sys, json_t *msgs)
{
    if (!sys || json_is_null(sys)) return TERN_OK;
    json_t *text = result_text(sys);
    if (!text) return bad("system must be a string or a list of text blocks");
    json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content", text));
    return TERN_OK;
}

static tern_status translate_tools(const json_t *tools, json_t *chat)
{
    if (!tools || json_is_null(tools)) return TERN_OK;
    if (!json_is_array(tools)) return bad("tools must be a list");
    json_t *out = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach((json_t *)tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        const json_t *schema = json_object_get(t, "input_schema");
        if (!name || !schema) continue;  /* server tools (no schema) are dropped */
        const char *desc = json_string_value(json_object_get(t, "description"));
        json_array_append_new(out, json_pack("{s:s,s:{s:s,s:s,s:O}}", "type", "function", "function", "name", name,
                                             "description", desc ? desc : "", "parameters", schema));
    }
    json_object_set_new(chat, "tools", out);
    return TERN_OK;
}

tern_status srv_anthropic_translate(const json_t *b, int need_max_tokens, json_t **out)
{
    *out = NULL;
    const json_t *msgs = json_object_get(b, "messages");
    if (!json_is_array(msgs)) return bad("messages: field required");
    if (!json_array_size(msgs)) return bad("messages: at least one message is required");
    const json_t *mt = json_object_get(b, "max_tokens");
    if (!mt && need_max_tokens) return bad("max_tokens: field required");
    json_t *chat = json_object();
    json_t *cm = json_array();
    json_object_set_new(chat, "messages", cm);
    static const char *const pass[] = {"model", "max_tokens", "stream", "temperature", "top_p", "top_k",
                                       "min_p", "seed", "repetition_penalty", "presence_penalty",
                                       "frequency_penalty", "chat_template_kwargs", NULL};
    for (int i = 0; pass[i]; i++) {
        json_t *v = json_object_get(b, pass[i]);
        if (v) json_object_set(chat, pass[i], v);
    }
    const json_t *ss = json_object_get(b, "stop_sequences");
    if (ss) json_object_set(chat, "stop", (json_t *)ss);
    const json_t *tc = json_object_get(b, "tool_choice");
    if (json_is_object(tc) && json_is_string(json_object_get(tc, "type")) &&
        !strcmp(json_string_value(json_object_get(tc, "type")), "none"))
        json_object_set_new(chat, "tool_choice", json_string("none"));
    const json_t *th = json_object_get(b, "thinking");
    if (json_is_object(th) && json_is_string(json_object_get(th, "type"))) {
        int on = !strcmp(json_string_value(json_object_get(th, "type")), "enabled");
        json_t *kw = json_object_get(chat, "chat_template_kwargs");
        if (!json_is_object(kw)) { kw = json_object(); json_object_set_new(chat, "chat_template_kwargs", kw); }
        if (!json_object_get(kw, "enable_thinking")) json_object_set_new(kw, "enable_thinking", json_boolean(on));
    }
    tern_status st = translate_system(json_object_get(b, "system"), cm);
    size_t i;
    const json_t *m;
    json_array_foreach((json_t *)msgs, i, m) {
        if (st != TERN_OK) break;
        if (!json_is_object(m)) { st = bad("messages: each message must be an object"); break; }
        st = translate_message(m, cm);
    }
    if (st == TERN_OK) st = translate_tools(json_object_get(b, "tools"), chat);
    if (st != TERN_OK) { json_decref(chat); return st; }
    *out = chat;
    return TERN_OK;
}

/* ---- responses ---- */

static const char *stop_reason(const char *finish)
{
    if (!finish) return NULL;
    if (!strcmp(finish, "length")) return "max_tokens";
    if (!strcmp(finish, "tool_calls")) return "tool_use";
    return "end_turn";
}

static int event(srv_buf *out, const char *name, json_t *j /* stolen */)
{
    if (!j) return -1;
    int rc = srv_buf_printf(out, "event: %s\ndata: ", name) || srv_json_append(out, j) ||
             srv_buf_puts(out, "\n\n") ? -1 : 0;
    json_decref(j);
    return rc;
}

/* tool_calls entry -> {type: tool_use, id, name, input}. */
static json_t *tool_use_block(const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    json_t *input = args ? json_loads(args, 0, NULL) : NULL;
    if (!json_is_object(input)) { json_decref(input); input = json_object(); }
    const char *id = json_string_value(json_object_get(call, "id"));
    char tid[64];
    snprintf(tid, sizeof tid, "toolu_%s", id && !strncmp(id, "call_", 5) ? id + 5 : (id ? id : "0"));
    return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", tid, "name",
                     json_string_value(json_object_get(fn, "name")) ? json_string_value(json_object_get(fn, "name")) : "",
                     "input", input);
}

static json_t *message_object(const srv_reply *r, json_t *content, const char *reason, const char *stop_seq,
                              int in, int out_tokens, int cached)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:{s:i,s:i,s:i,s:i}}", "id", r->id, "type", "message",
                     "role", "assistant", "content", content, "model", r->model,
                     "stop_reason", reason ? json_string(reason) : json_null(),
                     "stop_sequence", stop_seq ? json_string(stop_seq) : json_null(), "usage",
                     "input_tokens", in, "output_tokens", out_tokens, "cache_read_input_tokens", cached,
                     "cache_creation_input_tokens", 0);
}

int srv_anth_begin(srv_reply *r, int prompt_tokens, srv_buf *out)
{
    json_t *msg = message_object(r, json_array(), NULL, NULL, prompt_tokens, 0, 0);
    return event(out, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", msg));
}

static int close_block(srv_reply *r, srv_buf *out)
{
    if (!r->block_kind) return 0;
    r->block_kind = 0;
    return event(out, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", r->block_index++));
}

static int open_block(srv_reply *r, int kind, srv_buf *out)
{
    if (r->block_kind == kind) return 0;
    if (close_block(r, out)) return -1;
    r->block_kind = kind;
    json_t *blk = kind == 1 ? json_pack("{s:s,s:s}", "type", "text", "text", "")
                            : json_pack("{s:s,s:s}", "type", "thinking", "thinking", "");
    return event(out, "content_block_start",
                 json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", r->block_index, "content_block", blk));
}

static int block_delta(srv_reply *r, int kind, const char *text, srv_buf *out)
{
    if (!text[0]) return 0;
    if (open_block(r, kind, out)) return -1;
    json_t *d = kind == 1 ? json_pack("{s:s,s:s}", "type", "text_delta", "text", text)
                          : json_pack("{s:s,s:s}", "type", "thinking_delta", "thinking", text);
    return event(out, "content_block_delta",
                 json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", r->block_index, "delta", d));
}

int srv_anth_delta(srv_reply *r, const char *content, const char *reasoning, srv_buf *out)
{
    if (block_delta(r, 2, reasoning, out)) return -1;
    return block_delta(r, 1, content, out);
}

int srv_anth_finish(srv_reply *r, const srv_reply_end *e, srv_buf *out)
{
    const char *reason = e->stop_sequence && strcmp(e->finish, "tool_calls") ? "stop_sequence" : stop_reason(e->finish);
    if (!r->stream) {
        json_t *content = json_array();
        if (e->reasoning && e->reasoning[0])
            json_array_append_new(content, json_pack("{s:s,s:s}", "type", "thinking", "thinking", e->reasoning));
        if ((e->content && e->content[0]) || !json_array_size(e->tool_calls))
            json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", e->content ? e->content : ""));
        size_t i;
        const json_t *c;
        json_array_foreach(e->tool_calls, i, c) json_array_append_new(content, tool_use_block(c));
        json_t *msg = message_object(r, content, reason, e->stop_sequence, e->prompt_tokens, e->completion_tokens,
                                     e->cached_tokens);
        if (!msg) return -1;
        int rc = srv_json_append(out, msg);
        json_decref(msg);
        return rc;
    }
    if (srv_anth_delta(r, e->content ? e->content : "", e->reasoning ? e->reasoning : "", out)) return -1;
    if (close_block(r, out)) return -1;
    size_t i;
    const json_t *c;
    json_array_foreach(e->tool_calls, i, c) {
        json_t *blk = tool_use_block(c);
        if (!blk) return -1;
        json_t *input = json_object_get(blk, "input");
        char *partial = json_dumps(input, JSON_COMPACT);
        json_object_set_new(blk, "input", json_object());
        int idx = r->block_index++;
        int rc = event(out, "content_block_start",
                       json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", idx, "content_block", blk)) ||
                 event(out, "content_block_delta",
                       json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", idx, "delta",
                                 "type", "input_json_delta", "partial_json", partial ? partial : "{}")) ||
                 event(out, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", idx));
        free(partial);
        if (rc) return -1;
    }
    if (event(out, "message_delta",
              json_pack("{s:s,s:{s:s?,s:s?},s:{s:i,s:i,s:i}}", "type", "message_delta", "delta", "stop_reason", reason,
                        "stop_sequence", e->stop_sequence, "usage", "input_tokens", e->prompt_tokens, "output_tokens",
                        e->completion_tokens, "cache_read_input_tokens", e->cached_tokens)))
        return -1;
    return event(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

/* Prompt construction (see prompt.h). */
#include "server/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "server/buf.h"

/* mlx_lm.server's convert_chat, used when the tokenizer has no template. */
static char *plain_chat(const json_t *messages, const char *prefill)
{
    srv_buf b;
    srv_buf_init(&b);
    size_t i;
    const json_t *m;
    json_array_foreach((json_t *)messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *pre = !strcmp(role, "system") ? "ASSISTANT's RULE: " : !strcmp(role, "user") ? "USER: "
                        : !strcmp(role, "assistant") ? "ASSISTANT: " : "";
        srv_buf_printf(&b, "%s%s\n", pre, json_string_value(json_object_get(m, "content")));
    }
    srv_buf_puts(&b, "ASSISTANT: ");
    while (b.len && (b.data[b.len - 1] == ' ' || b.data[b.len - 1] == '\n')) b.data[--b.len] = '\0';
    if (prefill) srv_buf_puts(&b, prefill);
    return srv_buf_take(&b);
}

static int ends_inside_think(const char *s)
{
    const char *open = NULL, *close = NULL, *p;
    for (p = s; (p = strstr(p, "<think>")); p++) open = p;
    for (p = s; (p = strstr(p, "</think>")); p++) close = p;
    return open && (!close || close < open);
}

tern_status srv_prompt_build(const srv_ctx *c, const srv_request *r, int32_t **ids, int *n, int *think_inside)
{
    *ids = NULL;
    *n = 0;
    *think_inside = 0;
    char *text = NULL;
    if (r->api == SRV_API_TEXT) {
        text = strdup(r->prompt);
        if (!text) return tern_error(TERN_E_NOMEM, "out of memory");
    } else if (!c->tmpl) {
        text = plain_chat(r->messages, r->prefill);
    } else {
        char *msgs = json_dumps(r->messages, JSON_COMPACT);
        char *tools = r->tools ? json_dumps(r->tools, JSON_COMPACT) : NULL;
        char *kw = json_dumps(r->template_kwargs, JSON_COMPACT);
        tern_status st = msgs && kw ? tern_chat_template_render(c->tmpl, msgs, tools, 1, kw, &text)
                                    : tern_error(TERN_E_NOMEM, "out of memory");
        free(msgs);
        free(tools);
        free(kw);
        if (st != TERN_OK) return st == TERN_E_NOMEM ? st : tern_error_wrap(TERN_E_INVALID, "chat template");
        if (r->prefill) {
            size_t a = strlen(text), b = strlen(r->prefill);
            char *t2 = realloc(text, a + b + 1);
            if (!t2) { free(text); return tern_error(TERN_E_NOMEM, "out of memory"); }
            memcpy(t2 + a, r->prefill, b + 1);
            text = t2;
        }
        *think_inside = c->has_thinking && ends_inside_think(text);
    }
    if (!text) return tern_error(TERN_E_NOMEM, "out of memory");
    tern_status st = tern_tokenizer_encode(c->tok, text, strlen(text), 1, ids, n);
    free(text);
    if (st != TERN_OK) return st == TERN_E_NOMEM ? st : tern_error_wrap(TERN_E_INVALID, "prompt");
    int32_t bos = tern_tokenizer_bos_id(c->tok);
    if (*n >= 2 && bos >= 0 && (*ids)[0] == bos && (*ids)[1] == bos) {
        memmove(*ids, *ids + 1, (size_t)(*n - 1) * sizeof **ids);
        (*n)--;
    }
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
        return tern_error(TERN_E_INVALID, "the prompt is empty after tokenization");
    }
    return TERN_OK;
}

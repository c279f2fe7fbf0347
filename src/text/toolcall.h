/* Tool calls in model output: a streaming router and the markup parsers.
 *
 * The router passes content through until a tool-call marker (`<tool_call>`
 * or `<function=`) appears; from there on the text is withheld, so no markup
 * reaches the client. At the end the withheld text is parsed; if it does not
 * parse it is released as ordinary content.
 *
 * Forms understood:
 *   Qwen / Hermes:   <tool_call>{"name": "f", "arguments": {...}}</tool_call>
 *   Qwen3-Coder:     <tool_call><function=f><parameter=p>v</parameter></function></tool_call>
 *                    (the <tool_call> wrapper optional). Parameter values are typed
 *                    from the request's JSON schema: strings stay strings, other
 *                    declared types are read as JSON when they parse. */
#ifndef TERN_TEXT_TOOLCALL_H
#define TERN_TEXT_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>

#include "core/buf.h"

typedef struct {
    int     capturing;  /* 1 once a marker was seen */
    tern_buf pending;    /* owned: held-back tail that may start a marker */
    tern_buf markup;     /* owned: withheld tool-call text */
} tern_tools;

void tern_tools_init(tern_tools *t);
void tern_tools_free(tern_tools *t);
/* A prefilled assistant turn (borrowed) that stops inside tool-call markup
 * means the reply continues that call: capture starts with the open markup so
 * that it is parsed together with what the model adds. */
int tern_tools_seed(tern_tools *t, const char *prefill);
/* Appends the releasable content of a delta to content. 0, or -1 on OOM. */
int tern_tools_push(tern_tools *t, const char *text, size_t len, tern_buf *content);
/* End of generation. tools (borrowed, may be NULL) gives parameter schemas.
 * On success *calls is an owned JSON array of
 * {"id", "type": "function", "function": {"name", "arguments": "<json>"}};
 * when nothing parses *calls is NULL and the withheld text goes to content. */
int tern_tools_finish(tern_tools *t, const json_t *tools, tern_buf *content, json_t **calls);

/* Parses withheld markup (borrowed). Returns an owned array or NULL. */
json_t *tern_tools_parse(const char *markup, size_t len, const json_t *tools);

/* Writes "<prefix><n hex digits>" (random) into out (size >= strlen(prefix)+n+1). */
void tern_random_id(char *out, const char *prefix, int n_hex);

#endif

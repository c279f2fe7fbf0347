#include "cli/prompt.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tern/chat_template.h"

tern_status cli_prompt_ids(const char *model_dir, const tern_tokenizer *tok, const char *text, int chat,
                           int32_t **ids, int *n)
{
    if (!chat) return tern_tokenizer_encode(tok, text, strlen(text), 1, ids, n);
    tern_chat_template *tmpl;
    tern_status st = tern_chat_template_load(model_dir, &tmpl);
    if (st) return st;
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
    char *mj = msgs ? json_dumps(msgs, JSON_COMPACT) : NULL;
    char *rendered = NULL;
    if (!mj) st = tern_error(TERN_E_NOMEM, "out of memory");
    if (!st) st = tern_chat_template_render(tmpl, mj, NULL, 1, NULL, &rendered);
    /* The template writes any BOS itself, so the post-processor must not. */
    if (!st) st = tern_tokenizer_encode(tok, rendered, strlen(rendered), 0, ids, n);
    free(rendered);
    free(mj);
    json_decref(msgs);
    tern_chat_template_free(tmpl);
    return st;
}

/* Chat templates: render a model's Jinja chat template the way Hugging Face
 * transformers' apply_chat_template does (Jinja2 with trim_blocks and
 * lstrip_blocks, the loop-control extension, tojson without HTML escaping,
 * raise_exception, strftime_now and namespace()).
 *
 * The template is parsed once at create/load time; rendering never changes the
 * template object, so one template may be rendered from several threads. */
#ifndef TERN_CHAT_TEMPLATE_H
#define TERN_CHAT_TEMPLATE_H

#include <stddef.h>

#include "tern/status.h"

typedef struct tern_chat_template tern_chat_template;

/* Loads the template of a model directory (borrowed path). dir holds
 * chat_template.jinja (wins when present, as in transformers) or
 * tokenizer_config.json with "chat_template": a string, or a list of
 * {name, template} entries of which "default" is used. Every "<x>_token" entry
 * of tokenizer_config.json (bos_token, eos_token, pad_token, ...; a string or a
 * {"content": ...} object) becomes a template variable. *out is owned by the
 * caller (tern_chat_template_free). A template that does not parse gives
 * TERN_E_FORMAT with its line and column. */
tern_status tern_chat_template_load(const char *dir, tern_chat_template **out);

/* Parses a template string (borrowed). bos_token / eos_token are borrowed and
 * may be NULL (then undefined inside the template). *out is owned. */
tern_status tern_chat_template_create(const char *source, const char *bos_token, const char *eos_token,
                                      tern_chat_template **out);

/* Frees a template (owned); NULL is a no-op. */
void tern_chat_template_free(tern_chat_template *t);

/* Renders (all inputs borrowed). messages_json: JSON array of message objects;
 * tools_json: JSON array, or NULL / "null" for none (tools is then None);
 * kwargs_json: JSON object of extra template variables (e.g.
 * {"enable_thinking": false}), or NULL / "null". Messages are normalized
 * as transformers does (keys whose value is null are dropped; reasoning given as
 * reasoning_content, thinking or reasoning is visible under all of
 * reasoning_content and thinking); an empty conversation is refused, as
 * transformers does. *out is an owned NUL-terminated string
 * (free()). Template errors (raise_exception, type errors, calling undefined,
 * limits on output size, memory, steps or recursion) give TERN_E_INVALID with
 * the template line in the message. */
tern_status tern_chat_template_render(const tern_chat_template *t, const char *messages_json, const char *tools_json,
                                      int add_generation_prompt, const char *kwargs_json, char **out);

/* 1 if the template mentions enable_thinking and <think> (think-tag reasoning format). */
int tern_chat_template_has_thinking(const tern_chat_template *t);

/* Bounds every later render of t: output bytes (also the cap on any string
 * built while rendering) and steps (loop iterations plus calls). 0 keeps the
 * default (64 MB, 10 million steps). Not thread-safe against concurrent renders. */
void tern_chat_template_set_limits(tern_chat_template *t, size_t max_output, unsigned long long max_steps);

/* The template source after loading (borrowed, valid until free). */
const char *tern_chat_template_source(const tern_chat_template *t);

#endif

/* Anthropic Messages API: a Messages body translated onto the chat fields
 * that request.c validates, and the Messages response / event-stream shapes.
 *
 * Calls go one way: request.c and reply.c call in here; this file calls only
 * the JSON writer (json_out.h) and the buffer. Appending functions return 0,
 * or -1 when memory runs out. */
#ifndef TERN_SERVER_ANTHROPIC_H
#define TERN_SERVER_ANTHROPIC_H

#include <jansson.h>

#include "server/buf.h"
#include "server/reply.h"

/* Messages body (borrowed) -> an owned chat-shaped body in *out.
 * need_max_tokens: refuse a body without max_tokens (Messages requires it,
 * count_tokens does not). TERN_E_INVALID with the client-facing message. */
tern_status srv_anthropic_translate(const json_t *body, int need_max_tokens, json_t **out);

/* Response shaping for srv_reply_* (r borrowed, its stream state updated). */
int srv_anth_begin(srv_reply *r, int prompt_tokens, srv_buf *out);
int srv_anth_delta(srv_reply *r, const char *content, const char *reasoning, srv_buf *out);
int srv_anth_finish(srv_reply *r, const srv_reply_end *e, srv_buf *out);

#endif

/* Request -> prompt token ids: chat messages through the model's chat
 * template (or mlx_lm.server's plain role mapping when there is none), text
 * prompts encoded as given. */
#ifndef TERN_SERVER_PROMPT_H
#define TERN_SERVER_PROMPT_H

#include <stdint.h>

#include "server/ctx.h"
#include "server/request.h"

/* *ids returned owned (free()); *think_inside = 1 when the rendered prompt
 * leaves a <think> open. TERN_E_INVALID (client error) on template failures. */
tern_status srv_prompt_build(const srv_ctx *c, const srv_request *r, int32_t **ids, int *n, int *think_inside);

#endif

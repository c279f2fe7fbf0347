/* Turns CLI prompt text into token ids: raw (encoded with special tokens) or
 * as one user message rendered through the model's chat template. */
#ifndef TERN_CLI_PROMPT_H
#define TERN_CLI_PROMPT_H

#include <stdint.h>

#include "tern/status.h"
#include "tern/tokenizer.h"

/* *ids returned owned (free()). Errors are left in tern_last_error(). */
tern_status cli_prompt_ids(const char *model_dir, const tern_tokenizer *tok, const char *text, int chat,
                           int32_t **ids, int *n);

#endif

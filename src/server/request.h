/* Request bodies: parsing and validation of the OpenAI chat / text completion
 * fields (mlx_lm.server's names, defaults and messages) and of Anthropic
 * Messages bodies, which are first translated onto the chat fields.
 *
 * Ownership: srv_request owns every pointer in it; srv_request_free releases
 * them. Bodies are borrowed for the call. */
#ifndef TERN_SERVER_REQUEST_H
#define TERN_SERVER_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/sampler.h"
#include "tern/status.h"

typedef enum { SRV_API_CHAT, SRV_API_TEXT, SRV_API_ANTHROPIC } srv_api;

enum { SRV_MAX_CHOICES = 16 };

/* Server-wide defaults (the serve flags); fields mirror mlx_lm.server's. */
typedef struct {
    float temperature;        /* --temp, 0.0 */
    float top_p;              /* --top-p, 1.0 */
    int   top_k;              /* --top-k, 0 */
    float min_p;              /* --min-p, 0.0 */
    int   max_tokens;         /* --max-tokens, 512 */
    const json_t *template_args; /* borrowed: --chat-template-args object or NULL */
    int   vocab_size;         /* bounds logit_bias ids; 0 = unchecked */
} srv_defaults;

void srv_defaults_init(srv_defaults *d);

typedef struct {
    srv_api api;
    int     stream;
    int     include_usage;    /* stream_options.include_usage */
    char   *model;            /* echoed back */
    json_t *messages;         /* chat: normalized array, without a trailing assistant prefill */
    char   *prefill;          /* content of a trailing assistant message, or NULL */
    json_t *tools;            /* array or NULL (absent, empty, or tool_choice "none") */
    json_t *template_kwargs;  /* object: --chat-template-args merged with chat_template_kwargs */
    char   *prompt;           /* text completions */
    int     max_tokens;
    int     n;                /* choices (OpenAI routes; 1 for Anthropic) */
    int     num_draft_tokens; /* -1 = the server's --num-draft-tokens */
    int     logprobs;         /* bool */
    int     top_logprobs;     /* -1 = unset */
    int     has_seed;
    char  **stop;             /* n_stop non-empty strings */
    int     n_stop;
    tern_sampling_params sampling;  /* bias arrays point into the two below */
    int32_t *bias_ids;
    float   *bias_values;
} srv_request;

/* Parses and validates body[0,len) for api. On failure returns TERN_E_INVALID
 * with the client-facing message in tern_last_error() and leaves *out empty. */
tern_status srv_request_parse(srv_api api, const char *body, size_t len,
                              const srv_defaults *d, srv_request *out);
/* An Anthropic /v1/messages/count_tokens body: validated as a Messages body
 * except that max_tokens is optional (the server default applies). */
tern_status srv_request_parse_count(const char *body, size_t len, const srv_defaults *d, srv_request *out);
void srv_request_free(srv_request *r);

#endif

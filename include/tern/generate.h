/* The serial generate loop: prefill a prompt in chunks, then decode token by
 * token through the sampler, reporting each token to a callback.
 *
 * Ownership: the model is borrowed for the call; the prompt is borrowed; the
 * event passed to the callback and its arrays are borrowed for the duration of
 * the callback only. */
#ifndef TERN_GENERATE_H
#define TERN_GENERATE_H

#include <stdint.h>

#include "tern/model.h"
#include "tern/sampler.h"
#include "tern/status.h"

typedef enum {
    TERN_FINISH_NONE = 0,
    TERN_FINISH_EOS,      /* model emitted an end-of-sequence id (not reported) */
    TERN_FINISH_LENGTH,   /* max_tokens reached */
    TERN_FINISH_STOPPED   /* the callback asked to stop */
} tern_finish;

typedef struct {
    int max_tokens;            /* > 0 */
    int prefill_chunk;         /* tokens per prefill forward; 0 = 2048 */
    int top_logprobs;          /* 0..20: also report this many best alternatives */
    int want_logprob;          /* report the chosen token's logprob */
    tern_sampling_params sampling;
    const int32_t *extra_eos;  /* borrowed: more ids that end generation */
    int n_extra_eos;
    int ignore_eos;            /* keep generating through end-of-sequence ids */
} tern_generate_opts;

typedef struct {
    int32_t token;
    int     step;              /* 0-based index of this generated token */
    float   logprob;           /* log-softmax after processors (when asked) */
    int     n_top;
    const int32_t *top_ids;    /* borrowed, n_top, best first */
    const float   *top_logprobs;
} tern_token_event;

/* Return 0 to continue, non-zero to stop generation after this token. */
typedef int (*tern_token_cb)(void *user, const tern_token_event *ev);

typedef struct {
    int prompt_tokens;
    int cached_tokens;
    int generated_tokens;
    double prefill_seconds;    /* until the first token was sampled */
    double decode_seconds;     /* the rest */
    tern_finish finish;
} tern_generate_stats;

void tern_generate_opts_default(tern_generate_opts *o);

/* Runs one generation on a fresh KV state. stats may be NULL. */
tern_status tern_generate(tern_model *model, const int32_t *prompt, int n_prompt,
                          const tern_generate_opts *opts, tern_token_cb cb, void *user,
                          tern_generate_stats *stats);

#endif

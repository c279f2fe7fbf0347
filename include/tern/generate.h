/* One generation, start to finish: submits the prompt to an engine of its
 * own (tern/engine.h) and waits, reporting each token to a callback. It runs
 * the same scheduler code path as the server, at a batch of one.
 *
 * Ownership: the model is borrowed for the call; the prompt is borrowed; the
 * event passed to the callback and its arrays are borrowed for the duration of
 * the callback only. */
#ifndef TERN_GENERATE_H
#define TERN_GENERATE_H

#include <stdint.h>

#include "tern/engine.h"
#include "tern/model.h"
#include "tern/sampler.h"
#include "tern/status.h"

typedef struct {
    int max_tokens;            /* > 0 */
    int prefill_chunk;         /* tokens per prefill forward; 0 = 2048 */
    int top_logprobs;          /* 0..20: also report this many best alternatives */
    int want_logprob;          /* report the chosen token's logprob */
    tern_sampling_params sampling;
    const int32_t *extra_eos;  /* borrowed: more ids that end generation */
    int n_extra_eos;
    int ignore_eos;            /* keep generating through end-of-sequence ids */
    int draft_kind;            /* TERN_DRAFT_NONE / _NGRAM / _MODEL (speculative decoding) */
    tern_model *draft_model;   /* borrowed, for TERN_DRAFT_MODEL (tern_draft_model_load) */
    int num_draft_tokens;      /* 0 = 4 */
    int ngram_min, ngram_max;  /* 0 = 1 and 4 */
    int spec_fixed;            /* 1 = draft num_draft_tokens every step (no cost model) */
} tern_generate_opts;

/* Return 0 to continue, non-zero to stop generation after this token. */
typedef int (*tern_token_cb)(void *user, const tern_token_event *ev);

typedef struct {
    int prompt_tokens;
    int cached_tokens;
    int generated_tokens;
    double prefill_seconds;    /* until the first token was sampled */
    double decode_seconds;     /* the rest */
    long drafted, accepted, target_calls;   /* speculation (target_calls also without) */
    tern_finish finish;
} tern_generate_stats;

void tern_generate_opts_default(tern_generate_opts *o);

/* Runs one generation with a KV pool sized for it. stats may be NULL. */
tern_status tern_generate(tern_model *model, const int32_t *prompt, int n_prompt,
                          const tern_generate_opts *opts, tern_token_cb cb, void *user,
                          tern_generate_stats *stats);

#endif

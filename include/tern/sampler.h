/* Sampling: mlx-lm's logits processors and sampler chain, with a random
 * stream keyed per (seed, step) so that the same request draws the same
 * numbers whatever else runs beside it.
 *
 * Per step: logits -> processors (logit_bias, repetition, presence, frequency)
 * -> logprobs = logits - logsumexp -> sampler chain (top_p, min_p, XTC, top_k,
 * / temperature, categorical), or argmax when temperature == 0. */
#ifndef TERN_SAMPLER_H
#define TERN_SAMPLER_H

#include <stdint.h>

#include "tern/status.h"

typedef struct {
    float temperature;            /* 0 = greedy */
    float top_p;                  /* applied when 0 < top_p < 1 */
    float min_p;                  /* applied when != 0; must be in [0,1] */
    int   min_tokens_to_keep;     /* for min_p; default 1 */
    int   top_k;                  /* applied when > 0 */
    float xtc_probability;        /* [0,1]; 0 = off */
    float xtc_threshold;          /* [0,0.5] */
    float repetition_penalty;     /* 0 = off; < 0 invalid */
    int   repetition_context_size;/* default 20; 0 = whole history */
    float presence_penalty;       /* 0 = off */
    int   presence_context_size;  /* default 20 */
    float frequency_penalty;      /* 0 = off */
    int   frequency_context_size; /* default 20 */
    const int32_t *bias_ids;      /* borrowed: logit_bias keys, n_bias of them */
    const float   *bias_values;   /* borrowed: logit_bias values */
    int   n_bias;
    const int32_t *xtc_special;   /* borrowed: ids exempt from XTC (EOS ids, "\n") */
    int   n_xtc_special;
    uint64_t seed;
} tern_sampling_params;

/* Fills p with mlx-lm's defaults (temperature 0 = greedy, everything off,
 * context sizes 20, min_tokens_to_keep 1, seed 0). */
void tern_sampling_params_default(tern_sampling_params *p);

/* Checks ranges (min_p, xtc, penalties); TERN_E_INVALID with a message
 * worded as mlx_lm.server words it. */
tern_status tern_sampling_params_validate(const tern_sampling_params *p);

/* Applies the logits processors in place: logits[vocab] is modified.
 * history (borrowed) = prompt tokens + generated tokens so far. */
tern_status tern_logits_process(const tern_sampling_params *p, float *logits, int vocab,
                                const int32_t *history, int n_history);

/* Writes log-softmax of logits into logprobs (both [vocab]; may alias). */
void tern_log_softmax(const float *logits, float *logprobs, int vocab);

/* Runs the sampler chain on logprobs (already processed and normalised; the
 * array is used as scratch and modified). step = 0-based index of the token
 * being emitted, keying the random stream. Writes the chosen id. */
tern_status tern_sample_logprobs(const tern_sampling_params *p, float *logprobs, int vocab,
                                 uint64_t step, int32_t *token_out);

/* The k highest entries of logprobs[vocab] (k is clipped to vocab), for the
 * server's top_logprobs: written to ids[k] and vals[k] (borrowed outputs),
 * sorted descending, ties toward the lower id. Returns how many were
 * written (0 when k <= 0), or -1 when memory ran out. */
int tern_top_logprobs(const float *logprobs, int vocab, int k, int32_t *ids, float *vals);

#endif

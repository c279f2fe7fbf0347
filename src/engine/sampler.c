/* Sampling parameters, mlx-lm's logits processors and the sampler chain
 * (see include/tern/sampler.h). The filters live in sampler_filters.c. */
#include "tern/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/prng.h"
#include "engine/sampler_internal.h"

void tern_sampling_params_default(tern_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 0.0f;
    p->min_tokens_to_keep = 1;
    p->xtc_threshold = 0.0f;
    p->repetition_context_size = 20;
    p->presence_context_size = 20;
    p->frequency_context_size = 20;
}

static tern_status check_finite(const char *name, float v)
{
    if (!isfinite(v))
        return tern_error(TERN_E_INVALID, "%s must be a finite number", name);
    return TERN_OK;
}

/* The range checks of mlx_lm.server's validate_model_parameters, worded as
 * it words them ("<name> must be at least <min>" / "at most <max>"). */
static tern_status check_range(const char *name, double v, int has_min, double min,
                               int has_max, double max)
{
    if (has_min && v < min)
        return tern_error(TERN_E_INVALID, "%s must be at least %g", name, min);
    if (has_max && v > max)
        return tern_error(TERN_E_INVALID, "%s must be at most %g", name, max);
    return TERN_OK;
}

tern_status tern_sampling_params_validate(const tern_sampling_params *p)
{
    const struct {
        const char *name;
        float v;
    } floats[] = {
        {"temperature", p->temperature},
        {"top_p", p->top_p},
        {"min_p", p->min_p},
        {"xtc_probability", p->xtc_probability},
        {"xtc_threshold", p->xtc_threshold},
        {"repetition_penalty", p->repetition_penalty},
        {"presence_penalty", p->presence_penalty},
        {"frequency_penalty", p->frequency_penalty},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        tern_status st = check_finite(floats[i].name, floats[i].v);
        if (st)
            return st;
    }
    tern_status st;
    if ((st = check_range("temperature", p->temperature, 1, 0, 0, 0)) ||
        (st = check_range("top_p", p->top_p, 1, 0, 1, 1)) ||
        (st = check_range("top_k", p->top_k, 1, 0, 0, 0)) ||
        (st = check_range("min_p", p->min_p, 1, 0, 1, 1)) ||
        (st = check_range("repetition_penalty", p->repetition_penalty, 1, 0, 0, 0)) ||
        (st = check_range("repetition_context_size", p->repetition_context_size, 1, 0, 0, 0)) ||
        (st = check_range("presence_context_size", p->presence_context_size, 1, 0, 0, 0)) ||
        (st = check_range("frequency_context_size", p->frequency_context_size, 1, 0, 0, 0)) ||
        (st = check_range("xtc_probability", p->xtc_probability, 1, 0, 1, 1)) ||
        (st = check_range("xtc_threshold", p->xtc_threshold, 1, 0, 1, 1)))
        return st;
    /* Checks mlx-lm makes when it builds the sampler (make_sampler's
     * apply_min_p / apply_xtc), worded as there. */
    if (p->min_p != 0.0f && p->min_tokens_to_keep < 1)
        return tern_error(TERN_E_INVALID,
                          "`min_tokens_to_keep` has to be a positive integer, but is %d",
                          p->min_tokens_to_keep);
    if (p->xtc_probability > 0.0f && p->xtc_threshold > 0.5f)
        return tern_error(TERN_E_INVALID,
                          "`threshold` has to be a float in the [0, 0.5] interval, but is %g",
                          (double)p->xtc_threshold);
    if (p->n_bias < 0 || (p->n_bias > 0 && (!p->bias_ids || !p->bias_values)))
        return tern_error(TERN_E_INVALID, "logit_bias must be a dict of int to float");
    for (int i = 0; i < p->n_bias; i++)
        if (!isfinite(p->bias_values[i]))
            return tern_error(TERN_E_INVALID, "logit_bias must be a dict of int to float");
    if (p->n_xtc_special < 0 || (p->n_xtc_special > 0 && !p->xtc_special))
        return tern_error(TERN_E_INVALID, "xtc special tokens: %d ids given without an array",
                          p->n_xtc_special);
    return TERN_OK;
}

/* The last `size` tokens of history (size 0 = all of it), as Python's
 * tokens[-size:]. */
static const int32_t *window(const int32_t *history, int n_history, int size, int *n_out)
{
    int n = (size > 0 && size < n_history) ? size : n_history;
    *n_out = n;
    return history + (n_history - n);
}

tern_status tern_logits_process(const tern_sampling_params *p, float *logits, int vocab,
                                const int32_t *history, int n_history)
{
    tern_status st = tern_sampling_params_validate(p);
    if (st)
        return st;
    if (vocab <= 0)
        return tern_error(TERN_E_INVALID, "logits processors: vocabulary size %d", vocab);
    if (n_history < 0 || (n_history > 0 && !history))
        return tern_error(TERN_E_INVALID, "logits processors: bad history (%d tokens)", n_history);
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias_ids[i] < 0 || p->bias_ids[i] >= vocab)
            return tern_error(TERN_E_RANGE,
                              "logit_bias token id %d is outside the vocabulary (size %d)",
                              (int)p->bias_ids[i], vocab);
    for (int i = 0; i < n_history; i++)
        if (history[i] < 0 || history[i] >= vocab)
            return tern_error(TERN_E_RANGE,
                              "token history holds id %d, outside the vocabulary (size %d)",
                              (int)history[i], vocab);

    for (int i = 0; i < p->n_bias; i++)
        logits[p->bias_ids[i]] += p->bias_values[i];
    if (n_history == 0)
        return TERN_OK;

    int n;
    const int32_t *w;
    int need_seen = p->repetition_penalty != 0.0f || p->presence_penalty != 0.0f;
    uint8_t *seen = need_seen ? calloc((size_t)vocab, 1) : NULL;
    if (need_seen && !seen)
        return tern_error(TERN_E_NOMEM, "logits processors: out of memory");

    /* Repetition and presence gather the window's logits, change them and
     * scatter them back, so a token repeated in the window counts once. */
    if (p->repetition_penalty != 0.0f) {
        float pen = p->repetition_penalty;
        w = window(history, n_history, p->repetition_context_size, &n);
        for (int i = 0; i < n; i++) {
            int32_t t = w[i];
            if (seen[t])
                continue;
            seen[t] = 1;
            logits[t] = logits[t] < 0 ? logits[t] * pen : logits[t] / pen;
        }
        memset(seen, 0, (size_t)vocab);
    }
    if (p->presence_penalty != 0.0f) {
        w = window(history, n_history, p->presence_context_size, &n);
        for (int i = 0; i < n; i++) {
            int32_t t = w[i];
            if (seen[t])
                continue;
            seen[t] = 1;
            logits[t] = logits[t] - p->presence_penalty;
        }
    }
    free(seen);
    /* Frequency scatter-adds, once per occurrence. */
    if (p->frequency_penalty != 0.0f) {
        w = window(history, n_history, p->frequency_context_size, &n);
        for (int i = 0; i < n; i++)
            logits[w[i]] = logits[w[i]] - p->frequency_penalty;
    }
    return TERN_OK;
}

void tern_log_softmax(const float *logits, float *logprobs, int vocab)
{
    float lse = tern_mlx_logsumexp(logits, vocab);
    for (int i = 0; i < vocab; i++)
        logprobs[i] = logits[i] - lse;
}

tern_status tern_sample_logprobs(const tern_sampling_params *p, float *logprobs, int vocab,
                                 uint64_t step, int32_t *token_out)
{
    tern_status st = tern_sampling_params_validate(p);
    if (st)
        return st;
    if (vocab <= 0)
        return tern_error(TERN_E_INVALID, "sampler: vocabulary size %d", vocab);
    if (p->temperature == 0.0f) {
        *token_out = tern_argmax(logprobs, vocab);
        return TERN_OK;
    }
    tern_sampler_ws ws;
    if ((st = tern_sampler_ws_init(&ws, vocab)))
        return st;
    tern_prng_key key = tern_prng_step_key(p->seed, step);
    tern_prng_key xtc_key = key, draw_key = key;
    if (p->xtc_probability > 0.0f)
        tern_prng_split(key, &xtc_key, &draw_key);

    if (p->top_p > 0.0f && p->top_p < 1.0f)
        tern_apply_top_p(logprobs, vocab, p->top_p, &ws);
    if (p->min_p != 0.0f)
        tern_apply_min_p(logprobs, vocab, p->min_p, p->min_tokens_to_keep, &ws);
    if (p->xtc_probability > 0.0f)
        tern_apply_xtc(logprobs, vocab, p->xtc_probability, p->xtc_threshold, p->xtc_special,
                       p->n_xtc_special, xtc_key, &ws);
    if (p->top_k > 0)
        tern_apply_top_k(logprobs, vocab, p->top_k, &ws);
    *token_out = tern_categorical(logprobs, vocab, p->temperature, draw_key, &ws);
    tern_sampler_ws_free(&ws);
    return TERN_OK;
}

/* The filters of mlx-lm's make_sampler chain and the categorical draw, each
 * reproducing the mlx-lm function of the same name on MLX's CPU backend:
 * same float steps, same tie rules, same random stream layout. */
#include "engine/sampler_internal.h"
#include "tern/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tern_apply_top_p(float *logprobs, int vocab, float top_p, tern_sampler_ws *ws)
{
    /* mlx-lm: sort ascending; mass_above[i] = exclusive reverse cumsum of
     * exp(sorted); drop the leading entries whose mass_above >= top_p * total;
     * the first kept sorted value is the threshold; values below it go. */
    float *sorted = ws->f, *probs = ws->f2;
    memcpy(sorted, logprobs, (size_t)vocab * sizeof *sorted);
    tern_sort_floats(sorted, vocab, ws);
    tern_mlx_exp_array(sorted, probs, vocab, 0.0f);
    float m = 0.0f;
    for (int i = vocab - 1; i > 0; i--)
        m = m + probs[i];
    float total = m + probs[0];
    float limit = top_p * total;
    int dropped = 0;
    m = 0.0f;
    for (int i = vocab - 1; i >= 0; i--) {
        if (m >= limit)
            dropped++;
        m = m + probs[i];
    }
    if (dropped > vocab - 1)
        dropped = vocab - 1;
    float threshold = sorted[dropped];
    for (int i = 0; i < vocab; i++)
        if (logprobs[i] < threshold)
            logprobs[i] = -INFINITY;
}

void tern_apply_min_p(float *logprobs, int vocab, float min_p, int min_tokens_to_keep,
                      tern_sampler_ws *ws)
{
    float top = -INFINITY;
    for (int i = 0; i < vocab; i++) {
        if (isnan(logprobs[i])) {
            top = logprobs[i];
            break;
        }
        if (logprobs[i] > top)
            top = logprobs[i];
    }
    float scaled = top + tern_min_p_offset(min_p);
    if (min_tokens_to_keep > 1)
        tern_select_top(logprobs, vocab, min_tokens_to_keep, 1, ws);
    else
        memset(ws->keep, 0, (size_t)vocab);
    for (int i = 0; i < vocab; i++)
        if (logprobs[i] < scaled && !ws->keep[i])
            logprobs[i] = -INFINITY;
}

void tern_apply_top_k(float *logprobs, int vocab, int top_k, tern_sampler_ws *ws)
{
    /* mlx-lm refuses top_k >= vocab; keeping every token is the same filter
     * without the failure. */
    if (top_k <= 0 || top_k >= vocab)
        return;
    tern_select_top(logprobs, vocab, top_k, 0, ws);
    for (int i = 0; i < vocab; i++)
        if (!ws->keep[i])
            logprobs[i] = -INFINITY;
}

int tern_apply_xtc(float *logprobs, int vocab, float probability, float threshold,
                   const int32_t *special, int n_special, tern_prng_key key,
                   tern_sampler_ws *ws)
{
    float u = tern_prng_word_to_uniform(tern_prng_bits_at(key, 1, 0));
    if (u > probability)
        return 0;
    /* softmax as MLX computes it: exp(x - max), sequential sum, times 1/sum */
    float *probs = ws->f;
    float mx = -INFINITY;
    for (int i = 0; i < vocab; i++) {
        if (isnan(logprobs[i])) {
            mx = logprobs[i];
            break;
        }
        if (logprobs[i] > mx)
            mx = logprobs[i];
    }
    tern_mlx_exp_array(logprobs, probs, vocab, mx);
    float sum = 0.0f;
    for (int i = 0; i < vocab; i++)
        sum += probs[i];
    float inv = 1.0f / sum;
    float least_above = INFINITY;
    for (int i = 0; i < vocab; i++) {
        probs[i] = probs[i] * inv;
        if (probs[i] > threshold && probs[i] < least_above)
            least_above = probs[i];
    }
    for (int i = 0; i < vocab; i++)
        ws->keep[i] = probs[i] > least_above;
    for (int s = 0; s < n_special; s++)
        if (special[s] >= 0 && special[s] < vocab)
            ws->keep[special[s]] = 0;
    for (int i = 0; i < vocab; i++)
        if (ws->keep[i])
            logprobs[i] = -INFINITY;
    return 1;
}

int32_t tern_categorical(const float *logprobs, int vocab, float temperature,
                         tern_prng_key key, tern_sampler_ws *ws)
{
    /* MLX draws a single categorical sample from a [1, V] row by inverse CDF:
     * weights w = exp(s - max s) (one-hot on the maxima when max is +-inf),
     * x = uniform(key) * sum(w), and the token is
     * searchsorted_right(exclusive_cumsum(w), x) - 1. */
    if (vocab <= 0)
        return 0;
    float inv = tern_temperature_scale(temperature);
    float *w = ws->f;
    float top = -INFINITY;
    for (int i = 0; i < vocab; i++) {
        w[i] = logprobs[i] * inv;
        if (isnan(w[i]) || w[i] > top)
            top = w[i];
    }
    if (isinf(top))
        for (int i = 0; i < vocab; i++)
            w[i] = w[i] == top ? 1.0f : 0.0f;
    else
        tern_mlx_exp_array(w, w, vocab, top);
    float total = 0.0f;
    for (int i = 0; i < vocab; i++)
        total = total + w[i];
    float x = tern_prng_word_to_uniform(tern_prng_bits_at(key, 1, 0)) * total;
    int count = 0;
    float e = 0.0f;
    for (int i = 0; i < vocab; i++) {
        if (!(e <= x))
            break;
        count++;
        e = e + w[i];
    }
    int idx = count - 1;
    if (idx < 0)
        idx = 0;
    return idx;
}

typedef struct {
    float v;
    int32_t id;
} scored_id;

static int cmp_desc(const void *a, const void *b)
{
    const scored_id *x = a, *y = b;
    if (x->v > y->v)
        return -1;
    if (x->v < y->v)
        return 1;
    return (x->id > y->id) - (x->id < y->id);
}

int tern_top_logprobs(const float *logprobs, int vocab, int k, int32_t *ids, float *vals)
{
    if (k <= 0 || vocab <= 0)
        return 0;
    if (k > vocab)
        k = vocab;
    tern_sampler_ws ws;
    scored_id *pick = malloc((size_t)k * sizeof *pick);
    if (!pick || tern_sampler_ws_init(&ws, vocab) != TERN_OK) {
        free(pick);
        return -1;
    }
    tern_select_top(logprobs, vocab, k, 0, &ws);
    int n = 0;
    for (int i = 0; i < vocab && n < k; i++)
        if (ws.keep[i]) {
            pick[n].v = logprobs[i];
            pick[n].id = i;
            n++;
        }
    qsort(pick, (size_t)n, sizeof *pick, cmp_desc);
    for (int i = 0; i < n; i++) {
        ids[i] = pick[i].id;
        vals[i] = pick[i].v;
    }
    tern_sampler_ws_free(&ws);
    free(pick);
    return n;
}

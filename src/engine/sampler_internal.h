/* Sampler pieces below the public chain (include/tern/sampler.h): each
 * filter of mlx-lm's make_sampler on its own, the float routines they share
 * (written to round exactly as MLX's CPU backend does), and the top-k helper
 * behind the server's top_logprobs. Private to src/engine and the tests. */
#ifndef TERN_ENGINE_SAMPLER_INTERNAL_H
#define TERN_ENGINE_SAMPLER_INTERNAL_H

#include <stdint.h>

#include "engine/prng.h"
#include "tern/status.h"

/* MLX's CPU exp for float32 (Cephes-style 2^x polynomial with fma); differs
 * from expf in the last bits, which matters where mlx-lm compares sums. */
float tern_mlx_expf(float x);

/* out[i] = tern_mlx_expf(x[i] - shift) for i < n (out may equal x). */
void tern_mlx_exp_array(const float *x, float *out, int n, float shift);

/* The float sum, in index order, of tern_mlx_expf(x[i] - shift). */
float tern_mlx_exp_sum(const float *x, int n, float shift);

/* logsumexp over x[n] as MLX computes it: max, then the sequential float sum
 * of exp(x - max), then log(sum) + max (max itself when it is infinite). */
float tern_mlx_logsumexp(const float *x, int n);

/* mlx-lm scales by 1/temperature and offsets min_p by log(min_p) in double
 * precision from the request's value; tern's parameters are floats, so these
 * first recover the shortest decimal that the float came from. */
float tern_temperature_scale(float temperature);
float tern_min_p_offset(float min_p);

/* Scratch memory for the filters, sized for one vocabulary. */
typedef struct {
    int cap;         /* entries each buffer holds */
    float *f;        /* [cap] */
    float *f2;       /* [cap] */
    uint32_t *u0;    /* [cap] */
    uint32_t *u1;    /* [cap] */
    uint8_t *keep;   /* [cap] */
} tern_sampler_ws;

/* Allocates buffers for n entries (TERN_E_NOMEM on failure, ws left empty). */
tern_status tern_sampler_ws_init(tern_sampler_ws *ws, int n);
void tern_sampler_ws_free(tern_sampler_ws *ws);

/* Sorts x[n] ascending in place as a stable float sort would (-0 == +0,
 * NaN last). Uses ws->u0, ws->u1. */
void tern_sort_floats(float *x, int n, tern_sampler_ws *ws);

/* Sets ws->keep[i] = 1 for the k entries of x[n] that are largest in the
 * order "value, then index", 0 elsewhere: prefer_high_index = 0 breaks ties
 * toward the lower index (MLX argpartition of -x), 1 toward the higher index
 * (argpartition of x). 0 <= k <= n. Uses ws->u0, ws->u1. */
void tern_select_top(const float *x, int n, int k, int prefer_high_index, tern_sampler_ws *ws);

/* Filters of the chain, in place on logprobs[vocab]; each equals the mlx-lm
 * function of the same name (apply_top_p, apply_min_p, apply_top_k). */
void tern_apply_top_p(float *logprobs, int vocab, float top_p, tern_sampler_ws *ws);
void tern_apply_min_p(float *logprobs, int vocab, float min_p, int min_tokens_to_keep,
                      tern_sampler_ws *ws);
void tern_apply_top_k(float *logprobs, int vocab, int top_k, tern_sampler_ws *ws);

/* XTC: with u = uniform(key) and u <= probability, masks every token whose
 * probability exceeds the smallest probability above threshold, except the
 * special ids. Returns 1 when the mask was applied, 0 when the draw skipped it. */
int tern_apply_xtc(float *logprobs, int vocab, float probability, float threshold,
                   const int32_t *special, int n_special, tern_prng_key key,
                   tern_sampler_ws *ws);

/* mx.random.categorical(logits * (1/temperature), key=key) for logits of
 * shape [1, vocab], as mlx-lm calls it: MLX (0.32) draws one sample from one
 * row by inverse CDF on a single uniform, not by Gumbel-max. Uses ws->f. */
int32_t tern_categorical(const float *logprobs, int vocab, float temperature,
                         tern_prng_key key, tern_sampler_ws *ws);

/* argmax with MLX's rule: the first index holding the maximum. */
int32_t tern_argmax(const float *x, int n);

#endif

/* One forward pass over a batch of rows.
 *
 * Each batch row is one sequence (a KV row id) contributing n_tokens[b] >= 0
 * new tokens that continue at that row's current KV offset. The pass appends
 * their keys/values to the KV state and returns logits for the tokens the
 * caller asks for, in token order. Prefill, decode, continuous batching and
 * speculative verify are all this call with different shapes. */
#ifndef TERN_MODEL_FORWARD_H
#define TERN_MODEL_FORWARD_H

#include <stdint.h>

#include "kv/kv.h"
#include "tern/model.h"

typedef struct {
    int n_rows;
    const int *rows;          /* KV row id of each batch row (borrowed) */
    const int *n_tokens;      /* new tokens per batch row (borrowed) */
    const int32_t *tokens;    /* the new tokens, row after row (borrowed) */
    const uint8_t *want;      /* per new token: 1 = output it; NULL = the last token of
                                 every row that has new tokens (borrowed) */
} tern_batch;

/* What a greedy sampler needs of one output: lse = log-sum-exp of its
 * logits, argmax = the first index of the largest logits[i] - lse, lp =
 * that log-probability. */
typedef struct {
    float lse;
    int32_t argmax;
    float lp;
} tern_logit_summary;

/* logits: [n_out, vocab] or NULL; hidden: [n_out, hidden_size] (after the
 * final norm) or NULL. n_out is the number of tokens asked for. On failure
 * the KV state of every row is as it was before the call. */
tern_status tern_forward(tern_model *m, tern_kv *kv, const tern_batch *b, float *logits, float *hidden);

/* tern_forward that also fills summary[i] for every output i and writes
 * logits row i only where need[i] is non-zero (need NULL: every row), so a
 * device backend copies back a few bytes for rows sampled greedily. Only on
 * models whose backend computes summaries (tern_model_summarizes); others
 * get TERN_E_UNSUPPORTED. A row's summary depends on that row alone. */
tern_status tern_forward_ex(tern_model *m, tern_kv *kv, const tern_batch *b, float *logits, float *hidden,
                            const uint8_t *need, tern_logit_summary *summary);
/* 1 when the model's backend computes tern_logit_summary (the CUDA one). */
int tern_model_summarizes(const tern_model *m);

/* KV block pool shaped for this model (plain float32 layout): max_rows rows
 * of up to max_len positions over n_blocks blocks of block_tokens positions
 * (0 = TERN_KV_BLOCK_TOKENS; n_blocks 0 = enough for every row at max_len).
 * Returns owned. */
tern_status tern_model_kv_create(const tern_model *m, int max_rows, int max_len, int block_tokens, long n_blocks,
                                 tern_kv **out);
/* KV bytes one position costs in every layer together (plain layout). */
size_t tern_model_kv_bytes_per_token(const tern_model *m);

/* Number of outputs the batch asks for. */
int tern_batch_n_out(const tern_batch *b);

/* Runs fn(arg, i) for 0 <= i < n on the model's thread pool, between
 * forward passes (it takes the same lock). */
void tern_model_parallel(tern_model *m, void (*fn)(void *arg, int i), void *arg, int n);

int tern_model_hidden_size(const tern_model *m);



#endif

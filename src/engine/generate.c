/* The serial generate loop (mlx-lm generate_step order): prefill the prompt
 * in chunks with no logits except for the last token, then per step process
 * the logits, sample, report, and feed the token back. An end-of-sequence id
 * ends generation and is not reported. */
#include "tern/generate.h"

#include <stdlib.h>
#include <string.h>

#include "tern/sampler.h"
#include "core/clock.h"
#include "model/forward.h"

enum { MAX_TOP_LOGPROBS = 20 };

void tern_generate_opts_default(tern_generate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->prefill_chunk = 2048;
    tern_sampling_params_default(&o->sampling);
}

static int is_eos(const tern_model *m, const tern_generate_opts *o, int32_t t)
{
    int n;
    const int32_t *e = tern_model_eos_ids(m, &n);
    for (int i = 0; i < n; i++) if (e[i] == t) return 1;
    for (int i = 0; i < o->n_extra_eos; i++) if (o->extra_eos[i] == t) return 1;
    return 0;
}

/* Feeds tokens [0, n) through the model in chunks; logits of the last one
 * land in logits (when non-NULL). */
static tern_status prefill(tern_model *m, tern_kv *kv, int row, const int32_t *ids, int n, int chunk,
                           float *logits)
{
    for (int s = 0; s < n; s += chunk) {
        int len = n - s < chunk ? n - s : chunk, last = s + len == n;
        uint8_t *want = calloc((size_t)len, 1);
        if (!want) return tern_error(TERN_E_NOMEM, "generate: out of memory");
        if (last && logits) want[len - 1] = 1;
        tern_batch b = {1, &row, &len, ids + s, want};
        tern_status st = tern_forward(m, kv, &b, last ? logits : NULL, NULL);
        free(want);
        if (st) return st;
    }
    return TERN_OK;
}

tern_status tern_generate(tern_model *m, const int32_t *prompt, int n_prompt, const tern_generate_opts *o,
                          tern_token_cb cb, void *user, tern_generate_stats *stats)
{
    tern_generate_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    stats->prompt_tokens = n_prompt;
    if (n_prompt <= 0) return tern_error(TERN_E_INVALID, "generate: the prompt is empty");
    if (o->max_tokens <= 0) return tern_error(TERN_E_INVALID, "generate: max_tokens must be positive");
    if (o->top_logprobs < 0 || o->top_logprobs > MAX_TOP_LOGPROBS)
        return tern_error(TERN_E_RANGE, "generate: top_logprobs must be in [0, %d]", MAX_TOP_LOGPROBS);
    tern_status st = tern_sampling_params_validate(&o->sampling);
    if (st) return st;
    int V = tern_model_vocab_size(m), chunk = o->prefill_chunk > 0 ? o->prefill_chunk : 2048;
    long total = (long)n_prompt + o->max_tokens;
    if (total > (1L << 30)) return tern_error(TERN_E_RANGE, "generate: prompt + max_tokens is too long");

    tern_kv *kv = NULL;
    int row = 0;
    float *logits = malloc((size_t)V * sizeof *logits), *lp = malloc((size_t)V * sizeof *lp);
    int32_t *hist = malloc((size_t)total * sizeof *hist);
    int32_t top_ids[MAX_TOP_LOGPROBS];
    float top_vals[MAX_TOP_LOGPROBS];
    if (!logits || !lp || !hist) { st = tern_error(TERN_E_NOMEM, "generate: out of memory"); goto done; }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    if ((st = tern_model_kv_create(m, 1, (int)total, &kv)) || (st = tern_kv_row_add(kv, &row))) goto done;

    double t0 = tern_now(), t_first = t0;
    if ((st = prefill(m, kv, row, prompt, n_prompt, chunk, logits))) goto done;
    int n_hist = n_prompt;
    stats->finish = TERN_FINISH_LENGTH;
    for (int step = 0; step < o->max_tokens; step++) {
        if ((st = tern_logits_process(&o->sampling, logits, V, hist, n_hist))) goto done;
        tern_log_softmax(logits, lp, V);
        tern_token_event ev = {0};
        if (o->top_logprobs > 0)
            ev.n_top = tern_top_logprobs(lp, V, o->top_logprobs, top_ids, top_vals);
        ev.top_ids = top_ids;
        ev.top_logprobs = top_vals;
        int32_t tok;
        /* The sampler scribbles on its input; keep lp for the chosen logprob. */
        memcpy(logits, lp, (size_t)V * sizeof *lp);
        if ((st = tern_sample_logprobs(&o->sampling, logits, V, (uint64_t)step, &tok))) goto done;
        if (step == 0) t_first = tern_now();
        if (!o->ignore_eos && is_eos(m, o, tok)) { stats->finish = TERN_FINISH_EOS; break; }
        hist[n_hist++] = tok;
        stats->generated_tokens++;
        ev.token = tok;
        ev.step = step;
        ev.logprob = lp[tok];
        if (cb && cb(user, &ev)) { stats->finish = TERN_FINISH_STOPPED; break; }
        if (step + 1 == o->max_tokens) break;
        int one = 1;
        tern_batch b = {1, &row, &one, &tok, NULL};
        if ((st = tern_forward(m, kv, &b, logits, NULL))) goto done;
    }
    stats->prefill_seconds = t_first - t0;
    stats->decode_seconds = tern_now() - t_first;
done:
    free(logits);
    free(lp);
    free(hist);
    tern_kv_free(kv);
    return st;
}

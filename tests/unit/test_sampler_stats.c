/* Sampler behaviour beyond the mlx goldens: the categorical draw follows
 * the filtered distribution (chi-square over many keyed steps, fixed seed, so
 * deterministic), parameter validation wording, processor refusals, the
 * top_logprobs helper, and the cost of one step at a 151936-token vocabulary. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/prng.h"
#include "engine/sampler_internal.h"
#include "tern/sampler.h"

#define V 8
#define DRAWS 20000

/* Pearson chi-square of counts against probabilities (cells with p > 0);
 * a draw in a cell with p == 0 makes it infinite. */
static double chi_square(const int *count, const double *p, int n, int total, int *df)
{
    double x2 = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] <= 0) {
            if (count[i] > 0)
                return INFINITY;
            continue;
        }
        double e = p[i] * total;
        x2 += (count[i] - e) * (count[i] - e) / e;
        cells++;
    }
    *df = cells - 1;
    return x2;
}

/* Chi-square critical values at significance 0.001 for df 1..7. */
static double critical(int df)
{
    static const double c[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
    return df >= 1 && df <= 7 ? c[df] : 0;
}

static void softmax_scaled(const float *lp, double t, double *p)
{
    double m = -INFINITY, s = 0;
    for (int i = 0; i < V; i++)
        if (lp[i] / t > m)
            m = lp[i] / t;
    for (int i = 0; i < V; i++) {
        p[i] = isinf(lp[i]) ? 0 : exp(lp[i] / t - m);
        s += p[i];
    }
    for (int i = 0; i < V; i++)
        p[i] /= s;
}

static void count_draws(const tern_sampling_params *p, const float *lp, int *count)
{
    memset(count, 0, V * sizeof *count);
    for (int s = 0; s < DRAWS; s++) {
        float x[V];
        memcpy(x, lp, sizeof x);
        int32_t tok = -1;
        if (tern_sample_logprobs(p, x, V, (uint64_t)s, &tok) != TERN_OK || tok < 0 || tok >= V) {
            CHECK(0);
            return;
        }
        count[tok]++;
    }
}

static void test_distribution(void)
{
    const float logits[V] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -INFINITY, 1.5f, -0.5f};
    float lp[V];
    tern_log_softmax(logits, lp, V);
    tern_sampling_params p;
    tern_sampling_params_default(&p);
    p.seed = 42;
    int count[V], df;
    double want[V];

    p.temperature = 1.0f;
    count_draws(&p, lp, count);
    softmax_scaled(lp, 1.0, want);
    double x2 = chi_square(count, want, V, DRAWS, &df);
    printf("categorical T=1: chi2 %.2f (df %d, 0.001 critical %.2f)\n", x2, df, critical(df));
    CHECK(x2 < critical(df));
    CHECK(count[5] == 0);

    /* top_k = 3 at T = 0.7: the three best tokens, renormalised */
    p.temperature = 0.7f;
    p.top_k = 3;
    count_draws(&p, lp, count);
    float kept[V];
    for (int i = 0; i < V; i++)
        kept[i] = (i == 0 || i == 6 || i == 1) ? lp[i] : -INFINITY;
    softmax_scaled(kept, 0.7, want);
    x2 = chi_square(count, want, V, DRAWS, &df);
    printf("top_k 3, T=0.7: chi2 %.2f (df %d)\n", x2, df);
    CHECK(df == 2 && x2 < critical(df));

    /* XTC applied with probability 0.5: a half-half mixture of the plain and
     * the masked distribution */
    p.temperature = 1.0f;
    p.top_k = 0;
    p.xtc_probability = 0.5f;
    p.xtc_threshold = 0.15f;
    count_draws(&p, lp, count);
    double plain[V], masked[V];
    softmax_scaled(lp, 1.0, plain);
    float m[V];
    memcpy(m, lp, sizeof m);
    tern_sampler_ws ws;
    CHECK(tern_sampler_ws_init(&ws, V) == TERN_OK);
    CHECK(tern_apply_xtc(m, V, 1.0f, 0.15f, NULL, 0, tern_prng_key_from_seed(0), &ws) == 1);
    tern_sampler_ws_free(&ws);
    CHECK(isinf(m[0]) && !isinf(m[1]) && !isinf(m[6])); /* 0 and 6 above 0.15, 6 is least */
    softmax_scaled(m, 1.0, masked);
    for (int i = 0; i < V; i++)
        want[i] = 0.5 * plain[i] + 0.5 * masked[i];
    x2 = chi_square(count, want, V, DRAWS, &df);
    printf("xtc p=0.5: chi2 %.2f (df %d)\n", x2, df);
    CHECK(x2 < critical(df));
}

static void test_determinism(void)
{
    float lp[V] = {-1, -2, -3, -1.5f, -2.5f, -0.5f, -4, -1};
    tern_sampling_params p;
    tern_sampling_params_default(&p);
    p.temperature = 1.0f;
    p.seed = 7;
    int differs = 0;
    for (int s = 0; s < 32; s++) {
        float a[V], b[V];
        memcpy(a, lp, sizeof a);
        memcpy(b, lp, sizeof b);
        int32_t ta, tb, tc;
        CHECK(tern_sample_logprobs(&p, a, V, (uint64_t)s, &ta) == TERN_OK);
        CHECK(tern_sample_logprobs(&p, b, V, (uint64_t)s, &tb) == TERN_OK);
        CHECK(ta == tb);
        memcpy(a, lp, sizeof a);
        p.seed = 8;
        CHECK(tern_sample_logprobs(&p, a, V, (uint64_t)s, &tc) == TERN_OK);
        p.seed = 7;
        differs += tc != ta;
    }
    CHECK(differs > 0);
    /* greedy: first index of the maximum, filters ignored */
    float g[V] = {0, 3, 1, 3, -INFINITY, 2, 3, 0};
    p.temperature = 0.0f;
    p.top_k = 1;
    int32_t t;
    CHECK(tern_sample_logprobs(&p, g, V, 0, &t) == TERN_OK && t == 1);
    /* top_k >= vocab keeps every token (mlx-lm raises instead) */
    tern_sampler_ws ws;
    CHECK(tern_sampler_ws_init(&ws, V) == TERN_OK);
    float k[V];
    memcpy(k, lp, sizeof k);
    tern_apply_top_k(k, V, V, &ws);
    CHECK(memcmp(k, lp, sizeof k) == 0);
    tern_sampler_ws_free(&ws);
}

static int expect_invalid(const tern_sampling_params *p, const char *msg)
{
    tern_status st = tern_sampling_params_validate(p);
    int ok = st == TERN_E_INVALID && strcmp(tern_last_error(), msg) == 0;
    if (!ok)
        fprintf(stderr, "want \"%s\", got %d \"%s\"\n", msg, st, tern_last_error());
    return ok;
}

static void test_validation(void)
{
    tern_sampling_params d, p;
    tern_sampling_params_default(&d);
    CHECK(tern_sampling_params_validate(&d) == TERN_OK);
    CHECK(d.repetition_context_size == 20 && d.min_tokens_to_keep == 1 && d.temperature == 0);
#define BAD(field, value, msg) do { p = d; p.field = value; CHECK(expect_invalid(&p, msg)); } while (0)
    BAD(temperature, -0.5f, "temperature must be at least 0");
    BAD(temperature, NAN, "temperature must be a finite number");
    BAD(top_p, 1.5f, "top_p must be at most 1");
    BAD(top_p, -0.1f, "top_p must be at least 0");
    BAD(top_k, -1, "top_k must be at least 0");
    BAD(min_p, 1.01f, "min_p must be at most 1");
    BAD(min_p, -0.2f, "min_p must be at least 0");
    BAD(repetition_penalty, -1.0f, "repetition_penalty must be at least 0");
    BAD(repetition_context_size, -1, "repetition_context_size must be at least 0");
    BAD(presence_context_size, -3, "presence_context_size must be at least 0");
    BAD(frequency_context_size, -3, "frequency_context_size must be at least 0");
    BAD(xtc_probability, 1.5f, "xtc_probability must be at most 1");
    BAD(xtc_threshold, -0.5f, "xtc_threshold must be at least 0");
    BAD(n_bias, 2, "logit_bias must be a dict of int to float");
#undef BAD
    p = d;
    p.xtc_probability = 0.5f;
    p.xtc_threshold = 0.7f;
    CHECK(expect_invalid(&p, "`threshold` has to be a float in the [0, 0.5] interval, but is 0.7"));
    p = d;
    p.min_p = 0.1f;
    p.min_tokens_to_keep = 0;
    CHECK(expect_invalid(&p, "`min_tokens_to_keep` has to be a positive integer, but is 0"));

    /* processors refuse ids outside the vocabulary instead of writing there */
    float logits[V] = {0};
    int32_t ids[1] = {V};
    float vals[1] = {1.0f};
    p = d;
    p.bias_ids = ids;
    p.bias_values = vals;
    p.n_bias = 1;
    CHECK(tern_logits_process(&p, logits, V, NULL, 0) == TERN_E_RANGE);
    p = d;
    p.repetition_penalty = 1.1f;
    int32_t hist[2] = {1, -4};
    CHECK(tern_logits_process(&p, logits, V, hist, 2) == TERN_E_RANGE);
    int32_t tok;
    CHECK(tern_sample_logprobs(&d, logits, 0, 0, &tok) == TERN_E_INVALID);
}

static void test_top_logprobs(void)
{
    float lp[V] = {-1.0f, -0.5f, -2.0f, -0.5f, -INFINITY, -0.25f, -0.5f, -3.0f};
    int32_t ids[V + 2];
    float vals[V + 2];
    int n = tern_top_logprobs(lp, V, 4, ids, vals);
    CHECK(n == 4);
    CHECK(ids[0] == 5 && ids[1] == 1 && ids[2] == 3 && ids[3] == 6);
    CHECK(vals[0] == -0.25f && vals[3] == -0.5f);
    n = tern_top_logprobs(lp, V, 2, ids, vals);
    CHECK(n == 2 && ids[0] == 5 && ids[1] == 1);
    n = tern_top_logprobs(lp, V, V + 2, ids, vals);
    CHECK(n == V && ids[V - 1] == 4 && ids[V - 2] == 7);
    CHECK(tern_top_logprobs(lp, V, 0, ids, vals) == 0);
}

/* The FMA-dispatched array exp and the scalar one agree bit for bit. */
static void test_exp_paths(void)
{
    enum { N = 200000 };
    static float x[N], y[N];
    tern_prng_key k = tern_prng_key_from_seed(11);
    for (int i = 0; i < N; i++)
        x[i] = tern_prng_word_to_uniform(tern_prng_bits_at(k, N, (size_t)i)) * 190.0f - 95.0f;
    x[0] = -INFINITY;
    x[1] = INFINITY;
    x[2] = NAN;
    x[3] = 0.0f;
    tern_mlx_exp_array(x, y, N, 0.0f);
    int same = 1;
    for (int i = 0; i < N; i++) {
        float r = tern_mlx_expf(x[i]);
        same &= memcmp(&r, &y[i], sizeof r) == 0;
    }
    CHECK(same);
    CHECK(y[0] == 0.0f && isinf(y[1]) && isnan(y[2]) && y[3] == 1.0f);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_large_vocab(void)
{
    const int n = 151936;
    float *logits = malloc(n * sizeof *logits), *lp = malloc(n * sizeof *lp);
    CHECK(logits && lp);
    if (!logits || !lp) {
        free(logits);
        free(lp);
        return;
    }
    tern_prng_key k = tern_prng_key_from_seed(3);
    for (int i = 0; i < n; i++)
        logits[i] = tern_prng_word_to_uniform(tern_prng_bits_at(k, (size_t)n, (size_t)i)) * 20.0f;
    tern_sampling_params p;
    tern_sampling_params_default(&p);
    p.temperature = 0.8f;
    p.top_p = 0.95f;
    p.top_k = 50;
    p.min_p = 0.05f;
    p.seed = 1;
    double t0 = now_ms();
    tern_log_softmax(logits, lp, n);
    double t1 = now_ms();
    int32_t tok = -1;
    CHECK(tern_sample_logprobs(&p, lp, n, 0, &tok) == TERN_OK && tok >= 0 && tok < n);
    double t2 = now_ms();
    int32_t ids[11];
    float vals[11];
    CHECK(tern_top_logprobs(lp, n, 11, ids, vals) == 11);
    double t3 = now_ms();
    printf("vocab %d: log_softmax %.2f ms, top_p+min_p+top_k draw %.2f ms, top-11 %.2f ms\n", n,
           t1 - t0, t2 - t1, t3 - t2);
    free(logits);
    free(lp);
}

int main(void)
{
    test_distribution();
    test_determinism();
    test_validation();
    test_top_logprobs();
    test_exp_paths();
    test_large_vocab();
    return check_summary("sampler_stats");
}

/* Sampler parity against mlx-lm / MLX goldens (tests/gen/gen_sampler_goldens.py):
 * PRNG layout, logits processors, log-softmax, every filter alone and chained,
 * and the token drawn for given (seed, step). */
#include "check.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/prng.h"
#include "engine/sampler_internal.h"
#include "tern/sampler.h"

#define GOLDEN "tests/goldens/sampler/sampler_goldens.json"
#define MAXV 1024

static int hex_floats(const char *hex, float *out, int max)
{
    size_t len = strlen(hex);
    int n = (int)(len / 8);
    if (n > max)
        return -1;
    for (int i = 0; i < n; i++) {
        uint8_t b[4];
        for (int j = 0; j < 4; j++) {
            unsigned v;
            if (sscanf(hex + 8 * i + 2 * j, "%2x", &v) != 1)
                return -1;
            b[j] = (uint8_t)v;
        }
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
        memcpy(&out[i], &u, 4);
    }
    return n;
}

static int get_floats(json_t *obj, const char *key, float *out)
{
    json_t *v = json_object_get(obj, key);
    return v && json_is_string(v) ? hex_floats(json_string_value(v), out, MAXV) : -1;
}

static uint64_t get_seed(json_t *obj)
{
    return strtoull(json_string_value(json_object_get(obj, "seed")), NULL, 10);
}

static double num(json_t *obj, const char *key, double def)
{
    json_t *v = json_object_get(obj, key);
    return v ? json_number_value(v) : def;
}

/* Sampling params from a golden "params" object; the int arrays are stored
 * in bias_ids / bias_vals / special (caller-owned, MAXV entries each). */
static void params_from_json(json_t *cfg, tern_sampling_params *p, int32_t *bias_ids,
                             float *bias_vals, int32_t *special)
{
    tern_sampling_params_default(p);
    p->temperature = (float)num(cfg, "temperature", 0);
    p->top_p = (float)num(cfg, "top_p", 0);
    p->min_p = (float)num(cfg, "min_p", 0);
    p->min_tokens_to_keep = (int)num(cfg, "min_tokens_to_keep", 1);
    p->top_k = (int)num(cfg, "top_k", 0);
    p->xtc_probability = (float)num(cfg, "xtc_probability", 0);
    p->xtc_threshold = (float)num(cfg, "xtc_threshold", 0);
    p->repetition_penalty = (float)num(cfg, "repetition_penalty", 0);
    p->repetition_context_size = (int)num(cfg, "repetition_context_size", 20);
    p->presence_penalty = (float)num(cfg, "presence_penalty", 0);
    p->presence_context_size = (int)num(cfg, "presence_context_size", 20);
    p->frequency_penalty = (float)num(cfg, "frequency_penalty", 0);
    p->frequency_context_size = (int)num(cfg, "frequency_context_size", 20);
    json_t *bias = json_object_get(cfg, "logit_bias");
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(bias, k, v) {
        bias_ids[n] = atoi(k);
        bias_vals[n] = (float)json_number_value(v);
        n++;
    }
    p->bias_ids = bias_ids;
    p->bias_values = bias_vals;
    p->n_bias = n;
    json_t *sp = json_object_get(cfg, "xtc_special");
    size_t i;
    n = 0;
    json_array_foreach(sp, i, v) special[n++] = (int32_t)json_integer_value(v);
    p->xtc_special = special;
    p->n_xtc_special = n;
}

/* Same -inf pattern, finite values within tol; counts bit-exact entries. */
static int same_vec(const float *a, const float *b, int n, float tol, int *exact)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], 4) == 0) {
            (*exact)++;
            continue;
        }
        if (isinf(a[i]) || isinf(b[i]) || fabsf(a[i] - b[i]) > tol)
            ok = 0;
    }
    return ok;
}

static void test_prng(json_t *root)
{
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(root, "prng"), i, e) {
        uint64_t seed = get_seed(e);
        tern_prng_key k = tern_prng_key_from_seed(seed);
        json_t *kk = json_object_get(e, "key");
        CHECK(k.k[0] == json_integer_value(json_array_get(kk, 0)));
        CHECK(k.k[1] == json_integer_value(json_array_get(kk, 1)));
        tern_prng_key a, b;
        tern_prng_split(k, &a, &b);
        json_t *s = json_object_get(e, "split");
        CHECK(a.k[0] == json_integer_value(json_array_get(s, 0)) &&
              a.k[1] == json_integer_value(json_array_get(s, 1)) &&
              b.k[0] == json_integer_value(json_array_get(s, 2)) &&
              b.k[1] == json_integer_value(json_array_get(s, 3)));
        const char *nk;
        json_t *hv;
        json_object_foreach(json_object_get(e, "uniform"), nk, hv) {
            float want[64];
            uint32_t w[64];
            int n = hex_floats(json_string_value(hv), want, 64);
            CHECK(n == atoi(nk));
            tern_prng_bits(k, w, (size_t)n);
            for (int j = 0; j < n; j++) {
                float u = tern_prng_word_to_uniform(w[j]);
                CHECK_MSG(memcmp(&u, &want[j], 4) == 0, "seed %llu n %d j %d: %.9g vs %.9g",
                          (unsigned long long)seed, n, j, u, want[j]);
                CHECK(tern_prng_bits_at(k, (size_t)n, (size_t)j) == w[j]);
            }
        }
        float g[7];
        uint32_t w[7];
        CHECK(get_floats(e, "gumbel7", g) == 7);
        tern_prng_bits(k, w, 7);
        for (int j = 0; j < 7; j++) {
            float x = tern_prng_word_to_gumbel(w[j]);
            CHECK_MSG(memcmp(&x, &g[j], 4) == 0, "gumbel %d: %.9g vs %.9g", j, x, g[j]);
        }
        tern_prng_key sk = tern_prng_step_key(seed, 41);
        json_t *sj = json_object_get(e, "step41_key");
        CHECK(sk.k[0] == json_integer_value(json_array_get(sj, 0)) &&
              sk.k[1] == json_integer_value(json_array_get(sj, 1)));
    }
}

static void test_log_softmax(json_t *root, int vocab)
{
    const char *name;
    json_t *hv;
    int exact = 0, total = 0;
    json_object_foreach(json_object_get(root, "logits"), name, hv) {
        float logits[MAXV], want[MAXV], got[MAXV];
        CHECK(hex_floats(json_string_value(hv), logits, MAXV) == vocab);
        CHECK(get_floats(json_object_get(root, "logprobs"), name, want) == vocab);
        tern_log_softmax(logits, got, vocab);
        CHECK_MSG(same_vec(got, want, vocab, 1e-5f, &exact), "log_softmax %s", name);
        total += vocab;
    }
    printf("log_softmax: %d/%d entries bit-exact\n", exact, total);
}

static void test_processors(json_t *root, int vocab)
{
    json_t *c;
    size_t i;
    int exact = 0, total = 0, cases = 0;
    json_array_foreach(json_object_get(root, "processors"), i, c) {
        float logits[MAXV], want[MAXV], want_lp[MAXV], lp[MAXV], bias_vals[MAXV];
        int32_t bias_ids[MAXV], special[MAXV], hist[MAXV];
        const char *name = json_string_value(json_object_get(c, "logits"));
        CHECK(get_floats(json_object_get(root, "logits"), name, logits) == vocab);
        CHECK(get_floats(c, "processed", want) == vocab);
        CHECK(get_floats(c, "logprobs", want_lp) == vocab);
        tern_sampling_params p;
        params_from_json(json_object_get(c, "params"), &p, bias_ids, bias_vals, special);
        size_t j;
        json_t *t;
        int nh = 0;
        json_array_foreach(json_object_get(c, "history"), j, t) hist[nh++] = (int32_t)json_integer_value(t);
        CHECK(tern_logits_process(&p, logits, vocab, hist, nh) == TERN_OK);
        CHECK_MSG(same_vec(logits, want, vocab, 1e-5f, &exact), "processors case %zu", i);
        tern_log_softmax(logits, lp, vocab);
        CHECK_MSG(same_vec(lp, want_lp, vocab, 1e-5f, &exact), "processed logprobs case %zu", i);
        total += 2 * vocab;
        cases++;
    }
    CHECK(cases > 0);
    printf("processors: %d cases, %d/%d entries bit-exact\n", cases, exact, total);
}

/* Filters of the chain in make_sampler's order with the keys tern uses. */
static void run_filters(const tern_sampling_params *p, float *lp, int vocab, tern_prng_key key,
                        tern_sampler_ws *ws)
{
    tern_prng_key xk = key, dk = key;
    if (p->xtc_probability > 0)
        tern_prng_split(key, &xk, &dk);
    if (p->top_p > 0 && p->top_p < 1)
        tern_apply_top_p(lp, vocab, p->top_p, ws);
    if (p->min_p != 0)
        tern_apply_min_p(lp, vocab, p->min_p, p->min_tokens_to_keep, ws);
    if (p->xtc_probability > 0)
        tern_apply_xtc(lp, vocab, p->xtc_probability, p->xtc_threshold, p->xtc_special,
                       p->n_xtc_special, xk, ws);
    if (p->top_k > 0)
        tern_apply_top_k(lp, vocab, p->top_k, ws);
}

static void test_filters(json_t *root, int vocab)
{
    json_t *c;
    size_t i;
    int cases = 0, exact = 0;
    tern_sampler_ws ws;
    CHECK(tern_sampler_ws_init(&ws, vocab) == TERN_OK);
    json_array_foreach(json_object_get(root, "filters"), i, c) {
        float lp[MAXV], want[MAXV], bias_vals[MAXV];
        int32_t bias_ids[MAXV], special[MAXV];
        const char *name = json_string_value(json_object_get(c, "logits"));
        CHECK(get_floats(json_object_get(root, "logprobs"), name, lp) == vocab);
        CHECK(get_floats(c, "filtered", want) == vocab);
        tern_sampling_params p;
        params_from_json(json_object_get(c, "params"), &p, bias_ids, bias_vals, special);
        CHECK(tern_sampling_params_validate(&p) == TERN_OK);
        run_filters(&p, lp, vocab, tern_prng_step_key(get_seed(c), (uint64_t)num(c, "step", 0)), &ws);
        int e = 0;
        CHECK_MSG(same_vec(lp, want, vocab, 0.0f, &e) && e == vocab,
                  "filter case %zu (%s): %d/%d identical", i, name, e, vocab);
        exact += e == vocab;
        cases++;
    }
    tern_sampler_ws_free(&ws);
    printf("filters: %d/%d cases identical\n", exact, cases);
}

static void test_draws(json_t *root, int vocab)
{
    json_t *c;
    size_t i;
    int draws = 0, same = 0;
    json_array_foreach(json_object_get(root, "draws"), i, c) {
        float base[MAXV], lp[MAXV], bias_vals[MAXV];
        int32_t bias_ids[MAXV], special[MAXV];
        const char *name = json_string_value(json_object_get(c, "logits"));
        CHECK(get_floats(json_object_get(root, "logprobs"), name, base) == vocab);
        tern_sampling_params p;
        params_from_json(json_object_get(c, "params"), &p, bias_ids, bias_vals, special);
        p.seed = get_seed(c);
        size_t s;
        json_t *t;
        json_array_foreach(json_object_get(c, "tokens"), s, t) {
            memcpy(lp, base, sizeof(float) * (size_t)vocab);
            int32_t tok = -1;
            CHECK(tern_sample_logprobs(&p, lp, vocab, s, &tok) == TERN_OK);
            CHECK_MSG(tok == json_integer_value(t), "draw case %zu (%s) step %zu: %d vs %d", i,
                      name, s, (int)tok, (int)json_integer_value(t));
            same += tok == json_integer_value(t);
            draws++;
        }
    }
    printf("draws: %d/%d tokens identical to mlx\n", same, draws);
}

/* mlx-lm's make_sampler on MLX's global random state after
 * mx.random.seed(s): every random call takes split(state)[1] as its key and
 * keeps split(state)[0] as the next state (XTC's uniform, then the draw). */
static void test_mlx_lm_sampler(json_t *root, int vocab)
{
    json_t *c;
    size_t i;
    int draws = 0, same = 0;
    tern_sampler_ws ws;
    CHECK(tern_sampler_ws_init(&ws, vocab) == TERN_OK);
    json_array_foreach(json_object_get(root, "mlx_lm_sampler"), i, c) {
        float lp[MAXV], bias_vals[MAXV];
        int32_t bias_ids[MAXV], special[MAXV];
        const char *name = json_string_value(json_object_get(c, "logits"));
        tern_sampling_params p;
        params_from_json(json_object_get(c, "params"), &p, bias_ids, bias_vals, special);
        int seed = (int)num(c, "first_seed", 0);
        size_t s;
        json_t *t;
        json_array_foreach(json_object_get(c, "tokens"), s, t) {
            CHECK(get_floats(json_object_get(root, "logprobs"), name, lp) == vocab);
            tern_prng_key state = tern_prng_key_from_seed((uint64_t)(seed + (int)s)), xk, dk;
            if (p.xtc_probability > 0)
                tern_prng_split(state, &state, &xk);
            tern_prng_split(state, &state, &dk);
            if (p.top_p > 0 && p.top_p < 1)
                tern_apply_top_p(lp, vocab, p.top_p, &ws);
            if (p.min_p != 0)
                tern_apply_min_p(lp, vocab, p.min_p, p.min_tokens_to_keep, &ws);
            if (p.xtc_probability > 0)
                tern_apply_xtc(lp, vocab, p.xtc_probability, p.xtc_threshold, p.xtc_special,
                               p.n_xtc_special, xk, &ws);
            if (p.top_k > 0)
                tern_apply_top_k(lp, vocab, p.top_k, &ws);
            int32_t tok = tern_categorical(lp, vocab, p.temperature, dk, &ws);
            CHECK_MSG(tok == json_integer_value(t), "make_sampler case %zu (%s) seed %d: %d vs %d",
                      i, name, seed + (int)s, (int)tok, (int)json_integer_value(t));
            same += tok == json_integer_value(t);
            draws++;
        }
    }
    tern_sampler_ws_free(&ws);
    CHECK(draws > 0);
    printf("mlx-lm make_sampler: %d/%d tokens identical\n", same, draws);
}

/* A 151936-token vocabulary rebuilt from the PRNG on both sides. */
static void test_big_vocab(json_t *root)
{
    json_t *big = json_object_get(root, "big_vocab");
    int vocab = (int)json_integer_value(json_object_get(big, "vocab"));
    CHECK(vocab > 0);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    float *lp = malloc((size_t)vocab * sizeof *lp);
    float *x = malloc((size_t)vocab * sizeof *x);
    uint32_t *bits = malloc((size_t)vocab * sizeof *bits);
    tern_sampler_ws ws;
    int ws_ok = tern_sampler_ws_init(&ws, vocab) == TERN_OK;
    CHECK(logits && lp && x && bits && ws_ok);
    if (!logits || !lp || !x || !bits || !ws_ok)
        goto out;
    tern_prng_bits(tern_prng_key_from_seed((uint64_t)json_integer_value(json_object_get(big, "key_seed"))),
                   bits, (size_t)vocab);
    float scale = (float)json_number_value(json_object_get(big, "scale"));
    for (int i = 0; i < vocab; i++)
        logits[i] = tern_prng_word_to_uniform(bits[i]) * scale;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(big, "spikes"), k, v) {
        int id = atoi(k);
        logits[id] = logits[id] + (float)json_number_value(v);
    }
    tern_log_softmax(logits, lp, vocab);
    json_t *c;
    size_t i;
    int draws = 0, same = 0;
    json_array_foreach(json_object_get(big, "cases"), i, c) {
        float bias_vals[MAXV];
        int32_t bias_ids[MAXV], special[MAXV];
        tern_sampling_params p;
        params_from_json(json_object_get(c, "params"), &p, bias_ids, bias_vals, special);
        p.seed = get_seed(c);
        memcpy(x, lp, (size_t)vocab * sizeof *x);
        if (p.temperature != 0)
            run_filters(&p, x, vocab, tern_prng_step_key(p.seed, 0), &ws);
        int finite = 0;
        for (int j = 0; j < vocab; j++)
            finite += isfinite(x[j]) != 0;
        CHECK_MSG(finite == json_integer_value(json_object_get(c, "finite_after_filters_step0")),
                  "big vocab case %zu: %d tokens survive the filters", i, finite);
        size_t s;
        json_t *t;
        json_array_foreach(json_object_get(c, "tokens"), s, t) {
            memcpy(x, lp, (size_t)vocab * sizeof *x);
            int32_t tok = -1;
            CHECK(tern_sample_logprobs(&p, x, vocab, s, &tok) == TERN_OK);
            CHECK_MSG(tok == json_integer_value(t), "big vocab case %zu step %zu: %d vs %d", i, s,
                      (int)tok, (int)json_integer_value(t));
            same += tok == json_integer_value(t);
            draws++;
        }
    }
    CHECK(draws > 0);
    printf("vocab %d: %d/%d tokens identical to mlx\n", vocab, same, draws);
out:
    if (ws_ok)
        tern_sampler_ws_free(&ws);
    free(logits);
    free(lp);
    free(x);
    free(bits);
}

static void test_param_floats(json_t *root)
{
    json_t *pf = json_object_get(root, "param_floats"), *e;
    size_t i;
    int n = 0, same = 0;
    json_array_foreach(json_object_get(pf, "temperature"), i, e) {
        float want, got = tern_temperature_scale((float)json_number_value(json_array_get(e, 0)));
        CHECK(hex_floats(json_string_value(json_array_get(e, 1)), &want, 1) == 1);
        CHECK_MSG(memcmp(&got, &want, 4) == 0, "1/T for T=%g: %.9g vs %.9g",
                  json_number_value(json_array_get(e, 0)), got, want);
        same += memcmp(&got, &want, 4) == 0;
        n++;
    }
    json_array_foreach(json_object_get(pf, "min_p"), i, e) {
        float want, got = tern_min_p_offset((float)json_number_value(json_array_get(e, 0)));
        CHECK(hex_floats(json_string_value(json_array_get(e, 1)), &want, 1) == 1);
        CHECK_MSG(memcmp(&got, &want, 4) == 0, "log(min_p) for %g: %.9g vs %.9g",
                  json_number_value(json_array_get(e, 0)), got, want);
        same += memcmp(&got, &want, 4) == 0;
        n++;
    }
    CHECK(n > 0);
    printf("1/temperature and log(min_p): %d/%d identical to mlx-lm's\n", same, n);
}

int main(void)
{
    json_error_t err;
    json_t *root = json_load_file(GOLDEN, 0, &err);
    CHECK_MSG(root != NULL, "%s: %s", GOLDEN, err.text);
    if (!root)
        return check_summary("sampler");
    int vocab = (int)json_integer_value(json_object_get(root, "vocab"));
    CHECK(vocab > 0 && vocab <= MAXV);
    test_prng(root);
    test_param_floats(root);
    test_log_softmax(root, vocab);
    test_processors(root, vocab);
    test_filters(root, vocab);
    test_draws(root, vocab);
    test_mlx_lm_sampler(root, vocab);
    test_big_vocab(root);
    json_decref(root);
    return check_summary("sampler");
}

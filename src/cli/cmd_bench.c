/* tern bench --model DIR [--prompt-tokens 512] [--gen-tokens 128] [--threads N]
 *            [--precision f32|bf16] [--weights panels|mapped] [--reps R]
 *            [--batch 1,2,4,8,16] [--json] [--draft-kind none|ngram|model] [--draft-model DIR]
 *            [--num-draft-tokens N] [--ngram-min N] [--ngram-max N]
 *
 * Everything runs through the engine (tern/engine.h), the scheduler the
 * server uses. Prefill: one request of prompt-tokens synthetic ids (time
 * from admission to its first token). Decode: a one-token prompt generating
 * gen-tokens greedily (the shape of llama-bench's tg test). Best of R runs.
 * Before each run it measures the STREAM-triad bandwidth on the same threads
 * and reports decode speed as a fraction of that run's ceiling (triad GB/s /
 * weight bytes read per token), median over the runs. --batch B,...: B
 * requests of 16-token prompts generating gen-tokens together: the mean
 * iteration time, the aggregate tok/s from submission to the last token,
 * and the aggregate while all B rows decode (best of R each). With --json the last line is
 * one JSON object. The speculation flags are tern generate's: every run
 * then decodes speculatively (the synthetic prompts give an n-gram drafter
 * little to find; a draft model drafts on what the target generates). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "tern/engine.h"
#include "tern/model.h"
#include "tern/system.h"

static void usage(void)
{
    fprintf(stderr, "usage: tern bench --model DIR [--prompt-tokens N] [--gen-tokens N] [--threads N]\n"
                    "       [--precision f32|bf16] [--weights panels|mapped] [--reps R] [--batch 1,2,4,8,16] [--json]\n"
                    "       [--draft-kind none|ngram|model] [--draft-model DIR] [--num-draft-tokens N]\n"
                    "       [--ngram-min N] [--ngram-max N] [--draft-fixed]\n");
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int left;
    tern_status st;
    double prefill_s, decode_s;
    int generated;
} waiter;

static void on_done(void *user, const tern_request_result *res)
{
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    if (res->status) w->st = res->status;
    w->prefill_s = res->prefill_seconds;
    w->decode_s = res->decode_seconds;
    w->generated += res->generated[0];
    w->left--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* One request of a batch run: when each of its tokens came (up to cap). */
typedef struct {
    waiter *w;
    double *t;
    int n, cap;
} tracked;

static int on_token_timed(void *user, const tern_token_event *ev)
{
    tracked *r = user;
    (void)ev;
    if (r->n < r->cap) r->t[r->n] = tern_now();
    r->n++;
    return 0;
}

static void on_done_timed(void *user, const tern_request_result *res) { on_done(((tracked *)user)->w, res); }

/* Runs B identical-shape requests at once and waits for all of them; with
 * tr ([B]), request b's token times go to tr[b]. */
static tern_status run(tern_engine *e, const int32_t *ids, int P, int G, int B, waiter *w, tracked *tr)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    tern_request_opts o;
    tern_request_opts_default(&o);
    o.max_tokens = G;
    o.ignore_eos = 1;
    tern_request_cb cb = {NULL, NULL, on_done, w};
    tern_status st = TERN_OK;
    w->left = B;
    for (int b = 0; b < B && !st; b++) {
        if (tr) {
            tr[b].w = w;
            cb = (tern_request_cb){on_token_timed, NULL, on_done_timed, &tr[b]};
        }
        st = tern_engine_submit(e, ids + b, P, &o, &cb, NULL);
        if (st) w->left -= B - b;
    }
    pthread_mutex_lock(&w->mu);
    while (w->left > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    return st ? st : w->st;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0.0;
}

/* B requests of 16-token prompts generating G tokens each: the mean time of
 * the iterations (prompt chunks and decode alike), the aggregate tok/s from
 * submission to the last token (admission and prefill included), and the
 * steady aggregate: the tokens that came while every request was decoding
 * (after the last first token, up to the first last token) over that
 * window's length (0 when the window holds no whole iteration). */
static tern_status batch_step(tern_engine *e, const int32_t *ids, int G, int B, double *iter_s, double *tps,
                              double *steady_tps)
{
    tern_engine_stats a, b;
    waiter w;
    *iter_s = *tps = *steady_tps = 0.0;
    tracked *tr = calloc((size_t)B, sizeof *tr);
    double *times = malloc((size_t)B * G * sizeof *times);
    if (!tr || !times) {
        free(tr), free(times);
        return tern_error(TERN_E_NOMEM, "bench: out of memory");
    }
    for (int r = 0; r < B; r++) tr[r].t = times + (size_t)r * G, tr[r].cap = G;
    tern_engine_get_stats(e, &a);
    double t0 = tern_now();
    tern_status st = run(e, ids, 16, G, B, &w, tr);
    double wall = tern_now() - t0;
    tern_engine_get_stats(e, &b);
    if (!st) {
        uint64_t it = b.iterations - a.iterations;
        *iter_s = it ? (b.iter_seconds_sum - a.iter_seconds_sum) / (double)it : 0.0;
        *tps = (double)B * G / wall;
        double from = 0, to = 1e300;
        for (int r = 0; r < B; r++) {
            int n = tr[r].n < G ? tr[r].n : G;
            if (n < 1) continue;
            if (tr[r].t[0] > from) from = tr[r].t[0];
            if (tr[r].t[n - 1] < to) to = tr[r].t[n - 1];
        }
        long in = 0;
        for (int r = 0; r < B; r++)
            for (int k = 0; k < tr[r].n && k < G; k++) in += tr[r].t[k] > from && tr[r].t[k] <= to;
        *steady_tps = to > from && in >= B ? (double)in / (to - from) : 0.0;
    }
    free(tr);
    free(times);
    return st;
}

int tern_cmd_bench(int argc, char **argv)
{
    const char *model_dir = NULL, *batch_s = NULL, *draft_dir = NULL;
    int P = 512, G = 128, reps = 3, json = 0, kind = -1, fixed = 0, n_draft = 0, ng_min = 0, ng_max = 0;
    tern_model_opts mo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--draft-fixed")) { fixed = 1; continue; }
        if (!strcmp(a, "--help")) { usage(); return 0; }
        if (!(v = cli_value(argc, argv, i))) return 2;
        i++;
        int bad = 0;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--prompt-tokens")) bad = cli_int(a, v, 1, 1 << 20, &P);
        else if (!strcmp(a, "--gen-tokens")) bad = cli_int(a, v, 0, 1 << 20, &G);
        else if (!strcmp(a, "--threads")) bad = cli_int(a, v, 1, 1024, &mo.n_threads);
        else if (!strcmp(a, "--reps")) bad = cli_int(a, v, 1, 100, &reps);
        else if (!strcmp(a, "--precision")) bad = cli_precision(a, v, &mo.precision);
        else if (!strcmp(a, "--weights")) bad = cli_weights(a, v, &mo.weights);
        else if (!strcmp(a, "--batch")) batch_s = v;
        else if (!strcmp(a, "--draft-kind")) bad = cli_draft_kind(a, v, &kind);
        else if (!strcmp(a, "--draft-model")) draft_dir = v;
        else if (!strcmp(a, "--num-draft-tokens")) bad = cli_int(a, v, 1, 15, &n_draft);
        else if (!strcmp(a, "--ngram-min")) bad = cli_int(a, v, 1, 64, &ng_min);
        else if (!strcmp(a, "--ngram-max")) bad = cli_int(a, v, 1, 64, &ng_max);
        else { fprintf(stderr, "tern bench: unknown option %s\n", a); usage(); return 2; }
        if (bad) return 2;
    }
    if (!model_dir) { usage(); return 2; }
    if (cli_draft_resolve("bench", kind, draft_dir, &kind)) return 2;
    int32_t *batches = NULL;
    int n_batches = 0;
    if (batch_s && cli_parse_ids(batch_s, &batches, &n_batches)) return 2;
    for (int i = 0; i < n_batches; i++)
        if (batches[i] < 1 || batches[i] > 256) { fprintf(stderr, "tern bench: --batch sizes must be in [1, 256]\n"); free(batches); return 2; }
    tern_model *m, *dm = NULL;
    double load_s = tern_now();
    if (tern_model_load(model_dir, &mo, &m)) { fprintf(stderr, "tern: %s\n", tern_last_error()); free(batches); return 1; }
    if (draft_dir && tern_draft_model_load(draft_dir, m, &mo, &dm)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        tern_model_free(m);
        free(batches);
        return 1;
    }
    load_s = tern_now() - load_s;
    int V = tern_model_vocab_size(m), rc = 1, maxb = 1;
    for (int i = 0; i < n_batches; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
    int32_t *ids = malloc((size_t)(P + maxb + 16) * sizeof *ids);
    tern_engine *e = NULL;
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.max_batch = maxb;
    eo.prefill_step = P;
    eo.kv_tokens = (long)maxb * (P + G + 64);
    eo.no_prompt_cache = 1;   /* every run computes its prompt: the same ids come back each rep */
    eo.draft_kind = kind;
    eo.draft_model = dm;
    eo.num_draft_tokens = n_draft;
    eo.ngram_min = ng_min;
    eo.ngram_max = ng_max;
    eo.spec_fixed = fixed;
    if (!ids || tern_engine_create(m, &eo, &e)) { fprintf(stderr, "tern: %s\n", ids ? tern_last_error() : "out of memory"); goto done; }
    uint32_t s = 12345;
    for (int i = 0; i < P + maxb + 16; i++) { s = s * 1664525u + 1013904223u; ids[i] = (int32_t)((s >> 8) % (uint32_t)V); }
    int threads = mo.n_threads > 0 ? mo.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    double bytes = (double)tern_model_decode_bytes(m);
    /* Memory bandwidth drifts on a shared machine, so each decode run is
     * compared with a triad measured right before it; the fraction of the
     * ceiling reported is the median over the runs. */
    double best_pre = 1e30, best_dec = 1e30, triads[100], fracs[100], copies[100], cfracs[100];
    int on_gpu = 0;
    for (int r = 0; r < reps; r++) {
        waiter w;
        double tp = 0, td = 0;
        /* On a GPU the ceiling is the device's read bandwidth, measured
         * likewise right before each run, with its copy bandwidth beside
         * it (a second figure, not the ceiling). */
        double copy_bw = 0.0;
        double dev_bw = G ? tern_model_device_bandwidth(m, &copy_bw) : 0.0;
        copies[r] = copy_bw;
        triads[r] = dev_bw > 0 ? dev_bw : G ? tern_stream_triad_gbps(threads > 0 ? threads : 1, (size_t)256 << 20) : 0.0;
        on_gpu = dev_bw > 0;
        if (run(e, ids, P, 1, 1, &w, NULL)) { fprintf(stderr, "tern: %s\n", tern_last_error()); goto done; }
        tp = w.prefill_s;
        if (G) {
            /* G + 1 tokens: the first comes from the one-token prompt's
             * forward, then G decode steps are timed. */
            if (run(e, ids, 1, G + 1, 1, &w, NULL)) { fprintf(stderr, "tern: %s\n", tern_last_error()); goto done; }
            td = w.decode_s;
        }
        fracs[r] = G && triads[r] > 0 ? (G / td) / (triads[r] * 1e9 / bytes) : 0.0;
        cfracs[r] = G && copies[r] > 0 ? (G / td) / (copies[r] * 1e9 / bytes) : 0.0;
        if (tp < best_pre) best_pre = tp;
        if (td < best_dec) best_dec = td;
    }
    double gbps = median(triads, reps), frac = median(fracs, reps);
    double pre_tps = P / best_pre, dec_tps = G ? G / best_dec : 0.0;
    double ceiling = gbps > 0 ? gbps * 1e9 / bytes : 0.0;
    printf("model %s (%s), %.1f MB weights (%s), %.1f MB read per decoded token, kernels %s, load %.2f s\n",
           tern_model_dir(m), tern_model_type(m), tern_model_weight_bytes(m) / 1e6, tern_model_weights_desc(m),
           bytes / 1e6, on_gpu ? "cuda" : tern_cpu_kernels(), load_s);
    printf("prefill %d tokens: %.1f tok/s (%.2f ms) | decode %d tokens: %.2f tok/s (%.3f ms/token) | %s %.1f GB/s -> "
           "ceiling %.2f tok/s (median run at %.1f%% of its own %s's ceiling)\n",
           P, pre_tps, best_pre * 1e3, G, dec_tps, G ? best_dec * 1e3 / G : 0.0, on_gpu ? "device read" : "triad", gbps,
           ceiling, 100.0 * frac, on_gpu ? "read" : "triad");
    double copy_gbps = on_gpu ? median(copies, reps) : 0.0, cfrac = on_gpu ? median(cfracs, reps) : 0.0;
    if (copy_gbps > 0)
        printf("device copy %.1f GB/s (read + write) -> %.2f tok/s; median run at %.1f%% of its own copy's\n", copy_gbps,
               copy_gbps * 1e9 / bytes, 100.0 * cfrac);
    double it1 = 0;
    char bjson[2048] = "";
    size_t bl = 0;
    for (int i = 0; i < n_batches && G; i++) {
        double it = 1e30, tps = 0, steady = 0;
        for (int r = 0; r < reps; r++) {
            double a, t, sd;
            if (batch_step(e, ids, G, batches[i], &a, &t, &sd)) { fprintf(stderr, "tern: %s\n", tern_last_error()); goto done; }
            if (a < it) { it = a; tps = t; }
            if (sd > steady) steady = sd;
        }
        if (i == 0 || batches[i] == 1) it1 = batches[i] == 1 ? it : it1;
        char sd[96] = "no iteration had every row decoding (raise --gen-tokens)", sj[32] = "null";
        if (steady > 0) {
            snprintf(sd, sizeof sd, "%.1f tok/s", steady);
            snprintf(sj, sizeof sj, "%.2f", steady);
        }
        printf("batch %2d: iteration %.2f ms | aggregate %.1f tok/s | all rows decoding: %s\n", batches[i], it * 1e3,
               tps, sd);
        if (it1 > 0) printf("          iteration / B=1 iteration: %.3f\n", it / it1);
        bl += (size_t)snprintf(bjson + bl, sizeof bjson - bl,
                               "%s{\"batch\": %d, \"iteration_ms\": %.3f, \"aggregate_tps\": %.2f, \"steady_tps\": %s}",
                               i ? ", " : "", batches[i], it * 1e3, tps, sj);
        if (bl >= sizeof bjson) bl = sizeof bjson - 1;
    }
    if (json)
        printf("{\"prefill_tps\": %.3f, \"decode_tps\": %.3f, \"prompt_tokens\": %d, \"gen_tokens\": %d, "
               "\"threads\": %d, \"weight_bytes_per_token\": %.0f, \"triad_gbps\": %.3f, \"ceiling_tps\": %.3f, "
               "\"decode_frac_of_ceiling\": %.4f, \"copy_gbps\": %.3f, \"decode_frac_of_copy\": %.4f, \"weights\": \"%s\", "
               "\"load_s\": %.3f, \"batches\": [%s]}\n",
               pre_tps, dec_tps, P, G, threads, bytes, gbps, ceiling, frac, copy_gbps, cfrac, tern_model_weights_desc(m),
               load_s, bjson);
    rc = 0;
done:
    tern_engine_free(e);
    free(ids);
    free(batches);
    tern_model_free(dm);
    tern_model_free(m);
    return rc;
}

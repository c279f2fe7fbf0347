/* tern bench --model DIR [--prompt-tokens 512] [--gen-tokens 128] [--threads N]
 *            [--precision f32|bf16] [--weights panels|mapped] [--reps R] [--json]
 *
 * Prefill: one forward over prompt-tokens synthetic ids on an empty row.
 * Decode: gen-tokens greedy single-token forwards on an empty row (the
 * shape of llama-bench's pp and tg tests). Best of R runs each.
 * Before each run it measures the STREAM-triad bandwidth on the same threads
 * and reports decode speed as a fraction of that run's ceiling (triad GB/s /
 * weight bytes read per token), median over the runs. With --json the last
 * line is one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/stream_triad.h"
#include "cli/cli_util.h"
#include "core/clock.h"
#include "core/threadpool.h"
#include "model/forward.h"
#include "tern/model.h"

static void usage(void)
{
    fprintf(stderr, "usage: tern bench --model DIR [--prompt-tokens N] [--gen-tokens N] [--threads N]\n"
                    "       [--precision f32|bf16] [--weights panels|mapped] [--reps R] [--json]\n");
}

/* Feeds ids through a fresh row in one forward (prefill) and reports the
 * seconds; *kv_out keeps the row when asked. */
static tern_status prefill_once(tern_model *m, const int32_t *ids, int P, double *secs)
{
    tern_kv *kv;
    int row, V = tern_model_vocab_size(m);
    tern_status st = tern_model_kv_create(m, 1, P, 0, 0, &kv);
    if (st) return st;
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits) { tern_kv_free(kv); return tern_error(TERN_E_NOMEM, "out of memory"); }
    if (!(st = tern_kv_row_add(kv, P, &row))) {
        double t0 = tern_now();
        tern_batch b = {1, &row, &P, ids, NULL};
        st = tern_forward(m, kv, &b, logits, NULL);
        *secs = tern_now() - t0;
    }
    free(logits);
    tern_kv_free(kv);
    return st;
}

/* Decodes G tokens greedily on a fresh row that starts from one token, as
 * llama-bench's tg test does; reports the seconds of the G steps. */
static tern_status decode_once(tern_model *m, int32_t first, int G, double *secs)
{
    tern_kv *kv;
    int row, V = tern_model_vocab_size(m), one = 1;
    tern_status st = tern_model_kv_create(m, 1, G + 1, 0, 0, &kv);
    if (st) return st;
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits) { tern_kv_free(kv); return tern_error(TERN_E_NOMEM, "out of memory"); }
    if ((st = tern_kv_row_add(kv, G + 1, &row))) goto done;
    int32_t tok = first;
    double t0 = tern_now();
    for (int i = 0; i < G; i++) {
        tern_batch d = {1, &row, &one, &tok, NULL};
        if ((st = tern_forward(m, kv, &d, logits, NULL))) goto done;
        tok = 0;
        for (int v = 1; v < V; v++) if (logits[v] > logits[tok]) tok = v;
    }
    *secs = tern_now() - t0;
done:
    free(logits);
    tern_kv_free(kv);
    return st;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0.0;
}

int tern_cmd_bench(int argc, char **argv)
{
    const char *model_dir = NULL;
    int P = 512, G = 128, reps = 3, json = 0;
    tern_model_opts mo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--json")) { json = 1; continue; }
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
        else { fprintf(stderr, "tern bench: unknown option %s\n", a); usage(); return 2; }
        if (bad) return 2;
    }
    if (!model_dir) { usage(); return 2; }
    tern_model *m;
    double load_s = tern_now();
    if (tern_model_load(model_dir, &mo, &m)) { fprintf(stderr, "tern: %s\n", tern_last_error()); return 1; }
    load_s = tern_now() - load_s;
    int V = tern_model_vocab_size(m), rc = 1;
    int32_t *ids = malloc((size_t)P * sizeof *ids);
    if (!ids) goto done;
    uint32_t s = 12345;
    for (int i = 0; i < P; i++) { s = s * 1664525u + 1013904223u; ids[i] = (int32_t)((s >> 8) % (uint32_t)V); }
    int threads = mo.n_threads > 0 ? mo.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    tern_pool *pool = NULL;
    if (tern_pool_create(threads > 0 ? threads : 1, &pool)) goto done;
    double bytes = (double)tern_model_decode_bytes(m);
    /* Memory bandwidth drifts on a shared machine, so each decode run is
     * compared with a triad measured right before it; the fraction of the
     * ceiling reported is the median over the runs. */
    double best_pre = 1e30, best_dec = 1e30, triads[100], fracs[100];
    for (int r = 0; r < reps; r++) {
        double tp = 0, td = 0;
        triads[r] = G ? tern_cpu_stream_triad_gbps(pool, (size_t)256 << 20) : 0.0;
        if (prefill_once(m, ids, P, &tp) || (G && decode_once(m, ids[0], G, &td))) {
            fprintf(stderr, "tern: %s\n", tern_last_error());
            tern_pool_free(pool);
            goto done;
        }
        fracs[r] = G && triads[r] > 0 ? (G / td) / (triads[r] * 1e9 / bytes) : 0.0;
        if (tp < best_pre) best_pre = tp;
        if (td < best_dec) best_dec = td;
    }
    tern_pool_free(pool);
    double gbps = median(triads, reps), frac = median(fracs, reps);
    double pre_tps = P / best_pre, dec_tps = G ? G / best_dec : 0.0;
    double ceiling = gbps > 0 ? gbps * 1e9 / bytes : 0.0;
    printf("model %s (%s), %.1f MB weights (%s), %.1f MB read per decoded token, isa %s, load %.2f s\n",
           tern_model_dir(m), tern_model_type(m), tern_model_weight_bytes(m) / 1e6, tern_model_weights_desc(m),
           bytes / 1e6, tern_cpu_isa_name(tern_cpu_isa_active()), load_s);
    printf("prefill %d tokens: %.1f tok/s | decode %d tokens: %.2f tok/s | triad %.1f GB/s -> ceiling %.2f tok/s "
           "(median run at %.1f%% of its own triad's ceiling)\n", P, pre_tps, G, dec_tps, gbps, ceiling, 100.0 * frac);
    if (json)
        printf("{\"prefill_tps\": %.3f, \"decode_tps\": %.3f, \"prompt_tokens\": %d, \"gen_tokens\": %d, "
               "\"threads\": %d, \"weight_bytes_per_token\": %.0f, \"triad_gbps\": %.3f, \"ceiling_tps\": %.3f, "
               "\"decode_frac_of_ceiling\": %.4f, \"weights\": \"%s\", \"load_s\": %.3f}\n",
               pre_tps, dec_tps, P, G, threads, bytes, gbps, ceiling, frac, tern_model_weights_desc(m), load_s);
    rc = 0;
done:
    free(ids);
    tern_model_free(m);
    return rc;
}

/* The cost of a speculative verify window: one forward over K positions of
 * a row (logits at every position, as verify asks) against a single-token
 * step of the same row, at the same KV length. Interleaved (1, K, 1, K, ...)
 * so both see the same machine; each measurement trims the row back, so
 * every forward starts at the prompt's length.
 *
 *   verify_cost --model DIR [--threads 2] [--prompt 512] [--k 2,3,5,9] [--reps 20]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "model/forward.h"
#include "tern/model.h"

static double once(tern_model *m, tern_kv *kv, int row, const int32_t *toks, int k, float *logits)
{
    uint8_t want[64];
    memset(want, 1, sizeof want);
    tern_batch b = {1, &row, &k, toks, want};
    double t0 = tern_now();
    if (tern_forward(m, kv, &b, logits, NULL)) {
        fprintf(stderr, "verify_cost: %s\n", tern_last_error());
        exit(1);
    }
    double t = tern_now() - t0;
    tern_kv_trim(kv, row, k);
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *ks = "2,3,5,9";
    int threads = 2, P = 512, reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) P = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k")) ks = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (!dir || P < 1 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: verify_cost --model DIR [--threads 2] [--prompt 512] [--k 2,3,5,9] [--reps 20]\n");
        return 2;
    }
    tern_model_opts mo = {.n_threads = threads};
    tern_model *m;
    if (tern_model_load(dir, &mo, &m)) {
        fprintf(stderr, "verify_cost: %s\n", tern_last_error());
        return 1;
    }
    int V = tern_model_vocab_size(m), row;
    tern_kv *kv;
    if (tern_model_kv_create(m, 1, P + 64, 0, 0, &kv) || tern_kv_row_add(kv, P + 64, &row)) {
        fprintf(stderr, "verify_cost: %s\n", tern_last_error());
        return 1;
    }
    int32_t *ids = malloc((size_t)(P + 64) * sizeof *ids);
    float *logits = malloc((size_t)64 * V * sizeof *logits);
    uint32_t s = 99;
    for (int i = 0; i < P + 64; i++) { s = s * 1664525u + 1013904223u; ids[i] = (int32_t)((s >> 8) % (uint32_t)V); }
    uint8_t *want = calloc((size_t)P, 1);
    want[P - 1] = 1;
    tern_batch pb = {1, &row, &P, ids, want};
    if (tern_forward(m, kv, &pb, logits, NULL)) {
        fprintf(stderr, "verify_cost: %s\n", tern_last_error());
        return 1;
    }
    printf("model %s, %d threads, KV at %d positions, %d reps (median ms)\n", dir, threads, P, reps);
    for (const char *p = ks; *p;) {
        int k = atoi(p);
        if (k < 1 || k > 64) break;
        double *t1 = malloc((size_t)reps * sizeof *t1), *tk = malloc((size_t)reps * sizeof *tk);
        once(m, kv, row, ids + P, 1, logits);   /* warm */
        once(m, kv, row, ids + P, k, logits);
        for (int r = 0; r < reps; r++) {
            t1[r] = once(m, kv, row, ids + P, 1, logits);
            tk[r] = once(m, kv, row, ids + P, k, logits);
        }
        qsort(t1, (size_t)reps, sizeof *t1, cmp);
        qsort(tk, (size_t)reps, sizeof *tk, cmp);
        double a = t1[reps / 2], b = tk[reps / 2];
        printf("K=%2d: step %.3f ms, window %.3f ms, window / step %.3f\n", k, a * 1e3, b * 1e3, b / a);
        free(t1);
        free(tk);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    free(ids);
    free(logits);
    free(want);
    tern_kv_free(kv);
    tern_model_free(m);
    return 0;
}

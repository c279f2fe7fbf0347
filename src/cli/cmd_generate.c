/* tern generate --model DIR (--prompt TEXT | --ids 1,2,3) [--chat] [--max-tokens N]
 *     [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed S]
 *     [--repetition-penalty P] [--threads N] [--precision f32|bf16] [--weights panels|mapped] [--ids-out] [--ignore-eos]
 *     [--draft-kind none|ngram|model] [--draft-model DIR] [--num-draft-tokens N] [--ngram-min N]
 *     [--ngram-max N] [--stats]
 *
 * Streams the generated text to stdout (or, with --ids-out, prints only the
 * generated ids comma-separated). --chat renders --prompt as one user message
 * through the model's chat template. Timing goes to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/prompt.h"
#include "tern/engine.h"
#include "tern/generate.h"
#include "tern/model.h"
#include "tern/tokenizer.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: tern generate --model DIR (--prompt TEXT | --ids 1,2,3) [--chat] [--max-tokens N]\n"
            "       [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed S]\n"
            "       [--repetition-penalty P] [--threads N] [--precision f32|bf16] [--weights panels|mapped] [--ids-out] [--ignore-eos]\n"
            "       [--draft-kind none|ngram|model] [--draft-model DIR] [--num-draft-tokens N] [--ngram-min N]\n"
            "       [--ngram-max N] [--draft-fixed] [--stats]\n");
}

typedef struct {
    int ids_out, n;
    tern_detok *detok;
} gen_out;

static int on_token(void *user, const tern_token_event *ev)
{
    gen_out *g = user;
    if (g->ids_out) {
        printf(g->n++ ? ",%d" : "%d", ev->token);
    } else if (g->detok) {
        char *delta = NULL;
        if (tern_detok_push(g->detok, ev->token, &delta) == TERN_OK) fputs(delta, stdout);
        free(delta);
    }
    fflush(stdout);
    return 0;
}

int tern_cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL, *ids_s = NULL, *draft_dir = NULL;
    int chat = 0, ids_out = 0, want_stats = 0, kind = -1;
    tern_model_opts mo = {0};
    tern_generate_opts go;
    tern_generate_opts_default(&go);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--chat")) { chat = 1; continue; }
        if (!strcmp(a, "--ids-out")) { ids_out = 1; continue; }
        if (!strcmp(a, "--ignore-eos")) { go.ignore_eos = 1; continue; }
        if (!strcmp(a, "--stats")) { want_stats = 1; continue; }
        if (!strcmp(a, "--draft-fixed")) { go.spec_fixed = 1; continue; }
        if (!strcmp(a, "--help")) { usage(); return 0; }
        if (!(v = cli_value(argc, argv, i))) return 2;
        i++;
        int bad = 0;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--ids")) ids_s = v;
        else if (!strcmp(a, "--max-tokens")) bad = cli_int(a, v, 1, 1 << 24, &go.max_tokens);
        else if (!strcmp(a, "--temperature") || !strcmp(a, "--temp")) bad = cli_float(a, v, &go.sampling.temperature);
        else if (!strcmp(a, "--top-p")) bad = cli_float(a, v, &go.sampling.top_p);
        else if (!strcmp(a, "--top-k")) bad = cli_int(a, v, 0, 1 << 24, &go.sampling.top_k);
        else if (!strcmp(a, "--min-p")) bad = cli_float(a, v, &go.sampling.min_p);
        else if (!strcmp(a, "--repetition-penalty")) bad = cli_float(a, v, &go.sampling.repetition_penalty);
        else if (!strcmp(a, "--seed")) bad = cli_u64(a, v, &go.sampling.seed);
        else if (!strcmp(a, "--threads")) bad = cli_int(a, v, 1, 1024, &mo.n_threads);
        else if (!strcmp(a, "--prefill-chunk")) bad = cli_int(a, v, 1, 1 << 20, &go.prefill_chunk);
        else if (!strcmp(a, "--precision")) bad = cli_precision(a, v, &mo.precision);
        else if (!strcmp(a, "--weights")) bad = cli_weights(a, v, &mo.weights);
        else if (!strcmp(a, "--draft-kind")) bad = cli_draft_kind(a, v, &kind);
        else if (!strcmp(a, "--draft-model")) draft_dir = v;
        else if (!strcmp(a, "--num-draft-tokens")) bad = cli_int(a, v, 1, 15, &go.num_draft_tokens);
        else if (!strcmp(a, "--ngram-min")) bad = cli_int(a, v, 1, 64, &go.ngram_min);
        else if (!strcmp(a, "--ngram-max")) bad = cli_int(a, v, 1, 64, &go.ngram_max);
        else { fprintf(stderr, "tern generate: unknown option %s\n", a); usage(); return 2; }
        if (bad) return 2;
    }
    if (!model_dir || (!prompt == !ids_s)) { usage(); return 2; }
    if (chat && !prompt) { fprintf(stderr, "tern generate: --chat needs --prompt\n"); return 2; }
    if (cli_draft_resolve("generate", kind, draft_dir, &go.draft_kind)) return 2;

    int rc = 1, n = 0;
    int32_t *ids = NULL;
    tern_model *m = NULL, *dm = NULL;
    tern_tokenizer *tok = NULL;
    gen_out out = {ids_out, 0, NULL};
    if (ids_s && cli_parse_ids(ids_s, &ids, &n)) return 2;
    if (tern_model_load(model_dir, &mo, &m)) goto fail;
    if (draft_dir && tern_draft_model_load(draft_dir, m, &mo, &dm)) goto fail;
    go.draft_model = dm;
    /* The tokenizer is needed for text in or text out. */
    if (prompt || !ids_out) {
        if (tern_tokenizer_load(tern_model_dir(m), &tok)) goto fail;
        if (!ids_out && tern_detok_create(tok, 1, &out.detok)) goto fail;
    }
    if (prompt && cli_prompt_ids(tern_model_dir(m), tok, prompt, chat, &ids, &n)) goto fail;
    tern_generate_stats stats;
    if (tok) {
        int32_t eos = tern_tokenizer_eos_id(tok);
        if (eos >= 0) { go.extra_eos = &eos; go.n_extra_eos = 1; }
        if (tern_generate(m, ids, n, &go, on_token, &out, &stats)) goto fail;
        if (out.detok) {
            char *rest = NULL;
            if (tern_detok_flush(out.detok, &rest) == TERN_OK) fputs(rest, stdout);
            free(rest);
        }
        fputc('\n', stdout);
        fflush(stdout);
        fprintf(stderr, "prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s\n", stats.prompt_tokens,
                stats.prompt_tokens / (stats.prefill_seconds > 0 ? stats.prefill_seconds : 1e-9), stats.generated_tokens,
                stats.generated_tokens > 1 ? (stats.generated_tokens - 1) / stats.decode_seconds : 0.0);
    } else {
        if (tern_generate(m, ids, n, &go, on_token, &out, &stats)) goto fail;
        fputc('\n', stdout);
    }
    if (want_stats)
        fprintf(stderr,
                "{\"prompt_tokens\": %d, \"generated_tokens\": %d, \"prefill_tps\": %.3f, \"decode_tps\": %.3f, "
                "\"drafted\": %ld, \"accepted\": %ld, \"target_calls\": %ld}\n",
                stats.prompt_tokens, stats.generated_tokens,
                stats.prefill_seconds > 0 ? stats.prompt_tokens / stats.prefill_seconds : 0.0,
                stats.generated_tokens > 1 && stats.decode_seconds > 0 ? (stats.generated_tokens - 1) / stats.decode_seconds : 0.0,
                stats.drafted, stats.accepted, stats.target_calls);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tern: %s\n", tern_last_error());
done:
    tern_detok_free(out.detok);
    tern_tokenizer_free(tok);
    tern_model_free(dm);
    tern_model_free(m);
    free(ids);
    return rc;
}

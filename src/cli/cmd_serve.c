/* tern serve --model DIR [--host 127.0.0.1] [--port 8080] [--temp 0.0] [--top-p 1.0]
 *     [--top-k 0] [--min-p 0.0] [--max-tokens 512] [--chat-template-args JSON]
 *     [--prefill-step-size 2048] [--log-level INFO] [--max-body-bytes 8388608]
 *     [--queue-size 64] [--threads N] [--precision f32|bf16] [--weights panels|mapped]
 *     [--max-batch 16] [--prefill-interleave 256] [--memory-budget BYTES|NGB] [--prompt-cache-bytes BYTES|0]
 *     [--prompt-cache-dir DIR] [--prompt-cache-disk-bytes BYTES]
 *
 * An OpenAI / Anthropic compatible HTTP server with mlx_lm.server's flags and
 * defaults. mlx_lm.server flags that change nothing here are accepted with a
 * notice; ones that ask for a missing feature are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "tern/engine.h"
#include "tern/model.h"
#include "tern/server.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: tern serve --model DIR|ORG/NAME[@REV] [--host 127.0.0.1] [--port 8080] [--temp 0.0] [--top-p 1.0]\n"
            "       [--top-k 0] [--min-p 0.0] [--max-tokens 512] [--chat-template-args JSON]\n"
            "       [--prefill-step-size 2048] [--log-level DEBUG|INFO|WARNING|ERROR|CRITICAL]\n"
            "       [--max-body-bytes 8388608] [--queue-size 64] [--threads N] [--precision f32|bf16] [--weights panels|mapped]\n"
            "       [--max-batch 16] [--prefill-interleave 256] [--memory-budget BYTES|NGB] [--prompt-cache-bytes BYTES|0]\n"
            "       [--prompt-cache-dir DIR] [--prompt-cache-disk-bytes BYTES]\n"
            "       [--draft-kind none|ngram|model] [--draft-model DIR] [--num-draft-tokens 4] [--ngram-min 1]\n"
            "       [--ngram-max 4] [--draft-fixed]\n");
}

static int log_level(const char *v)
{
    static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(v, names[i])) return i > 3 ? 3 : i;
    return -1;
}

int tern_cmd_serve(int argc, char **argv)
{
    tern_server_opts o;
    tern_server_opts_default(&o);
    int kind = -1;
    static const char *const ignored_valued[] = {"--allowed-origins", "--decode-concurrency", "--prompt-concurrency",
                                                 "--prompt-cache-size",
                                                 NULL};
    static const char *const ignored_flags[] = {"--trust-remote-code", "--use-default-chat-template", "--pipeline", NULL};
    static const char *const refused[] = {"--adapter-path", "--chat-template", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        if (!strcmp(a, "--draft-fixed")) { o.spec_fixed = 1; continue; }
        int skip = 0;
        for (int k = 0; ignored_flags[k]; k++)
            if (!strcmp(a, ignored_flags[k])) skip = 1;
        if (skip) { fprintf(stderr, "tern serve: %s has no effect here\n", a); continue; }
        if (!(v = cli_value(argc, argv, i))) return 2;
        i++;
        for (int k = 0; refused[k]; k++)
            if (!strcmp(a, refused[k])) { fprintf(stderr, "tern serve: %s is not supported yet\n", a); return 2; }
        for (int k = 0; ignored_valued[k]; k++)
            if (!strcmp(a, ignored_valued[k])) skip = 1;
        if (skip) { fprintf(stderr, "tern serve: %s has no effect here\n", a); continue; }
        int bad = 0, big = 0;
        if (!strcmp(a, "--model")) o.model_dir = v;
        else if (!strcmp(a, "--host")) o.host = v;
        else if (!strcmp(a, "--port")) bad = cli_int(a, v, 0, 65535, &o.port);
        else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) bad = cli_float(a, v, &o.temperature);
        else if (!strcmp(a, "--top-p")) bad = cli_float(a, v, &o.top_p);
        else if (!strcmp(a, "--top-k")) bad = cli_int(a, v, 0, 1 << 30, &o.top_k);
        else if (!strcmp(a, "--min-p")) bad = cli_float(a, v, &o.min_p);
        else if (!strcmp(a, "--max-tokens")) bad = cli_int(a, v, 0, 1 << 30, &o.max_tokens);
        else if (!strcmp(a, "--chat-template-args")) o.chat_template_args = v;
        else if (!strcmp(a, "--prefill-step-size")) bad = cli_int(a, v, 1, 1 << 24, &o.prefill_step);
        else if (!strcmp(a, "--queue-size")) bad = cli_int(a, v, 1, 1 << 20, &o.queue_size);
        else if (!strcmp(a, "--max-batch")) bad = cli_int(a, v, 1, 1024, &o.max_batch);
        else if (!strcmp(a, "--prefill-interleave")) bad = cli_int(a, v, 1, 1 << 24, &o.prefill_interleave);
        else if (!strcmp(a, "--memory-budget")) bad = cli_bytes(a, v, &o.memory_budget);
        else if (!strcmp(a, "--prompt-cache-dir")) o.prompt_cache_dir = v;
        else if (!strcmp(a, "--draft-kind")) bad = cli_draft_kind(a, v, &kind);
        else if (!strcmp(a, "--draft-model")) o.draft_model_dir = v;
        else if (!strcmp(a, "--num-draft-tokens")) bad = cli_int(a, v, 1, 15, &o.num_draft_tokens);
        else if (!strcmp(a, "--ngram-min")) bad = cli_int(a, v, 1, 64, &o.ngram_min);
        else if (!strcmp(a, "--ngram-max")) bad = cli_int(a, v, 1, 64, &o.ngram_max);
        else if (!strcmp(a, "--prompt-cache-disk-bytes")) bad = cli_bytes(a, v, &o.prompt_cache_disk_bytes);
        else if (!strcmp(a, "--prompt-cache-bytes")) {
            if (!strcmp(v, "0")) o.no_prompt_cache = 1;
            else bad = cli_bytes(a, v, &o.prompt_cache_bytes);
        }
        else if (!strcmp(a, "--threads")) bad = cli_int(a, v, 1, 1024, &o.n_threads);
        else if (!strcmp(a, "--max-body-bytes")) { bad = cli_int(a, v, 1024, 1 << 30, &big); o.max_body = (size_t)big; }
        else if (!strcmp(a, "--precision")) {
            tern_precision p;
            if ((bad = cli_precision(a, v, &p)) == 0) o.precision = (int)p;
        } else if (!strcmp(a, "--weights")) {
            tern_weights_mode w;
            if ((bad = cli_weights(a, v, &w)) == 0) o.weights = (int)w;
        } else if (!strcmp(a, "--log-level")) {
            o.log_level = log_level(v);
            if (o.log_level < 0) { fprintf(stderr, "tern serve: unknown --log-level %s\n", v); return 2; }
        } else { fprintf(stderr, "tern serve: unknown option %s\n", a); usage(); return 2; }
        if (bad) return 2;
    }
    if (!o.model_dir) { usage(); return 2; }
    if (cli_draft_resolve("serve", kind, o.draft_model_dir, &o.draft_kind)) return 2;
    if (o.temperature < 0 || o.top_p < 0 || o.top_p > 1 || o.min_p < 0 || o.min_p > 1) {
        fprintf(stderr, "tern serve: --temp must be >= 0, --top-p and --min-p in [0, 1]\n");
        return 2;
    }
    if (tern_server_run(&o) != TERN_OK) {
        fprintf(stderr, "tern serve: %s\n", tern_last_error());
        return 1;
    }
    return 0;
}

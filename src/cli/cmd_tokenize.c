/* tern tokenize: text to token ids with a model's tokenizer.json.
 *
 *   tern tokenize --model DIR --text STR [--no-special]   prints id,id,...
 *   tern tokenize --model DIR --jsonl [--time]            stdin {"text": ..., "add_special": bool}
 *                                                         -> stdout {"ids": [...]} per line */
#include <jansson.h>
#include <stdio.h>

#include "cli/cli_util.h"
#include "tern/model.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_util.h"
#include "tern/system.h"
#include "tern/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tern tokenize --model DIR (--text STR [--no-special] | --jsonl [--time])\n"
               "  --model DIR   directory with tokenizer.json (and tokenizer_config.json)\n"
               "  --text STR    prints the ids of STR, comma-separated\n"
               "  --no-special  do not add the post-processor's special tokens (BOS...)\n"
               "  --jsonl       reads {\"text\": ..., \"add_special\": bool} lines from stdin and\n"
               "                writes {\"ids\": [...]} lines ({\"error\": ...} for a bad line)\n"
               "  --time        with --jsonl: print the encode time to stderr\n");
}

static void print_error_line(const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    printf("%s\n", s ? s : "{\"error\":\"out of memory\"}");
    free(s);
    json_decref(o);
}

static int run_jsonl(const tern_tokenizer *t, int timing)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    double spent = 0;
    size_t bytes = 0;
    char *out = NULL;
    size_t out_cap = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t e;
        json_t *o = json_loadb(line, (size_t)n, JSON_ALLOW_NUL, &e);
        json_t *txt = json_object_get(o, "text"), *as = json_object_get(o, "add_special");
        if (!json_is_string(txt)) {
            print_error_line(o ? "line needs a \"text\" string" : e.text);
            json_decref(o);
            rc = 1;
            continue;
        }
        int32_t *ids = NULL;
        int nid = 0;
        double t0 = tern_now();
        tern_status st = tern_tokenizer_encode(t, json_string_value(txt), json_string_length(txt),
                                               json_is_boolean(as) ? json_is_true(as) : 1, &ids, &nid);
        spent += tern_now() - t0;
        bytes += json_string_length(txt);
        json_decref(o);
        if (st) { print_error_line(tern_last_error()); rc = 1; continue; }
        size_t need = (size_t)nid * 12 + 16;
        if (need > out_cap) {
            char *p = realloc(out, need);
            if (!p) { free(ids); print_error_line("out of memory"); rc = 1; continue; }
            out = p; out_cap = need;
        }
        size_t k = (size_t)sprintf(out, "{\"ids\": [");
        for (int i = 0; i < nid; i++) k += (size_t)sprintf(out + k, i ? ", %d" : "%d", ids[i]);
        memcpy(out + k, "]}\n", 4);
        fputs(out, stdout);
        free(ids);
    }
    free(out);
    free(line);
    if (timing) fprintf(stderr, "encode: %.6f s for %zu bytes\n", spent, bytes);
    return rc;
}

int tern_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL;
    int jsonl = 0, special = 1, timing = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "--jsonl")) jsonl = 1;
        else if (!strcmp(argv[i], "--no-special")) special = 0;
        else if (!strcmp(argv[i], "--time")) timing = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else { fprintf(stderr, "tern tokenize: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    if (!model || (!text && !jsonl) || (text && jsonl)) { usage(stderr); return 2; }
    tern_tokenizer *t;
    double t0 = tern_now();
    char tdir[4096];
    int ttemp = 0;
    tern_status tst = tern_model_text_dir_open(model, tdir, sizeof tdir, &ttemp);
    if (!tst) tst = tern_tokenizer_load(tdir, &t);
    tern_model_text_dir_close(tdir, ttemp);
    if (tst) {
        fprintf(stderr, "tern tokenize: %s\n", tern_last_error());
        return 1;
    }
    if (timing) fprintf(stderr, "load: %.6f s\n", tern_now() - t0);
    int rc = 0;
    if (jsonl) rc = run_jsonl(t, timing);
    else {
        int32_t *ids;
        int n;
        if (tern_tokenizer_encode(t, text, strlen(text), special, &ids, &n)) {
            fprintf(stderr, "tern tokenize: %s\n", tern_last_error());
            rc = 1;
        } else {
            for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
            printf("\n");
            free(ids);
        }
    }
    tern_tokenizer_free(t);
    return rc;
}

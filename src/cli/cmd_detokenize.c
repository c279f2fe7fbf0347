/* tern detokenize: token ids to text with a model's tokenizer.json.
 *
 *   tern detokenize --model DIR --ids 1,2,3 [--skip-special]   prints the text
 *   tern detokenize --model DIR --jsonl                        stdin {"ids": [...], "skip_special": bool}
 *       -> stdout {"text": full decode, "stream": concatenated streaming decode,
 *                  "stream_valid": every streamed piece was complete UTF-8} */
#include <jansson.h>
#include <stdio.h>

#include "cli/cli_util.h"
#include "tern/model.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "tern/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tern detokenize --model DIR (--ids 1,2,3 [--skip-special] | --jsonl)\n"
               "  --model DIR     directory with tokenizer.json (and tokenizer_config.json)\n"
               "  --ids LIST      comma-separated token ids; prints their text\n"
               "  --skip-special  leave special tokens out of the text\n"
               "  --jsonl         reads {\"ids\": [...], \"skip_special\": bool} lines from stdin and writes\n"
               "                  {\"text\": ..., \"stream\": ..., \"stream_valid\": bool} lines\n");
}

static int parse_ids(const char *s, int32_t **ids, int *n)
{
    int cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return -1;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 0x7FFFFFFF) return -1;
        if (*n == cap) {
            int32_t *p = realloc(*ids, (size_t)(cap *= 2) * sizeof *p);
            if (!p) return -1;
            *ids = p;
        }
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    return 0;
}

/* Valid UTF-8 check for the streamed pieces (json_stringn refuses invalid). */
static int piece_valid(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

static int stream_decode(const tern_tokenizer *t, const int32_t *ids, int n, int skip, char **out, size_t *olen,
                         int *valid)
{
    tern_detok *d;
    if (tern_detok_create(t, skip, &d)) return -1;
    size_t len = 0, cap = 64;
    char *acc = malloc(cap);
    int rc = acc ? 0 : -1;
    *valid = 1;
    for (int i = 0; i <= n && !rc; i++) {
        char *delta;
        size_t k;
        if ((i < n ? tern_detok_push_n(d, ids[i], &delta, &k) : tern_detok_flush_n(d, &delta, &k))) { rc = -1; break; }
        if (!piece_valid(delta, k)) *valid = 0;
        if (len + k + 1 > cap) {
            while (len + k + 1 > cap) cap *= 2;
            char *p = realloc(acc, cap);
            if (!p) { free(delta); rc = -1; break; }
            acc = p;
        }
        memcpy(acc + len, delta, k);
        len += k;
        free(delta);
    }
    tern_detok_free(d);
    if (rc) { free(acc); return rc; }
    acc[len] = 0;
    *out = acc;
    *olen = len;
    return 0;
}

static int run_jsonl(const tern_tokenizer *t)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t e;
        json_t *o = json_loadb(line, (size_t)n, 0, &e), *arr = json_object_get(o, "ids");
        int skip = json_is_true(json_object_get(o, "skip_special"));
        size_t m = json_array_size(arr);
        int32_t *ids = malloc((m + 1) * sizeof *ids);
        int ok = json_is_array(arr) && ids;
        for (size_t i = 0; ok && i < m; i++) {
            json_t *v = json_array_get(arr, i);
            ok = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 0x7FFFFFFF;
            if (ok) ids[i] = (int32_t)json_integer_value(v);
        }
        json_decref(o);
        char *text = NULL, *stream = NULL;
        size_t tlen = 0, slen = 0;
        int valid = 0;
        json_t *r = NULL;
        if (!ok) r = json_pack("{s:s}", "error", "line needs an \"ids\" array of token ids");
        else if (tern_tokenizer_decode_n(t, ids, (int)m, skip, &text, &tlen) ||
                 stream_decode(t, ids, (int)m, skip, &stream, &slen, &valid))
            r = json_pack("{s:s}", "error", tern_last_error());
        else
            r = json_pack("{s:s%,s:s%,s:b}", "text", text, tlen, "stream", stream, slen, "stream_valid", valid);
        char *s = r ? json_dumps(r, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        printf("%s\n", s ? s : "{\"error\":\"cannot encode the result as JSON\"}");
        if (!s || !ok) rc = 1;
        free(s); json_decref(r); free(text); free(stream); free(ids);
    }
    free(line);
    return rc;
}

int tern_cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL, *list = NULL;
    int skip = 0, jsonl = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "--skip-special")) skip = 1;
        else if (!strcmp(argv[i], "--jsonl")) jsonl = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else { fprintf(stderr, "tern detokenize: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    if (!model || (!list && !jsonl) || (list && jsonl)) { usage(stderr); return 2; }
    int32_t *ids = NULL;
    int n = 0;
    if (list && parse_ids(list, &ids, &n)) {
        free(ids);
        fprintf(stderr, "tern detokenize: --ids must be comma-separated non-negative integers\n");
        return 2;
    }
    tern_tokenizer *t;
    char tdir[4096];
    int ttemp = 0;
    tern_status tst = tern_model_text_dir_open(model, tdir, sizeof tdir, &ttemp);
    if (!tst) tst = tern_tokenizer_load(tdir, &t);
    tern_model_text_dir_close(tdir, ttemp);
    if (tst) {
        fprintf(stderr, "tern detokenize: %s\n", tern_last_error());
        free(ids);
        return 1;
    }
    int rc = 0;
    if (jsonl) rc = run_jsonl(t);
    else {
        char *text;
        size_t len;
        if (tern_tokenizer_decode_n(t, ids, n, skip, &text, &len)) {
            fprintf(stderr, "tern detokenize: %s\n", tern_last_error());
            rc = 1;
        } else {
            fwrite(text, 1, len, stdout);
            if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
            free(text);
        }
    }
    free(ids);
    tern_tokenizer_free(t);
    return rc;
}

#include "cli/cli_util.h"

#include "io/gguf.h"
#include "model/gguf_tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_ids(const char *s, int32_t **ids, int *n)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *a = malloc(cap * sizeof *a);
    if (!a) return -1;
    int k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "tern: --ids: '%s' is not a comma-separated list of token ids\n", s);
            free(a);
            return -1;
        }
        a[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!k) {
        fprintf(stderr, "tern: --ids: empty list\n");
        free(a);
        return -1;
    }
    *ids = a;
    *n = k;
    return 0;
}

int cli_int(const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "tern: %s: '%s' is not an integer in [%ld, %ld]\n", opt, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int cli_u64(const char *opt, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        fprintf(stderr, "tern: %s: '%s' is not a non-negative integer\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_float(const char *opt, const char *v, float *out)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (end == v || *end || errno) {
        fprintf(stderr, "tern: %s: '%s' is not a number\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

const char *cli_value(int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "tern: option %s needs a value\n", argv[i]);
        return NULL;
    }
    return argv[i + 1];
}


int cli_precision(const char *opt, const char *v, tern_precision *out)
{
    if (!strcmp(v, "f32")) *out = TERN_PRECISION_F32;
    else if (!strcmp(v, "bf16")) *out = TERN_PRECISION_BF16;
    else {
        fprintf(stderr, "tern: %s must be f32 or bf16\n", opt);
        return -1;
    }
    return 0;
}

int cli_weights(const char *opt, const char *v, tern_weights_mode *out)
{
    if (!strcmp(v, "panels")) *out = TERN_WEIGHTS_PANELS;
    else if (!strcmp(v, "mapped")) *out = TERN_WEIGHTS_MAPPED;
    else {
        fprintf(stderr, "tern: %s must be panels or mapped\n", opt);
        return -1;
    }
    return 0;
}

tern_status cli_text_dir_open(const char *model, char *dir, size_t cap, int *temp)
{
    size_t n = strlen(model);
    *temp = 0;
    if (n <= 5 || strcmp(model + n - 5, ".gguf")) {
        snprintf(dir, cap, "%s", model);
        return TERN_OK;
    }
    tern_gguf *g;
    tern_status st = tern_gguf_open(model, &g);
    if (st) return st;
    st = tern_gguf_write_text_files(g, dir, cap);
    tern_gguf_close(g);
    *temp = st == TERN_OK;
    return st;
}

void cli_text_dir_close(const char *dir, int temp)
{
    if (temp) tern_gguf_remove_text_files(dir);
}

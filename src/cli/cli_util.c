#include "cli/cli_util.h"
#include "tern/engine.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>


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

int cli_draft_kind(const char *opt, const char *v, int *kind)
{
    if (!strcmp(v, "none")) *kind = TERN_DRAFT_NONE;
    else if (!strcmp(v, "ngram")) *kind = TERN_DRAFT_NGRAM;
    else if (!strcmp(v, "model")) *kind = TERN_DRAFT_MODEL;
    else {
        fprintf(stderr, "tern: %s must be none, ngram or model\n", opt);
        return -1;
    }
    return 0;
}

int cli_draft_resolve(const char *cmd, int given, const char *draft_model, int *kind)
{
    if (draft_model && given < 0) given = TERN_DRAFT_MODEL;
    if (given < 0) given = TERN_DRAFT_NONE;
    if (given == TERN_DRAFT_MODEL && !draft_model) {
        fprintf(stderr, "tern %s: --draft-kind model needs --draft-model DIR\n", cmd);
        return -1;
    }
    if (given != TERN_DRAFT_MODEL && draft_model) {
        fprintf(stderr, "tern %s: --draft-model goes with --draft-kind model, not another kind\n", cmd);
        return -1;
    }
    *kind = given;
    return 0;
}

int cli_bytes(const char *opt, const char *v, size_t *out)
{
    char *end;
    double x = strtod(v, &end);
    double mul = 1;
    if (!strcasecmp(end, "") || !strcasecmp(end, "b")) mul = 1;
    else if (!strcasecmp(end, "k") || !strcasecmp(end, "kb")) mul = 1e3;
    else if (!strcasecmp(end, "m") || !strcasecmp(end, "mb")) mul = 1e6;
    else if (!strcasecmp(end, "g") || !strcasecmp(end, "gb")) mul = 1e9;
    else if (!strcasecmp(end, "kib")) mul = 1024.0;
    else if (!strcasecmp(end, "mib")) mul = 1024.0 * 1024;
    else if (!strcasecmp(end, "gib")) mul = 1024.0 * 1024 * 1024;
    else mul = -1;
    if (end == v || mul < 0 || !(x > 0) || x * mul > 1e15) {
        fprintf(stderr, "tern: %s wants a positive byte count such as 4GB or 2000000000, not '%s'\n", opt, v);
        return -1;
    }
    *out = (size_t)(x * mul);
    return 0;
}

/* tern logits --model DIR --ids 1,2,3 [--all] --out FILE [--threads N] [--precision f32|bf16] [--weights panels|mapped]
 * Writes float32 little-endian logits: [T, vocab] with --all, else [1, vocab]
 * for the last position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "tern/model.h"

static void usage(void)
{
    fprintf(stderr, "usage: tern logits --model DIR --ids 1,2,3 [--all] --out FILE [--threads N] "
                    "[--precision f32|bf16] [--weights panels|mapped]\n");
}

int tern_cmd_logits(int argc, char **argv)
{
    const char *model_dir = NULL, *ids_s = NULL, *out_path = NULL;
    int all = 0;
    tern_model_opts mo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--all")) { all = 1; continue; }
        if (!strcmp(a, "--help")) { usage(); return 0; }
        if (!(v = cli_value(argc, argv, i))) return 2;
        i++;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--ids")) ids_s = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--threads")) { if (cli_int(a, v, 1, 1024, &mo.n_threads)) return 2; }
        else if (!strcmp(a, "--precision")) { if (cli_precision(a, v, &mo.precision)) return 2; }
        else if (!strcmp(a, "--weights")) { if (cli_weights(a, v, &mo.weights)) return 2; }
        else { fprintf(stderr, "tern logits: unknown option %s\n", a); usage(); return 2; }
    }
    if (!model_dir || !ids_s || !out_path) { usage(); return 2; }
    int32_t *ids;
    int n;
    if (cli_parse_ids(ids_s, &ids, &n)) return 2;
    tern_model *m;
    if (tern_model_load(model_dir, &mo, &m)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        free(ids);
        return 1;
    }
    int V = tern_model_vocab_size(m), rc = 1;
    float *logits = malloc((size_t)(all ? n : 1) * V * sizeof(float));
    FILE *f = NULL;
    if (!logits) { fprintf(stderr, "tern: out of memory\n"); goto done; }
    if (tern_model_logits(m, ids, n, all, logits)) { fprintf(stderr, "tern: %s\n", tern_last_error()); goto done; }
    f = fopen(out_path, "wb");
    size_t cnt = (size_t)(all ? n : 1) * V;
    if (!f || fwrite(logits, sizeof(float), cnt, f) != cnt) { fprintf(stderr, "tern: cannot write %s\n", out_path); goto done; }
    rc = 0;
done:
    if (f && fclose(f) && !rc) { fprintf(stderr, "tern: cannot write %s\n", out_path); rc = 1; }
    free(logits);
    free(ids);
    tern_model_free(m);
    return rc;
}

/* tern_model_text_dir_open / _close (tern/model.h): where a model's
 * tokenizer and chat template files are, for the commands that need only
 * those. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io/gguf.h"
#include "model/gguf_tok.h"
#include "tern/model.h"

static int text_dir(const char *spec, char *out, size_t cap)
{
    struct stat st;
    char snaps[4096];
    snprintf(snaps, sizeof snaps, "%s/snapshots", spec);
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode) && stat(snaps, &st) != 0) {
        snprintf(out, cap, "%s", spec);
        return 0;
    }
    char org[128], name[128], rev[128];
    int dir = stat(spec, &st) == 0 && S_ISDIR(st.st_mode);
    if (dir || (spec[0] != '/' && spec[0] != '.' && tern_model_repo_id_parse(spec, org, name, rev, sizeof org)))
        return tern_model_dir_resolve(spec, out, cap) == TERN_OK ? 0 : -1;
    /* Anything else is read as given, so the loader names the file it missed. */
    snprintf(out, cap, "%s", spec);
    return 0;
}

tern_status tern_model_text_dir_open(const char *model, char *dir, size_t cap, int *temp)
{
    size_t n = strlen(model);
    *temp = 0;
    if (n <= 5 || strcmp(model + n - 5, ".gguf"))
        return text_dir(model, dir, cap) ? TERN_E_IO : TERN_OK;   /* the message names the lookup */
    tern_gguf *g;
    tern_status st = tern_gguf_open(model, &g);
    if (st) return st;
    st = tern_gguf_write_text_files(g, dir, cap);
    tern_gguf_close(g);
    *temp = st == TERN_OK;
    return st;
}

void tern_model_text_dir_close(const char *dir, int temp)
{
    if (temp) tern_gguf_remove_text_files(dir);
}

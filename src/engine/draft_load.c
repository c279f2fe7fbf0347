/* Loading a draft model for a target (tern/engine.h): on the target's
 * execution context, and only when both speak one tokenizer. */
#include <string.h>

#include "model/forward.h"
#include "tern/engine.h"
#include "tern/tokenizer.h"

static tern_status load_tok(const char *model, tern_tokenizer **out)
{
    char dir[4096];
    int temp = 0;
    tern_status st = tern_model_text_dir_open(model, dir, sizeof dir, &temp);
    if (st) return st;
    st = tern_tokenizer_load(dir, out);
    tern_model_text_dir_close(dir, temp);
    return st;
}

/* TERN_OK when every id of the draft's vocabulary means the same piece (and
 * is special or not alike) in the target's tokenizer. */
static tern_status same_tokenizer(const char *target, const char *draft)
{
    tern_tokenizer *a = NULL, *b = NULL;
    tern_status st = load_tok(target, &a);
    if (!st) st = load_tok(draft, &b);
    int nb = b ? tern_tokenizer_vocab_size(b) : 0, na = a ? tern_tokenizer_vocab_size(a) : 0;
    if (!st && nb > na)
        st = tern_error(TERN_E_INVALID, "draft model %s: its tokenizer has %d ids, the target's %d", draft, nb, na);
    for (int32_t id = 0; !st && id < nb; id++) {
        const char *pa = tern_tokenizer_id_to_piece(a, id), *pb = tern_tokenizer_id_to_piece(b, id);
        int same = (!pa && !pb) || (pa && pb && !strcmp(pa, pb));
        if (!same || tern_tokenizer_is_special(a, id) != tern_tokenizer_is_special(b, id))
            st = tern_error(TERN_E_INVALID,
                            "draft model %s: its tokenizer differs from the target's at id %d ('%s' against '%s'): "
                            "a draft model must share the target's tokenizer",
                            draft, (int)id, pb ? pb : "", pa ? pa : "");
    }
    tern_tokenizer_free(a);
    tern_tokenizer_free(b);
    return st;
}

tern_status tern_draft_model_load(const char *path, tern_model *target, const tern_model_opts *opts, tern_model **out)
{
    *out = NULL;
    const char *tdir = tern_model_dir(target);
    tern_status st = same_tokenizer(tdir, path);
    if (st) return st;
    tern_model_opts o = {0};
    if (opts) o = *opts;
    o.exec = tern_model_exec(target);
    return tern_model_load(path, &o, out);
}

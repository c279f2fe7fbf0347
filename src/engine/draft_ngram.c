/* Prompt-lookup drafting (drafter.h): no state, no model; the history is its
 * own draft source. Ties go to the most recent occurrence, longer n-grams
 * first, so repeated code and quoted text draft far. */
#include <string.h>

#include "engine/drafter.h"

static tern_status ng_open(tern_drafter *d, long reserve_tokens, void **state)
{
    (void)d;
    (void)reserve_tokens;
    *state = NULL;
    return TERN_OK;
}

static int ng_draft(tern_drafter *d, void *state, const int32_t *hist, int n, int max, int32_t *out)
{
    (void)state;
    for (int g = d->ngram_max; g >= d->ngram_min && g >= 1; g--) {
        if (n <= g) continue;
        const int32_t *key = hist + n - g;
        /* Occurrences ending before the key itself, newest first. */
        for (int j = n - g - 1; j >= 0; j--) {
            if (hist[j] != key[0] || memcmp(hist + j, key, (size_t)g * sizeof *key)) continue;
            int k = 0;
            while (k < max && j + g + k < n) {
                out[k] = hist[j + g + k];
                k++;
            }
            if (k) return k;
        }
    }
    return 0;
}

static void ng_close(tern_drafter *d, void *state)
{
    (void)d;
    (void)state;
}

const tern_drafter_vtable tern_drafter_ngram = {
    .name = "ngram", .ports = TERN_PORT_TOKENS, .open = ng_open, .draft = ng_draft, .close = ng_close,
};

tern_status tern_drafter_check(const tern_drafter *d, unsigned have)
{
    unsigned missing = d->vt->ports & ~have;
    if (missing)
        return tern_error(TERN_E_UNSUPPORTED, "draft source %s needs target ports 0x%x that this model does not give",
                          d->vt->name, missing);
    return TERN_OK;
}

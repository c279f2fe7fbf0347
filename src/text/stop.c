/* Stop-string matcher with a held-back tail (see stop.h). */
#include "text/stop.h"

#include <stdlib.h>
#include <string.h>

struct tern_stop {
    char  **seqs;     /* owned copies, non-empty */
    size_t *lens;
    int     n;
    tern_buf pending;  /* text not yet emitted */
    int     matched;
    int     which;    /* index of the sequence that matched */
};

tern_status tern_stop_create(const char *const *seqs, int n, tern_stop **out)
{
    *out = NULL;
    tern_stop *s = calloc(1, sizeof *s);
    if (!s) return tern_error(TERN_E_NOMEM, "stop matcher: out of memory");
    tern_buf_init(&s->pending);
    if (n > 0) {
        s->seqs = calloc((size_t)n, sizeof *s->seqs);
        s->lens = calloc((size_t)n, sizeof *s->lens);
        if (!s->seqs || !s->lens) { tern_stop_free(s); return tern_error(TERN_E_NOMEM, "stop matcher: out of memory"); }
    }
    for (int i = 0; i < n; i++) {
        if (!seqs[i] || !seqs[i][0]) continue;
        s->seqs[s->n] = strdup(seqs[i]);
        if (!s->seqs[s->n]) { tern_stop_free(s); return tern_error(TERN_E_NOMEM, "stop matcher: out of memory"); }
        s->lens[s->n] = strlen(seqs[i]);
        s->n++;
    }
    *out = s;
    return TERN_OK;
}

void tern_stop_free(tern_stop *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->seqs[i]);
    free(s->seqs);
    free(s->lens);
    tern_buf_free(&s->pending);
    free(s);
}

int tern_stop_matched(const tern_stop *s) { return s->matched; }

const char *tern_stop_which(const tern_stop *s) { return s->matched ? s->seqs[s->which] : NULL; }

/* Length of the longest suffix of text[0,len) that is a proper prefix of a sequence. */
static size_t held_tail(const tern_stop *s, const char *text, size_t len)
{
    size_t best = 0;
    for (int i = 0; i < s->n; i++) {
        size_t max = s->lens[i] - 1;
        if (max > len) max = len;
        for (size_t k = max; k > best; k--) {
            if (!memcmp(text + len - k, s->seqs[i], k)) { best = k; break; }
        }
    }
    return best;
}

int tern_stop_push(tern_stop *s, const char *text, size_t len, tern_buf *out)
{
    if (s->matched) return 1;
    if (s->n == 0) return tern_buf_append(out, text, len) ? -1 : 0;
    if (tern_buf_append(&s->pending, text, len)) return -1;
    const char *p = tern_buf_str(&s->pending);
    size_t plen = s->pending.len;
    /* Earliest match over all sequences. memmem stops at the first occurrence
     * of each one; the smallest offset wins. */
    const char *first = NULL;
    for (int i = 0; i < s->n; i++) {
        const char *hit = memmem(p, plen, s->seqs[i], s->lens[i]);
        if (hit && (!first || hit < first)) { first = hit; s->which = i; }
    }
    if (first) {
        if (tern_buf_append(out, p, (size_t)(first - p))) return -1;
        tern_buf_clear(&s->pending);
        s->matched = 1;
        return 1;
    }
    size_t keep = held_tail(s, p, plen);
    if (tern_buf_append(out, p, plen - keep)) return -1;
    tern_buf_consume(&s->pending, plen - keep);
    return 0;
}

int tern_stop_flush(tern_stop *s, tern_buf *out)
{
    if (s->matched) return 0;
    int rc = tern_buf_append(out, tern_buf_str(&s->pending), s->pending.len) ? -1 : 0;
    tern_buf_clear(&s->pending);
    return rc;
}

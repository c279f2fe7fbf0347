/* Streaming detokenizer.
 *
 * Keeps a short window of ids, decodes the whole window on every push and
 * emits the part of the text that can no longer change: text ending in
 * U+FFFD (a UTF-8 sequence still open) and text after a trailing <0xXX>
 * byte-fallback token (its run may still turn into U+FFFDs) are held back.
 * When everything decoded so far has been emitted, the window shrinks to its
 * last id, which stays as context so that decoders that treat the first token
 * specially (Metaspace, Strip) see the same first token in both decodes that
 * are compared. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

struct tern_detok {
    const tern_tokenizer *t;  /* borrowed */
    int skip_special, byte_fallback;
    int32_t *ids; int n, cap;
    char *done; size_t ndone, cap_done;  /* text of the window already emitted */
};

static int has_fallback(const tok_dec *d)
{
    if (!d) return 0;
    if (d->type == DEC_BYTEFALLBACK) return 1;
    for (int i = 0; i < d->nkids; i++)
        if (has_fallback(&d->kids[i])) return 1;
    return 0;
}

tern_status tern_detok_create(const tern_tokenizer *t, int skip_special, tern_detok **out)
{
    if (!t || !out) return tern_error(TERN_E_INVALID, "detok_create: bad argument");
    tern_detok *d = calloc(1, sizeof *d);
    if (!d) return tern_error(TERN_E_NOMEM, "detok: out of memory");
    d->t = t;
    d->skip_special = skip_special;
    d->byte_fallback = has_fallback(t->dec);
    *out = d;
    return TERN_OK;
}

void tern_detok_free(tern_detok *d)
{
    if (!d) return;
    free(d->ids);
    free(d->done);
    free(d);
}

static int is_byte_piece(const tern_tokenizer *t, int32_t id)
{
    const char *p = t->pieces[id];
    return t->piece_len[id] == 6 && !memcmp(p, "<0x", 3) && p[5] == '>';
}

static tern_status set_done(tern_detok *d, const char *s, size_t n)
{
    if (n + 1 > d->cap_done) {
        size_t nc = d->cap_done ? d->cap_done : 64;
        while (nc < n + 1) nc *= 2;
        char *p = realloc(d->done, nc);
        if (!p) return tern_error(TERN_E_NOMEM, "detok: out of memory");
        d->done = p; d->cap_done = nc;
    }
    memcpy(d->done, s, n);
    d->ndone = n;
    return TERN_OK;
}

/* Length of the last delta handed out, for the _n variants. */
static tern_status give_len(const char *s, size_t n, char **delta, size_t *len)
{
    char *p = malloc(n + 1);
    if (!p) return tern_error(TERN_E_NOMEM, "detok: out of memory");
    memcpy(p, s, n);
    p[n] = 0;
    *delta = p;
    if (len) *len = n;
    return TERN_OK;
}

/* Emits cur[ndone..end) and records cur[0..end) as emitted. */
static tern_status emit(tern_detok *d, const tok_buf *cur, size_t end, char **delta, size_t *len)
{
    const char *s = cur->p ? cur->p : "";
    /* The window's text must extend what was already emitted; when a decoder
     * rewrote it, wait (the flush settles it). */
    if (end < d->ndone || (d->ndone && memcmp(s, d->done, d->ndone))) return give_len("", 0, delta, len);
    tern_status st = give_len(s + d->ndone, end - d->ndone, delta, len);
    if (!st) st = set_done(d, s, end);
    return st;
}

tern_status tern_detok_push_n(tern_detok *d, int32_t id, char **delta, size_t *len)
{
    if (!d || !delta) return tern_error(TERN_E_INVALID, "detok_push: bad argument");
    *delta = NULL;
    const tern_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_ids || !t->pieces[id] || (d->skip_special && t->piece_special[id]))
        return give_len("", 0, delta, len);
    if (d->n == d->cap) {
        int nc = d->cap ? d->cap * 2 : 16;
        int32_t *p = realloc(d->ids, nc * sizeof *p);
        if (!p) return tern_error(TERN_E_NOMEM, "detok: out of memory");
        d->ids = p; d->cap = nc;
    }
    d->ids[d->n++] = id;
    tok_buf cur = {0};
    tern_status st = tok_decode_ids(t, d->ids, d->n, 0, &cur);
    if (st) { free(cur.p); return st; }
    size_t end = cur.len;
    if (d->byte_fallback && is_byte_piece(t, id)) end = d->ndone;
    while (end >= 3 && end > d->ndone && !memcmp(cur.p + end - 3, "\xEF\xBF\xBD", 3)) end -= 3;
    st = emit(d, &cur, end, delta, len);
    if (!st && end == cur.len && d->ndone == cur.len && d->n > 1) {
        /* All emitted: keep only the last id as context. */
        d->ids[0] = d->ids[d->n - 1];
        d->n = 1;
        cur.len = 0;
        st = tok_decode_ids(t, d->ids, 1, 0, &cur);
        if (!st) st = set_done(d, cur.p ? cur.p : "", cur.len);
    }
    free(cur.p);
    if (st) { free(*delta); *delta = NULL; }
    return st;
}

tern_status tern_detok_flush_n(tern_detok *d, char **delta, size_t *len)
{
    if (!d || !delta) return tern_error(TERN_E_INVALID, "detok_flush: bad argument");
    tok_buf cur = {0};
    tern_status st = tok_decode_ids(d->t, d->ids, d->n, 0, &cur);
    if (!st) {
        if (cur.len >= d->ndone && (!d->ndone || !memcmp(cur.p, d->done, d->ndone)))
            st = give_len(cur.p ? cur.p + d->ndone : "", cur.len - d->ndone, delta, len);
        else
            st = tern_error(TERN_E_INTERNAL, "detok: decoded text no longer extends the emitted text");
    }
    free(cur.p);
    d->n = 0;
    d->ndone = 0;
    return st;
}

tern_status tern_detok_push(tern_detok *d, int32_t id, char **delta)
{
    return tern_detok_push_n(d, id, delta, NULL);
}

tern_status tern_detok_flush(tern_detok *d, char **delta)
{
    return tern_detok_flush_n(d, delta, NULL);
}

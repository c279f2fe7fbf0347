/* Pre-tokenizers: Split, ByteLevel, Metaspace, Digits, Punctuation,
 * Whitespace, WhitespaceSplit and Sequence. Each turns one piece into
 * sub-pieces; the split behaviours follow the reference definitions
 * (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous). */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct { size_t b, e; int m; } span;
typedef struct { span *p; int n, cap; } spans;

static tern_status spans_push(spans *v, size_t b, size_t e, int m)
{
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 64;
        span *p = realloc(v->p, nc * sizeof *p);
        if (!p) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        v->p = p; v->cap = nc;
    }
    v->p[v->n++] = (span){b, e, m};
    return TERN_OK;
}

/* Fills v with alternating gap / match spans covering s[0..len). */
static tern_status find_matches(const tok_pretok *pt, const pcre2_code *re, const char *s, size_t len,
                                spans *v, int (*pred)(uint32_t))
{
    v->n = 0;
    size_t prev = 0;
    tern_status st = TERN_OK;
    if (len == 0) return spans_push(v, 0, 0, 0);
    if (re) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        if (!md) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        size_t pos = 0, ms, me;
        int r;
        while ((r = tok_regex_next(re, s, len, &pos, &ms, &me, md)) > 0) {
            if (prev != ms && (st = spans_push(v, prev, ms, 0))) break;
            if ((st = spans_push(v, ms, me, 1))) break;
            prev = me;
        }
        pcre2_match_data_free(md);
        if (r < 0) return TERN_E_INVALID;
    } else if (pred) {
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len && !st;) {
            uint32_t cp;
            size_t n = (size_t)tok_utf8_next(p + i, &cp);
            if (pred(cp)) {
                if (prev != i && (st = spans_push(v, prev, i, 0))) break;
                st = spans_push(v, i, i + n, 1);
                prev = i + n;
            }
            i += n;
        }
    } else {  /* literal pattern */
        size_t i = 0;
        while (pt->litlen && i + pt->litlen <= len) {
            const char *q = memmem(s + i, len - i, pt->lit, pt->litlen);
            if (!q) break;
            size_t k = (size_t)(q - s);
            if (prev != k && (st = spans_push(v, prev, k, 0))) break;
            if ((st = spans_push(v, k, k + pt->litlen, 1))) break;
            i = prev = k + pt->litlen;
        }
    }
    if (!st && prev != len) st = spans_push(v, prev, len, 0);
    return st;
}

/* Applies behaviour to v in place, then pushes the non-empty spans to out. */
static tern_status emit(spans *v, int behavior, int invert, const char *s, int first, tok_strvec *out)
{
    if (invert)
        for (int i = 0; i < v->n; i++) v->p[i].m = !v->p[i].m;
    int n = 0, prev_match = 0;
    span *p = v->p;
    switch (behavior) {
    case SPLIT_ISOLATED: n = v->n; break;
    case SPLIT_REMOVED:
        for (int i = 0; i < v->n; i++)
            if (!p[i].m) p[n++] = p[i];
        break;
    case SPLIT_MERGED_PREV:
        for (int i = 0; i < v->n; i++) {
            if (p[i].m && !prev_match && n > 0) p[n - 1].e = p[i].e;
            else p[n++] = p[i];
            prev_match = p[i].m;
        }
        break;
    case SPLIT_CONTIGUOUS:
        for (int i = 0; i < v->n; i++) {
            if (p[i].m == prev_match && n > 0) p[n - 1].e = p[i].e;
            else p[n++] = p[i];
            prev_match = p[i].m;
        }
        break;
    case SPLIT_MERGED_NEXT: {
        /* Walk backwards, merging a match into the span that follows it. */
        int w = v->n;
        for (int i = v->n - 1; i >= 0; i--) {
            span cur = p[i];
            if (cur.m && !prev_match && w < v->n) p[w].b = cur.b;
            else p[--w] = cur;
            prev_match = cur.m;
        }
        for (int i = w; i < v->n; i++) p[n++] = p[i];
        break;
    }
    }
    tern_status st = TERN_OK;
    for (int i = 0; i < n && !st; i++)
        if (p[i].e > p[i].b) st = tok_strvec_push(out, s + p[i].b, p[i].e - p[i].b, first && p[i].b == 0);
    return st;
}

static tern_status bytelevel_piece(const tok_pretok *pt, const char *s, size_t len, int first,
                                   tok_strvec *out, tok_buf *tmp, spans *sv)
{
    tern_status st;
    tmp->len = 0;
    if (pt->add_prefix_space && !(len && s[0] == ' ')) {
        if ((st = tok_buf_putc(tmp, ' '))) return st;
    }
    if ((st = tok_buf_put(tmp, s, len))) return st;
    if (pt->use_regex) {
        if ((st = find_matches(pt, pt->re, tmp->p, tmp->len, sv, NULL))) return st;
    } else {
        sv->n = 0;
        if ((st = spans_push(sv, 0, tmp->len, 0))) return st;
    }
    /* Map the bytes of every sub-piece to the GPT-2 characters. */
    tok_buf m = {0};
    for (int i = 0; i < sv->n && !st; i++) {
        if (sv->p[i].e == sv->p[i].b) continue;
        m.len = 0;
        for (size_t k = sv->p[i].b; k < sv->p[i].e && !st; k++) {
            int cl;
            const char *ch = tok_bytelevel_char((unsigned char)tmp->p[k], &cl);
            st = tok_buf_put(&m, ch, (size_t)cl);
        }
        if (!st) st = tok_strvec_push(out, m.p, m.len, first && sv->p[i].b == 0);
    }
    free(m.p);
    return st;
}

static tern_status metaspace_piece(const tok_pretok *pt, const char *s, size_t len, int first,
                                   tok_strvec *out, tok_buf *tmp, spans *sv)
{
    tern_status st = TERN_OK;
    tmp->len = 0;
    /* After ' ' -> replacement, "starts with the replacement" covers both. */
    int starts = (len && s[0] == ' ') ||
                 (len >= (size_t)pt->repl_len && !memcmp(s, pt->repl, (size_t)pt->repl_len));
    if (!starts && (pt->prepend_scheme == PREPEND_ALWAYS || (pt->prepend_scheme == PREPEND_FIRST && first)))
        st = tok_buf_put(tmp, pt->repl, (size_t)pt->repl_len);
    for (size_t i = 0; i < len && !st; i++)
        st = s[i] == ' ' ? tok_buf_put(tmp, pt->repl, (size_t)pt->repl_len) : tok_buf_putc(tmp, s[i]);
    if (st) return st;
    if (!pt->split) return tmp->len ? tok_strvec_push(out, tmp->p, tmp->len, first) : TERN_OK;
    tok_pretok lit = {0};
    lit.lit = (char *)pt->repl; lit.litlen = (size_t)pt->repl_len;
    if ((st = find_matches(&lit, NULL, tmp->p, tmp->len, sv, NULL))) return st;
    return emit(sv, SPLIT_MERGED_NEXT, 0, tmp->p, first, out);
}

static tern_status piece(const tok_pretok *pt, const char *s, size_t len, int first, tok_strvec *out,
                         tok_buf *tmp, spans *sv)
{
    tern_status st;
    switch (pt->type) {
    case PT_SPLIT:
        if ((st = find_matches(pt, pt->re, s, len, sv, NULL))) return st;
        return emit(sv, pt->behavior, pt->invert, s, first, out);
    case PT_DIGITS:
        if ((st = find_matches(pt, NULL, s, len, sv, tok_is_numeric))) return st;
        return emit(sv, pt->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS, 0, s, first, out);
    case PT_PUNCT:
        if ((st = find_matches(pt, NULL, s, len, sv, tok_is_punct))) return st;
        return emit(sv, pt->behavior, 0, s, first, out);
    case PT_WHITESPACE:
        if ((st = find_matches(pt, pt->re, s, len, sv, NULL))) return st;
        return emit(sv, SPLIT_REMOVED, 1, s, first, out);
    case PT_WSSPLIT:
        if ((st = find_matches(pt, NULL, s, len, sv, tok_is_whitespace))) return st;
        return emit(sv, SPLIT_REMOVED, 0, s, first, out);
    case PT_BYTELEVEL: return bytelevel_piece(pt, s, len, first, out, tmp, sv);
    case PT_METASPACE: return metaspace_piece(pt, s, len, first, out, tmp, sv);
    }
    return tern_error(TERN_E_INTERNAL, "tokenizer: unknown pre-tokenizer");
}

static tern_status too_long(size_t len, size_t limit)
{
    return tern_error(TERN_E_RANGE, "tokenizer: the pre-tokenizer grows a %zu-byte text past %zu "
                      "bytes (a malformed tokenizer.json?)", len, limit);
}

/* in_len: the bytes of the text the whole pre-tokenizer started from. */
static tern_status apply(const tok_pretok *pt, const tok_strvec *in, tok_strvec *out, size_t in_len,
                         size_t limit)
{
    tok_strvec_clear(out);
    tern_status st = TERN_OK;
    if (pt->type == PT_SEQ) {
        tok_strvec a = {0}, b = {0};
        const tok_strvec *src = in;
        for (int i = 0; i < pt->nkids && !st; i++) {
            tok_strvec *dst = i == pt->nkids - 1 ? out : (src == &a ? &b : &a);
            st = apply(&pt->kids[i], src, dst, in_len, limit);
            src = dst;
        }
        if (!st && pt->nkids == 0)
            for (int i = 0; i < in->n && !st; i++)
                st = tok_strvec_push(out, in->buf + in->off[i], in->ln[i], in->first[i]);
        tok_strvec_free(&a); tok_strvec_free(&b);
        return st;
    }
    tok_buf tmp = {0};
    spans sv = {0};
    for (int i = 0; i < in->n && !st; i++) {
        st = piece(pt, in->buf + in->off[i], in->ln[i], in->first[i], out, &tmp, &sv);
        if (!st && out->len > limit) st = too_long(in_len, limit);
    }
    free(tmp.p); free(sv.p);
    return st;
}

tern_status tok_pretok_apply(const tok_pretok *pt, const tok_strvec *in, tok_strvec *out)
{
    size_t len = 0;
    for (int i = 0; i < in->n; i++) len += in->ln[i];
    return apply(pt, in, out, len, tok_growth_limit(len));
}

void tok_pretok_free(tok_pretok *pt)
{
    if (!pt) return;
    for (int i = 0; i < pt->nkids; i++) tok_pretok_free(&pt->kids[i]);
    free(pt->kids);
    if (pt->re) pcre2_code_free(pt->re);
    free(pt->lit);
    memset(pt, 0, sizeof *pt);
}

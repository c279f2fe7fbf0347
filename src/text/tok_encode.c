/* tern_tokenizer_encode: added tokens, normalizer, pre-tokenizer, BPE and
 * post-processor, in the reference order (see tok_internal.h). */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct { size_t b, e; int tok; } seg;
typedef struct { seg *p; int n, cap; } segs;

typedef struct {
    tok_ids out;
    tok_strvec in, words;
    tok_buf norm;
    tok_bpe_scratch *scratch;
} enc_ctx;

static tern_status seg_push(segs *v, size_t b, size_t e, int tok)
{
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 16;
        seg *p = realloc(v->p, nc * sizeof *p);
        if (!p) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        v->p = p; v->cap = nc;
    }
    v->p[v->n++] = (seg){b, e, tok};
    return TERN_OK;
}

/* Regex \w of the reference's single_word check. */
static int is_word_char(uint32_t c)
{
    if (c == '_' || c == 0x200C || c == 0x200D) return 1;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) ||
           k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC ||
           (k == UTF8PROC_CATEGORY_CN && (tok_unicode_new_in("Alphabetic", c) || tok_unicode_new_in("M", c)));
}

static size_t char_before(const char *s, size_t i)
{
    do i--; while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return i;
}

/* Splits s into text spans (tok = -1) and added-token spans, applying the
 * single_word, lstrip and rstrip flags. */
static tern_status split_added(const tern_tokenizer *t, const tok_trie *trie, const char *s, size_t len,
                               segs *out)
{
    out->n = 0;
    size_t start_off = 0, i = 0;
    const unsigned char *u = (const unsigned char *)s;
    tern_status st = TERN_OK;
    while (i < len && !st) {
        size_t mlen;
        int k = tok_trie_maybe(trie, u[i]) ? tok_trie_match(trie, s + i, len - i, &mlen) : -1;
        if (k < 0) { i++; continue; }
        const tok_added *a = &t->added[k];
        size_t start = i, stop = i + mlen;
        i = stop;
        if (a->single_word) {
            uint32_t cp;
            int start_space = start == 0 || (tok_utf8_next(u + char_before(s, start), &cp), !is_word_char(cp));
            int stop_space = stop == len || (tok_utf8_next(u + stop, &cp), !is_word_char(cp));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t p = char_before(s, ns);
                uint32_t cp;
                tok_utf8_next(u + p, &cp);
                if (!tok_is_whitespace(cp)) break;
                ns = p;
            }
            start = ns > start_off ? ns : start_off;
        }
        if (a->rstrip) {
            while (stop < len) {
                uint32_t cp;
                int n = tok_utf8_next(u + stop, &cp);
                if (!tok_is_whitespace(cp)) break;
                stop += (size_t)n;
            }
            i = stop;
        }
        if (start < start_off) start = start_off;
        if (start_off < start) st = seg_push(out, start_off, start, -1);
        if (!st) st = seg_push(out, start, stop, k);
        start_off = stop;
    }
    if (!st && start_off != len) st = seg_push(out, start_off, len, -1);
    return st;
}

static tern_status model_text(const tern_tokenizer *t, enc_ctx *c, const char *s, size_t len, int first)
{
    tern_status st;
    tok_strvec_clear(&c->in);
    if ((st = tok_strvec_push(&c->in, s, len, first))) return st;
    const tok_strvec *w = &c->in;
    if (t->pretok) {
        if ((st = tok_pretok_apply(t->pretok, &c->in, &c->words))) return st;
        w = &c->words;
    }
    for (int i = 0; i < w->n; i++)
        if ((st = tok_bpe_word(t, w->buf + w->off[i], w->ln[i], &c->out, &c->scratch))) return st;
    return TERN_OK;
}

static tern_status encode_text(const tern_tokenizer *t, enc_ctx *c, const char *text, size_t len)
{
    segs raw = {0}, nseg = {0};
    tern_status st = split_added(t, t->trie_raw, text, len, &raw);
    for (int i = 0; i < raw.n && !st; i++) {
        seg r = raw.p[i];
        if (r.tok >= 0) { st = tok_ids_push(&c->out, t->added[r.tok].id); continue; }
        const char *s = text + r.b;
        size_t n = r.e - r.b;
        if (t->norm) {
            if ((st = tok_norm_apply(t->norm, s, n, &c->norm))) break;
            s = c->norm.p ? c->norm.p : "";
            n = c->norm.len;
        }
        if ((st = split_added(t, t->trie_norm, s, n, &nseg))) break;
        for (int k = 0; k < nseg.n && !st; k++) {
            seg q = nseg.p[k];
            if (q.tok >= 0) st = tok_ids_push(&c->out, t->added[q.tok].id);
            else st = model_text(t, c, s + q.b, q.e - q.b, r.b == 0 && q.b == 0);
        }
    }
    free(raw.p); free(nseg.p);
    return st;
}

tern_status tern_tokenizer_encode(const tern_tokenizer *t, const char *text, size_t len, int add_special,
                                  int32_t **ids, int *n)
{
    if (!t || !ids || !n || (!text && len)) return tern_error(TERN_E_INVALID, "tokenizer_encode: bad argument");
    if (len > 0x7FFFFFFF) return tern_error(TERN_E_RANGE, "tokenizer_encode: text of %zu bytes is too long", len);
    if (!tok_utf8_valid(text, len)) return tern_error(TERN_E_INVALID, "tokenizer_encode: text is not valid UTF-8");
    enc_ctx c = {0};
    tern_status st = TERN_OK;
    int post = add_special && t->has_post;
    for (int i = 0; post && i < t->post.npre && !st; i++) st = tok_ids_push(&c.out, t->post.pre[i]);
    if (!st && len) st = encode_text(t, &c, text, len);
    for (int i = 0; post && i < t->post.npost && !st; i++) st = tok_ids_push(&c.out, t->post.post[i]);
    tok_strvec_free(&c.in); tok_strvec_free(&c.words); free(c.norm.p);
    tok_bpe_scratch_free(c.scratch);
    if (st) { free(c.out.p); return st; }
    if (!c.out.p && !(c.out.p = malloc(sizeof(int32_t)))) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    *ids = c.out.p;
    *n = c.out.n;
    return TERN_OK;
}

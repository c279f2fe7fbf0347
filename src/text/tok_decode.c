/* Decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
 * BPEDecoder, Sequence) and tern_tokenizer_decode. As in the reference, every
 * kept id's piece (added tokens included) goes through the decoder chain,
 * which maps a list of strings to a list of strings that is then joined. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

static tern_status push_buf(tok_strvec *out, tok_buf *b) { return tok_strvec_push(out, b->p ? b->p : "", b->len, 0); }

static tern_status dec_bytelevel(const tok_strvec *in, tok_strvec *out)
{
    tok_buf raw = {0}, txt = {0};
    tern_status st = TERN_OK;
    for (int i = 0; i < in->n && !st; i++) {
        const unsigned char *p = (const unsigned char *)in->buf + in->off[i];
        size_t len = in->ln[i], start = raw.len;
        for (size_t k = 0; k < len && !st;) {
            uint32_t cp;
            k += (size_t)tok_utf8_next(p + k, &cp);
            int b = tok_bytelevel_byte(cp);
            if (b < 0) {  /* not a byte-level piece: keep its bytes as they are */
                raw.len = start;
                st = tok_buf_put(&raw, p, len);
                break;
            }
            st = tok_buf_putc(&raw, (char)b);
        }
    }
    if (!st) st = tok_buf_put(&txt, "", 0);
    if (!st) st = tok_utf8_lossy(&txt, raw.p ? raw.p : "", raw.len);
    if (!st) st = push_buf(out, &txt);
    free(raw.p); free(txt.p);
    return st;
}

static tern_status dec_metaspace(const tok_dec *d, const tok_strvec *in, tok_strvec *out)
{
    tok_buf b = {0};
    tern_status st = TERN_OK;
    for (int i = 0; i < in->n && !st; i++) {
        const char *s = in->buf + in->off[i];
        size_t len = in->ln[i];
        b.len = 0;
        st = tok_buf_put(&b, "", 0);
        for (size_t k = 0; k < len && !st;) {
            if (k + d->alen <= len && !memcmp(s + k, d->a, d->alen)) {
                if (!(i == 0 && d->prepend_scheme != PREPEND_NEVER)) st = tok_buf_putc(&b, ' ');
                k += d->alen;
            } else {
                st = tok_buf_putc(&b, s[k++]);
            }
        }
        if (!st) st = push_buf(out, &b);
    }
    free(b.p);
    return st;
}

static int byte_token(const char *s, size_t len, unsigned char *v)
{
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    int x = 0;
    for (int k = 3; k < 5; k++) {
        char h = s[k];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'A' && h <= 'F' ? h - 'A' + 10 :
                h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
        if (d < 0) return 0;
        x = x * 16 + d;
    }
    *v = (unsigned char)x;
    return 1;
}

static tern_status flush_bytes(tok_buf *bytes, tok_strvec *out)
{
    tern_status st = TERN_OK;
    if (!bytes->len) return st;
    if (tok_utf8_valid(bytes->p, bytes->len)) st = push_buf(out, bytes);
    else
        for (size_t k = 0; k < bytes->len && !st; k++) st = tok_strvec_push(out, "\xEF\xBF\xBD", 3, 0);
    bytes->len = 0;
    return st;
}

static tern_status dec_bytefallback(const tok_strvec *in, tok_strvec *out)
{
    tok_buf bytes = {0};
    tern_status st = TERN_OK;
    for (int i = 0; i < in->n && !st; i++) {
        unsigned char v;
        const char *s = in->buf + in->off[i];
        if (byte_token(s, in->ln[i], &v)) { st = tok_buf_putc(&bytes, (char)v); continue; }
        if ((st = flush_bytes(&bytes, out))) break;
        st = tok_strvec_push(out, s, in->ln[i], 0);
    }
    if (!st) st = flush_bytes(&bytes, out);
    free(bytes.p);
    return st;
}

static tern_status dec_strip(const tok_dec *d, const tok_strvec *in, tok_strvec *out)
{
    tern_status st = TERN_OK;
    char c[4];
    size_t cl = (size_t)tok_utf8_put(c, d->strip_cp);
    for (int i = 0; i < in->n && !st; i++) {
        const char *s = in->buf + in->off[i];
        size_t b = 0, e = in->ln[i];
        for (int k = 0; k < d->start && b + cl <= e && !memcmp(s + b, c, cl); k++) b += cl;
        for (int k = 0; k < d->stop && e >= b + cl && !memcmp(s + e - cl, c, cl); k++) e -= cl;
        st = tok_strvec_push(out, s + b, e - b, 0);
    }
    return st;
}

static tern_status replace_all(const tok_dec *d, const char *s, size_t len, const char *with,
                               size_t wlen, tok_buf *b)
{
    tern_status st = tok_buf_put(b, "", 0);
    size_t last = 0;
    if (d->re) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(d->re, NULL);
        if (!md) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        size_t pos = 0, ms, me;
        int r;
        while (!st && (r = tok_regex_next(d->re, s, len, &pos, &ms, &me, md)) > 0) {
            if (!(st = tok_buf_put(b, s + last, ms - last))) st = tok_buf_put(b, with, wlen);
            last = me;
        }
        pcre2_match_data_free(md);
        if (!st && r < 0) st = TERN_E_INVALID;
    } else if (d->alen) {
        for (size_t i = 0; !st && i + d->alen <= len;) {
            const char *q = memmem(s + i, len - i, d->a, d->alen);
            if (!q) break;
            size_t k = (size_t)(q - s);
            if (!(st = tok_buf_put(b, s + last, k - last))) st = tok_buf_put(b, with, wlen);
            i = last = k + d->alen;
        }
    }
    if (!st) st = tok_buf_put(b, s + last, len - last);
    return st;
}

static tern_status dec_apply(const tok_dec *d, const tok_strvec *in, tok_strvec *out)
{
    tok_strvec_clear(out);
    tern_status st = TERN_OK;
    tok_buf b = {0};
    switch (d->type) {
    case DEC_BYTELEVEL: return dec_bytelevel(in, out);
    case DEC_METASPACE: return dec_metaspace(d, in, out);
    case DEC_BYTEFALLBACK: return dec_bytefallback(in, out);
    case DEC_STRIP: return dec_strip(d, in, out);
    case DEC_FUSE:
        st = tok_buf_put(&b, in->buf ? in->buf : "", in->len);  /* pieces are contiguous */
        if (!st) st = push_buf(out, &b);
        break;
    case DEC_REPLACE:
    case DEC_BPE:
        for (int i = 0; i < in->n && !st; i++) {
            b.len = 0;
            if (d->type == DEC_REPLACE) st = replace_all(d, in->buf + in->off[i], in->ln[i], d->b, d->blen, &b);
            else st = replace_all(d, in->buf + in->off[i], in->ln[i], " ", i == in->n - 1 ? 0 : 1, &b);
            if (!st) st = push_buf(out, &b);
        }
        break;
    case DEC_SEQ: {
        tok_strvec a = {0}, c = {0};
        const tok_strvec *src = in;
        for (int i = 0; i < d->nkids && !st; i++) {
            tok_strvec *dst = i == d->nkids - 1 ? out : (src == &a ? &c : &a);
            st = dec_apply(&d->kids[i], src, dst);
            src = dst;
        }
        if (!st && d->nkids == 0)
            for (int i = 0; i < in->n && !st; i++) st = tok_strvec_push(out, in->buf + in->off[i], in->ln[i], 0);
        tok_strvec_free(&a); tok_strvec_free(&c);
        break;
    }
    default: st = tern_error(TERN_E_INTERNAL, "tokenizer: unknown decoder");
    }
    free(b.p);
    return st;
}

tern_status tok_decode_ids(const tern_tokenizer *t, const int32_t *ids, int n, int skip_special,
                           tok_buf *out)
{
    tok_strvec toks = {0}, res = {0};
    tern_status st = TERN_OK;
    for (int i = 0; i < n && !st; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !t->pieces[id]) continue;
        if (skip_special && t->piece_special[id]) continue;
        st = tok_strvec_push(&toks, t->pieces[id], t->piece_len[id], 0);
    }
    if (!st && t->dec) st = dec_apply(t->dec, &toks, &res);
    else if (!st) {  /* no decoder: pieces joined by spaces */
        for (int i = 0; i < toks.n && !st; i++) {
            if (i && (st = tok_buf_putc(out, ' '))) break;
            st = tok_buf_put(out, toks.buf + toks.off[i], toks.ln[i]);
        }
    }
    for (int i = 0; t->dec && i < res.n && !st; i++) st = tok_buf_put(out, res.buf + res.off[i], res.ln[i]);
    if (!st) st = tok_buf_put(out, "", 0);
    tok_strvec_free(&toks); tok_strvec_free(&res);
    return st;
}

tern_status tern_tokenizer_decode_n(const tern_tokenizer *t, const int32_t *ids, int n, int skip_special,
                                    char **out, size_t *len)
{
    if (!t || !out || (n > 0 && !ids) || n < 0) return tern_error(TERN_E_INVALID, "tokenizer_decode: bad argument");
    tok_buf b = {0};
    tern_status st = tok_decode_ids(t, ids, n, skip_special, &b);
    if (st) { free(b.p); return st; }
    *out = b.p;
    if (len) *len = b.len;
    return TERN_OK;
}

tern_status tern_tokenizer_decode(const tern_tokenizer *t, const int32_t *ids, int n, int skip_special,
                                  char **out)
{
    return tern_tokenizer_decode_n(t, ids, n, skip_special, out, NULL);
}

void tok_dec_free(tok_dec *d)
{
    if (!d) return;
    for (int i = 0; i < d->nkids; i++) tok_dec_free(&d->kids[i]);
    free(d->kids);
    if (d->re) pcre2_code_free(d->re);
    free(d->a); free(d->b);
    memset(d, 0, sizeof *d);
}

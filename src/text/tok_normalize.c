/* Normalizers: Unicode normal forms (utf8proc), Lowercase, Prepend, Replace,
 * Strip and Sequence. Each maps one string to a new string; offsets are not
 * tracked because tern does not expose them. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Code points whose normalization the reference leaves unchanged because its
 * Unicode tables predate them (marks and compatibility characters added in
 * Unicode 10 and later). Each acts as an inert starter: the text is normalized
 * in segments between them and they are copied as they are. The list comes
 * from comparing both implementations on every code point
 * (tests/gen/gen_tokenizer_norm_table.py). */
static const uint32_t inert[][2] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0x32FF, 0x32FF},
    {0xA7F2, 0xA7F4}, {0xA82C, 0xA82C}, {0xAB69, 0xAB69}, {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B},
    {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11938, 0x11938}, {0x1193D, 0x1193E},
    {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
    {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97},
    {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
    {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

static int is_inert(uint32_t cp)
{
    int lo = 0, hi = (int)(sizeof inert / sizeof inert[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < inert[mid][0]) hi = mid - 1;
        else if (cp > inert[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static tern_status unicode_segment(const char *s, size_t len, utf8proc_option_t opt, tok_buf *out)
{
    if (len == 0) return TERN_OK;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst, opt);
    if (n < 0) return tern_error(TERN_E_INVALID, "tokenizer: normalization failed: %s", utf8proc_errmsg(n));
    tern_status st = tok_buf_put(out, dst, (size_t)n);
    free(dst);
    return st;
}

static tern_status unicode_form(const char *s, size_t len, int type, tok_buf *out)
{
    utf8proc_option_t opt = UTF8PROC_STABLE;
    if (type == NORM_NFC || type == NORM_NFKC) opt |= UTF8PROC_COMPOSE;
    else opt |= UTF8PROC_DECOMPOSE;
    if (type == NORM_NFKC || type == NORM_NFKD) opt |= UTF8PROC_COMPAT;
    tern_status st = tok_buf_put(out, "", 0);
    const unsigned char *p = (const unsigned char *)s;
    size_t seg = 0, i = 0;
    int ascii = 1;
    while (i < len && !st) {
        if (p[i] < 0x80) { i++; continue; }
        ascii = 0;
        uint32_t cp;
        int n = tok_utf8_next(p + i, &cp);
        if (cp >= 0x7FD && is_inert(cp)) {
            if (!(st = unicode_segment(s + seg, i - seg, opt, out))) st = tok_buf_put(out, s + i, (size_t)n);
            seg = i + (size_t)n;
        }
        i += (size_t)n;
    }
    if (st) return st;
    /* ASCII is already in every normal form (and has no \0 trouble). */
    if (ascii) return tok_buf_put(out, s, len);
    return unicode_segment(s + seg, len - seg, opt, out);
}

static tern_status lowercase(const char *s, size_t len, tok_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    tern_status st = tok_buf_put(out, "", 0);
    for (size_t i = 0; i < len && !st;) {
        uint32_t cp;
        i += (size_t)tok_utf8_next(p + i, &cp);
        char tmp[8];
        int n;
        if (cp == 0x130) {  /* full lowercase mapping: i + combining dot above */
            memcpy(tmp, "i\xCC\x87", 3);
            n = 3;
        } else {
            n = tok_utf8_put(tmp, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        }
        st = tok_buf_put(out, tmp, (size_t)n);
    }
    return st;
}

static tern_status too_long(const char *what, size_t len, size_t limit)
{
    return tern_error(TERN_E_RANGE, "tokenizer: the %s grows a %zu-byte text past %zu bytes "
                      "(a malformed tokenizer.json?)", what, len, limit);
}

static tern_status replace(const tok_norm *nm, const char *s, size_t len, tok_buf *out, size_t limit)
{
    tern_status st = tok_buf_put(out, "", 0);
    if (nm->re) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(nm->re, NULL);
        if (!md) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        size_t pos = 0, last = 0, ms, me;
        int r;
        while (!st && (r = tok_regex_next(nm->re, s, len, &pos, &ms, &me, md)) > 0) {
            if ((st = tok_buf_put(out, s + last, ms - last))) break;
            st = tok_buf_put(out, nm->b, nm->blen);
            last = me;
            if (!st && out->len > limit) st = too_long("normalizer", len, limit);
        }
        pcre2_match_data_free(md);
        if (!st && r < 0) st = TERN_E_INVALID;
        if (!st) st = tok_buf_put(out, s + last, len - last);
        return st;
    }
    size_t i = 0, last = 0;
    if (nm->alen == 0) return tok_buf_put(out, s, len);
    while (!st && i + nm->alen <= len) {
        const char *q = memmem(s + i, len - i, nm->a, nm->alen);
        if (!q) break;
        size_t k = (size_t)(q - s);
        if ((st = tok_buf_put(out, s + last, k - last))) break;
        st = tok_buf_put(out, nm->b, nm->blen);
        i = last = k + nm->alen;
        if (!st && out->len > limit) st = too_long("normalizer", len, limit);
    }
    if (!st) st = tok_buf_put(out, s + last, len - last);
    return st;
}

static tern_status strip(const tok_norm *nm, const char *s, size_t len, tok_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t b = 0, e = len;
    if (nm->left)
        while (b < e) {
            uint32_t cp;
            int n = tok_utf8_next(p + b, &cp);
            if (!tok_is_whitespace(cp)) break;
            b += (size_t)n;
        }
    if (nm->right)
        while (e > b) {
            size_t k = e - 1;
            while (k > b && (p[k] & 0xC0) == 0x80) k--;
            uint32_t cp;
            tok_utf8_next(p + k, &cp);
            if (!tok_is_whitespace(cp)) break;
            e = k;
        }
    return tok_buf_put(out, s + b, e - b);
}

static tern_status norm_apply(const tok_norm *nm, const char *s, size_t len, tok_buf *out,
                              size_t limit)
{
    out->len = 0;
    switch (nm->type) {
    case NORM_NFC: case NORM_NFD: case NORM_NFKC: case NORM_NFKD:
        return unicode_form(s, len, nm->type, out);
    case NORM_LOWER: return lowercase(s, len, out);
    case NORM_PREPEND: {
        tern_status st = tok_buf_put(out, "", 0);
        if (!st && len) st = tok_buf_put(out, nm->a, nm->alen);
        if (!st) st = tok_buf_put(out, s, len);
        return st;
    }
    case NORM_REPLACE: return replace(nm, s, len, out, limit);
    case NORM_STRIP: return strip(nm, s, len, out);
    case NORM_SEQ: {
        tok_buf a = {0};
        tern_status st = tok_buf_put(out, s, len);
        for (int i = 0; i < nm->nkids && !st; i++) {
            st = norm_apply(&nm->kids[i], out->p, out->len, &a, limit);
            tok_buf t = *out; *out = a; a = t;
            if (!st && out->len > limit) st = too_long("normalizer", len, limit);
        }
        free(a.p);
        return st;
    }
    }
    return tern_error(TERN_E_INTERNAL, "tokenizer: unknown normalizer");
}

tern_status tok_norm_apply(const tok_norm *nm, const char *s, size_t len, tok_buf *out)
{
    size_t limit = tok_growth_limit(len);
    tern_status st = norm_apply(nm, s, len, out, limit);
    if (!st && out->len > limit) st = too_long("normalizer", len, limit);
    return st;
}

void tok_norm_free(tok_norm *nm)
{
    if (!nm) return;
    for (int i = 0; i < nm->nkids; i++) tok_norm_free(&nm->kids[i]);
    free(nm->kids);
    if (nm->re) pcre2_code_free(nm->re);
    free(nm->a); free(nm->b);
    memset(nm, 0, sizeof *nm);
}

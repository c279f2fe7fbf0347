/* Regular expressions for the tokenizer, on PCRE2 with UTF + UCP and the JIT.
 *
 * Patterns are rewritten before compiling so that classes mean what they mean
 * in the reference engine (Oniguruma, Unicode 16):
 *   \s        the White_Space property (PCRE2's \s also takes U+180E);
 *   \w, \d    Alphabetic|M|Nd|Pc and Nd (PCRE2's \w is L|N|_);
 *   \p{X}     X plus the code points PCRE2 10.42 (Unicode 14) does not know
 *             yet but the reference puts in X (tok_unicode_new.c). */
#include "text/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_BODY "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Appends a class body (in_class) or a bracketed class for property text
 * `prop` (e.g. "\\p{L}") plus its newer code points. */
static tern_status put_class(tok_buf *b, int in_class, int negate, const char *body, const char *extra)
{
    tern_status st = TERN_OK;
    if (!in_class) st = tok_buf_put(b, negate ? "[^" : "[", negate ? 2 : 1);
    if (!st) st = tok_buf_put(b, body, strlen(body));
    if (!st && extra) st = tok_buf_put(b, extra, strlen(extra));
    if (!st && !in_class) st = tok_buf_putc(b, ']');
    return st;
}

static tern_status put_word(tok_buf *b, int in_class, int negate)
{
    tern_status st = TERN_OK;
    if (!in_class) st = tok_buf_put(b, negate ? "[^" : "[", negate ? 2 : 1);
    const char *props[] = {"Alphabetic", "M", "Nd", "Pc"};
    for (int i = 0; i < 4 && !st; i++) {
        char p[32];
        snprintf(p, sizeof p, "\\p{%s}", props[i]);
        st = put_class(b, 1, 0, p, tok_unicode_new_class(props[i], strlen(props[i])));
    }
    if (!st) st = tok_buf_put(b, "\\x{200C}\\x{200D}", 16);
    if (!st && !in_class) st = tok_buf_putc(b, ']');
    return st;
}

pcre2_code *tok_regex_compile(const char *pat, size_t len)
{
    tok_buf b = {0};
    int in_class = 0;
    tern_status st = tok_buf_put(&b, "", 0);
    for (size_t i = 0; i < len && !st; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            char e = pat[i + 1];
            if (e == 's') st = put_class(&b, in_class, 0, WS_BODY, NULL);
            else if (e == 'S' && !in_class) st = put_class(&b, 0, 1, WS_BODY, NULL);
            else if (e == 'w') st = put_word(&b, in_class, 0);
            else if (e == 'W' && !in_class) st = put_word(&b, 0, 1);
            else if (e == 'd') st = put_class(&b, in_class, 0, "\\p{Nd}", tok_unicode_new_class("Nd", 2));
            else if (e == 'D' && !in_class) st = put_class(&b, 0, 1, "\\p{Nd}", tok_unicode_new_class("Nd", 2));
            else if ((e == 'p' || (e == 'P' && !in_class)) && i + 2 < len) {
                /* \pX or \p{Name} */
                size_t nb = i + 2, ne;
                if (pat[nb] == '{') {
                    ne = nb + 1;
                    while (ne < len && pat[ne] != '}') ne++;
                    if (ne >= len) { st = tok_buf_put(&b, pat + i, 2); i++; continue; }
                    nb++;
                } else {
                    ne = nb + 1;
                }
                const char *extra = tok_unicode_new_class(pat + nb, ne - nb);
                size_t end = pat[i + 2] == '{' ? ne + 1 : ne;
                char body[64];
                if (extra && end - i < sizeof body) {
                    snprintf(body, sizeof body, "\\p%.*s", (int)(end - i - 2), pat + i + 2);
                    st = put_class(&b, in_class, e == 'P', body, extra);
                } else {
                    st = tok_buf_put(&b, pat + i, end - i);
                }
                i = end - 1;
                continue;
            }
            else st = tok_buf_put(&b, pat + i, 2);
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            st = tok_buf_putc(&b, c);
            /* A ']' right after '[' or '[^' is a literal member. */
            if (!st && i + 1 < len && pat[i + 1] == '^') { st = tok_buf_putc(&b, '^'); i++; }
            if (!st && i + 1 < len && pat[i + 1] == ']') { st = tok_buf_putc(&b, ']'); i++; }
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        st = tok_buf_putc(&b, c);
    }
    if (st) { free(b.p); return NULL; }
    int err; PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)b.p, b.len, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: regex '%.*s' not supported: %s",
                   (int)(len > 200 ? 200 : len), pat, (const char *)msg);
        free(b.p);
        return NULL;
    }
    free(b.p);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  /* falls back to the interpreter on failure */
    return re;
}

static size_t next_char(const char *s, size_t len, size_t i)
{
    i++;
    while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    return i;
}

int tok_regex_next(const pcre2_code *re, const char *s, size_t len, size_t *pos,
                   size_t *ms, size_t *me, pcre2_match_data *md)
{
    if (*pos > len) return 0;
    int r = pcre2_match(re, (PCRE2_SPTR)s, len, *pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (r == PCRE2_ERROR_JIT_STACKLIMIT) {
        /* Long inputs can exhaust the default 32 KiB JIT stack: retry with a big one. */
        pcre2_jit_stack *js = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        pcre2_match_context *mc = pcre2_match_context_create(NULL);
        if (!js || !mc) {
            if (js) pcre2_jit_stack_free(js);
            if (mc) pcre2_match_context_free(mc);
            tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
            return -1;
        }
        pcre2_jit_stack_assign(mc, NULL, js);
        r = pcre2_match(re, (PCRE2_SPTR)s, len, *pos, PCRE2_NO_UTF_CHECK, md, mc);
        pcre2_match_context_free(mc);
        pcre2_jit_stack_free(js);
    }
    if (r == PCRE2_ERROR_NOMATCH) return 0;
    if (r < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(r, msg, sizeof msg);
        tern_error(TERN_E_INVALID, "tokenizer: regex match failed: %s", (const char *)msg);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0]; *me = ov[1];
    *pos = *me > *ms ? *me : next_char(s, len, *me);
    return 1;
}

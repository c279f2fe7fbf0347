/* UTF-8 helpers for the tokenizer: validation, lossy decoding with the
 * maximal-subpart rule (one U+FFFD per maximal invalid prefix, as Rust's
 * String::from_utf8_lossy does), character classes and the GPT-2 byte map. */
#include "text/tok_internal.h"

#include <utf8proc.h>

/* Length of the valid sequence at s[0..len), or 0 if invalid/truncated;
 * *sub receives the length of the maximal invalid subpart when invalid. */
static int seq_len(const unsigned char *s, size_t len, size_t *sub)
{
    unsigned c = s[0];
    int need; unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else { *sub = 1; return 0; }
    size_t k = 1;
    for (int i = 0; i < need; i++, k++) {
        if (k >= len) { *sub = k; return 0; }
        unsigned b = s[k];
        unsigned l = i == 0 ? lo : 0x80, h = i == 0 ? hi : 0xBF;
        if (b < l || b > h) { *sub = k; return 0; }
    }
    return need + 1;
}

int tok_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, sub;
    while (i < len) {
        if (p[i] < 0x80) { i++; continue; }
        int n = seq_len(p + i, len - i, &sub);
        if (!n) return 0;
        i += n;
    }
    return 1;
}

tern_status tok_utf8_lossy(tok_buf *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, start = 0, sub;
    tern_status st;
    while (i < len) {
        if (p[i] < 0x80) { i++; continue; }
        int n = seq_len(p + i, len - i, &sub);
        if (n) { i += n; continue; }
        if ((st = tok_buf_put(out, s + start, i - start))) return st;
        if ((st = tok_buf_put(out, "\xEF\xBF\xBD", 3))) return st;
        i += sub;
        start = i;
    }
    return tok_buf_put(out, s + start, len - start);
}

int tok_utf8_next(const unsigned char *s, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    if (c < 0xE0) { *cp = (c & 0x1F) << 6 | (s[1] & 0x3F); return 2; }
    if (c < 0xF0) { *cp = (c & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F); return 3; }
    *cp = (c & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    return 4;
}

int tok_utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int tok_is_whitespace(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

int tok_is_numeric(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO ||
           (k == UTF8PROC_CATEGORY_CN && tok_unicode_new_in("N", c));
}

int tok_is_alnum(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || tok_is_numeric(c) ||
           (k == UTF8PROC_CATEGORY_CN && tok_unicode_new_in("L", c));
}

int tok_is_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO) ||
           (k == UTF8PROC_CATEGORY_CN && tok_unicode_new_in("P", c));
}

/* GPT-2 map: printable Latin-1 bytes stand for themselves, the other 68 bytes
 * take code points 256.. in byte order. */
static char bl_chars[256][3];
static unsigned char bl_len[256];
static int16_t bl_rev[512];
static int bl_ready;

static void bl_init(void)
{
    int n = 0;
    for (int b = 0; b < 512; b++) bl_rev[b] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        bl_len[b] = (unsigned char)tok_utf8_put(bl_chars[b], cp);
        bl_rev[cp] = (int16_t)b;
    }
    __atomic_store_n(&bl_ready, 1, __ATOMIC_RELEASE);
}

static void bl_ensure(void)
{
    /* Initialisation is idempotent and writes the same values, so a race
     * between two first callers is harmless. */
    if (!__atomic_load_n(&bl_ready, __ATOMIC_ACQUIRE)) bl_init();
}

const char *tok_bytelevel_char(unsigned char b, int *len)
{
    bl_ensure();
    *len = bl_len[b];
    return bl_chars[b];
}

int tok_bytelevel_byte(uint32_t cp)
{
    bl_ensure();
    return cp < 512 ? bl_rev[cp] : -1;
}

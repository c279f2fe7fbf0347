/* Fast reader for the two large values of tokenizer.json: model.vocab (an
 * object of "piece": id) and model.merges (an array of "a b" strings or of
 * ["a", "b"] pairs). They hold almost all of the file's bytes (33 MB for
 * Gemma 3), which a general JSON tree would build slowly; everything else is
 * parsed by jansson with these two values blanked out. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct { const char *s; size_t i, n; } cur;

static tern_status bad(const cur *c, const char *what)
{
    return tern_error(TERN_E_FORMAT, "tokenizer.json: %s at byte %zu", what, c->i);
}

static void ws(cur *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\n' || c->s[c->i] == '\r' ||
                           c->s[c->i] == '\t'))
        c->i++;
}

/* Skips a string starting at its opening quote. */
static tern_status skip_string(cur *c)
{
    c->i++;
    for (;;) {
        const char *q = memchr(c->s + c->i, '"', c->n - c->i);
        if (!q) return bad(c, "unterminated string");
        size_t k = (size_t)(q - c->s), bs = 0;
        while (k - bs > c->i && c->s[k - bs - 1] == '\\') bs++;
        c->i = k + 1;
        if (!(bs & 1)) return TERN_OK;
    }
}

static tern_status skip_value(cur *c)
{
    int depth = 0;
    ws(c);
    if (c->i < c->n && c->s[c->i] != '"' && c->s[c->i] != '{' && c->s[c->i] != '[') {
        size_t b = c->i;  /* number, true, false or null */
        while (c->i < c->n && !strchr(",}] \t\r\n", c->s[c->i])) c->i++;
        return c->i > b ? TERN_OK : bad(c, "expected a value");
    }
    do {
        if (c->i >= c->n) return bad(c, "unexpected end of document");
        char ch = c->s[c->i];
        if (ch == '"') { tern_status st = skip_string(c); if (st) return st; }
        else {
            if (ch == '{' || ch == '[') {
                if (++depth > 200) return bad(c, "nesting too deep");
            } else if (ch == '}' || ch == ']') {
                if (--depth < 0) return bad(c, "unbalanced bracket");
            }
            c->i++;
        }
        if (depth) ws(c);
    } while (depth > 0);
    return TERN_OK;
}

static int hexval(char h)
{
    if (h >= '0' && h <= '9') return h - '0';
    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
    if (h >= 'A' && h <= 'F') return h - 'A' + 10;
    return -1;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p[k]);
        if (h < 0) return -1;
        v = v << 4 | h;
    }
    return v;
}

/* Parses a string at c (opening quote) into b (cleared first). */
static tern_status read_string(cur *c, tok_buf *b)
{
    b->len = 0;
    if (c->i >= c->n || c->s[c->i] != '"') return bad(c, "expected a string");
    c->i++;
    size_t run = c->i;
    tern_status st;
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if (ch == '"') {
            if ((st = tok_buf_put(b, c->s + run, c->i - run))) return st;
            c->i++;
            return TERN_OK;
        }
        if ((unsigned char)ch < 0x20) return bad(c, "control character in string");
        if (ch != '\\') { c->i++; continue; }
        if ((st = tok_buf_put(b, c->s + run, c->i - run))) return st;
        if (c->i + 1 >= c->n) break;
        char e = c->s[c->i + 1];
        c->i += 2;
        char o;
        switch (e) {
        case '"': o = '"'; break;
        case '\\': o = '\\'; break;
        case '/': o = '/'; break;
        case 'b': o = '\b'; break;
        case 'f': o = '\f'; break;
        case 'n': o = '\n'; break;
        case 'r': o = '\r'; break;
        case 't': o = '\t'; break;
        case 'u': {
            if (c->i + 4 > c->n) return bad(c, "truncated \\u escape");
            int u = hex4(c->s + c->i);
            if (u < 0) return bad(c, "bad \\u escape");
            c->i += 4;
            uint32_t cp = (uint32_t)u;
            if (u >= 0xD800 && u <= 0xDBFF) {
                int lo = (c->i + 6 <= c->n && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u')
                             ? hex4(c->s + c->i + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return bad(c, "unpaired surrogate");
                cp = 0x10000 + (((uint32_t)u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                c->i += 6;
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
                return bad(c, "unpaired surrogate");
            }
            char tmp[4];
            if ((st = tok_buf_put(b, tmp, (size_t)tok_utf8_put(tmp, cp)))) return st;
            run = c->i;
            continue;
        }
        default: return bad(c, "bad escape");
        }
        if ((st = tok_buf_putc(b, o))) return st;
        run = c->i;
    }
    return bad(c, "unterminated string");
}

static int key_is(cur *c, const char *key)
{
    size_t k = strlen(key);
    return c->i + k + 2 <= c->n && c->s[c->i] == '"' && !memcmp(c->s + c->i + 1, key, k) &&
           c->s[c->i + k + 1] == '"';
}

/* Walks the members of the object at c; calls back on each key position. */
tern_status tok_fast_find(const char *s, size_t len, tok_spans *sp)
{
    cur c = {s, 0, len};
    memset(sp, 0, sizeof *sp);
    ws(&c);
    if (c.i >= c.n || s[c.i] != '{') return bad(&c, "document is not an object");
    c.i++;
    tern_status st;
    for (int level = 0;;) {
        ws(&c);
        if (c.i < c.n && s[c.i] == '}') {
            if (level == 1) return TERN_OK;  /* end of model: done */
            return TERN_OK;
        }
        int is_model = level == 0 && key_is(&c, "model");
        int is_vocab = level == 1 && key_is(&c, "vocab");
        int is_merges = level == 1 && key_is(&c, "merges");
        if (c.i >= c.n || s[c.i] != '"') return bad(&c, "expected a key");
        if ((st = skip_string(&c))) return st;
        ws(&c);
        if (c.i >= c.n || s[c.i] != ':') return bad(&c, "expected ':'");
        c.i++;
        ws(&c);
        if (is_model && c.i < c.n && s[c.i] == '{') {
            c.i++;
            level = 1;
            continue;
        }
        size_t b = c.i;
        if ((st = skip_value(&c))) return st;
        if (is_vocab) { sp->vocab_b = b; sp->vocab_e = c.i; sp->found_vocab = 1; }
        if (is_merges) { sp->merges_b = b; sp->merges_e = c.i; sp->found_merges = 1; }
        ws(&c);
        if (c.i < c.n && s[c.i] == ',') { c.i++; continue; }
        if (c.i < c.n && s[c.i] == '}') {
            if (level == 1) return TERN_OK;
            return TERN_OK;
        }
        return bad(&c, "expected ',' or '}'");
    }
}

tern_status tok_fast_vocab(tern_tokenizer *t, const char *s, size_t b, size_t e)
{
    cur c = {s, b, e};
    tok_buf key = {0};
    tern_status st = TERN_OK;
    if (s[c.i] != '{') return bad(&c, "model.vocab is not an object");
    c.i++;
    if ((st = tok_strmap_init(&t->vocab, (uint32_t)((e - b) / 16)))) return st;
    ws(&c);
    if (c.i < c.n && s[c.i] == '}') return TERN_OK;
    for (;;) {
        ws(&c);
        if ((st = read_string(&c, &key))) break;
        ws(&c);
        if (c.i >= c.n || s[c.i] != ':') { st = bad(&c, "expected ':' in model.vocab"); break; }
        c.i++;
        ws(&c);
        char *end;
        long v = c.i < c.n ? strtol(s + c.i, &end, 10) : -1;
        if (c.i >= c.n || end == s + c.i || v < 0 || v > 0x7FFFFFFF) {
            st = bad(&c, "model.vocab value is not a token id");
            break;
        }
        c.i = (size_t)(end - s);
        char *k = tok_arena_dup(&t->arena, key.p ? key.p : "", key.len);
        if (!k) { st = tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); break; }
        if ((st = tok_strmap_put(&t->vocab, k, (uint32_t)key.len, (int32_t)v))) break;
        ws(&c);
        if (c.i < c.n && s[c.i] == ',') { c.i++; continue; }
        if (c.i < c.n && s[c.i] == '}') break;
        st = bad(&c, "expected ',' or '}' in model.vocab");
        break;
    }
    free(key.p);
    return st;
}

static tern_status add_merge(tern_tokenizer *t, const char *a, size_t al, const char *b, size_t bl,
                             uint32_t rank, tok_buf *tmp)
{
    int32_t ia = tok_strmap_get(&t->vocab, a, al), ib = tok_strmap_get(&t->vocab, b, bl);
    if (ia < 0 || ib < 0)
        return tern_error(TERN_E_FORMAT, "tokenizer.json: merge %u refers to a token missing "
                          "from model.vocab ('%.*s')", rank, (int)(ia < 0 ? al : bl), ia < 0 ? a : b);
    size_t skip = t->cont_prefix_len;
    if (skip > bl || (skip && memcmp(b, t->cont_prefix, skip))) skip = 0;
    tmp->len = 0;
    tern_status st;
    if ((st = tok_buf_put(tmp, a, al)) || (st = tok_buf_put(tmp, b + skip, bl - skip))) return st;
    int32_t im = tok_strmap_get(&t->vocab, tmp->p, tmp->len);
    if (im < 0)
        return tern_error(TERN_E_FORMAT, "tokenizer.json: merge %u result '%.*s' is missing "
                          "from model.vocab", rank, (int)tmp->len, tmp->p);
    return tok_mergemap_put(&t->merges, ia, ib, rank, im);
}

tern_status tok_fast_merges(tern_tokenizer *t, const char *s, size_t b, size_t e)
{
    cur c = {s, b, e};
    tok_buf x = {0}, y = {0}, tmp = {0};
    tern_status st = TERN_OK;
    if (s[c.i] != '[') return bad(&c, "model.merges is not an array");
    c.i++;
    if ((st = tok_mergemap_init(&t->merges, (uint32_t)((e - b) / 12)))) return st;
    ws(&c);
    if (c.i < c.n && s[c.i] == ']') return TERN_OK;
    for (uint32_t rank = 0;; rank++) {
        ws(&c);
        if (c.i < c.n && s[c.i] == '[') {
            c.i++; ws(&c);
            if ((st = read_string(&c, &x))) break;
            ws(&c);
            if (c.i >= c.n || s[c.i] != ',') { st = bad(&c, "merge pair needs two strings"); break; }
            c.i++; ws(&c);
            if ((st = read_string(&c, &y))) break;
            ws(&c);
            if (c.i >= c.n || s[c.i] != ']') { st = bad(&c, "merge pair needs two strings"); break; }
            c.i++;
            st = add_merge(t, x.p ? x.p : "", x.len, y.p ? y.p : "", y.len, rank, &tmp);
        } else {
            if ((st = read_string(&c, &x))) break;
            const char *sp = x.p ? memchr(x.p, ' ', x.len) : NULL;
            if (!sp || memchr(sp + 1, ' ', x.len - (size_t)(sp + 1 - x.p))) {
                st = tern_error(TERN_E_FORMAT, "tokenizer.json: merge %u is not 'a b'", rank);
                break;
            }
            st = add_merge(t, x.p, (size_t)(sp - x.p), sp + 1, x.len - (size_t)(sp + 1 - x.p), rank, &tmp);
        }
        if (st) break;
        ws(&c);
        if (c.i < c.n && s[c.i] == ',') { c.i++; continue; }
        if (c.i < c.n && s[c.i] == ']') break;
        st = bad(&c, "expected ',' or ']' in model.merges");
        break;
    }
    free(x.p); free(y.p); free(tmp.p);
    return st;
}

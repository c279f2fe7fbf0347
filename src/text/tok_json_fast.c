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

/* Walks the top-level members, enters "model" and records where its "vocab"
 * and "merges" values lie; stops at the end of the model object. */
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
        if (c.i < c.n && s[c.i] == '}') return TERN_OK;  /* end of the model or of the document */
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
        if (c.i < c.n && s[c.i] == '}') return TERN_OK;
        return bad(&c, "expected ',' or '}'");
    }
}

/* Vocabulary entries are inserted in batches, prefetching their slots. */
#define VOCAB_BATCH 64

static tern_status vocab_flush(tern_tokenizer *t, const char **k, const uint32_t *kl, const int32_t *v, int n)
{
    uint64_t h[VOCAB_BATCH];
    for (int i = 0; i < n; i++) {
        h[i] = tok_hash(k[i], kl[i]);
        tok_strmap_prefetch(&t->vocab, h[i]);
    }
    tern_status st = TERN_OK;
    for (int i = 0; i < n && !st; i++) st = tok_strmap_put_h(&t->vocab, k[i], kl[i], v[i], h[i]);
    return st;
}

tern_status tok_fast_vocab(tern_tokenizer *t, const char *s, size_t b, size_t e)
{
    cur c = {s, b, e};
    tok_buf key = {0};
    tern_status st = TERN_OK;
    const char *bk[VOCAB_BATCH];
    uint32_t bl[VOCAB_BATCH];
    int32_t bv[VOCAB_BATCH];
    int nb = 0;
    if (s[c.i] != '{') return bad(&c, "model.vocab is not an object");
    c.i++;
    if ((st = tok_strmap_init(&t->vocab, (uint32_t)((e - b) / 24)))) return st;
    ws(&c);
    if (c.i < c.n && s[c.i] == '}') return TERN_OK;
    for (;;) {
        ws(&c);
        if ((st = read_string(&c, &key))) break;
        ws(&c);
        if (c.i >= c.n || s[c.i] != ':') { st = bad(&c, "expected ':' in model.vocab"); break; }
        c.i++;
        ws(&c);
        /* Bounded digit loop: the mapped file is not NUL-terminated. */
        long v = 0;
        size_t d0 = c.i;
        while (c.i < c.n && s[c.i] >= '0' && s[c.i] <= '9' && v <= 0x7FFFFFFF) v = v * 10 + (s[c.i++] - '0');
        if (c.i == d0 || v > 0x7FFFFFFF) {
            st = bad(&c, "model.vocab value is not a token id");
            break;
        }
        char *k = tok_arena_dup(&t->arena, key.p ? key.p : "", key.len);
        if (!k) { st = tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); break; }
        bk[nb] = k; bl[nb] = (uint32_t)key.len; bv[nb] = (int32_t)v;
        if (++nb == VOCAB_BATCH) {
            if ((st = vocab_flush(t, bk, bl, bv, nb))) break;
            nb = 0;
        }
        if (t->n_vent == t->cap_vent) {
            int nc = t->cap_vent ? t->cap_vent * 2 : 1024;
            struct tok_vent *p = realloc(t->vent, (size_t)nc * sizeof *p);
            if (!p) { st = tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); break; }
            t->vent = p; t->cap_vent = nc;
        }
        t->vent[t->n_vent++] = (struct tok_vent){k, (uint32_t)key.len, (int32_t)v};
        ws(&c);
        if (c.i < c.n && s[c.i] == ',') { c.i++; continue; }
        if (c.i < c.n && s[c.i] == '}') break;
        st = bad(&c, "expected ',' or '}' in model.vocab");
        break;
    }
    if (!st && nb) st = vocab_flush(t, bk, bl, bv, nb);
    free(key.p);
    return st;
}

/* Merges are resolved in batches: hashing every string of a batch and
 * prefetching its slots first lets the table misses overlap. */
#define MERGE_BATCH 64
typedef struct {
    tok_buf text;                      /* a, b and a+b of every entry, back to back */
    size_t off[MERGE_BATCH][3];
    uint32_t len[MERGE_BATCH][3];
    uint32_t rank[MERGE_BATCH];
    int n;
} merge_batch;

static tern_status batch_add(merge_batch *mb, const tern_tokenizer *t, const char *a, size_t al,
                             const char *b, size_t bl, uint32_t rank)
{
    size_t skip = t->cont_prefix_len;
    if (skip > bl || (skip && memcmp(b, t->cont_prefix, skip))) skip = 0;
    int i = mb->n++;
    tern_status st;
    mb->off[i][0] = mb->text.len;
    mb->len[i][0] = (uint32_t)al;
    if ((st = tok_buf_put(&mb->text, a, al))) return st;
    mb->off[i][1] = mb->text.len;
    mb->len[i][1] = (uint32_t)bl;
    if ((st = tok_buf_put(&mb->text, b, bl))) return st;
    mb->off[i][2] = mb->text.len;
    mb->len[i][2] = (uint32_t)(al + bl - skip);
    if ((st = tok_buf_put(&mb->text, a, al)) || (st = tok_buf_put(&mb->text, b + skip, bl - skip))) return st;
    mb->rank[i] = rank;
    return TERN_OK;
}

static tern_status batch_run(merge_batch *mb, tern_tokenizer *t)
{
    uint64_t h[MERGE_BATCH][3];
    int32_t id[MERGE_BATCH][3];
    const char *p = mb->text.p;
    for (int i = 0; i < mb->n; i++)
        for (int k = 0; k < 3; k++) {
            h[i][k] = tok_hash(p + mb->off[i][k], mb->len[i][k]);
            tok_strmap_prefetch(&t->vocab, h[i][k]);
        }
    for (int i = 0; i < mb->n; i++) {
        for (int k = 0; k < 3; k++) {
            id[i][k] = tok_strmap_get_h(&t->vocab, p + mb->off[i][k], mb->len[i][k], h[i][k]);
            if (id[i][k] < 0)
                return tern_error(TERN_E_FORMAT, "tokenizer.json: merge %u %s '%.*s' is missing from model.vocab",
                                  mb->rank[i], k < 2 ? "refers to a token" : "result",
                                  (int)mb->len[i][k], p + mb->off[i][k]);
        }
        tok_mergemap_prefetch(&t->merges, id[i][0], id[i][1]);
    }
    tern_status st = TERN_OK;
    for (int i = 0; i < mb->n && !st; i++) st = tok_mergemap_put(&t->merges, id[i][0], id[i][1], mb->rank[i], id[i][2]);
    mb->n = 0;
    mb->text.len = 0;
    return st;
}

tern_status tok_fast_merges(tern_tokenizer *t, const char *s, size_t b, size_t e)
{
    cur c = {s, b, e};
    tok_buf x = {0}, y = {0};
    merge_batch *mb = calloc(1, sizeof *mb);
    tern_status st = TERN_OK;
    if (!mb) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    if (s[c.i] != '[') { free(mb); return bad(&c, "model.merges is not an array"); }
    c.i++;
    if ((st = tok_mergemap_init(&t->merges, (uint32_t)((e - b) / 40)))) { free(mb); return st; }
    ws(&c);
    int empty = c.i < c.n && s[c.i] == ']';
    for (uint32_t rank = 0; !empty; rank++) {
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
            st = batch_add(mb, t, x.p ? x.p : "", x.len, y.p ? y.p : "", y.len, rank);
        } else {
            if ((st = read_string(&c, &x))) break;
            const char *sp = x.p ? memchr(x.p, ' ', x.len) : NULL;
            if (!sp || memchr(sp + 1, ' ', x.len - (size_t)(sp + 1 - x.p))) {
                st = tern_error(TERN_E_FORMAT, "tokenizer.json: merge %u is not 'a b'", rank);
                break;
            }
            st = batch_add(mb, t, x.p, (size_t)(sp - x.p), sp + 1, x.len - (size_t)(sp + 1 - x.p), rank);
        }
        if (!st && mb->n == MERGE_BATCH) st = batch_run(mb, t);
        if (st) break;
        ws(&c);
        if (c.i < c.n && s[c.i] == ',') { c.i++; continue; }
        if (c.i < c.n && s[c.i] == ']') break;
        st = bad(&c, "expected ',' or ']' in model.merges");
        break;
    }
    if (!st && mb->n) st = batch_run(mb, t);
    free(x.p); free(y.p); free(mb->text.p); free(mb);
    return st;
}

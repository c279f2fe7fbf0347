/* Jinja lexer. Mirrors the state machine of Jinja2's regex lexer: the root
 * state scans data up to the next "{{", "{%" or "{#"; tag states produce
 * names, literals and operators until the closing tag at bracket depth 0. */
#include "text/jinja_lex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jinja_rt *rt;
    const char *src;          /* normalized source (arena) */
    size_t n, pos;
    int line;
    size_t line_start;        /* byte offset where the current line starts */
    jinja_tok *toks;
    size_t ntoks, cap;
    int line_starting;        /* previous match ended with a newline (lstrip_blocks) */
} lexer;

static _Noreturn void lex_fail(lexer *lx, size_t at, const char *msg, int ch)
{
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < at && i < lx->n; i++)
        if (lx->src[i] == '\n') {
            line++;
            ls = i + 1;
        }
    if (ch)
        jinja_fail(lx->rt, "line %d, column %zu: %s '%c'", line, at - ls + 1, msg, ch);
    jinja_fail(lx->rt, "line %d, column %zu: %s", line, at - ls + 1, msg);
}

/* Advances pos to `to`, counting lines. */
static void advance(lexer *lx, size_t to)
{
    for (size_t i = lx->pos; i < to; i++)
        if (lx->src[i] == '\n') {
            lx->line++;
            lx->line_start = i + 1;
        }
    lx->pos = to;
}

static jinja_tok *push(lexer *lx, jinja_tok_type type, size_t at)
{
    if (lx->ntoks == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jinja_tok *t = jinja_alloc(lx->rt, cap * sizeof *t);
        if (lx->ntoks)
            memcpy(t, lx->toks, lx->ntoks * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    jinja_tok *t = &lx->toks[lx->ntoks++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = lx->line;
    t->col = (int)(at - lx->line_start) + 1;
    return t;
}

/* Length of the Python-\s whitespace character at i, 0 if none. */
static size_t space_at(const lexer *lx, size_t i)
{
    if (i >= lx->n)
        return 0;
    int32_t cp;
    size_t k = jinja_utf8_decode(lx->src + i, lx->n - i, &cp);
    return jinja_is_space(cp) ? k : 0;
}

static size_t skip_space(const lexer *lx, size_t i)
{
    size_t k;
    while ((k = space_at(lx, i)) > 0)
        i += k;
    return i;
}

static int starts(const lexer *lx, size_t i, const char *s)
{
    size_t k = strlen(s);
    return i + k <= lx->n && !memcmp(lx->src + i, s, k);
}

/* Length of text without trailing whitespace (Python str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t end = 0, i = 0;
    while (i < n) {
        int32_t cp;
        size_t k = jinja_utf8_decode(s + i, n - i, &cp);
        i += k;
        if (!jinja_is_space(cp))
            end = i;
    }
    return end;
}

static void emit_data(lexer *lx, size_t at, const char *s, size_t n)
{
    if (n == 0)
        return;
    jinja_tok *t = push(lx, JT_DATA, at);
    t->s = s;
    t->n = n;
}

/* Applies the "-" / lstrip_blocks rules to the data before a tag and emits it.
 * sign is '-', '+' or 0; is_var: the tag is "{{". */
static void emit_text_before_tag(lexer *lx, size_t text_start, size_t text_end, int sign, int is_var)
{
    const char *text = lx->src + text_start;
    size_t len = text_end - text_start;
    if (sign == '-') {
        len = rstrip_len(text, len);
    } else if (sign != '+' && !is_var) {
        size_t l_pos = len;
        while (l_pos > 0 && text[l_pos - 1] != '\n')
            l_pos--;
        if ((l_pos > 0 || lx->line_starting) && l_pos < len) {
            int all_space = 1;
            for (size_t i = l_pos; i < len && all_space;) {
                int32_t cp;
                i += jinja_utf8_decode(text + i, len - i, &cp);
                all_space = jinja_is_space(cp);
            }
            if (all_space)
                len = l_pos;
        }
    }
    emit_data(lx, text_start, text, len);
}

/* Recognizes "{%[-+]? raw [-]?%}" at i; returns the end offset or 0. */
static size_t match_raw_begin(const lexer *lx, size_t i)
{
    size_t j = i + 2;
    if (j < lx->n && (lx->src[j] == '-' || lx->src[j] == '+'))
        j++;
    j = skip_space(lx, j);
    if (!starts(lx, j, "raw"))
        return 0;
    j = skip_space(lx, j + 3);
    if (starts(lx, j, "-%}"))
        return skip_space(lx, j + 3);
    if (starts(lx, j, "%}"))
        return j + 2;
    return 0;
}

static void lex_raw(lexer *lx, size_t body)
{
    for (size_t i = body; i + 1 < lx->n; i++) {
        if (lx->src[i] != '{' || lx->src[i + 1] != '%')
            continue;
        size_t j = i + 2;
        int sign = 0;
        if (j < lx->n && (lx->src[j] == '-' || lx->src[j] == '+'))
            sign = lx->src[j++];
        j = skip_space(lx, j);
        if (!starts(lx, j, "endraw"))
            continue;
        j = skip_space(lx, j + 6);
        size_t end;
        if (starts(lx, j, "+%}"))
            end = j + 3;
        else if (starts(lx, j, "-%}"))
            end = skip_space(lx, j + 3);
        else if (starts(lx, j, "%}"))
            end = j + 2 + (j + 2 < lx->n && lx->src[j + 2] == '\n');
        else
            continue;
        advance(lx, body);
        emit_text_before_tag(lx, body, i, sign, 0);
        advance(lx, end);
        lx->line_starting = lx->src[end - 1] == '\n';
        return;
    }
    lex_fail(lx, body, "missing end of raw directive", 0);
}

static void lex_comment(lexer *lx, size_t body)
{
    for (size_t i = body; i < lx->n; i++) {
        size_t end = 0;
        if (starts(lx, i, "+#}"))
            end = i + 3;
        else if (starts(lx, i, "-#}"))
            end = skip_space(lx, i + 3);
        else if (starts(lx, i, "#}"))
            end = i + 2 + (i + 2 < lx->n && lx->src[i + 2] == '\n');
        if (end) {
            advance(lx, end);
            lx->line_starting = lx->src[end - 1] == '\n';
            return;
        }
    }
    lex_fail(lx, body, "missing end of comment tag", 0);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes a string literal body with Python's escape rules. */
static void lex_string(lexer *lx, size_t at, size_t end_quote)
{
    jinja_buf b = {0};
    const char *s = lx->src;
    for (size_t i = at + 1; i < end_quote;) {
        if (s[i] != '\\') {
            size_t j = i;
            while (j < end_quote && s[j] != '\\')
                j++;
            jinja_buf_put(lx->rt, &b, s + i, j - i);
            i = j;
            continue;
        }
        char c = s[i + 1];
        i += 2;
        const char *simple = strchr("\\'\"abfnrtv\n", c);
        if (simple && c) {
            static const char out[] = "\\'\"\a\b\f\n\r\t\v";
            if (c != '\n')
                jinja_buf_put(lx->rt, &b, &out[simple - "\\'\"abfnrtv\n"], 1);
        } else if (c >= '0' && c <= '7') {
            int v = c - '0';
            for (int k = 0; k < 2 && i < end_quote && s[i] >= '0' && s[i] <= '7'; k++)
                v = v * 8 + (s[i++] - '0');
            char u[4];
            jinja_buf_put(lx->rt, &b, u, jinja_utf8_encode(v, u));
        } else if (c == 'x' || c == 'u' || c == 'U') {
            int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            /* Up to 8 hex digits: accumulated unsigned (\UFFFFFFFF is 2^32 - 1). */
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i < end_quote ? hexval(s[i]) : -1;
                if (h < 0)
                    lex_fail(lx, i, "truncated escape in string literal", 0);
                v = v * 16u + (uint32_t)h;
                i++;
            }
            if (v > 0x10ffff)
                lex_fail(lx, i, "illegal Unicode character in string literal", 0);
            char u[4];
            jinja_buf_put(lx->rt, &b, u, jinja_utf8_encode((int32_t)v, u));
        } else if (c == 'N') {
            lex_fail(lx, i - 2, "\\N{...} escapes are not supported", 0);
        } else {
            jinja_buf_put(lx->rt, &b, s + i - 2, 2);
        }
    }
    jinja_tok *t = push(lx, JT_STRING, at);
    t->s = b.p ? b.p : "";
    t->n = b.len;
}

static size_t scan_digits(const lexer *lx, size_t i, int (*ok)(int))
{
    /* (\d+_)*\d+ style: digits with single underscores between them */
    size_t j = i;
    while (j < lx->n && ok((unsigned char)lx->src[j])) {
        j++;
        if (j + 1 < lx->n && lx->src[j] == '_' && ok((unsigned char)lx->src[j + 1]))
            j++;
    }
    return j;
}

static int is_dec(int c) { return c >= '0' && c <= '9'; }
static int is_hex(int c) { return hexval(c) >= 0; }
static int is_oct(int c) { return c >= '0' && c <= '7'; }
static int is_bin(int c) { return c == '0' || c == '1'; }

static int is_name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || is_dec(c);
}

static char *copy_clean(lexer *lx, size_t a, size_t b)
{
    char *out = jinja_alloc(lx->rt, b - a + 1);
    size_t k = 0;
    for (size_t i = a; i < b; i++)
        if (lx->src[i] != '_')
            out[k++] = lx->src[i];
    return out;
}

static size_t lex_number(lexer *lx, size_t i)
{
    const char *s = lx->src;
    if (s[i] == '0' && i + 2 < lx->n && strchr("xXoObB", s[i + 1]) && s[i + 1]) {
        int (*ok)(int) = (s[i + 1] | 32) == 'x' ? is_hex : (s[i + 1] | 32) == 'o' ? is_oct : is_bin;
        int base = (s[i + 1] | 32) == 'x' ? 16 : (s[i + 1] | 32) == 'o' ? 8 : 2;
        size_t j = i + 2;
        if (j < lx->n && s[j] == '_')
            j++;
        size_t e = scan_digits(lx, j, ok);
        if (e > j) {
            jinja_tok *t = push(lx, JT_INT, i);
            t->ival = (int64_t)strtoull(copy_clean(lx, j, e), NULL, base);
            return e;
        }
    }
    size_t e = scan_digits(lx, i, is_dec);
    size_t f = e;
    int is_float = 0;
    if (f + 1 < lx->n && s[f] == '.' && is_dec((unsigned char)s[f + 1])) {
        f = scan_digits(lx, f + 1, is_dec);
        is_float = 1;
    }
    if (f < lx->n && (s[f] | 32) == 'e') {
        size_t g = f + 1;
        if (g < lx->n && (s[g] == '+' || s[g] == '-'))
            g++;
        if (g < lx->n && is_dec((unsigned char)s[g])) {
            f = scan_digits(lx, g, is_dec);
            is_float = 1;
        }
    }
    if (is_float) {
        jinja_tok *t = push(lx, JT_FLOAT, i);
        t->fval = strtod(copy_clean(lx, i, f), NULL);
        return f;
    }
    char *txt = copy_clean(lx, i, e);
    errno = 0;
    long long v = strtoll(txt, NULL, 10);
    if (errno == ERANGE)
        lex_fail(lx, i, "integer literal too large", 0);
    jinja_tok *t = push(lx, JT_INT, i);
    t->ival = v;
    return e;
}

static const struct { const char *s; jinja_op op; } OPS[] = {
    {"//", JOP_FLOORDIV}, {"**", JOP_POW}, {"==", JOP_EQ}, {"!=", JOP_NE}, {">=", JOP_GE}, {"<=", JOP_LE},
    {"+", JOP_ADD}, {"-", JOP_SUB}, {"/", JOP_DIV}, {"*", JOP_MUL}, {"%", JOP_MOD}, {"~", JOP_TILDE},
    {"[", JOP_LBRACKET}, {"]", JOP_RBRACKET}, {"(", JOP_LPAREN}, {")", JOP_RPAREN}, {"{", JOP_LBRACE},
    {"}", JOP_RBRACE}, {">", JOP_GT}, {"<", JOP_LT}, {"=", JOP_ASSIGN}, {".", JOP_DOT}, {":", JOP_COLON},
    {"|", JOP_PIPE}, {",", JOP_COMMA}, {";", JOP_SEMICOLON},
};

const char *jinja_op_str(jinja_op op)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (OPS[i].op == op)
            return OPS[i].s;
    return "?";
}

/* Lexes the inside of "{{ ... }}" or "{% ... %}" starting at i; returns the
 * offset after the closing tag. */
static size_t lex_tag(lexer *lx, size_t i, int is_block)
{
    char stack[256];
    int depth = 0;
    for (;;) {
        i = skip_space(lx, i);
        advance(lx, i);
        if (i >= lx->n)
            lex_fail(lx, i, is_block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'", 0);
        if (depth == 0) {
            size_t end = 0;
            if (is_block) {
                if (starts(lx, i, "+%}"))
                    end = i + 3;
                else if (starts(lx, i, "-%}"))
                    end = skip_space(lx, i + 3);
                else if (starts(lx, i, "%}"))
                    end = i + 2 + (i + 2 < lx->n && lx->src[i + 2] == '\n');
            } else {
                if (starts(lx, i, "-}}"))
                    end = skip_space(lx, i + 3);
                else if (starts(lx, i, "}}"))
                    end = i + 2;
            }
            if (end) {
                push(lx, is_block ? JT_BLOCK_END : JT_VAR_END, i);
                advance(lx, end);
                lx->line_starting = lx->src[end - 1] == '\n';
                return end;
            }
        }
        char c = lx->src[i];
        if (is_dec((unsigned char)c)) {
            i = lex_number(lx, i);
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t j = i;
            while (j < lx->n && is_name_char((unsigned char)lx->src[j]))
                j++;
            jinja_tok *t = push(lx, JT_NAME, i);
            char *name = jinja_alloc(lx->rt, j - i + 1);
            memcpy(name, lx->src + i, j - i);
            t->s = name;
            t->n = j - i;
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < lx->n && lx->src[j] != c)
                j += lx->src[j] == '\\' ? 2 : 1;
            if (j >= lx->n)
                lex_fail(lx, i, "unexpected char", c);
            lex_string(lx, i, j);
            i = j + 1;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (starts(lx, i, OPS[k].s))
                break;
        if (k == sizeof OPS / sizeof OPS[0])
            lex_fail(lx, i, "unexpected char", (unsigned char)c < 0x80 && c >= 0x20 ? c : '?');
        jinja_op op = OPS[k].op;
        if (op == JOP_LBRACE || op == JOP_LPAREN || op == JOP_LBRACKET) {
            if (depth == (int)sizeof stack)
                lex_fail(lx, i, "brackets nested too deeply", 0);
            stack[depth++] = op == JOP_LBRACE ? '}' : op == JOP_LPAREN ? ')' : ']';
        } else if (op == JOP_RBRACE || op == JOP_RPAREN || op == JOP_RBRACKET) {
            if (depth == 0)
                lex_fail(lx, i, "unexpected", c);
            if (stack[--depth] != c)
                lex_fail(lx, i, "unexpected", c);
        }
        jinja_tok *t = push(lx, JT_OP, i);
        t->op = op;
        i += strlen(OPS[k].s);
    }
}

void jinja_lex(jinja_rt *rt, const char *src, size_t n, jinja_toks *out)
{
    lexer lx = {.rt = rt, .line = 1, .line_starting = 1};
    /* Newlines normalized to \n and one trailing newline dropped, as Jinja does. */
    char *s = jinja_alloc(rt, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n')
        k--;
    s[k] = 0;
    lx.src = s;
    lx.n = k;

    size_t pos = 0;
    while (pos < lx.n) {
        const char *q = NULL;
        for (size_t i = pos; i + 1 < lx.n; i++)
            if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
                q = s + i;
                break;
            }
        if (!q) {
            emit_data(&lx, pos, s + pos, lx.n - pos);
            advance(&lx, lx.n);
            break;
        }
        size_t at = (size_t)(q - s);
        char kind = q[1];
        int sign = at + 2 < lx.n && (q[2] == '-' || q[2] == '+') ? q[2] : 0;
        size_t raw_end = kind == '%' ? match_raw_begin(&lx, at) : 0;
        emit_text_before_tag(&lx, pos, at, sign, kind == '{');
        advance(&lx, at);
        size_t body = at + 2 + (sign ? 1 : 0);
        lx.line_starting = 0;
        if (raw_end) {
            lex_raw(&lx, raw_end);
            pos = lx.pos;
        } else if (kind == '#') {
            lex_comment(&lx, body);
            pos = lx.pos;
        } else {
            push(&lx, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, at);
            pos = lex_tag(&lx, body, kind == '%');
        }
    }
    push(&lx, JT_EOF, lx.n);
    out->toks = lx.toks;
    out->n = lx.ntoks;
}

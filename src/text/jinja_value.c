/* Jinja values: arena, constructors and the Python behaviour of truth,
 * equality, ordering, str() and repr(). */
#include "text/jinja_value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja_interp.h"

struct jinja_block {
    jinja_block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

enum { BLOCK_SIZE = 64 * 1024 };

void jinja_rt_init(jinja_rt *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->max_bytes = (size_t)512 << 20;
    rt->max_output = (size_t)64 << 20;
}

void jinja_rt_release(jinja_rt *rt)
{
    jinja_block *b = rt->blocks;
    while (b) {
        jinja_block *n = b->next;
        free(b);
        b = n;
    }
    rt->blocks = NULL;
    rt->bytes = 0;
}

_Noreturn void jinja_fail(jinja_rt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->msg, sizeof rt->msg, fmt, ap);
    va_end(ap);
    longjmp(*rt->jmp, 1);
}

void *jinja_alloc(jinja_rt *rt, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > rt->max_bytes || rt->bytes + n > rt->max_bytes)
        jinja_fail(rt, "memory limit of %zu MB exceeded", rt->max_bytes >> 20);
    jinja_block *b = rt->blocks;
    if (!b || b->size - b->used < n) {
        size_t size = n > BLOCK_SIZE / 4 ? n : BLOCK_SIZE;
        jinja_block *nb = malloc(sizeof *nb + size);
        if (!nb)
            jinja_fail(rt, "out of memory");
        nb->used = 0;
        nb->size = size;
        if (size == n && b) {   /* a big one-off: keep the current block for small ones */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            rt->blocks = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    rt->bytes += n;
    memset(p, 0, n);
    return p;
}

void jinja_buf_put(jinja_rt *rt, jinja_buf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > rt->max_output)
        jinja_fail(rt, "output larger than the limit of %zu MB", rt->max_output >> 20);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = jinja_alloc(rt, cap);
        if (b->len)
            memcpy(p, b->p, b->len);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jinja_buf_puts(jinja_rt *rt, jinja_buf *b, const char *s)
{
    jinja_buf_put(rt, b, s, strlen(s));
}

void jinja_buf_printf(jinja_rt *rt, jinja_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        jinja_buf_put(rt, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

jinja_val jinja_buf_to_str(jinja_rt *rt, const jinja_buf *b)
{
    return jinja_str_new(rt, b->p ? b->p : "", b->len);
}

jinja_val jinja_undef(const char *name)
{
    jinja_val v = {.kind = JV_UNDEF};
    v.u.undef_name = name;
    return v;
}

jinja_val jinja_none(void) { return (jinja_val){.kind = JV_NONE}; }

jinja_val jinja_bool(int b)
{
    jinja_val v = {.kind = JV_BOOL};
    v.u.b = b != 0;
    return v;
}

jinja_val jinja_int(int64_t i)
{
    jinja_val v = {.kind = JV_INT};
    v.u.i = i;
    return v;
}

jinja_val jinja_float(double f)
{
    jinja_val v = {.kind = JV_FLOAT};
    v.u.f = f;
    return v;
}

jinja_val jinja_str_new(jinja_rt *rt, const char *s, size_t n)
{
    if (n > rt->max_output)
        jinja_fail(rt, "string larger than the limit of %zu MB", rt->max_output >> 20);
    jinja_str *str = jinja_alloc(rt, sizeof *str + n + 1);
    str->len = n;
    if (n)
        memcpy(str->data, s, n);
    str->data[n] = 0;
    jinja_val v = {.kind = JV_STR};
    v.u.s = str;
    return v;
}

jinja_val jinja_cstr(jinja_rt *rt, const char *s) { return jinja_str_new(rt, s, strlen(s)); }

jinja_val jinja_list_new(jinja_rt *rt, size_t cap)
{
    jinja_list *l = jinja_alloc(rt, sizeof *l);
    if (cap) {
        l->items = jinja_alloc(rt, cap * sizeof *l->items);
        l->cap = cap;
    }
    jinja_val v = {.kind = JV_LIST};
    v.u.l = l;
    return v;
}

jinja_val jinja_iter_new(jinja_rt *rt, size_t cap, jinja_list_kind kind)
{
    jinja_val v = jinja_list_new(rt, cap);
    v.u.l->kind = kind;
    return v;
}

int jinja_is_plain_list(jinja_val v)
{
    return v.kind == JV_LIST && v.u.l->kind == JL_LIST;
}

void jinja_list_push(jinja_rt *rt, jinja_val list, jinja_val v)
{
    jinja_list *l = list.u.l;
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jinja_val *items = jinja_alloc(rt, cap * sizeof *items);
        if (l->len)
            memcpy(items, l->items, l->len * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = v;
}

jinja_val jinja_dict_new(jinja_rt *rt)
{
    jinja_val v = {.kind = JV_DICT};
    v.u.d = jinja_alloc(rt, sizeof *v.u.d);
    return v;
}

static long dict_find(const jinja_dict *d, jinja_val key)
{
    for (size_t i = 0; i < d->len; i++)
        if (jinja_equal(d->keys[i], key))
            return (long)i;
    return -1;
}

void jinja_dict_set(jinja_rt *rt, jinja_val dict, jinja_val key, jinja_val v)
{
    jinja_dict *d = dict.u.d;
    long at = dict_find(d, key);
    if (at >= 0) {
        d->vals[at] = v;
        return;
    }
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jinja_val *keys = jinja_alloc(rt, cap * sizeof *keys);
        jinja_val *vals = jinja_alloc(rt, cap * sizeof *vals);
        if (d->len) {
            memcpy(keys, d->keys, d->len * sizeof *keys);
            memcpy(vals, d->vals, d->len * sizeof *vals);
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->len] = key;
    d->vals[d->len] = v;
    d->len++;
}

int jinja_dict_get(jinja_val dict, jinja_val key, jinja_val *out)
{
    long at = dict_find(dict.u.d, key);
    if (at < 0)
        return 0;
    *out = dict.u.d->vals[at];
    return 1;
}

int jinja_dict_get_cstr(jinja_val dict, const char *key, jinja_val *out)
{
    const jinja_dict *d = dict.u.d;
    size_t n = strlen(key);
    for (size_t i = 0; i < d->len; i++) {
        jinja_val k = d->keys[i];
        if (k.kind == JV_STR && k.u.s->len == n && !memcmp(k.u.s->data, key, n)) {
            *out = d->vals[i];
            return 1;
        }
    }
    return 0;
}

int jinja_truthy(jinja_val v)
{
    switch (v.kind) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->kind == JL_GENERATOR || v.u.l->kind == JL_REVERSED || v.u.l->len != 0;
    case JV_DICT: return v.u.d->is_namespace || v.u.d->len != 0;
    case JV_FUNC: return 1;
    }
    return 0;
}

int jinja_is_number(jinja_val v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

double jinja_as_double(jinja_val v)
{
    switch (v.kind) {
    case JV_BOOL: return v.u.b;
    case JV_INT: return (double)v.u.i;
    case JV_FLOAT: return v.u.f;
    default: return 0.0;
    }
}

static int64_t as_int(jinja_val v) { return v.kind == JV_BOOL ? v.u.b : v.u.i; }

/* Values nested deeper than this (only a template building them in a loop can)
 * compare unequal and refuse to print instead of exhausting the C stack. */
enum { MAX_NESTING = 1000 };

static int equal_at(jinja_val a, jinja_val b, int depth);

int jinja_equal(jinja_val a, jinja_val b)
{
    return equal_at(a, b, 0);
}

static int equal_at(jinja_val a, jinja_val b, int depth)
{
    if (depth > MAX_NESTING)
        return 0;
    if (jinja_is_number(a) && jinja_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
            return as_int(a) == as_int(b);
        return jinja_as_double(a) == jinja_as_double(b);
    }
    if (a.kind != b.kind)
        return 0;
    switch (a.kind) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR:
        return a.u.s->len == b.u.s->len && !memcmp(a.u.s->data, b.u.s->data, a.u.s->len);
    case JV_LIST:
        if (a.u.l->kind == JL_GENERATOR || a.u.l->kind == JL_REVERSED)
            return a.u.l == b.u.l;
        if (a.u.l->is_tuple != b.u.l->is_tuple || a.u.l->kind != b.u.l->kind || a.u.l->len != b.u.l->len)
            return 0;
        for (size_t i = 0; i < a.u.l->len; i++)
            if (!equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1))
                return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->is_namespace || b.u.d->is_namespace)
            return a.u.d == b.u.d;
        if (a.u.d->len != b.u.d->len)
            return 0;
        for (size_t i = 0; i < a.u.d->len; i++) {
            jinja_val other;
            if (!jinja_dict_get(b, a.u.d->keys[i], &other) || !equal_at(a.u.d->vals[i], other, depth + 1))
                return 0;
        }
        return 1;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

static int compare_at(jinja_rt *rt, jinja_val a, jinja_val b, int depth);

int jinja_compare(jinja_rt *rt, jinja_val a, jinja_val b)
{
    return compare_at(rt, a, b, 0);
}

static int compare_at(jinja_rt *rt, jinja_val a, jinja_val b, int depth)
{
    if (depth > MAX_NESTING)
        jinja_fail(rt, "values nested deeper than %d", MAX_NESTING);
    if (jinja_is_number(a) && jinja_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
            return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b);
        double x = jinja_as_double(a), y = jinja_as_double(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        /* UTF-8 byte order is code point order. */
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->data, b.u.s->data, n);
        if (c)
            return c;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (jinja_is_plain_list(a) && jinja_is_plain_list(b) && a.u.l->is_tuple == b.u.l->is_tuple) {
        for (size_t i = 0; i < a.u.l->len && i < b.u.l->len; i++)
            if (!jinja_equal(a.u.l->items[i], b.u.l->items[i]))
                return compare_at(rt, a.u.l->items[i], b.u.l->items[i], depth + 1);
        return a.u.l->len < b.u.l->len ? -1 : a.u.l->len > b.u.l->len;
    }
    jinja_fail(rt, "'<' not supported between instances of '%s' and '%s'", jinja_type_name(a), jinja_type_name(b));
}

const char *jinja_type_name(jinja_val v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        switch (v.u.l->kind) {
        case JL_GENERATOR: return "generator";
        case JL_REVERSED: return "list_reverseiterator";
        case JL_DICT_ITEMS: return "dict_items";
        case JL_DICT_KEYS: return "dict_keys";
        case JL_DICT_VALUES: return "dict_values";
        default: return v.u.l->is_tuple ? "tuple" : "list";
        }
    case JV_DICT: return v.u.d->is_namespace ? "Namespace" : "dict";
    case JV_FUNC: return "function";
    }
    return "object";
}

void jinja_format_float(double f, char *out, size_t n)
{
    if (isnan(f)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, n, f < 0 ? "-inf" : "inf");
        return;
    }
    /* Shortest digits that read back to the same double, as Python's repr. */
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp = [-]d[.ddd]e[+-]xx */
    char digits[24];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char *o = out;
    size_t left = n;
#define EMIT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= w_; } while (0)
    if (neg)
        EMIT("-");
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            EMIT("0.");
            for (int i = 0; i < -exp - 1; i++)
                EMIT("0");
            EMIT("%s", digits);
        } else {
            for (int i = 0; i <= exp; i++)
                EMIT("%c", i < nd ? digits[i] : '0');
            EMIT(".");
            if (nd > exp + 1)
                EMIT("%s", digits + exp + 1);
            else
                EMIT("0");
        }
    } else {
        EMIT("%c", digits[0]);
        if (nd > 1)
            EMIT(".%s", digits + 1);
        EMIT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef EMIT
}

static int is_printable(int32_t cp)
{
    if (cp == ' ')
        return 1;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return 0;
    default:
        return 1;
    }
}

static void write_str_repr(jinja_rt *rt, jinja_buf *b, const jinja_str *s)
{
    int has_sq = memchr(s->data, '\'', s->len) != NULL, has_dq = memchr(s->data, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jinja_buf_put(rt, b, &q, 1);
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        size_t n = jinja_utf8_decode(s->data + i, s->len - i, &cp);
        if (cp == q || cp == '\\') {
            char e[2] = {'\\', (char)cp};
            jinja_buf_put(rt, b, e, 2);
        } else if (cp == '\n') {
            jinja_buf_puts(rt, b, "\\n");
        } else if (cp == '\r') {
            jinja_buf_puts(rt, b, "\\r");
        } else if (cp == '\t') {
            jinja_buf_puts(rt, b, "\\t");
        } else if (cp < 0x20 || cp == 0x7f) {
            jinja_buf_printf(rt, b, "\\x%02x", cp);
        } else if (cp >= 0x80 && !is_printable(cp)) {
            if (cp < 0x100)
                jinja_buf_printf(rt, b, "\\x%02x", cp);
            else if (cp < 0x10000)
                jinja_buf_printf(rt, b, "\\u%04x", cp);
            else
                jinja_buf_printf(rt, b, "\\U%08x", cp);
        } else {
            jinja_buf_put(rt, b, s->data + i, n);
        }
        i += n;
    }
    jinja_buf_put(rt, b, &q, 1);
}

static void repr_at(jinja_rt *rt, jinja_buf *b, jinja_val v, int depth);

void jinja_write_repr(jinja_rt *rt, jinja_buf *b, jinja_val v)
{
    repr_at(rt, b, v, 0);
}

static void repr_at(jinja_rt *rt, jinja_buf *b, jinja_val v, int depth)
{
    if (depth > MAX_NESTING)
        jinja_fail(rt, "values nested deeper than %d", MAX_NESTING);
    if (v.kind == JV_STR) {
        write_str_repr(rt, b, v.u.s);
    } else if (v.kind == JV_LIST && (v.u.l->kind == JL_GENERATOR || v.u.l->kind == JL_REVERSED)) {
        jinja_buf_printf(rt, b, "<%s object>", jinja_type_name(v));
    } else if (v.kind == JV_LIST) {
        if (v.u.l->kind != JL_LIST)
            jinja_buf_printf(rt, b, "%s(", jinja_type_name(v));
        jinja_buf_puts(rt, b, v.u.l->is_tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->len; i++) {
            if (i)
                jinja_buf_puts(rt, b, ", ");
            repr_at(rt, b, v.u.l->items[i], depth + 1);
        }
        if (v.u.l->is_tuple && v.u.l->len == 1)
            jinja_buf_puts(rt, b, ",");
        jinja_buf_puts(rt, b, v.u.l->is_tuple ? ")" : "]");
        if (v.u.l->kind != JL_LIST)
            jinja_buf_puts(rt, b, ")");
    } else if (v.kind == JV_DICT) {
        jinja_buf_puts(rt, b, v.u.d->is_namespace ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.u.d->len; i++) {
            if (i)
                jinja_buf_puts(rt, b, ", ");
            repr_at(rt, b, v.u.d->keys[i], depth + 1);
            jinja_buf_puts(rt, b, ": ");
            repr_at(rt, b, v.u.d->vals[i], depth + 1);
        }
        jinja_buf_puts(rt, b, v.u.d->is_namespace ? "}>" : "}");
    } else if (v.kind == JV_UNDEF) {
        jinja_buf_puts(rt, b, "Undefined");
    } else {
        jinja_write_str(rt, b, v);
    }
}

void jinja_write_str(jinja_rt *rt, jinja_buf *b, jinja_val v)
{
    char tmp[48];
    switch (v.kind) {
    case JV_UNDEF: return;
    case JV_NONE: jinja_buf_puts(rt, b, "None"); return;
    case JV_BOOL: jinja_buf_puts(rt, b, v.u.b ? "True" : "False"); return;
    case JV_INT: jinja_buf_printf(rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        jinja_format_float(v.u.f, tmp, sizeof tmp);
        jinja_buf_puts(rt, b, tmp);
        return;
    case JV_STR: jinja_buf_put(rt, b, v.u.s->data, v.u.s->len); return;
    case JV_FUNC: jinja_buf_printf(rt, b, "<function %s>", jinja_func_name(v.u.fn)); return;
    default: jinja_write_repr(rt, b, v); return;
    }
}

jinja_val jinja_to_str(jinja_rt *rt, jinja_val v)
{
    if (v.kind == JV_STR)
        return v;
    jinja_buf b = {0};
    jinja_write_str(rt, &b, v);
    return jinja_buf_to_str(rt, &b);
}

size_t jinja_utf8_decode(const char *s, size_t n, int32_t *cp)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (k <= 0) {   /* invalid byte: treat it as one code point of its own */
        *cp = (unsigned char)s[0];
        return 1;
    }
    *cp = c;
    return (size_t)k;
}

size_t jinja_utf8_encode(int32_t cp, char *out)
{
    utf8proc_ssize_t k = utf8proc_encode_char(cp, (utf8proc_uint8_t *)out);
    return k > 0 ? (size_t)k : 0;
}

size_t jinja_utf8_count(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
        } else {
            int32_t cp;
            i += jinja_utf8_decode(s + i, n - i, &cp);
        }
        count++;
    }
    return count;
}

size_t jinja_utf8_offset(const char *s, size_t n, size_t cp_index)
{
    size_t i = 0;
    for (size_t k = 0; k < cp_index && i < n; k++) {
        int32_t cp;
        i += (unsigned char)s[i] < 0x80 ? 1 : jinja_utf8_decode(s + i, n - i, &cp);
    }
    return i;
}

int jinja_is_space(int32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f))
        return 1;
    if (cp < 0x80)
        return 0;
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* JSON in and out: jansson values → Jinja values (object key order kept), and
 * Python's json.dumps for the tojson filter, byte for byte (separators,
 * indentation, float repr, escaping with and without ensure_ascii). */
#include "text/jinja_interp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { MAX_JSON_DEPTH = 200 };

static jinja_val from_json(jinja_rt *rt, const json_t *j, int depth)
{
    if (depth > MAX_JSON_DEPTH)
        jinja_fail(rt, "JSON input nested deeper than %d", MAX_JSON_DEPTH);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jinja_val d = jinja_dict_new(rt);
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)j, key, val)
            jinja_dict_set(rt, d, jinja_cstr(rt, key), from_json(rt, val, depth + 1));
        return d;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jinja_val l = jinja_list_new(rt, n);
        for (size_t i = 0; i < n; i++)
            jinja_list_push(rt, l, from_json(rt, json_array_get(j, i), depth + 1));
        return l;
    }
    case JSON_STRING:
        return jinja_str_new(rt, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return jinja_int((int64_t)json_integer_value(j));
    case JSON_REAL:
        return jinja_float(json_real_value(j));
    case JSON_TRUE:
        return jinja_bool(1);
    case JSON_FALSE:
        return jinja_bool(0);
    default:
        return jinja_none();
    }
}

jinja_val jinja_from_json(jinja_rt *rt, const json_t *j)
{
    return from_json(rt, j, 0);
}

static void put_escaped(jinja_ctx *c, jinja_buf *b, const char *s, size_t n, int ensure_ascii)
{
    jinja_buf_put(c->rt, b, "\"", 1);
    size_t run = 0;   /* start of the pending run of bytes copied as they are */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t k = 1;
        int32_t cp = ch;
        if (ch >= 0x80)
            k = jinja_utf8_decode(s + i, n - i, &cp);
        switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp > 0x7e)) {
                if (cp >= 0x10000) {
                    int32_t v = cp - 0x10000;
                    snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 | (v >> 10), 0xdc00 | (v & 0x3ff));
                } else {
                    snprintf(tmp, sizeof tmp, "\\u%04x", cp);
                }
                esc = tmp;
            }
        }
        if (esc) {
            jinja_buf_put(c->rt, b, s + run, i - run);
            jinja_buf_puts(c->rt, b, esc);
            run = i + k;
        }
        i += k;
    }
    jinja_buf_put(c->rt, b, s + run, n - run);
    jinja_buf_put(c->rt, b, "\"", 1);
}

typedef struct {
    int indent;               /* -1: no newlines */
    const char *indent_str;   /* replaces `indent` spaces when set */
    const char *item_sep, *key_sep;
    int sort_keys, ensure_ascii;
} json_opts;

static void newline_indent(jinja_ctx *c, jinja_buf *b, const json_opts *o, int level)
{
    jinja_buf_put(c->rt, b, "\n", 1);
    for (int l = 0; l < level; l++) {
        if (o->indent_str)
            jinja_buf_puts(c->rt, b, o->indent_str);
        else
            for (int i = 0; i < o->indent; i++)
                jinja_buf_put(c->rt, b, " ", 1);
    }
}

static void put_float(jinja_ctx *c, jinja_buf *b, double f)
{
    if (isnan(f)) {
        jinja_buf_puts(c->rt, b, "NaN");
    } else if (isinf(f)) {
        jinja_buf_puts(c->rt, b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        char tmp[48];
        jinja_format_float(f, tmp, sizeof tmp);
        jinja_buf_puts(c->rt, b, tmp);
    }
}

static void put_key(jinja_ctx *c, jinja_buf *b, jinja_val k, const json_opts *o)
{
    switch (k.kind) {
    case JV_STR: put_escaped(c, b, k.u.s->data, k.u.s->len, o->ensure_ascii); return;
    case JV_INT: jinja_buf_printf(c->rt, b, "\"%lld\"", (long long)k.u.i); return;
    case JV_BOOL: jinja_buf_puts(c->rt, b, k.u.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: jinja_buf_puts(c->rt, b, "\"null\""); return;
    case JV_FLOAT:
        jinja_buf_puts(c->rt, b, "\"");
        put_float(c, b, k.u.f);
        jinja_buf_puts(c->rt, b, "\"");
        return;
    default:
        jinja_fail(c->rt, "keys must be str, int, float, bool or None, not %s", jinja_type_name(k));
    }
}

static void dump(jinja_ctx *c, jinja_buf *b, jinja_val v, const json_opts *o, int level)
{
    if (level > MAX_JSON_DEPTH)
        jinja_fail(c->rt, "tojson: value nested deeper than %d (circular reference?)", MAX_JSON_DEPTH);
    switch (v.kind) {
    case JV_NONE: jinja_buf_puts(c->rt, b, "null"); return;
    case JV_BOOL: jinja_buf_puts(c->rt, b, v.u.b ? "true" : "false"); return;
    case JV_INT: jinja_buf_printf(c->rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: put_float(c, b, v.u.f); return;
    case JV_STR: put_escaped(c, b, v.u.s->data, v.u.s->len, o->ensure_ascii); return;
    case JV_LIST:
        if (v.u.l->kind != JL_LIST)
            break;
        if (v.u.l->len == 0) {
            jinja_buf_puts(c->rt, b, "[]");
            return;
        }
        jinja_buf_puts(c->rt, b, "[");
        for (size_t i = 0; i < v.u.l->len; i++) {
            if (i)
                jinja_buf_puts(c->rt, b, o->item_sep);
            if (o->indent >= 0)
                newline_indent(c, b, o, level + 1);
            dump(c, b, v.u.l->items[i], o, level + 1);
        }
        if (o->indent >= 0)
            newline_indent(c, b, o, level);
        jinja_buf_puts(c->rt, b, "]");
        return;
    case JV_DICT: {
        if (v.u.d->is_namespace)
            break;
        size_t n = v.u.d->len;
        if (n == 0) {
            jinja_buf_puts(c->rt, b, "{}");
            return;
        }
        size_t *order = jinja_alloc(c->rt, n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        if (o->sort_keys)   /* insertion sort keeps it stable and dicts are small */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && jinja_compare(c->rt, v.u.d->keys[order[j]], v.u.d->keys[order[j - 1]]) < 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        jinja_buf_puts(c->rt, b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                jinja_buf_puts(c->rt, b, o->item_sep);
            if (o->indent >= 0)
                newline_indent(c, b, o, level + 1);
            put_key(c, b, v.u.d->keys[order[i]], o);
            jinja_buf_puts(c->rt, b, o->key_sep);
            dump(c, b, v.u.d->vals[order[i]], o, level + 1);
        }
        if (o->indent >= 0)
            newline_indent(c, b, o, level);
        jinja_buf_puts(c->rt, b, "}");
        return;
    }
    default:
        break;
    }
    jinja_fail(c->rt, "Object of type %s is not JSON serializable", jinja_type_name(v));
}

void jinja_tojson(jinja_ctx *c, jinja_buf *b, jinja_val v, int indent, const char *indent_str,
                  const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii)
{
    json_opts o = {indent, indent_str, item_sep, key_sep, sort_keys, ensure_ascii};
    if (!o.item_sep)
        o.item_sep = indent >= 0 ? "," : ", ";
    if (!o.key_sep)
        o.key_sep = ": ";
    dump(c, b, v, &o, 0);
}

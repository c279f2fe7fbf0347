/* Jinja filters with the behaviour of Jinja2 3.1's built-ins, except tojson,
 * which is transformers' override (json.dumps without HTML escaping). */
#include "text/jinja_interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef jinja_val (*filter_fn)(jinja_ctx *c, jinja_val v, const jinja_args *a);

static jinja_val none(void) { return jinja_none(); }

/* Jinja's make_attrgetter: "a.b.0" looks up item by item (ints for digits). */
static jinja_val attr_path(jinja_ctx *c, jinja_val v, jinja_val path)
{
    if (path.kind == JV_INT)
        return jinja_getitem(c, v, path);
    path = jinja_to_str(c->rt, path);
    const char *p = path.u.s->data;
    while (1) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        int digits = n > 0;
        for (size_t i = 0; i < n; i++)
            digits &= p[i] >= '0' && p[i] <= '9';
        jinja_val key = digits ? jinja_int(strtoll(p, NULL, 10)) : jinja_str_new(c->rt, p, n);
        if (v.kind == JV_UNDEF)
            return v;
        v = jinja_getitem(c, v, key);
        if (!dot)
            return v;
        p = dot + 1;
    }
}

static jinja_val f_length(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_int(jinja_len(c, v)); }

static jinja_val f_default(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val dflt = jinja_arg(a, 0, "default_value", jinja_cstr(c->rt, ""));
    int boolean = jinja_truthy(jinja_arg(a, 1, "boolean", jinja_bool(0)));
    if (v.kind == JV_UNDEF || (boolean && !jinja_truthy(v)))
        return dflt;
    return v;
}

static jinja_val f_join(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val sep = jinja_to_str(c->rt, jinja_arg(a, 0, "d", jinja_cstr(c->rt, "")));
    jinja_val attr = jinja_arg(a, 1, "attribute", none());
    jinja_val items = jinja_iterable_list(c, v);
    jinja_buf b = {0};
    for (size_t i = 0; i < items.u.l->len; i++) {
        if (i)
            jinja_buf_put(c->rt, &b, sep.u.s->data, sep.u.s->len);
        jinja_val x = items.u.l->items[i];
        if (attr.kind != JV_NONE)
            x = attr_path(c, x, attr);
        jinja_write_str(c->rt, &b, x);
    }
    return jinja_buf_to_str(c->rt, &b);
}

static jinja_val f_trim(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    return jinja_str_strip(c, v, jinja_arg(a, 0, "chars", none()), 1, 1);
}

static jinja_val f_upper(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_str_case(c, v, 1); }
static jinja_val f_lower(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_str_case(c, v, 0); }
static jinja_val f_capitalize(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_str_case(c, v, 3); }
static jinja_val f_title(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_str_case(c, v, 4); }
static jinja_val markup(jinja_ctx *c, jinja_val s)
{
    jinja_val m = jinja_str_new(c->rt, s.u.s->data, s.u.s->len);
    m.u.s->markup = 1;
    return m;
}

static jinja_val f_safe(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    v = jinja_to_str(c->rt, v);
    return v.u.s->markup ? v : markup(c, v);
}
static jinja_val f_string(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_to_str(c->rt, v); }

static jinja_val f_tojson(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    /* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    int ensure_ascii = jinja_truthy(jinja_arg(a, 0, "ensure_ascii", jinja_bool(0)));
    jinja_val indent = jinja_arg(a, 1, "indent", none());
    jinja_val seps = jinja_arg(a, 2, "separators", none());
    int sort_keys = jinja_truthy(jinja_arg(a, 3, "sort_keys", jinja_bool(0)));
    const char *item_sep = NULL, *key_sep = NULL, *indent_str = NULL;
    int ind = -1;
    if (indent.kind == JV_INT || indent.kind == JV_BOOL)
        ind = indent.kind == JV_BOOL ? indent.u.b : (indent.u.i < 0 ? 0 : (int)(indent.u.i > 64 ? 64 : indent.u.i));
    else if (indent.kind == JV_STR)
        indent_str = indent.u.s->data, ind = 0;
    else if (indent.kind != JV_NONE)
        jinja_fail(c->rt, "tojson: indent must be an integer or a string");
    if (seps.kind == JV_LIST) {
        if (seps.u.l->len != 2 || seps.u.l->items[0].kind != JV_STR || seps.u.l->items[1].kind != JV_STR)
            jinja_fail(c->rt, "tojson: separators must be a pair of strings");
        item_sep = seps.u.l->items[0].u.s->data;
        key_sep = seps.u.l->items[1].u.s->data;
    } else if (seps.kind != JV_NONE) {
        jinja_fail(c->rt, "tojson: separators must be a pair of strings");
    }
    jinja_buf b = {0};
    jinja_tojson(c, &b, v, ind, indent_str, item_sep, key_sep, sort_keys, ensure_ascii);
    return jinja_buf_to_str(c->rt, &b);
}

static jinja_val f_items(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    if (v.kind == JV_UNDEF)
        return jinja_list_new(c->rt, 0);
    if (v.kind != JV_DICT || v.u.d->is_namespace)
        jinja_fail(c->rt, "can only get item pairs from a mapping");
    jinja_val items = jinja_call_method(c, v, "items", a);
    items.u.l->kind = JL_GENERATOR;
    return items;
}

/* select / reject / selectattr / rejectattr */
static jinja_val select_common(jinja_ctx *c, jinja_val v, const jinja_args *a, int by_attr, int keep_when)
{
    /* Jinja yields nothing for a false input (None included) */
    jinja_val out = jinja_iter_new(c->rt, 0, JL_GENERATOR);
    if (!jinja_truthy(v))
        return out;
    jinja_val items = jinja_iterable_list(c, v);
    size_t first = by_attr ? 1 : 0;
    jinja_val attr = by_attr ? jinja_arg(a, 0, NULL, none()) : none();
    if (by_attr && attr.kind == JV_NONE)
        jinja_fail(c->rt, "missing parameter for attribute name");
    jinja_val test = jinja_arg(a, first, NULL, none());
    jinja_args targs = {a->pos + (a->npos > first + 1 ? first + 1 : a->npos), a->npos > first + 1 ? a->npos - first - 1 : 0,
                        a->kwnames, a->kwvals, a->nkw};
    if (test.kind != JV_NONE && test.kind != JV_STR)
        jinja_fail(c->rt, "test name must be a string");
    for (size_t i = 0; i < items.u.l->len; i++) {
        jinja_step(c);
        jinja_val x = items.u.l->items[i], y = by_attr ? attr_path(c, x, attr) : x;
        int ok = test.kind == JV_STR ? jinja_test(c, test.u.s->data, y, &targs) : jinja_truthy(y);
        if (ok == keep_when)
            jinja_list_push(c->rt, out, x);
    }
    return out;
}

static jinja_val f_select(jinja_ctx *c, jinja_val v, const jinja_args *a) { return select_common(c, v, a, 0, 1); }
static jinja_val f_reject(jinja_ctx *c, jinja_val v, const jinja_args *a) { return select_common(c, v, a, 0, 0); }
static jinja_val f_selectattr(jinja_ctx *c, jinja_val v, const jinja_args *a) { return select_common(c, v, a, 1, 1); }
static jinja_val f_rejectattr(jinja_ctx *c, jinja_val v, const jinja_args *a) { return select_common(c, v, a, 1, 0); }

static jinja_val f_map(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    if (!jinja_truthy(v))
        return jinja_iter_new(c->rt, 0, JL_GENERATOR);
    jinja_val items = jinja_iterable_list(c, v), out = jinja_iter_new(c->rt, items.u.l->len, JL_GENERATOR);
    jinja_val attr = jinja_arg(a, (size_t)-1, "attribute", none());
    if (attr.kind != JV_NONE) {
        jinja_val dflt = jinja_arg(a, (size_t)-1, "default", jinja_undef(NULL));
        for (size_t i = 0; i < items.u.l->len; i++) {
            jinja_val x = attr_path(c, items.u.l->items[i], attr);
            jinja_list_push(c->rt, out, x.kind == JV_UNDEF && dflt.kind != JV_UNDEF ? dflt : x);
        }
        return out;
    }
    if (a->npos == 0 || a->pos[0].kind != JV_STR)
        jinja_fail(c->rt, "map requires a filter name or attribute=");
    const char *name = a->pos[0].u.s->data;
    jinja_args fargs = {a->pos + 1, a->npos - 1, a->kwnames, a->kwvals, a->nkw};
    for (size_t i = 0; i < items.u.l->len; i++) {
        jinja_step(c);
        jinja_list_push(c->rt, out, jinja_filter(c, name, items.u.l->items[i], &fargs));
    }
    return out;
}

static jinja_val f_first(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val items = jinja_iterable_list(c, v);
    return items.u.l->len ? items.u.l->items[0] : jinja_undef("no first item, sequence was empty");
}

static jinja_val f_last(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val items = jinja_iterable_list(c, v);
    return items.u.l->len ? items.u.l->items[items.u.l->len - 1] : jinja_undef("no last item, sequence was empty");
}

static jinja_val f_list(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val items = jinja_iterable_list(c, v), out = jinja_list_new(c->rt, items.u.l->len);
    for (size_t i = 0; i < items.u.l->len; i++)
        jinja_list_push(c->rt, out, items.u.l->items[i]);
    return out;
}

/* Python int(str) / float(str): optional whitespace, sign, underscores between digits. */
static int parse_number(const char *s, int want_int, int base, int64_t *iv, double *fv)
{
    while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
        s++;
    char clean[128];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof clean; p++)
        if (*p != '_')
            clean[k++] = *p;
    clean[k] = 0;
    while (k && (clean[k - 1] == ' ' || (clean[k - 1] >= '\t' && clean[k - 1] <= '\r')))
        clean[--k] = 0;
    if (!k)
        return 0;
    char *end = clean;
    if (want_int) {
        /* Python's int() takes base 0 or 2..36 (else ValueError, which the
         * filter turns into its default); strtoll would not set end. */
        if (base != 0 && (base < 2 || base > 36))
            return 0;
        long long x = strtoll(clean, &end, base);
        if (*end == 0) {
            *iv = x;
            return 1;
        }
        return 0;
    }
    double d = strtod(clean, &end);
    if (*end != 0 || (clean[0] == '0' && (clean[1] | 32) == 'x') || ((clean[0] == '-' || clean[0] == '+') && (clean[2] | 32) == 'x'))
        return 0;
    *fv = d;
    return 1;
}

static jinja_val f_int(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val dflt = jinja_arg(a, 0, "default", jinja_int(0));
    jinja_val basev = jinja_arg(a, 1, "base", jinja_int(10));
    int base = basev.kind == JV_INT ? (int)basev.u.i : 10;
    if (v.kind == JV_UNDEF)   /* int(Undefined) raises in Jinja */
        jinja_fail(c->rt, "%s", v.u.undef_name ? v.u.undef_name : "value is undefined");
    if (v.kind == JV_INT)
        return v;
    if (v.kind == JV_BOOL)
        return jinja_int(v.u.b);
    if (v.kind == JV_FLOAT)
        return isfinite(v.u.f) && fabs(v.u.f) < 9.2e18 ? jinja_int((int64_t)v.u.f) : dflt;
    if (v.kind == JV_STR) {
        int64_t iv;
        double fv;
        if (parse_number(v.u.s->data, 1, base, &iv, &fv))
            return jinja_int(iv);
        if (parse_number(v.u.s->data, 0, 10, &iv, &fv) && isfinite(fv) && fabs(fv) < 9.2e18)
            return jinja_int((int64_t)fv);
    }
    return dflt;
}

static jinja_val f_float(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val dflt = jinja_arg(a, 0, "default", jinja_float(0.0));
    if (v.kind == JV_UNDEF)
        jinja_fail(c->rt, "%s", v.u.undef_name ? v.u.undef_name : "value is undefined");
    if (jinja_is_number(v))
        return jinja_float(jinja_as_double(v));
    if (v.kind == JV_STR) {
        int64_t iv;
        double fv;
        if (parse_number(v.u.s->data, 0, 10, &iv, &fv))
            return jinja_float(fv);
    }
    return dflt;
}

static jinja_val f_abs(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    if (v.kind == JV_FLOAT)
        return jinja_float(fabs(v.u.f));
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        int64_t x = v.kind == JV_BOOL ? v.u.b : v.u.i;
        if (x == INT64_MIN)
            jinja_fail(c->rt, "integer overflow");
        return jinja_int(x < 0 ? -x : x);
    }
    jinja_fail(c->rt, "bad operand type for abs(): '%s'", jinja_type_name(v));
}

static jinja_val f_round(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val pv = jinja_arg(a, 0, "precision", jinja_int(0));
    jinja_val method = jinja_arg(a, 1, "method", jinja_cstr(c->rt, "common"));
    if (!jinja_is_number(v))
        jinja_fail(c->rt, "round: value must be a number, not %s", jinja_type_name(v));
    if (pv.kind != JV_INT)
        jinja_fail(c->rt, "round: precision must be an integer");
    int p = (int)(pv.u.i < -300 ? -300 : pv.u.i > 300 ? 300 : pv.u.i);
    const char *m = method.kind == JV_STR ? method.u.s->data : "";
    double x = jinja_as_double(v);
    if (!strcmp(m, "common")) {
        if (v.kind != JV_FLOAT)
            return v.kind == JV_BOOL ? jinja_int(v.u.b) : v;
        if (p >= 0 && isfinite(x)) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", p, x);   /* correctly rounded, half to even, as Python's round */
            return jinja_float(strtod(buf, NULL));
        }
        double scale = pow(10.0, -p);
        return jinja_float(nearbyint(x / scale) * scale);
    }
    if (strcmp(m, "ceil") && strcmp(m, "floor"))
        jinja_fail(c->rt, "method must be common, ceil or floor");
    double scale = pow(10.0, p);
    return jinja_float((m[0] == 'c' ? ceil(x * scale) : floor(x * scale)) / scale);
}

static jinja_val f_replace(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val old = jinja_arg(a, 0, "old", none()), repl = jinja_arg(a, 1, "new", none());
    jinja_val count = jinja_arg(a, 2, "count", none());
    return jinja_str_replace(c, v, jinja_to_str(c->rt, old), jinja_to_str(c->rt, repl),
                             count.kind == JV_INT ? count.u.i : -1);
}

/* Sort key: lower-cased strings unless case-sensitive, optionally an attribute. */
static jinja_val sort_key(jinja_ctx *c, jinja_val x, jinja_val attr, int case_sensitive)
{
    if (attr.kind != JV_NONE)
        x = attr_path(c, x, attr);
    if (!case_sensitive && x.kind == JV_STR)
        x = jinja_str_case(c, x, 0);
    return x;
}

/* Stable merge sort of idx by keys (jinja_compare may fail the render). */
static void merge_sort(jinja_ctx *c, size_t *idx, size_t *tmp, size_t n, const jinja_val *keys, int reverse)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(c, idx, tmp, h, keys, reverse);
    merge_sort(c, idx + h, tmp, n - h, keys, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = jinja_compare(c->rt, keys[idx[j]], keys[idx[i]]);
        if (reverse ? r > 0 : r < 0)
            tmp[k++] = idx[j++];
        else
            tmp[k++] = idx[i++];
    }
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

static jinja_val sorted(jinja_ctx *c, jinja_val items, jinja_val *keys, int reverse)
{
    size_t n = items.u.l->len;
    size_t *idx = jinja_alloc(c->rt, (n + 1) * sizeof *idx), *tmp = jinja_alloc(c->rt, (n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    merge_sort(c, idx, tmp, n, keys, reverse);
    jinja_val out = jinja_list_new(c->rt, n);
    for (size_t i = 0; i < n; i++)
        jinja_list_push(c->rt, out, items.u.l->items[idx[i]]);
    return out;
}

static jinja_val f_sort(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    int reverse = jinja_truthy(jinja_arg(a, 0, "reverse", jinja_bool(0)));
    int cs = jinja_truthy(jinja_arg(a, 1, "case_sensitive", jinja_bool(0)));
    jinja_val attr = jinja_arg(a, 2, "attribute", none());
    jinja_val items = jinja_iterable_list(c, v);
    jinja_val *keys = jinja_alloc(c->rt, (items.u.l->len + 1) * sizeof *keys);
    for (size_t i = 0; i < items.u.l->len; i++)
        keys[i] = sort_key(c, items.u.l->items[i], attr, cs);
    return sorted(c, items, keys, reverse);
}

static jinja_val f_dictsort(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    int cs = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(0)));
    jinja_val by = jinja_arg(a, 1, "by", jinja_cstr(c->rt, "key"));
    int reverse = jinja_truthy(jinja_arg(a, 2, "reverse", jinja_bool(0)));
    if (v.kind != JV_DICT || v.u.d->is_namespace)
        jinja_fail(c->rt, "dictsort needs a mapping");
    int pos = by.kind == JV_STR && !strcmp(by.u.s->data, "value") ? 1 : 0;
    if (!pos && !(by.kind == JV_STR && !strcmp(by.u.s->data, "key")))
        jinja_fail(c->rt, "you can only sort by either \"key\" or \"value\"");
    jinja_val items = jinja_call_method(c, v, "items", a);
    jinja_val *keys = jinja_alloc(c->rt, (items.u.l->len + 1) * sizeof *keys);
    for (size_t i = 0; i < items.u.l->len; i++)
        keys[i] = sort_key(c, items.u.l->items[i].u.l->items[pos], none(), cs);
    return sorted(c, items, keys, reverse);
}

static jinja_val f_unique(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    int cs = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(0)));
    jinja_val attr = jinja_arg(a, 1, "attribute", none());
    jinja_val items = jinja_iterable_list(c, v), out = jinja_iter_new(c->rt, 0, JL_GENERATOR);
    jinja_val seen = jinja_list_new(c->rt, 0);
    for (size_t i = 0; i < items.u.l->len; i++) {
        jinja_val k = sort_key(c, items.u.l->items[i], attr, cs);
        int dup = 0;
        for (size_t j = 0; j < seen.u.l->len && !dup; j++)
            dup = jinja_equal(seen.u.l->items[j], k);
        jinja_step(c);
        if (!dup) {
            jinja_list_push(c->rt, seen, k);
            jinja_list_push(c->rt, out, items.u.l->items[i]);
        }
    }
    return out;
}

static jinja_val f_reverse(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    if (v.kind == JV_STR) {
        jinja_val chars = jinja_iterable_list(c, v);
        jinja_buf b = {0};
        for (size_t i = chars.u.l->len; i > 0; i--)
            jinja_buf_put(c->rt, &b, chars.u.l->items[i - 1].u.s->data, chars.u.l->items[i - 1].u.s->len);
        return jinja_buf_to_str(c->rt, &b);
    }
    jinja_val items = jinja_iterable_list(c, v);
    jinja_val out = jinja_iter_new(c->rt, items.u.l->len, jinja_is_plain_list(v) ? JL_REVERSED : JL_LIST);
    for (size_t i = items.u.l->len; i > 0; i--)
        jinja_list_push(c->rt, out, items.u.l->items[i - 1]);
    return out;
}

static jinja_val f_batch(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val count = jinja_arg(a, 0, "linecount", none());
    jinja_val fill = jinja_arg(a, 1, "fill_with", none());
    if (count.kind != JV_INT || count.u.i <= 0)
        jinja_fail(c->rt, "batch: linecount must be a positive integer");
    jinja_val items = jinja_iterable_list(c, v), out = jinja_iter_new(c->rt, 0, JL_GENERATOR);
    jinja_val cur = jinja_list_new(c->rt, 0);
    for (size_t i = 0; i < items.u.l->len; i++) {
        if ((int64_t)cur.u.l->len == count.u.i) {
            jinja_list_push(c->rt, out, cur);
            cur = jinja_list_new(c->rt, 0);
        }
        jinja_list_push(c->rt, cur, items.u.l->items[i]);
    }
    if (cur.u.l->len) {
        if (fill.kind != JV_NONE)
            while ((int64_t)cur.u.l->len < count.u.i)
                jinja_list_push(c->rt, cur, fill);
        jinja_list_push(c->rt, out, cur);
    }
    return out;
}

static jinja_val f_indent(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val width = jinja_arg(a, 0, "width", jinja_int(4));
    int first = jinja_truthy(jinja_arg(a, 1, "first", jinja_bool(0)));
    int blank = jinja_truthy(jinja_arg(a, 2, "blank", jinja_bool(0)));
    jinja_val ind;
    if (width.kind == JV_STR) {
        ind = width;
    } else if (width.kind == JV_INT) {
        jinja_buf b = {0};
        for (int64_t i = 0; i < width.u.i && i < 1000; i++)
            jinja_buf_put(c->rt, &b, " ", 1);
        ind = jinja_buf_to_str(c->rt, &b);
    } else {
        jinja_fail(c->rt, "indent: width must be an integer or a string");
    }
    jinja_val s = jinja_binop(c, JOP_ADD, v, jinja_cstr(c->rt, "\n"));   /* non-str input fails, as in Jinja */
    jinja_args none_args = {0};
    jinja_val lines = jinja_call_method(c, s, "splitlines", &none_args);
    jinja_buf b = {0};
    if (first)
        jinja_buf_put(c->rt, &b, ind.u.s->data, ind.u.s->len);
    for (size_t i = 0; i < lines.u.l->len; i++) {
        jinja_val line = lines.u.l->items[i];
        if (i) {
            jinja_buf_put(c->rt, &b, "\n", 1);
            if (blank || line.u.s->len)
                jinja_buf_put(c->rt, &b, ind.u.s->data, ind.u.s->len);
        }
        jinja_buf_put(c->rt, &b, line.u.s->data, line.u.s->len);
    }
    return jinja_buf_to_str(c->rt, &b);
}

static jinja_val min_max(jinja_ctx *c, jinja_val v, const jinja_args *a, int want_max)
{
    int cs = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(0)));
    jinja_val attr = jinja_arg(a, 1, "attribute", none());
    jinja_val items = jinja_iterable_list(c, v);
    if (!items.u.l->len)
        return jinja_undef("no aggregated item, sequence was empty");
    size_t best = 0;
    jinja_val bk = sort_key(c, items.u.l->items[0], attr, cs);
    for (size_t i = 1; i < items.u.l->len; i++) {
        jinja_val k = sort_key(c, items.u.l->items[i], attr, cs);
        int r = jinja_compare(c->rt, k, bk);
        if (want_max ? r > 0 : r < 0) {
            best = i;
            bk = k;
        }
    }
    return items.u.l->items[best];
}

static jinja_val f_max(jinja_ctx *c, jinja_val v, const jinja_args *a) { return min_max(c, v, a, 1); }
static jinja_val f_min(jinja_ctx *c, jinja_val v, const jinja_args *a) { return min_max(c, v, a, 0); }

static jinja_val f_sum(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val attr = jinja_arg(a, 0, "attribute", none());
    jinja_val acc = jinja_arg(a, 1, "start", jinja_int(0));
    jinja_val items = jinja_iterable_list(c, v);
    for (size_t i = 0; i < items.u.l->len; i++) {
        jinja_val x = items.u.l->items[i];
        if (attr.kind != JV_NONE)
            x = attr_path(c, x, attr);
        acc = jinja_binop(c, JOP_ADD, acc, x);
    }
    return acc;
}

jinja_val jinja_html_escape(jinja_ctx *c, jinja_val v)
{
    v = jinja_to_str(c->rt, v);
    if (v.u.s->markup)
        return v;
    jinja_buf b = {0};
    for (size_t i = 0; i < v.u.s->len; i++) {
        char ch = v.u.s->data[i];
        const char *rep = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        if (rep)
            jinja_buf_puts(c->rt, &b, rep);
        else
            jinja_buf_put(c->rt, &b, &ch, 1);
    }
    return markup(c, jinja_buf_to_str(c->rt, &b));
}

static jinja_val f_escape(jinja_ctx *c, jinja_val v, const jinja_args *a) { return jinja_html_escape(c, v); }

static jinja_val f_forceescape(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    v = jinja_to_str(c->rt, v);
    if (v.u.s->markup)
        v = jinja_str_new(c->rt, v.u.s->data, v.u.s->len);
    return jinja_html_escape(c, v);
}

static jinja_val f_center(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_args pa = {0};
    jinja_val w = jinja_arg(a, 0, "width", jinja_int(80));
    pa.pos = &w;
    pa.npos = 1;
    return jinja_call_method(c, jinja_to_str(c->rt, v), "center", &pa);
}

/* Jinja counts matches of \w+ (letters, digits, underscore; Unicode-aware). */
static jinja_val f_wordcount(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    v = jinja_to_str(c->rt, v);
    int64_t words = 0;
    int in_word = 0;
    for (size_t i = 0; i < v.u.s->len;) {
        int32_t cp;
        i += jinja_utf8_decode(v.u.s->data + i, v.u.s->len - i, &cp);
        utf8proc_category_t k = utf8proc_category(cp);
        int w = cp == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
        words += w && !in_word;
        in_word = w;
    }
    return jinja_int(words);
}

static jinja_val f_attr(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_val name = jinja_arg(a, 0, "name", none());
    if (name.kind != JV_STR)
        jinja_fail(c->rt, "attr: name must be a string");
    if (v.kind == JV_DICT && !v.u.d->is_namespace && !jinja_has_method(v, name.u.s->data))
        return jinja_undef("no such attribute");
    return jinja_getattr(c, v, name.u.s->data);
}

static jinja_val f_format(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    if (a->nkw && a->npos)
        jinja_fail(c->rt, "can't handle positional and keyword arguments at the same time");
    jinja_val args = jinja_list_new(c->rt, a->npos);
    args.u.l->is_tuple = 1;
    for (size_t i = 0; i < a->npos; i++)
        jinja_list_push(c->rt, args, a->pos[i]);
    if (a->nkw)
        jinja_fail(c->rt, "format with keyword arguments is not supported");
    return jinja_binop(c, JOP_MOD, jinja_to_str(c->rt, v), args);
}

static jinja_val f_pprint(jinja_ctx *c, jinja_val v, const jinja_args *a)
{
    jinja_buf b = {0};
    jinja_write_repr(c->rt, &b, v);
    return jinja_buf_to_str(c->rt, &b);
}

static const struct {
    const char *name;
    filter_fn fn;
} FILTERS[] = {
    {"length", f_length}, {"count", f_length}, {"join", f_join}, {"default", f_default}, {"d", f_default},
    {"trim", f_trim}, {"upper", f_upper}, {"lower", f_lower}, {"tojson", f_tojson}, {"items", f_items},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"select", f_select}, {"reject", f_reject},
    {"map", f_map}, {"first", f_first}, {"last", f_last}, {"list", f_list}, {"string", f_string},
    {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"replace", f_replace},
    {"capitalize", f_capitalize}, {"title", f_title}, {"safe", f_safe}, {"unique", f_unique}, {"sort", f_sort},
    {"reverse", f_reverse}, {"dictsort", f_dictsort}, {"batch", f_batch}, {"indent", f_indent}, {"max", f_max},
    {"min", f_min}, {"sum", f_sum}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_forceescape},
    {"center", f_center}, {"wordcount", f_wordcount}, {"attr", f_attr}, {"format", f_format},
    {"pprint", f_pprint},
};

int jinja_has_filter(const char *name)
{
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name))
            return 1;
    return 0;
}

jinja_val jinja_filter(jinja_ctx *c, const char *name, jinja_val v, const jinja_args *args)
{
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name))
            return FILTERS[i].fn(c, v, args);
    jinja_fail(c->rt, "no filter named '%s'", name);
}

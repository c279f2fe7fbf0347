/* Jinja expression evaluation with Python semantics: arithmetic, comparisons,
 * `in`, short-circuit and/or returning operands, attribute access falling back
 * to keys (and keys falling back to attributes), subscripts and slices. */
#include "text/jinja_interp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

jinja_scope *jinja_scope_new(jinja_ctx *c, jinja_scope *parent)
{
    jinja_scope *s = jinja_alloc(c->rt, sizeof *s);
    s->parent = parent;
    s->vars = jinja_dict_new(c->rt);
    return s;
}

void jinja_scope_set(jinja_ctx *c, jinja_scope *s, const char *name, jinja_val v)
{
    jinja_dict *d = s->vars.u.d;
    size_t n = strlen(name);
    for (size_t i = 0; i < d->len; i++)   /* update in place without allocating a key */
        if (d->keys[i].u.s->len == n && !memcmp(d->keys[i].u.s->data, name, n)) {
            d->vals[i] = v;
            return;
        }
    /* A loop scope is emptied each iteration and usually refilled with the
     * same names in the same order: reuse the key left in the next slot. */
    if (d->len < d->cap && d->keys[d->len].kind == JV_STR && d->keys[d->len].u.s->len == n &&
        !memcmp(d->keys[d->len].u.s->data, name, n)) {
        d->vals[d->len++] = v;
        return;
    }
    jinja_dict_set(c->rt, s->vars, jinja_cstr(c->rt, name), v);
}

jinja_val jinja_lookup(jinja_scope *s, const char *name)
{
    for (; s; s = s->parent) {
        jinja_val v;
        if (jinja_dict_get_cstr(s->vars, name, &v))
            return v;
    }
    return jinja_undef(NULL);
}

static const char *undef_msg(jinja_ctx *c, const char *fmt, const char *a, const char *b)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, fmt, a, b);
    return jinja_cstr(c->rt, tmp).u.s->data;
}

static _Noreturn void fail_undefined(jinja_ctx *c, jinja_val v)
{
    jinja_fail(c->rt, "%s", v.u.undef_name ? v.u.undef_name : "value is undefined");
}

static jinja_val bind_method(jinja_ctx *c, jinja_val self, const char *name)
{
    jinja_func *fn = jinja_alloc(c->rt, sizeof *fn);
    fn->kind = JF_METHOD;
    fn->name = name;
    fn->self = self;
    jinja_val v = {.kind = JV_FUNC};
    v.u.fn = fn;
    return v;
}

static const char *short_type(jinja_val v)
{
    return jinja_type_name(v);
}

jinja_val jinja_getattr(jinja_ctx *c, jinja_val obj, const char *name)
{
    jinja_val v;
    if (obj.kind == JV_UNDEF)
        fail_undefined(c, obj);
    if (obj.kind == JV_DICT && obj.u.d->is_namespace) {
        if (jinja_dict_get_cstr(obj, name, &v))
            return v;
    } else {
        if (jinja_has_method(obj, name))
            return bind_method(c, obj, name);
        if (obj.kind == JV_DICT && jinja_dict_get_cstr(obj, name, &v))
            return v;
    }
    return jinja_undef(undef_msg(c, "'%s object' has no attribute '%s'", short_type(obj), name));
}

static int int_key(jinja_val k, int64_t *out)
{
    if (k.kind == JV_INT) {
        *out = k.u.i;
        return 1;
    }
    if (k.kind == JV_BOOL) {
        *out = k.u.b;
        return 1;
    }
    return 0;
}

jinja_val jinja_getitem(jinja_ctx *c, jinja_val obj, jinja_val key)
{
    jinja_val v;
    int64_t i;
    if (obj.kind == JV_UNDEF)
        fail_undefined(c, obj);
    if (obj.kind == JV_DICT && !obj.u.d->is_namespace) {
        if (jinja_dict_get(obj, key, &v))
            return v;
    } else if (obj.kind == JV_LIST && !jinja_is_plain_list(obj)) {
        return jinja_undef(undef_msg(c, "'%s' object is not subscriptable", jinja_type_name(obj), ""));
    } else if (obj.kind == JV_LIST && int_key(key, &i)) {
        int64_t n = (int64_t)obj.u.l->len;
        if (i < 0)
            i += n;
        if (i >= 0 && i < n)
            return obj.u.l->items[i];
        return jinja_undef("list index out of range");
    } else if (obj.kind == JV_STR && int_key(key, &i)) {
        const jinja_str *s = obj.u.s;
        int64_t n = (int64_t)jinja_utf8_count(s->data, s->len);
        if (i < 0)
            i += n;
        if (i >= 0 && i < n) {
            size_t a = jinja_utf8_offset(s->data, s->len, (size_t)i);
            size_t b = jinja_utf8_offset(s->data + a, s->len - a, 1);
            return jinja_str_new(c->rt, s->data + a, b);
        }
        return jinja_undef("string index out of range");
    }
    if (key.kind == JV_STR)
        return jinja_getattr(c, obj, key.u.s->data);
    jinja_buf b = {0};
    jinja_write_repr(c->rt, &b, key);
    return jinja_undef(undef_msg(c, "'%s object' has no attribute %s", short_type(obj), b.p ? b.p : ""));
}

/* Python slice.indices for a sequence of length n. */
static void slice_indices(jinja_ctx *c, jinja_val vs, jinja_val ve, jinja_val vt, int64_t n,
                          int64_t *start, int64_t *stop, int64_t *step)
{
    int64_t st = 1;
    if (vt.kind != JV_NONE && vt.kind != JV_UNDEF) {
        if (!int_key(vt, &st))
            jinja_fail(c->rt, "slice indices must be integers or None");
        if (st == 0)
            jinja_fail(c->rt, "slice step cannot be zero");
    }
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? n - 1 : n;
    int64_t a = st < 0 ? hi : lo, b = st < 0 ? lo : hi;
    int64_t x;
    if (vs.kind != JV_NONE && vs.kind != JV_UNDEF) {
        if (!int_key(vs, &x))
            jinja_fail(c->rt, "slice indices must be integers or None");
        if (x < 0) {
            x += n;
            a = x < lo ? lo : x;
        } else {
            a = x > hi ? hi : x;
        }
    }
    if (ve.kind != JV_NONE && ve.kind != JV_UNDEF) {
        if (!int_key(ve, &x))
            jinja_fail(c->rt, "slice indices must be integers or None");
        if (x < 0) {
            x += n;
            b = x < lo ? lo : x;
        } else {
            b = x > hi ? hi : x;
        }
    }
    *start = a;
    *stop = b;
    *step = st;
}

static jinja_val eval_slice(jinja_ctx *c, jinja_val obj, jinja_val vs, jinja_val ve, jinja_val vt)
{
    int64_t a, b, st;
    if (obj.kind == JV_UNDEF)
        fail_undefined(c, obj);
    if (obj.kind == JV_LIST && !jinja_is_plain_list(obj))
        jinja_fail(c->rt, "'%s' object is not subscriptable", jinja_type_name(obj));
    if (obj.kind == JV_LIST) {
        slice_indices(c, vs, ve, vt, (int64_t)obj.u.l->len, &a, &b, &st);
        jinja_val out = jinja_list_new(c->rt, 0);
        out.u.l->is_tuple = obj.u.l->is_tuple;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            jinja_list_push(c->rt, out, obj.u.l->items[i]);
        return out;
    }
    if (obj.kind == JV_STR) {
        const jinja_str *s = obj.u.s;
        size_t n = jinja_utf8_count(s->data, s->len);
        size_t *off = NULL;
        if (n != s->len) {   /* non-ASCII: code point → byte offset table */
            off = jinja_alloc(c->rt, (n + 1) * sizeof *off);
            size_t k = 0;
            for (size_t i = 0; i < s->len; k++) {
                off[k] = i;
                int32_t cp;
                i += jinja_utf8_decode(s->data + i, s->len - i, &cp);
            }
            off[n] = s->len;
        }
        slice_indices(c, vs, ve, vt, (int64_t)n, &a, &b, &st);
        if (st == 1) {
            if (b <= a)
                return jinja_str_new(c->rt, "", 0);
            size_t x = off ? off[a] : (size_t)a, y = off ? off[b] : (size_t)b;
            return jinja_str_new(c->rt, s->data + x, y - x);
        }
        jinja_buf out = {0};
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
            size_t x = off ? off[i] : (size_t)i, y = off ? off[i + 1] : (size_t)i + 1;
            jinja_buf_put(c->rt, &out, s->data + x, y - x);
        }
        return jinja_buf_to_str(c->rt, &out);
    }
    /* Jinja compiles a slice to a plain Python subscript: no undefined fallback */
    if (obj.kind == JV_DICT && !obj.u.d->is_namespace)
        jinja_fail(c->rt, "unhashable type: 'slice'");
    jinja_fail(c->rt, "'%s' object is not subscriptable", jinja_type_name(obj));
}

int64_t jinja_len(jinja_ctx *c, jinja_val v)
{
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)jinja_utf8_count(v.u.s->data, v.u.s->len);
    case JV_LIST:
        if (v.u.l->kind == JL_GENERATOR || v.u.l->kind == JL_REVERSED)
            break;
        return (int64_t)v.u.l->len;
    case JV_DICT:
        if (!v.u.d->is_namespace)
            return (int64_t)v.u.d->len;
        break;
    default: break;
    }
    jinja_fail(c->rt, "object of type '%s' has no len()", jinja_type_name(v));
}

jinja_val jinja_iterable_list(jinja_ctx *c, jinja_val v)
{
    if (v.kind == JV_LIST)
        return v;
    jinja_val out = jinja_list_new(c->rt, 0);
    if (v.kind == JV_UNDEF)
        return out;
    if (v.kind == JV_DICT && !v.u.d->is_namespace) {
        for (size_t i = 0; i < v.u.d->len; i++)
            jinja_list_push(c->rt, out, v.u.d->keys[i]);
        return out;
    }
    if (v.kind == JV_STR) {
        const jinja_str *s = v.u.s;
        for (size_t i = 0; i < s->len;) {
            int32_t cp;
            size_t k = jinja_utf8_decode(s->data + i, s->len - i, &cp);
            jinja_list_push(c->rt, out, jinja_str_new(c->rt, s->data + i, k));
            i += k;
        }
        return out;
    }
    jinja_fail(c->rt, "'%s' object is not iterable", jinja_type_name(v));
}

static int contains(jinja_ctx *c, jinja_val container, jinja_val item)
{
    jinja_val dummy;
    switch (container.kind) {
    case JV_UNDEF: return 0;
    case JV_STR:
        if (item.kind != JV_STR)
            jinja_fail(c->rt, "'in <string>' requires string as left operand, not %s", jinja_type_name(item));
        if (item.u.s->len == 0)
            return 1;
        return memmem(container.u.s->data, container.u.s->len, item.u.s->data, item.u.s->len) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < container.u.l->len; i++)
            if (jinja_equal(container.u.l->items[i], item))
                return 1;
        return 0;
    case JV_DICT:
        if ((item.kind == JV_LIST && !item.u.l->is_tuple) || item.kind == JV_DICT)
            jinja_fail(c->rt, "unhashable type: '%s'", jinja_type_name(item));
        if (!container.u.d->is_namespace)
            return jinja_dict_get(container, item, &dummy);
        break;
    default: break;
    }
    jinja_fail(c->rt, "argument of type '%s' is not iterable", jinja_type_name(container));
}

static _Noreturn void bad_operands(jinja_ctx *c, const char *op, jinja_val a, jinja_val b)
{
    if (a.kind == JV_UNDEF)
        fail_undefined(c, a);
    if (b.kind == JV_UNDEF)
        fail_undefined(c, b);
    jinja_fail(c->rt, "unsupported operand type(s) for %s: '%s' and '%s'", op, jinja_type_name(a), jinja_type_name(b));
}

static int64_t ival(jinja_val v) { return v.kind == JV_BOOL ? v.u.b : v.u.i; }

static jinja_val repeat(jinja_ctx *c, jinja_val seq, int64_t times)
{
    if (seq.kind == JV_STR) {
        jinja_buf b = {0};
        for (int64_t i = 0; i < times; i++)
            jinja_buf_put(c->rt, &b, seq.u.s->data, seq.u.s->len);
        return jinja_buf_to_str(c->rt, &b);
    }
    jinja_val out = jinja_list_new(c->rt, 0);
    out.u.l->is_tuple = seq.u.l->is_tuple;
    for (int64_t i = 0; i < times; i++) {
        jinja_step(c);
        for (size_t k = 0; k < seq.u.l->len; k++)
            jinja_list_push(c->rt, out, seq.u.l->items[k]);
    }
    return out;
}

jinja_val jinja_binop(jinja_ctx *c, int op, jinja_val a, jinja_val b)
{
    int nums = jinja_is_number(a) && jinja_is_number(b);
    int ints = nums && a.kind != JV_FLOAT && b.kind != JV_FLOAT;
    int64_t r;
    switch (op) {
    case JOP_ADD:
        if (ints) {
            if (__builtin_add_overflow(ival(a), ival(b), &r))
                jinja_fail(c->rt, "integer overflow");
            return jinja_int(r);
        }
        if (nums)
            return jinja_float(jinja_as_double(a) + jinja_as_double(b));
        if (a.kind == JV_STR && b.kind == JV_STR) {
            int markup = a.u.s->markup || b.u.s->markup;
            if (markup) {   /* Markup + str escapes the plain operand */
                a = jinja_html_escape(c, a);
                b = jinja_html_escape(c, b);
            }
            jinja_buf buf = {0};
            jinja_buf_put(c->rt, &buf, a.u.s->data, a.u.s->len);
            jinja_buf_put(c->rt, &buf, b.u.s->data, b.u.s->len);
            jinja_val r = jinja_buf_to_str(c->rt, &buf);
            r.u.s->markup = markup;
            return r;
        }
        if (jinja_is_plain_list(a) && jinja_is_plain_list(b) && a.u.l->is_tuple == b.u.l->is_tuple) {
            jinja_val out = jinja_list_new(c->rt, a.u.l->len + b.u.l->len);
            out.u.l->is_tuple = a.u.l->is_tuple;
            for (size_t i = 0; i < a.u.l->len; i++)
                jinja_list_push(c->rt, out, a.u.l->items[i]);
            for (size_t i = 0; i < b.u.l->len; i++)
                jinja_list_push(c->rt, out, b.u.l->items[i]);
            return out;
        }
        bad_operands(c, "+", a, b);
    case JOP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(ival(a), ival(b), &r))
                jinja_fail(c->rt, "integer overflow");
            return jinja_int(r);
        }
        if (nums)
            return jinja_float(jinja_as_double(a) - jinja_as_double(b));
        bad_operands(c, "-", a, b);
    case JOP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(ival(a), ival(b), &r))
                jinja_fail(c->rt, "integer overflow");
            return jinja_int(r);
        }
        if (nums)
            return jinja_float(jinja_as_double(a) * jinja_as_double(b));
        if ((a.kind == JV_STR || jinja_is_plain_list(a)) && (b.kind == JV_INT || b.kind == JV_BOOL))
            return repeat(c, a, ival(b));
        if ((b.kind == JV_STR || jinja_is_plain_list(b)) && (a.kind == JV_INT || a.kind == JV_BOOL))
            return repeat(c, b, ival(a));
        bad_operands(c, "*", a, b);
    case JOP_DIV:
        if (!nums)
            bad_operands(c, "/", a, b);
        if (jinja_as_double(b) == 0.0)
            jinja_fail(c->rt, "division by zero");
        return jinja_float(jinja_as_double(a) / jinja_as_double(b));
    case JOP_FLOORDIV:
    case JOP_MOD:
        if (a.kind == JV_STR && op == JOP_MOD)
            return jinja_percent_format(c, a, b);
        if (!nums)
            bad_operands(c, op == JOP_MOD ? "%" : "//", a, b);
        if (jinja_as_double(b) == 0.0)
            jinja_fail(c->rt, op == JOP_MOD ? "modulo by zero" : "division by zero");
        if (ints) {
            int64_t x = ival(a), y = ival(b);
            if (x == INT64_MIN && y == -1)
                jinja_fail(c->rt, "integer overflow");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q -= 1;
                m += y;
            }
            return jinja_int(op == JOP_MOD ? m : q);
        } else {
            double x = jinja_as_double(a), y = jinja_as_double(b);
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            if (op == JOP_MOD)
                return jinja_float(m);
            double div = (x - m) / y, fl = floor(div);
            return jinja_float(div - fl > 0.5 ? fl + 1.0 : fl);
        }
    case JOP_POW:
        if (ints && ival(b) >= 0) {
            int64_t base = ival(a), e = ival(b), acc = 1;
            while (e > 0) {
                if (e & 1 && __builtin_mul_overflow(acc, base, &acc))
                    jinja_fail(c->rt, "integer overflow");
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base))
                    jinja_fail(c->rt, "integer overflow");
            }
            return jinja_int(acc);
        }
        if (nums)
            return jinja_float(pow(jinja_as_double(a), jinja_as_double(b)));
        bad_operands(c, "**", a, b);
    default:
        jinja_fail(c->rt, "unknown operator");
    }
}

void jinja_eval_args(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_args *out)
{
    size_t npos = n->items.n;
    jinja_val star = {0}, dstar = {0};
    if (n->b) {
        star = jinja_iterable_list(c, jinja_eval(c, s, n->b));
        npos += star.u.l->len;
    }
    out->pos = jinja_alloc(c->rt, (npos + 1) * sizeof *out->pos);
    out->npos = 0;
    for (size_t i = 0; i < n->items.n; i++)
        out->pos[out->npos++] = jinja_eval(c, s, n->items.v[i]);
    if (n->b)
        for (size_t i = 0; i < star.u.l->len; i++)
            out->pos[out->npos++] = star.u.l->items[i];
    size_t nkw = n->nnames;
    if (n->c) {
        dstar = jinja_eval(c, s, n->c);
        if (dstar.kind != JV_DICT || dstar.u.d->is_namespace)
            jinja_fail(c->rt, "argument after ** must be a mapping, not %s", jinja_type_name(dstar));
        nkw += dstar.u.d->len;
    }
    out->kwnames = jinja_alloc(c->rt, (nkw + 1) * sizeof *out->kwnames);
    out->kwvals = jinja_alloc(c->rt, (nkw + 1) * sizeof *out->kwvals);
    out->nkw = 0;
    for (size_t i = 0; i < n->nnames; i++) {
        out->kwnames[out->nkw] = n->names[i];
        out->kwvals[out->nkw++] = jinja_eval(c, s, n->items2.v[i]);
    }
    if (n->c)
        for (size_t i = 0; i < dstar.u.d->len; i++) {
            jinja_val k = dstar.u.d->keys[i];
            if (k.kind != JV_STR)
                jinja_fail(c->rt, "keywords must be strings");
            out->kwnames[out->nkw] = k.u.s->data;
            out->kwvals[out->nkw++] = dstar.u.d->vals[i];
        }
}

static int compare_op(jinja_ctx *c, const char *op, jinja_val a, jinja_val b)
{
    if (!strcmp(op, "=="))
        return jinja_equal(a, b);
    if (!strcmp(op, "!="))
        return !jinja_equal(a, b);
    if (!strcmp(op, "in"))
        return contains(c, b, a);
    if (!strcmp(op, "notin"))
        return !contains(c, b, a);
    if (a.kind == JV_UNDEF)
        fail_undefined(c, a);
    if (b.kind == JV_UNDEF)
        fail_undefined(c, b);
    int r = jinja_compare(c->rt, a, b);
    if (!strcmp(op, "<"))
        return r < 0;
    if (!strcmp(op, "<="))
        return r <= 0;
    if (!strcmp(op, ">"))
        return r > 0;
    return r >= 0;
}

jinja_val jinja_eval(jinja_ctx *c, jinja_scope *s, const jinja_node *n)
{
    jinja_val v, w;
    jinja_args args;
    int saved_line = c->rt->line;
    c->rt->line = n->line;
    if (++c->depth > c->max_depth)
        jinja_fail(c->rt, "expressions or calls nested deeper than %d", c->max_depth);
    switch (n->kind) {
    case JN_CONST:
        v = n->value;
        break;
    case JN_NAME:
        v = jinja_lookup(s, n->name);
        if (v.kind == JV_UNDEF)
            v = jinja_undef(undef_msg(c, "'%s' is undefined", n->name, ""));
        break;
    case JN_GETATTR:
        v = jinja_getattr(c, jinja_eval(c, s, n->a), n->name);
        break;
    case JN_GETITEM:
        v = jinja_eval(c, s, n->a);
        v = jinja_getitem(c, v, jinja_eval(c, s, n->b));
        break;
    case JN_SLICE: {
        jinja_val obj = jinja_eval(c, s, n->a);
        jinja_val a = n->b ? jinja_eval(c, s, n->b) : jinja_none();
        jinja_val b = n->c ? jinja_eval(c, s, n->c) : jinja_none();
        jinja_val st = n->d ? jinja_eval(c, s, n->d) : jinja_none();
        v = eval_slice(c, obj, a, b, st);
        break;
    }
    case JN_CALL:
        v = jinja_eval(c, s, n->a);
        jinja_eval_args(c, s, n, &args);
        c->rt->line = n->line;
        if (v.kind == JV_UNDEF)
            fail_undefined(c, v);
        if (v.kind != JV_FUNC)
            jinja_fail(c->rt, "'%s' object is not callable", jinja_type_name(v));
        v = jinja_call(c, v, &args);
        break;
    case JN_FILTER:
        v = jinja_eval(c, s, n->a);
        jinja_eval_args(c, s, n, &args);
        c->rt->line = n->line;
        v = jinja_filter(c, n->name, v, &args);
        break;
    case JN_TEST:
        v = jinja_eval(c, s, n->a);
        jinja_eval_args(c, s, n, &args);
        c->rt->line = n->line;
        v = jinja_bool(jinja_test(c, n->name, v, &args) != n->op);
        break;
    case JN_NOT:
        v = jinja_bool(!jinja_truthy(jinja_eval(c, s, n->a)));
        break;
    case JN_NEG:
    case JN_POS:
        v = jinja_eval(c, s, n->a);
        if (v.kind == JV_UNDEF)
            fail_undefined(c, v);
        if (!jinja_is_number(v))
            jinja_fail(c->rt, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jinja_type_name(v));
        if (n->kind == JN_POS)
            v = v.kind == JV_BOOL ? jinja_int(v.u.b) : v;
        else if (v.kind == JV_FLOAT)
            v = jinja_float(-v.u.f);
        else if (ival(v) == INT64_MIN)
            jinja_fail(c->rt, "integer overflow");
        else
            v = jinja_int(-ival(v));
        break;
    case JN_BINOP:
        v = jinja_eval(c, s, n->a);
        if (n->op == JN_AND) {
            if (jinja_truthy(v))
                v = jinja_eval(c, s, n->b);
        } else if (n->op == JN_OR) {
            if (!jinja_truthy(v))
                v = jinja_eval(c, s, n->b);
        } else {
            w = jinja_eval(c, s, n->b);
            c->rt->line = n->line;
            v = jinja_binop(c, n->op, v, w);
        }
        break;
    case JN_CONCAT: {
        jinja_buf b = {0};
        for (size_t i = 0; i < n->items.n; i++)
            jinja_write_str(c->rt, &b, jinja_eval(c, s, n->items.v[i]));
        v = jinja_buf_to_str(c->rt, &b);
        break;
    }
    case JN_COMPARE:
        v = jinja_eval(c, s, n->a);
        for (size_t i = 0; i < n->nnames; i++) {
            w = jinja_eval(c, s, n->items2.v[i]);
            c->rt->line = n->line;
            if (!compare_op(c, n->names[i], v, w)) {
                v = jinja_bool(0);
                goto done;
            }
            v = w;
        }
        v = jinja_bool(1);
        break;
    case JN_COND:
        if (jinja_truthy(jinja_eval(c, s, n->a)))
            v = jinja_eval(c, s, n->b);
        else
            v = n->c ? jinja_eval(c, s, n->c) : jinja_undef("the inline if-expression evaluated to false and no else section was defined");
        break;
    case JN_LIST:
    case JN_TUPLE:
        v = jinja_list_new(c->rt, n->items.n);
        v.u.l->is_tuple = n->kind == JN_TUPLE;
        for (size_t i = 0; i < n->items.n; i++)
            jinja_list_push(c->rt, v, jinja_eval(c, s, n->items.v[i]));
        break;
    case JN_DICT:
        v = jinja_dict_new(c->rt);
        for (size_t i = 0; i < n->items.n; i++) {
            jinja_val k = jinja_eval(c, s, n->items.v[i]);
            if (k.kind == JV_LIST && !k.u.l->is_tuple)
                jinja_fail(c->rt, "unhashable type: 'list'");
            if (k.kind == JV_DICT)
                jinja_fail(c->rt, "unhashable type: 'dict'");
            jinja_dict_set(c->rt, v, k, jinja_eval(c, s, n->items2.v[i]));
        }
        break;
    default:
        jinja_fail(c->rt, "statement used as an expression");
    }
done:
    c->depth--;
    c->rt->line = saved_line;
    return v;
}

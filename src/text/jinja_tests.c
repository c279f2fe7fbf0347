/* Jinja tests (`x is defined`, `x is string`, `n is divisibleby 3`, ...) with
 * the behaviour of Jinja2 3.1's built-ins. */
#include "text/jinja_interp.h"

#include <string.h>

static jinja_val arg0(jinja_ctx *c, const jinja_args *a, const char *test)
{
    if (a->npos < 1 && a->nkw < 1)
        jinja_fail(c->rt, "test '%s' needs an argument", test);
    return a->npos ? a->pos[0] : a->kwvals[0];
}

static int is_int(jinja_val v) { return v.kind == JV_INT; }

static int case_is(jinja_ctx *c, jinja_val v, const char *method)
{
    jinja_args none = {0};
    jinja_val s = jinja_to_str(c->rt, v);
    return jinja_truthy(jinja_call_method(c, s, method, &none));
}

static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
    "boolean", "true", "false", "callable", "odd", "even", "divisibleby", "equalto", "eq", "==", "ne", "!=",
    "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in", "sameas", "escaped",
    "lower", "upper", "filter", "test", NULL};

int jinja_has_test(const char *name)
{
    for (const char *const *t = TESTS; *t; t++)
        if (!strcmp(*t, name))
            return 1;
    return 0;
}

int jinja_test(jinja_ctx *c, const char *t, jinja_val v, const jinja_args *a)
{
    if (!strcmp(t, "defined"))
        return v.kind != JV_UNDEF;
    if (!strcmp(t, "undefined"))
        return v.kind == JV_UNDEF;
    if (!strcmp(t, "none"))
        return v.kind == JV_NONE;
    if (!strcmp(t, "string"))
        return v.kind == JV_STR;
    if (!strcmp(t, "number"))
        return jinja_is_number(v);
    if (!strcmp(t, "integer"))
        return is_int(v);
    if (!strcmp(t, "float"))
        return v.kind == JV_FLOAT;
    if (!strcmp(t, "mapping"))
        return v.kind == JV_DICT && !v.u.d->is_namespace;
    if (!strcmp(t, "iterable"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_UNDEF || (v.kind == JV_DICT && !v.u.d->is_namespace);
    if (!strcmp(t, "sequence"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_UNDEF || (v.kind == JV_DICT && !v.u.d->is_namespace);
    if (!strcmp(t, "boolean"))
        return v.kind == JV_BOOL;
    if (!strcmp(t, "true"))
        return v.kind == JV_BOOL && v.u.b;
    if (!strcmp(t, "false"))
        return v.kind == JV_BOOL && !v.u.b;
    if (!strcmp(t, "callable"))
        return v.kind == JV_FUNC;
    /* Jinja computes these with Python's %, whatever the operand types */
    if (!strcmp(t, "odd") || !strcmp(t, "even"))
        return jinja_equal(jinja_binop(c, JOP_MOD, v, jinja_int(2)), jinja_int(t[0] == 'o'));
    if (!strcmp(t, "divisibleby"))
        return jinja_equal(jinja_binop(c, JOP_MOD, v, arg0(c, a, t)), jinja_int(0));
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "=="))
        return jinja_equal(v, arg0(c, a, t));
    if (!strcmp(t, "ne") || !strcmp(t, "!="))
        return !jinja_equal(v, arg0(c, a, t));
    if (!strcmp(t, "lt") || !strcmp(t, "<") || !strcmp(t, "lessthan"))
        return jinja_compare(c->rt, v, arg0(c, a, t)) < 0;
    if (!strcmp(t, "le") || !strcmp(t, "<="))
        return jinja_compare(c->rt, v, arg0(c, a, t)) <= 0;
    if (!strcmp(t, "gt") || !strcmp(t, ">") || !strcmp(t, "greaterthan"))
        return jinja_compare(c->rt, v, arg0(c, a, t)) > 0;
    if (!strcmp(t, "ge") || !strcmp(t, ">="))
        return jinja_compare(c->rt, v, arg0(c, a, t)) >= 0;
    if (!strcmp(t, "in")) {
        jinja_val seq = arg0(c, a, t);
        if (seq.kind == JV_STR && v.kind == JV_STR)
            return memmem(seq.u.s->data, seq.u.s->len, v.u.s->data, v.u.s->len) != NULL || v.u.s->len == 0;
        jinja_val items = jinja_iterable_list(c, seq);
        for (size_t i = 0; i < items.u.l->len; i++)
            if (jinja_equal(items.u.l->items[i], v))
                return 1;
        return 0;
    }
    if (!strcmp(t, "sameas")) {
        jinja_val o = arg0(c, a, t);
        if (v.kind != o.kind)
            return 0;
        switch (v.kind) {
        case JV_NONE: case JV_UNDEF: return 1;
        case JV_BOOL: return v.u.b == o.u.b;
        case JV_INT: return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256;   /* CPython's small-int cache */
        case JV_STR: return v.u.s == o.u.s;
        case JV_LIST: return v.u.l == o.u.l;
        case JV_DICT: return v.u.d == o.u.d;
        case JV_FUNC: return v.u.fn == o.u.fn;
        default: return 0;
        }
    }
    if (!strcmp(t, "escaped"))
        return 0;
    if (!strcmp(t, "lower"))
        return case_is(c, v, "islower");
    if (!strcmp(t, "upper"))
        return case_is(c, v, "isupper");
    if (!strcmp(t, "filter"))
        return v.kind == JV_STR && jinja_has_filter(v.u.s->data);
    if (!strcmp(t, "test"))
        return v.kind == JV_STR && jinja_has_test(v.u.s->data);
    jinja_fail(c->rt, "no test named '%s'", t);
}

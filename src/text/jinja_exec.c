/* Jinja statements: output, if, for (with loop.* and else), set (plain,
 * tuple, namespace attribute and block form), macros, call blocks, filter
 * blocks, with, break/continue; and calls of macros and bound functions. */
#include "text/jinja_interp.h"

#include <stdio.h>
#include <string.h>

void jinja_step(jinja_ctx *c)
{
    if (++c->steps > c->max_steps)
        jinja_fail(c->rt, "template ran for more than %llu steps", (unsigned long long)c->max_steps);
}

const char *jinja_func_name(const jinja_func *fn)
{
    return fn->name ? fn->name : "caller";
}

static jinja_val make_func(jinja_ctx *c, jinja_func_kind kind, const char *name)
{
    jinja_func *fn = jinja_alloc(c->rt, sizeof *fn);
    fn->kind = kind;
    fn->name = name;
    jinja_val v = {.kind = JV_FUNC};
    v.u.fn = fn;
    return v;
}

/* Binds a target list (one name, or several unpacked from a sequence). */
static void assign(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_val v)
{
    if (n->nnames == 1) {
        jinja_scope_set(c, s, n->names[0], v);
        return;
    }
    jinja_val items = jinja_iterable_list(c, v);
    if (items.u.l->len != n->nnames)
        jinja_fail(c->rt, items.u.l->len > n->nnames ? "too many values to unpack (expected %zu)"
                                                       : "not enough values to unpack (expected %zu)", n->nnames);
    for (size_t i = 0; i < n->nnames; i++)
        jinja_scope_set(c, s, n->names[i], items.u.l->items[i]);
}

static jinja_val render_body(jinja_ctx *c, jinja_scope *s, const jinja_node *body)
{
    jinja_buf b = {0};
    jinja_exec(c, s, body, &b);
    return jinja_buf_to_str(c->rt, &b);
}

/* Applies a filter chain parsed with a NULL innermost operand to v. */
static jinja_val apply_chain(jinja_ctx *c, jinja_scope *s, const jinja_node *f, jinja_val v)
{
    if (!f)
        return v;
    v = apply_chain(c, s, f->a, v);
    jinja_args args;
    jinja_eval_args(c, s, f, &args);
    c->rt->line = f->line;
    return jinja_filter(c, f->name, v, &args);
}

static int exec_for(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_buf *out)
{
    jinja_val seq = jinja_iterable_list(c, jinja_eval(c, s, n->a));
    if (n->c) {   /* {% for x in xs if cond %}: filter first, loop.length counts what is left */
        jinja_val kept = jinja_list_new(c->rt, 0);
        jinja_scope *fs = jinja_scope_new(c, s);
        for (size_t i = 0; i < seq.u.l->len; i++) {
            jinja_step(c);
            assign(c, fs, n, seq.u.l->items[i]);
            if (jinja_truthy(jinja_eval(c, fs, n->c)))
                jinja_list_push(c->rt, kept, seq.u.l->items[i]);
        }
        seq = kept;
    }
    size_t len = seq.u.l->len;
    if (len == 0) {
        if (n->d)
            return jinja_exec(c, s, n->d, out);
        return 0;
    }
    /* Lists cannot change while iterated: the sandbox refuses list mutation. */
    const jinja_val *items = seq.u.l->items;
    static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                       "depth", "depth0", "previtem", "nextitem", "cycle"};
    /* One loop object and one scope serve every iteration (Jinja's loop context
     * is a single object too); the scope is emptied so that a {% set %} of one
     * iteration is not seen by the next. previtem / nextitem hold undefined at
     * the ends, which reads the same as a missing attribute. */
    jinja_scope *ls = jinja_scope_new(c, s);
    jinja_val loop = jinja_dict_new(c->rt);
    jinja_val cyc = make_func(c, JF_CYCLE, "cycle");
    for (int k = 0; k < 12; k++)
        jinja_dict_set(c->rt, loop, jinja_cstr(c->rt, keys[k]), jinja_none());
    jinja_val *lv = loop.u.d->vals;
    for (size_t i = 0; i < len; i++) {
        jinja_step(c);
        ls->vars.u.d->len = 0;
        lv[0] = jinja_int((int64_t)i + 1);
        lv[1] = jinja_int((int64_t)i);
        lv[2] = jinja_int((int64_t)(len - i));
        lv[3] = jinja_int((int64_t)(len - i - 1));
        lv[4] = jinja_bool(i == 0);
        lv[5] = jinja_bool(i + 1 == len);
        lv[6] = jinja_int((int64_t)len);
        lv[7] = jinja_int(1);
        lv[8] = jinja_int(0);
        lv[9] = i > 0 ? items[i - 1] : jinja_undef("'loop.previtem' is undefined on the first iteration");
        lv[10] = i + 1 < len ? items[i + 1] : jinja_undef("'loop.nextitem' is undefined on the last iteration");
        cyc.u.fn->index = (int64_t)i;
        lv[11] = cyc;
        jinja_scope_set(c, ls, "loop", loop);
        assign(c, ls, n, items[i]);
        int r = jinja_exec(c, ls, n->b, out);
        if (r == JN_BREAK)
            break;
    }
    return 0;
}

static void exec_set(jinja_ctx *c, jinja_scope *s, const jinja_node *n)
{
    jinja_val v;
    if (n->a) {
        v = jinja_eval(c, s, n->a);
    } else {
        v = render_body(c, jinja_scope_new(c, s), n->b);
        v = apply_chain(c, s, n->c, v);
    }
    c->rt->line = n->line;
    if (n->name) {   /* {% set ns.attr = v %} */
        jinja_val ns = jinja_lookup(s, n->names[0]);
        if (ns.kind != JV_DICT || !ns.u.d->is_namespace)
            jinja_fail(c->rt, "cannot assign attribute on non-namespace object");
        if (n->name[0] == '_')
            jinja_fail(c->rt, "cannot store underscore-prefixed attribute '%s' on a namespace", n->name);
        jinja_dict_set(c->rt, ns, jinja_cstr(c->rt, n->name), v);
        return;
    }
    assign(c, s, n, v);
}

static void exec_callblock(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_buf *out)
{
    const jinja_node *call = n->a;
    jinja_val fn = jinja_eval(c, s, call->a);
    jinja_args args, with_caller;
    jinja_eval_args(c, s, call, &args);
    c->rt->line = n->line;
    if (fn.kind != JV_FUNC || fn.u.fn->kind != JF_MACRO)
        jinja_fail(c->rt, "a call block needs a macro to call");
    jinja_val caller = make_func(c, JF_MACRO, NULL);
    caller.u.fn->macro = n;
    caller.u.fn->closure = s;
    with_caller = args;
    with_caller.kwnames = jinja_alloc(c->rt, (args.nkw + 1) * sizeof *with_caller.kwnames);
    with_caller.kwvals = jinja_alloc(c->rt, (args.nkw + 1) * sizeof *with_caller.kwvals);
    if (args.nkw) {
        memcpy(with_caller.kwnames, args.kwnames, args.nkw * sizeof *args.kwnames);
        memcpy(with_caller.kwvals, args.kwvals, args.nkw * sizeof *args.kwvals);
    }
    with_caller.kwnames[args.nkw] = "caller";
    with_caller.kwvals[args.nkw] = caller;
    with_caller.nkw = args.nkw + 1;
    jinja_write_str(c->rt, out, jinja_call(c, fn, &with_caller));
}

int jinja_exec(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_buf *out)
{
    c->rt->line = n->line;
    switch (n->kind) {
    case JN_BODY:
        for (size_t i = 0; i < n->items.n; i++) {
            int r = jinja_exec(c, s, n->items.v[i], out);
            if (r)
                return r;
        }
        return 0;
    case JN_DATA:
        jinja_buf_put(c->rt, out, n->value.u.s->data, n->value.u.s->len);
        return 0;
    case JN_OUTPUT:
        jinja_write_str(c->rt, out, jinja_eval(c, s, n->a));
        return 0;
    case JN_IF:
        if (jinja_truthy(jinja_eval(c, s, n->a)))
            return jinja_exec(c, s, n->b, out);
        return n->c ? jinja_exec(c, s, n->c, out) : 0;
    case JN_FOR:
        if (++c->depth > c->max_depth)
            jinja_fail(c->rt, "blocks nested deeper than %d", c->max_depth);
        exec_for(c, s, n, out);
        c->depth--;
        return 0;
    case JN_SET:
        exec_set(c, s, n);
        return 0;
    case JN_MACRO: {
        jinja_val fn = make_func(c, JF_MACRO, n->name);
        fn.u.fn->macro = n;
        fn.u.fn->closure = s;
        jinja_scope_set(c, s, n->name, fn);
        return 0;
    }
    case JN_CALLBLOCK:
        exec_callblock(c, s, n, out);
        return 0;
    case JN_FILTERBLOCK: {
        jinja_val v = render_body(c, jinja_scope_new(c, s), n->b);
        jinja_write_str(c->rt, out, apply_chain(c, s, n->a, v));
        return 0;
    }
    case JN_WITH: {
        jinja_scope *ws = jinja_scope_new(c, s);
        for (size_t i = 0; i < n->nnames; i++)
            jinja_scope_set(c, ws, n->names[i], jinja_eval(c, s, n->items.v[i]));
        return jinja_exec(c, ws, n->b, out);
    }
    case JN_BREAK:
        return JN_BREAK;
    case JN_CONTINUE:
        return JN_CONTINUE;
    default:
        jinja_fail(c->rt, "expression used as a statement");
    }
}

static jinja_val call_macro(jinja_ctx *c, const jinja_func *fn, const jinja_args *a)
{
    const jinja_node *m = fn->macro;
    jinja_scope *ms = jinja_scope_new(c, fn->closure);
    size_t np = m->nnames;
    jinja_val varargs = jinja_list_new(c->rt, 0), kwargs = jinja_dict_new(c->rt);
    varargs.u.l->is_tuple = 1;
    char *bound = jinja_alloc(c->rt, np + 1);
    for (size_t i = 0; i < a->npos; i++) {
        if (i < np) {
            jinja_scope_set(c, ms, m->names[i], a->pos[i]);
            bound[i] = 1;
        } else {
            jinja_list_push(c->rt, varargs, a->pos[i]);
        }
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i;
        for (i = 0; i < np; i++)
            if (!strcmp(m->names[i], a->kwnames[k]))
                break;
        if (i < np) {
            if (bound[i])
                jinja_fail(c->rt, "macro '%s' got multiple values for argument '%s'", jinja_func_name(fn), m->names[i]);
            jinja_scope_set(c, ms, m->names[i], a->kwvals[k]);
            bound[i] = 1;
        } else if (!strcmp(a->kwnames[k], "caller")) {
            jinja_scope_set(c, ms, "caller", a->kwvals[k]);
        } else {
            jinja_dict_set(c->rt, kwargs, jinja_cstr(c->rt, a->kwnames[k]), a->kwvals[k]);
        }
    }
    for (size_t i = 0; i < np; i++)
        if (!bound[i])
            jinja_scope_set(c, ms, m->names[i], m->items2.v[i] ? jinja_eval(c, ms, m->items2.v[i])
                                                               : jinja_undef("missing macro argument"));
    jinja_scope_set(c, ms, "varargs", varargs);
    jinja_scope_set(c, ms, "kwargs", kwargs);
    return render_body(c, ms, m->b);
}

jinja_val jinja_call(jinja_ctx *c, jinja_val fnv, const jinja_args *args)
{
    const jinja_func *fn = fnv.u.fn;
    jinja_step(c);
    if (++c->depth > c->max_depth)
        jinja_fail(c->rt, "calls nested deeper than %d", c->max_depth);
    jinja_val v;
    switch (fn->kind) {
    case JF_MACRO:
        v = call_macro(c, fn, args);
        break;
    case JF_METHOD:
        v = jinja_call_method(c, fn->self, fn->name, args);
        break;
    case JF_GLOBAL:
        v = jinja_call_global(c, fn->name, args);
        break;
    case JF_CYCLE:
        if (args->npos == 0)
            jinja_fail(c->rt, "no items for cycling given");
        v = args->pos[fn->index % (int64_t)args->npos];
        break;
    default:
        jinja_fail(c->rt, "object is not callable");
    }
    c->depth--;
    return v;
}

typedef struct {
    char *err;
    size_t errlen;
    int failed;
} validator;

/* soft: inside an if statement or a conditional expression, where Jinja
 * defers unknown filters and tests to run time (they fail only when reached). */
static void check_node(validator *vd, const jinja_node *n, int in_loop, int soft, int depth);

static void check_list(validator *vd, const jinja_nodes *ns, int in_loop, int soft, int depth)
{
    for (size_t i = 0; i < ns->n && !vd->failed; i++)
        if (ns->v[i])
            check_node(vd, ns->v[i], in_loop, soft, depth);
}

static void check_node(validator *vd, const jinja_node *n, int in_loop, int soft, int depth)
{
    if (!n || vd->failed)
        return;
    if (depth > 1000) {
        snprintf(vd->err, vd->errlen, "line %d: template nested too deeply", n->line);
        vd->failed = 1;
        return;
    }
    if (n->kind == JN_FILTER && !soft && !jinja_has_filter(n->name)) {
        snprintf(vd->err, vd->errlen, "line %d: no filter named '%s'", n->line, n->name);
        vd->failed = 1;
        return;
    }
    if (n->kind == JN_TEST && !soft && !jinja_has_test(n->name)) {
        snprintf(vd->err, vd->errlen, "line %d: no test named '%s'", n->line, n->name);
        vd->failed = 1;
        return;
    }
    if ((n->kind == JN_BREAK || n->kind == JN_CONTINUE) && !in_loop) {
        snprintf(vd->err, vd->errlen, "line %d: '%s' outside of a loop", n->line,
                 n->kind == JN_BREAK ? "break" : "continue");
        vd->failed = 1;
        return;
    }
    int d = depth + 1;
    switch (n->kind) {
    case JN_IF:
    case JN_COND:
        check_node(vd, n->a, in_loop, 1, d);
        check_node(vd, n->b, in_loop, 1, d);
        check_node(vd, n->c, in_loop, 1, d);
        return;
    case JN_FOR:   /* the body runs in a frame of its own: not soft */
        check_node(vd, n->a, in_loop, soft, d);
        check_node(vd, n->b, 1, 0, d);
        check_node(vd, n->c, in_loop, 0, d);
        check_node(vd, n->d, in_loop, 0, d);
        return;
    case JN_MACRO:
    case JN_CALLBLOCK:
        check_node(vd, n->a, in_loop, soft, d);
        check_node(vd, n->b, 0, 0, d);
        check_list(vd, &n->items2, in_loop, soft, d);
        return;
    case JN_FILTERBLOCK:
    case JN_WITH:
    case JN_SET:
        check_node(vd, n->a, in_loop, n->kind == JN_FILTERBLOCK ? 0 : soft, d);
        check_node(vd, n->b, in_loop, 0, d);
        check_node(vd, n->c, in_loop, 0, d);
        check_list(vd, &n->items, in_loop, soft, d);
        return;
    default:
        check_node(vd, n->a, in_loop, soft, d);
        check_node(vd, n->b, in_loop, soft, d);
        check_node(vd, n->c, in_loop, soft, d);
        check_node(vd, n->d, in_loop, soft, d);
        check_list(vd, &n->items, in_loop, soft, d);
        check_list(vd, &n->items2, in_loop, soft, d);
    }
}

int jinja_validate(const jinja_node *root, char *err, size_t errlen)
{
    validator vd = {err, errlen, 0};
    check_node(&vd, root, 0, 0, 0);
    return vd.failed ? -1 : 0;
}

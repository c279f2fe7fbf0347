/* Jinja parser: recursive descent with the precedence of Jinja2 3.x
 * (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary,
 * with filters and tests bound to the unary operand). */
#include "text/jinja_ast.h"

#include <stdio.h>
#include <string.h>

enum { MAX_DEPTH = 200 };

typedef struct {
    jinja_rt *rt;
    const jinja_toks *toks;
    size_t pos;
    int depth;
} parser;

static jinja_node *parse_expression(parser *p, int with_condexpr);
static jinja_node *parse_tuple(parser *p, int with_condexpr, const char *extra_end, int explicit_parens);
static jinja_node *parse_unary(parser *p, int with_filter);
static jinja_nodes parse_body(parser *p, const char *const *end_names, const char *block_name);

static const jinja_tok *cur(parser *p) { return &p->toks->toks[p->pos]; }

static const jinja_tok *look(parser *p)
{
    return p->pos + 1 < p->toks->n ? &p->toks->toks[p->pos + 1] : cur(p);
}

static void next(parser *p)
{
    if (p->pos + 1 < p->toks->n)
        p->pos++;
}

static const char *describe(const jinja_tok *t, char *buf, size_t n)
{
    switch (t->type) {
    case JT_EOF: return "end of template";
    case JT_DATA: return "template data";
    case JT_VAR_BEGIN: return "begin of print statement";
    case JT_VAR_END: return "end of print statement";
    case JT_BLOCK_BEGIN: return "begin of statement block";
    case JT_BLOCK_END: return "end of statement block";
    case JT_NAME: snprintf(buf, n, "'%s'", t->s); return buf;
    case JT_STRING: return "string";
    case JT_INT: return "integer";
    case JT_FLOAT: return "float";
    case JT_OP: snprintf(buf, n, "'%s'", jinja_op_str(t->op)); return buf;
    }
    return "token";
}

static _Noreturn void fail_at(parser *p, const jinja_tok *t, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    jinja_fail(p->rt, "line %d, column %d: %s", t->line, t->col, msg);
}

static _Noreturn void fail_unexpected(parser *p, const char *expected)
{
    char buf[96], msg[200];
    snprintf(msg, sizeof msg, "expected %s, got %%s", expected);
    fail_at(p, cur(p), msg, describe(cur(p), buf, sizeof buf));
}

static int is_op(parser *p, jinja_op op) { return cur(p)->type == JT_OP && cur(p)->op == op; }

static int is_name(parser *p, const char *name)
{
    return cur(p)->type == JT_NAME && !strcmp(cur(p)->s, name);
}

static int skip_op(parser *p, jinja_op op)
{
    if (!is_op(p, op))
        return 0;
    next(p);
    return 1;
}

static int skip_name(parser *p, const char *name)
{
    if (!is_name(p, name))
        return 0;
    next(p);
    return 1;
}

static void expect_op(parser *p, jinja_op op)
{
    if (!skip_op(p, op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", jinja_op_str(op));
        fail_unexpected(p, want);
    }
}

static const char *expect_name(parser *p)
{
    if (cur(p)->type != JT_NAME)
        fail_unexpected(p, "a name");
    const char *s = cur(p)->s;
    next(p);
    return s;
}

static void expect_block_end(parser *p)
{
    if (cur(p)->type != JT_BLOCK_END)
        fail_unexpected(p, "end of statement block");
    next(p);
}

static jinja_node *node(parser *p, jinja_node_kind kind, int line)
{
    jinja_node *n = jinja_alloc(p->rt, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

/* Growable arrays of nodes and names during parsing. */
static void nodes_push(parser *p, jinja_nodes *ns, size_t *cap, jinja_node *n)
{
    if (ns->n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        jinja_node **v = jinja_alloc(p->rt, c * sizeof *v);
        if (ns->n)
            memcpy(v, ns->v, ns->n * sizeof *v);
        ns->v = v;
        *cap = c;
    }
    ns->v[ns->n++] = n;
}

static void names_push(parser *p, jinja_node *n, size_t *cap, const char *name)
{
    if (n->nnames == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        const char **v = jinja_alloc(p->rt, c * sizeof *v);
        if (n->nnames)
            memcpy(v, n->names, n->nnames * sizeof *v);
        n->names = v;
        *cap = c;
    }
    n->names[n->nnames++] = name;
}

static void enter(parser *p)
{
    if (++p->depth > MAX_DEPTH)
        fail_at(p, cur(p), "%s", "template nested too deeply");
}

/* (args..., name=value..., *args, **kwargs) into n->items / names+items2 / b / c */
static void parse_call_args(parser *p, jinja_node *n)
{
    size_t cap1 = 0, cap2 = 0, capn = 0;
    expect_op(p, JOP_LPAREN);
    int require_comma = 0;
    while (!is_op(p, JOP_RPAREN)) {
        if (require_comma) {
            expect_op(p, JOP_COMMA);
            if (is_op(p, JOP_RPAREN))
                break;
        }
        if (is_op(p, JOP_MUL)) {
            if (n->b || n->c)
                fail_at(p, cur(p), "%s", "invalid syntax for function call expression");
            next(p);
            n->b = parse_expression(p, 1);
        } else if (is_op(p, JOP_POW)) {
            if (n->c)
                fail_at(p, cur(p), "%s", "invalid syntax for function call expression");
            next(p);
            n->c = parse_expression(p, 1);
        } else if (cur(p)->type == JT_NAME && look(p)->type == JT_OP && look(p)->op == JOP_ASSIGN) {
            if (n->c)
                fail_at(p, cur(p), "%s", "invalid syntax for function call expression");
            const char *key = cur(p)->s;
            next(p);
            next(p);
            names_push(p, n, &capn, key);
            nodes_push(p, &n->items2, &cap2, parse_expression(p, 1));
        } else {
            if (n->b || n->c || n->nnames)
                fail_at(p, cur(p), "%s", "invalid syntax for function call expression");
            nodes_push(p, &n->items, &cap1, parse_expression(p, 1));
        }
        require_comma = 1;
    }
    expect_op(p, JOP_RPAREN);
}

static jinja_node *parse_subscribed(parser *p)
{
    int line = cur(p)->line;
    jinja_node *args[3] = {0};
    if (is_op(p, JOP_COLON)) {
        next(p);
    } else {
        jinja_node *e = parse_expression(p, 1);
        if (!is_op(p, JOP_COLON))
            return e;
        next(p);
        args[0] = e;
    }
    if (!is_op(p, JOP_COLON) && !is_op(p, JOP_RBRACKET) && !is_op(p, JOP_COMMA))
        args[1] = parse_expression(p, 1);
    if (is_op(p, JOP_COLON)) {
        next(p);
        if (!is_op(p, JOP_RBRACKET) && !is_op(p, JOP_COMMA))
            args[2] = parse_expression(p, 1);
    }
    jinja_node *s = node(p, JN_SLICE, line);
    s->b = args[0];
    s->c = args[1];
    s->d = args[2];
    return s;
}

static jinja_node *parse_subscript(parser *p, jinja_node *obj)
{
    int line = cur(p)->line;
    if (skip_op(p, JOP_DOT)) {
        if (cur(p)->type == JT_NAME) {
            jinja_node *n = node(p, JN_GETATTR, line);
            n->a = obj;
            n->name = cur(p)->s;
            next(p);
            return n;
        }
        if (cur(p)->type != JT_INT)
            fail_unexpected(p, "name or number");
        jinja_node *n = node(p, JN_GETITEM, line), *k = node(p, JN_CONST, line);
        k->value = jinja_int(cur(p)->ival);
        next(p);
        n->a = obj;
        n->b = k;
        return n;
    }
    expect_op(p, JOP_LBRACKET);
    jinja_nodes args = {0};
    size_t cap = 0;
    while (!is_op(p, JOP_RBRACKET)) {
        if (args.n)
            expect_op(p, JOP_COMMA);
        nodes_push(p, &args, &cap, parse_subscribed(p));
    }
    expect_op(p, JOP_RBRACKET);
    if (args.n == 0)
        fail_at(p, cur(p), "%s", "expected an index");
    jinja_node *idx = args.v[0];
    if (args.n > 1) {
        for (size_t i = 0; i < args.n; i++)
            if (args.v[i]->kind == JN_SLICE)
                fail_at(p, cur(p), "%s", "slices inside a tuple subscript are not supported");
        idx = node(p, JN_TUPLE, line);
        idx->items = args;
    }
    if (idx->kind == JN_SLICE) {
        idx->a = obj;
        return idx;
    }
    jinja_node *n = node(p, JN_GETITEM, line);
    n->a = obj;
    n->b = idx;
    return n;
}

static jinja_node *parse_postfix(parser *p, jinja_node *n)
{
    for (;;) {
        if (is_op(p, JOP_DOT) || is_op(p, JOP_LBRACKET)) {
            n = parse_subscript(p, n);
        } else if (is_op(p, JOP_LPAREN)) {
            jinja_node *c = node(p, JN_CALL, cur(p)->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

/* name(.name)* as used after "|" and "is" */
static const char *parse_dotted_name(parser *p)
{
    const char *name = expect_name(p);
    while (is_op(p, JOP_DOT) && look(p)->type == JT_NAME) {
        next(p);
        const char *part = cur(p)->s;
        next(p);
        size_t a = strlen(name), b = strlen(part);
        char *s = jinja_alloc(p->rt, a + b + 2);
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, part, b);
        name = s;
    }
    return name;
}

static jinja_node *parse_filter(parser *p, jinja_node *operand, int start_inline)
{
    while (is_op(p, JOP_PIPE) || start_inline) {
        if (!start_inline)
            next(p);
        start_inline = 0;
        jinja_node *f = node(p, JN_FILTER, cur(p)->line);
        f->name = parse_dotted_name(p);
        f->a = operand;
        if (is_op(p, JOP_LPAREN))
            parse_call_args(p, f);
        operand = f;
    }
    return operand;
}

static jinja_node *parse_test(parser *p, jinja_node *operand)
{
    jinja_node *t = node(p, JN_TEST, cur(p)->line);
    next(p);   /* "is" */
    if (skip_name(p, "not"))
        t->op = 1;
    t->name = parse_dotted_name(p);
    t->a = operand;
    const jinja_tok *c = cur(p);
    if (is_op(p, JOP_LPAREN)) {
        parse_call_args(p, t);
    } else if ((c->type == JT_NAME || c->type == JT_STRING || c->type == JT_INT || c->type == JT_FLOAT ||
                is_op(p, JOP_LPAREN) || is_op(p, JOP_LBRACKET) || is_op(p, JOP_LBRACE)) &&
               !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
        if (is_name(p, "is"))
            fail_at(p, c, "%s", "you cannot chain multiple tests with is");
        jinja_node *arg = parse_unary(p, 0);
        t->items.v = jinja_alloc(p->rt, sizeof *t->items.v);
        t->items.v[0] = arg;
        t->items.n = 1;
    }
    return t;
}

static jinja_node *parse_filter_expr(parser *p, jinja_node *n)
{
    for (;;) {
        if (is_op(p, JOP_PIPE))
            n = parse_filter(p, n, 0);
        else if (is_name(p, "is"))
            n = parse_test(p, n);
        else if (is_op(p, JOP_LPAREN)) {
            jinja_node *c = node(p, JN_CALL, cur(p)->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else
            return n;
    }
}

static jinja_node *parse_primary(parser *p)
{
    const jinja_tok *t = cur(p);
    jinja_node *n;
    switch (t->type) {
    case JT_NAME:
        n = node(p, JN_CONST, t->line);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            n->value = jinja_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            n->value = jinja_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            n->value = jinja_none();
        else {
            n->kind = JN_NAME;
            n->name = t->s;
        }
        next(p);
        return n;
    case JT_STRING: {
        jinja_buf b = {0};
        n = node(p, JN_CONST, t->line);
        while (cur(p)->type == JT_STRING) {
            jinja_buf_put(p->rt, &b, cur(p)->s, cur(p)->n);
            next(p);
        }
        n->value = jinja_buf_to_str(p->rt, &b);
        return n;
    }
    case JT_INT:
        n = node(p, JN_CONST, t->line);
        n->value = jinja_int(t->ival);
        next(p);
        return n;
    case JT_FLOAT:
        n = node(p, JN_CONST, t->line);
        n->value = jinja_float(t->fval);
        next(p);
        return n;
    case JT_OP:
        if (t->op == JOP_LPAREN) {
            next(p);
            n = parse_tuple(p, 1, NULL, 1);
            expect_op(p, JOP_RPAREN);
            return n;
        }
        if (t->op == JOP_LBRACKET || t->op == JOP_LBRACE) {
            int is_dict = t->op == JOP_LBRACE;
            jinja_op close = is_dict ? JOP_RBRACE : JOP_RBRACKET;
            size_t cap1 = 0, cap2 = 0;
            n = node(p, is_dict ? JN_DICT : JN_LIST, t->line);
            next(p);
            while (!is_op(p, close)) {
                if (n->items.n)
                    expect_op(p, JOP_COMMA);
                if (is_op(p, close))
                    break;
                nodes_push(p, &n->items, &cap1, parse_expression(p, 1));
                if (is_dict) {
                    expect_op(p, JOP_COLON);
                    nodes_push(p, &n->items2, &cap2, parse_expression(p, 1));
                }
            }
            expect_op(p, close);
            return n;
        }
        break;
    default:
        break;
    }
    fail_unexpected(p, "an expression");
}

static jinja_node *parse_unary(parser *p, int with_filter)
{
    enter(p);
    jinja_node *n;
    int line = cur(p)->line;
    if (is_op(p, JOP_SUB) || is_op(p, JOP_ADD)) {
        int neg = is_op(p, JOP_SUB);
        next(p);
        n = node(p, neg ? JN_NEG : JN_POS, line);
        n->a = parse_unary(p, 0);
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (with_filter)
        n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jinja_node *binop(parser *p, int op, jinja_node *a, jinja_node *b, int line)
{
    jinja_node *n = node(p, JN_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jinja_node *parse_pow(parser *p)
{
    jinja_node *left = parse_unary(p, 1);
    while (is_op(p, JOP_POW)) {
        int line = cur(p)->line;
        next(p);
        left = binop(p, JOP_POW, left, parse_unary(p, 1), line);
    }
    return left;
}

static jinja_node *parse_math2(parser *p)
{
    jinja_node *left = parse_pow(p);
    while (is_op(p, JOP_MUL) || is_op(p, JOP_DIV) || is_op(p, JOP_FLOORDIV) || is_op(p, JOP_MOD)) {
        int op = cur(p)->op, line = cur(p)->line;
        next(p);
        left = binop(p, op, left, parse_pow(p), line);
    }
    return left;
}

static jinja_node *parse_concat(parser *p)
{
    jinja_node *first = parse_math2(p);
    if (!is_op(p, JOP_TILDE))
        return first;
    jinja_node *n = node(p, JN_CONCAT, cur(p)->line);
    size_t cap = 0;
    nodes_push(p, &n->items, &cap, first);
    while (skip_op(p, JOP_TILDE))
        nodes_push(p, &n->items, &cap, parse_math2(p));
    return n;
}

static jinja_node *parse_math1(parser *p)
{
    jinja_node *left = parse_concat(p);
    while (is_op(p, JOP_ADD) || is_op(p, JOP_SUB)) {
        int op = cur(p)->op, line = cur(p)->line;
        next(p);
        left = binop(p, op, left, parse_concat(p), line);
    }
    return left;
}

static jinja_node *parse_compare(parser *p)
{
    int line = cur(p)->line;
    jinja_node *first = parse_math1(p);
    jinja_node *n = NULL;
    size_t cap = 0, capn = 0;
    for (;;) {
        const char *op = NULL;
        const jinja_tok *t = cur(p);
        if (t->type == JT_OP) {
            switch (t->op) {
            case JOP_EQ: op = "=="; break;
            case JOP_NE: op = "!="; break;
            case JOP_LT: op = "<"; break;
            case JOP_LE: op = "<="; break;
            case JOP_GT: op = ">"; break;
            case JOP_GE: op = ">="; break;
            default: break;
            }
            if (op)
                next(p);
        } else if (is_name(p, "in")) {
            op = "in";
            next(p);
        } else if (is_name(p, "not") && look(p)->type == JT_NAME && !strcmp(look(p)->s, "in")) {
            op = "notin";
            next(p);
            next(p);
        }
        if (!op)
            break;
        if (!n) {
            n = node(p, JN_COMPARE, line);
            n->a = first;
        }
        names_push(p, n, &capn, op);
        nodes_push(p, &n->items2, &cap, parse_math1(p));
    }
    return n ? n : first;
}

static jinja_node *parse_not(parser *p)
{
    if (is_name(p, "not")) {
        int line = cur(p)->line;
        next(p);
        enter(p);
        jinja_node *n = node(p, JN_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jinja_node *parse_and(parser *p)
{
    jinja_node *left = parse_not(p);
    while (is_name(p, "and")) {
        int line = cur(p)->line;
        next(p);
        left = binop(p, JN_AND, left, parse_not(p), line);
    }
    return left;
}

static jinja_node *parse_or(parser *p)
{
    jinja_node *left = parse_and(p);
    while (is_name(p, "or")) {
        int line = cur(p)->line;
        next(p);
        left = binop(p, JN_OR, left, parse_and(p), line);
    }
    return left;
}

static jinja_node *parse_condexpr(parser *p)
{
    enter(p);
    jinja_node *expr = parse_or(p);
    while (is_name(p, "if")) {
        jinja_node *n = node(p, JN_COND, cur(p)->line);
        next(p);
        n->b = expr;
        n->a = parse_or(p);
        if (skip_name(p, "else"))
            n->c = parse_condexpr(p);
        expr = n;
    }
    p->depth--;
    return expr;
}

static jinja_node *parse_expression(parser *p, int with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static int is_tuple_end(parser *p, const char *extra_end)
{
    const jinja_tok *t = cur(p);
    if (t->type == JT_VAR_END || t->type == JT_BLOCK_END || t->type == JT_EOF || is_op(p, JOP_RPAREN))
        return 1;
    return extra_end && is_name(p, extra_end);
}

static jinja_node *parse_tuple(parser *p, int with_condexpr, const char *extra_end, int explicit_parens)
{
    int line = cur(p)->line;
    jinja_node *t = node(p, JN_TUPLE, line);
    size_t cap = 0;
    int is_tuple = 0;
    for (;;) {
        if (t->items.n)
            expect_op(p, JOP_COMMA);
        if (is_tuple_end(p, extra_end))
            break;
        nodes_push(p, &t->items, &cap, parse_expression(p, with_condexpr));
        if (is_op(p, JOP_COMMA))
            is_tuple = 1;
        else
            break;
    }
    if (!is_tuple) {
        if (t->items.n)
            return t->items.v[0];
        if (!explicit_parens)
            fail_unexpected(p, "an expression");
    }
    return t;
}

/* Assignment targets: name, (name, name...), or name.attr when allowed. */
static jinja_node *parse_target(parser *p, jinja_node *stmt, int with_namespace, const char *extra_end)
{
    size_t cap = 0;
    if (with_namespace && cur(p)->type == JT_NAME && look(p)->type == JT_OP && look(p)->op == JOP_DOT) {
        names_push(p, stmt, &cap, cur(p)->s);
        next(p);
        next(p);
        stmt->name = expect_name(p);
        return stmt;
    }
    int parens = skip_op(p, JOP_LPAREN);
    for (;;) {
        names_push(p, stmt, &cap, expect_name(p));
        if (!skip_op(p, JOP_COMMA))
            break;
        if ((extra_end && is_name(p, extra_end)) || is_op(p, JOP_RPAREN) || is_op(p, JOP_ASSIGN))
            break;
    }
    if (parens)
        expect_op(p, JOP_RPAREN);
    return stmt;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static jinja_node *parse_if(parser *p, int line)
{
    jinja_node *n = node(p, JN_IF, line);
    n->a = parse_tuple(p, 0, NULL, 0);
    expect_block_end(p);
    jinja_node *body = node(p, JN_BODY, line);
    body->items = parse_body(p, END_IF, "if");
    n->b = body;
    if (skip_name(p, "elif")) {
        n->c = parse_if(p, cur(p)->line);
        return n;   /* the nested if consumed endif */
    }
    if (skip_name(p, "else")) {
        expect_block_end(p);
        static const char *const end[] = {"endif", NULL};
        jinja_node *eb = node(p, JN_BODY, line);
        eb->items = parse_body(p, end, "if");
        n->c = eb;
    }
    next(p);   /* endif */
    expect_block_end(p);
    return n;
}

static jinja_node *body_until(parser *p, const char *end, const char *block, int line)
{
    const char *ends[] = {end, NULL};
    jinja_node *b = node(p, JN_BODY, line);
    b->items = parse_body(p, ends, block);
    next(p);
    expect_block_end(p);
    return b;
}

/* Macro / call-block parameters: (name [= default], ...) */
static void parse_signature(parser *p, jinja_node *n)
{
    size_t capn = 0, cap2 = 0;
    expect_op(p, JOP_LPAREN);
    while (!is_op(p, JOP_RPAREN)) {
        if (n->nnames)
            expect_op(p, JOP_COMMA);
        names_push(p, n, &capn, expect_name(p));
        jinja_node *def = NULL;
        if (skip_op(p, JOP_ASSIGN))
            def = parse_expression(p, 1);
        else
            for (size_t i = 0; i < n->items2.n; i++)
                if (n->items2.v[i])
                    fail_at(p, cur(p), "%s", "non-default argument follows default argument");
        nodes_push(p, &n->items2, &cap2, def);
    }
    expect_op(p, JOP_RPAREN);
}

static jinja_node *parse_statement(parser *p)
{
    const jinja_tok *t = cur(p);
    if (t->type != JT_NAME)
        fail_unexpected(p, "a tag name");
    const char *tag = t->s;
    int line = t->line;
    next(p);
    jinja_node *n;
    if (!strcmp(tag, "if"))
        return parse_if(p, line);
    if (!strcmp(tag, "for")) {
        n = node(p, JN_FOR, line);
        parse_target(p, n, 0, "in");
        if (!skip_name(p, "in"))
            fail_unexpected(p, "'in'");
        n->a = parse_tuple(p, 0, "recursive", 0);
        if (skip_name(p, "if"))
            n->c = parse_expression(p, 1);
        if (skip_name(p, "recursive"))
            fail_at(p, t, "%s", "recursive for loops are not supported");
        expect_block_end(p);
        jinja_node *body = node(p, JN_BODY, line);
        body->items = parse_body(p, END_FOR, "for");
        n->b = body;
        if (skip_name(p, "else")) {
            expect_block_end(p);
            n->d = body_until(p, "endfor", "for", line);
        } else {
            next(p);
            expect_block_end(p);
        }
        return n;
    }
    if (!strcmp(tag, "set")) {
        n = node(p, JN_SET, line);
        parse_target(p, n, 1, NULL);
        if (skip_op(p, JOP_ASSIGN)) {
            n->a = parse_tuple(p, 1, NULL, 0);
            expect_block_end(p);
            return n;
        }
        if (n->nnames != 1 || n->name)
            fail_unexpected(p, "'='");
        if (is_op(p, JOP_PIPE))
            n->c = parse_filter(p, NULL, 0);
        expect_block_end(p);
        n->b = body_until(p, "endset", "set", line);
        return n;
    }
    if (!strcmp(tag, "macro")) {
        n = node(p, JN_MACRO, line);
        n->name = expect_name(p);
        parse_signature(p, n);
        expect_block_end(p);
        n->b = body_until(p, "endmacro", "macro", line);
        return n;
    }
    if (!strcmp(tag, "call")) {
        n = node(p, JN_CALLBLOCK, line);
        if (is_op(p, JOP_LPAREN))
            parse_signature(p, n);
        n->a = parse_expression(p, 1);
        if (n->a->kind != JN_CALL)
            fail_at(p, t, "%s", "expected call");
        expect_block_end(p);
        n->b = body_until(p, "endcall", "call", line);
        return n;
    }
    if (!strcmp(tag, "filter")) {
        n = node(p, JN_FILTERBLOCK, line);
        n->a = parse_filter(p, NULL, 1);
        expect_block_end(p);
        n->b = body_until(p, "endfilter", "filter", line);
        return n;
    }
    if (!strcmp(tag, "with")) {
        n = node(p, JN_WITH, line);
        size_t capn = 0, cap = 0;
        while (cur(p)->type != JT_BLOCK_END) {
            if (n->nnames)
                expect_op(p, JOP_COMMA);
            names_push(p, n, &capn, expect_name(p));
            expect_op(p, JOP_ASSIGN);
            nodes_push(p, &n->items, &cap, parse_expression(p, 1));
        }
        expect_block_end(p);
        n->b = body_until(p, "endwith", "with", line);
        return n;
    }
    if (!strcmp(tag, "generation")) {
        expect_block_end(p);
        return body_until(p, "endgeneration", "generation", line);
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        n = node(p, tag[0] == 'b' ? JN_BREAK : JN_CONTINUE, line);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "include") || !strcmp(tag, "import") || !strcmp(tag, "from") || !strcmp(tag, "extends") ||
        !strcmp(tag, "block") || !strcmp(tag, "autoescape"))
        fail_at(p, t, "'%s' tags are not supported in chat templates", tag);
    fail_at(p, t, "encountered unknown tag '%s'", tag);
}

static jinja_nodes parse_body(parser *p, const char *const *end_names, const char *block_name)
{
    jinja_nodes body = {0};
    size_t cap = 0;
    enter(p);
    for (;;) {
        const jinja_tok *t = cur(p);
        if (t->type == JT_EOF) {
            if (end_names)
                fail_at(p, t, "unexpected end of template: the '%s' block was never closed", block_name);
            break;
        }
        if (t->type == JT_DATA) {
            jinja_node *n = node(p, JN_DATA, t->line);
            n->value = jinja_str_new(p->rt, t->s, t->n);
            nodes_push(p, &body, &cap, n);
            next(p);
        } else if (t->type == JT_VAR_BEGIN) {
            next(p);
            jinja_node *n = node(p, JN_OUTPUT, t->line);
            n->a = parse_tuple(p, 1, NULL, 0);
            if (cur(p)->type != JT_VAR_END)
                fail_unexpected(p, "end of print statement");
            next(p);
            nodes_push(p, &body, &cap, n);
        } else if (t->type == JT_BLOCK_BEGIN) {
            next(p);
            if (end_names && cur(p)->type == JT_NAME)
                for (const char *const *e = end_names; *e; e++)
                    if (!strcmp(cur(p)->s, *e)) {
                        p->depth--;
                        return body;
                    }
            const jinja_tok *tag = cur(p);
            if (tag->type == JT_NAME && !strncmp(tag->s, "end", 3))
                fail_at(p, tag, "unexpected tag '%s'", tag->s);
            nodes_push(p, &body, &cap, parse_statement(p));
        } else {
            fail_unexpected(p, "template data or a tag");
        }
    }
    p->depth--;
    return body;
}

jinja_node *jinja_parse(jinja_rt *rt, const jinja_toks *toks)
{
    parser p = {.rt = rt, .toks = toks};
    jinja_node *root = node(&p, JN_BODY, 1);
    root->items = parse_body(&p, NULL, NULL);
    return root;
}

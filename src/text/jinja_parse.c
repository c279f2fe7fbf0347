/* Jinja parser, expressions and shared helpers: recursive descent with the precedence of Jinja2 3.x
 * (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary,
 * with filters and tests bound to the unary operand). */
#include "text/jinja_parser.h"

#include <stdio.h>
#include <string.h>

static jinja_node *parse_unary(parser *p, int with_filter);

const jinja_tok *jp_cur(parser *p) { return &p->toks->toks[p->pos]; }

const jinja_tok *jp_look(parser *p)
{
    return p->pos + 1 < p->toks->n ? &p->toks->toks[p->pos + 1] : jp_cur(p);
}

void jp_next(parser *p)
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

_Noreturn void jp_fail_at(parser *p, const jinja_tok *t, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    jinja_fail(p->rt, "line %d, column %d: %s", t->line, t->col, msg);
}

_Noreturn void jp_fail_unexpected(parser *p, const char *expected)
{
    char buf[96], msg[200];
    snprintf(msg, sizeof msg, "expected %s, got %%s", expected);
    jp_fail_at(p, jp_cur(p), msg, describe(jp_cur(p), buf, sizeof buf));
}

int jp_is_op(parser *p, jinja_op op) { return jp_cur(p)->type == JT_OP && jp_cur(p)->op == op; }

int jp_is_name(parser *p, const char *name)
{
    return jp_cur(p)->type == JT_NAME && !strcmp(jp_cur(p)->s, name);
}

int jp_skip_op(parser *p, jinja_op op)
{
    if (!jp_is_op(p, op))
        return 0;
    jp_next(p);
    return 1;
}

int jp_skip_name(parser *p, const char *name)
{
    if (!jp_is_name(p, name))
        return 0;
    jp_next(p);
    return 1;
}

void jp_expect_op(parser *p, jinja_op op)
{
    if (!jp_skip_op(p, op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", jinja_op_str(op));
        jp_fail_unexpected(p, want);
    }
}

const char *jp_expect_name(parser *p)
{
    if (jp_cur(p)->type != JT_NAME)
        jp_fail_unexpected(p, "a name");
    const char *s = jp_cur(p)->s;
    jp_next(p);
    return s;
}

void jp_expect_block_end(parser *p)
{
    if (jp_cur(p)->type != JT_BLOCK_END)
        jp_fail_unexpected(p, "end of statement block");
    jp_next(p);
}

jinja_node *jp_node(parser *p, jinja_node_kind kind, int line)
{
    jinja_node *n = jinja_alloc(p->rt, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

/* Growable arrays of nodes and names during parsing. */
void jp_nodes_push(parser *p, jinja_nodes *ns, size_t *cap, jinja_node *n)
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

void jp_names_push(parser *p, jinja_node *n, size_t *cap, const char *name)
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

void jp_enter(parser *p)
{
    if (++p->depth > JP_MAX_DEPTH)
        jp_fail_at(p, jp_cur(p), "%s", "template nested too deeply");
}

/* (args..., name=value..., *args, **kwargs) into n->items / names+items2 / b / c */
static void parse_call_args(parser *p, jinja_node *n)
{
    size_t cap1 = 0, cap2 = 0, capn = 0;
    jp_expect_op(p, JOP_LPAREN);
    int require_comma = 0;
    while (!jp_is_op(p, JOP_RPAREN)) {
        if (require_comma) {
            jp_expect_op(p, JOP_COMMA);
            if (jp_is_op(p, JOP_RPAREN))
                break;
        }
        if (jp_is_op(p, JOP_MUL)) {
            if (n->b || n->c)
                jp_fail_at(p, jp_cur(p), "%s", "invalid syntax for function call expression");
            jp_next(p);
            n->b = jp_parse_expression(p, 1);
        } else if (jp_is_op(p, JOP_POW)) {
            if (n->c)
                jp_fail_at(p, jp_cur(p), "%s", "invalid syntax for function call expression");
            jp_next(p);
            n->c = jp_parse_expression(p, 1);
        } else if (jp_cur(p)->type == JT_NAME && jp_look(p)->type == JT_OP && jp_look(p)->op == JOP_ASSIGN) {
            if (n->c)
                jp_fail_at(p, jp_cur(p), "%s", "invalid syntax for function call expression");
            const char *key = jp_cur(p)->s;
            jp_next(p);
            jp_next(p);
            jp_names_push(p, n, &capn, key);
            jp_nodes_push(p, &n->items2, &cap2, jp_parse_expression(p, 1));
        } else {
            if (n->b || n->c || n->nnames)
                jp_fail_at(p, jp_cur(p), "%s", "invalid syntax for function call expression");
            jp_nodes_push(p, &n->items, &cap1, jp_parse_expression(p, 1));
        }
        require_comma = 1;
    }
    jp_expect_op(p, JOP_RPAREN);
}

static jinja_node *parse_subscribed(parser *p)
{
    int line = jp_cur(p)->line;
    jinja_node *args[3] = {0};
    if (jp_is_op(p, JOP_COLON)) {
        jp_next(p);
    } else {
        jinja_node *e = jp_parse_expression(p, 1);
        if (!jp_is_op(p, JOP_COLON))
            return e;
        jp_next(p);
        args[0] = e;
    }
    if (!jp_is_op(p, JOP_COLON) && !jp_is_op(p, JOP_RBRACKET) && !jp_is_op(p, JOP_COMMA))
        args[1] = jp_parse_expression(p, 1);
    if (jp_is_op(p, JOP_COLON)) {
        jp_next(p);
        if (!jp_is_op(p, JOP_RBRACKET) && !jp_is_op(p, JOP_COMMA))
            args[2] = jp_parse_expression(p, 1);
    }
    jinja_node *s = jp_node(p, JN_SLICE, line);
    s->b = args[0];
    s->c = args[1];
    s->d = args[2];
    return s;
}

static jinja_node *parse_subscript(parser *p, jinja_node *obj)
{
    int line = jp_cur(p)->line;
    if (jp_skip_op(p, JOP_DOT)) {
        if (jp_cur(p)->type == JT_NAME) {
            jinja_node *n = jp_node(p, JN_GETATTR, line);
            n->a = obj;
            n->name = jp_cur(p)->s;
            jp_next(p);
            return n;
        }
        if (jp_cur(p)->type != JT_INT)
            jp_fail_unexpected(p, "name or number");
        jinja_node *n = jp_node(p, JN_GETITEM, line), *k = jp_node(p, JN_CONST, line);
        k->value = jinja_int(jp_cur(p)->ival);
        jp_next(p);
        n->a = obj;
        n->b = k;
        return n;
    }
    jp_expect_op(p, JOP_LBRACKET);
    jinja_nodes args = {0};
    size_t cap = 0;
    while (!jp_is_op(p, JOP_RBRACKET)) {
        if (args.n)
            jp_expect_op(p, JOP_COMMA);
        jp_nodes_push(p, &args, &cap, parse_subscribed(p));
    }
    jp_expect_op(p, JOP_RBRACKET);
    if (args.n == 0)
        jp_fail_at(p, jp_cur(p), "%s", "expected an index");
    jinja_node *idx = args.v[0];
    if (args.n > 1) {
        for (size_t i = 0; i < args.n; i++)
            if (args.v[i]->kind == JN_SLICE)
                jp_fail_at(p, jp_cur(p), "%s", "slices inside a tuple subscript are not supported");
        idx = jp_node(p, JN_TUPLE, line);
        idx->items = args;
    }
    if (idx->kind == JN_SLICE) {
        idx->a = obj;
        return idx;
    }
    jinja_node *n = jp_node(p, JN_GETITEM, line);
    n->a = obj;
    n->b = idx;
    return n;
}

static jinja_node *parse_postfix(parser *p, jinja_node *n)
{
    for (;;) {
        if (jp_is_op(p, JOP_DOT) || jp_is_op(p, JOP_LBRACKET)) {
            n = parse_subscript(p, n);
        } else if (jp_is_op(p, JOP_LPAREN)) {
            jinja_node *c = jp_node(p, JN_CALL, jp_cur(p)->line);
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
    const char *name = jp_expect_name(p);
    while (jp_is_op(p, JOP_DOT) && jp_look(p)->type == JT_NAME) {
        jp_next(p);
        const char *part = jp_cur(p)->s;
        jp_next(p);
        size_t a = strlen(name), b = strlen(part);
        char *s = jinja_alloc(p->rt, a + b + 2);
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, part, b);
        name = s;
    }
    return name;
}

jinja_node *jp_parse_filter(parser *p, jinja_node *operand, int start_inline)
{
    while (jp_is_op(p, JOP_PIPE) || start_inline) {
        if (!start_inline)
            jp_next(p);
        start_inline = 0;
        jinja_node *f = jp_node(p, JN_FILTER, jp_cur(p)->line);
        f->name = parse_dotted_name(p);
        f->a = operand;
        if (jp_is_op(p, JOP_LPAREN))
            parse_call_args(p, f);
        operand = f;
    }
    return operand;
}

static jinja_node *parse_test(parser *p, jinja_node *operand)
{
    jinja_node *t = jp_node(p, JN_TEST, jp_cur(p)->line);
    jp_next(p);   /* "is" */
    if (jp_skip_name(p, "not"))
        t->op = 1;
    t->name = parse_dotted_name(p);
    t->a = operand;
    const jinja_tok *c = jp_cur(p);
    if (jp_is_op(p, JOP_LPAREN)) {
        parse_call_args(p, t);
    } else if ((c->type == JT_NAME || c->type == JT_STRING || c->type == JT_INT || c->type == JT_FLOAT ||
                jp_is_op(p, JOP_LPAREN) || jp_is_op(p, JOP_LBRACKET) || jp_is_op(p, JOP_LBRACE)) &&
               !jp_is_name(p, "else") && !jp_is_name(p, "or") && !jp_is_name(p, "and")) {
        if (jp_is_name(p, "is"))
            jp_fail_at(p, c, "%s", "you cannot chain multiple tests with is");
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
        if (jp_is_op(p, JOP_PIPE))
            n = jp_parse_filter(p, n, 0);
        else if (jp_is_name(p, "is"))
            n = parse_test(p, n);
        else if (jp_is_op(p, JOP_LPAREN)) {
            jinja_node *c = jp_node(p, JN_CALL, jp_cur(p)->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else
            return n;
    }
}

static jinja_node *parse_primary(parser *p)
{
    const jinja_tok *t = jp_cur(p);
    jinja_node *n;
    switch (t->type) {
    case JT_NAME:
        n = jp_node(p, JN_CONST, t->line);
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
        jp_next(p);
        return n;
    case JT_STRING: {
        jinja_buf b = {0};
        n = jp_node(p, JN_CONST, t->line);
        while (jp_cur(p)->type == JT_STRING) {
            jinja_buf_put(p->rt, &b, jp_cur(p)->s, jp_cur(p)->n);
            jp_next(p);
        }
        n->value = jinja_buf_to_str(p->rt, &b);
        return n;
    }
    case JT_INT:
        n = jp_node(p, JN_CONST, t->line);
        n->value = jinja_int(t->ival);
        jp_next(p);
        return n;
    case JT_FLOAT:
        n = jp_node(p, JN_CONST, t->line);
        n->value = jinja_float(t->fval);
        jp_next(p);
        return n;
    case JT_OP:
        if (t->op == JOP_LPAREN) {
            jp_next(p);
            n = jp_parse_tuple(p, 1, NULL, 1);
            jp_expect_op(p, JOP_RPAREN);
            return n;
        }
        if (t->op == JOP_LBRACKET || t->op == JOP_LBRACE) {
            int is_dict = t->op == JOP_LBRACE;
            jinja_op close = is_dict ? JOP_RBRACE : JOP_RBRACKET;
            size_t cap1 = 0, cap2 = 0;
            n = jp_node(p, is_dict ? JN_DICT : JN_LIST, t->line);
            jp_next(p);
            while (!jp_is_op(p, close)) {
                if (n->items.n)
                    jp_expect_op(p, JOP_COMMA);
                if (jp_is_op(p, close))
                    break;
                jp_nodes_push(p, &n->items, &cap1, jp_parse_expression(p, 1));
                if (is_dict) {
                    jp_expect_op(p, JOP_COLON);
                    jp_nodes_push(p, &n->items2, &cap2, jp_parse_expression(p, 1));
                }
            }
            jp_expect_op(p, close);
            return n;
        }
        break;
    default:
        break;
    }
    jp_fail_unexpected(p, "an expression");
}

static jinja_node *parse_unary(parser *p, int with_filter)
{
    jp_enter(p);
    jinja_node *n;
    int line = jp_cur(p)->line;
    if (jp_is_op(p, JOP_SUB) || jp_is_op(p, JOP_ADD)) {
        int neg = jp_is_op(p, JOP_SUB);
        jp_next(p);
        n = jp_node(p, neg ? JN_NEG : JN_POS, line);
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
    jinja_node *n = jp_node(p, JN_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jinja_node *parse_pow(parser *p)
{
    jinja_node *left = parse_unary(p, 1);
    while (jp_is_op(p, JOP_POW)) {
        int line = jp_cur(p)->line;
        jp_next(p);
        left = binop(p, JOP_POW, left, parse_unary(p, 1), line);
    }
    return left;
}

static jinja_node *parse_math2(parser *p)
{
    jinja_node *left = parse_pow(p);
    while (jp_is_op(p, JOP_MUL) || jp_is_op(p, JOP_DIV) || jp_is_op(p, JOP_FLOORDIV) || jp_is_op(p, JOP_MOD)) {
        int op = jp_cur(p)->op, line = jp_cur(p)->line;
        jp_next(p);
        left = binop(p, op, left, parse_pow(p), line);
    }
    return left;
}

static jinja_node *parse_concat(parser *p)
{
    jinja_node *first = parse_math2(p);
    if (!jp_is_op(p, JOP_TILDE))
        return first;
    jinja_node *n = jp_node(p, JN_CONCAT, jp_cur(p)->line);
    size_t cap = 0;
    jp_nodes_push(p, &n->items, &cap, first);
    while (jp_skip_op(p, JOP_TILDE))
        jp_nodes_push(p, &n->items, &cap, parse_math2(p));
    return n;
}

static jinja_node *parse_math1(parser *p)
{
    jinja_node *left = parse_concat(p);
    while (jp_is_op(p, JOP_ADD) || jp_is_op(p, JOP_SUB)) {
        int op = jp_cur(p)->op, line = jp_cur(p)->line;
        jp_next(p);
        left = binop(p, op, left, parse_concat(p), line);
    }
    return left;
}

static jinja_node *parse_compare(parser *p)
{
    int line = jp_cur(p)->line;
    jinja_node *first = parse_math1(p);
    jinja_node *n = NULL;
    size_t cap = 0, capn = 0;
    for (;;) {
        const char *op = NULL;
        const jinja_tok *t = jp_cur(p);
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
                jp_next(p);
        } else if (jp_is_name(p, "in")) {
            op = "in";
            jp_next(p);
        } else if (jp_is_name(p, "not") && jp_look(p)->type == JT_NAME && !strcmp(jp_look(p)->s, "in")) {
            op = "notin";
            jp_next(p);
            jp_next(p);
        }
        if (!op)
            break;
        if (!n) {
            n = jp_node(p, JN_COMPARE, line);
            n->a = first;
        }
        jp_names_push(p, n, &capn, op);
        jp_nodes_push(p, &n->items2, &cap, parse_math1(p));
    }
    return n ? n : first;
}

static jinja_node *parse_not(parser *p)
{
    if (jp_is_name(p, "not")) {
        int line = jp_cur(p)->line;
        jp_next(p);
        jp_enter(p);
        jinja_node *n = jp_node(p, JN_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jinja_node *parse_and(parser *p)
{
    jinja_node *left = parse_not(p);
    while (jp_is_name(p, "and")) {
        int line = jp_cur(p)->line;
        jp_next(p);
        left = binop(p, JN_AND, left, parse_not(p), line);
    }
    return left;
}

static jinja_node *parse_or(parser *p)
{
    jinja_node *left = parse_and(p);
    while (jp_is_name(p, "or")) {
        int line = jp_cur(p)->line;
        jp_next(p);
        left = binop(p, JN_OR, left, parse_and(p), line);
    }
    return left;
}

static jinja_node *parse_condexpr(parser *p)
{
    jp_enter(p);
    jinja_node *expr = parse_or(p);
    while (jp_is_name(p, "if")) {
        jinja_node *n = jp_node(p, JN_COND, jp_cur(p)->line);
        jp_next(p);
        n->b = expr;
        n->a = parse_or(p);
        if (jp_skip_name(p, "else"))
            n->c = parse_condexpr(p);
        expr = n;
    }
    p->depth--;
    return expr;
}

jinja_node *jp_parse_expression(parser *p, int with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static int is_tuple_end(parser *p, const char *extra_end)
{
    const jinja_tok *t = jp_cur(p);
    if (t->type == JT_VAR_END || t->type == JT_BLOCK_END || t->type == JT_EOF || jp_is_op(p, JOP_RPAREN))
        return 1;
    return extra_end && jp_is_name(p, extra_end);
}

jinja_node *jp_parse_tuple(parser *p, int with_condexpr, const char *extra_end, int explicit_parens)
{
    int line = jp_cur(p)->line;
    jinja_node *t = jp_node(p, JN_TUPLE, line);
    size_t cap = 0;
    int is_tuple = 0;
    for (;;) {
        if (t->items.n)
            jp_expect_op(p, JOP_COMMA);
        if (is_tuple_end(p, extra_end))
            break;
        jp_nodes_push(p, &t->items, &cap, jp_parse_expression(p, with_condexpr));
        if (jp_is_op(p, JOP_COMMA))
            is_tuple = 1;
        else
            break;
    }
    if (!is_tuple) {
        if (t->items.n)
            return t->items.v[0];
        if (!explicit_parens)
            jp_fail_unexpected(p, "an expression");
    }
    return t;
}

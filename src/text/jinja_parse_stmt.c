/* Jinja parser, statements: if/elif/else, for/else, set (plain, tuple,
 * namespace attribute, block), macro, call, filter, with, break/continue and
 * the template body. */
#include "text/jinja_parser.h"

#include <string.h>

static jinja_nodes parse_body(parser *p, const char *const *end_names, const char *block_name);

/* Assignment targets: name, (name, name...), or name.attr when allowed. */
static jinja_node *parse_target(parser *p, jinja_node *stmt, int with_namespace, const char *extra_end)
{
    size_t cap = 0;
    if (with_namespace && jp_cur(p)->type == JT_NAME && jp_look(p)->type == JT_OP && jp_look(p)->op == JOP_DOT) {
        jp_names_push(p, stmt, &cap, jp_cur(p)->s);
        jp_next(p);
        jp_next(p);
        stmt->name = jp_expect_name(p);
        return stmt;
    }
    int parens = jp_skip_op(p, JOP_LPAREN);
    for (;;) {
        jp_names_push(p, stmt, &cap, jp_expect_name(p));
        if (!jp_skip_op(p, JOP_COMMA))
            break;
        if ((extra_end && jp_is_name(p, extra_end)) || jp_is_op(p, JOP_RPAREN) || jp_is_op(p, JOP_ASSIGN))
            break;
    }
    if (parens)
        jp_expect_op(p, JOP_RPAREN);
    return stmt;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static jinja_node *parse_if(parser *p, int line)
{
    jinja_node *n = jp_node(p, JN_IF, line);
    n->a = jp_parse_tuple(p, 0, NULL, 0);
    jp_expect_block_end(p);
    jinja_node *body = jp_node(p, JN_BODY, line);
    body->items = parse_body(p, END_IF, "if");
    n->b = body;
    if (jp_skip_name(p, "elif")) {
        n->c = parse_if(p, jp_cur(p)->line);
        return n;   /* the nested if consumed endif */
    }
    if (jp_skip_name(p, "else")) {
        jp_expect_block_end(p);
        static const char *const end[] = {"endif", NULL};
        jinja_node *eb = jp_node(p, JN_BODY, line);
        eb->items = parse_body(p, end, "if");
        n->c = eb;
    }
    jp_next(p);   /* endif */
    jp_expect_block_end(p);
    return n;
}

static jinja_node *body_until(parser *p, const char *end, const char *block, int line)
{
    const char *ends[] = {end, NULL};
    jinja_node *b = jp_node(p, JN_BODY, line);
    b->items = parse_body(p, ends, block);
    jp_next(p);
    jp_expect_block_end(p);
    return b;
}

/* Macro / call-block parameters: (name [= default], ...) */
static void parse_signature(parser *p, jinja_node *n)
{
    size_t capn = 0, cap2 = 0;
    jp_expect_op(p, JOP_LPAREN);
    while (!jp_is_op(p, JOP_RPAREN)) {
        if (n->nnames)
            jp_expect_op(p, JOP_COMMA);
        jp_names_push(p, n, &capn, jp_expect_name(p));
        jinja_node *def = NULL;
        if (jp_skip_op(p, JOP_ASSIGN))
            def = jp_parse_expression(p, 1);
        else
            for (size_t i = 0; i < n->items2.n; i++)
                if (n->items2.v[i])
                    jp_fail_at(p, jp_cur(p), "%s", "non-default argument follows default argument");
        jp_nodes_push(p, &n->items2, &cap2, def);
    }
    jp_expect_op(p, JOP_RPAREN);
}

static jinja_node *parse_statement(parser *p)
{
    const jinja_tok *t = jp_cur(p);
    if (t->type != JT_NAME)
        jp_fail_unexpected(p, "a tag name");
    const char *tag = t->s;
    int line = t->line;
    jp_next(p);
    jinja_node *n;
    if (!strcmp(tag, "if"))
        return parse_if(p, line);
    if (!strcmp(tag, "for")) {
        n = jp_node(p, JN_FOR, line);
        parse_target(p, n, 0, "in");
        if (!jp_skip_name(p, "in"))
            jp_fail_unexpected(p, "'in'");
        n->a = jp_parse_tuple(p, 0, "recursive", 0);
        if (jp_skip_name(p, "if"))
            n->c = jp_parse_expression(p, 1);
        if (jp_skip_name(p, "recursive"))
            jp_fail_at(p, t, "%s", "recursive for loops are not supported");
        jp_expect_block_end(p);
        jinja_node *body = jp_node(p, JN_BODY, line);
        body->items = parse_body(p, END_FOR, "for");
        n->b = body;
        if (jp_skip_name(p, "else")) {
            jp_expect_block_end(p);
            n->d = body_until(p, "endfor", "for", line);
        } else {
            jp_next(p);
            jp_expect_block_end(p);
        }
        return n;
    }
    if (!strcmp(tag, "set")) {
        n = jp_node(p, JN_SET, line);
        parse_target(p, n, 1, NULL);
        if (jp_skip_op(p, JOP_ASSIGN)) {
            n->a = jp_parse_tuple(p, 1, NULL, 0);
            jp_expect_block_end(p);
            return n;
        }
        if (n->nnames != 1 || n->name)
            jp_fail_unexpected(p, "'='");
        if (jp_is_op(p, JOP_PIPE))
            n->c = jp_parse_filter(p, NULL, 0);
        jp_expect_block_end(p);
        n->b = body_until(p, "endset", "set", line);
        return n;
    }
    if (!strcmp(tag, "macro")) {
        n = jp_node(p, JN_MACRO, line);
        n->name = jp_expect_name(p);
        parse_signature(p, n);
        jp_expect_block_end(p);
        n->b = body_until(p, "endmacro", "macro", line);
        return n;
    }
    if (!strcmp(tag, "call")) {
        n = jp_node(p, JN_CALLBLOCK, line);
        if (jp_is_op(p, JOP_LPAREN))
            parse_signature(p, n);
        n->a = jp_parse_expression(p, 1);
        if (n->a->kind != JN_CALL)
            jp_fail_at(p, t, "%s", "expected call");
        jp_expect_block_end(p);
        n->b = body_until(p, "endcall", "call", line);
        return n;
    }
    if (!strcmp(tag, "filter")) {
        n = jp_node(p, JN_FILTERBLOCK, line);
        n->a = jp_parse_filter(p, NULL, 1);
        jp_expect_block_end(p);
        n->b = body_until(p, "endfilter", "filter", line);
        return n;
    }
    if (!strcmp(tag, "with")) {
        n = jp_node(p, JN_WITH, line);
        size_t capn = 0, cap = 0;
        while (jp_cur(p)->type != JT_BLOCK_END) {
            if (n->nnames)
                jp_expect_op(p, JOP_COMMA);
            jp_names_push(p, n, &capn, jp_expect_name(p));
            jp_expect_op(p, JOP_ASSIGN);
            jp_nodes_push(p, &n->items, &cap, jp_parse_expression(p, 1));
        }
        jp_expect_block_end(p);
        n->b = body_until(p, "endwith", "with", line);
        return n;
    }
    if (!strcmp(tag, "generation")) {
        jp_expect_block_end(p);
        return body_until(p, "endgeneration", "generation", line);
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        n = jp_node(p, tag[0] == 'b' ? JN_BREAK : JN_CONTINUE, line);
        jp_expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "include") || !strcmp(tag, "import") || !strcmp(tag, "from") || !strcmp(tag, "extends") ||
        !strcmp(tag, "block") || !strcmp(tag, "autoescape"))
        jp_fail_at(p, t, "'%s' tags are not supported in chat templates", tag);
    jp_fail_at(p, t, "encountered unknown tag '%s'", tag);
}

static jinja_nodes parse_body(parser *p, const char *const *end_names, const char *block_name)
{
    jinja_nodes body = {0};
    size_t cap = 0;
    jp_enter(p);
    for (;;) {
        const jinja_tok *t = jp_cur(p);
        if (t->type == JT_EOF) {
            if (end_names)
                jp_fail_at(p, t, "unexpected end of template: the '%s' block was never closed", block_name);
            break;
        }
        if (t->type == JT_DATA) {
            jinja_node *n = jp_node(p, JN_DATA, t->line);
            n->value = jinja_str_new(p->rt, t->s, t->n);
            jp_nodes_push(p, &body, &cap, n);
            jp_next(p);
        } else if (t->type == JT_VAR_BEGIN) {
            jp_next(p);
            jinja_node *n = jp_node(p, JN_OUTPUT, t->line);
            n->a = jp_parse_tuple(p, 1, NULL, 0);
            if (jp_cur(p)->type != JT_VAR_END)
                jp_fail_unexpected(p, "end of print statement");
            jp_next(p);
            jp_nodes_push(p, &body, &cap, n);
        } else if (t->type == JT_BLOCK_BEGIN) {
            jp_next(p);
            if (end_names && jp_cur(p)->type == JT_NAME)
                for (const char *const *e = end_names; *e; e++)
                    if (!strcmp(jp_cur(p)->s, *e)) {
                        p->depth--;
                        return body;
                    }
            const jinja_tok *tag = jp_cur(p);
            if (tag->type == JT_NAME && !strncmp(tag->s, "end", 3))
                jp_fail_at(p, tag, "unexpected tag '%s'", tag->s);
            jp_nodes_push(p, &body, &cap, parse_statement(p));
        } else {
            jp_fail_unexpected(p, "template data or a tag");
        }
    }
    p->depth--;
    return body;
}

jinja_node *jinja_parse(jinja_rt *rt, const jinja_toks *toks)
{
    parser p = {.rt = rt, .toks = toks};
    jinja_node *root = jp_node(&p, JN_BODY, 1);
    root->items = parse_body(&p, NULL, NULL);
    return root;
}

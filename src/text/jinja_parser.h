/* Shared state and helpers of the Jinja parser, split in expressions
 * (jinja_parse.c) and statements (jinja_parse_stmt.c). Internal to those two. */
#ifndef TERN_TEXT_JINJA_PARSER_H
#define TERN_TEXT_JINJA_PARSER_H

#include "text/jinja_ast.h"

enum { JP_MAX_DEPTH = 200 };

typedef struct {
    jinja_rt *rt;
    const jinja_toks *toks;
    size_t pos;
    int depth;               /* nesting, bounded by JP_MAX_DEPTH */
} parser;

const jinja_tok *jp_cur(parser *p);
const jinja_tok *jp_look(parser *p);
void jp_next(parser *p);
int jp_is_op(parser *p, jinja_op op);
int jp_is_name(parser *p, const char *name);
int jp_skip_op(parser *p, jinja_op op);
int jp_skip_name(parser *p, const char *name);
void jp_expect_op(parser *p, jinja_op op);
const char *jp_expect_name(parser *p);
void jp_expect_block_end(parser *p);
jinja_node *jp_node(parser *p, jinja_node_kind kind, int line);
void jp_nodes_push(parser *p, jinja_nodes *ns, size_t *cap, jinja_node *n);
void jp_names_push(parser *p, jinja_node *n, size_t *cap, const char *name);
void jp_enter(parser *p);    /* one level deeper; fails past JP_MAX_DEPTH */
_Noreturn void jp_fail_at(parser *p, const jinja_tok *t, const char *fmt, const char *arg);
_Noreturn void jp_fail_unexpected(parser *p, const char *expected);
jinja_node *jp_parse_expression(parser *p, int with_condexpr);
jinja_node *jp_parse_tuple(parser *p, int with_condexpr, const char *extra_end, int explicit_parens);
/* Filter chain "|f(args)|g"; start_inline: the first name comes without "|". */
jinja_node *jp_parse_filter(parser *p, jinja_node *operand, int start_inline);

#endif

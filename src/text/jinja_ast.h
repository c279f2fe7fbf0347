/* Jinja syntax tree and parser (tokens → tree, grammar of Jinja2 3.x).
 *
 * One node struct serves every kind; the comment on each kind says which
 * fields it uses. Nodes live in the template's arena and are never changed
 * after parsing. */
#ifndef TERN_TEXT_JINJA_AST_H
#define TERN_TEXT_JINJA_AST_H

#include "text/jinja_lex.h"

typedef enum {
    /* expressions */
    JN_CONST,      /* value */
    JN_NAME,       /* name */
    JN_GETATTR,    /* a.name */
    JN_GETITEM,    /* a[b] */
    JN_SLICE,      /* a[b:c:d], each of b c d may be NULL */
    JN_CALL,       /* a(items..., names[i]=items2[i]...), b = *args, c = **kwargs */
    JN_FILTER,     /* a|name(items..., names=items2); a is NULL inside {% filter %} */
    JN_TEST,       /* a is [not] name(items..., names=items2); op = negated */
    JN_NOT,        /* not a */
    JN_NEG,        /* -a */
    JN_POS,        /* +a */
    JN_BINOP,      /* a op b (op: jinja_op, or JN_AND / JN_OR below) */
    JN_CONCAT,     /* items joined with ~ */
    JN_COMPARE,    /* a, then items2[i] compared with op codes in names[i] ("==", "in", "notin", ...) */
    JN_COND,       /* b if a else c (c may be NULL) */
    JN_LIST,       /* [items] */
    JN_TUPLE,      /* (items) */
    JN_DICT,       /* {items[i]: items2[i]} */
    /* statements */
    JN_DATA,       /* value (a str) */
    JN_OUTPUT,     /* {{ a }} */
    JN_BODY,       /* items: statements in order */
    JN_IF,         /* if a: b else c (c may be NULL) */
    JN_FOR,        /* for names in a [if c]: b else d; op = recursive */
    JN_SET,        /* names = a; with name set: namespace attribute (names[0].name = a);
                      block form: a NULL, b the body, c a filter chain or NULL */
    JN_MACRO,      /* macro name(names = defaults in items2): b; items2[i] NULL when no default */
    JN_CALLBLOCK,  /* call(names = items2) a: b  (b is the caller's body) */
    JN_FILTERBLOCK,/* filter a: b */
    JN_WITH,       /* with names[i] = items[i]: b */
    JN_BREAK,
    JN_CONTINUE
} jinja_node_kind;

enum { JN_AND = 100, JN_OR = 101 };

typedef struct jinja_node jinja_node;

typedef struct {
    jinja_node **v;
    size_t n;
} jinja_nodes;

struct jinja_node {
    jinja_node_kind kind;
    int line;
    int op;
    const char *name;
    jinja_val value;
    jinja_node *a, *b, *c, *d;
    jinja_nodes items, items2;
    const char **names;
    size_t nnames;
};

/* Parses tokens into a JN_BODY tree in rt's arena. A syntax error fails rt
 * with "line L, column C: message". */
jinja_node *jinja_parse(jinja_rt *rt, const jinja_toks *toks);

#endif

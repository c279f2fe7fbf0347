/* Jinja lexer: template source → tokens, with the whitespace rules of the
 * environment transformers uses (trim_blocks, lstrip_blocks, no trailing
 * newline kept, "-"/"+" modifiers on tags, comments and raw blocks). */
#ifndef TERN_TEXT_JINJA_LEX_H
#define TERN_TEXT_JINJA_LEX_H

#include "text/jinja_value.h"

typedef enum {
    JT_EOF, JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP
} jinja_tok_type;

typedef enum {
    JOP_NONE, JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_TILDE,
    JOP_LBRACKET, JOP_RBRACKET, JOP_LPAREN, JOP_RPAREN, JOP_LBRACE, JOP_RBRACE,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_ASSIGN, JOP_DOT, JOP_COLON,
    JOP_PIPE, JOP_COMMA, JOP_SEMICOLON
} jinja_op;

typedef struct {
    jinja_tok_type type;
    jinja_op op;              /* JT_OP */
    int line, col;            /* 1-based position in the template */
    const char *s;            /* JT_DATA / JT_STRING: decoded text; JT_NAME: the name (arena, NUL-terminated) */
    size_t n;                 /* bytes of s */
    int64_t ival;             /* JT_INT */
    double fval;              /* JT_FLOAT */
} jinja_tok;

typedef struct {
    jinja_tok *toks;          /* arena; the last one is JT_EOF */
    size_t n;
} jinja_toks;

/* Tokenizes src (borrowed, n bytes) into out; all memory from rt. A lexing
 * error fails rt with "line L, column C: message". */
void jinja_lex(jinja_rt *rt, const char *src, size_t n, jinja_toks *out);

/* Printable name of an operator ("+", "//", ...). */
const char *jinja_op_str(jinja_op op);

#endif

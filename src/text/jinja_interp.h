/* Jinja interpreter internals shared by the evaluator (jinja_eval.c), the
 * statement executor (jinja_exec.c), filters (jinja_filters.c), tests
 * (jinja_tests.c), methods and global functions (jinja_methods.c) and JSON
 * conversion (jinja_json.c). */
#ifndef TERN_TEXT_JINJA_INTERP_H
#define TERN_TEXT_JINJA_INTERP_H

#include <jansson.h>

#include "text/jinja_ast.h"

typedef enum {
    JF_MACRO,     /* a {% macro %} or the caller() of a call block */
    JF_METHOD,    /* a method bound to self (str.split, dict.items, ...) */
    JF_GLOBAL,    /* namespace, range, raise_exception, dict, strftime_now */
    JF_CYCLE      /* loop.cycle: self is unused, picks by the loop index in `index` */
} jinja_func_kind;

typedef struct jinja_scope jinja_scope;

struct jinja_func {
    jinja_func_kind kind;
    const char *name;
    jinja_val self;               /* JF_METHOD: the bound object */
    const jinja_node *macro;      /* JF_MACRO: the macro or call-block node */
    jinja_scope *closure;         /* JF_MACRO: scope the body sees as its parent */
    jinja_val caller;             /* JF_MACRO from a call block: value of `caller` inside */
    int64_t index;                /* JF_CYCLE: loop.index0 */
};

struct jinja_scope {
    jinja_scope *parent;
    jinja_val vars;               /* dict name → value */
};

typedef struct {
    jinja_rt *rt;
    jinja_scope *globals;         /* render arguments and global functions */
    int depth, max_depth;         /* call/evaluation nesting */
    uint64_t steps, max_steps;    /* loop iterations and calls, bounds run time */
} jinja_ctx;

typedef struct {
    jinja_val *pos;
    size_t npos;
    const char **kwnames;
    jinja_val *kwvals;
    size_t nkw;
} jinja_args;

/* Evaluator. */
jinja_val jinja_eval(jinja_ctx *c, jinja_scope *s, const jinja_node *n);
/* Evaluates call arguments of n (items, names/items2, *b, **c). */
void jinja_eval_args(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_args *out);
jinja_val jinja_getattr(jinja_ctx *c, jinja_val obj, const char *name);
jinja_val jinja_getitem(jinja_ctx *c, jinja_val obj, jinja_val key);
jinja_val jinja_lookup(jinja_scope *s, const char *name);
jinja_val jinja_binop(jinja_ctx *c, int op, jinja_val a, jinja_val b);
/* Python iteration: list/tuple items, dict keys, str code points; undefined is empty. */
jinja_val jinja_iterable_list(jinja_ctx *c, jinja_val v);
jinja_scope *jinja_scope_new(jinja_ctx *c, jinja_scope *parent);
void jinja_scope_set(jinja_ctx *c, jinja_scope *s, const char *name, jinja_val v);

/* Statements; returns 0, or JN_BREAK / JN_CONTINUE to unwind a loop body. */
int jinja_exec(jinja_ctx *c, jinja_scope *s, const jinja_node *n, jinja_buf *out);
jinja_val jinja_call(jinja_ctx *c, jinja_val fn, const jinja_args *args);
void jinja_step(jinja_ctx *c);
/* Checks what Jinja checks when compiling: known filters and tests, break and
 * continue inside loops. Returns 0, or -1 with "line L: message" in err. */
int jinja_validate(const jinja_node *root, char *err, size_t errlen);

/* Filters, tests, methods, global functions. */
jinja_val jinja_filter(jinja_ctx *c, const char *name, jinja_val v, const jinja_args *args);
int jinja_has_filter(const char *name);
int jinja_test(jinja_ctx *c, const char *name, jinja_val v, const jinja_args *args);
int jinja_has_test(const char *name);
/* 1 if `name` is a method of v's type (binds a JF_METHOD). */
int jinja_has_method(jinja_val v, const char *name);
jinja_val jinja_call_method(jinja_ctx *c, jinja_val self, const char *name, const jinja_args *args);
jinja_val jinja_call_global(jinja_ctx *c, const char *name, const jinja_args *args);
const char *jinja_func_name(const jinja_func *fn);

/* Argument helpers: positional index or keyword name; *present tells which. */
jinja_val jinja_arg(const jinja_args *a, size_t index, const char *name, jinja_val dflt);
void jinja_check_args(jinja_ctx *c, const jinja_args *a, size_t max_pos, const char *const *kw, const char *what);

/* String helpers used by filters and methods. */
jinja_val jinja_str_strip(jinja_ctx *c, jinja_val s, jinja_val chars, int left, int right);
jinja_val jinja_str_replace(jinja_ctx *c, jinja_val s, jinja_val old, jinja_val repl, int64_t count);
jinja_val jinja_str_case(jinja_ctx *c, jinja_val s, int mode);  /* 0 lower, 1 upper, 2 title, 3 capitalize */
int64_t jinja_len(jinja_ctx *c, jinja_val v);
/* Python's str % args (printf style, %(key)s with a mapping) and str.format(). */
jinja_val jinja_percent_format(jinja_ctx *c, jinja_val fmt, jinja_val args);
jinja_val jinja_brace_format(jinja_ctx *c, jinja_val fmt, const jinja_args *a);
/* markupsafe.escape: a Markup string of v with & < > ' " escaped (Markup stays as is). */
jinja_val jinja_html_escape(jinja_ctx *c, jinja_val v);

/* JSON. */
jinja_val jinja_from_json(jinja_rt *rt, const json_t *j);
/* json.dumps(v, ensure_ascii=..., indent=..., separators=(item_sep, key_sep), sort_keys=...).
 * indent < 0: None; indent_str (or NULL) replaces `indent` spaces per level;
 * item_sep/key_sep NULL: Python's defaults for the indent. */
void jinja_tojson(jinja_ctx *c, jinja_buf *b, jinja_val v, int indent, const char *indent_str,
                  const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii);

#endif

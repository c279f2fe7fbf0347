/* Jinja value model and the runtime that owns every value.
 *
 * All memory of a parse or a render comes from one arena (jinja_rt) and is
 * released at once with jinja_rt_release, so values are plain structs without
 * reference counts and cycles (a namespace holding itself) cannot leak.
 * Errors unwind with longjmp to the jmp_buf armed by the entry point
 * (jinja_fail), which keeps the evaluator free of error plumbing; nothing
 * outside the arena is held across a call that may fail.
 *
 * Semantics follow Python as Jinja2 exposes it: str is a sequence of code
 * points (stored UTF-8), int is 64-bit (overflow is an error instead of a
 * big integer), dicts keep insertion order, bool compares equal to 0/1. */
#ifndef TERN_TEXT_JINJA_VALUE_H
#define TERN_TEXT_JINJA_VALUE_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jinja_block jinja_block;

typedef struct jinja_rt {
    jinja_block *blocks;      /* owned arena chunks */
    size_t bytes;             /* bytes handed out so far */
    size_t max_bytes;         /* arena cap; exceeding it fails the render */
    size_t max_output;        /* cap on any string or output buffer */
    jmp_buf *jmp;             /* where jinja_fail unwinds to (borrowed) */
    int line;                 /* template line being evaluated (for messages) */
    char msg[512];            /* message of the failure that unwound */
} jinja_rt;

typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC
} jinja_kind;

typedef struct jinja_str {
    size_t len;               /* bytes, excluding the terminating NUL */
    int markup;               /* markupsafe.Markup (from |safe or |escape): `+` escapes plain str operands */
    char data[];
} jinja_str;

typedef struct jinja_val jinja_val;
typedef struct jinja_list jinja_list;
typedef struct jinja_dict jinja_dict;
typedef struct jinja_func jinja_func;   /* defined by the interpreter */

struct jinja_val {
    jinja_kind kind;
    union {
        int b;
        int64_t i;
        double f;
        jinja_str *s;
        jinja_list *l;
        jinja_dict *d;
        jinja_func *fn;
        const char *undef_name;   /* what was missing, for error messages */
    } u;
};

/* What Python object a list value stands for. Jinja's select/map/items/...
 * filters return generators and dict.items() returns a view: they iterate like
 * lists but have no len(), are not JSON serializable and (generators) are
 * always true, which templates can observe. */
typedef enum {
    JL_LIST, JL_GENERATOR, JL_REVERSED, JL_DICT_ITEMS, JL_DICT_KEYS, JL_DICT_VALUES
} jinja_list_kind;

struct jinja_list {
    size_t len, cap;
    jinja_val *items;
    int is_tuple;
    jinja_list_kind kind;
};

struct jinja_dict {
    size_t len, cap;
    jinja_val *keys, *vals;
    int is_namespace;
};

typedef struct {
    char *p;
    size_t len, cap;
} jinja_buf;

/* Arena and failure. */
void jinja_rt_init(jinja_rt *rt);
void jinja_rt_release(jinja_rt *rt);
void *jinja_alloc(jinja_rt *rt, size_t n);              /* zeroed; fails the run past max_bytes */
_Noreturn void jinja_fail(jinja_rt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Growing byte buffers inside the arena (capped at max_output). */
void jinja_buf_put(jinja_rt *rt, jinja_buf *b, const char *s, size_t n);
void jinja_buf_puts(jinja_rt *rt, jinja_buf *b, const char *s);
void jinja_buf_printf(jinja_rt *rt, jinja_buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jinja_val jinja_buf_to_str(jinja_rt *rt, const jinja_buf *b);

/* Constructors. */
jinja_val jinja_undef(const char *name);
jinja_val jinja_none(void);
jinja_val jinja_bool(int b);
jinja_val jinja_int(int64_t i);
jinja_val jinja_float(double f);
jinja_val jinja_str_new(jinja_rt *rt, const char *s, size_t n);
jinja_val jinja_cstr(jinja_rt *rt, const char *s);
jinja_val jinja_list_new(jinja_rt *rt, size_t cap);
/* A list standing for another iterable (see jinja_list_kind). */
jinja_val jinja_iter_new(jinja_rt *rt, size_t cap, jinja_list_kind kind);
int jinja_is_plain_list(jinja_val v);   /* a list or tuple, not a generator or view */
void jinja_list_push(jinja_rt *rt, jinja_val list, jinja_val v);
jinja_val jinja_dict_new(jinja_rt *rt);
void jinja_dict_set(jinja_rt *rt, jinja_val dict, jinja_val key, jinja_val v);
/* 1 and *out when key is present. */
int jinja_dict_get(jinja_val dict, jinja_val key, jinja_val *out);
int jinja_dict_get_cstr(jinja_val dict, const char *key, jinja_val *out);

/* Python behaviour. */
int jinja_truthy(jinja_val v);
int jinja_equal(jinja_val a, jinja_val b);
int jinja_compare(jinja_rt *rt, jinja_val a, jinja_val b);   /* <0, 0, >0; fails on unorderable types */
const char *jinja_type_name(jinja_val v);
int jinja_is_number(jinja_val v);                            /* int, float or bool */
double jinja_as_double(jinja_val v);
void jinja_write_str(jinja_rt *rt, jinja_buf *b, jinja_val v);   /* str(v) */
void jinja_write_repr(jinja_rt *rt, jinja_buf *b, jinja_val v);  /* repr(v) */
jinja_val jinja_to_str(jinja_rt *rt, jinja_val v);               /* v itself when already a str */
/* Python's repr of a float into out (at least 32 bytes). */
void jinja_format_float(double f, char *out, size_t n);

/* UTF-8 helpers on str values (code point semantics). */
size_t jinja_utf8_count(const char *s, size_t n);
/* Byte offset of code point index cp (clamped to n). */
size_t jinja_utf8_offset(const char *s, size_t n, size_t cp);
/* Decodes one code point at s (n bytes left), returns its byte length (>= 1). */
size_t jinja_utf8_decode(const char *s, size_t n, int32_t *cp);
size_t jinja_utf8_encode(int32_t cp, char *out);
int jinja_is_space(int32_t cp);                                   /* Python str.isspace */

#endif

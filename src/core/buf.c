/* Growable byte buffer (see buf.h). */
#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tern_buf_init(tern_buf *b) { b->data = NULL; b->len = 0; b->cap = 0; }

void tern_buf_free(tern_buf *b)
{
    free(b->data);
    tern_buf_init(b);
}

void tern_buf_clear(tern_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

static int reserve(tern_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int tern_buf_append(tern_buf *b, const char *s, size_t n)
{
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int tern_buf_puts(tern_buf *b, const char *s) { return tern_buf_append(b, s, strlen(s)); }

int tern_buf_vprintf(tern_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || reserve(b, (size_t)n)) return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int tern_buf_printf(tern_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tern_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void tern_buf_consume(tern_buf *b, size_t n)
{
    if (n >= b->len) { tern_buf_clear(b); return; }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *tern_buf_take(tern_buf *b)
{
    char *s = b->data ? b->data : strdup("");
    tern_buf_init(b);
    return s;
}

const char *tern_buf_str(const tern_buf *b) { return b->data ? b->data : ""; }

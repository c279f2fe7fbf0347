/* Growable byte buffer used by the server pipeline. */
#include "server/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_buf_init(srv_buf *b) { b->data = NULL; b->len = 0; b->cap = 0; }

void srv_buf_free(srv_buf *b)
{
    free(b->data);
    srv_buf_init(b);
}

void srv_buf_clear(srv_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

static int reserve(srv_buf *b, size_t extra)
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

int srv_buf_append(srv_buf *b, const char *s, size_t n)
{
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int srv_buf_puts(srv_buf *b, const char *s) { return srv_buf_append(b, s, strlen(s)); }

int srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void srv_buf_consume(srv_buf *b, size_t n)
{
    if (n >= b->len) { srv_buf_clear(b); return; }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *srv_buf_take(srv_buf *b)
{
    char *s = b->data ? b->data : strdup("");
    srv_buf_init(b);
    return s;
}

const char *srv_buf_str(const srv_buf *b) { return b->data ? b->data : ""; }

/* The server's name for the core byte buffer (core/buf.h): srv_buf is a
 * tern_buf, and each srv_buf_* call is the tern_buf_* call of the same name.
 *
 * Ownership: as in core/buf.h. */
#ifndef TERN_SERVER_BUF_H
#define TERN_SERVER_BUF_H

#include "core/buf.h"

typedef tern_buf srv_buf;

static inline void srv_buf_init(srv_buf *b) { tern_buf_init(b); }
static inline void srv_buf_free(srv_buf *b) { tern_buf_free(b); }
static inline void srv_buf_clear(srv_buf *b) { tern_buf_clear(b); }
static inline int srv_buf_append(srv_buf *b, const char *s, size_t n) { return tern_buf_append(b, s, n); }
static inline int srv_buf_puts(srv_buf *b, const char *s) { return tern_buf_puts(b, s); }
static inline void srv_buf_consume(srv_buf *b, size_t n) { tern_buf_consume(b, n); }
static inline char *srv_buf_take(srv_buf *b) { return tern_buf_take(b); }
static inline const char *srv_buf_str(const srv_buf *b) { return tern_buf_str(b); }
__attribute__((format(printf, 2, 3))) static inline int srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tern_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

#endif

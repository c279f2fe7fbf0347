/* A growable byte buffer (always NUL-terminated), the text plumbing of the
 * parsers and of the server.
 *
 * Ownership: the buffer owns its bytes; tern_buf_free releases them. Pointers
 * passed to the append functions are borrowed for the call. */
#ifndef TERN_CORE_BUF_H
#define TERN_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
    char  *data;   /* owned; NULL until the first append */
    size_t len;
    size_t cap;
} tern_buf;

void tern_buf_init(tern_buf *b);
void tern_buf_free(tern_buf *b);
void tern_buf_clear(tern_buf *b);
/* Return 0 on success, -1 when memory runs out (the buffer is unchanged). */
int  tern_buf_append(tern_buf *b, const char *s, size_t n);
int  tern_buf_puts(tern_buf *b, const char *s);
int  tern_buf_printf(tern_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int  tern_buf_vprintf(tern_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Removes the first n bytes. */
void tern_buf_consume(tern_buf *b, size_t n);
/* Returns the bytes as an owned NUL-terminated string and empties the buffer. */
char *tern_buf_take(tern_buf *b);
/* Never NULL: "" for an empty buffer (borrowed). */
const char *tern_buf_str(const tern_buf *b);

#endif

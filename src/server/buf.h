/* A growable byte buffer for the server's text plumbing (always NUL-terminated).
 *
 * Ownership: the buffer owns its bytes; srv_buf_free releases them. Pointers
 * passed to the append functions are borrowed for the call. */
#ifndef TERN_SERVER_BUF_H
#define TERN_SERVER_BUF_H

#include <stddef.h>

typedef struct {
    char  *data;   /* owned; NULL until the first append */
    size_t len;
    size_t cap;
} srv_buf;

void srv_buf_init(srv_buf *b);
void srv_buf_free(srv_buf *b);
void srv_buf_clear(srv_buf *b);
/* Return 0 on success, -1 when memory runs out (the buffer is unchanged). */
int  srv_buf_append(srv_buf *b, const char *s, size_t n);
int  srv_buf_puts(srv_buf *b, const char *s);
int  srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes. */
void srv_buf_consume(srv_buf *b, size_t n);
/* Returns the bytes as an owned NUL-terminated string and empties the buffer. */
char *srv_buf_take(srv_buf *b);
/* Never NULL: "" for an empty buffer (borrowed). */
const char *srv_buf_str(const srv_buf *b);

#endif

/* Splits decoded text into content and reasoning at <think> / </think>.
 *
 * Streaming-safe: a tail that could be the start of the next tag is held back
 * until the following delta decides it. Seeded "inside" when the rendered
 * prompt ends in an unclosed <think>. */
#ifndef TERN_SERVER_THINK_H
#define TERN_SERVER_THINK_H

#include <stddef.h>

#include "server/buf.h"

typedef struct {
    int     inside;    /* 1 while in reasoning */
    srv_buf pending;   /* owned: held-back text */
} srv_think;

void srv_think_init(srv_think *t, int start_inside);
void srv_think_free(srv_think *t);
/* Appends the content part of a delta to content and the reasoning part to
 * reasoning. Returns 0, or -1 when memory runs out. */
int srv_think_push(srv_think *t, const char *text, size_t len, srv_buf *content, srv_buf *reasoning);
int srv_think_flush(srv_think *t, srv_buf *content, srv_buf *reasoning);

/* Length of the longest suffix of s[0,n) that is a proper prefix of tag. */
size_t srv_partial_suffix(const char *s, size_t n, const char *tag);

#endif

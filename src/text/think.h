/* Splits decoded text into content and reasoning at <think> / </think>.
 *
 * Streaming-safe: a tail that could be the start of the next tag is held back
 * until the following delta decides it. Seeded "inside" when the rendered
 * prompt ends in an unclosed <think>. */
#ifndef TERN_TEXT_THINK_H
#define TERN_TEXT_THINK_H

#include <stddef.h>

#include "core/buf.h"

typedef struct {
    int     inside;    /* 1 while in reasoning */
    tern_buf pending;   /* owned: held-back text */
} tern_think;

void tern_think_init(tern_think *t, int start_inside);
void tern_think_free(tern_think *t);
/* Appends the content part of a delta to content and the reasoning part to
 * reasoning. Returns 0, or -1 when memory runs out. */
int tern_think_push(tern_think *t, const char *text, size_t len, tern_buf *content, tern_buf *reasoning);
int tern_think_flush(tern_think *t, tern_buf *content, tern_buf *reasoning);

/* Length of the longest suffix of s[0,n) that is a proper prefix of tag. */
size_t tern_partial_suffix(const char *s, size_t n, const char *tag);

#endif

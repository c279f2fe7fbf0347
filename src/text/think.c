/* <think> ... </think> splitter (see think.h). */
#include "text/think.h"

#include <string.h>

static const char OPEN[] = "<think>";
static const char CLOSE[] = "</think>";

void tern_think_init(tern_think *t, int start_inside)
{
    t->inside = start_inside;
    tern_buf_init(&t->pending);
}

void tern_think_free(tern_think *t) { tern_buf_free(&t->pending); }

size_t tern_partial_suffix(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    size_t max = tl - 1 < n ? tl - 1 : n;
    for (size_t k = max; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

int tern_think_push(tern_think *t, const char *text, size_t len, tern_buf *content, tern_buf *reasoning)
{
    if (tern_buf_append(&t->pending, text, len)) return -1;
    for (;;) {
        const char *tag = t->inside ? CLOSE : OPEN;
        size_t tl = strlen(tag);
        tern_buf *dst = t->inside ? reasoning : content;
        const char *p = tern_buf_str(&t->pending);
        size_t n = t->pending.len;
        const char *hit = memmem(p, n, tag, tl);
        if (hit) {
            if (tern_buf_append(dst, p, (size_t)(hit - p))) return -1;
            tern_buf_consume(&t->pending, (size_t)(hit - p) + tl);
            t->inside = !t->inside;
            continue;
        }
        size_t keep = tern_partial_suffix(p, n, tag);
        if (tern_buf_append(dst, p, n - keep)) return -1;
        tern_buf_consume(&t->pending, n - keep);
        return 0;
    }
}

int tern_think_flush(tern_think *t, tern_buf *content, tern_buf *reasoning)
{
    tern_buf *dst = t->inside ? reasoning : content;
    int rc = tern_buf_append(dst, tern_buf_str(&t->pending), t->pending.len) ? -1 : 0;
    tern_buf_clear(&t->pending);
    return rc;
}

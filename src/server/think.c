/* <think> ... </think> splitter (see think.h). */
#include "server/think.h"

#include <string.h>

static const char OPEN[] = "<think>";
static const char CLOSE[] = "</think>";

void srv_think_init(srv_think *t, int start_inside)
{
    t->inside = start_inside;
    srv_buf_init(&t->pending);
}

void srv_think_free(srv_think *t) { srv_buf_free(&t->pending); }

size_t srv_partial_suffix(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    size_t max = tl - 1 < n ? tl - 1 : n;
    for (size_t k = max; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

int srv_think_push(srv_think *t, const char *text, size_t len, srv_buf *content, srv_buf *reasoning)
{
    if (srv_buf_append(&t->pending, text, len)) return -1;
    for (;;) {
        const char *tag = t->inside ? CLOSE : OPEN;
        size_t tl = strlen(tag);
        srv_buf *dst = t->inside ? reasoning : content;
        const char *p = srv_buf_str(&t->pending);
        size_t n = t->pending.len;
        const char *hit = memmem(p, n, tag, tl);
        if (hit) {
            if (srv_buf_append(dst, p, (size_t)(hit - p))) return -1;
            srv_buf_consume(&t->pending, (size_t)(hit - p) + tl);
            t->inside = !t->inside;
            continue;
        }
        size_t keep = srv_partial_suffix(p, n, tag);
        if (srv_buf_append(dst, p, n - keep)) return -1;
        srv_buf_consume(&t->pending, n - keep);
        return 0;
    }
}

int srv_think_flush(srv_think *t, srv_buf *content, srv_buf *reasoning)
{
    srv_buf *dst = t->inside ? reasoning : content;
    int rc = srv_buf_append(dst, srv_buf_str(&t->pending), t->pending.len) ? -1 : 0;
    srv_buf_clear(&t->pending);
    return rc;
}

/* Stop -> think -> tools text pipeline (see pipe.h). */
#include "server/pipe.h"

#include <string.h>

tern_status srv_pipe_init(srv_pipe *p, const char *const *stop, int n_stop, int use_think, int think_inside,
                          int use_tools, const char *prefill)
{
    memset(p, 0, sizeof *p);
    tern_status st = srv_stop_create(stop, n_stop, &p->stop);
    if (st != TERN_OK) return st;
    p->use_think = use_think;
    srv_think_init(&p->think, use_think && think_inside);
    p->use_tools = use_tools;
    srv_tools_init(&p->tools);
    if (use_tools && srv_tools_seed(&p->tools, prefill)) return tern_error(TERN_E_NOMEM, "out of memory");
    srv_buf_init(&p->stage);
    srv_buf_init(&p->stage2);
    return TERN_OK;
}

void srv_pipe_free(srv_pipe *p)
{
    srv_stop_free(p->stop);
    srv_think_free(&p->think);
    srv_tools_free(&p->tools);
    srv_buf_free(&p->stage);
    srv_buf_free(&p->stage2);
    memset(p, 0, sizeof *p);
}

/* Runs stage-1 output (p->stage) through think and tools. */
static int downstream(srv_pipe *p, srv_buf *content, srv_buf *reasoning)
{
    srv_buf *c = p->use_tools ? &p->stage2 : content;
    srv_buf_clear(&p->stage2);
    int rc = 0;
    if (p->use_think) rc = srv_think_push(&p->think, srv_buf_str(&p->stage), p->stage.len, c, reasoning);
    else rc = srv_buf_append(c, srv_buf_str(&p->stage), p->stage.len);
    if (rc) return -1;
    if (p->use_tools) rc = srv_tools_push(&p->tools, srv_buf_str(&p->stage2), p->stage2.len, content);
    srv_buf_clear(&p->stage);
    return rc;
}

int srv_pipe_push(srv_pipe *p, const char *text, size_t len, srv_buf *content, srv_buf *reasoning)
{
    if (!p->started && len) {
        p->started = 1;
        if (text[0] == ' ') { text++; len--; }
    }
    srv_buf_clear(&p->stage);
    int hit = srv_stop_push(p->stop, text, len, &p->stage);
    if (hit < 0) return -1;
    if (downstream(p, content, reasoning)) return -1;
    return hit;
}

int srv_pipe_finish(srv_pipe *p, const json_t *tools, srv_buf *content, srv_buf *reasoning, json_t **calls)
{
    *calls = NULL;
    srv_buf_clear(&p->stage);
    if (srv_stop_flush(p->stop, &p->stage) || downstream(p, content, reasoning)) return -1;
    srv_buf *c = p->use_tools ? &p->stage2 : content;
    srv_buf_clear(&p->stage2);
    if (p->use_think && srv_think_flush(&p->think, c, reasoning)) return -1;
    if (p->use_tools) {
        if (srv_tools_push(&p->tools, srv_buf_str(&p->stage2), p->stage2.len, content)) return -1;
        if (srv_tools_finish(&p->tools, tools, content, calls)) return -1;
    }
    return 0;
}

/* The per-request text pipeline after detokenization:
 *   decoded delta -> stop matcher -> think-tag splitter -> tool-call router
 * giving content and reasoning deltas that are safe to stream, and at the end
 * the parsed tool calls. Stop strings see all text (reasoning and markup
 * included); tool markup is looked for in content only. */
#ifndef TERN_SERVER_PIPE_H
#define TERN_SERVER_PIPE_H

#include <jansson.h>

#include "server/buf.h"
#include "text/stop.h"
#include "text/think.h"
#include "text/toolcall.h"

/* The server's names for the text parsers (text/stop.h, think.h,
 * toolcall.h): each srv_X is tern_X. */
typedef tern_stop srv_stop;
typedef tern_think srv_think;
typedef tern_tools srv_tools;
static inline tern_status srv_stop_create(const char *const *seqs, int n, srv_stop **out)
{
    return tern_stop_create(seqs, n, out);
}
static inline void srv_stop_free(srv_stop *s) { tern_stop_free(s); }
static inline int srv_stop_push(srv_stop *s, const char *t, size_t n, srv_buf *out) { return tern_stop_push(s, t, n, out); }
static inline int srv_stop_flush(srv_stop *s, srv_buf *out) { return tern_stop_flush(s, out); }
static inline const char *srv_stop_which(const srv_stop *s) { return tern_stop_which(s); }
static inline void srv_think_init(srv_think *t, int start_inside) { tern_think_init(t, start_inside); }
static inline void srv_think_free(srv_think *t) { tern_think_free(t); }
static inline int srv_think_push(srv_think *t, const char *s, size_t n, srv_buf *content, srv_buf *reasoning)
{
    return tern_think_push(t, s, n, content, reasoning);
}
static inline int srv_think_flush(srv_think *t, srv_buf *content, srv_buf *reasoning)
{
    return tern_think_flush(t, content, reasoning);
}
static inline void srv_tools_init(srv_tools *t) { tern_tools_init(t); }
static inline void srv_tools_free(srv_tools *t) { tern_tools_free(t); }
static inline int srv_tools_seed(srv_tools *t, const char *prefill) { return tern_tools_seed(t, prefill); }
static inline int srv_tools_push(srv_tools *t, const char *s, size_t n, srv_buf *content)
{
    return tern_tools_push(t, s, n, content);
}
static inline int srv_tools_finish(srv_tools *t, const json_t *tools, srv_buf *content, json_t **calls)
{
    return tern_tools_finish(t, tools, content, calls);
}

typedef struct {
    int        started;    /* some text has passed the first stage */
    srv_stop  *stop;       /* owned */
    int        use_think;
    srv_think  think;
    int        use_tools;
    srv_tools  tools;
    srv_buf    stage;      /* scratch between stages */
    srv_buf    stage2;
} srv_pipe;

/* stop (borrowed, copied). use_think: split <think>; think_inside: the prompt
 * left a <think> open. use_tools: route tool-call markup; prefill (borrowed,
 * may be NULL): a prefilled assistant text that may leave a tool call open. */
tern_status srv_pipe_init(srv_pipe *p, const char *const *stop, int n_stop, int use_think, int think_inside,
                          int use_tools, const char *prefill);
void srv_pipe_free(srv_pipe *p);
/* Appends safe content / reasoning. Like mlx_lm's streaming detokenizers,
 * one space at the very start of the reply is dropped. Returns 1 when a stop string matched
 * (generation should end), 0 otherwise, -1 on OOM. */
int srv_pipe_push(srv_pipe *p, const char *text, size_t len, srv_buf *content, srv_buf *reasoning);
/* End of generation: flushes every stage; *calls gets an owned array or NULL.
 * tools: the request's tool list (borrowed, may be NULL). */
int srv_pipe_finish(srv_pipe *p, const json_t *tools, srv_buf *content, srv_buf *reasoning, json_t **calls);

#endif

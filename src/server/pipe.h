/* The per-request text pipeline after detokenization:
 *   decoded delta -> stop matcher -> think-tag splitter -> tool-call router
 * giving content and reasoning deltas that are safe to stream, and at the end
 * the parsed tool calls. Stop strings see all text (reasoning and markup
 * included); tool markup is looked for in content only. */
#ifndef TERN_SERVER_PIPE_H
#define TERN_SERVER_PIPE_H

#include <jansson.h>

#include "server/buf.h"
#include "server/stop.h"
#include "server/think.h"
#include "server/toolcall.h"

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

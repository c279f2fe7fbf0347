/* Response shaping: the JSON objects and SSE framing of mlx_lm.server's
 * OpenAI-style API and of the Anthropic Messages API.
 *
 * A srv_reply describes one response in progress. Streamed replies produce
 * bytes for the wire in pieces (begin, deltas, finish); non-streamed replies
 * produce the whole JSON body at finish. Every function appends to an srv_buf
 * and returns 0, or -1 when memory runs out. */
#ifndef TERN_SERVER_REPLY_H
#define TERN_SERVER_REPLY_H

#include <jansson.h>

#include "server/buf.h"
#include "server/json_out.h"
#include "server/request.h"

typedef struct {
    srv_api   api;
    int       stream;
    int       include_usage;
    char      id[64];
    char     *model;        /* owned copy of the echoed model name */
    long long created;
    /* Anthropic stream state: the open content block. */
    int       block_kind;   /* 0 none, 1 text, 2 thinking */
    int       block_index;  /* index of the next block */
    /* OpenAI stream deltas are the same bytes but for one string: the JSON
     * around it is rendered once ([0] content, [1] reasoning) and each token
     * only escapes its text. Owned; NULL until first needed. */
    char     *delta_head[2];
    char     *delta_tail[2];
} srv_reply;

typedef struct {
    const char *content;       /* complete text (non-stream) or the last piece (stream) */
    const char *reasoning;
    json_t     *tool_calls;    /* borrowed array or NULL */
    json_t     *logprobs;      /* borrowed mlx-lm logprobs block or NULL */
    const char *finish;        /* "stop" | "length" | "tool_calls" */
    const char *stop_sequence; /* the stop string that matched, or NULL */
    int prompt_tokens, completion_tokens, cached_tokens;
    int  speculation;          /* 1: add usage.speculation */
    long drafted, accepted, target_calls;
} srv_reply_end;

int  srv_reply_init(srv_reply *r, srv_api api, int stream, int include_usage, const char *model);
void srv_reply_free(srv_reply *r);
/* First bytes of a stream (role chunk / message_start). */
int srv_reply_begin(srv_reply *r, int prompt_tokens, srv_buf *out);
/* One streamed delta; empty pieces are skipped. */
int srv_reply_delta(srv_reply *r, const char *content, const char *reasoning, srv_buf *out);
/* Stream: final events and the terminator. Non-stream: the whole body. */
int srv_reply_finish(srv_reply *r, const srv_reply_end *e, srv_buf *out);

/* Error body {"error": {"message", "type", "param", "code"}} (OpenAI) or
 * {"type": "error", "error": {"type", "message"}} (Anthropic); owned string. */
char *srv_error_body(srv_api api, int http_status, const char *message);
/* An error inside an already started stream. */
int srv_reply_stream_error(srv_reply *r, const char *message, srv_buf *out);

#endif

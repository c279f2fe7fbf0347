/* JSON serialization in the server's wire format: Python json.dumps'
 * defaults as mlx_lm.server uses them (", " and ": " separators, ASCII-only
 * with \uXXXX escapes). Every function appends to an srv_buf and returns 0,
 * or -1 when memory runs out. */
#ifndef TERN_SERVER_JSON_OUT_H
#define TERN_SERVER_JSON_OUT_H

#include <jansson.h>
#include <stddef.h>

#include "server/buf.h"

/* Serializes j (borrowed). */
int srv_json_append(srv_buf *out, const json_t *j);
/* Appends s[0,n) (UTF-8, borrowed) as a JSON string literal with quotes,
 * escaped exactly as srv_json_append escapes strings. */
int srv_json_append_string(srv_buf *out, const char *s, size_t n);

#endif

/* HTTP/1.1 front end on libmicrohttpd: one thread per connection (so a
 * handler may block while its request waits for the generation worker),
 * keep-alive, chunked streaming from a srv_chan, a cap on request bodies, and
 * client-disconnect detection.
 *
 * Ownership: the route function receives borrowed request data and fills an
 * srv_http_reply whose body (and channel reference) the HTTP layer then owns. */
#ifndef TERN_SERVER_HTTP_H
#define TERN_SERVER_HTTP_H

#include <stddef.h>

#include "server/chan.h"
#include "tern/status.h"

typedef struct srv_http srv_http;
typedef struct srv_conn srv_conn;

typedef struct {
    const char *method;
    const char *url;
    const char *body;       /* NUL-terminated; "" when none */
    size_t      len;
    int         too_large;  /* the body went over the cap and was discarded */
    srv_conn   *conn;
} srv_http_request;

typedef struct {
    int         status;       /* 0: close the connection without a reply */
    char       *body;         /* owned (malloc) */
    size_t      len;
    const char *content_type; /* static string */
    srv_chan   *stream;       /* when set: one reference; the body streams from it */
    int         retry_after;  /* > 0: a Retry-After header (seconds) */
} srv_http_reply;

typedef void (*srv_route_fn)(void *user, const srv_http_request *req, srv_http_reply *out);

/* 1 when the client of conn has closed its side (non-blocking check). */
int srv_conn_gone(srv_conn *c);
/* The connection's socket (borrowed), -1 if unknown. */
int srv_conn_fd(const srv_conn *c);

/* host (borrowed): a numeric address or a name. Starts listening.
 * verbose: print libmicrohttpd's own messages (client aborts and the like). */
tern_status srv_http_start(const char *host, int port, size_t max_body, int verbose, srv_route_fn route,
                           void *user, srv_http **out);
/* Stops accepting connections; open ones continue. */
void srv_http_quiesce(srv_http *h);
/* Closes every connection (streams end once their channels close) and frees h. */
void srv_http_stop(srv_http *h);

#endif

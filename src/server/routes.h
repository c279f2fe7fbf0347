/* HTTP routes: chat / text completions, Anthropic messages, models, health,
 * metrics. user is the server's srv_ctx (borrowed). */
#ifndef TERN_SERVER_ROUTES_H
#define TERN_SERVER_ROUTES_H

#include "server/http.h"

void srv_route(void *user, const srv_http_request *req, srv_http_reply *out);

#endif

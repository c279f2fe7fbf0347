/* A generation job: one request submitted to the engine (continuous
 * batching), its tokens run through the text pipeline into its channel. */
#ifndef TERN_SERVER_JOB_H
#define TERN_SERVER_JOB_H

#include <stdint.h>

#include "server/chan.h"
#include "server/ctx.h"
#include "server/request.h"

/* Submits a job. Takes ownership of *req (emptied) and ids, and of one channel
 * reference, whatever the outcome. Returns 0 when queued, -1 when the waiting
 * line is full, -2 when the server is stopping, -3 out of memory, -4 when the
 * engine refuses the request (it can never fit: tern_last_error says why);
 * when not queued the channel reference has been released. */
int srv_job_submit(srv_ctx *c, srv_request *req, int32_t *ids, int n_ids, int think_inside, srv_chan *chan);

#endif

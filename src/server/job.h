/* A generation job: runs one request on the worker thread through
 * tern_generate and the text pipeline, writing the reply to its channel. */
#ifndef TERN_SERVER_JOB_H
#define TERN_SERVER_JOB_H

#include <stdint.h>

#include "server/chan.h"
#include "server/ctx.h"
#include "server/request.h"

/* Queues a job. Takes ownership of *req (emptied) and ids, and of one channel
 * reference, whatever the outcome. Returns 0 when queued, -1 when the queue is
 * full, -2 when the server is stopping, -3 out of memory; when not queued the
 * channel reference has been released. */
int srv_job_submit(srv_ctx *c, srv_request *req, int32_t *ids, int n_ids, int think_inside, srv_chan *chan);

#endif

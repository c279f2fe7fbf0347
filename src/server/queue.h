/* A bounded FIFO of generation jobs served by one worker thread.
 *
 * Until continuous batching lands, generations run one at a time in arrival
 * order. push refuses when the waiting line is full (the caller answers 503).
 * A job is an intrusive struct: the queue never allocates per job. */
#ifndef TERN_SERVER_QUEUE_H
#define TERN_SERVER_QUEUE_H

#include "tern/status.h"

typedef struct srv_job srv_job;
struct srv_job {
    /* Runs the job on the worker thread, then frees it. */
    void (*run)(srv_job *job);
    /* Frees a job that will never run (shutdown). */
    void (*drop)(srv_job *job);
    srv_job *next;   /* queue link; owned by the queue while queued */
};

typedef struct srv_queue srv_queue;

/* capacity: how many jobs may wait besides the running one (>= 1). */
tern_status srv_queue_create(int capacity, srv_queue **out);
/* Takes ownership of job on success (returns 0); -1 when full, -2 when stopping. */
int srv_queue_push(srv_queue *q, srv_job *job);
int srv_queue_waiting(srv_queue *q);
int srv_queue_running(srv_queue *q);
/* Stops taking jobs (push then returns -2), drops the waiting ones, waits for
 * the running one and joins the worker. Idempotent. */
void srv_queue_stop(srv_queue *q);
/* Stops (if not yet) and frees the queue. */
void srv_queue_destroy(srv_queue *q);

#endif

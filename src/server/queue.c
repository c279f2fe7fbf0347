/* Bounded FIFO + one worker thread (see queue.h). */
#include "server/queue.h"

#include <pthread.h>
#include <stdlib.h>

struct srv_queue {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    pthread_t       worker;
    srv_job *head, *tail;
    int      waiting;
    int      running;
    int      capacity;
    int      stopping;
};

static void *worker_main(void *arg)
{
    srv_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
        if (q->stopping) { pthread_mutex_unlock(&q->mu); return NULL; }
        srv_job *job = q->head;
        q->head = job->next;
        if (!q->head) q->tail = NULL;
        q->waiting--;
        q->running = 1;
        pthread_mutex_unlock(&q->mu);
        job->next = NULL;
        job->run(job);
        pthread_mutex_lock(&q->mu);
        q->running = 0;
        pthread_mutex_unlock(&q->mu);
    }
}

tern_status srv_queue_create(int capacity, srv_queue **out)
{
    *out = NULL;
    srv_queue *q = calloc(1, sizeof *q);
    if (!q) return tern_error(TERN_E_NOMEM, "queue: out of memory");
    q->capacity = capacity < 1 ? 1 : capacity;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pthread_create(&q->worker, NULL, worker_main, q)) {
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
        free(q);
        return tern_error(TERN_E_INTERNAL, "queue: cannot start the worker thread");
    }
    *out = q;
    return TERN_OK;
}

int srv_queue_push(srv_queue *q, srv_job *job)
{
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    if (q->stopping) rc = -2;
    else if (q->waiting >= q->capacity) rc = -1;
    else {
        job->next = NULL;
        if (q->tail) q->tail->next = job; else q->head = job;
        q->tail = job;
        q->waiting++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int srv_queue_waiting(srv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int v = q->waiting;
    pthread_mutex_unlock(&q->mu);
    return v;
}

int srv_queue_running(srv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int v = q->running;
    pthread_mutex_unlock(&q->mu);
    return v;
}

void srv_queue_stop(srv_queue *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    if (q->stopping) { pthread_mutex_unlock(&q->mu); return; }
    q->stopping = 1;
    srv_job *j = q->head;
    q->head = q->tail = NULL;
    q->waiting = 0;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    while (j) {
        srv_job *next = j->next;
        j->drop(j);
        j = next;
    }
    pthread_join(q->worker, NULL);
}

void srv_queue_destroy(srv_queue *q)
{
    if (!q) return;
    srv_queue_stop(q);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

/* Worker -> connection byte channel (see chan.h). */
#include "server/chan.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/buf.h"

struct srv_chan {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int     refs;
    srv_buf data;
    int     closed;
    int     cancelled;
    int     decoding;
    int     status;
    long long last_wake_ns;  /* when the reader was last woken by a write */
    atomic_int fd;           /* client socket or -1 */
};

/* Writes wake the reader at most this often (the close always wakes it): one
 * wake-up and one socket write per batch of tokens instead of per token keeps
 * the HTTP side from taking time from the decode loop, at a latency no reader
 * notices. The first write wakes at once, so time to first token is unchanged. */
#define WAKE_INTERVAL_NS 10000000LL

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

srv_chan *srv_chan_create(void)
{
    srv_chan *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    srv_buf_init(&c->data);
    c->refs = 2;
    c->status = 200;
    atomic_init(&c->fd, -1);
    return c;
}

int srv_fd_gone(int fd)
{
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return 1;
    if (p.revents & POLLIN) {
        char b;
        return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return 0;
}

/* The fd stays open while the request's connection lives; once the connection
 * is gone the channel is cancelled anyway, so a stale (even reused) number can
 * only confirm a cancellation that is already true. */
void srv_chan_set_fd(srv_chan *c, int fd) { atomic_store(&c->fd, fd); }

int srv_chan_peer_gone(srv_chan *c) { return srv_fd_gone(atomic_load(&c->fd)); }

void srv_chan_release(srv_chan *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last) return;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    srv_buf_free(&c->data);
    free(c);
}

int srv_chan_write(srv_chan *c, const char *data, size_t n)
{
    pthread_mutex_lock(&c->mu);
    int rc = -1;
    if (!c->cancelled && !c->closed) rc = srv_buf_append(&c->data, data, n);
    long long t = now_ns();
    if (t - c->last_wake_ns >= WAKE_INTERVAL_NS) {
        c->last_wake_ns = t;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void srv_chan_close(srv_chan *c, int http_status)
{
    pthread_mutex_lock(&c->mu);
    c->closed = 1;
    c->status = http_status;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void srv_chan_set_decoding(srv_chan *c)
{
    pthread_mutex_lock(&c->mu);
    c->decoding = 1;
    pthread_mutex_unlock(&c->mu);
}

void srv_chan_cancel(srv_chan *c)
{
    pthread_mutex_lock(&c->mu);
    c->cancelled = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

int srv_chan_cancelled(srv_chan *c)
{
    pthread_mutex_lock(&c->mu);
    int v = c->cancelled;
    pthread_mutex_unlock(&c->mu);
    return v;
}

int srv_chan_decoding(srv_chan *c)
{
    pthread_mutex_lock(&c->mu);
    int v = c->decoding;
    pthread_mutex_unlock(&c->mu);
    return v;
}

static void deadline(struct timespec *ts, int timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

ssize_t srv_chan_read(srv_chan *c, char *dst, size_t max, int timeout_ms)
{
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&c->mu);
    while (c->data.len == 0 && !c->closed && !c->cancelled) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    }
    ssize_t n;
    if (c->data.len) {
        n = (ssize_t)(c->data.len < max ? c->data.len : max);
        memcpy(dst, c->data.data, (size_t)n);
        srv_buf_consume(&c->data, (size_t)n);
    } else {
        n = c->closed || c->cancelled ? -1 : 0;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

int srv_chan_wait_closed(srv_chan *c, int timeout_ms)
{
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&c->mu);
    while (!c->closed) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    }
    int v = c->closed;
    pthread_mutex_unlock(&c->mu);
    return v;
}

char *srv_chan_take(srv_chan *c, size_t *len, int *http_status)
{
    pthread_mutex_lock(&c->mu);
    *len = c->data.len;
    *http_status = c->status;
    char *s = srv_buf_take(&c->data);
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* A byte channel from the generation worker to one HTTP connection.
 *
 * The worker writes response bytes and finally closes the channel with an
 * HTTP status; the connection side reads them (streaming) or waits for the
 * close (non-streaming) and may cancel when its client goes away, which the
 * worker sees before its next decode step. Reference counted: each side
 * holds one reference and drops it with srv_chan_release. */
#ifndef TERN_SERVER_CHAN_H
#define TERN_SERVER_CHAN_H

#include <stddef.h>
#include <sys/types.h>

typedef struct srv_chan srv_chan;

/* Returns an owned channel with two references (worker side + connection side), or NULL. */
srv_chan *srv_chan_create(void);
void srv_chan_release(srv_chan *c);

/* Worker side. write returns -1 once the channel is cancelled. */
int  srv_chan_write(srv_chan *c, const char *data, size_t n);
void srv_chan_close(srv_chan *c, int http_status);
/* Marks the first token as produced (keepalive comments stop then). */
void srv_chan_set_decoding(srv_chan *c);

/* The client's socket (borrowed; -1 = none): lets the worker notice a closed
 * connection before every decode step, not only when the HTTP side next looks. */
void srv_chan_set_fd(srv_chan *c, int fd);
/* 1 when the connection's peer has closed (non-blocking check). */
int  srv_chan_peer_gone(srv_chan *c);
/* 1 when the peer of socket fd has closed (non-blocking check). */
int  srv_fd_gone(int fd);

/* Connection side. */
void srv_chan_cancel(srv_chan *c);
int  srv_chan_cancelled(srv_chan *c);
int  srv_chan_decoding(srv_chan *c);
/* Copies up to max pending bytes, waiting up to timeout_ms for some.
 * Returns the count, 0 on timeout, -1 when closed and fully drained. */
ssize_t srv_chan_read(srv_chan *c, char *dst, size_t max, int timeout_ms);
/* Waits up to timeout_ms for the close. 1 when closed, else 0. */
int srv_chan_wait_closed(srv_chan *c, int timeout_ms);
/* After the close: takes the whole pending body (owned, NUL-terminated) and the status. */
char *srv_chan_take(srv_chan *c, size_t *len, int *http_status);

#endif

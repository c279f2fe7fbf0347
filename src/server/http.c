/* libmicrohttpd front end (see http.h). */
#include "server/http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/buf.h"

/* A stream with nothing to send for this long gets a ": keepalive" comment
 * (while the request waits in the queue or prefills). */
#define KEEPALIVE_MS 1000
#define POLL_MS      20

struct srv_http {
    struct MHD_Daemon *d;
    size_t       max_body;
    int          verbose;
    atomic_int   active;   /* requests between their first byte and their reply's end */
    srv_route_fn route;
    void        *user;
};

struct srv_conn {
    struct MHD_Connection *mc;
    int     fd;
    srv_buf body;
    int     too_large;
    int     answered;      /* a reply was queued early (413) */
};

typedef struct {
    srv_chan *chan;
    int       fd;
    int       idle_ms;
} stream_ctx;

int srv_conn_gone(srv_conn *c) { return srv_fd_gone(c->fd); }

int srv_conn_fd(const srv_conn *c) { return c->fd; }

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *s = cls;
    for (;;) {
        if (srv_fd_gone(s->fd)) {
            srv_chan_cancel(s->chan);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        ssize_t n = srv_chan_read(s->chan, buf, max, POLL_MS);
        if (n > 0) { s->idle_ms = 0; return n; }
        if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
        s->idle_ms += POLL_MS;
        if (s->idle_ms >= KEEPALIVE_MS && !srv_chan_decoding(s->chan)) {
            static const char ka[] = ": keepalive\n\n";
            if (max < sizeof ka - 1) continue;
            s->idle_ms = 0;
            memcpy(buf, ka, sizeof ka - 1);
            return (ssize_t)(sizeof ka - 1);
        }
    }
}

static void stream_free(void *cls)
{
    stream_ctx *s = cls;
    /* Harmless after a normal end; stops the worker if the client left early. */
    srv_chan_cancel(s->chan);
    srv_chan_release(s->chan);
    free(s);
}

static void add_headers(struct MHD_Response *r, const char *content_type)
{
    MHD_add_response_header(r, "Content-Type", content_type ? content_type : "application/json");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "*");
}

static enum MHD_Result send_reply(struct MHD_Connection *mc, srv_conn *c, srv_http_reply *rep)
{
    struct MHD_Response *r;
    if (rep->stream) {
        stream_ctx *s = calloc(1, sizeof *s);
        if (!s) { srv_chan_cancel(rep->stream); srv_chan_release(rep->stream); return MHD_NO; }
        s->chan = rep->stream;
        s->fd = c->fd;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s, stream_free);
        if (!r) { stream_free(s); return MHD_NO; }
        add_headers(r, "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    } else {
        r = MHD_create_response_from_buffer(rep->len, rep->body, MHD_RESPMEM_MUST_FREE);
        if (!r) { free(rep->body); return MHD_NO; }
        add_headers(r, rep->content_type);
        if (rep->retry_after > 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", rep->retry_after);
            MHD_add_response_header(r, "Retry-After", v);
        }
    }
    enum MHD_Result ok = MHD_queue_response(mc, (unsigned)rep->status, r);
    MHD_destroy_response(r);
    return ok;
}

static void reject_too_large(srv_http *h, srv_conn *c, const char *method, const char *url)
{
    srv_http_request req = {method, url, "", 0, 1, c};
    srv_http_reply rep = {0};
    h->route(h->user, &req, &rep);
    if (rep.status) send_reply(c->mc, c, &rep);
    else free(rep.body);
    c->answered = 1;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    srv_http *h = cls;
    srv_conn *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        c->mc = mc;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        srv_buf_init(&c->body);
        *con_cls = c;
        atomic_fetch_add(&h->active, 1);
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->max_body) {
            /* Answer before reading the body; the connection closes after the reply. */
            c->too_large = 1;
            reject_too_large(h, c, method, url);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!c->too_large) {
            if (c->body.len + *upload_size > h->max_body) { c->too_large = 1; srv_buf_free(&c->body); }
            else if (srv_buf_append(&c->body, upload, *upload_size)) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (c->answered) return MHD_YES;
    srv_http_request req = {method, url, srv_buf_str(&c->body), c->body.len, c->too_large, c};
    srv_http_reply rep = {0};
    h->route(h->user, &req, &rep);
    if (!rep.status) {
        free(rep.body);
        if (rep.stream) { srv_chan_cancel(rep.stream); srv_chan_release(rep.stream); }
        return MHD_NO;
    }
    return send_reply(mc, c, &rep);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    srv_http *h = cls;
    srv_conn *c = *con_cls;
    if (!c) return;
    srv_buf_free(&c->body);
    free(c);
    *con_cls = NULL;
    atomic_fetch_sub(&h->active, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    if (!*(const int *)cls) return;
    fputs("DEBUG:tern.http:", stderr);
    vfprintf(stderr, fmt, ap);
}

tern_status srv_http_start(const char *host, int port, size_t max_body, int verbose, srv_route_fn route,
                           void *user, srv_http **out)
{
    *out = NULL;
    if (port < 0 || port > 65535) return tern_error(TERN_E_INVALID, "port %d is out of range", port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai) return tern_error(TERN_E_INVALID, "cannot resolve host %s: %s", host, gai_strerror(gai));
    srv_http *h = calloc(1, sizeof *h);
    if (!h) { freeaddrinfo(ai); return tern_error(TERN_E_NOMEM, "out of memory"); }
    h->max_body = max_body;
    h->verbose = verbose;
    h->route = route;
    h->user = user;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_access, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                            /* One thread per connection: bound them. */
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &h->verbose,
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        free(h);
        return tern_error(TERN_E_IO, "cannot listen on %s:%d (address in use or not available)", host, port);
    }
    *out = h;
    return TERN_OK;
}

void srv_http_quiesce(srv_http *h)
{
    if (h && h->d) MHD_quiesce_daemon(h->d);
}

void srv_http_stop(srv_http *h)
{
    if (!h) return;
    /* Let replies whose generation already ended reach their clients (bounded:
     * a client that stopped reading does not hold the shutdown). */
    for (int i = 0; i < 500 && atomic_load(&h->active) > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    free(h);
}

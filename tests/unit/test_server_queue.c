/* Server plumbing: the worker -> connection channel (batched wake-ups, close,
 * cancel, peer-gone detection on a socketpair) and the bounded job queue
 * (FIFO order, capacity, drop on stop). */
#include "check.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/chan.h"
#include "server/queue.h"

static void test_chan(void)
{
    srv_chan *c = srv_chan_create();
    CHECK(c != NULL);
    char buf[64];
    CHECK(srv_chan_read(c, buf, sizeof buf, 10) == 0);            /* timeout, nothing yet */
    CHECK(srv_chan_write(c, "abc", 3) == 0 && srv_chan_write(c, "de", 2) == 0);
    /* Written bytes are readable even when the write did not wake the reader. */
    CHECK(srv_chan_read(c, buf, 4, 10) == 4 && !memcmp(buf, "abcd", 4));
    CHECK(srv_chan_read(c, buf, sizeof buf, 10) == 1 && buf[0] == 'e');
    CHECK(!srv_chan_decoding(c));
    srv_chan_set_decoding(c);
    CHECK(srv_chan_decoding(c));
    CHECK(srv_chan_write(c, "{}", 2) == 0);
    srv_chan_close(c, 201);
    CHECK(srv_chan_wait_closed(c, 10) == 1);
    size_t len;
    int status;
    char *body = srv_chan_take(c, &len, &status);
    CHECK(len == 2 && status == 201 && !strcmp(body, "{}"));
    free(body);
    CHECK(srv_chan_read(c, buf, sizeof buf, 10) == -1);           /* closed and drained */
    CHECK(srv_chan_write(c, "x", 1) == -1);                       /* no writes after close */
    srv_chan_release(c);
    srv_chan_release(c);

    c = srv_chan_create();
    srv_chan_cancel(c);
    CHECK(srv_chan_cancelled(c) && srv_chan_write(c, "x", 1) == -1 && srv_chan_read(c, buf, 1, 10) == -1);
    srv_chan_release(c);
    srv_chan_release(c);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    c = srv_chan_create();
    CHECK(!srv_chan_peer_gone(c));                               /* no socket: never gone */
    srv_chan_set_fd(c, sv[0]);
    CHECK(!srv_chan_peer_gone(c));
    CHECK(write(sv[1], "GET", 3) == 3);                            /* pipelined data is not a close */
    CHECK(!srv_chan_peer_gone(c));
    close(sv[1]);
    CHECK(srv_chan_peer_gone(c));
    close(sv[0]);
    srv_chan_release(c);
    srv_chan_release(c);
}

typedef struct {
    srv_job base;
    int id;
    int *log;
    atomic_int *pos;
    atomic_int *dropped;
    int sleep_ms;
} test_job;

static void run_job(srv_job *j)
{
    test_job *t = (test_job *)j;
    if (t->sleep_ms) {
        struct timespec ts = {0, t->sleep_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    t->log[atomic_fetch_add(t->pos, 1)] = t->id;
    free(t);
}

static void drop_job(srv_job *j)
{
    test_job *t = (test_job *)j;
    atomic_fetch_add(t->dropped, 1);
    free(t);
}

static test_job *job(int id, int *log, atomic_int *pos, atomic_int *dropped, int sleep_ms)
{
    test_job *t = calloc(1, sizeof *t);
    t->base.run = run_job;
    t->base.drop = drop_job;
    t->id = id;
    t->log = log;
    t->pos = pos;
    t->dropped = dropped;
    t->sleep_ms = sleep_ms;
    return t;
}

static void test_queue(void)
{
    int log[16] = {0};
    atomic_int pos = 0, dropped = 0;
    srv_queue *q;
    CHECK(srv_queue_create(2, &q) == TERN_OK);
    /* One long job runs; two wait; the fourth is refused. */
    CHECK(srv_queue_push(q, &job(1, log, &pos, &dropped, 200)->base) == 0);
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    CHECK(srv_queue_running(q) == 1);
    CHECK(srv_queue_push(q, &job(2, log, &pos, &dropped, 0)->base) == 0);
    CHECK(srv_queue_push(q, &job(3, log, &pos, &dropped, 0)->base) == 0);
    CHECK(srv_queue_waiting(q) == 2);
    test_job *extra = job(4, log, &pos, &dropped, 0);
    CHECK(srv_queue_push(q, &extra->base) == -1);
    free(extra);
    for (int i = 0; i < 100 && atomic_load(&pos) < 3; i++) nanosleep(&ts, NULL);
    CHECK(atomic_load(&pos) == 3 && log[0] == 1 && log[1] == 2 && log[2] == 3);
    /* Stop drops what still waits. */
    CHECK(srv_queue_push(q, &job(5, log, &pos, &dropped, 200)->base) == 0);
    nanosleep(&ts, NULL);
    CHECK(srv_queue_push(q, &job(6, log, &pos, &dropped, 0)->base) == 0);
    srv_queue_stop(q);
    CHECK(atomic_load(&dropped) == 1 && atomic_load(&pos) == 4 && log[3] == 5);
    test_job *late = job(7, log, &pos, &dropped, 0);
    CHECK(srv_queue_push(q, &late->base) == -2);
    free(late);
    srv_queue_destroy(q);
}

int main(void)
{
    test_chan();
    test_queue();
    return check_summary("server_queue");
}

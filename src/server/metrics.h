/* Server counters, rendered as Prometheus text exposition format. Thread-safe. */
#ifndef TERN_SERVER_METRICS_H
#define TERN_SERVER_METRICS_H

#include "server/buf.h"
#include "tern/engine.h"

typedef enum {
    SRV_EP_CHAT, SRV_EP_TEXT, SRV_EP_MESSAGES, SRV_EP_COUNT_TOKENS, SRV_EP_MODELS, SRV_EP_HEALTH, SRV_EP_METRICS,
    SRV_EP_PAGE, SRV_EP_OTHER,
    SRV_EP_COUNT
} srv_endpoint;

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_create(void);  /* owned, NULL on OOM */
void srv_metrics_free(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int http_status);
void srv_metrics_generation(srv_metrics *m, int prompt_tokens, int generated_tokens,
                            double prefill_s, double decode_s);
void srv_metrics_disconnect(srv_metrics *m);
/* Appends the exposition text; the scheduler's gauges, counters and
 * iteration-time histogram come from es (borrowed). 0 or -1 on OOM. */
int srv_metrics_render(srv_metrics *m, const tern_engine_stats *es, srv_buf *out);

#endif

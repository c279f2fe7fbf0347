/* Prometheus counters for the server (see metrics.h). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdlib.h>

static const char *const EP_NAMES[SRV_EP_COUNT] = {
    "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/models",
    "/health", "/metrics", "/", "other",
};

/* Status classes kept per endpoint. */
enum { ST_2XX, ST_4XX, ST_5XX, ST_COUNT };
static const char *const ST_NAMES[ST_COUNT] = {"2xx", "4xx", "5xx"};

struct srv_metrics {
    pthread_mutex_t mu;
    unsigned long long requests[SRV_EP_COUNT][ST_COUNT];
    unsigned long long prompt_tokens, generated_tokens, generations, disconnects;
    double prefill_s, decode_s;
};

srv_metrics *srv_metrics_create(void)
{
    srv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void srv_metrics_free(srv_metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status)
{
    int cls = status >= 500 ? ST_5XX : status >= 400 ? ST_4XX : ST_2XX;
    pthread_mutex_lock(&m->mu);
    m->requests[ep][cls]++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_generation(srv_metrics *m, int prompt_tokens, int generated_tokens, double prefill_s, double decode_s)
{
    pthread_mutex_lock(&m->mu);
    m->generations++;
    m->prompt_tokens += (unsigned long long)(prompt_tokens > 0 ? prompt_tokens : 0);
    m->generated_tokens += (unsigned long long)(generated_tokens > 0 ? generated_tokens : 0);
    m->prefill_s += prefill_s;
    m->decode_s += decode_s;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_disconnect(srv_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->disconnects++;
    pthread_mutex_unlock(&m->mu);
}

/* One counter by draft position (positions never drafted left out), its
 * sum added to *total. */
static int spec_positions(srv_buf *o, const char *name, const char *help, const uint64_t *v,
                          const uint64_t *drafted, unsigned long long *total)
{
    int rc = srv_buf_printf(o, "# HELP %s %s, by draft position.\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < TERN_SPEC_POSITIONS; i++) {
        *total += v[i];
        if (drafted[i])
            rc |= srv_buf_printf(o, "%s{position=\"%d\"} %llu\n", name, i + 1, (unsigned long long)v[i]);
    }
    return rc;
}

int srv_metrics_render(srv_metrics *m, const tern_engine_stats *es, srv_buf *o)
{
    pthread_mutex_lock(&m->mu);
    int rc = srv_buf_puts(o, "# HELP tern_requests_total HTTP requests by endpoint and status class.\n"
                             "# TYPE tern_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int s = 0; s < ST_COUNT; s++)
            rc |= srv_buf_printf(o, "tern_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", EP_NAMES[e],
                                 ST_NAMES[s], m->requests[e][s]);
    rc |= srv_buf_printf(o,
        "# HELP tern_generations_total Generations finished.\n# TYPE tern_generations_total counter\n"
        "tern_generations_total %llu\n"
        "# HELP tern_prompt_tokens_total Prompt tokens processed.\n# TYPE tern_prompt_tokens_total counter\n"
        "tern_prompt_tokens_total %llu\n"
        "# HELP tern_generated_tokens_total Tokens generated.\n# TYPE tern_generated_tokens_total counter\n"
        "tern_generated_tokens_total %llu\n"
        "# HELP tern_prefill_seconds_total Time from admission to first token, summed over requests.\n"
        "# TYPE tern_prefill_seconds_total counter\ntern_prefill_seconds_total %.6f\n"
        "# HELP tern_decode_seconds_total Time from first token to the end, summed over requests.\n"
        "# TYPE tern_decode_seconds_total counter\ntern_decode_seconds_total %.6f\n"
        "# HELP tern_client_disconnects_total Generations stopped because the client went away.\n"
        "# TYPE tern_client_disconnects_total counter\ntern_client_disconnects_total %llu\n",
        m->generations, m->prompt_tokens, m->generated_tokens, m->prefill_s, m->decode_s, m->disconnects);
    pthread_mutex_unlock(&m->mu);
    rc |= srv_buf_printf(o,
        "# HELP tern_queue_depth Requests waiting for admission.\n# TYPE tern_queue_depth gauge\n"
        "tern_queue_depth %d\n"
        "# HELP tern_requests_running Requests admitted and not yet finished.\n# TYPE tern_requests_running gauge\n"
        "tern_requests_running %d\n"
        "# HELP tern_running_rows KV rows in the running batch.\n# TYPE tern_running_rows gauge\n"
        "tern_running_rows %d\n"
        "# HELP tern_kv_blocks KV pool blocks by state (%d positions each).\n# TYPE tern_kv_blocks gauge\n"
        "tern_kv_blocks{state=\"used\"} %ld\ntern_kv_blocks{state=\"free\"} %ld\n"
        "tern_kv_blocks{state=\"reserved\"} %ld\ntern_kv_blocks{state=\"total\"} %ld\n"
        "tern_kv_blocks{state=\"cached\"} %ld\n"
        "# HELP tern_iteration_tokens Tokens fed to the last scheduler iteration.\n"
        "# TYPE tern_iteration_tokens gauge\ntern_iteration_tokens %d\n"
        "# HELP tern_iteration_tokens_total Tokens fed to all scheduler iterations.\n"
        "# TYPE tern_iteration_tokens_total counter\ntern_iteration_tokens_total %llu\n"
        "# HELP tern_admissions_total Requests admitted into the batch.\n# TYPE tern_admissions_total counter\n"
        "tern_admissions_total %llu\n"
        "# HELP tern_refused_total Requests refused because the waiting line was full.\n"
        "# TYPE tern_refused_total counter\ntern_refused_total %llu\n"
        "# HELP tern_iteration_failures_total Forward passes that failed and were retried.\n"
        "# TYPE tern_iteration_failures_total counter\ntern_iteration_failures_total %llu\n"
        "# HELP tern_iteration_seconds Time of one scheduler iteration (one forward over every row).\n"
        "# TYPE tern_iteration_seconds histogram\n",
        es->waiting, es->running_requests, es->running_rows, es->block_tokens, es->blocks_used, es->blocks_free, es->blocks_reserved,
        es->blocks_total, es->cache_blocks, es->last_iteration_tokens, (unsigned long long)es->tokens,
        (unsigned long long)es->admitted, (unsigned long long)es->refused, (unsigned long long)es->failures);
    rc |= srv_buf_printf(o,
        "# HELP tern_prompt_cache_hits_total Admissions that took a cached prefix.\n"
        "# TYPE tern_prompt_cache_hits_total counter\ntern_prompt_cache_hits_total %llu\n"
        "# HELP tern_prompt_cache_misses_total Admissions with no cached prefix.\n"
        "# TYPE tern_prompt_cache_misses_total counter\ntern_prompt_cache_misses_total %llu\n"
        "# HELP tern_prompt_cache_tokens_total Prompt tokens taken from the cache instead of computed.\n"
        "# TYPE tern_prompt_cache_tokens_total counter\ntern_prompt_cache_tokens_total %llu\n"
        "# HELP tern_prompt_cache_evictions_total Cached blocks given back to the pool.\n"
        "# TYPE tern_prompt_cache_evictions_total counter\ntern_prompt_cache_evictions_total %llu\n"
        "# HELP tern_prompt_cache_bytes KV bytes the prompt cache holds.\n"
        "# TYPE tern_prompt_cache_bytes gauge\ntern_prompt_cache_bytes %.0f\n"
        "# HELP tern_prompt_cache_disk_bytes Bytes of prompt-cache files in --prompt-cache-dir.\n"
        "# TYPE tern_prompt_cache_disk_bytes gauge\ntern_prompt_cache_disk_bytes %llu\n"
        "# HELP tern_prompt_cache_disk_files Prompt-cache files known in --prompt-cache-dir.\n"
        "# TYPE tern_prompt_cache_disk_files gauge\ntern_prompt_cache_disk_files %ld\n"
        "# HELP tern_prompt_cache_disk_writes_total Prefixes written to disk.\n"
        "# TYPE tern_prompt_cache_disk_writes_total counter\ntern_prompt_cache_disk_writes_total %llu\n"
        "# HELP tern_prompt_cache_disk_loads_total Prefixes read back from disk.\n"
        "# TYPE tern_prompt_cache_disk_loads_total counter\ntern_prompt_cache_disk_loads_total %llu\n"
        "# HELP tern_prompt_cache_disk_rejected_total Files skipped or failing their checksums.\n"
        "# TYPE tern_prompt_cache_disk_rejected_total counter\ntern_prompt_cache_disk_rejected_total %llu\n",
        (unsigned long long)es->cache_hits, (unsigned long long)es->cache_misses, (unsigned long long)es->cache_tokens,
        (unsigned long long)es->cache_evictions,
        (double)es->cache_blocks * es->block_tokens * (double)es->kv_bytes_per_token,
        (unsigned long long)es->disk_bytes, es->disk_files, (unsigned long long)es->disk_writes,
        (unsigned long long)es->disk_loads, (unsigned long long)(es->disk_skipped + es->disk_load_failures));
    unsigned long long cum = 0;
    for (int b = 0; b < 14; b++) {
        cum += es->iter_hist[b];
        if (b < 13) rc |= srv_buf_printf(o, "tern_iteration_seconds_bucket{le=\"%g\"} %llu\n", tern_engine_hist_bounds[b], cum);
        else rc |= srv_buf_printf(o, "tern_iteration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    rc |= srv_buf_printf(o, "tern_iteration_seconds_sum %.6f\ntern_iteration_seconds_count %llu\n", es->iter_seconds_sum,
                         (unsigned long long)es->iterations);
    /* Speculation: drafted and kept tokens by draft position (1 = the
     * first token after the pending one), and their totals. */
    unsigned long long dt = 0, at = 0;
    rc |= spec_positions(o, "tern_spec_drafted", "Drafted tokens verified", es->spec_drafted, es->spec_drafted, &dt);
    rc |= spec_positions(o, "tern_spec_accepted", "Drafted tokens the target kept", es->spec_accepted,
                         es->spec_drafted, &at);
    rc |= srv_buf_printf(o, "# HELP tern_spec_drafted_total Drafted tokens verified.\n"
                            "# TYPE tern_spec_drafted_total counter\ntern_spec_drafted_total %llu\n"
                            "# HELP tern_spec_accepted_total Drafted tokens kept.\n"
                            "# TYPE tern_spec_accepted_total counter\ntern_spec_accepted_total %llu\n", dt, at);
    return rc ? -1 : 0;
}

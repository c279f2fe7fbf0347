/* `tern serve`: an OpenAI / Anthropic compatible HTTP server, a drop-in for
 * mlx_lm.server. tern_server_run loads the model, listens, and returns after
 * SIGINT or SIGTERM once every connection is closed. */
#ifndef TERN_SERVER_H
#define TERN_SERVER_H

#include <stddef.h>

#include "tern/status.h"

typedef struct {
    const char *model_dir;          /* borrowed */
    const char *host;               /* "127.0.0.1" */
    int         port;               /* 8080 */
    float       temperature;        /* 0.0 */
    float       top_p;              /* 1.0 */
    int         top_k;              /* 0 */
    float       min_p;              /* 0.0 */
    int         max_tokens;         /* 512 */
    const char *chat_template_args; /* JSON object text or NULL */
    int         prefill_step;       /* 2048 */
    int         log_level;          /* 0 DEBUG .. 3 ERROR; 1 = INFO */
    size_t      max_body;           /* request body cap in bytes (8 MiB) */
    int         queue_size;         /* requests waiting for admission (64) */
    int         max_batch;          /* rows decoded together (16); 1 = strict serial */
    int         prefill_interleave; /* prompt tokens per iteration while rows decode (0 = engine default) */
    size_t      memory_budget;      /* KV pool bytes (0 = half the memory available after load) */
    size_t      prompt_cache_bytes; /* prompt cache cap (0 = the pool) */
    int         no_prompt_cache;    /* --prompt-cache-bytes 0 */
    const char *prompt_cache_dir;   /* borrowed; NULL = memory only */
    size_t      prompt_cache_disk_bytes; /* cap of that directory (0 = 4 GB) */
    int         draft_kind;         /* TERN_DRAFT_NONE / TERN_DRAFT_NGRAM / TERN_DRAFT_MODEL */
    const char *draft_model_dir;    /* borrowed; TERN_DRAFT_MODEL: the draft model (same tokenizer) */
    int         num_draft_tokens;   /* 0 = engine default (4) */
    int         ngram_min, ngram_max;
    int         spec_fixed;         /* --draft-fixed: draft num_draft_tokens every iteration */
    int         n_threads;          /* compute threads; 0 = all cores */
    int         precision;          /* a tern_precision value; 0 = default */
    int         weights;            /* a tern_weights_mode value; 0 = default */
} tern_server_opts;

void tern_server_opts_default(tern_server_opts *o);
/* Blocks until SIGINT/SIGTERM. Must be called before any other thread is
 * started (it blocks those signals for the threads it creates). */
tern_status tern_server_run(const tern_server_opts *o);

#endif

/* Shared state of a running server: the loaded model and text components,
 * defaults from the command line, the generation queue and the metrics.
 * Everything here is read-only after start-up except the atomics and the
 * objects that lock themselves (queue, metrics). */
#ifndef TERN_SERVER_CTX_H
#define TERN_SERVER_CTX_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server/metrics.h"
#include "server/request.h"
#include "tern/chat_template.h"
#include "tern/engine.h"
#include "tern/model.h"
#include "tern/tokenizer.h"

typedef struct {
    tern_model         *model;        /* owned */
    tern_model         *draft;        /* owned: --draft-model, or NULL */
    tern_tokenizer     *tok;          /* owned */
    tern_chat_template *tmpl;         /* owned; NULL when the model has no template */
    int                 has_thinking;
    int32_t            *eos_extra;    /* owned: tokenizer EOS when config.json lacks it */
    int                 n_eos_extra;
    int32_t            *xtc_special;  /* owned: EOS ids + ids of "\n" */
    int                 n_xtc_special;
    int                 max_context;
    int                 prefill_step;
    int                 speculation;  /* a draft source is configured */
    char               *model_id;     /* owned: listed by /v1/models */
    json_t             *template_args;/* owned: --chat-template-args */
    srv_defaults        defaults;
    tern_engine        *engine;       /* owned: the scheduler every generation runs in */
    srv_metrics        *metrics;      /* owned */
    size_t              max_body;
    int                 log_level;    /* 0 debug, 1 info, 2 warning, 3 error */
    atomic_int          stopping;
} srv_ctx;

#endif

/* The engine's own state (engine.c: lifecycle, queue, thread; engine_iter.c:
 * one iteration; engine_sample.c: per-row sampling). Internal to src/engine. */
#ifndef TERN_ENGINE_INTERNAL_H
#define TERN_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/drafter.h"
#include "engine/prompt_cache.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "tern/engine.h"

enum { ENG_MAX_TOP = 20 };

typedef enum { REQ_WAITING = 0, REQ_PREFILL, REQ_DECODE, REQ_DONE } req_state;

/* One choice of a request: a KV row and its sampling state. */
typedef struct {
    struct tern_request *req;  /* borrowed back-pointer */
    int choice;
    int kv_row;                /* -1 once released */
    int32_t pending;           /* sampled token to feed next */
    int step;                  /* tokens sampled so far */
    int32_t *hist;             /* owned: prompt + generated, for the processors */
    int n_hist;
    tern_sampling_params sp;   /* the request's, with seed + choice */
    int done;
    /* Speculation: this iteration's draft, and the row's acceptance rate. */
    int32_t draft[TERN_SPEC_POSITIONS];
    int n_draft, depth;
    int job;                   /* index in e->jobs this iteration, -1 = not drafting */
    int drafting;              /* the drafter opened a state for this row (else no speculation) */
    void *dstate;              /* owned drafter row state (may be NULL when drafting) */
    /* Decayed counts, per draft position k, of verifies that reached k (the
     * drafts before it kept) and of those that kept k too: the row's chance
     * of keeping position k given the ones before is acc_kept[k] /
     * acc_tried[k]. Per position, since a drafter's runs are not
     * geometric: an n-gram continuation that holds for one token tends to
     * hold for the next. */
    double acc_kept[TERN_SPEC_POSITIONS], acc_tried[TERN_SPEC_POSITIONS];
    /* Filled by the parallel sampling phase of an iteration. */
    const float *logits;       /* borrowed row of the iteration's logits */
    const tern_logit_summary *sum; /* borrowed: the backend's summary of that row when the
                                  logits were not copied back (greedy rows), else NULL */
    float *work, *lp;          /* owned scratch [vocab] each */
    int32_t tok;
    float tok_lp;
    int n_top;
    int32_t top_ids[ENG_MAX_TOP];
    float top_lp[ENG_MAX_TOP];
    tern_status sample_st;
} eng_row;

struct tern_request {
    atomic_int refs;           /* the handle and the engine */
    atomic_int cancel;
    struct tern_engine *e;
    int32_t *prompt;           /* owned */
    int n_prompt;
    tern_request_opts o;       /* arrays below are owned copies */
    int32_t *bias_ids, *xtc_special, *extra_eos;
    float *bias_values;
    tern_request_cb cb;
    int n, max_tokens;
    struct tern_request *next; /* waiting line */
    req_state state;
    int n_fed;                 /* prompt tokens fed so far */
    int n_prefill;             /* prompt tokens the prefill feeds: all, or all but the last when
                                  speculating (tail split: the last one heads the first verify) */
    int cached;                /* prompt tokens taken from the prompt cache */
    int chunk;                 /* prompt tokens in the current iteration */
    int in_iter;               /* its prompt is part of the current iteration (chunk may be 0) */
    eng_row *rows;             /* owned, [n] */
    tern_finish *finish;       /* owned, [n] */
    int *generated;            /* owned, [n] */
    long drafted, accepted, target_calls;
    int spec;                  /* drafted tokens this request may take per row */
    tern_status fail_st;
    char fail_msg[256];
    double t_submit, t_admit, t_first;
};

struct tern_engine {
    tern_model *m;             /* borrowed */
    tern_engine_opts o;
    tern_kv *kv;               /* owned */
    tern_pcache *pc;           /* owned; NULL when off */
    tern_pdisk *disk;          /* owned; NULL without a cache directory */
    int *pc_blocks;            /* [blocks per row] lookup scratch */
    int vocab;
    const int32_t *eos;        /* borrowed from the model */
    int n_eos;
    pthread_t thread;
    pthread_mutex_t mu;        /* guards the waiting line, stopping and stats */
    pthread_cond_t cv;
    struct tern_request *wait_head, *wait_tail;
    int n_waiting;
    int stopping, thread_started;
    tern_engine_stats stats;
    /* Engine thread only. */
    struct tern_request **active;  /* admitted, in admission order */
    int n_active, rows_used;
    int fail_streak;
    /* Measured costs steering the prompt budget while rows decode: a
     * decode-only iteration, and one prompt token more in a mixed one
     * (exponential moving averages; 0 = not measured yet). */
    double ema_decode_s, ema_token_s, ema_decode_rows;
    int *b_rows, *b_ntok;
    int32_t *b_tokens;
    uint8_t *b_want;
    float *logits;             /* [max_batch + spec_budget, vocab] */
    /* Backends that summarise the logits on the device (tern_model_summarizes):
     * per output, whether its logits row is copied back, and its summary. */
    int summarize;
    uint8_t *b_need;           /* [max_batch + spec_budget] */
    tern_logit_summary *summ;  /* [max_batch + spec_budget] */
    /* Iteration time against tokens fed, t = t0 + c T: a least-squares fit
     * over recent iterations with rows decoding, older ones decaying. */
    double fit_w, fit_T, fit_t, fit_TT, fit_Tt;
    tern_drafter drafter;
    int n_spec;                /* rows verifying a draft this iteration */
    eng_row **spec_rows;       /* [max_batch] */
    eng_row **s_rows;          /* rows to sample this iteration */
    tern_draft_job *jobs;      /* [max_batch] batched drafting */
    int n_s;
};

/* Runs one iteration; returns 0 when there was nothing to do (engine_iter.c). */
int tern_engine_iterate(struct tern_engine *e);
/* Admits waiting requests that fit (engine_iter.c; takes e->mu itself). */
void tern_engine_admit(struct tern_engine *e);
/* Samples every row in e->s_rows in parallel; results land in the rows
 * (engine_sample.c). */
void tern_engine_sample_rows(struct tern_engine *e);
/* Samples one row from its logits pointer (engine_sample.c). */
void tern_engine_sample_one(struct tern_engine *e, eng_row *w);
/* 1 when the row's token is the argmax of its logprobs and only the chosen
 * token's logprob is reported: a device summary then serves it. */
int tern_engine_row_greedy_plain(const eng_row *w);
/* Calls on_done and drops the engine's reference (engine.c). */
void tern_engine_finish_request(struct tern_engine *e, struct tern_request *r);
void tern_request_free_rows(struct tern_engine *e, struct tern_request *r);

#endif

/* The engine: one scheduler that runs every request of a model through
 * continuous batching over a paged KV pool.
 *
 * Each iteration is one forward pass over rows: every running row's next
 * token plus, within a token budget, the prompt chunks of rows joining. Rows
 * join and leave between iterations. A request's tokens do not depend on what
 * else runs beside it: every kernel computes a token's values the same way
 * whatever the batch (tested bit for bit).
 *
 * Admission is a transaction: a request waits in a bounded FIFO until every
 * KV block it may need (prompt + max_tokens for each of its n choices) can be
 * reserved; a request that could never fit is refused at submit.
 *
 * Threads: the engine runs its iterations on a thread of its own; callbacks
 * are called on that thread, one at a time. tern_engine_submit and
 * tern_request_cancel may be called from any thread.
 *
 * Ownership: tern_engine_create returns an owned engine (it borrows the model,
 * which must outlive it); tern_engine_submit copies the prompt and options;
 * the handle it returns holds a reference released by tern_request_release.
 * Events passed to callbacks are borrowed for the call. */
#ifndef TERN_ENGINE_H
#define TERN_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/model.h"
#include "tern/sampler.h"
#include "tern/status.h"

typedef struct tern_engine tern_engine;
typedef struct tern_request tern_request;

typedef enum {
    TERN_FINISH_NONE = 0,
    TERN_FINISH_EOS,      /* the model emitted an end-of-sequence id (not reported) */
    TERN_FINISH_LENGTH,   /* max_tokens (or the room the request was admitted with) reached */
    TERN_FINISH_STOPPED   /* the callback asked to stop, or the request was cancelled */
} tern_finish;

typedef struct {
    int max_batch;           /* rows in one iteration (>= 1); 0 = 16; 1 = strict serial */
    int prefill_step;        /* prompt tokens per iteration when no row is decoding; 0 = 2048 */
    int prefill_interleave;  /* most prompt tokens per iteration while rows decode; 0 = 256 (the
                                budget adapts below it to keep their step time near 2x) */
    size_t memory_budget;    /* bytes of KV blocks; 0 = half the memory available at create */
    long kv_tokens;          /* if > 0: the pool holds exactly this many positions (overrides budget) */
    int queue_size;          /* requests waiting for admission; 0 = 64 */
    int max_context;         /* positions per row; 0 = the model's */
    /* Prompt cache (shared prefix reuse over the pool's blocks): the most KV
     * bytes it keeps; 0 = as much as the pool holds (cached blocks are the
     * first thing reclaimed when a request needs room). */
    size_t prompt_cache_bytes;
    int no_prompt_cache;     /* 1 = off */
    /* With a directory, prefixes leaving memory (and every one at stop) are
     * written there as files and read back by later engines of the same
     * model, layout and namespace; the directory keeps at most
     * prompt_cache_disk_bytes (0 = 4 GB). */
    const char *prompt_cache_dir;     /* borrowed for the create call */
    size_t prompt_cache_disk_bytes;
    uint64_t prompt_cache_namespace;  /* e.g. a hash of the tokenizer and chat template */
    /* Speculative decoding: a draft source proposes tokens that each row's
     * next forward verifies with the request's own sampler (lossless). */
    int draft_kind;          /* TERN_DRAFT_NONE / TERN_DRAFT_NGRAM / TERN_DRAFT_MODEL */
    tern_model *draft_model; /* TERN_DRAFT_MODEL: borrowed (must outlive the engine), loaded on the
                                target's execution context (tern_model_opts.exec) with the
                                target's tokenizer; its KV pool shares the memory budget */
    int num_draft_tokens;    /* most drafted tokens per row and iteration; 0 = 4 */
    int ngram_min, ngram_max;/* n-gram lookup lengths; 0 = 1 and 4 */
    int spec_budget;         /* most drafted tokens per iteration over all rows; 0 = 4 x max_batch
                                (within it, the measured cost model decides how many) */
    int spec_fixed;          /* 1 = every speculating row drafts num_draft_tokens each iteration
                                (no cost model: the fixed-depth loop of mlx-lm) */
} tern_engine_opts;

enum { TERN_DRAFT_NONE = 0, TERN_DRAFT_NGRAM = 1, TERN_DRAFT_MODEL = 2 };
enum { TERN_SPEC_POSITIONS = 16 };

typedef struct {
    int max_tokens;            /* > 0; clamped to the context and the pool */
    int n;                     /* choices sampled from one prompt (forked rows); 0 = 1 */
    int top_logprobs;          /* 0..20 alternatives per token */
    int want_logprob;          /* report the chosen token's logprob */
    tern_sampling_params sampling;  /* arrays copied at submit; choice c uses seed + c */
    const int32_t *extra_eos;  /* more ids that end generation (copied) */
    int n_extra_eos;
    int ignore_eos;
    int num_draft_tokens;      /* -1 = the engine's; 0 = no speculation for this request */
} tern_request_opts;

typedef struct {
    int32_t token;
    int     choice;            /* 0..n-1 */
    int     step;              /* 0-based index of this generated token in its choice */
    float   logprob;           /* log-softmax after processors */
    int     n_top;
    const int32_t *top_ids;    /* borrowed, n_top, best first */
    const float   *top_logprobs;
} tern_token_event;

typedef struct {
    tern_status status;        /* TERN_OK, or why the request failed / was dropped */
    const char *error;         /* borrowed message when status != TERN_OK */
    int prompt_tokens;
    int cached_tokens;
    int max_tokens;            /* as admitted (after clamping) */
    int n;                     /* choices */
    const tern_finish *finish; /* borrowed, [n] */
    const int *generated;      /* borrowed, [n]: tokens reported per choice */
    double queue_seconds;      /* submit -> admitted */
    double prefill_seconds;    /* admitted -> first token */
    double decode_seconds;     /* first token -> done */
    long drafted, accepted;    /* speculative tokens proposed / kept (all choices) */
    long target_calls;         /* forward passes this request took part in */
} tern_request_result;

typedef struct {
    /* Each generated token; return non-zero to end that choice (STOPPED). */
    int (*on_token)(void *user, const tern_token_event *ev);
    /* Once per iteration while the request waits or runs: non-zero cancels it
     * (a client that went away). May be NULL. */
    int (*should_cancel)(void *user);
    /* Exactly once per accepted request, after its last event. */
    void (*on_done)(void *user, const tern_request_result *res);
    void *user;
} tern_request_cb;

typedef struct {
    int running_rows, running_requests, waiting;
    long blocks_total, blocks_used, blocks_free, blocks_reserved;
    int block_tokens;
    size_t kv_bytes_per_token;
    long kv_capacity_tokens;   /* positions the pool holds */
    uint64_t iterations, tokens;        /* totals: forward passes, tokens fed */
    int last_iteration_tokens;
    int peak_rows;                      /* most rows one iteration ran */
    /* Iteration times: counts per bucket, upper bounds in seconds below. */
    uint64_t iter_hist[14];
    double iter_seconds_sum;
    uint64_t admitted, refused, failures;
    /* Prompt cache. */
    uint64_t cache_hits, cache_misses, cache_tokens, cache_evictions;
    long cache_blocks;
    uint64_t disk_bytes, disk_writes, disk_loads, disk_load_failures, disk_skipped;
    long disk_files;
    /* Speculation: tokens drafted and accepted at each draft position. */
    uint64_t spec_drafted[TERN_SPEC_POSITIONS], spec_accepted[TERN_SPEC_POSITIONS];
} tern_engine_stats;

/* Upper bounds (seconds) of the iteration-time buckets; the last is +inf. */
extern const double tern_engine_hist_bounds[14];

void tern_engine_opts_default(tern_engine_opts *o);
void tern_request_opts_default(tern_request_opts *o);

tern_status tern_engine_create(tern_model *model, const tern_engine_opts *opts, tern_engine **out);
/* Stops taking requests, drops the waiting ones (on_done with
 * TERN_E_CANCELLED), lets the running ones finish, joins the thread. */
void tern_engine_stop(tern_engine *e);
/* Stops (if not yet) and frees. Handles still held stay valid until released. */
void tern_engine_free(tern_engine *e);

/* Queues a request. Refusals, with nothing queued and no callback: TERN_E_RANGE
 * (the prompt can never fit: context or KV pool; n beyond max_batch),
 * TERN_E_INVALID (bad options), TERN_E_BUSY (the waiting line is full),
 * TERN_E_STATE (the engine is stopping). out may be NULL. */
tern_status tern_engine_submit(tern_engine *e, const int32_t *prompt, int n_prompt, const tern_request_opts *opts,
                               const tern_request_cb *cb, tern_request **out);
/* Ends the request at the next iteration (on_done still comes). */
void tern_request_cancel(tern_request *r);
void tern_request_release(tern_request *r);

void tern_engine_get_stats(tern_engine *e, tern_engine_stats *out);

/* Loads a draft model (for TERN_DRAFT_MODEL) from path (borrowed): on
 * target's execution context (opts' exec is replaced; opts may be NULL),
 * after checking that its tokenizer gives every id the target's piece
 * (TERN_E_INVALID names the first id that differs). *out owned; free it
 * after the engines that use it and before the target. */
tern_status tern_draft_model_load(const char *path, tern_model *target, const tern_model_opts *opts, tern_model **out);
/* Bytes one KV position costs for this model (every layer). */
size_t tern_engine_kv_bytes_per_token(const tern_model *m);

/* Test hook: allocation failure injection at the sites the serving path
 * allocates from. tern_failpoint_arm(site, n) makes the n-th allocation at
 * that site from now on fail once (n = 0 disarms) and restarts its count;
 * tern_failpoint_count says how many allocations the site made since. */
typedef enum {
    TERN_FAILPOINT_PREPARE = 0,   /* admission: preparing rows */
    TERN_FAILPOINT_GROW,          /* KV block tables growing */
    TERN_FAILPOINT_WORKSPACE,     /* the forward's workspace */
    TERN_FAILPOINT_COUNT
} tern_failpoint_site;
void tern_failpoint_arm(tern_failpoint_site site, long n);
long tern_failpoint_count(tern_failpoint_site site);

#endif

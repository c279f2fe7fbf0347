/* Draft sources for speculative decoding: one vtable, so the verify loop in
 * the scheduler never knows which drafter it runs.
 *
 * A drafter proposes up to max tokens to follow a row's history; the
 * scheduler verifies them in the row's next forward (one window of
 * [pending, d1..dn]) with the request's own sampler, keeps the agreeing
 * prefix and rolls the rest back through the KV round API. Since a verify
 * position's logits are bit-identical to a single step's, the output is the
 * same as without speculation, whatever the drafter proposes.
 *
 * Ports: a drafter declares what it needs from the target (TERN_PORT_*); a
 * pairing whose ports the target cannot give is refused before anything is
 * allocated. The n-gram and draft-model drafters need the token history only.
 *
 * Lifecycle: the scheduler's drafter is set up once (init) and torn down
 * with the engine (destroy). Per row: open at admission (fallible, before
 * the row commits; a row whose open fails runs without speculation) ->
 * draft ... -> close. Drafting is per row (draft) or for all the
 * iteration's speculating rows at once (draft_rows, for drafters that batch:
 * a draft model runs one forward per draft depth over every row). What was
 * kept needs no call of its own: each draft gets the row's whole history,
 * from which a drafter with state re-synchronises (the draft model cuts its
 * KV where it no longer matches and feeds what is missing).
 * Ownership: open returns an owned row state freed by close; histories are
 * borrowed for the call. */
#ifndef TERN_ENGINE_DRAFTER_H
#define TERN_ENGINE_DRAFTER_H

#include <stdint.h>

#include "tern/model.h"
#include "tern/sampler.h"
#include "tern/status.h"

enum {
    TERN_PORT_TOKENS = 1 << 0,     /* the token history (always there) */
    TERN_PORT_HIDDEN_TAPS = 1 << 1,/* hidden states of chosen layers (MTP, assistant drafters) */
    TERN_PORT_EMBEDDINGS = 1 << 2  /* the target's input embedding table */
};

typedef struct tern_drafter tern_drafter;

/* One row's drafting request in a batched call: hist[0, n_hist) is the row's
 * history ending with its pending token; up to max tokens go to out and
 * n_out says how many (0 = none this time). sp (borrowed, may be NULL) is
 * the request's sampler and step the step its first draft stands for: a
 * drafter that samples draws draft i with it at step + i, so that where the
 * draft's distribution is close to the target's it picks the token the
 * target's own sample will (both read the same (seed, step) stream). */
typedef struct {
    void *state;
    const int32_t *hist;
    int n_hist;
    int max;
    int32_t *out;
    int n_out;
    const tern_sampling_params *sp;
    int step;
} tern_draft_job;

typedef struct {
    const char *name;
    unsigned ports;                 /* TERN_PORT_* this drafter needs */
    /* Per row: reserve_tokens is the most positions the row may reach. */
    tern_status (*open)(tern_drafter *d, long reserve_tokens, void **state);
    /* Proposes up to max tokens after hist[0, n) into out; returns how many. */
    int (*draft)(tern_drafter *d, void *state, const int32_t *hist, int n, int max, int32_t *out);
    /* Batched form; optional (NULL: draft per row). Never fails: a row that
     * cannot be drafted gets n_out = 0. */
    void (*draft_rows)(tern_drafter *d, tern_draft_job *jobs, int n);
    void (*close)(tern_drafter *d, void *state);
    void (*destroy)(tern_drafter *d);   /* optional */
} tern_drafter_vtable;

struct tern_drafter {
    const tern_drafter_vtable *vt;
    int ngram_min, ngram_max;       /* n-gram lookup */
    void *impl;                     /* the drafter's own context (owned; destroy frees it) */
    double step_seconds;            /* measured cost of one draft depth step (0 = none) */
};

/* The n-gram (prompt lookup) drafter: the most recent earlier occurrence of
 * the history's last n tokens (n from ngram_max down to ngram_min) proposes
 * the tokens that followed it (draft_ngram.c). */
extern const tern_drafter_vtable tern_drafter_ngram;

/* A separate, smaller model with the target's tokenizer (draft_model.c):
 * its own KV pool (a row per target row), drafting with the request's
 * sampler (argmax when greedy), all rows batched in one forward per draft
 * depth, on the target's execution context. */
extern const tern_drafter_vtable tern_drafter_model;
/* Sets d up for model (borrowed; it must outlive d) drafting for up to
 * max_rows rows of up to max_len positions over n_blocks KV blocks. */
tern_status tern_drafter_model_init(tern_drafter *d, tern_model *model, int max_rows, int max_len, long n_blocks);

/* Refuses a drafter whose ports the target lacks (have: TERN_PORT_* bits). */
tern_status tern_drafter_check(const tern_drafter *d, unsigned have);

#endif

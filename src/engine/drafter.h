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
 * allocated. The n-gram drafter needs nothing but the token history.
 *
 * Lifecycle (per row): open -> (prefill) -> draft / commit ... -> close.
 * Ownership: open returns an owned state freed by close; histories are
 * borrowed for the call. */
#ifndef TERN_ENGINE_DRAFTER_H
#define TERN_ENGINE_DRAFTER_H

#include <stdint.h>

#include "tern/status.h"

enum {
    TERN_PORT_TOKENS = 1 << 0,     /* the token history (always there) */
    TERN_PORT_HIDDEN_TAPS = 1 << 1,/* hidden states of chosen layers (MTP, assistant drafters) */
    TERN_PORT_EMBEDDINGS = 1 << 2  /* the target's input embedding table */
};

typedef struct tern_drafter tern_drafter;

typedef struct {
    const char *name;
    unsigned ports;                 /* TERN_PORT_* this drafter needs */
    tern_status (*open)(const tern_drafter *d, void **state);
    /* The prompt went in (state may index it); optional. */
    void (*prefill)(void *state, const int32_t *hist, int n);
    /* Proposes up to max tokens after hist[0, n) into out; returns how many. */
    int (*draft)(void *state, const int32_t *hist, int n, int max, int32_t *out);
    /* accepted of the drafted tokens were kept; optional. */
    void (*commit)(void *state, int drafted, int accepted);
    void (*close)(void *state);
} tern_drafter_vtable;

struct tern_drafter {
    const tern_drafter_vtable *vt;
    int ngram_min, ngram_max;       /* n-gram lookup */
};

/* The n-gram (prompt lookup) drafter: the most recent earlier occurrence of
 * the history's last n tokens (n from ngram_max down to ngram_min) proposes
 * the tokens that followed it (draft_ngram.c). */
extern const tern_drafter_vtable tern_drafter_ngram;

/* Refuses a drafter whose ports the target lacks (have: TERN_PORT_* bits). */
tern_status tern_drafter_check(const tern_drafter *d, unsigned have);

#endif

/* Stop strings matched on decoded text.
 *
 * Text arrives in deltas that may split a stop sequence anywhere; the matcher
 * holds back the longest tail that could still start a stop sequence, so no
 * byte of a stop sequence is ever emitted. On a match the text before the
 * earliest match is emitted and everything after it is dropped. */
#ifndef TERN_TEXT_STOP_H
#define TERN_TEXT_STOP_H

#include <stddef.h>

#include "core/buf.h"
#include "tern/status.h"

typedef struct tern_stop tern_stop;

/* seqs (borrowed, copied): n stop strings; empty strings are ignored.
 * *out receives an owned matcher (n may be 0: everything passes through). */
tern_status tern_stop_create(const char *const *seqs, int n, tern_stop **out);
void tern_stop_free(tern_stop *s);

/* Feeds a delta; appends the text that is safe to emit to out. Returns 1 once
 * a stop sequence has matched (later pushes emit nothing), else 0; -1 when
 * memory runs out. */
int tern_stop_push(tern_stop *s, const char *text, size_t len, tern_buf *out);
/* End of generation without a match: emits the held-back tail. */
int tern_stop_flush(tern_stop *s, tern_buf *out);
int tern_stop_matched(const tern_stop *s);
/* The sequence that matched (borrowed), or NULL. */
const char *tern_stop_which(const tern_stop *s);

#endif

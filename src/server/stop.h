/* Stop strings matched on decoded text.
 *
 * Text arrives in deltas that may split a stop sequence anywhere; the matcher
 * holds back the longest tail that could still start a stop sequence, so no
 * byte of a stop sequence is ever emitted. On a match the text before the
 * earliest match is emitted and everything after it is dropped. */
#ifndef TERN_SERVER_STOP_H
#define TERN_SERVER_STOP_H

#include <stddef.h>

#include "server/buf.h"
#include "tern/status.h"

typedef struct srv_stop srv_stop;

/* seqs (borrowed, copied): n stop strings; empty strings are ignored.
 * *out receives an owned matcher (n may be 0: everything passes through). */
tern_status srv_stop_create(const char *const *seqs, int n, srv_stop **out);
void srv_stop_free(srv_stop *s);

/* Feeds a delta; appends the text that is safe to emit to out. Returns 1 once
 * a stop sequence has matched (later pushes emit nothing), else 0; -1 when
 * memory runs out. */
int srv_stop_push(srv_stop *s, const char *text, size_t len, srv_buf *out);
/* End of generation without a match: emits the held-back tail. */
int srv_stop_flush(srv_stop *s, srv_buf *out);
int srv_stop_matched(const srv_stop *s);
/* The sequence that matched (borrowed), or NULL. */
const char *srv_stop_which(const srv_stop *s);

#endif

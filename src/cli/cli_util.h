/* Small helpers shared by the CLI commands. */
#ifndef TERN_CLI_UTIL_H
#define TERN_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/model.h"

/* Parses "1,2,3" into an owned array (*ids, free()); returns 0 or -1 with a
 * message on stderr. */
int cli_parse_ids(const char *s, int32_t **ids, int *n);
/* Parses an integer / float option value, reporting errors by option name. */
int cli_int(const char *opt, const char *v, long lo, long hi, int *out);
int cli_float(const char *opt, const char *v, float *out);
int cli_u64(const char *opt, const char *v, uint64_t *out);
/* A byte count: plain bytes, or a number with a suffix K/M/G (powers of 1000,
 * "GB" as mlx_lm writes it; "GiB" for powers of 1024). */
int cli_bytes(const char *opt, const char *v, size_t *out);
/* --precision f32|bf16 and --weights panels|mapped; 0 or -1 with a message. */
int cli_precision(const char *opt, const char *v, tern_precision *out);
int cli_weights(const char *opt, const char *v, tern_weights_mode *out);
/* --draft-kind none|ngram|model into *kind (a TERN_DRAFT_* value; -1 as
 * given means "not given"); 0 or -1 with a message. */
int cli_draft_kind(const char *opt, const char *v, int *kind);
/* The draft kind a command runs with, from --draft-kind (-1 = not given)
 * and --draft-model (NULL = not given): a draft model alone means "model";
 * "model" without one, or another kind with one, is refused (-1, message
 * naming cmd). */
int cli_draft_resolve(const char *cmd, int given, const char *draft_model, int *kind);
/* Returns argv[i+1] or prints "option needs a value" and returns NULL. */
const char *cli_value(int argc, char **argv, int i);

#endif

/* Hugging Face tokenizer.json: encode, decode and streaming decode.
 *
 * A tern_tokenizer is read-only after tern_tokenizer_load and may be shared by
 * threads (every call below only reads it). The supported components are the
 * BPE model (byte-level and SentencePiece-style with byte fallback), the
 * normalizers NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, Strip and
 * Sequence, the pre-tokenizers Split, ByteLevel, Metaspace, Digits,
 * Punctuation, Whitespace, WhitespaceSplit and Sequence, the decoders
 * ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder and
 * Sequence, and the post-processors TemplateProcessing, ByteLevel, Bert,
 * Roberta and Sequence. Anything else is refused by name at load. */
#ifndef TERN_TOKENIZER_H
#define TERN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tern/status.h"

typedef struct tern_tokenizer tern_tokenizer;

/* dir holds tokenizer.json (+ optional tokenizer_config.json for bos_token,
 * eos_token, add_bos_token). dir is borrowed; *out receives an owned tokenizer. */
tern_status tern_tokenizer_load(const char *dir, tern_tokenizer **out);
/* Same, from a tokenizer.json path and an optional tokenizer_config.json path
 * (config_path may be NULL). Both borrowed. */
tern_status tern_tokenizer_load_files(const char *json_path, const char *config_path,
                                      tern_tokenizer **out);
/* Same from tokenizer.json text json[0, len) (borrowed, need not be
 * NUL-terminated), without a tokenizer_config.json. */
tern_status tern_tokenizer_load_json(const char *json, size_t len, tern_tokenizer **out);
void tern_tokenizer_free(tern_tokenizer *t);

/* text: borrowed, len bytes of valid UTF-8 (invalid UTF-8 is refused with
 * TERN_E_INVALID). *ids returned owned (free()), *n set. add_special applies
 * the post-processor (BOS etc.). */
tern_status tern_tokenizer_encode(const tern_tokenizer *t, const char *text, size_t len,
                                  int add_special, int32_t **ids, int *n);
/* ids borrowed; ids outside the vocabulary are skipped, as the reference does.
 * *out owned NUL-terminated UTF-8 (free()). */
tern_status tern_tokenizer_decode(const tern_tokenizer *t, const int32_t *ids, int n,
                                  int skip_special, char **out);
/* Same, also giving the byte length (the text may contain U+0000). */
tern_status tern_tokenizer_decode_n(const tern_tokenizer *t, const int32_t *ids, int n,
                                    int skip_special, char **out, size_t *len);

int tern_tokenizer_vocab_size(const tern_tokenizer *t);             /* highest id + 1 */
/* Raw vocabulary string (added tokens first), borrowed; NULL if none. */
const char *tern_tokenizer_id_to_piece(const tern_tokenizer *t, int32_t id);
int32_t tern_tokenizer_piece_to_id(const tern_tokenizer *t, const char *piece); /* -1 if none */
int tern_tokenizer_is_special(const tern_tokenizer *t, int32_t id);
int32_t tern_tokenizer_bos_id(const tern_tokenizer *t);  /* tokenizer_config bos_token; -1 if none */
int32_t tern_tokenizer_eos_id(const tern_tokenizer *t);  /* tokenizer_config eos_token; -1 if none */
const char *tern_tokenizer_bos_token(const tern_tokenizer *t); /* borrowed, NULL if none */
const char *tern_tokenizer_eos_token(const tern_tokenizer *t);
/* tokenizer_config add_bos_token: 1 true, 0 false, -1 absent. */
int tern_tokenizer_add_bos_token(const tern_tokenizer *t);

/* Streaming detokenizer: push ids one at a time, get the newly stable text.
 * Never emits a partial UTF-8 sequence; the concatenated output of every push
 * and the final flush equals tern_tokenizer_decode of all ids. */
typedef struct tern_detok tern_detok;
/* t borrowed, must outlive the detokenizer; *out owned. */
tern_status tern_detok_create(const tern_tokenizer *t, int skip_special, tern_detok **out);
tern_status tern_detok_push(tern_detok *d, int32_t id, char **delta);  /* *delta owned (may be ""), free() */
tern_status tern_detok_flush(tern_detok *d, char **delta);             /* rest of the text at end of stream */
/* Same as push / flush, also giving the byte length of *delta (may hold U+0000). */
tern_status tern_detok_push_n(tern_detok *d, int32_t id, char **delta, size_t *len);
tern_status tern_detok_flush_n(tern_detok *d, char **delta, size_t *len);
void tern_detok_free(tern_detok *d);

#endif

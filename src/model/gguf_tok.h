/* The tokenizer and chat template of a GGUF file, as the files the text
 * layer reads: tokenizer.json (a byte-level BPE model from
 * tokenizer.ggml.tokens / merges / token_type, the pre-tokenizer named by
 * tokenizer.ggml.pre) and tokenizer_config.json (bos/eos tokens,
 * add_bos_token, tokenizer.chat_template), written into a fresh private
 * directory. Tokenizer models other than "gpt2" (byte-level BPE) and
 * pre-tokenizers other than qwen2, llama-bpe and gpt2/default are refused. */
#ifndef TERN_MODEL_GGUF_TOK_H
#define TERN_MODEL_GGUF_TOK_H

#include <stddef.h>

#include "io/gguf.h"

/* Creates the directory (under $TMPDIR or /tmp), writes both files, and
 * copies its path into dir (cap bytes). g borrowed. */
tern_status tern_gguf_write_text_files(const tern_gguf *g, char *dir, size_t cap);
/* The same two files' contents as NUL-terminated JSON strings, returned
 * owned (free). g borrowed. */
tern_status tern_gguf_text_json(const tern_gguf *g, char **tokenizer, char **tokenizer_config);
/* Removes the files and the directory written above (dir borrowed). */
void tern_gguf_remove_text_files(const char *dir);

#endif

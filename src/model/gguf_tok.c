#include "model/gguf_tok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The split patterns of llama.cpp's pre-tokenizer names, as the Hugging Face
 * tokenizers of those models write them. */
static const char QWEN2_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static json_t *byte_level(int use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                     "use_regex", use_regex);
}

static json_t *str_n(const char *s, uint64_t n)
{
    return json_stringn(s, (size_t)n);
}

static tern_status build(const tern_gguf *g, json_t **tok, json_t **cfg)
{
    const char *path = tern_gguf_path(g), *s;
    uint64_t n;
    tern_status st = tern_gguf_get_str(g, "tokenizer.ggml.model", &s, &n);
    if (st) return st;
    if (!(n == 4 && !memcmp(s, "gpt2", 4)))
        return tern_error(TERN_E_UNSUPPORTED, "%s: tokenizer model '%.*s' is not supported (gpt2: byte-level BPE)",
                          path, (int)n, s);
    const char *pre = "default";
    uint64_t pl = 7;
    tern_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pl);
    json_t *pretok, *norm = json_null();
    if (pl == 5 && !memcmp(pre, "qwen2", 5)) {
        pretok = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type",
                           "Split", "pattern", "Regex", QWEN2_RE, "behavior", "Isolated", "invert", 0, byte_level(0));
        norm = json_pack("{s:s}", "type", "NFC");
    } else if (pl == 9 && !memcmp(pre, "llama-bpe", 9)) {
        pretok = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type",
                           "Split", "pattern", "Regex", LLAMA3_RE, "behavior", "Isolated", "invert", 0, byte_level(0));
    } else if ((pl == 7 && !memcmp(pre, "default", 7)) || (pl == 4 && !memcmp(pre, "gpt2", 4))) {
        pretok = byte_level(1);
    } else {
        return tern_error(TERN_E_UNSUPPORTED, "%s: pre-tokenizer '%.*s' is not supported (qwen2, llama-bpe, gpt2)",
                          path, (int)pl, pre);
    }
    const tern_gguf_kv *toks = tern_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const tern_gguf_kv *merges = tern_gguf_find_kv(g, "tokenizer.ggml.merges");
    const tern_gguf_kv *types = tern_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (!toks || toks->type != TERN_GGUF_ARRAY || toks->elem != TERN_GGUF_STRING || !merges ||
        merges->type != TERN_GGUF_ARRAY || merges->elem != TERN_GGUF_STRING) {
        json_decref(pretok);
        json_decref(norm);
        return tern_error(TERN_E_FORMAT, "%s: tokenizer.ggml.tokens and tokenizer.ggml.merges must be string arrays",
                          path);
    }
    if (types && (types->type != TERN_GGUF_ARRAY || types->elem == TERN_GGUF_STRING || types->count != toks->count))
        types = NULL;
    json_t *vocab = json_object(), *added = json_array(), *mlist = json_array();
    const char **piece = calloc(toks->count ? toks->count : 1, sizeof *piece);
    uint64_t *plen = calloc(toks->count ? toks->count : 1, sizeof *plen);
    uint64_t pos = 0;
    /* Byte-level BPE pieces are always valid UTF-8 without NUL (bytes map
     * to printable code points): one that is not means a damaged file, and
     * tokenizer.json could not hold it, so it is refused rather than dropped
     * (which would shift every later id). */
    const char *bad_what = NULL;
    uint64_t bad_i = 0;
    for (uint64_t i = 0; piece && plen && i < toks->count && !bad_what; i++) {
        tern_gguf_array_str(toks, &pos, &piece[i], &plen[i]);
        if (memchr(piece[i], 0, (size_t)plen[i]) ||
            json_object_setn_new(vocab, piece[i], (size_t)plen[i], json_integer((json_int_t)i))) {
            bad_what = "tokenizer.ggml.tokens";
            bad_i = i;
            break;
        }
        int64_t ty = types ? tern_gguf_array_int(types, i) : 1;
        if (ty == 3 || ty == 4)
            json_array_append_new(added, json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
                                                   "content", str_n(piece[i], plen[i]), "single_word", 0,
                                                   "lstrip", 0, "rstrip", 0, "normalized", 0, "special", ty == 3));
    }
    pos = 0;
    for (uint64_t i = 0; i < merges->count && !bad_what; i++) {
        const char *ms;
        uint64_t ml;
        tern_gguf_array_str(merges, &pos, &ms, &ml);
        if (memchr(ms, 0, (size_t)ml) || json_array_append_new(mlist, str_n(ms, ml))) {
            bad_what = "tokenizer.ggml.merges";
            bad_i = i;
        }
    }
    if (bad_what) {
        free(piece);
        free(plen);
        json_decref(vocab);
        json_decref(added);
        json_decref(mlist);
        json_decref(pretok);
        json_decref(norm);
        return tern_error(TERN_E_FORMAT, "%s: %s[%llu] is not valid UTF-8 without NUL bytes (or out of memory)", path, bad_what,
                          (unsigned long long)bad_i);
    }
    int64_t bos = -1, eos = -1, add_bos = 0;
    if (tern_gguf_find_kv(g, "tokenizer.ggml.bos_token_id")) tern_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos);
    if (tern_gguf_find_kv(g, "tokenizer.ggml.eos_token_id")) tern_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos);
    if (tern_gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))
        tern_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &add_bos);
    if (bos >= (int64_t)toks->count) bos = -1;
    if (eos >= (int64_t)toks->count) eos = -1;
    json_t *post = byte_level(0);
    if (add_bos && bos >= 0 && piece) {
        json_decref(post);
        json_t *bs = str_n(piece[bos], plen[bos]);
        post = json_pack("{s:s, s:[{s:{s:O, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:O, s:i}}, {s:{s:s, s:i}}, {s:{s:O, s:i}}, "
                         "{s:{s:s, s:i}}], s:{s:{s:O, s:[I], s:[O]}}}",
                         "type", "TemplateProcessing", "single", "SpecialToken", "id", bs, "type_id", 0, "Sequence",
                         "id", "A", "type_id", 0, "pair", "SpecialToken", "id", bs, "type_id", 0, "Sequence", "id",
                         "A", "type_id", 0, "SpecialToken", "id", bs, "type_id", 1, "Sequence", "id", "B", "type_id",
                         1, "special_tokens", json_string_value(bs), "id", bs, "ids", (json_int_t)bos, "tokens", bs);
        json_decref(bs);
    }
    json_t *model = json_pack("{s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout", "unk_token",
                              "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", mlist);
    *tok = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation", "padding",
                     "added_tokens", added, "normalizer", norm, "pre_tokenizer", pretok, "post_processor", post,
                     "decoder", byte_level(1), "model", model);
    *cfg = json_object();
    if (piece && bos >= 0) json_object_set_new(*cfg, "bos_token", str_n(piece[bos], plen[bos]));
    if (piece && eos >= 0) json_object_set_new(*cfg, "eos_token", str_n(piece[eos], plen[eos]));
    json_object_set_new(*cfg, "add_bos_token", json_boolean(add_bos != 0));
    const char *tmpl;
    uint64_t tl;
    if (tern_gguf_find_kv(g, "tokenizer.chat_template") &&
        tern_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tl) == TERN_OK && *cfg &&
        json_object_set_new(*cfg, "chat_template", str_n(tmpl, tl))) {
            free(piece);
            free(plen);
            json_decref(*tok);
            json_decref(*cfg);
            *tok = *cfg = NULL;
            return tern_error(TERN_E_FORMAT, "%s: tokenizer.chat_template is not valid UTF-8 (or out of memory)", path);
        }
    int oom = !piece || !plen || !*tok || !*cfg;
    free(piece);
    free(plen);
    if (oom) {
        json_decref(*tok);
        json_decref(*cfg);
        return tern_error(TERN_E_NOMEM, "%s: out of memory building the tokenizer", path);
    }
    return TERN_OK;
}

tern_status tern_gguf_text_json(const tern_gguf *g, char **tokenizer, char **tokenizer_config)
{
    *tokenizer = *tokenizer_config = NULL;
    json_t *tok = NULL, *cfg = NULL;
    tern_status st = build(g, &tok, &cfg);
    if (st) return st;
    *tokenizer = json_dumps(tok, JSON_COMPACT | JSON_ENSURE_ASCII);
    *tokenizer_config = json_dumps(cfg, JSON_COMPACT);
    json_decref(tok);
    json_decref(cfg);
    if (!*tokenizer || !*tokenizer_config) {
        free(*tokenizer);
        free(*tokenizer_config);
        *tokenizer = *tokenizer_config = NULL;
        return tern_error(TERN_E_NOMEM, "%s: out of memory writing the tokenizer", tern_gguf_path(g));
    }
    return TERN_OK;
}

tern_status tern_gguf_write_text_files(const tern_gguf *g, char *dir, size_t cap)
{
    json_t *tok = NULL, *cfg = NULL;
    tern_status st = build(g, &tok, &cfg);
    if (st) return st;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/tern-gguf-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        json_decref(tok);
        json_decref(cfg);
        return tern_error(TERN_E_IO, "%s: cannot create a directory for its tokenizer files", tern_gguf_path(g));
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    int bad = json_dump_file(tok, p, JSON_COMPACT | JSON_ENSURE_ASCII) != 0;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    bad |= json_dump_file(cfg, p, JSON_INDENT(1)) != 0;
    json_decref(tok);
    json_decref(cfg);
    if (bad) {
        tern_gguf_remove_text_files(dir);
        return tern_error(TERN_E_IO, "%s: cannot write its tokenizer files into %s", tern_gguf_path(g), dir);
    }
    return TERN_OK;
}

void tern_gguf_remove_text_files(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    unlink(p);
    rmdir(dir);
}

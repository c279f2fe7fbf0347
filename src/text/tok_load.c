/* Loading tokenizer.json (+ tokenizer_config.json) and the small accessors.
 *
 * model.vocab and model.merges go through the fast reader of
 * tok_json_fast.c; the rest of the document, with those two values replaced
 * by {} and [], is parsed by jansson. */
#include "text/tok_internal.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Maps the file read-only (*out released with munmap(*out, *len)). */
static tern_status map_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tern_error(TERN_E_IO, "cannot open %s", path);
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) { close(fd); return tern_error(TERN_E_IO, "cannot read %s", path); }
    if (sb.st_size == 0) { close(fd); return tern_error(TERN_E_FORMAT, "%s is empty", path); }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return tern_error(TERN_E_IO, "cannot map %s", path);
    *out = p;
    *len = (size_t)sb.st_size;
    return TERN_OK;
}

/* Copy of s with [b1,e1) -> r1 and [b2,e2) -> r2 (ranges sorted, disjoint). */
static char *blank(const char *s, size_t len, size_t b1, size_t e1, const char *r1, size_t b2, size_t e2,
                   const char *r2, size_t *olen)
{
    char *o = malloc(len + 8);
    if (!o) return NULL;
    size_t n = 0;
    memcpy(o, s, b1); n = b1;
    memcpy(o + n, r1, 2); n += 2;
    memcpy(o + n, s + e1, b2 - e1); n += b2 - e1;
    memcpy(o + n, r2, 2); n += 2;
    memcpy(o + n, s + e2, len - e2); n += len - e2;
    *olen = n;
    return o;
}

static tern_status load_added(tern_tokenizer *t, const json_t *arr)
{
    if (!arr || json_is_null(arr)) return TERN_OK;
    if (!json_is_array(arr)) return tern_error(TERN_E_FORMAT, "tokenizer.json: added_tokens is not an array");
    size_t n = json_array_size(arr);
    if (!(t->added = calloc(n + 1, sizeof *t->added))) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(arr, i), *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > 0x7FFFFFFF ||
            !json_is_string(c))
            return tern_error(TERN_E_FORMAT, "tokenizer.json: added_tokens[%zu] needs an 'id' and a 'content'", i);
        tok_added *x = &t->added[t->n_added++];
        x->id = (int32_t)json_integer_value(id);
        x->len = json_string_length(c);
        if (!(x->content = tok_arena_dup(&t->arena, json_string_value(c), x->len)))
            return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        x->special = json_is_true(json_object_get(a, "special"));
        x->lstrip = json_is_true(json_object_get(a, "lstrip"));
        x->rstrip = json_is_true(json_object_get(a, "rstrip"));
        x->single_word = json_is_true(json_object_get(a, "single_word"));
        json_t *nz = json_object_get(a, "normalized");
        x->normalized = json_is_boolean(nz) ? json_is_true(nz) : !x->special;
    }
    return TERN_OK;
}

/* Normalized added tokens are matched (and decoded) in their normalized form. */
static tern_status normalize_added(tern_tokenizer *t)
{
    tok_buf b = {0};
    tern_status st = TERN_OK;
    for (int i = 0; i < t->n_added && !st; i++) {
        tok_added *a = &t->added[i];
        a->ncontent = a->content;
        a->nlen = a->len;
        if (!a->normalized || !t->norm) continue;
        if ((st = tok_norm_apply(t->norm, a->content, a->len, &b))) break;
        if (!(a->ncontent = tok_arena_dup(&t->arena, b.p ? b.p : "", b.len))) st = tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        a->nlen = b.len;
    }
    free(b.p);
    return st;
}

static tern_status build_ids(tern_tokenizer *t)
{
    int32_t max = -1;
    for (int i = 0; i < t->n_vent; i++)
        if (t->vent[i].id > max) max = t->vent[i].id;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id > max) max = t->added[i].id;
    if (max >= 0x1000000) return tern_error(TERN_E_RANGE, "tokenizer.json: token id %d is too large", max);
    t->n_ids = max + 1;
    size_t n = (size_t)t->n_ids + 1;
    t->pieces = calloc(n, sizeof *t->pieces);
    t->piece_len = calloc(n, sizeof *t->piece_len);
    t->piece_special = calloc(n, 1);
    if (!t->pieces || !t->piece_len || !t->piece_special) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    for (int i = 0; i < t->n_vent; i++) {
        t->pieces[t->vent[i].id] = t->vent[i].s;
        t->piece_len[t->vent[i].id] = t->vent[i].len;
    }
    free(t->vent);
    t->vent = NULL;
    t->n_vent = t->cap_vent = 0;
    for (int i = 0; i < t->n_added; i++) {
        t->pieces[t->added[i].id] = t->added[i].ncontent;
        t->piece_len[t->added[i].id] = (uint32_t)t->added[i].nlen;
        t->piece_special[t->added[i].id] = t->added[i].special;
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = tok_strmap_get(&t->vocab, name, 6);
    }
    return TERN_OK;
}

static tern_status opt_string(tern_tokenizer *t, const json_t *m, const char *k, char **out, size_t *len)
{
    json_t *v = json_object_get(m, k);
    *out = NULL; *len = 0;
    if (!v || json_is_null(v)) return TERN_OK;
    if (!json_is_string(v)) return tern_error(TERN_E_FORMAT, "tokenizer.json: model.%s is not a string", k);
    *len = json_string_length(v);
    if (!*len) return TERN_OK;  /* "" means none, as in the reference */
    if (!(*out = tok_arena_dup(&t->arena, json_string_value(v), *len))) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    return TERN_OK;
}

static tern_status load_model(tern_tokenizer *t, const json_t *m, const char *text, const tok_spans *sp)
{
    const char *type = json_string_value(json_object_get(m, "type"));
    if (!json_is_object(m)) return tern_error(TERN_E_FORMAT, "tokenizer.json: 'model' is missing");
    if (type && strcmp(type, "BPE")) return tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: model type '%s' is not supported", type);
    if (!type && !json_object_get(m, "merges"))
        return tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: model without a type is only supported as BPE");
    json_t *dr = json_object_get(m, "dropout");
    if (json_is_number(dr) && json_number_value(dr) > 0)
        return tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: BPE dropout is not supported");
    if (!sp->found_vocab || !sp->found_merges)
        return tern_error(TERN_E_FORMAT, "tokenizer.json: model.vocab or model.merges is missing");
    tern_status st;
    if ((st = opt_string(t, m, "continuing_subword_prefix", &t->cont_prefix, &t->cont_prefix_len)) ||
        (st = opt_string(t, m, "end_of_word_suffix", &t->eow_suffix, &t->eow_suffix_len)))
        return st;
    t->byte_fallback = json_is_true(json_object_get(m, "byte_fallback"));
    t->fuse_unk = json_is_true(json_object_get(m, "fuse_unk"));
    t->ignore_merges = json_is_true(json_object_get(m, "ignore_merges"));
    if ((st = tok_fast_vocab(t, text, sp->vocab_b, sp->vocab_e))) return st;
    if ((st = tok_fast_merges(t, text, sp->merges_b, sp->merges_e))) return st;
    const char *unk = json_string_value(json_object_get(m, "unk_token"));
    t->unk_id = unk ? tok_strmap_get(&t->vocab, unk, strlen(unk)) : -1;
    return TERN_OK;
}

static const char *token_text(const json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    return json_string_value(json_object_get(v, "content"));
}

static tern_status load_config(tern_tokenizer *t, const char *path)
{
    json_error_t e;
    json_t *c = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e);
    if (!c) return tern_error(TERN_E_FORMAT, "%s:%d: %s", path, e.line, e.text);
    tern_status st = TERN_OK;
    const char *b = token_text(json_object_get(c, "bos_token")), *s = token_text(json_object_get(c, "eos_token"));
    if (b && !(t->bos = tok_arena_dup(&t->arena, b, strlen(b)))) st = TERN_E_NOMEM;
    if (s && !(t->eos = tok_arena_dup(&t->arena, s, strlen(s)))) st = TERN_E_NOMEM;
    json_t *ab = json_object_get(c, "add_bos_token");
    t->add_bos = json_is_boolean(ab) ? json_is_true(ab) : -1;
    json_decref(c);
    if (st) return tern_error(st, "tokenizer: out of memory");
    t->bos_id = t->bos ? tern_tokenizer_piece_to_id(t, t->bos) : -1;
    t->eos_id = t->eos ? tern_tokenizer_piece_to_id(t, t->eos) : -1;
    return TERN_OK;
}

/* Builds t from tokenizer.json text[0, len) (borrowed). */
static tern_status parse_json(tern_tokenizer *t, const char *text, size_t len)
{
    char *rest = NULL;
    size_t rlen = 0;
    tok_spans sp;
    json_t *root = NULL;
    tern_status st;
    if ((st = tok_fast_find(text, len, &sp))) goto done;
    if (sp.found_vocab && sp.found_merges) {
        int vfirst = sp.vocab_b < sp.merges_b;
        rest = vfirst ? blank(text, len, sp.vocab_b, sp.vocab_e, "{}", sp.merges_b, sp.merges_e, "[]", &rlen)
                      : blank(text, len, sp.merges_b, sp.merges_e, "[]", sp.vocab_b, sp.vocab_e, "{}", &rlen);
        if (!rest) { st = tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); goto done; }
    }
    json_error_t e;
    root = json_loadb(rest ? rest : text, rest ? rlen : len, 0, &e);
    if (!root) { st = tern_error(TERN_E_FORMAT, "tokenizer.json: line %d: %s", e.line, e.text); goto done; }
    if (!json_is_object(root)) { st = tern_error(TERN_E_FORMAT, "tokenizer.json: not an object"); goto done; }
    json_t *tr = json_object_get(root, "truncation"), *pd = json_object_get(root, "padding");
    if ((tr && !json_is_null(tr)) || (pd && !json_is_null(pd))) {
        st = tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: truncation and padding are not supported");
        goto done;
    }
    if ((st = load_model(t, json_object_get(root, "model"), text, &sp))) goto done;
    if ((st = load_added(t, json_object_get(root, "added_tokens")))) goto done;
    if ((st = tok_build_normalizer(json_object_get(root, "normalizer"), &t->norm))) goto done;
    if ((st = normalize_added(t))) goto done;
    if ((st = build_ids(t))) goto done;
    if ((st = tok_trie_build(&t->trie_raw, t->added, t->n_added, 0))) goto done;
    if ((st = tok_trie_build(&t->trie_norm, t->added, t->n_added, 1))) goto done;
    if ((st = tok_build_pretok(json_object_get(root, "pre_tokenizer"), &t->pretok))) goto done;
    if ((st = tok_build_decoder(json_object_get(root, "decoder"), &t->dec))) goto done;
    st = tok_build_post(t, json_object_get(root, "post_processor"));
done:
    json_decref(root);
    free(rest);
    return st;
}

static tern_status load_json(tern_tokenizer *t, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    tern_status st = map_file(path, &text, &len);
    if (st) return st;
    st = parse_json(t, text, len);
    munmap(text, len);
    return st;
}

static tern_tokenizer *tok_new(void)
{
    tern_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->bos_id = t->eos_id = t->unk_id = -1;
    t->add_bos = -1;
    int len;
    tok_bytelevel_char(0, &len);  /* builds the shared byte map before any thread uses it */
    return t;
}

tern_status tern_tokenizer_load_json(const char *json, size_t len, tern_tokenizer **out)
{
    if (!json || !out) return tern_error(TERN_E_INVALID, "tokenizer_load_json: bad argument");
    *out = NULL;
    tern_tokenizer *t = tok_new();
    if (!t) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    tern_status st = parse_json(t, json, len);
    if (st) {
        tern_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TERN_OK;
}

tern_status tern_tokenizer_load_files(const char *json_path, const char *config_path, tern_tokenizer **out)
{
    if (!json_path || !out) return tern_error(TERN_E_INVALID, "tokenizer_load: bad argument");
    *out = NULL;
    tern_tokenizer *t = tok_new();
    if (!t) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    tern_status st = load_json(t, json_path);
    if (!st && config_path) st = load_config(t, config_path);
    if (st) {
        tern_tokenizer_free(t);
        return tern_error_wrap(st, "loading %s", json_path);
    }
    *out = t;
    return TERN_OK;
}

tern_status tern_tokenizer_load(const char *dir, tern_tokenizer **out)
{
    if (!dir || !out) return tern_error(TERN_E_INVALID, "tokenizer_load: bad argument");
    size_t n = strlen(dir);
    char *jp = malloc(n + 32), *cp = malloc(n + 32);
    if (!jp || !cp) { free(jp); free(cp); return tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); }
    snprintf(jp, n + 32, "%s/tokenizer.json", dir);
    snprintf(cp, n + 32, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(cp, "rb");
    if (f) fclose(f);
    tern_status st = tern_tokenizer_load_files(jp, f ? cp : NULL, out);
    free(jp); free(cp);
    return st;
}

void tern_tokenizer_free(tern_tokenizer *t)
{
    if (!t) return;
    tok_strmap_free(&t->vocab);
    free(t->vent);
    tok_mergemap_free(&t->merges);
    free(t->pieces); free(t->piece_len); free(t->piece_special);
    free(t->added);
    tok_trie_free(t->trie_raw); tok_trie_free(t->trie_norm);
    if (t->norm) { tok_norm_free(t->norm); free(t->norm); }
    if (t->pretok) { tok_pretok_free(t->pretok); free(t->pretok); }
    if (t->dec) { tok_dec_free(t->dec); free(t->dec); }
    free(t->post.pre); free(t->post.post);
    tok_arena_free(&t->arena);
    free(t);
}

int tern_tokenizer_vocab_size(const tern_tokenizer *t) { return t ? t->n_ids : 0; }

const char *tern_tokenizer_id_to_piece(const tern_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids ? t->pieces[id] : NULL;
}

int32_t tern_tokenizer_piece_to_id(const tern_tokenizer *t, const char *piece)
{
    if (!t || !piece) return -1;
    size_t n = strlen(piece);
    for (int i = t->n_added - 1; i >= 0; i--)
        if (t->added[i].len == n && !memcmp(t->added[i].content, piece, n)) return t->added[i].id;
    return tok_strmap_get(&t->vocab, piece, n);
}

int tern_tokenizer_is_special(const tern_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids && t->piece_special[id];
}

int32_t tern_tokenizer_bos_id(const tern_tokenizer *t) { return t ? t->bos_id : -1; }
int32_t tern_tokenizer_eos_id(const tern_tokenizer *t) { return t ? t->eos_id : -1; }
const char *tern_tokenizer_bos_token(const tern_tokenizer *t) { return t ? t->bos : NULL; }
const char *tern_tokenizer_eos_token(const tern_tokenizer *t) { return t ? t->eos : NULL; }
int tern_tokenizer_add_bos_token(const tern_tokenizer *t) { return t ? t->add_bos : -1; }

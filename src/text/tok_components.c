/* Builds the normalizer, pre-tokenizer, decoder and post-processor of a
 * tokenizer.json from its jansson tree. Every component type tern does not
 * implement is refused by name. */
#include "text/tok_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *type_of(const json_t *j)
{
    const char *s = json_string_value(json_object_get(j, "type"));
    return s ? s : "";
}

static tern_status unsupported(const char *what, const char *type)
{
    return tern_error(TERN_E_UNSUPPORTED, "tokenizer.json: %s type '%s' is not supported", what, type);
}

static tern_status missing(const char *what, const char *type, const char *field)
{
    return tern_error(TERN_E_FORMAT, "tokenizer.json: %s '%s' needs a valid '%s'", what, type, field);
}

static int get_bool(const json_t *j, const char *k, int dflt)
{
    json_t *v = json_object_get(j, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static char *dup_str(const json_t *v, size_t *len)
{
    if (!json_is_string(v)) return NULL;
    size_t n = json_string_length(v);
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, json_string_value(v), n);
    p[n] = 0;
    *len = n;
    return p;
}

/* pattern: {"String": s} or {"Regex": r}. Sets *lit or *re. */
static tern_status read_pattern(const json_t *pat, const char *what, const char *type, char **lit,
                                size_t *litlen, pcre2_code **re)
{
    json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    if (json_is_string(s)) {
        if (!(*lit = dup_str(s, litlen))) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        return TERN_OK;
    }
    if (json_is_string(r)) {
        *re = tok_regex_compile(json_string_value(r), json_string_length(r));
        return *re ? TERN_OK : TERN_E_UNSUPPORTED;
    }
    return missing(what, type, "pattern");
}

static tern_status list(const json_t *arr, const char *what, const char *type, size_t elem, void **kids,
                        int *n)
{
    if (!json_is_array(arr)) return missing(what, type, "list");
    *n = 0;
    *kids = calloc(json_array_size(arr) + 1, elem);
    return *kids ? TERN_OK : tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
}

static tern_status norm_build(const json_t *j, tok_norm *nm)
{
    const char *t = type_of(j);
    if (!strcmp(t, "NFC")) nm->type = NORM_NFC;
    else if (!strcmp(t, "NFD")) nm->type = NORM_NFD;
    else if (!strcmp(t, "NFKC")) nm->type = NORM_NFKC;
    else if (!strcmp(t, "NFKD")) nm->type = NORM_NFKD;
    else if (!strcmp(t, "Lowercase")) nm->type = NORM_LOWER;
    else if (!strcmp(t, "Strip")) {
        nm->type = NORM_STRIP;
        nm->left = get_bool(j, "strip_left", 1);
        nm->right = get_bool(j, "strip_right", 1);
    } else if (!strcmp(t, "Prepend")) {
        nm->type = NORM_PREPEND;
        if (!(nm->a = dup_str(json_object_get(j, "prepend"), &nm->alen))) return missing("normalizer", t, "prepend");
    } else if (!strcmp(t, "Replace")) {
        nm->type = NORM_REPLACE;
        if (!(nm->b = dup_str(json_object_get(j, "content"), &nm->blen))) return missing("normalizer", t, "content");
        return read_pattern(json_object_get(j, "pattern"), "normalizer", t, &nm->a, &nm->alen, &nm->re);
    } else if (!strcmp(t, "Sequence")) {
        nm->type = NORM_SEQ;
        json_t *arr = json_object_get(j, "normalizers");
        tern_status st = list(arr, "normalizer", t, sizeof(tok_norm), (void **)&nm->kids, &nm->nkids);
        for (size_t i = 0; !st && i < json_array_size(arr); i++, nm->nkids++)
            st = norm_build(json_array_get(arr, i), &nm->kids[i]);
        return st;
    } else return unsupported("normalizer", t);
    return TERN_OK;
}

tern_status tok_build_normalizer(const json_t *j, tok_norm **out)
{
    *out = NULL;
    if (!j || json_is_null(j)) return TERN_OK;
    tok_norm *nm = calloc(1, sizeof *nm);
    if (!nm) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    tern_status st = norm_build(j, nm);
    if (st) { tok_norm_free(nm); free(nm); return st; }
    *out = nm;
    return TERN_OK;
}

static int behavior_of(const json_t *j, int dflt)
{
    const char *b = json_string_value(json_object_get(j, "behavior"));
    if (!b) return dflt;
    if (!strcmp(b, "Removed")) return SPLIT_REMOVED;
    if (!strcmp(b, "Isolated")) return SPLIT_ISOLATED;
    if (!strcmp(b, "MergedWithPrevious")) return SPLIT_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return SPLIT_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return SPLIT_CONTIGUOUS;
    return -1;
}

static int prepend_of(const json_t *j)
{
    const char *p = json_string_value(json_object_get(j, "prepend_scheme"));
    if (p) return !strcmp(p, "always") ? PREPEND_ALWAYS : !strcmp(p, "first") ? PREPEND_FIRST :
                  !strcmp(p, "never") ? PREPEND_NEVER : -1;
    return get_bool(j, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
}

static tern_status replacement_of(const json_t *j, const char *what, char *buf, size_t cap, size_t *len)
{
    json_t *r = json_object_get(j, "replacement");
    const char *s = r ? json_string_value(r) : "\xE2\x96\x81";
    if (!s) return missing(what, "Metaspace", "replacement");
    size_t n = r ? json_string_length(r) : 3;
    uint32_t cp;
    if (n == 0 || n >= cap || (size_t)tok_utf8_next((const unsigned char *)s, &cp) != n)
        return missing(what, "Metaspace", "replacement (one character)");
    memcpy(buf, s, n);
    *len = n;
    return TERN_OK;
}

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define WORD_RE "\\w+|[^\\w\\s]+"

static tern_status pretok_build(const json_t *j, tok_pretok *pt)
{
    const char *t = type_of(j);
    if (!strcmp(t, "Split")) {
        pt->type = PT_SPLIT;
        if ((pt->behavior = behavior_of(j, -1)) < 0) return missing("pre_tokenizer", t, "behavior");
        pt->invert = get_bool(j, "invert", 0);
        return read_pattern(json_object_get(j, "pattern"), "pre_tokenizer", t, &pt->lit, &pt->litlen, &pt->re);
    } else if (!strcmp(t, "ByteLevel")) {
        pt->type = PT_BYTELEVEL;
        pt->add_prefix_space = get_bool(j, "add_prefix_space", 1);
        pt->use_regex = get_bool(j, "use_regex", 1);
        if (pt->use_regex && !(pt->re = tok_regex_compile(GPT2_RE, strlen(GPT2_RE)))) return TERN_E_UNSUPPORTED;
    } else if (!strcmp(t, "Metaspace")) {
        pt->type = PT_METASPACE;
        size_t n;
        tern_status st = replacement_of(j, "pre_tokenizer", pt->repl, sizeof pt->repl, &n);
        if (st) return st;
        pt->repl_len = (int)n;
        if ((pt->prepend_scheme = prepend_of(j)) < 0) return missing("pre_tokenizer", t, "prepend_scheme");
        pt->split = get_bool(j, "split", 1);
    } else if (!strcmp(t, "Digits")) {
        pt->type = PT_DIGITS;
        pt->individual_digits = get_bool(j, "individual_digits", 0);
    } else if (!strcmp(t, "Punctuation")) {
        pt->type = PT_PUNCT;
        if ((pt->behavior = behavior_of(j, SPLIT_ISOLATED)) < 0) return missing("pre_tokenizer", t, "behavior");
    } else if (!strcmp(t, "Whitespace")) {
        pt->type = PT_WHITESPACE;
        if (!(pt->re = tok_regex_compile(WORD_RE, strlen(WORD_RE)))) return TERN_E_UNSUPPORTED;
    } else if (!strcmp(t, "WhitespaceSplit")) {
        pt->type = PT_WSSPLIT;
    } else if (!strcmp(t, "Sequence")) {
        pt->type = PT_SEQ;
        json_t *arr = json_object_get(j, "pretokenizers");
        tern_status st = list(arr, "pre_tokenizer", t, sizeof(tok_pretok), (void **)&pt->kids, &pt->nkids);
        for (size_t i = 0; !st && i < json_array_size(arr); i++, pt->nkids++)
            st = pretok_build(json_array_get(arr, i), &pt->kids[i]);
        return st;
    } else return unsupported("pre_tokenizer", t);
    return TERN_OK;
}

tern_status tok_build_pretok(const json_t *j, tok_pretok **out)
{
    *out = NULL;
    if (!j || json_is_null(j)) return TERN_OK;
    tok_pretok *pt = calloc(1, sizeof *pt);
    if (!pt) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    tern_status st = pretok_build(j, pt);
    if (st) { tok_pretok_free(pt); free(pt); return st; }
    *out = pt;
    return TERN_OK;
}

static tern_status dec_build(const json_t *j, tok_dec *d)
{
    const char *t = type_of(j);
    if (!strcmp(t, "ByteLevel")) d->type = DEC_BYTELEVEL;
    else if (!strcmp(t, "ByteFallback")) d->type = DEC_BYTEFALLBACK;
    else if (!strcmp(t, "Fuse")) d->type = DEC_FUSE;
    else if (!strcmp(t, "Metaspace")) {
        d->type = DEC_METASPACE;
        char buf[8];
        size_t n;
        tern_status st = replacement_of(j, "decoder", buf, sizeof buf, &n);
        if (st) return st;
        if (!(d->a = malloc(n + 1))) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
        memcpy(d->a, buf, n);
        d->a[n] = 0;
        d->alen = n;
        if ((d->prepend_scheme = prepend_of(j)) < 0) return missing("decoder", t, "prepend_scheme");
    } else if (!strcmp(t, "Strip")) {
        d->type = DEC_STRIP;
        json_t *c = json_object_get(j, "content");
        const char *s = json_string_value(c);
        if (!s || !json_string_length(c)) return missing("decoder", t, "content");
        if ((size_t)tok_utf8_next((const unsigned char *)s, &d->strip_cp) != json_string_length(c))
            return missing("decoder", t, "content (one character)");
        d->start = (int)json_integer_value(json_object_get(j, "start"));
        d->stop = (int)json_integer_value(json_object_get(j, "stop"));
    } else if (!strcmp(t, "Replace")) {
        d->type = DEC_REPLACE;
        if (!(d->b = dup_str(json_object_get(j, "content"), &d->blen))) return missing("decoder", t, "content");
        return read_pattern(json_object_get(j, "pattern"), "decoder", t, &d->a, &d->alen, &d->re);
    } else if (!strcmp(t, "BPEDecoder")) {
        d->type = DEC_BPE;
        json_t *s = json_object_get(j, "suffix");
        if (!(d->a = s ? dup_str(s, &d->alen) : strdup("</w>"))) return missing("decoder", t, "suffix");
        if (!s) d->alen = 4;
    } else if (!strcmp(t, "Sequence")) {
        d->type = DEC_SEQ;
        json_t *arr = json_object_get(j, "decoders");
        tern_status st = list(arr, "decoder", t, sizeof(tok_dec), (void **)&d->kids, &d->nkids);
        for (size_t i = 0; !st && i < json_array_size(arr); i++, d->nkids++)
            st = dec_build(json_array_get(arr, i), &d->kids[i]);
        return st;
    } else return unsupported("decoder", t);
    return TERN_OK;
}

tern_status tok_build_decoder(const json_t *j, tok_dec **out)
{
    *out = NULL;
    if (!j || json_is_null(j)) return TERN_OK;
    tok_dec *d = calloc(1, sizeof *d);
    if (!d) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    tern_status st = dec_build(j, d);
    if (st) { tok_dec_free(d); free(d); return st; }
    *out = d;
    return TERN_OK;
}

static tern_status ids_append(int32_t **arr, int *n, int32_t id)
{
    int32_t *p = realloc(*arr, (size_t)(*n + 1) * sizeof *p);
    if (!p) return tern_error(TERN_E_NOMEM, "tokenizer: out of memory");
    p[(*n)++] = id;
    *arr = p;
    return TERN_OK;
}

/* [token, id] pair of Bert/Roberta processors. */
static tern_status pair_id(const json_t *j, const char *k, int32_t *id)
{
    json_t *v = json_array_get(json_object_get(j, k), 1);
    if (!json_is_integer(v)) return missing("post_processor", "Bert/Roberta", k);
    *id = (int32_t)json_integer_value(v);
    return TERN_OK;
}

static tern_status post_build(tok_post *p, const json_t *j)
{
    const char *t = type_of(j);
    tern_status st = TERN_OK;
    if (!strcmp(t, "ByteLevel")) return TERN_OK;  /* only trims offsets, which tern does not expose */
    if (!strcmp(t, "Sequence")) {
        json_t *arr = json_object_get(j, "processors");
        if (!json_is_array(arr)) return missing("post_processor", t, "processors");
        for (size_t i = 0; !st && i < json_array_size(arr); i++) st = post_build(p, json_array_get(arr, i));
        return st;
    }
    if (!strcmp(t, "BertProcessing") || !strcmp(t, "RobertaProcessing")) {
        int32_t cls, sep;
        if ((st = pair_id(j, "cls", &cls)) || (st = pair_id(j, "sep", &sep))) return st;
        int32_t *pre = NULL;
        int npre = 0;
        if ((st = ids_append(&pre, &npre, cls))) return st;
        for (int i = 0; i < p->npre && !st; i++) st = ids_append(&pre, &npre, p->pre[i]);
        if (!st) st = ids_append(&p->post, &p->npost, sep);
        free(p->pre);
        p->pre = pre; p->npre = npre;
        return st;
    }
    if (strcmp(t, "TemplateProcessing")) return unsupported("post_processor", t);
    json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
    if (!json_is_array(single)) return missing("post_processor", t, "single");
    int32_t *pre = NULL, *post = NULL;
    int npre = 0, npost = 0, seen_seq = 0;
    for (size_t i = 0; !st && i < json_array_size(single); i++) {
        json_t *it = json_array_get(single, i), *sp = json_object_get(it, "SpecialToken");
        if (json_object_get(it, "Sequence")) {
            if (seen_seq++) st = missing("post_processor", t, "single (one sequence)");
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || !json_is_array(ids)) { st = missing("post_processor", t, "special_tokens"); break; }
        for (size_t k = 0; !st && k < json_array_size(ids); k++) {
            json_t *v = json_array_get(ids, k);
            if (!json_is_integer(v)) { st = missing("post_processor", t, "special_tokens ids"); break; }
            st = seen_seq ? ids_append(&post, &npost, (int32_t)json_integer_value(v))
                          : ids_append(&pre, &npre, (int32_t)json_integer_value(v));
        }
    }
    /* A later processor wraps the output of the earlier ones. */
    for (int i = 0; i < p->npre && !st; i++) st = ids_append(&pre, &npre, p->pre[i]);
    for (int i = 0; i < npost && !st; i++) st = ids_append(&p->post, &p->npost, post[i]);
    free(post);
    if (st) { free(pre); return st; }
    free(p->pre);
    p->pre = pre; p->npre = npre;
    return TERN_OK;
}

tern_status tok_build_post(tern_tokenizer *t, const json_t *j)
{
    if (!j || json_is_null(j)) return TERN_OK;
    t->has_post = 1;
    return post_build(&t->post, j);
}

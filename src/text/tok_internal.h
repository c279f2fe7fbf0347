/* Internal layout of tern_tokenizer, shared by the src/text/tok_*.c files only.
 *
 * Pipeline of an encode (same order as the reference implementation):
 *   text -> split on non-normalized added tokens -> per piece: normalizer ->
 *   split on normalized added tokens -> pre-tokenizer -> BPE per word ->
 *   post-processor (only when add_special). */
#ifndef TERN_TOK_INTERNAL_H
#define TERN_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/status.h"
#include "tern/tokenizer.h"

/* ---- growable list of strings: pieces live in one buffer ---- */
typedef struct {
    char *buf;            /* owned */
    size_t len, cap;
    uint32_t *off, *ln;   /* owned, n entries each */
    uint8_t *first;       /* owned: piece starts at offset 0 of the original text */
    int n, ncap;
} tok_strvec;

tern_status tok_strvec_push(tok_strvec *v, const char *s, size_t len, int first);
void tok_strvec_clear(tok_strvec *v);
void tok_strvec_free(tok_strvec *v);

/* A normalizer or pre-tokenizer that grows a text past this many bytes is
 * refused at that point: real pipelines grow text by a small factor (NFKD
 * about 11x at worst, ByteLevel 2x, Metaspace under 4x), while a malformed
 * tokenizer.json that chains ByteLevel or Replace steps doubles it at each
 * and would otherwise run for minutes or exhaust memory. */
static inline size_t tok_growth_limit(size_t len)
{
    return len * 64 + 4096;
}

/* growable byte buffer */
typedef struct { char *p; size_t len, cap; } tok_buf;
tern_status tok_buf_put(tok_buf *b, const void *s, size_t len);
tern_status tok_buf_putc(tok_buf *b, char c);

/* ---- string -> id hash map (keys borrowed from an arena) ---- */
/* One 32-byte slot: keys of up to TOK_INLINE bytes are stored in the slot
 * itself so that a lookup touches one cache line; longer keys are borrowed. */
#define TOK_INLINE 20
typedef struct {
    uint32_t hash;        /* high half of the key's hash | 1; 0 = empty slot */
    int32_t val;
    uint32_t klen;
    char k[TOK_INLINE];   /* the key, or (longer keys) a borrowed pointer to it */
} tok_strslot;
typedef struct {
    tok_strslot *slot;    /* owned, cap entries */
    uint32_t cap, n;      /* cap is a power of two */
} tok_strmap;

tern_status tok_strmap_init(tok_strmap *m, uint32_t expect);
tern_status tok_strmap_put(tok_strmap *m, const char *k, uint32_t klen, int32_t v); /* overwrites */
int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t klen);          /* -1 if none */
/* Split form of get for batched loads: hash, prefetch the slot, then look up. */
uint64_t tok_hash(const char *k, size_t klen);
void tok_strmap_prefetch(const tok_strmap *m, uint64_t h);
int32_t tok_strmap_get_h(const tok_strmap *m, const char *k, size_t klen, uint64_t h);
tern_status tok_strmap_put_h(tok_strmap *m, const char *k, uint32_t klen, int32_t v, uint64_t h);
void tok_strmap_free(tok_strmap *m);

/* ---- (left id, right id) -> (rank, merged id) ---- */
typedef struct {
    uint64_t key;         /* (a << 32 | b) + 1; 0 = empty */
    uint32_t rank;
    int32_t merged;
} tok_mergeslot;
typedef struct {
    tok_mergeslot *slot;  /* owned, cap entries */
    uint32_t cap, n;
} tok_mergemap;

tern_status tok_mergemap_init(tok_mergemap *m, uint32_t expect);
tern_status tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
int tok_mergemap_get(const tok_mergemap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged);
void tok_mergemap_prefetch(const tok_mergemap *m, int32_t a, int32_t b);
void tok_mergemap_free(tok_mergemap *m);

/* ---- arena of strings, freed at once ---- */
typedef struct tok_arena_block tok_arena_block;
typedef struct { tok_arena_block *head; } tok_arena;
char *tok_arena_dup(tok_arena *a, const char *s, size_t len); /* NUL-terminated copy; NULL on OOM */
void tok_arena_free(tok_arena *a);

/* ---- UTF-8 helpers (tok_utf8.c) ---- */
int tok_utf8_valid(const char *s, size_t len);
/* Decodes one code point of valid UTF-8 at s; returns its byte length. */
int tok_utf8_next(const unsigned char *s, uint32_t *cp);
int tok_utf8_put(char *out, uint32_t cp); /* returns bytes written (<= 4) */
/* Appends s with invalid sequences replaced by U+FFFD (maximal subparts). */
tern_status tok_utf8_lossy(tok_buf *out, const char *s, size_t len);
int tok_is_whitespace(uint32_t cp);   /* Unicode White_Space */
int tok_is_alnum(uint32_t cp);        /* alphabetic or numeric */
int tok_is_numeric(uint32_t cp);      /* general category N* */
int tok_is_punct(uint32_t cp);        /* ASCII punctuation or category P* */
/* Code points newer than PCRE2's Unicode tables that the reference puts in
 * property class prop ("L", "N", "Nd", "M", "P", "Alphabetic", ...):
 * a class body for a pattern (borrowed, "" if none; NULL for an unknown
 * property) and a membership test (tok_unicode_new.c, generated). */
const char *tok_unicode_new_class(const char *prop, size_t len);
int tok_unicode_new_in(const char *prop, uint32_t cp);
/* GPT-2 byte <-> unicode mapping. */
const char *tok_bytelevel_char(unsigned char b, int *len);
int tok_bytelevel_byte(uint32_t cp); /* -1 if cp is not a mapped char */

/* ---- normalizers (tok_normalize.c) ---- */
enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWER, NORM_PREPEND, NORM_REPLACE,
       NORM_STRIP, NORM_SEQ };
typedef struct tok_norm {
    int type;
    char *a; size_t alen;      /* Prepend text, Replace pattern string */
    char *b; size_t blen;      /* Replace content */
    pcre2_code *re;            /* Replace regex pattern, owned */
    int left, right;           /* Strip */
    struct tok_norm *kids; int nkids;
} tok_norm;
tern_status tok_norm_apply(const tok_norm *nm, const char *s, size_t len, tok_buf *out);
void tok_norm_free(tok_norm *nm);   /* frees what nm holds, not nm itself */

/* ---- pre-tokenizers (tok_pretok.c) ---- */
enum { PT_SPLIT, PT_BYTELEVEL, PT_METASPACE, PT_DIGITS, PT_PUNCT, PT_WHITESPACE, PT_WSSPLIT,
       PT_SEQ };
enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct tok_pretok {
    int type;
    int behavior, invert;
    pcre2_code *re;            /* owned: Split regex, ByteLevel/Whitespace regex */
    char *lit; size_t litlen;  /* Split with a String pattern */
    int add_prefix_space, use_regex;
    char repl[8]; int repl_len; int prepend_scheme, split;   /* Metaspace */
    int individual_digits;
    struct tok_pretok *kids; int nkids;
} tok_pretok;
/* Splits every piece of in into out (cleared first). */
tern_status tok_pretok_apply(const tok_pretok *pt, const tok_strvec *in, tok_strvec *out);
void tok_pretok_free(tok_pretok *pt); /* frees what pt holds, not pt itself */
/* Compiles a regex the way the reference engine reads it (\s as Unicode
 * White_Space). Returns NULL with the error recorded. */
pcre2_code *tok_regex_compile(const char *pattern, size_t len);
/* Iterates matches of re in s[0..len) from *pos; returns 1 with [*ms, *me) set,
 * 0 when there is none left, -1 on a matching error (recorded). */
int tok_regex_next(const pcre2_code *re, const char *s, size_t len, size_t *pos,
                   size_t *ms, size_t *me, pcre2_match_data *md);

/* ---- decoders (tok_decode.c) ---- */
enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_REPLACE,
       DEC_BPE, DEC_SEQ };
typedef struct tok_dec {
    int type;
    char *a; size_t alen;      /* Replace pattern / BPE suffix / Metaspace replacement */
    char *b; size_t blen;      /* Replace content */
    pcre2_code *re;
    uint32_t strip_cp; int start, stop;
    int prepend_scheme;
    struct tok_dec *kids; int nkids;
} tok_dec;
void tok_dec_free(tok_dec *d);       /* frees what d holds, not d itself */

/* ---- post-processor (tok_encode.c) ---- */
typedef struct { int32_t *pre; int npre; int32_t *post; int npost; } tok_post;

/* ---- added tokens (tok_added.c) ---- */
typedef struct {
    int32_t id;
    char *content; size_t len;  /* arena */
    char *ncontent; size_t nlen; /* arena: content after the normalizer (matched and
                                    decoded form of a normalized token); = content otherwise */
    uint8_t special, lstrip, rstrip, normalized, single_word;
} tok_added;
typedef struct tok_trie tok_trie;
tern_status tok_trie_build(tok_trie **out, const tok_added *toks, int n, int normalized);
void tok_trie_free(tok_trie *t);
/* Longest added token starting at s (index into the added array), -1 if none. */
int tok_trie_match(const tok_trie *t, const char *s, size_t len, size_t *mlen);
int tok_trie_maybe(const tok_trie *t, unsigned char c);

struct tern_tokenizer {
    tok_arena arena;
    /* model */
    tok_strmap vocab;           /* model vocabulary */
    struct tok_vent { const char *s; uint32_t len; int32_t id; } *vent;  /* owned, load only */
    int n_vent, cap_vent;
    tok_mergemap merges;
    int32_t unk_id;             /* -1 if none */
    int byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix; size_t cont_prefix_len;  /* continuing_subword_prefix or NULL */
    char *eow_suffix; size_t eow_suffix_len;    /* end_of_word_suffix or NULL */
    int32_t byte_ids[256];      /* <0xXX> ids for byte fallback, -1 if absent */
    /* id -> piece, added tokens first */
    const char **pieces; uint32_t *piece_len; uint8_t *piece_special;
    int n_ids;
    tok_added *added; int n_added;
    tok_trie *trie_raw, *trie_norm;
    tok_norm *norm;             /* NULL if none */
    tok_pretok *pretok;         /* NULL if none */
    tok_dec *dec;               /* NULL if none */
    tok_post post; int has_post;
    /* tokenizer_config.json */
    char *bos, *eos; int32_t bos_id, eos_id; int add_bos;
};

/* BPE of one pre-tokenized word; appends ids to out. */
typedef struct { int32_t *p; int n, cap; } tok_ids;
tern_status tok_ids_push(tok_ids *v, int32_t id);
typedef struct tok_bpe_scratch tok_bpe_scratch;
tern_status tok_bpe_word(const tern_tokenizer *t, const char *w, size_t len, tok_ids *out,
                         tok_bpe_scratch **scratch);
void tok_bpe_scratch_free(tok_bpe_scratch *s);

/* Fast vocab/merges reader (tok_json_fast.c). Locates model.vocab and
 * model.merges in the tokenizer.json text, fills t->vocab, t->merges and the
 * id table, and returns the byte ranges of both values so the rest of the
 * document can be handed to jansson with them blanked. */
typedef struct { size_t vocab_b, vocab_e, merges_b, merges_e; int found_vocab, found_merges; } tok_spans;
tern_status tok_fast_find(const char *s, size_t len, tok_spans *sp);
tern_status tok_fast_vocab(tern_tokenizer *t, const char *s, size_t b, size_t e);
tern_status tok_fast_merges(tern_tokenizer *t, const char *s, size_t b, size_t e);

/* Component builders from the jansson tree (tok_components.c). json_t is opaque here. */
struct json_t;
tern_status tok_build_normalizer(const struct json_t *j, tok_norm **out);
tern_status tok_build_pretok(const struct json_t *j, tok_pretok **out);
tern_status tok_build_decoder(const struct json_t *j, tok_dec **out);
tern_status tok_build_post(tern_tokenizer *t, const struct json_t *j);

/* Decodes ids (borrowed) and appends the text to out. */
tern_status tok_decode_ids(const tern_tokenizer *t, const int32_t *ids, int n, int skip_special,
                           tok_buf *out);

#endif

/* Tokenizer pieces: BPE merge order, byte fallback, decoders and streaming on
 * the handmade tests/goldens/tokenizer/handmade/tokenizer.json (its expected
 * ids were checked with the tokenizers package); normalizers, regex split and
 * lossy UTF-8 through the internal helpers; the real tokenizers when
 * ../shared is present. */
#include "check.h"
#include "tern/tokenizer.h"
#include "text/tok_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HANDMADE "tests/goldens/tokenizer/handmade"

static int ids_are(const tern_tokenizer *t, const char *text, int add, const int32_t *want, int nwant)
{
    int32_t *ids = NULL;
    int n = -1;
    if (tern_tokenizer_encode(t, text, strlen(text), add, &ids, &n)) return 0;
    int ok = n == nwant && !memcmp(ids, want, (size_t)n * sizeof *ids);
    if (!ok) {
        fprintf(stderr, "encode(%s): got", text);
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

static int decodes_to(const tern_tokenizer *t, const int32_t *ids, int n, int skip, const char *want)
{
    char *s = NULL;
    if (tern_tokenizer_decode(t, ids, n, skip, &s)) return 0;
    int ok = !strcmp(s, want);
    if (!ok) fprintf(stderr, "decode: got '%s' want '%s'\n", s, want);
    free(s);
    return ok;
}

/* Streams ids one by one; checks every delta is valid UTF-8 and the
 * concatenation equals the full decode. */
static int stream_matches(const tern_tokenizer *t, const int32_t *ids, int n, int skip)
{
    tern_detok *d;
    if (tern_detok_create(t, skip, &d)) return 0;
    tok_buf acc = {0};
    int ok = 1;
    for (int i = 0; i <= n && ok; i++) {
        char *delta;
        size_t len;
        if (i < n ? tern_detok_push_n(d, ids[i], &delta, &len) : tern_detok_flush_n(d, &delta, &len)) { ok = 0; break; }
        ok = tok_utf8_valid(delta, len) && !tok_buf_put(&acc, delta, len);
        free(delta);
    }
    tern_detok_free(d);
    char *full = NULL;
    size_t flen = 0;
    ok = ok && !tern_tokenizer_decode_n(t, ids, n, skip, &full, &flen) && flen == acc.len &&
         !memcmp(full, acc.p ? acc.p : "", flen);
    free(full);
    free(acc.p);
    return ok;
}

static void test_handmade(void)
{
    tern_tokenizer *t = NULL;
    CHECK_MSG(tern_tokenizer_load(HANDMADE, &t) == TERN_OK, "%s", tern_last_error());
    if (!t) return;
    /* Lowest rank first: a+b (0), then ab+c (2); b+c (1) went stale. */
    CHECK(ids_are(t, "abc", 1, (int32_t[]){1, 259, 265}, 3));
    CHECK(ids_are(t, "abc", 0, (int32_t[]){259, 265}, 2));
    /* ▁+a (3) before a+a (5); the a+a at the merged position is skipped. */
    CHECK(ids_are(t, "aaa", 0, (int32_t[]){266, 269}, 2));
    CHECK(ids_are(t, "x", 0, (int32_t[]){259, 3 + 'x'}, 2));         /* byte fallback */
    CHECK(ids_are(t, "\xC3\xBC", 0, (int32_t[]){259, 3 + 0xC3, 3 + 0xBC}, 3));
    CHECK(ids_are(t, "\xC3\xA9", 0, (int32_t[]){259, 268}, 2));
    CHECK(ids_are(t, "a b", 1, (int32_t[]){1, 266, 259, 261}, 4));
    CHECK(ids_are(t, "<s>a", 0, (int32_t[]){1, 266}, 2));           /* added token, then "▁a" */
    CHECK(ids_are(t, "", 1, (int32_t[]){1}, 1));

    CHECK(decodes_to(t, (int32_t[]){1, 259, 265}, 3, 0, "<s> abc"));
    CHECK(decodes_to(t, (int32_t[]){1, 259, 265}, 3, 1, "abc"));
    CHECK(decodes_to(t, (int32_t[]){3 + 0xC3}, 1, 0, "\xEF\xBF\xBD"));
    CHECK(decodes_to(t, (int32_t[]){259, 265, 3 + 0xC3, 3 + 0xBC}, 4, 0, "abc\xC3\xBC"));
    CHECK(decodes_to(t, (int32_t[]){99999, -1, 260}, 3, 0, "a"));     /* unknown ids are skipped */

    int32_t s1[] = {259, 265, 3 + 0xC3, 3 + 0xBC, 259, 3 + 0xE2, 3 + 0x82, 259, 260, 1, 3 + 0xF0};
    for (int n = 0; n <= (int)(sizeof s1 / sizeof s1[0]); n++) {
        CHECK(stream_matches(t, s1, n, 0));
        CHECK(stream_matches(t, s1, n, 1));
    }
    /* A held byte run is not emitted early. */
    tern_detok *d;
    char *delta;
    CHECK(tern_detok_create(t, 0, &d) == TERN_OK);
    CHECK(tern_detok_push(d, 259, &delta) == TERN_OK && !strcmp(delta, ""));
    free(delta);
    CHECK(tern_detok_push(d, 265, &delta) == TERN_OK && !strcmp(delta, "abc"));
    free(delta);
    CHECK(tern_detok_push(d, 3 + 0xC3, &delta) == TERN_OK && !strcmp(delta, ""));
    free(delta);
    CHECK(tern_detok_push(d, 3 + 0xBC, &delta) == TERN_OK && !strcmp(delta, ""));
    free(delta);
    CHECK(tern_detok_push(d, 259, &delta) == TERN_OK && !strcmp(delta, "\xC3\xBC "));
    free(delta);
    CHECK(tern_detok_flush(d, &delta) == TERN_OK && !strcmp(delta, ""));
    free(delta);
    tern_detok_free(d);

    CHECK(tern_tokenizer_vocab_size(t) == 270);
    CHECK(!strcmp(tern_tokenizer_id_to_piece(t, 265), "abc"));
    CHECK(tern_tokenizer_id_to_piece(t, 270) == NULL);
    CHECK(tern_tokenizer_piece_to_id(t, "\xE2\x96\x81" "a") == 266);
    CHECK(tern_tokenizer_piece_to_id(t, "zzz") == -1);
    CHECK(tern_tokenizer_is_special(t, 1) && !tern_tokenizer_is_special(t, 260));
    CHECK(tern_tokenizer_bos_id(t) == 1 && tern_tokenizer_eos_id(t) == 2);
    CHECK(!strcmp(tern_tokenizer_bos_token(t), "<s>") && !strcmp(tern_tokenizer_eos_token(t), "</s>"));
    CHECK(tern_tokenizer_add_bos_token(t) == 1);
    int32_t *ids;
    int n;
    CHECK(tern_tokenizer_encode(t, "\xC3", 1, 0, &ids, &n) == TERN_E_INVALID);  /* invalid UTF-8 */
    tern_tokenizer_free(t);
}

static int norm_is(int type, const char *in, const char *want)
{
    tok_norm nm = {0};
    nm.type = type;
    tok_buf out = {0};
    int ok = !tok_norm_apply(&nm, in, strlen(in), &out) && out.len == strlen(want) && !memcmp(out.p, want, out.len);
    if (!ok) fprintf(stderr, "normalizer %d on '%s': got '%.*s'\n", type, in, (int)out.len, out.p ? out.p : "");
    free(out.p);
    return ok;
}

static void test_normalizers(void)
{
    CHECK(norm_is(NORM_NFC, "e\xCC\x81", "\xC3\xA9"));                 /* e + acute -> é */
    CHECK(norm_is(NORM_NFD, "\xC3\xA9", "e\xCC\x81"));
    CHECK(norm_is(NORM_NFKC, "\xEF\xAC\x81", "fi"));                   /* ligature */
    CHECK(norm_is(NORM_NFKD, "\xE2\x91\xA0", "1"));                    /* circled one */
    CHECK(norm_is(NORM_LOWER, "AB\xC3\x89\xC4\xB0", "ab\xC3\xA9i\xCC\x87")); /* İ -> i + dot */
    CHECK(norm_is(NORM_NFC, "", ""));
    /* U+07FD postdates the reference's tables: kept in place, not reordered. */
    CHECK(norm_is(NORM_NFC, "\xDF\x8C\xDF\xB1\xDF\xBD", "\xDF\x8C\xDF\xB1\xDF\xBD"));
    tok_norm st = {.type = NORM_STRIP, .left = 1, .right = 1};
    tok_buf out = {0};
    CHECK(!tok_norm_apply(&st, " \t a b \xE3\x80\x80", 10, &out) && out.len == 3 && !memcmp(out.p, "a b", 3));
    tok_norm rp = {.type = NORM_REPLACE, .a = "ab", .alen = 2, .b = "X", .blen = 1};
    CHECK(!tok_norm_apply(&rp, "abcabab", 7, &out) && out.len == 4 && !memcmp(out.p, "XcXX", 4));
    tok_norm pp = {.type = NORM_PREPEND, .a = "_", .alen = 1};
    CHECK(!tok_norm_apply(&pp, "", 0, &out) && out.len == 0);          /* nothing prepended to "" */
    CHECK(!tok_norm_apply(&pp, "x", 1, &out) && out.len == 2 && !memcmp(out.p, "_x", 2));
    free(out.p);
}

static void test_regex_split(void)
{
    const char *pat = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    pcre2_code *re = tok_regex_compile(pat, strlen(pat));
    CHECK(re != NULL);
    if (!re) return;
    const char *s = "He'S  12 caf\xC3\xA9!!\n\n  x\xE1\xA0\x8Ey";
    const char *want[] = {"He", "'S", " ", " ", "1", "2", " caf\xC3\xA9", "!!\n\n", " ", " x", "\xE1\xA0\x8Ey"};
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t pos = 0, ms, me;
    int k = 0, r;
    while ((r = tok_regex_next(re, s, strlen(s), &pos, &ms, &me, md)) > 0) {
        CHECK_MSG(k < 11 && me - ms == strlen(want[k]) && !memcmp(s + ms, want[k], me - ms),
                  "piece %d: '%.*s'", k, (int)(me - ms), s + ms);
        k++;
    }
    CHECK(r == 0 && k == 11);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    CHECK(tok_regex_compile("(unclosed", 9) == NULL && strstr(tern_last_error(), "regex"));
}

static void test_lossy(void)
{
    tok_buf b = {0};
    /* E0 80: E0 needs A0..BF next, so each byte is its own U+FFFD; F0 9F 98 is one truncated sequence. */
    CHECK(!tok_utf8_lossy(&b, "a\xE0\x80" "b\xF0\x9F\x98", 7));
    CHECK(b.len == 1 + 6 + 1 + 3 && !memcmp(b.p, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD", b.len));
    free(b.p);
    CHECK(tok_utf8_valid("\xF4\x8F\xBF\xBF", 4) && !tok_utf8_valid("\xF4\x90\x80\x80", 4));
    CHECK(!tok_utf8_valid("\xED\xA0\x80", 3));                         /* surrogate */
}

/* A loaded tokenizer is shared read-only by threads. */
typedef struct { const tern_tokenizer *t; int ok; } thread_arg;

static void *encode_many(void *p)
{
    thread_arg *a = p;
    a->ok = 1;
    for (int r = 0; r < 200 && a->ok; r++) {
        a->ok = ids_are(a->t, "abc aaa x \xC3\xBC", 1,
                        (int32_t[]){1, 259, 265, 266, 269, 259, 123, 259, 3 + 0xC3, 3 + 0xBC}, 10);
        char *s = NULL;
        a->ok = a->ok && !tern_tokenizer_decode(a->t, (int32_t[]){259, 265}, 2, 0, &s) && !strcmp(s, "abc");
        free(s);
    }
    return NULL;
}

static void test_threads(void)
{
    tern_tokenizer *t = NULL;
    if (tern_tokenizer_load(HANDMADE, &t)) return;
    pthread_t th[4];
    thread_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (thread_arg){t, 0};
        pthread_create(&th[i], NULL, encode_many, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(a[i].ok);
    }
    tern_tokenizer_free(t);
}

static void test_real(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/qwen3", check_shared_dir());
    tern_tokenizer *t = NULL;
    if (tern_tokenizer_load(dir, &t)) { fprintf(stderr, "skipping real tokenizers: %s\n", tern_last_error()); return; }
    CHECK(ids_are(t, "Hello world", 1, (int32_t[]){9707, 1879}, 2));
    CHECK(tern_tokenizer_eos_id(t) == 151645 && tern_tokenizer_bos_id(t) == -1);
    CHECK(decodes_to(t, (int32_t[]){151644, 9707}, 2, 0, "<|im_start|>Hello"));
    tern_tokenizer_free(t);
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/gemma3", check_shared_dir());
    CHECK(tern_tokenizer_load(dir, &t) == TERN_OK);
    if (!t) return;
    CHECK(ids_are(t, "Hello world", 1, (int32_t[]){2, 9259, 1902}, 3));
    CHECK(tern_tokenizer_bos_id(t) == 2 && tern_tokenizer_eos_id(t) == 106);
    tern_tokenizer_free(t);
}

int main(void)
{
    test_handmade();
    test_normalizers();
    test_regex_split();
    test_lossy();
    test_threads();
    test_real();
    return check_summary("tokenizer");
}

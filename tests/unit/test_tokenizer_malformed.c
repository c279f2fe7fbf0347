/* Malformed tokenizer.json: every refusal is a clear error, never a crash.
 * Hand-written broken documents, unsupported components (refused by name),
 * every truncation of a valid file and seeded random byte mutations. */
#include "check.h"
#include "tern/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void write_file(const char *name, const char *data, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

/* Loads data as tokenizer.json; returns the status, copies the message. */
static tern_status try_load(const char *data, size_t len, char *msg, size_t cap)
{
    write_file("tokenizer.json", data, len);
    tern_tokenizer *t = NULL;
    tern_status st = tern_tokenizer_load(dir, &t);
    if (msg) snprintf(msg, cap, "%s", st ? tern_last_error() : "");
    if (!st) {
        /* Whatever loaded must also encode and decode without crashing. */
        int32_t *ids = NULL;
        int n = 0;
        if (!tern_tokenizer_encode(t, "Hello, world 123 \xC3\xA9\xF0\x9F\x98\x80", 21, 1, &ids, &n)) {
            char *s = NULL;
            if (!tern_tokenizer_decode(t, ids, n, 0, &s)) free(s);
            free(ids);
        }
        tern_tokenizer_free(t);
    }
    return st;
}

static int refused_with(const char *doc, tern_status want, const char *needle)
{
    char msg[1024];
    tern_status st = try_load(doc, strlen(doc), msg, sizeof msg);
    int ok = st == want && strstr(msg, needle);
    if (!ok) fprintf(stderr, "doc %.60s...: status %d, message '%s'\n", doc, st, msg);
    return ok;
}

#define MODEL "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}"

static void test_documents(void)
{
    CHECK(refused_with("", TERN_E_FORMAT, "empty"));
    CHECK(refused_with("{", TERN_E_FORMAT, "tokenizer.json"));
    CHECK(refused_with("[]", TERN_E_FORMAT, "not an object"));
    CHECK(refused_with("{}", TERN_E_FORMAT, "'model' is missing"));
    CHECK(refused_with("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", TERN_E_UNSUPPORTED,
                       "model type 'WordPiece' is not supported"));
    CHECK(refused_with("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", TERN_E_UNSUPPORTED,
                       "model type 'Unigram' is not supported"));
    CHECK(refused_with("{" MODEL ", \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}", TERN_E_UNSUPPORTED,
                       "pre_tokenizer type 'BertPreTokenizer' is not supported"));
    CHECK(refused_with("{" MODEL ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"\"}}",
                       TERN_E_UNSUPPORTED, "normalizer type 'Precompiled' is not supported"));
    CHECK(refused_with("{" MODEL ", \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                       "{\"type\": \"BertNormalizer\"}]}}", TERN_E_UNSUPPORTED, "normalizer type 'BertNormalizer'"));
    CHECK(refused_with("{" MODEL ", \"decoder\": {\"type\": \"WordPiece\"}}", TERN_E_UNSUPPORTED,
                       "decoder type 'WordPiece' is not supported"));
    CHECK(refused_with("{" MODEL ", \"post_processor\": {\"type\": \"Foo\"}}", TERN_E_UNSUPPORTED,
                       "post_processor type 'Foo' is not supported"));
    CHECK(refused_with("{" MODEL ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, "
                       "\"behavior\": \"Isolated\"}}", TERN_E_UNSUPPORTED, "regex"));
    CHECK(refused_with("{" MODEL ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                       "\"behavior\": \"Sideways\"}}", TERN_E_FORMAT, "behavior"));
    CHECK(refused_with("{" MODEL ", \"truncation\": {\"max_length\": 5}}", TERN_E_UNSUPPORTED, "truncation"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}",
                       TERN_E_FORMAT, "missing from model.vocab"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
                       TERN_E_FORMAT, "result 'ab' is missing"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
                       TERN_E_FORMAT, "not a token id"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}",
                       TERN_E_FORMAT, "is not 'a b'"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\\ud800\": 0}, \"merges\": []}}",
                       TERN_E_FORMAT, "surrogate"));
    CHECK(refused_with("{" MODEL ", \"added_tokens\": [{\"id\": -4, \"content\": \"x\"}]}", TERN_E_FORMAT,
                       "added_tokens[0]"));
    CHECK(refused_with("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}, \"merges\": []}}",
                       TERN_E_RANGE, "too large"));
    /* A valid minimal document loads. */
    CHECK(try_load("{" MODEL "}", strlen("{" MODEL "}"), NULL, 0) == TERN_OK);
    /* Missing directory. */
    tern_tokenizer *t = NULL;
    CHECK(tern_tokenizer_load("/nonexistent/dir", &t) == TERN_E_IO && strstr(tern_last_error(), "cannot open"));
}

static void test_fuzz(void)
{
    FILE *f = fopen("tests/goldens/tokenizer/handmade/tokenizer.json", "rb");
    CHECK(f != NULL);
    if (!f) return;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int ok = 0;
    for (size_t k = 0; k < n; k += 3)
        if (try_load(buf, k, NULL, 0) == TERN_OK) ok++;
    CHECK(ok <= 2);  /* only (nearly) complete documents load */
    CHECK(try_load(buf, n, NULL, 0) == TERN_OK);
    unsigned seed = 12345;
    static char mut[1 << 16];
    const char pool[] = "{}[]\":,\\ 0-9aeu\x80\xff";
    for (int r = 0; r < 400; r++) {
        memcpy(mut, buf, n);
        for (int k = 0; k < 1 + r % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            mut[at] = pool[(seed >> 8) % (sizeof pool - 1)];
        }
        try_load(mut, n, NULL, 0);
    }
    CHECK(1);
}

/* A pipeline that grows text without bound (a chain of ByteLevel steps, each
 * doubling it; Replace steps multiplying it) is refused when it does, with an
 * error that says so, instead of running for minutes. */
static tern_status encode_doc(const char *doc, const char *text)
{
    tern_tokenizer *t = NULL;
    tern_status st = tern_tokenizer_load_json(doc, strlen(doc), &t);
    if (st) return st;
    int32_t *ids = NULL;
    int n = 0;
    st = tern_tokenizer_encode(t, text, strlen(text), 0, &ids, &n);
    if (!st) free(ids);
    tern_tokenizer_free(t);
    return st;
}

static void test_growth(void)
{
    char doc[4096];
    int k = snprintf(doc, sizeof doc, "{" MODEL ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [");
    for (int i = 0; i < 12; i++)
        k += snprintf(doc + k, sizeof doc - (size_t)k, "%s{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                      "\"use_regex\": false}", i ? ", " : "");
    snprintf(doc + k, sizeof doc - (size_t)k, "]}}");
    const char *text = "\xC3\xA9t\xC3\xA9 caf\xC3\xA9 \xF0\x9F\x98\x80 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\xBC\xC3\xBC\xC3\xBC";
    CHECK(encode_doc(doc, text) == TERN_E_RANGE && strstr(tern_last_error(), "pre-tokenizer grows"));
    k = snprintf(doc, sizeof doc, "{" MODEL ", \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [");
    for (int i = 0; i < 8; i++)
        k += snprintf(doc + k, sizeof doc - (size_t)k, "%s{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                      "\"content\": \"          \"}", i ? ", " : "");
    snprintf(doc + k, sizeof doc - (size_t)k, "]}}");
    CHECK(encode_doc(doc, "a b c d e f g h") == TERN_E_RANGE && strstr(tern_last_error(), "normalizer grows"));
    /* One ByteLevel step, or one Replace, stays well inside the bound. */
    snprintf(doc, sizeof doc, "{" MODEL ", \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
             "\"content\": \"          \"}}");
    tern_status st = encode_doc(doc, "a b c d e f g h");
    CHECK(st != TERN_E_RANGE);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tern-tok-XXXXXX");
    if (!mkdtemp(dir)) return 77;
    test_documents();
    test_growth();
    test_fuzz();
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
    return check_summary("tokenizer_malformed");
}
